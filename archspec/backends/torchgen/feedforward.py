"""The generated feed-forward classes: an `MLP` per distinct MLP node and, for mixtures of
experts, an `MoE` class. The MLP's forward is written from its lowering (`lower_mlp`)."""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.forward import ForwardWriter
from archspec.backends.torchgen.leaves import assign, module_list
from archspec.backends.torchgen.text import class_, method
from archspec.ir.lower import lower_mlp
from archspec.ir.nodes import MLP, MoE, Repeat
from archspec.ir.ops import Value


def _mlp_doc(node: MLP) -> str:
    entry = node.entry
    if node.gated and entry.glu_name:
        return f"{entry.glu_name} feed-forward network: down({entry.long_label}(gate(x)) * up(x))."
    if node.gated:
        return f"Gated feed-forward network with {entry.long_label}: down(act(gate(x)) * up(x))."
    return f"Feed-forward network with {entry.long_label}: down(act(up(x)))."


def mlp_class(f: Features, node: MLP, size: ExprPrinter) -> str:
    low = lower_mlp(node, Value("x", "tokens", node.up.in_features))
    body = ForwardWriter(low).write()
    return class_(
        f"class {f.cls(node)}(nn.Module):",
        _mlp_doc(node),
        method(
            "__init__",
            ["config: Config"],
            "None",
            "super().__init__()",
            [assign(part, size) for part in node.children],
        ),
        method("forward", ["x: Tensor"], "Tensor", body),
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


def moe_class(f: Features, node: MoE, size: ExprPrinter) -> str:
    body = ["super().__init__()", f"self.top_k = {size(node.top_k)}"]
    for part in node.children:
        if isinstance(part, Repeat):
            body += module_list(part, lambda expert: f"{f.cls(expert)}(config)", size)
        else:
            body.append(assign(part, size))
    return class_(
        f"class {f.cls(node)}(nn.Module):",
        "Mixture of experts: a router sends each token to top_k of n_experts MLPs and mixes "
        "their outputs by its renormalised probabilities, as Mixtral does.",
        method("__init__", ["config: Config"], "None", body),
        MOE_FORWARD.strip("\n"),
    )
