"""The recipe's example: a combination refused before, GPT-J's interleaved rotation with
linear scaling, added as one code class, one catalogue entry and one line in its scaling's
record. Its tables are transformers' linear-scaling frequencies on interleaved pairs, and the
generated model rotates as GPT-J does at those angles."""

from __future__ import annotations

import pytest
import torch

from archspec import load_spec
from archspec.backends.torchgen import generate_source, load_generated
from archspec.ir.build import build_ir

rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
from transformers import GPTJConfig  # noqa: E402

ROTATED, FACTOR = 8, 4.0
SMALL = ["d_model=64", "n_heads=4", "n_layers=1", "d_ff=128", "vocab_size=100", "max_seq_len=32"]
SMALL += [f"position.rotary_dim={ROTATED}"]


def test_flat_and_tagged_forms_name_the_new_entry() -> None:
    flat = load_spec("gpt-j-6b", [*SMALL, "position.scaling=linear", f"position.factor={FACTOR}"])
    tagged = load_spec("gpt-j-6b", [*SMALL, f"position.scaling={{type: linear, factor: {FACTOR}}}"])
    assert flat.position == tagged.position
    assert flat.position.entry.name == "rope_linear_interleaved"


def test_tables_and_rotation_are_gptjs_at_linearly_scaled_positions() -> None:
    overrides = ["position.scaling=linear", f"position.factor={FACTOR}"]
    spec = load_spec("gpt-j-6b", [*SMALL, *overrides])
    module = load_generated(generate_source(build_ir(spec)))
    model = module.Model(module.Config())
    stack = model.stack if hasattr(model, "stack") else model.decoder
    config = GPTJConfig(
        n_embd=64, n_head=4, rotary_dim=ROTATED, n_positions=32,
        rope_parameters={"rope_type": "linear", "factor": FACTOR, "rope_theta": 10000.0},
    )  # fmt: skip
    config.head_dim = ROTATED  # the channels the frequencies are for
    inv_freq, _ = rope_utils.ROPE_INIT_FUNCTIONS["linear"](config, None)
    angles = torch.arange(32).float()[:, None] * inv_freq
    torch.testing.assert_close(stack.rope_cos, angles.cos().repeat_interleave(2, dim=-1))
    torch.testing.assert_close(stack.rope_sin, angles.sin().repeat_interleave(2, dim=-1))
    # The rotation of the first ROTATED channels, as GPT-J's apply_rotary_pos_emb.
    x = torch.randn(1, 4, 32, 16)
    rope = (stack.rope_cos[None, None], stack.rope_sin[None, None])
    ours = module.apply_partially(module.apply_interleaved_rope, x, rope)
    turned = gptj.apply_rotary_pos_emb(
        x.transpose(1, 2)[..., :ROTATED], angles.sin()[None], angles.cos()[None]
    ).transpose(1, 2)
    torch.testing.assert_close(ours, torch.cat([turned, x[..., ROTATED:]], dim=-1))
