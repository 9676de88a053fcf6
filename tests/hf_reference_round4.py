"""Small reference config.json files of the families of issue 28's round 4 (zoo-more), kept
apart from `tests/hf_reference.py`'s FAMILY_CONFIGS, which takes them in."""

from __future__ import annotations

from typing import Any

_SMALL = {"vocab_size": 99}
_LLAMA = {**_SMALL, "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
          "max_position_embeddings": 32}  # fmt: skip

# fmt: off
ROUND4_CONFIGS: dict[str, dict[str, Any]] = {
    "internlm3": {"architectures": ["InternLM3ForCausalLM"], **_LLAMA, "num_hidden_layers": 2,
                  "qkv_bias": True, "bias": True},
    "exaone": {"architectures": ["ExaoneForCausalLM"], **_LLAMA, "num_layers": 2,
               "layer_norm_epsilon": 1e-6},
    "gpt_neo": {"architectures": ["GPTNeoForCausalLM"], **_SMALL, "hidden_size": 64,
                "num_layers": 2, "num_heads": 4, "intermediate_size": 128,
                "max_position_embeddings": 32, "window_size": 8,
                "attention_types": [[["global", "local"], 1]]},
    "mpt": {"architectures": ["MptForCausalLM"], **_SMALL, "d_model": 64, "n_layers": 2,
            "n_heads": 4, "max_seq_len": 32, "attn_config": {"softmax_scale": 0.25}},
    "flex_olmo": {"architectures": ["FlexOlmoForCausalLM"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 32, "max_position_embeddings": 32, "num_experts": 4,
                  "num_experts_per_tok": 2, "norm_topk_prob": True},
    "exaone4": {"architectures": ["Exaone4ForCausalLM"], **_LLAMA, "num_hidden_layers": 2,
                "sliding_window": None, "layer_types": ["full_attention"] * 2},
    "granitemoeshared": {"architectures": ["GraniteMoeSharedForCausalLM"], **_LLAMA,
                         "num_hidden_layers": 2, "intermediate_size": 32,
                         "shared_intermediate_size": 48, "num_local_experts": 4,
                         "num_experts_per_tok": 2, "residual_multiplier": 0.5},
    "biogpt": {"architectures": ["BioGptForCausalLM"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
               "max_position_embeddings": 32, "scale_embedding": False},
    "persimmon": {"architectures": ["PersimmonForCausalLM"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                  "max_position_embeddings": 32, "qk_layernorm": False},
    "codegen": {"architectures": ["CodeGenForCausalLM"], **_SMALL, "n_embd": 64, "n_layer": 2,
                "n_head": 4, "rotary_dim": 8, "n_positions": 32},
    "xlm-roberta-xl": {"architectures": ["XLMRobertaXLModel"], **_SMALL, "hidden_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 4,
                       "intermediate_size": 128, "max_position_embeddings": 34},
    "roberta-prelayernorm": {"architectures": ["RobertaPreLayerNormModel"], **_SMALL,
                             "hidden_size": 64, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "intermediate_size": 128,
                             "max_position_embeddings": 34},
    "xglm": {"architectures": ["XGLMForCausalLM"], **_SMALL, "d_model": 64, "num_layers": 2,
             "attention_heads": 4, "ffn_dim": 128, "max_position_embeddings": 32},
    "rembert": {"architectures": ["RemBertModel"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                "max_position_embeddings": 32, "input_embedding_size": 32},
    "ctrl": {"architectures": ["CTRLLMHeadModel"], **_SMALL, "n_embd": 64, "n_layer": 2,
             "n_head": 4, "dff": 128, "n_positions": 32},
    "hyperclovax": {"architectures": ["HyperCLOVAXForCausalLM"], **_LLAMA,
                    "num_hidden_layers": 2, "residual_multiplier": 0.5, "logits_scaling": 2.0},
    "eurobert": {"architectures": ["EuroBertModel"], **_LLAMA, "num_hidden_layers": 2},
    "iquestcoder": {"architectures": ["IQuestCoderForCausalLM"], **_LLAMA,
                    "num_hidden_layers": 2},
}
# fmt: on
