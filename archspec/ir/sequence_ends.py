"""Where sequence parallelism can reach past the blocks, as torchtitan's llama plan does: the
embedding's sums reduce-scattered over the sequence instead of all-reduced, and the final norm
run on each rank's share with the head gathering its input. The generated `parallelize` lays
a model out so where these hold, and count's torch engine predicts the bytes it keeps."""

from __future__ import annotations

from archspec.ir.nodes import Model


def embeddings_split(model: Model) -> bool:
    """Whether nothing with parameters runs between the token embedding and each stack's
    first block (no position table, embedding norm or projection, no token types): only
    elementwise steps (a scale, dropout), which act on each rank's rows alone."""
    if model.type_emb is not None:
        return False
    return all(
        stack.pos_emb is None and stack.emb_norm is None and stack.emb_proj is None
        for stack in model.stacks
    )


def final_norm_split(model: Model) -> bool:
    """Whether the final norm's output goes straight to the LM head and nowhere else: one
    stack, no projection or dropout after its norm, no head transform, pooler or scorer."""
    if len(model.stacks) != 1 or model.lm_head is None:
        return False
    (stack,) = model.stacks
    extras = (model.lm_transform, model.lm_norm, model.pooler, model.score, stack.out_proj)
    return all(x is None for x in extras) and not stack.out_dropout and not model.scale_tied_output
