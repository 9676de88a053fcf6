"""A transformers config.json's fields, read one by one (import) and written (export).

`Fields` hands each field to the family importer that asks for it (with transformers' default
when the file leaves it out) and remembers what was read, so that whatever is left over can be
checked against the fields known not to change the function a model computes. A field that is
neither read nor known harmless is an error: a config is never silently turned into a
different model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archspec.errors import Location, SpecError
from archspec.hf.family import HFClass
from archspec.hf.unsupported import known_activation, typo_hint
from archspec.safety.json_file import read_json
from archspec.safety.text import shortened

if TYPE_CHECKING:
    from archspec.spec.schema import Spec

# Fields every config may carry that do not change the function a model computes in eval mode.
# fmt: off
GENERIC_HARMLESS = {
    "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype",
    "dtype", "use_cache", "id2label", "label2id", "num_labels", "problem_type",
    "finetuning_task", "task_specific_params", "tokenizer_class", "prefix", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16",
    "tf_legacy_loss", "chunk_size_feed_forward", "gradient_checkpointing", "output_past",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "forced_decoder_ids", "_attn_implementation", "attn_implementation", "_commit_hash",
    "keys_to_ignore_at_inference", "xla_device", "_attn_implementation_autoset",
    # transformers 2.x saved num_labels under this name (distilgpt2, distilbart).
    "_num_labels",
    # The rest of GenerationConfig._get_default_generation_params(): decoding settings,
    # popped by PreTrainedConfig before the model ever sees them.
    "assistant_confidence_threshold", "assistant_lookbehind", "encoder_repetition_penalty",
    "epsilon_cutoff", "eta_cutoff", "num_assistant_tokens", "num_assistant_tokens_schedule",
    "target_lookbehind",
    # Implementation choices PreTrainedConfig pops or skips: the same function either way.
    "experts_implementation", "_experts_implementation", "_attn_implementation_internal",
    "_experts_implementation_internal", "name_or_path",
}
HARMLESS_SUFFIXES = ("_token_id", "_token_ids")
HARMLESS_PARTS = ("dropout", "pdrop", "layerdrop", "initializer_range", "initializer_factor",
                  "init_std")
# fmt: on

# transformers activation names (ACT2FN) -> the spec's.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",  # 0.5x(1 + tanh(0.79788456 x (1 + 0.044715 x²))): the same curve
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
    "relu2": "squared_relu",
}

# The spec's activation names -> transformers' (what the exporters write).
EXPORT_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_tanh": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "squared_relu": "relu2",
}

_MISSING = object()
# The most of a field's value an error echoes.
SHOWN_CHARS = 80


def shown(value: Any, as_json: bool = False) -> str:
    """A config value as Python writes it (or as its JSON), cut short: what an error says the
    file holds."""
    return shortened(json.dumps(value) if as_json else repr(value), SHOWN_CHARS)


class Fields:
    """A config.json mapping that records which fields an importer read."""

    def __init__(self, data: dict[str, Any], where: Location, model_type: str) -> None:
        self.data = data
        self.where = where
        self.model_type = model_type
        self.used: set[str] = {"model_type", "architectures"}
        self.notes: list[str] = []

    def error(self, key: str | None, message: str, hint: str | None = None) -> SpecError:
        return SpecError(message, location=self.where, path=key, hint=hint)

    def present(self, key: str) -> bool:
        return self.data.get(key) is not None

    def is_null(self, key: str) -> bool:
        """The file gives `key` as null: `get` reads that as left out (the default), which is
        what most config classes do; where a class keeps the None and its model reads it
        otherwise, the importer asks this first."""
        return key in self.data and self.data[key] is None

    def refuse_null(self, key: str, reader: str) -> None:
        """Refuse an explicit null that the config class keeps and `reader` cannot build with
        (transformers fails on it): read as left out, it would be another model's default."""
        if self.is_null(key):
            raise self.error(key, f"null, which {reader} cannot build with (it fails on it)")

    def get(self, key: str, default: Any = None, *aliases: str) -> Any:
        """The value of `key` (or of an alias transformers maps onto it), else `default`."""
        found: list[tuple[str, Any]] = []
        for name in (key, *aliases):
            self.used.add(name)
            if self.data.get(name) is not None:
                found.append((name, self.data[name]))
        if len({json.dumps(v, sort_keys=True) for _, v in found}) > 1:
            listed = ", ".join(f"{k} = {shown(v)}" for k, v in found)
            raise self.error(key, f"fields that mean the same disagree: {listed}")
        return found[0][1] if found else default

    def int(self, key: str, default: Any = _MISSING, *aliases: str) -> int:
        self._not_null(key, *aliases)
        value = self.get(key, default, *aliases)
        if value is _MISSING:
            raise self.error(key, f"config.json has no '{key}'")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {shown(value)}")
        return value

    def count(self, key: str, default: Any = _MISSING, *aliases: str) -> int:
        """An integer that counts something every model has at least one of (heads): 0 or
        fewer is refused here, naming the field, before anything divides by it."""
        value = self.int(key, default, *aliases)
        if value < 1:
            raise self.error(key, f"expected a positive integer, got {shown(value)}")
        return value

    def _not_null(self, key: str, *aliases: str) -> None:
        """A size transformers has a default for only when the field is absent: null is kept
        as None, and its config class refuses it (or its model fails to build)."""
        names = (key, *aliases)
        if any(n in self.data and self.data[n] is None for n in names) and not any(
            self.data.get(n) is not None for n in names
        ):
            raise self.error(
                key,
                f"{key} is null; transformers takes its default only when the field is absent",
                hint=f"give {key} a value, or leave it out",
            )

    def size(self, key: str, default: int | None) -> int | None:
        """An optional size: absent or null gives `default`; anything else must be a
        positive integer (0 is no way of saying "absent")."""
        value = self.get(key, None)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(key, f"expected a positive integer, got {shown(value)}")
        return value

    def optional_size(self, key: str, absent: int | None) -> int | None:
        """An optional size whose config class fills in `absent` where the field is left out
        but keeps an explicit null as None (Qwen2Config's `num_key_value_heads: int | None =
        32`, None then read as one per head): absent and null may mean different models."""
        if key not in self.data:
            self.used.add(key)
            return absent
        return self.size(key, None)

    def float(self, key: str, default: Any, *aliases: str) -> float:
        value = self.get(key, default, *aliases)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {shown(value)}")
        if not math.isfinite(value):  # a dict from Python may hold what JSON cannot
            raise self.error(key, f"expected a finite number, got {shown(value)}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {shown(value)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A boolean whose config class keeps an explicit null as None, which its modeling code
        then reads as false (`if config.parallel_attn:`, FalconConfig); absent, the class's
        default."""
        if key in self.data and self.data[key] is None:
            self.used.add(key)
            return False
        return self.bool(key, default)

    def expect(self, key: str, allowed: Any, default: Any, why: str) -> Any:
        """A field archspec supports only at some values: refuse the others, saying why."""
        value = self.get(key, default)
        if isinstance(allowed, (set, tuple, list)):
            try:
                ok = value in allowed
            except TypeError:  # a list or mapping asked of a set: none of its scalars
                ok = False
        else:
            ok = value == allowed
        if not ok:
            raise self.error(
                key,
                f"{key} = {shown(value, as_json=True)} is not supported: {why}",
                hint="archspec refuses a config it cannot reproduce exactly",
            )
        return value

    def activation(self, key: str, default: str, table: dict[str, str] = ACTIVATIONS) -> str:
        value = self.get(key, default)
        if not isinstance(value, str) or value not in table:
            raise self.error(
                key,
                f"activation {shown(value)} is not supported",
                hint=typo_hint(value, table, known_activation) or f"supported: {', '.join(table)}",
            )
        return table[value]

    def follow_attribute_map(self, attribute_map: dict[str, str]) -> None:
        """Read each alias of a config class's `attribute_map` (alias -> field) as its field,
        as transformers does: a file may use either name, and both must then agree."""
        for alias, key in attribute_map.items():
            value = self.get(key, None, alias)
            self.data = {k: v for k, v in self.data.items() if k != alias}
            if value is not None:
                self.data[key] = value

    def harmless(self, *keys: str) -> None:
        self.used.update(keys)

    def ignored(self, key: str, reader: str) -> None:
        """A field real files carry that no transformers code for this model_type reads
        (`reader`, the config and model classes that would), so any value builds the same
        model: accepted, and reported once as ignored."""
        self.used.add(key)
        if key in self.data:
            self.notes.append(
                f"field '{shortened(key, SHOWN_CHARS)}' (= "
                f"{shown(self.data[key], as_json=True)}) is ignored, as {reader} ignore it"
            )

    def leftovers(self) -> list[str]:
        return [k for k in self.data if k not in self.used and not harmless_anywhere(k)]


def as_number(f: Any, key: str, value: Any, positive: bool = False) -> float:
    """A setting that must be a finite number (positive where said), or an error at `key` of
    `f` (a Fields or anything with its `error`)."""
    if (
        isinstance(value, bool) or not isinstance(value, (int, float))
        or not math.isfinite(value) or (positive and value <= 0)
    ):  # fmt: skip
        what = "a positive finite number" if positive else "a finite number"
        raise f.error(key, f"expected {what}, got {shown(value)}")
    return float(value)


def harmless_anywhere(key: str) -> bool:
    """A field any config (or sub-config) may carry that changes no architecture: generation
    and bookkeeping settings, token ids, dropouts, initialisation."""
    if not isinstance(key, str):  # a key only a mapping from Python can hold (id2label's)
        return False
    return (
        key in GENERIC_HARMLESS
        or key.endswith(HARMLESS_SUFFIXES)
        or any(p in key for p in HARMLESS_PARTS)
    )


def read_head(f: Fields, cls: HFClass, tie_default: bool) -> dict[str, Any]:
    """The spec's `head` section: what the transformers class puts on top of the base model."""
    if cls.head == "lm":
        return {
            "lm_head": True,
            "pooler": False,
            "tied": f.bool("tie_word_embeddings", tie_default),
        }
    f.harmless("tie_word_embeddings")
    if cls.head == "score":
        return {"lm_head": False, "pooler": False, "token_score": True}
    return {"lm_head": False, "pooler": cls.head == "pooler"}


def head_fields(spec: Spec) -> dict[str, Any]:
    """The config.json fields of the spec's head, for an exporter (`read_head`'s inverse)."""
    return {"tie_word_embeddings": spec.head.tied}


def read_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """The mapping in a config.json (or in the config.json of a folder), and its path."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        raise SpecError(f"no such file: {path}", hint="pass a transformers config.json")
    data = read_json(path, what="config.json")  # strict: see archspec/safety/json_file.py
    if not isinstance(data, dict):
        raise SpecError("config.json must hold a JSON object", location=Location(str(path)))
    return data, path
