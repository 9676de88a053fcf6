"""Pipeline stages of uneven size: `--stage-layers 5,6,6,5`, the layers each stage holds.

One parser for every command that takes the option (`bench --nproc --pp`, `count --pp`; `plan`
can reuse it), so a layout is refused the same way everywhere, naming the values, before any
work. Megatron-LM gives its first and last stages fewer layers the same way
(`--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`), to make room for
the embeddings and the head.
"""

from __future__ import annotations

from archspec.errors import SpecError


def parse_stage_layers(text: str | None, pp: int, layers: int) -> tuple[int, ...]:
    """The layers of each of the `pp` stages: `text` ("5,6,6,5") read and checked against
    the model's `layers`, or as many on each stage when `text` is None."""
    if text is None:
        if layers % pp:
            raise SpecError(
                f"{pp} pipeline stages do not divide the {layers} layers",
                hint="list each stage's layers, e.g. --stage-layers "
                + ",".join(str(n) for n in _near_even(layers, pp)),
            )
        return (layers // pp,) * pp
    try:
        counts = tuple(int(word) for word in text.split(","))
    except ValueError:
        raise SpecError(
            f"--stage-layers {text!r}: give each stage's layers as whole numbers, e.g. 5,6,6,5"
        ) from None
    if len(counts) != pp:
        raise SpecError(f"--stage-layers {text} lists {len(counts)} stages, not the layout's {pp}")
    if min(counts) < 1:
        raise SpecError(f"--stage-layers {text}: every stage holds one layer or more")
    if sum(counts) != layers:
        raise SpecError(
            f"--stage-layers {text} adds up to {sum(counts)} layers, not the model's {layers}"
        )
    return counts


def stage_starts(counts: tuple[int, ...]) -> list[tuple[int, int]]:
    """[first, last) layer index of each stage."""
    starts = [sum(counts[:i]) for i in range(len(counts))]
    return [(start, start + n) for start, n in zip(starts, counts, strict=True)]


def _near_even(layers: int, pp: int) -> list[int]:
    """As even as can be, the extra layers on the middle stages (the first holds the
    embeddings, the last the head)."""
    base, extra = divmod(layers, pp)
    counts = [base] * pp
    middle = sorted(range(pp), key=lambda s: (s in (0, pp - 1), abs(s - (pp - 1) / 2)))
    for stage in middle[:extra]:
        counts[stage] += 1
    return counts
