"""M-RoPE, the rotary embedding of Qwen2-VL's and Qwen3-VL's language models, on text alone.

M-RoPE rotates a head's frequencies by three positions of a token, temporal, height and width
(`mrope_section` says how many frequencies each takes; Qwen3-VL interleaves them,
`mrope_interleaved`). Text tokens have one position, which the language model's own forward
gives all three (`position_ids` left out: the cache positions, expanded), and every frequency
then turns by it: plain RoPE, with the same base and the same frequencies. archspec's models
take text, so the sections are checked (transformers splits the frequencies by them) and
reported as changing nothing; what remains is read as any RoPE setting is."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields, shown

MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def text_rope(f: Fields, head_dim: object) -> None:
    """Take M-RoPE's settings out of `rope_parameters` and `rope_scaling` (transformers 4.x
    wrote its rope_type as "mrope"), leaving the plain RoPE settings the importer reads.
    `head_dim` as the file gives it: a width that is not a positive integer is refused by the
    importer after this, so the sections' sum is checked only against one that is."""
    for key in ("rope_parameters", "rope_scaling"):
        settings = f.data.get(key)
        if not isinstance(settings, dict):
            continue  # absent, or refused by the RoPE reader, naming the field
        kinds = {settings.get(name) for name in ("rope_type", "type")} - {None}
        found = {k: settings[k] for k in MROPE_KEYS if k in settings}
        if not found and "mrope" not in kinds:
            continue
        if "mrope_section" in found:
            _check_section(f, key, found["mrope_section"], head_dim)
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


def _check_section(f: Fields, key: str, section: object, head_dim: object) -> None:
    width = head_dim if _positive(head_dim) else None
    half = width // 2 if width is not None else None
    if (
        not isinstance(section, list)
        or len(section) != 3
        or not all(_positive(n) for n in section)
        or (half is not None and sum(section) != half)
    ):
        raise f.error(
            key,
            f"mrope_section {shown(section)}: expected three positive integers that add up to "
            f"half the head width ({half}), the frequencies M-RoPE shares out",
        )


def _positive(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0
