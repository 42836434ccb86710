"""tessera's kernels as PyTorch operators: the eager launch on PyTorch's current stream, the
``torch.library`` custom ops with their fake implementations (so that ``torch.compile``
traces them without a graph break), and the autograd of ``linear``.

Imported on the first use of an op (it imports torch). The ops, in namespace ``tessera``:

- ``gemm(a, b, epilogue, c, residual, aux_in, bias_row, bias_col, alpha, beta, out_dtype)
  -> Tensor[]``: D and the epilogue's other outputs;
- ``linear(x, weight, bias, activation, x_pre, x_activation, save_pre) -> (out, pre)`` and
  ``linear_backward``: nn.Linear with a fused activation, differentiable;
- ``fused_gemm_epilogue`` and ``fused_gemm_epilogue_grad``: PaddlePaddle's operators;
- ``conv2d(x, w, bias, residual, c, stride, padding, dilation, epilogue, alpha, beta,
  out_dtype) -> Tensor``: a convolution of channels-last tensors with a fused epilogue
  (:mod:`._conv`), returning a new channels-last tensor; forward-only (a backward through it
  raises).

On CUDA tensors they run the kernels; on CPU tensors, the float64 reference
(:mod:`._reference`).
"""

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import _conv, _gemm, _reference
from ._gemm import Problem, describe, output_specs
from ._tensor import tensor_arg

Tensor = torch.Tensor

# ---------------------------------------------------------------------------------------------
# Types, devices, the stream

DTYPE_NAMES = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.int32: "words",
}
TORCH_DTYPES = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "words": torch.int32,
}


is_compiling = torch.compiler.is_compiling


def dtype_name(t: Tensor) -> str:
    return DTYPE_NAMES.get(t.dtype, str(t.dtype).replace("torch.", ""))


if hasattr(torch._C, "_cuda_getCurrentRawStream"):

    def current_stream(index: int) -> int:
        """The raw ``cudaStream_t`` of PyTorch's current stream on device ``index``."""
        return torch._C._cuda_getCurrentRawStream(index)

else:  # pragma: no cover - older or CPU-only builds

    def current_stream(index: int) -> int:
        return int(torch.cuda.current_stream(index).cuda_stream)


def _device(op: str, named: Sequence[Tuple[str, Optional[Tensor]]]) -> Tuple[bool, int]:
    """``(is_cuda, index)`` of the tensors, all on one device, or a ``ValueError`` naming
    the first that is elsewhere."""
    first_name, first = named[0]
    dev = first.device
    for name, t in named[1:]:
        if t is not None and t.device != dev:
            raise ValueError(f"{op}: argument '{name}' is on {t.device} but '{first_name}' is on {dev}")
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"{op}: argument '{first_name}' is on {dev}, expected a CUDA (or CPU) tensor")
    return dev.type == "cuda", (dev.index or 0)


# ---------------------------------------------------------------------------------------------
# gemm


def _problem(op: str, a: Tensor, b: Tensor, out_dtype: Optional[torch.dtype], out: Optional[Tensor]) -> Problem:
    od = None if out_dtype is None else DTYPE_NAMES.get(out_dtype, str(out_dtype))
    if out is not None:
        if out_dtype is not None and out.dtype != out_dtype:
            raise ValueError(f"{op}: argument 'out' has dtype {out.dtype}, out_dtype is {out_dtype}")
        od = dtype_name(out)
    return _gemm.problem(
        op, a.shape, a.stride(), dtype_name(a), b.shape, b.stride(), dtype_name(b), od,
        None if out is None else out.shape, None if out is None else out.stride(),
    )


def _inputs(op: str, desc: Dict[str, Any], given: Dict[str, Optional[Tensor]], beta: float) -> Dict[str, Tensor]:
    """The epilogue's inputs by epilogue name, each one the epilogue reads given, and none
    that it does not read (``aux_in`` stands for ``aux_in_bits`` too)."""
    used = set(desc["inputs"])
    if beta == 0:
        used.discard("c")
    if "aux_in_bits" in used:
        used.discard("aux_in_bits")
        used.add("aux_in")
        bits = True
    else:
        bits = False
    keyword = {"bias_col": "bias"}
    out = {}
    for name, t in given.items():
        kw = keyword.get(name, name)
        if t is None:
            if name in used:
                raise ValueError(f"{op}: the epilogue `{desc['text']}` reads {name}: pass {kw}=")
            continue
        if name not in used:
            why = " with beta = 0" if name == "c" and "c" in desc["inputs"] else ""
            raise ValueError(f"{op}: argument '{kw}' is given but the epilogue `{desc['text']}` does not read it{why}")
        out["aux_in_bits" if (name == "aux_in" and bits) else name] = t
    return out


def _check_input(op: str, p: Problem, name: str, t: Tensor) -> None:
    """An epilogue input has its shape over D (or one shared by every batch) and the output's
    type (a bit mask: int32 words)."""
    kw = {"bias_col": "bias", "aux_in_bits": "aux_in"}.get(name, name)
    if name in ("bias_row", "bias_col"):
        n = p.m if name == "bias_row" else p.n
        ok = [(n,)] + ([(p.batch, n)] if p.batch else [])
    else:
        full = p.mask_shape() if name == "aux_in_bits" else p.d_shape()
        ok = [tuple(full), tuple(full[-2:])]
    if tuple(t.shape) not in ok:
        want = " or ".join(str(s) for s in dict.fromkeys(ok))
        what = " (a bit mask's int32 words, rows of D's storage order)" if name == "aux_in_bits" else ""
        raise ValueError(f"{op}: argument '{kw}' has shape {tuple(t.shape)}, expected {want}{what}")
    if name == "aux_in_bits":
        if t.dtype != torch.int32:
            raise ValueError(f"{op}: argument '{kw}' has dtype {t.dtype}: a bit mask is int32 words")
    elif t.dtype != TORCH_DTYPES[p.out_dtype]:
        raise ValueError(f"{op}: argument '{kw}' has dtype {t.dtype}, expected {TORCH_DTYPES[p.out_dtype]} (the output's type)")


def _operand(p: Problem, name: str, kw: str, t: Tensor, op: str) -> tuple:
    """A tensor as the native launch takes it."""
    dt = dtype_name(t)
    if name in ("bias_row", "bias_col"):
        if t.dim() not in (1, 2):
            raise ValueError(f"{op}: argument '{kw}' has {t.dim()} dimensions {tuple(t.shape)}, expected 1 (or 2 with the batch first)")
        return _gemm.vector(p, t.data_ptr(), dt, t.shape, t.stride())
    if t.dim() not in (2, 3):
        raise ValueError(f"{op}: argument '{kw}' has {t.dim()} dimensions {tuple(t.shape)}, expected 2 (or 3 with the batch first)")
    if name in ("aux_in_bits", "aux_bits"):
        if t.dtype != torch.int32:
            raise ValueError(f"{op}: argument '{kw}' has dtype {t.dtype}: a bit mask is int32 words")
        want = p.mask_shape()[-2:]
        if tuple(t.shape[-2:]) != want:
            raise ValueError(f"{op}: argument '{kw}' has shape {tuple(t.shape)}: a bit mask over D is {want} words")
        if t.stride(-1) != 1:
            raise ValueError(f"{op}: argument '{kw}' has strides {t.stride()}: a bit mask's words must be contiguous along a row")
        return _gemm.mask(p, t.data_ptr(), t.shape, t.stride())
    return _gemm.matrix(p, t.data_ptr(), dt, t.shape, t.stride())


#: Slots of the epilogue's inputs and of the outputs in the calls below.
IN_SLOTS = ("a", "b", "c", "residual", "aux_in", "bias_row", "bias_col")
OUT_SLOTS = ("out", "aux", "bgrad_row", "bgrad_col", "sum_k_a", "sum_k_b")


def _contiguous(shape: Sequence[int]) -> Tuple[int, ...]:
    strides, acc = [], 1
    for e in reversed(shape):
        strides.append(acc)
        acc *= max(e, 1)
    return tuple(reversed(strides))


class Call:
    """One kind of eager ``gemm`` call, checked and planned once: what to allocate and how
    to hand each tensor to the compiled ``Gemm``. Calling it with the tensors (of the shapes,
    strides, types and device it was planned for) allocates the outputs not given and
    launches; the library checks every operand again at each launch."""

    __slots__ = ("g", "index", "device", "alloc", "pos", "kw", "present", "zero", "reference")

    def __call__(self, ins: Sequence[Optional[Tensor]], outs: Sequence[Optional[Tensor]]) -> List[Tensor]:
        made = list(outs)
        # empty_strided with the strides computed at planning: a third of torch.empty's
        # host time, which parses its size argument at every call.
        for j, shape, strides, dt in self.alloc:
            if self.zero:
                made[j] = torch.zeros(shape, dtype=dt, device=self.device)
            else:
                made[j] = torch.empty_strided(shape, strides, dtype=dt, device=self.device)
        if self.zero:
            for j in self.present:
                if outs[j] is not None:
                    outs[j].zero_()
            return [made[j] for j in self.present]
        if self.reference is not None:
            return self.reference(ins, made)
        tensors = (ins, made)
        pos = [(tensors[src][j].data_ptr(),) + rest for src, j, rest in self.pos]
        kw = {name: (tensors[src][j].data_ptr(),) + rest for name, src, j, rest in self.kw}
        self.g.launch(current_stream(self.index), *pos, **kw)
        return [made[j] for j in self.present]


def plan_call(
    op: str,
    ins: Sequence[Optional[Tensor]],
    outs: Sequence[Optional[Tensor]],
    epilogue: str,
    alpha: float,
    beta: float,
    out_dtype: Optional[torch.dtype],
) -> Call:
    """Checks one call (every refusal a ``ValueError`` naming the argument) and plans it:
    finds or builds the ``Gemm`` on CUDA, the float64 reference on the CPU."""
    a, b = ins[0], ins[1]
    desc = describe(epilogue)
    out = outs[0]
    p = _problem(op, a, b, out_dtype, out)
    given = dict(zip(IN_SLOTS[2:], ins[2:]))
    inputs = _inputs(op, desc, given, beta)
    named = [("a", a), ("b", b)] + list(inputs.items()) + [(n, t) for n, t in zip(OUT_SLOTS, outs)]
    cuda, index = _device(op, named)
    # The generic intake's checks (element alignment, overlapping outputs, ...), named by
    # argument; the kernels' library checks the rest at every launch.
    kind = a.device.type
    for name, t in [("a", a), ("b", b)] + [({"bias_col": "bias", "aux_in_bits": "aux_in"}.get(n, n), t) for n, t in inputs.items()]:
        tensor_arg(t, name, op, device=kind, broadcast=True)
    for name, t in zip(OUT_SLOTS, outs):
        if t is not None:
            tensor_arg(t, name, op, device=kind, output=True)
    specs = output_specs(p, desc)
    written = {name for name, _, _ in specs}
    for name, t in zip(OUT_SLOTS, outs):
        if t is not None and name not in written:
            raise ValueError(f"{op}: argument '{name}' is given but the epilogue `{desc['text']}` does not write it")
    slot = {n: j for j, n in enumerate(OUT_SLOTS)}
    for name, shape, dt in specs:
        t = outs[slot[name]]
        if t is not None and (tuple(t.shape) != tuple(shape) or t.dtype != TORCH_DTYPES[dt]):
            raise ValueError(
                f"{op}: argument '{name}' has shape {tuple(t.shape)} and dtype {t.dtype}, "
                f"expected {tuple(shape)} and {TORCH_DTYPES[dt]}"
            )
    for name, t in inputs.items():
        _check_input(op, p, name, t)
    call = Call()
    call.device, call.index = a.device, index
    call.present = [slot[name] for name, _, _ in specs]
    call.alloc = [
        (slot[name], tuple(shape), _contiguous(shape), TORCH_DTYPES[dt])
        for name, shape, dt in specs
        if outs[slot[name]] is None
    ]
    call.zero = p.m == 0 or p.n == 0
    call.reference = None
    call.g = None
    if call.zero:
        return call
    if not cuda:
        def reference(ins_, made):
            given_ = dict(zip(IN_SLOTS[2:], ins_[2:]))
            inputs_ = {("aux_in_bits" if (k == "aux_in" and "aux_in_bits" in inputs) else k): v
                       for k, v in given_.items() if v is not None}
            results = _reference.gemm(p, ins_[0], ins_[1], desc["text"], inputs_, alpha, beta)
            for j, r in zip(call.present, results):
                made[j].copy_(r)
            return [made[j] for j in call.present]

        call.reference = reference
        return call
    call.g = _gemm.compiled(index, p, desc["text"], float(alpha), float(beta))
    in_slot = {n: j for j, n in enumerate(IN_SLOTS)}

    def recipe(name, kw, t, shape, dt):
        """The operand without its pointer: from the tensor given, or from the shape of the
        one that will be allocated (contiguous)."""
        if name in ("bgrad_row", "bgrad_col", "sum_k_a", "sum_k_b"):
            if t is not None:
                return _gemm.vector(p, 0, dtype_name(t), t.shape, t.stride())[1:]
            return _gemm.vector(p, 0, dt, shape, _contiguous(shape))[1:]
        if t is not None:
            return _operand(p, name, kw, t, op)[1:]
        strides = _contiguous(shape)
        if name == "aux_bits":
            return _gemm.mask(p, 0, shape, strides)[1:]
        return _gemm.matrix(p, 0, dt, shape, strides)[1:]

    call.pos = [
        (0, 0, _gemm.matrix(p, 0, p.dtype, a.shape, a.stride())[1:]),
        (0, 1, _gemm.matrix(p, 0, p.dtype, b.shape, b.stride())[1:]),
        (1, 0, recipe("out", "out", out, p.d_shape(), p.out_dtype)),
    ]
    call.kw = []
    for name, t in inputs.items():
        kw = {"bias_col": "bias", "aux_in_bits": "aux_in"}.get(name, name)
        base = "aux_in" if name == "aux_in_bits" else name
        call.kw.append((base, 0, in_slot[base], _operand(p, name, kw, t, op)[1:]))
    for name, shape, dt in specs[1:]:
        j = slot[name]
        kind = "aux_bits" if dt == "words" else name
        call.kw.append((name, 1, j, recipe(kind, name, outs[j], shape, dt)))
    return call


def gemm_launch(
    a: Tensor,
    b: Tensor,
    epilogue: str,
    given: Dict[str, Optional[Tensor]],
    alpha: float,
    beta: float,
    out_dtype: Optional[torch.dtype],
    outs: Dict[str, Optional[Tensor]],
    op: str = "gemm",
) -> List[Tensor]:
    """One call (inside the ops: on plain tensors), checked and planned at the first call
    of its kind, launched: D and the epilogue's other outputs."""
    ins = (a, b) + tuple(given.get(n) for n in IN_SLOTS[2:])
    outs_ = tuple(outs.get(n) for n in OUT_SLOTS)
    r = gemm_eager(ins, outs_, epilogue, alpha, beta, out_dtype, op=op, inside=True)
    if r is None:
        r = plan_call(op, ins, outs_, epilogue, alpha, beta, out_dtype)(ins, outs_)
    return r


_CALLS: Dict[tuple, Call] = {}
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def gemm_eager(
    ins: Sequence[Optional[Tensor]],
    outs: Sequence[Optional[Tensor]],
    epilogue: str,
    alpha: float,
    beta: float,
    out_dtype,
    op: str = "gemm",
    inside: bool = False,
) -> Optional[List[Tensor]]:
    """The eager path of ``tessera.ops.gemm``: the call planned for these tensors' shapes,
    strides, types and devices (planned at its first use), or ``None`` where the call must
    go through the dispatcher (a tensor subclass such as a fake tensor, gradients needed).
    ``inside``: called from an op's implementation, where autograd is already handled."""
    key = [op, epilogue, alpha, beta, out_dtype]
    grad = not inside and torch.is_grad_enabled()
    for t in ins:
        if t is None:
            key.append(None)
        elif type(t) not in _PLAIN or (grad and t.requires_grad):
            return None
        else:
            key.append((t.shape, t.stride(), t.dtype, t.device))
    for t in outs:
        if t is None:
            key.append(None)
        elif type(t) not in _PLAIN:
            return None
        else:
            key.append((t.shape, t.stride(), t.dtype, t.device))
    key = tuple(key)
    call = _CALLS.get(key)
    if call is None:
        call = plan_call(op, ins, outs, epilogue, alpha, beta, out_dtype)
        if len(_CALLS) > 4096:
            _CALLS.clear()
        _CALLS[key] = call
    return call(ins, outs)


def check_output(op: str, name: str, given: Tensor, made: Tensor) -> None:
    """An output the caller gave has the shape and type of the one the op made."""
    if given.shape != made.shape or given.dtype != made.dtype:
        raise ValueError(
            f"{op}: argument '{name}' has shape {tuple(given.shape)} and dtype {given.dtype}, "
            f"expected {tuple(made.shape)} and {made.dtype}"
        )


def _alloc(given: Optional[Tensor], shape, dtype: str, device, zero: bool = False) -> Tensor:
    if given is not None:
        if zero:
            given.zero_()
        return given
    if zero:
        return torch.zeros(shape, dtype=TORCH_DTYPES[dtype], device=device)
    return torch.empty_strided(shape, _contiguous(shape), dtype=TORCH_DTYPES[dtype], device=device)


def _output_names(epilogue: str) -> Tuple[str, ...]:
    d = describe(epilogue)
    names = ["out"]
    if d["aux"] is not None:
        names.append("aux")
    names += [f"bgrad_{a}" for a in d["bgrad"]] + [f"sum_k_{o}" for o in d["sum_k"]]
    return tuple(names)


#: The names of ``gemm``'s results for an epilogue: a constant of the text for the compiler.
output_names = torch.compiler.assume_constant_result(_output_names)


# ---------------------------------------------------------------------------------------------
# The custom ops

_GEMM_SCHEMA = (
    "(Tensor a, Tensor b, str epilogue, Tensor? c, Tensor? residual, Tensor? aux_in, "
    "Tensor? bias_row, Tensor? bias_col, float alpha, float beta, ScalarType? out_dtype) -> Tensor[]"
)


def _gemm_op(a, b, epilogue, c, residual, aux_in, bias_row, bias_col, alpha, beta, out_dtype):
    given = {"c": c, "residual": residual, "aux_in": aux_in, "bias_row": bias_row, "bias_col": bias_col}
    return gemm_launch(a, b, epilogue, given, alpha, beta, out_dtype, {})


def _gemm_fake(a, b, epilogue, c, residual, aux_in, bias_row, bias_col, alpha, beta, out_dtype):
    desc = describe(epilogue)
    p = _problem("gemm", a, b, out_dtype, None)
    given = {"c": c, "residual": residual, "aux_in": aux_in, "bias_row": bias_row, "bias_col": bias_col}
    _inputs("gemm", desc, given, beta)
    return [a.new_empty(shape, dtype=TORCH_DTYPES[dt]) for _, shape, dt in output_specs(p, desc)]


gemm_op = torch.library.custom_op("tessera::gemm", _gemm_op, mutates_args=(), schema=_GEMM_SCHEMA)
gemm_op.register_fake(_gemm_fake)


# ---- linear: nn.Linear with a fused activation, and its autograd ----------------------------

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh")


def _check_activation(op: str, name: str, act: str) -> None:
    if act not in ACTIVATIONS:
        raise ValueError(f"{op}: argument '{name}' is {act!r}, expected one of {', '.join(ACTIVATIONS)}")


def linear_epilogue(activation: str, bias: bool, save_pre: bool) -> str:
    """``act(aux(acc + bias_col))``, without the parts not asked for."""
    x = "acc + bias_col" if bias else "acc"
    if activation == "none":
        return x
    if save_pre:
        x = f"aux({x})"
    return f"{activation}({x})"


def _flat2(x: Tensor) -> Tensor:
    return x.reshape(-1, x.shape[-1])


def _linear_op(x, weight, bias, activation, x_pre, x_activation, save_pre):
    _check_activation("linear", "activation", activation)
    save = save_pre and activation != "none"
    outs = gemm_launch(
        _flat2(x), weight.t(), linear_epilogue(activation, bias is not None, save),
        {"bias_col": bias}, 1.0, 0.0, None, {}, op="linear",
    )
    shape = tuple(x.shape[:-1]) + (weight.shape[0],)
    out = outs[0].reshape(shape)
    pre = outs[1].reshape(shape) if save else x.new_empty((0,))
    return out, pre


def _linear_fake(x, weight, bias, activation, x_pre, x_activation, save_pre):
    _check_activation("linear", "activation", activation)
    if weight.dim() != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(f"linear: argument 'weight' has shape {tuple(weight.shape)}, expected (*, {x.shape[-1]})")
    shape = tuple(x.shape[:-1]) + (weight.shape[0],)
    out = x.new_empty(shape)
    pre = x.new_empty(shape) if (save_pre and activation != "none") else x.new_empty((0,))
    return out, pre


linear_op = torch.library.custom_op(
    "tessera::linear", _linear_op, mutates_args=(),
    schema="(Tensor x, Tensor weight, Tensor? bias, str activation, Tensor? x_pre, str x_activation, bool save_pre) -> (Tensor, Tensor)",
)
linear_op.register_fake(_linear_fake)


def derivative_epilogue(x_activation: str) -> str:
    """The dX product's epilogue when the layer's input is ``x_activation(x_pre)``: the
    gradient of the input's pre-activation, ``acc * act'(aux_in)``."""
    return "acc" if x_activation == "none" else f"acc * d{x_activation}(aux_in)"


def _linear_backward_op(grad, x, weight, has_bias, x_pre, x_activation, need_x, need_w):
    g2, x2 = _flat2(grad), _flat2(x)
    empty = grad.new_empty((0,))
    dw = db = dx = empty
    if need_w or has_bias:
        outs = gemm_launch(g2.t(), x2, "acc; sum_k_a" if has_bias else "acc", {}, 1.0, 0.0, None, {}, op="linear_backward")
        if need_w:
            dw = outs[0]
        if has_bias:
            db = outs[1].to(weight.dtype)
    if need_x:
        given = {"aux_in": None if x_pre is None else _flat2(x_pre)}
        act = "none" if x_pre is None else x_activation
        dx = gemm_launch(g2, weight, derivative_epilogue(act), given, 1.0, 0.0, None, {}, op="linear_backward")[0]
        dx = dx.reshape(x.shape)
    return dx, dw, db


def _linear_backward_fake(grad, x, weight, has_bias, x_pre, x_activation, need_x, need_w):
    empty = grad.new_empty((0,))
    dx = x.new_empty(x.shape) if need_x else empty
    dw = weight.new_empty(weight.shape) if need_w else empty
    db = weight.new_empty((weight.shape[0],)) if has_bias else empty
    return dx, dw, db


linear_backward_op = torch.library.custom_op(
    "tessera::linear_backward", _linear_backward_op, mutates_args=(),
    schema="(Tensor grad, Tensor x, Tensor weight, bool has_bias, Tensor? x_pre, str x_activation, bool need_x, bool need_w) -> (Tensor, Tensor, Tensor)",
)
linear_backward_op.register_fake(_linear_backward_fake)


def _activation_backward(activation: str, grad: Tensor, pre: Tensor) -> Tensor:
    if activation == "relu":
        return torch.ops.aten.threshold_backward(grad, pre, 0)
    if activation == "gelu":
        return torch.ops.aten.gelu_backward(grad, pre)
    if activation == "gelu_tanh":
        return torch.ops.aten.gelu_backward(grad, pre, approximate="tanh")
    return grad


def _linear_setup(ctx, inputs, output):
    x, weight, bias, activation, x_pre, x_activation, save_pre = inputs
    if activation != "none" and not save_pre:
        raise RuntimeError("linear: the pre-activation was not saved (save_pre=False), so there is no backward")
    ctx.set_materialize_grads(False)
    ctx.activation, ctx.x_activation, ctx.has_bias = activation, x_activation, bias is not None
    ctx.fused = x_pre is not None
    ctx.save_for_backward(x, weight, output[1], x_pre)


def _linear_backward(ctx, g_out, g_pre):
    x, weight, pre, x_pre = ctx.saved_tensors
    # The gradient of the pre-activation: through the activation from `out`, plus what
    # reached `pre` directly (a next layer that fused this activation's derivative).
    dpre = None
    if g_out is not None:
        dpre = _activation_backward(ctx.activation, g_out, pre)
    if g_pre is not None and ctx.activation != "none":
        dpre = g_pre if dpre is None else dpre + g_pre
    if dpre is None:
        return None, None, None, None, None, None, None
    need_x = ctx.needs_input_grad[4] if ctx.fused else ctx.needs_input_grad[0]
    need_w = ctx.needs_input_grad[1]
    dx, dw, db = linear_backward_op(
        dpre, x, weight, ctx.has_bias, x_pre if ctx.fused else None, ctx.x_activation, need_x, need_w,
    )
    dx = dx if need_x else None
    dw = dw if need_w else None
    db = db if ctx.has_bias and ctx.needs_input_grad[2] else None
    if ctx.fused:
        return None, dw, db, None, dx, None, None
    return dx, dw, db, None, None, None, None


linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)


# ---- PaddlePaddle's operators ----------------------------------------------------------------

_PADDLE_LOCK = threading.Lock()
_PADDLE: Dict[tuple, Any] = {}


def _paddle_cached(key: tuple, make) -> Any:
    op = _PADDLE.get(key)
    if op is None:
        op = make()
        with _PADDLE_LOCK:
            op = _PADDLE.setdefault(key, op)
    return op


def _logical(t: Tensor, transposed: bool, name: str, op: str) -> tuple:
    """``t`` as the logical matrix it stands for (its transpose when ``transposed``)."""
    if t.dim() != 2:
        raise ValueError(f"{op}: argument '{name}' has {t.dim()} dimensions {tuple(t.shape)}, expected 2")
    s0, s1 = t.stride()
    r, c = t.shape
    dt = dtype_name(t)
    return (t.data_ptr(), dt, (c, r), (s1, s0)) if transposed else (t.data_ptr(), dt, (r, c), (s0, s1))


def paddle_extents(op: str, x: Tensor, y: Tensor, trans_x: bool, trans_y: bool) -> Tuple[int, int, int]:
    for name, t in (("x", x), ("y", y)):
        if t.dim() != 2:
            raise ValueError(f"{op}: argument '{name}' has {t.dim()} dimensions {tuple(t.shape)}, expected 2")
    m, k = (x.shape[1], x.shape[0]) if trans_x else (x.shape[0], x.shape[1])
    ky, n = (y.shape[1], y.shape[0]) if trans_y else (y.shape[0], y.shape[1])
    if ky != k:
        raise ValueError(f"{op}: argument 'y' has shape {tuple(y.shape)} (trans_y={trans_y}), which does not take K = {k} of x {tuple(x.shape)} (trans_x={trans_x})")
    if x.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"{op}: argument 'x' has dtype {x.dtype}, expected bfloat16 or float16")
    if y.dtype != x.dtype:
        raise ValueError(f"{op}: argument 'y' has dtype {y.dtype}, 'x' has {x.dtype}")
    return m, n, k


PADDLE_ACTIVATIONS = ("none", "identity", "relu", "gelu")

_PADDLE_FORWARD = {"none": "bias", "identity": "bias", "relu": "relu_aux_bias", "gelu": "gelu_aux_bias"}
_PADDLE_FORWARD_NO_RESERVE = {"none": "bias", "identity": "bias", "relu": "relu_bias", "gelu": "gelu_bias"}


def _reserve_spec(activation: str, m: int, n: int, dtype: torch.dtype, major: str = "row"):
    """The reserve space of an ``m x n`` output: relu's bit mask (int32 words, rows of the
    storage order padded to 128 bits) or gelu's pre-activation."""
    if activation == "relu":
        outer, inner = (m, n) if major == "row" else (n, m)
        return (outer, _gemm.words_per_row(inner)), torch.int32
    if activation == "gelu":
        return ((m, n) if major == "row" else (n, m)), dtype
    return (0,), dtype


def _paddle_forward(x, y, bias, trans_x, trans_y, activation, reserve):
    op = "fused_gemm_epilogue"
    if activation not in PADDLE_ACTIVATIONS:
        raise ValueError(f"{op}: argument 'activation' is {activation!r}, expected none, relu or gelu")
    m, n, k = paddle_extents(op, x, y, trans_x, trans_y)
    if bias.dim() != 1 or bias.shape[0] != n or bias.dtype != x.dtype:
        raise ValueError(f"{op}: argument 'bias' has shape {tuple(bias.shape)} and dtype {bias.dtype}, expected ({n},) and {x.dtype}")
    cuda, index = _device(op, [("x", x), ("y", y), ("bias", bias)])
    reserve = reserve and activation in ("relu", "gelu")
    rshape, rdtype = _reserve_spec(activation if reserve else "none", m, n, x.dtype)
    if not cuda:
        p = Problem(m, n, k, 0, dtype_name(x), dtype_name(x), "row", "row", "row")
        a = x.t() if trans_x else x
        b = y.t() if trans_y else y
        name = (_PADDLE_FORWARD if reserve else _PADDLE_FORWARD_NO_RESERVE)[activation]
        outs = _reference.gemm(p, a, b, name, {"bias_col": bias}, 1.0, 0.0)
        return outs[0], outs[1] if reserve else x.new_empty(rshape, dtype=rdtype)
    act = "none" if activation == "identity" else activation
    key = (index, m, n, k, trans_x, trans_y, act, reserve, dtype_name(x))
    from .._tessera import FusedGemmEpilogue

    f = _paddle_cached(key, lambda: FusedGemmEpilogue(index, m, n, k, trans_x, trans_y, act, reserve, dtype_name(x)))
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    rs = torch.empty(rshape, dtype=rdtype, device=x.device)
    f.launch(
        current_stream(index),
        _logical(x, trans_x, "x", op),
        _logical(y, trans_y, "y", op),
        (bias.data_ptr(), dtype_name(bias), (n,), (bias.stride(0),)),
        (out.data_ptr(), dtype_name(out), (m, n), out.stride()),
        (rs.data_ptr(), dtype_name(rs), tuple(rs.shape), rs.stride()) if reserve else None,
    )
    return out, rs


def _paddle_forward_fake(x, y, bias, trans_x, trans_y, activation, reserve):
    m, n, _ = paddle_extents("fused_gemm_epilogue", x, y, trans_x, trans_y)
    reserve = reserve and activation in ("relu", "gelu")
    rshape, rdtype = _reserve_spec(activation if reserve else "none", m, n, x.dtype)
    return x.new_empty((m, n)), x.new_empty(rshape, dtype=rdtype)


fused_gemm_epilogue_op = torch.library.custom_op(
    "tessera::fused_gemm_epilogue", _paddle_forward, mutates_args=(),
    schema="(Tensor x, Tensor y, Tensor bias, bool trans_x, bool trans_y, str activation, bool reserve) -> (Tensor, Tensor)",
)
fused_gemm_epilogue_op.register_fake(_paddle_forward_fake)


def _paddle_grad(x, y, reserve_space, out_grad, trans_x, trans_y, activation_grad, need_x_grad, need_y_grad, need_bias_grad):
    need_x, need_y, need_bias = need_x_grad, need_y_grad, need_bias_grad
    op = "fused_gemm_epilogue_grad"
    if activation_grad not in PADDLE_ACTIVATIONS:
        raise ValueError(f"{op}: argument 'activation_grad' is {activation_grad!r}, expected none, relu or gelu")
    act = "none" if activation_grad == "identity" else activation_grad
    m, n, k = paddle_extents(op, x, y, trans_x, trans_y)
    if tuple(out_grad.shape) != (m, n) or out_grad.dtype != x.dtype:
        raise ValueError(f"{op}: argument 'out_grad' has shape {tuple(out_grad.shape)} and dtype {out_grad.dtype}, expected ({m}, {n}) and {x.dtype}")
    if need_bias and not need_y:
        raise ValueError(f"{op}: bias_grad is summed beside the y_grad product: ask for y_grad too")
    x_major = "col" if trans_x else "row"
    if act != "none" and need_x:
        if reserve_space is None:
            raise ValueError(f"{op}: argument 'reserve_space' is needed for activation_grad={activation_grad}")
        rshape, rdtype = _reserve_spec(act, m, k, x.dtype, x_major)
        if tuple(reserve_space.shape) != tuple(rshape) or reserve_space.dtype != rdtype or not reserve_space.is_contiguous():
            raise ValueError(
                f"{op}: argument 'reserve_space' has shape {tuple(reserve_space.shape)} and dtype {reserve_space.dtype}, "
                f"expected a contiguous {tuple(rshape)} of {rdtype} (the reserve space of the layer whose output is x)"
            )
    cuda, index = _device(op, [("x", x), ("y", y), ("out_grad", out_grad), ("reserve_space", reserve_space)])
    empty = x.new_empty((0,))
    if not cuda:
        dx = dy = db = empty
        if need_x:
            p = Problem(m, k, n, 0, dtype_name(x), dtype_name(x), "row", "row", x_major)
            yt = y if trans_y else y.t()
            inputs = {}
            if act == "relu":
                inputs["aux_in_bits"] = reserve_space
            elif act == "gelu":
                inputs["aux_in"] = reserve_space.t() if trans_x else reserve_space
            name = {"none": "acc", "relu": "drelu", "gelu": "dgelu"}[act]
            dx = _reference.gemm(p, out_grad, yt, name, inputs, 1.0, 0.0)[0]
            dx = dx.t().contiguous() if trans_x else dx
        if need_y:
            p = Problem(k, n, m, 0, dtype_name(x), dtype_name(x), "row", "row", "row")
            xt = x if trans_x else x.t()
            outs = _reference.gemm(p, xt, out_grad, "acc; sum_k_b" if need_bias else "acc", {}, 1.0, 0.0)
            dy = outs[0].t().contiguous() if trans_y else outs[0]
            if need_bias:
                db = outs[1].to(x.dtype)
        return dx, dy, db
    key = (index, m, n, k, trans_x, trans_y, act, need_x, need_y, need_bias, dtype_name(x))
    from .._tessera import FusedGemmEpilogueGrad

    g = _paddle_cached(key, lambda: FusedGemmEpilogueGrad(index, m, n, k, trans_x, trans_y, act, need_x, need_y, need_bias, dtype_name(x)))
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if need_x else None
    dy = torch.empty(y.shape, dtype=y.dtype, device=y.device) if need_y else None
    db32 = torch.empty((n,), dtype=torch.float32, device=x.device) if need_bias else None
    g.launch(
        current_stream(index),
        (out_grad.data_ptr(), dtype_name(out_grad), (m, n), out_grad.stride()),
        _logical(x, not trans_x, "x", op),
        _logical(y, not trans_y, "y", op),
        None if (act == "none" or not need_x) else (reserve_space.data_ptr(), dtype_name(reserve_space), tuple(reserve_space.shape), reserve_space.stride(), reserve_space.numel()),
        None if dx is None else _logical(dx, trans_x, "x_grad", op),
        None if dy is None else _logical(dy, trans_y, "y_grad", op),
        None if db32 is None else (db32.data_ptr(), "fp32", (n,), (1,)),
    )
    return (
        dx if dx is not None else empty,
        dy if dy is not None else empty,
        db32.to(x.dtype) if db32 is not None else empty,
    )


def _paddle_grad_fake(x, y, reserve_space, out_grad, trans_x, trans_y, activation_grad, need_x_grad, need_y_grad, need_bias_grad):
    need_x, need_y, need_bias = need_x_grad, need_y_grad, need_bias_grad
    _, n, _ = paddle_extents("fused_gemm_epilogue_grad", x, y, trans_x, trans_y)
    empty = x.new_empty((0,))
    return (
        x.new_empty(x.shape) if need_x else empty,
        y.new_empty(y.shape) if need_y else empty,
        x.new_empty((n,)) if need_bias else empty,
    )


fused_gemm_epilogue_grad_op = torch.library.custom_op(
    "tessera::fused_gemm_epilogue_grad", _paddle_grad, mutates_args=(),
    schema=(
        "(Tensor x, Tensor y, Tensor? reserve_space, Tensor out_grad, bool trans_x, bool trans_y, "
        "str activation_grad, bool need_x_grad, bool need_y_grad, bool need_bias_grad) -> (Tensor, Tensor, Tensor)"
    ),
)
fused_gemm_epilogue_grad_op.register_fake(_paddle_grad_fake)


# ---- conv2d: a convolution of channels-last tensors, forward only ---------------------------

_CONV2D_SCHEMA = (
    "(Tensor x, Tensor w, Tensor? bias, Tensor? residual, Tensor? c, int[2] stride, int[4] padding, "
    "int[2] dilation, str epilogue, float alpha, float beta, ScalarType? out_dtype) -> Tensor"
)
_CONV2D_ARGS = ("x", "w", "bias", "residual", "c")


def _conv2d_op(x, w, bias, residual, c, stride, padding, dilation, epilogue, alpha, beta, out_dtype):
    return _conv.run(x, w, bias, residual, c, stride, padding, dilation, epilogue, alpha, beta, out_dtype)


def _conv2d_backward(ctx, grad):
    # No backward kernel: the convolution is forward-only. (A backward of a relu epilogue
    # needs the pre-activation, which the op does not return: it returns y alone.)
    wanted = [name for name, need in zip(_CONV2D_ARGS, ctx.needs_input_grad) if need]
    raise RuntimeError(
        f"conv2d: argument '{wanted[0] if wanted else 'x'}' requires grad and a backward through "
        "tessera.ops.conv2d was asked for (or traced, under torch.compile), but the op is "
        "forward-only: it has no backward. Call it under torch.no_grad() or torch.inference_mode() "
        "(or detach its inputs), or use torch.nn.functional.conv2d where gradients are needed"
    )


conv2d_op = torch.library.custom_op("tessera::conv2d", _conv2d_op, mutates_args=(), schema=_CONV2D_SCHEMA)
conv2d_op.register_fake(_conv.empty)
conv2d_op.register_autograd(_conv2d_backward)
