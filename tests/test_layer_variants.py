"""Models whose layers differ, and kinds the backends have never seen.

Every distinct IR node is one generated class (`archspec.ir.classes`), so a model whose first
layers are dense, or whose blocks alternate between two MLPs, is generated, printed and counted
like any other: the generated file runs, `archspec print` equals `repr(model)`, and the
parameter count equals the model's. A kind registered in the catalogue alone (here a toy
activation) flows through the IR, the printer and the generated code with no backend edit.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from archspec import build_ir, load_spec
from archspec.backends.count.activations import activation_bytes
from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import S_DEC, B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr
from archspec.backends.torchgen import generate_source
from archspec.backends.torchgen.forward import ForwardWriter
from archspec.ir.classes import class_name, class_names
from archspec.ir.lower import lower_mlp
from archspec.ir.nodes import IR, MLP, Block, Run
from archspec.ir.ops import Value
from archspec.kinds import ACTIVATIONS, ActivationKind
from tests.test_memory import saved_bytes
from tests.tiny import built_model, tiny_sizes

TINY = tiny_sizes(d_model=64, d_ff=128, vocab_size=256, max_seq_len=32, n_layers=None)


def tiny_ir(name: str, overrides: list[str]) -> IR:
    return build_ir(load_spec(name, [*TINY, *overrides]))


def with_blocks(ir: IR, blocks: list[Block]) -> IR:
    """`ir` with its last stack's blocks replaced by one run per given block."""
    stack = ir.root.stacks[-1]
    runs = tuple(Run(sp.Integer(i), sp.Integer(1), block) for i, block in enumerate(blocks))
    new_stack = replace(stack, blocks=replace(stack.blocks, runs=runs))
    return replace(ir, root=replace(ir.root, stacks=(*ir.root.stacks[:-1], new_stack)))


def with_mlp(block: Block, change) -> Block:
    """`block` with its MLP replaced by `change(mlp)`."""
    last = block.sublayers[-1]
    assert isinstance(last.layer, MLP)
    return replace(
        block, sublayers=(*block.sublayers[:-1], replace(last, layer=change(last.layer)))
    )


def check(ir: IR, tmp_path: Path) -> torch.nn.Module:
    """Generate, lint, build and run the model of `ir`; compare its repr and parameter count
    with the printer and the counter. Returns the model."""
    source = generate_source(ir)
    path = tmp_path / "model.py"
    path.write_text(source)
    ruff = [shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"]
    rules = ["--select", "E,F,W,I,UP,B", "--target-version", "py310", "--line-length", "88"]
    lint = subprocess.run([*ruff, "check", "--isolated", *rules, str(path)], capture_output=True)
    assert lint.returncode == 0, lint.stdout.decode()
    model = built_model(ir, folder=tmp_path).eval()
    assert module_repr(ir) == repr(model)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in model.parameters())
    ids = torch.randint(ir.value(ir.root.vocab_size), (2, 6))
    args = [ids[:, :4]] if ir.root.layout == "encoder-decoder" else []
    with torch.no_grad():
        out = model(ids, *args)
    assert torch.isfinite(out).all()
    if hasattr(model, "generate"):  # an encoder-decoder's result begins with its start token
        new = 1 if ir.root.layout == "encoder-decoder" else 3
        assert model.generate(ids[:, :3], 3).shape == (2, new + 3)
    return model


def check_costs(ir: IR, model: torch.nn.Module, b: int = 2, seq: int = 16) -> None:
    """FLOPs and memory of a model whose layers differ, against torch: the executed
    convention's matmul FLOPs equal FlopCounterMode's (a forward in evaluation mode), and the
    predicted activations the tensors autograd keeps (training mode, the spec's dropout on),
    both on the math attention kernel."""
    vocab = ir.value(ir.root.vocab_size)
    ids = torch.randint(0, vocab, (b, seq))
    args = (ids, ids[:, : seq // 2]) if ir.root.layout == "encoder-decoder" else (ids,)
    values = {**ir.env, B: b, S: seq, S_DEC: seq // 2}
    f = flop_figures(ir, CONVENTIONS["executed"], attn="eager")
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model.eval()(*args)
    assert counter.get_total_flops() == f.forward_matmul.xreplace(values)

    def loss(logits):
        return F.cross_entropy(logits.flatten(0, 1), args[-1].flatten())

    with sdpa_kernel(SDPBackend.MATH):
        measured = saved_bytes(model.train(), args, loss)
    predicted = activation_bytes(ir, 4, "eager", device="cpu").xreplace(values)
    assert int(predicted) == pytest.approx(measured, rel=0.05)


def test_dense_first_layers(tmp_path: Path) -> None:
    ir = tiny_ir(
        "mixtral-8x7b", ["n_layers=3", "n_kv_heads=2", "moe.n_experts=4", "moe.dense_layers=1"]
    )
    model = check(ir, tmp_path)
    assert [type(b).__name__ for b in model.decoder.blocks] == [
        "DenseBlock",
        "MoEBlock",
        "MoEBlock",
    ]
    text = module_repr(ir)
    assert "\n      (0): DenseBlock(\n" in text and "\n      (1-2): 2 x MoEBlock(\n" in text
    check_costs(ir, model)


def test_dense_first_layers_in_both_stacks(tmp_path: Path) -> None:
    ir = tiny_ir("t5-small", ["n_layers=3", "moe.n_experts=4", "moe.top_k=2", "moe.dense_layers=1"])
    model = check(ir, tmp_path)
    for stack, role in ((model.encoder, "Encoder"), (model.decoder, "Decoder")):
        names = [type(b).__name__ for b in stack.blocks]
        assert names == [f"{role}DenseBlock", f"{role}MoEBlock", f"{role}MoEBlock"]
    check_costs(ir, model)


def test_alternating_activations(tmp_path: Path) -> None:
    ir = tiny_ir("gpt2", ["n_layers=1"])
    gelu = ir.root.stacks[0].blocks.runs[0].node
    silu = with_mlp(gelu, lambda mlp: replace(mlp, activation="silu"))
    ir = with_blocks(ir, [gelu, silu, gelu, silu])
    model = check(ir, tmp_path)
    names = class_names(ir.root)
    kinds = [class_name(names, gelu), class_name(names, silu)]
    assert [type(b).__name__ for b in model.decoder.blocks] == kinds * 2
    assert len({type(b.mlp).__name__ for b in model.decoder.blocks}) == 2
    # torch folds nothing: no two neighbours print alike.
    assert " x " not in module_repr(ir).split("(blocks)")[1].split("(final_norm)")[0]
    check_costs(ir, model)


def test_alternating_widths(tmp_path: Path) -> None:
    ir = tiny_ir("llama-2-7b", ["n_layers=1"])
    narrow = ir.root.stacks[0].blocks.runs[0].node

    def wider(mlp: MLP) -> MLP:
        return replace(
            mlp,
            gate=replace(mlp.gate, out_features=2 * mlp.gate.out_features),
            up=replace(mlp.up, out_features=2 * mlp.up.out_features),
            down=replace(mlp.down, in_features=2 * mlp.down.in_features),
        )

    wide = with_mlp(narrow, wider)
    ir = with_blocks(ir, [narrow, wide, narrow])
    model = check(ir, tmp_path)
    assert (
        model.decoder.blocks[1].mlp.up.out_features
        == 2 * model.decoder.blocks[0].mlp.up.out_features
    )
    check_costs(ir, model)


SQUARED_RELU = ActivationKind(
    "squared_relu", "ReLU²", "F.relu({}).square()", 2, "both", description="squared ReLU"
)


def test_a_new_activation_kind_flows_through_every_backend_without_an_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(ACTIVATIONS, SQUARED_RELU.name, SQUARED_RELU)
    spec = load_spec("gpt2", [*TINY, "n_layers=2"])
    spec = replace(spec, mlp=replace(spec.mlp, activation=SQUARED_RELU.name))
    ir = build_ir(spec)
    source = generate_source(ir)
    assert "return self.down(F.relu(self.up(x)).square())" in source
    assert "squared ReLU" in source  # the MLP's docstring
    model = check(ir, tmp_path)
    mlp = model.decoder.blocks[0].mlp
    x = torch.randn(2, 3, 64)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x), mlp.down(torch.relu(mlp.up(x)) ** 2))
    # FLOPs and memory need no edit either.
    check_costs(ir, model)
    values = {**ir.env, B: 2, S: 16}
    f = flop_figures(ir, CONVENTIONS["executed"])
    layers, hidden = 2, 128  # the kind's 2 FLOPs per hidden unit, in every layer
    assert f.components["activations"][1].xreplace(values) == layers * 2 * 2 * 16 * hidden


def test_forward_names_values_a_line_cannot_hold() -> None:
    """Inlining stops where a line would grow too long: the operands get statements."""
    mlp = tiny_ir("llama-2-7b", ["n_layers=1"]).root.stacks[0].blocks.runs[0].node.ff
    long = "projection_with_a_name_long_enough_to_overflow"
    mlp = replace(
        mlp,
        gate=replace(mlp.gate, name=f"gate_{long}"),
        up=replace(mlp.up, name=f"up_{long}"),
        down=replace(mlp.down, name=f"down_{long}"),
    )
    lines = ForwardWriter(lower_mlp(mlp, Value("x", "tokens", 64))).write()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines == [
        f"act = F.silu(self.gate_{long}(x))",
        f"up = self.up_{long}(x)",
        f"return self.down_{long}(act * up)",
    ]


def test_dropout_acts_in_training_only(tmp_path: Path) -> None:
    """The lowering's Dropout ops reach the generated code: with the same weights, a model
    with dropout equals one without in evaluation, and differs in training."""
    where = ["attention", "hidden", "mlp", "output"]
    plain = tiny_ir("t5-small", ["n_layers=2"])
    dropped = tiny_ir("t5-small", ["n_layers=2", *(f"dropout.{w}=0.2" for w in where)])
    models = []
    for ir in (plain, dropped):
        models.append(built_model(ir, folder=tmp_path))
    ids, dec = torch.randint(256, (2, 6)), torch.randint(256, (2, 4))
    with torch.no_grad():
        torch.testing.assert_close(models[0].eval()(ids, dec), models[1].eval()(ids, dec))
        assert not torch.allclose(models[0].train()(ids, dec), models[1].train()(ids, dec))
