"""The tensor intake of `tessera.ops`: reading `(ptr, dtype, shape, strides, device)` from
`__cuda_array_interface__`, DLPack and PyTorch, and refusing what a kernel cannot take with
a `ValueError` that names the argument. Needs no GPU: CUDA arrays are stand-ins carrying the
interface dictionary; NumPy (DLPack, CPU) and PyTorch run where installed."""

from __future__ import annotations

import pytest

from tessera.ops import TensorArg, same_device, tensor_arg

BASE = 0x7F00_0000_0000  # a plausible device address, 256-byte aligned


class CudaArray:
    """An object with `__cuda_array_interface__` only, as CuPy or Numba hand it out."""

    def __init__(self, shape, strides=None, typestr="<f2", ptr=BASE, version=3):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "strides": strides,
            "typestr": typestr,
            "data": (ptr, False),
            "version": version,
        }


def test_cuda_array_interface_strides_are_converted_to_elements():
    # fp16, shape (4, 8), row pitch 16 elements = 32 bytes, unit stride 2 bytes.
    a = tensor_arg(CudaArray((4, 8), (32, 2)), "a", "gemm")
    assert a == TensorArg("a", BASE, "fp16", (4, 8), (16, 1), ("cuda", 0))
    # No strides: C-contiguous by the protocol's definition.
    b = tensor_arg(CudaArray((2, 3, 4), None, "<f4"), "b", "gemm")
    assert (b.dtype, b.strides) == ("fp32", (12, 4, 1))


@pytest.mark.parametrize(
    "kwargs, arg, message",
    [
        ({}, CudaArray((4, 8), (32, 3)), "byte strides (32, 3), not multiples of its 2-byte"),
        ({"dtypes": {"bf16", "fp16"}}, CudaArray((4,), None, "<f4"), "dtype fp32, expected one of bf16, fp16"),
        ({"ndim": 2}, CudaArray((4,), None), "has 1 dimensions (4,), expected 2"),
        ({"shape": (4, None)}, CudaArray((5, 8), None), "shape (5, 8), expected (4, *)"),
        ({}, CudaArray((4, 8), (0, 2)), "stride 0 in dimension 0 (extent 4)"),
        ({}, CudaArray((4, 8), (-16, 2)), "negative strides are not supported"),
        ({}, CudaArray((4,), None, ptr=BASE + 1), "not aligned to its 2-byte elements"),
        ({}, CudaArray((4,), None, ptr=0), "null data pointer"),
        ({"unit_stride": True}, CudaArray((4, 8), (64, 4)), "no unit stride"),
        ({"device": "cpu"}, CudaArray((4,), None), "is on cuda:0, expected a cpu tensor"),
        ({}, CudaArray((4,), None, ">f2"), "big-endian"),
        ({}, CudaArray((4,), None, version=1), "version 1"),
        ({}, CudaArray((4,), None, "<c8"), "typestr '<c8'"),
    ],
)
def test_refusals_name_the_argument(kwargs, arg, message):
    with pytest.raises(ValueError) as e:
        tensor_arg(arg, "bias", "gemm", **kwargs)
    assert str(e.value).startswith("gemm: argument 'bias' ")
    assert message in str(e.value)


def test_broadcast_and_extent_one_strides():
    # A bias expanded along the rows: stride 0 is allowed only when asked for.
    assert tensor_arg(CudaArray((4, 8), (0, 2)), "bias", "gemm", broadcast=True).strides == (0, 1)
    # An extent-1 dimension may have any stride, 0 included: it is never stepped along.
    assert tensor_arg(CudaArray((1, 8), (0, 2)), "bias", "gemm").strides == (0, 1)


def test_outputs_must_not_overlap():
    # (4,4) with strides (1,1): element (1,0) and (0,1) share an address.
    with pytest.raises(ValueError, match="argument 'out' is an output whose elements overlap"):
        tensor_arg(CudaArray((4, 4), (2, 2)), "out", "gemm", output=True)
    # Column-major with a padded leading dimension: no overlap.
    out = tensor_arg(CudaArray((4, 4), (2, 16)), "out", "gemm", output=True)
    assert out.strides == (1, 8)
    # A row pitch smaller than the row: rows overlap.
    with pytest.raises(ValueError, match="overlap"):
        tensor_arg(CudaArray((4, 8), (8, 2)), "out", "gemm", output=True)


def test_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="gemm: argument 'a' is list, not a tensor"):
        tensor_arg([1, 2], "a", "gemm")


def test_same_device():
    a = tensor_arg(CudaArray((4,), None), "a", "gemm")
    b = TensorArg("b", BASE, "fp16", (4,), (1,), ("cuda", 1))
    assert same_device("gemm", a, None) == ("cuda", 0)
    with pytest.raises(ValueError, match="argument 'b' is on cuda:1 but 'a' is on cuda:0"):
        same_device("gemm", a, b)


def test_layout_of_a_tensor_argument():
    a = tensor_arg(CudaArray((4, 8), (2, 8)), "a", "gemm")
    assert str(a.layout()) == "(4,8):(1,4)"


# ---------------------------------------------------------------------------------------------
# DLPack, through NumPy (CPU)


def test_dlpack_reads_numpy_arrays_in_place():
    np = pytest.importorskip("numpy")
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    addr = base.ctypes.data
    a = tensor_arg(base, "x", "op", device="cpu")
    assert a == TensorArg("x", addr, "fp32", (4, 6), (6, 1), ("cpu", 0))
    # A strided view: every other column from column 1; the pointer moves by one element.
    v = base[:, 1::2]
    a = tensor_arg(v, "x", "op", device="cpu")
    assert (a.ptr, a.shape, a.strides) == (addr + 4, (4, 3), (6, 2))
    # A transpose is column-major: the strides say so, no flag is consulted.
    a = tensor_arg(base.T, "x", "op", device="cpu")
    assert (a.shape, a.strides) == ((6, 4), (1, 6))
    assert tensor_arg(np.zeros(3, dtype=np.int8), "m", "op", device="cpu").dtype == "i8"
    with pytest.raises(ValueError, match="is on cpu:0, expected a cuda tensor"):
        tensor_arg(base, "x", "op")


# ---------------------------------------------------------------------------------------------
# PyTorch, where installed (on the GPU host, CUDA tensors too)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    x = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    a = tensor_arg(x, "x", "conv2d", device="cpu")
    # channels-last NCHW: the strides (C fastest) are what counts.
    assert (a.shape, a.strides) == ((2, 3, 4, 5), (60, 1, 15, 3))
    assert a.ptr == x.data_ptr() and a.dtype == "fp32"
    y = torch.empty(8, 16, dtype=torch.bfloat16)[2:, ::2]
    a = tensor_arg(y, "y", "gemm", device="cpu")
    assert (a.dtype, a.shape, a.strides, a.ptr) == ("bf16", (6, 8), (16, 2), y.data_ptr())
    with pytest.raises(ValueError, match="argument 'b' has stride 0 in dimension 0"):
        tensor_arg(torch.zeros(8).expand(4, 8), "b", "gemm", device="cpu")


def test_torch_cuda_tensors_read_alike_through_every_protocol():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.empty(64, 96, dtype=torch.float16, device="cuda")[:, 8:72].t()

    class OnlyCai:
        __cuda_array_interface__ = x.__cuda_array_interface__

    class OnlyDlpack:
        def __dlpack__(self, stream=None):
            return x.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    direct = tensor_arg(x, "x", "gemm")
    assert (direct.shape, direct.strides) == ((64, 64), (1, 96))
    assert direct.device == ("cuda", x.device.index)
    assert tensor_arg(OnlyCai(), "x", "gemm") == direct
    assert tensor_arg(OnlyDlpack(), "x", "gemm") == direct
