"""The one-line reprs of the torch built-in modules the generated model uses as leaves.

Each function returns `(class name, extra_repr)`, copied from the installed torch's
`extra_repr` methods (torch/nn/modules/sparse.py, linear.py) for the arguments the generator
passes; everything the generator leaves at its default (padding_idx, max_norm, ...) prints the
default. A norm's repr is its kind's (`NormKind.extra_repr`), given whether the installed
torch's LayerNorm prints `bias=`.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path


def embedding(num: int, dim: int) -> tuple[str, str]:
    return "Embedding", f"{num}, {dim}"


def linear(in_features: int, out_features: int, bias: bool) -> tuple[str, str]:
    return "Linear", f"in_features={in_features}, out_features={out_features}, bias={bias}"


def experts(n: int, in_features: int, hidden: int, gated: bool, bias: bool) -> tuple[str, str]:
    """The generated `Experts` (stacked routed experts; its extra_repr is written by
    archspec.backends.torchgen.feedforward)."""
    args = f"n_experts={n}, in_features={in_features}, hidden_features={hidden}"
    return "Experts", f"{args}, gated={gated}, bias={bias}"


@functools.cache
def layernorm_prints_bias() -> bool:
    """Whether the installed torch's LayerNorm repr ends with `bias=True|False`.

    Recent torch releases added `bias=` to LayerNorm.extra_repr; older ones within the
    supported range (torch>=2.4) print without it. Asking torch would mean importing it (over a
    second), so read the installed source instead: `find_spec` on a top-level package locates
    it without running it. Without torch installed, assume the newer format.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return True
    source_path = Path(next(iter(spec.submodule_search_locations)), "nn/modules/normalization.py")
    try:
        return layernorm_source_prints_bias(source_path.read_text(encoding="utf-8"))
    except OSError:
        return True


def layernorm_source_prints_bias(source: str) -> bool:
    """Whether torch's normalization.py `source` has LayerNorm print `bias=`."""
    # The body of LayerNorm.extra_repr, from its `def` to the next definition; the newer format
    # writes `bias={use_bias}` there (an f-string would write `bias={self...}`).
    match = re.search(
        r"^class LayerNorm\(.*?(def extra_repr\(self\).*?)(?=^\s*(?:def|class) )",
        source,
        re.DOTALL | re.MULTILINE,
    )
    return True if match is None else "bias={" in match.group(1)
