"""archspec: transformer architectures as short YAML specs.

The pipeline flows one way: a YAML spec is loaded and validated (`archspec.spec`), compiled to
an intermediate representation (`archspec.ir`), and read by backends (`archspec.backends`).
"""

from archspec.errors import SpecError
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec

__all__ = ["SpecError", "build_ir", "load_spec"]
__version__ = "0.1.0"
