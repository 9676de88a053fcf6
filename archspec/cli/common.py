"""What every command shares: error handling, spec compilation and output (the options are in
options.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

# The options every command shares are declared in options.py; imported here for the commands
# that take them from common.
from archspec.cli.options import DebugOpt, ForceOpt, JsonOpt, SetOpt, SpecArg  # noqa: F401
from archspec.cli.streams import GuardedStdout, say, write_stdout  # noqa: F401 (re-exported)
from archspec.errors import SpecError, all_errors
from archspec.safety.text import shell_join, visible


def stdout():
    from rich.console import Console

    # emoji=False: a name or source that holds ":skull:" is shown as written, not as an emoji
    return Console(file=GuardedStdout(), highlight=False, emoji=False)  # type: ignore[arg-type]


def stderr():
    from rich.console import Console

    return Console(stderr=True, highlight=False, emoji=False)


def json_error(exc: SpecError) -> None:
    """With `--json`, a mistake is also a JSON object on stdout, so that a program reading
    the output always gets JSON: {"error": {"message", "hint", "file", "line", "key"}}, and
    every mistake found (a spec's structural checks report them all) in "errors"."""
    errors = [_json_error(e) for e in all_errors(exc)]
    try:
        write_stdout(json.dumps({"error": errors[0], "errors": errors}, indent=2) + "\n")
    except SpecError:
        pass  # stdout itself failed: the message on stderr is all there is


def _json_error(exc: SpecError) -> dict[str, object]:
    loc = exc.location
    return {
        "message": visible(exc.message),
        "hint": visible(exc.hint) if exc.hint else None,
        "file": visible(loc.file) if loc is not None else None,
        "line": getattr(loc, "line", None) if loc is not None else None,
        "key": visible(exc.path) if exc.path else None,
        "exit_code": 2,
    }


@contextmanager
def user_errors(debug: bool = False, json_: bool = False) -> Iterator[None]:
    """Turn a SpecError into one clear message on stderr and exit code 2 (and, with --json,
    a JSON error object on stdout)."""
    try:
        yield
    except SpecError as exc:
        if debug:
            raise
        say(str(exc))
        if json_:
            json_error(exc)
        raise typer.Exit(2) from None


def resolve_spec(spec: str, overrides: list[str] | None):
    """Resolve and validate a spec reference (a built-in name, else a file) with its
    overrides."""
    from archspec.hf.hub_cache import looks_like_hub_id
    from archspec.spec.resolve import is_builtin, load_spec, shadowed_file

    if not spec.strip():
        raise SpecError("the spec is empty: give a built-in name (`archspec list`) or a .yaml path")
    shadowed = shadowed_file(spec)
    if shadowed is not None:
        say(f"note: {spec} is the built-in spec; for the file of that name, write ./{spec}")
    if spec.endswith(".json") or Path(spec, "config.json").is_file():
        return _imported(spec, overrides)
    if shadowed is None and not is_builtin(spec) and looks_like_hub_id(spec):
        return _imported(spec, overrides, hub_id=True)
    return load_spec(spec, overrides or [])


def _imported(config: str, overrides: list[str] | None, hub_id: bool = False):
    """A transformers config.json (or its folder, or a Hub id in the local Hugging Face cache)
    wherever a spec is accepted: imported on the fly, exactly as `archspec import-hf` would
    write it."""
    from archspec.hf.hub_cache import cached_config, hub_source
    from archspec.hf.import_config import import_config
    from archspec.spec.resolve import load_mapping, name_from_text

    path = str(cached_config(config)) if hub_id else config
    imported = import_config(path, source=hub_source(config) if hub_id else None)
    name = name_from_text(config.rsplit("/", 1)[-1]) if hub_id else _config_name(config)
    found = f" (cached: {shown(path)})" if hub_id else ""
    again = shell_join(["archspec", "import-hf", config])
    say(
        f"note: {shown(config)}{found} imported as a spec ({name}: {imported.hf_class}, "
        f"extends {imported.base}); `{again} -o FILE.yaml` saves it"
    )
    for note in imported.notes:  # fields ignored, a class assumed: said once, as import-hf does
        say(f"note: {note}")
    if not overrides:
        return dataclasses.replace(imported.spec, name=name)
    data = {"name": name, **imported.data}
    return load_mapping(imported.base, data, imported.config_path, overrides)


def _config_name(config: str) -> str:
    """What a config.json is called: its Hub id's last part (`_name_or_path`), else its
    folder's name (a config.json) or its file's (`tiny.json`)."""
    from archspec.hf.config_fields import read_config
    from archspec.spec.resolve import name_from_text

    data, path = read_config(config)
    hub_id = data.get("_name_or_path")
    if isinstance(hub_id, str) and hub_id and hub_id.count("/") <= 1 and hub_id[0] not in "/.":
        return name_from_text(hub_id.rsplit("/", 1)[-1])
    return name_from_text(path.resolve().parent.name if path.name == "config.json" else path.stem)


def compile_spec(spec: str, overrides: list[str] | None, symbolic: bool = True):
    """Resolve, validate and compile a spec reference to the IR, which names the overrides."""
    from archspec.ir.build import build_ir

    return with_overrides(build_ir(resolve_spec(spec, overrides), symbolic=symbolic), overrides)


def asked_title(name: str, overrides: list[str]) -> str:
    """A model's name and its overrides for a rich title: visible, and never read as markup
    (an override's text is the user's)."""
    from archspec.ir.title import titled
    from archspec.safety.text import markup_safe

    return markup_safe(titled(name, overrides))


def with_overrides(ir, overrides: list[str] | None):
    """`ir` whose identity names the `--set` options it was built with (titles, JSON and
    diagrams then say what was asked)."""
    asked = tuple(overrides or ())
    return dataclasses.replace(ir, identity=dataclasses.replace(ir.identity, overrides=asked))


def print_json(data: Any) -> None:
    try:
        # allow_nan=False: a bare NaN or Infinity would make the output invalid JSON.
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError as exc:
        raise SpecError(f"the result cannot be written as JSON: {exc}") from None
    write_stdout(text + "\n")


def human(n: float) -> str:
    """1234567 -> 1.23M: for people; JSON always carries exact integers."""
    from archspec.backends.compare.numbers import three_digits

    if isinstance(n, float) and not math.isfinite(n):
        return str(n)
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= size:
            return f"{three_digits(n, size)}{unit}"  # no float overflow for huge integers
    return str(int(n))


def write_output(
    path: Path, text: str, force: bool, what: str, inputs: tuple[Path, ...] = ()
) -> bool:
    """Write `text` to `path` (a command's `-o FILE`) through the one writer
    (archspec/safety/writing.py); False when the file already held exactly that."""
    from archspec.safety.writing import Output, write_files

    return write_files([Output(path, text.encode(), what)], force=force, inputs=inputs)[0]


def shown(path: Path | str) -> str:
    """A path as a message shows it: visible characters only."""
    return visible(path)


def beyond_context(ir, lengths: list[int] | None) -> None:
    """Say when S exceeds a learned position table: the formulas still give figures, but the
    model (`archspec bench`) cannot run that length."""
    longest = ir.value(ir.root.max_seq_len)
    tables = [s for s in ir.root.stacks if s.position.entry.table == "absolute"]
    beyond = [n for n in lengths or () if n > longest]
    if tables and beyond:
        say(
            f"note: S = {max(beyond):,} is beyond {ir.name}'s {longest:,} learned positions: "
            "the figures are what the formulas give, but the model cannot run that length"
        )
