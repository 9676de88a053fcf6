"""The report's page keeps hostile text as text: a spec whose source and file name (its name
on the page; a `name:` field is held to [A-Za-z0-9._-]), and a transformers config whose
`_name_or_path` and folder name, hold markup, comment openers,
script end tags, quotes and U+2028, opened in Chromium. Every script on the page parses and
runs, and nothing of that text becomes an element, a comment or a second script."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from tests.hostile import cli
from tests.test_report import console_messages, needs_browser, run_browser

# Each piece ends or hides a script element, opens markup or breaks a JavaScript string, as
# far as each field allows: a spec's `source` is one line of visible text without quotes or
# backslashes, a file name has no "/", and an `_name_or_path` with one "/" is a Hub id (the
# source becomes its URL).
SOURCE_HOSTILE = "<!--<script>x</script>--></script><b id=escaped>b</b>&amp;"
FILE_HOSTILE = "<!--<script>'\"&\u2028\u2029<b id=escaped>"
HUB_HOSTILE = "<!--<script>x<b id=escaped>b&amp;</b>"


class Elements(HTMLParser):
    """The tags, comments and script texts of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.comments: list[str] = []
        self.scripts: list[str] = []
        self.body: dict[str, str] = {}
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "body":
            self.body = {k: v or "" for k, v in attrs}
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if dict(attrs).get("id") == "escaped":
            raise AssertionError("the hostile <b id=escaped> became an element")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data

    def handle_comment(self, data):
        self.comments.append(data)


def elements(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    return parser


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value
    return [s for item in items for s in strings(item)] if isinstance(value, dict | list) else []


def hostile_inputs(tmp_path: Path) -> list[str]:
    """A YAML spec and a config.json folder, every field that reaches the page hostile."""
    spec = tmp_path / f"{FILE_HOSTILE}.yaml"
    spec.write_text(
        "extends: gpt2\n"
        f"source: {json.dumps(SOURCE_HOSTILE)}\n"
        "n_layers: 2\nd_model: 64\nn_heads: 2\nd_ff: 128\nvocab_size: 256\nmax_seq_len: 64\n"
    )
    folder = tmp_path / f"{FILE_HOSTILE}-hf"
    folder.mkdir()
    config = {
        "_name_or_path": HUB_HOSTILE, "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    return [str(spec), str(folder)]


def make_page(tmp_path: Path) -> tuple[Path, dict]:
    inputs = hostile_inputs(tmp_path)
    path = tmp_path / "report.html"
    result = cli("report", *inputs, "-o", str(path))
    assert result.exit_code == 0, result.output
    data = json.loads(cli("report", *inputs, "--json").stdout)
    return path, data


def test_hostile_text_reaches_the_page_as_text(tmp_path: Path) -> None:
    """Without a browser: the file as written has two scripts, no comment, and the embedded
    data reads back as `report --json` gives it, with the hostile text in it."""
    path, data = make_page(tmp_path)
    text = path.read_text()
    page = elements(text)
    assert page.tags.count("script") == 2 and page.comments == []
    assert json.loads(page.scripts[0])["specs"] == data["specs"]
    reached = "\n".join(strings(data))
    for hostile in (SOURCE_HOSTILE, FILE_HOSTILE, HUB_HOSTILE):
        assert hostile in reached  # it did reach the data
    for raw in ("<!--", "\u2028", "\u2029"):
        assert raw not in text


@needs_browser
def test_hostile_text_in_a_real_browser(tmp_path: Path) -> None:
    path, data = make_page(tmp_path)
    result = run_browser(path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_messages(result.stderr) == []  # every script parsed and ran
    page = elements(result.stdout)  # the DOM after the script ran
    assert page.body.get("data-ready") == "yes" and page.body.get("data-errors") == "0"
    assert page.body.get("data-specs") == "2"
    assert page.tags.count("script") == 2 and page.comments == []
    assert json.loads(page.scripts[0])["specs"] == data["specs"]


def test_the_pages_commands_are_quoted_for_the_shell(tmp_path: Path) -> None:
    """A spec path of `$(...)` and spaces is one word of each command shown, not a command."""
    import shlex

    spec = tmp_path / "$(touch pwned) x.yaml"
    spec.write_text("extends: gpt2\nn_layers: 2\n")
    result = cli("report", str(spec), "--set", "d_ff=3000", "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["specs"][0]
    commands = [figures["params_command"], figures["at_seq"]["command"]]
    commands += [point["command"] for point in figures["sweep"]]
    commands += [layout["command"] for layout in figures["layouts"]]
    for command in commands:
        words = shlex.split(command)
        assert words[:5] == ["archspec", "count", str(spec), "--set", "d_ff=3000"], command
        assert words[-1] == "--json"
