"""CodeGen (`model_type: codegen`, Salesforce CodeGen and CodeGen2): GPT-J's block (attention
and MLP in parallel from one LayerNorm, RoPE on `rotary_dim` channels in interleaved pairs, an
untied head with a bias) whose q, k and v come from one projection, `qkv_proj`, laid out for
the 4 model-parallel shards CodeGen was trained on: each quarter of its rows holds that shard's
query heads, then their values, then their keys."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families.gptj import export_gptj, import_gptj
from archspec.hf.family import Buffer, Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table

SHARDS = 4  # CodeGenAttention's mp_num


def import_codegen(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = import_gptj(f, cls)
    if spec["n_heads"] % SHARDS:
        raise f.error(
            "n_head",
            f"n_head = {spec['n_heads']}: CodeGen splits its heads over {SHARDS} shards",
        )
    return spec


def _qkv(part: int, what: str) -> Target:
    return Target(
        "attn.qkv_proj", "heads", part, 3, note=f"{what} rows of each of 4 shards", groups=SHARDS
    )


FAMILY = Family(
    model_type="codegen",
    classes=(
        HFClass("CodeGenForCausalLM", "codegen", "lm", base=False),
        HFClass("CodeGenModel", "codegen", "none", base=True),
    ),
    bases=("_gptj",),
    spec_family="codegen",
    import_config=import_codegen,
    export_config=export_gptj,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=table(
            {
                "norm": "ln_1",
                # within a shard: queries, values, keys
                "attn.q": _qkv(0, "q"),
                "attn.v": _qkv(1, "v"),
                "attn.k": _qkv(2, "k"),
                "attn.o": "attn.out_proj",
                "mlp.up": "mlp.fc_in",
                "mlp.down": "mlp.fc_out",
            }
        ),
    ),
    # older checkpoints: each layer's causal mask and masked_bias
    buffers=(
        Buffer("h.{i}.attn.causal_mask", "anything"),
        Buffer("h.{i}.attn.masked_bias", "anything"),
    ),
)
