"""Mellum (`model_type: mellum`, JetBrains/Mellum2-12B-A2.5B): Qwen3-MoE's decoder (an RMSNorm
over each head's queries and keys before RoPE, softmax top-k routing renormalised when
`norm_topk_prob`, no shared expert) with a sliding window (1024 by default) on the layers
`layer_types` names (by default none: every layer full) and RoPE per layer type
(`rope_parameters: {full_attention: ..., sliding_attention: ...}`, by default bases 500,000
and 10,000), read as the spec's `position` (the full layers') and `local_position` (the
windowed layers', where it differs), as OLMo 3 and Gemma 3 read theirs. `mlp_layer_types`
says which layers keep a dense MLP (`intermediate_size` wide): archspec expresses dense
layers only as the first ones of the stack (`moe.dense_layers`).

MellumRotaryEmbedding would build a partial rotation from a layer type's
`partial_rotary_factor`, but MellumAttention rotates the whole head by it and fails; such a
file is refused. MellumConfig reads no top-level `rope_theta` (ignored) and turns a
`rope_scaling` into one flat `rope_parameters` the model cannot read (refused). The
multi-token-prediction settings (`num_mtp_layers`, `mtp_*`) build nothing in transformers
(MellumForCausalLM drops `mtp.*` tensors on load): ignored. Checkpoints keep one module per
expert; transformers 5 stacks them in memory (`mlp.experts.gate_up_proj`), as for Qwen3-MoE."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
from archspec.hf.families._layer_rope import (
    TYPES,
    check_local_layers,
    local_layers,
    rope_per_type,
    write_rope_per_type,
)
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern, windows
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.qwen3_moe import CHECKPOINT_BLOCK, QK_NORMS
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=7168, kv_heads=4, max_positions=131072, rms_eps=1e-6, vocab_size=98304)
# MellumConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2304, "num_hidden_layers": 28, "head_dim": 128}
WINDOW = 1024
# MellumConfig's rope_parameters when the file has none; it reads no top-level rope_theta.
THETAS = {"sliding_attention": (None, 10000.0), "full_attention": (None, 500000.0)}
MLP_TYPES = ("dense", "sparse")


def _partial_factors(f: Fields) -> None:
    """A layer type's partial_rotary_factor: refused unless the whole head (MellumAttention
    rotates every channel by the table, which a partial factor makes too narrow); a factor of
    one is dropped, as it changes nothing."""
    given = f.get("rope_parameters")
    if not isinstance(given, dict):
        return
    cleaned = dict(given)
    for layer_type in TYPES:
        setting = given.get(layer_type)
        if not isinstance(setting, dict) or "partial_rotary_factor" not in setting:
            continue
        factor = setting["partial_rotary_factor"]
        if factor not in (None, 1, 1.0):
            raise f.error(
                f"rope_parameters.{layer_type}.partial_rotary_factor",
                f"{shown(factor)}: MellumRotaryEmbedding builds a table that narrow, but "
                "MellumAttention rotates the whole head by it, which transformers cannot run",
            )
        cleaned[layer_type] = {k: v for k, v in setting.items() if k != "partial_rotary_factor"}
    f.data = {**f.data, "rope_parameters": cleaned}


def _dense_layers(f: Fields, n_layers: int) -> int:
    """mlp_layer_types (dense / sparse per layer; every layer sparse by default) as the number
    of dense first layers."""
    types = f.get("mlp_layer_types")
    if types is None:
        return 0
    if (
        not isinstance(types, list)
        or len(types) != n_layers
        or any(t not in MLP_TYPES for t in types)
    ):
        raise f.error(
            "mlp_layer_types", f"expected {n_layers} of dense / sparse, got {shown(types)}"
        )
    dense = types.index("sparse") if "sparse" in types else n_layers
    if "dense" in types[dense:]:
        raise f.error(
            "mlp_layer_types",
            f"dense MLPs on layers {[i for i, t in enumerate(types) if t == 'dense']}: archspec "
            "expresses dense layers only as the first ones of the stack (moe.dense_layers)",
        )
    return dense


def import_mellum(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    if f.get("rope_scaling"):
        raise f.error(
            "rope_scaling",
            "MellumConfig turns it into one rope_parameters for every layer, which "
            "MellumRotaryEmbedding (reading them per layer type) cannot read",
        )
    f.harmless("rope_scaling")  # null or empty: MellumConfig keeps its own
    f.ignored("rope_theta", "MellumConfig (the bases are rope_parameters', per layer type)")
    f.ignored(
        "partial_rotary_factor", "MellumRotaryEmbedding (it reads rope_parameters' per layer type)"
    )
    # MellumConfig deletes Qwen3-MoE's window and dense-layer fields; MellumModel reads
    # layer_types and mlp_layer_types instead.
    for key in (
        "use_sliding_window",
        "max_window_layers",
        "decoder_sparse_step",
        "mlp_only_layers",
    ):
        f.ignored(key, "MellumConfig (layer_types and mlp_layer_types say it)")
    for key in ("num_mtp_layers", "num_nextn_predict_layers", "mtp_layer_types",
                "mtp_mlp_layer_types"):  # fmt: skip
        f.ignored(key, "transformers' Mellum (no class builds the MTP layers)")
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    n = f.int("num_hidden_layers", 28)
    types = check_layer_types(f, f.get("layer_types") or ["full_attention"] * n, n)
    dense = _dense_layers(f, n)
    _partial_factors(f)
    ropes = rope_per_type(f, THETAS, scaled=None)
    f.data = {k: v for k, v in f.data.items() if k != "rope_parameters"}
    spec = import_llama_like(f, cls, VARIANT)
    spec["position"] = ropes["full_attention" if "full_attention" in types else "sliding_attention"]
    spec["attention"] |= {"bias": f.bool("attention_bias", False), "qk_norm": True}
    spec["attention"] |= windows(f, types, WINDOW)
    local_layers(f, spec, window_pattern(f, types), ropes["sliding_attention"])
    spec["moe"] = {
        "n_experts": f.int("num_experts", 64, "num_local_experts"),
        "top_k": f.int("num_experts_per_tok", 8),
        "router_bias": False,
        "dense_layers": dense,
        "d_ff": f.int("moe_intermediate_size", 896),
        "normalize": f.bool("norm_topk_prob", True),
    }
    return spec


def export_mellum(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if (moe is None or moe.shared_d_ff or moe.router != "softmax" or moe.router_bias
            or not spec.attention.qk_norm):  # fmt: skip
        raise SpecError(
            "MellumForCausalLM has q/k norms and softmax-routed experts without a shared one: "
            "the spec needs attention.qk_norm and moe, without moe.shared_d_ff"
        )
    if spec.position.kind != "rope":
        raise SpecError("Mellum rotates its queries and keys (RoPE)", path="position")
    check_local_layers(spec, "Mellum")
    fields = export_llama_like(spec)
    del fields["rope_theta"]  # MellumConfig reads rope_parameters per layer type alone
    types = layer_types(spec)
    return {
        **fields,
        "attention_bias": spec.attention.bias,
        "rope_parameters": write_rope_per_type(spec),
        "layer_types": types,
        "sliding_window": spec.attention.sliding_window if "sliding_attention" in types else None,
        "num_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "moe_intermediate_size": moe.d_ff or spec.d_ff,
        "norm_topk_prob": moe.normalize,
        "mlp_layer_types": [
            "dense" if i < moe.dense_layers else "sparse" for i in range(spec.n_layers)
        ],  # fmt: skip
    }


FAMILY = Family(
    model_type="mellum",
    classes=(
        HFClass("MellumForCausalLM", "mellum", "lm", base=False),
        HFClass("MellumModel", "mellum", "none", base=True),
    ),
    bases=("_mellum",),
    import_config=import_mellum,
    export_config=export_mellum,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        block_variants={"module": chain(QK_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
