"""GLM-4-MoE-Lite (`model_type: glm4_moe_lite`, GLM-4.7-Flash): DeepSeek-V3's decoder under
other defaults. As transformers' modeling_glm4_moe_lite.py builds it, its attention is
DeepseekV3Attention (multi-head latent attention, interleaved channel pairs when
`rope_interleave`, YaRN's score scale from `mscale_all_dim`), its experts are GLM-4-MoE's,
which are DeepSeek-V3's (the sigmoid router with its bias correction, shared experts,
`_sigmoid_moe.py`), and its rotary table is GLM-4-MoE's, reading `partial_rotary_factor` from
rope_parameters (1.0 rotates the whole `qk_rope_head_dim`; another value is refused).

Which layers are dense is `mlp_layer_types` ("dense" or "sparse" per layer; by default the
first dense, the rest sparse), not `first_k_dense_replace`, which no Glm4MoeLite class reads:
it is reported as ignored, as are DeepSeek's `topk_method`, `scoring_func`, `moe_layer_freq`
and `ep_size` that real files carry. A spec has dense layers only first (`moe.dense_layers`):
a dense layer after a sparse one is refused, naming `mlp_layer_types`.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields, shown
from archspec.hf.families import deepseek_v3
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe, write_sigmoid_moe
from archspec.hf.families.deepseek_v2 import DecoderDefaults, latent_decoder, latent_fields
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

# Glm4MoeLiteConfig's defaults (GLM-4.7-Flash's sizes).
DECODER = DecoderDefaults(
    hidden=2048, heads=20, layers=47, d_ff=10240, vocab=154880, positions=202752,
    latent=(512, 768, 64, 192, 256), eps=1e-5,
)  # fmt: skip
EXPERTS = ExpertDefaults(
    dense=1,  # unread: mlp_layer_types says which layers are dense
    experts=64,
    top_k=4,
    width=1536,
    shared=1,
    scale=1.8,
    normalize=True,
    groups=1,
    top_groups=1,
)
READER = "transformers' Glm4MoeLite classes (mlp_layer_types says which layers are dense)"


def dense_layers(f: Fields, n_layers: int) -> int:
    """How many first layers `mlp_layer_types` makes dense; a dense layer after a sparse one
    is refused (a spec's dense layers come first)."""
    default = ["dense"] + ["sparse"] * (n_layers - 1)
    types = f.get("mlp_layer_types") or default
    if not isinstance(types, list) or len(types) != n_layers:
        raise f.error(
            "mlp_layer_types",
            f"expected a list of one entry per layer ({n_layers}), got {shown(types)}",
        )
    if set(types) - {"dense", "sparse"}:
        raise f.error("mlp_layer_types", f"expected 'dense' or 'sparse', got {shown(types)}")
    dense = types.index("sparse") if "sparse" in types else n_layers
    if "dense" in types[dense:]:
        raise f.error(
            "mlp_layer_types",
            f"a dense layer after experts ({shown(types)}): a spec expresses dense layers "
            "only as the first ones (moe.dense_layers)",
        )
    return dense


def import_glm4_moe_lite(f: Fields, cls: HFClass) -> dict[str, Any]:
    # Glm4MoeLiteConfig's attribute_map reads head_dim as qk_rope_head_dim.
    rope_dim = f.get("qk_rope_head_dim", 64)
    f.expect("head_dim", (None, rope_dim), None, "Glm4MoeLiteConfig reads it as qk_rope_head_dim")
    # Left out, num_key_value_heads is the class's 20 (not one per head), which with other
    # head counts transformers cannot run: latent_decoder refuses it, naming the field.
    f.data = {"num_key_value_heads": 20, **f.data}
    spec = latent_decoder(f, cls, f.bool("rope_interleave", True), DECODER)
    for key in ("first_k_dense_replace", "topk_method", "scoring_func", "moe_layer_freq"):
        f.ignored(key, READER)
    f.ignored("ep_size", READER)
    dense = dense_layers(f, spec["n_layers"])
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS, dense=dense)
    return spec


def export_glm4_moe_lite(spec: Spec) -> dict[str, Any]:
    moe = write_sigmoid_moe(spec)
    dense = moe.pop("first_k_dense_replace")  # said by mlp_layer_types instead
    types = ["dense"] * dense + ["sparse"] * (spec.n_layers - dense)
    return (
        latent_fields(spec)
        | {"rope_interleave": spec.position.interleaved, "mlp_layer_types": types}
        | moe
    )


FAMILY = Family(
    model_type="glm4_moe_lite",
    classes=(
        HFClass("Glm4MoeLiteForCausalLM", "glm4_moe_lite", "lm", base=False),
        HFClass("Glm4MoeLiteModel", "glm4_moe_lite", "none", base=True),
    ),
    bases=("_glm4_moe_lite",),
    import_config=import_glm4_moe_lite,
    export_config=export_glm4_moe_lite,
    # DeepSeek-V3's module names: the checkpoints keep one module per expert, transformers 5
    # stacks them in memory.
    names=deepseek_v3.FAMILY.names,
    buffers=deepseek_v3.FAMILY.buffers,
)
