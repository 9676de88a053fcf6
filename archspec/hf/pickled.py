"""Reading a pickled checkpoint (pytorch_model.bin) without running its code or inflating it.

`torch.load(weights_only=True)` runs no code, but it reads every tensor into memory at the size
the pickle declares: a small file can declare gigabytes (a compressed zip record, or a storage
larger than the data behind it) and fill memory before any shape is compared with the spec.
So the sizes are read first, with no tensor data behind them, and must fit in the file:
torch.save stores tensor data uncompressed, so an honest checkpoint never declares more bytes
than it has. The tensors of a zip checkpoint (every torch.save since 1.6) are then views of the
file mapped into memory, read only when copied into the model, after the shape checks.
"""

from __future__ import annotations

import pickle
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch

from archspec.errors import SpecError
from archspec.safety.text import visible

_NOT_TENSORS_HINT = "convert the checkpoint to safetensors with a tool you trust"
_CHECKPOINT_HINT = (
    "give a model.safetensors or pytorch_model.bin (or the folder of a transformers checkpoint)"
)


def load_pickled(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a torch.save file, their sizes checked against the file's first."""
    is_zip = zipfile.is_zipfile(path)
    if is_zip:
        _check_stored(path)
    else:
        _check_declared(path)
    state = _torch_load(path, mmap=is_zip)
    if not isinstance(state, Mapping):
        raise SpecError(f"{path} does not hold a state dict")
    return dict(state)


def _check_stored(path: Path) -> None:
    """torch.save writes every record of its zip uncompressed; a compressed one would inflate
    in memory to whatever size it declares."""
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise SpecError(f"cannot read {path}: {first_line(exc)}") from None
    for record in records:
        if record.compress_type != zipfile.ZIP_STORED:
            raise SpecError(
                f"cannot read {path}: its record '{visible(record.filename[:200])}' is "
                f"compressed (to {record.compress_size:,} of {record.file_size:,} bytes); "
                "torch.save never compresses, and archspec does not inflate it",
                hint=_NOT_TENSORS_HINT,
            )


def _check_declared(path: Path) -> None:
    """A legacy (pre-zip) file: the storages its pickle declares, read without their data
    (as fake tensors), must fit in the file."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        state = _torch_load(path, mmap=False)
    storages = {}
    for tensor in state.values() if isinstance(state, Mapping) else ():
        if isinstance(tensor, torch.Tensor):
            storage = tensor.untyped_storage()
            storages[id(storage)] = storage  # kept alive: ids stay unique
    declared = sum(s.nbytes() for s in storages.values())
    size = path.stat().st_size
    if declared > size:
        raise SpecError(
            f"cannot read {path}: it declares {declared:,} bytes of tensors in a file of "
            f"{size:,} bytes",
            hint="the file is corrupt or crafted; a checkpoint holds the data it declares",
        )


def _torch_load(path: Path, mmap: bool):
    try:
        # torch's warnings (the pickle protocol, TorchScript archives) speak to torch's users
        # about torch's options; archspec's own message says what is wrong.
        with warnings.catch_warnings(action="ignore"):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError:
        # torch's message suggests weights_only=False, which runs the pickle's code: no.
        raise SpecError(
            f"cannot read {path}: it holds Python objects beyond tensors, and loading them "
            "could run arbitrary code; archspec does not",
            hint=_NOT_TENSORS_HINT,
        ) from None
    except Exception as exc:  # a corrupt or foreign file
        if mmap and "not resizable" in str(exc):  # torch's words for a view past the mapping
            raise SpecError(
                f"cannot read {path}: a tensor declares more data than the file holds",
                hint="the file is corrupt or crafted; a checkpoint holds the data it declares",
            ) from None
        # torch's own words for a file it cannot parse can be a bare key ("101"): name the
        # kind of file expected, and keep them after it.
        raise SpecError(
            f"cannot read {path}: it is not a checkpoint torch.save wrote "
            f"(torch.load: {type(exc).__name__}: {first_line(exc)})",
            hint=_CHECKPOINT_HINT,
        ) from None


def first_line(exc: BaseException) -> str:
    """A library's error, short: its first line, visible characters only."""
    lines = str(exc).strip().splitlines()
    return visible(lines[0][:200]) if lines else type(exc).__name__
