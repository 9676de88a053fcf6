"""`archspec build`: the standalone PyTorch file (`Config` and `Model`) for a spec."""

from __future__ import annotations

from pathlib import Path

from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    ForceOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    compile_spec,
    human,
    print_json,
    say,
    user_errors,
    write_stdout,
)
from archspec.cli.options import BuildHfIgnore, BuildHfWeights, BuildOutput
from archspec.errors import SpecError
from archspec.safety.writing import Output, check_places, write_files


@app.command()
def build(
    spec: SpecArg, output: BuildOutput = None, force: ForceOpt = False, set_: SetOpt = None,
    hf_weights: BuildHfWeights = None, hf_ignore: BuildHfIgnore = None, json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Generate one standalone PyTorch file for a spec: a `Config` dataclass with the spec's
    values and `class Model(nn.Module)`, needing nothing but torch.

    Without `-o` the code goes to stdout. With `-o FILE` it is written atomically; an existing
    FILE with different content is kept (exit code 2) unless `--force`. `--json` prints a
    summary instead (name, overrides, path, params, bytes); without `-o` nothing is written then.

    Examples:

        archspec build gpt2 > model.py

        archspec build llama-2-7b -o llama.py

        archspec build t5-small --set n_layers=2 -o tiny_t5.py --force

        archspec build my-model.yaml -o model.py --json

        archspec build spec.yaml --hf-weights checkpoint/ -o model.py
    """
    from archspec.backends.count.params import parameter_count
    from archspec.backends.torchgen import generate_source
    from archspec.backends.torchgen.features import UnsupportedIR

    with user_errors(debug, json_):
        ir = compile_spec(spec, set_)
        try:
            source = generate_source(ir, command=_command(spec, set_, output))
        except UnsupportedIR as exc:
            raise SpecError(f"cannot generate PyTorch code for '{ir.name}': {exc}") from exc
        outputs, inputs = [], _spec_inputs(spec)
        weights = None
        if output is not None:
            outputs.append(Output(output, source.encode(), "the generated code"))
        if hf_weights is not None:
            weights = _add_weights(ir, hf_weights, hf_ignore, output, outputs, inputs)
        # The code and the weights are written together or not at all.
        written = write_files(outputs, force=force, inputs=inputs)
    total = ir.value(parameter_count(ir.root))
    size = len(source.encode())
    if json_:
        summary = {"name": ir.name, "overrides": list(ir.identity.overrides),
                   "path": str(output) if output is not None else None, "params": total,
                   "bytes": size}  # fmt: skip
        if weights is not None:
            summary["weights"] = str(weights)
        print_json(summary)
    elif output is None:
        write_stdout(source)
    else:
        say(f"{'wrote' if written[0] else 'unchanged:'} {output} ({ir.identity.title}, "
            f"{total:,} parameters ({human(total)}), {size:,} bytes)")  # fmt: skip
        if weights is not None:
            what = "wrote" if written[1] else "unchanged:"
            say(f"{what} {weights} (converted from {hf_weights})")


def _add_weights(ir, hf_weights: Path, hf_ignore: list[str] | None, output: Path | None,
                 outputs: list[Output], inputs: list[Path]) -> Path:  # fmt: skip
    """Convert the checkpoint's weights to the generated names: one more output, written next
    to the code, and the checkpoint's files among the inputs no output may replace."""
    from archspec.hf.weights import checkpoint_inputs, convert, read_state_dict, state_dict_bytes

    if output is None:
        raise SpecError("--hf-weights needs -o FILE: the weights are written next to it")
    weights = output.with_suffix(".safetensors")
    inputs += checkpoint_inputs(hf_weights)
    check_places([output, weights], inputs)  # before the slow part: the conversion
    converted = convert(ir, read_state_dict(hf_weights), ignore=hf_ignore or ())
    data = state_dict_bytes(converted, ir.name)
    outputs.append(Output(weights, data, "the converted weights"))
    return weights


def _spec_inputs(spec: str) -> list[Path]:
    """The spec file a command reads, if it is one: never an output."""
    from archspec.spec.resolve import is_builtin

    path = Path(spec)
    return [path] if not is_builtin(spec) and path.exists() else []


def _command(spec: str, overrides: list[str] | None, output: Path | None) -> list[str]:
    """The words of the command line recorded in the file's header: what rebuilds it (the
    header quotes each as the shell reads it back, archspec.safety.text.shell_word)."""
    words = ["archspec", "build", spec]
    for text in overrides or []:
        words += ["--set", text]
    if output is not None:
        words += ["-o", str(output)]
    return words
