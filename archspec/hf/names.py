"""Our parameter names and transformers' state-dict names, derived from the IR.

Each family has a small vocabulary: what transformers calls each of our modules (`attn.q` is
`attention.self.query` in BERT, `self_attn.q_proj` in LLaMA) at the model, stack and block
level. Walking the IR with that vocabulary gives, for every tensor, a `TensorRule`: one
transformers tensor and the tensor(s) of ours it holds, with the operation between them
(a rename, GPT-2's Conv1D transpose, a fused query/key/value projection, Mixtral's stacked
experts, a tied copy). `weights.py` applies the rules; `count --names hf` shows them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import torch

from archspec.errors import SpecError
from archspec.hf.classes import HFClass, hf_class
from archspec.ir.nodes import IR, MLP, Block, Embedding, Linear, Node, Norm, Repeat
from archspec.ir.visit import walk

Shape = tuple[int, ...]

# --- What a module of ours is called in transformers ---------------------------------------


@dataclass(frozen=True)
class Target:
    """The transformers module (or tensor) that holds one module of ours."""

    module: str  # path relative to the base model (or to the whole model when `outside`)
    kind: str = "copy"  # copy | conv1d | fused | heads | experts
    part: int = 0  # which slice of a fused tensor
    parts: int = 1  # slices in the fused tensor
    outside: bool = False  # outside the base model (the LM head), so never prefixed
    params: dict[str, str] | None = None  # our param -> transformers tensor name (experts)
    aliases: tuple[str, ...] = ()  # modules that hold the same tensor (tied embeddings)
    note: str = ""  # shown by `count --names hf`


@dataclass(frozen=True)
class Where:
    """Where a module sits: stack role, block index and what its block contains."""

    role: str | None  # encoder | decoder | None (model level)
    index: str | None  # block index: a digit or an index letter (i, j, ...)
    local: str  # path inside the block (or stack, or model) with expert indices as '*'
    experts: tuple[str, ...]  # the expert indices replaced by '*'
    cross: bool  # the block has cross-attention
    gated: bool  # the block's MLP is gated
    roles: tuple[str, ...]  # the stacks of the model


Lookup = Callable[[Where], "Target | str | None"]


@dataclass(frozen=True)
class Family:
    """One family's vocabulary. Names are relative to the base model."""

    model_type: str
    prefix: str  # the base model's attribute in head classes, with a dot ("transformer.")
    model: Lookup  # tok_emb, type_emb, pooler, lm_head
    stack: Lookup  # pos_emb, emb_norm, final_norm
    blocks: Callable[[str], str]  # role -> the block list ("encoder.layer")
    block: Lookup  # attn.q, attn_norm, mlp.up, ...
    # Buffers some checkpoints carry: (name, check, shape transformers gives it or None).
    buffers: Callable[[IR, str], list[tuple[str, Callable, Shape | None]]] | None = None
    variants: tuple[str, ...] = ("checkpoint",)


def _table(entries: dict[str, Target | str]) -> Lookup:
    return lambda w: entries.get(w.local)


def _lm_head(w: Where) -> Target | None:
    return Target("lm_head", outside=True) if w.local == "lm_head" else None


def _chain(*lookups: Lookup) -> Lookup:
    def find(w: Where) -> Target | str | None:
        for lookup in lookups:
            found = lookup(w)
            if found is not None:
                return found
        return None

    return find


# BERT and RoBERTa share their names (RobertaModel is a BertModel with other embeddings).
_BERT_BLOCK = _table(
    {
        "attn.q": "attention.self.query",
        "attn.k": "attention.self.key",
        "attn.v": "attention.self.value",
        "attn.o": "attention.output.dense",
        "attn_norm": "attention.output.LayerNorm",
        "mlp.up": "intermediate.dense",
        "mlp.down": "output.dense",
        "mlp_norm": "output.LayerNorm",
    }
)


def _bert(model_type: str, prefix: str) -> Family:
    return Family(
        model_type,
        prefix,
        model=_table(
            {
                "tok_emb": "embeddings.word_embeddings",
                "type_emb": "embeddings.token_type_embeddings",
                "pooler": "pooler.dense",
            }
        ),
        stack=_table(
            {"pos_emb": "embeddings.position_embeddings", "emb_norm": "embeddings.LayerNorm"}
        ),
        blocks=lambda role: "encoder.layer",
        block=_BERT_BLOCK,
        buffers=lambda ir, role: [
            ("embeddings.position_ids", _is_arange, None),
            ("embeddings.token_type_ids", _is_zero, None),
        ],
    )


def _conv1d_block(attn_norm: str, mlp_norm: str) -> Lookup:
    """GPT-2 and GPT-1: Conv1D layers (weights stored transposed), one fused q/k/v."""
    return _table(
        {
            "attn_norm": attn_norm,
            "attn.q": Target("attn.c_attn", "fused", 0, 3, note="q slice, Conv1D"),
            "attn.k": Target("attn.c_attn", "fused", 1, 3, note="k slice, Conv1D"),
            "attn.v": Target("attn.c_attn", "fused", 2, 3, note="v slice, Conv1D"),
            "attn.o": Target("attn.c_proj", "conv1d", note="Conv1D"),
            "mlp_norm": mlp_norm,
            "mlp.up": Target("mlp.c_fc", "conv1d", note="Conv1D"),
            "mlp.down": Target("mlp.c_proj", "conv1d", note="Conv1D"),
        }
    )


def _gpt_buffers(ir: IR, role: str) -> list[tuple[str, Callable, Shape | None]]:
    # Older GPT checkpoints store the causal mask of every block.
    return [
        ("h.{i}.attn.bias", _is_causal_mask, None),
        ("h.{i}.attn.masked_bias", _anything, None),
    ]


def _t5_block(w: Where) -> Target | str | None:
    ff = 2 if w.cross else 1  # layer.0 self-attention, [layer.1 cross-attention], feed-forward
    names = {
        "attn_norm": "layer.0.layer_norm",
        "attn.rel_bias": "layer.0.SelfAttention.relative_attention_bias",
        "cross_norm": "layer.1.layer_norm",
        "mlp_norm": f"layer.{ff}.layer_norm",
        "mlp.gate": f"layer.{ff}.DenseReluDense.wi_0",
        "mlp.up": f"layer.{ff}.DenseReluDense.{'wi_1' if w.gated else 'wi'}",
        "mlp.down": f"layer.{ff}.DenseReluDense.wo",
    }
    for p in "qkvo":
        names[f"attn.{p}"] = f"layer.0.SelfAttention.{p}"
        names[f"cross_attn.{p}"] = f"layer.1.EncDecAttention.{p}"
    return names.get(w.local)


def _shared_embedding(w: Where) -> Target | None:
    """T5 and BART: `shared`, which each stack's `embed_tokens` ties to."""
    if w.local != "tok_emb":
        return None
    return Target("shared", aliases=tuple(f"{r}.embed_tokens" for r in w.roles))


def _bart_block(w: Where) -> str | None:
    names = {
        "attn_norm": "self_attn_layer_norm",
        "cross_norm": "encoder_attn_layer_norm",
        "mlp.up": "fc1",
        "mlp.down": "fc2",
        "mlp_norm": "final_layer_norm",
    }
    for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
        names[f"attn.{ours}"] = f"self_attn.{theirs}"
        names[f"cross_attn.{ours}"] = f"encoder_attn.{theirs}"
    return names.get(w.local)


_LLAMA_BLOCK = _table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "post_attention_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
        # Mixtral, as its checkpoints store it (transformers 5 renames on load, back on save).
        "moe.router": "block_sparse_moe.gate",
        "moe.experts.*.gate": "block_sparse_moe.experts.*.w1",
        "moe.experts.*.up": "block_sparse_moe.experts.*.w3",
        "moe.experts.*.down": "block_sparse_moe.experts.*.w2",
    }
)


def _mixtral_module_block(w: Where) -> Target | str | None:
    """Mixtral as transformers 5 holds it in memory: all experts of a layer in two tensors."""
    names: dict[str, Target | str] = {
        "moe.router": "mlp.gate",
        "moe.experts.*.gate": Target(
            "mlp.experts",
            "experts",
            0,
            2,
            params={"weight": "gate_up_proj"},
            note="gate half, experts stacked",
        ),
        "moe.experts.*.up": Target(
            "mlp.experts",
            "experts",
            1,
            2,
            params={"weight": "gate_up_proj"},
            note="up half, experts stacked",
        ),
        "moe.experts.*.down": Target(
            "mlp.experts",
            "experts",
            0,
            1,
            params={"weight": "down_proj"},
            note="experts stacked",
        ),
    }
    return names.get(w.local) or _LLAMA_BLOCK(w)


def _rope_buffers(ir: IR, role: str) -> list[tuple[str, Callable, Shape | None]]:
    # Older LLaMA checkpoints store the rotary frequencies of every layer.
    check = _is_inv_freq(ir)
    return [
        ("layers.{i}.self_attn.rotary_emb.inv_freq", check, None),
        ("rotary_emb.inv_freq", check, None),
    ]


def _llama(model_type: str) -> Family:
    return Family(
        model_type,
        "model.",
        model=_chain(_table({"tok_emb": "embed_tokens"}), _lm_head),
        stack=_table({"final_norm": "norm"}),
        blocks=lambda role: "layers",
        block=_LLAMA_BLOCK,
        buffers=_rope_buffers,
        variants=("checkpoint", "module") if model_type == "mixtral" else ("checkpoint",),
    )


FAMILIES: dict[str, Family] = {
    "bert": _bert("bert", "bert."),
    "roberta": _bert("roberta", "roberta."),
    "gpt2": Family(
        "gpt2",
        "transformer.",
        model=_chain(_table({"tok_emb": "wte"}), _lm_head),
        stack=_table({"pos_emb": "wpe", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=_conv1d_block("ln_1", "ln_2"),
        buffers=_gpt_buffers,
    ),
    "openai-gpt": Family(
        "openai-gpt",
        "transformer.",
        model=_chain(_table({"tok_emb": "tokens_embed"}), _lm_head),
        stack=_table({"pos_emb": "positions_embed"}),
        blocks=lambda role: "h",
        block=_conv1d_block("ln_1", "ln_2"),  # post-norm: ln_1 after attention, ln_2 after MLP
        buffers=_gpt_buffers,
    ),
    "t5": Family(
        "t5",
        "",
        model=_chain(_shared_embedding, _lm_head),
        stack=lambda w: {"final_norm": f"{w.role}.final_layer_norm"}.get(w.local),
        blocks=lambda role: f"{role}.block",
        block=_t5_block,
    ),
    "bart": Family(
        "bart",
        "model.",
        model=_chain(_shared_embedding, _lm_head),
        stack=lambda w: {
            "pos_emb": f"{w.role}.embed_positions",
            "emb_norm": f"{w.role}.layernorm_embedding",
        }.get(w.local),
        blocks=lambda role: f"{role}.layers",
        block=_bart_block,
        # The LM head's bias is a zero buffer (final_logits_bias) outside the base model.
        buffers=lambda ir, role: [("@final_logits_bias", _is_zero, (1, ir.spec.vocab_size))],
    ),
    "llama": _llama("llama"),
    "mistral": _llama("mistral"),
    "mixtral": _llama("mixtral"),
    "bloom": Family(
        "bloom",
        "transformer.",
        model=_chain(_table({"tok_emb": "word_embeddings"}), _lm_head),
        stack=_table({"emb_norm": "word_embeddings_layernorm", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=_table(
            {
                "attn_norm": "input_layernorm",
                "attn.q": Target(
                    "self_attention.query_key_value",
                    "heads",
                    0,
                    3,
                    note="q slice, interleaved per head",
                ),
                "attn.k": Target(
                    "self_attention.query_key_value",
                    "heads",
                    1,
                    3,
                    note="k slice, interleaved per head",
                ),
                "attn.v": Target(
                    "self_attention.query_key_value",
                    "heads",
                    2,
                    3,
                    note="v slice, interleaved per head",
                ),
                "attn.o": "self_attention.dense",
                "mlp_norm": "post_attention_layernorm",
                "mlp.up": "mlp.dense_h_to_4h",
                "mlp.down": "mlp.dense_4h_to_h",
            }
        ),
    ),
    "opt": Family(
        "opt",
        "model.",
        model=_chain(_table({"tok_emb": "decoder.embed_tokens"}), _lm_head),
        stack=_table(
            {"pos_emb": "decoder.embed_positions", "final_norm": "decoder.final_layer_norm"}
        ),
        blocks=lambda role: "decoder.layers",
        block=_bart_block,
    ),
}


# --- Checks for buffers that some checkpoints store ----------------------------------------


def _anything(t: torch.Tensor) -> str | None:
    return None


def _is_zero(t: torch.Tensor) -> str | None:
    return None if t.is_meta or not torch.any(t != 0) else "is not all zeros"


def _is_arange(t: torch.Tensor) -> str | None:
    if t.is_meta:
        return None
    expected = torch.arange(t.shape[-1]).expand_as(t)
    return None if torch.equal(t.long(), expected) else "is not 0, 1, 2, ..."


def _is_causal_mask(t: torch.Tensor) -> str | None:
    if t.is_meta or t.dim() < 2:
        return None
    n, m = t.shape[-2:]
    expected = torch.tril(torch.ones(n, m, dtype=torch.bool)).expand(t.shape)
    return None if torch.equal(t.bool(), expected) else "is not a causal (lower-triangular) mask"


def _is_inv_freq(ir: IR) -> Callable[[torch.Tensor], str | None]:
    theta = ir.spec.position.theta

    def check(t: torch.Tensor) -> str | None:
        if t.is_meta:
            return None
        dim = 2 * t.numel()
        expected = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if torch.allclose(t.double().flatten(), expected, rtol=1e-4):
            return None
        return f"does not match the spec's rope theta ({theta:g})"

    return check


# --- Operations between a transformers tensor and ours -------------------------------------


@dataclass(frozen=True)
class TensorRule:
    """One transformers tensor and the tensors of ours it holds.

    `join` builds the transformers tensor from ours; `split` does the reverse. A rule whose
    tensor another rule also provides (tied copies) is `optional`; a rule with no tensor of
    ours is a buffer that is only checked.
    """

    hf: str
    ours: tuple[str, ...]
    shapes: tuple[Shape, ...]  # of ours, in order
    kind: str = "copy"  # copy | transpose | concat | concat_t | heads | experts | buffer
    n_heads: int = 0  # heads: query heads of the fused projection
    group: int = 1  # experts: tensors of ours per expert
    optional: bool = False
    check: Callable[[torch.Tensor], str | None] | None = None
    buffer_shape: Shape | None = None  # a buffer transformers' own state dict holds (zeros)

    def join(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        k = self.kind
        if k == "copy":
            return tensors[0]
        if k == "transpose":
            return tensors[0].t()
        if k == "concat":
            return torch.cat(tensors, 0)
        if k == "concat_t":
            return torch.cat(tensors, 0).t()
        if k == "heads":
            h = self.n_heads
            per_head = [t.reshape(h, -1, *t.shape[1:]) for t in tensors]
            return torch.stack(per_head, 1).reshape(-1, *tensors[0].shape[1:])
        if k == "experts":
            g = self.group
            chunks = [torch.cat(tensors[e : e + g], 0) for e in range(0, len(tensors), g)]
            return torch.stack(chunks, 0)
        raise ValueError(k)

    def split(self, t: torch.Tensor) -> list[torch.Tensor]:
        k = self.kind
        if k == "copy":
            return [t]
        if k == "transpose":
            return [t.t()]
        if k in ("concat", "concat_t"):
            x = t.t() if k == "concat_t" else t
            return list(x.split([s[0] for s in self.shapes], 0))
        if k == "heads":
            h, n = self.n_heads, len(self.ours)
            rest = t.shape[1:]
            parts = t.reshape(h, n, -1, *rest).unbind(1)
            return [p.reshape(-1, *rest) for p in parts]
        if k == "experts":
            g = self.group
            sizes = [s[0] for s in self.shapes[:g]]
            return [piece for e in t.unbind(0) for piece in e.split(sizes, 0)]
        raise ValueError(k)

    def hf_shape(self) -> Shape:
        if not self.ours:
            return self.buffer_shape or ()
        return tuple(self.join([torch.empty(s, device="meta") for s in self.shapes]).shape)


# --- Walking the IR ----------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """A parameter-owning module of ours, at one concrete place."""

    node: Node
    path: str  # concrete: decoder.blocks.3.attn.q
    symbolic: str  # with index letters: decoder.blocks.i.attn.q
    where: Where


def _where(
    segments: list[str], indexed: list[bool], ancestors: tuple[Node, ...], roles: tuple[str, ...]
) -> Where:
    """`indexed[k]`: segment k is the index of a repeated module (a block, an expert)."""
    role = segments[0] if segments[0] in roles and len(segments) > 1 else None
    index = None
    start = 1 if role else 0
    if role and segments[1] == "blocks" and indexed[2]:
        index, start = segments[2], 3
    rest = list(zip(segments[start:], indexed[start:], strict=True))
    return Where(
        role=role,
        index=index,
        local=".".join("*" if is_index else seg for seg, is_index in rest),
        experts=tuple(seg for seg, is_index in rest if is_index),
        cross=any(isinstance(a, Block) and a.part("cross_attn") is not None for a in ancestors),
        gated=any(isinstance(a, MLP) and a.gated for a in ancestors),
        roles=roles,
    )


def leaves(ir: IR, concrete: bool = True, symbolic_names: bool = True) -> Iterator[Leaf]:
    """Every parameter-owning module; with `concrete`, once per copy with real indices, else
    once per row of the count table, named with index letters (`symbolic_names`) or as the
    table names it (a run of one keeps its index: T5's `blocks.0.attn.rel_bias`)."""
    roles = tuple(p.name for p in ir.root.parts if p.name in ("encoder", "decoder"))
    for placed in walk(ir.root):
        node = placed.node
        if not isinstance(node, (Embedding, Linear, Norm)):
            continue
        # One path segment per node below the root: its name, or its index under a Repeat.
        chain = (*placed.ancestors, node)
        indexed = [isinstance(parent, Repeat) for parent in chain[:-1]]
        symbolic = placed.path.split(".")
        ranges = []
        for parent, child in zip(chain, chain[1:], strict=False):
            if isinstance(parent, Repeat):
                run = next(r for r in parent.runs if r.node is child)
                start = ir.value(run.start)
                ranges.append([str(n) for n in range(start, start + ir.value(run.count))])
        if not concrete:
            segments = symbolic if symbolic_names else placed.concrete_path.split(".")
            yield Leaf(
                node,
                ".".join(segments),
                placed.path,
                _where(segments, indexed, placed.ancestors, roles),
            )
            continue
        positions = [k for k, is_index in enumerate(indexed) if is_index]
        for combo in itertools.product(*ranges):
            segments = list(symbolic)
            for k, value in zip(positions, combo, strict=True):
                segments[k] = value
            yield Leaf(
                node,
                ".".join(segments),
                placed.path,
                _where(segments, indexed, placed.ancestors, roles),
            )


# --- Naming ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Naming:
    """The names of one spec's tensors in one transformers class."""

    cls: HFClass
    family: Family
    base: bool  # names without the base-model prefix
    variant: str = "checkpoint"

    def full(self, name: str, outside: bool = False) -> str:
        if name.startswith("@"):  # outside the base model by construction
            return name[1:]
        return name if (outside or self.base) else self.family.prefix + name

    def target(self, leaf: Leaf) -> Target:
        w = leaf.where
        fam = self.family
        if w.role is None:
            found = fam.model(w)
        elif w.index is None:
            found = fam.stack(w)
        else:
            block = fam.block
            if self.variant == "module" and fam.model_type == "mixtral":
                block = _mixtral_module_block
            found = block(w)
            if found is not None:
                found = found if isinstance(found, Target) else Target(found)
                found = replace(found, module=f"{fam.blocks(w.role)}.{w.index}.{found.module}")
        if found is None:
            raise SpecError(
                f"'{leaf.symbolic}' has no counterpart in transformers' {self.cls.name}",
                hint="the spec differs from the transformers architecture here; "
                "`archspec import-hf` writes a spec that matches",
            )
        target = found if isinstance(found, Target) else Target(found)
        module = target.module
        for index in w.experts:
            module = module.replace("*", index, 1)
        return replace(target, module=module)

    def display(self, leaf: Leaf) -> str:
        """The transformers module name for a row of `count --names hf`."""
        t = self.target(leaf)
        text = self.full(t.module, t.outside)
        if t.params:
            text += "." + "/".join(sorted(set(t.params.values())))
        if isinstance(leaf.node, Linear) and leaf.node.tied_to:
            text += f" (tied to {self.full(self.target(_tok_emb_leaf(leaf)).module)})"
        elif t.note:
            text += f" ({t.note})"
        return text


def _tok_emb_leaf(leaf: Leaf) -> Leaf:
    where = Where(None, None, "tok_emb", (), False, False, leaf.where.roles)
    return Leaf(leaf.node, "tok_emb", "tok_emb", where)


def naming(ir: IR, base: bool | None = None, variant: str = "checkpoint") -> Naming:
    """The naming of `ir`'s spec in its transformers class (`hf_class`)."""
    spec = ir.spec
    if not spec.hf_class:
        raise SpecError(
            f"'{spec.name}' has no transformers counterpart (hf_class is null)",
            hint="transformers names exist for specs with an hf_class; see `archspec list`",
        )
    cls = hf_class(spec.hf_class)
    family = FAMILIES[cls.model_type]
    return Naming(cls, family, cls.base if base is None else base, variant)


def hf_module_names(ir: IR) -> dict[str, str]:
    """Our module path (symbolic and concrete) -> transformers module name, for display."""
    n = naming(ir)
    names: dict[str, str] = {}
    for symbolic_names in (True, False):
        for leaf in leaves(ir, concrete=False, symbolic_names=symbolic_names):
            names.setdefault(leaf.path, n.display(leaf))
    return names


# --- Rules ---------------------------------------------------------------------------------


def _our_params(ir: IR, node: Node) -> list[tuple[str, Shape]]:
    v = ir.value
    if isinstance(node, Embedding):
        return [("weight", (v(node.num), v(node.dim)))]
    if isinstance(node, Linear):
        params = [] if node.tied_to else [("weight", (v(node.out_features), v(node.in_features)))]
        return params + ([("bias", (v(node.out_features),))] if node.bias else [])
    if isinstance(node, Norm):
        return [("weight", (v(node.dim),))] + ([("bias", (v(node.dim),))] if node.bias else [])
    raise TypeError(node)


@dataclass
class _Group:
    kind: str
    parts: int  # tensors of ours per slice (experts: gate and up share gate_up_proj)
    members: list[tuple[int, str, Shape]] = field(default_factory=list)


def tensor_rules(n: Naming, ir: IR) -> list[TensorRule]:
    """Every transformers tensor of the spec, with the tensors of ours it holds."""
    groups: dict[str, _Group] = {}
    aliases: list[TensorRule] = []
    order: list[str] = []
    for leaf in leaves(ir):
        t = n.target(leaf)
        for param, shape in _our_params(ir, leaf.node):
            ours = f"{leaf.path}.{param}"
            name = (t.params or {}).get(param, param)
            hf = n.full(f"{t.module}.{name}", t.outside)
            if t.kind == "experts":
                kind, part = "experts", int(leaf.where.experts[-1]) * t.parts + t.part
            elif t.kind == "fused":
                kind, part = ("concat_t" if param == "weight" else "concat"), t.part
            elif t.kind == "conv1d":
                kind, part = ("transpose" if param == "weight" else "copy"), 0
            else:
                kind, part = t.kind, t.part
            if hf not in groups:
                groups[hf] = _Group(kind, t.parts)
                order.append(hf)
            groups[hf].members.append((part, ours, shape))
            for alias in t.aliases:
                aliases.append(
                    TensorRule(n.full(f"{alias}.{name}"), (ours,), (shape,), optional=True)
                )
        if isinstance(leaf.node, Linear) and leaf.node.tied_to:
            # A tied head: transformers keeps its own name for the shared matrix.
            shape = (ir.value(leaf.node.out_features), ir.value(leaf.node.in_features))
            aliases.append(
                TensorRule(
                    n.full(f"{t.module}.weight", t.outside),
                    (leaf.node.tied_to,),
                    (shape,),
                    optional=True,
                )
            )
    rules = []
    for hf in order:
        g = groups[hf]
        members = sorted(g.members)
        rules.append(
            TensorRule(
                hf,
                tuple(m[1] for m in members),
                tuple(m[2] for m in members),
                kind=g.kind,
                n_heads=ir.spec.n_heads if g.kind == "heads" else 0,
                group=g.parts if g.kind == "experts" else 1,
            )
        )
    known = {r.hf for r in rules}
    rules += [a for a in aliases if a.hf not in known]
    rules += _buffer_rules(n, ir)
    return rules


def _buffer_rules(n: Naming, ir: IR) -> list[TensorRule]:
    if n.family.buffers is None:
        return []
    rules = []
    roles = [p.name for p in ir.root.parts if p.name in ("encoder", "decoder")]
    for role in roles:
        n_layers = ir.spec.stack_layers(role)
        for pattern, check, shape in n.family.buffers(ir, role):
            if pattern.startswith("@") and n.cls.head != "lm":
                continue
            names = (
                [pattern.replace("{i}", str(i)) for i in range(n_layers)]
                if "{i}" in pattern
                else [pattern]
            )
            for name in names:
                rules.append(
                    TensorRule(
                        n.full(name),
                        (),
                        (),
                        "buffer",
                        optional=True,
                        check=check,
                        buffer_shape=shape,
                    )
                )
    unique = {r.hf: r for r in rules}
    return list(unique.values())


def describe_shape(shape: Shape) -> str:
    return " × ".join(str(s) for s in shape) if shape else "scalar"
