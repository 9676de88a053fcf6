"""The refusals left from round 2 (issue 28, point 5): each stays refused with the reason named,
and each reason is checked against transformers itself."""

from __future__ import annotations

import pytest
import torch

from archspec.backends.torchgen import generate_source, load_generated
from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from tests.hf_reference import FAMILY_CONFIGS

transformers = pytest.importorskip("transformers")


def config(model_type: str, **changes) -> dict:
    return {"model_type": model_type, **FAMILY_CONFIGS[model_type], **changes}


def refusal(data: dict) -> SpecError:
    with pytest.raises(SpecError) as err:
        import_config(data)
    return err.value


def test_falcon_alibi_names_its_bfloat16_scaled_bias() -> None:
    err = refusal(config("falcon", alibi=True))
    assert err.path == "alibi" and "bfloat16" in err.message and "sqrt(head_dim)" in err.message
    # transformers' Falcon does round slopes × positions to bfloat16 (BLOOM's stays float32)
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi

    mask = torch.ones(1, 300, dtype=torch.long)
    falcon = falcon_alibi(mask, 12, torch.float32)
    bloom = bloom_alibi(mask, 12, torch.float32)
    assert not torch.equal(falcon, bloom)
    assert torch.equal(falcon, falcon.bfloat16().float())  # every value a bfloat16


def test_albert_inner_groups_name_the_layers_inside_a_group() -> None:
    err = refusal(config("albert", inner_group_num=2))
    assert err.path == "inner_group_num" and "layer_groups" in err.message
    fields = {k: v for k, v in config("albert", inner_group_num=2).items() if k != "architectures"}
    model = transformers.AlbertModel(transformers.AlbertConfig(**fields))
    group = model.encoder.albert_layer_groups[0]
    assert len(group.albert_layers) == 2  # two different layers in one shared group


@pytest.mark.parametrize(
    ("model_type", "cls", "reason"),
    [
        ("bert", "BertForPreTraining", "cls.seq_relationship"),
        ("albert", "AlbertForPreTraining", "sop_classifier"),
        ("bert", "BertLMHeadModel", "causal decoder"),
    ],
)
def test_pretraining_heads_name_what_the_spec_lacks(model_type, cls, reason) -> None:
    err = refusal(config(model_type, architectures=[cls]))
    assert err.path == "architectures[0]" and reason in err.message
    assert "dense + LayerNorm" not in err.message  # the masked-LM head itself is expressible


@pytest.mark.parametrize(
    ("model_type", "cls", "base"),
    [("bert", "BertForPreTraining", "bert"), ("albert", "AlbertForPreTraining", "albert")],
)
def test_the_hint_loads_a_pretraining_checkpoint_into_the_encoder(
    model_type, cls, base, tmp_path
) -> None:
    """What the refusal's hint says to do works: the encoder's spec, the heads' weights
    skipped with the globs it names."""
    err = refusal(config(model_type, architectures=[cls]))
    globs = [part.split("'")[1] for part in err.hint.split("--hf-ignore ")[1:]]
    fields = {k: v for k, v in config(model_type).items() if k != "architectures"}
    torch.manual_seed(0)
    hf = getattr(transformers, cls)(transformers.AutoConfig.for_model(**fields)).eval()
    encoder = config(
        model_type, architectures=[err.hint.split("`--architecture ")[1].split("`")[0]]
    )
    spec = import_config(encoder).spec
    module = load_generated(generate_source(build_ir(spec)), tmp_path)
    model = load_weights(module.Model().eval(), hf.state_dict(), spec=spec, ignore=globs)
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        hidden, _ = model(ids)
        ref = getattr(hf, base)(input_ids=ids).last_hidden_state
    assert torch.allclose(hidden, ref, atol=1e-5)


def test_deepseek_moe_layer_freq_names_why_no_model_matches() -> None:
    err = refusal(config("deepseek_v2", moe_layer_freq=2))
    assert err.path == "moe_layer_freq" and "ignores the field" in err.message
    # transformers' DeepseekV2 builds experts on every layer from first_k_dense_replace on,
    # whatever moe_layer_freq says
    fields = {k: v for k, v in config("deepseek_v2").items() if k != "architectures"}
    model = transformers.DeepseekV2ForCausalLM(
        transformers.DeepseekV2Config(**fields, moe_layer_freq=2)
    )
    first = fields["first_k_dense_replace"]
    kinds = [type(layer.mlp).__name__ for layer in model.model.layers]
    assert all(kind == "DeepseekV2Moe" for kind in kinds[first:]), kinds
