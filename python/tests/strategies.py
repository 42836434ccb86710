"""Hypothesis strategies, each named after the precondition it guarantees: the generators of
the Rust property tests (`layout/tests/algebra_props.rs`), in Python."""

from __future__ import annotations

from typing import List, Tuple

from hypothesis import strategies as st

from tessera.layout import Layout


def build(modes: List[Tuple[int, int]], nest: bool) -> Layout:
    """A layout from flat `(extent, stride)` modes, the first two nested into one mode when
    `nest` is set (so that hierarchical layouts are covered)."""
    if len(modes) == 1:
        return Layout(*modes[0])
    shape: list = []
    stride: list = []
    rest = modes
    if nest and len(modes) >= 3:
        shape.append((modes[0][0], modes[1][0]))
        stride.append((modes[0][1], modes[1][1]))
        rest = modes[2:]
    shape += [s for s, _ in rest]
    stride += [d for _, d in rest]
    return Layout(tuple(shape), tuple(stride))


def _permutation(n: int, seed: int) -> List[int]:
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = seed % (i + 1)
        seed //= i + 1
        order[i], order[j] = order[j], order[i]
    return order


@st.composite
def any_layout(draw) -> Layout:
    """At most 4 leaves of extent 1..4, strides in -9..9 with 0 and negatives common, flat or
    nested."""
    stride = st.one_of(st.just(0), st.integers(-9, 9))
    modes = draw(st.lists(st.tuples(st.integers(1, 4), stride), min_size=1, max_size=4))
    return build(modes, draw(st.booleans()))


@st.composite
def injective_layout(draw) -> Layout:
    """Modes taken in a random order, each with a stride at least the extent of all modes
    before it (random gaps) and a random sign."""
    spec = draw(
        st.lists(
            st.tuples(st.integers(1, 4), st.integers(1, 3), st.booleans()),
            min_size=1,
            max_size=4,
        )
    )
    order = _permutation(len(spec), draw(st.integers(0, 2**32)))
    strides = [0] * len(spec)
    reach = 1
    for k in order:
        ext, gap, neg = spec[k]
        d = reach * gap
        strides[k] = -d if neg else d
        reach = d * ext
    return build([(m[0], d) for m, d in zip(spec, strides)], draw(st.booleans()))


@st.composite
def compact_layout(draw) -> Layout:
    """A bijection of `[0, size)` onto itself: positive strides, no gaps, any order."""
    exts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    order = _permutation(len(exts), draw(st.integers(0, 2**32)))
    strides = [0] * len(exts)
    reach = 1
    for k in order:
        strides[k] = reach
        reach *= exts[k]
    return build(list(zip(exts, strides)), draw(st.booleans()))


def _leaves(t) -> list:
    return [t] if isinstance(t, int) else [x for m in t for x in _leaves(m)]


def radix(a: Layout) -> List[Tuple[int, int]]:
    """A's modes as composition sees them (size-1 modes dropped, mergeable neighbours
    merged, the last mode kept and extending), with the prefix products of their extents."""
    ls = list(zip(_leaves(a.shape), _leaves(a.stride)))
    last, front = ls[-1], ls[:-1]
    modes = [(max(last[0], 2), last[1])]
    for s, d in reversed(front):
        if s == 1:
            continue
        if s * d == modes[0][1]:
            modes[0] = (s * modes[0][0], d)
        else:
            modes.insert(0, (s, d))
    out, p = [], 1
    for s, _ in modes:
        out.append((s, p))
        p *= s
    return out


@st.composite
def _pair_in_radix(draw, dividing: bool) -> Tuple[Layout, Layout]:
    a = draw(any_layout())
    picks = draw(
        st.lists(
            st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.booleans()),
            min_size=1,
            max_size=3,
        )
    )
    neg, nest = draw(st.booleans()), draw(st.booleans())
    rad = radix(a)
    free = list(range(len(rad)))
    modes: List[Tuple[int, int]] = []
    for pm, pn, pq, zero in picks:
        if zero:
            modes.append((1 + pn % 3, 0))
            continue
        if not free:
            break
        j = free.pop(pm % len(free))
        s, p = rad[j]
        if j + 1 == len(rad):
            n, q = 1 + pn % 4, 1 + pq % 3
        else:
            divs = [q for q in range(1, s + 1) if s % q == 0]
            q = divs[pq % len(divs)]
            if dividing:
                ns = [n for n in range(1, s // q + 1) if (s // q) % n == 0]
                n = ns[pn % len(ns)]
            else:
                n = 1 + pn % (s // q)
        d = q * p
        modes.append((n, -d if neg else d))
    if not modes:
        modes.append((1, 0))
    return a, build(modes, nest)


def admissible_composition_pair():
    """`(A, B)` with `A o B` admissible: each leaf of B walks inside one mode of A's radix
    (with a step dividing it, or anything in A's last mode, which extends), no two leaves
    share a mode, all strides of one sign; stride-0 leaves mixed in."""
    return _pair_in_radix(False)


def divisible_pair():
    """`(L, T)` with `T` a tile dividing L: as `admissible_composition_pair`, with each
    leaf's span dividing its mode's extent, and positive strides."""

    def positive(p):
        l, t = p
        return l, Layout(t.shape, _abs(t.stride))

    return _pair_in_radix(True).map(positive)


def _abs(t):
    return abs(t) if isinstance(t, int) else tuple(_abs(x) for x in t)


@st.composite
def by_mode_tiler(draw, l: Layout):
    """A by-mode tiler for `l`: per mode `None` (`_`) or `n:d` with `n` in 1..4, `d` in 1..3."""
    k = draw(st.integers(1, 3))
    items = []
    for _ in range(min(l.rank(), k)):
        if draw(st.integers(0, 2)) == 0:
            items.append(None)
        else:
            items.append(Layout(draw(st.integers(1, 4)), draw(st.integers(1, 3))))
    return tuple(items)
