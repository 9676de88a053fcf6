"""Block diagrams of an architecture, paper style, from the IR (`archspec draw`).

`build.py` turns the IR into a `Diagram` (columns of labelled boxes, `diagram.py`); `layout.py`
places it on a canvas; `svg.py`, `png.py` and `mermaid.py` render it. Every renderer reads the
same `Diagram`, so the SVG, the PNG, the Mermaid text and `--json` say the same thing.
"""
