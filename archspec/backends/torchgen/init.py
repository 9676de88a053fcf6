"""The generated `Model.init_weights`: each family's initialisation, written out.

A generated model is meant to be trained from scratch, so it starts from the scheme its paper
or reference code uses, not from PyTorch's per-layer defaults (kaiming-uniform linears and
normal(0, 1) embeddings: a tied head then starts with logits of size ~sqrt(d_model) and a loss
many times ln(vocab)). The schemes are a table by `IR.identity.family`, the one place a family
chooses; families not in it get GPT-2's scheme, the common default (nanoGPT, litgpt).
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.feedforward import EXPERTS
from archspec.backends.torchgen.text import docstring, method
from archspec.ir.nodes import Attention, MoE


@dataclass(frozen=True)
class Scheme:
    kind: str  # "normal": every weight normal(0, 0.02); "t5": T5's factor-scaled normals
    scaled_residual: bool  # residual projections' std divided by sqrt(2 * n_layers)
    why: str  # the reference the docstring cites


GPT2 = Scheme(
    "normal",
    True,
    "GPT-2's initialisation (Radford et al. 2019; nanoGPT and transformers' GPT2PreTrainedModel)",
)
PLAIN = "normal(0, 0.02) for every weight, as {ref}"
SCHEMES: dict[str, Scheme] = {
    "gpt2": GPT2,
    "bert": Scheme("normal", False, PLAIN.format(ref="BERT (initializer_range 0.02)")),
    "roberta": Scheme("normal", False, PLAIN.format(ref="RoBERTa, which keeps BERT's")),
    "gpt": Scheme("normal", False, PLAIN.format(ref="GPT (Radford et al. 2018)")),
    "llama": Scheme("normal", False, PLAIN.format(ref="LLaMA's reference code")),
    "mistral": Scheme("normal", False, PLAIN.format(ref="Mistral's reference code")),
    "mixtral": Scheme("normal", False, PLAIN.format(ref="Mixtral's reference code")),
    "bloom": Scheme("normal", False, PLAIN.format(ref="BLOOM (initializer_range 0.02)")),
    "opt": Scheme("normal", False, PLAIN.format(ref="OPT (init_std 0.02)")),
    "bart": Scheme("normal", False, PLAIN.format(ref="BART (init_std 0.02)")),
    "t5": Scheme(
        "t5", False, "T5's factor-scaled normals (transformers' T5PreTrainedModel._init_weights)"
    ),
}
SCHEMES["flan-t5"] = SCHEMES["t5"]

RESIDUAL = (".o.weight", ".down.weight")  # the projections that write into the residual stream
STACKED_RESIDUAL = ".experts.down"  # the routed experts' down projections, stacked


def scheme(f: Features) -> Scheme:
    return SCHEMES.get(f.ir.identity.family, GPT2)


def _norms(f: Features) -> str:
    classes = sorted({norm.entry.constructor for norm in f.norms})
    return classes[0] if len(classes) == 1 else f"({', '.join(classes)})"


def _experts(f: Features, weight: str) -> list[str]:
    """The stacked experts' weights initialised as each expert's Linear (`weight`: the
    call for one of them), biases zero."""
    if not f.classes(MoE):
        return []
    head = f"    if isinstance(module, {EXPERTS}):  # stacked: each expert as a Linear"
    if not f.classes(MoE)[0][0].expert.up.bias:
        return [head, "        for param in module.parameters():", f"            {weight}"]
    return [
        head,
        "        for name, param in module.named_parameters():",
        '            if name.endswith("_bias"):',
        "                nn.init.zeros_(param)",
        "            else:",
        f"                {weight}",
    ]


def _normal(f: Features, chosen: Scheme) -> list[str]:
    body = [
        "for module in self.modules():",
        "    if isinstance(module, (nn.Linear, nn.Embedding)):",
        "        nn.init.normal_(module.weight, 0.0, 0.02)",
        *_experts(f, "nn.init.normal_(param, 0.0, 0.02)"),
        "    if isinstance(module, nn.Linear) and module.bias is not None:",
        "        nn.init.zeros_(module.bias)",
    ]
    if f.norms:
        body += [f"    elif isinstance(module, {_norms(f)}):", "        module.reset_parameters()"]
    sinks = [f.cls(node) for node, _ in f.classes(Attention) if node.sinks is not None]
    if sinks:  # drawn as gpt-oss draws them (its _init_weights), not left at zero
        classes = sinks[0] if len(sinks) == 1 else f"({', '.join(sinks)})"
        body += [
            f"    if isinstance(module, {classes}):",
            "        nn.init.normal_(module.sinks, 0.0, 0.02)",
        ]
    if chosen.scaled_residual:
        residual = RESIDUAL + ((STACKED_RESIDUAL,) if f.classes(MoE) else ())
        stacks = ", ".join(f"self.{stack.name}" for stack in f.stacks)
        stacks += "," if len(f.stacks) == 1 else ""
        body += [
            "# Each block adds two projections to the residual stream: scaling their std by",
            "# 1/sqrt(2 * n_layers) keeps the stream's variance from growing with depth.",
            f"for stack in ({stacks}):",
            f"    std = 0.02 / math.sqrt(2 * len(stack.{f.stacks[0].blocks.name}))",
            "    for name, param in stack.named_parameters():",
            f"        if name.endswith(({', '.join(map(repr, residual))})):".replace("'", '"'),
            "            nn.init.normal_(param, 0.0, std)",
        ]
    return body


def _t5(f: Features, size: ExprPrinter) -> list[str]:
    attention = f.stacks[0].block_variants[0].attn
    body = [
        "config = self.config",
        "for name, module in self.named_modules():",
        "    if isinstance(module, nn.Linear):",
        "        # std 1/sqrt(fan-in) keeps each projection's output at unit variance;",
        "        # queries also absorb the 1/sqrt(head_dim) T5's attention leaves out.",
        "        fan_in = module.in_features",
        '        if name.endswith("attn.q"):',
        f"            fan_in *= {size(attention.head_dim)}",
        "        nn.init.normal_(module.weight, 0.0, fan_in**-0.5)",
        *_experts(f, "nn.init.normal_(param, 0.0, param.size(-1) ** -0.5)"),
    ]
    if f.norms:
        body += [f"    elif isinstance(module, {_norms(f)}):", "        module.reset_parameters()"]
    body += [
        "# After the linears: a tied head keeps the embeddings' normal(0, 1).",
        f"nn.init.normal_(self.{f.model.tok_emb.name}.weight, 0.0, 1.0)",
    ]
    for stack in f.stacks:
        if stack.rel_bias is not None:
            table = f"self.{stack.name}.{stack.rel_bias.name}.weight"
            body.append(f"nn.init.normal_({table}, 0.0, {size(f.model.d_model)}**-0.5)")
    return body


def _doc(f: Features, chosen: Scheme) -> str:
    family = f.ir.identity.family
    if family in SCHEMES:
        text = f"Initialise the weights with {chosen.why}."
    else:
        text = (
            f"Initialise the weights with {chosen.why}: {family!r} has no scheme of its "
            "own in archspec, and GPT-2's is the common default."
        )
    if chosen.kind == "t5":
        return text + (
            "\n\nLinear weights are normal(0, 1/sqrt(fan-in)), queries normal(0, "
            "1/sqrt(d_model * head_dim)); embeddings normal(0, 1); the relative position "
            "bias normal(0, 1/sqrt(d_model)); norms start as the identity."
        )
    text += (
        "\n\nLinear and embedding weights are normal(0, 0.02), biases zero and norms start "
        "as the identity"
    )
    if chosen.scaled_residual:
        text += "; the projections into the residual stream use 0.02 / sqrt(2 * n_layers)"
    return text + ". Model.__init__ calls this; call it again to start over."


def init_weights_method(f: Features, size: ExprPrinter) -> str:
    chosen = scheme(f)
    body = _t5(f, size) if chosen.kind == "t5" else _normal(f, chosen)
    return method("init_weights", [], "None", docstring(_doc(f, chosen), 2), body)
