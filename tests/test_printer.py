"""The module-tree printer against torch's own `print(model)`.

Three references: golden structure (T5's stacks own the relative bias, runs fold), a model
built here with torch from the IR by the code generator's contract (one class per distinct
node, named by archspec.ir.classes, Repeat -> ModuleList, IR names and order), and the
generated model itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import sympy as sp
import torch
from torch import nn
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr, module_tree
from archspec.backends.printer.leaves import layernorm_prints_bias, layernorm_source_prints_bias
from archspec.cli import app
from archspec.ir.classes import class_name, class_names
from archspec.ir.nodes import (
    IR,
    Block,
    Embedding,
    Linear,
    MoE,
    Node,
    Norm,
    Repeat,
    Router,
    Run,
    Sinks,
)
from archspec.spec.resolve import builtin_names
from tests.builtin_sizes import other_size
from tests.hostile import run_main, run_python
from tests.tiny import generated_module

runner = CliRunner()

SPECS = builtin_names()


def ir_of(name: str, overrides: list[str] | None = None) -> IR:
    return build_ir(load_spec(name, overrides))


# --- golden structure ------------------------------------------------------------------------


def test_t5_stacks_own_the_relative_bias_and_the_blocks_fold() -> None:
    text = module_repr(ir_of("t5-small"))
    encoder = text.split("(decoder): DecoderStack(")[0]
    assert "\n  (encoder): EncoderStack(\n    (rel_bias): Embedding(32, 8)\n" in encoder
    assert "\n      (0-5): 6 x EncoderBlock(\n" in encoder
    assert "\n      (0-5): 6 x DecoderBlock(\n" in text
    assert text.count("(rel_bias): Embedding(32, 8)") == 2  # the encoder's and the decoder's
    assert "(attn): BidirectionalAttention(" in encoder and "(attn): CausalAttention(" in text
    assert "(cross_attn): CrossAttention(" in text


def test_bert_blocks_fold_and_mixtral_experts_stack() -> None:
    bert = module_repr(ir_of("bert-base"))
    assert "\n      (0-11): 12 x Block(\n" in bert
    assert bert.startswith("Model(\n  (tok_emb): Embedding(30522, 768)\n")
    mixtral = module_repr(ir_of("mixtral-8x7b"))
    assert "\n      (0-31): 32 x Block(\n" in mixtral
    # The eight experts are one module, each projection's weights stacked.
    experts = "n_experts=8, in_features=4096, hidden_features=14336, gated=True, bias=False"
    assert f"\n          (experts): Experts({experts})\n" in mixtral
    assert "(router): Linear(in_features=4096, out_features=8, bias=False)" in mixtral


def test_single_layer_prints_index_not_range() -> None:
    text = module_repr(ir_of("gpt2", ["n_layers=1"]))
    assert "\n      (0): Block(\n" in text and " x Block" not in text


# --- torch's repr of a model built by the generator's contract --------------------------------


class StackedExperts(nn.Module):
    """The generated `Experts`: n experts' gate, up and down weights stacked."""

    def __init__(self, n: int, d: int, hidden: int, gated: bool, bias: bool) -> None:
        super().__init__()
        shapes = {"gate": (n, hidden, d), "up": (n, hidden, d), "down": (n, d, hidden)}
        for name, shape in shapes.items():
            if gated or name != "gate":
                self.register_parameter(name, nn.Parameter(torch.empty(shape)))
        self.gated, self.bias = gated, bias

    def _get_name(self) -> str:
        return "Experts"

    def extra_repr(self) -> str:
        n, hidden, d = self.up.shape
        sizes = f"n_experts={n}, in_features={d}, hidden_features={hidden}"
        return f"{sizes}, gated={self.gated}, bias={self.bias}"


def contract_model(ir: IR) -> nn.Module:
    """The model the code generator is specified to emit, built directly from the IR: one
    class per distinct composite node (named by archspec.ir.classes) with no extra_repr, a
    Repeat as a ModuleList of fresh copies (a mixture's routed experts: `Experts`, their
    weights stacked), leaves as torch built-ins, children registered under IR names in IR
    order."""
    v = ir.value
    names = class_names(ir.root)
    classes: dict[str, type] = {}

    def build(node: Node, parent: Node | None = None) -> nn.Module:
        if isinstance(parent, MoE) and node is parent.experts:
            expert = parent.expert
            return StackedExperts(
                v(parent.n_experts),
                v(expert.up.in_features),
                v(expert.hidden),
                expert.gated,
                expert.up.bias,
            )
        if isinstance(node, Embedding):
            return nn.Embedding(v(node.num), v(node.dim))
        if isinstance(node, Router) and node.entry.module is not None:
            # A router whose kind owns buffers is a class of the generated file's own over
            # nn.Linear (runtime/routing.py's BiasCorrectedRouter), printed as Linear is.
            cls = type(node.entry.module, (nn.Linear,), {})
            return cls(v(node.in_features), v(node.out_features), bias=node.bias)
        if isinstance(node, Linear):
            return nn.Linear(v(node.in_features), v(node.out_features), bias=node.bias)
        if isinstance(node, Norm):
            bias = {"bias": node.bias} if node.entry.allows_bias else {}
            if not node.entry.affine:  # a norm without parameters (OLMo)
                bias = {"elementwise_affine": False}
            entry = node.entry
            cls = None if entry.own else getattr(nn, entry.torch_class)
            if cls is None:  # a class of the generated file's own, named as it, over its base
                cls = type(entry.torch_class, (getattr(nn, entry.base),), {})
            return cls(v(node.dim), eps=node.eps, **bias)
        if isinstance(node, Repeat):
            at = {i: run.node for run in node.runs for i in run.indices(v)}  # a run's indices
            return nn.ModuleList(build(at[i]) for i in sorted(at))
        kind = class_name(names, node)
        module = classes.setdefault(kind, type(kind, (nn.Module,), {}))()
        for part in node.children:
            if isinstance(part, Sinks):  # a parameter of its attention, not a module
                module.register_parameter(part.name, nn.Parameter(torch.empty(v(part.heads))))
                continue
            module.add_module(part.name, build(part, node))
        return module

    with torch.device("meta"):
        return build(ir.root)


@pytest.mark.parametrize("name", SPECS)
def test_matches_torch_repr_of_the_contract_model(name: str) -> None:
    ir = ir_of(name)
    assert module_repr(ir) == repr(contract_model(ir))


def with_runs(ir: IR, runs: list[tuple[int, Node]]) -> IR:
    """`ir` with the last stack's blocks replaced by the given (count, block) runs."""
    stack = ir.root.stacks[-1]
    start, new_runs = 0, []
    for count, node in runs:
        new_runs.append(Run(sp.Integer(start), sp.Integer(count), node))
        start += count
    new_stack = replace(stack, blocks=replace(stack.blocks, runs=tuple(new_runs)))
    root = replace(ir.root, stacks=(*ir.root.stacks[:-1], new_stack))
    return replace(ir, root=root)


def wider_mlp(block: Block) -> Block:
    """`block` with an MLP twice as wide: a different node, hence a different class."""
    mlp = block.ff
    up = replace(mlp.up, out_features=2 * mlp.up.out_features)
    down = replace(mlp.down, in_features=2 * mlp.down.in_features)
    last = replace(block.sublayers[-1], layer=replace(mlp, up=up, down=down))
    return replace(block, sublayers=(*block.sublayers[:-1], last))


def test_adjacent_runs_of_one_block_merge_as_torch_merges_them() -> None:
    ir = ir_of("gpt2", ["n_layers=2"])
    block = ir.root.stacks[0].blocks.runs[0].node
    other = wider_mlp(block)
    merged = with_runs(ir, [(1, block), (3, block), (2, other), (1, block)])
    text = module_repr(merged)
    assert repr(contract_model(merged)) == text
    names = class_names(merged.root)
    first, second = class_name(names, block), class_name(names, other)
    assert first != second
    assert f"(0-3): 4 x {first}(" in text
    assert f"(4-5): 2 x {second}(" in text
    assert f"\n      (6): {first}(\n" in text
    empty = with_runs(ir, [])
    assert "(blocks): ModuleList()" in module_repr(empty) == repr(contract_model(empty))


OLD_TORCH_LAYERNORM = """
class LayerNorm(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            "{normalized_shape}, eps={eps}, "
            "elementwise_affine={elementwise_affine}".format(**self.__dict__)
        )


class GroupNorm(Module):
    def extra_repr(self) -> str:
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}"
"""


def test_layernorm_format_follows_the_installed_torch() -> None:
    assert layernorm_prints_bias() == ("bias=" in repr(nn.LayerNorm(4)))
    assert not layernorm_source_prints_bias(OLD_TORCH_LAYERNORM)
    new = OLD_TORCH_LAYERNORM.replace("elementwise_affine}", "elementwise_affine}, bias={use_bias}")
    assert layernorm_source_prints_bias(new)


# --- the generated model ---------------------------------------------------------------------


OVERRIDDEN = [
    ("t5-small", ["n_layers=1"]),
    ("bart-base", ["decoder.n_layers=2", "encoder.n_layers=1"]),
    ("mixtral-8x7b", ["n_layers=2", "moe.n_experts=1", "moe.top_k=1"]),
    ("mixtral-8x7b", ["n_layers=3", "moe.n_experts=2", "moe.top_k=1", "moe.dense_layers=1"]),
    # Attention sinks are a parameter, not a module: printed nowhere, counted in the total.
    ("mistral-7b", ["n_layers=4", "attention.sinks=true", "attention.window_pattern=LG"]),
    # gpt-oss's MoE pieces: its router is a plain Linear, its experts' biases stacked
    (
        "mixtral-8x7b",
        [
            "n_layers=2",
            "moe.router=topk_softmax",
            "moe.router_bias=true",
            "moe.expert_bias=true",
            "moe.swiglu_limit=7.0",
            "moe.swiglu_alpha=1.702",
        ],
    ),
]


# Each built-in's size (tests/builtin_sizes.py: one size of each architecture by default).
PRINTED = [
    pytest.param(n, [], id=n, marks=pytest.mark.long if other_size(n) else ()) for n in SPECS
] + [pytest.param(n, o, id=" ".join([n, *o])) for n, o in OVERRIDDEN]


@pytest.mark.parametrize("name, overrides", PRINTED)
def test_matches_print_of_the_generated_model(
    name: str, overrides: list[str], tmp_path: Path
) -> None:
    ir = ir_of(name, overrides)
    module = generated_module(ir, folder=tmp_path)
    with torch.device("meta"):
        model = module.Model()
    assert module_repr(ir) == repr(model)
    # The `--params` total is what the real model holds (tied weights counted once).
    assert module_tree(ir).total == sum(p.numel() for p in model.parameters())


# --- counts, depth, JSON ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["t5-small", "mixtral-8x7b", "bert-base"])
def test_params_annotations(name: str) -> None:
    ir = ir_of(name)
    plain = module_repr(ir).splitlines()
    annotated = module_repr(ir, params=True).splitlines()
    assert [line.split("  # ")[0].rstrip() for line in annotated] == plain
    total = ir.value(parameter_count(ir.root))
    assert annotated[0].endswith(f"# {total:,} params")
    # Every note ends in the same column.
    ends = {line.index(" params") for line in annotated if "# " in line}
    assert len(ends) == 1
    root = module_tree(ir)
    assert root.total == total


def test_params_of_folded_entries_and_tied_head() -> None:
    text = module_repr(ir_of("bert-base"), params=True)
    assert re.search(r"\(0-11\): 12 x Block\( +# +85,054,464 params  \(12 x 7,087,872\)", text)
    t5 = module_repr(ir_of("t5-small"), params=True)
    assert "params  (weight tied to tok_emb.weight)" in t5


def test_depth_cuts_the_tree() -> None:
    ir = ir_of("bert-base")
    assert module_repr(ir, depth=0) == "Model(...)"
    one = module_repr(ir, depth=1)
    assert "  (encoder): Stack(...)\n" in one and "Block" not in one
    assert "(pooler): Linear(in_features=768, out_features=768, bias=True)" in one
    three = module_repr(ir, depth=3)
    assert "(0-11): 12 x Block(...)" in three
    assert module_repr(ir, depth=99) == module_repr(ir)


def test_json_tree() -> None:
    root = module_tree(ir_of("mixtral-8x7b"))
    data = root.to_dict()
    assert data["class"] == "Model" and data["params"] == 46_702_792_704

    def sums(node: dict) -> None:
        if "children" in node:
            assert node["params"] == sum(c.get("total", c["params"]) for c in node["children"])
            for child in node["children"]:
                sums(child)

    sums(data)
    blocks = data["children"][1]["children"][0]
    assert blocks["class"] == "ModuleList"
    group = blocks["children"][0]
    assert (group["name"], group["copies"], group["class"]) == ("0-31", 32, "Block")
    assert group["total"] == 32 * group["params"]
    cut = root.to_dict(depth=1)
    assert cut["children"][1] == {
        "name": "decoder",
        "class": "Stack",
        "params": data["children"][1]["params"],
        "truncated": True,
    }


# --- the command --------------------------------------------------------------------------------


def test_cli_print_matches_module_repr() -> None:
    result = runner.invoke(app, ["print", "t5-small"])
    assert result.exit_code == 0, result.output
    assert result.stdout == module_repr(ir_of("t5-small")) + "\n"


def test_cli_options_run() -> None:
    data = json.loads(runner.invoke(app, ["print", "bert-base", "--json"]).stdout)
    assert set(data) == {"name", "overrides", "params", "repr", "tree"}
    assert data["params"] == 109_482_240 and "(0-11): 12 x Block(" in data["repr"]
    depth = runner.invoke(app, ["print", "gpt2", "--depth", "2", "--set", "n_layers=3"])
    assert depth.exit_code == 0 and "(blocks): ModuleList(...)" in depth.stdout
    params = runner.invoke(app, ["print", "llama-2-7b", "--params"])
    assert params.exit_code == 0 and "6,738,415,616 params" in params.stdout
    tree = runner.invoke(app, ["print", "mixtral-8x7b", "--tree", "--params", "--depth", "4"])
    assert tree.exit_code == 0 and "0-31: 32 x Block" in tree.stdout
    assert runner.invoke(app, ["print", "gpt2", "--depth", "-1"]).exit_code == 2


def test_cli_print_unknown_spec_and_no_torch() -> None:
    bad = run_main(["print", "bert-bsae"], text=True)
    assert bad.returncode == 2 and bad.stdout == ""
    assert "unknown spec 'bert-bsae'" in bad.stderr and "Traceback" not in bad.stderr
    code = (
        "from archspec.cli import app\n"
        "try:\n    app(['print', 'mixtral-8x7b', '--params'])\nexcept SystemExit:\n    pass\n"
    )
    printed, modules = run_python(code)
    assert "torch" not in modules, "torch imported"
    assert "(experts): Experts(n_experts=8," in printed
