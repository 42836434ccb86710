"""The CPU implementations of tessera's PyTorch ops: the float64 reference of the kernels'
library (``evaluate_epilogue``, the same evaluator the Rust tests check the GPU against),
run on CPU tensors. They make the ops' plumbing (argument handling, outputs, autograd,
``torch.compile``) testable without a GPU; they are slow and meant for small problems.

Bit masks are int32 words, rows of D's storage order padded to 128 bits, bit ``j % 32`` of
word ``j // 32`` for column ``j`` (cuBLASLt's ReLU mask).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ._gemm import Problem, describe, output_specs, words_per_row

__all__ = ["gemm", "pack_mask", "unpack_mask"]


def _torch():
    import torch

    return torch


def pack_mask(bits, major: str = "row"):
    """``(.., rows, cols)`` booleans as the words of a bit mask in ``major`` order."""
    torch = _torch()
    if major == "col":
        bits = bits.transpose(-1, -2)
    inner = bits.shape[-1]
    w = words_per_row(inner)
    padded = torch.zeros(bits.shape[:-1] + (w * 32,), dtype=torch.int64)
    padded[..., :inner] = bits.to(torch.int64)
    shifts = torch.arange(32, dtype=torch.int64)
    words = (padded.reshape(bits.shape[:-1] + (w, 32)) << shifts).sum(-1)
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)


def unpack_mask(words, rows: int, cols: int, major: str = "row"):
    """The ``(.., rows, cols)`` booleans of a bit mask's words in ``major`` order."""
    torch = _torch()
    inner = cols if major == "row" else rows
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(32, dtype=torch.int64)
    bits = ((w.unsqueeze(-1) >> shifts) & 1).reshape(words.shape[:-1] + (-1,))[..., :inner]
    bits = bits.to(torch.bool)
    return bits.transpose(-1, -2) if major == "col" else bits


def _flat(t) -> Optional[List[float]]:
    if t is None:
        return None
    torch = _torch()
    return t.detach().to(torch.float64).reshape(-1).tolist()


_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "words": "int32"}


def gemm(
    p: Problem,
    a,
    b,
    epilogue: str,
    inputs: Dict[str, Any],
    alpha: float,
    beta: float,
) -> List[Any]:
    """``D = epilogue(a b)`` and the epilogue's other outputs, in float64, rounded to the
    outputs' types; ``inputs`` maps epilogue names (``bias_col``, ``aux_in_bits``, ...) to
    tensors."""
    torch = _torch()
    desc = describe(epilogue)
    nb = p.batches
    a64 = a.detach().to(torch.float64)
    b64 = b.detach().to(torch.float64)
    if a64.dim() == 2:
        a64 = a64.expand(nb, p.m, p.k)
    if b64.dim() == 2:
        b64 = b64.expand(nb, p.k, p.n)
    acc = torch.bmm(a64, b64)

    def full(t):
        if t is None:
            return None
        t = t.detach().to(torch.float64)
        return _flat(t.expand(nb, p.m, p.n) if t.dim() == 2 else t)

    def vec(t):
        return None if t is None else _flat(t)

    bits = inputs.get("aux_in_bits")
    if bits is not None:
        if bits.dim() == 2:
            bits = bits.expand((nb,) + tuple(bits.shape))
        bits = unpack_mask(bits, p.m, p.n, p.d).reshape(-1).tolist()
    out = _native_evaluate(
        desc["text"], p.m, p.n, nb, p.k, alpha, beta, _flat(acc),
        c=full(inputs.get("c")) if beta != 0 else None,
        residual=full(inputs.get("residual")),
        aux_in=full(inputs.get("aux_in")),
        aux_in_bits=bits,
        bias_row=vec(inputs.get("bias_row")),
        bias_col=vec(inputs.get("bias_col")),
        a=_flat(a64) if "a" in desc["sum_k"] else None,
        b=_flat(b64) if "b" in desc["sum_k"] else None,
    )
    results = []
    for name, shape, dtype in output_specs(p, desc):
        key = {"out": "d"}.get(name, name)
        values = torch.tensor(out[key], dtype=torch.float64)
        if dtype == "words":
            t = pack_mask(values.reshape(nb, p.m, p.n) != 0, p.d)
        else:
            t = values.to(getattr(torch, _DTYPES[dtype]))
        results.append(t.reshape(shape).contiguous())
    return results


def _native_evaluate(*args, **kwargs) -> Dict[str, Any]:
    from .._tessera import evaluate_epilogue

    return evaluate_epilogue(*args, **kwargs)
