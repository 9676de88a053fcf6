"""The language models of Qwen2-VL, Qwen2.5-VL, Qwen2.5-Omni, Qwen3-VL, Qwen3-VL-MoE,
Qwen3-Omni-MoE, GLM-4V, GLM-4.5V and Granite 4 Vision (`qwen2_vl_text`, `qwen2_5_vl_text`,
`qwen2_5_omni_text`, `qwen3_vl_text`, `qwen3_vl_moe_text`, `qwen3_omni_moe_text`,
`glm4v_text`, `glm4v_moe_text`, `granite4_vision_text`: a multimodal config's `text_config`),
against transformers' own classes: the default-sized config counts like the class on the meta
device, and a tiny random model saved by transformers, its M-RoPE sections set, imports, loads
and gives the same hidden states over a right-padded batch (M-RoPE over a text token's one
position is RoPE), the same printed module tree and the same forward matmul FLOPs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr
from archspec.cli import app
from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.test_hf_weights import assert_close, batch, generated
from tests.zoo_check import check_forward_matmul_flops, tiny_model

transformers = pytest.importorskip("transformers")

_TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
# class -> its tiny config: heads 16 wide, so M-RoPE shares out 8 frequencies
TINY = {
    "Qwen2VLTextModel": {**_TINY, "model_type": "qwen2_vl_text",
                         "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                             "mrope_section": [2, 3, 3]}},
    "Qwen2_5_VLTextModel": {**_TINY, "model_type": "qwen2_5_vl_text",
                            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                "mrope_section": [4, 2, 2]}},
    "Qwen3VLTextModel": {**_TINY, "model_type": "qwen3_vl_text", "head_dim": 16,
                         "rope_parameters": {"rope_type": "default", "rope_theta": 5e5,
                                             "mrope_section": [4, 2, 2],
                                             "mrope_interleaved": True}},
    "Qwen3VLMoeTextModel": {**_TINY, "num_hidden_layers": 3, "model_type": "qwen3_vl_moe_text",
                            "head_dim": 16, "num_experts": 6, "num_experts_per_tok": 2,
                            "moe_intermediate_size": 32, "mlp_only_layers": [0],
                            "norm_topk_prob": False,  # read by no Qwen3-VL-MoE class
                            "rope_parameters": {"rope_type": "default", "rope_theta": 5e5,
                                                "mrope_section": [4, 2, 2],
                                                "mrope_interleaved": True}},
    # half the channels turned (8 of 16), interleaved pairs: 4 frequencies shared out
    "Glm4vTextModel": {**_TINY, "model_type": "glm4v_text",
                       "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                           "partial_rotary_factor": 0.5,
                                           "mrope_section": [2, 1, 1]}},
    # GLM-4.5's block (RoPE on half of each 16-wide head, 2 groups of 4 sigmoid-routed experts
    # after a dense first layer, a shared expert), biases on q, k and v, no q/k norms
    "Glm4vMoeTextModel": {**_TINY, "num_hidden_layers": 3, "model_type": "glm4v_moe_text",
                          "head_dim": 16, "n_routed_experts": 8, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 24, "n_shared_experts": 1,
                          "first_k_dense_replace": 1, "n_group": 2, "topk_group": 1,
                          "routed_scaling_factor": 2.5,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                              "partial_rotary_factor": 0.5,
                                              "mrope_section": [2, 1, 1]}},
    # as Qwen3-VL-MoE's, but its router reads norm_topk_prob (here: not renormalised)
    "Qwen3OmniMoeThinkerTextModel": {**_TINY, "num_hidden_layers": 3,
                                     "model_type": "qwen3_omni_moe_text", "head_dim": 16,
                                     "num_experts": 6, "num_experts_per_tok": 2,
                                     "moe_intermediate_size": 32, "mlp_only_layers": [0],
                                     "norm_topk_prob": False,
                                     "rope_parameters": {"rope_type": "default",
                                                         "rope_theta": 1e6,
                                                         "mrope_section": [4, 2, 2],
                                                         "mrope_interleaved": True}},
    "Qwen2_5OmniThinkerTextModel": {**_TINY, "model_type": "qwen2_5_omni_text",
                                    "rope_parameters": {"rope_type": "default",
                                                        "rope_theta": 1e6,
                                                        "mrope_section": [2, 3, 3]}},
    # Granite's multipliers, no M-RoPE (its deepstack image features have no place in text)
    "Granite4VisionTextModel": {**_TINY, "model_type": "granite4_vision_text",
                                "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                                "attention_multiplier": 0.0625},
}  # fmt: skip
MODEL_TYPES = ["qwen2_vl_text", "qwen2_5_vl_text", "qwen2_5_omni_text", "qwen3_vl_text",
               "qwen3_vl_moe_text", "granite4_vision_text"]  # fmt: skip


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_the_default_config_counts_like_the_transformers_class(model_type: str) -> None:
    config = transformers.CONFIG_MAPPING[model_type]()
    imported = import_config(json.loads(config.to_json_string(use_diff=False)))
    ir = build_ir(imported.spec)
    with torch.device("meta"):
        model = getattr(transformers, imported.hf_class)(config)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("cls", list(TINY))
def test_hidden_states_and_module_tree_equal_transformers(cls: str, tmp_path: Path) -> None:
    hf = tiny_model(cls, TINY[cls]).eval()
    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    assert repr(model) == module_repr(build_ir(load_spec(spec)))
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model(ids, mask)
    assert_close(got[real], ref[real])


@pytest.mark.parametrize("cls", list(TINY))
def test_forward_matmul_flops_equal_flop_counter(cls: str) -> None:
    check_forward_matmul_flops(cls, TINY[cls])


def test_mrope_sections_that_do_not_share_out_the_head_are_refused() -> None:
    bad = {**TINY["Qwen2VLTextModel"], "architectures": ["Qwen2VLTextModel"],
           "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 4]}}  # fmt: skip
    with pytest.raises(SpecError, match="three positive integers adding up to 8") as err:
        import_config(bad)
    assert err.value.path == "rope_parameters"


def test_a_vision_language_config_imports_its_language_model_with_text_config(
    tmp_path: Path,
) -> None:
    """Refused whole (not a text model), pointing at --text-config, which imports the
    language model as the text config alone imports; a mistake in it is named under
    text_config, and a file without one is refused."""
    text = {**TINY["Qwen2_5_VLTextModel"]}
    vlm = tmp_path / "config.json"
    vlm.write_text(json.dumps({"model_type": "qwen2_5_vl", "text_config": text,
                               "vision_config": {"depth": 2}}))  # fmt: skip
    with pytest.raises(SpecError) as err:
        import_config(vlm)
    assert "`archspec import-hf --text-config` imports it" in (err.value.hint or "")
    imported = import_config(vlm, text_config=True)
    alone = import_config(text).spec
    assert imported.spec == dataclasses.replace(alone, source=imported.spec.source)
    assert (
        imported.notes[0].startswith("imported text_config") and "qwen2_5_vl" in imported.notes[0]
    )
    assert imported.config_path == str(vlm)

    bad = {**text, "num_attention_heads": 0}
    vlm.write_text(json.dumps({"model_type": "qwen2_5_vl", "text_config": bad}))
    result = CliRunner().invoke(app, ["import-hf", str(vlm), "--text-config"])
    assert result.exit_code == 2 and "at 'text_config.num_attention_heads'" in result.stderr
    assert "Traceback" not in result.output
    plain = tmp_path / "llama.json"
    plain.write_text(json.dumps({"model_type": "llama"}))
    result = CliRunner().invoke(app, ["import-hf", str(plain), "--text-config"])
    assert result.exit_code == 2 and "has no text_config" in result.stderr
    plain.write_text(json.dumps({"model_type": "llava", "text_config": [1]}))
    result = CliRunner().invoke(app, ["import-hf", str(plain), "--text-config"])
    assert result.exit_code == 2 and "must be a JSON object, got [1]" in result.stderr


def test_the_moe_router_renormalises_whatever_norm_topk_prob_says() -> None:
    config = {**TINY["Qwen3VLMoeTextModel"], "architectures": ["Qwen3VLMoeTextModel"]}
    imported = import_config(config)
    assert imported.spec.moe.normalize
    assert any("norm_topk_prob" in note and "ignored" in note for note in imported.notes)
    other_name = {k: v for k, v in config.items() if k != "num_experts"}
    assert import_config({**other_name, "num_local_experts": 5}).spec.moe.n_experts == 5


def test_glm4v_default_sections_that_do_not_fit_are_refused_as_transformers_fails() -> None:
    """Glm4vTextConfig turns every channel by default, and its rotary embedding splits their
    64 frequencies by the default [8, 12, 12] (32): transformers fails on the first forward,
    and the import refuses, saying so; with GLM-4.1V's half-turned heads it is RoPE."""
    config = json.loads(transformers.Glm4vTextConfig().to_json_string(use_diff=False))
    with pytest.raises(SpecError, match=r"default \[8, 12, 12\].*adding up to 64") as err:
        import_config(config)
    assert "mrope_section" in (err.value.hint or "")
    half = {**config["rope_parameters"], "partial_rotary_factor": 0.5}
    imported = import_config({**config, "rope_parameters": half})
    ir = build_ir(imported.spec)
    hf_config = transformers.Glm4vTextConfig(rope_parameters=half)
    with torch.device("meta"):
        model = transformers.Glm4vTextModel(hf_config)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("cls", ["Qwen2VLTextModel", "Glm4vTextModel", "Glm4vMoeTextModel"])
def test_the_written_back_config_runs_in_transformers(cls: str) -> None:
    """A spec written back as the text config (`--vs-hf`'s config.json) carries sections that
    share out its rotated frequencies, which these rotary embeddings split by: transformers
    runs it, where the sections it would take by default fail."""
    from archspec.hf.export_config import hf_config_dict

    spec = import_config({**TINY[cls], "architectures": [cls]}).spec
    fields = {k: v for k, v in hf_config_dict(spec).items() if k != "architectures"}
    model = getattr(transformers, cls)(transformers.AutoConfig.for_model(**fields)).eval()
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2, 3]]))


def test_qwen3_omni_reads_norm_topk_prob_where_qwen3_vl_ignores_it() -> None:
    omni = {
        **TINY["Qwen3OmniMoeThinkerTextModel"],
        "architectures": ["Qwen3OmniMoeThinkerTextModel"],
    }
    assert not import_config(omni).spec.moe.normalize
    left_out = {k: v for k, v in omni.items() if k != "norm_topk_prob"}
    assert import_config(left_out).spec.moe.normalize  # Qwen3OmniMoeTextConfig's default
