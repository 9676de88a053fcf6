"""The rotation every RoPE entry runs: cos and sin tables built once per stack, queries and
keys turned by them, channel pairs (i, i + half) or GPT-J's interleaved (2i, 2i + 1). The
plain rope entries (`rope.py`) use these classes as they are; each scaling's code extends
them (usually overriding `table()` or `positions()`)."""

from __future__ import annotations

import copy

from archspec.kinds.positions.base import PositionCode, copied


def rope(*names: str) -> str:
    """The source of functions of `archspec.runtime.rope`, for the generated file."""
    return copied("rope", names)


# Every rope kind may rotate only the first channels of a head (GPT-NeoX, GPT-J, Phi).
ROTARY_DIM = ("rotary_dim", "rope_dim")

# The tables' comment, in a stack's __init__.
ROPE_TABLES = [
    "# cos and sin at every position, computed once: buffers follow the model's",
    "# device and dtype, and stay out of the state_dict (persistent=False).",
]


class Rotary(PositionCode):
    angles = ("rope", "tuple[Tensor, Tensor]")
    # The angle and rotation functions.
    angle_function = "rope_angles"
    apply = "apply_rope"
    # Only the first `rope_dim` channels of a head turn (a partial rotation).
    partial = False

    def configured(self, position):
        if position.rotary_dim is None:
            return self
        code = copy.copy(self)
        code.partial = True
        return code

    def config_fields(self, entry, values):
        # Rotating every channel needs no rope_dim in Config.
        return [f for spec, f in entry.parameters if spec != "rotary_dim" or self.partial]

    def helpers(self, causalities):
        partially = [rope("apply_partially")] if self.partial else []
        return [rope(self.angle_function, self.apply), rope("rope_at"), *partially]

    def positions(self) -> str:
        """The positions the table rows are computed at."""
        return "torch.arange(config.max_seq_len)"

    def table(self, width: str) -> list[str]:
        """Lines computing `cos, sin` for `positions`, over `width` rotated channels."""
        return [
            "theta = config.rope_theta",
            f"cos, sin = {self.angle_function}(positions, {width}, theta)",
        ]

    def init(self, ctx):
        width = "config.rope_dim" if self.partial else ctx.head_dim
        return [
            *ROPE_TABLES,
            f"positions = {self.positions()}",
            *self.table(width),
            'self.register_buffer("rope_cos", cos, persistent=False)',
            'self.register_buffer("rope_sin", sin, persistent=False)',
        ]

    def build_angles(self, ctx, positions):
        return f"rope_at(self.rope_cos, self.rope_sin, {positions}, x.dtype)"

    def buffer_elements(self, max_seq_len, rotated):
        return 2 * max_seq_len * rotated  # rope_cos and rope_sin

    def rotate(self, x):
        apply = self.apply
        return f"apply_partially({apply}, {x}, rope)" if self.partial else f"{apply}({x}, rope)"


class InterleavedRotary(Rotary):
    """GPT-J's rotation: pairs of neighbouring channels (rotate_every_two)."""

    angle_function = "interleaved_rope_angles"
    apply = "apply_interleaved_rope"
