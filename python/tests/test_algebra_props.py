"""Property tests of the algebra through the Python API: the properties of the Rust suite
(`layout/tests/algebra_props.rs`) over the same generators, judged by the Python checkers
of `postconditions.py`. An operation may raise a `LayoutError` (that is sound) unless the
generator guarantees its precondition; it may never return a layout that breaks its
post-condition, and never raise anything else."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import postconditions as pc
import tessera
import tessera.layout as tl
from strategies import (
    admissible_composition_pair,
    any_layout,
    by_mode_tiler,
    compact_layout,
    divisible_pair,
    injective_layout,
)


def ones(t):
    """`t` with every leaf 1 (CuTe's `repeat_like(t, 1)`)."""
    return 1 if isinstance(t, int) else tuple(ones(x) for x in t)


def sound(op, *args):
    """`op(*args)`, or `None` when it raises a `LayoutError` (a refusal, which is sound)."""
    try:
        return op(*args)
    except tessera.LayoutError as e:
        assert not isinstance(e, tessera.InternalError), e
        return None


@given(any_layout())
def test_coalesce_and_filter_meet_post_conditions(l):
    pc.check_coalesce(l, tl.coalesce(l))
    pc.check_filter_zeros(l, tl.filter_zeros(l))
    pc.check_filter(l, tl.filter(l))
    profile = tuple(ones(m.shape) for m in l)
    pc.check_coalesce_profile(l, profile, tl.coalesce(l, profile))


@given(admissible_composition_pair())
def test_admissible_compositions_succeed_and_are_exact(ab):
    a, b = ab
    pc.check_composition(a, b, tl.composition(a, b))


@given(any_layout(), any_layout())
def test_any_composition_is_exact_or_rejected(a, b):
    r = sound(tl.composition, a, b)
    if r is not None:
        pc.check_composition(a, b, r)


@given(injective_layout(), st.integers(1, 3))
def test_complement_of_injective_layouts(l, extra):
    # The sorted modes of an injective_layout form a chain, so the complement exists.
    cot = tl.filter(l).cosize() * extra
    pc.check_complement(l, cot, tl.complement(l, cot))
    pc.check_complement(l, tl.filter(l).cosize(), tl.complement(l))


@given(any_layout(), st.integers(1, 64))
def test_complement_of_any_layout_is_sound_or_rejected(l, m):
    r = sound(tl.complement, l, m)
    if r is not None:
        pc.check_complement(l, m, r)
    if not pc.is_injective(tl.filter(l)):
        assert r is None, f"complement of non-injective {l} succeeded: {r}"


@given(any_layout(), compact_layout())
def test_inverses(l, c):
    pc.check_right_inverse(l, tl.right_inverse(l))
    r = sound(tl.left_inverse, l)
    if r is not None:
        pc.check_left_inverse(l, r)
    # A compact layout has a full inverse both ways.
    r = tl.right_inverse(c)
    assert r.size() == c.size()
    pc.check_right_inverse(c, r)
    pc.check_left_inverse(c, tl.left_inverse(c))


@given(divisible_pair())
def test_divides_of_divisible_pairs(lt):
    l, t = lt
    pc.check_logical_divide(l, t, tl.logical_divide(l, t))
    pc.check_zipped_divide(l, t, tl.zipped_divide(l, t))


@given(st.data())
def test_divides_and_products_by_mode(data):
    l = data.draw(any_layout())
    t = data.draw(by_mode_tiler(l))
    for op, check in [
        (tl.logical_divide, pc.check_logical_divide),
        (tl.zipped_divide, pc.check_zipped_divide),
        (tl.tiled_divide, pc.check_tiled_divide),
        (tl.flat_divide, pc.check_flat_divide),
        (tl.logical_product, pc.check_logical_product),
        (tl.zipped_product, pc.check_zipped_product),
        (tl.tiled_product, pc.check_tiled_product),
        (tl.flat_product, pc.check_flat_product),
        (tl.composition, pc.check_composition_tiler),
    ]:
        r = sound(op, l, t)
        if r is not None:
            check(l, t, r)


@given(compact_layout(), injective_layout())
def test_products_of_compact_blocks(a, b):
    # complement(A, ...) of a compact A is one mode, so every product composes.
    pc.check_logical_product(a, b, tl.logical_product(a, b))
    pc.check_blocked_product(a, b, tl.blocked_product(a, b))
    pc.check_raked_product(a, b, tl.raked_product(a, b))


@given(compact_layout(), st.lists(st.integers(1, 3), min_size=4, max_size=4))
def test_tile_to_shape_covers_multiples(a, k):
    target = tuple(m.size() * f for m, f in zip(a, k))
    pc.check_tile_to_shape(a, target, tl.tile_to_shape(a, target))


@given(any_layout(), any_layout(), compact_layout(), st.integers(1, 4))
def test_common_layouts_recasts_and_nullspace(a, b, c, n):
    r = sound(tl.max_common_layout, a, b)
    if r is not None:
        pc.check_max_common_layout(a, b, r)
    v = sound(tl.max_common_vector, a, b)
    if v is not None:
        pc.check_max_common_vector(a, b, v)
    assert tl.max_common_layout(c, c).size() == c.size()
    r = sound(tl.upcast, a, n)
    if r is not None:
        pc.check_upcast(a, n, r)
    r = sound(tl.downcast, a, n)
    if r is not None:
        pc.check_downcast(a, n, r)
    pc.check_nullspace(a, tl.nullspace(a))
    pc.check_make_layout_like(a, tl.make_layout_like(a))


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_ordered_layouts(exts, rnd):
    order = list(range(len(exts)))
    rnd.shuffle(order)
    shape, order = tuple(exts), tuple(order)
    pc.check_make_ordered_layout(shape, order, tl.make_ordered_layout(shape, order))


# ---------------------------------------------------------------------------------------------
# The binding itself: evaluation, text, equality


@given(any_layout())
def test_evaluation_matches_brute_force(l):
    # `L(i)`, `L(coord)` and `offsets` against the independent evaluator.
    assert l.offsets() == pc.offsets(l)
    for i in range(l.size()):
        coord = tl.idx2crd(i, l.shape)
        assert l(i) == pc.at(l, i)
        assert l(coord) == pc.at_coord(l, coord) == pc.at(l, i)


@given(any_layout())
def test_text_round_trip(l):
    assert tl.Layout(str(l)) == l
    assert tl.Layout(l.shape, l.stride) == l
    assert str(tl.IntTuple(l.shape)) == str(l).split(":")[0]


@given(any_layout(), any_layout())
def test_structural_and_functional_equality(a, b):
    assert (a == b) == (str(a) == str(b))
    assert tl.functionally_equal(a, b) == (a.size() == b.size() and pc.offsets(a) == pc.offsets(b))
    # coalesce keeps the function, not (in general) the structure.
    assert tl.functionally_equal(a, tl.coalesce(a))


@given(st.integers(0, 12), st.integers(0, 12), st.integers(-12, 12), st.integers(0, 1 << 20))
def test_swizzle_is_the_xor_of_its_masks(b, m, s, x):
    # Sw<B,M,S>(x) = x ^ ((x & YYY) >> S) (S < 0 shifts left); YYY = B bits from M + max(0, S),
    # ZZZ = B bits from M + max(0, -S). Parameters CuTe rejects raise BadSwizzleError.
    if abs(s) < b:
        try:
            tl.Swizzle(b, m, s)
        except tessera.BadSwizzleError:
            return
        raise AssertionError(f"Sw<{b},{m},{s}> accepted with |S| < B")
    sw = tl.Swizzle(b, m, s)
    yyy = ((1 << b) - 1) << (m + max(0, s))
    zzz = ((1 << b) - 1) << (m + max(0, -s))
    assert (sw.yyy_mask, sw.zzz_mask) == (yyy, zzz)
    moved = (x & yyy) >> s if s >= 0 else (x & yyy) << -s
    assert sw(x) == x ^ moved
    assert sw(sw(x)) == x
