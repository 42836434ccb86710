"""Tensor intake: what a kernel call needs to know about a tensor argument, read without a
copy from whatever the caller passed, and checked.

A kernel of tessera takes each operand as ``(ptr, dtype, shape, strides)``: the device
address of element 0, the element type, the logical extents, and the strides **in
elements** (as DLPack and PyTorch count them; ``__cuda_array_interface__`` counts bytes and is
converted). Nothing about the memory order is taken from a flag (``channels_last``,
``is_contiguous``): the strides are the truth, and the Rust side checks them again against
what the kernel supports.

Three sources, tried in this order:

1. a PyTorch tensor (recognised by its type's module, so this file never imports torch):
   ``data_ptr()``, ``shape``, ``stride()``, ``dtype``, ``device``;
2. ``__cuda_array_interface__`` (CuPy, Numba, PyTorch CUDA tensors): versions 2 and 3;
3. ``__dlpack__`` / ``__dlpack_device__`` (NumPy, JAX, ...): the ``DLTensor`` of the capsule
   is read in place and the capsule is left unconsumed, so the producer frees it as usual.

Every refusal is a ``ValueError`` (a ``TypeError`` for an object that is no tensor at all)
whose message starts with the operation and names the argument.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Collection, Optional, Sequence, Tuple

__all__ = ["TensorArg", "tensor_arg", "same_device", "DTYPE_BYTES"]

#: Bytes per element of every dtype name the intake knows. The names of the kernels' element
#: types are the Rust crate's (``bf16``, ``fp16``, ``fp32``).
DTYPE_BYTES = {
    "bool": 1,
    "i8": 1,
    "u8": 1,
    "i16": 2,
    "i32": 4,
    "i64": 8,
    "u16": 2,
    "u32": 4,
    "u64": 8,
    "fp16": 2,
    "bf16": 2,
    "fp32": 4,
    "fp64": 8,
    "fp8e4m3": 1,
    "fp8e5m2": 1,
}

_TORCH_DTYPES = {
    "torch.bool": "bool",
    "torch.int8": "i8",
    "torch.uint8": "u8",
    "torch.int16": "i16",
    "torch.int32": "i32",
    "torch.int64": "i64",
    "torch.uint16": "u16",
    "torch.uint32": "u32",
    "torch.uint64": "u64",
    "torch.float16": "fp16",
    "torch.bfloat16": "bf16",
    "torch.float32": "fp32",
    "torch.float64": "fp64",
    "torch.float8_e4m3fn": "fp8e4m3",
    "torch.float8_e5m2": "fp8e5m2",
}

# __cuda_array_interface__ typestr (byte order, kind, bytes); bfloat16 has no typestr there.
_TYPESTR = {
    ("b", 1): "bool",
    ("i", 1): "i8",
    ("u", 1): "u8",
    ("i", 2): "i16",
    ("i", 4): "i32",
    ("i", 8): "i64",
    ("u", 2): "u16",
    ("u", 4): "u32",
    ("u", 8): "u64",
    ("f", 2): "fp16",
    ("f", 4): "fp32",
    ("f", 8): "fp64",
}

# DLPack: DLDataTypeCode (0 int, 1 uint, 2 float, 4 bfloat, 6 bool) and bits.
_DLPACK_DTYPES = {
    (0, 8): "i8",
    (0, 16): "i16",
    (0, 32): "i32",
    (0, 64): "i64",
    (1, 8): "u8",
    (1, 16): "u16",
    (1, 32): "u32",
    (1, 64): "u64",
    (2, 16): "fp16",
    (2, 32): "fp32",
    (2, 64): "fp64",
    (4, 16): "bf16",
    (6, 8): "bool",
}

# DLPack DLDeviceType codes.
_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 13: "cuda_managed"}


@dataclass(frozen=True)
class TensorArg:
    """One tensor operand as a kernel takes it.

    ``ptr`` is the device address of element 0 (the storage offset included), ``strides``
    are in elements, ``device`` is ``(kind, index)`` with ``kind`` ``"cuda"`` or ``"cpu"``.
    """

    name: str
    ptr: int
    dtype: str
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    device: Tuple[str, int]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def layout(self):
        """The ``shape:strides`` layout of the tensor (a 0-d tensor is ``1:0``), for the
        algebra's checks."""
        from ..layout import Layout

        if not self.shape:
            return Layout(1, 0)
        return Layout(tuple(self.shape), tuple(self.strides))


def _fail(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"{op}: argument '{name}' {msg}")


def _is_torch_tensor(t: Any) -> bool:
    # Without importing torch: a torch.Tensor (or subclass, e.g. a Parameter) has a type
    # whose MRO includes torch's Tensor class, defined in module `torch`.
    return any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in type(t).__mro__)


def _from_torch(t: Any, op: str, name: str) -> TensorArg:
    dtype = _TORCH_DTYPES.get(str(t.dtype))
    if dtype is None:
        raise _fail(op, name, f"has dtype {t.dtype}, which tessera does not know")
    dev = t.device
    kind = dev.type
    index = dev.index if dev.index is not None else 0
    return TensorArg(
        name=name,
        ptr=int(t.data_ptr()),
        dtype=dtype,
        shape=tuple(int(s) for s in t.shape),
        strides=tuple(int(s) for s in t.stride()),
        device=(kind, index),
    )


def _from_cai(t: Any, cai: dict, op: str, name: str) -> TensorArg:
    version = cai.get("version", 0)
    if version < 2:
        raise _fail(op, name, f"has __cuda_array_interface__ version {version}; 2 or later needed")
    typestr = cai["typestr"]
    if len(typestr) < 3 or typestr[0] not in "<>|=":
        raise _fail(op, name, f"has an unreadable typestr {typestr!r}")
    if typestr[0] == ">":
        raise _fail(op, name, f"is big-endian ({typestr!r})")
    key = (typestr[1], int(typestr[2:]))
    dtype = _TYPESTR.get(key)
    if dtype is None:
        raise _fail(op, name, f"has typestr {typestr!r}, which tessera does not know")
    shape = tuple(int(s) for s in cai["shape"])
    itemsize = DTYPE_BYTES[dtype]
    if cai.get("strides") is None:
        # C-contiguous (row-major) by the protocol's definition.
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
    else:
        byte_strides = tuple(int(s) for s in cai["strides"])
        bad = [b for b in byte_strides if b % itemsize]
        if bad:
            raise _fail(
                op,
                name,
                f"has byte strides {byte_strides}, not multiples of its {itemsize}-byte elements",
            )
        strides = tuple(b // itemsize for b in byte_strides)
    if cai.get("mask") is not None:
        raise _fail(op, name, "is a masked array")
    ptr = int(cai["data"][0])
    # The protocol does not say which device; the pointer is a CUDA one, and the owner
    # knows the index (CuPy's `.device.id`, torch's `.device.index`).
    index = getattr(getattr(t, "device", None), "id", None)
    if index is None:
        index = getattr(getattr(t, "device", None), "index", None)
    return TensorArg(name, ptr, dtype, shape, strides, ("cuda", int(index or 0)))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def _from_dlpack(t: Any, op: str, name: str) -> TensorArg:
    kind_code, index = t.__dlpack_device__()
    kind = _DLPACK_DEVICES.get(int(kind_code))
    if kind is None:
        raise _fail(op, name, f"is on DLPack device type {kind_code}, not CUDA or CPU")
    # No stream: nothing is synchronised, the pointer is only read (the kernel call runs on
    # the caller's stream, as the caller ordered it).
    capsule = t.__dlpack__() if kind == "cpu" else t.__dlpack__(stream=-1)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    # A DLManagedTensor (and the versioned one's `dl_tensor`, after its version and
    # manager_ctx) starts with the DLTensor for the unversioned capsule name "dltensor".
    addr = get(capsule, b"dltensor")
    if not addr:
        raise _fail(op, name, "gave a DLPack capsule without a DLTensor")
    dl = _DLTensor.from_address(addr)
    if dl.dtype.lanes != 1:
        raise _fail(op, name, f"has {dl.dtype.lanes}-lane vector elements")
    dtype = _DLPACK_DTYPES.get((dl.dtype.code, dl.dtype.bits))
    if dtype is None:
        raise _fail(op, name, f"has DLPack dtype code {dl.dtype.code}, {dl.dtype.bits} bits")
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(dl.ndim))
    else:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
    ptr = (dl.data or 0) + dl.byte_offset
    # `capsule` is dropped unconsumed here: its destructor returns the tensor to its producer.
    return TensorArg(name, ptr, dtype, shape, strides, (kind, int(index)))


def _read(t: Any, op: str, name: str) -> TensorArg:
    if _is_torch_tensor(t):
        return _from_torch(t, op, name)
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(t, cai, op, name)
    if hasattr(t, "__dlpack__") and hasattr(t, "__dlpack_device__"):
        return _from_dlpack(t, op, name)
    raise TypeError(
        f"{op}: argument '{name}' is {type(t).__name__}, not a tensor (a PyTorch tensor, or an "
        "object with __cuda_array_interface__ or __dlpack__)"
    )


def tensor_arg(
    t: Any,
    name: str,
    op: str,
    *,
    dtypes: Optional[Collection[str]] = None,
    ndim: Optional[int] = None,
    shape: Optional[Sequence[Optional[int]]] = None,
    device: str = "cuda",
    broadcast: bool = False,
    output: bool = False,
    unit_stride: bool = False,
) -> TensorArg:
    """Reads tensor ``t`` (argument ``name`` of operation ``op``) and checks it:

    - ``dtypes``: the element types allowed (names of ``DTYPE_BYTES``);
    - ``ndim`` and ``shape`` (``None`` entries are free);
    - ``device``: ``"cuda"`` (kernels) or ``"cpu"``;
    - strides: never negative; 0 only with ``broadcast`` (an expanded bias), and only on
      extents above 1 is a stride-0 dimension a broadcast at all;
    - ``output``: no two elements share an address (the ``shape:strides`` layout is
      injective, checked with tessera's own algebra), so a kernel's stores cannot race;
    - ``unit_stride``: some dimension has stride 1 (a kernel loads along it).
    """
    a = _read(t, op, name)
    if device and a.device[0] != device:
        raise _fail(op, name, f"is on {a.device[0]}:{a.device[1]}, expected a {device} tensor")
    if dtypes is not None and a.dtype not in dtypes:
        raise _fail(op, name, f"has dtype {a.dtype}, expected one of {', '.join(sorted(dtypes))}")
    if ndim is not None and a.ndim != ndim:
        raise _fail(op, name, f"has {a.ndim} dimensions {a.shape}, expected {ndim}")
    if shape is not None:
        if len(shape) != a.ndim or any(w is not None and w != s for w, s in zip(shape, a.shape)):
            want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
            raise _fail(op, name, f"has shape {a.shape}, expected {want}")
    if any(s < 0 for s in a.shape):
        raise _fail(op, name, f"has a negative extent in {a.shape}")
    for i, (e, d) in enumerate(zip(a.shape, a.strides)):
        if d < 0:
            raise _fail(op, name, f"has stride {d} in dimension {i}; negative strides are not supported")
        if d == 0 and e > 1 and not broadcast:
            raise _fail(
                op,
                name,
                f"has stride 0 in dimension {i} (extent {e}): an expanded tensor; pass a "
                "materialised one (e.g. .contiguous())",
            )
    if a.numel() > 0 and a.ptr == 0:
        raise _fail(op, name, "has a null data pointer")
    if a.ptr % a.itemsize:
        raise _fail(op, name, f"has address {a.ptr:#x}, not aligned to its {a.itemsize}-byte elements")
    if unit_stride and a.numel() > 1:
        if not any(d == 1 and e > 1 for e, d in zip(a.shape, a.strides)):
            raise _fail(op, name, f"has strides {a.strides} with no unit stride")
    if output and a.numel() > 1:
        _check_no_overlap(a, op)
    return a


def _check_no_overlap(a: TensorArg, op: str) -> None:
    from .. import TooLargeError
    from ..layout import is_injective

    try:
        ok = is_injective(a.layout())
    except TooLargeError:
        raise _fail(op, a.name, f"has strides {a.strides} whose overlap is too costly to rule out")
    if not ok:
        raise _fail(
            op,
            a.name,
            f"is an output whose elements overlap in memory (shape {a.shape}, strides {a.strides})",
        )


def same_device(op: str, *args: Optional[TensorArg]) -> Tuple[str, int]:
    """The one device all given tensors are on; a ``ValueError`` naming two that differ."""
    present = [a for a in args if a is not None]
    if not present:
        raise ValueError(f"{op}: no tensor arguments")
    first = present[0]
    for a in present[1:]:
        if a.device != first.device:
            raise ValueError(
                f"{op}: argument '{a.name}' is on {a.device[0]}:{a.device[1]} but "
                f"'{first.name}' is on {first.device[0]}:{first.device[1]}"
            )
    return first.device
