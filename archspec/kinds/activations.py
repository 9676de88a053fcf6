"""Activation kinds: the nonlinearity of an MLP (and the pooler's tanh)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ActivationKind:
    name: str  # the spec's word for it
    label: str  # in tables and diagrams
    call: str  # the generated expression, `{}` standing for the input
    # FLOPs per element. A transcendental (exp, tanh, erf) counts as one: what matters at this
    # scale is that the cost grows with the tensor, not the cycles of each op.
    flops_per_element: int
    # What autograd keeps for the backward: the input (GELU, SiLU, tanh-GELU), the output
    # (ReLU, tanh), or both.
    keeps: Literal["input", "output", "both"]
    # The gated MLP's usual name (Shazeer, "GLU Variants Improve Transformer", 2020).
    glu_name: str | None = None
    description: str = ""  # in generated docstrings; the label when empty

    @property
    def long_label(self) -> str:
        return self.description or self.label

    def render(self, x: str) -> str:
        return self.call.format(x)


ACTIVATIONS: dict[str, ActivationKind] = {
    kind.name: kind
    for kind in (
        ActivationKind("gelu", "GELU", "F.gelu({})", 5, "input", "GeGLU"),
        ActivationKind(
            "gelu_tanh",
            "GELU (tanh)",
            'F.gelu({}, approximate="tanh")',
            8,
            "input",
            "GeGLU (tanh)",
            description="GELU (tanh approximation)",
        ),
        ActivationKind("relu", "ReLU", "F.relu({})", 1, "output", "ReGLU"),
        ActivationKind("silu", "SiLU", "F.silu({})", 4, "input", "SwiGLU"),
        # Nemotron's and Arcee's relu2: relu, then its square (which keeps relu's output).
        ActivationKind(
            "squared_relu", "ReLU²", "F.relu({}).square()", 2, "both", description="squared ReLU"
        ),
        # Not a spec choice: BERT's pooler, tanh(dense(first token)).
        ActivationKind("tanh", "tanh", "torch.tanh({})", 1, "output"),
        # Not a spec choice either: Qwen2-MoE's gate on its shared expert.
        ActivationKind("sigmoid", "sigmoid", "torch.sigmoid({})", 1, "output"),
    )
}

# BERT's pooler: tanh(dense(first token)).
POOLER_ACTIVATION = ACTIVATIONS["tanh"].name
# Qwen2-MoE's gate on its shared expert: sigmoid(shared_gate(x)).
SHARED_GATE_ACTIVATION = ACTIVATIONS["sigmoid"].name
# gpt-oss's clamped SwiGLU (moe.swiglu_limit): its gate times sigmoid(alpha * gate).
CLAMPED_SWIGLU_ACTIVATION = ACTIVATIONS["sigmoid"].name
