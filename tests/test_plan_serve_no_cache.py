"""`plan --mode serve` for a generate loop that never hands the model its KV cache.

transformers' generate passes the cache to `prepare_inputs_for_generation` as
`past_key_values`; Falcon's Hub code (modelling_RW.py) took it as `past`, so the model never got
it and every step ran a forward over the whole sequence, every position's logits included
(huggingface/transformers#24701). TinyChat's FP16 Falcon-7B figure ran that way
(published_serving.yaml). Here the step is checked against transformers' own Falcon run the
same way (`use_cache=False`), FLOPs by FlopCounterMode.
"""

from __future__ import annotations

import pytest
import sympy as sp

from archspec.backends.count.passes import KV_LEN, S_DEC, B, S
from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir
from archspec.plan.opcost import pass_costs
from archspec.plan.serve import serve_parts
from archspec.plan.serve_engine import serving_system
from archspec.plan.serve_validation import load_dataset

PROMPT, NEW = 20, 9  # the mean step runs over 20 + 5 positions
POSITIONS = PROMPT + (NEW + 1) // 2


def tiny_falcon():
    """transformers' Falcon with Falcon-7B's layout (multi-query, parallel attention), tiny."""
    import transformers

    config = transformers.FalconConfig(
        vocab_size=99, hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
        multi_query=True, parallel_attn=True, new_decoder_architecture=False,
    )  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    data = {**config.to_dict(), "architectures": [type(model).__name__]}
    return model, build_ir(import_config(data).spec)


def test_a_step_without_the_cache_is_transformers_forward_over_the_whole_sequence() -> None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model, ir = tiny_falcon()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, POSITIONS, dtype=torch.long), use_cache=False)
    counted = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    costs = pass_costs(ir, 2, "flash")
    values = {B: 1, S: POSITIONS, S_DEC: POSITIONS, KV_LEN: POSITIONS}
    runs = [(1, costs.before), *costs.layers, (1, costs.after)]
    matmuls = [(c.label, n * sp.sympify(c.flops).xreplace(values))
               for n, each in runs for c in each if c.kind == "matmul"]  # fmt: skip
    # The projections, the MLP and the head at every position: transformers' aten.mm exactly.
    assert sum(f for label, f in matmuls if label != "attention.flash") == counted["aten.mm"]
    # Its attention's bmm over the whole square; a causal flash kernel does the lower half.
    attention = sum(f for label, f in matmuls if label == "attention.flash")
    assert counted["aten.bmm"] / 2 < attention < counted["aten.bmm"]


def test_the_step_is_the_prefill_of_the_sequence_so_far_with_every_positions_logits() -> None:
    # serve_parts' mean step without the cache: the prefill of PROMPT + (NEW+1)//2 positions,
    # but its final norm and head at every position (a prefill's run at the last one only).
    _, ir = tiny_falcon()
    gpu = serving_system("rtx-4090")
    recompute = serve_parts(ir, gpu, 1, PROMPT, NEW, kv_cache=False).decode
    prefill = serve_parts(ir, gpu, 1, POSITIONS, 1).prefill
    cached = serve_parts(ir, gpu, 1, PROMPT, NEW).decode
    assert recompute.layers == prefill.layers == cached.layers
    after = len([c for c in pass_costs(ir, 2, "flash").after if c.label != "loss"])
    assert recompute.ops[:-after] == prefill.ops[:-after]
    for mine, theirs in zip(recompute.ops[-after:], prefill.ops[-after:], strict=True):
        assert mine[1] > theirs[1]  # compute seconds over 25 positions, not 1


def test_an_encoder_decoder_without_the_cache_is_refused() -> None:
    from archspec.cli.common import compile_spec

    with pytest.raises(SpecError, match="encoder-decoder"):
        serve_parts(compile_spec("t5-small", None), serving_system("rtx-4090"), 1, 8, 4,
                    kv_cache=False)  # fmt: skip


def test_only_the_figure_whose_source_ran_without_the_cache_is_marked() -> None:
    sources, figures = load_dataset()
    marked = [f for f in figures if not f.kv_cache]
    assert [(f.source, f.model, f.precision) for f in marked] == [
        ("tinychat", "falcon-7b", "fp16")]  # fmt: skip
    assert "transformers#24701" in sources["tinychat"]["setting"]


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("falcon-7b", ["--kv-dtype", "fp8"], "--kv-dtype fp8 is the KV cache's dtype"),
        ("falcon-7b", ["--rate", "1"], "continuous batching"),
        ("falcon-7b", ["--draft", "falcon-7b", "--accept", "0.7"], "speculative decoding"),
        ("t5-small", [], "--no-kv-cache: t5-small is an encoder-decoder"),
    ],
)
def test_what_needs_a_cache_is_refused_without_one(spec, options, message) -> None:
    from typer.testing import CliRunner

    from archspec.cli import app

    args = ["plan", spec, "--mode", "serve", "--gpu", "rtx-4090", "--no-kv-cache", *options]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_without_the_cache_the_command_keeps_none() -> None:
    import json

    from typer.testing import CliRunner

    from archspec.cli import app

    args = ["plan", "falcon-7b", "--mode", "serve", "--gpu", "rtx-4090", "--json"]
    cached, uncached = (json.loads(CliRunner().invoke(app, args + extra).stdout)
                        for extra in ([], ["--no-kv-cache"]))  # fmt: skip
    assert (cached["kv_cache"], uncached["kv_cache"]) == (True, False)
    assert cached["memory"]["kv_cache"] > 0 == uncached["memory"]["kv_cache"]
    assert uncached["memory"]["weights"] == cached["memory"]["weights"]
    # The prefill is the same forward; each step without the cache is a forward over the
    # whole sequence so far (512 + 64 positions), longer than the prefill over 512.
    assert uncached["prefill_s"] == cached["prefill_s"]
    assert uncached["decode_token_s"] > uncached["prefill_s"] > cached["decode_token_s"]
