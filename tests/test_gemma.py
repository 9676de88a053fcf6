"""Gemma's own parts, in bfloat16 where float32 would hide a difference.

Logits and greedy tokens (float32) are in tests/test_hf_weights.py (`gemma`), the count of
`gemma-2b` against GemmaForCausalLM in tests/test_counts.py and its FLOPs against
FlopCounterMode in tests/test_flops.py. Here: the embedding scale rounded to the embeddings'
dtype and the (1 + w) RMSNorm computed in float32, both bit for bit against transformers'
modules in bfloat16.
"""

from __future__ import annotations

import pytest
import torch

from archspec.hf.export_config import hf_config_dict
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.tiny import generated_module, tiny_sizes

transformers = pytest.importorskip("transformers")
modeling_gemma = pytest.importorskip("transformers.models.gemma.modeling_gemma")

# d_model 80: sqrt(80) = 8.944... is 8.9375 in bfloat16, so rounding the factor first differs
# from multiplying by the float.
TINY = tiny_sizes(
    "n_kv_heads=1", "head_dim=32", n_layers=1, d_model=80, d_ff=96, vocab_size=99, max_seq_len=32
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    spec = load_spec("gemma-2b", TINY)
    module = generated_module(build_ir(spec), folder=tmp_path_factory.mktemp("gemma"))
    config = transformers.AutoConfig.for_model(**hf_config_dict(spec))
    torch.manual_seed(0)
    hf = transformers.GemmaForCausalLM(config).eval()
    return module, hf


def test_embedding_scale_is_rounded_to_the_dtype(pair) -> None:
    module, hf = pair
    model = module.Model().eval()
    model.tok_emb.weight.data.copy_(hf.model.embed_tokens.weight.data)
    model, hf = model.to(torch.bfloat16), hf.to(torch.bfloat16)
    seen = {}

    def keep(name):
        def hook(module, args, kwargs):
            seen[name] = args[0] if args else kwargs["hidden_states"]

        return hook

    model.decoder.blocks[0].register_forward_pre_hook(keep("ours"), with_kwargs=True)
    hf.model.layers[0].register_forward_pre_hook(keep("hf"), with_kwargs=True)
    ids = torch.randint(0, 99, (2, 7))
    with torch.no_grad():
        model(ids)
        hf(ids)
    assert torch.equal(seen["ours"], seen["hf"])
    as_float = hf.model.embed_tokens(ids) * 80**0.5
    assert not torch.equal(seen["ours"], as_float)  # the rounding matters here


def test_offset_rmsnorm_equals_gemma_rmsnorm_in_bfloat16(pair) -> None:
    module, _ = pair
    ours = module.OffsetRMSNorm(80, eps=1e-6)
    assert torch.equal(ours.weight, torch.zeros(80))  # as transformers initialises it
    theirs = modeling_gemma.GemmaRMSNorm(80, eps=1e-6)
    torch.manual_seed(1)
    weight = torch.randn(80)
    ours.weight.data.copy_(weight)
    theirs.weight.data.copy_(weight)
    x = torch.randn(3, 5, 80, dtype=torch.bfloat16)
    ours, theirs = ours.to(torch.bfloat16), theirs.to(torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(ours(x), theirs(x))
    assert repr(ours) == "OffsetRMSNorm((80,), eps=1e-06, elementwise_affine=True)"


# Gemma 2: layer_types as a window pattern, and what is refused. Logits, greedy tokens and
# counts are checked with the other families (tests/test_hf_weights.py `gemma2`).

GEMMA2 = {
    "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "vocab_size": 99,
    "hidden_size": 64, "num_hidden_layers": 12, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128,
    "max_position_embeddings": 64, "sliding_window": 8,
}  # fmt: skip


def test_gemma2_layer_types_become_the_window_pattern() -> None:
    from archspec.hf.import_config import import_config

    spec = import_config(GEMMA2).spec
    assert spec.attention.window_pattern == "LG" and spec.attention.sliding_window == 8
    assert spec.residual == "sandwich"
    assert (spec.attention.softcap, spec.head.softcap) == (50.0, 30.0)
    five_one = ["sliding_attention"] * 5 + ["full_attention"]
    spec = import_config({**GEMMA2, "layer_types": five_one * 2}).spec
    assert spec.attention.window_pattern == "LLLLLG"
    assert [spec.windowed(i) for i in range(12)] == [t == "sliding_attention" for t in five_one * 2]
    assert hf_config_dict(spec)["layer_types"] == five_one * 2


def test_gemma2_refusals_name_the_field() -> None:
    from archspec.errors import SpecError
    from archspec.hf.import_config import import_config

    with pytest.raises(SpecError) as err:
        import_config({**GEMMA2, "layer_types": ["sliding_attention"] * 3})
    assert err.value.path == "layer_types"
    with pytest.raises(SpecError) as err:
        import_config({**GEMMA2, "sliding_window": None})
    assert err.value.path == "sliding_window"
    with pytest.raises(SpecError) as err:
        import_config({**GEMMA2, "hidden_activation": "gelu"})
    assert err.value.path == "hidden_activation"
