"""Helpers shared by the replays: where the repository is, the `tessera` binary, CuTe text of
a Python result, and a reader of `tessera eval`'s expression language that builds each
expression out of calls to the Python API."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any, List, Optional

import pytest

import tessera.layout as tl

ROOT = Path(__file__).resolve().parents[2]


def tessera_bin() -> Optional[Path]:
    """The `tessera` binary: `$TESSERA_BIN`, else the debug or release build of this
    repository (`cargo build` makes it)."""
    if os.environ.get("TESSERA_BIN"):
        return Path(os.environ["TESSERA_BIN"])
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "tessera"
        if p.exists():
            return p
    return None


def require_bin() -> Path:
    """The binary, or a skip saying why; in CI (`TESSERA_REQUIRE_BIN=1`) a missing binary is
    a failure, so the comparison cannot pass by not running."""
    p = tessera_bin()
    if p is None:
        msg = "no tessera binary (run `cargo build`, or set TESSERA_BIN)"
        if os.environ.get("TESSERA_REQUIRE_BIN") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return p


def eval_lines(exprs: List[str]) -> List[str]:
    """`tessera eval -` over the expressions: one output line each, in order."""
    out = subprocess.run(
        [str(require_bin()), "eval", "-"],
        input="".join(e + "\n" for e in exprs),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(exprs), "tessera eval - printed a line per expression"
    return out


def cute_text(v: Any) -> str:
    """A result of the Python API as `tessera eval` prints it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, tuple)):
        return str(tl.IntTuple(v))
    if isinstance(v, list):
        return "[" + ",".join(str(x) for x in v) + "]"
    return str(v)


# ---------------------------------------------------------------------------------------------
# The expression language, read into calls of the Python API


_TOKEN = re.compile(r"\s*(?:(?P<int>[-+]?\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<sym>[()<>,:∘]))")


class Syntax(Exception):
    """Text this reader does not accept (the replay then expects a `ParseError`)."""


def tokens(src: str) -> List[str]:
    out, pos = [], 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN.match(src, pos)
        if not m:
            raise Syntax(f"bad character at {pos} in {src!r}")
        out.append(m.group(m.lastgroup))
        pos = m.end()
    return out


class Reader:
    """Recursive descent over the grammar of `src/expr/parse.rs`; each construct becomes the
    Python call a user would write: `(2,3)` a tuple, `S:D` `Layout(S, D)`, `<a,_,b>`
    `Tiler((a, None, b))`, `Sw<B,M,S>` `Swizzle(B, M, S)`, `Sw o off o L`
    `ComposedLayout(Sw, off, L)`, and `name(args)` `tessera.layout.name(*args)`."""

    def __init__(self, src: str):
        self.toks = tokens(src)
        self.i = 0

    def peek(self) -> Optional[str]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        t = self.peek()
        if t is None:
            raise Syntax("unexpected end")
        self.i += 1
        return t

    def expect(self, t: str) -> None:
        if self.take() != t:
            raise Syntax(f"expected {t!r}")

    def whole(self) -> Any:
        v = self.expr()
        if self.peek() is not None:
            raise Syntax(f"trailing {self.peek()!r}")
        return v

    def expr(self) -> Any:
        v = self.layout()
        if self.peek() in ("o", "∘"):
            if not isinstance(v, tl.Swizzle):
                raise Syntax("`o` after something that is not a swizzle")
            self.take()
            second = self.layout()
            if self.peek() in ("o", "∘"):
                self.take()
                return tl.ComposedLayout(v, second, self.layout())
            return tl.ComposedLayout(v, 0, second)
        return v

    def layout(self) -> Any:
        v = self.primary()
        if self.peek() == ":":
            self.take()
            return tl.Layout(v, self.primary())
        return v

    def items(self, close: str) -> List[Any]:
        out: List[Any] = []
        if self.peek() == close:
            self.take()
            return out
        while True:
            if close == ">" and self.peek() == "_":
                self.take()
                out.append(None)
            else:
                out.append(self.expr())
            t = self.take()
            if t == close:
                return out
            if t != ",":
                raise Syntax(f"expected ',' or {close!r}")

    def primary(self) -> Any:
        t = self.take()
        if re.fullmatch(r"[-+]?\d+", t):
            return int(t)
        if t == "(":
            return tuple(self.items(")"))
        if t == "<":
            return tl.Tiler(tuple(self.items(">")))
        if t == "Sw":
            self.expect("<")
            b = int(self.take_int())
            self.expect(",")
            m = int(self.take_int())
            self.expect(",")
            s = int(self.take_int())
            self.expect(">")
            return tl.Swizzle(b, m, s)
        if re.fullmatch(r"[A-Za-z_]\w*", t) and self.peek() == "(":
            if t not in dict(tl.FUNCTIONS):
                raise Syntax(f"unknown function {t}")
            self.take()
            return getattr(tl, t)(*self.items(")"))
        raise Syntax(f"unexpected {t!r}")

    def take_int(self) -> str:
        t = self.take()
        if not re.fullmatch(r"[-+]?\d+", t):
            raise Syntax("expected an integer")
        return t


def python_eval(src: str) -> Any:
    """The expression `src` evaluated by calls of the Python API."""
    return Reader(src).whole()
