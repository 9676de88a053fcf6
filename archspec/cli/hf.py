"""`archspec import-hf`: a transformers config.json -> a minimal archspec spec."""

from __future__ import annotations

from pathlib import Path

from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    ForceOpt,
    print_json,
    say,
    user_errors,
    write_output,
    write_stdout,
)
from archspec.cli.options import (
    ImportArchitecture,
    ImportConfigArg,
    ImportDequantized,
    ImportJson,
    ImportOutput,
    ImportTextConfig,
)
from archspec.errors import SpecError
from archspec.safety.text import has_unsafe, shell_join, visible


@app.command("import-hf")
def import_hf(
    config: ImportConfigArg, output: ImportOutput = None, force: ForceOpt = False,
    architecture: ImportArchitecture = None, text_config: ImportTextConfig = False,
    dequantized: ImportDequantized = False, json_: ImportJson = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Turn a transformers config.json into a readable, minimal spec that `extends:` the
    matching built-in family base. `architectures[0]` picks the head (BertModel: pooler;
    *ForCausalLM, *LMHeadModel, *ForConditionalGeneration: LM head). A model_type or a field
    that would change the architecture and that archspec cannot express is an error naming it.
    With `-o FILE` the spec is written atomically; an existing FILE with different content (a
    spec you may have edited) is kept (exit code 2) unless `--force`.

    Examples:

        archspec import-hf path/to/config.json

        archspec import-hf path/to/checkpoint -o my-model.yaml

        archspec import-hf bert/config.json --architecture BertModel

        archspec import-hf qwen2.5-vl/config.json --text-config

        archspec import-hf deepseek-v3/config.json --dequantized -o deepseek-v3.yaml
    """
    from archspec.hf.hub_cache import cached_config, hub_source, looks_like_hub_id
    from archspec.hf.import_config import import_config

    with user_errors(debug, json_):
        source = None
        if looks_like_hub_id(str(config)):  # org/name, read from the local Hugging Face cache
            source = hub_source(str(config))
            config = cached_config(str(config))
        if has_unsafe(str(config)) and config.exists():  # a missing file: read_config says so
            raise _unsafe_path(config)
        imported = import_config(
            config, architecture=architecture, source=source, text_config=text_config,
            dequantized=dequantized,
        )  # fmt: skip
    if json_:
        print_json({"extends": imported.base, **imported.data})
        return
    text = imported.yaml()
    if output is None:
        write_stdout(text)
        return
    with user_errors(debug, json_):
        config_file = config / "config.json" if config.is_dir() else config
        written = write_output(output, text, force, "the imported spec", (config_file,))
    what = "wrote" if written else "unchanged:"
    say(
        f"{what} {output} ({imported.hf_class}, extends {imported.base}); "
        f"count it with `{shell_join(['archspec', 'count', str(output)])}`"
    )


def _unsafe_path(config: Path) -> SpecError:
    """The path is recorded in the written spec's header: a path holding characters that no
    terminal or editor shows as they are is refused, naming it (escaped) and what it holds."""
    path = str(config)
    try:  # os.fsdecode keeps each byte of a name that is not UTF-8 as a lone surrogate
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        shown = path
    what = "a control or invisible character"
    if shown != path:
        what = "a byte that is not UTF-8"
    return SpecError(
        f"the config's path '{visible(shown)}' holds {what}; import-hf records the path in "
        "the spec it writes",
        hint="rename the file or folder",
    )
