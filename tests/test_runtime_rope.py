"""The rotary tables and rotations of archspec.runtime.rope against transformers' own:
each scaling's frequencies from `ROPE_INIT_FUNCTIONS` (the default from Phi's rotary
embedding), the rotations from Llama's and GPT-J's modeling code; and the generated files
hold these functions byte for byte."""

from __future__ import annotations

import pytest
import torch

from archspec.backends.torchgen import generate_source
from archspec.backends.torchgen.copied import source_of
from archspec.ir.build import build_ir
from archspec.kinds.positions.rope_yarn import YarnScaling
from archspec.runtime import rope
from archspec.spec.resolve import load_spec

rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
llama = pytest.importorskip("transformers.models.llama.modeling_llama")
gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
phi = pytest.importorskip("transformers.models.phi.modeling_phi")
from transformers import LlamaConfig  # noqa: E402

HEAD_DIM, THETA, LENGTH = 32, 10000.0, 64
POSITIONS = torch.arange(LENGTH)


def hf_tables(rope_parameters: dict, seq_len: int | None = None, **config):
    """transformers' cos and sin at POSITIONS, as its rotary embedding's forward makes them,
    and the scale on them (its attention factor)."""
    config = LlamaConfig(
        hidden_size=HEAD_DIM * 4,
        num_attention_heads=4,
        max_position_embeddings=config.pop("max_position_embeddings", LENGTH),
        rope_parameters={"rope_theta": THETA, **rope_parameters},
        **config,
    )
    kind = rope_parameters["rope_type"]
    if kind == "default":
        # Phi's, which (unlike Llama's) reads partial_rotary_factor.
        compute = phi.PhiRotaryEmbedding.compute_default_rope_parameters
    else:
        compute = rope_utils.ROPE_INIT_FUNCTIONS[kind]
    inv_freq, scale = compute(config, seq_len=seq_len)
    angles = POSITIONS.float()[:, None] * inv_freq.float()
    angles = torch.cat([angles, angles], dim=-1)
    return (angles.cos() * scale, angles.sin() * scale), scale


def test_default_tables_equal_transformers() -> None:
    expected, _ = hf_tables({"rope_type": "default"})
    torch.testing.assert_close(rope.rope_angles(POSITIONS, HEAD_DIM, THETA), expected)


def test_linear_tables_are_the_default_at_positions_divided_by_the_factor() -> None:
    expected, _ = hf_tables({"rope_type": "linear", "factor": 4.0})
    torch.testing.assert_close(rope.rope_angles(POSITIONS / 4.0, HEAD_DIM, THETA), expected)


def test_llama3_tables_equal_transformers() -> None:
    settings = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    expected, _ = hf_tables(
        {"rope_type": "llama3", **settings, "original_max_position_embeddings": 16}
    )
    scaling = (8.0, 1.0, 4.0, 16)
    ours = rope.llama3_rope(POSITIONS, HEAD_DIM, THETA, scaling)
    torch.testing.assert_close(ours, expected)


# YaRN's settings: (head_dim, theta, rope_parameters beyond rope_type and rope_theta).
YARN = {
    # gpt-oss: head_dim 64 (not hidden 2880 / 64 heads), the ramp's ends unrounded (8.1, 17.4)
    "gpt-oss": (64, 150000.0, {"factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                               "truncate": False, "original_max_position_embeddings": 4096}),
    "gpt-oss-truncated": (64, 150000.0, {"factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                         "truncate": True,
                                         "original_max_position_embeddings": 4096}),
    # the ramp starting at channel 0 (beta_fast's end is negative), high at 1.6
    "short-context": (32, 10000.0, {"factor": 4.0, "original_max_position_embeddings": 16}),
    "short-context-unrounded": (32, 10000.0, {"factor": 4.0, "truncate": False,
                                              "original_max_position_embeddings": 16}),
    "scaled": (32, 10000.0, {"factor": 4.0, "attention_factor": 0.5,
                             "original_max_position_embeddings": 16}),
    # both ends inside, unrounded: low 20.4, high 30.0 of 64 pairs
    "wide": (128, 1e6, {"factor": 8.0, "beta_fast": 16.0, "beta_slow": 2.0, "truncate": False,
                        "original_max_position_embeddings": 8192}),
}  # fmt: skip


def hf_yarn(head_dim: int, theta: float, settings: dict):
    """transformers' YaRN rotary embedding of a Llama with heads of head_dim."""
    config = LlamaConfig(
        hidden_size=2880,
        num_attention_heads=64,
        head_dim=head_dim,
        max_position_embeddings=131072,
        rope_parameters={"rope_type": "yarn", "rope_theta": theta, **settings},
    )
    return llama.LlamaRotaryEmbedding(config)


def ours(settings: dict) -> tuple:
    """The yarn_rope settings the generated Config holds for them: the spec's record's."""
    record = YarnScaling(
        factor=settings["factor"],
        original_max_seq_len=settings["original_max_position_embeddings"],
        beta_fast=settings.get("beta_fast", 32.0),
        beta_slow=settings.get("beta_slow", 1.0),
        attention_factor=settings.get("attention_factor"),
        truncate=settings.get("truncate", True),
    )
    values = record.values()
    return tuple(
        values[name]
        for name in (
            "factor", "original_max_seq_len", "beta_fast", "beta_slow", "attention_factor",
            "truncate",
        )
    )  # fmt: skip


@pytest.mark.parametrize("name", list(YARN))
def test_yarn_frequencies_and_scale_equal_transformers(name: str) -> None:
    head_dim, theta, settings = YARN[name]
    hf = hf_yarn(head_dim, theta, settings)
    scaling = ours(settings)
    assert torch.equal(rope.yarn_inv_freq(head_dim, theta, scaling), hf.inv_freq)
    assert scaling[4] == hf.attention_scaling


@pytest.mark.parametrize("name", list(YARN))
def test_yarn_tables_equal_transformers(name: str) -> None:
    head_dim, theta, settings = YARN[name]
    positions = torch.tensor([0, 1, 7, 15, 16, 100, 4095, 4096, 32768, 131071])
    hf = hf_yarn(head_dim, theta, settings)
    expected = hf(torch.zeros(1), positions[None])
    cos, sin = rope.yarn_rope(positions, head_dim, theta, ours(settings))
    assert torch.equal(cos, expected[0][0]) and torch.equal(sin, expected[1][0])


def test_unrounded_ends_give_other_frequencies() -> None:
    """gpt-oss's truncate: false is not the rounded ramp (the test above tells them apart)."""
    head_dim, theta, settings = YARN["gpt-oss"]
    rounded = {**settings, "truncate": True}
    assert not torch.equal(
        rope.yarn_inv_freq(head_dim, theta, ours(settings)),
        rope.yarn_inv_freq(head_dim, theta, ours(rounded)),
    )


class _Stack(torch.nn.Module):
    """What ntk_rope_tables and longrope_tables read of a generated stack."""


@pytest.mark.parametrize("longest", [LENGTH, 2 * LENGTH])
def test_dynamic_tables_equal_transformers_for_the_longest_sequence(longest: int) -> None:
    original = 16
    stack = _Stack()
    stack.rope_settings = (HEAD_DIM, THETA, 4.0, original)
    stack.rope_length = original
    stack.rope_cos, stack.rope_sin = rope.rope_angles(torch.arange(original), HEAD_DIM, THETA)
    cos, sin = rope.ntk_rope_tables(stack, torch.arange(longest))
    expected, _ = hf_tables(
        {"rope_type": "dynamic", "factor": 4.0},
        seq_len=longest,
        max_position_embeddings=original,
    )
    torch.testing.assert_close((cos[:LENGTH], sin[:LENGTH]), expected)


@pytest.mark.parametrize("long", [False, True])
def test_longrope_tables_equal_transformers_and_are_picked_by_length(long: bool) -> None:
    short_factors = [1.0 + i / 16 for i in range(HEAD_DIM // 2)]
    long_factors = [2.0 + i / 4 for i in range(HEAD_DIM // 2)]
    original = 16
    settings = {
        "rope_type": "longrope",
        "short_factor": short_factors,
        "long_factor": long_factors,
        "original_max_position_embeddings": original,
    }
    # transformers builds the long context's table from the long factors only when asked
    # for a sequence longer than the original context; the scale is the same for both.
    expected, scale = hf_tables(settings, seq_len=LENGTH if long else original)
    stack = _Stack()
    stack.rope_original = original
    for name, factors in (("rope", short_factors), ("rope_long", long_factors)):
        cos, sin = rope.longrope_angles(POSITIONS, HEAD_DIM, THETA, factors, scale)
        setattr(stack, f"{name}_cos", cos)
        setattr(stack, f"{name}_sin", sin)
    sequence = torch.arange(LENGTH if long else original)
    torch.testing.assert_close(rope.longrope_tables(stack, sequence), expected)


def test_partial_rotation_equals_transformers() -> None:
    rotated = HEAD_DIM // 4
    expected, _ = hf_tables({"rope_type": "default", "partial_rotary_factor": 0.25})
    tables = rope.rope_angles(POSITIONS, rotated, THETA)
    torch.testing.assert_close(tables, expected)
    x = torch.randn(2, 4, LENGTH, HEAD_DIM)
    cos, sin = tables
    part = x[..., :rotated]
    turned, _ = llama.apply_rotary_pos_emb(part, part, cos[None], sin[None])
    ours = rope.apply_partially(rope.apply_rope, x, (cos, sin))
    torch.testing.assert_close(ours, torch.cat([turned, x[..., rotated:]], dim=-1))


def test_rotation_equals_llamas() -> None:
    x = torch.randn(2, 4, LENGTH, HEAD_DIM)
    cos, sin = rope.rope_angles(POSITIONS, HEAD_DIM, THETA)
    expected, _ = llama.apply_rotary_pos_emb(x, x, cos[None], sin[None])
    torch.testing.assert_close(rope.apply_rope(x, (cos, sin)), expected)


def test_rope_at_takes_rows_with_an_axis_for_heads() -> None:
    cos, sin = rope.rope_angles(POSITIONS, HEAD_DIM, THETA)
    rows = torch.tensor([[3, 1], [0, 5]])
    at_cos, at_sin = rope.rope_at(cos, sin, rows, torch.float16)
    assert at_cos.shape == (2, 1, 2, HEAD_DIM) and at_cos.dtype == torch.float16
    assert torch.equal(at_sin[1, 0, 1], sin[5].half())


@pytest.mark.parametrize("rotated", [HEAD_DIM, HEAD_DIM // 2])
def test_interleaved_rotation_equals_gptj(rotated: int) -> None:
    sincos = gptj.create_sinusoidal_positions(LENGTH, rotated)
    sin, cos = torch.split(sincos, rotated // 2, dim=-1)
    x = torch.randn(2, LENGTH, 4, HEAD_DIM)  # GPT-J rotates (B, S, heads, dim)
    turned = gptj.apply_rotary_pos_emb(x[..., :rotated], sin[None], cos[None])
    expected = torch.cat([turned, x[..., rotated:]], dim=-1).transpose(1, 2)
    tables = rope.interleaved_rope_angles(POSITIONS, rotated, THETA)
    ours = rope.apply_partially(rope.apply_interleaved_rope, x.transpose(1, 2), tables)
    torch.testing.assert_close(ours, expected)


# Each rope function, and a model whose generated file copies it.
COPIED = [
    ("llama-2-7b", [], [rope.rope_angles, rope.apply_rope, rope.rope_at]),
    ("gpt-j-6b", [], [rope.interleaved_rope_angles, rope.apply_interleaved_rope]),
    ("phi-2", [], [rope.apply_partially]),
    ("llama-3.1-8b", [], [rope.llama3_rope]),
    ("deepseek-v2-lite", [], [rope.yarn_inv_freq, rope.yarn_rope]),
    (
        "llama-2-7b",
        ["position.scaling=dynamic", "position.factor=2.0"],
        [rope.ntk_rope_tables],
    ),
    (
        "llama-2-7b",
        [
            "position.scaling=longrope",
            "position.original_max_seq_len=1024",
            f"position.short_factor={[1.0] * 64}",  # a factor per channel pair
            f"position.long_factor={[2.0] * 64}",
        ],
        [rope.longrope_angles, rope.longrope_tables],
    ),
]


@pytest.mark.parametrize("name, overrides, functions", COPIED)
def test_generated_files_copy_the_rope_functions_byte_for_byte(name, overrides, functions) -> None:
    source = generate_source(build_ir(load_spec(name, overrides)))
    for function in functions:
        assert source_of(function) in source
