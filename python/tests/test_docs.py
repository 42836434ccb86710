"""`docs/python.md` runs as written: its Python blocks, in order, in one namespace (as the
cells of a notebook), in a scratch directory for the pictures they write."""

from __future__ import annotations

import os
import re

from cli import ROOT

PAGE = ROOT / "docs" / "python.md"


def blocks():
    text = PAGE.read_text()
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 2
        yield line, m.group(1)


def torch_missing() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return os.environ.get("TESSERA_REQUIRE_TORCH") != "1"
    return False


def test_docs_python_md_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = list(blocks())
    assert len(found) >= 10, "docs/python.md lost its examples"
    namespace: dict = {}
    for line, code in found:
        if "import torch" in code and torch_missing():
            break  # the PyTorch section closes the page
        exec(compile(code, f"{PAGE}:{line}", "exec"), namespace)
    pictures = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert pictures == ["row_major_4x8.svg", "sw128_bf16.svg", "tv_2x2.svg"]
    assert all(p.read_text().startswith("<svg") for p in tmp_path.glob("*.svg"))
