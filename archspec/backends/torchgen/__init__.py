"""PyTorch code generation: one standalone `model.py` per spec, written from the IR.

`generate_source(ir)` returns the file's text; `load_generated(source)` imports it (tests and
tools use it to build the model without writing a package).
"""

from archspec.backends.torchgen.load import load_generated
from archspec.backends.torchgen.source import generate_source

__all__ = ["generate_source", "load_generated"]
