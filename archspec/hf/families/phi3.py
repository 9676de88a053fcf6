"""Phi-3 (`model_type: phi3`): LLaMA's block with q, k and v fused into `qkv_proj` (q rows,
then k, then v) and gate and up fused into `gate_up_proj` (gate rows, then up).

Its `sliding_window` (Phi-3-mini-4k: 2047 of 4096) windows every layer, as Mistral's does.
The long-context models' LongRoPE is read as Phi3Config reads it: rope_type longrope, or su or
yarn (older names Phi3Config turns into longrope), with original_max_position_embeddings from
the top level of the config, which Phi3Config puts over rope_parameters' (default 4096).
"""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES, export_window
from archspec.hf.families._rotary import read_rope, rope_parameters
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

DROPOUT: dropouts.Places = {
    "attention": ("attention_dropout", 0.0),
    "hidden": ("resid_pdrop", 0.0),
    "embedding": ("embd_pdrop", 0.0),
}


# Phi3ForCausalLM.prepare_inputs_for_generation drops the cache when a sequence first
# outgrows original_max_position_embeddings, so that every key is computed again with
# LongRoPE's long factors (LlamaForCausalLM keeps it).
RECOMPUTE_CACHE = True


def import_phi3(f: Fields, cls: HFClass) -> dict[str, Any]:
    d = f.int("hidden_size", 3072)
    heads = f.count("num_attention_heads", 32)
    kv = f.size("num_key_value_heads", None) or heads
    max_pos = f.int("max_position_embeddings", 4096)
    # Phi3Config's default is no window; transformers then builds a sliding-window mask on
    # every layer (masking_utils.sliding_window_overlay), as for Mistral.
    window = f.get("sliding_window")
    if window is not None and (not isinstance(window, int) or window < 1):
        raise f.error("sliding_window", f"expected a positive integer or null, got {window!r}")
    # Phi-3.5's and Phi-4's files say attention_bias: false; Phi3Attention has no biases.
    f.ignored("attention_bias", "Phi3Config and Phi3Model")
    attention: dict[str, Any] = {"bias": False, "scale_scores": True}
    if window is not None:
        attention["sliding_window"] = window
    original = f.int("original_max_position_embeddings", 4096)
    position = read_rope(
        f,
        d // heads,
        max_positions=max_pos,
        aliases={"su": "longrope", "yarn": "longrope"},
        outer={"original_max_position_embeddings": original},
    )
    if position.get("scaling") == "longrope":
        position["recompute_cache"] = RECOMPUTE_CACHE
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 32),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "d_ff": f.int("intermediate_size", 8192),
        "vocab_size": f.int("vocab_size", 32064),
        "max_seq_len": max_pos,
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "rmsnorm", "eps": f.float("rms_norm_eps", 1e-5)},
        "position": position,
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": attention,
        "mlp": {"gated": True, "activation": f.activation("hidden_act", "silu"), "bias": False},
        "head": {**read_head(f, cls, False), "bias": False},
        "dropout": read_dropout(f, DROPOUT),
    }


def export_phi3(spec: Spec) -> dict[str, Any]:
    parameters = rope_parameters(spec, RECOMPUTE_CACHE)
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.kv_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        # Phi3Config puts it over rope_parameters': the same value in both.
        "original_max_position_embeddings": parameters.get(
            "original_max_position_embeddings", spec.max_seq_len
        ),
        "sliding_window": export_window(spec),
        "rms_norm_eps": spec.norm.eps,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        # transformers 5 reads rope_parameters, 4.x the top-level fields: both, equal.
        "rope_parameters": parameters,
        "rope_theta": spec.position.theta,
        "partial_rotary_factor": parameters["partial_rotary_factor"],
        **write_dropout(spec, DROPOUT),
        **head_fields(spec),
    }


def fused_rows(module: str, part: int, parts: int, what: str) -> Target:
    """Part `part` of `parts` of a tensor fused along its rows (q, k, v; gate, up)."""
    return Target(module, "concat", part, parts, note=f"{what} rows")


FAMILY = Family(
    model_type="phi3",
    classes=(
        HFClass("Phi3ForCausalLM", "phi3", "lm", base=False),
        HFClass("Phi3Model", "phi3", "none", base=True),
    ),
    bases=("_phi3",),
    import_config=import_phi3,
    export_config=export_phi3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=table(
            {
                "attn_norm": "input_layernorm",
                "attn.q": fused_rows("self_attn.qkv_proj", 0, 3, "q"),
                "attn.k": fused_rows("self_attn.qkv_proj", 1, 3, "k"),
                "attn.v": fused_rows("self_attn.qkv_proj", 2, 3, "v"),
                "attn.o": "self_attn.o_proj",
                "mlp_norm": "post_attention_layernorm",
                "mlp.gate": fused_rows("mlp.gate_up_proj", 0, 2, "gate"),
                "mlp.up": fused_rows("mlp.gate_up_proj", 1, 2, "up"),
                "mlp.down": "mlp.down_proj",
            }
        ),
    ),
    buffers=ROPE_BUFFERS,
)
