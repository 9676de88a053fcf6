"""GPT-BigCode (`model_type: gpt_bigcode`; StarCoder, SantaCoder): GPT-2's block with
multi-query attention (one key/value head) and nn.Linear layers instead of Conv1D.

Its fused `c_attn` holds q, then the one k head, then the one v head, stacked by rows: a plain
concatenation. Without multi_query it interleaves q/k/v per head instead, a layout whose names
would depend on the spec; no released checkpoint uses it, so it is refused.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._gpt_like import GPT_BUFFERS
from archspec.hf.families.gpt2 import export_gpt2, import_gpt2
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec


def import_gpt_bigcode(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("multi_query", True, True, "per-head interleaved q/k/v (multi-head GPT-BigCode)")
    # GPTBigCodeConfig sets num_key_value_heads to 1 under multi_query, whatever the file says.
    f.ignored("num_key_value_heads", "GPTBigCodeConfig (multi_query sets one key/value head) and "
              "GPTBigCodeAttention")  # fmt: skip
    f.expect("add_cross_attention", False, False, "cross-attention in a decoder-only model")
    # Only where the softmax is computed in half precision, not the function.
    f.harmless("attention_softmax_in_fp32", "scale_attention_softmax_in_fp32")
    spec = import_gpt2(f, cls)
    spec["n_kv_heads"] = 1
    return spec


def export_gpt_bigcode(spec: Spec) -> dict[str, Any]:
    return {**export_gpt2(spec), "multi_query": True}


_BLOCK = table(
    {
        "attn_norm": "ln_1",
        "attn.q": Target("attn.c_attn", "concat", 0, 3, note="q rows"),
        "attn.k": Target("attn.c_attn", "concat", 1, 3, note="k rows (one head)"),
        "attn.v": Target("attn.c_attn", "concat", 2, 3, note="v rows (one head)"),
        "attn.o": "attn.c_proj",
        "mlp_norm": "ln_2",
        "mlp.up": "mlp.c_fc",
        "mlp.down": "mlp.c_proj",
    }
)

FAMILY = Family(
    model_type="gpt_bigcode",
    classes=(
        HFClass("GPTBigCodeForCausalLM", "gpt_bigcode", "lm", base=False),
        HFClass("GPTBigCodeModel", "gpt_bigcode", "none", base=True),
    ),
    bases=("_gpt_bigcode",),
    import_config=import_gpt_bigcode,
    export_config=export_gpt_bigcode,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"pos_emb": "wpe", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=_BLOCK,
    ),
    buffers=GPT_BUFFERS,
)
