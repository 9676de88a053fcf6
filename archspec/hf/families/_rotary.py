"""RoPE as the rotary families beyond LLaMA store it (GPT-NeoX, GPT-J, Phi, Falcon, Phi-3):
a base, a scaling as LLaMA's, and a fraction of each head rotated.

transformers 5 keeps all of it in `rope_parameters` (`rope_theta`, `partial_rotary_factor`,
`rope_type`); 4.x configs spread it over top-level fields whose names differ by family
(`rotary_emb_base`, `rotary_pct`, `partial_rotary_factor`). Both spellings are read, and must
agree; the exporter writes both.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields, as_number
from archspec.hf.families import _longrope as longrope
from archspec.hf.families import _yarn as yarn
from archspec.hf.families._llama_like import _SCALINGS, rope_settings
from archspec.spec.schema import Spec


def read_rope(
    f: Fields,
    head_dim: int,
    default_theta: float = 10000.0,
    default_fraction: float = 1.0,
    theta_aliases: tuple[str, ...] = (),
    fraction_aliases: tuple[str, ...] = (),
    max_positions: int | None = None,
    aliases: dict[str, str] | None = None,
    outer: dict[str, Any] | None = None,
    null_fraction: float | None = None,
) -> dict[str, Any]:
    """The spec's `position`: base, scaling and rotated channels (`rotary_dim`, the
    `int(head_dim * partial_rotary_factor)` transformers rotates). A rope_type or setting not
    listed in LLaMA's scalings is refused, naming the field. `max_positions` (the config's
    max_position_embeddings) is LongRoPE's default factor's numerator; `aliases` and `outer`
    are rope_settings'. `null_fraction`: what an explicit null partial_rotary_factor means
    where the config class keeps it (None: read as left out)."""
    key, found, kind, fields = rope_settings(f, ("partial_rotary_factor",), aliases, outer)
    theta = _agreed(f, found, "rope_theta", ("rope_theta", *theta_aliases), default_theta)
    nulled = f.is_null("partial_rotary_factor") and "partial_rotary_factor" not in found
    if null_fraction is not None and nulled:
        f.harmless("partial_rotary_factor")
        fraction = null_fraction
    else:
        fraction = _agreed(
            f, found, "partial_rotary_factor", ("partial_rotary_factor", *fraction_aliases),
            default_fraction,
        )  # fmt: skip
    rotary_dim = int(head_dim * fraction)
    if rotary_dim % 2 or rotary_dim < 2:
        raise f.error(
            "partial_rotary_factor",
            f"{fraction} of head_dim {head_dim} rotates {rotary_dim} channels: RoPE turns "
            "channel pairs, so archspec needs an even number of them, at least 2",
        )
    position: dict[str, Any] = {"kind": "rope", "theta": float(theta)}
    if rotary_dim != head_dim:
        position["rotary_dim"] = rotary_dim
    if kind != "default":
        position["scaling"] = kind
        position |= {spec: found[hf] for hf, spec in fields.items()}
    if kind == "yarn":
        position |= yarn.read_yarn(f, key, found)
    if kind == "longrope":
        if max_positions is None:
            raise f.error(key, "longrope scaling is not supported for this model_type")
        position |= longrope.read_longrope(f, key, found, max_positions)
    return position


def _agreed(f: Fields, found: dict[str, Any], inner: str, keys: tuple[str, ...], default: Any):
    """A value rope_parameters (`inner`) and the top-level fields (`keys`) may both give."""
    outer = f.get(keys[0], None, *keys[1:])
    if outer is not None:
        as_number(f, keys[0], outer, positive=True)
    if inner in found:
        as_number(f, f"rope_parameters.{inner}", found[inner], positive=True)
    if inner in found and outer is not None and float(outer) != float(found[inner]):
        given = next(key for key in keys if f.present(key))
        raise f.error(given, f"{given} and rope_parameters.{inner} disagree")
    value = found.get(inner, outer if outer is not None else default)
    as_number(f, keys[0], value, positive=True)
    return value


def rotary_fraction(spec: Spec) -> float:
    """partial_rotary_factor for the spec: a fraction that int(head_dim * it) reads back as
    rotary_dim."""
    head_dim = spec.resolved_head_dim
    rotary_dim = spec.position.rotary_dim or head_dim
    fraction = rotary_dim / head_dim
    assert int(head_dim * fraction) == rotary_dim, (rotary_dim, head_dim)
    return fraction


def rope_parameters(spec: Spec, recompute_cache: bool = False) -> dict[str, Any]:
    """`read_rope`'s inverse, in transformers 5's rope_parameters; `recompute_cache` is
    write_longrope's."""
    p, scaling = spec.position, spec.position.scaling
    kind = "default" if scaling.type == "none" else scaling.type
    out: dict[str, Any] = {"rope_type": kind, "rope_theta": p.theta}
    out["partial_rotary_factor"] = rotary_fraction(spec)
    if kind == "yarn":
        out |= yarn.write_yarn(scaling)
    out |= {hf: getattr(scaling, key) for hf, key in _SCALINGS[kind]}
    if kind == "longrope":
        out |= longrope.write_longrope(scaling, recompute_cache)
    return out
