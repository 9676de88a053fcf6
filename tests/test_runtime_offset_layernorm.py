"""archspec.runtime.norms.OffsetLayerNorm against transformers' NemotronLayerNorm1P: the same
output in float32 and bfloat16, a fresh one the identity scale (1 + 0), and what autograd
keeps counted as the norm kind says."""

from __future__ import annotations

import pytest
import torch

from archspec.kinds import norm
from archspec.runtime.norms import OffsetLayerNorm

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_equals_nemotron_layernorm1p(dtype: torch.dtype) -> None:
    from transformers.models.nemotron.modeling_nemotron import NemotronLayerNorm1P

    torch.manual_seed(0)
    theirs = NemotronLayerNorm1P(48, eps=1e-5)
    with torch.no_grad():
        theirs.weight.normal_(0.0, 0.5)
        theirs.bias.normal_(0.0, 0.5)
    ours = OffsetLayerNorm(48, eps=1e-5)
    ours.load_state_dict(theirs.state_dict())
    x = (torch.randn(3, 5, 48) * 3 + 1).to(dtype)
    assert torch.equal(ours.to(dtype)(x), theirs.to(dtype)(x))


def test_a_fresh_one_scales_by_one() -> None:
    fresh = OffsetLayerNorm(16)
    x = torch.randn(2, 16)
    reference = torch.nn.functional.layer_norm(x, (16,))
    assert torch.equal(fresh(x), reference)
    kind = norm("offset_layernorm")
    assert kind.torch_class == "OffsetLayerNorm" and kind.parameters(16, True) == 32
