"""HyperCLOVA X (`model_type: hyperclovax`, HyperCLOVAX-SEED): Granite's decoder (its
embedding, residual and attention multipliers) with a RMSNorm on each sublayer's output too
(`use_post_norm`, Peri-LN: Gemma 2's `residual: sandwich`, `post_norm1`, `post_norm2`), the
logits multiplied by `logits_scaling` (`head.logit_scale`, where Granite divides) and the
scores scaled by 1/sqrt(head_dim) unless `attention_multiplier` says otherwise."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, as_number
from archspec.hf.families._llama_like import DENSE_BLOCK, MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.granite import export_granite, import_granite
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec


def import_hyperclovax(f: Fields, cls: HFClass) -> dict[str, Any]:
    scale = f.get("attention_multiplier")  # None: HyperCLOVAXConfig's head_dim ** -0.5
    f.data = {k: v for k, v in f.data.items() if k != "attention_multiplier"}
    spec = import_granite(f, cls)
    f.harmless("attention_multiplier")
    # HyperCLOVAXConfig's default is head_dim ** -0.5 (where Granite's base spec says 1.0).
    head_dim = spec.get("head_dim") or spec["d_model"] // spec["n_heads"]
    if scale is None:
        scale = head_dim**-0.5
    scale = as_number(f, "attention_multiplier", scale, positive=True)
    spec["attention"] = {**spec["attention"], "scale": scale}
    spec["head"] = {
        **spec["head"],
        "logits_divisor": 1.0,
        "logit_scale": f.float("logits_scaling", 1.0),
    }
    spec["residual"] = "sandwich" if f.bool("use_post_norm", True) else "pre"
    return spec


def export_hyperclovax(spec: Spec) -> dict[str, Any]:
    if spec.head.logits_divisor != 1.0:
        raise SpecError(
            "HyperCLOVAXForCausalLM multiplies the logits (head.logit_scale), never divides",
            path="head.logits_divisor",
        )
    fields = export_granite(spec)
    return {
        **fields,
        "logits_scaling": spec.head.logit_scale,
        "use_post_norm": spec.residual == "sandwich",
    }


POST_NORMS = table({"attn_post_norm": "post_norm1", "mlp_post_norm": "post_norm2"})

FAMILY = Family(
    model_type="hyperclovax",
    classes=(
        HFClass("HyperCLOVAXForCausalLM", "hyperclovax", "lm", base=False),
        HFClass("HyperCLOVAXModel", "hyperclovax", "none", base=True),
    ),
    bases=("_granite",),
    spec_family="hyperclovax",
    import_config=import_hyperclovax,
    export_config=export_hyperclovax,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=chain(POST_NORMS, DENSE_BLOCK),
    ),
    buffers=ROPE_BUFFERS,
)
