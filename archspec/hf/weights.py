"""transformers checkpoints -> the generated model's parameters, strictly.

`convert` turns a transformers state dict into ours with the rules of `tensor_rules.py`: every
checkpoint tensor must find a place (or be a tied copy that matches, or a known buffer that
passes its check), every tensor of ours must be filled, and shapes must agree; anything else is
a SpecError naming the key. `load_weights` reads a checkpoint folder (or a state dict) and
fills a generated model with the result.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from archspec.errors import SpecError
from archspec.hf.expert_stacks import stack, unstack
from archspec.hf.names import Naming, naming
from archspec.hf.pickled import first_line, load_pickled
from archspec.hf.tensor_rules import TensorRule, describe_shape, tensor_rules
from archspec.ir.nodes import IR
from archspec.safety.json_file import read_json
from archspec.safety.limits import MAX_INDEX_BYTES
from archspec.safety.reading import check_regular
from archspec.safety.text import visible
from archspec.spec.schema import Spec

LEGACY_SUFFIXES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))
CHECKPOINT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


# --- Reading checkpoints -------------------------------------------------------------------


def _safetensors():
    try:
        import safetensors.torch
    except ImportError:
        raise SpecError(
            "safetensors files need the safetensors package", hint="pip install safetensors"
        ) from None
    return safetensors.torch


def _load_file(path: Path) -> dict[str, torch.Tensor]:
    # A directory, a FIFO (opening it would wait forever) or an unreadable file: one message.
    check_regular(path, "checkpoint file")
    if path.suffix == ".safetensors":
        try:
            return _safetensors().load_file(str(path))
        except Exception as exc:  # truncated, or not a safetensors file
            raise SpecError(f"cannot read {path}: {first_line(exc)}") from None
    return load_pickled(path)


def _shard_path(index: Path, shard: object) -> Path:
    """A shard named in an index, which must lie inside the index's folder."""
    folder = index.parent.resolve()
    if not isinstance(shard, str) or not shard:
        raise SpecError(f"{index.name}: weight_map values must be shard file names")
    path = (folder / shard).resolve()
    if Path(shard).is_absolute() or folder not in path.parents:
        raise SpecError(
            f"{index.name} lists the shard {visible(shard)!r}, outside the checkpoint folder "
            f"{folder}; refusing to read it",
        )
    return path


def _load_index(path: Path) -> dict[str, torch.Tensor]:
    data = read_json(path, MAX_INDEX_BYTES, "checkpoint index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        raise SpecError(f"{path} is not a checkpoint index (no weight_map mapping)")
    shards = {_shard_path(path, shard) for shard in weight_map.values()}  # all checked first
    state: dict[str, torch.Tensor] = {}
    for shard_path in sorted(shards):
        if not shard_path.exists():
            raise SpecError(
                f"shard {shard_path.name} listed in {path.name} is missing from {path.parent}"
            )
        state.update(_load_file(shard_path))
    missing = set(weight_map) - set(state)
    if missing:
        raise SpecError(f"{path.name} lists '{sorted(missing)[0]}', which no shard holds")
    return state


def checkpoint_inputs(source: str | Path) -> list[Path]:
    """What reading `source` reads, for the writer never to write onto: a checkpoint folder,
    or one file (with its folder when it is an index, whose shards lie beside it)."""
    path = Path(source)
    if path.name.endswith(".index.json"):
        return [path.parent]
    return [path]


def _floating(key: str, tensor: torch.Tensor) -> None:
    """Weights are floating point; an int64, bool or complex tensor would be cast silently."""
    if not tensor.is_floating_point():
        dtype = str(tensor.dtype).removeprefix("torch.")
        raise SpecError(
            f"checkpoint tensor '{visible(key)}' has dtype {dtype}; a parameter needs "
            "floating-point weights",
            hint="the file is not a checkpoint of this model's weights",
        )


def read_state_dict(source: str | Path | Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict, or the tensors of a checkpoint folder or file: model.safetensors,
    pytorch_model.bin, or a sharded one through its index."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    if path.is_dir():
        found = next((path / n for n in CHECKPOINT_FILES if (path / n).exists()), None)
        if found is None:
            raise SpecError(
                f"no checkpoint in {path}",
                hint=f"expected one of: {', '.join(CHECKPOINT_FILES)}",
            )
        path = found
    if not path.exists():
        raise SpecError(f"no such checkpoint: {path}")
    return _load_index(path) if path.name.endswith(".index.json") else _load_file(path)


# --- Converting ------------------------------------------------------------------------------


def _candidates(ir: IR) -> list[tuple[Naming, list[TensorRule]]]:
    """The namings a checkpoint of this spec may use: with and without the base-model prefix
    (a GPT2Model checkpoint in a GPT2LMHeadModel spec), in each stored layout."""
    out = []
    first = naming(ir)
    for base in (first.base, not first.base):
        for variant in first.family.variants:
            n = naming(ir, base=base, variant=variant)
            out.append((n, tensor_rules(n, ir)))
    return out


def _choose(ir: IR, keys: set[str]) -> tuple[Naming, list[TensorRule]]:
    def score(rules: list[TensorRule]) -> int:
        return sum(1 for r in rules if r.ours and r.hf in keys)

    return max(_candidates(ir), key=lambda c: score(c[1]))


def _listing(keys: list[str], limit: int = 3) -> str:
    shown = ", ".join(f"'{k}'" for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def convert(
    ir: IR,
    hf_state: Mapping[str, torch.Tensor],
    *,
    ignore: Iterable[str] = (),
) -> dict[str, torch.Tensor]:
    """A transformers state dict -> ours (the generated model's names), strictly.

    `ignore`: glob patterns of checkpoint keys to drop on purpose (e.g. `cls.*`, the
    masked-LM head of a BERT checkpoint loaded into BertModel's spec).
    """
    patterns = list(ignore)
    state: dict[str, torch.Tensor] = {}
    for key, tensor in hf_state.items():
        if any(fnmatch.fnmatch(key, p) for p in patterns):
            continue
        # Old TensorFlow-era checkpoints (BERT) name LayerNorm's parameters gamma and beta.
        for old, new in LEGACY_SUFFIXES:
            if key.endswith(old) and key[: -len(old)] + new not in hf_state:
                key = key[: -len(old)] + new
        state[key] = tensor
    n, rules = _choose(ir, set(state))
    ours: dict[str, torch.Tensor] = {}
    provider: dict[str, str] = {}
    used: set[str] = set()
    for rule in rules:
        tensor = state.get(rule.hf)
        if tensor is None:
            continue
        used.add(rule.hf)
        if rule.ours:
            _floating(rule.hf, tensor)
        if not rule.ours:  # a buffer some checkpoints carry: check it, keep nothing
            problem = rule.check(tensor) if rule.check else None
            if problem:
                raise SpecError(f"checkpoint tensor '{rule.hf}' {problem}")
            continue
        expected = rule.hf_shape()
        if tuple(tensor.shape) != expected:
            raise SpecError(
                f"checkpoint tensor '{rule.hf}' has shape {describe_shape(tuple(tensor.shape))}, "
                f"but the spec needs {describe_shape(expected)} (for {_listing(list(rule.ours))})",
                hint="the spec and the checkpoint describe different models; "
                "`archspec import-hf` on the checkpoint's config.json writes a matching spec",
            )
        for key, part in zip(rule.ours, rule.split(tensor), strict=True):
            if key in ours:
                same = part.is_meta or ours[key].is_meta or torch.equal(ours[key], part)
                if not same:
                    raise SpecError(
                        f"checkpoint tensors '{provider[key]}' and '{rule.hf}' should be one "
                        f"tied tensor ({key}) but differ",
                        hint="the spec ties them; a checkpoint with separate weights needs a "
                        "spec without the tie",
                    )
                continue
            ours[key] = part
            provider[key] = rule.hf
    unused = sorted(set(state) - used)
    if unused:
        what = "tensor" if len(unused) == 1 else "tensors"
        verb = "has" if len(unused) == 1 else "have"
        raise SpecError(
            f"checkpoint {what} {_listing(unused)} {verb} no place in the spec "
            f"({n.cls.name} names)",
            hint="the checkpoint holds more than the spec describes; pass ignore=['PATTERN'] "
            "(or --hf-ignore PATTERN) to drop tensors on purpose",
        )
    needed: dict[str, str] = {}
    for rule in rules:
        for key in rule.ours:
            needed.setdefault(key, rule.hf)
    missing = [k for k in needed if k not in ours]
    if missing:
        wanted = sorted({needed[k] for k in missing})
        hint = "the checkpoint is incomplete, or of a different model"
        if all(k.startswith("pooler.") for k in missing):
            hint = "this checkpoint has no pooler: use a spec with head: {pooler: false}"
        raise SpecError(
            f"the checkpoint has no {_listing(wanted)} (needed for {_listing(missing)})",
            hint=hint,
        )
    # The generated model holds each projection of the routed experts stacked.
    return stack(ir, {k: ours[k].contiguous() for k in needed})


def to_hf(ir: IR, state: Mapping[str, torch.Tensor], variant: str = "checkpoint") -> dict:
    """Ours -> a transformers state dict as the spec's class holds it in memory (tied copies
    included, buffers transformers keeps in its state dict as zeros)."""
    state = unstack(ir, state)  # the routed experts one by one, as the rules name them
    n = naming(ir, variant=variant)
    out: dict[str, torch.Tensor] = {}
    for rule in tensor_rules(n, ir):
        if rule.ours:
            out[rule.hf] = rule.join([state[k] for k in rule.ours])
        elif rule.buffer_shape is not None:
            device = next(iter(state.values())).device if state else None
            out[rule.hf] = torch.zeros(rule.buffer_shape, device=device)
    return out


# --- Filling a generated model -------------------------------------------------------------


def _as_ir(spec: Spec | IR | str | Path) -> IR:
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec

    if isinstance(spec, IR):
        return spec
    if isinstance(spec, Spec):
        return build_ir(spec)
    return build_ir(load_spec(spec if isinstance(spec, Path) else str(spec)))


def _spec_for(source: Any) -> IR:
    from archspec.hf.import_config import import_config

    if isinstance(source, (str, Path)):
        path = Path(source)
        folder = path if path.is_dir() else path.parent
        if (folder / "config.json").is_file():
            from archspec.ir.build import build_ir

            return build_ir(import_config(folder / "config.json").spec)
    raise SpecError(
        "load_weights needs the model's spec",
        hint="pass spec= (a spec name, path, Spec or IR), or a checkpoint folder with its "
        "config.json",
    )


def load_weights(
    model: torch.nn.Module,
    source: str | Path | Mapping[str, torch.Tensor],
    spec: Spec | IR | str | Path | None = None,
    *,
    ignore: Iterable[str] = (),
) -> torch.nn.Module:
    """Fill a generated `model` from a transformers checkpoint, strictly; returns the model.

    `source`: a folder with model.safetensors or pytorch_model.bin (sharded ones with their
    index too), one such file, or a state dict, in transformers' names, or in archspec's (as
    `archspec build --hf-weights` writes them). `spec`: the model's spec (a name, a path, a
    Spec or an IR); by default, what `import-hf` makes of the checkpoint folder's config.json.
    `ignore`: glob patterns of checkpoint keys to drop on purpose.

    Every parameter of the model is filled and every tensor is used, or a SpecError names
    the key; tied parameters (one tensor under two names) are filled once.
    """
    state = read_state_dict(source)
    params = dict(model.named_parameters(remove_duplicate=False))
    # and the buffers saved with them (a sigmoid router's e_score_correction_bias)
    saved = model.state_dict(keep_vars=True)
    params |= {name: b for name, b in model.named_buffers() if name in saved}
    if not (state and set(state) <= set(params)):  # transformers' names: convert first
        ir = _as_ir(spec) if spec is not None else _spec_for(source)
        state = convert(ir, state, ignore=ignore)
    extra = sorted(set(state) - set(params))
    if extra:
        raise SpecError(
            f"converted tensor(s) {_listing(extra)}: no such parameter in the model",
            hint="the model was generated from a different spec",
        )
    # Names that share one Parameter (a tied head) are filled from whichever the state has.
    groups: dict[int, list[str]] = {}
    for name, param in params.items():
        groups.setdefault(id(param), []).append(name)
    with torch.no_grad():
        for names in groups.values():
            param = params[names[0]]
            given = [n for n in names if n in state]
            if not given:
                raise SpecError(f"no tensor for the model's parameter '{names[0]}'")
            for name in given:
                tensor = state[name]
                _floating(name, tensor)
                if tuple(tensor.shape) != tuple(param.shape):
                    raise SpecError(
                        f"'{name}': the model has shape {describe_shape(tuple(param.shape))}, "
                        f"the checkpoint gives {describe_shape(tuple(tensor.shape))}",
                        hint="the model was generated from a different spec",
                    )
                if name != given[0] and not torch.equal(tensor, state[given[0]]):
                    raise SpecError(f"'{name}' and '{given[0]}' are tied in the model but differ")
            param.copy_(state[given[0]])
    return model


def state_dict_bytes(state: Mapping[str, torch.Tensor], name: str) -> bytes:
    """Converted weights as the bytes of one safetensors file (tied tensors once)."""
    # One storage per tensor: safetensors refuses views of a shared (fused) tensor.
    tensors = {k: v.contiguous().clone() for k, v in state.items()}
    return _safetensors().save(tensors, metadata={"format": "pt", "spec": name})


def save_state_dict(
    state: Mapping[str, torch.Tensor], path: str | Path, name: str, *, force: bool = False
) -> None:
    """Write converted weights as one safetensors file, through archspec's one writer
    (atomic; an existing different file is replaced only with `force`)."""
    from archspec.safety.writing import Output, write_files

    write_files([Output(Path(path), state_dict_bytes(state, name), "the weights")], force=force)
