"""The generated feed-forward classes: an `MLP` per distinct MLP node and, for mixtures of
experts, an `MoE` class and its `Experts` (the routed experts' weights stacked, one tensor per
projection with the expert first), their forwards written from their lowerings (`lower_mlp`,
`lower_moe`)."""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.forward import ADD, ATOM, Expr, ForwardWriter
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, method
from archspec.ir.lower import lower_mlp, lower_moe
from archspec.ir.nodes import MLP, MoE, Repeat
from archspec.ir.ops import Call, Combine, Dispatch, LinearOp, Op, Route, Value
from archspec.ir.visit import walk

EXPERTS = "Experts"  # the stacked experts' class (every mixture of a spec has the same)


def _mlp_doc(node: MLP) -> str:
    entry = node.entry
    if node.clamped:
        return (
            "gpt-oss's clamped SwiGLU feed-forward network: down((up(x) + 1) * g * "
            "sigmoid(alpha * g)), g = gate(x), each clamped (clamped_swiglu)."
        )
    if node.gated and entry.glu_name:
        return f"{entry.glu_name} feed-forward network: down({entry.long_label}(gate(x)) * up(x))."
    if node.gated:
        return f"Gated feed-forward network with {entry.long_label}: down(act(gate(x)) * up(x))."
    return f"Feed-forward network with {entry.long_label}: down(act(up(x)))."


def standalone_mlps(f: Features) -> list[MLP]:
    """The MLP nodes that get a class of their own: all but the routed experts (`Experts`)."""
    found: dict[str, MLP] = {}
    for placed in walk(f.model):
        node = placed.node
        if isinstance(node, MLP) and not isinstance(placed.ancestors[-1], Repeat):
            found.setdefault(f.cls(node), node)
    return list(found.values())


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


class _MoEWriter(ForwardWriter):
    """The mixture's ops (`lower_moe`): the router's logits become top_k renormalised
    weights (Route); Dispatch, the experts' Call and Combine are Mixtral's loop over experts,
    `mix_experts` (archspec.runtime.experts), which expert parallelism replaces."""

    def __init__(self, node: MoE) -> None:
        x = Value("x", "tokens", node.router.in_features)
        super().__init__(lower_moe(node, x))
        self.node = node
        self.names[id(x)] = "tokens"
        self.lines.append("tokens = x.flatten(0, -2)  # (B * S, d_model)")

    def write(self) -> list[str]:
        lines = super().write()
        # The ops work on the flattened tokens: the result takes x's shape back.
        result = lines[-1].removeprefix("return ")
        if result.isidentifier():
            lines[-1] = f"return {result}.view_as(x)"
        elif len(f"return ({result}).view_as(x)") <= self.width:
            lines[-1] = f"return ({result}).view_as(x)"
        else:  # too long for one line (a gated shared expert): name the sum first
            lines[-1:] = [f"out = {result}", "return out.view_as(x)"]
        return lines

    def inlines(self, op: Op) -> bool:
        return not isinstance(op, Route) and super().inlines(op)

    def render_route(self, op: Route) -> Expr | None:
        logits = self.arg(op.logits).text
        if op.kind.function is not None:
            return self._route_by_function(op, logits)
        renormalise = " and renormalise them" if op.normalize else " (not renormalised)"
        self.lines += [
            f"# Softmax over all experts in float32, keep the top_k{renormalise}.",
            f"probs = F.softmax({logits}, dim=-1, dtype=torch.float32)",
        ]
        if op.groups > 1:
            self.lines += [
                "# Group-limited: only the experts of the top_groups groups whose best",
                "# expert scores highest compete.",
                "best = probs.unflatten(-1, (self.groups, -1)).amax(dim=-1)",
                "top = best.topk(self.top_groups, dim=-1).indices",
                "kept = torch.zeros_like(best, dtype=torch.bool).scatter(-1, top, True)",
                "kept = kept.repeat_interleave(probs.size(-1) // self.groups, dim=-1)",
                "probs = probs.masked_fill(~kept, 0.0)",
            ]
        self.lines.append("weights, chosen = probs.topk(self.top_k, dim=-1)")
        self.names[id(op.chosen)] = "chosen"
        if op.scale != 1.0:
            weights = "weights / weights.sum(dim=-1, keepdim=True)" if op.normalize else "weights"
            self.lines.append(f"weights = {weights} * {op.scale!r}  # routed_scaling_factor")
            assert op.out is not None
            self.names[id(op.out)] = "weights"
            return None
        if not op.normalize:
            assert op.out is not None
            self.names[id(op.out)] = "weights"
            return None
        return Expr("weights / weights.sum(dim=-1, keepdim=True)", ADD, frozenset())

    def _route_by_function(self, op: Route, logits: str) -> None:
        """A kind whose routing is a runtime function, reading the router's own tensors."""
        kind = op.kind
        router = f"self.{self.node.router.name}"
        args = [logits, *(f"{router}.{b}" for b in kind.buffers)]
        settings = {
            "top_k": "self.top_k",
            "groups": "self.groups" if op.groups > 1 else "1",
            "top_groups": "self.top_groups" if op.groups > 1 else "1",
            "normalize": str(op.normalize),
            "scale": repr(op.scale),
        }
        args += [settings[name] for name in kind.settings]
        self.lines += call(f"weights, chosen = {kind.function}", args, 2).split("\n")
        self.names[id(op.chosen)] = "chosen"
        assert op.out is not None
        self.names[id(op.out)] = "weights"

    def render_dispatch(self, op: Dispatch) -> Expr:
        # The tokens and the experts they chose, handed to mix_experts by Combine.
        self.dispatched = (self.arg(op.x).text, self.arg(op.chosen).text)
        return Expr("tokens", ATOM, frozenset())

    def render_call(self, op: Call) -> Expr:
        if op.module is self.node.expert:
            return Expr("self.experts", ATOM, frozenset())  # run inside mix_experts
        return super().render_call(op)  # the shared expert: self.shared(tokens)

    def render_combine(self, op: Combine) -> Expr:
        self.arg(op.expert_out)
        tokens, chosen = self.dispatched
        weights = self.arg(op.weights).text
        self.lines.append(f"out = mix_experts(self.experts, {tokens}, {weights}, {chosen})")
        return Expr("out", ATOM, frozenset())


def _moe_doc(node: MoE) -> str:
    probs = "renormalised probabilities" if node.normalize else "probabilities"
    text = (
        f"Mixture of experts: a router sends each token to top_k of n_experts MLPs and mixes "
        f"their outputs by its {probs}, as Mixtral does."
    )
    kind = node.router.entry
    if kind.function is not None:
        scores = "renormalised scores" if node.normalize and kind.renormalises else "scores"
        text = (
            f"Mixture of experts: a router sends each token to top_k of n_experts MLPs and "
            f"mixes their outputs by its {scores} ({kind.description})."
        )
    if node.shared is not None:
        gate = " scaled by sigmoid(shared_gate(x))" if node.shared_gate is not None else ""
        text += f" Every token also goes through a shared expert{gate} (Qwen2-MoE)."
    return text


def moe_class(f: Features, node: MoE, size: ExprPrinter) -> str:
    body = ["super().__init__()", f"self.top_k = {size(node.top_k)}"]
    if node.groups > 1:
        body += [f"self.groups = {node.groups}", f"self.top_groups = {node.top_groups}"]
    for part in node.children:
        if isinstance(part, Repeat):
            body.append(f"self.{part.name} = {EXPERTS}(config)")
        elif isinstance(part, MLP):  # the shared expert
            body.append(f"self.{part.name} = {f.cls(part)}(config)")
        else:
            body.append(assign(part, size))
    return class_(
        f"class {f.cls(node)}(nn.Module):",
        _moe_doc(node),
        method("__init__", ["config: Config"], "None", body),
        method("forward", ["x: Tensor"], "Tensor", _MoEWriter(node).write()),
    )


class _ExpertsWriter(ForwardWriter):
    """An expert's MLP (`lower_mlp`) on the routed rows sorted by expert, each Linear a
    grouped matmul over the stacked weights (`grouped_linear`, archspec.runtime.experts)."""

    def __init__(self, node: MLP) -> None:
        super().__init__(lower_mlp(node, Value("x", "tokens", node.up.in_features)))

    def render_linearop(self, op: LinearOp) -> Expr:
        name = op.module.name
        args = [self.arg(op.x), Expr(f"self.{name}", ATOM, frozenset())]
        args.append(Expr("counts", ATOM, frozenset()))
        if op.module.bias:
            args.append(Expr(f"self.{name}_bias", ATOM, frozenset()))
        return self._call("grouped_linear", args)


def experts_class(f: Features, moe: MoE, size: ExprPrinter) -> str:
    """The routed experts of `moe`: each projection's weights (n_experts, out, in) and
    biases (n_experts, out) stacked."""
    node = moe.expert
    n = size(moe.n_experts)
    params = []
    for linear in node.children:
        shape = f"torch.empty({n}, {size(linear.out_features)}, {size(linear.in_features)})"
        params.append(call(f"self.{linear.name} = nn.Parameter", [shape], 2))
        if linear.bias:
            bias = f"torch.empty({n}, {size(linear.out_features)})"
            params.append(call(f"self.{linear.name}_bias = nn.Parameter", [bias], 2))
    reset = [
        "# Each expert's as nn.Linear's: uniform within 1/sqrt(fan-in), biases too.",
        f"for name in {tuple(linear.name for linear in node.children)!r}:".replace("'", '"'),
        "    weight = getattr(self, name)",
        "    bound = weight.size(-1) ** -0.5",
        "    nn.init.uniform_(weight, -bound, bound)",
    ]
    if node.up.bias:
        reset.append('    nn.init.uniform_(getattr(self, f"{name}_bias"), -bound, bound)')
    mlp = _mlp_doc(node)
    doc = (
        "The routed experts of a mixture, their weights stacked: one tensor per projection "
        f"with the expert first. Each expert: {mlp} forward takes the routed rows sorted by "
        "expert and each expert's number of rows."
    )
    forward = _ExpertsWriter(node).write()
    return class_(
        f"class {EXPERTS}(nn.Module):",
        doc,
        method(
            "__init__",
            ["config: Config"],
            "None",
            "super().__init__()",
            f"self.n_experts = {n}",
            params,
            "self.reset_parameters()",
        ),
        method("reset_parameters", [], "None", reset),
        method("forward", ["x: Tensor", "counts: Tensor"], "Tensor", forward),
        method("extra_repr", [], "str", _extra_repr(node)),
    )


def _extra_repr(node: MLP) -> list[str]:
    # What the printer shows for the experts (archspec.backends.printer.leaves.experts).
    return [
        "return (",
        '    f"n_experts={self.n_experts}, in_features={self.up.size(-1)}, "',
        f'    f"hidden_features={{self.up.size(1)}}, gated={node.gated}, bias={node.up.bias}"',
        ")",
    ]
