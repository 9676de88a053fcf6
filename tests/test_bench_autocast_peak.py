"""bench's predicted peak of a bf16 training step (fp32 weights under torch.autocast, fused
AdamW: archspec/bench/autocast_peak.py) against the step itself, byte for byte.

The step is bench's own (`steps.prepare`, `steps.make_step`: autocast, cross-entropy over
`logits.float()`, backward, fused AdamW, `zero_grad(set_to_none=True)`) on the generated model,
measured as bench measures a CPU step: `LiveTensors` over the second step, on top of the
weights, AdamW's state and the inputs. Fused AdamW is the kernel bench runs on CUDA too.
The CPU runs SDPA's fused kernel when attention has no dropout, so gpt2 runs without it.

At these sizes, as at bench's GPU sizes, the step peaks in the loss's backward: every kept
activation (the residual stream fp32, each Linear's bf16 copy of its input, autocast's bf16
copy of every matmul weight) and the three fp32 B·S·vocab tensors of the loss.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import torch

from archspec.bench import memory, steps
from archspec.bench.analysis import predict
from archspec.bench.runner import _generated_model
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec

SIZES = ["n_layers=2", "d_model=64", "n_heads=4", "vocab_size=1024", "max_seq_len=64"]
CASES = [
    ("llama-2-7b", [*SIZES, "n_kv_heads=2", "d_ff=160"]),  # RMSNorm, RoPE, gated MLP, GQA
    ("gpt2", [*SIZES, "d_ff=256", "dropout.attention=0"]),  # LayerNorm, tied head, dropout
    # experts in fp32, stacked (one block, four experts: a few hundred small matmuls)
    ("mixtral-8x7b", [*SIZES, "n_layers=1", "n_kv_heads=2", "d_ff=128", "moe.n_experts=4"]),
]


def bench_step_peak(ir, batch: int, seq: int) -> int:
    device = torch.device("cpu")
    inputs, targets = steps.make_inputs(ir, "train", batch, seq, device, seed=0)
    with tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(0)
        side = steps.Side("ours", _generated_model(ir, device, folder), inputs, targets)
        steps.prepare(side, "train", device, "bf16")
        assert side.optimizer.defaults["fused"]  # the kernel bench's CUDA runs use
        vocab = ir.value(ir.root.vocab_size)
        step = steps.make_step(side, "train", device, "bf16", vocab, new_tokens=0)
        step()  # AdamW's state now exists, as after bench's warm-up
        resident = memory.resident_tensors(side.model, side.optimizer, inputs, targets)
        with memory.LiveTensors(resident) as tracker:
            step()
    return tracker.peak


@pytest.mark.parametrize("name, sets", CASES)
def test_bf16_training_peak_is_exact(name, sets) -> None:
    ir = build_ir(load_spec(name, sets))
    measured = bench_step_peak(ir, batch=2, seq=64)
    predicted = predict(ir, "train", 2, 64, "bf16", 0, device="cpu").memory_bytes
    assert measured == predicted


def _header(relative: str) -> str:
    path = Path(torch.__file__).parent / "include" / relative
    if not path.exists():
        pytest.skip(f"this torch ships without its headers ({relative})")
    return path.read_text()


def _macro(text: str, name: str) -> set[str]:
    """The op names a `#define NAME(_)` list of autocast_mode.h holds."""
    body = text.split(f"#define {name}(_)", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"_\((\w+)", body))


def test_cuda_autocast_lists_are_the_counters():
    """What the counter assumes of CUDA's autocast, read from the installed torch's own
    lists (ATen/autocast_mode.h, the CUDA ones): matmuls and SDPA in the low dtype, norms,
    log_softmax and nll_loss in fp32; embedding, gelu, silu, dropout and mul in neither (they
    keep their input's dtype)."""
    text = _header("ATen/autocast_mode.h")
    low = _macro(text, "AT_FORALL_LOWER_PRECISION_FP")
    # log_softmax: fp32, or the dtype asked for (none here)
    fp32 = _macro(text, "AT_FORALL_FP32") | _macro(text, "AT_FORALL_FP32_SET_OPT_DTYPE")
    assert {"linear", "matmul", "addmm", "mm", "scaled_dot_product_attention"} <= low
    assert {"layer_norm", "rms_norm", "log_softmax", "nll_loss"} <= fp32
    untouched = {"embedding", "gelu", "silu", "dropout", "native_dropout", "mul", "add"}
    assert not untouched & (low | fp32 | _macro(text, "AT_FORALL_PROMOTE"))


def test_fused_rms_norm_keeps_no_normalised_input():
    """On a GPU rms_norm runs _fused_rms_norm (fp32 input and weight under autocast), whose
    backward node saves the input, the weight and 1/rms (result1) alone."""
    text = _header("torch/csrc/autograd/generated/Functions.h")
    node = text.split("struct TORCH_API FusedRmsNormBackward0", 1)[1].split("};", 1)[0]
    assert set(re.findall(r"SavedVariable (\w+);", node)) == {"input_", "weight_", "result1_"}


# Real vocabularies and wider layers: the same terms at a size where each is megabytes.
WIDE = [
    ("llama-2-7b", ["n_layers=4", "d_model=512", "n_heads=8", "n_kv_heads=2", "d_ff=1376"], 1),
    ("gpt2", ["n_layers=4", "d_model=512", "n_heads=8", "d_ff=2048", "dropout.attention=0"], 2),
]


@pytest.mark.long
@pytest.mark.parametrize("name, sets, batch", WIDE)
def test_bf16_training_peak_is_exact_with_real_vocabularies(name, sets, batch) -> None:
    ir = build_ir(load_spec(name, [*sets, "max_seq_len=512"]))
    seq = 512 // batch
    measured = bench_step_peak(ir, batch, seq)
    assert measured == predict(ir, "train", batch, seq, "bf16", 0, device="cpu").memory_bytes
