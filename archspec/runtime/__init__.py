"""The code a generated model runs beyond its own classes, as ordinary, tested Python.

A generated file stands alone: it imports torch and nothing of archspec. So the code
generator does not import this package into the file; it copies in the source of
exactly the functions and classes the spec needs
(`archspec.backends.torchgen.copied.source_of`), and what is copied is what the tests
import and check.

Rules for every module in this package, so that a copy runs and reads as if written in
place:
- import only what the generated file imports: torch (`import torch`, `from torch
  import Tensor, nn`, `torch.nn.functional as F`, `torch.utils.checkpoint`), `math` and
  `collections.abc.Callable`; and from a sibling module the functions and classes the
  generator copies in beside this one's (`from .masks import mask_out`).
  tensor_parallel.py also imports torch.distributed's tensor parallelism: its code is
  copied into `parallelize`, after the imports there;
- no module-level state a copy would leave behind: constants a function needs are its
  arguments or live inside it;
- formatted for the generated file (ruff format, 88 columns: ruff.toml here), since it
  is copied verbatim.
"""
