"""The exceptions of tessera.

Every error of the algebra is a :class:`LayoutError` (a ``ValueError``) whose message starts
with the operation's name, as ``tessera eval`` prints it::

    composition: (4,6,8):(2,3,5) o 6:3: ...

and whose attributes name the operation (``op``) and, where the error has them, the
operands in CuTe notation (``operands``). Subclasses say what kind of error it is; several
are also the built-in exception a Python caller would expect (an index out of range is an
``IndexError``, an argument of the wrong kind a ``TypeError``).
"""

from __future__ import annotations

from typing import Optional

__all__ = [
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


class LayoutError(ValueError):
    """An operation of the layout algebra has no answer for these operands.

    ``op`` is the operation's name (``"parse"`` for malformed text), ``operands`` the operands
    in CuTe notation (``None`` where the error does not carry them).
    """

    op: str = ""
    operands: Optional[str] = None


class ParseError(LayoutError):
    """Malformed CuTe text. ``input`` is the text, ``pos`` the byte offset of the problem."""

    input: str = ""
    pos: int = 0


class MismatchError(LayoutError):
    """Two tuples that must share a structure do not: ``lhs`` and ``rhs`` are not
    ``relation`` (``"congruent"``, ``"compatible"``, ...)."""

    lhs: str = ""
    rhs: str = ""
    relation: str = ""


class BadShapeError(LayoutError):
    """A shape has an extent below 1 (``shape``)."""

    shape: str = ""


class IntegerOverflowError(LayoutError, OverflowError):
    """A size, stride or offset does not fit in 64 bits."""


class OutOfRangeError(LayoutError, IndexError):
    """A mode index (``index``) is outside the operand's ``rank``."""

    index: str = ""
    rank: int = 0


class InadmissibleError(LayoutError):
    """The operands break the operation's precondition (``reason`` says which), so no result
    meets its post-condition: an inadmissible composition, a non-injective complement, a
    tile that does not divide, ..."""

    reason: str = ""


class BadSwizzleError(LayoutError):
    """``Sw<bits,base,shift>`` parameters CuTe rejects, or that do not fit in 62 bits."""

    bits: int = 0
    base: int = 0
    shift: int = 0
    reason: str = ""


class TooLargeError(LayoutError):
    """The answer needs enumerating ``needed`` points, more than the bound ``limit``."""

    needed: int = 0
    limit: int = 0


class ArgumentError(LayoutError, TypeError):
    """A function got the wrong number or kind of arguments (a ``float`` for a shape, a
    swizzle where a layout is needed, ...)."""


class InternalError(LayoutError):
    """A bug in tessera: the Rust code panicked. The session goes on; please report it with
    the message."""


class KernelError(RuntimeError):
    """The GPU side could not do what was asked: no CUDA device or driver, NVRTC missing or
    rejecting a kernel, a driver error at launch. (A tensor the kernels cannot take is a
    ``ValueError`` naming the argument instead.) ``op`` names the step that failed."""

    op: str = ""
    operands: Optional[str] = None


# The classes are `tessera.LayoutError`, ... to their users (tracebacks, pickling); this
# module is where they are written down.
for _cls in (
    LayoutError,
    ParseError,
    MismatchError,
    BadShapeError,
    IntegerOverflowError,
    OutOfRangeError,
    InadmissibleError,
    BadSwizzleError,
    TooLargeError,
    ArgumentError,
    InternalError,
    KernelError,
):
    _cls.__module__ = "tessera"
del _cls
