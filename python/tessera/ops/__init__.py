"""tessera's GPU kernels on PyTorch tensors (being built).

What is here now is the part that does not need the kernels' library API: PyTorch is
imported only when an op runs (``import tessera.ops`` works without it), and every tensor
argument goes through :func:`tensor_arg`, which reads ``(ptr, dtype, shape, strides,
device)`` without a copy (from a PyTorch tensor, ``__cuda_array_interface__`` or DLPack) and
checks it, raising a ``ValueError`` that names the argument. The kernel calls themselves
(``gemm`` with a fused epilogue, Paddle's ``fused_gemm_epilogue`` and its gradient, the
``torch.library`` registrations with fake implementations, autograd) come once the Rust
library API they wrap (a ``Gemm`` planned and compiled from a spec, launched on caller
pointers and a stream) has landed; each will hand its ``TensorArg``\\ s to that API as
``(ptr, dtype, shape, strides)``.
"""

from __future__ import annotations

from types import ModuleType

from ._tensor import DTYPE_BYTES, TensorArg, same_device, tensor_arg

__all__ = ["TensorArg", "tensor_arg", "same_device", "DTYPE_BYTES", "torch", "current_stream"]


def torch() -> ModuleType:
    """PyTorch, imported on first use; an ``ImportError`` saying what needs it otherwise."""
    try:
        import torch as _torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tessera.ops needs PyTorch (pip install torch); tessera.layout does not"
        ) from e
    return _torch


def current_stream(device_index: int) -> int:
    """The raw ``cudaStream_t`` of PyTorch's current stream on that device: the stream every
    tessera op launches on, so that it is ordered with the caller's PyTorch work and nothing
    is synchronised behind the caller's back."""
    return int(torch().cuda.current_stream(device_index).cuda_stream)
