"""The generated feed-forward classes: `MLP` and, for mixtures of experts, `MoE`."""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.leaves import assign, module_list
from archspec.backends.torchgen.text import class_, method
from archspec.ir.nodes import Repeat

# activation -> (call on `h`, name for docstrings)
ACTIVATIONS = {
    "gelu": ("F.gelu({})", "GELU"),
    "gelu_tanh": ('F.gelu({}, approximate="tanh")', "GELU (tanh approximation)"),
    "relu": ("F.relu({})", "ReLU"),
    "silu": ("F.silu({})", "SiLU"),
}


def _mlp_doc(gated: bool, activation: str) -> str:
    name = ACTIVATIONS[activation][1]
    if gated and activation == "silu":
        return "SwiGLU feed-forward network: down(silu(gate(x)) * up(x))."
    if gated:
        return f"Gated feed-forward network with {name}: down(act(gate(x)) * up(x))."
    return f"Feed-forward network with {name}: down(act(up(x)))."


def mlp_class(f: Features, size: ExprPrinter) -> str:
    mlp = f.mlp
    act = ACTIVATIONS[mlp.activation][0]
    if mlp.gated:
        result = f"self.down({act.format('self.gate(x)')} * self.up(x))"
    else:
        result = f"self.down({act.format('self.up(x)')})"
    return class_(
        "class MLP(nn.Module):",
        _mlp_doc(mlp.gated, mlp.activation),
        method(
            "__init__",
            ["config: Config"],
            "None",
            "super().__init__()",
            [assign(part, size) for part in mlp.parts],
        ),
        method("forward", ["x: Tensor"], "Tensor", f"return {result}"),
    )


MOE_FORWARD = """
def forward(self, x: Tensor) -> Tensor:
    tokens = x.flatten(0, -2)  # (B * S, d_model)
    # Softmax over all experts in float32, keep the top_k and renormalise them.
    probs = F.softmax(self.router(tokens), dim=-1, dtype=torch.float32)
    weights, chosen = probs.topk(self.top_k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(tokens)
    for i, expert in enumerate(self.experts):
        # The tokens routed to expert i, and which of their top_k slots chose it.
        token, slot = torch.where(chosen == i)
        y = expert(tokens[token]) * weights[token, slot, None]
        out.index_add_(0, token, y.to(out.dtype))
    return out.view_as(x)
"""


def moe_class(f: Features, size: ExprPrinter) -> str:
    moe = f.moe
    assert moe is not None
    body = ["super().__init__()", f"self.top_k = {size(moe.top_k)}"]
    for part in moe.parts:
        if isinstance(part, Repeat):
            body.append(f"self.{part.name} = {module_list(part, 'MLP(config)', size)}")
        else:
            body.append(assign(part, size))
    return class_(
        "class MoE(nn.Module):",
        "Mixture of experts: a router sends each token to top_k of n_experts MLPs and mixes "
        "their outputs by its renormalised probabilities, as Mixtral does.",
        method("__init__", ["config: Config"], "None", body),
        MOE_FORWARD.strip("\n"),
    )
