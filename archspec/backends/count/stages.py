"""Pipeline stages of uneven size: `--stage-layers 5,6,6,5`, the layers each stage holds.

One reader for every command that takes the option (`bench --nproc --pp`, `count --pp`; `plan`
can reuse it), so a layout is refused the same way everywhere, naming the values, before any
work. Megatron-LM gives its first and last stages fewer layers the same way
(`--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`), to make room for
the embeddings and the head.
"""

from __future__ import annotations

from itertools import accumulate

from archspec.errors import SpecError


def read_stage_layers(text: str) -> tuple[int, ...]:
    """The counts of "5,6,6,5" (checked against a model by `check_stage_layers`)."""
    try:
        return tuple(int(word) for word in text.split(","))
    except ValueError:
        raise SpecError(
            f"--stage-layers {text!r}: give each stage's layers as whole numbers, e.g. 5,6,6,5"
        ) from None


def check_stage_layers(counts: tuple[int, ...], stages: int, layers: int) -> None:
    """Refuse counts that are not one per stage, each one or more, adding up to `layers`."""
    text = ",".join(map(str, counts))
    if len(counts) != stages:
        raise SpecError(
            f"--stage-layers {text} lists {len(counts)} stages, not the layout's {stages}"
        )
    if min(counts) < 1:
        raise SpecError(f"--stage-layers {text}: every stage holds one layer or more")
    if sum(counts) != layers:
        raise SpecError(
            f"--stage-layers {text} adds up to {sum(counts)} layers, not the model's {layers}"
        )


def parse_stage_layers(text: str | None, stages: int, layers: int) -> tuple[int, ...]:
    """The layers of each of the `stages`: `text` ("5,6,6,5") read and checked against the
    model's `layers`, or as many on each stage when `text` is None."""
    if text is None:
        if layers % stages:
            raise SpecError(
                f"{stages} pipeline stages do not divide the {layers} layers",
                hint="list each stage's layers, e.g. --stage-layers "
                + ",".join(str(n) for n in _near_even(layers, stages)),
            )
        return (layers // stages,) * stages
    counts = read_stage_layers(text)
    check_stage_layers(counts, stages, layers)
    return counts


def stage_ranges(counts: tuple[int, ...]) -> list[tuple[int, int]]:
    """[first, last) layer index of each stage."""
    starts = [0, *accumulate(counts)][:-1]  # running sums: linear in the stages
    return [(start, start + n) for start, n in zip(starts, counts, strict=True)]


def _near_even(layers: int, stages: int) -> list[int]:
    """As even as can be, the extra layers on the middle stages (the first holds the
    embeddings, the last the head)."""
    base, extra = divmod(layers, stages)
    counts = [base] * stages
    middle = sorted(range(stages), key=lambda s: (s in (0, stages - 1), abs(s - (stages - 1) / 2)))
    for stage in middle[:extra]:
        counts[stage] += 1
    return counts
