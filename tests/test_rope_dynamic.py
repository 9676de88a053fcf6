"""Dynamic NTK scaling keeps state across calls, as transformers keeps it.

transformers' `dynamic_rope_update` recomputes the rotary frequencies when a sequence is longer
than the context trained on (`max_position_embeddings`) and than every sequence before it, and
restores the original ones when a sequence fits that context again after longer ones; a
sequence in between keeps the frequencies of the longest so far. So one forward's output
depends on the calls before it. The generated model keeps the same state on its stack: the
same calls, in the same order, give the same logits.
"""

from __future__ import annotations

from pathlib import Path

import torch

from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from tests.test_hf_weights import VOCAB, generated, hf_model, save

# Lengths around the original context (8): growth (12), kept (10: between 8 and 12), reset
# (5), kept (8 = the context: no reset), growth (14), reset (3), growth past the table the
# first growth built (20).
CALLS = (12, 10, 5, 9, 8, 14, 3, 20)


def test_calls_in_sequence_give_transformers_logits(tmp_path: Path) -> None:
    hf = hf_model("llama-rope-dynamic")
    checkpoint = save(hf, tmp_path / "checkpoint", "llama-rope-dynamic")
    module, _ = generated(checkpoint, tmp_path)
    model = load_weights(module.Model(module.Config()).eval(), checkpoint)
    torch.manual_seed(2)
    with torch.no_grad():
        for length in CALLS:
            ids = torch.randint(3, VOCAB, (2, length))
            got, ref = model(ids), hf(input_ids=ids).logits
            diff = (got - ref).abs().max().item()
            assert diff <= 1e-5, f"{length} tokens: max abs diff {diff:.3g}"
            stack = model.decoder if hasattr(model, "decoder") else model.stack
            assert stack.rope_length == hf.model.rotary_emb.max_seq_len_cached


def test_the_scaling_changes_the_logits_past_the_context(tmp_path: Path) -> None:
    """Not vacuous: the same weights with unscaled RoPE agree up to the context, and past it
    differ by far more than the 1e-5 the equality above allows (the tiny model's small
    weights keep logits close: about 1e-3)."""
    hf = hf_model("llama-rope-dynamic")
    checkpoint = save(hf, tmp_path / "checkpoint", "llama-rope-dynamic")
    module, _ = generated(checkpoint, tmp_path)
    scaled = load_weights(module.Model(module.Config()).eval(), checkpoint)
    plain = load_weights(module.Model(module.Config(rope_factor=1.0)).eval(), checkpoint)
    torch.manual_seed(3)
    with torch.no_grad():
        short, long = torch.randint(3, VOCAB, (1, 8)), torch.randint(3, VOCAB, (1, 12))
        assert torch.equal(scaled(short), plain(short))
        assert (scaled(long) - plain(long)).abs().max() > 1e-4


def test_config_round_trips_through_export() -> None:
    """A 4.x `rope_scaling` imports as `scaling: dynamic`; export writes transformers 5's
    rope_parameters, with the context trained on as max_position_embeddings."""
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "vocab_size": 99,
        "max_position_embeddings": 2048,
        "rope_scaling": {"type": "dynamic", "factor": 2.0},
    }
    spec = import_config(config).spec
    scaling = spec.position.scaling
    assert (scaling.type, scaling.factor, spec.max_seq_len) == ("dynamic", 2.0, 2048)
    exported = hf_config_dict(spec)
    assert exported["rope_parameters"] == {
        "rope_type": "dynamic",
        "rope_theta": 10000.0,
        "factor": 2.0,
    }
    assert exported["max_position_embeddings"] == 2048
    assert import_config(exported).spec == spec
