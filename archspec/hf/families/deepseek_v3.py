"""DeepSeek-V3 (`model_type: deepseek_v3`, transformers 5's DeepseekV3ForCausalLM): DeepSeek-V2's
decoder (multi-head latent attention, `first_k_dense_replace` dense layers, then experts with
`n_shared_experts` shared ones) with the sigmoid router (`moe.router: sigmoid`).

As transformers computes it (modeling_deepseek_v3.py): the rotated parts turn as interleaved
channel pairs when `rope_interleave` (the default) and as rotate_half's halves otherwise, with
YaRN's frequencies and score scale (`mscale_all_dim`) as DeepSeek-V2's; the router
(DeepseekV3TopkRouter) scores every expert by a float32 sigmoid, chooses by the scores plus
`e_score_correction_bias` among the experts of the `topk_group` of `n_group` groups whose two
best biased scores sum highest, weighs by the unbiased scores, renormalised when
`norm_topk_prob`, times `routed_scaling_factor`. It reads no `topk_method` nor
`scoring_func`: the values it computes ("noaux_tc", "sigmoid") are the only ones accepted.

The checkpoints' multi-token-prediction module (`num_nextn_predict_layers`, DeepSeek-V3's
layer 61) is built by no transformers model class: archspec leaves it out too, reporting the
field as ignored (its tensors, in a checkpoint, are left unloaded by transformers).
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe, write_sigmoid_moe
from archspec.hf.families.deepseek_v2 import (
    ATTENTION,
    CHECKPOINT_BLOCK,
    SHARED,
    V3_DEFAULTS,
    latent_decoder,
    latent_fields,
)
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain
from archspec.spec.schema import Spec

DEFAULTS = ExpertDefaults(
    dense=3,
    experts=256,
    top_k=8,
    width=2048,
    shared=1,
    scale=2.5,
    normalize=True,
    groups=8,
    top_groups=4,
)  # DeepseekV3Config's


def _moe(f: Fields, n_layers: int) -> dict[str, Any] | None:
    f.expect("scoring_func", "sigmoid", "sigmoid", "transformers' DeepseekV3 scores by sigmoid")
    f.expect(
        "topk_method",
        "noaux_tc",
        "noaux_tc",
        "transformers' DeepseekV3 routes noaux_tc (sigmoid scores plus the bias correction)",
    )
    f.expect(
        "moe_layer_freq",
        1,
        1,
        "transformers' DeepseekV3 puts experts on every layer from first_k_dense_replace on",
    )
    f.harmless("aux_loss_alpha", "seq_aux")  # training losses only
    f.expect("ep_size", 1, 1, "expert parallelism of the original code")
    return read_sigmoid_moe(f, n_layers, DEFAULTS)


def import_deepseek_v3(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = latent_decoder(f, cls, f.bool("rope_interleave", True), V3_DEFAULTS)
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = _moe(f, spec["n_layers"])
    return spec


def export_deepseek_v3(spec: Spec) -> dict[str, Any]:
    fields = latent_fields(spec) | {"rope_interleave": spec.position.interleaved}
    return fields | write_sigmoid_moe(spec)


FAMILY = Family(
    model_type="deepseek_v3",
    classes=(
        HFClass("DeepseekV3ForCausalLM", "deepseek_v3", "lm", base=False),
        HFClass("DeepseekV3Model", "deepseek_v3", "none", base=True),
    ),
    bases=("_deepseek_v3",),
    import_config=import_deepseek_v3,
    export_config=export_deepseek_v3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        # transformers 5's memory: every layer's experts stacked (as Mixtral's).
        block_variants={"module": chain(SHARED, ATTENTION, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
