"""DeepSeek-V2 (`deepseek_v2`) against transformers' DeepseekV2ForCausalLM.

Small random models (float32), saved with `save_pretrained`, imported with `import-hf`, built
and loaded with `load_weights`: logits equal on a right-padded batch longer than YaRN's
original context, greedy tokens equal, with and without a query latent (`q_lora_rank`). The
executed FLOPs equal FlopCounterMode on the transformers model. The full-size count of
`deepseek-v2-lite` against DeepseekV2ForCausalLM on meta is in tests/test_counts.py (from
tests/hf_reference.py); here its public config.json imports to the built-in, whose count is
its checkpoint's.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import sympy as sp
import torch

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.errors import SpecError
from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.test_hf_weights import assert_close, batch, generated, greedy_hf

transformers = pytest.importorskip("transformers")

# DeepSeek-V2-Lite(-Chat)'s config.json as transformers 5.7 loads it (a public dump of the
# checkpoint, which also lists its 15,706,484,224 parameters).
# fmt: off
DEEPSEEK_V2_LITE: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False,
    "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_deepseek.DeepseekV2Config",
        "AutoModel": "modeling_deepseek.DeepseekV2Model",
        "AutoModelForCausalLM": "modeling_deepseek.DeepseekV2ForCausalLM",
    },
    "aux_loss_alpha": 0.001, "bos_token_id": 100000, "dtype": "bfloat16",
    "eos_token_id": 100001, "first_k_dense_replace": 1, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "mlp_bias": False,
    "model_type": "deepseek_v2", "moe_intermediate_size": 1408, "moe_layer_freq": 1,
    "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": False,
    "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
    "num_key_value_heads": 16, "pad_token_id": None, "pretraining_tp": 1, "q_lora_rank": None,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_parameters": {
        "beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
        "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
        "rope_theta": 10000, "rope_type": "yarn", "type": "yarn",
    },
    "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": True,
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy",
    "transformers_version": "5.7.0", "use_cache": True, "v_head_dim": 128, "vocab_size": 102400,
}

VOCAB = 99
COMMON = dict(
    vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    intermediate_size=96, max_position_embeddings=64, kv_lora_rank=32, qk_rope_head_dim=8,
    qk_nope_head_dim=16, v_head_dim=12, n_routed_experts=6, num_experts_per_tok=2,
    moe_intermediate_size=24, n_shared_experts=2, rms_norm_eps=1e-6, pad_token_id=0,
    tie_word_embeddings=False,
)
CASES = {
    # A query latent; YaRN stretching 16 positions 4 times, mscale and mscale_all_dim apart
    # (cos and sin scaled by their ratio, the scores by mscale_all_dim's square); routed
    # weights scaled by 1.5; one dense first layer.
    "q-latent-yarn": dict(
        q_lora_rank=48, first_k_dense_replace=1, routed_scaling_factor=1.5,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 16, "mscale": 0.9,
                         "mscale_all_dim": 0.707}),
    # DeepSeek-V2-Lite's shape: queries straight from x, plain RoPE, every layer MoE.
    "plain-q": dict(q_lora_rank=None, first_k_dense_replace=0),
    # DeepSeek-V2's routing: experts from the 2 of 3 groups whose best expert scores highest.
    "group-limited": dict(q_lora_rank=None, first_k_dense_replace=1, n_group=3, topk_group=2,
                          topk_method="group_limited_greedy", routed_scaling_factor=2.0),
}
# fmt: on


def hf_model(case: str):
    config = transformers.DeepseekV2Config(**COMMON, **CASES[case])
    config.architectures = ["DeepseekV2ForCausalLM"]
    torch.manual_seed(0)
    model = transformers.DeepseekV2ForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1, so that a norm loaded wrong shows
        for name, param in model.named_parameters():
            if "norm" in name:
                param.normal_(1.0, 0.3)
    return model


@pytest.mark.parametrize("case", list(CASES))
def test_logits_and_greedy_tokens_equal_transformers(case: str, tmp_path: Path) -> None:
    hf = hf_model(case)
    checkpoint = tmp_path / "checkpoint"
    hf.save_pretrained(checkpoint)
    module, _ = generated(checkpoint, tmp_path)
    model = load_weights(module.Model(module.Config()).eval(), checkpoint)
    ids, mask = batch(0, length=20)  # past YaRN's original 16 positions
    real = mask.bool()
    with torch.no_grad():
        assert_close(model(ids, mask)[real], hf(input_ids=ids, attention_mask=mask).logits[real])
        assert_close(model(ids), hf(input_ids=ids).logits)
        prompt = torch.randint(3, VOCAB, (2, 5))
        assert torch.equal(model.generate(prompt, 8), greedy_hf(hf, prompt, 8))
    if case == "q-latent-yarn":  # transformers 5's in-memory layout (experts stacked) loads too
        again = load_weights(module.Model(module.Config()).eval(), hf.state_dict(), spec=_)
        with torch.no_grad():
            assert_close(again(ids), hf(input_ids=ids).logits)


@pytest.mark.parametrize("case", list(CASES))
def test_executed_flops_equal_flop_counter_on_the_transformers_model(case: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    hf = hf_model(case)
    # transformers 5 runs the experts through torch._grouped_mm by default, for which
    # FlopCounterMode has no formula (it would count no expert at all): the loop over experts
    # computes the same products with F.linear, which it counts.
    hf.set_experts_implementation("eager")
    ir = build_ir(import_config(hf.config.to_dict()).spec)
    figures = flop_figures(ir, CONVENTIONS["executed"])
    b, s = 2, 20
    ids = torch.randint(3, VOCAB, (b, s))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(input_ids=ids)
    expected = sp.sympify(figures.forward_matmul).xreplace({**ir.env, B: b, S: s})
    assert int(expected) == counter.get_total_flops()


def architecture(spec) -> dict[str, Any]:
    skip = {"name", "source"}
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in skip}


def test_group_limited_routing_exports_back() -> None:
    config = {**hf_model("group-limited").config.to_dict()}
    spec = import_config(config).spec
    assert spec.moe is not None and (spec.moe.groups, spec.moe.top_groups) == (3, 2)
    exported = hf_config_dict(spec)  # itself checks import(export(spec)) == spec
    assert (exported["topk_method"], exported["n_group"], exported["topk_group"]) == (
        "group_limited_greedy",
        3,
        2,
    )


def test_public_config_imports_to_the_builtin() -> None:
    imported = import_config(DEEPSEEK_V2_LITE)
    assert architecture(imported.spec) == architecture(load_spec("deepseek-v2-lite"))
    ir = build_ir(imported.spec, symbolic=False)
    assert ir.value(parameter_count(ir.root)) == 15_706_484_224  # the checkpoint's tensors


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("topk_method", "noaux_tc"),
        ("norm_topk_prob", True),
        ("scoring_func", "sigmoid"),
        ("moe_layer_freq", 2),
        ("num_key_value_heads", 8),
        ("attention_bias", True),
    ],
)
def test_what_transformers_computes_otherwise_is_refused_naming_the_field(
    field: str, value: Any
) -> None:
    config = copy.deepcopy(DEEPSEEK_V2_LITE) | {field: value}
    with pytest.raises(SpecError) as error:
        import_config(config)
    assert field in str(error.value)
