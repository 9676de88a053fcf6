"""M-RoPE, the rotary embedding of Qwen2-VL's, Qwen3-VL's and GLM-4V's language models, on text
alone.

M-RoPE rotates a head's frequencies by three positions of a token, temporal, height and width
(`mrope_section` says how many frequencies each takes; Qwen3-VL interleaves them,
`mrope_interleaved`). Text tokens have one position, which the language model's own forward
gives all three (`position_ids` left out: the cache positions, expanded), and every frequency
then turns by it: plain RoPE, with the same base and the same frequencies. archspec's models
take text, so the sections are taken out of the RoPE settings (`text_rope`), checked against
the channels the imported spec rotates (`check_sections`: transformers splits the frequencies
by them and fails where they do not add up) and reported as changing nothing; what remains is
read as any RoPE setting is."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
from archspec.spec.schema import Spec

MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def text_rope(f: Fields, default: list[int] | None = None) -> tuple[str, Any, bool] | None:
    """Take M-RoPE's settings out of `rope_parameters` and `rope_scaling` (transformers 4.x
    wrote its rope_type as "mrope"), leaving the plain RoPE settings the importer reads. The
    sections to check, the field that gave them and whether the file did (`default`: the
    rotary embedding's own, where the file gives none); None when there are none to check."""
    taken = ("rope_parameters", default, False) if default is not None else None
    for key in ("rope_parameters", "rope_scaling"):
        settings = f.data.get(key)
        if not isinstance(settings, dict):
            continue  # absent, or refused by the RoPE reader, naming the field
        kinds = [settings.get(name) for name in ("rope_type", "type")]  # any JSON value
        found = {k: settings[k] for k in MROPE_KEYS if k in settings}
        if not found and "mrope" not in kinds:
            continue
        if "mrope_section" in found:
            taken = (key, found["mrope_section"], True)
        rest: dict[str, Any] = {k: v for k, v in settings.items() if k not in MROPE_KEYS}
        for name in ("rope_type", "type"):
            if rest.get(name) == "mrope":
                rest[name] = "default"
        f.data = {**f.data, key: rest}
        f.notes.append(
            f"the M-RoPE settings in {key} ({shown(found or {'type': 'mrope'}, as_json=True)}) "
            "change nothing here: a text token's temporal, height and width positions are one "
            "position, and M-RoPE over them is RoPE"
        )
    return taken


def check_sections(
    f: Fields, taken: tuple[str, Any, bool] | None, spec: dict[str, Any], split: bool = True
) -> None:
    """The sections `text_rope` took must be three positive integers; where the rotary
    embedding splits the frequencies by them (`split`: Qwen2-VL's, GLM-4V's, which fail
    otherwise), they must share out the frequencies of the channels the imported spec rotates
    (half of them). Qwen3-VL's interleaving takes every third frequency of each section's
    stretch, and runs whatever they add up to."""
    if taken is None:
        return
    key, section, given = taken
    position = spec.get("position") or {}
    width = position.get("rotary_dim") or spec.get("head_dim") or spec["d_model"] // spec["n_heads"]
    if not isinstance(width, int) or width < 2:
        return  # sizes the spec's own checks refuse, naming the field
    if (
        not isinstance(section, list)
        or len(section) != 3
        or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in section)
        or (split and sum(section) != width // 2)
    ):
        what = (
            f"mrope_section {shown(section)}"
            if given
            else f"no mrope_section, and the rotary embedding's default {shown(section)}"
        )
        raise f.error(
            key,
            f"{what}: M-RoPE shares out the frequencies of the {width} channels RoPE turns, "
            f"so it needs three positive integers"
            + (f" adding up to {width // 2}" if split else ""),
            hint=None if given else "give rope_parameters.mrope_section",
        )


def with_sections(fields: dict[str, Any], spec: Spec, default: list[int]) -> dict[str, Any]:
    """An exporter's fields with `export_sections` in their `rope_parameters`."""
    mrope = {"mrope_section": export_sections(spec, default)}
    return {**fields, "rope_parameters": {**fields["rope_parameters"], **mrope}}


def export_sections(spec: Spec, default: list[int]) -> list[int]:
    """An `mrope_section` for a spec written back as a vision-language text config: the rotary
    embedding's `default` scaled to the spec's rotated frequencies (half its rotated channels),
    by largest remainders, each at least one (any split is RoPE on text)."""
    position = spec.position
    width = (position.rotary_dim if position is not None else None) or spec.resolved_head_dim
    frequencies = width // 2
    if frequencies < 3:
        raise SpecError(
            f"M-RoPE shares {frequencies} rotated frequencies out in three sections of at "
            "least one: a vision-language text config needs 6 rotated channels or more",
            path="position.rotary_dim",
        )
    shares = [n * frequencies / sum(default) for n in default]
    sections = [max(1, int(share)) for share in shares]
    by_remainder = sorted(range(3), key=lambda i: (-(shares[i] - int(shares[i])), i))
    for i in by_remainder * frequencies:  # hand out what flooring left, or take back
        if sum(sections) == frequencies:
            break
        if sum(sections) < frequencies:
            sections[i] += 1
        elif sections[i] > 1:
            sections[i] -= 1
    return sections
