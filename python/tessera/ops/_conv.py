"""``tessera.ops.conv2d``: a 2-D convolution of channels-last tensors with a fused epilogue,
on the kernels' library (``Conv2d``) for CUDA tensors and on the float64 reference for CPU
tensors (slow: for tests).

Every tensor is taken by its logical sizes and strides, as PyTorch describes it: ``x`` is
``(N, C, H, W)``, ``w`` ``(K, C, R, S)``, the output and ``residual`` ``(N, K, P, Q)``, each
with channels-last strides (``x.contiguous(memory_format=torch.channels_last)``). The
strides are checked by the library on every path; a tensor whose memory is NCHW raises a
``ValueError`` naming it, the dimension and both strides, whatever its memory-format flag
says.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple

from . import _gemm

_LOCK = threading.Lock()
_CONVS: Dict[tuple, Any] = {}


def _pair(op: str, name: str, v) -> Tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(e, int) for e in v):
        raise ValueError(f"{op}: argument '{name}' is {v!r}, expected an int or a pair of ints")
    return v


def _padding(op: str, v) -> Tuple[int, int, int, int]:
    """``p``, ``(ph, pw)`` or ``(top, bottom, left, right)``."""
    if isinstance(v, int):
        return (v, v, v, v)
    v = tuple(v)
    if len(v) == 2 and all(isinstance(e, int) for e in v):
        return (v[0], v[0], v[1], v[1])
    if len(v) == 4 and all(isinstance(e, int) for e in v):
        return v
    raise ValueError(f"{op}: argument 'padding' is {v!r}, expected p, (ph, pw) or (top, bottom, left, right)")


def _channels_last(shape) -> Tuple[int, ...]:
    n, k, p, q = shape
    return (p * q * k, 1, q * k, k)


def _arg(t, dtype: str) -> tuple:
    return (t.data_ptr(), dtype, tuple(t.shape), tuple(t.stride()))


def conv2d(x, w, bias=None, residual=None, *, stride=1, padding=0, dilation=1, epilogue: Optional[str] = None,
           c=None, alpha: float = 1.0, beta: float = 0.0, out=None, out_dtype=None):
    """``y = epilogue(conv2d(x, w))`` (cross-correlation, as ``torch.nn.functional.conv2d``,
    groups 1). The epilogue sees the convolution as a GEMM over ``(N·P·Q, K)``: ``acc`` the
    convolution, ``bias_col`` the per-channel ``bias``, ``residual`` a tensor of y's shape,
    ``c`` read as ``beta * c``. Default: ``acc + bias_col`` with a bias, else ``acc``.
    ``bias_residual_relu`` is ``relu(acc + bias_col + residual)`` (the ResNet block) and
    ``bias_relu_residual`` is ``relu(acc + bias_col) + residual``.

    ``padding`` is ``p``, ``(ph, pw)`` or ``(top, bottom, left, right)``. Returns y, channels-
    last, in ``out_dtype`` (default x's), or written into ``out``.
    """
    from . import _ops

    T = _ops()
    torch = T.torch
    op = "conv2d"
    stride_, dilation_, padding_ = _pair(op, "stride", stride), _pair(op, "dilation", dilation), _padding(op, padding)
    if epilogue is None:
        if residual is not None or c is not None:
            raise ValueError(f"{op}: argument 'epilogue' must say how the residual or c enters (e.g. 'bias_residual_relu')")
        epilogue = "acc + bias_col" if bias is not None else "acc"
    if x.dim() != 4 or w.dim() != 4:
        raise ValueError(f"{op}: arguments 'x' and 'w' must be 4-D, (N, C, H, W) and (K, C, R, S); got {tuple(x.shape)} and {tuple(w.shape)}")
    geom = (tuple(x.shape), tuple(w.shape), stride_, padding_, dilation_)
    from .._tessera import conv_check_layout, conv_describe

    d = conv_describe(*geom, epilogue)
    text, out_dims = d["text"], tuple(d["out"])
    desc = _gemm.describe(text)
    if desc["aux"] is not None or desc["bgrad"] or desc["sum_k"]:
        raise ValueError(f"{op}: the epilogue `{text}` writes more than y; conv2d returns y alone")
    given = {"bias_col": bias, "residual": residual, "c": c}
    names = {"bias_col": "bias", "residual": "residual", "c": "c"}
    used = set(desc["inputs"])
    for key, t in given.items():
        if key == "c" and beta == 0.0:
            if t is not None:
                raise ValueError(f"{op}: argument 'c' is given but beta is 0")
            continue
        if t is None and key in used:
            raise ValueError(f"{op}: the epilogue `{text}` reads {key}; argument '{names[key]}' is missing")
        if t is not None and key not in used:
            raise ValueError(f"{op}: argument '{names[key]}' is given but the epilogue `{text}` does not read it")
    if x.dtype not in (torch.bfloat16, torch.float16) or w.dtype != x.dtype:
        raise ValueError(f"{op}: arguments 'x' and 'w' must both be bf16 or both fp16; got {x.dtype} and {w.dtype}")
    odt = out_dtype if out_dtype is not None else (out.dtype if out is not None else x.dtype)
    for name, t in [("x", x), ("w", w), ("residual", residual), ("c", c), ("out", out)]:
        if t is None:
            continue
        if t.device != x.device:
            raise ValueError(f"{op}: argument '{name}' is on {t.device} but 'x' is on {x.device}")
        conv_check_layout(*geom, {"out": "y"}.get(name, name), list(t.shape), list(t.stride()), name=name)
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_dims[1]):
        raise ValueError(f"{op}: argument 'bias' has shape {tuple(bias.shape)}, expected ({out_dims[1]},)")
    if out is None:
        out = torch.empty_strided(out_dims, _channels_last(out_dims), dtype=odt, device=x.device)
    elif tuple(out.shape) != out_dims or out.dtype != odt:
        raise ValueError(f"{op}: argument 'out' has shape {tuple(out.shape)} and dtype {out.dtype}, expected {out_dims} and {odt}")
    if x.device.type == "cuda":
        _launch(T, geom, text, alpha, beta, x, w, out, bias, residual, c)
    else:
        _reference(geom, text, alpha, beta, x, w, out, bias, residual, c)
    return out


def _launch(T, geom, text, alpha, beta, x, w, out, bias, residual, c) -> None:
    dt = T.dtype_name
    index = x.device.index or 0
    key = (index, geom, text, float(alpha), float(beta), x.dtype, out.dtype)
    conv = _CONVS.get(key)
    if conv is None:
        from .._tessera import Conv2d

        x_dims, w_dims, stride, padding, dilation = geom
        conv = Conv2d(
            index, list(x_dims), list(w_dims), stride=stride, padding=padding, dilation=dilation,
            dtype=dt(x), out_dtype=dt(out), epilogue=text, alpha=float(alpha), beta=float(beta),
        )
        with _LOCK:
            conv = _CONVS.setdefault(key, conv)
    opt = lambda t: None if t is None else _arg(t, dt(t))  # noqa: E731
    conv.launch(
        T.current_stream(index), _arg(x, dt(x)), _arg(w, dt(w)), _arg(out, dt(out)),
        bias=opt(bias), residual=opt(residual), c=opt(c),
    )


def _reference(geom, text, alpha, beta, x, w, out, bias, residual, c) -> None:
    """The float64 reference: the convolution by PyTorch in float64 (asymmetric padding as
    an explicit pad), then the epilogue by tessera's evaluator over the GEMM view."""
    import torch
    import torch.nn.functional as F

    from ._reference import _native_evaluate

    _, w_dims, stride, (pt, pb, pl, pr), dilation = geom
    acc = F.conv2d(F.pad(x.detach().to(torch.float64), (pl, pr, pt, pb)), w.detach().to(torch.float64),
                   stride=stride, dilation=dilation)
    n, k, p, q = acc.shape
    rows = lambda t: t.detach().to(torch.float64).permute(0, 2, 3, 1).reshape(-1).tolist()  # noqa: E731
    r = _native_evaluate(
        text, n * p * q, k, 1, w_dims[1] * w_dims[2] * w_dims[3], alpha, beta, rows(acc),
        c=rows(c) if c is not None and beta != 0 else None,
        residual=rows(residual) if residual is not None else None,
        bias_col=bias.detach().to(torch.float64).reshape(-1).tolist() if bias is not None else None,
    )
    y = torch.tensor(r["d"], dtype=torch.float64).reshape(n, p, q, k).permute(0, 3, 1, 2)
    out.copy_(y.to(out.dtype))
