"""The report's inline CSS and script (kept apart from the page so each stays readable)."""

from __future__ import annotations

CSS = """
:root { --ink: #1f2933; --muted: #52606d; --rule: #d9e2ec; --band: #f5f7fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 Helvetica, Arial, 'DejaVu Sans', sans-serif; color: var(--ink);
       background: #fff; }
header { padding: 20px 32px 8px; border-bottom: 1px solid var(--rule); background: var(--band); }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 20px; margin: 28px 0 4px; border-bottom: 2px solid var(--ink);
     padding-bottom: 4px; }
h2 small { font-size: 13px; font-weight: normal; color: var(--muted); margin-left: 12px; }
h3 { font-size: 15px; margin: 22px 0 8px; }
nav a { margin-right: 14px; color: #3f7fbf; text-decoration: none; font-weight: bold; }
main { padding: 0 32px 40px; max-width: 1280px; }
.note, .source, caption { color: var(--muted); font-size: 12px; }
caption { text-align: left; padding: 4px 0; caption-side: top; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--rule); text-align: left;
         vertical-align: top; }
th { background: var(--band); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.group td { font-style: italic; }
tr.total td { font-weight: bold; }
td.refused { color: #a33; font-size: 12px; }
td code { white-space: nowrap; }
code { font: 12px/1.3 Menlo, Consolas, 'DejaVu Sans Mono', monospace; }
figure { margin: 8px 0; }
.overview { display: flex; flex-wrap: wrap; gap: 32px; align-items: flex-start; }
.overview figure { flex: 0 0 auto; }
.compare caption { white-space: nowrap; }
figure.diagram svg { max-width: 100%; height: auto; }
.side { display: flex; gap: 24px; align-items: flex-start; overflow-x: auto; }
.side figure { flex: 0 1 auto; }
.side figure svg { max-height: 640px; width: auto; }
figcaption { font-weight: bold; margin-bottom: 4px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
svg.chart { width: 520px; max-width: 100%; height: auto; border: 1px solid var(--rule);
            border-radius: 6px; background: #fff; }
svg.chart .grid { stroke: #e4e7eb; stroke-width: 1; }
svg.chart .tick { font-size: 11px; fill: var(--muted); }
svg.chart .axis { font-size: 11px; fill: var(--muted); }
svg.chart .legend { font-size: 11px; fill: var(--ink); }
svg.chart .chart-title { font-size: 13px; font-weight: bold; fill: var(--ink); }
.tree { font-size: 12px; }
.tree details, .tree .leaf { margin-left: 18px; }
.tree > details { margin-left: 0; }
.tree summary { cursor: pointer; }
.tree .n { color: var(--muted); margin-left: 8px; font-size: 11px; }
button.toggle { font-size: 11px; margin-left: 8px; cursor: pointer; }
@media print { header { background: none; } .toggle { display: none; } }
"""

# Expands or collapses one section's module tree, and marks the page ready: the browser test
# reads `data-ready` and `data-errors` back from the rendered DOM.
SCRIPT = """
(function () {
  "use strict";
  window.addEventListener("error", function () {
    document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
  });
  document.querySelectorAll("button.toggle").forEach(function (button) {
    button.addEventListener("click", function () {
      var tree = button.closest("section").querySelector(".tree");
      var open = button.textContent === "expand all";
      tree.querySelectorAll("details").forEach(function (d) { d.open = open; });
      button.textContent = open ? "collapse all" : "expand all";
    });
  });
  var data = JSON.parse(document.getElementById("archspec-data").textContent);
  document.body.dataset.specs = String(data.specs.length);
  document.body.dataset.ready = "yes";
})();
"""
