"""The examples in README.md and docs/*.md, run as tests by Sybil (the root conftest.py
collects them).

- ```python blocks run as written, each in a namespace of its own (an example must hold its
  own imports); an `<!-- invisible-code-block: python ... -->` comment runs too, to set up
  what the next example needs without showing it. A block of `>>>` lines is a doctest: what
  it shows after each line is compared.
- ```console blocks: each `$ command` line (with `\\`-continued lines) runs in bash and must
  print the lines shown below it, stdout then stderr (a terminal shows both; their order
  between the two streams is not kept), each line compared without trailing blanks. A shown
  line starting with "..." stands for any number of lines (an excerpt). Words after `console`
  in the fence set the run: `columns=N` is the terminal width (default 80).
- ```bash blocks show commands without their output: each line (comments and `\\`-continued
  lines as bash reads them) must run with exit code 0.
- `<!-- skip: next "why" -->` skips the next example, saying why.

Every document runs in a temporary folder of its own (a `docs/` folder in it for `--plot`),
with this checkout's archspec first on the import path of the commands and of Python."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import PythonCodeBlockParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COLUMNS = 80
TIMEOUT_S = 120


def _environment(columns: int) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""),
        "COLUMNS": str(columns),
        "LINES": "50",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }


def _run(command: str, columns: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, stdin=subprocess.DEVNULL, text=True,
        env=_environment(columns), timeout=TIMEOUT_S,
    )  # fmt: skip


def _commands(source: str) -> list[tuple[str, list[str]]]:
    """[(command, the lines shown after it)] of a console block."""
    runs: list[tuple[str, list[str]]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if runs:
                runs[-1][1].append(line)
            elif line.strip():
                raise ValueError(f"console block starts with output, not `$ `: {line!r}")
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        runs.append((command, []))
        i += 1
    return runs


def _pattern(shown: list[str]) -> re.Pattern[str]:
    while shown and not shown[-1].strip():
        shown = shown[:-1]  # the blank line between two commands
    parts = []
    for line in shown:
        if line.strip().startswith("..."):
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line.rstrip()) + r"\n")
    return re.compile("".join(parts))


def _normal(output: str) -> str:
    return "".join(line.rstrip() + "\n" for line in output.splitlines())


class ConsoleParser:
    """```console blocks: commands and what they print."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"console(?P<options>[^\n]*)\n"),
            mapping={"options": "options", "source": "source"},
        )

    def __call__(self, document: Document) -> Iterable[Region]:
        for lexed in self.lexer(document):
            options = dict(o.split("=", 1) for o in lexed.lexemes["options"].split())
            columns = int(options.get("columns", DEFAULT_COLUMNS))
            parsed = (_commands(lexed.lexemes["source"]), columns)
            yield Region(lexed.start, lexed.end, parsed, self.evaluate)

    @staticmethod
    def evaluate(example: Example) -> str | None:
        runs, columns = example.parsed
        for command, shown in runs:
            result = _run(command, columns)
            output = _normal(result.stdout + result.stderr)
            if not _pattern(shown).fullmatch(output):
                expected = "".join(line.rstrip() + "\n" for line in shown)
                return (
                    f"$ {command}\n(exit code {result.returncode}) printed:\n{output}\n"
                    f"where the document shows:\n{expected}"
                )
        return None


class BashParser:
    """```bash blocks: commands whose output the document does not show."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"bash\n"), mapping={"source": "source"}
        )

    def __call__(self, document: Document) -> Iterable[Region]:
        for lexed in self.lexer(document):
            source = str(lexed.lexemes["source"]).replace("\\\n", " ")
            commands = [line for line in source.splitlines() if line.strip()]
            yield Region(lexed.start, lexed.end, commands, self.evaluate)

    @staticmethod
    def evaluate(example: Example) -> str | None:
        for command in example.parsed:
            result = _run(command, DEFAULT_COLUMNS)
            if result.returncode != 0:
                return f"$ {command}\nexit code {result.returncode}:\n{result.stderr}"
        return None


class IsolatedPythonEvaluator(PythonEvaluator):
    """Each Python example starts from an empty namespace: one that forgot an import fails."""

    def __call__(self, example: Example) -> str | None:
        example.namespace.clear()
        return super().__call__(example)


def python_parser() -> PythonCodeBlockParser:
    parser = PythonCodeBlockParser()
    parser.codeblock_parser._evaluator = IsolatedPythonEvaluator()
    return parser


def setup(namespace: dict[str, Any]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="archspec-docs-"))
    (folder / "docs").mkdir()
    _state.update(cwd=os.getcwd(), folder=folder, path=list(sys.path),
                  modules=set(sys.modules))  # fmt: skip
    os.chdir(folder)
    sys.path.insert(0, str(folder))


def teardown(namespace: dict[str, Any]) -> None:
    os.chdir(_state["cwd"])
    sys.path[:] = _state["path"]
    for name in set(sys.modules) - _state["modules"]:
        module = sys.modules[name]
        if str(_state["folder"]) in str(getattr(module, "__file__", "") or ""):
            del sys.modules[name]  # model.py of one document is not another's
    shutil.rmtree(_state["folder"], ignore_errors=True)


_state: dict[str, Any] = {}
