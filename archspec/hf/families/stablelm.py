"""StableLM (`model_type: stablelm`; StableLM-3B-4E1T, StableLM-2): LLaMA's gated MLP and
grouped keys and values with LayerNorms (weight and bias), RoPE on the first
`partial_rotary_factor` of each head (0.25 by default), biases on q, k and v alone
(`use_qkv_bias`), and optionally attention and MLP in parallel from one norm
(`use_parallel_residual`, as GPT-NeoX).

`qk_layernorm` (StableLM-2-12B) gives every head its own LayerNorm weights for queries and
keys; archspec's `attention.qk_norm` shares one over the heads, so it is refused."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families._rotary import read_rope, rope_parameters
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

DROPOUT: dropouts.Places = {
    "attention": ("attention_dropout", 0.0),
    "hidden": ("hidden_dropout", 0.0),
}


def import_stablelm(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("partial_rotary_factor", "transformers' StableLmRotaryEmbedding")
    d = f.int("hidden_size", 2560)
    heads = f.count("num_attention_heads", 32)
    kv = f.size("num_key_value_heads", 32)
    f.expect(
        "qk_layernorm",
        False,
        False,
        "a LayerNorm of its own for each head's queries and keys (attention.qk_norm shares one)",
    )
    parallel = f.bool("use_parallel_residual", False)
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 32),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "d_ff": f.int("intermediate_size", 6912),
        "vocab_size": f.int("vocab_size", 50304),
        "max_seq_len": f.int("max_position_embeddings", 4096),
        "layout": "decoder",
        "residual": "parallel" if parallel else "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-5)},
        "position": read_rope(f, d // heads, default_fraction=0.25),
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {
            "bias": False,
            "qkv_bias": f.bool("use_qkv_bias", False),
            "scale_scores": True,
        },
        "mlp": {"gated": True, "activation": f.activation("hidden_act", "silu"), "bias": False},
        "head": {**read_head(f, cls, False), "bias": False},
        "dropout": read_dropout(f, DROPOUT),
    }


def export_stablelm(spec: Spec) -> dict[str, Any]:
    if spec.residual not in ("pre", "parallel") or spec.norm.kind != "layernorm":
        raise SpecError(
            "StableLmForCausalLM blocks are pre-norm or parallel, with LayerNorms",
            path="residual" if spec.residual not in ("pre", "parallel") else "norm.kind",
        )
    parameters = rope_parameters(spec)
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.kv_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "layer_norm_eps": spec.norm.eps,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "use_qkv_bias": bool(spec.attention.qkv_bias),
        "qk_layernorm": False,
        "use_parallel_residual": spec.residual == "parallel",
        # transformers 5 reads rope_parameters, 4.x the top-level fields: both, equal.
        "rope_parameters": parameters,
        "rope_theta": spec.position.theta,
        "partial_rotary_factor": parameters["partial_rotary_factor"],
        **write_dropout(spec, DROPOUT),
        **head_fields(spec),
    }


BLOCK = table(
    {
        "norm": "input_layernorm",  # the one norm of a parallel block
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "post_attention_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)

FAMILY = Family(
    model_type="stablelm",
    classes=(
        HFClass("StableLmForCausalLM", "stablelm", "lm", base=False),
        HFClass("StableLmModel", "stablelm", "none", base=True),
    ),
    bases=("_stablelm",),
    import_config=import_stablelm,
    export_config=export_stablelm,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
