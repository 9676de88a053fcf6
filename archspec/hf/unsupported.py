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

from dataclasses import dataclass


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


def refusal(model_type: str, data: dict) -> Refusal | None:
    """Why `model_type` is refused, if there is more to say than "not supported"."""
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
        hint += (
            f"; its language model is text_config (model_type {text['model_type']!r}): "
            "written out as a config.json of its own, it imports alone"
        )
    return Refusal(
        f"model_type {model_type!r} is not a text model: it takes {kinds} input "
        f"(transformers' registries list it under {evidence})",
        hint=hint,
    )
