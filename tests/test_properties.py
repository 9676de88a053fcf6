"""Property-based tests: random specs over every feature of the spec language, at tiny sizes.

For a random valid spec (written as a YAML file, the way a user writes one):

- the counted total == the generated model's parameters on the meta device == the printer's;
- `archspec print` (module_repr) == repr(model), character for character;
- the `executed` convention's matmul FLOPs == torch.utils.flop_counter.FlopCounterMode on the
  generated model: forward, forward + backward, and one KV-cached decode step (an
  encoder-decoder's with the encoder's keys and values cached).

For a random mutation of a valid spec (a key deleted or added, a value of the wrong type, out of
range, a string in the wrong place, broken YAML text, a hostile `--set`), loading it either gives
a valid spec, which every backend then handles, or one clean SpecError; through the CLI, exit
code 0 or 2 and never a traceback.

The number of examples comes from the hypothesis profile (tests/conftest.py): `ci` by default,
HYPOTHESIS_PROFILE=long for a soak run (docs/testing.md).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sympy as sp
import torch
import yaml
from hypothesis import assume, event, given, note
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from archspec import SpecError, build_ir, load_spec
from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import KV_LEN, S_DEC, B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr, module_tree
from archspec.backends.torchgen import generate_source, load_generated
from archspec.cli import app
from archspec.ir.nodes import IR
from archspec.spec.schema import NAME_PATTERN, TEXT_PATTERN

runner = CliRunner()

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models

LAYOUTS = ["encoder", "decoder", "encoder-decoder"]
POSITIONS = ["learned", "sinusoidal", "rope", "alibi", "relative_bias", "none"]
ACTIVATIONS = ["gelu", "gelu_tanh", "relu", "silu"]

OMIT = object()  # a key left out of the spec, so that its default applies


def optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """A value, or the key left out. Only for keys whose default keeps the spec valid."""
    return st.one_of(st.just(OMIT), strategy)


def mapping(**items: Any) -> dict[str, Any]:
    return {key: value for key, value in items.items() if value is not OMIT}


small_floats = st.floats(min_value=1e-12, max_value=0.5, allow_nan=False, allow_infinity=False)


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid spec as a YAML-able mapping, at tiny sizes. It obeys the cross-field rules of
    archspec/spec/validate.py (`_check_shapes`) by construction, so none is rejected."""
    layout = draw(st.sampled_from(LAYOUTS))
    encoder, encdec = layout == "encoder", layout == "encoder-decoder"
    # Parallel blocks have no place for cross-attention.
    parallel = ["parallel", "parallel_two_norms"]
    residual = draw(
        st.sampled_from(
            ["pre", "post", "sandwich", "output_norm"]
            if encdec
            else ["pre", "post", "sandwich", "output_norm", *parallel]
        )
    )
    decoder = layout == "decoder"
    qk_norm = draw(optional(st.booleans()))
    scale_dim = draw(optional(st.integers(1, 8)))
    scale_scores = draw(optional(st.booleans()))
    kind = draw(st.sampled_from(POSITIONS))
    rope = kind == "rope"

    n_heads = draw(st.integers(1, 4))
    # MHA (left out or = n_heads), GQA, MQA: any divisor of n_heads.
    n_kv_heads = draw(optional(st.sampled_from([k for k in range(1, 5) if n_heads % k == 0])))
    step = 2 if rope else 1  # RoPE rotates pairs of channels: an even head_dim
    if draw(st.booleans()):
        head_dim = step * draw(st.integers(1, 4))  # explicit: d_model is then free
        d_model = draw(st.integers(1, 16))
    else:
        head_dim = OMIT
        d_model = n_heads * step * draw(st.integers(1, 4))

    norm_kind = draw(
        st.sampled_from(["layernorm", "rmsnorm", "offset_rmsnorm", "nonparametric_layernorm"])
    )
    # rmsnorms have no bias; `bias: false` or null is still allowed.
    norm_bias = st.sampled_from([False, None]) if norm_kind != "layernorm" else st.booleans()
    norm = mapping(
        kind=norm_kind,
        bias=draw(optional(norm_bias)),
        eps=draw(optional(st.one_of(st.sampled_from([1e-5, 1e-6, 1e-12]), small_floats))),
    )

    position: dict[str, Any] = {"kind": kind}
    if kind == "learned":
        position["offset"] = draw(optional(st.integers(0, 3)))
    if kind == "sinusoidal":
        # Marian's and Pegasus' halves, fairseq's (M2M100) frequencies, which need 4 channels
        layouts = ["interleaved", "halves", *(["fairseq"] if d_model >= 4 else [])]
        position["layout"] = draw(optional(st.sampled_from(layouts)))
        position["offset"] = draw(optional(st.integers(0, 3)))
        position["from_mask"] = draw(optional(st.booleans()))
    if rope:
        position["theta"] = draw(optional(st.floats(1.0, 1e6)))
        # A partial rotation (GPT-NeoX, Phi) of an even number of the head's channels, and
        # GPT-J's interleaved pairs.
        width = head_dim if head_dim is not OMIT else d_model // n_heads
        position["rotary_dim"] = draw(optional(st.sampled_from(range(2, width + 1, 2))))
        position["interleaved"] = draw(optional(st.booleans()))
    if kind == "relative_bias":
        # T5's buckets: num_buckets // 2 (// 4 in an encoder, split by direction) hold one
        # distance each, and max_distance must lie beyond them (the defaults: 32 and 128).
        buckets = draw(optional(st.integers(2 if layout == "decoder" else 4, 12)))
        exact = (32 if buckets is OMIT else buckets) // (4 if encoder else 2)
        position["num_buckets"] = buckets
        position["max_distance"] = (
            draw(optional(st.integers(exact + 1, 24))) if exact < 24 else OMIT
        )
    position = mapping(**position)

    tied = draw(optional(st.booleans()))
    head = mapping(
        lm_head=draw(optional(st.booleans())),
        tied=tied,
        bias=draw(optional(st.booleans())),
        # T5 rescales before a tied head only; `tied` defaults to true.
        scale_tied_output=draw(optional(st.booleans())) if tied is not False else OMIT,
        pooler=draw(optional(st.booleans())) if encoder else OMIT,  # encoders only
        softcap=draw(optional(st.sampled_from([0.5, 30.0]))),
        logits_divisor=draw(optional(st.sampled_from([8.0]))),
        hidden_divisor=draw(optional(st.sampled_from([10.0]))),
    )
    scale = draw(optional(st.booleans()))
    softcap = draw(optional(st.sampled_from([1.0, 50.0]))) if decoder else OMIT
    # Attention sinks (gpt-oss): decoders', a written-out core soft-capping's excludes.
    sinks = draw(optional(st.booleans())) if decoder and softcap is OMIT else OMIT
    # Sliding windows: causal in decoders, two-sided in encoders (ModernBERT), none in
    # encoder-decoders.
    window = draw(optional(st.integers(1, 6))) if not encdec else OMIT
    pattern = draw(optional(st.from_regex(r"[LG]{1,4}", fullmatch=True))) if not encdec else OMIT
    # A pre-norm first block without its attention norm, the embedding norm standing in.
    emb_norm = draw(optional(st.booleans()))
    if residual == "pre" and emb_norm is True:
        norm = mapping(**norm, first_attention=draw(optional(st.booleans())))

    moe = draw(
        optional(
            st.one_of(
                st.none(),
                st.integers(1, 4).flatmap(
                    lambda n: st.fixed_dictionaries(
                        {},
                        optional={
                            "n_experts": st.just(n),
                            "top_k": st.integers(1, n),
                            "router_bias": st.booleans(),
                            "routed_scale": st.sampled_from([1.0, 2.5]),
                            "router": st.sampled_from(
                                ["softmax", "topk_softmax", "softmax_in_dtype"]
                            ),
                            "expert_bias": st.booleans(),
                        },
                    ).filter(lambda m: m.get("top_k", 2) <= m.get("n_experts", 8))
                ),
            )
        )
    )
    # gpt-oss's clamped SwiGLU in the experts: a gated MLP's only.
    gated = draw(optional(st.booleans()))
    if isinstance(moe, dict) and gated is True and draw(st.booleans()):
        moe = {**moe, "swiglu_limit": draw(st.sampled_from([0.5, 7.0])), "swiglu_alpha": 1.702}

    stacks: dict[str, Any] = {}
    if encdec:  # per-stack depths: encoder-decoders only
        for role in ("encoder", "decoder"):
            n_layers = mapping(n_layers=draw(optional(st.integers(1, 3))))
            stacks[role] = draw(optional(st.just(n_layers)))

    spec = mapping(
        name=draw(optional(st.from_regex(NAME_PATTERN, fullmatch=True))),
        source=draw(st.from_regex(TEXT_PATTERN, fullmatch=True)),
        family=draw(optional(st.sampled_from(["llama", "t5", "my-family_2"]))),
        hf_class=draw(optional(st.sampled_from(["LlamaForCausalLM", "Custom_Model"]))),
        layout=layout,
        d_model=d_model,
        n_layers=draw(st.integers(1, 3)),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        d_ff=draw(st.integers(1, 16)),
        vocab_size=draw(st.integers(1, 40)),
        max_seq_len=draw(st.integers(2, 12)),
        residual=residual,
        residual_multiplier=draw(optional(st.sampled_from([0.22]))),
        final_norm=draw(optional(st.one_of(st.none(), st.booleans()))),
        norm=norm,
        position=position,
        embedding=mapping(
            token_types=draw(optional(st.integers(0, 3) if encoder else st.just(0))),
            norm=emb_norm,
            scale=scale,
            multiplier=draw(optional(st.sampled_from([12.0]))),
            scale_in_dtype=draw(optional(st.booleans())) if scale is True else OMIT,
        ),
        attention=mapping(
            bias=draw(optional(st.booleans())),
            scale_scores=scale_scores,
            qkv_bias=draw(optional(st.booleans())),
            qk_norm=qk_norm,
            qk_norm_scope=draw(optional(st.sampled_from(["head", "all"])))
            if qk_norm is True
            else OMIT,
            softcap=softcap,
            sinks=sinks,
            clip_qkv=draw(optional(st.sampled_from([0.5]))) if decoder else OMIT,
            scale_dim=scale_dim,
            scale=draw(optional(st.sampled_from([0.03125, 1.0])))
            if scale_dim is OMIT and scale_scores is not False
            else OMIT,
            sliding_window=window,
            window_pattern=pattern,
        ),
        mlp=mapping(
            gated=gated,
            activation=draw(optional(st.sampled_from(ACTIVATIONS))),
            bias=draw(optional(st.booleans())),
        ),
        moe=moe,
        head=head,
        **stacks,
    )
    if decoder and rope and draw(st.booleans()):
        # DeepSeek-V2's latent attention, with what it has no place for left out.
        spec["attention"] = {
            **{k: v for k, v in spec["attention"].items() if k == "window_pattern"},
            "latent": mapping(
                kv_rank=draw(st.integers(1, 8)),
                rope_dim=2 * draw(st.integers(1, 3)),
                nope_dim=draw(st.integers(1, 4)),
                v_dim=draw(st.integers(1, 4)),
                q_rank=draw(optional(st.one_of(st.none(), st.integers(1, 8)))),
            ),
        }
        spec["position"] = {k: v for k, v in spec["position"].items() if k != "rotary_dim"}
        for key in ("n_kv_heads", "head_dim"):
            spec.pop(key, None)
    elif rope and not encdec and draw(st.booleans()):
        # Positions per layer: P the stack's rotation, L a second one (Gemma 3), N none.
        letters = draw(st.from_regex(r"P[PLN]{0,3}", fullmatch=True))
        spec["position_pattern"] = letters
        if "L" in letters:
            same = {k: v for k, v in position.items() if k in ("rotary_dim", "interleaved")}
            scaling = draw(optional(st.sampled_from([{"type": "linear", "factor": 4.0}])))
            spec["local_position"] = mapping(
                theta=draw(st.floats(1.0, 1e6)), scaling=scaling, **same
            )
    return spec


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the spec files and generated modules of every example (hypothesis runs
    examples one after another; a function-scoped tmp_path would be shared by all anyway)."""
    return tmp_path_factory.mktemp("properties")


def write_spec(folder: Path, data: Any) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def compile_valid(folder: Path, data: dict[str, Any]) -> IR:
    path = write_spec(folder, data)
    note(path.read_text())
    return build_ir(load_spec(path))


def load(ir: IR, folder: Path) -> ModuleType:
    """Generate and import the model file for `ir`, leaving neither the module registered nor
    its file behind: a long run imports thousands of them."""
    module = load_generated(generate_source(ir), folder)
    sys.modules.pop(module.__name__, None)
    Path(module.__file__).unlink(missing_ok=True)
    return module


def features(data: dict[str, Any]) -> None:
    """Record what each example covers (shown with `pytest --hypothesis-show-statistics`)."""
    event(f"layout={data['layout']}")
    event(f"position={data['position']['kind']}")
    event(f"residual={data['residual']}")
    event(f"moe={bool(data.get('moe'))}")
    event(f"latent={'latent' in data['attention']}")


# --- valid specs: every backend agrees with the generated model -------------------------------


@given(data=valid_specs())
def test_count_equals_generated_model_and_printer(data: dict[str, Any], workdir: Path) -> None:
    features(data)
    ir = compile_valid(workdir, data)
    total = ir.value(parameter_count(ir.root))
    module = load(ir, workdir)
    with torch.device("meta"):
        model = module.Model()
    assert sum(p.numel() for p in model.parameters()) == total
    assert module_tree(ir).total == total
    assert module_repr(ir) == repr(model)
    result = runner.invoke(app, ["print", str(workdir / "spec.yaml")])
    assert result.exit_code == 0, result.output
    assert result.stdout == repr(model) + "\n"


EXECUTED = CONVENTIONS["executed"]


def at(expr: sp.Expr | None, values: dict[sp.Symbol, int]) -> int:
    result = sp.sympify(expr).xreplace(values)
    assert result.is_Integer, result
    return int(result)


def scalar(out: torch.Tensor | tuple[torch.Tensor, ...]) -> torch.Tensor:
    outputs = out if isinstance(out, tuple) else (out,)
    return sum(o.sum() for o in outputs)


@given(data=valid_specs(), sizes=st.data())
def test_executed_matmul_flops_equal_flop_counter(
    data: dict[str, Any], sizes: st.DataObject, workdir: Path
) -> None:
    """On the CPU with real tensors (a mixture of experts routes with torch.where, which the
    meta device cannot run) and SDPA on its math path, the path FlopCounterMode counts."""
    features(data)
    ir = compile_valid(workdir, data)
    max_seq_len, vocab_size = ir.value(ir.root.max_seq_len), ir.value(ir.root.vocab_size)
    b = sizes.draw(st.integers(1, 2), label="B")
    s = sizes.draw(st.integers(1, max_seq_len - 1), label="S")  # one more for decoding
    s_dec = sizes.draw(st.integers(1, max_seq_len - 1), label="S_dec")  # likewise
    module = load(ir, workdir)
    torch.manual_seed(0)
    model = module.Model()
    args = [torch.randint(vocab_size, (b, s))]
    if ir.root.layout == "encoder-decoder":
        args.append(torch.randint(vocab_size, (b, s_dec)))
    f = flop_figures(ir, EXECUTED)
    values = {**ir.env, B: b, S: s, S_DEC: s_dec}
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        out = model(*args)
        forward = counter.get_total_flops()
        scalar(out).backward()
        train_step = counter.get_total_flops()
    assert at(f.forward_matmul, values) == forward
    assert at(f.train_step_matmul, values) == train_step
    if hasattr(module, "KVCache"):  # a model that generates: one cached decode step
        if ir.root.layout == "encoder-decoder":
            # The encoder ran and the first decoder step projected its output into the
            # caches: a decode step projects no encoder keys or values.
            with torch.no_grad():
                memory = model.encoder(model.tok_emb(args[0]))

            def step(ids: torch.Tensor) -> torch.Tensor:
                return model.lm_head(model.decoder(model.tok_emb(ids), memory, cache=cache))

            prompt, cached = args[1], s_dec
        else:

            def step(ids: torch.Tensor) -> torch.Tensor:
                return model(ids, cache=cache)

            prompt, cached = args[0], s
        # Room for the prompt and one step: the step attends to cached + 1 keys.
        cache = [module.KVCache(cached + 1) for _ in model.decoder.blocks]
        with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
            step(prompt)
            with FlopCounterMode(display=False) as counter:
                step(torch.randint(vocab_size, (b, 1)))
        expected = at(f.decode_matmul, {**values, KV_LEN: cached + 1})
        assert expected == counter.get_total_flops()


# --- mutations: a valid spec or one clean SpecError, never anything else ------------------------

# Every key the spec language knows, to swap in where it does not belong.
SCHEMA_KEYS = [
    "name", "source", "layout", "d_model", "n_layers", "n_heads", "d_ff", "vocab_size",
    "max_seq_len", "n_kv_heads", "head_dim", "family", "hf_class", "abstract", "extends",
    "residual", "final_norm", "norm", "position", "embedding", "attention", "mlp", "moe",
    "head", "encoder", "decoder", "kind", "bias", "eps", "offset", "theta", "num_buckets",
    "max_distance", "token_types", "scale", "scale_scores", "qkv_bias", "gated", "activation",
    "n_experts", "top_k", "router_bias", "lm_head", "tied", "scale_tied_output", "pooler",
    "router", "expert_bias", "swiglu_limit", "swiglu_alpha",
]  # fmt: skip
ENUM_WORDS = [*LAYOUTS, *POSITIONS, *ACTIVATIONS, "pre", "post", "parallel", "layernorm"]
ENUM_WORDS += ["rmsnorm", "Pre", "ROPE", "batchnorm", "gpt2", "_llama", "../x.yaml"]
HOSTILE_STRINGS = [
    '"; import os; os.system("id"); "',
    "'''\nimport os\n'''",
    '"""\nimport os\n"""',
    "\\",
    "${HOME}",
    "$(id)",
    "`id`",
    "<script>",
    "\u2028",
    "\x85",
    "a" * 400,
    "../../etc/passwd",
    "__import__('os')",
    # Issue 19: characters a terminal acts on or that hide text, and rich markup.
    "\u202egnp.exe",
    "a\u200bb",
    "\x9b2J",
    "\x1b[31mred",
    "\u2066x\u2069",
    "[/bold]",
    "[link=https://evil.example]x[/link]",
    "x\nattention: {bias: true}",
]
# Issue 19: what `extends` may name: files outside the spec's folder, special files, itself.
HOSTILE_EXTENDS = [
    "../../../../etc/passwd",
    "/etc/passwd",
    "/etc/hostname.yaml",
    "/proc/self/pagemap",
    "/dev/zero",
    "/dev/null.yaml",
    "./spec.yaml",
    ".",
    "..",
    "gpt2\x00",
]

# Plausible values: of the right kind but chosen without regard to the rules between fields.
plausible = st.one_of(
    st.integers(-2, 12),
    st.booleans(),
    st.none(),
    st.sampled_from(ENUM_WORDS),
    st.sampled_from([1e-5, 0.5, 10000.0]),
)
# Out-of-range and odd numbers.
extreme_numbers = st.sampled_from(
    [0, -1, -(10**6), 2**63, 10**40, 0.0, -0.0, 1.5, 1e-320, 1e308, math.inf, -math.inf, math.nan]
    + [10**9, 10**9 + 1, 3 * 10**9, 10**12, 10**200, 10**2200, -(10**200)]  # issue 19
)
junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=30),
        st.sampled_from(HOSTILE_STRINGS),
        extreme_numbers,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(SCHEMA_KEYS), st.text(max_size=8)), children),
    ),
    max_leaves=6,
)
# Keys that are not strings reach the validator through --set (a YAML file refuses them).
odd_keys = st.one_of(
    st.text(max_size=12), st.integers(), st.booleans(), st.none(), st.sampled_from(SCHEMA_KEYS)
)


def paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in a nested mapping, mappings included."""
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out += paths(value, (*prefix, key))
    return out


def mappings(data: Any, prefix: tuple = ()) -> list[tuple]:
    """The paths of every mapping in a nested mapping, the root included."""
    out = [prefix] if isinstance(data, dict) else []
    if isinstance(data, dict):
        for key, value in data.items():
            out += mappings(value, (*prefix, key))
    return out


def get(data: Any, path: tuple) -> Any:
    for key in path:
        data = data[key]
    return data


def copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [copy(v) for v in data]
    return data


@st.composite
def mutated(draw: st.DrawFn, data: dict[str, Any]) -> dict[str, Any]:
    """One to three random mutations of a spec mapping."""
    data = copy(data)
    for _ in range(draw(st.integers(1, 3))):
        ops = ["delete", "replace", "extreme", "insert", "string", "wrap", "graft", "graft"]
        ops += ["deep", "extends"]  # issue 19
        op = draw(st.sampled_from(ops))
        keyed = paths(data)
        if op == "graft":  # a key and value from another valid spec: right types, odd mixes
            other = draw(valid_specs())
            path = draw(st.sampled_from(paths(other)))
            where = data
            for key in path[:-1]:
                where = where.setdefault(key, {}) if isinstance(where, dict) else where
            if isinstance(where, dict):
                where[path[-1]] = copy(get(other, path))
            continue
        if op == "extends":
            data["extends"] = draw(st.sampled_from(HOSTILE_EXTENDS))
            continue
        if op == "insert" or not keyed:
            where = get(data, draw(st.sampled_from(mappings(data))))
            where[draw(odd_keys)] = draw(st.one_of(plausible, junk))
            continue
        path = draw(st.sampled_from(keyed))
        parent, key = get(data, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(plausible)
        elif op == "extreme":
            parent[key] = draw(extreme_numbers)
        elif op == "string":
            parent[key] = draw(st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=20)))
        elif op == "wrap":  # a scalar where a mapping belongs, or the other way round
            value = parent[key]
            parent[key] = draw(junk) if isinstance(value, dict) else {key: value}
        elif op == "deep":  # nesting beyond the loader's depth limit (PyYAML's dumper recurses)
            value = parent[key]
            for _ in range(draw(st.integers(10, 150))):
                value = {key: value} if draw(st.booleans()) else [value]
            parent[key] = value
    return data


def check_every_backend(spec_path: Path | str, overrides: list[str], folder: Path) -> None:
    """Load; a SpecError is a clean outcome. A valid spec must go through every backend: the
    count, the printer, the FLOPs and the code generator, whose file must import."""
    try:
        spec = load_spec(spec_path, overrides)
    except SpecError as exc:
        assert str(exc).strip()
        event("SpecError")
        return
    event("valid")
    ir = build_ir(spec)
    total = ir.value(parameter_count(ir.root))
    assert module_tree(ir).total == total
    module_repr(ir)
    figures = flop_figures(ir, EXECUTED)
    at(figures.forward_matmul, {**ir.env, B: 1, S: 3, S_DEC: 2})
    module = load(ir, folder)
    assert module.Config().vocab_size == spec.vocab_size


def invoke_cli(args: list[str]) -> None:
    """Exit code 0 or 2, and a user error as one message: never an uncaught exception."""
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 2), (args, result.output, result.exception)
    if result.exit_code == 2:
        # (click's own usage errors say "Error" in a box)
        assert "Traceback" not in result.stderr and "error" in result.stderr.lower(), result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


@given(data=valid_specs().flatmap(mutated))
def test_mutated_specs_are_valid_or_a_spec_error(data: dict[str, Any], workdir: Path) -> None:
    path = write_spec(workdir, data)
    note(path.read_text())
    check_every_backend(path, [], workdir)
    for command in ("count", "print", "build"):
        invoke_cli([command, str(path)])


YAML_NOISE = list(":{}[]&*!|>-#'\"%@?,\n\t ") + ["!!float ", "!!binary ", "<<: ", "2001-13-45"]
# Issue 19: deep nesting, self-referencing aliases, YAML 1.1 numbers, merge keys, huge numbers.
YAML_NOISE += [
    "[" * 500,
    "{a: " * 200,
    "&a [*a]",
    "&m {x: *m}",
    " 010",
    " 1:30",
    "<<: {n_layers: 2}\n",
    "<<: [1, 2]\n",
    " " + "9" * 2500,
    "\u202e",
    "\x9b",
]


@st.composite
def broken_yaml(draw: st.DrawFn) -> str:
    """The YAML text of a valid spec with random characters inserted, deleted or replaced, or
    random text altogether."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.text(max_size=200))
    text = yaml.safe_dump(draw(valid_specs()), sort_keys=False)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        noise = draw(st.one_of(st.sampled_from(YAML_NOISE), st.text(max_size=3)))
        cut = draw(st.integers(0, 3))
        text = text[:i] + noise + text[i + cut :]
    return text


@given(text=broken_yaml())
def test_broken_yaml_text_is_valid_or_a_spec_error(text: str, workdir: Path) -> None:
    path = workdir / "spec.yaml"
    try:
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        assume(False)
    note(text)
    check_every_backend(path, [], workdir)
    invoke_cli(["count", str(path)])


def set_text(keys: list[Any], value: Any) -> str:
    """A --set argument; the value as YAML flow text, or raw text."""
    raw = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True)
    return ".".join(str(k) for k in keys) + "=" + raw.strip().removesuffix("...").strip()


def leaves(data: Any, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    """(key path, value) of every non-mapping value in a nested mapping."""
    if not isinstance(data, dict):
        return [(prefix, data)]
    return [item for key, value in data.items() for item in leaves(value, (*prefix, key))]


# --set with a key and value from another valid spec: well-typed, often against the rules.
grafted = valid_specs().flatmap(lambda d: st.sampled_from(leaves(d)))
overrides = st.lists(
    st.one_of(
        grafted.map(lambda item: set_text(list(item[0]), item[1])),
        grafted.map(lambda item: set_text(list(item[0]), item[1])),
        st.builds(
            set_text,
            st.lists(st.one_of(st.sampled_from(SCHEMA_KEYS), st.text(max_size=6)), max_size=3),
            st.one_of(plausible, junk, st.sampled_from(YAML_NOISE)),
        ),
        st.text(max_size=30),
    ),
    min_size=1,
    max_size=3,
)


@given(data=valid_specs(), sets=overrides)
def test_random_set_overrides_are_valid_or_a_spec_error(
    data: dict[str, Any], sets: list[str], workdir: Path
) -> None:
    path = write_spec(workdir, data)
    note(repr(sets))
    check_every_backend(path, sets, workdir)
    invoke_cli(["count", str(path), *(arg for text in sets for arg in ("--set", text))])


# --- issue 19: JSON inputs, output paths and checkpoint dtypes --------------------------------

JSON_NOISE = ["[" * 500, "{" * 200, '"a": 1, "a": 2', "9" * 5000, "\ud800", "\x1b", "NaN", "\ufeff"]
CONFIG = '{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2}'


@st.composite
def broken_json(draw: st.DrawFn) -> bytes:
    """A config.json with JSON noise spliced in, in one of the encodings people save it in."""
    text = CONFIG
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        noise = draw(st.one_of(st.sampled_from(JSON_NOISE), st.text(max_size=3)))
        text = text[:i] + noise + text[i + draw(st.integers(0, 3)) :]
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-16", "latin-1", "utf-8-sig"]))
    return text.encode(encoding, "surrogatepass" if "utf-8" in encoding else "replace")


@given(data=broken_json())
def test_config_json_is_imported_or_a_spec_error(data: bytes, workdir: Path) -> None:
    folder = workdir / "config"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_bytes(data)
    note(repr(data[:200]))
    invoke_cli(["import-hf", str(folder)])


OUTSIDE = "outside.txt"  # a file the outputs must never reach


@given(name=st.sampled_from(["/dev/null", "/dev/zero", "/dev/full", "/dev/stdout", "fifo",
                             "link", "dir", "dir/", "[/x].py", "ok.py", "a\x1bb.py",
                             "\u202eyp.py", "spec.yaml", "missing/x.py"]),
       force=st.booleans())  # fmt: skip
def test_output_paths_are_written_or_refused(name: str, force: bool, workdir: Path) -> None:
    import os

    folder = workdir / "outputs"
    folder.mkdir(exist_ok=True)
    outside = workdir / OUTSIDE
    outside.write_text("keep")
    (folder / "spec.yaml").write_text("extends: gpt2\nn_layers: 1\n")
    if not (folder / "fifo").exists():
        os.mkfifo(folder / "fifo")
        (folder / "link").symlink_to(outside)
        (folder / "dir").mkdir()
    path = name if name.startswith("/") else str(folder / name)
    args = ["build", str(folder / "spec.yaml"), "-o", path, *(["--force"] if force else [])]
    invoke_cli(args)
    assert outside.read_text() == "keep"
    assert (folder / "spec.yaml").read_text() == "extends: gpt2\nn_layers: 1\n"
    assert (folder / "fifo").is_fifo() and (folder / "link").is_symlink()


@given(
    dtype=st.sampled_from(
        [
            torch.int8,
            torch.int32,
            torch.int64,
            torch.uint8,
            torch.bool,
            torch.complex64,
            torch.float16,
            torch.bfloat16,
            torch.float64,
        ]
    )
)
def test_checkpoint_dtypes_load_or_are_refused(dtype: torch.dtype) -> None:
    from archspec.hf.weights import convert, to_hf

    ir = build_ir(load_spec("gpt2", ["n_layers=1", "d_model=4", "n_heads=1", "d_ff=4",
                                     "vocab_size=5", "max_seq_len=3"]))  # fmt: skip
    module_state = {
        name: torch.ones(tuple(int(d) for d in shape))
        for name, shape in _parameter_shapes(ir).items()
    }
    hf = to_hf(ir, module_state)
    hf = {k: v.to(dtype) if "wte" in k else v for k, v in hf.items()}
    try:
        out = convert(ir, hf)
    except SpecError as exc:
        assert not dtype.is_floating_point and "dtype" in str(exc)
        return
    assert dtype.is_floating_point and all(t.is_floating_point() for t in out.values())


def _parameter_shapes(ir: IR) -> dict[str, tuple[int, ...]]:
    import tempfile

    module = load(ir, Path(tempfile.gettempdir()))  # leaves no file behind
    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in module.Model().state_dict().items()}
