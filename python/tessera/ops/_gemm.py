"""``D = epilogue(A B)`` on tensors: the problem read off the operands (extents, batch,
storage orders, types), the outputs an epilogue writes, the process-wide cache of compiled
``Gemm``\\ s, and the launch on PyTorch's current stream.

The orders are the strides' (a flag is never consulted): a matrix whose column stride is 1 is
row-major, one whose row stride is 1 is column-major, so ``w.t()`` of an nn.Linear weight is
a column-major ``K x N`` B without a copy. A matrix with neither unit stride is refused.
What this file checks is what it needs to build the spec (shapes, types, devices); every
stride, extent, alignment and overlap is checked again by the library at launch, whose
errors come back as ``ValueError`` naming the argument.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

__all__ = [
    "Problem",
    "describe",
    "problem",
    "output_specs",
    "INPUTS",
    "OUTPUTS",
]

#: The epilogue's input tensors, by their keyword in ``gemm`` and their name in the
#: epilogue language (``bias`` is nn.Linear's bias: ``bias_col``, one value per column of D).
INPUTS = (("c", "c"), ("residual", "residual"), ("aux_in", "aux_in"), ("bias_row", "bias_row"), ("bias", "bias_col"))

#: The outputs besides D, in the order ``gemm`` returns them.
OUTPUTS = ("aux", "bgrad_row", "bgrad_col", "sum_k_a", "sum_k_b")

#: Element types of A and B.
INPUT_DTYPES = ("bf16", "fp16")
#: Element types of D (and of C, the residual, the bias vectors and a full aux).
OUT_DTYPES = ("bf16", "fp16", "fp32")


@functools.lru_cache(maxsize=256)
def describe(epilogue: str) -> Dict[str, Any]:
    """What ``epilogue`` reads and writes (``tessera._tessera.describe_epilogue``), cached:
    ``text``, ``inputs``, ``aux``, ``bgrad``, ``sum_k``. A ``ValueError`` for bad text."""
    from .._tessera import describe_epilogue

    d = describe_epilogue(epilogue)
    d["inputs"] = tuple(d["inputs"])
    d["bgrad"] = tuple(d["bgrad"])
    d["sum_k"] = tuple(d["sum_k"])
    return d


def words_per_row(n: int) -> int:
    """32-bit words of one row of a bit mask of ``n`` columns: rows padded to 128 bits, as
    cuBLASLt's ReLU mask."""
    return (n + 127) // 128 * 4


class Problem(NamedTuple):
    """The GEMM a call asks for, as the spec of the kernels' library takes it."""

    m: int
    n: int
    k: int
    #: 0 for unbatched operands (2-D D), else the batch count.
    batch: int
    dtype: str
    out_dtype: str
    a: str
    b: str
    d: str

    @property
    def batches(self) -> int:
        return max(self.batch, 1)

    def d_shape(self) -> Tuple[int, ...]:
        return (self.batch, self.m, self.n) if self.batch else (self.m, self.n)

    def vector_shape(self, length: int) -> Tuple[int, ...]:
        return (self.batch, length) if self.batch else (length,)

    def mask_shape(self) -> Tuple[int, ...]:
        """The words of a bit mask over D, rows of D's storage order padded to 128 bits."""
        outer, inner = (self.m, self.n) if self.d == "row" else (self.n, self.m)
        shape = (outer, words_per_row(inner))
        return (self.batch,) + shape if self.batch else shape


def order(op: str, name: str, shape: Sequence[int], strides: Sequence[int]) -> str:
    """``"row"`` or ``"col"``: the storage order of the last two dimensions, from the
    strides."""
    r, c = shape[-2], shape[-1]
    sr, sc = strides[-2], strides[-1]
    if c == 1 or sc == 1:
        return "row" if (sc == 1 or r == 1 or sr != 1) else "col"
    if r == 1 or sr == 1:
        return "col"
    raise ValueError(
        f"{op}: argument '{name}' has strides {tuple(strides)} with no unit stride in its last two "
        f"dimensions {tuple(shape)}: the kernels load rows or columns that are contiguous"
    )


def problem(
    op: str,
    a_shape: Sequence[int],
    a_strides: Sequence[int],
    a_dtype: str,
    b_shape: Sequence[int],
    b_strides: Sequence[int],
    b_dtype: str,
    out_dtype: Optional[str],
    out_shape: Optional[Sequence[int]] = None,
    out_strides: Optional[Sequence[int]] = None,
) -> Problem:
    """The problem of ``a (.., M, K) @ b (.., K, N)``, with D given (``out``) or not."""
    if len(a_shape) not in (2, 3):
        raise ValueError(f"{op}: argument 'a' has {len(a_shape)} dimensions {tuple(a_shape)}, expected 2 (M, K) or 3 (batch, M, K)")
    if len(b_shape) not in (2, 3):
        raise ValueError(f"{op}: argument 'b' has {len(b_shape)} dimensions {tuple(b_shape)}, expected 2 (K, N) or 3 (batch, K, N)")
    m, k = a_shape[-2], a_shape[-1]
    if b_shape[-2] != k:
        raise ValueError(f"{op}: argument 'b' has shape {tuple(b_shape)}, expected ({k}, N) after a of shape {tuple(a_shape)}")
    n = b_shape[-1]
    batch = 0
    for name, shape in (("a", a_shape), ("b", b_shape)):
        if len(shape) == 3 and shape[0] == 0:
            raise ValueError(f"{op}: argument '{name}' has an empty batch dimension {tuple(shape)}")
    if len(a_shape) == 3:
        batch = a_shape[0]
    if len(b_shape) == 3:
        if batch and b_shape[0] != batch:
            raise ValueError(f"{op}: argument 'b' has {b_shape[0]} batches, 'a' has {batch}")
        batch = b_shape[0]
    if a_dtype not in INPUT_DTYPES:
        raise ValueError(f"{op}: argument 'a' has dtype {a_dtype}, expected bf16 or fp16")
    if b_dtype != a_dtype:
        raise ValueError(f"{op}: argument 'b' has dtype {b_dtype}, 'a' has {a_dtype}")
    od = out_dtype or a_dtype
    if od not in OUT_DTYPES:
        raise ValueError(f"{op}: the output dtype is {od}, expected bf16, fp16 or fp32")
    d = "row"
    if out_shape is not None:
        want = (batch, m, n) if batch else (m, n)
        if tuple(out_shape) != want:
            raise ValueError(f"{op}: argument 'out' has shape {tuple(out_shape)}, expected {want}")
        d = order(op, "out", out_shape, out_strides)
    return Problem(
        m, n, k, batch, a_dtype, od,
        order(op, "a", a_shape, a_strides),
        order(op, "b", b_shape, b_strides),
        d,
    )


def output_specs(p: Problem, desc: Dict[str, Any]) -> List[Tuple[str, Tuple[int, ...], str]]:
    """``(name, shape, dtype)`` of D and of each further output the epilogue writes, in the
    order ``gemm`` returns them; dtype ``"words"`` is a bit mask's int32 words."""
    specs = [("out", p.d_shape(), p.out_dtype)]
    aux = desc["aux"]
    if aux is not None:
        if aux == "bits":
            specs.append(("aux", p.mask_shape(), "words"))
        else:
            specs.append(("aux", p.d_shape(), p.out_dtype if aux == "out" else aux))
    for axis in desc["bgrad"]:
        specs.append((f"bgrad_{axis}", p.vector_shape(p.m if axis == "row" else p.n), "fp32"))
    for operand in desc["sum_k"]:
        specs.append((f"sum_k_{operand}", p.vector_shape(p.m if operand == "a" else p.n), "fp32"))
    return specs


def input_shape(p: Problem, name: str) -> Optional[Tuple[Optional[int], ...]]:
    """The shape an epilogue input must have (``None`` entries: either form), for messages."""
    if name in ("c", "residual", "aux_in"):
        return p.d_shape()
    if name == "aux_in_bits":
        return p.mask_shape()
    if name == "bias_row":
        return (p.m,)
    if name == "bias_col":
        return (p.n,)
    return None


# ---------------------------------------------------------------------------------------------
# Operands as the native module takes them: (ptr, dtype, shape, strides[, words])


def matrix(p: Problem, ptr: int, dtype: str, shape: Sequence[int], strides: Sequence[int]) -> tuple:
    """A ``rows x cols`` matrix (2-D, or 3-D with the batch first) in tessera's order:
    ``(rows, cols)`` or ``(rows, cols, batch)``; a 2-D operand of a batched problem is shared
    by every batch (batch stride 0)."""
    if len(shape) == 3:
        return (ptr, dtype, (shape[1], shape[2], shape[0]), (strides[1], strides[2], strides[0]))
    if p.batch > 1:
        return (ptr, dtype, (shape[0], shape[1], p.batch), (strides[0], strides[1], 0))
    return (ptr, dtype, tuple(shape), tuple(strides))


def vector(p: Problem, ptr: int, dtype: str, shape: Sequence[int], strides: Sequence[int]) -> tuple:
    """A vector (1-D, or 2-D with the batch first): ``(len)`` or ``(len, batch)``."""
    if len(shape) == 2:
        return (ptr, dtype, (shape[1], shape[0]), (strides[1], strides[0]))
    return (ptr, dtype, tuple(shape), tuple(strides))


def mask(p: Problem, ptr: int, shape: Sequence[int], strides: Sequence[int]) -> tuple:
    """A bit mask's int32 words ``(outer, words)`` (batch first when 3-D), outer along D's
    storage order, as the layout in bits the library reads and its length in words."""
    w = strides[-2]
    rows = (p.m, p.n)
    if p.d == "row":
        bits = ((32 * w, 1))
    else:
        bits = ((1, 32 * w))
    span = 1 + sum((e - 1) * s for e, s in zip(shape, strides)) if all(shape) else 0
    if len(shape) == 3 and p.batch > 1:
        return (ptr, "words", rows + (p.batch,), bits + (32 * strides[0],), span)
    return (ptr, "words", rows, bits, span)


# ---------------------------------------------------------------------------------------------
# The cache of compiled Gemms

_LOCK = threading.Lock()
_GEMMS: Dict[tuple, Any] = {}


def compiled(device: int, p: Problem, epilogue: str, alpha: float, beta: float) -> Any:
    """The ``Gemm`` of this problem on ``device``: planned and compiled at its first use in
    the process, then reused (kernels are also cached by source inside the library, and on
    disk with ``TESSERA_CACHE_DIR``)."""
    key = (device, p, epilogue, alpha, beta)
    g = _GEMMS.get(key)
    if g is None:
        from .._tessera import Gemm

        g = Gemm(
            device, p.m, p.n, p.k,
            batch=p.batches, dtype=p.dtype, out_dtype=p.out_dtype,
            a=p.a, b=p.b, d=p.d, epilogue=epilogue, alpha=alpha, beta=beta,
        )
        with _LOCK:
            g = _GEMMS.setdefault(key, g)
    return g


def cached() -> int:
    """How many ``Gemm``\\ s the process has built."""
    return len(_GEMMS)
