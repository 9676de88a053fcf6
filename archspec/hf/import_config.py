"""A transformers config.json -> a readable, minimal archspec spec.

Each supported `model_type` has an importer that reads the fields shaping the architecture
(with transformers' defaults for the ones a file leaves out) into the spec's terms. Every field
of the file must be either read by that importer or known not to change the architecture
(dropouts, token ids, generation settings); anything else is an error naming the field, so a
config is never silently turned into a different model. The spec is then written as
`extends:` on the family base that needs the fewest overrides, and checked: resolving the
written spec must give back exactly what was read.

The work is split by concern: `config_fields` reads the file and its fields, each family's
record (`archspec.hf.families`) translates its model_type, and `minimal_spec` writes the result
over the base that needs the fewest overrides. This module ties them together.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from archspec.errors import Location, SpecError
from archspec.hf.classes import HFClass, hf_class
from archspec.hf.config_fields import SHOWN_CHARS, Fields, read_config, shown
from archspec.hf.families import FAMILIES
from archspec.hf.minimal_spec import Imported, fewest_overrides
from archspec.hf.transformers_reads import fields_read, unread_fields
from archspec.hf.unsupported import known_model_type, refusal, typo_hint
from archspec.safety.limits import MAX_CONFIG_LAYERS
from archspec.safety.text import UNSAFE_CLASS, shortened

__all__ = ["FAMILIES", "Imported", "import_config", "read_config"]


# The fields that count layers, whatever a family calls them.
LAYER_COUNTS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
                "decoder_layers", "num_decoder_layers")  # fmt: skip


def _generic(f: Fields, dequantized: bool = False) -> None:
    """Fields any model_type may carry that archspec cannot reproduce: refused for all.
    `dequantized`: a quantization_config is set aside, reported (`--dequantized`)."""
    for key in LAYER_COUNTS:
        layers = f.data.get(key)
        if isinstance(layers, int) and not isinstance(layers, bool):
            if layers > MAX_CONFIG_LAYERS:
                raise f.error(key, f"expected at most {MAX_CONFIG_LAYERS:,} layers, got {layers:,}")
            if layers < 1:
                raise f.error(key, f"expected at least one layer, got {layers}")
    f.expect("add_cross_attention", False, False, "cross-attention blocks in this family")
    f.expect("tie_encoder_decoder", False, False, "the encoder sharing the decoder's weights")
    f.expect("pruned_heads", ({}, None), {}, "pruned attention heads change the layer shapes")
    f.expect("cross_attention_hidden_size", (None,), None, "a cross-attention projection")
    if f.present("quantization_config"):
        _quantized(f, f.data["quantization_config"], "quantization_config", dequantized)
    if f.present("auto_map"):
        # Every model_type archspec reads is one transformers implements itself, and
        # transformers runs its own class unless told trust_remote_code=True: the custom code
        # auto_map names is not what `from_pretrained` builds (the real falcon-7b and phi-3
        # configs carry one). A class name of that code in `architectures` is still refused.
        f.harmless("auto_map")
        f.notes.append(
            f"auto_map names custom modeling code; imported as transformers' own "
            f"{f.model_type} implementation, which it runs without trust_remote_code"
        )


def _quantized(f: Fields, quant: Any, key: str, dequantized: bool) -> None:
    """A checkpoint stored quantized. The quantized weights are what from_pretrained runs
    (other numbers, other bytes), so it is refused unless asked for the model under them:
    transformers' class built from the config is that model (its quantizer runs only in
    from_pretrained), with the same parameters."""
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    named = f" (quant_method {shown(method)})" if isinstance(method, str) else ""
    if not dequantized:
        raise f.error(
            key,
            f"quantized checkpoints are not supported{named}",
            hint="archspec describes the unquantized model: import-hf --dequantized imports "
            "that (the same parameters), and --dtype gives the bytes a parameter takes",
        )
    f.harmless(key)
    f.notes.append(
        f"{key}{named} set aside (--dequantized): the spec is the model its checkpoint "
        "dequantizes to, with the same parameters; its weights are not this checkpoint's"
    )


def _choose_class(f: Fields, model_type: str, architecture: str | None) -> HFClass:
    archs = f.data.get("architectures") or []
    if architecture is not None:
        name = architecture
    elif archs:
        if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
            raise f.error("architectures", "expected a list of class names")
        name = archs[0]
    else:
        name = FAMILIES[model_type].default_class.name
        f.notes.append(f"config.json names no architecture; imported as {name}")
    # transformers saves the class it built (LlamaForCausalLM for an EXAONE 3 model)
    built = [c for c in FAMILIES[model_type].classes if c.implementation == name]
    if built:
        return built[0]
    try:
        cls = hf_class(name)
    except SpecError as exc:
        where = "--architecture" if architecture is not None else "architectures[0]"
        raise SpecError(exc.message, location=f.where, path=where, hint=exc.hint) from None
    if cls.model_type != model_type:
        raise f.error(
            "architectures",
            f"{name} is a {cls.model_type} class, but model_type is {model_type!r}",
        )
    return cls


def _same_architecture(model_type: object) -> str | None:
    """A family to suggest for an unsupported model_type: only one that computes the same
    function. A close name is no reason (gptj is not gpt2, albert is not bert), but the same
    name spelt with other case or separators is (xlm_roberta is xlm-roberta). A model_type
    transformers implements with another's architecture (camembert) is a family of its own."""
    if not isinstance(model_type, str):
        return None

    def key(name: str) -> str:
        return name.lower().replace("-", "").replace("_", "")

    spelt = [name for name in FAMILIES if key(name) == key(model_type)]
    return f"did you mean {spelt[0]!r}?" if spelt else None


def _source(data: dict[str, Any], path: str) -> str:
    hub_id = data.get("_name_or_path")
    if (
        isinstance(hub_id, str)
        and hub_id.count("/") <= 1
        and hub_id
        and not hub_id.startswith(("/", "."))
    ):
        return f"https://huggingface.co/{hub_id}/blob/main/config.json"
    return path_source(path)


# What a spec's text field may not hold (TEXT_PATTERN): a control, bidi or invisible
# character (a non-UTF-8 byte of a file name is a lone surrogate), a quote, backslash or backtick.
_NOT_IN_TEXT = re.compile(f'[{UNSAFE_CLASS}\\\\"`]')
MAX_SOURCE_CHARS = 300  # TEXT_PATTERN's length


def path_source(path: str) -> str:
    """A config's path as the spec's `source` may hold it: any character a text field refuses
    percent-encoded as its bytes (`"` is %22, a file name's byte 0xff is %FF), and a path
    longer than the field kept by its end (the folder the config is in). Any folder name then
    imports; the path is a note of where the numbers came from, not something to open."""
    safe = _NOT_IN_TEXT.sub(_percent, path)
    if len(safe) <= MAX_SOURCE_CHARS:
        return safe
    return "..." + safe[-(MAX_SOURCE_CHARS - 3) :]


def _percent(match: re.Match[str]) -> str:
    # surrogateescape keeps an undecodable byte of a file name as U+DC80-U+DCFF; any other
    # lone surrogate is encoded as it stands.
    try:
        data = match.group().encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = match.group().encode("utf-8", "surrogatepass")
    return "".join(f"%{byte:02X}" for byte in data)


def import_config(
    config: str | Path | dict[str, Any],
    *,
    architecture: str | None = None,
    source: str | None = None,
    text_config: bool = False,
    dequantized: bool = False,
) -> Imported:
    """Turn a transformers config (a path to config.json or its folder, or the mapping) into a
    spec over the matching family base. Raises SpecError on anything it cannot reproduce.
    `text_config`: import the config's `text_config` (a vision-language model's language
    model) instead; errors then name their fields under it. `dequantized`: a quantized
    checkpoint's config imports as the model under its quantization, reported, instead of
    being refused."""
    if isinstance(config, dict):
        data, path = config, "config.json"
    else:
        data, config_path = read_config(config)
        path = str(config_path)
    if text_config:
        inner = data.get("text_config")
        if inner is not None and not isinstance(inner, dict):
            raise SpecError(
                f"--text-config: text_config must be a JSON object, got {shown(inner)}",
                location=Location(path),
                path="text_config",
            )
        if inner is None:
            raise SpecError(
                "--text-config: config.json has no text_config (the language model of a "
                "vision-language model), so there is nothing to import instead of it",
                location=Location(path),
                path="text_config",
                hint="import the file without --text-config",
            )
        outer_fields = Fields(data, Location(path), str(data.get("model_type")))
        if "quantization_config" in data:  # the whole model's, its language model's too
            _quantized(outer_fields, data["quantization_config"], "quantization_config",
                       dequantized)  # fmt: skip
        try:
            imported = import_config(inner, architecture=architecture,
                                     source=source or _source(data, path),
                                     dequantized=dequantized)  # fmt: skip
        except SpecError as exc:
            exc.location = Location(path)
            exc.path = f"text_config.{exc.path}" if exc.path else "text_config"
            raise
        outer = shortened(repr(data.get("model_type")), SHOWN_CHARS)
        note = f"imported text_config, the language model of a model_type {outer} config"
        notes = (note, *outer_fields.notes, *imported.notes)
        return dataclasses.replace(imported, config_path=path, notes=notes)
    where = Location(path)
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        why = refusal(model_type, data, FAMILIES) if isinstance(model_type, str) else None
        if why is not None:  # not a text model, or one the spec cannot express yet
            raise SpecError(why.message, location=where, path="model_type", hint=why.hint)
        hint = (
            _same_architecture(model_type)
            or typo_hint(model_type, FAMILIES, known_model_type)
            or f"supported: {', '.join(FAMILIES)}"
        )
        message = (
            f"model_type {shown(model_type)} is not supported by import-hf"
            if model_type
            else "config.json has no model_type"
        )
        raise SpecError(message, location=where, path="model_type", hint=hint)
    family = FAMILIES[model_type]
    f = Fields(data, where, model_type)
    cls = _choose_class(f, model_type, architecture)
    _generic(f, dequantized)
    target = family.import_config(f, cls)
    target["hf_class"] = cls.name
    f.harmless("is_decoder", "is_encoder_decoder", "tie_word_embeddings")
    unknown = f.leftovers()
    for key in unread_fields(model_type, unknown):
        # No transformers code for this model_type reads it: any value builds the same model.
        f.ignored(key, f"transformers' {model_type} configuration and modeling code")
    unknown = f.leftovers()
    if unknown:
        key = unknown[0]
        value = shown(data[key], as_json=True)
        why = (
            "archspec cannot tell whether it changes the architecture"
            if fields_read(model_type) is None
            else f"transformers' {model_type} code reads it, so it may change the architecture"
        )
        raise f.error(
            key,
            f"field '{shortened(key, SHOWN_CHARS)}' (= {value}) is not understood "
            f"for model_type '{model_type}'; {why}",
            hint="if it does not change the model, delete it from config.json",
        )
    src = source or _source(data, path)
    base, minimal, spec = fewest_overrides(family.bases, target, family.spec_family, src, where)
    return Imported(minimal, base, spec, tuple(f.notes), path, model_type, cls.name)
