"""The examples in the docstrings of `tessera.layout` (each function's worked example) run and
print what they show. The installed module is tested, wherever it was installed from."""

from __future__ import annotations

import doctest

import tessera.layout


def test_layout_docstring_examples():
    r = doctest.testmod(tessera.layout, optionflags=doctest.ELLIPSIS, verbose=False)
    assert r.failed == 0
    assert r.attempted >= 60, "the docstring examples were not found"
