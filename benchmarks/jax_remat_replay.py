"""What JAX's rematerialisation replays of a block, against archspec's pruned checkpoint.

archspec/backends/count/replay.py times MaxText's `remat_policy: full` (jax.checkpoint with no
policy) as a "pruned" replay: the backward reruns only the ops whose outputs it reads, and what
they are computed from. This script asks JAX itself. It builds one transformer block two ways,
parallel (PaLM's and MaxText's: attention and MLP beside each other from one norm) and
sequential (pre-norm, attention then MLP), takes `jax.grad` of a loss over it with and without
`jax.checkpoint`, and counts the matmul FLOPs (dot_general) in the two jaxprs: the difference is
what the rematerialised forward replays. archspec's rule says: in the parallel block every
projection but the two output ones (q, k, v, the MLP's up) and the attention core; in the
sequential block those and the attention's output projection (its output feeds the second norm,
which the backward reads), not the MLP's down projection.

archspec's side is `pass_costs` (archspec/plan/opcost.py) over specs of the same shapes: the
projections a `--checkpoint pruned` step replays. The attention core is left out of both (JAX's
einsums here compute every query-key pair; archspec's fused kernel the causal half).

Needs JAX (`pip install jax`), which archspec does not depend on, beside archspec's own
dependencies; runs on the CPU in seconds:

    python benchmarks/jax_remat_replay.py
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

B, S, D, H, F, HEADS = 4, 128, 256, 512, 1024, 4  # batch, positions, width, attention, MLP


def rms(x):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)


def attention(x, w):
    def heads(t):
        return t.reshape(B, S, HEADS, H // HEADS)

    q, k, v = heads(x @ w["q"]), heads(x @ w["k"]), heads(x @ w["v"])
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(H // HEADS)
    causal = jnp.tril(jnp.ones((S, S), bool))
    p = jax.nn.softmax(jnp.where(causal, scores, -1e9), -1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H)


def parallel_block(x, w):
    h = rms(x)
    return x + attention(h, w) @ w["o"] + jax.nn.relu(h @ w["up"]) @ w["down"]


def sequential_block(x, w):
    x = x + attention(rms(x), w) @ w["o"]
    return x + jax.nn.relu(rms(x) @ w["up"]) @ w["down"]


def _equations(jaxpr):
    """Every equation, those of nested jaxprs (the checkpoint's, a pjit's) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for item in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(item, "jaxpr", item)
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


def gradient_projection_flops(block, remat: bool) -> int:
    """The FLOPs of the gradient's matmuls, the attention core's (4-D operands) left out."""
    f = jax.checkpoint(block) if remat else block

    def loss(w, x):
        return jnp.sum(f(x, w) ** 2)

    shapes = {"q": (D, H), "k": (D, H), "v": (D, H), "o": (H, D), "up": (D, F), "down": (F, D)}
    weights = {name: jnp.zeros(shape) for name, shape in shapes.items()}
    jaxpr = jax.make_jaxpr(jax.grad(loss))(weights, jnp.zeros((B, S, D)))
    total = 0
    for eqn in _equations(jaxpr.jaxpr):
        core = any(len(v.aval.shape) == 4 for v in eqn.invars)
        if eqn.primitive.name == "dot_general" and not core:
            (contracting, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            out = math.prod(eqn.outvars[0].aval.shape)
            total += 2 * out * math.prod(lhs[i] for i in contracting)
    return total


def archspec_replay(spec: str) -> int:
    """The projection FLOPs archspec's pruned checkpoint replays for one such block."""
    import sympy as sp

    from archspec.backends.count.passes import B as batch
    from archspec.backends.count.passes import S as positions
    from archspec.ir.build import build_ir
    from archspec.plan.opcost import pass_costs
    from archspec.spec.resolve import load_spec

    sizes = [f"d_model={D}", f"n_heads={HEADS}", f"n_kv_heads={HEADS}", f"head_dim={H // HEADS}",
             f"d_ff={F}", "n_layers=1", "norm.kind=rmsnorm", "mlp.gated=false",
             "mlp.activation=relu", "position.kind=none"]  # fmt: skip
    costs = pass_costs(build_ir(load_spec(spec, sizes)), 2, "flash")
    (_, block), *_ = costs.layers
    replayed = sp.Add(*(c.flops for c in block if c.label.endswith(".linear") and not c.unread))
    return int(replayed.subs({batch: B, positions: S}))


def main() -> None:
    for name, block, spec in (("parallel", parallel_block, "palm-8b"),
                              ("sequential", sequential_block, "llama-2-7b")):  # fmt: skip
        replay = gradient_projection_flops(block, True) - gradient_projection_flops(block, False)
        print(
            f"{name} block ({spec}'s, at these sizes): JAX replays {replay:,} projection "
            f"FLOPs, archspec's pruned checkpoint {archspec_replay(spec):,}"
        )


if __name__ == "__main__":
    main()
