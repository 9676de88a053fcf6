"""RoFormer (`model_type: roformer`) against transformers: a tiny RoFormerForMaskedLM's masked-LM
logits (and a RoFormerModel's hidden states) on a right-padded batch after load_weights, the
printed module tree, the parameters (transformers' frozen rotary table apart), and the
rotary table's precision: transformers computes its angles in float64 and casts, archspec in
float32, which stays within the encoder zoo's tolerance up to max_position_embeddings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config

pytest.importorskip("transformers")

TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # embeddings 32 wide, projected to 64 (embeddings_project); relu, not the head's gelu
    "mlm-projected": ("RoFormerForMaskedLM", dict(
        model_type="roformer", vocab_size=99, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
        embedding_size=32, hidden_act="relu", pad_token_id=0)),
    "base": ("RoFormerModel", dict(
        model_type="roformer", vocab_size=99, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=128, max_position_embeddings=40,
        pad_token_id=0)),
}  # fmt: skip


def _tiny(cls: str, fields: dict[str, Any]):
    import torch
    import transformers

    config = transformers.RoFormerConfig(**{k: v for k, v in fields.items() if k != "model_type"})
    config.architectures = [cls]
    torch.manual_seed(0)
    hf = getattr(transformers, cls)(config).eval()
    with torch.no_grad():  # biases (the masked-LM output bias too) and norm scales drawn
        for key, param in hf.named_parameters():
            if not param.requires_grad:
                continue
            if key.endswith("bias"):
                param.normal_(0.0, 0.3)
            elif "LayerNorm" in key:
                param.normal_(1.0, 0.3)
    return hf


def _ours(hf, tmp_path: Path):
    from archspec.backends.printer import module_repr
    from archspec.hf.weights import load_weights
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec
    from tests.test_hf_weights import generated

    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    assert repr(model) == module_repr(build_ir(load_spec(spec)))
    return model


@pytest.mark.parametrize("name", ["mlm-projected", pytest.param("base", marks=pytest.mark.long)])
def test_roformer_equals_transformers(name: str, tmp_path: Path) -> None:
    import torch

    from tests.test_hf_weights import assert_close

    hf = _tiny(*TINY[name])
    model = _ours(hf, tmp_path)
    # the rotary table: frozen in transformers (num_parameters counts it), computed here
    rows = hf.config.max_position_embeddings
    head_dim = hf.config.hidden_size // hf.config.num_attention_heads
    trainable = sum(p.numel() for p in hf.parameters() if p.requires_grad)
    assert sum(p.numel() for p in hf.parameters()) - trainable == rows * head_dim
    assert sum(p.numel() for p in model.parameters()) == trainable
    torch.manual_seed(1)
    ids = torch.randint(3, 99, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:], ids[1, 7:] = 0, 0
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask)
        ref = out.logits if hasattr(out, "logits") else out.last_hidden_state
        got = model(ids, mask)
        got = got[0] if isinstance(got, tuple) else got
        assert_close(got[mask.bool()], ref[mask.bool()])


@pytest.mark.long
def test_roformer_float64_table_within_tolerance_at_the_last_positions(tmp_path: Path) -> None:
    """transformers' angles are float64 cast to float32, archspec's float32 products: over
    every one of max_position_embeddings (1536, RoFormerConfig's default) positions the
    hidden states agree within the encoder zoo's tolerance."""
    import torch

    from tests.test_hf_weights import assert_close

    fields = dict(TINY["base"][1], max_position_embeddings=1536)
    hf = _tiny("RoFormerModel", fields)
    model = _ours(hf, tmp_path)
    torch.manual_seed(2)
    ids = torch.randint(3, 99, (1, 1536))
    with torch.no_grad():
        ref = hf(input_ids=ids).last_hidden_state
        assert_close(_hidden(model(ids)), ref)


def _hidden(out):
    return out[0] if isinstance(out, tuple) else out


def test_roformer_refuses_what_a_spec_cannot_say() -> None:
    base = {"model_type": "roformer", "hidden_size": 64, "num_attention_heads": 4}
    with pytest.raises(SpecError) as err:
        import_config({**base, "rotary_value": True})
    assert err.value.path == "rotary_value"
    with pytest.raises(SpecError) as err:
        import_config({**base, "num_attention_heads": 5})
    assert err.value.path == "num_attention_heads"
    with pytest.raises(SpecError) as err:
        import_config({**base, "is_decoder": True})
    assert err.value.path == "is_decoder"
    result = import_config(base)
    assert result.spec.position.interleaved and result.spec.position.theta == 10000.0
    assert result.spec.max_seq_len == 1536 and result.spec.vocab_size == 50000
    assert any("frozen" in note for note in result.notes)
