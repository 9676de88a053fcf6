"""One benchmark step per mode, written once for both implementations.

A `Side` is a model plus what a step needs (inputs, optimizer, grad scaler); `make_step` turns
it into a zero-argument function. The generated model and the transformers model go through
the same function, so they do the same work: the same inputs, the same loss computed outside
the model, the same optimizer, the same autocast.

- forward: one inference forward pass (prefill) over B × S tokens, weights in the dtype.
- train: forward, cross-entropy loss, backward, fused AdamW step, with fp32 weights and
  bf16 / fp16 autocast (mixed precision, as `torch.amp` recommends; fp16 with a grad scaler).
- generate: greedy decoding of `new_tokens` tokens after a prompt of S (a decoder) or of an
  input of S (an encoder-decoder, decoding from its start token), with a KV cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
MODES = ("forward", "train", "generate")


@dataclass
class Side:
    """One implementation under test. `kind`: "ours" (the generated model) or "hf"."""

    kind: str
    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    targets: torch.Tensor | None = None
    optimizer: torch.optim.Optimizer | None = None
    scaler: Any = None  # torch.amp.GradScaler for fp16 training
    generation: Any = None  # transformers' GenerationConfig (hf side, generate mode)
    no_cache: dict[str, Any] = field(default_factory=dict)  # hf: use_cache=False, if taken


def make_inputs(
    ir, mode: str, batch: int, seq: int, device: torch.device, seed: int
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Random token ids (the same for both sides) and training targets."""
    gen = torch.Generator().manual_seed(seed)
    vocab = ir.value(ir.root.vocab_size)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    inputs = {"input_ids": ids}
    out_len = seq
    if ir.root.layout == "encoder-decoder":
        # A decoder as long as the encoder for forward and train. Generation starts the
        # decoder from the spec's start token (0 when it names none), which hf_side gives
        # transformers too: other tokens would get a start token put in front.
        if mode == "generate":
            start = ir.root.decoder_start_token or 0
            inputs["decoder_input_ids"] = torch.full((batch, 1), start, dtype=torch.long)
        else:
            inputs["decoder_input_ids"] = torch.randint(0, vocab, (batch, seq), generator=gen)
        out_len = inputs["decoder_input_ids"].size(1)
    targets = torch.randint(0, vocab, (batch, out_len), generator=gen)
    return {k: v.to(device) for k, v in inputs.items()}, targets.to(device)


def _output(side: Side, out: Any) -> torch.Tensor:
    """The tensor the loss is taken of: logits, or hidden states for a model without a head."""
    if side.kind == "hf":
        logits = getattr(out, "logits", None)
        return logits if logits is not None else out.last_hidden_state
    return out[0] if isinstance(out, tuple) else out


def _loss(output: torch.Tensor, targets: torch.Tensor, vocab: int) -> torch.Tensor:
    # In fp32, as autocast would do for cross_entropy anyway.
    if output.size(-1) == vocab:
        return F.cross_entropy(output.flatten(0, 1).float(), targets.flatten())
    return output.float().square().mean()  # an encoder without a head: any scalar will do


def _forward_call(side: Side) -> Any:
    # transformers builds a KV cache by default; ours does not outside generation.
    return side.model(**side.inputs, **side.no_cache)


def _start_token(model: torch.nn.Module, start: torch.Tensor) -> None:
    """Give an encoder-decoder whose spec names no decoder start token (the original
    Transformer) the one both sides start from."""
    config = model.config  # type: ignore[attr-defined]
    if config.decoder_start_token is None:
        model.config = dataclasses.replace(config, decoder_start_token=int(start[0, 0]))


def make_step(side: Side, mode: str, device: torch.device, dtype: str, vocab: int, new_tokens: int):
    """The zero-argument function that runs one step of `mode` on `side`."""
    amp = dtype != "fp32"
    autocast = torch.autocast(device.type, dtype=DTYPES[dtype], enabled=amp)

    if mode == "forward":

        def step() -> None:
            with torch.inference_mode():
                _forward_call(side)

    elif mode == "train":
        opt, scaler = side.optimizer, side.scaler
        assert opt is not None and side.targets is not None

        def step() -> None:
            with autocast:
                loss = _loss(_output(side, _forward_call(side)), side.targets, vocab)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)

    elif side.kind == "hf":

        def step() -> None:
            with torch.inference_mode():
                side.model.generate(**side.inputs, generation_config=side.generation)

    else:
        if "decoder_input_ids" in side.inputs:  # generate starts the decoder itself
            _start_token(side.model, side.inputs["decoder_input_ids"])

        def step() -> None:
            with torch.inference_mode():
                side.model.generate(side.inputs["input_ids"], new_tokens)

    return step


def prepare(side: Side, mode: str, device: torch.device, dtype: str) -> None:
    """Put the model in the state the mode needs: train mode with fp32 weights and an
    optimizer, or eval mode with weights cast to the dtype."""
    if mode == "train":
        side.model.train()
        side.optimizer = adamw(side.model)
        if dtype == "fp16":
            side.scaler = torch.amp.GradScaler(device.type)
    else:
        side.model.eval()
        side.model.to(DTYPES[dtype])


def adamw(model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW, fused: one kernel over all parameters, on CUDA and (torch 2.4 and later) on CPU.
    The default foreach implementation makes several passes over every tensor; on CPU it
    took about half of a small model's training step, four times the fused one's time."""
    try:
        return torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    except RuntimeError:  # a device or dtype without a fused kernel
        return torch.optim.AdamW(model.parameters(), lr=1e-5)


def output_of(side: Side) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
    """Logits (or hidden states) of an eager forward, for checking that both sides agree.
    Calls `forward` directly, so a compiled module is not recompiled for the check's shape."""

    def run(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return _output(side, side.model.forward(**inputs, **side.no_cache))

    return run
