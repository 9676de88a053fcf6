"""OLMo 3 (`model_type: olmo3`): OLMo 2's block (`olmo2.py`) with a sliding window (4096 by
default) on the layers `layer_types` names (by default three windowed layers, then a full one),
read as the spec's `attention.window_pattern`.

Olmo3Config keeps a RoPE setting per layer type (`rope_parameters: {sliding_attention: ...,
full_attention: ...}`, and a 4.x `rope_scaling` updates the full layers' alone); a spec has
one position setting per stack, so the two must agree wherever both kinds of layer exist."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import rope_parameters
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.families.olmo2 import FAMILY as OLMO2
from archspec.hf.families.olmo2 import export_olmo2, import_olmo2
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

THETA = 500000.0  # Olmo3Config's default_theta
WINDOW = 4096
TYPES = ("sliding_attention", "full_attention")
DIFFER = (
    "the windowed and the full layers would rotate with different RoPE settings; a spec has "
    "one position setting per stack"
)


def _rope(f: Fields, types: list[str]) -> dict[str, Any]:
    """The one RoPE setting of the layers present, as a flat rope_parameters."""
    theta = f.get("rope_theta", THETA)
    scaling = f.get("rope_scaling")
    given = f.get("rope_parameters")
    if given is None:
        per_type = {t: {"rope_type": "default"} for t in TYPES}
        if scaling:  # transformers puts it on the full layers only
            per_type["full_attention"] = {**per_type["full_attention"], **scaling}
    elif not isinstance(given, dict) or set(given) - set(TYPES):
        raise f.error(
            "rope_parameters",
            "Olmo3Config expects rope_parameters per layer type (sliding_attention, "
            "full_attention)",
        )
    else:
        per_type = {t: dict(given.get(t) or {"rope_type": "default"}) for t in TYPES}
    for setting in per_type.values():
        setting.setdefault("rope_theta", theta)
    present = [per_type[t] for t in TYPES if t in types]
    if any(p != present[0] for p in present):
        key = "rope_parameters" if given is not None else "rope_scaling"
        raise f.error(key, DIFFER)
    return present[0]


def import_olmo3(f: Fields, cls: HFClass) -> dict[str, Any]:
    n = f.int("num_hidden_layers", 32)
    default = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]
    types = check_layer_types(f, f.get("layer_types") or default, n)
    rope = _rope(f, types)
    rest = {k: v for k, v in f.data.items() if k not in ("rope_scaling", "rope_theta")}
    f.data = {**rest, "rope_parameters": rope}
    spec = import_olmo2(f, cls)
    window = (
        f.size("sliding_window", WINDOW) if f.data.get("sliding_window", 0) is not None else None
    )
    f.harmless("sliding_window")
    if window is not None and "sliding_attention" in types:
        spec["attention"] |= {"sliding_window": window, "window_pattern": window_pattern(f, types)}
    return spec


def export_olmo3(spec: Spec) -> dict[str, Any]:
    fields = export_olmo2(spec)
    if spec.position.kind != "rope":
        raise SpecError("OLMo 3 rotates its queries and keys (RoPE)", path="position")
    del fields["rope_theta"]  # Olmo3Config reads it into both layer types' settings
    types = layer_types(spec)
    parameters = rope_parameters(spec)
    return {
        **fields,
        "rope_parameters": {t: parameters for t in TYPES},
        "layer_types": types,
        "sliding_window": spec.attention.sliding_window if "sliding_attention" in types else None,
    }


FAMILY = Family(
    model_type="olmo3",
    classes=(
        HFClass("Olmo3ForCausalLM", "olmo3", "lm", base=False),
        HFClass("Olmo3Model", "olmo3", "none", base=True),
    ),
    bases=("_olmo2",),
    spec_family="olmo3",
    import_config=import_olmo3,
    export_config=export_olmo3,
    names=OLMO2.names,
    buffers=OLMO2.buffers,
)
