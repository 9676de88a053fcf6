"""The one writer for every file archspec writes (`-o`, converted weights, `--plot`).

Its promises:

- atomic: each file's bytes go to a temporary file in the same folder, synced, then linked or
  renamed into place; a reader never sees a half-written file;
- never onto an input: an output that is one of the command's inputs, or lies inside an input
  folder (the checkpoint being converted), is refused; the inputs are those the command names
  and every file the run has read (reading.py records each: `extends:` parents, config.json,
  checkpoint shards, `--system` files), with or without `force`;
- never replacing a different file without `force`; never writing through a symbolic link or
  into a device, pipe or socket (with or without `force`: `--force` onto /dev/sda is a typo);
- all or none: every output is checked and written to its temporary file before the first one
  is moved into place, and a failure while moving puts back the ones already moved;
- race-free creation: a new file is hard-linked into place, which fails if another process
  created the name meanwhile, so parallel runs without `force` cannot both win.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from archspec.errors import SpecError
from archspec.safety.reading import inputs_read


@dataclass(frozen=True)
class Output:
    path: Path
    data: bytes
    what: str  # what the bytes are, for a refusal: "the generated code"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _check_place(path: Path, inputs: list[Path]) -> os.stat_result | None:
    """Refuse a path no output may take (a link, a device, an input, a missing folder); its
    status, or None if there is no file yet."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise SpecError(f"cannot write {path}: {exc.strerror or exc}") from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        target = Path(os.path.realpath(path))
        try:
            followed = os.stat(path).st_mode  # /dev/stdout -> /proc/self/fd/1 -> a pipe
        except OSError:
            followed = None
        if followed is not None and not stat.S_ISREG(followed):
            raise SpecError(
                f"cannot write {path}: it leads to {_kind(followed)}, not a regular file",
                hint="leave out the option to write to standard output"
                if str(path).startswith("/dev/")
                else None,
            )
        raise SpecError(
            f"cannot write {path}: it is a symbolic link (to {target}); archspec does not "
            "write through links",
            hint="give the path of the file itself",
        )
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise SpecError(f"cannot write {path}: it is {_kind(info.st_mode)}, not a regular file")
    parent = path.parent
    if not parent.is_dir():
        raise SpecError(f"cannot write {path}: no such directory: {parent}")
    resolved = parent.resolve() / path.name
    for source in inputs:
        if _inside(resolved, source) or (info is not None and _same_file(path, source)):
            raise SpecError(
                f"cannot write {path}: it is {'in ' if source != resolved else ''}an input of "
                f"this command ({source})",
                hint="write the output somewhere else",
            )
    return info


def _check(out: Output, inputs: list[Path], force: bool) -> tuple[bool, bool]:
    """Whether `out` needs writing (False: the file already holds exactly its bytes), and
    whether the file exists now."""
    path = out.path
    info = _check_place(path, inputs)
    if info is None:
        return True, False
    if info.st_size == len(out.data) and _read(path) == out.data:
        return False, True
    if not force:
        raise SpecError(
            f"{path} exists and differs from {out.what}; not overwriting it",
            hint="pass --force to replace it",
        )
    return True, True


def _same_file(path: Path, other: Path) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read {path} to compare it: {exc.strerror or exc}") from None


def _temporary(out: Output) -> Path:
    temporary = out.path.with_name(f".{out.path.name}.{secrets.token_hex(6)}.tmp")
    try:
        # 0o666 less the umask: the usual mode of a new file
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as file:
            file.write(out.data)
            file.flush()
            os.fsync(file.fileno())
        if out.path.exists():
            os.chmod(temporary, out.path.stat().st_mode & 0o777)  # keep the replaced mode
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise SpecError(f"cannot write {out.path}: {exc.strerror or exc}") from None
    return temporary


def _create(temporary: Path, path: Path) -> None:
    """Put `temporary` in place at `path`, which must not exist (even after our check)."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise SpecError(
            f"{path} was created by another process meanwhile; not overwriting it",
            hint="pass --force to replace it",
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A file system without hard links: claim the name exclusively, then rename over it.
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise SpecError(f"{path} was created by another process meanwhile") from None
        os.replace(temporary, path)
    temporary.unlink(missing_ok=True)


def _sources(inputs: Iterable[Path]) -> list[Path]:
    """The real paths no output may take: the inputs named, and every file the run has read."""
    named = {Path(os.path.realpath(p)) for p in inputs}
    return sorted(named | inputs_read())


def check_places(paths: Iterable[Path], inputs: Iterable[Path] = ()) -> None:
    """The checks of `write_files` that need no content: run before slow work (converting a
    checkpoint), so that a refused output is refused at once."""
    sources = _sources(inputs)
    for path in paths:
        _check_place(Path(path), sources)


def write_files(
    outputs: Iterable[Output], *, force: bool = False, inputs: Iterable[Path] = ()
) -> list[bool]:
    """Write every output or none (see the module's docstring); for each, whether it was
    written (False: it already held exactly these bytes)."""
    outputs = list(outputs)
    for out in outputs:
        if str(out.path) == "-":  # a file named "-" is never what `-o -` means
            raise SpecError(
                f"-o -: {out.what} goes to stdout when -o is left out",
                hint="leave out -o (where the command prints), or write ./- for a file so named",
            )
    sources = _sources(inputs)
    seen: dict[Path, Output] = {}
    for out in outputs:
        key = Path(os.path.realpath(out.path))
        if key in seen:
            raise SpecError(
                f"{seen[key].what} and {out.what} would both be written to {out.path}",
                hint="give them different file names",
            )
        seen[key] = out
    checked = [_check(out, sources, force) for out in outputs]
    needed = [need for need, _ in checked]
    existed = {i for i, (_, exists) in enumerate(checked) if exists}
    temporaries: dict[int, Path] = {}
    try:
        for i, out in enumerate(outputs):
            if needed[i]:
                temporaries[i] = _temporary(out)
        _commit(outputs, temporaries, existed)
    finally:
        for temporary in temporaries.values():
            temporary.unlink(missing_ok=True)
    return needed


def _commit(outputs: list[Output], temporaries: dict[int, Path], existed: set[int]) -> None:
    """Move every temporary file into place; on a failure, undo the moves already made. A
    file that did not exist when checked is created exclusively: if another process made it
    meanwhile, that one wins and this command fails, even with --force (it was not checked)."""
    created: list[Path] = []
    replaced: list[tuple[Path, Path]] = []  # (path, a hard link to the file it replaced)
    path = None
    try:
        for i, temporary in temporaries.items():
            path = outputs[i].path
            if i not in existed:
                _create(temporary, path)
                created.append(path)
                continue
            backup = path.with_name(f".{path.name}.{secrets.token_hex(6)}.old")
            try:
                os.link(path, backup)  # kept until every output is in place
                replaced.append((path, backup))
            except OSError:
                pass  # no hard links here: this one cannot be put back, but is still replaced
            os.replace(temporary, path)
    except BaseException as exc:
        for new in created:
            new.unlink(missing_ok=True)
        for old, backup in replaced:
            try:
                os.replace(backup, old)
            except OSError:  # the disk failing again: the old file stays as the backup link
                pass
        if isinstance(exc, OSError):
            raise SpecError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    for _, backup in replaced:
        backup.unlink(missing_ok=True)
