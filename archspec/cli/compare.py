"""`archspec compare` and `archspec diff`: architectures side by side, and what separates two.

The numbers come from the same backends as `archspec count` (the comparison only arranges
them), so a column of `compare --json` equals that spec's `count --json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    JsonOpt,
    compile_spec,
    human,
    print_json,
    resolve_spec,
    say,
    stdout,
    user_errors,
    write_stdout,
)
from archspec.cli.options import (
    CompareBatch,
    CompareDtype,
    CompareMarkdown,
    ComparePlot,
    CompareSeq,
    CompareSpecsArg,
    DiffFromArg,
    DiffToArg,
    PlotForce,
)  # fmt: skip
from archspec.safety.text import markup_safe

METADATA = ("source", "family", "hf_class")


@app.command()
def compare(
    specs: CompareSpecsArg, seq: CompareSeq = None, batch: CompareBatch = 1,
    dtype: CompareDtype = "fp32", markdown: CompareMarkdown = False, plot: ComparePlot = None,
    force: PlotForce = False, json_: JsonOpt = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Compare specs side by side: one column per spec, computed from each spec exactly.

    Rows: architecture type, layers, d_model, heads / kv heads, head_dim, attention variant
    (MHA, GQA, MQA), d_ff, MLP activation and gating, norm type and placement, position
    encoding, MoE, tied embeddings, vocabulary, context; parameters: total, embedding,
    non-embedding and active per token; then at sequence length S: forward and training-step
    FLOPs per token, KV-cache bytes per token and the weights' memory in `--dtype`.

    **Embedding** parameters are the lookup tables (token, position and token-type
    embeddings: the `embeddings` group of `archspec count`). Everything else is
    **non-embedding**, an untied LM head included (a matmul every token pays for, as in Kaplan
    et al.'s N); a tied head adds nothing. **Active** parameters are those one token uses: for
    a mixture of experts the router and the top-k experts, otherwise all.

    FLOPs follow the `executed` convention of `archspec count` (every matmul as the generated
    code runs it; `archspec count --convention` has the papers' conventions). The KV cache per
    token is one position of one sequence in the decoder's self-attention: 0 for an encoder.

    `--json` prints `{"specs": [{"name", "structure", "params": {"total", "embedding",
    "non_embedding", "active", "groups"}, "workload", "flops", "memory", "per_token":
    {"forward_flops", "train_flops", "kv_cache_bytes"}}]}`: `params.total`, `params.groups`,
    `workload`, `flops` and `memory` are what `archspec count SPEC --seq S --batch B --dtype D
    --json` prints. `--plot` draws each spec's parameters by component (absolute and share)
    and its forward FLOPs per token against S (log axes).

    Examples:

        archspec compare bert-base gpt2 t5-small

        archspec compare llama-2-7b llama-2-70b mixtral-8x7b --seq 4096 --dtype bf16 --markdown

        archspec compare gpt2 gpt2-xl --plot gpt2.png

        archspec compare llama-2-7b ./my-model.yaml --json
    """
    from archspec.backends.compare.table import common_seq, compare_report
    from archspec.backends.count.flops_report import Workload

    with user_errors(debug, json_):
        if plot is not None:
            from archspec.backends.compare.plot import check_path

            check_path(plot)
        irs = [compile_spec(spec, None) for spec in specs]
        if seq is None:
            seq = common_seq(irs)
            if len(irs) > 1:
                say(f"note: FLOPs and memory at S = {seq:,} for every spec (the shortest "
                    "context among them); --seq S to choose another")  # fmt: skip
        report = compare_report(irs, Workload(batch=batch, seq=seq, dtype=dtype))
        if plot is not None:
            _plot(irs, report, plot, seq, force)
    _print_compare(report, json_, markdown)
    if plot is not None:
        say(f"wrote {plot}")


def _plot(irs: list, report: dict[str, Any], path: Path, seq: int, force: bool) -> None:
    from archspec.backends.compare.plot import plot_compare
    from archspec.backends.compare.sweep import forward_curves

    plot_compare(report, path, forward_curves(irs, seq), seq, force)


def _print_compare(report: dict[str, Any], json_: bool, markdown: bool) -> None:
    from archspec.backends.compare.table import markdown as to_markdown

    if json_:
        print_json(report)
    elif markdown:
        write_stdout(to_markdown(report) + "\n")
    else:
        _render_compare(report)


def _render_compare(report: dict[str, Any]) -> None:
    from archspec.backends.compare.table import sections
    from archspec.cli.tables import Column, make_table, print_table

    names = [entry["name"] for entry in report["specs"]]
    columns = [Column("", "left"), *(Column(name) for name in names)]
    rows: list[list[str]] = []
    starts = []
    for title, section in sections(report):
        starts.append(len(rows))
        rows.append([f"[bold]{title}[/bold]", *[""] * len(names)])
        rows += [[name, *cells] for name, cells in section]
    print_table(make_table("comparison", columns, rows, sections=starts[1:]))


@app.command()
def diff(
    a: DiffFromArg,
    b: DiffToArg,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """What differs between two specs: their fields, their modules, and where the parameters
    went.

    - **spec**: every field whose value differs after `extends` is resolved. Fields with a
      derived default are compared by what they mean: `n_kv_heads 32 (default) -> 8`.
    - **modules**: the two module trees matched by attribute path. A module is added or
      removed (shown once, at the top of the new or missing subtree, with every parameter under
      it) or changed (its shape, copies, length or settings such as heads or activation), each
      with both parameter counts and the delta.
    - **parameters**: the `archspec count` groups of both, and the totals.

    `--json` prints `{"a", "b", "spec": [{"field", "a", "b", "a_default", "b_default"}],
    "modules": [{"module", "kind", "change", "settings": {name: [a, b]}, "a", "b", "delta"}],
    "groups": [{"group", "a", "b", "delta"}], "total": {"a", "b", "delta"}}`, plus `"active"`
    when either is a mixture of experts.

    Examples:

        archspec diff llama-2-7b llama-2-70b

        archspec diff llama-2-7b mixtral-8x7b

        archspec diff gpt2 ./my-gpt2-variant.yaml --json
    """
    from archspec.backends.compare.diff import diff_report
    from archspec.ir.build import build_ir
    from archspec.spec.diff import spec_diff

    with user_errors(debug, json_):
        spec_a, spec_b = resolve_spec(a, None), resolve_spec(b, None)
        report = diff_report(build_ir(spec_a), build_ir(spec_b), spec_diff(spec_a, spec_b))
    if json_:
        print_json(report)
        return
    _render_diff(report)


def _value(value: Any, derived: bool = False) -> str:
    """A spec value as a cell: the spec's text (its `source`, a name) as written, never as
    rich markup or terminal escapes."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, dict):
        text = ", ".join(f"{markup_safe(k)}: {_value(v)}" for k, v in value.items())
    else:
        text = markup_safe(value)
    return f"{text} [dim](default)[/dim]" if derived else text


def _signed(n: int, exact: bool = True) -> str:
    sign = "+" if n > 0 else "−" if n < 0 else ""
    if not exact or n == 0:
        return f"{sign}{human(abs(n))}"
    return f"{sign}{abs(n):,} ({sign}{human(abs(n))})"


def _change_text(entry: dict[str, Any]) -> str:
    settings = entry["settings"]
    if entry["change"] == "changed":
        parts = []
        if "shape" in settings or "copies" in settings:
            # A leaf: its shape and copies read as one thing, `4096 × 4096 ×32 -> ...`.
            shape = settings.get("shape")
            copies = settings.get("copies")
            parts.append(f"{_leaf(shape, copies, 0)} → {_leaf(shape, copies, 1)}")
        for key, (old, new) in settings.items():
            if key not in ("shape", "copies"):
                parts.append(f"{key} {_value(old)} → {_value(new)}")
        return "; ".join(parts)
    side = 1 if entry["change"] == "added" else 0
    facts = {k: v[side] for k, v in settings.items()}
    sign = "[green]+[/green]" if side else "[red]−[/red]"
    detail = ", ".join(f"{k} {_value(v)}" for k, v in facts.items())
    return f"{sign} {entry['kind']}" + (f" ({detail})" if detail else "")


def _leaf(shape: list | None, copies: list | None, side: int) -> str:
    text = shape[side] if shape else ""
    if copies and copies[side] != 1:
        text += f" ×{copies[side]}"
    return text.strip()


def _render_diff(report: dict[str, Any]) -> None:
    from rich.table import Table

    a, b = report["a"], report["b"]
    a, b = markup_safe(a), markup_safe(b)
    fields = Table(title=f"spec fields: {a} → {b}", title_justify="left")
    for column in ("field", a, b):
        fields.add_column(column)
    # Where the numbers come from (source, family, transformers class) says little about the
    # architecture: those rows go last, dimmed.
    spec = sorted(report["spec"], key=lambda f: f["field"] in METADATA)
    for f in spec:
        style = "dim" if f["field"] in METADATA else None
        a_text, b_text = _value(f["a"], f["a_default"]), _value(f["b"], f["b_default"])
        fields.add_row(markup_safe(f["field"]), a_text, b_text, style=style)
    _print_or_say(fields if report["spec"] else "spec fields: identical")

    modules = Table(title=f"modules: {a} → {b}", title_justify="left")
    modules.add_column("module")
    modules.add_column("change")
    for column in (a, b, "Δ"):
        modules.add_column(column, justify="right")
    for m in report["modules"]:
        # Rounded here (the exact counts are in --json and in the groups below): the table is
        # about where parameters moved, and stays narrow enough for a terminal.
        modules.add_row(
            markup_safe(m["module"] or "(model)"),
            _change_text(m),
            human(m["a"]),
            human(m["b"]),
            _signed(m["delta"], exact=False),
        )
    _print_or_say(modules if report["modules"] else "modules: identical")

    groups = Table(title=f"where the parameters went: {a} → {b}", title_justify="left")
    groups.add_column("group")
    for column in (a, b, "Δ parameters"):
        groups.add_column(column, justify="right")
    for g in report["groups"]:
        groups.add_row(g["group"], f"{g['a']:,}", f"{g['b']:,}", _signed(g["delta"]))
    groups.add_section()
    t = report["total"]
    groups.add_row("[bold]total[/bold]", f"{t['a']:,}", f"{t['b']:,}", _signed(t["delta"]))
    if "active" in report:
        x = report["active"]
        groups.add_row("active per token", f"{x['a']:,}", f"{x['b']:,}", _signed(x["delta"]))
    _print_or_say(groups)


def _print_or_say(renderable: Any) -> None:
    """A table by the rule of archspec/cli/tables.py; a line of text as it is."""
    from archspec.cli.tables import print_table

    if isinstance(renderable, str):
        stdout().print(renderable)
    else:
        print_table(renderable)
