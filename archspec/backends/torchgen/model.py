"""The generated `Model` class: embeddings, the stack(s) and the heads, plus `generate`.

The forward contract is the same for every spec of a layout: `forward(input_ids,
attention_mask=None)` for encoders and decoders, `forward(input_ids, decoder_input_ids,
attention_mask=None)` for encoder-decoders. It returns logits when there is an LM head, hidden
states otherwise, paired with the pooled first token when there is a pooler.
"""

from __future__ import annotations

from archspec import kinds
from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, docstring, lines, method
from archspec.ir.nodes import Stack
from archspec.kinds.activations import POOLER_ACTIVATION


def _summary(f: Features) -> str:
    parts = ["token embeddings"]
    if f.type_emb is not None:
        parts.append("segment embeddings")
    parts += [f"the {stack.role}" for stack in f.stacks]
    if f.pooler is not None:
        parts.append("a pooler over the first token")
    head = f.lm_head
    if head is not None:
        tied = " tied to the token embeddings" if head.tied_to else ""
        parts.append(f"a language-model head{tied}")
    listed = ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{f.name} ({f.layout}): {listed}."


def _init(f: Features, size: ExprPrinter) -> str:
    body = ["super().__init__()", "self.config = config"]
    model = f.model
    for part in model.children:
        if isinstance(part, Stack):
            body.append(f"self.{part.name} = {f.cls(part)}(config)")
        elif part is model.type_emb:
            body.append(assign(part, size, constants={f.ir.value(part.num): "config.token_types"}))
        else:
            body.append(assign(part, size))
        if part is model.lm_head and model.lm_head.tied_to:
            body += [
                "# The head shares the token embedding matrix: one parameter, used twice.",
                f"self.{part.name}.weight = self.{model.lm_head.tied_to}",
            ]
    if f.model.scale_tied_output:
        body += [
            "# T5 rescales the decoder output before the head it shares with the embeddings.",
            f"self.output_scale = {size(f.model.d_model)}**-0.5",
        ]
    return method("__init__", ["config: Config = Config()"], "None", body)


def _params(f: Features) -> list[str]:
    if f.encoder_decoder:
        return [
            "input_ids: Tensor",
            "decoder_input_ids: Tensor",
            "attention_mask: Tensor | None = None",
        ]
    params = ["input_ids: Tensor", "attention_mask: Tensor | None = None"]
    if f.type_emb is not None:
        params.append("token_type_ids: Tensor | None = None")
    if f.cache:
        params.append("cache: list[KVCache] | None = None")
    return params


def _doc(f: Features) -> str:
    out = (
        "logits (B, {S}, vocab_size)"
        if f.lm_head is not None
        else "hidden states (B, {S}, d_model)"
    )
    if f.pooler is not None:
        out += " and the pooled first token (B, d_model)"
    padding = "attention_mask (B, S) is 1 for tokens and 0 for padding"
    if f.encoder_decoder:
        text = (
            f"The {out.format(S='T')} for decoder_input_ids (B, T), given input_ids (B, S) "
            f"to encode; {padding} in input_ids."
        )
    else:
        text = f"The {out.format(S='S')} for input_ids (B, S); {padding}."
    if f.type_emb is not None:
        text += " token_type_ids (B, S) default to segment 0."
    if f.cache:
        text += (
            "\n\nWith a cache, input_ids are the tokens after the cached ones and an "
            "attention_mask covers both."
        )
    return text


def _forward(f: Features) -> str:
    body: list[str] = []
    if f.encoder_decoder:
        body += [
            "encoder_out = self.encoder(self.tok_emb(input_ids), attention_mask)",
            call(
                "x = self.decoder",
                [
                    "self.tok_emb(decoder_input_ids)",
                    "encoder_out",
                    "encoder_attention_mask=attention_mask",
                ],
                2,
            ),
        ]
    elif f.encoder_only:
        body.append("x = self.tok_emb(input_ids)")
        if f.type_emb is not None:
            body += [
                "if token_type_ids is None:  # every token is in segment 0",
                "    x = x + self.type_emb.weight[0]",
                "else:",
                "    x = x + self.type_emb(token_type_ids)",
            ]
        body.append("x = self.encoder(x, attention_mask)")
    else:
        args = ["self.tok_emb(input_ids)", "attention_mask"]
        if f.cache:
            args.append("cache")
        body.append(call("x = self.decoder", args, 2))
    result = "x"
    if f.pooler is not None:
        pooler = f.pooler.name
        pooled = kinds.activation(POOLER_ACTIVATION).render(f"self.{pooler}(x[:, 0])")
        body.append(f"pooled = {pooled}")
    if f.lm_head is not None:
        if f.model.scale_tied_output:
            body.append("x = x * self.output_scale")
        result = "self.lm_head(x)"
    if f.pooler is not None:
        result += ", pooled"
    body.append(f"return {result}")
    returns = "tuple[Tensor, Tensor]" if f.pooler is not None else "Tensor"
    return method("forward", _params(f), returns, docstring(_doc(f), 2), body)


GENERATE = '''
@torch.no_grad()
def generate(self, input_ids: Tensor, max_new_tokens: int) -> Tensor:
    """Greedy decoding: append the most likely next token, max_new_tokens times.

    The prompt goes through the model once, filling a KV cache; each later step
    feeds only the newest token. Only the last position's logits pick the next
    token, so the head runs on that position alone.
    """
    cache = [KVCache() for _ in self.decoder.blocks]
    tokens = step = input_ids
    for _ in range(max_new_tokens):
        x = self.decoder(self.tok_emb(step), cache=cache)[:, -1:]{scale}
        step = self.lm_head(x).argmax(dim=-1)
        tokens = torch.cat([tokens, step], dim=1)
    return tokens
'''


def _generate(f: Features) -> str:
    # The statements of forward for a decoder with a cache (see _forward), with the head
    # applied to the last position only: over a prompt of S tokens the full head costs
    # 2·S·d_model·vocab FLOPs, a large share of generation for small models.
    scale = "\n        x = x * self.output_scale" if f.model.scale_tied_output else ""
    return GENERATE.strip("\n").replace("{scale}", scale)


def model_class(f: Features, size: ExprPrinter) -> str:
    return class_(
        "class Model(nn.Module):",
        _summary(f),
        _init(f, size),
        _forward(f),
        lines(_generate(f)) if f.cache else None,
    )
