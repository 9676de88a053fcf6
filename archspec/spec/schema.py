"""The spec language: typed dataclasses that a validated YAML spec becomes.

Every field a spec may carry is declared here, with its type, default and a one-line meaning
(the `position` section's, one record per kind, in `position.py`).
Structure is expressed as named choices (`residual: pre | post | parallel`) rather than a pile of
booleans, and the canonical dimension names sit at the top level of a spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec import kinds
from archspec.kinds.positions import POSITION_KINDS, Position
from archspec.kinds.positions.learned import Learned
from archspec.kinds.positions.none import NoPosition
from archspec.safety.text import UNSAFE_CLASS
from archspec.spec.fields import doc

Layout = Literal["encoder", "decoder", "encoder-decoder"]
Residual = Literal["pre", "post", "parallel", "parallel_two_norms", "sandwich", "output_norm"]
NormKind = Literal[
    "layernorm", "rmsnorm", "offset_rmsnorm", "offset_layernorm", "nonparametric_layernorm"
]
Activation = Literal["gelu", "gelu_tanh", "relu", "silu", "squared_relu"]
QKNormScope = Literal["head", "all"]
Router = Literal["softmax", "sigmoid", "topk_softmax", "softmax_bias", "softmax_in_dtype"]
EmbeddingProjection = Literal["after_norm", "around_stack"]


# Allow-lists for the strings a spec may carry (they reach generated code and file names).
NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}"  # llama-2-7b, flan-t5-small, _llama
IDENTIFIER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,99}"  # a Python class name
# One line of visible text: no control, bidi or invisible character (archspec/safety/text.py),
# no quotes, backslashes or backticks (it is written into a docstring of the generated code).
TEXT_WORDS = (
    "one line of visible text, at most 300 characters, without quotes, backslashes or backticks"
)
TEXT_PATTERN = f'[^{UNSAFE_CLASS}\\\\"`]{{0,300}}'
WINDOW_PATTERN = r"[LG]{1,64}"  # a sliding window's layers, cycled: L windowed, G full
# Each layer's positions, cycled: P `position`, L `local_position`, N none.
POSITION_PATTERN = r"[PLN]{1,64}"


@dataclass(frozen=True)
class NormSpec:
    kind: NormKind = field(
        default="layernorm",
        metadata=doc(
            "layernorm, rmsnorm, offset_rmsnorm (Gemma: scale 1 + w, in float32) or "
            "nonparametric_layernorm (OLMo: no weight, no bias, in float32)"
        ),
    )
    bias: bool | None = field(
        default=None, metadata=doc("a learned bias beside the scale; default: layernorm only")
    )
    eps: float = field(default=1e-5, metadata=doc("epsilon added to the variance", positive=True))
    first_attention: bool = field(
        default=True,
        metadata=doc(
            "a pre-norm stack's first block normalises its attention's input; false: it has "
            "no norm there, the embedding norm standing in (ModernBERT's layer 0)"
        ),
    )

    @property
    def has_bias(self) -> bool:
        return self.bias if self.bias is not None else kinds.norm(self.kind).bias_by_default


@dataclass(frozen=True)
class EmbeddingSpec:
    token_types: int = field(
        default=0, metadata=doc("segment (token type) embeddings, as in BERT; 0 for none", min=0)
    )
    norm: bool = field(default=False, metadata=doc("a norm right after the embeddings"))
    scale: bool = field(default=False, metadata=doc("multiply token embeddings by sqrt(d_model)"))
    dim: int | None = field(
        default=None,
        metadata=doc(
            "width of the token, position and segment embeddings when it differs from d_model "
            "(ALBERT, ELECTRA): they are normed at this width, then projected to d_model",
            positive=True,
        ),
    )
    projection: EmbeddingProjection = field(
        default="after_norm",
        metadata=doc(
            "with dim: after_norm (ALBERT, ELECTRA: a projection with a bias after the "
            "embedding norm) or around_stack (OPT-350m: project_in before the positions, "
            "project_out after the stack, both without bias; no embedding norm, pooler or "
            "token-score head)"
        ),
    )
    scale_in_dtype: bool = field(
        default=False,
        metadata=doc("that factor rounded to the embeddings' dtype first (Gemma), not a float"),
    )
    multiplier: float = field(
        default=1.0,
        metadata=doc(
            "multiply token embeddings by this (Granite's embedding_multiplier)", positive=True
        ),
    )


@dataclass(frozen=True)
class LatentSpec:
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, Section 2.1): keys and
    values come up from one small latent per token, which is what a KV cache keeps, and each
    head's queries and keys have a part without positions and a rotated part, the rotated key
    shared by all heads."""

    kv_rank: int = field(
        metadata=doc("width of the key/value latent (kv_lora_rank: 512)", positive=True)
    )
    rope_dim: int = field(
        metadata=doc(
            "channels of each head's query and of the one shared key that RoPE turns "
            "(qk_rope_head_dim: 64)",
            positive=True,
        )
    )
    nope_dim: int = field(
        metadata=doc("channels of each head's query and key without positions (128)", positive=True)
    )
    v_dim: int = field(metadata=doc("width of each head's value (v_head_dim: 128)", positive=True))
    q_rank: int | None = field(
        default=None,
        metadata=doc(
            "queries through a latent of this width too (q_lora_rank: 1536); none: one projection",
            positive=True,
        ),
    )
    yarn_mscale: float | None = field(
        default=None,
        metadata=doc(
            "with YaRN (position.scaling: yarn), the scores' scale 1/sqrt(nope_dim + rope_dim) "
            "is multiplied by m², m = 0.1 yarn_mscale ln(position.factor) + 1 (DeepSeek's "
            "mscale_all_dim: 0.707)",
            positive=True,
        ),
    )
    eps: float | None = field(
        default=None,
        metadata=doc(
            "epsilon of the latents' RMSNorms (DeepSeek-V2: 1e-6 always); default norm.eps",
            positive=True,
        ),
    )


@dataclass(frozen=True)
class AttentionSpec:
    bias: bool = field(default=False, metadata=doc("biases on the q, k, v and output projections"))
    qkv_bias: bool | None = field(
        default=None,
        metadata=doc("biases on q, k and v alone, overriding `bias` there (Qwen2: true, o none)"),
    )
    scale_scores: bool = field(
        default=True, metadata=doc("divide scores by sqrt(head_dim); T5 does not")
    )
    qk_norm: bool = field(
        default=False,
        metadata=doc(
            "a norm (the spec's kind) over each head's queries and keys, before RoPE (Qwen3)"
        ),
    )
    qk_norm_scope: QKNormScope = field(
        default="head",
        metadata=doc(
            "what qk_norm normalises: each head's own channels (head, Qwen3) or the whole "
            "projection, all heads together (all, OLMo 2)"
        ),
    )
    softcap: float | None = field(
        default=None,
        # Positive: transformers caps whenever the cap is not None, and a cap of 0 divides
        # by zero (NaN scores); a negative cap is the positive one written oddly.
        metadata=doc(
            "soft-cap the scores, cap·tanh(scores / cap), before the mask (Gemma 2: 50)",
            positive=True,
        ),
    )
    sinks: bool = field(
        default=False,
        metadata=doc(
            "attention sinks (gpt-oss): one learned logit per query head, softmaxed with each "
            "query's scores as an extra key whose value is zero (`sinks`, n_heads parameters)"
        ),
    )
    scale_dim: int | None = field(
        default=None,
        metadata=doc(
            "divide scores by sqrt(this), not sqrt(head_dim) (Gemma 2's query_pre_attn_scalar)",
            positive=True,
        ),
    )
    scale: float | None = field(
        default=None,
        metadata=doc(
            "multiply scores by this, not 1/sqrt(head_dim) (Granite's attention_multiplier)",
            positive=True,
        ),
    )
    clip_qkv: float | None = field(
        default=None,
        metadata=doc(
            "decoders: clamp q, k and v to [-clip_qkv, clip_qkv] after their projections (OLMo)",
            positive=True,
        ),
    )
    sliding_window: int | None = field(
        default=None,
        metadata=doc(
            "keys a query sees in a windowed layer, its own included (Mistral: 4096); in an "
            "encoder, on each side (ModernBERT: 65, local_attention / 2 + 1); none: all",
            positive=True,
        ),
    )
    window_pattern: str = field(
        default="L",
        metadata=doc(
            "which layers the window applies to, cycled over the layers: L windowed (local), "
            "G full (global); L every layer (Mistral), LG alternating from a windowed first "
            "layer (Gemma 2)",
            pattern=WINDOW_PATTERN,
            expects="a string of L (windowed) and G (full) letters",
        ),
    )
    latent: LatentSpec | None = field(
        default=None,
        metadata=doc("multi-head latent attention (DeepSeek-V2) instead of q, k and v"),
    )


@dataclass(frozen=True)
class MLPSpec:
    gated: bool = field(
        default=False, metadata=doc("gated (GLU) MLP: act(gate(x)) * up(x); d_ff is one branch")
    )
    activation: Activation = field(default="gelu", metadata=doc("activation function"))
    bias: bool = field(default=True, metadata=doc("biases on the MLP projections"))


@dataclass(frozen=True)
class MoESpec:
    n_experts: int = field(default=8, metadata=doc("experts per layer", positive=True))
    top_k: int = field(default=2, metadata=doc("experts each token is routed to", positive=True))
    router_bias: bool = field(default=False, metadata=doc("a bias on the router"))
    router: Router = field(
        default="softmax",
        metadata=doc(
            "how the router's logits become weights: softmax (Mixtral, DeepSeek-V2; groups "
            "ranked by their best expert), sigmoid (DeepSeek-V3: sigmoid scores plus a "
            "per-expert e_score_correction_bias for choosing only, groups ranked by the sum of "
            "their two best experts), topk_softmax (gpt-oss: the top_k logits, then a softmax "
            "over those k in the logits' dtype; they sum to 1, so moe.normalize does not apply; "
            "no groups) or softmax_bias (ERNIE 4.5: softmax probabilities plus a per-expert "
            "e_score_correction_bias for choosing only, renormalised by their sum clamped to "
            "at least 1e-12; no groups) or softmax_in_dtype (DBRX: softmax's, in the logits' "
            "dtype rather than float32, renormalised by the chosen weights' 1-norm; no groups)"
        ),
    )
    dense_layers: int = field(
        default=0,
        metadata=doc("first layers of each stack keeping a dense MLP (DeepSeek, Qwen-MoE)", min=0),
    )
    d_ff: int | None = field(
        default=None,
        metadata=doc("hidden width of each expert; default d_ff (Qwen-MoE: 1408)", positive=True),
    )
    normalize: bool = field(
        default=True,
        metadata=doc("renormalise the top_k probabilities to sum to 1 (Mixtral; not Qwen1.5-MoE)"),
    )
    shared_d_ff: int = field(
        default=0,
        metadata=doc("width of a shared expert every token also goes through; 0: none", min=0),
    )
    shared_gate: bool = field(
        default=False,
        metadata=doc("scale the shared expert by sigmoid(linear(x)) (Qwen2-MoE)"),
    )
    groups: int = field(
        default=1,
        metadata=doc(
            "experts in this many equal groups; a token's experts come from the top_groups "
            "groups whose best expert scores highest (DeepSeek's group_limited_greedy n_group)",
            positive=True,
        ),
    )
    top_groups: int = field(
        default=1,
        metadata=doc("groups a token's experts may come from (topk_group)", positive=True),
    )
    routed_scale: float = field(
        default=1.0,
        metadata=doc(
            "the top_k weights multiplied by this (DeepSeek's routed_scaling_factor)",
            positive=True,
        ),
    )
    expert_bias: bool = field(
        default=False,
        metadata=doc(
            "a bias on every routed expert's projections, stored stacked (n_experts, out) "
            "beside their weights (gpt-oss); mlp.bias gives them one too"
        ),
    )
    swiglu_limit: float | None = field(
        default=None,
        metadata=doc(
            "gpt-oss's clamped SwiGLU in the routed experts, with swiglu_alpha: gate clamped "
            "to at most limit, up to [-limit, limit], then (up + 1) * gate * sigmoid(alpha * "
            "gate); needs mlp.gated; dense and shared MLPs keep mlp.activation",
            positive=True,
        ),
    )
    swiglu_alpha: float | None = field(
        default=None,
        metadata=doc(
            "the clamped SwiGLU's sigmoid scale (gpt-oss: 1.702); given with swiglu_limit",
            positive=True,
        ),
    )


@dataclass(frozen=True)
class DropoutSpec:
    """Dropout probabilities, applied in training only (where GPT-2, BERT, T5 and Megatron-LM
    place them). 0 (the default) emits no dropout at all."""

    attention: float = field(
        default=0.0, metadata=doc("on the attention probabilities", min=0.0, below=1.0)
    )
    hidden: float = field(
        default=0.0,
        metadata=doc("on each sublayer's output, before the residual add", min=0.0, below=1.0),
    )
    embedding: float | None = field(
        default=None,
        metadata=doc("on the embeddings (after their norm); default: hidden", min=0.0, below=1.0),
    )
    mlp: float = field(
        default=0.0, metadata=doc("on the MLP's hidden units (T5, BART)", min=0.0, below=1.0)
    )
    output: float = field(
        default=0.0,
        metadata=doc("on each stack's output, after its final norm (T5)", min=0.0, below=1.0),
    )

    @property
    def embeddings(self) -> float:
        """The embedding dropout: `embedding`, or the hidden dropout when it is left out."""
        return self.embedding if self.embedding is not None else self.hidden


@dataclass(frozen=True)
class HeadSpec:
    lm_head: bool = field(default=True, metadata=doc("a language-model head over the vocabulary"))
    tied: bool = field(default=True, metadata=doc("the head shares the token embedding matrix"))
    bias: bool = field(default=False, metadata=doc("a bias on the head"))
    scale_tied_output: bool = field(
        default=False, metadata=doc("T5: scale hidden states by d_model**-0.5 before a tied head")
    )
    pooler: bool = field(default=False, metadata=doc("BERT's pooler: tanh(dense(first token))"))
    transform: bool = field(
        default=False,
        metadata=doc(
            "masked-LM heads (BERT, RoBERTa, ALBERT): dense to the embeddings' width, "
            "activation and norm before the vocabulary projection"
        ),
    )
    transform_activation: Activation | None = field(
        default=None,
        metadata=doc("the transform's activation; default mlp.activation (RoBERTa: gelu)"),
    )
    transform_bias: bool = field(
        default=True, metadata=doc("a bias on the transform's dense (ModernBERT: none)")
    )
    token_score: bool = field(
        default=False,
        metadata=doc(
            "ELECTRA's discriminator: dense, activation and one score per token (replaced or "
            "not) instead of hidden states"
        ),
    )
    softcap: float | None = field(
        default=None,
        metadata=doc("soft-cap the logits, cap·tanh(logits / cap) (Gemma 2: 30)", positive=True),
    )
    logits_divisor: float = field(
        default=1.0,
        metadata=doc("divide the logits by this (Granite's logits_scaling)", positive=True),
    )
    hidden_divisor: float = field(
        default=1.0,
        metadata=doc(
            "divide the final hidden states by this before the LM head (MiniCPM3's "
            "hidden_size / dim_model_base)",
            positive=True,
        ),
    )
    logit_scale: float = field(
        default=1.0,
        metadata=doc("multiply the logits by this (Cohere's logit_scale)", positive=True),
    )
    decoder_start_token: int | None = field(
        default=None,
        metadata=doc("encoder-decoders: the decoder's first token when generating"),
    )


@dataclass(frozen=True)
class StackSpec:
    """Per-stack overrides for encoder-decoders."""

    n_layers: int | None = field(default=None, metadata=doc("layers in this stack", positive=True))


@dataclass(frozen=True)
class Spec:
    """A fully resolved, validated architecture. Derived defaults are filled in."""

    # Strings end up in generated code and file names, so each one has an allow-list pattern.
    name: str = field(metadata=doc("the spec's name", pattern=NAME_PATTERN))
    # Optional (a spec without it gets a warning): keyword-only, so that the required
    # dimensions after it keep no default.
    source: str | None = field(
        default=None,
        kw_only=True,
        metadata=doc(
            "where the numbers come from (a URL or paper)",
            pattern=TEXT_PATTERN,
            expects=TEXT_WORDS,
        ),
    )
    layout: Layout = field(metadata=doc("encoder, decoder or encoder-decoder"))
    d_model: int = field(metadata=doc("width of the residual stream", positive=True))
    n_layers: int = field(metadata=doc("blocks per stack", positive=True))
    n_heads: int = field(metadata=doc("attention (query) heads", positive=True))
    d_ff: int = field(metadata=doc("MLP hidden width (one branch when gated)", positive=True))
    vocab_size: int = field(metadata=doc("token vocabulary", positive=True))
    max_seq_len: int = field(metadata=doc("longest sequence the model is built for", positive=True))
    n_kv_heads: int | None = field(
        default=None, metadata=doc("key/value heads: = n_heads MHA, 1 MQA, else GQA", positive=True)
    )
    head_dim: int | None = field(
        default=None, metadata=doc("width of one head; default d_model / n_heads", positive=True)
    )
    layer_groups: int | None = field(
        default=None,
        metadata=doc(
            "distinct blocks per stack when layers share weights (ALBERT's num_hidden_groups): "
            "each runs n_layers / layer_groups times in a row; default n_layers, no sharing",
            positive=True,
        ),
    )
    family: str = field(default="", metadata=doc("model family, e.g. llama", pattern=NAME_PATTERN))
    hf_class: str | None = field(
        default=None, metadata=doc("the transformers class, if any", pattern=IDENTIFIER_PATTERN)
    )
    abstract: bool = field(default=False, metadata=doc("a family base, not a model"))
    residual: Residual = field(
        default="pre",
        metadata=doc(
            "pre-norm, post-norm, parallel (one norm) or parallel_two_norms (one per branch)"
        ),
    )
    residual_multiplier: float = field(
        default=1.0,
        metadata=doc(
            "multiply each sublayer's output by this before the residual add (Granite)",
            positive=True,
        ),
    )
    final_norm: bool | None = field(
        default=None, metadata=doc("a norm after the last block; default: not for post-norm")
    )
    norm: NormSpec = field(default_factory=NormSpec, metadata=doc("normalisation layers"))
    position: Position = field(
        default_factory=Learned,
        metadata=doc(
            "positions: a record chosen by kind (" + ", ".join(POSITION_KINDS) + ")",
            tag="kind",
            choices=POSITION_KINDS,
        ),
    )
    local_position: Position | None = field(
        default=None,
        metadata=doc(
            "the positions of the layers marked L in position_pattern, a rotation of its own "
            "(Gemma 3's and ModernBERT's local layers: rope with theta 10000)",
            tag="kind",
            choices=POSITION_KINDS,
            default_tag="rope",
        ),
    )
    position_pattern: str = field(
        default="P",
        metadata=doc(
            "which positions each layer's attention uses, cycled over the layers: P "
            "`position`, L `local_position`, N none (SmolLM3's NoPE layers: PPPN); P every "
            "layer by default",
            pattern=POSITION_PATTERN,
            expects="a string of P (position), L (local_position) and N (no positions) letters",
        ),
    )
    embedding: EmbeddingSpec = field(default_factory=EmbeddingSpec, metadata=doc("embeddings"))
    attention: AttentionSpec = field(default_factory=AttentionSpec, metadata=doc("attention"))
    mlp: MLPSpec = field(default_factory=MLPSpec, metadata=doc("feed-forward network"))
    moe: MoESpec | None = field(default=None, metadata=doc("mixture of experts instead of the MLP"))
    head: HeadSpec = field(default_factory=HeadSpec, metadata=doc("output heads"))
    dropout: DropoutSpec = field(
        default_factory=DropoutSpec, metadata=doc("dropout probabilities (training only)")
    )
    encoder: StackSpec = field(default_factory=StackSpec, metadata=doc("encoder overrides"))
    decoder: StackSpec = field(default_factory=StackSpec, metadata=doc("decoder overrides"))

    @property
    def resolved_head_dim(self) -> int:
        """The width of one head: `head_dim`, or d_model / n_heads when it is left out."""
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def embedding_dim(self) -> int:
        """The width of the embeddings: `embedding.dim`, or d_model when it is left out."""
        return self.embedding.dim if self.embedding.dim is not None else self.d_model

    @property
    def shares_layers(self) -> bool:
        return self.layer_groups is not None and self.layer_groups != self.n_layers

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def has_final_norm(self) -> bool:
        if self.final_norm is not None:
            return self.final_norm
        return kinds.residual(self.residual).final_norm_by_default

    @property
    def roles(self) -> tuple[str, ...]:
        """The stacks: ('encoder', 'decoder') for an encoder-decoder, else the layout."""
        if self.layout == "encoder-decoder":
            return ("encoder", "decoder")
        return (self.layout,)

    def windowed(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) attends through the sliding window."""
        pattern = self.attention.window_pattern
        return self.attention.sliding_window is not None and pattern[layer % len(pattern)] == "L"

    def position_letter(self, layer: int) -> str:
        """Which positions layer `layer` (0-based) uses: P, L or N of position_pattern."""
        pattern = self.position_pattern
        return pattern[layer % len(pattern)]

    def layer_position(self, layer: int) -> Position:
        """The positions layer `layer`'s attention uses: `position`, `local_position` or
        none."""
        return self.layer_position_of(self.position_letter(layer))

    def layer_position_of(self, letter: str) -> Position:
        """The positions of a position_pattern letter: P, L or N."""
        if letter == "L":
            assert self.local_position is not None, "validation asks for it"
            return self.local_position
        return self.position if letter == "P" else NoPosition()

    def stack_layers(self, role: str) -> int:
        """Layers in the 'encoder' or 'decoder' stack."""
        override = getattr(self, role).n_layers
        return override if override is not None else self.n_layers
