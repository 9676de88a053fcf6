"""The generated `pipeline(model, mesh, loss_fn, n_microbatches)`: pipeline parallelism with
torch.distributed.pipelining, its stages split from the IR.

Which modules sit on which stage is read off the IR, whose names are the generated model's
attribute paths: the token embedding and what the stack does to the embeddings before its
blocks (a position or segment table, an embedding norm or projection) on the first stage, the
blocks dealt out in consecutive runs, the final norm, an output projection and the heads on the
last stage, as Megatron-LM places them. A head tied to the token embedding keeps its own copy
on the last stage, summed with the embedding's gradient after each step. What a stage runs is
the model's own forward (archspec.runtime.pipeline, copied into the function).

What the stages cannot carry is refused with a ValueError naming it: an encoder-decoder (each
decoder block reads the encoder output), a relative position bias the stack computes for every
block (T5's table would be needed on every stage), blocks that share weights (ALBERT).
"""

from __future__ import annotations

import textwrap

from archspec.backends.torchgen.copied import runtime_sources
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.text import call, docstring, indent, lines

COPIED = (
    "stage_layer_ranges",
    "pipeline_stage_indices",
    "StageBlocks",
    "StageOutput",
    "PassedThrough",
    "NoPositions",
    "PipelineStageModel",
    "Pipeline",
    "build_pipeline",
)

DOC = """Split the model into pipeline stages over mesh["pp"] and return this rank's.

The stages take consecutive blocks: as many each, or stage_layers[i] on stage i
(uneven, as Megatron-LM's first and last stages may be). The token embedding and the
embedding steps sit on the first stage, the final norm and the head on the last; a
head tied to the embedding keeps its own copy there, and the two copies' gradients
are summed after each step. `schedule` is one of torch.distributed.pipelining's
(1F1B, GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble); the
looped ones give each rank `stages_per_rank` stages, ZBVZeroBubble two in a V.

Returns a module holding this rank's stages (its parameters are what the optimizer
steps); `step(input_ids, target=targets, losses=losses)` runs one training step's
forwards and backwards over `n_microbatches` micro-batches of the batch, appending
each micro-batch's loss_fn(output, target) to `losses` on the last stage's rank.
Build the model under the same seed on every rank (or load weights) before.

A mesh with "dp_shard" or "tp" beside "pp" ("pp" outermost, as torchtitan orders it)
lays each stage out with `parallelize` over those dimensions: tensor parallelism,
FSDP2's units, the stage the root unit around them; feed each data rank its own rows
of the batch."""


def refusal(f: Features) -> str | None:
    """Why this model is not split into stages, or None."""
    if f.encoder_decoder:
        return (
            "pipeline parallelism of an encoder-decoder is not written: every decoder block "
            "reads the encoder output, which the stages would have to carry beside the hidden "
            "states"
        )
    (stack,) = f.stacks
    if stack.rel_bias is not None:
        return (
            f"pipeline parallelism: the stack's relative position bias ({stack.rel_bias.name}) "
            "feeds every block, so every stage would need the table"
        )
    if any(run.applied != 1 for run in stack.blocks.runs):
        return "pipeline parallelism: blocks sharing weights (layer groups) are not split"
    return None


def placement(f: Features) -> dict[str, object]:
    """The attribute paths of the modules outside the blocks, by the stage they sit on."""
    model = f.model
    (stack,) = f.stacks

    def paths(*nodes, under: str | None = None) -> tuple[str, ...]:
        prefix = f"{under}." if under else ""
        return tuple(f"{prefix}{node.name}" for node in nodes if node is not None)

    head = model.lm_head
    return {
        "stack": stack.name,
        "embedding": (model.tok_emb.name, *paths(stack.emb_norm, stack.emb_proj, under=stack.name)),
        "tables": (*paths(stack.pos_emb, under=stack.name), *paths(model.type_emb)),
        "head": (
            *paths(stack.final_norm, stack.out_proj, under=stack.name),
            *paths(model.pooler, model.lm_transform, model.lm_norm, head),
            *paths(model.score_dense, model.score),
        ),
        "tied": (head.tied_to, f"{head.name}.weight") if head and head.tied_to else None,
    }


def pipeline_function(f: Features) -> str:
    params = [
        "model: Model",
        'mesh: "torch.distributed.DeviceMesh"',
        "loss_fn: Callable",
        "n_microbatches: int",
        'schedule: str = "1F1B"',
        "stage_layers: list[int] | None = None",
        "stages_per_rank: int = 2",
    ]
    why = refusal(f)
    if why is not None:
        # One line if it fits; else pieces, the message too long to fit one line at 100.
        pieces = [why] if len(why) < 76 else textwrap.wrap(why, 70, drop_whitespace=False)
        # A trailing comma: ruff keeps the call exploded at any line length.
        message = "\n".join(f"    {_quoted(piece)}" for piece in pieces) + ","
        body = [docstring(DOC, 1), f"raise ValueError(\n{message}\n)"]
    else:
        where = {key: _literal(value) for key, value in placement(f).items()}
        args = ["model", "lambda: Model(model.config)", "mesh", "loss_fn", "n_microbatches"]
        args += ["schedule", "stage_layers", "stages_per_rank"]
        args += [f"{key}={value}" for key, value in where.items()]
        args.append("parallelize=parallelize")
        copied = [line for code in runtime_sources("pipeline", *COPIED) for line in (code, "")]
        body = [docstring(DOC, 1), "", *copied, call("return build_pipeline", args, 1)]
    head = call("def pipeline", params, 0, " -> nn.Module:")
    return lines(head, indent(lines(*body), 1))


def _quoted(text: str) -> str:
    """A string literal as ruff formats it (double quotes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _literal(value: object) -> str:
    """A tuple of paths (or a path, or None) as ruff formats it."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return _quoted(value)
    assert isinstance(value, tuple)
    items = [_literal(v) for v in value]
    if not items:
        return "()"
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
