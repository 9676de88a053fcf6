"""Generated models start trainable: each family's initialisation gives a first loss near
ln(vocab) on random targets, the value of a uniform guess (PyTorch's defaults give many times
that with a tied head)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from archspec.backends.torchgen.init import SCHEMES
from tests.tiny import built_model, scaled_down, tiny_sizes

VOCAB = 1000
SPECS = [
    "gpt2", "gpt-1", "gpt3-175b", "llama-2-7b", "mixtral-8x7b", "bloom-560m", "palm-8b",
    "t5-small", "flan-t5-small", "bart-base", "transformer-base",
]  # fmt: skip


SIZES = tiny_sizes(d_model=64, d_ff=256, vocab_size=VOCAB, max_seq_len=64)


def tiny(name: str, tmp_path) -> torch.nn.Module:
    # PaLM's one kv head becomes two, as it always has here.
    sizes = scaled_down(name, SIZES, head_dim=16, experts=(4, 2), one_kv_head_stays=False)
    return built_model(name, sizes, tmp_path).eval()


@pytest.mark.parametrize("name", SPECS)
def test_initial_loss_is_near_ln_vocab(name: str, tmp_path) -> None:
    model = tiny(name, tmp_path)
    ids = torch.randint(VOCAB, (4, 32))
    targets = torch.randint(VOCAB, (4, 32))
    with torch.no_grad():
        if hasattr(model, "encoder") and hasattr(model, "decoder"):
            logits = model(ids, ids)
        else:
            logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()
    assert abs(loss - math.log(VOCAB)) < 0.15 * math.log(VOCAB), loss


def test_init_weights_can_start_over(tmp_path) -> None:
    model = tiny("gpt2", tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(0)
    model.init_weights()
    torch.manual_seed(1)
    model.init_weights()
    after = model.state_dict()
    assert not torch.equal(
        before["decoder.blocks.0.attn.q.weight"], after["decoder.blocks.0.attn.q.weight"]
    )
    assert after["decoder.blocks.0.attn.q.bias"].abs().max() == 0
    # GPT-2's residual projections: std 0.02 / sqrt(2 * 2 layers) = 0.01
    std = after["decoder.blocks.0.attn.o.weight"].std().item()
    assert 0.008 < std < 0.012, std
    assert 0.017 < after["decoder.blocks.0.mlp.up.weight"].std().item() < 0.023


def test_every_family_with_a_spec_has_a_known_scheme_or_the_default() -> None:
    for family in ("gpt2", "t5", "flan-t5", "bert", "llama", "bart"):
        assert family in SCHEMES
