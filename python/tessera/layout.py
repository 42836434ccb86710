"""CuTe's layout algebra, sound: every operation returns a layout that meets its documented
post-condition, or raises a :class:`tessera.LayoutError` naming the operation and operands.

The names and argument orders are CuTe's, and every function of ``tessera eval`` is here
with the same results (each is the evaluator of ``tessera eval`` itself, called on Python
values). Operands are the classes below, plain ``int``\\ s and ``tuple``\\ s (an int tuple:
a shape, a stride, a coordinate), and tuples holding a ``Layout`` or ``None`` (a by-mode
tiler, ``None`` being CuTe's ``_``). Where a layout is expected an int tuple stands for its
column-major layout; as the second operand of ``composition``, the divides and the products
a shape is a by-mode tiler, as in CuTe. Shapes, strides and coordinates come back as plain
``int``\\ s and ``tuple``\\ s.

>>> L = Layout(((2, 4), 3), ((1, 8), 2))
>>> str(L), L.size(), L.cosize()
('((2,4),3):((1,8),2)', 24, 30)
>>> composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)))
Layout('((2,2),3):((24,2),8)')
>>> logical_divide(Layout(8, 1), 4)
Layout('(4,2):(1,4)')

Two functions shadow Python built-ins, ``eval`` and ``filter``; they are left out of
``__all__`` so that ``from tessera.layout import *`` does not hide the built-ins.
"""

from __future__ import annotations

import sys
from typing import IO, Any, List, Optional, Tuple, Union

from . import _tessera
from ._tessera import (
    BankConflicts,
    F2Map,
    ComposedLayout,
    IntTuple,
    Layout,
    Swizzle,
    Tiler,
    TVLayout,
)

#: An int tuple as Python writes it: an ``int`` or a nested ``tuple`` of them.
IntTupleLike = Union[int, Tuple[Any, ...], IntTuple]
#: Anything a layout operand may be: a layout, a swizzled layout, or a shape (its
#: column-major layout).
LayoutLike = Union[Layout, ComposedLayout, int, Tuple[Any, ...], IntTuple]
#: A tiler: a layout, a shape, a ``Tiler``, or a tuple of layouts, shapes and ``None``.
TilerLike = Union[Layout, Tiler, int, Tuple[Any, ...], IntTuple]

#: The bound on points an exact answer enumerates (``functionally_equal``, ``cosize`` of a
#: swizzled layout): 2^24.
ENUMERATION_LIMIT: int = _tessera.ENUMERATION_LIMIT

#: ``(name, usage)`` of every function of ``tessera eval`` (what ``tessera eval --help`` lists).
FUNCTIONS: List[Tuple[str, str]] = list(_tessera.FUNCTIONS)

_call = _tessera.call


def _args(*args: Any) -> Tuple[Any, ...]:
    """The arguments given: optional ones left as ``None`` are not passed on."""
    return tuple(a for a in args if a is not None)


# ---------------------------------------------------------------------------------------------
# Structure


def size(x: Any, *path: int) -> int:
    """The number of indices of a layout, the product of a shape. With a path, of that mode.

    >>> size(Layout((2, 3), (1, 2))), size((2, 3)), size(Layout(((2, 4), 3), ((1, 8), 2)), 0)
    (6, 6, 8)
    """
    return _call("size", x, *path)


def rank(x: Any, *path: int) -> int:
    """The number of top-level modes.

    >>> rank(Layout((2, 3), (1, 2)))
    2
    """
    return _call("rank", x, *path)


def depth(x: Any, *path: int) -> int:
    """The nesting depth of the shape (0 for an integer).

    >>> depth(Layout((2, 3), (1, 2))), depth(Layout(((2, 4), 3), ((1, 8), 2)))
    (1, 2)
    """
    return _call("depth", x, *path)


def shape(x: Any, *path: int) -> Any:
    """The shape, as an ``int`` or nested ``tuple``.

    >>> shape(Layout((2, 3), (1, 2)))
    (2, 3)
    """
    return _call("shape", x, *path)


def stride(x: Any, *path: int) -> Any:
    """The stride (a swizzled layout has none: CuTe deletes it).

    >>> stride(Layout((2, 3), (1, 2)))
    (1, 2)
    """
    return _call("stride", x, *path)


def cosize(x: Any, *path: int) -> int:
    """The extent of the image, ``max - min + 1`` over the offsets: exact with negative
    strides and for swizzled layouts (CuTe C++'s value for the latter is ``cosize_inner``).

    >>> cosize(Layout((2, 3), (1, 4))), cosize(ComposedLayout("Sw<1,0,1> o 3:1"))
    (10, 4)
    """
    return _call("cosize", x, *path)


def coshape(x: Any, *path: int) -> Any:
    """The extent of the image mode by mode.

    >>> coshape(Layout((2, 3), (1, 4)))
    (2, 9)
    """
    return _call("coshape", x, *path)


def get(x: Any, i: int, *path: int) -> Any:
    """Mode ``i`` (then its mode ``j``, ...) of a layout, int tuple or tiler.

    >>> get(Layout((2, 3), (1, 2)), 1)
    Layout('3:2')
    >>> get((2, (3, 4)), 1, 0)
    3
    """
    return _call("get", x, i, *path)


def select(x: Any, *modes: int) -> Any:
    """The modes ``modes``, in that order.

    >>> select(Layout((2, 3), (1, 2)), 1, 0)
    Layout('(3,2):(2,1)')
    """
    return _call("select", x, *modes)


def take(x: Any, begin: int, end: int) -> Any:
    """Modes ``begin`` to ``end - 1``.

    >>> take(Layout((2, 3, 4), (1, 2, 6)), 0, 1)
    Layout('(2):(1)')
    """
    return _call("take", x, begin, end)


def group(x: Any, begin: int, end: int) -> Any:
    """Modes ``begin`` to ``end - 1`` grouped into one mode.

    >>> group(Layout((2, 3, 4), (1, 2, 6)), 0, 2)
    Layout('((2,3),4):((1,2),6)')
    """
    return _call("group", x, begin, end)


def flatten(x: Any) -> Any:
    """The leaves as flat modes.

    >>> flatten(Layout((2, (3, 4)), (1, (2, 6))))
    Layout('(2,3,4):(1,2,6)')
    """
    return _call("flatten", x)


def append(x: Any, m: Any) -> Any:
    """``x`` with ``m`` as a last mode.

    >>> append(Layout(2, 1), Layout(3, 2))
    Layout('(2,3):(1,2)')
    """
    return _call("append", x, m)


def prepend(x: Any, m: Any) -> Any:
    """``x`` with ``m`` as a first mode.

    >>> prepend(Layout(2, 1), Layout(3, 2))
    Layout('(3,2):(2,1)')
    """
    return _call("prepend", x, m)


def replace(x: Any, i: int, m: Any) -> Any:
    """``x`` with mode ``i`` replaced by ``m``.

    >>> replace(Layout((2, 3), (1, 2)), 0, Layout(4, 3))
    Layout('(4,3):(3,2)')
    """
    return _call("replace", x, i, m)


# ---------------------------------------------------------------------------------------------
# Construction


def make_layout(*layouts: Any, stride: Optional[IntTupleLike] = None) -> Layout:
    """``make_layout(L0, L1, ...)`` concatenates modes; ``make_layout(S)`` is the
    column-major layout of a shape; ``make_layout(S, stride=D)`` (or ``make_layout(S, D)``
    with two int tuples, as ``tessera eval`` reads it) is ``S:D``.

    >>> make_layout(Layout(2, 1), Layout(3, 2))
    Layout('(2,3):(1,2)')
    >>> make_layout((2, 3), stride=(3, 1))
    Layout('(2,3):(3,1)')
    """
    if stride is not None:
        if len(layouts) != 1:
            raise _tessera_argument_error(
                "make_layout", "make_layout(S, stride=D) takes one shape"
            )
        return _call("make_layout", layouts[0], stride)
    return _call("make_layout", *layouts)


def make_composed_layout(
    layout_a: Swizzle, offset: int, layout_b: LayoutLike
) -> ComposedLayout:
    """CuTe's ``make_composed_layout(A, offset, B)``: ``A o offset o B``, here with a swizzle
    for ``A``.

    >>> make_composed_layout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1)))
    ComposedLayout('Sw<3,4,3> o 0 o (8,64):(64,1)')
    """
    return ComposedLayout(layout_a, offset, layout_b)


def make_tile(*items: Any) -> Tiler:
    """CuTe's ``make_tile``: the by-mode tiler of ``items`` (layouts, shapes, tilers, or
    ``None`` for ``_``).

    >>> make_tile(Layout(3, 3), None, 4)
    Tiler('<3:3,_,4:1>')
    """
    return Tiler(items)


def col_major(shape: Any) -> Layout:
    """The column-major (``LayoutLeft``) layout of a shape.

    >>> col_major((2, 3))
    Layout('(2,3):(1,2)')
    """
    return _call("col_major", shape)


def row_major(shape: Any) -> Layout:
    """The row-major (``LayoutRight``) layout of a shape.

    >>> row_major((2, 3))
    Layout('(2,3):(3,1)')
    """
    return _call("row_major", shape)


def make_ordered_layout(shape: Any, order: Optional[IntTupleLike] = None) -> Layout:
    """The compact layout of ``shape`` whose strides grow in ``order`` (a smaller order
    value, a smaller stride); with a layout alone, ordered like its strides.

    >>> make_ordered_layout((2, 3), (1, 0))
    Layout('(2,3):(3,1)')
    """
    return _call("make_ordered_layout", *_args(shape, order))


def make_layout_like(layout: Any) -> Layout:
    """A compact layout of ``layout``'s shape, ordered like its strides, stride 0 kept.

    >>> make_layout_like(Layout((2, 3), (9, 1)))
    Layout('(2,3):(3,1)')
    """
    return _call("make_layout_like", layout)


# ---------------------------------------------------------------------------------------------
# Algebra


def coalesce(layout: Any, profile: Optional[IntTupleLike] = None) -> Any:
    """The same function with the fewest modes (depth at most 1); with a ``profile``, mode
    by mode where the profile is a tuple.

    >>> coalesce(Layout((2, 3), (1, 2)))
    Layout('6:1')
    >>> coalesce(Layout((2, (1, 6)), (1, (6, 2))))
    Layout('12:1')
    """
    return _call("coalesce", *_args(layout, profile))


def filter(layout: Any) -> Any:  # noqa: A001 - CuTe's name
    """``coalesce`` of the layout with its stride-0 modes removed.

    >>> filter(Layout((2, 3), (0, 1)))
    Layout('3:1')
    """
    return _call("filter", layout)


def filter_zeros(layout: Any) -> Any:
    """The layout with every stride-0 mode's extent replaced by 1.

    >>> filter_zeros(Layout((2, 3), (0, 1)))
    Layout('(1,3):(0,1)')
    """
    return _call("filter_zeros", layout)


def composition(a: Any, b: Any) -> Any:
    """``R = A o B``: ``R(i) == A(B(i))`` for every index of ``B``, with ``shape(B)``
    compatible with ``shape(R)``. ``B`` may be a layout, a tiler (by mode), a shape or an
    integer; ``A`` may be a swizzle or a swizzled layout. Inadmissible operands raise
    (where CuTe C++ and pycute return a wrong layout).

    >>> composition(Layout(8, 2), Layout(4, 2))
    Layout('4:4')
    >>> composition(Layout((4, 6, 8), (2, 3, 5)), Layout(6, 3))
    Traceback (most recent call last):
    ...
    tessera.InadmissibleError: composition: ...
    """
    return _call("composition", a, b)


def complement(layout: Any, cotarget: Optional[IntTupleLike] = None) -> Layout:
    """``R`` such that ``(layout, R)`` is injective and covers ``cotarget`` (default:
    ``cosize(filter(layout))``); ``R`` has positive increasing strides.

    >>> complement(Layout(2, 1), 8)
    Layout('4:2')
    """
    return _call("complement", *_args(layout, cotarget))


def right_inverse(x: Any) -> Any:
    """The largest ``R`` with ``x(R(i)) == i``.

    >>> right_inverse(Layout((2, 3), (3, 1)))
    Layout('(3,2):(2,1)')
    """
    return _call("right_inverse", x)


def left_inverse(x: Any) -> Any:
    """``R`` with ``R(x(i)) == i`` for every index of an injective ``x``.

    >>> left_inverse(Layout((2, 3), (3, 1)))
    Layout('(3,2):(2,1)')
    """
    return _call("left_inverse", x)


def generalized_left_inverse(x: Layout) -> Layout:
    """``R`` with ``x(R(x(i))) == x(i)`` for every index: CuTe's ``left_inverse`` on any
    layout, picking one index of each offset where ``x`` is not injective.

    >>> generalized_left_inverse(Layout((4, 3), (1, 0)))
    Layout('4:1')
    """
    return _call("generalized_left_inverse", x)


def logical_divide(layout: Any, tiler: Any) -> Any:
    """``(tile, rest)``: mode 0 walks the tile ``T``, mode 1 its repeats
    (``R(i, j) == coalesce(L)(T(i) + C(j))`` with ``C = complement(T, shape(coalesce(L)))``).

    >>> logical_divide(Layout(6, 1), 2)
    Layout('(2,3):(1,2)')
    """
    return _call("logical_divide", layout, tiler)


def zipped_divide(layout: Any, tiler: Any) -> Any:
    """``logical_divide`` with the tiles of every mode gathered into mode 0 and the rests
    into mode 1.

    >>> zipped_divide(Layout(6, 1), 2)
    Layout('(2,3):(1,2)')
    """
    return _call("zipped_divide", layout, tiler)


def tiled_divide(layout: Any, tiler: Any) -> Any:
    """``zipped_divide`` with the rest modes unpacked: ``(tile, rest0, rest1, ...)``.

    >>> tiled_divide(Layout(6, 1), 2)
    Layout('(2,3):(1,2)')
    """
    return _call("tiled_divide", layout, tiler)


def flat_divide(layout: Any, tiler: Any) -> Any:
    """``zipped_divide`` with both modes unpacked.

    >>> flat_divide(Layout(6, 1), 2)
    Layout('(2,3):(1,2)')
    """
    return _call("flat_divide", layout, tiler)


def logical_product(a: Any, tiler: Any) -> Any:
    """``(A, C o B)`` with ``C = complement(A, size(A) * cosize(B))``: copies of ``A`` laid
    out as ``B``.

    >>> logical_product(Layout(2, 1), 3)
    Layout('(2,3):(1,2)')
    """
    return _call("logical_product", a, tiler)


def zipped_product(a: Any, tiler: Any) -> Any:
    """``logical_product`` with the blocks in mode 0 and the repeats in mode 1.

    >>> zipped_product(Layout(2, 1), 3)
    Layout('(2,3):(1,2)')
    """
    return _call("zipped_product", a, tiler)


def tiled_product(a: Any, tiler: Any) -> Any:
    """``zipped_product`` with the repeat modes unpacked.

    >>> tiled_product(Layout(2, 1), 3)
    Layout('(2,3):(1,2)')
    """
    return _call("tiled_product", a, tiler)


def flat_product(a: Any, tiler: Any) -> Any:
    """``zipped_product`` with both modes unpacked.

    >>> flat_product(Layout(2, 1), 3)
    Layout('(2,3):(1,2)')
    """
    return _call("flat_product", a, tiler)


def blocked_product(a: Any, b: Any) -> Any:
    """Mode ``i`` is ``(A_i, P_i)`` with ``(A, P) = logical_product(A, B)`` (both padded to
    the larger rank): ``A`` as the block, repeated as ``B``.

    >>> blocked_product(Layout(2, 1), Layout(3, 1))
    Layout('((2,3)):((1,2))')
    """
    return _call("blocked_product", a, b)


def raked_product(a: Any, b: Any) -> Any:
    """As ``blocked_product`` with each mode ``(P_i, A_i)``: the blocks interleaved.

    >>> raked_product(Layout(2, 1), Layout(3, 1))
    Layout('((3,2)):((2,1))')
    """
    return _call("raked_product", a, b)


def tile_to_shape(layout: Any, shape: Any, order: Optional[IntTupleLike] = None) -> Any:
    """The block ``layout`` repeated (in ``order``, default column-major) to fill ``shape``.

    >>> tile_to_shape(Layout((2, 2), (1, 2)), (4, 4))
    Layout('((2,2),(2,2)):((1,4),(2,8))')
    """
    return _call("tile_to_shape", *_args(layout, shape, order))


def max_common_vector(a: Any, b: Any) -> int:
    """The number of leading indices on which ``a`` and ``b`` are both the identity.

    >>> max_common_vector(Layout(6, 1), Layout((2, 3), (1, 2)))
    6
    """
    return _call("max_common_vector", a, b)


def max_common_layout(a: Any, b: Any) -> Layout:
    """The largest ``R`` with ``a(R(i)) == i`` and ``b(R(i)) == i``.

    >>> max_common_layout(Layout(6, 1), Layout((2, 3), (1, 2)))
    Layout('6:1')
    """
    return _call("max_common_layout", a, b)


def upcast(x: Any, n: int) -> Any:
    """The layout in units of ``n`` elements (offsets divided by ``n``).

    >>> upcast(Layout(8, 1), 4)
    Layout('2:1')
    """
    return _call("upcast", x, n)


def downcast(x: Any, n: int) -> Any:
    """The layout in units of ``1/n`` element (unit-stride extents times ``n``).

    >>> downcast(Layout(2, 1), 4)
    Layout('8:1')
    """
    return _call("downcast", x, n)


def nullspace(layout: Any) -> Layout:
    """``R`` with ``L(R(i)) == 0``, of size ``size(L) / size(filter(L))``.

    >>> nullspace(Layout((2, 3), (0, 1)))
    Layout('2:1')
    """
    return _call("nullspace", layout)


# ---------------------------------------------------------------------------------------------
# Coordinates and offsets


def idx2crd(idx: IntTupleLike, shape: Any, stride: Optional[IntTupleLike] = None) -> Any:
    """The coordinate of index ``idx`` in ``shape`` (colexicographic); with a ``stride``,
    CuTe's ``(idx / stride) % shape`` per leaf.

    >>> idx2crd(5, (2, 3))
    (1, 2)
    """
    return _call("idx2crd", *_args(idx, shape, stride))


def crd2idx(coord: Any, layout: Any, stride: Optional[IntTupleLike] = None) -> int:
    """The offset of ``coord`` in a layout (``crd2idx(coord, L)``), in a shape with
    column-major strides, or in ``shape:stride`` (``crd2idx(coord, shape, stride)``).

    >>> crd2idx((1, 2), Layout((2, 3), (3, 1)))
    5
    """
    return _call("crd2idx", *_args(coord, layout, stride))


def eval(layout: Any, x: Any) -> int:  # noqa: A001 - `tessera eval`'s name
    """``L(i)`` of an index or ``L(coord)`` of a coordinate; ``sw(x)`` of a swizzle.

    >>> eval(Layout((2, 3), (3, 1)), 5)
    5
    """
    return _call("eval", layout, x)


def offsets(layout: Any) -> List[int]:
    """``[L(0), ..., L(size-1)]`` (at most 2^20 of them).

    >>> offsets(Layout((2, 3), (3, 1)))
    [0, 3, 1, 4, 2, 5]
    """
    return _call("offsets", layout)


def image_bounds(layout: Any) -> Tuple[int, int]:
    """The smallest and largest offset.

    >>> image_bounds(Layout((4, 8), (1, -4)))
    (-28, 3)
    """
    return _call("image_bounds", layout)


def cosize_inner(layout: Any) -> int:
    """CuTe C++'s ``cosize`` of a swizzled layout: that of the inner layout.

    >>> cosize_inner(ComposedLayout("Sw<1,0,1> o 3:1"))
    3
    """
    return _call("cosize_inner", layout)


# ---------------------------------------------------------------------------------------------
# Swizzles and shared memory


def yyy_mask(swizzle: Any) -> int:
    """The mask of the bits a swizzle reads.

    >>> yyy_mask(Swizzle(3, 4, 3))
    896
    """
    return _call("yyy_mask", swizzle)


def zzz_mask(swizzle: Any) -> int:
    """The mask of the bits a swizzle flips.

    >>> zzz_mask(Swizzle(3, 4, 3))
    112
    """
    return _call("zzz_mask", swizzle)


def make_swizzle(y: int, z: int, s: Optional[int] = None) -> Swizzle:
    """``make_swizzle(Ymask, Zmask)``: the swizzle with these masks; ``make_swizzle(B, M,
    S)``: ``Sw<B,M,S>``.

    >>> make_swizzle(8, 4)
    Swizzle(1, 2, 1)
    """
    return _call("make_swizzle", *_args(y, z, s))


def bank_conflicts(layout: Any, elem_bytes: int) -> BankConflicts:
    """Shared-memory wavefronts of one warp's access (mode 0 the lanes) against the ideal.

    >>> str(bank_conflicts(Layout((8, 8), (64, 1)), 2))
    '8/1'
    """
    return _call("bank_conflicts", layout, elem_bytes)


def is_bijective(layout: Any) -> bool:
    """Whether the layout maps its indices one-to-one onto ``[min, max]``.

    >>> is_bijective(Layout((2, 3), (3, 1)))
    True
    """
    return _call("is_bijective", layout)


def is_injective(layout: Any) -> bool:
    """Whether no two indices share an offset.

    >>> is_injective(Layout((2, 2), (1, 1)))
    False
    """
    return _call("is_injective", layout)


def equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same function on ``[0, size)``, decided on their
    canonical forms (no enumeration, any size).

    >>> equal(Layout((3, 1), (1, 4)), Layout(3, 1))
    True
    """
    return _call("equal", a, b)


def canonical(layout: Any) -> Any:
    """The unique normal form of the layout's function: two layouts are the same function
    exactly when their canonical forms are equal.

    >>> canonical(Layout((2, 3, 2), (0, 0, 5)))
    Layout('(6,2):(0,5)')
    """
    return _call("canonical", layout)


def f2(x: Any, bits: Optional[int] = None) -> F2Map:
    """The map over GF(2) of an XOR-linear layout (or of a swizzle on ``bits`` bits); it
    prints as its bit matrix, rows from the top offset bit, as ``tessera eval`` prints it.

    >>> str(f2(ComposedLayout(Swizzle(1, 0, 1), 0, Layout((2, 2), (2, 1)))))
    '[01;11]'
    """
    return _call("f2", *_args(x, bits))


def is_linear(layout: Any) -> bool:
    """Whether the layout is XOR-linear: ``L(i ^ j) == L(i) ^ L(j)``.

    >>> is_linear(Layout(4, 3))
    False
    """
    return _call("is_linear", layout)


def best_swizzle(*args: Any) -> Any:
    """``best_swizzle(access, ..., smem, elem_bytes)``: the swizzle of the shared-memory
    layout ``smem`` with the fewest bank-conflict wavefronts over the warp accesses given
    (each a layout, mode 0 the lanes), for elements of ``elem_bytes`` bytes.

    >>> best_swizzle(Layout((8, 8), (1, 8)), Layout((8, 64), (64, 1)), 2)
    ComposedLayout('Sw<3,3,3> o 0 o (8,64):(64,1)')
    """
    return _call("best_swizzle", *args)


def best_xor_swizzle(*args: Any) -> F2Map:
    """``best_xor_swizzle(access, ..., smem, elem_bytes)``: as :func:`best_swizzle`, over every
    XOR-linear map of the offset bits (an :class:`F2Map`)."""
    return _call("best_xor_swizzle", *args)


# ---------------------------------------------------------------------------------------------
# Beyond `tessera eval`


def functionally_equal(a: Union[Layout, ComposedLayout], b: Union[Layout, ComposedLayout]) -> bool:
    """Whether ``a`` and ``b`` are the same function: equal sizes and ``a(i) == b(i)`` at
    every index (``==`` compares structure). Found by enumeration, so at most
    ``ENUMERATION_LIMIT`` indices; above that, :class:`tessera.TooLargeError`.

    >>> a, b = Layout((2, 3), (1, 2)), Layout(6, 1)
    >>> a == b, functionally_equal(a, b)
    (False, True)
    """
    return _tessera.functionally_equal(a, b)


def evaluate(text: str) -> Any:
    """One expression of ``tessera eval``, its value as a Python object.

    >>> evaluate("composition((6,2):(8,2), (4,3):(3,1))")
    Layout('((2,2),3):((24,2),8)')
    """
    return _tessera.evaluate(text)


def print_layout(layout: Union[Layout, ComposedLayout], file: Optional[IO[str]] = None) -> None:
    """Prints CuTe's ``print_layout`` grid of a rank-2 layout.

    >>> print_layout(Layout((2, 2), (1, 2)))
    (2,2):(1,2)
          0   1 
        +---+---+
     0  | 0 | 2 |
        +---+---+
     1  | 1 | 3 |
        +---+---+
    """
    print(_tessera.layout_grid(layout), end="", file=file or sys.stdout)


def print_tv_layout(
    tv: Union[Layout, ComposedLayout], tile: IntTupleLike, file: Optional[IO[str]] = None
) -> None:
    """Prints the grid of a thread/value layout over its ``(M, N)`` tile: ``T#V#`` in each
    cell (see :class:`TVLayout`, which also draws itself)."""
    print(str(TVLayout(tv, tile)), end="", file=file or sys.stdout)


def congruent(a: IntTupleLike, b: IntTupleLike) -> bool:
    """Whether ``a`` and ``b`` have the same tree structure.

    >>> congruent((2, (3, 4)), (1, (5, 6))), congruent((2, 3), (2, (3, 1)))
    (True, False)
    """
    return _tessera.int_tuple_relation("congruent", a, b)


def weakly_congruent(a: IntTupleLike, b: IntTupleLike) -> bool:
    """Whether ``b`` has ``a``'s structure where ``a`` has tuples (an integer of ``a`` may
    stand for a tuple of ``b``).

    >>> weakly_congruent((2, 3), (2, (3, 1))), weakly_congruent((2, (3, 1)), (2, 3))
    (True, False)
    """
    return _tessera.int_tuple_relation("weakly_congruent", a, b)


def compatible(a: IntTupleLike, b: IntTupleLike) -> bool:
    """Whether every coordinate of shape ``a`` is a coordinate of shape ``b``: ``b`` refines
    ``a``, each integer of ``a`` the size of the part of ``b`` in its place.

    >>> compatible(6, (2, 3)), compatible((2, 3), 6)
    (True, False)
    """
    return _tessera.int_tuple_relation("compatible", a, b)


def _tessera_argument_error(op: str, msg: str) -> Exception:
    from ._errors import ArgumentError

    e = ArgumentError(f"{op}: {msg}")
    e.op = op
    return e


__all__ = [
    "equal",
    "canonical",
    "f2",
    "is_linear",
    "best_swizzle",
    "best_xor_swizzle",
    "Layout",
    "IntTuple",
    "Swizzle",
    "ComposedLayout",
    "Tiler",
    "TVLayout",
    "BankConflicts",
    "F2Map",
    "ENUMERATION_LIMIT",
    "FUNCTIONS",
    "functionally_equal",
    "evaluate",
    "print_layout",
    "print_tv_layout",
    "make_composed_layout",
    "make_tile",
    "congruent",
    "weakly_congruent",
    "compatible",
] + [name for name, _ in FUNCTIONS if name not in ("eval", "filter")]
