"""OLMo 3 (`model_type: olmo3`): OLMo 2's block (`olmo2.py`) with a sliding window (4096 by
default) on the layers `layer_types` names (by default three windowed layers, then a full one),
read as the spec's `attention.window_pattern`.

Olmo3Config keeps a RoPE setting per layer type (`rope_parameters: {sliding_attention: ...,
full_attention: ...}`; a 4.x `rope_scaling` and a top-level `rope_theta` update the full
layers' alone): the full layers' is the spec's `position`, the windowed layers' its
`local_position` where it differs."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._layer_rope import (
    TYPES,
    check_local_layers,
    local_layers,
    rope_per_type,
    write_rope_per_type,
)
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.families.olmo2 import FAMILY as OLMO2
from archspec.hf.families.olmo2 import export_olmo2, import_olmo2
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

THETA = 500000.0  # Olmo3Config's default_theta
WINDOW = 4096
ROPE_FIELDS = ("rope_parameters", "rope_scaling", "rope_theta")
# Olmo3Config gives a top-level rope_theta to the full layers alone (it pops the field for
# them): the windowed layers keep the default unless rope_parameters says otherwise.
THETAS = {"sliding_attention": (None, THETA), "full_attention": ("rope_theta", THETA)}


def import_olmo3(f: Fields, cls: HFClass) -> dict[str, Any]:
    n = f.int("num_hidden_layers", 32)
    default = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]
    types = check_layer_types(f, f.get("layer_types") or default, n)
    ropes = rope_per_type(f, THETAS)
    f.data = {k: v for k, v in f.data.items() if k not in ROPE_FIELDS}
    spec = import_olmo2(f, cls)
    full = "full_attention" if "full_attention" in types else "sliding_attention"
    spec["position"] = ropes[full]
    window = (
        f.size("sliding_window", WINDOW) if f.data.get("sliding_window", 0) is not None else None
    )
    f.harmless("sliding_window")
    if window is not None and "sliding_attention" in types:
        pattern = window_pattern(f, types)
        spec["attention"] |= {"sliding_window": window, "window_pattern": pattern}
        local_layers(f, spec, pattern, ropes["sliding_attention"])
    elif set(types) == set(TYPES) and ropes["sliding_attention"] != ropes["full_attention"]:
        raise f.error(
            "sliding_window",
            "the sliding_attention layers rotate by their own RoPE settings but have no "
            "window; archspec's local rotation is on windowed layers",
        )
    return spec


def export_olmo3(spec: Spec) -> dict[str, Any]:
    fields = export_olmo2(spec)
    if spec.position.kind != "rope":
        raise SpecError("OLMo 3 rotates its queries and keys (RoPE)", path="position")
    check_local_layers(spec, "OLMo 3")
    del fields["rope_theta"]  # Olmo3Config reads it into the full layers' settings alone
    types = layer_types(spec)
    return {
        **fields,
        "rope_parameters": write_rope_per_type(spec),
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
