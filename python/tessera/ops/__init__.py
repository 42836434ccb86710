"""tessera's GPU kernels on PyTorch tensors.

- :func:`gemm`: ``D = epilogue(A B)`` with any epilogue of the epilogue language
  (``"gelu(aux(acc + bias_col))"``, ``"relu(acc + bias_col + residual)"``, ...), returning D
  and the outputs the epilogue writes (aux, bias gradients, operand sums);
- :func:`linear`: nn.Linear with a fused activation, differentiable (``torch.autograd``);
- :func:`fused_gemm_epilogue` and :func:`fused_gemm_epilogue_grad`: PaddlePaddle's operators,
  with its reserve space;
- :func:`conv2d`: a convolution of channels-last tensors with a fused epilogue (the ResNet
  block ``relu(conv + bias + residual)`` and its other order), every stride checked.

Every op is also a ``torch.library`` custom op (``torch.ops.tessera.gemm``, ``linear``, ...,
``conv2d``) with a fake implementation, so a ``torch.compile``\\ d model traces it without a
graph break. ``conv2d`` is forward-only: a backward through it raises a ``RuntimeError``
saying so. Tensors go to the kernels by device pointer, shape and strides, with no copy, on
PyTorch's current stream, with no synchronisation; every stride is checked (by the kernels'
library), and a tensor the kernels cannot take raises a ``ValueError`` naming the argument.
On CPU tensors the ops run the float64 reference of the same epilogues (slow: for tests).

``import tessera.ops`` does not import PyTorch; the first call does, and registers the custom
ops (``torch.ops.tessera.*`` exist from then on).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

from ._conv import conv2d
from ._tensor import DTYPE_BYTES, TensorArg, same_device, tensor_arg

__all__ = [
    "gemm",
    "linear",
    "fused_gemm_epilogue",
    "fused_gemm_epilogue_grad",
    "conv2d",
    "describe_epilogue",
    "cuda_available",
    "TensorArg",
    "tensor_arg",
    "same_device",
    "DTYPE_BYTES",
    "torch",
    "current_stream",
]


def torch() -> ModuleType:
    """PyTorch, imported on first use; an ``ImportError`` saying what needs it otherwise."""
    try:
        import torch as _torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tessera.ops needs PyTorch (pip install torch); tessera.layout does not"
        ) from e
    return _torch


_T: Optional[ModuleType] = None


def _ops() -> ModuleType:
    """The PyTorch half (`_torch`): imported, and the custom ops registered, once."""
    global _T
    if _T is None:
        torch()
        from . import _torch

        _T = _torch
    return _T


def current_stream(device_index: int) -> int:
    """The raw ``cudaStream_t`` of PyTorch's current stream on that device: the stream every
    tessera op launches on, so that it is ordered with the caller's PyTorch work and nothing
    is synchronised behind the caller's back."""
    return _ops().current_stream(device_index)


def cuda_available() -> bool:
    """Whether this build of the package has the GPU kernels (the ``cuda`` feature)."""
    from .._tessera import CUDA

    return bool(CUDA)


def describe_epilogue(epilogue: str) -> dict:
    """What an epilogue reads and writes: ``text`` (as tessera prints it), ``inputs`` (the
    tensors read, by their epilogue names), ``aux`` (``None``, ``"out"`` for D's type, a
    dtype, or ``"bits"``), ``bgrad`` and ``sum_k`` (the fp32 sums it writes)."""
    from ._gemm import describe

    return dict(describe(epilogue))


def gemm(
    a,
    b,
    epilogue: str = "acc",
    *,
    bias=None,
    bias_row=None,
    residual=None,
    c=None,
    aux_in=None,
    alpha: float = 1.0,
    beta: float = 0.0,
    out=None,
    aux=None,
    bgrad_row=None,
    bgrad_col=None,
    sum_k_a=None,
    sum_k_b=None,
    out_dtype=None,
):
    """``D = epilogue(a @ b)``: ``a`` is ``(M, K)`` or ``(batch, M, K)``, ``b`` is ``(K, N)``
    or ``(batch, K, N)`` (a 2-D operand is shared by every batch), bf16 or fp16; D is
    ``(M, N)`` (or batched) in ``out_dtype`` (default: a's), or written into ``out``.

    The epilogue's inputs: ``bias`` (``bias_col``: one value per column, nn.Linear's bias),
    ``bias_row``, ``residual``, ``c`` (read as ``beta * c``), ``aux_in`` (a pre-activation,
    or for ``aux_in_bits`` a bit mask of int32 words). Its outputs besides D, allocated unless
    given: ``aux`` (D's shape; a bit mask for ``aux_bits``), ``bgrad_row`` / ``bgrad_col``
    and ``sum_k_a`` / ``sum_k_b`` (fp32 vectors). Returns D alone when the epilogue writes
    nothing else, else the tuple ``(D, aux, bgrad_row, bgrad_col, sum_k_a, sum_k_b)`` less
    the ones it does not write.

    nn.Linear followed by GELU is ``gemm(x, w.t(), "gelu(acc + bias_col)", bias=b)``: ``w.t()``
    is a column-major view (no copy), which the Hopper kernel loads directly.
    """
    T = _T or _ops()
    ins = (a, b, c, residual, aux_in, bias_row, bias)
    outs = (out, aux, bgrad_row, bgrad_col, sum_k_a, sum_k_b)
    results = None if T.is_compiling() else T.gemm_eager(ins, outs, epilogue, alpha, beta, out_dtype)
    if results is None:
        results = T.torch.ops.tessera.gemm(a, b, epilogue, c, residual, aux_in, bias_row, bias, float(alpha), float(beta), out_dtype)
        if any(t is not None for t in outs):
            results = list(results)
            given = dict(zip(T.OUT_SLOTS, outs))
            for i, name in enumerate(T.output_names(epilogue)):
                if given[name] is not None:
                    T.check_output("gemm", name, given[name], results[i])
                    given[name].copy_(results[i])
                    results[i] = given[name]
    return results[0] if len(results) == 1 else tuple(results)


def linear(x, weight, bias=None, activation: str = "none"):
    """``activation(x @ weight.T + bias)`` in one fused GEMM, with autograd: ``x`` is
    ``(..., in)``, ``weight`` ``(out, in)``, ``bias`` ``(out,)``; ``activation`` is ``none``,
    ``relu``, ``gelu`` (erf, as ``F.gelu``) or ``gelu_tanh``.

    When gradients are needed the forward GEMM also stores the pre-activation (its aux
    output). Backward runs the dW GEMM with the bias gradient as its operand sum, and the dX
    GEMM; and when ``x`` is itself the output of a ``linear`` with an activation (unchanged
    since), this layer's dX GEMM applies that activation's derivative in its epilogue
    (``acc * dgelu(aux_in)``), so that the previous layer receives the gradient of its
    pre-activation with no separate elementwise pass.
    """
    T = _ops()
    tm = T.torch
    compiling = tm.compiler.is_compiling()
    need_grad = tm.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    )
    x_pre, x_act = None, "none"
    if need_grad and not compiling:
        link = getattr(x, "_tessera_pre", None)
        if link is not None and link[2] == x._version:
            x_pre, x_act = link[0], link[1]
    out, pre = tm.ops.tessera.linear(x, weight, bias, activation, x_pre, x_act, need_grad)
    if need_grad and not compiling and activation != "none":
        # The link the next layer fuses through: this output is `activation(pre)` as long as
        # its version is the one it was made with.
        out._tessera_pre = (pre, activation, out._version)
    return out


def fused_gemm_epilogue(x, y, bias, trans_x: bool = False, trans_y: bool = False, activation: str = "none", *, reserve_space: bool = True):
    """PaddlePaddle's ``fused_gemm_epilogue``: ``out = act(op(x) @ op(y) + bias)``, ``op`` the
    transpose when ``trans_x`` / ``trans_y``, ``act`` ``none``, ``relu`` or ``gelu`` (the tanh
    form, as Paddle's). Returns ``(out, reserve_space)``: the reserve space is relu's bit mask
    (int32 words, rows of N padded to 128 bits) or gelu's pre-activation, and ``None`` for no
    activation or with ``reserve_space=False``."""
    tm = _ops().torch
    out, rs = tm.ops.tessera.fused_gemm_epilogue(x, y, bias, trans_x, trans_y, activation, reserve_space)
    return out, (rs if reserve_space and activation in ("relu", "gelu") else None)


def fused_gemm_epilogue_grad(
    x,
    y,
    reserve_space: Optional[Any],
    out_grad,
    trans_x: bool = False,
    trans_y: bool = False,
    activation_grad: str = "none",
    *,
    need_x_grad: bool = True,
    need_y_grad: bool = True,
    need_bias_grad: bool = True,
):
    """PaddlePaddle's ``fused_gemm_epilogue_grad``: with ``out_grad`` (``M x N``) of the forward
    call on ``x`` and ``y``, returns ``(x_grad, y_grad, bias_grad)``:
    ``x_grad = act'(reserve_space) * (out_grad @ op(y).T)`` stored like ``x``, where
    ``reserve_space`` is the reserve space of the layer *whose output is x* (needed for
    ``relu`` and ``gelu``); ``y_grad = op(x).T @ out_grad`` stored like ``y``;
    ``bias_grad`` the column sums of ``out_grad`` (computed beside the y_grad product).
    Gradients not asked for are ``None``."""
    tm = _ops().torch
    dx, dy, db = tm.ops.tessera.fused_gemm_epilogue_grad(
        x, y, reserve_space, out_grad, trans_x, trans_y, activation_grad, need_x_grad, need_y_grad, need_bias_grad
    )
    return (dx if need_x_grad else None, dy if need_y_grad else None, db if need_bias_grad else None)
