"""The PyTorch code generator and `archspec build`.

Every built-in spec is generated, checked with ruff, built at full size on the meta
device (parameter count and module tree against the IR), and built small on the CPU to run
forward, backward, padding and KV-cache generation. A few combinations no built-in spec uses
(ALiBi in an encoder, RoPE in an encoder-decoder, ...) go through the same checks.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.backends.torchgen import generate_source, load_generated
from archspec.cli import app
from archspec.ir.classes import class_name, class_names
from archspec.ir.nodes import IR, Embedding, Linear, MoE, Node, Norm, Repeat, Router, Sinks
from archspec.spec.resolve import builtin_names
from tests.builtin_sizes import each_size
from tests.tiny import scaled_down, tiny_sizes

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models

SPECS = builtin_names()

# Combinations no built-in spec uses, to reach the generator's other branches.
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "decoder-relative-bias": ("gpt2", ["position.kind=relative_bias"]),
    "decoder-sinusoidal-untied": (
        "gpt2",
        ["position.kind=sinusoidal", "embedding.scale=true", "head.tied=false", "head.bias=true"],
    ),
    "decoder-no-head": ("llama-2-7b", ["head.lm_head=false"]),
    "encoder-alibi-lm-head": ("bert-base", ["position.kind=alibi", "head.lm_head=true"]),
    "encdec-alibi": ("bart-base", ["position.kind=alibi"]),
    "encdec-rope-layers": ("t5-small", ["position.kind=rope", "encoder.n_layers=3"]),
    "encdec-pre-norm-none": ("transformer-base", ["residual=pre", "position.kind=none"]),
    "parallel-moe": ("palm-8b", ["moe.n_experts=4", "moe.top_k=2"]),
    "t5-one-layer": ("t5-small", ["n_layers=1"]),
    # DeepSeek-style: the first layer keeps a dense MLP (DenseBlock, then MoEBlocks).
    "moe-dense-first": ("mixtral-8x7b", ["moe.dense_layers=1"]),
    "encdec-dropout": (
        "t5-small",
        [f"dropout.{where}=0.1" for where in ("attention", "hidden", "mlp", "output")],
    ),
    "decoder-dropout": ("gpt2", ["dropout.hidden=0.1", "dropout.attention=0.1"]),
    # Scaled RoPE, each with its longest angle call (one argument per line), partial too.
    "rope-linear": ("llama-2-7b", ["position.scaling=linear", "position.factor=4"]),
    "rope-llama3": ("llama-3-8b", ["position.scaling=llama3", "position.factor=8"]),
    "rope-yarn-partial": (
        "pythia-1.4b",
        ["position.scaling=yarn", "position.factor=4", "position.original_max_seq_len=8"],
    ),
    "rope-dynamic-partial": ("pythia-1.4b", ["position.scaling=dynamic", "position.factor=2"]),
    # LongRoPE: factor tuples too long for a line of Config (one item a line), and short. The
    # original context (64) is beyond these tests' sequences: past it, a cached step and a
    # recomputed one differ (the cache keeps keys rotated by the short factors), in
    # transformers too; tests/test_hf_weights.py checks both factors against transformers.
    "rope-longrope": (
        "llama-2-7b",
        [
            "head_dim=16",
            "position.scaling=longrope",
            "position.original_max_seq_len=64",
            f"position.short_factor=[{', '.join(str(1 + i / 64) for i in range(8))}]",
            f"position.long_factor=[{', '.join(str(2 + i / 16) for i in range(8))}]",
        ],
    ),
    "rope-longrope-partial": (
        "pythia-1.4b",
        [
            "position.rotary_dim=8",
            "position.scaling=longrope",
            "position.factor=4",
            "position.original_max_seq_len=64",
            "position.short_factor=[1, 1.5, 2, 2.5]",
            "position.long_factor=[3, 4, 5, 6]",
        ],
    ),
}
CASES = [(name, []) for name in SPECS] + list(VARIANTS.values())
CASE_IDS = SPECS + list(VARIANTS)


def small(name: str, overrides: list[str]) -> list[str]:
    """Overrides that shrink a spec to a CPU-sized model of the same architecture (keys set in
    `overrides` keep their value)."""
    sizes = tiny_sizes(d_model=64, d_ff=128, vocab_size=256, max_seq_len=32)
    return scaled_down(name, sizes, overrides, head_dim=16, experts=(4, 2))


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Callable[[IR], ModuleType]:
    """Generate and import the model file for an IR, once per IR."""
    folder = tmp_path_factory.mktemp("generated")
    modules: dict[str, ModuleType] = {}

    def get(ir: IR) -> ModuleType:
        source = generate_source(ir)
        if source not in modules:
            modules[source] = load_generated(source, folder)
        return modules[source]

    return get


def small_model(
    name: str, overrides: list[str], generated
) -> tuple[IR, ModuleType, torch.nn.Module]:
    """The IR, the generated module and a model (in eval mode) of a shrunk spec."""
    ir = build_ir(load_spec(name, small(name, overrides)))
    module = generated(ir)
    torch.manual_seed(0)
    return ir, module, module.Model().eval()


def inputs(ir: IR, batch: int = 2, seq: int = 8) -> dict[str, torch.Tensor]:
    vocab = ir.value(ir.root.vocab_size)
    args = {"input_ids": torch.randint(vocab, (batch, seq))}
    if ir.root.layout == "encoder-decoder":
        args["decoder_input_ids"] = torch.randint(vocab, (batch, seq - 2))
    return args


# --- the module tree ----------------------------------------------------------------------------


def ir_modules(ir: IR) -> list[tuple[str, str, tuple]]:
    """(path, class, sizes) of every module the IR describes, repeats unrolled, in order."""
    out: list[tuple[str, str, tuple]] = []
    classes = class_names(ir.root)

    def go(node: Node, path: str, parent: Node | None = None) -> None:
        if isinstance(parent, MoE) and node is parent.experts:  # one module, stacked weights
            e = parent.expert
            sizes = (ir.value(parent.n_experts), ir.value(e.up.in_features), ir.value(e.hidden))
            out.append((path, "Experts", (*sizes, e.gated, e.up.bias)))
            return
        if isinstance(node, Sinks):  # a parameter of its attention, not a module
            return
        if isinstance(node, Repeat):
            out.append((path, "ModuleList", ()))
            at = {i: run.node for run in node.runs for i in run.indices(ir.value)}
            for index in sorted(at):  # a run's indices: consecutive, or a cycle's length apart
                go(at[index], f"{path}.{index}")
            return
        if isinstance(node, Embedding):
            out.append((path, "Embedding", (ir.value(node.num), ir.value(node.dim))))
        elif isinstance(node, Linear):
            sizes = (ir.value(node.in_features), ir.value(node.out_features), node.bias)
            # A router whose kind owns buffers is its own class over Linear (routing.py).
            own = node.entry.module if isinstance(node, Router) else None
            out.append((path, own or "Linear", sizes))
        elif isinstance(node, Norm):
            # A LayerNorm without parameters (OLMo) has no bias either.
            bias = (node.bias,) if node.entry.allows_bias or not node.entry.affine else ()
            out.append((path, node.entry.torch_class, (ir.value(node.dim), node.eps, *bias)))
        else:
            out.append((path, class_name(classes, node), ()))
        for child in node.children:
            go(child, f"{path}.{child.name}" if path else child.name, node)

    go(ir.root, "")
    return out


def torch_modules(model: torch.nn.Module) -> list[tuple[str, str, tuple]]:
    out = []
    for path, m in model.named_modules():
        if isinstance(m, torch.nn.Embedding):
            sizes: tuple = (m.num_embeddings, m.embedding_dim)
        elif isinstance(m, torch.nn.Linear):
            sizes = (m.in_features, m.out_features, m.bias is not None)
        elif isinstance(m, torch.nn.LayerNorm):
            sizes = (m.normalized_shape[0], m.eps, m.bias is not None)
        elif isinstance(m, torch.nn.RMSNorm):
            sizes = (m.normalized_shape[0], m.eps)
        elif type(m).__name__ == "Experts":  # (n_experts, out, in) per projection
            n, hidden, d = m.up.shape
            assert m.down.shape == (n, d, hidden)
            sizes = (n, d, hidden, hasattr(m, "gate"), hasattr(m, "up_bias"))
        else:
            sizes = ()
        out.append((path, type(m).__name__, sizes))
    return out


@pytest.mark.parametrize("name", each_size(SPECS))
def test_full_size_on_meta_matches_counter_and_ir(name: str, generated) -> None:
    ir = build_ir(load_spec(name))
    with torch.device("meta"):
        model = generated(ir).Model()
    assert sum(p.numel() for p in model.parameters()) == ir.value(parameter_count(ir.root))
    assert torch_modules(model) == ir_modules(ir)
    head = ir.root.part("lm_head")
    if isinstance(head, Linear) and head.tied_to:
        assert model.lm_head.weight is model.get_parameter(head.tied_to)


# --- the source ---------------------------------------------------------------------------------


def ruff() -> list[str]:
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.importorskip("ruff")
    return [sys.executable, "-m", "ruff"]


def test_sources_are_ruff_clean(tmp_path: Path) -> None:
    for i, (name, overrides) in enumerate(CASES):
        ir = build_ir(load_spec(name, overrides))
        (tmp_path / f"model_{i}.py").write_text(generate_source(ir, f"archspec build {name}"))
    # A path longer than a line in the recorded command (a deep temporary folder): it
    # cannot be broken, and the header says so to ruff.
    deep = "/tmp/" + "nested-folder/" * 8
    command = f"archspec build {deep}spec.yaml -o {deep}model.py"
    (tmp_path / "model_deep.py").write_text(generate_source(build_ir(load_spec("gpt2")), command))
    # The project's rules; the layout must hold at ruff's default line length (88) and at 100.
    rules = ["--select", "E,F,W,I,UP,B", "--target-version", "py310"]
    commands = [
        [*ruff(), "check", "--isolated", *rules, "--line-length", "88", str(tmp_path)],
        [*ruff(), "format", "--isolated", "--check", "--diff", str(tmp_path)],
        [*ruff(), "format", "--isolated", "--line-length", "100", "--check", str(tmp_path)],
    ]
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_header_and_imports() -> None:
    ir = build_ir(load_spec("gpt2"))
    source = generate_source(ir, "archspec build gpt2 -o model.py")
    assert source.startswith('"""gpt2 in PyTorch: a decoder-only transformer with 124,439,808')
    assert "\n    archspec build gpt2 -o model.py\n" in source
    imports = {line for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {
        "import math",
        "from collections.abc import Callable",
        "from dataclasses import dataclass",
        "import torch",
        "import torch.nn.functional as F",
        "import torch.utils.checkpoint",
        "from torch import Tensor, nn",
    }
    # A long command continues over several lines, as a shell would read it.
    sets = [f"--set n_layers={i}" for i in range(1, 12)]
    long = generate_source(ir, "archspec build gpt2 " + " ".join(sets))
    assert long.startswith('r"""') and " \\\n        --set" in long
    assert all(f"{option} " in long or f"{option}\n" in long for option in sets)


def test_no_code_for_unused_features() -> None:
    def source(name: str) -> str:
        return generate_source(build_ir(load_spec(name)))

    def uses(source: str, word: str) -> bool:
        return re.search(rf"\b{re.escape(word)}\b", source) is not None

    llama = source("llama-2-7b").replace("bias=False", "")
    for absent in ("alibi_bias", "rel_bias", "pos_emb", "sinusoids", "LayerNorm", "enable_gqa"):
        assert not uses(llama, absent), absent
    assert "bias=" not in llama
    gpt2 = source("gpt2")
    for absent in ("rope", "apply_rope", "alibi_bias", "RMSNorm", "relative_position_bucket"):
        assert not uses(gpt2, absent), absent
    assert not uses(gpt2, "n_kv_heads") and not uses(gpt2, "MoE") and "scale=1.0" not in gpt2
    bert = source("bert-base")
    for absent in ("KVCache", "generate", "is_causal", "hidden_keys", "lm_head"):
        assert not uses(bert, absent), absent
    assert "enable_gqa=True" in source("llama-2-70b")
    assert "scale=1.0" in source("t5-small")
    assert all("bias=True" not in source(name) for name in ("bloom-560m", "bart-base"))


# --- small models on the CPU --------------------------------------------------------------------


@pytest.mark.parametrize("name, overrides", CASES, ids=CASE_IDS)
def test_small_model_forward_and_backward(name: str, overrides: list[str], generated) -> None:
    ir, _, model = small_model(name, overrides, generated)
    model.train()
    args = inputs(ir)
    out = model(**args)
    outputs = out if isinstance(out, tuple) else (out,)
    batch, seq = args.get("decoder_input_ids", args["input_ids"]).shape
    width = ir.value(ir.root.vocab_size if ir.root.lm_head else ir.root.d_model)
    assert outputs[0].shape == (batch, seq, width)
    if ir.root.pooler is not None:
        assert outputs[1].shape == (batch, ir.value(ir.root.d_model))
    assert all(torch.isfinite(o).all() for o in outputs)
    sum(o.square().mean() for o in outputs).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, f"no gradient reaches {missing}"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    # Padding at the start: with a causal mask some queries see nothing, and must not be NaN.
    mask = torch.ones_like(args["input_ids"])
    mask[0, :3] = 0
    with torch.no_grad():
        padded = model(**args, attention_mask=mask)
    padded = padded if isinstance(padded, tuple) else (padded,)
    assert all(torch.isfinite(o).all() for o in padded)


DECODERS = [
    (case, overrides)
    for case, (name, overrides) in zip(CASE_IDS, CASES, strict=True)
    if load_spec(name, overrides).layout == "decoder" and load_spec(name, overrides).head.lm_head
]


@pytest.mark.parametrize("case, overrides", DECODERS, ids=[c for c, _ in DECODERS])
def test_generate_with_cache_equals_recomputing(case: str, overrides: list[str], generated) -> None:
    name = VARIANTS[case][0] if case in VARIANTS else case
    ir, module, model = small_model(name, overrides, generated)
    prompt = torch.randint(ir.value(ir.root.vocab_size), (2, 5))
    tokens = prompt
    with torch.no_grad():
        for _ in range(6):
            step = model(tokens)[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, step], dim=1)
        assert torch.equal(model.generate(prompt, 6), tokens)
        # The cached logits themselves match a full forward pass.
        cache = [module.KVCache(tokens.size(1)) for _ in model.decoder.blocks]
        model(tokens[:, :7], cache=cache)
        cached = model(tokens[:, 7:], cache=cache)
        torch.testing.assert_close(cached, model(tokens)[:, 7:], atol=1e-5, rtol=1e-4)


ENCODERS = [
    (case, overrides)
    for case, (name, overrides) in zip(CASE_IDS, CASES, strict=True)
    if load_spec(name, overrides).layout != "decoder"
]


@pytest.mark.parametrize("case, overrides", ENCODERS, ids=[c for c, _ in ENCODERS])
def test_padding_leaves_the_tokens_unchanged(case: str, overrides: list[str], generated) -> None:
    name = VARIANTS[case][0] if case in VARIANTS else case
    ir, _, model = small_model(name, overrides, generated)
    args = inputs(ir, batch=2, seq=6)
    ids = args.pop("input_ids")
    padded = torch.cat([ids, torch.randint(ir.value(ir.root.vocab_size), (2, 3))], dim=1)
    mask = torch.ones_like(padded)
    mask[:, 6:] = 0
    mask[1, 5] = 0  # a second sequence that is one token shorter still sees no padding
    with torch.no_grad():
        plain = model(ids, **args)
        masked = model(padded, **args, attention_mask=mask)
        shorter = model(ids[1:, :5], **{k: v[1:] for k, v in args.items()})
    plain = plain if isinstance(plain, tuple) else (plain,)
    masked = masked if isinstance(masked, tuple) else (masked,)
    shorter = shorter if isinstance(shorter, tuple) else (shorter,)
    encoder_only = ir.root.layout == "encoder"
    first = masked[0][:, :6] if encoder_only else masked[0]
    torch.testing.assert_close(first[0], plain[0][0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(
        first[1, :5] if encoder_only else first[1], shorter[0][0], atol=1e-5, rtol=1e-4
    )
    if ir.root.pooler is not None:
        torch.testing.assert_close(masked[1][0], plain[1][0], atol=1e-5, rtol=1e-4)


# --- position helpers against transformers ------------------------------------------------------


def helper(name: str, generated) -> ModuleType:
    return generated(build_ir(load_spec(name, small(name, []))))


@pytest.mark.parametrize("n_heads", [4, 6, 16, 112])
def test_alibi_slopes_equal_bloom(n_heads: int, generated) -> None:
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    module = helper("bloom-560m", generated)
    mask = torch.ones(1, 5, dtype=torch.long)
    expected = bloom.build_alibi_tensor(mask, n_heads, torch.float32).view(n_heads, 5)
    ours = module.alibi_bias(n_heads, torch.arange(5))
    assert torch.equal(ours[:, 0], expected)
    # A left-padded batch: key positions counted over tokens, as the stack does with a mask.
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    expected = bloom.build_alibi_tensor(mask, n_heads, torch.float32).view(2, n_heads, 5)
    ours = module.alibi_bias(n_heads, (mask.cumsum(-1) - 1) * mask)
    assert torch.equal(ours[:, :, 0], expected)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_buckets_equal_t5(bidirectional: bool, generated) -> None:
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    offsets = torch.arange(300)[None, :] - torch.arange(300)[:, None]
    expected = t5.T5Attention._relative_position_bucket(offsets, bidirectional, 32, 128)
    ours = helper("t5-small", generated).relative_position_bucket(offsets, 32, 128, bidirectional)
    assert torch.equal(ours, expected)


# --- archspec build -----------------------------------------------------------------------------


def run(*args: str):
    return CliRunner().invoke(app, ["build", *args])


def test_build_prints_the_source() -> None:
    result = run("gpt2", "--set", "n_layers=2")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith('"""gpt2 (n_layers=2) in PyTorch')
    assert "archspec build gpt2 --set n_layers=2\n" in result.stdout
    compile(result.stdout, "model.py", "exec")


def test_build_writes_and_refuses_to_clobber(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    result = run("gpt2", "-o", str(path))
    assert result.exit_code == 0, result.output
    first = path.read_text()
    assert str(path) in first.replace(" \\\n        ", " ") and result.stdout == ""
    assert run("gpt2", "-o", str(path)).exit_code == 0  # same content: fine
    result = run("gpt2", "--set", "n_layers=2", "-o", str(path))
    assert result.exit_code == 2
    assert "--force" in result.stderr and "differs" in result.stderr
    assert path.read_text() == first
    result = run("gpt2", "--set", "n_layers=2", "-o", str(path), "--force")
    assert result.exit_code == 0, result.output
    assert "n_layers: int = 2" in path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]  # no temporary files left


def test_build_json(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    result = run("t5-small", "-o", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == {
        "name": "t5-small",
        "overrides": [],
        "path": str(path),
        "params": 60_506_624,
        "bytes": len(path.read_bytes()),
    }
    data = json.loads(run("t5-small", "--json").stdout)
    assert data["path"] is None and data["params"] == 60_506_624


def test_build_errors(tmp_path: Path) -> None:
    result = run("gtp2")
    assert result.exit_code == 2 and "did you mean 'gpt2'" in result.stderr
    result = run("gpt2", "-o", str(tmp_path / "missing" / "model.py"))
    assert result.exit_code == 2 and "no such directory" in result.stderr
    assert re.search(r"Examples:.*archspec build", run("--help").stdout, re.S)


@pytest.mark.parametrize(
    "n_layers, pattern, classes",
    [(2, "LLG", {"Block"}), (7, "LLG", {"SlidingBlock", "FullBlock"}), (6, "LGG", None)],
)
def test_a_cycled_pattern_builds_each_layer_its_class(
    tmp_path: Path, n_layers: int, pattern: str, classes: set[str] | None
) -> None:
    """Runs of one class share a branch, tested by residue; a pattern whose other letters
    fall past the last layer (two layers of "LLG") has one class and no branch at all
    (its if/else once came out with no if)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"layout: decoder\nd_model: 8\nn_layers: {n_layers}\nn_heads: 2\nd_ff: 8\n"
        f"vocab_size: 16\nmax_seq_len: 8\n"
        f"attention: {{sliding_window: 2, window_pattern: {pattern}}}\n"
    )
    ir = build_ir(load_spec(str(spec)))
    source = generate_source(ir)
    model = load_generated(source, tmp_path).Model()
    assert sum(p.numel() for p in model.parameters()) == ir.value(parameter_count(ir.root))
    built = [type(block).__name__ for block in model.decoder.blocks]
    assert len(built) == n_layers
    if classes is not None:
        assert set(built) == classes
    windowed = [pattern[i % len(pattern)] == "L" for i in range(n_layers)]
    if len(set(built)) == 2:  # each layer the class its letter names
        assert [name.startswith("Sliding") for name in built] == windowed


def test_loading_without_a_folder_leaves_nothing_after_the_process() -> None:
    """Generated files live in one temporary folder per process, removed at exit (a test
    suite loads hundreds of models)."""
    script = (
        "from archspec.backends.torchgen import load_generated\n"
        "print(load_generated('x = 1\\n').__file__)\n"
        "print(load_generated('x = 2\\n').__file__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    first, second = (Path(line) for line in result.stdout.split())
    assert first.parent == second.parent and first != second
    assert not first.parent.exists()
