"""tessera: CuTe's layout algebra, sound, from Python.

``tessera.layout`` has the algebra (``Layout``, ``IntTuple``, ``Swizzle``,
``ComposedLayout``, ``Tiler``, and one function per function of ``tessera eval``);
``tessera.ops`` calls tessera's GPU kernels on PyTorch tensors (and PyTorch's compiler and
autograd) and imports PyTorch only when used. Errors are :class:`LayoutError` and its subclasses.
"""

from __future__ import annotations

from . import layout
from ._errors import (
    ArgumentError,
    BadShapeError,
    BadSwizzleError,
    InadmissibleError,
    IntegerOverflowError,
    InternalError,
    KernelError,
    LayoutError,
    MismatchError,
    OutOfRangeError,
    ParseError,
    TooLargeError,
)
from ._tessera import __version__

__all__ = [
    "layout",
    "ops",
    "__version__",
    "LayoutError",
    "ParseError",
    "MismatchError",
    "BadShapeError",
    "IntegerOverflowError",
    "OutOfRangeError",
    "InadmissibleError",
    "BadSwizzleError",
    "TooLargeError",
    "ArgumentError",
    "InternalError",
    "KernelError",
]


def __getattr__(name: str):
    # `tessera.ops` is loaded on first use, so `import tessera` stays light (no GPU runtime,
    # no PyTorch) for the algebra.
    if name == "ops":
        import importlib

        return importlib.import_module(".ops", __name__)
    raise AttributeError(f"module 'tessera' has no attribute {name!r}")
