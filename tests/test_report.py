"""`archspec report`: one self-contained HTML file whose figures equal `count --json`, read
back from the page itself; and rendered by a real browser (Chromium) with no console errors.
.ci/run installs Debian's chromium: under CI=true the browser tests fail without it; elsewhere
they are skipped where no browser is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.backends.compare.ticks import linear_ticks, log_ticks
from archspec.cli import app

runner = CliRunner()
BROWSER = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
    None,
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
needs_browser = pytest.mark.skipif(
    BROWSER is None and not IN_CI, reason="no Chromium installed (CI installs one)"
)


class Figures(HTMLParser):
    """Every `data-figure` cell of a page: {spec or "compare": {key: [values]}}, and <body>'s
    attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: dict[str, dict[str, list[int]]] = {}
        self.body: dict[str, str] = {}
        self.sections: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = {k: v or "" for k, v in a.items()}
        if tag == "section":
            self.sections.append(a.get("data-spec") or "compare")
        if "data-figure" in a:
            where = self.figures.setdefault(self.sections[-1], {})
            where.setdefault(a["data-figure"], []).append(int(a["data-value"]))
        for name in ("href", "src", "xlink:href", "action"):
            if name in a:
                self.urls.append(a[name])


def read(page: str) -> Figures:
    parser = Figures()
    parser.feed(page)
    return parser


def count_json(*args: str) -> dict:
    result = runner.invoke(app, ["count", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_against_count(page: Figures, data: dict) -> None:
    """The page's figures equal what the named `archspec count` commands print."""
    for spec in data["specs"]:
        shown = page.figures[spec["ref"]]
        base = count_json(spec["ref"])["params"]
        assert shown["params.total"] == [base["total"]]
        for group, n in base["groups"].items():
            assert shown[f"params.groups.{group}"] == [n]
        for point in spec["sweep"][-2:]:  # the longest two: the costly end
            s = point["seq"]
            report = count_json(spec["ref"], "--seq", str(s))
            assert shown[f"sweep.{s}.forward_per_token"] == [report["flops"]["forward_per_token"]]
            assert shown[f"sweep.{s}.train_step"] == [report["flops"]["train_step"]]
            assert shown[f"sweep.{s}.memory_total"] == [report["memory"]["total"]]
        for i, layout in enumerate(spec["layouts"]):
            if "refused" in layout:
                continue
            args = layout["command"].split()[3:-1]  # archspec count NAME ... --json
            memory = count_json(spec["ref"], *args)["memory"]
            assert shown[f"layout.{i}.total"] == [memory["total"]]
            assert shown[f"layout.{i}.activations"] == [memory["activations"]]


def make_report(tmp_path: Path, *specs: str) -> tuple[Path, dict]:
    path = tmp_path / "report.html"
    result = runner.invoke(app, ["report", *specs, "-o", str(path)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stderr
    data = json.loads(runner.invoke(app, ["report", *specs, "--json"]).stdout)
    return path, data


def test_figures_on_the_page_equal_count(tmp_path: Path) -> None:
    path, data = make_report(tmp_path, "gpt2", "t5-small")
    page = read(path.read_text())
    check_against_count(page, data)
    # One common S for the side by side: the shortest context window (gpt2's 1,024 here
    # would exceed t5-small's 512), and the same figures as `count --seq S`.
    assert {s["seq"] for s in data["specs"]} == {512}
    compare = page.figures["compare"]
    for i, spec in enumerate(data["specs"]):
        flops = count_json(spec["ref"], "--seq", "512")["flops"]
        assert compare["at_seq.forward_per_token"][i] == flops["forward_per_token"]


def test_page_is_self_contained(tmp_path: Path) -> None:
    path, _ = make_report(tmp_path, "mixtral-8x7b")
    text = path.read_text()
    page = read(text)
    assert all(url.startswith("#") for url in page.urls), page.urls
    for fetch in ("<link", "@import", "<img", "<iframe", "fetch(", "XMLHttpRequest"):
        assert fetch not in text
    assert "url(" not in text.replace("url(#", "")
    assert "default-src 'none'" in text  # the browser itself refuses any request
    assert "<details" in text and "8 experts" in text


def test_cli_mistakes(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "gpt2", "-o", str(tmp_path / "r.pdf")])
    assert result.exit_code == 2 and "must end in .html" in result.stderr
    result = runner.invoke(
        app, ["report", "gpt2", "nonexistent-spec", "-o", str(tmp_path / "r.html")]
    )
    assert result.exit_code == 2 and "unknown spec" in result.stderr
    assert not (tmp_path / "r.html").exists()
    result = runner.invoke(app, ["report", *["gpt2"] * 9])
    assert result.exit_code == 2 and "at most 8" in result.stderr


def test_chart_ticks_cover_the_data() -> None:
    # The sweep chart's old fault: a forward line of 13.5-15.4G under ticks at 20/30/40G.
    ticks = linear_ticks(13.5e9, 15.4e9)
    assert ticks[0] <= 13.5e9 and ticks[-1] >= 15.4e9 and len(ticks) >= 3
    ticks = log_ticks(124e6, 46.7e9)
    assert ticks[0] <= 124e6 and ticks[-1] >= 46.7e9


def run_browser(page: Path, *flags: str) -> subprocess.CompletedProcess:
    assert BROWSER, "CI=true and no Chromium found: .ci/run installs Debian's chromium"
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--no-first-run", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             *flags, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@needs_browser
def test_browser_catches_a_broken_page(tmp_path: Path) -> None:
    """The check itself works: a page with a script error is seen as one."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    result = run_browser(bad, "--dump-dom")
    assert any("undefinedFunction" in m for m in console_messages(result.stderr))


@needs_browser
def test_report_in_a_real_browser(tmp_path: Path) -> None:
    path, data = make_report(tmp_path, "gpt2", "llama-2-7b")
    result = run_browser(path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_messages(result.stderr) == []
    page = read(result.stdout)  # the DOM after the script ran
    assert page.body.get("data-ready") == "yes" and page.body.get("data-errors") == "0"
    assert page.body.get("data-specs") == "2"
    check_against_count(page, data)
    shot = tmp_path / "report.png"
    run_browser(path, "--hide-scrollbars", "--window-size=1280,2000", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
