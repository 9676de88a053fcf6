"""ERNIE 4.5 MoE (`model_type: ernie4_5_moe`, ERNIE-4.5-21B-A3B and -300B-A47B): ERNIE 4.5's
decoder (RoPE on interleaved channel pairs, a head tied by default) whose MLPs, on the layers
`moe_layer_start_index` to `moe_layer_end_index` every `moe_layer_interval`, are mixtures of
`moe_num_experts` experts of width `moe_intermediate_size` beside `moe_num_shared_experts`
shared ones (one MLP that many times as wide), as transformers' modeling_ernie4_5_moe.py
computes them: a float32 softmax router choosing the top `moe_k` by the probabilities plus
`e_score_correction_bias`, weighing by the unbiased probabilities divided by their sum
clamped to at least `moe_norm_min` (`moe.router: softmax_bias`).

transformers holds the correction as a frozen parameter (requires_grad false), one row of
`moe_num_experts` per MoE layer, which its num_parameters() counts; archspec keeps it as a
buffer, as DeepSeek-V3's, and counts the trainable parameters (the import says so in a note).
Checkpoints keep one module per expert and the correction at `mlp.moe_statics`; transformers 5
stacks the experts in memory and keeps the correction under the router (`mlp.gate`)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    rope_theta=500000.0,
    d_ff=12288,
    kv_heads=4,
    max_positions=131072,
    rms_eps=1e-5,
    vocab_size=103424,
)
# Ernie4_5_MoeConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2560, "num_hidden_layers": 28, "num_attention_heads": 20}
NORM_MIN = 1e-12  # the clamp of the renormalising sum the softmax_bias router applies
EXPERT_FIELDS = (
    "moe_num_experts", "num_experts", "moe_k", "num_experts_per_tok", "moe_intermediate_size",
    "moe_num_shared_experts", "moe_norm_min",
)  # fmt: skip


def dense_first_layers(f: Fields, n_layers: int) -> int:
    """How many first layers keep a dense MLP: transformers builds experts on the layers i
    with (i + 1) % moe_layer_interval == 0 and start <= i <= end (an end of -1 is the last
    layer). archspec expresses dense layers only as the first ones of the stack, experts on
    every layer after them (moe.dense_layers): other patterns are refused."""
    start = f.int("moe_layer_start_index", 1)
    end = f.int("moe_layer_end_index", -1)
    interval = f.count("moe_layer_interval", 1)
    last = n_layers - 1 if end == -1 else end
    moe = [i for i in range(n_layers) if (i + 1) % interval == 0 and start <= i <= last]
    if not moe:
        return n_layers
    if moe != list(range(moe[0], n_layers)):
        field = "moe_layer_interval" if interval != 1 else "moe_layer_end_index"
        raise f.error(
            field,
            f"experts on layers {shown(moe)} of {n_layers}: archspec expresses dense layers "
            "only as the first ones of the stack, experts on every layer after them "
            "(moe.dense_layers)",
        )
    return moe[0]


def _moe(f: Fields, n_layers: int) -> dict[str, Any] | None:
    """The spec's `moe` section, or None when every layer is dense."""
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    dense = dense_first_layers(f, n_layers)
    if dense >= n_layers:
        f.harmless(*EXPERT_FIELDS)  # no layer builds experts: inert
        return None
    width = f.count("moe_intermediate_size", 1536)
    shared = f.int("moe_num_shared_experts", 2)
    if shared < 0:
        raise f.error("moe_num_shared_experts", f"expected at least 0, got {shared}")
    f.refuse_null("moe_norm_min", "transformers' Ernie4_5_MoeTopKRouter (torch.clamp)")
    f.expect(
        "moe_norm_min",
        (NORM_MIN,),
        NORM_MIN,
        f"the softmax_bias router clamps the renormalising sum to at least {NORM_MIN:g}",
    )
    return {
        "n_experts": f.count("moe_num_experts", 64, "num_experts"),
        "top_k": f.count("moe_k", 6, "num_experts_per_tok"),
        "router": "softmax_bias",
        "router_bias": False,
        "dense_layers": dense,
        "d_ff": width,
        "normalize": True,
        "shared_d_ff": shared * width,
        "shared_gate": False,
    }


def import_ernie4_5_moe(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    # Kept as None by the config class, read by the attention: it cannot build with either.
    f.refuse_null("num_key_value_heads", "transformers' Ernie4_5_MoeAttention")
    f.refuse_null("head_dim", "transformers' Ernie4_5_MoeAttention")
    f.expect(
        "use_bias",
        False,
        False,
        "transformers then biases the attention, the dense and shared MLPs and lm_head but "
        "not the routed experts (Ernie4_5_MoeExperts), and not the router; a spec's routed "
        "experts take mlp.bias",
    )
    spec = import_llama_like(f, cls, VARIANT)
    spec["position"] = {**spec["position"], "interleaved": True}
    spec["head"] = {**spec["head"], "tied": f.bool("tie_word_embeddings", True)}
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = _moe(f, spec["n_layers"])
    if spec["moe"] is not None:
        layers = spec["n_layers"] - spec["moe"]["dense_layers"]
        f.notes.append(
            f"transformers keeps each MoE layer's e_score_correction_bias as a frozen "
            f"parameter, {layers} x {spec['moe']['n_experts']} = "
            f"{layers * spec['moe']['n_experts']:,} in num_parameters() but not trainable; "
            "archspec holds them as buffers and counts the trainable parameters"
        )
    return spec


def export_ernie4_5_moe(spec: Spec) -> dict[str, Any]:
    if spec.attention.bias or spec.attention.qkv_bias or spec.mlp.bias:
        raise SpecError(f"{spec.hf_class} is exported without biases (use_bias: false)")
    if not spec.position.interleaved:
        raise SpecError("ERNIE 4.5 turns interleaved channel pairs", path="position.interleaved")
    fields = {**export_llama_like(spec), "use_bias": False}
    moe = spec.moe
    if moe is None:  # no layer from moe_layer_start_index on
        return fields | {"moe_layer_start_index": spec.n_layers, "moe_layer_interval": 1}
    width = moe.d_ff or spec.d_ff
    if (
        moe.router != "softmax_bias"
        or not moe.normalize
        or moe.router_bias
        or moe.shared_gate
        or moe.routed_scale != 1.0
        or moe.expert_bias
        or moe.swiglu_limit is not None
        or moe.shared_d_ff % width
    ):
        raise SpecError(
            f"{spec.hf_class}'s experts are chosen by moe.router: softmax_bias, renormalised, "
            "unscaled, without biases, beside moe_num_shared_experts ungated shared experts "
            "of moe.d_ff each (moe.shared_d_ff a multiple of it)",
            path="moe",
        )
    return fields | {
        "moe_num_experts": moe.n_experts,
        "moe_k": moe.top_k,
        "moe_intermediate_size": width,
        "moe_num_shared_experts": moe.shared_d_ff // width,
        "moe_layer_start_index": moe.dense_layers,
        "moe_layer_end_index": spec.n_layers - 1,
        "moe_layer_interval": 1,
        "moe_norm_min": NORM_MIN,
    }


CORRECTION = "e_score_correction_bias"
SHARED = table(
    {
        "moe.shared.gate": "mlp.shared_experts.gate_proj",
        "moe.shared.up": "mlp.shared_experts.up_proj",
        "moe.shared.down": "mlp.shared_experts.down_proj",
    }
)
# As the checkpoint files store it: one module per expert, the router's correction beside
# the router (mlp.moe_statics), not in it: the router's tensors are named from `mlp`.
CHECKPOINT_BLOCK = chain(
    table(
        {
            "moe.router": Target(
                "mlp",
                params={"weight": "gate.weight", CORRECTION: f"moe_statics.{CORRECTION}"},
            ),
            "moe.experts.*.gate": "mlp.experts.*.gate_proj",
            "moe.experts.*.up": "mlp.experts.*.up_proj",
            "moe.experts.*.down": "mlp.experts.*.down_proj",
        }
    ),
    SHARED,
    DENSE_BLOCK,
)
# transformers 5's memory: the correction under the router (gate.moe_statics), every
# layer's experts stacked (as Mixtral's).
MEMORY_ROUTER = table(
    {"moe.router": Target("mlp.gate", params={CORRECTION: f"moe_statics.{CORRECTION}"})}
)

FAMILY = Family(
    model_type="ernie4_5_moe",
    classes=(
        HFClass("Ernie4_5_MoeForCausalLM", "ernie4_5_moe", "lm", base=False),
        HFClass("Ernie4_5_MoeModel", "ernie4_5_moe", "none", base=True),
    ),
    bases=("_ernie4_5_moe",),
    import_config=import_ernie4_5_moe,
    export_config=export_ernie4_5_moe,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        block_variants={"module": chain(MEMORY_ROUTER, SHARED, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
