"""RoPE settings per layer type (Gemma 3, OLMo 3): transformers 5 keeps one
`rope_parameters` per layer type (`{sliding_attention: {...}, full_attention: {...}}`); 4.x
configs spread them over top-level fields whose names differ by family (Gemma 3's rope_theta
and rope_local_base_freq, its rope_scaling on the full layers alone). Both spellings are read
and must agree. The spec says them as `position` (the full layers') and `local_position` (the
windowed layers'), with `position_pattern` marking which layers are which; the exporter writes
rope_parameters per layer type.
"""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
from archspec.hf.families._llama_like import _rope, position_parameters
from archspec.spec.layer_positions import cycle
from archspec.spec.schema import Spec

TYPES = ("sliding_attention", "full_attention")


def rope_per_type(
    f: Fields, thetas: dict[str, tuple[str | None, float]], scaled: str | None = "full_attention"
) -> dict[str, dict[str, Any]]:
    """Each layer type's spec position (its flat form), from rope_parameters per layer type
    or the 4.x fields: `thetas` maps a layer type to its top-level theta field (None: none)
    and the config class's default; `rope_scaling` updates the `scaled` layer type's
    settings."""
    given = f.get("rope_parameters")
    scaling = f.get("rope_scaling") if scaled is not None else None
    if given is None:
        per_type = {t: {"rope_type": "default"} for t in TYPES}
    elif not isinstance(given, dict) or set(given) - set(TYPES):
        raise f.error(
            "rope_parameters",
            f"expected rope_parameters per layer type ({', '.join(TYPES)}), got {given!r}"[:200],
        )
    else:
        for t in TYPES:
            if given.get(t) is not None and not isinstance(given[t], dict):
                raise f.error(
                    f"rope_parameters.{t}",
                    f"expected a mapping of RoPE settings, got {shown(given[t])}",
                )
        per_type = {t: dict(given.get(t) or {"rope_type": "default"}) for t in TYPES}
    if scaling:  # as the config class: the scaling updates that layer type's settings
        if not isinstance(scaling, dict):
            raise f.error("rope_scaling", f"expected a mapping, got {scaling!r}")
        per_type[scaled] = {**per_type[scaled], **scaling}  # type: ignore[index]
    out = {}
    for layer_type, (key, default) in thetas.items():
        setting = per_type[layer_type]
        outer = f.get(key) if key is not None else None
        if outer is not None and "rope_theta" in setting:
            if float(outer) != float(setting["rope_theta"]):
                raise f.error(key, f"{key} and rope_parameters.{layer_type}.rope_theta disagree")
        setting.setdefault("rope_theta", outer if outer is not None else default)
        out[layer_type] = _read(f, layer_type, setting)
    return out


def _read(f: Fields, layer_type: str, setting: dict[str, Any]) -> dict[str, Any]:
    """One layer type's settings as the spec's position; an error names the field."""
    inner = Fields({"rope_parameters": setting}, f.where, f.model_type)
    try:
        return _rope(inner, 10000.0)
    except SpecError as exc:
        key = "rope_parameters" if f.present("rope_parameters") else "rope_scaling"
        path = f"{key}.{layer_type}" if key == "rope_parameters" else key
        raise f.error(path, exc.message, exc.hint) from None


def write_rope_per_type(spec: Spec) -> dict[str, Any]:
    """rope_parameters per layer type: the windowed layers' (local_position, or position
    where the spec has none) and the full layers' (position)."""
    local = spec.local_position or spec.position
    return {
        "sliding_attention": position_parameters(local),
        "full_attention": position_parameters(spec.position),
    }


def local_layers(
    f: Fields, spec_fields: dict[str, Any], pattern: str, local: dict[str, Any]
) -> None:
    """Give the spec's windowed layers (L in `pattern`, the window pattern) the rotation
    `local` where it differs from the stack's position; else none of their own, written so
    (a base spec may have one). Where every layer is windowed, the local rotation is the
    stack's; the settings of a layer type no layer has are reported as ignored."""
    differs = local != spec_fields["position"]
    if "L" in pattern and "G" in pattern and differs:
        spec_fields["local_position"] = local
        spec_fields["position_pattern"] = pattern.replace("G", "P")
        return
    spec_fields["local_position"] = None
    spec_fields["position_pattern"] = "P"
    if differs and "G" not in pattern:  # every layer windowed: theirs is the stack's rotation
        spec_fields["position"] = local
        f.notes.append(
            "the full_attention layers' rotary settings are ignored: layer_types has no "
            "full_attention layer"
        )
    elif differs:  # no layer windowed
        f.notes.append(
            "the sliding_attention layers' rotary settings are ignored: layer_types has no "
            "sliding_attention layer"
        )


def check_local_layers(spec: Spec, what: str) -> None:
    """A config class that rotates by layer type: the spec's local rotation on its windowed
    layers exactly."""
    if spec.local_position is None:
        return
    for i in range(cycle(spec)):
        if (spec.position_letter(i) == "L") != spec.windowed(i):
            raise SpecError(
                f"{what} rotates its windowed layers by one setting and its full layers by "
                "another; the spec's local_position is on other layers than its window",
                path="position_pattern",
            )
