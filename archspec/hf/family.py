"""What is true of one Hugging Face model_type, as one record: `Family`.

A family says which transformers classes it has (one per head kind), how a config.json of its
model_type reads into spec fields and how a spec writes back into one, which built-in base a
spec of it extends, what transformers calls each of our modules, and which buffers its
checkpoints may carry. Each family lives in one module of `archspec.hf.families`; the generic
code (`import_config`, `names`, `tensor_rules`, `export_config`) only looks families up.

Nothing here imports torch: `import-hf` and `count --names hf` never do. Buffer checks are
therefore named here and implemented where torch is at hand (`tensor_rules.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from archspec.hf.config_fields import Fields
    from archspec.ir.nodes import IR
    from archspec.spec.schema import Spec

Head = Literal["lm", "pooler", "none", "score"]
Shape = tuple[int, ...]


# --- Classes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HFClass:
    """A transformers class archspec maps onto.

    A head class (`GPT2LMHeadModel`) keeps its base model under an attribute (`transformer.`),
    so its state-dict keys carry that prefix; a base class (`GPT2Model`, `BertModel`) has none.
    """

    name: str
    model_type: str  # the config.json `model_type` whose names it uses
    # lm: a language-model head; pooler: BERT's pooler; none: hidden states only; score:
    # ELECTRA's discriminator, one score per token
    head: Head
    base: bool  # a base model: state-dict keys without the base-model prefix
    layout: str | None = None  # forced layout (T5EncoderModel), else the family's
    # The transformers class that builds it, when `name` is the class of the checkpoint's own
    # code and transformers maps its model_type onto another family's class (EXAONE 3 and
    # InternLM3 are built as LlamaForCausalLM): a file may name either.
    implementation: str | None = None

    @property
    def transformers_name(self) -> str:
        """The class transformers instantiates for it."""
        return self.implementation or self.name


@dataclass(frozen=True)
class UnsupportedHeads:
    """Head classes of a family that a spec cannot express, and what to use instead."""

    classes: tuple[str, ...]
    # What the spec language lacks for each class, for the error message.
    what: dict[str, str]
    instead: str  # the class to import instead (its base model)
    weights: tuple[str, ...]  # globs of the heads' checkpoint keys, to skip when loading


# --- Names -----------------------------------------------------------------------------------


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
    # heads: the groups the fused rows interleave, when not the key/value heads (CodeGen's q,
    # v, k per shard of the 4 it was trained on)
    groups: int = 0
    # experts: gate and up alternate channel by channel in the fused tensor (gpt-oss's
    # gate_up_proj[..., ::2] and [..., 1::2]), not one half then the other (Mixtral's)
    interleaved: bool = False
    # experts: each expert's matrix stored (in, out), as x @ W multiplies it (gpt-oss), not
    # nn.Linear's (out, in)
    transposed: bool = False
    # experts: the experts' matrices one after another in one 2-D tensor, (experts * rows,
    # cols) (DBRX's w1, v1, w2), not stacked along a first dimension of their own
    flat: bool = False
    note: str = ""  # shown by `count --names hf`


@dataclass(frozen=True)
class Where:
    """Where a module of ours sits: stack role, block index and what its block contains."""

    role: str | None  # encoder | decoder | None (model level)
    index: str | None  # block index: a digit or an index letter (i, j, ...)
    local: str  # path inside the block (or stack, or model) with expert indices as '*'
    experts: tuple[str, ...]  # the expert indices replaced by '*'
    cross: bool  # the block has cross-attention
    gated: bool  # the block's MLP is gated
    roles: tuple[str, ...]  # the stacks of the model
    residual: str | None = None  # the block's residual kind (Falcon names its norms by it)


# What transformers calls the module at a place: a plain rename, a Target, or None (no rule).
Lookup = Callable[[Where], "Target | str | None"]


@dataclass(frozen=True)
class NameRules:
    """A family's vocabulary, at three levels: the model, a stack, a block. Names are relative
    to the base model; a block's are relative to the block (`blocks(role)` + its index)."""

    prefix: str  # the base model's attribute in head classes, with a dot ("transformer.")
    model: Lookup  # tok_emb, type_emb, pooler, lm_head
    stack: Lookup  # pos_emb, emb_norm, final_norm
    blocks: Callable[[str], str]  # role -> the block list ("encoder.layer")
    block: Lookup  # attn.q, attn_norm, mlp.up, ...
    # Other layouts a state dict may come in, by name, with their block vocabulary (Mixtral's
    # files differ from its in-memory module); "checkpoint" is `block` itself.
    block_variants: dict[str, Lookup] = field(default_factory=dict)
    # The same at the model level (GPT-NeoX's head: `embed_out` in files, `lm_head` in memory).
    model_variants: dict[str, Lookup] = field(default_factory=dict)
    # Whole other vocabularies, prefix and stacks included (EXAONE 3's files name its own
    # code's modules, `transformer.h.0.attn.attention.q_proj`; transformers' memory LLaMA's).
    layouts: dict[str, NameRules] = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        named = [*self.block_variants, *self.model_variants, *self.layouts]
        return ("checkpoint", *dict.fromkeys(named))

    def in_variant(self, variant: str) -> NameRules:
        """The rules a state dict of `variant` is named by."""
        return self.layouts.get(variant, self)

    def model_in(self, variant: str) -> Lookup:
        return self.model_variants.get(variant, self.model)

    def block_in(self, variant: str) -> Lookup:
        return self.block_variants.get(variant, self.block)


# --- Buffers ---------------------------------------------------------------------------------

# The checks a stored buffer may need (implemented in tensor_rules.CHECKS, with torch).
BufferCheck = Literal[
    "anything", "zeros", "arange", "causal_mask", "rope_inv_freq", "sinusoids", "rope_sinusoids"
]


@dataclass(frozen=True)
class Buffer:
    """A buffer some checkpoints of the family store: checked, never loaded.

    `name` is relative to the base model, as for names; `{i}` stands for each block's index,
    and a leading `@` puts it outside the base model (it exists only in LM-head classes).
    """

    name: str
    check: BufferCheck
    # The shape transformers' own state dict gives it (it is written as zeros), or None when
    # transformers' state dict has none.
    shape: Callable[[IR], Shape] | None = None


# --- The record ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """Everything archspec knows about one transformers model_type."""

    model_type: str
    # Its classes, the default first (what a config.json naming none is imported as).
    classes: tuple[HFClass, ...]
    # Built-in bases an imported spec may extend, best first on a tie of overrides.
    bases: tuple[str, ...]
    # config.json (as `Fields`) and the chosen class -> the spec fields they determine.
    import_config: Callable[[Fields, HFClass], dict[str, Any]]
    # A spec -> config.json's architecture fields (`export_config` adds model_type and class).
    export_config: Callable[[Spec], dict[str, Any]]
    names: NameRules
    buffers: tuple[Buffer, ...] = ()
    spec_family: str | None = None  # a family name to set over the base's
    class_aliases: dict[str, str] = field(default_factory=dict)  # old class names -> current
    unsupported_heads: UnsupportedHeads | None = None

    @property
    def default_class(self) -> HFClass:
        return self.classes[0]

    @property
    def variants(self) -> tuple[str, ...]:
        """The layouts a state dict of this family may come in."""
        return self.names.variants
