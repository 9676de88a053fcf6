"""The transformers implementation of a spec, with the generated model's weights.

The class is the spec's `hf_class`, its config comes from the family's exporter
(`archspec.hf.export_config.hf_config_dict`, checked to be the same architecture), and
attention runs through SDPA as in the generated code. The
weights are made equal with archspec.hf's `load_weights`, which maps a transformers state dict
onto the generated model strictly (every tensor used, every parameter filled).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from archspec.bench.steps import DTYPES
from archspec.errors import SpecError
from archspec.ir.nodes import IR


def _transformers():
    try:
        import transformers
    except ImportError:
        raise SpecError(
            "--vs-hf needs the transformers package", hint="pip install transformers"
        ) from None
    return transformers


def build_hf_model(data: dict, device: torch.device) -> tuple[torch.nn.Module, str]:
    """The transformers model for an exported config.json `data` (`hf_config_dict(spec)`) on
    `device` (fp32, randomly initialised), and the attention implementation it got: "sdpa"
    where the class supports it, else "eager"."""
    transformers = _transformers()
    fields = {k: v for k, v in data.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(data["model_type"], **fields)
    config.architectures = data["architectures"]
    from archspec.hf.classes import hf_class

    cls = getattr(transformers, hf_class(data["architectures"][0]).transformers_name)
    with torch.device(device):
        try:
            model = cls._from_config(config, attn_implementation="sdpa")
        except (ValueError, ImportError):  # the class has no SDPA path
            model = cls._from_config(config, attn_implementation="eager")
    return model, model.config._attn_implementation


@dataclass(frozen=True)
class Resident:
    """What transformers' model holds for the whole of a --vs-hf run, in bytes."""

    params: int  # its parameters as the mode keeps them
    buffers: int  # its buffers, which no parameter count includes
    largest_buffer: str  # the largest one's name and shape, for the refusal ("" if none)


def resident_bytes(data: dict, mode: str, dtype: str) -> Resident:
    """What transformers' model of `data` will hold beside ours, measured on the model built
    on the meta device (no memory is allocated). Its parameters are ours in number, but its
    buffers are its own and may outgrow the weights: GPTBigCode keeps a causal mask of
    max_position_embeddings² bools (400 MB at 20,000 positions for a model of 5 MB), which
    no formula of ours predicts; the meta model has it at its size, whatever the class.
    Parameters are counted as the mode keeps them between steps: in the dtype for forward
    and generate (floating buffers too), fp32 with AdamW's two moments in training (the
    gradients are freed after each step). Its step's activations are left out: the two sides'
    steps alternate, so the activations of one step (ours' prediction) are counted once."""
    model, _ = build_hf_model(data, torch.device("meta"))
    train = mode == "train"
    element = 4 if train else DTYPES[dtype].itemsize
    params = sum(p.numel() for p in model.parameters()) * element * (3 if train else 1)
    buffers = dict(model.named_buffers())
    sizes = {
        name: b.numel() * (element if b.is_floating_point() else b.element_size())
        for name, b in buffers.items()
    }
    largest = max(sizes, key=sizes.__getitem__, default=None)
    described = ""
    if largest is not None:
        shape = " × ".join(map(str, buffers[largest].shape))
        described = f"{largest}: {shape} {buffers[largest].dtype}"
    return Resident(params, sum(sizes.values()), described)


def copy_weights(ours: torch.nn.Module, hf: torch.nn.Module, ir: IR) -> None:
    """Give the generated model the transformers model's weights."""
    from archspec.hf.weights import load_weights

    state = {k: v for k, v in hf.state_dict().items()}
    load_weights(ours, state, spec=ir)


def generation_config(ir: IR, new_tokens: int) -> Any:
    """Greedy decoding of exactly `new_tokens` tokens, as the generated model does it: no
    end-of-sequence token to stop at, no forced first or last token (BART's config has both).
    Set it as the model's own generation_config too, so that nothing is filled in from the
    model's defaults."""
    transformers = _transformers()
    return transformers.GenerationConfig(
        max_new_tokens=new_tokens,
        do_sample=False,
        num_beams=1,
        eos_token_id=None,
        pad_token_id=0,
        bos_token_id=None,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
        decoder_start_token_id=(ir.root.decoder_start_token or 0)
        if ir.root.layout == "encoder-decoder"
        else None,
        use_cache=True,
    )


def takes_use_cache(model: torch.nn.Module) -> bool:
    return "use_cache" in inspect.signature(model.forward).parameters
