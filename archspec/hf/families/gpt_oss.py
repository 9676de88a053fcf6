"""gpt-oss (`model_type: gpt_oss`, OpenAI's gpt-oss-20b and -120b): a pre-norm RMSNorm decoder
whose attention has biases on all four projections, a learned sink logit per head in every
softmax (`sinks`), windowed and full layers alternating (`layer_types`, by default windowed
first) and YaRN RoPE; every MLP is a mixture of experts routed by a biased router whose top_k
logits are softmaxed (GptOssTopKRouter), each expert with biases and a clamped SwiGLU
(`swiglu_limit`, `swiglu_alpha`).

transformers holds a layer's experts in four tensors (`mlp.experts.gate_up_proj`, (experts,
in, out), gate and up alternating channel by channel, and their biases); the unquantized
checkpoints store the same names. The released checkpoints store the experts in MXFP4
(`quantization_config`), which every family refuses: the architecture is the file's without it.
"""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families._windows import alternating, check_layer_types, layer_types, windows
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=2880,
    kv_heads=8,
    max_positions=131072,
    rms_eps=1e-5,
    biases=True,
    mlp_bias=False,
    vocab_size=201088,
    rope_theta=150000.0,
)
# GptOssConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {
    "hidden_size": 2880,
    "num_hidden_layers": 36,
    "num_attention_heads": 64,
    "head_dim": 64,
    "attention_bias": True,
}
# GptOssConfig's rope_parameters when a file gives none.
DEFAULT_ROPE = {
    "rope_type": "yarn",
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
}


def import_gpt_oss(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    if not f.present("rope_parameters") and not f.present("rope_scaling"):
        f.data["rope_parameters"] = {**DEFAULT_ROPE, "rope_theta": f.get("rope_theta", 150000.0)}
    # GptOssModel reads neither: the experts' activation is the clamped SwiGLU below.
    f.ignored("hidden_act", "GptOssModel (its experts apply their own clamped SwiGLU)")
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    spec = import_llama_like(f, cls, VARIANT)
    n_layers = spec["n_layers"]
    types = check_layer_types(f, f.get("layer_types") or alternating(n_layers), n_layers)
    spec["attention"] |= {"sinks": True, **windows(f, types, 128)}
    spec["moe"] = {
        "n_experts": f.int("num_local_experts", 128, "num_experts"),
        "top_k": f.int("num_experts_per_tok", 4),
        "router": "topk_softmax",
        "router_bias": True,
        "expert_bias": True,
        "swiglu_limit": f.float("swiglu_limit", 7.0),
        "swiglu_alpha": f.float("swiglu_alpha", 1.702),
    }
    return spec


def export_gpt_oss(spec: Spec) -> dict[str, Any]:
    moe, attn = spec.moe, spec.attention
    if (
        moe is None
        or moe.router != "topk_softmax"
        or not (moe.router_bias and moe.expert_bias)
        or moe.swiglu_limit is None
        or moe.dense_layers
        or moe.shared_d_ff
        or not attn.sinks
        or not attn.bias
    ):
        raise SpecError(
            "GptOssForCausalLM has attention sinks and biases, and in every layer experts "
            "routed by a biased topk_softmax router, each with biases and a clamped SwiGLU: "
            "the spec needs attention.sinks, attention.bias, moe.router: topk_softmax, "
            "moe.router_bias, moe.expert_bias and moe.swiglu_limit, without dense layers or a "
            "shared expert"
        )
    windowed = [spec.windowed(i) for i in range(spec.n_layers)]
    fields = export_llama_like(spec)
    del fields["hidden_act"]  # GptOssConfig's is unused; the experts' SwiGLU is below
    return fields | {
        "attention_bias": True,
        "sliding_window": attn.sliding_window if any(windowed) else None,
        "layer_types": layer_types(spec),
        "num_local_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "swiglu_limit": moe.swiglu_limit,
        "swiglu_alpha": moe.swiglu_alpha,
    }


def _experts(part: int, parts: int, weight: str, note: str) -> Target:
    return Target(
        "mlp.experts",
        "experts",
        part,
        parts,
        params={"weight": weight, "bias": f"{weight}_bias"},
        interleaved=parts > 1,
        transposed=True,
        note=note,
    )


BLOCK = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "attn.sinks": "self_attn.sinks",
        "mlp_norm": "post_attention_layernorm",
        "moe.router": "mlp.router",
        "moe.experts.*.gate": _experts(0, 2, "gate_up_proj", "gate channels (even), stacked"),
        "moe.experts.*.up": _experts(1, 2, "gate_up_proj", "up channels (odd), stacked"),
        "moe.experts.*.down": _experts(0, 1, "down_proj", "experts stacked, (in, out)"),
    }
)

FAMILY = Family(
    model_type="gpt_oss",
    classes=(
        HFClass("GptOssForCausalLM", "gpt_oss", "lm", base=False),
        HFClass("GptOssModel", "gpt_oss", "none", base=True),
    ),
    bases=("_gpt_oss",),
    import_config=import_gpt_oss,
    export_config=export_gpt_oss,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
