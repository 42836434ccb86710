"""``tessera.ops.conv2d``: a 2-D convolution of channels-last tensors with a fused epilogue,
on the kernels' library (``Conv2d``) for CUDA tensors and on the float64 reference for CPU
tensors (slow: for tests).

Every tensor is taken by its logical sizes and strides, as PyTorch describes it: ``x`` is
``(N, C, H, W)``, ``w`` ``(K, C, R, S)``, the output and ``residual`` ``(N, K, P, Q)``, each
with channels-last strides (``x.contiguous(memory_format=torch.channels_last)``). The
strides are checked by the library on every path; a tensor whose memory is NCHW raises a
``ValueError`` naming it, the dimension and both strides, whatever its memory-format flag
says.

The convolution is also the ``torch.library`` custom op ``torch.ops.tessera.conv2d``
(registered in :mod:`._torch`): :func:`conv2d` without ``out`` calls it, so that
``torch.compile`` traces it. Its implementation is :func:`run`; its fake implementation,
:func:`empty`, makes the same checks (:func:`check`: shapes, strides, types, devices, the
epilogue's inputs, none of which needs the data) and returns an output of the same shape,
type and channels-last strides. The op is forward-only: there is no backward kernel, and a
gradient that reaches it raises (see ``_torch``).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, NamedTuple, Optional, Tuple

from . import _gemm

_LOCK = threading.Lock()
_CONVS: Dict[tuple, Any] = {}

OP = "conv2d"


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


def default_epilogue(op: str, epilogue: Optional[str], bias, residual, c) -> str:
    """The epilogue asked for, or the default: ``acc + bias_col`` with a bias, else ``acc``.
    A residual or ``c`` needs an explicit epilogue (where it enters is not a default)."""
    if epilogue is not None:
        return epilogue
    if residual is not None or c is not None:
        raise ValueError(f"{op}: argument 'epilogue' must say how the residual or c enters (e.g. 'bias_residual_relu')")
    return "acc + bias_col" if bias is not None else "acc"


def channels_last(shape) -> Tuple[int, ...]:
    """The strides of a dense channels-last ``(N, K, P, Q)`` tensor: what the op returns."""
    n, k, p, q = shape
    return (p * q * k, 1, q * k, k)


def _ints(v) -> Tuple[int, ...]:
    # Sizes and strides as ints (a symbolic size of a traced shape is specialised: the
    # library plans for concrete sizes).
    return tuple(int(e) for e in v)


class Checked(NamedTuple):
    """What :func:`check` found: the geometry as the library takes it, the epilogue's text,
    the output's sizes and type."""

    geom: tuple
    text: str
    out_dims: Tuple[int, int, int, int]
    out_dtype: Any


def check(x, w, bias, residual, c, stride, padding, dilation, epilogue: str, beta: float, out_dtype,
          out=None, op: str = OP) -> Checked:
    """Every check of a call that needs no data: ranks, the geometry (the library's
    ``conv_describe``), the epilogue's inputs (each one it reads given, none it does not),
    types, devices, and each tensor's strides (the library's ``conv_check_layout``). A
    ``ValueError`` naming the operation, the argument and the rule; what it returns
    otherwise. The op's implementation and its fake implementation both call it."""
    import torch

    from .._tessera import conv_check_layout, conv_describe

    if x.dim() != 4 or w.dim() != 4:
        raise ValueError(f"{op}: arguments 'x' and 'w' must be 4-D, (N, C, H, W) and (K, C, R, S); got {tuple(x.shape)} and {tuple(w.shape)}")
    stride_, dilation_, padding_ = _pair(op, "stride", stride), _pair(op, "dilation", dilation), _padding(op, padding)
    geom = (_ints(x.shape), _ints(w.shape), stride_, padding_, dilation_)
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
    if odt not in (torch.bfloat16, torch.float16, torch.float32):
        which = "out_dtype" if out_dtype is not None else "out"
        raise ValueError(f"{op}: argument '{which}' has dtype {odt}, expected bf16, fp16 or fp32")
    if bias is not None and bias.device != x.device:
        raise ValueError(f"{op}: argument 'bias' is on {bias.device} but 'x' is on {x.device}")
    for name, t in [("x", x), ("w", w), ("residual", residual), ("c", c), ("out", out)]:
        if t is None:
            continue
        if t.device != x.device:
            raise ValueError(f"{op}: argument '{name}' is on {t.device} but 'x' is on {x.device}")
        conv_check_layout(*geom, {"out": "y"}.get(name, name), list(_ints(t.shape)), list(_ints(t.stride())), name=name)
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_dims[1]):
        raise ValueError(f"{op}: argument 'bias' has shape {tuple(bias.shape)}, expected ({out_dims[1]},)")
    if out is not None and (tuple(out.shape) != out_dims or out.dtype != odt):
        raise ValueError(f"{op}: argument 'out' has shape {tuple(out.shape)} and dtype {out.dtype}, expected {out_dims} and {odt}")
    return Checked(geom, text, out_dims, odt)


def empty(x, w, bias, residual, c, stride, padding, dilation, epilogue, alpha, beta, out_dtype):
    """The fake implementation of ``torch.ops.tessera.conv2d``: the checks of the real one,
    and an output of its shape, type and (channels-last) strides."""
    import torch

    k = check(x, w, bias, residual, c, stride, padding, dilation, epilogue, beta, out_dtype)
    return torch.empty_strided(k.out_dims, channels_last(k.out_dims), dtype=k.out_dtype, device=x.device)


def run(x, w, bias, residual, c, stride, padding, dilation, epilogue, alpha, beta, out_dtype, out=None):
    """The implementation of ``torch.ops.tessera.conv2d`` (and of :func:`conv2d` into
    ``out``): the checks, then the kernel on CUDA tensors or the float64 reference on CPU
    tensors. Returns the output, a new channels-last tensor unless ``out`` is given."""
    import torch

    k = check(x, w, bias, residual, c, stride, padding, dilation, epilogue, beta, out_dtype, out)
    if out is None:
        out = torch.empty_strided(k.out_dims, channels_last(k.out_dims), dtype=k.out_dtype, device=x.device)
    if x.device.type == "cuda":
        from . import _ops

        _launch(_ops(), k.geom, k.text, alpha, beta, x, w, out, bias, residual, c)
    elif x.device.type == "cpu":
        _reference(k.geom, k.text, alpha, beta, x, w, out, bias, residual, c)
    else:
        raise ValueError(f"{OP}: argument 'x' is on {x.device}, expected a CUDA (or CPU) tensor")
    return out


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

    Without ``out`` this is the custom op ``torch.ops.tessera.conv2d`` (so ``torch.compile``
    traces it without a graph break). With ``out`` the kernel writes into it in place (under
    ``torch.compile``: the op, then a copy into ``out``); ``out`` does not take part in
    autograd, so it is refused while an input requires grad. The op is forward-only: a
    gradient that reaches it raises a ``RuntimeError`` (run it under ``torch.no_grad()``).
    """
    from . import _ops

    T = _ops()
    torch = T.torch
    op = OP
    stride_, dilation_, padding_ = _pair(op, "stride", stride), _pair(op, "dilation", dilation), _padding(op, padding)
    epilogue = default_epilogue(op, epilogue, bias, residual, c)
    if out is None:
        return torch.ops.tessera.conv2d(x, w, bias, residual, c, stride_, padding_, dilation_, epilogue,
                                        float(alpha), float(beta), out_dtype)
    if torch.is_grad_enabled():
        for name, t in [("x", x), ("w", w), ("bias", bias), ("residual", residual), ("c", c)]:
            if t is not None and t.requires_grad:
                raise RuntimeError(
                    f"{op}: argument 'out' is given but argument '{name}' requires grad: an output "
                    "written into 'out' does not take part in autograd (call it under torch.no_grad(), "
                    "or without out=)"
                )
    if T.is_compiling():
        odt = out_dtype if out_dtype is not None else out.dtype
        y = torch.ops.tessera.conv2d(x, w, bias, residual, c, stride_, padding_, dilation_, epilogue,
                                     float(alpha), float(beta), odt)
        if out.shape != y.shape or out.dtype != y.dtype:
            raise ValueError(f"{op}: argument 'out' has shape {tuple(out.shape)} and dtype {out.dtype}, expected {tuple(y.shape)} and {y.dtype}")
        return out.copy_(y)
    return run(x, w, bias, residual, c, stride_, padding_, dilation_, epilogue, alpha, beta, out_dtype, out=out)


def _arg(t, dtype: str) -> tuple:
    return (t.data_ptr(), dtype, tuple(t.shape), tuple(t.stride()))


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
