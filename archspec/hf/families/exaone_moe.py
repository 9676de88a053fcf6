"""EXAONE-MoE (`model_type: exaone_moe`, K-EXAONE): EXAONE 4's attention (an RMSNorm over each
head's queries and keys before RoPE, no biases) in a plain pre-norm block (OLMoE's, not EXAONE
4's output norms), with, after the dense first layers, DeepSeek-V3's experts: the sigmoid
router with its bias correction (`_sigmoid_moe.py`) beside a shared expert
`moe_intermediate_size × num_shared_experts` wide, as transformers' modeling_exaone_moe.py
computes them.

Its windowed layers (`layer_types`, by default three of every `sliding_window_pattern` = 4)
rotate and its full layers have no positions at all (Exaone4Attention rotates only when the
layer slides): the spec's window_pattern, and position_pattern marking the full layers N.
ExaoneMoeConfig refuses a null sliding_window, so every model has windows. Which layers have
experts is `mlp_layer_types` (it overrides `first_k_dense_replace`); the spec says dense
first layers alone, so any other order is refused. Checkpoints keep one module per expert and
the router's bias correction on the MoE block (`mlp.e_score_correction_bias`);
transformers 5 stacks the experts and moves the bias onto the gate in memory."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families._sigmoid_moe import (
    ExpertDefaults,
    ExpertKeys,
    dense_from_layer_types,
    read_sigmoid_moe,
    write_sigmoid_moe,
)
from archspec.hf.families._windows import layer_types
from archspec.hf.families.deepseek_v2 import SHARED
from archspec.hf.families.exaone4 import WINDOW, check_rotated_windows, exaone_windows
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.qwen3_moe import QK_NORMS
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=16384, kv_heads=32, max_positions=2048, rms_eps=1e-5, vocab_size=102400)
EXPERTS = ExpertDefaults(
    dense=1,
    experts=64,
    top_k=8,
    width=1024,
    shared=1,
    scale=2.5,
    normalize=True,
    groups=1,
    top_groups=1,
)  # ExaoneMoeConfig's
KEYS = ExpertKeys(experts="num_experts", shared="num_shared_experts", experts_aliases=())
# The checkpoints' router: its weight on the gate, its bias correction on the MoE block.
ROUTER = Target(
    "mlp", params={"weight": "gate.weight", "e_score_correction_bias": "e_score_correction_bias"}
)


def _windows(f: Fields, n_layers: int) -> tuple[dict[str, Any], str]:
    """The attention's window fields and the position_pattern (EXAONE 4's: windowed layers
    rotate, full ones have no positions); ExaoneMoeConfig has no null window."""
    f.refuse_null("sliding_window", "ExaoneMoeConfig (its field is an int)")
    return exaone_windows(f, n_layers, f.size("sliding_window", WINDOW))


def import_exaone_moe(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = import_llama_like(f, cls, VARIANT)
    window, positions = _windows(f, spec["n_layers"])
    spec["attention"] = {**spec["attention"], "qk_norm": True, "qk_norm_scope": "head", **window}
    spec["position_pattern"] = positions
    dense = dense_from_layer_types(f, spec["n_layers"])
    if dense is not None:
        f.harmless("first_k_dense_replace")  # mlp_layer_types overrides it
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS, KEYS, dense)
    return spec


def export_exaone_moe(spec: Spec) -> dict[str, Any]:
    check_rotated_windows(spec, "EXAONE-MoE")
    experts = write_sigmoid_moe(spec, KEYS)
    dense = experts["first_k_dense_replace"]
    return {
        **export_llama_like(spec),
        "sliding_window": spec.attention.sliding_window,
        "layer_types": layer_types(spec),
        "mlp_layer_types": ["dense" if i < dense else "sparse" for i in range(spec.n_layers)],
        **experts,
    }


FAMILY = Family(
    model_type="exaone_moe",
    classes=(
        HFClass("ExaoneMoeForCausalLM", "exaone_moe", "lm", base=False),
        HFClass("ExaoneMoeModel", "exaone_moe", "none", base=True),
    ),
    bases=("_exaone_moe",),
    import_config=import_exaone_moe,
    export_config=export_exaone_moe,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        # As the checkpoint files store it: one module per expert (DeepSeek's names), the
        # bias correction on the MoE block.
        block=chain(
            table(
                {
                    "moe.router": ROUTER,
                    "moe.experts.*.gate": "mlp.experts.*.gate_proj",
                    "moe.experts.*.up": "mlp.experts.*.up_proj",
                    "moe.experts.*.down": "mlp.experts.*.down_proj",
                }
            ),
            SHARED,
            QK_NORMS,
            DENSE_BLOCK,
        ),
        # transformers 5's memory: every layer's experts stacked (as Mixtral's).
        block_variants={"module": chain(SHARED, QK_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
