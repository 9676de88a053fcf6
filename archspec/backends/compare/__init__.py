"""Architectures side by side: the `compare` table, the `diff` between two specs, and charts.

- `structure`: what kind of transformer a compiled spec is (layers, heads, norm, MLP, ...),
  read from the IR's nodes.
- `summary`: the parameter figures of the comparison (total, embedding, non-embedding, active),
  taken from the parameter report so they equal what `archspec count` prints.
- `table`: the comparison as JSON-ready data and as rows of text for tables.
- `diff`: what differs between two specs, field by field and module by module.
- `plot`: the charts (matplotlib, an optional extra: `pip install 'archspec[plot]'`).
"""
