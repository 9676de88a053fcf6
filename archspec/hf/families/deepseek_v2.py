"""DeepSeek-V2 (`model_type: deepseek_v2`, transformers 5's DeepseekV2ForCausalLM): a LLaMA-style
decoder with multi-head latent attention (`attention.latent`) and, after
`first_k_dense_replace` dense layers, mixtures of narrow experts (`moe_intermediate_size`)
with `n_shared_experts` shared ones every token goes through, ungated.

As transformers computes it (modeling_deepseek_v2.py): the rotated parts turn as complex
numbers, i.e. interleaved channel pairs (`position.interleaved`), with YaRN's frequencies
when `rope_parameters` says yarn, whose `mscale_all_dim` also scales the scores
(`latent.yarn_mscale`); the latents' RMSNorms keep epsilon 1e-6 whatever `rms_norm_eps` says;
routing is a softmax over all experts, the top-k kept ("greedy"; "group_limited_greedy": from
the `topk_group` of `n_group` groups whose best expert scores highest) and multiplied by
`routed_scaling_factor`, never renormalised. What transformers' class does not compute
(`norm_topk_prob`, which it ignores, other scoring functions) is refused,
naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archspec.errors import SpecError
from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    _rope,
    rope_parameters,
)
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

LATENT_EPS = 1e-6  # DeepseekV2RMSNorm's default, which q_a_ and kv_a_layernorm keep


def _moe(f: Fields, n_layers: int) -> dict[str, Any] | None:
    method = f.expect(
        "topk_method",
        ("greedy", "group_limited_greedy"),
        "greedy",
        "transformers' DeepseekV2 routes greedy or group_limited_greedy",
    )
    groups = top_groups = 1
    if method == "group_limited_greedy":
        groups, top_groups = f.int("n_group"), f.int("topk_group")
    else:
        f.harmless("n_group", "topk_group")  # read by group_limited_greedy alone
    f.expect("scoring_func", "softmax", "softmax", "transformers' DeepseekV2 routes by softmax")
    f.expect(
        "moe_layer_freq",
        1,
        1,
        "DeepSeek's own code puts experts on every moe_layer_freq-th layer only, while "
        "transformers' DeepseekV2 ignores the field and puts them on every layer from "
        "first_k_dense_replace on, so no model matches both; a spec expresses dense layers "
        "only as the first ones (moe.dense_layers)",
    )
    f.expect(
        "norm_topk_prob",
        False,
        False,
        "transformers' DeepseekV2 never renormalises the top-k weights (it ignores this field)",
    )
    f.harmless("aux_loss_alpha", "seq_aux", "output_router_logits")  # training losses only
    f.expect("ep_size", 1, 1, "expert parallelism of the original code")
    dense = f.int("first_k_dense_replace", 0)
    if dense < 0:
        raise f.error("first_k_dense_replace", f"expected at least 0, got {dense}")
    experts = f.int("n_routed_experts", 64, "num_experts")
    top_k = f.int("num_experts_per_tok")
    width = f.int("moe_intermediate_size", 1407)
    shared = f.int("n_shared_experts", 2)
    scale = f.float("routed_scaling_factor", 1.0)
    if dense >= n_layers:
        return None  # every layer dense: the expert fields are inert
    if shared < 1:
        raise f.error("n_shared_experts", f"expected at least 1 shared expert, got {shared}")
    if scale <= 0:
        raise f.error("routed_scaling_factor", f"expected a positive number, got {scale}")
    return {
        "n_experts": experts,
        "top_k": top_k,
        "router_bias": False,
        "dense_layers": dense,
        "d_ff": width,
        "normalize": False,
        "shared_d_ff": shared * width,
        "shared_gate": False,
        "routed_scale": scale,
        "groups": groups,
        "top_groups": top_groups,
    }


@dataclass(frozen=True)
class DecoderDefaults:
    """What a DeepSeek config class fills in for the decoder's sizes a file leaves out."""

    hidden: int
    heads: int
    layers: int
    d_ff: int
    vocab: int
    positions: int
    # kv_lora_rank, q_lora_rank (None: no query latent), qk_rope_head_dim, qk_nope_head_dim,
    # v_head_dim (None: hidden_size // num_attention_heads, as MiniCPM3Config derives it)
    latent: tuple[int, int | None, int, int, int | None] = (512, 1536, 64, 128, 128)
    eps: float = 1e-6
    tied: bool = False
    longrope: bool = False  # LongRoPE scaling read (its factor needs max_position_embeddings)
    kv_heads: int | None = None  # None: the head count
    # older rope_types the config class renames (SarvamMLA's deepseek_yarn is yarn)
    rope_aliases: tuple[tuple[str, str], ...] = ()


V2_DEFAULTS = DecoderDefaults(4096, 32, 32, 11008, 102400, 2048)  # DeepseekV2Config's
V3_DEFAULTS = DecoderDefaults(7168, 128, 61, 18432, 129280, 4096)  # DeepseekV3Config's


def latent_decoder(f: Fields, cls: HFClass, interleaved: bool,
                   defaults: DecoderDefaults = V2_DEFAULTS) -> dict[str, Any]:  # fmt: skip
    """The spec of DeepSeek's decoder without its experts, as DeepSeek-V2 and V3 share it:
    latent attention rotated by RoPE (on `interleaved` channel pairs), dense MLPs."""
    d = f.int("hidden_size", defaults.hidden)
    heads = f.count("num_attention_heads", defaults.heads)
    kv = f.size("num_key_value_heads", defaults.kv_heads or heads)
    if kv != heads:
        raise f.error(
            "num_key_value_heads",
            f"{kv} key/value heads for {heads} heads: transformers' DeepSeek expands the "
            "latent to every head, and archspec too",
        )
    f.harmless("head_dim")  # the config class sets it to qk_rope_head_dim itself
    f.harmless("pretraining_tp")  # a different order of the same sums
    f.expect("attention_bias", False, False, "biases on the latent projections")
    n_layers = f.int("num_hidden_layers", defaults.layers)
    eps = f.float("rms_norm_eps", defaults.eps)
    positions = f.int("max_position_embeddings", defaults.positions)
    longrope = positions if defaults.longrope else None
    aliases = dict(defaults.rope_aliases) or None
    position = _rope(f, 10000.0, longrope, aliases) | {"interleaved": interleaved}
    rope = f.get("rope_parameters") or f.get("rope_scaling") or {}
    kv_rank, q_rank, rope_dim, nope_dim, v_dim = defaults.latent
    if v_dim is None and f.get("v_head_dim") is None:
        f.harmless("v_head_dim")
        v_dim = d // heads
    else:
        v_dim = f.int("v_head_dim", v_dim)
    latent: dict[str, Any] = {
        "kv_rank": f.int("kv_lora_rank", kv_rank),
        "q_rank": f.size("q_lora_rank", q_rank) if "q_lora_rank" in f.data else q_rank,
        "rope_dim": f.int("qk_rope_head_dim", rope_dim),
        "nope_dim": f.int("qk_nope_head_dim", nope_dim),
        "v_dim": v_dim,
    }
    qk = latent["nope_dim"] + latent["rope_dim"]
    f.expect("qk_head_dim", qk, qk, "the config class derives it: qk_nope + qk_rope_head_dim")
    if "q_lora_rank" in f.data and f.get("q_lora_rank") is None:
        latent["q_rank"] = None
    if eps != LATENT_EPS:
        latent["eps"] = LATENT_EPS
    if position.get("scaling") == "yarn" and rope.get("mscale_all_dim"):
        latent["yarn_mscale"] = float(rope["mscale_all_dim"])
    return {
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": heads,
        "d_ff": f.int("intermediate_size", defaults.d_ff),
        "vocab_size": f.int("vocab_size", defaults.vocab),
        "max_seq_len": positions,
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "rmsnorm", "eps": eps},
        "position": position,
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": False, "scale_scores": True, "latent": latent},
        "mlp": {"gated": True, "activation": f.activation("hidden_act", "silu"), "bias": False},
        "head": {**read_head(f, cls, defaults.tied), "bias": False},
        "dropout": read_dropout(f, dropouts.LLAMA),
    }


def import_deepseek_v2(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = latent_decoder(f, cls, interleaved=True)
    f.expect("mlp_bias", False, False, "biases on the MLPs")
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = _moe(f, spec["n_layers"])
    return spec


def latent_fields(spec: Spec) -> dict[str, Any]:
    """`latent_decoder`'s inverse: config.json's fields for all but the experts."""
    lat = spec.attention.latent
    if lat is None:
        raise SpecError(
            f"{spec.hf_class} needs multi-head latent attention", path="attention.latent"
        )
    rope = rope_parameters(spec)
    if lat.yarn_mscale is not None:
        rope["mscale_all_dim"] = lat.yarn_mscale
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "rms_norm_eps": spec.norm.eps,
        "rope_parameters": rope,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "attention_bias": False,
        "kv_lora_rank": lat.kv_rank,
        "q_lora_rank": lat.q_rank,
        "qk_rope_head_dim": lat.rope_dim,
        "qk_nope_head_dim": lat.nope_dim,
        "v_head_dim": lat.v_dim,
        **write_dropout(spec, dropouts.LLAMA),
        **head_fields(spec),
    }


def shared_experts(spec: Spec) -> int:
    """n_shared_experts: moe.shared_d_ff in experts of moe.d_ff."""
    moe = spec.moe
    assert moe is not None
    if not moe.shared_d_ff or moe.shared_d_ff % (moe.d_ff or spec.d_ff):
        raise SpecError(
            f"{spec.hf_class}'s shared experts are n_shared_experts experts of moe.d_ff: "
            "moe.shared_d_ff must be a multiple of it",
            path="moe.shared_d_ff",
        )
    return moe.shared_d_ff // (moe.d_ff or spec.d_ff)


def export_deepseek_v2(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if moe is not None and (moe.normalize or moe.shared_gate or moe.router_bias):
        raise SpecError(
            "DeepseekV2ForCausalLM's experts are neither renormalised nor gated nor biased",
            path="moe",
        )
    out = latent_fields(spec) | {"mlp_bias": False, "norm_topk_prob": False}
    if moe is None:
        return out | {
            "first_k_dense_replace": spec.n_layers,
            "num_experts_per_tok": 1,
            "topk_method": "greedy",
        }
    width = moe.d_ff or spec.d_ff
    routing: dict[str, Any] = {"topk_method": "greedy"}
    if moe.groups > 1:
        routing = {
            "topk_method": "group_limited_greedy",
            "n_group": moe.groups,
            "topk_group": moe.top_groups,
        }
    return (
        out
        | routing
        | {
            "first_k_dense_replace": moe.dense_layers,
            "n_routed_experts": moe.n_experts,
            "num_experts_per_tok": moe.top_k,
            "moe_intermediate_size": width,
            "n_shared_experts": shared_experts(spec),
            "routed_scaling_factor": moe.routed_scale,
        }
    )


ATTENTION = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.q_down": "self_attn.q_a_proj",
        "attn.q_down_norm": "self_attn.q_a_layernorm",
        "attn.q_up": "self_attn.q_b_proj",
        "attn.kv_down": "self_attn.kv_a_proj_with_mqa",
        "attn.kv_down_norm": "self_attn.kv_a_layernorm",
        "attn.kv_up": "self_attn.kv_b_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "post_attention_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)
SHARED = table(
    {
        "moe.shared.gate": "mlp.shared_experts.gate_proj",
        "moe.shared.up": "mlp.shared_experts.up_proj",
        "moe.shared.down": "mlp.shared_experts.down_proj",
    }
)
# As the checkpoint files store it: one module per expert.
CHECKPOINT_BLOCK = chain(
    table(
        {
            "moe.router": "mlp.gate",
            "moe.experts.*.gate": "mlp.experts.*.gate_proj",
            "moe.experts.*.up": "mlp.experts.*.up_proj",
            "moe.experts.*.down": "mlp.experts.*.down_proj",
        }
    ),
    SHARED,
    ATTENTION,
)

FAMILY = Family(
    model_type="deepseek_v2",
    classes=(
        HFClass("DeepseekV2ForCausalLM", "deepseek_v2", "lm", base=False),
        HFClass("DeepseekV2Model", "deepseek_v2", "none", base=True),
    ),
    bases=("_deepseek_v2",),
    import_config=import_deepseek_v2,
    export_config=export_deepseek_v2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        # transformers 5's memory: every layer's experts stacked (as Mixtral's).
        block_variants={"module": chain(SHARED, ATTENTION, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
