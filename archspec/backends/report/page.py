"""The report as one self-contained HTML file: inline CSS, SVG and a few lines of script, no
fonts, images or links to fetch, so it opens offline and can be mailed as one attachment.

Every figure cell carries `data-figure` (its key in the figures) and its section `data-spec`,
so a test can read the rendered page back and hold each number against `count --json`. The
script only expands and collapses the module trees and marks the page ready; any error it
meets is recorded on `<body data-errors>`.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from archspec.backends.compare.plot import binary, human, seq_label, si
from archspec.backends.report.chart import line_chart
from archspec.backends.report.style import CSS, SCRIPT
from archspec.ir.title import titled
from archspec.safety.text import visible


def e(text: object) -> str:
    return escape(visible(text))


def _cell(value: int | None, key: str, shown: str | None = None) -> str:
    if value is None:
        return "<td>–</td>"
    text = shown if shown is not None else f"{value:,}"
    return f'<td class="num" data-figure="{e(key)}" data-value="{value}">{e(text)}</td>'


def _param_table(spec: dict[str, Any]) -> str:
    params = spec["params"]
    total = params["total"]
    rows = []
    for row in params["rows"]:
        shape = f"tied to {row['tied_to']}" if row["tied_to"] else row["shape"]
        copies = str(row["copies"]) if row["copies"] != 1 else ""
        rows.append(
            f"<tr><td><code>{e(row['name'])}</code></td><td>{e(shape)}</td>"
            f'<td class="num">{copies}</td>{_cell(row["count"], "params.row." + row["name"])}'
            f'<td class="num">{row["count"] / total:.1%}</td></tr>'
        )
    groups = "".join(
        f"<tr class='group'><td>{e(g)}</td><td></td><td></td>{_cell(n, 'params.groups.' + g)}"
        f'<td class="num">{n / total:.1%}</td></tr>'
        for g, n in params["groups"].items()
    )
    active = ""
    if "active" in params:
        active = (f"<tr class='total'><td>active per token</td><td>top-k experts</td><td></td>"
                  f"{_cell(params['active'], 'params.active')}<td></td></tr>")  # fmt: skip
    return (
        f'<table class="params"><caption>parameters · <code>{e(spec["params_command"])}</code>'
        "</caption><thead><tr><th>module</th><th>shape</th><th>×</th><th>parameters</th>"
        f"<th>share</th></tr></thead><tbody>{''.join(rows)}</tbody><tbody>{groups}</tbody>"
        f"<tbody><tr class='total'><td>total</td><td></td><td></td>"
        f"{_cell(total, 'params.total')}<td class='num'>100%</td></tr>{active}</tbody></table>"
    )


_SWEEP_COLUMNS = (
    ("forward_per_token", si),
    ("forward", si),
    ("train_step", si),
    ("memory_total", binary),
    ("memory_inference", binary),
)


def _sweep(spec: dict[str, Any]) -> str:
    sweep = spec["sweep"]
    flops = line_chart(
        "Forward FLOPs per token",
        [(spec["name"], [(p["seq"], p["forward_per_token"]) for p in sweep], False)],
        si,
    )
    memory = line_chart(
        "Memory on one device (fp32, AdamW, batch 1)",
        [
            ("training", [(p["seq"], p["memory_total"]) for p in sweep], False),
            ("inference (weights + KV cache)",
             [(p["seq"], p["memory_inference"]) for p in sweep], True),
        ],
        binary,
        unit=1024,
    )  # fmt: skip
    rows = []
    for p in sweep:
        cells = [f"<td class='num'>{p['seq']:,}</td>"]
        for key, fmt in _SWEEP_COLUMNS:
            cells.append(_cell(p[key], f"sweep.{p['seq']}.{key}", fmt(p[key])))
        cells.append(f"<td><code>{e(p['command'])}</code></td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    rows = "".join(rows)
    table = (
        "<table><caption>FLOPs and memory against S (batch 1, fp32 weights, AdamW, flash "
        "attention: <code>archspec count</code>'s defaults)</caption><thead><tr><th>S</th>"
        "<th>forward / token</th><th>forward</th><th>train step</th><th>training memory</th>"
        f"<th>inference memory</th><th>command</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return f'<div class="charts">{flops}{memory}</div>{table}'


def _layouts(spec: dict[str, Any]) -> str:
    rows = []
    for i, layout in enumerate(spec["layouts"]):
        label = f"<td>{e(layout['label'])}</td>"
        command = f"<td><code>{e(layout['command'])}</code></td>"
        if "refused" in layout:
            rows.append(f"<tr>{label}<td colspan='6' class='refused'>{e(layout['refused'])}</td>"
                        f"{command}</tr>")  # fmt: skip
            continue
        keys = ("weights", "gradients", "optimizer", "activations", "total", "inference_total")
        cells = "".join(_cell(layout[k], f"layout.{i}.{k}", binary(layout[k])) for k in keys)
        rows.append(f"<tr>{label}{cells}{command}</tr>")
    return (
        f"<table><caption>memory per device at S = {spec['seq']:,} (the most loaded device)"
        "</caption><thead><tr><th>layout</th><th>weights</th><th>gradients</th><th>optimizer"
        "</th><th>activations</th><th>training</th><th>inference</th><th>command</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _tree(module: dict[str, Any], depth: int = 0) -> str:
    head = f"({e(module['name'])}): " if depth else ""
    copies = f"{module['copies']} × " if module.get("copies", 1) != 1 else ""
    params = module.get("total", module["params"])
    count = f'<span class="n">{human(params)}</span>' if params else ""
    if "children" not in module:
        text = module.get("repr", module["class"] + "()")
        return f'<div class="leaf"><code>{head}{copies}{e(text)}</code>{count}</div>'
    inner = "".join(_tree(child, depth + 1) for child in module["children"])
    is_open = " open" if depth < 2 else ""
    return (f"<details{is_open}><summary><code>{head}{copies}{e(module['class'])}</code>{count}"
            f"</summary>{inner}</details>")  # fmt: skip


def _title(spec: dict[str, Any]) -> str:
    return titled(spec["name"], spec["overrides"])


def _spec_section(spec: dict[str, Any], diagram_svg: str, tree: dict[str, Any]) -> str:
    return (
        f'<section class="spec" id="spec-{e(spec["ref"])}" data-spec="{e(spec["ref"])}">'
        f"<h2>{e(_title(spec))}<small>{e(spec['layout'])} · {e(spec['family'])}"
        f"</small></h2><p class='source'>{e(spec['source'] or '')}</p>"
        f'<div class="overview"><figure class="diagram">{diagram_svg}</figure>'
        f"<div><h3>Parameters</h3>{_param_table(spec)}</div></div>"
        f"<h3>FLOPs and memory against sequence length</h3>{_sweep(spec)}"
        f"<h3>Memory per device</h3>{_layouts(spec)}"
        '<h3>Module tree <button type="button" class="toggle">expand all</button></h3>'
        f'<div class="tree">{_tree(tree)}</div></section>'
    )


def _comparison(specs: list[dict[str, Any]], diagrams: list[str]) -> str:
    seq = specs[0]["seq"]
    head = "".join(f"<th>{e(_title(s))}</th>" for s in specs)
    groups = list(dict.fromkeys(g for s in specs for g in s["params"]["groups"]))

    def row(label: str, key: str, values: list[int | None], fmt=None) -> str:
        cells = "".join(_cell(v, key, fmt(v) if fmt and v is not None else None) for v in values)
        return f"<tr><td>{e(label)}</td>{cells}</tr>"

    rows = [row("parameters", "params.total", [s["params"]["total"] for s in specs])]
    rows += [row(g, f"params.groups.{g}", [s["params"]["groups"].get(g) for s in specs])
             for g in groups]  # fmt: skip
    rows.append(row("forward FLOPs / token", "at_seq.forward_per_token",
                    [s["at_seq"]["forward_per_token"] for s in specs], si))  # fmt: skip
    rows.append(row("train-step FLOPs", "at_seq.train_step",
                    [s["at_seq"]["train_step"] for s in specs], si))  # fmt: skip
    one = [s["layouts"][0].get("total") for s in specs]
    rows.append(row("training memory, 1 device", "layout.0.total", one, binary))
    figures = "".join(
        f'<figure class="diagram small"><figcaption>{e(_title(s))}</figcaption>{d}</figure>'
        for s, d in zip(specs, diagrams, strict=True)
    )
    named = f" ({seq_label(seq)})" if seq_label(seq) != f"{seq:,}" else ""
    return (
        '<section class="compare" id="compare"><h2>Side by side</h2>'
        f"<table><caption>every spec at one S = {seq:,}{named}, the shortest context window "
        "among them; batch 1, fp32, AdamW</caption>"
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<div class="side">{figures}</div></section>'
    )


# What a script element's text must not hold raw: "<" (no "</script>" or "<!--" can end or
# hide the element), ">" and "&" (kept out for HTML parsers that read them), and U+2028/U+2029
# (line terminators to older JavaScript). JSON allows each as a \u escape.
_SCRIPT_UNSAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_json(value: Any) -> str:
    """`value` as JSON that can stand inside <script>...</script> and parse to the same value."""
    return json.dumps(value).translate(_SCRIPT_UNSAFE)


def render_page(
    specs: list[dict[str, Any]], diagrams: list[str], trees: list[dict], side: list[str]
) -> str:
    """The whole page; `diagrams` are inline SVGs (`side` a second copy for the side-by-side
    view), `trees` the module trees as dicts."""
    from archspec import __version__

    title = "archspec report: " + ", ".join(_title(s) for s in specs)
    nav = "".join(f'<a href="#spec-{e(s["ref"])}">{e(_title(s))}</a>' for s in specs)
    compare = _comparison(specs, side) if len(specs) > 1 else ""
    sections = "".join(
        _spec_section(s, d, t) for s, d, t in zip(specs, diagrams, trees, strict=True)
    )
    data = script_json({"archspec": __version__, "specs": specs})
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{e(title)}</title><style>{CSS}</style></head>"
        f'<body data-errors="0"><header><h1>{e(title)}</h1><nav>{nav}</nav>'
        f"<p class='note'>Exact figures from the spec (archspec {e(__version__)}); every table "
        "names the <code>archspec count</code> command that prints its numbers.</p></header>"
        f"<main>{compare}{sections}</main>"
        f'<script type="application/json" id="archspec-data">{data}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
