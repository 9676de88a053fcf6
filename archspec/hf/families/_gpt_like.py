"""What GPT-2 and GPT-1 share: Conv1D layers with one fused q/k/v, the stored causal masks, and
the sequence-summary fields of their *DoubleHeadsModel classes."""

from __future__ import annotations

from archspec.hf.family import Buffer, Lookup, Target
from archspec.hf.name_rules import table

# The sequence-summary head of the *DoubleHeadsModel classes; the LM classes have none, so
# these fields do not change the architecture archspec imports.
SUMMARY_FIELDS = (
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_proj_to_labels",
    "summary_first_dropout",
)

# Older GPT checkpoints store the causal mask of every block.
GPT_BUFFERS = (
    Buffer("h.{i}.attn.bias", "causal_mask"),
    Buffer("h.{i}.attn.masked_bias", "anything"),
)


def conv1d_block(attn_norm: str, mlp_norm: str) -> Lookup:
    """Conv1D layers (weights stored transposed: in x out), one fused q/k/v projection."""
    return table(
        {
            "attn_norm": attn_norm,
            "attn.q": Target("attn.c_attn", "fused", 0, 3, note="q slice, Conv1D"),
            "attn.k": Target("attn.c_attn", "fused", 1, 3, note="k slice, Conv1D"),
            "attn.v": Target("attn.c_attn", "fused", 2, 3, note="v slice, Conv1D"),
            "attn.o": Target("attn.c_proj", "conv1d", note="Conv1D"),
            "mlp_norm": mlp_norm,
            "mlp.up": Target("mlp.c_fc", "conv1d", note="Conv1D"),
            "mlp.down": Target("mlp.c_proj", "conv1d", note="Conv1D"),
        }
    )
