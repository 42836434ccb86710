"""The classes of `tessera.layout` as Python objects: construction, text, equality, hashing,
pickling, evaluation, errors, pictures. Expected values come from CuTe's definitions (worked
out in the comments) or from the `tessera` command line, never from the object under test."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import postconditions as pc
import tessera
import tessera.layout as tl
from cli import require_bin
from tessera.layout import (
    BankConflicts,
    ComposedLayout,
    IntTuple,
    Layout,
    Swizzle,
    Tiler,
    TVLayout,
)

# ---------------------------------------------------------------------------------------------
# Construction and text


def test_layout_constructors():
    # No stride: column-major (CuTe's LayoutLeft), strides the prefix products of the shape.
    assert str(Layout(8)) == "8:1"
    assert str(Layout((2, 3))) == "(2,3):(1,2)"
    assert str(Layout(((2, 4), 3))) == "((2,4),3):((1,2),8)"
    assert str(Layout((2, 3), (3, 1))) == "(2,3):(3,1)"
    # A one-element tuple is a rank-1 tuple, `(3)` in CuTe's text.
    assert str(Layout((3,), (1,))) == "(3):(1)"
    assert Layout("((2,4),3):((1,8),2)") == Layout(((2, 4), 3), ((1, 8), 2))
    assert Layout(IntTuple((2, 3)), IntTuple((3, 1))) == Layout((2, 3), (3, 1))
    assert tl.make_layout((2, 3), stride=(3, 1)) == Layout((2, 3), (3, 1))


def test_layout_structure():
    l = Layout(((2, 4), 3), ((1, 8), 2))
    assert l.shape == ((2, 4), 3) and l.stride == ((1, 8), 2)
    # size 2*4*3; cosize 1 + (1*1 + 3*8 + 2*2) = 30; two modes; depth 2.
    assert (l.size(), l.cosize(), l.rank(), l.depth(), len(l)) == (24, 30, 2, 2, 2)
    assert l[0] == Layout((2, 4), (1, 8)) and l[1] == Layout(3, 2)
    assert l[0, 1] == Layout(4, 8)
    assert list(l) == [l[0], l[1]]


def test_layout_evaluation():
    l = Layout(((2, 4), 3), ((1, 8), 2))
    # Index 13 = 1 + 2*(2 + 4*1): coordinate ((1,2),1), offset 1 + 16 + 2.
    assert l(13) == l(((1, 2), 1)) == l((1, 2), 1) == l((5, 1)) == 19
    assert l(13) == pc.at(l, 13)
    # The extended domain: beyond size(L), the last mode goes on (CuTe's L(i) for any i).
    assert Layout(4, 3)(7) == 21


def test_repr_and_pickle_round_trip():
    for v in [
        Layout(((2, 4), 3), ((1, 8), 2)),
        IntTuple((2, (3, 4))),
        Swizzle(3, 4, 3),
        ComposedLayout(Swizzle(3, 4, 3), 8, Layout((8, 64), (64, 1))),
        Tiler((Layout(3, 3), None, 4)),
    ]:
        assert eval(repr(v), vars(tl)) == v, repr(v)
        assert pickle.loads(pickle.dumps(v)) == v
        assert hash(pickle.loads(pickle.dumps(v))) == hash(v)


def test_structural_equality_and_hash():
    a, b = Layout((2, 3), (1, 2)), Layout(6, 1)
    assert a != b and tl.functionally_equal(a, b)  # the same function, not the same layout
    assert a == Layout((2, 3)) and hash(a) == hash(Layout((2, 3)))
    assert len({a, Layout((2, 3)), b}) == 2
    assert Layout(4, 1) != ComposedLayout(Swizzle(0, 0, 0), 0, Layout(4, 1))
    assert Layout(4, 1) != "4:1" and Layout(4, 1) != (4,)
    # A swizzle whose YYY bits are above the image acts as the identity on it.
    assert tl.functionally_equal(ComposedLayout(Swizzle(1, 4, 1), 0, Layout(8, 1)), Layout(8, 1))


def test_int_tuple():
    t = IntTuple((2, (3, 4)))
    assert str(t) == "(2,(3,4))" and t.value == (2, (3, 4))
    assert (t.rank(), t.depth(), t.size(), len(t)) == (2, 2, 24, 2)
    assert t[1] == (3, 4) and t.flatten() == (2, 3, 4)
    assert t == (2, (3, 4)) and hash(t) == hash((2, (3, 4)))
    assert IntTuple("(3)").value == (3,) and IntTuple("3").value == 3
    assert IntTuple(7).is_int() and not t.is_int()
    assert tl.congruent((2, (3, 4)), (5, (6, 7))) and not tl.congruent((2, 3), (2, (3, 1)))
    assert tl.weakly_congruent((8, 3), ((2, 4), 3)) and not tl.weakly_congruent(((2, 4), 3), (8, 3))
    assert tl.compatible(24, ((2, 4), 3)) and not tl.compatible((4, 6), ((2, 4), 3))


def test_swizzle():
    sw = Swizzle(3, 4, 3)
    assert Swizzle("Sw<3,4,3>") == sw and str(sw) == "Sw<3,4,3>"
    assert (sw.bits, sw.base, sw.shift) == (3, 4, 3)
    # YYY = bits 7..9, ZZZ = bits 4..6; 128 has bit 7, which flips bit 4.
    assert (sw.yyy_mask, sw.zzz_mask) == (0b1110000000, 0b1110000)
    assert sw(128) == 144 and sw(15) == 15 and sw(sw(12345)) == 12345


def test_composed_layout():
    inner = Layout((8, 64), (64, 1))
    cl = ComposedLayout(Swizzle(3, 3, 3), 8, inner)
    assert str(cl) == "Sw<3,3,3> o 8 o (8,64):(64,1)"
    assert cl == ComposedLayout(str(cl)) == tl.make_composed_layout(Swizzle(3, 3, 3), 8, inner)
    assert (cl.layout_a, cl.offset, cl.layout_b) == (Swizzle(3, 3, 3), 8, inner)
    assert cl.shape == (8, 64) and cl.size() == 512 and cl.rank() == 2
    # R(c) = Sw(offset + L(c)) at every index.
    sw = Swizzle(3, 3, 3)
    assert all(cl(i) == sw(8 + pc.at(inner, i)) for i in range(cl.size()))
    assert cl((1, 0)) == sw(8 + 64)
    assert cl[0] == ComposedLayout(sw, 8, Layout(8, 64))
    # Offset and layout default as in the text form: `Sw o L` is `Sw o 0 o L`.
    assert ComposedLayout("Sw<1,0,1> o 3:1") == ComposedLayout(Swizzle(1, 0, 1), 0, Layout(3, 1))
    # The image of Sw<1,0,1> o 3:1 is {0, 1, 3}: extent 4 (CuTe C++ says 3, the inner cosize).
    l = ComposedLayout("Sw<1,0,1> o 3:1")
    assert l.offsets() == [0, 1, 3] and l.cosize() == 4 and tl.cosize_inner(l) == 3
    assert not hasattr(cl, "stride")  # CuTe deletes it: a swizzled layout has no stride


def test_tiler_forms_agree():
    t = Tiler((Layout(3, 3), None, 4))
    assert str(t) == "<3:3,_,4:1>" and t == Tiler("<3:3,_,4>")
    assert (t[0], t[1], t[2], len(t)) == (Layout(3, 3), None, Layout(4, 1), 3)
    l = Layout((9, 4, 8), (59, 13, 1))
    # A tuple holding layouts or None is the same tiler as the Tiler object; a shape is the
    # by-mode tiler of n:1 layouts.
    assert tl.logical_divide(l, (Layout(3, 3), None, 4)) == tl.logical_divide(l, t)
    assert tl.logical_divide(l, (3, 2)) == tl.logical_divide(l, Tiler("<3:1,2:1>"))
    assert tl.make_tile(Layout(3, 3), None, 4) == t


def test_bank_conflicts_object():
    r = tl.bank_conflicts(Layout((8, 8), (64, 1)), 2)
    assert isinstance(r, BankConflicts)
    assert (r.wavefronts, r.ideal, str(r), r.is_conflict_free()) == (8, 1, "8/1", False)
    assert r == BankConflicts(8, 1)


def test_evaluate_is_the_calculator():
    assert tl.evaluate("size((2,3))") == 6
    assert tl.evaluate("offsets((2,2):(2,1))") == [0, 2, 1, 3]
    assert tl.evaluate("is_bijective(4:2)") is False
    assert tl.evaluate("shape((2,(3,4)):(1,(2,6)))") == (2, (3, 4))


# ---------------------------------------------------------------------------------------------
# Errors


def raises(cls, f):
    with pytest.raises(cls) as e:
        f()
    assert isinstance(e.value, tessera.LayoutError)
    assert str(e.value).startswith(f"{e.value.op}: "), "the message starts with the operation"
    return e.value


def test_errors_name_the_operation_and_operands():
    e = raises(tessera.InadmissibleError, lambda: tl.composition(Layout((4, 6, 8), (2, 3, 5)), Layout(6, 3)))
    assert e.op == "composition" and "(4,6,8):(2,3,5)" in e.operands and "6:3" in e.operands
    assert e.reason
    e = raises(tessera.MismatchError, lambda: Layout((2, 3), (1,)))
    assert (e.lhs, e.rhs, e.relation) == ("(2,3)", "(1)", "congruent")
    e = raises(tessera.BadShapeError, lambda: Layout(0))
    assert e.shape == "0"
    e = raises(tessera.ParseError, lambda: Layout("(2,3:(1,2)"))
    assert (e.op, e.input, e.pos) == ("parse", "(2,3:(1,2)", 4)
    e = raises(tessera.BadSwizzleError, lambda: Swizzle(3, 4, 2))
    assert (e.bits, e.base, e.shift) == (3, 4, 2)
    e = raises(tessera.OutOfRangeError, lambda: Layout((2, 3))[5])
    assert isinstance(e, IndexError) and e.rank == 2
    e = raises(tessera.IntegerOverflowError, lambda: Layout((1 << 62, 4), (1, 1 << 62)))
    assert isinstance(e, OverflowError)
    raises(tessera.IntegerOverflowError, lambda: Layout(2**70))
    e = raises(tessera.TooLargeError, lambda: tl.functionally_equal(Layout(1 << 25), Layout(1 << 25)))
    assert (e.needed, e.limit) == (1 << 25, tl.ENUMERATION_LIMIT)
    raises(tessera.InadmissibleError, lambda: TVLayout(Layout((2, 2), (2, 1)), (2, 1)))


@pytest.mark.parametrize(
    "bad",
    [True, 2.5, [2, 3], "4:1", object(), (2, 2.5)],
    ids=["bool", "float", "list", "str", "object", "tuple-with-float"],
)
def test_arguments_of_the_wrong_kind_are_type_errors(bad):
    e = raises(tessera.ArgumentError, lambda: tl.composition(Layout(4, 1), bad))
    assert isinstance(e, TypeError) and e.op == "composition"


def test_a_wrong_kind_of_argument_to_a_known_function():
    # The evaluator's own check: a swizzle where a layout is expected.
    e = raises(tessera.ArgumentError, lambda: tl.size(Swizzle(3, 4, 3)))
    assert e.op == "size"


# ---------------------------------------------------------------------------------------------
# Pictures


def show(*args: str) -> str:
    return subprocess.run(
        [str(require_bin()), "show", *args], capture_output=True, text=True, check=True
    ).stdout


def test_print_layout_grid(capsys):
    # (2,2):(1,2): L(0,0)=0, L(0,1)=2, L(1,0)=1, L(1,1)=3, in cells num_digits(4)+2 wide.
    tl.print_layout(Layout((2, 2), (1, 2)))
    assert capsys.readouterr().out == (
        "(2,2):(1,2)\n"
        "      0   1 \n"
        "    +---+---+\n"
        " 0  | 0 | 2 |\n"
        "    +---+---+\n"
        " 1  | 1 | 3 |\n"
        "    +---+---+\n"
    )


@pytest.mark.parametrize(
    "text", ["(4,8):(8,1)", "Sw<3,3,3> o (8,64):(64,1)", "Sw<1,0,1> o 2 o (2,2):(2,1)"]
)
def test_pictures_are_those_of_tessera_show(tmp_path, capsys, text):
    l = ComposedLayout(text) if text.startswith("Sw") else Layout(text)
    tl.print_layout(l)
    out = capsys.readouterr().out
    svg = tmp_path / "cli.svg"
    assert out == show(text, "--svg", str(svg))
    assert l._repr_svg_() == l.svg() == svg.read_text()
    l.to_svg(tmp_path / "py.svg")
    assert (tmp_path / "py.svg").read_text() == svg.read_text()
    banks = tmp_path / "banks.svg"
    show(text, "--svg", str(banks), "--banks", "2")
    assert l.svg(elem_bytes=2) == banks.read_text()


def test_tv_layout_picture(tmp_path):
    # tv(t, v) = 2t + v into a column-major 2x2 tile: row v, column t.
    tv = TVLayout(Layout((2, 2), (2, 1)), (2, 2))
    assert tv.cells() == [[(0, 0), (1, 0)], [(0, 1), (1, 1)]]
    assert tv.layout == Layout((2, 2), (2, 1)) and tv.tile == (2, 2)
    svg = tmp_path / "tv.svg"
    assert str(tv) == show("(2,2):(2,1)", "--tile", "(2,2)", "--svg", str(svg))
    assert tv._repr_svg_() == tv.svg() == svg.read_text()
    assert " 0  | T0V0 | T1V0 |" in str(tv)


def test_no_picture_is_none_not_an_error():
    # Jupyter falls back to the text form when _repr_svg_ returns None.
    assert Layout((2, 2, 2))._repr_svg_() is None
    assert Layout(1 << 20, 1)._repr_svg_() is None
    assert Layout((512, 512))._repr_svg_() is None  # more cells than a picture draws
    with pytest.raises(tessera.InadmissibleError):
        Layout((2, 2, 2)).svg()


# ---------------------------------------------------------------------------------------------
# The package


def test_import_needs_no_torch_and_no_gpu():
    # A fresh interpreter: importing the algebra (and the ops module's skeleton) must not
    # import PyTorch.
    code = (
        "import sys, tessera, tessera.layout as tl;"
        "tl.composition(tl.Layout(8, 2), tl.Layout(4, 2));"
        "import tessera.ops;"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_exceptions_are_tessera_names():
    assert tessera.LayoutError.__module__ == "tessera"
    assert issubclass(tessera.LayoutError, ValueError)
    assert issubclass(tessera.ArgumentError, TypeError)
    for name in ("ParseError", "InadmissibleError", "TooLargeError", "InternalError"):
        assert issubclass(getattr(tessera, name), tessera.LayoutError)


def test_a_panic_is_an_internal_error_not_a_crash():
    from tessera import _tessera

    e = raises(tessera.InternalError, _tessera._panic_for_tests)
    assert "deliberate panic" in str(e) and e.op == "_panic_for_tests"
    # The interpreter and the module go on working.
    assert tl.size(Layout((2, 3))) == 6
