"""The Rust suite's reference data, replayed through the Python API.

1. `layout/tests/data/pycute_layout.json` (randomized cases answered by pycute): every case
   is called through `tessera.layout` and must give exactly what `tessera eval` gives for the
   same expression (the Rust differential test, `layout/tests/differential.rs`, judges those
   answers against pycute). Independently of the Rust side: evaluation, coordinates and
   cosize are compared with pycute's values (where pycute and C++ part ways, with the C++
   rule), and every layout the Python API returns is held to its operation's post-condition
   by the Python checkers.
2. `layout/tests/data/pycute_swizzle.json`: swizzles and swizzled layouts as functions, and
   the exact cosize against the span of pycute's offsets.
3. `tests/eval_cli.rs`: every `ok(EXPR, EXPECTED)` of the command-line tests (answers worked
   out by hand there) rebuilt as Python calls must print EXPECTED; every `fails(EXPR, CODE,
   OP)` must raise a `LayoutError` of operation OP (a `ParseError` for a syntax error).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import postconditions as pc
import tessera
import tessera.layout as tl
from cli import ROOT, Syntax, cute_text, eval_lines, python_eval
from tessera.layout import ComposedLayout, IntTuple, Layout, Swizzle, Tiler

DATA = ROOT / "layout" / "tests" / "data"


def load(name: str) -> List[Dict[str, Any]]:
    cases = json.loads((DATA / name).read_text())["cases"]
    assert len(cases) > 100, f"{name} lost its cases"
    return cases


def tiler(text: str) -> Any:
    """A tiler argument of the data as a Python user writes it: a `Layout`, a shape tuple,
    or a tuple of layouts, shapes and `None`."""
    if text.startswith("<"):
        return as_tuple(Tiler(text))
    if ":" in text:
        return Layout(text)
    return IntTuple(text).value


def as_tuple(t: Any) -> Any:
    if isinstance(t, Tiler):
        return tuple(as_tuple(t[i]) for i in range(len(t)))
    return t


def checker_tiler(t: Any) -> Any:
    """The tiler as the checkers take it: a `Layout`, `None`, or a tuple of those (a shape
    becomes CuTe's by-mode tiler of `n:1` layouts)."""
    if isinstance(t, int):
        return Layout(t, 1)
    if isinstance(t, tuple):
        return tuple(checker_tiler(x) for x in t)
    return t


# op -> (the Python call, the `tessera eval` expression, the post-condition checker)
Replay = Tuple[Callable[[], Any], str, Optional[Callable[[Any], None]]]


def replay(c: Dict[str, Any]) -> Replay:
    op, args = c["op"], c["args"]
    if op in ("coalesce", "filter", "right_inverse", "left_inverse", "complement_default"):
        l = Layout(args[0])
        name = "complement" if op == "complement_default" else op
        check = {
            "coalesce": lambda r: pc.check_coalesce(l, r),
            "filter": lambda r: pc.check_filter(l, r),
            "right_inverse": lambda r: pc.check_right_inverse(l, r),
            "left_inverse": lambda r: pc.check_left_inverse(l, r),
            # C++'s default cotarget: cosize(filter(L)).
            "complement_default": lambda r: pc.check_complement(l, tl.filter(l).cosize(), r),
        }[op]
        return (lambda: getattr(tl, name)(l), f"{name}({args[0]})", check)
    if op == "coalesce_profile":
        l, p = Layout(args[0]), IntTuple(args[1]).value
        return (
            lambda: tl.coalesce(l, p),
            f"coalesce({args[0]}, {args[1]})",
            lambda r: pc.check_coalesce_profile(l, p, r),
        )
    if op == "complement":
        l, m = Layout(args[0]), int(args[1])
        return (
            lambda: tl.complement(l, m),
            f"complement({args[0]}, {m})",
            lambda r: pc.check_complement(l, m, r),
        )
    if op == "composition":
        a, b = Layout(args[0]), Layout(args[1])
        return (
            lambda: tl.composition(a, b),
            f"composition({args[0]}, {args[1]})",
            lambda r: pc.check_composition(a, b, r),
        )
    if op == "composition_tiler":
        a, t = Layout(args[0]), tiler(args[1])
        return (
            lambda: tl.composition(a, t),
            f"composition({args[0]}, {args[1]})",
            lambda r: pc.check_composition_tiler(a, checker_tiler(t), r),
        )
    checks = {
        "logical_divide": pc.check_logical_divide,
        "zipped_divide": pc.check_zipped_divide,
        "tiled_divide": pc.check_tiled_divide,
        "logical_product": pc.check_logical_product,
        "zipped_product": pc.check_zipped_product,
        "tiled_product": pc.check_tiled_product,
    }
    if op in checks:
        l, t = Layout(args[0]), tiler(args[1])
        return (
            lambda: getattr(tl, op)(l, t),
            f"{op}({args[0]}, {args[1]})",
            lambda r: checks[op](l, checker_tiler(t), r),
        )
    raise AssertionError(f"unknown op {op}")


def run(f: Callable[[], Any]) -> Tuple[Optional[Any], Optional[tessera.LayoutError]]:
    try:
        return f(), None
    except tessera.LayoutError as e:
        assert not isinstance(e, tessera.InternalError), e
        return None, e


ALGEBRA_OPS = {
    "coalesce",
    "coalesce_profile",
    "filter",
    "composition",
    "composition_tiler",
    "complement",
    "complement_default",
    "right_inverse",
    "left_inverse",
    "logical_divide",
    "zipped_divide",
    "tiled_divide",
    "logical_product",
    "zipped_product",
    "tiled_product",
}


def test_pycute_layout_vectors_algebra_as_in_rust():
    cases = [c for c in load("pycute_layout.json") if c["op"] in ALGEBRA_OPS]
    replays = [replay(c) for c in cases]
    rust = eval_lines([expr for _, expr, _ in replays])
    tally: Counter = Counter()
    failures: List[str] = []
    for c, (call, expr, check), want in zip(cases, replays, rust):
        got, err = run(call)
        if err is not None:
            # The same refusal, from the same operation.
            if not want.startswith(f"error: {err.op}: "):
                failures.append(f"{expr}: Python raised {err!r}, tessera eval printed {want}")
            tally[c["op"], "refused"] += 1
            continue
        if cute_text(got) != want:
            failures.append(f"{expr}: Python {cute_text(got)}, tessera eval {want}")
            continue
        try:
            if check is not None:
                check(got)
        except AssertionError as e:
            failures.append(f"{expr} = {got}: post-condition: {e}")
            continue
        # For the summary only: the Rust test judges each difference from pycute.
        theirs = c["result"]
        if theirs is None:
            what = "pycute raised"
        elif pc.offsets(Layout(theirs)) == pc.offsets(got):
            what = "agrees with pycute"
        else:
            what = "differs from pycute"
        tally[c["op"], what] += 1
    print("\n".join(f"{op:<20} {what:<22} {n}" for (op, what), n in sorted(tally.items())))
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:40])
    assert sum(tally.values()) == len(cases)


def test_pycute_layout_vectors_evaluation():
    # Evaluation, coordinates and cosize have one right answer; pycute's is it except where
    # Python's floor division differs from C++'s truncation (negative indices), where the
    # answer of an integral shape is C++'s index as is, and where pycute's cosize is
    # L(size-1)+1 (negative strides): there the C++ rule is the expectation.
    failures: List[str] = []
    n = Counter()
    for c in load("pycute_layout.json"):
        op, args = c["op"], c["args"]
        if op == "eval":
            l = Layout(args[0])
            if l.offsets() != c["offsets"]:
                failures.append(f"offsets of {l}")
            for i, v in zip(c["indices"], c["values"]):
                want = v if i >= 0 else pc.at(l, i)
                if l(i) != want:
                    failures.append(f"{l}({i}) = {l(i)}, expected {want}")
        elif op == "crd2idx":
            l, coord = Layout(args[0]), IntTuple(args[1]).value
            if tl.crd2idx(coord, l) != c["result"] or l(coord) != c["result"]:
                failures.append(f"crd2idx({args[1]}, {l})")
        elif op == "idx2crd":
            i, shape = int(args[0]), IntTuple(args[1]).value
            got = tl.idx2crd(i, shape)
            if isinstance(shape, int):
                want = i
            elif i < 0:
                want = cxx_idx2crd(i, shape)
            else:
                want = IntTuple(c["result"]).value
            if got != want:
                failures.append(f"idx2crd({i}, {args[1]}) = {got}, expected {want}")
        elif op == "cosize":
            l = Layout(args[0])
            o = pc.offsets(l)
            want = max(o) - min(o) + 1
            if any(d < 0 for d in pc.leaves(l.stride)):
                pass  # pycute's L(size-1)+1 is not the extent; the span is.
            else:
                assert c["result"] == want, f"data: cosize of {l} is not its span"
            if l.cosize() != want or tl.cosize(l) != want:
                failures.append(f"cosize({l}) = {l.cosize()}, span {want}")
        else:
            continue
        n[op] += 1
    assert min(n[op] for op in ("eval", "crd2idx", "idx2crd", "cosize")) >= 100, n
    assert not failures, "\n".join(failures[:40])


def cxx_idx2crd(i: int, shape: Any) -> Any:
    """C++'s idx2crd: each leaf `(i / d) % s` (truncating) with `d` the prefix product of the
    extents before it."""
    out = []
    d = 1
    for s in pc.leaves(shape):
        out.append(pc.trem(pc.tdiv(i, d), s))
        d *= s
    it = iter(out)

    def rebuild(t):
        return next(it) if isinstance(t, int) else tuple(rebuild(x) for x in t)

    return rebuild(shape)


def test_pycute_swizzle_vectors():
    n = Counter()
    for c in load("pycute_swizzle.json"):
        text = c["args"][0]
        if c["op"] == "swizzle":
            sw = Swizzle(text)
            assert str(sw) == text
            assert [sw(x) for x in c["indices"]] == c["values"], text
            assert [tl.eval(sw, x) for x in c["indices"][:4]] == c["values"][:4], text
        elif c["op"] == "composed_eval":
            l = ComposedLayout(text)
            want = c["offsets"]
            assert l.size() == c["size"] and l.offsets() == want, text
            assert [l(i) for i in range(l.size())] == want, text
            lo, hi = min(want), max(want)
            assert l.cosize() == hi - lo + 1, text
            assert tl.image_bounds(l) == (lo, hi), text
            # pycute's cosize is 2^(B+M+|S|), not the image's extent.
            sw = l.layout_a
            assert c["pycute_cosize"] == 1 << (sw.bits + sw.base + abs(sw.shift))
        else:
            raise AssertionError(f"unknown op {c['op']}")
        n[c["op"]] += 1
    assert n["swizzle"] >= 100 and n["composed_eval"] >= 100, n


# ---------------------------------------------------------------------------------------------
# The hand-derived tables of tests/eval_cli.rs

_STR = r'"((?:[^"\\]|\\.)*)"'
_OK = re.compile(r"\bok\(\s*" + _STR + r"\s*,\s*" + _STR + r"\s*,?\s*\)")
_FAILS = re.compile(r"\bfails\(\s*" + _STR + r"\s*,\s*(\d+)\s*,\s*" + _STR + r"\s*,?\s*\)")
_EVERY = re.compile(r'\(\s*"(\w+)"\s*,\s*' + _STR + r"\s*,?\s*\)")


def unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


def cli_tables() -> Tuple[List[Tuple[str, str]], List[Tuple[str, int, str]]]:
    src = (ROOT / "tests" / "eval_cli.rs").read_text()
    src = src.split("fn ok(", 1)[1]  # skip the helpers' definitions
    oks = [(unescape(e), unescape(v)) for e, v in _OK.findall(src)]
    fails = [(unescape(e), int(code), op) for e, code, op in _FAILS.findall(src)]
    every = src.split("fn every_function_is_dispatched", 1)[1].split("for (name, _)", 1)[0]
    for _, case in _EVERY.findall(every):
        e, v = unescape(case).split("=", 1)
        oks.append((e, v))
    return oks, fails


def test_eval_cli_tables_through_the_python_api():
    oks, fails = cli_tables()
    assert len(oks) > 200 and len(fails) > 20, "the tables of tests/eval_cli.rs were not found"
    failures = []
    for expr, want in oks:
        try:
            got = cute_text(python_eval(expr))
        except (Syntax, tessera.LayoutError) as e:
            got = f"raised {e!r}"
        if got != want:
            failures.append(f"{expr}: {got}, expected {want}")
    for expr, code, op in fails:
        if code == 2:
            # A syntax error: only the text form has one.
            with pytest.raises(tessera.ParseError) as e:
                tl.evaluate(expr)
            assert e.value.op == "parse"
            continue
        if op == "tuple":
            # `(4, 2:1)` is an error of the text form; in Python a tuple holding a layout is
            # a by-mode tiler.
            continue
        try:
            got = python_eval(expr)
            failures.append(f"{expr}: {cute_text(got)}, expected an error of {op}")
        except tessera.LayoutError as e:
            if e.op != op:
                failures.append(f"{expr}: error of {e.op} ({e}), expected one of {op}")
        except TypeError as e:
            # Python checks the number of arguments itself, before tessera sees the call.
            if not re.search(rf"\b{op}\(\) (missing|takes)", str(e)):
                failures.append(f"{expr}: {e!r}, expected an error of {op}")
    assert not failures, "\n".join(failures)


def test_every_function_of_tessera_eval_is_in_the_python_api():
    # The list comes from the evaluator compiled into the extension, so a function added to
    # `tessera eval` without a Python function fails here.
    names = [n for n, _ in tl.FUNCTIONS]
    assert len(names) >= 50
    missing = [n for n in names if not callable(getattr(tl, n, None))]
    assert not missing, f"tessera eval functions missing from tessera.layout: {missing}"
    undocumented = [n for n in names if not (getattr(tl, n).__doc__ or "").strip()]
    assert not undocumented, undocumented
    assert set(names) - {"eval", "filter"} <= set(tl.__all__)
