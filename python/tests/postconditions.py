"""Post-condition checkers, one per operation: the same conditions as the Rust checkers
(`layout/src/algebra/check.rs`), written again in Python over a brute-force evaluation of
layouts that does not use tessera's own `L(i)`.

Each checker takes the operands and the result and raises `AssertionError` saying where the
result fails its operation's documented post-condition. They enumerate the domain, so they
are meant for the small layouts of tests. Where a post-condition names another operation's
result (the complement a divide uses), that operation is called through tessera; it has its
own checker.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

import tessera.layout as tl
from tessera.layout import Layout, Tiler

# ---------------------------------------------------------------------------------------------
# Int tuples and a brute-force evaluator (C++ semantics: truncating division)


def leaves(t) -> List[int]:
    if isinstance(t, int):
        return [t]
    return [x for m in t for x in leaves(m)]


def product(t) -> int:
    p = 1
    for x in leaves(t):
        p *= x
    return p


def tdiv(a: int, b: int) -> int:
    """C++'s `a / b` (towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def trem(a: int, b: int) -> int:
    """C++'s `a % b` (the sign of `a`)."""
    return a - tdiv(a, b) * b


def at(l: Layout, i: int) -> int:
    """`L(i)`: the index split colexicographically over the leaves, the last leaf taking
    what is left (CuTe's extended domain), then the dot product with the strides."""
    s, d = leaves(l.shape), leaves(l.stride)
    off = 0
    for k, (e, st) in enumerate(zip(s, d)):
        if k + 1 == len(s):
            c = i
        else:
            c, i = trem(i, e), tdiv(i, e)
        off += c * st
    return off


def at_coord(l: Layout, coord) -> int:
    """`L(coord)` for a coordinate congruent with the shape (leaf by leaf)."""
    return sum(c * d for c, d in zip(leaves(coord), leaves(l.stride)))


def offsets(l: Layout) -> List[int]:
    return [at(l, i) for i in range(l.size())]


def is_injective(l: Layout) -> bool:
    o = offsets(l)
    return len(set(o)) == len(o)


def congruent(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return False


def compatible(a, b) -> bool:
    """Shape `a` compatible with `b`: equal sizes, `b` refining `a`."""
    if isinstance(a, int):
        return product(b) == a
    if isinstance(b, int):
        return False
    return len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))


def is_int(l: Layout) -> bool:
    return isinstance(l.shape, int)


def modes(l: Layout) -> List[Layout]:
    return list(l)


def mode(l: Layout, i: int) -> Layout:
    return l[i]


def pairs(l: Layout) -> List[Tuple[int, int]]:
    return list(zip(leaves(l.shape), leaves(l.stride)))


def concat(ls: Iterable[Layout]) -> Layout:
    return tl.make_layout(*ls)


def ensure(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


# ---------------------------------------------------------------------------------------------
# Checkers


def same_function(l: Layout, r: Layout) -> None:
    ensure(l.size() == r.size(), f"size of {r} differs from size of {l}")
    for i in range(l.size()):
        ensure(at(l, i) == at(r, i), f"{r} differs from {l} at {i}")


def check_coalesce(l: Layout, r: Layout) -> None:
    ensure(r.depth() <= 1, f"{r} has depth {r.depth()}")
    same_function(l, r)


def check_coalesce_profile(l: Layout, profile, r: Layout) -> None:
    if isinstance(profile, int):
        return check_coalesce(l, r)
    ensure(not is_int(r) and r.rank() == l.rank(), f"{r} does not keep the rank of {l}")
    for i, (lm, rm) in enumerate(zip(modes(l), modes(r))):
        if i < len(profile):
            check_coalesce_profile(lm, profile[i], rm)
        else:
            ensure(lm == rm, f"mode {i} changed: {lm} -> {rm}")
    same_function(l, r)


def check_filter_zeros(l: Layout, r: Layout) -> None:
    ensure(congruent(l.shape, r.shape) and l.stride == r.stride, f"{r} is not {l} re-extended")
    for (s, d), rs in zip(pairs(l), leaves(r.shape)):
        ensure(rs == (1 if d == 0 else s), f"extent {s} with stride {d} became {rs} in {r}")


def check_filter(l: Layout, r: Layout) -> None:
    fz = tl.filter_zeros(l)
    check_filter_zeros(l, fz)
    check_coalesce(fz, r)
    trivial = r.size() == 1 and all(d == 0 for d in leaves(r.stride))
    ensure(trivial or 0 not in leaves(r.stride), f"{r} still has a stride-0 mode")


def check_composition(a: Layout, b: Layout, r: Layout) -> None:
    ensure(compatible(b.shape, r.shape), f"shape of {b} is not compatible with that of {r}")
    for i in range(b.size()):
        bi = at(b, i)
        ensure(at(a, bi) == at(r, i), f"{a} o {b} = {r} fails at {i}")


def check_composition_tiler(a: Layout, t, r: Layout) -> None:
    if isinstance(t, Layout):
        return check_composition(a, t, r)
    if t is None:
        return ensure(a == r, f"`_` changed {a} into {r}")
    ensure(not is_int(r) and r.rank() == len(t), f"{r} does not have the tiler's rank")
    for i, ti in enumerate(t):
        check_composition_tiler(mode(a, i), ti, mode(r, i))


def check_complement(l: Layout, cotarget: int, r: Layout) -> None:
    ensure(r.depth() <= 1, f"{r} is not flat")
    rm = pairs(r)
    if rm != [(1, 0)]:
        for (s0, d0), (s1, d1) in zip(rm, rm[1:]):
            ensure(d0 < d1, f"strides of {r} do not increase")
        for s, d in rm:
            ensure(s > 1 and d > 0, f"{r} has a mode {s}:{d}")
    f = tl.filter(l)
    ensure(is_injective(concat([f, r])), f"({f}, {r}) is not injective")
    reach = max([1] + [s * abs(d) for s, d in pairs(f) + rm])
    ensure(reach >= cotarget, f"({f}, {r}) reaches {reach} < {cotarget}")


def check_right_inverse(l: Layout, r: Layout) -> None:
    for i in range(r.size()):
        ensure(at(l, at(r, i)) == i, f"L(R({i})) != {i} for {l}, {r}")


def check_left_inverse(l: Layout, r: Layout) -> None:
    if not is_injective(l):
        return
    for i in range(l.size()):
        ensure(at(r, at(l, i)) == i, f"R(L({i})) != {i} for {l}, {r}")


def _by_mode(l: Layout, t, r: Layout, each) -> None:
    if isinstance(t, Layout):
        return each(l, t, r)
    if t is None:
        return ensure(l == r, f"`_` changed {l} into {r}")
    ensure(r.rank() == l.rank(), f"{r} does not keep the rank of {l}")
    for i, (lm, rm) in enumerate(zip(modes(l), modes(r))):
        if i < len(t):
            _by_mode(lm, t[i], rm, each)
        else:
            ensure(lm == rm, f"mode {i} changed: {lm} -> {rm}")


def check_logical_divide(l: Layout, t, r: Layout) -> None:
    def one(l: Layout, t: Layout, r: Layout) -> None:
        # The divide composes coalesce(L): on L's extended domain the two differ when L ends
        # in a size-1 mode, e.g. (2,1):(1,0) at 2 is 0 where 2:1 at 2 is 2.
        l = tl.coalesce(l)
        c = tl.complement(t, l.shape)
        ensure(not is_int(r) and r.rank() == 2, f"{r} is not rank 2")
        ensure(
            compatible(t.shape, r[0].shape) and compatible(c.shape, r[1].shape),
            f"modes of {r} do not refine ({t}, {c})",
        )
        for j in range(c.size()):
            for i in range(t.size()):
                x = at(t, i) + at(c, j)
                got, want = at_coord_rank2(r, i, j), at(l, x)
                ensure(got == want, f"{r} at ({i},{j}) is not coalesce(L)({x}) = {l}({x})")

    _by_mode(l, t, r, one)


def at_coord_rank2(r: Layout, i: int, j: int) -> int:
    """`R(i, j)` of a rank-2 layout: index `i` into mode 0, `j` into mode 1."""
    return at(r[0], i) + at(r[1], j)


def _tile_size(l: Layout, t, logical: Layout) -> int:
    if isinstance(t, Layout) or t is None:
        return logical[0].size()
    n = 1
    for i, ti in enumerate(t):
        n *= _tile_size(l[i], ti, logical[i])
    return n


def _regrouped(l: Layout, t, logical: Layout, r: Layout, tile_first: bool) -> None:
    ensure(sorted(pairs(logical)) == sorted(pairs(r)), f"{r} does not have the modes of {logical}")
    ensure(r.size() == logical.size(), f"size of {r} differs from {logical}")
    if tile_first:
        ensure(r[0].size() == _tile_size(l, t, logical), f"mode 0 of {r} is not one tile")


def check_zipped_divide(l: Layout, t, r: Layout) -> None:
    ld = tl.logical_divide(l, t)
    check_logical_divide(l, t, ld)
    ensure(not is_int(r) and r.rank() == 2, f"{r} is not rank 2")
    _regrouped(l, t, ld, r, True)


def check_tiled_divide(l: Layout, t, r: Layout) -> None:
    z = tl.zipped_divide(l, t)
    check_zipped_divide(l, t, z)
    ensure(r.rank() == 1 + z[1].rank() and r[0] == z[0], f"{r} is not (tile, rests...) of {z}")
    _regrouped(l, t, z, r, False)


def check_flat_divide(l: Layout, t, r: Layout) -> None:
    z = tl.zipped_divide(l, t)
    check_zipped_divide(l, t, z)
    ensure(r.rank() == z[0].rank() + z[1].rank(), f"{r} is not the modes of {z}")
    _regrouped(l, t, z, r, False)


def _copies_fit(a: Layout, b: Layout, c: Layout) -> bool:
    return (
        is_injective(a)
        and is_injective(b)
        and all(d >= 0 for d in leaves(b.stride))
        and c.size() >= b.cosize()
    )


def check_logical_product(a: Layout, t, r: Layout) -> None:
    def one(a: Layout, b: Layout, r: Layout) -> None:
        ensure(not is_int(r) and r.rank() == 2, f"{r} is not rank 2")
        ensure(r[0] == a, f"mode 0 of {r} is not {a}")
        c = tl.complement(a, a.size() * b.cosize())
        check_composition(c, b, r[1])
        if _copies_fit(a, b, c):
            ensure(is_injective(r), f"{r} is not injective")

    _by_mode(a, t, r, one)


def check_zipped_product(a: Layout, t, r: Layout) -> None:
    lp = tl.logical_product(a, t)
    check_logical_product(a, t, lp)
    ensure(not is_int(r) and r.rank() == 2, f"{r} is not rank 2")
    _regrouped(a, t, lp, r, True)


def check_tiled_product(a: Layout, t, r: Layout) -> None:
    z = tl.zipped_product(a, t)
    check_zipped_product(a, t, z)
    ensure(r.rank() == 1 + z[1].rank() and r[0] == z[0], f"{r} is not (block, rests...) of {z}")
    _regrouped(a, t, z, r, False)


def check_flat_product(a: Layout, t, r: Layout) -> None:
    z = tl.zipped_product(a, t)
    check_zipped_product(a, t, z)
    ensure(r.rank() == z[0].rank() + z[1].rank(), f"{r} is not the modes of {z}")
    _regrouped(a, t, z, r, False)


def _padded(l: Layout, rank: int) -> Layout:
    if l.rank() >= rank:
        return l
    return concat(modes(l) + [Layout(1, 0)] * (rank - l.rank()))


def _zipped_pairs(a: Layout, b: Layout, r: Layout, block_first: bool) -> None:
    rank = max(a.rank(), b.rank())
    pa, pb = _padded(a, rank), _padded(b, rank)
    lp = tl.logical_product(pa, pb)
    check_logical_product(pa, pb, lp)
    ensure(not is_int(r) and r.rank() == rank, f"{r} does not have rank {rank}")
    m0, m1 = lp[0], lp[1]
    ps = [(m0, m1)] if rank == 1 else list(zip(modes(m0), modes(m1)))
    for i, (x, y) in enumerate(ps):
        want = concat([x, y] if block_first else [y, x])
        ensure(r[i] == want, f"mode {i} of {r} is {r[i]}, expected {want}")
    c = tl.complement(pa, pa.size() * pb.cosize())
    if _copies_fit(pa, pb, c):
        ensure(is_injective(r), f"{r} is not injective")


def check_blocked_product(a: Layout, b: Layout, r: Layout) -> None:
    _zipped_pairs(a, b, r, True)


def check_raked_product(a: Layout, b: Layout, r: Layout) -> None:
    _zipped_pairs(a, b, r, False)


def is_compact(r: Layout) -> bool:
    """A bijection onto `[0, size)`."""
    return sorted(offsets(r)) == list(range(r.size()))


def check_tile_to_shape(block: Layout, target: Sequence, r: Layout) -> None:
    rank = len(target)
    pb = _padded(block, rank)
    ensure(r.rank() == rank, f"{r} does not have rank {rank}")
    for i, (tm, rm) in enumerate(zip(target, modes(r))):
        ensure(rm.size() == product(tm), f"mode {i} of {r} does not have the target's size")
        bm = pb if rank == 1 else pb[i]
        ensure(rm[0] == bm, f"mode {i} of {r} does not start with the block mode {bm}")
    if is_compact(block):
        ensure(is_injective(r), f"{r} is not injective")


def check_max_common_layout(a: Layout, b: Layout, r: Layout) -> None:
    for i in range(r.size()):
        ri = at(r, i)
        ensure(at(a, ri) == i and at(b, ri) == i, f"at {i}: R(i) = {ri}")


def check_max_common_vector(a: Layout, b: Layout, n: int) -> None:
    r = tl.max_common_layout(a, b)
    check_max_common_layout(a, b, r)
    ensure(n >= 1 and n == r.size(), f"{n} is not the size of {r}")


def check_upcast(l: Layout, n: int, r: Layout) -> None:
    ensure(congruent(l.shape, r.shape), f"{r} is not congruent with {l}")
    img = set(offsets(l))
    for i in range(r.size()):
        ensure(at(r, i) * n in img, f"{n} * R({i}) is not an offset of {l}")


def check_downcast(l: Layout, n: int, r: Layout) -> None:
    ensure(congruent(l.shape, r.shape), f"{r} is not congruent with {l}")
    unit = sum(1 for d in leaves(l.stride) if abs(d) == 1)
    ensure(r.size() == l.size() * n**unit, f"size of {r}")
    img = set(offsets(r))
    for i in range(l.size()):
        ensure(at(l, i) * n in img, f"{n} * L({i}) is not an offset of {r}")


def check_nullspace(l: Layout, r: Layout) -> None:
    for i in range(r.size()):
        ensure(at(l, at(r, i)) == 0, f"L(R({i})) != 0")
    ensure(r.size() * tl.filter(l).size() == l.size(), f"size of {r}")


def _expand_order(order, shape) -> List[int]:
    if isinstance(order, int):
        return [order] * len(leaves(shape))
    return [x for o, s in zip(order, shape) for x in _expand_order(o, s)]


def _ordered_by(r: Layout, order: List[int]) -> None:
    ms = [(s, d, o) for (s, d), o in zip(pairs(r), order) if s > 1 and d != 0]
    for x in ms:
        for y in ms:
            if x[2] < y[2]:
                ensure(x[1] < y[1], f"in {r}, order {x[2]} has stride {x[1]} >= {y[1]}")


def check_make_ordered_layout(shape, order, r: Layout) -> None:
    ensure(r.shape == shape, f"{r} does not have shape {shape}")
    o = _expand_order(order, shape)
    if len(set(leaves(order))) == len(leaves(order)):
        ensure(is_compact(r), f"{r} is not compact")
    _ordered_by(r, o)


def check_make_layout_like(l: Layout, r: Layout) -> None:
    ensure(r.shape == l.shape, f"{r} does not have the shape of {l}")
    for (s, d), rd in zip(pairs(l), leaves(r.stride)):
        ensure((d == 0 or s == 1) == (rd == 0), f"{l} -> {r}: stride 0 not kept")
    ds = [d for d in leaves(l.stride) if d != 0]
    if len(set(ds)) == len(ds):
        ensure(is_compact(tl.filter(r)), f"filter({r}) is not compact")
    _ordered_by(r, leaves(l.stride))


def as_tiler(t) -> Optional[object]:
    """A tessera `Tiler`'s items as Python (`Layout`, `None`, nested lists), for the checkers."""
    if isinstance(t, Tiler):
        return [as_tiler(t[i]) for i in range(len(t))]
    return t
