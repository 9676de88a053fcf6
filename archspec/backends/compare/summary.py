"""The parameter figures of the comparison, defined once and read off the parameter report.

Embedding parameters are the lookup tables a token or position indexes: the report's
`embeddings` group (token, position and token-type embeddings). Everything else is
non-embedding, including an untied LM head: it is a d_model x vocab matmul that every token
pays for, like any other Linear layer. A tied head owns no weight, so it adds nothing to
either side. This is the split of Kaplan et al. (2020), whose N excludes the embedding
matrices, applied to models with untied heads; BERT's pooler is non-embedding too.
T5's relative-position bias is a table inside attention and counts as attention, as in the
report.

Active parameters are those one token touches: for a mixture of experts the router and the
top-k experts of each layer; for a dense model, all of them.
"""

from __future__ import annotations

from typing import Any

EMBEDDING_GROUPS = ("embeddings",)


def param_summary(report: dict[str, Any]) -> dict[str, Any]:
    """Total, embedding, non-embedding and active parameters, plus the report's groups, from
    `param_report(ir)`: the same numbers `archspec count --json` prints."""
    params = report["params"]
    total = params["total"]
    embedding = sum(params["groups"].get(g, 0) for g in EMBEDDING_GROUPS)
    return {
        "total": total,
        "embedding": embedding,
        "non_embedding": total - embedding,
        "active": params.get("active", total),
        "groups": dict(params["groups"]),
    }
