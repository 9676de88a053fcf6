"""The one-file HTML report (`archspec report`): diagrams, parameter tables, module trees,
FLOPs and memory against S, memory per device, and several specs side by side.

`data.py` gathers the figures from the count backend, `chart.py` draws line charts as SVG,
`page.py` and `style.py` assemble the page; `build_report` joins them.
"""

from __future__ import annotations


def build_report(entries: list[tuple[str, list[str], object]]) -> tuple[str, dict]:
    """(HTML, figures) for `entries` of (spec reference, overrides, IR)."""
    from archspec.backends.draw.build import build_diagram
    from archspec.backends.draw.layout import layout
    from archspec.backends.draw.svg import render
    from archspec.backends.printer.tree import module_tree
    from archspec.backends.report.data import common_seq, spec_figures
    from archspec.backends.report.page import render_page

    irs = [ir for _, _, ir in entries]
    seq = common_seq(irs)
    specs = [spec_figures(ir, ref, sets, seq) for ref, sets, ir in entries]
    canvases = [layout(build_diagram(ir, params=True)) for ir in irs]
    # Each inline copy gets its own marker ids: the sections, and the side-by-side view.
    diagrams = [render(c, standalone=False, prefix=f"d{i}-") for i, c in enumerate(canvases)]
    side = [render(c, standalone=False, prefix=f"c{i}-") for i, c in enumerate(canvases)]
    trees = [module_tree(ir, by_run=True).to_dict() for ir in irs]
    from archspec import __version__

    return render_page(specs, diagrams, trees, side), {"archspec": __version__, "specs": specs}
