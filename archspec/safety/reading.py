"""Bounded reads of regular files: the one way archspec reads a file a user names.

`open` on a FIFO blocks until a writer comes; a device (`/dev/zero`) or a /proc file
(`/proc/self/pagemap` reports size 0 and never ends) streams forever; a directory or an
unreadable file raises OSError. Each becomes one clear SpecError here, and at most `limit`
bytes are ever read.

Every file checked here is recorded as an input of the run (`inputs_read`): the one writer
(writing.py) refuses to replace any of them, with or without `--force`, so that no output
lands on a spec's `extends:` parent, a config.json, a checkpoint shard or a `--system` file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from archspec.errors import Location, SpecError

# The real paths of every file this run has read; a run starts it afresh (`forget_inputs`).
_inputs_read: set[Path] = set()


def inputs_read() -> frozenset[Path]:
    """The real paths of the files read since the run began."""
    return frozenset(_inputs_read)


def forget_inputs() -> None:
    """A new run begins (the command line's start): earlier runs' inputs are not its own."""
    _inputs_read.clear()


def check_regular(path: Path, what: str = "file") -> os.stat_result:
    """The file's status, or a SpecError if it is missing, not a regular file or unreadable."""
    try:
        info = path.stat()
    except OSError as exc:
        raise SpecError(
            f"cannot read the {what}: {exc.strerror or exc}", location=Location(str(path))
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise SpecError(f"the {what} is a directory", location=Location(str(path)))
    if not stat.S_ISREG(info.st_mode):
        # Checked before opening: opening a FIFO would wait for a writer forever.
        raise SpecError(
            f"the {what} is not a regular file (a pipe, socket or device)",
            location=Location(str(path)),
        )
    _inputs_read.add(Path(os.path.realpath(path)))
    return info


def read_bounded(path: Path, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    check_regular(path, what)
    try:
        # O_NONBLOCK: should the file have become a FIFO since the check, open does not wait.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise SpecError(f"the {what} is not a regular file", location=Location(str(path)))
            # Read one byte more than allowed: st_size is 0 for /proc files of any length.
            data = file.read(limit + 1)
    except OSError as exc:
        raise SpecError(
            f"cannot read the {what}: {exc.strerror or exc}", location=Location(str(path))
        ) from None
    if len(data) > limit:
        raise SpecError(
            f"the {what} is over the limit of {limit:,} bytes", location=Location(str(path))
        )
    return data


def decode_utf8(data: bytes, path: str, what: str = "file") -> str:
    """UTF-8 text (a leading BOM dropped), or a SpecError: not UTF-16, not binary."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"the {what} is not UTF-8 text (byte {exc.start:,}; UTF-16, Latin-1 or a binary file?)",
            location=Location(path),
        ) from None
    if "\x00" in text:
        raise SpecError(f"the {what} contains NUL bytes (a binary file?)", location=Location(path))
    return text.removeprefix("\ufeff")
