"""Why import-hf refuses a model_type it has no family for, when there is more to say than
"not supported".

Two kinds of answer. A model that is not a text model (speech, images, video, time series,
or text with images) is recognised from transformers' own registries: the tasks its auto
classes serve (`transformers.models.auto.modeling_auto`'s `MODEL_FOR_*_MAPPING_NAMES`) and the
processors that prepare its inputs (`auto_mappings`' feature extractors, image and video
processors), so a model type transformers adds later is classified without a list here.
A text model whose architecture the spec language cannot yet express is named with what it
lacks (`MISSING`).

Only the refusal path imports transformers (about two seconds): a supported import never
does.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass

from archspec.errors import did_you_mean
from archspec.safety.text import shortened


@dataclass(frozen=True)
class Refusal:
    message: str
    hint: str | None = None


# Text model types whose architectures need what the spec language lacks.
MISSING: dict[str, str] = {
    "blenderbot-small": (
        "BlenderbotSmall's decoder normalises the token embeddings before adding its "
        "positions (layernorm_embedding), its encoder after adding them; archspec's norm "
        "after the embeddings follows the positions in both stacks"
    ),
    "fsmt": (
        "FSMT has separate source and target vocabularies (src_vocab_size, tgt_vocab_size), "
        "each with its own embeddings; a spec has one vocabulary"
    ),
    "deberta-v2": (
        "DeBERTa-v2's disentangled attention adds content-to-position and "
        "position-to-content scores from relative position embeddings (pos_att_type), "
        "which archspec's attention cannot express"
    ),
    "deberta": (
        "DeBERTa's disentangled attention adds content-to-position and position-to-content "
        "scores from relative position embeddings (pos_att_type), which archspec's "
        "attention cannot express"
    ),
    "umt5": (
        "UMT5 gives every self-attention layer a relative-position bias table of its own; "
        "archspec's relative bias is one table per stack, as T5's"
    ),
    "mamba": (
        "Mamba has no attention: its layers are selective state-space mixers (state_size, "
        "conv_kernel); archspec's blocks mix tokens by attention only"
    ),
    "mamba2": (
        "Mamba-2 has no attention: its layers are state-space duality mixers (state_size, "
        "n_groups); archspec's blocks mix tokens by attention only"
    ),
    "falcon_mamba": (
        "Falcon Mamba has no attention: its layers are selective state-space mixers "
        "(state_size); archspec's blocks mix tokens by attention only"
    ),
    "rwkv": (
        "RWKV has no attention: its time-mixing layers are a linear recurrence "
        "(attention_hidden_size); archspec's blocks mix tokens by attention only"
    ),
    "xlstm": (
        "xLSTM has no attention: its blocks are matrix-memory LSTM recurrences (mLSTM); "
        "archspec's blocks mix tokens by attention only"
    ),
    "jamba": (
        "Jamba interleaves Mamba layers with attention layers (attn_layer_period, "
        "attn_layer_offset); archspec's blocks mix tokens by softmax attention only"
    ),
    "zamba": (
        "Zamba interleaves Mamba layers with one shared attention block (attn_layer_period, "
        "attn_layer_offset); archspec's blocks mix tokens by softmax attention only"
    ),
    "zamba2": (
        "Zamba2 interleaves Mamba-2 layers with shared attention blocks (hybrid_layer_ids); "
        "archspec's blocks mix tokens by softmax attention only"
    ),
    "bamba": (
        "Bamba interleaves Mamba-2 layers with attention layers (attn_layer_indices); "
        "archspec's blocks mix tokens by softmax attention only"
    ),
    "falcon_h1": (
        "Falcon-H1 runs a Mamba-2 mixer beside attention in every layer (mamba_d_ssm, "
        "mamba_d_state); archspec's blocks mix tokens by softmax attention only"
    ),
    "nemotron_h": (
        "Nemotron-H mixes Mamba-2, attention and MLP-only layers (hybrid_override_pattern); "
        "archspec's blocks mix tokens by softmax attention only"
    ),
    "granitemoehybrid": (
        "Granite 4 (granitemoehybrid) interleaves Mamba-2 layers with attention layers "
        "(layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "qwen3_next": (
        "Qwen3-Next interleaves gated DeltaNet linear-attention layers with gated attention "
        "(layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "kimi_linear": (
        "Kimi Linear interleaves Kimi delta-attention (linear) layers with latent attention "
        "(linear_attn_config); archspec's blocks mix tokens by softmax attention only"
    ),
    "olmo_hybrid": (
        "OLMo Hybrid interleaves gated DeltaNet linear-attention layers with attention "
        "(layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "lara_mini": (
        "Lara Mini interleaves gated DeltaNet linear-attention layers with attention "
        "(layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "minimax": (
        "MiniMax-Text-01 interleaves lightning (linear) attention layers with softmax "
        "attention (layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "lfm2": (
        "LFM2 replaces attention in most layers with gated short convolutions (layer_types "
        "'conv', conv_L_cache); archspec's blocks mix tokens by softmax attention only"
    ),
    "lfm2_moe": (
        "LFM2-MoE replaces attention in most layers with gated short convolutions "
        "(layer_types 'conv'); archspec's blocks mix tokens by softmax attention only"
    ),
    "recurrent_gemma": (
        "RecurrentGemma interleaves RG-LRU recurrent blocks with local attention "
        "(block_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "llama4_text": (
        "Llama 4 leaves RoPE out of every fourth layer (no_rope_layers), attends within "
        "chunks on the others (attention_chunk_size), scales the queries of its NoPE layers "
        "by position (attn_temperature_tuning) and routes with a sigmoid top-1 router "
        "beside a shared expert; archspec has no chunked attention and no queries scaled by "
        "their position"
    ),
    "ministral3": (
        "Ministral 3 scales the queries by 1 + beta * log(1 + floor(position / "
        "original_max_position_embeddings)) (rope_parameters' llama_4_scaling_beta); "
        "archspec's attention scale does not depend on the position"
    ),
    "hunyuan_v1_dense": (
        "HunYuan normalises each head's queries and keys (query_layernorm, key_layernorm) "
        "after RoPE; archspec's qk_norm comes before it, and the two differ"
    ),
    "hunyuan_v1_moe": (
        "HunYuan normalises each head's queries and keys (query_layernorm, key_layernorm) "
        "after RoPE; archspec's qk_norm comes before it, and the two differ"
    ),
    "diffllama": (
        "DiffLlama's differential attention subtracts a second softmax map weighted by a "
        "learned lambda (lambda_q1, lambda_k1, lambda_q2, lambda_k2) and normalises each "
        "head; archspec's attention is one softmax"
    ),
    "doge": (
        "Doge adds a learned, value-dependent bias to the attention scores (its dynamic "
        "mask: dt_proj, A) and retrieves its experts by product keys (CDMoE); archspec has "
        "neither"
    ),
    "jetmoe": (
        "JetMoE's attention is a mixture of experts (MoA: query and output projections "
        "routed per token); archspec's attention projections are fixed"
    ),
    "phimoe": (
        "PhiMoE routes with sparsemixer (top-2 chosen in two steps, each renormalised over "
        "the scores within a jitter margin, router_jitter_noise); archspec's router is a "
        "softmax top-k"
    ),
    "apertus": (
        "Apertus' MLP uses xIELU, an activation with learned parameters (alpha_p, alpha_n) "
        "in every layer; archspec's activations have no parameters"
    ),
    "bitnet": (
        "BitNet normalises inside its attention and MLP (attn_sub_norm before o_proj, "
        "ffn_sub_norm before down_proj) and quantizes its weights to ternary values; "
        "archspec has neither"
    ),
    "gpt_neox_japanese": (
        "GPT-NeoX-Japanese adds its attention output bias (dense_bias) in the last layer "
        "only; a spec's layers have the same parameters"
    ),
    "switch_transformers": (
        "Switch Transformers' experts take at most expert_capacity tokens each and pass the "
        "others on unchanged; archspec's experts take every token routed to them"
    ),
    "nllb-moe": (
        "NLLB-MoE's experts take at most expert_capacity tokens each and the second expert "
        "is kept by second_expert_policy; archspec's experts take every token routed to "
        "them"
    ),
    "mobilebert": (
        "MobileBERT narrows each layer through bottlenecks (use_bottleneck, "
        "intra_bottleneck_size), stacks several feed-forward networks per layer "
        "(num_feedforward_networks) and normalises with NoNorm (normalization_type); "
        "archspec's blocks have one MLP at the stream's width"
    ),
    "squeezebert": (
        "SqueezeBERT's projections are grouped 1-D convolutions (q_groups, k_groups, "
        "v_groups, post_attention_groups, intermediate_groups, output_groups); archspec's "
        "linear layers are dense"
    ),
    "funnel": (
        "Funnel Transformer pools the sequence between its blocks (block_sizes, "
        "pooling_type) and upsamples it again; archspec keeps the sequence length through "
        "the stack"
    ),
    "fnet": (
        "FNet mixes tokens with a Fourier transform instead of attention; archspec's blocks "
        "mix tokens by attention"
    ),
    "reformer": (
        "Reformer attends through LSH buckets and local chunks (attn_layers) in reversible "
        "layers; archspec's attention is full softmax attention"
    ),
    "xlnet": (
        "XLNet's two-stream attention adds relative-position and segment terms (r_w_bias, "
        "r_r_bias, r_s_bias); archspec's attention has neither"
    ),
    "longformer": (
        "Longformer attends within a window on both sides of each token (attention_window) "
        "plus global tokens; archspec's windows are causal"
    ),
    "led": (
        "LED's encoder attends within a window on both sides of each token "
        "(attention_window) plus global tokens; archspec's windows are causal"
    ),
    "big_bird": (
        "BigBird's block-sparse attention (attention_type block_sparse: random, window and "
        "global blocks); archspec's attention is full or a causal window"
    ),
    "bigbird_pegasus": (
        "BigBird-Pegasus' encoder uses block-sparse attention (attention_type block_sparse: "
        "random, window and global blocks); archspec's attention is full or a causal window"
    ),
    "longt5": (
        "LongT5's encoder attends locally or through transient global tokens "
        "(encoder_attention_type); archspec's attention is full or a causal window"
    ),
    "pegasus_x": (
        "PEGASUS-X's encoder attends within staggered blocks plus global tokens "
        "(block_size, num_global_tokens); archspec's attention is full or a causal window"
    ),
    "prophetnet": (
        "ProphetNet's decoder predicts several future tokens through n-stream "
        "self-attention (ngram); archspec's decoder has one stream"
    ),
    "xmod": (
        "X-MOD adds a language-specific adapter to every layer (languages, "
        "adapter_layer_norm), chosen per input; archspec's layers are the same for every "
        "input"
    ),
    "nystromformer": (
        "Nystromformer approximates softmax attention through landmarks (num_landmarks); "
        "archspec's attention is exact"
    ),
    "yoso": (
        "YOSO approximates attention by locality-sensitive hashing (num_hash, "
        "hash_code_len); archspec's attention is exact softmax"
    ),
    "mra": (
        "MRA approximates attention at several resolutions (block_per_row, approx_mode); "
        "archspec's attention is exact"
    ),
    "granite_swa": (
        "GraniteSWA adds a learned sink per head to every softmax (sinks) and can rotate "
        "each layer by its own base or not at all (layer_rope_theta); archspec's attention "
        "has no sinks"
    ),
    "granitemoe_swa": (
        "GraniteMoeSWA adds a learned sink per head to every softmax (sinks) and can rotate "
        "each layer by its own base or not at all (layer_rope_theta); archspec's attention "
        "has no sinks"
    ),
    "layoutlm": (
        "LayoutLM adds embeddings of each token's bounding box (x, y, width and height "
        "tables, max_2d_position_embeddings), an input archspec's models do not take"
    ),
    "tapas": (
        "TAPAS adds seven token-type embeddings of table structure (type_vocab_sizes: "
        "segment, column, row, rank, ...); archspec's embeddings have one token-type table"
    ),
    "luke": (
        "LUKE embeds entities beside words (entity_vocab_size, entity_emb_size) and attends "
        "with entity-aware query projections (use_entity_aware_attention); archspec's "
        "models take tokens only"
    ),
    "convbert": (
        "ConvBERT mixes tokens with span-based dynamic convolutions beside its attention "
        "heads (head_ratio, conv_kernel_size); archspec's blocks mix tokens by attention "
        "only"
    ),
    "mpnet": (
        "MPNet adds a T5-style relative-position bias (relative_attention_num_buckets) on "
        "top of learned absolute positions; a spec has one position setting per stack"
    ),
    "afmoe": (
        "AFMoE gates its attention output by sigmoid(gate_proj(x)) before o_proj, in every "
        "layer; archspec's attention has no output gate"
    ),
    "apertus1p5_text": (
        "Apertus 1.5's text model is Apertus', whose MLP uses xIELU, an activation with "
        "learned parameters (alpha_p, alpha_n) in every layer, and its head may cover fewer "
        "tokens than its embeddings (output_vocab_size); archspec's activations have no "
        "parameters"
    ),
    "axk1": (
        "A.X-K1 normalises the output of each MoE block (post_mlp_layernorm) before the "
        "residual add, but not its attention's or its dense MLPs'; archspec's sandwich norms "
        "follow both sublayers of every layer"
    ),
    "axk2": (
        "A.X-K2 attends to the keys a lightning indexer selects (index_topk, index_n_heads, "
        "index_head_dim), gates its attention output by a sigmoid, and gates its norms by a "
        "low-rank projection (gated_norm_rank); archspec's attention is full or a causal "
        "window, without gates"
    ),
    "bailing_hybrid": (
        "Bailing Hybrid interleaves Kimi delta-attention (linear) layers with latent "
        "attention (layer_types, layer_group_size); archspec's blocks mix tokens by softmax "
        "attention only"
    ),
    "beam": (
        "Beam gates each head's attention output by sigmoid(gate_proj(x) + gate_bias), "
        "scales the queries of its layers without RoPE by (1 + position / 2048) ** 0.1 and "
        "weights every residual add by the layer's depth; archspec has none of these"
    ),
    "blt": (
        "BLT reads bytes grouped into patches by an entropy model (patcher_config, "
        "patching_mode), through local encoder and decoder stacks around a global "
        "transformer; archspec's models embed one token per position"
    ),
    "cohere2_moe": (
        "Cohere2-MoE averages the shared expert with the routed experts' sum "
        "(shared_expert_combination_strategy 'average', the default), can weight experts by "
        "sigmoid without a correction bias (expert_selection_fn) and rotates its dense "
        "prefix layers' full attention though its other full layers have no positions "
        "(prefix_dense_sliding_window_pattern); archspec adds a shared expert to the routed "
        "sum and repeats one position pattern over all layers"
    ),
    "cpmant": (
        "CPM-Ant prepends prompt_length learned prompt tokens (prompt_types, embedded past "
        "the vocabulary) and biases its attention by segment pairs beside bucketed relative "
        "positions (segment_types, position_bias_num_buckets); archspec has neither"
    ),
    "deepseek_v32": (
        "DeepSeek-V3.2 attends to the keys a lightning indexer selects per query "
        "(index_topk, index_n_heads, index_head_dim); archspec's attention is full or a "
        "causal window"
    ),
    "deepseek_v4": (
        "DeepSeek-V4 attends to compressed and indexer-selected keys (layer_types, "
        "compress_rates, index_topk), mixes hc_mult residual streams by hyper-connections, "
        "routes its first layers by a token-id hash (mlp_layer_types 'hash_moe') and scores "
        "experts by sqrtsoftplus (scoring_func); archspec has one residual stream and full "
        "or windowed attention"
    ),
    "dory": (
        "Dory is a looped normalized transformer: it runs its middle layers "
        "n_recurrent_loops times (n_input_layers, n_recurrent_layers, n_output_layers), "
        "keeps its hidden states at unit norm and moves them toward each sublayer's output "
        "at learned per-channel rates (ngpt_alpha_init) instead of adding it; archspec's "
        "layers run once and add their outputs"
    ),
    "dots3_note_text": (
        "dots3's text model attends to the keys a lightning indexer selects on its full "
        "layers (index_topk, index_n_heads), gives its windowed layers their own head counts "
        "and ranks (per_layer_config) and gates each head's output (g_proj); archspec's "
        "layers share one attention"
    ),
    "flint": (
        "Flint makes its first two layers, every fourth from layer 1 and its last layer full "
        "attention without positions and the others windowed with RoPE (layer_types), a "
        "pattern that does not repeat, and weights experts by sigmoid without a correction "
        "bias; archspec's window and position patterns cycle over all the layers"
    ),
    "gemma3n_text": (
        "Gemma 3n adds per-layer token embeddings (vocab_size_per_layer_input, "
        "hidden_size_per_layer_input), predicts and corrects altup_num_inputs streams "
        "(AltUp), adds a low-rank LAuReL branch (laurel_rank) and reuses earlier layers' "
        "keys and values (num_kv_shared_layers); archspec has none of these"
    ),
    "gemma4_text": (
        "Gemma 4 gives its full-attention layers their own head width (global_head_dim) and, "
        "with attention_k_eq_v, key/value heads, normalises its values, adds "
        "per-layer token embeddings (hidden_size_per_layer_input) and can reuse earlier "
        "layers' keys and values (num_kv_shared_layers); archspec's layers share one head "
        "layout"
    ),
    "gemma4_unified_assistant": (
        "Gemma 4's assistant is a speculative-decoding drafter: it reads the main model's "
        "hidden states (backbone_hidden_size) and attends to its keys and values "
        "(shared_kv_states), so it cannot run alone"
    ),
    "gemma4_unified_text": (
        "Gemma 4's unified text model gives its full-attention layers their own head width "
        "(global_head_dim) and, with attention_k_eq_v, key/value heads, normalises its values "
        "and can reuse earlier layers' keys and values (num_kv_shared_layers); archspec's "
        "layers share one head layout"
    ),
    "glm_moe_dsa": (
        "GLM-MoE-DSA attends to the keys a lightning indexer selects per query (index_topk, "
        "index_n_heads), shared between layers (indexer_types); archspec's attention is "
        "full or a causal window"
    ),
    "hrm_text": (
        "HRM-Text runs a low-level and a high-level stack in nested cycles (H_cycles, "
        "L_cycles, num_layers_per_stack), each stack's input the sum of both states, and "
        "attends bidirectionally over the prompt (prefix_lm); archspec's stack runs its "
        "layers once, in order"
    ),
    "hy_v4": (
        "HY-V4 attends to the keys a lightning indexer selects (index_topk, indexer_types), "
        "mixes hc_mult residual streams by hyper-connections, and adds sinks and a sigmoid "
        "output gate to its latent attention; archspec has one residual stream and full or "
        "windowed attention"
    ),
    "inkling_text": (
        "Inkling passes its keys, values and sublayer outputs through short causal "
        "convolutions (sconv_kernel_size), adds a relative-position bias from learned "
        "relative states (d_rel, rel_extent) and gives its windowed layers their own head "
        "counts (swa_num_attention_heads); archspec has none of these"
    ),
    "inkling2_text": (
        "Inkling 2 passes its keys, values and sublayer outputs through short causal "
        "convolutions, adds a relative-position bias from learned relative states (d_rel), "
        "draws residuals from earlier blocks of layers (n_layers_per_attn_res_block) and "
        "gives its windowed layers their own head counts; archspec has none of these"
    ),
    "inkling2_loop_text": (
        "Inkling 2 Loop runs layers loop_layer_index_start to loop_layer_index_end "
        "loop_num_passes times, on Inkling 2's blocks (short convolutions, relative states, "
        "block residuals); archspec's layers run once and have none of these"
    ),
    "kolibri1": (
        "Kolibri-1's router picks experts by the raw logits plus e_score_correction_bias and "
        "weights them by the sigmoid of the picked logits; archspec's sigmoid router adds "
        "the bias to the sigmoid scores, which ranks experts differently"
    ),
    "laguna": (
        "Laguna gates its attention output by softplus(g_proj(x)), per head or per channel "
        "(gating), and can give each layer its own number of query heads "
        "(num_attention_heads_per_layer); archspec's attention has no output gate and one "
        "head count"
    ),
    "lfm3": (
        "LFM3 replaces attention in most layers with gated short convolutions (layer_types "
        "'conv', conv_L_cache); archspec's blocks mix tokens by softmax attention only"
    ),
    "longcat_flash": (
        "LongCat-Flash's layers run two attention and two MLP sublayers with an MoE on a "
        "shortcut beside them, and routes tokens to identity experts as well as MLPs "
        "(zero_expert_num); archspec's block has one attention and one MLP or MoE"
    ),
    "mimo_v2_flash": (
        "MiMo-V2-Flash gives its windowed layers twice the key/value heads of its full "
        "layers and attention sinks the full layers lack, and its values are narrower than "
        "its queries and keys (v_head_dim) and scaled (attention_value_scale); archspec's "
        "layers share one head layout and width"
    ),
    "minimax_m3_vl_text": (
        "MiniMax-M3's text model attends to key blocks a lightning indexer selects "
        "(sparse_attention_config: index_block_size, index_topk_blocks); archspec's "
        "attention is full or a causal window"
    ),
    "moshi": (
        "Moshi is a speech-text model: its decoder's input sums the text embedding with "
        "num_codebooks audio-code embeddings from the Mimi codec (audio_encoder_config), and "
        "a depth decoder predicts the audio codes (depth_decoder_config); MoshiForCausalLM "
        "runs the text stream alone, not the model as trained"
    ),
    "nanochat": (
        "NanoChat normalises each head's queries and keys after RoPE, and its RMSNorms have "
        "no weight; archspec's qk_norm comes before RoPE, and its RMSNorm has a scale"
    ),
    "qwen3_5_text": (
        "Qwen3.5 interleaves gated DeltaNet linear-attention layers with gated attention "
        "(layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "qwen3_5_moe_text": (
        "Qwen3.5-MoE interleaves gated DeltaNet linear-attention layers with gated "
        "attention (layer_types); archspec's blocks mix tokens by softmax attention only"
    ),
    "qwen4_exp_text": (
        "Qwen4-Exp interleaves gated DeltaNet linear-attention layers with attention "
        "(layer_types) and adds per-layer n-gram embeddings (ple_layer_ids, ngram_size); "
        "archspec's blocks mix tokens by softmax attention only"
    ),
    "roc_bert": (
        "RoCBERT embeds each character's pronunciation and shape beside the token "
        "(pronunciation_vocab_size, shape_vocab_size, concat_input), inputs archspec's "
        "models do not take"
    ),
    "step3p5": (
        "Step 3.5 gates each head's attention output by sigmoid(g_proj(x)) before o_proj "
        "(gating), and may give its sliding-window layers a head count of their own "
        "(num_sliding_attention_heads); archspec's attention has no output gate"
    ),
    "trocr": (
        "TrOCR is the text decoder of an image-to-text model: its layers cross-attend to an "
        "image encoder's states (cross_attention_hidden_size) given by "
        "VisionEncoderDecoderModel; alone it is not the model as trained"
    ),
    "zaya": (
        "ZAYA mixes its queries and keys by causal convolutions and delays half its values "
        "(compressed convolutional attention: cca_time0, cca_time1), routes through an MLP "
        "router with a skip choice (router_hidden_size) and scales its residuals by learned "
        "vectors; archspec has none of these"
    ),
    "ernie4_5_vl_moe_text": (
        "ERNIE-4.5-VL's language model keeps two sets of experts in each MoE layer, one "
        "for text tokens and one for image tokens (text_moe, vision_moe: "
        "moe_intermediate_size a pair), each token routed among its kind's; archspec's "
        "MoE has one set"
    ),
    "glm5_next_text": (
        "GLM-5-Next's language model interleaves linear-attention layers with attention "
        "to the keys a lightning indexer selects, and carries several residual streams "
        "mixed by hyper-connections; archspec has none of these"
    ),
    "mistral_large4_text": (
        "Mistral Large 4's language model attends to the keys a lightning indexer selects "
        "(index_topk) and lets some layers reuse an earlier layer's keys and values; "
        "archspec's attention has neither"
    ),
}

# Words in the names of transformers' task registries (MODEL_FOR_<TASK>_MAPPING_NAMES) that
# say what a model takes in, and how this module calls it.
_TASK_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("audio", ("AUDIO", "CTC", "SPEECH", "SPECTROGRAM", "WAVEFORM", "RNNT", "TDT")),
    ("time-series", ("TIME_SERIES",)),
    (
        "vision",
        ("IMAGE", "VIDEO", "VISUAL", "OBJECT_DETECTION", "SEGMENTATION", "DEPTH", "KEYPOINT",
         "MASK_GENERATION", "POSE", "NORMAL_ESTIMATION", "POINTMAP", "RECOGNITION",
         "MULTIMODAL"),
    ),
)  # fmt: skip


def modalities(model_type: str) -> dict[str, list[str]]:
    """What transformers says a model type takes beyond text: modality -> the evidence
    (task registries and input processors). Empty for a text model, or without
    transformers."""
    try:
        from transformers.models.auto import auto_mappings, modeling_auto
    except ImportError:
        return {}
    found: dict[str, list[str]] = {}
    for name in dir(modeling_auto):
        if not (name.startswith("MODEL_FOR_") and name.endswith("_MAPPING_NAMES")):
            continue
        if model_type not in getattr(modeling_auto, name):
            continue
        task = name.removeprefix("MODEL_FOR_").removesuffix("_MAPPING_NAMES")
        for modality, words in _TASK_WORDS:
            if any(word in task for word in words):
                found.setdefault(modality, []).append(task.lower().replace("_", " "))
                break
    processors = {
        "vision": ("IMAGE_PROCESSOR_MAPPING_NAMES", "VIDEO_PROCESSOR_MAPPING_NAMES"),
        "audio": ("FEATURE_EXTRACTOR_MAPPING_NAMES",),
    }
    for modality, registries in processors.items():
        for registry in registries:
            if model_type in getattr(auto_mappings, registry, {}):
                what = registry.removesuffix("_MAPPING_NAMES").lower().replace("_", " ")
                found.setdefault(modality, []).append(what)
    if (
        "vision" in found
        and "audio" in found
        and not any("audio" in e or "speech" in e for e in found["audio"])
    ):
        del found["audio"]  # an image model's legacy feature extractor, not sound
    return found


def refusal(model_type: str, data: dict, supported: Container[str] = ()) -> Refusal | None:
    """Why `model_type` is refused, if there is more to say than "not supported". A model
    that is not a text model points at its language model (`text_config`), saying whether
    import-hf reads that one (`supported`: the model types it has a family for)."""
    if model_type in MISSING:
        return Refusal(
            f"model_type {model_type!r} is not supported by import-hf: {MISSING[model_type]}",
            hint="archspec refuses a config it cannot reproduce exactly",
        )
    found = modalities(model_type)
    if not found:
        return None
    takes = {"audio": "audio", "time-series": "time series", "vision": "images or video"}
    kinds = " and ".join(takes[m] for m in sorted(found))
    evidence = "; ".join(f"{m}: {', '.join(sorted(set(e)))}" for m, e in sorted(found.items()))
    hint = "archspec describes text transformers, and import-hf reads text model types only"
    text = data.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("model_type"), str):
        inner = text["model_type"]
        hint += f"; its language model is text_config (model_type {shortened(repr(inner), 80)})"
        if inner in supported:
            hint += ": `archspec import-hf --text-config` imports it"
        elif inner in MISSING:
            hint += f", which import-hf refuses too: {MISSING[inner]}"
        else:
            hint += ", which import-hf does not read either"
    return Refusal(
        f"model_type {model_type!r} is not a text model: it takes {kinds} input "
        f"(transformers' registries list it under {evidence})",
        hint=hint,
    )


def typo_hint(
    name: object, choices: Iterable[str], known: Callable[[str], bool | None]
) -> str | None:
    """A did-you-mean for a name that transformers does not know either: a typo (`lamma`,
    `sillu`). None for a name transformers implements, however close its spelling to one
    archspec supports (gptj is not gpt2, quick_gelu is not gelu_fast), and None without
    transformers to tell the two apart."""
    if not isinstance(name, str) or known(name) is not False:
        return None
    return did_you_mean(name, choices)


def known_model_type(name: str) -> bool | None:
    """Whether transformers has a configuration for model_type `name`."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        return None
    return name in CONFIG_MAPPING_NAMES


def known_class(name: str) -> bool | None:
    """Whether transformers exports a class (or anything) of that name; its lazy module
    lists every name without importing the models."""
    try:
        import transformers
    except ImportError:
        return None
    return name in dir(transformers)


def known_activation(name: str) -> bool | None:
    """Whether transformers has an activation of that name (ACT2FN's; imports torch, which
    only a refusal pays)."""
    try:
        from transformers.activations import ACT2CLS
    except ImportError:
        return None
    return name in ACT2CLS
