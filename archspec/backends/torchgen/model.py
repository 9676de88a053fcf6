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
from archspec.backends.torchgen.init import init_weights_method
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, docstring, indent, lines, method
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
    body += ["self.init_weights()", "self.set_checkpoint(checkpoint)"]
    params = ["config: Config = Config()", "checkpoint: str | None = None"]
    return method("__init__", params, "None", body)


SET_CHECKPOINT_DOC = (
    "Activation checkpointing for training (torch.utils.checkpoint): what the backward "
    "pass recomputes instead of keeping.\n\n"
    "None keeps every tensor the backward needs. 'selective' recomputes each attention "
    "core, softmax(QKᵀ)V with its mask and dropout, keeping q, k, v and the mask, as "
    "Megatron-LM's selective recomputation does (Korthikanti et al. 2022). 'full' keeps "
    "only each block's inputs and runs the block again in the backward pass."
)


def _set_checkpoint() -> str:
    body = [
        'if policy not in (None, "selective", "full"):',
        "    raise ValueError(f\"checkpoint: None, 'selective' or 'full', not {policy!r}\")",
        "for module in self.modules():",
        '    if hasattr(module, "checkpoint"):  # the stacks and the attention layers',
        "        module.checkpoint = policy",
    ]
    doc = docstring(SET_CHECKPOINT_DOC, 2)
    return method("set_checkpoint", ["policy: str | None"], "None", doc, body)


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
    if f.cached(f.stacks[0]):
        params.append("cache: list[KVCache] | None = None")
    return params


def _doc(f: Features) -> str:
    out = (
        "logits (B, {S}, vocab_size)"
        if f.lm_head is not None
        else "scores (B, {S}): is each token replaced (ELECTRA)"
        if f.model.score is not None
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
    if f.cached(f.stacks[0]):
        text += (
            "\n\nWith a cache, input_ids are the tokens after the cached ones and an "
            "attention_mask covers both (or all the cache's positions: generate passes the "
            "same mask at every step)."
        )
    return text


def _forward(f: Features) -> str:
    body: list[str] = _length_checks(f)
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
        body += _lm_transform(f)
        result = _head(f)
    if f.model.score is not None:
        assert f.model.score_dense is not None and f.model.score_activation is not None
        dense = kinds.activation(f.model.score_activation).render("self.score_dense(x)")
        result = f"self.score({dense}).squeeze(-1)"
    if f.pooler is not None:
        result += ", pooled"
    body.append(f"return {result}")
    returns = "tuple[Tensor, Tensor]" if f.pooler is not None else "Tensor"
    return method("forward", _params(f), returns, docstring(_doc(f), 2), body)


def _lm_transform(f: Features) -> list[str]:
    """A prediction head's transform (masked-LM heads, ModernBERT's decoder):
    norm(activation(dense(x))), before the projection."""
    model = f.model
    if model.lm_transform is None:
        return []
    assert model.lm_norm is not None and model.lm_activation is not None
    dense = f"self.{model.lm_transform.name}(x)"
    act = kinds.activation(model.lm_activation).render(dense)
    return [
        "# The prediction head's transform before the vocabulary projection.",
        f"x = self.{model.lm_norm.name}({act})",
    ]


SIGNATURE = """
@torch.no_grad()
def generate(
    self,
    input_ids: Tensor,
    max_new_tokens: int,
    *,
    attention_mask: Tensor | None = None,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
"""

CHOICE = (
    "Each step takes the most likely token, or with do_sample one drawn from "
    "`sampling_probs` (temperature, top_k, top_p as transformers' logits processors); "
    "with num_beams > 1 the result is `beam_search`'s best hypothesis (length_penalty "
    "and early_stopping as in transformers). A sequence that emits eos_token_id is done; "
    "finished sequences are padded with eos_token_id."
)
CACHE = (
    "The decoder's self-attention caches its keys and values, preallocated to the final "
    "length, so each step after the first feeds only the newest token; the head runs on "
    "the last position alone. Every step after the first has the same shapes (the whole "
    "cache is read, its unwritten positions masked), so a compiled decoder compiles the "
    "decode step once."
)
DECODER_INPUTS = (
    "input_ids (B, S) is the prompt, left-padded where attention_mask (B, S) is 0; "
    "the result (B, S + new tokens) continues it."
)
ENCODER_DECODER_INPUTS = (
    "input_ids (B, S) is encoded once (attention_mask (B, S) is 0 at padding); the "
    "decoder starts from config.decoder_start_token, and the result (B, 1 + new tokens) "
    "begins with it. Each cross-attention projects the encoder output once."
)

# The arguments Model.generate hands on to `generate_tokens`, in its order.
SEARCH_ARGS = [
    "max_new_tokens",
    "num_beams",
    "length_penalty",
    "early_stopping",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "eos_token_id",
    "generator",
]


def limited(stack: Stack) -> bool:
    """Its position kind's table or encodings were sized (or trained) for max_seq_len."""
    return stack.position.entry.length_limited


def _length_checks(f: Features) -> list[str]:
    """Lines refusing inputs longer than max_seq_len, before any work (an IndexError deep
    in an embedding, or silently untrained RoPE angles, otherwise)."""
    out = []
    for stack in f.stacks:
        if not limited(stack):
            continue
        if f.encoder_decoder and stack.role == "decoder":
            length = "decoder_input_ids.size(1)"
        elif f.cached(stack):
            # Attention reads every position a cache has room for.
            out.append("length = cache[0].max_len if cache else input_ids.size(1)")
            length = "length"
        else:
            length = "input_ids.size(1)"
        out.append(f"check_length({length}, self.config.max_seq_len)")
    return out


def _head(f: Features) -> str:
    """The logits of x, the LM head's input and output divided and soft-capped as the spec
    says."""
    x = f"x / {f.model.hidden_divisor!r}" if f.model.hidden_divisor != 1 else "x"
    logits = f"self.lm_head({x})"
    if f.model.logits_divisor != 1:
        logits = f"{logits} / {f.model.logits_divisor!r}"
    if f.model.logit_scale != 1:
        logits = f"{logits} * {f.model.logit_scale!r}"
    if f.model.logit_softcap is not None:
        logits = f"softcap({logits}, {f.model.logit_softcap!r})"
    return logits


def _logits(f: Features) -> list[str]:
    """The lines of `step` from the decoder's last position to the logits, as `forward`
    computes them (sampling and beams see the capped logits, as transformers')."""
    scale = ["x = x * self.output_scale"] if f.model.scale_tied_output else []
    return [*scale, *_lm_transform(f), f"return {_head(f)}"]


def _decoder_body(f: Features) -> list[str]:
    check = ["check_length(total, self.config.max_seq_len)"] if limited(f.stacks[0]) else []
    decoder = "x = self.decoder(self.tok_emb(tokens), attention_mask, cache=cache)[:, -1]"
    generation = f.position_code(f.stacks[0]).generation()
    reordered = "reordered" if generation else "cache"
    return [
        "total = input_ids.size(1) + max_new_tokens",
        *check,
        "cache = [KVCache(total, input_ids.device) for _ in self.decoder.blocks]",
        "if attention_mask is not None:  # the new tokens are never padding",
        "    attention_mask = F.pad(attention_mask, (0, max_new_tokens), value=1)",
        "    attention_mask = attention_mask.repeat_interleave(num_beams, dim=0)",
        "",
        "def step(tokens: Tensor) -> Tensor:",
        '    """The next-token logits after the newest tokens (rows, n)."""',
        f"    {decoder}",
        *indent(lines(*_logits(f)), 1).splitlines(),
        "",
        *generation,
        call("return generate_tokens", ["step", reordered, "input_ids", *SEARCH_ARGS], 2),
    ]


def _encoder_decoder_body(f: Features) -> list[str]:
    encoder, decoder = f.stacks
    checks = []
    if limited(encoder):
        checks.append("check_length(input_ids.size(1), self.config.max_seq_len)")
    if limited(decoder):
        checks.append("check_length(1 + max_new_tokens, self.config.max_seq_len)")
    return [
        "if self.config.decoder_start_token is None:",
        "    raise ValueError(",
        '        "Config.decoder_start_token is None (the spec sets no "',
        '        "head.decoder_start_token): the decoder has no token to start from"',
        "    )",
        *checks,
        "encoder_out = self.encoder(self.tok_emb(input_ids), attention_mask)",
        "# Each beam reads its sequence's encoder output.",
        "encoder_out = encoder_out.repeat_interleave(num_beams, dim=0)",
        "if attention_mask is not None:",
        "    attention_mask = attention_mask.repeat_interleave(num_beams, dim=0)",
        "length = 1 + max_new_tokens",
        "cache = [KVCache(length, input_ids.device) for _ in self.decoder.blocks]",
        "",
        "def step(tokens: Tensor) -> Tensor:",
        '    """The next-token logits after the newest decoder tokens (rows, n)."""',
        "    x = self.decoder(",
        "        self.tok_emb(tokens),",
        "        encoder_out,",
        "        encoder_attention_mask=attention_mask,",
        "        cache=cache,",
        "    )[:, -1]",
        *indent(lines(*_logits(f)), 1).splitlines(),
        "",
        "start = torch.full_like(input_ids[:, :1], self.config.decoder_start_token)",
        call("return generate_tokens", ["step", "cache", "start", *SEARCH_ARGS], 2),
    ]


def _generate(f: Features) -> str:
    # The head applies to the last position only: over a prompt of S tokens the full head
    # costs 2·S·d_model·vocab FLOPs, a large share of generation for small models.
    if f.encoder_decoder:
        what = "Decode up to max_new_tokens tokens from the encoded input_ids"
        inputs, body = ENCODER_DECODER_INPUTS, _encoder_decoder_body(f)
    else:
        what = "Append up to max_new_tokens tokens to input_ids"
        inputs, body = DECODER_INPUTS, _decoder_body(f)
    doc = docstring(f"{what}.\n\n{inputs}\n\n{CHOICE}\n\n{CACHE}", 2)
    return lines(SIGNATURE.strip("\n"), indent(doc, 1), indent(lines(*body), 1))


def model_class(f: Features, size: ExprPrinter) -> str:
    return class_(
        "class Model(nn.Module):",
        _summary(f),
        _init(f, size),
        init_weights_method(f, size),
        _set_checkpoint(),
        _forward(f),
        lines(_generate(f)) if f.cache else None,
    )
