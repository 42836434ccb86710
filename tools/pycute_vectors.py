#!/usr/bin/env python3
"""Differential vectors for tessera-layout, produced by running the reference `pycute`.

`pycute` is the pure-Python CuTe reference shipped in the PyPI package `nvidia-cutlass`,
pinned here to version 4.2.0.0 (the pin is also written into the JSON). The script draws
randomized inputs with a fixed seed, runs each through pycute, and writes what pycute answers
(a layout in CuTe text notation plus its offsets, an integer, a tuple, or the exception text)
to JSON files that `layout/tests/differential.rs` (and `swizzle/tests/differential.rs`) replay.
The data is committed; pycute itself is not needed to run the tests.

Re-run (deterministic: same seed, same pycute version, same bytes out):

    python3 -m venv target/pycute-venv
    target/pycute-venv/bin/pip install --no-deps nvidia-cutlass==4.2.0.0
    target/pycute-venv/bin/python tools/pycute_vectors.py

`--no-deps` is deliberate: pycute is pure Python and needs none of the package's GPU
dependencies. Outputs:

    layout/tests/data/pycute_layout.json    layout algebra cases
    layout/tests/data/pycute_swizzle.json   Swizzle and ComposedLayout evaluation cases

Seed: SEED below; each operation draws from its own `random.Random(SEED + k)` (k = the
operation's position in OPS), so adding an operation does not change the others' cases.

Inputs are random hierarchical layouts (depth <= 2, extents 1..8, strides 0..40 with some
negative), mostly built so that the operation's precondition holds (injective layouts for
complement and inverses, stride chains that divide for composition and divide, ...), with a
minority that break it on purpose, plus the inputs of pycute's own unit tests.

Record format, one object per case:
    {"op": name, "args": [text, ...], "result": text | int | null,
     "offsets": [int, ...] | null, "error": text | null, ...}
`args` and `result` are CuTe notation: layouts `((2,4),3):((1,8),2)`, tuples `(1,(2,3))`,
by-mode tilers `<2:1,_,(2,2):(1,4)>` (`_` = leave the mode), swizzles `Sw<B,M,S>`, composed
layouts `Sw<B,M,S> o OFFSET o LAYOUT` (outer function first, as C++ prints it; pycute's
ComposedLayout takes the same three in that order but names them the other way round).
`offsets` is `[R(0), ..., R(size(R)-1)]` when the result is a layout.
"""

import json
import os
import random
import sys

import pycute as pc
from pycute import Layout

PYCUTE_PACKAGE = "nvidia-cutlass==4.2.0.0"
SEED = 20261122
CASES_PER_OP = 400
MAX_OFFSETS = 1024  # results larger than this are not drawn (inputs are kept small)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_LAYOUT = os.path.join(ROOT, "layout", "tests", "data", "pycute_layout.json")
OUT_SWIZZLE = os.path.join(ROOT, "layout", "tests", "data", "pycute_swizzle.json")


# ---------------------------------------------------------------------------------------------
# CuTe text notation


def tup(t):
    if isinstance(t, tuple):
        return "(" + ",".join(tup(x) for x in t) + ")"
    return str(t)


def lay(l):
    return tup(l.shape) + ":" + tup(l.stride)


def tiler(t):
    if t is None:
        return "_"
    if isinstance(t, tuple):
        return "<" + ",".join(tiler(x) for x in t) + ">"
    if isinstance(t, int):
        return str(t)
    return lay(t)


def swz(s):
    return "Sw<%d,%d,%d>" % (s.bits, s.base, s.shift)


# ---------------------------------------------------------------------------------------------
# Random inputs

EXTENTS = [1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 8]


def flat_size(modes):
    n = 1
    for s, _ in modes:
        n *= s
    return n


def nest(rng, modes):
    """Groups a flat list of (extent, stride) into a random hierarchy of depth <= 2."""
    if len(modes) == 1 and rng.random() < 0.7:
        return Layout(modes[0][0], modes[0][1])
    groups = []
    i = 0
    while i < len(modes):
        k = 1 if rng.random() < 0.6 else rng.randint(1, min(3, len(modes) - i))
        groups.append(modes[i : i + k])
        i += k
    shape, stride = [], []
    for g in groups:
        if len(g) == 1 and rng.random() < 0.85:
            shape.append(g[0][0])
            stride.append(g[0][1])
        else:
            shape.append(tuple(s for s, _ in g))
            stride.append(tuple(d for _, d in g))
    return Layout(tuple(shape), tuple(stride))


def rand_extents(rng, max_leaves=4, max_size=128):
    while True:
        k = rng.randint(1, max_leaves)
        ext = [rng.choice(EXTENTS) for _ in range(k)]
        n = 1
        for e in ext:
            n *= e
        if n <= max_size:
            return ext


def rand_stride(rng, neg=0.1, zero=0.1):
    r = rng.random()
    if r < zero:
        return 0
    d = rng.randint(1, 40) if rng.random() < 0.5 else rng.randint(1, 8)
    return -d if rng.random() < neg else d


def rand_layout(rng, max_leaves=4, max_size=128, neg=0.1, zero=0.1):
    ext = rand_extents(rng, max_leaves, max_size)
    return nest(rng, [(e, rand_stride(rng, neg, zero)) for e in ext])


def chain_modes(rng, ext, gaps=0.25, nondiv=0.0):
    """Strides of an injective layout: the extents in a random order get prefix-product
    strides, with an occasional gap (a factor, so the chain still divides, or with
    probability `nondiv` an added amount, so it does not)."""
    order = list(range(len(ext)))
    rng.shuffle(order)
    strides = [0] * len(ext)
    cur = rng.choice([1, 1, 1, 2, 3])
    for i in order:
        strides[i] = cur
        nxt = cur * ext[i]
        if rng.random() < gaps:
            nxt *= rng.choice([2, 2, 3, 4])
        if rng.random() < nondiv:
            nxt += rng.randint(1, 3)
        cur = nxt
    return [(e, d) for e, d in zip(ext, strides)]


def injective_layout(rng, max_leaves=4, max_size=128, gaps=0.25, nondiv=0.0):
    ext = rand_extents(rng, max_leaves, max_size)
    return nest(rng, chain_modes(rng, ext, gaps, nondiv))


def compact_layout(rng, max_leaves=4, max_size=128):
    return injective_layout(rng, max_leaves, max_size, gaps=0.0)


def size_of(l):
    return pc.size(l)


def flat(t):
    return pc.flatten(t)


# ---------------------------------------------------------------------------------------------
# Running pycute


def offsets(l):
    return [l(i) for i in range(size_of(l))]


def run_layout(f, *a):
    """Runs a pycute operation whose answer is a layout: (result text, offsets, error)."""
    try:
        r = f(*a)
    except RecursionError:
        return None, None, "RecursionError"
    except Exception as e:  # pycute signals bad input with assert/ZeroDivision/...
        msg = str(e).strip()
        return None, None, type(e).__name__ + (": " + msg if msg else "")
    if size_of(r) > MAX_OFFSETS or any(s <= 0 for s in flat(r.shape)):
        # A shape with a zero extent (a pycute bug) has no offsets to list.
        return lay(r), None, None
    return lay(r), offsets(r), None


def case(op, args, f, *a, **extra):
    res, offs, err = run_layout(f, *a)
    c = {"op": op, "args": args, "result": res, "offsets": offs, "error": err}
    c.update(extra)
    return c


# ---------------------------------------------------------------------------------------------
# Inputs taken from pycute's own unit tests (its documented examples)

DOC_COALESCE = [
    (1, 0), (1, 1), ((2, 4), None), ((2, 4, 6), None), ((2, 4, 6), (1, 6, 2)),
    ((2, 1, 6), (1, 7, 2)), ((2, 1, 6), (4, 7, 8)), ((2, (4, 6)), None), ((2, 4), (4, 1)),
    ((2, 4, 6), (24, 6, 1)), ((2, 1, 3), (2, 4, 4)), (((2, 2), (2, 2)), ((1, 4), (8, 32))),
]
DOC_COMPOSITION = [
    ((1, 0), (1, 0)), ((1, 0), (1, 1)), ((1, 1), (1, 0)), ((1, 1), (1, 1)),
    ((4, None), (4, None)), ((4, 2), (4, None)), ((4, None), (4, 2)), ((4, 0), (4, None)),
    ((4, None), (4, 0)), ((1, 0), (4, None)), ((4, None), (1, 0)), ((4, None), (2, None)),
    ((4, 2), (2, None)), ((4, None), (2, 2)), ((4, 2), (2, 2)), ((12, None), ((4, 3), None)),
    ((12, 2), ((4, 3), None)), ((12, None), ((4, 3), (3, 1))), ((12, 2), ((4, 3), (3, 1))),
    ((12, None), ((2, 3), (2, 4))), (((4, 3), None), ((4, 3), None)),
    (((4, 3), None), (12, None)), (((4, 3), None), (6, 2)), (((4, 3), None), ((6, 2), (2, 1))),
    (((4, 3), (3, 1)), ((4, 3), None)), (((4, 3), (3, 1)), (12, None)),
    (((4, 3), (3, 1)), (6, 2)), (((4, 3), (3, 1)), ((6, 2), (2, 1))),
    (((8, 8), None), (((2, 2, 2), (2, 2, 2)), ((1, 16, 4), (8, 2, 32)))),
    (((8, 8), (8, 1)), (((2, 2, 2), (2, 2, 2)), ((1, 16, 4), (8, 2, 32)))),
    ((((2, 2, 2), (2, 2, 2)), ((1, 16, 4), (8, 2, 32))), (8, 4)),
    (((4, 2), (1, 16)), ((4, 2), (2, 1))), (((2, 2), (2, 1)), ((2, 2), (2, 1))),
    (((4, 8, 2), None), ((2, 2, 2), (2, 8, 1))), (((4, 8, 2), (2, 8, 1)), ((2, 2, 2), (1, 8, 2))),
    (((4, 8, 2), (2, 8, 1)), ((4, 2, 2), (2, 8, 1))), (((4, 6, 8), (1, 4, 7)), (6, 1)),
    (((4, 6, 8, 10), (2, 3, 5, 7)), (6, 12)),
    # docs/cute_semantics.md, pitfalls 4-5: extension of the last mode, admissibility failures
    (((4, 3, 1), (3, 1, 0)), (24, 1)), (((8, 8), (8, 1)), (2, 3)), (((23, 5), (2, 120)), (7, 3)),
    (((5, 3), (7, 1)), (7, 1)), (((4, 6, 8), (2, 3, 5)), (6, 1)), (((4, 6, 8), (2, 3, 5)), (6, 3)),
    (((6, 2), (1, 7)), ((3, 2), (2, 3))), (((10, 2), (16, 4)), ((5, 4), (1, 5))),
]
DOC_COMPLEMENT = [
    (1, 0), (1, 1), (4, 0), ((2, 4), (1, 2)), ((2, 3), (1, 2)), ((2, 4), (1, 4)),
    ((2, 4, 8), (8, 1, 64)), (((2, 2), (2, 2)), ((1, 4), (8, 32))), ((2, (3, 4)), (3, (1, 6))),
    ((4, 6), (1, 6)), ((4, 10), (1, 10)),
]
DOC_INVERSE = [
    (1, 0), ((1, 1), (0, 0)), ((3, 7), (0, 0)), (1, 1), (4, 0), (4, 1), (4, 2), ((2, 4), (0, 2)),
    ((8, 4), (1, 8)), ((8, 4), (4, 1)), ((2, 4, 6), (1, 2, 8)), ((2, 4, 6), (4, 1, 8)),
    ((4, 2), (1, 16)), ((2, 2, 2), (4, 0, 1)), ((4, 8), (1, 5)), (4, -1),
]
DOC_PRODUCT = [
    ((1, 0), (1, 0)), ((1, 1), (1, 0)), ((1, 0), (1, 1)), ((1, 1), (1, 1)), ((3, 1), (4, 0)),
    ((3, 0), (4, 1)), ((3, 0), (4, 0)), ((3, 2), (4, 1)), ((3, None), ((2, 4), None)),
    (((2, 5), (5, 1)), (4, None)),
]

# Worked examples of CuTe's layout-algebra documentation (inputs only; pycute computes).
# A tiler given as a list is by-mode (one layout per mode); as a tuple it is one layout.
DOC_CUTE_COMPOSITION_TILER = [
    (((12, (4, 8)), (59, (13, 1))), [(3, 4), (8, 2)]),
    (((9, (4, 8)), (59, (13, 1))), [(3, 3), ((2, 4), (1, 8))]),
]
DOC_CUTE_COMPLEMENT = [
    ((4, 1), 24), ((6, 4), 24), ((4, 2), 24), (((2, 2), (1, 6)), 24), (((2, 4), (1, 6)), 24),
    (((4, 6), (1, 4)), 24), ((4, 2), 16), (((2, 2), (1, 2)), 8),
]
DOC_CUTE_DIVIDE = [
    (((4, 2, 3), (2, 1, 8)), (4, 2)),
    (((9, (4, 8)), (59, (13, 1))), [(3, 3), ((2, 4), (1, 8))]),
    ((48, 1), (32, 1)), (((32, 4, 4), (1, 32, 128)), (64, 1)), ((16, 1), (4, 1)),
    (((8, 8), (1, 8)), [(2, 1), (4, 1)]),
]
DOC_CUTE_PRODUCT = [
    (((2, 2), (4, 1)), (6, 1)), (((2, 2), (4, 1)), (4, 2)), (((2, 5), (5, 1)), ((3, 4), (1, 3))),
    (((2, 2), (1, 2)), ((3, 4), (1, 3))), (((2, 5), (5, 1)), ((3, 4), (4, 1))),
    (((2, 5), (5, 1)), [(3, 1), (4, 1)]),
]


def doc_tiler(spec):
    return tuple(mk(x) for x in spec) if isinstance(spec, list) else mk(spec)


def mk(spec):
    s, d = spec
    return Layout(s) if d is None else Layout(s, d)


# ---------------------------------------------------------------------------------------------
# Per-operation generators. Each returns a list of cases.


def gen_eval(rng):
    out = []
    for k in range(CASES_PER_OP):
        l = rand_layout(rng, neg=0.2)
        n = size_of(l)
        idx = [n, n + 1, n + rng.randint(2, 3 * n + 2)]
        if k % 8 == 0:
            idx += [-1, -rng.randint(2, n + 2)]  # negative: floor (pycute) vs truncation (C++)
        out.append(
            {"op": "eval", "args": [lay(l)], "result": None, "offsets": offsets(l),
             "error": None, "indices": idx, "values": [l(i) for i in idx]}
        )
    return out


def rand_coord(rng, shape, coarse=0.3):
    """A coordinate weakly congruent with `shape`: a leaf may stand for a whole sub-mode."""
    if isinstance(shape, tuple):
        if rng.random() < coarse:
            return rng.randrange(pc.product(shape))
        return tuple(rand_coord(rng, s, coarse) for s in shape)
    return rng.randrange(shape)


def gen_crd2idx(rng):
    out = []
    for k in range(CASES_PER_OP):
        l = rand_layout(rng, neg=0.15)
        n = size_of(l)
        r = rng.random()
        if r < 0.3:
            c = rng.randrange(n)
        elif r < 0.4:
            c = n + rng.randint(0, 2 * n)  # out of range: the last mode absorbs it
        else:
            c = rand_coord(rng, l.shape)
        try:
            res, err = pc.crd2idx(c, l.shape, l.stride), None
        except Exception as e:
            res, err = None, type(e).__name__
        out.append({"op": "crd2idx", "args": [lay(l), tup(c)], "result": res, "offsets": None,
                    "error": err})
    return out


def gen_idx2crd(rng):
    out = []
    for k in range(CASES_PER_OP):
        l = rand_layout(rng)
        n = size_of(l)
        r = rng.random()
        if r < 0.7:
            i = rng.randrange(n)
        elif r < 0.95:
            i = n + rng.randint(0, 2 * n)
        else:
            i = -rng.randint(1, n + 1)
        out.append({"op": "idx2crd", "args": [str(i), tup(l.shape)],
                    "result": tup(pc.idx2crd(i, l.shape)), "offsets": None, "error": None})
    return out


def gen_cosize(rng):
    out = []
    for k in range(CASES_PER_OP):
        l = rand_layout(rng, neg=0.25)
        out.append({"op": "cosize", "args": [lay(l)], "result": pc.cosize(l), "offsets": None,
                    "error": None})
    return out


def gen_coalesce(rng):
    out = [case("coalesce", [lay(mk(s))], pc.coalesce, mk(s)) for s in DOC_COALESCE]
    while len(out) < CASES_PER_OP:
        r = rng.random()
        if r < 0.4:
            l = compact_layout(rng, max_leaves=5)
        elif r < 0.6:
            l = injective_layout(rng, max_leaves=5)
        else:
            l = rand_layout(rng, max_leaves=5, neg=0.15, zero=0.15)
        out.append(case("coalesce", [lay(l)], pc.coalesce, l))
    return out


def rand_profile(rng, shape):
    """A profile for by-mode coalesce: covers the first k top-level modes of `shape`."""
    if not isinstance(shape, tuple):
        return 1
    k = rng.randint(1, len(shape))
    items = []
    for s in shape[:k]:
        if isinstance(s, tuple) and rng.random() < 0.4:
            items.append(tuple(1 for _ in s))
        else:
            items.append(1)
    return tuple(items)


def gen_coalesce_profile(rng):
    out = []
    while len(out) < CASES_PER_OP:
        l = compact_layout(rng, max_leaves=6) if rng.random() < 0.5 else rand_layout(
            rng, max_leaves=6, zero=0.15)
        if not isinstance(l.shape, tuple):
            continue
        p = rand_profile(rng, l.shape)
        out.append(case("coalesce_profile", [lay(l), tup(p)], pc.coalesce, l, p))
    return out


def gen_filter(rng):
    out = [case("filter", [lay(mk(s))], pc.filter, mk(s)) for s in DOC_COALESCE]
    while len(out) < CASES_PER_OP:
        l = rand_layout(rng, max_leaves=5, neg=0.1, zero=0.3)
        out.append(case("filter", [lay(l)], pc.filter, l))
    return out


def admissible_rhs(rng, a, max_size=64):
    """A right operand for composition with `a`, usually meeting the divisibility rules:
    strides from the prefix products of a's flat shape, shapes that divide what is left."""
    fs = [s for s in flat(a.shape) if s != 1] or [1]
    prefixes = [1]
    for s in fs:
        prefixes.append(prefixes[-1] * s)
    modes = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.7:
            d = rng.choice(prefixes[:-1]) * rng.choice([1, 1, 1, 2])
        else:
            d = rng.choice([0, 1, 2, 3, 4, 6, 8])
        s = rng.choice([1, 2, 2, 3, 4, 4, 8])
        modes.append((s, d))
    while flat_size(modes) > max_size:
        modes.pop()
    if not modes:
        modes = [(rng.choice([2, 4]), 1)]
    return nest(rng, modes)


def gen_composition(rng):
    out = []
    for a, b in DOC_COMPOSITION:
        out.append(case("composition", [lay(mk(a)), lay(mk(b))], pc.composition, mk(a), mk(b)))
    while len(out) < CASES_PER_OP:
        r = rng.random()
        a = compact_layout(rng) if r < 0.4 else (
            injective_layout(rng) if r < 0.7 else rand_layout(rng, neg=0.1, zero=0.1))
        b = admissible_rhs(rng, a) if rng.random() < 0.75 else rand_layout(
            rng, max_leaves=3, max_size=32, neg=0.1)
        out.append(case("composition", [lay(a), lay(b)], pc.composition, a, b))
    return out


def rand_by_mode_tiler(rng, a, per_mode, allow_short=True, allow_none=True, allow_int=True):
    """A by-mode tiler for `a` (a tuple-shaped layout): one item per top-level mode (sometimes
    fewer), each a layout made by `per_mode(mode)`, `None` (`_`), or an integer."""
    modes = [a[i] for i in range(len(a))]
    k = len(modes)
    if allow_short and k > 1 and rng.random() < 0.15:
        k = rng.randint(1, k - 1)
    items = []
    for m in modes[:k]:
        r = rng.random()
        if allow_none and r < 0.15:
            items.append(None)
        elif allow_int and r < 0.3:
            n = size_of(m)
            divs = [d for d in range(1, n + 1) if n % d == 0]
            items.append(rng.choice(divs))
        else:
            items.append(per_mode(m))
    return tuple(items)


def gen_composition_tiler(rng):
    out = []
    for a, t in DOC_CUTE_COMPOSITION_TILER:
        a, t = mk(a), doc_tiler(t)
        out.append(case("composition_tiler", [lay(a), tiler(t)], pc.composition, a, t))
    while len(out) < CASES_PER_OP:
        a = compact_layout(rng, max_leaves=5) if rng.random() < 0.6 else injective_layout(
            rng, max_leaves=5)
        if not isinstance(a.shape, tuple):
            continue
        t = rand_by_mode_tiler(rng, a, lambda m: admissible_rhs(rng, m, 16))
        out.append(case("composition_tiler", [lay(a), tiler(t)], pc.composition, a, t))
    return out


def gen_complement(rng):
    out = []
    for s in DOC_COMPLEMENT:
        l = mk(s)
        out.append(case("complement_default", [lay(l)], pc.complement, l))
        cot = max(1, l.cosize()) * 2
        out.append(case("complement", [lay(l), str(cot)], pc.complement, l, cot))
    for spec, cot in DOC_CUTE_COMPLEMENT:
        l = mk(spec)
        out.append(case("complement", [lay(l), str(cot)], pc.complement, l, cot))
    # docs/cute_semantics.md, pitfall 7: non-injective input (pycute gives a 0 extent),
    # non-divisible chain
    for s, cot in [(((2, 2), (2, 3)), 19), (((4, 2), (1, 6)), 14), (((2, 2), (1, 1)), 8)]:
        l = mk(s)
        out.append(case("complement", [lay(l), str(cot)], pc.complement, l, cot))
    while len(out) < 2 * CASES_PER_OP:
        r = rng.random()
        if r < 0.65:
            l = injective_layout(rng, max_leaves=4, max_size=64, gaps=0.4)
        elif r < 0.8:
            l = injective_layout(rng, max_leaves=4, max_size=64, gaps=0.3, nondiv=0.4)
        else:
            l = rand_layout(rng, max_leaves=3, max_size=32, neg=0.05, zero=0.2)
        if rng.random() < 0.3:
            out.append(case("complement_default", [lay(l)], pc.complement, l))
        else:
            cs = max(1, pc.cosize(l))
            cot = rng.choice([1, cs, cs + rng.randint(1, 10), cs * rng.choice([2, 3, 4])])
            cot = min(cot, 512)
            out.append(case("complement", [lay(l), str(cot)], pc.complement, l, cot))
    return out


def gen_right_inverse(rng):
    out = [case("right_inverse", [lay(mk(s))], pc.right_inverse, mk(s)) for s in DOC_INVERSE]
    while len(out) < CASES_PER_OP:
        r = rng.random()
        if r < 0.5:
            l = compact_layout(rng, max_leaves=5)
        elif r < 0.75:
            l = injective_layout(rng, max_leaves=5, gaps=0.4)
        else:
            l = rand_layout(rng, max_leaves=4, neg=0.1, zero=0.2)
        out.append(case("right_inverse", [lay(l)], pc.right_inverse, l))
    return out


def gen_left_inverse(rng):
    out = [case("left_inverse", [lay(mk(s))], pc.left_inverse, mk(s)) for s in DOC_INVERSE]
    while len(out) < CASES_PER_OP:
        r = rng.random()
        if r < 0.45:
            l = compact_layout(rng, max_leaves=4, max_size=64)
        elif r < 0.8:
            l = injective_layout(rng, max_leaves=4, max_size=64, gaps=0.4)
        elif r < 0.9:
            l = injective_layout(rng, max_leaves=3, max_size=64, gaps=0.3, nondiv=0.5)
        else:
            l = rand_layout(rng, max_leaves=3, max_size=32, neg=0.05, zero=0.2)
        out.append(case("left_inverse", [lay(l)], pc.left_inverse, l))
    # Overlapping modes (not injective): `(s0,s1):(d0*k,k)` with `d0 < s1`.
    extra = random.Random(SEED + 1000)
    for _ in range(40):
        s0, s1, k = extra.randint(2, 4), extra.randint(2, 8), extra.choice([1, 1, 2, 3])
        l = Layout((s0, s1), (extra.randint(1, s1 - 1) * k, k))
        out.append(case("left_inverse", [lay(l)], pc.left_inverse, l))
    return out


def divisor_tiler_layout(rng, n):
    """A 1-D tiler for a domain of size n: mostly `d:1`, `d:k` or `(a,b):(1,c)` that tile n."""
    divs = [d for d in range(1, n + 1) if n % d == 0]
    r = rng.random()
    d = rng.choice(divs)
    if r < 0.45 or d == 1:
        return Layout(d, 1)
    if r < 0.7:
        k = rng.choice([e for e in divs if (n // d) % e == 0] or [1])
        return Layout(d, k)
    rest = n // d
    sub = [e for e in range(2, rest + 1) if rest % e == 0]
    if sub and d > 1:
        b = rng.choice(sub)
        return Layout((d, b), (1, d * rng.choice([1, 2] if rest % (2 * b) == 0 else [1])))
    return Layout(d, 1)


def gen_divide(rng, op, f):
    out = []
    for a, t in DOC_CUTE_DIVIDE:
        a, t = mk(a), doc_tiler(t)
        out.append(case(op, [lay(a), tiler(t)], f, a, t))
    while len(out) < CASES_PER_OP:
        r = rng.random()
        a = compact_layout(rng, max_leaves=5) if r < 0.55 else (
            injective_layout(rng, max_leaves=5) if r < 0.85 else rand_layout(rng, max_leaves=4))
        if rng.random() < 0.35 or not isinstance(a.shape, tuple):
            t = divisor_tiler_layout(rng, size_of(a))
            if rng.random() < 0.1:
                t = Layout(rng.randint(2, 9), 1)  # not dividing: the rest mode rounds up
        else:
            t = rand_by_mode_tiler(rng, a, lambda m: divisor_tiler_layout(rng, size_of(m)),
                                   allow_int=True)
        out.append(case(op, [lay(a), tiler(t)], f, a, t))
    return out


def small_product_rhs(rng, a):
    n = max(1, 128 // max(1, size_of(a)))
    r = rng.random()
    if r < 0.5:
        return compact_layout(rng, max_leaves=2, max_size=min(n, 16))
    if r < 0.8:
        return injective_layout(rng, max_leaves=2, max_size=min(n, 16), gaps=0.3)
    return rand_layout(rng, max_leaves=2, max_size=min(n, 8), neg=0.0, zero=0.2)


def gen_product(rng, op, f):
    out = []
    for a, t in DOC_CUTE_PRODUCT:
        a, t = mk(a), doc_tiler(t)
        out.append(case(op, [lay(a), tiler(t)], f, a, t))
    if op == "logical_product":
        for a, b in DOC_PRODUCT:
            out.append(case(op, [lay(mk(a)), tiler(mk(b))], f, mk(a), mk(b)))
        # pycute 4.2.0.0 sends an integer right operand to logical_divide
        # (docs/cute_semantics.md, pitfall 10)
        for a, n in [(((2, 5), (5, 1)), 4), ((3, 2), 4), ((3, 1), 4)]:
            out.append(case(op, [lay(mk(a)), str(n)], f, mk(a), n))
    while len(out) < CASES_PER_OP:
        a = compact_layout(rng, max_leaves=3, max_size=32) if rng.random() < 0.6 else (
            injective_layout(rng, max_leaves=3, max_size=32))
        if rng.random() < 0.5 or not isinstance(a.shape, tuple):
            b = small_product_rhs(rng, a)
            t = b
        else:
            # Each item multiplies one mode; keep the total small.
            t = rand_by_mode_tiler(
                rng, a, lambda m: compact_layout(rng, max_leaves=1, max_size=4),
                allow_short=True, allow_int=False)
        out.append(case(op, [lay(a), tiler(t)], f, a, t))
    return out


# ---------------------------------------------------------------------------------------------
# Swizzles


def gen_swizzle(rng):
    out = []
    params = []
    for b in range(0, 4):
        for m in range(0, 5):
            for s in range(-5, 6):
                if abs(s) >= b and s != 0:
                    params.append((b, m, s))
    rng.shuffle(params)
    for b, m, s in params[:120]:
        sw = pc.Swizzle(b, m, s)
        n = 1 << (b + m + abs(s))
        idx = list(range(min(n, 256))) + [n + rng.randrange(n) for _ in range(4)]
        out.append({"op": "swizzle", "args": [swz(sw)], "result": None, "offsets": None,
                    "error": None, "indices": idx, "values": [sw(i) for i in idx]})
    for k in range(300):
        b, m, s = rng.choice(params)
        sw = pc.Swizzle(b, m, s)
        inner = compact_layout(rng, max_leaves=3, max_size=128) if rng.random() < 0.7 else (
            injective_layout(rng, max_leaves=3, max_size=128))
        off = 0 if rng.random() < 0.7 else rng.randint(1, 64)
        cl = pc.ComposedLayout(sw, off, inner)
        text = "%s o %d o %s" % (swz(sw), off, lay(inner))
        out.append({"op": "composed_eval", "args": [text], "result": None,
                    "offsets": [cl(i) for i in range(pc.size(cl))], "error": None,
                    "size": pc.size(cl), "pycute_cosize": cl.cosize()})
    return out


OPS = [
    ("eval", gen_eval),
    ("crd2idx", gen_crd2idx),
    ("idx2crd", gen_idx2crd),
    ("cosize", gen_cosize),
    ("coalesce", gen_coalesce),
    ("coalesce_profile", gen_coalesce_profile),
    ("filter", gen_filter),
    ("composition", gen_composition),
    ("composition_tiler", gen_composition_tiler),
    ("complement", gen_complement),
    ("right_inverse", gen_right_inverse),
    ("left_inverse", gen_left_inverse),
    ("logical_divide", lambda r: gen_divide(r, "logical_divide", pc.logical_divide)),
    ("zipped_divide", lambda r: gen_divide(r, "zipped_divide", pc.zipped_divide)),
    ("tiled_divide", lambda r: gen_divide(r, "tiled_divide", pc.tiled_divide)),
    ("logical_product", lambda r: gen_product(r, "logical_product", pc.logical_product)),
    ("zipped_product", lambda r: gen_product(r, "zipped_product", pc.zipped_product)),
    ("tiled_product", lambda r: gen_product(r, "tiled_product", pc.tiled_product)),
    ("swizzle", gen_swizzle),
]


def dump(path, cases):
    """One case per line, so a diff of regenerated data shows exactly which cases changed."""
    header = {
        "generator": "tools/pycute_vectors.py",
        "reference": PYCUTE_PACKAGE + " (pycute)",
        "seed": SEED,
        "count": len(cases),
    }
    lines = [json.dumps(c, separators=(",", ":"), sort_keys=True) for c in cases]
    with open(path, "w") as f:
        f.write("{\"meta\":" + json.dumps(header, sort_keys=True) + ",\n\"cases\":[\n")
        f.write(",\n".join(lines))
        f.write("\n]}\n")


def main():
    sys.setrecursionlimit(200)  # Swizzle(0,0,0) recurses forever in pycute; fail fast
    layout_cases, swizzle_cases = [], []
    for k, (name, gen) in enumerate(OPS):
        cases = gen(random.Random(SEED + k))
        (swizzle_cases if name == "swizzle" else layout_cases).extend(cases)
    os.makedirs(os.path.dirname(OUT_LAYOUT), exist_ok=True)
    dump(OUT_LAYOUT, layout_cases)
    dump(OUT_SWIZZLE, swizzle_cases)
    for path in (OUT_LAYOUT, OUT_SWIZZLE):
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
