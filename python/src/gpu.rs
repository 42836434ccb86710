//! The kernels' library API from Python (feature `cuda`): `Gemm`, `FusedGemmEpilogue` and
//! `FusedGemmEpilogueGrad` of `tessera_kernels`, on the caller's device memory and stream.
//!
//! Python hands every tensor over as `(ptr, dtype, shape, strides)`: the device address of
//! element 0, `"bf16"`, `"fp16"`, `"fp32"` or `"words"` (the 32-bit words of a bit mask), the
//! logical extents and the strides in elements (in bits for a bit mask, which then carries a
//! fifth entry, its length in words). They become `Tensor::from_raw` with that layout, so the
//! library checks each one as it checks any caller's (type, layout rules, extent, alignment,
//! overlaps) before anything is queued. The stream is the raw `CUstream` of the caller
//! (PyTorch's current stream), borrowed for the call: nothing is copied, allocated or
//! synchronised.
//!
//! Every device uses its primary context, as PyTorch does, so pointers from PyTorch are valid
//! in it; the `Context` of a device (and with it the compiled-kernel cache) lives as long as
//! the process.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tessera::kernels::{
    Context, Conv2d, DType, FusedGemmEpilogue, FusedGemmEpilogueGrad, Gemm, GemmSpec, KernelError,
    Major, Operands, PaddleActivation, Tensor, TensorMut,
};
use tessera::layout::{IntTuple, Layout};

use crate::errors::{guard, Raise};

/// Python names of the library's operands, for one kind of call: `(library, Python)`.
type Names = &'static [(&'static str, &'static str)];

const GEMM_NAMES: Names = &[("A", "a"), ("B", "b"), ("D", "out"), ("bias_col", "bias")];
const PADDLE_NAMES: Names = &[
    ("A", "x"),
    ("B", "y"),
    ("D", "out"),
    ("bias_col", "bias"),
    ("aux", "reserve_space"),
];
const PADDLE_GRAD_NAMES: Names = &[("aux_in", "reserve_space"), ("sum_k_b", "bias_grad")];
const CONV_NAMES: Names = &[("bias_col", "bias"), ("D", "out"), ("y", "out")];

fn py_name(names: Names, operand: &str) -> String {
    names
        .iter()
        .find(|(l, _)| *l == operand)
        .map_or(operand, |(_, p)| p)
        .to_string()
}

/// A library error as a Python exception: what the caller got wrong (a spec that cannot be
/// planned, an operand that breaks a rule) is a `ValueError` naming the argument; what the
/// machine could not do (no device, NVRTC, the driver) is `tessera.KernelError`.
fn raise(py: Python<'_>, e: KernelError, names: Names) -> PyErr {
    match &e {
        KernelError::Operand {
            op,
            operand,
            layout,
            rule,
        } => PyValueError::new_err(format!(
            "{op}: argument '{}' (layout {layout}): {rule}",
            py_name(names, operand)
        )),
        KernelError::Misaligned { op, operand, msg } => PyValueError::new_err(format!(
            "{op}: argument '{}' is misaligned: {msg}",
            py_name(names, operand)
        )),
        KernelError::InvalidProblem { .. } => PyValueError::new_err(e.to_string()),
        _ => {
            let op = match &e {
                KernelError::NoDevice { op, .. }
                | KernelError::Driver { op, .. }
                | KernelError::NvrtcUnavailable { op, .. }
                | KernelError::UnsupportedArch { op, .. } => op.to_string(),
                KernelError::Compile(f) => f.op.to_string(),
                _ => "kernels".to_string(),
            };
            Raise::new("KernelError", &op, e.to_string()).into_pyerr(py)
        }
    }
}

trait OrKernel<T> {
    fn or_kernel(self, py: Python<'_>, names: Names) -> PyResult<T>;
}

impl<T> OrKernel<T> for Result<T, KernelError> {
    fn or_kernel(self, py: Python<'_>, names: Names) -> PyResult<T> {
        self.map_err(|e| raise(py, e, names))
    }
}

/// The context of device `ordinal` (its primary context), opened once per process.
fn context(py: Python<'_>, ordinal: usize) -> PyResult<Context> {
    static CONTEXTS: OnceLock<Mutex<HashMap<usize, Context>>> = OnceLock::new();
    let map = CONTEXTS.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(c) = map.lock().ok().and_then(|m| m.get(&ordinal).cloned()) {
        return Ok(c);
    }
    let ctx = py
        .detach(|| Context::new(ordinal))
        .or_kernel(py, GEMM_NAMES)?;
    if let Ok(mut m) = map.lock() {
        return Ok(m.entry(ordinal).or_insert(ctx).clone());
    }
    Ok(ctx)
}

fn dtype(op: &str, what: &str, s: &str) -> PyResult<DType> {
    match s {
        "bf16" => Ok(DType::Bf16),
        "fp16" => Ok(DType::F16),
        "fp32" => Ok(DType::F32),
        _ => Err(PyValueError::new_err(format!(
            "{op}: {what} is {s}, expected bf16, fp16 or fp32"
        ))),
    }
}

fn major(op: &str, what: &str, s: &str) -> PyResult<Major> {
    match s {
        "row" => Ok(Major::Row),
        "col" => Ok(Major::Col),
        _ => Err(PyValueError::new_err(format!(
            "{op}: {what} is {s:?}, expected \"row\" or \"col\""
        ))),
    }
}

/// One tensor operand as Python hands it over.
struct Raw {
    ptr: u64,
    /// `None`: bit-mask words.
    dtype: Option<DType>,
    layout: Layout,
    /// Elements (words for a bit mask) from `ptr` that the layout may reach.
    len: usize,
}

/// Elements from element 0 that `shape`/`strides` (non-negative strides) reach: one past the
/// largest offset, 0 for an empty tensor.
fn span(shape: &[i64], strides: &[i64]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    let mut last: i64 = 0;
    for (&e, &s) in shape.iter().zip(strides) {
        last = last.checked_add((e - 1).checked_mul(s.max(0))?)?;
    }
    usize::try_from(last.checked_add(1)?).ok()
}

fn raw(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Raw> {
    let bad = |msg: String| PyValueError::new_err(format!("{op}: argument '{name}' {msg}"));
    let t = obj
        .cast::<PyTuple>()
        .map_err(|_| bad("is not a (ptr, dtype, shape, strides) tuple".into()))?;
    let ptr: u64 = t.get_item(0)?.extract()?;
    let dt: String = t.get_item(1)?.extract()?;
    let shape: Vec<i64> = t.get_item(2)?.extract()?;
    let strides: Vec<i64> = t.get_item(3)?.extract()?;
    if shape.len() != strides.len() || shape.is_empty() {
        return Err(bad(format!("has shape {shape:?} and strides {strides:?}")));
    }
    let dtype = if dt == "words" {
        None
    } else {
        Some(dtype(op, &format!("argument '{name}''s dtype"), &dt)?)
    };
    let len = if t.len() > 4 {
        t.get_item(4)?.extract()?
    } else {
        span(&shape, &strides).ok_or_else(|| bad("has an extent that overflows 64 bits".into()))?
    };
    let layout = Layout::new(
        IntTuple::flat(shape.iter().copied()),
        IntTuple::flat(strides),
    )
    .map_err(|e| bad(format!("has no layout: {e}")))?;
    Ok(Raw {
        ptr,
        dtype,
        layout,
        len,
    })
}

fn opt_raw(op: &str, name: &str, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Raw>> {
    obj.filter(|o| !o.is_none())
        .map(|o| raw(op, name, o))
        .transpose()
}

impl Raw {
    /// An input of the launch.
    ///
    /// SAFETY (for the `from_raw` inside): the Python side passes the address, extent and
    /// layout of a live CUDA tensor of the device, which the caller keeps alive and orders on
    /// the stream (PyTorch's caching allocator keeps a tensor's memory for its stream).
    fn input(&self) -> Tensor<'_> {
        unsafe { Tensor::from_raw(self.ptr, self.dtype, self.len) }.with_layout_ref(&self.layout)
    }

    /// An output of the launch (see [`Raw::input`]).
    fn output(&self) -> TensorMut<'_> {
        unsafe { TensorMut::from_raw(self.ptr, self.dtype, self.len) }.with_layout_ref(&self.layout)
    }

    /// An input with no layout: tight in the order the operator gives it.
    fn tight_input(&self) -> Tensor<'_> {
        unsafe { Tensor::from_raw(self.ptr, self.dtype, self.len) }
    }

    fn tight_output(&self) -> TensorMut<'_> {
        unsafe { TensorMut::from_raw(self.ptr, self.dtype, self.len) }
    }
}

/// The caller's stream (a raw `CUstream`), borrowed for one call, as cudarc's stream of the
/// context (a macro, so that this crate never names cudarc's types).
macro_rules! borrowed_stream {
    ($ctx:expr, $handle:expr) => {
        // SAFETY: the handle is the caller's current stream on this device (a stream of the
        // primary context, as every PyTorch stream is), alive for the call; the wrapper does
        // not destroy it when dropped.
        unsafe { $ctx.cudarc().wrap_borrowed_stream($handle as *mut _) }
    };
}

/// A GEMM with its epilogue planned and compiled for one device: `Gemm` of the library.
#[pyclass(frozen, name = "Gemm", module = "tessera._tessera")]
pub(crate) struct PyGemm {
    gemm: Gemm,
    ctx: Context,
}

#[pymethods]
impl PyGemm {
    #[new]
    #[pyo3(signature = (device, m, n, k, *, batch=1, dtype="bf16", out_dtype=None, a="row",
        b="row", d="row", epilogue="acc", alpha=1.0, beta=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        device: usize,
        m: i64,
        n: i64,
        k: i64,
        batch: i64,
        dtype: &str,
        out_dtype: Option<&str>,
        a: &str,
        b: &str,
        d: &str,
        epilogue: &str,
        alpha: f32,
        beta: f32,
    ) -> PyResult<PyGemm> {
        const OP: &str = "gemm";
        guard(py, OP, || {
            let mut spec = GemmSpec::new(m, n, k)
                .batch(batch)
                .dtype(self::dtype(OP, "dtype", dtype)?)
                .a(major(OP, "a", a)?)
                .b(major(OP, "b", b)?)
                .d(major(OP, "d", d)?)
                .epilogue_tree(crate::epilogue::tree(OP, epilogue)?)
                .alpha(alpha)
                .beta(beta);
            if let Some(o) = out_dtype {
                spec = spec.out_dtype(self::dtype(OP, "out_dtype", o)?);
            }
            let ctx = context(py, device)?;
            let gemm = py
                .detach(|| Gemm::new(&ctx, &spec))
                .or_kernel(py, GEMM_NAMES)?;
            Ok(PyGemm { gemm, ctx })
        })
    }

    /// `"sm90"` or `"sm80"`.
    #[getter]
    fn path(&self) -> &'static str {
        self.gemm.plan().path()
    }

    /// The plan's decisions with their reasons.
    #[getter]
    fn plan(&self) -> String {
        self.gemm.plan().to_string()
    }

    /// The spec in words.
    #[getter]
    fn spec(&self) -> String {
        self.gemm.plan().spec().to_string()
    }

    /// What building this `Gemm` cost: NVRTC compiles and their seconds, cache hits.
    #[getter]
    fn build_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.gemm.build_stats();
        let d = PyDict::new(py);
        d.set_item("compiled", s.compiled)?;
        d.set_item("compile_seconds", s.compile_seconds)?;
        d.set_item("disk_hits", s.disk_hits)?;
        d.set_item("memory_hits", s.memory_hits)?;
        Ok(d)
    }

    /// The device's name.
    #[getter]
    fn device_name(&self) -> String {
        self.ctx.device_name().to_string()
    }

    /// Queues `D = epilogue(A B)` on the stream `stream` (a raw `CUstream`) and returns.
    #[pyo3(signature = (stream, a, b, d, *, c=None, residual=None, aux_in=None,
        bias_row=None, bias_col=None, aux=None, bgrad_row=None, bgrad_col=None,
        sum_k_a=None, sum_k_b=None))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        stream: usize,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        d: &Bound<'_, PyAny>,
        c: Option<&Bound<'_, PyAny>>,
        residual: Option<&Bound<'_, PyAny>>,
        aux_in: Option<&Bound<'_, PyAny>>,
        bias_row: Option<&Bound<'_, PyAny>>,
        bias_col: Option<&Bound<'_, PyAny>>,
        aux: Option<&Bound<'_, PyAny>>,
        bgrad_row: Option<&Bound<'_, PyAny>>,
        bgrad_col: Option<&Bound<'_, PyAny>>,
        sum_k_a: Option<&Bound<'_, PyAny>>,
        sum_k_b: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        const OP: &str = "gemm";
        guard(py, OP, || {
            let (a, b, d) = (raw(OP, "a", a)?, raw(OP, "b", b)?, raw(OP, "out", d)?);
            let c = opt_raw(OP, "c", c)?;
            let residual = opt_raw(OP, "residual", residual)?;
            let aux_in = opt_raw(OP, "aux_in", aux_in)?;
            let bias_row = opt_raw(OP, "bias_row", bias_row)?;
            let bias_col = opt_raw(OP, "bias", bias_col)?;
            let aux = opt_raw(OP, "aux", aux)?;
            let bgrad_row = opt_raw(OP, "bgrad_row", bgrad_row)?;
            let bgrad_col = opt_raw(OP, "bgrad_col", bgrad_col)?;
            let sum_k_a = opt_raw(OP, "sum_k_a", sum_k_a)?;
            let sum_k_b = opt_raw(OP, "sum_k_b", sum_k_b)?;
            let s = borrowed_stream!(self.ctx, stream);
            let r = py.detach(|| {
                let mut ops = Operands::new();
                if let Some(t) = &c {
                    ops = ops.c(t.input());
                }
                if let Some(t) = &residual {
                    ops = ops.residual(t.input());
                }
                if let Some(t) = &aux_in {
                    ops = ops.aux_in(t.input());
                }
                if let Some(t) = &bias_row {
                    ops = ops.bias_row(t.input());
                }
                if let Some(t) = &bias_col {
                    ops = ops.bias_col(t.input());
                }
                if let Some(t) = &aux {
                    ops = ops.aux(t.output());
                }
                if let Some(t) = &bgrad_row {
                    ops = ops.bgrad_row(t.output());
                }
                if let Some(t) = &bgrad_col {
                    ops = ops.bgrad_col(t.output());
                }
                if let Some(t) = &sum_k_a {
                    ops = ops.sum_k_a(t.output());
                }
                if let Some(t) = &sum_k_b {
                    ops = ops.sum_k_b(t.output());
                }
                self.gemm.launch(&s, a.input(), b.input(), d.output(), ops)
            });
            r.or_kernel(py, GEMM_NAMES)
        })
    }
}

fn activation(op: &str, name: &str, s: &str) -> PyResult<PaddleActivation> {
    s.parse()
        .map_err(|e| PyValueError::new_err(format!("{op}: argument '{name}': {e}")))
}

/// PaddlePaddle's `fused_gemm_epilogue` planned and compiled for one problem.
#[pyclass(frozen, name = "FusedGemmEpilogue", module = "tessera._tessera")]
pub(crate) struct PyFusedGemmEpilogue {
    op: FusedGemmEpilogue,
    ctx: Context,
}

#[pymethods]
impl PyFusedGemmEpilogue {
    #[new]
    #[pyo3(signature = (device, m, n, k, trans_x, trans_y, activation, reserve, dtype))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        device: usize,
        m: i64,
        n: i64,
        k: i64,
        trans_x: bool,
        trans_y: bool,
        activation: &str,
        reserve: bool,
        dtype: &str,
    ) -> PyResult<Self> {
        const OP: &str = "fused_gemm_epilogue";
        guard(py, OP, || {
            let act = self::activation(OP, "activation", activation)?;
            let dt = self::dtype(OP, "dtype", dtype)?;
            let ctx = context(py, device)?;
            let op = py
                .detach(|| {
                    FusedGemmEpilogue::new(&ctx, (m, n, k), trans_x, trans_y, act, reserve, dt)
                })
                .or_kernel(py, PADDLE_NAMES)?;
            Ok(Self { op, ctx })
        })
    }

    /// `"sm90"` or `"sm80"`.
    #[getter]
    fn path(&self) -> &'static str {
        self.op.gemm().plan().path()
    }

    /// Queues `out = act(op(X) op(Y) + bias)` (and the reserve space) on `stream`. The
    /// reserve space is tight: `M x N` for gelu, the bit mask's words for relu.
    #[pyo3(signature = (stream, x, y, bias, out, reserve_space=None))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        stream: usize,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        bias: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
        reserve_space: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        const OP: &str = "fused_gemm_epilogue";
        guard(py, OP, || {
            let (x, y) = (raw(OP, "x", x)?, raw(OP, "y", y)?);
            let (bias, out) = (raw(OP, "bias", bias)?, raw(OP, "out", out)?);
            let reserve = opt_raw(OP, "reserve_space", reserve_space)?;
            let s = borrowed_stream!(self.ctx, stream);
            py.detach(|| {
                self.op.launch(
                    &s,
                    x.input(),
                    y.input(),
                    bias.input(),
                    out.output(),
                    reserve.as_ref().map(Raw::tight_output),
                )
            })
            .or_kernel(py, PADDLE_NAMES)
        })
    }
}

/// PaddlePaddle's `fused_gemm_epilogue_grad` planned and compiled for one problem.
#[pyclass(frozen, name = "FusedGemmEpilogueGrad", module = "tessera._tessera")]
pub(crate) struct PyFusedGemmEpilogueGrad {
    op: FusedGemmEpilogueGrad,
    ctx: Context,
}

#[pymethods]
impl PyFusedGemmEpilogueGrad {
    #[new]
    #[pyo3(signature = (device, m, n, k, trans_x, trans_y, activation_grad, want_dx, want_dy,
        want_dbias, dtype))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        device: usize,
        m: i64,
        n: i64,
        k: i64,
        trans_x: bool,
        trans_y: bool,
        activation_grad: &str,
        want_dx: bool,
        want_dy: bool,
        want_dbias: bool,
        dtype: &str,
    ) -> PyResult<Self> {
        const OP: &str = "fused_gemm_epilogue_grad";
        guard(py, OP, || {
            let act = self::activation(OP, "activation_grad", activation_grad)?;
            let dt = self::dtype(OP, "dtype", dtype)?;
            let ctx = context(py, device)?;
            let want = (want_dx, want_dy, want_dbias);
            let op = py
                .detach(|| {
                    FusedGemmEpilogueGrad::new(&ctx, (m, n, k), trans_x, trans_y, act, want, dt)
                })
                .or_kernel(py, PADDLE_GRAD_NAMES)?;
            Ok(Self { op, ctx })
        })
    }

    /// Queues the gradients asked for on `stream`; `bias_grad` is fp32 (length N). The
    /// reserve space is tight, as the forward operator wrote it.
    #[pyo3(signature = (stream, dout, x, y, reserve_space=None, x_grad=None, y_grad=None,
        bias_grad=None))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        stream: usize,
        dout: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        reserve_space: Option<&Bound<'_, PyAny>>,
        x_grad: Option<&Bound<'_, PyAny>>,
        y_grad: Option<&Bound<'_, PyAny>>,
        bias_grad: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        const OP: &str = "fused_gemm_epilogue_grad";
        guard(py, OP, || {
            let dout = raw(OP, "out_grad", dout)?;
            let (x, y) = (raw(OP, "x", x)?, raw(OP, "y", y)?);
            let reserve = opt_raw(OP, "reserve_space", reserve_space)?;
            let dx = opt_raw(OP, "x_grad", x_grad)?;
            let dy = opt_raw(OP, "y_grad", y_grad)?;
            let dbias = opt_raw(OP, "bias_grad", bias_grad)?;
            let s = borrowed_stream!(self.ctx, stream);
            py.detach(|| {
                self.op.launch(
                    &s,
                    dout.input(),
                    x.input(),
                    y.input(),
                    reserve.as_ref().map(Raw::tight_input),
                    dx.as_ref().map(Raw::output),
                    dy.as_ref().map(Raw::output),
                    dbias.as_ref().map(Raw::tight_output),
                )
            })
            .or_kernel(py, PADDLE_GRAD_NAMES)
        })
    }
}

/// A convolution with its epilogue planned and compiled for one device: `Conv2d` of the
/// library (channels-last tensors given by logical sizes and strides; its workspace owned).
#[pyclass(frozen, name = "Conv2d", module = "tessera._tessera")]
pub(crate) struct PyConv2d {
    conv: Conv2d,
    ctx: Context,
}

#[pymethods]
impl PyConv2d {
    #[new]
    #[pyo3(signature = (device, x, w, *, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
        dtype="bf16", out_dtype=None, epilogue="acc", alpha=1.0, beta=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        device: usize,
        x: [i64; 4],
        w: [i64; 4],
        stride: (i64, i64),
        padding: (i64, i64, i64, i64),
        dilation: (i64, i64),
        dtype: &str,
        out_dtype: Option<&str>,
        epilogue: &str,
        alpha: f32,
        beta: f32,
    ) -> PyResult<PyConv2d> {
        const OP: &str = "conv2d";
        guard(py, OP, || {
            let mut spec = crate::conv::spec(OP, (x, w, stride, padding, dilation), epilogue)?
                .dtype(self::dtype(OP, "dtype", dtype)?)
                .alpha(alpha)
                .beta(beta);
            if let Some(o) = out_dtype {
                spec = spec.out_dtype(self::dtype(OP, "out_dtype", o)?);
            }
            let ctx = context(py, device)?;
            let conv = py
                .detach(|| Conv2d::new(&ctx, &spec))
                .or_kernel(py, CONV_NAMES)?;
            Ok(PyConv2d { conv, ctx })
        })
    }

    /// `"gemm"` (the GEMM reads x directly), `"implicit gemm"` (the GEMM loads A from x by TMA's
    /// im2col mode), `"halo gemm"` (from x, one strip per filter row for all its taps),
    /// `"window gemm"` (C <= 8: from x staged in phase planes) or `"im2col+gemm"` (a gather
    /// into the workspace, then the GEMM).
    #[getter]
    fn path(&self) -> &'static str {
        self.conv.path()
    }

    /// The GEMM's plan, its decisions with their reasons.
    #[getter]
    fn plan(&self) -> String {
        self.conv.plan().to_string()
    }

    /// Queues `y = epilogue(conv2d(x, w))` on the stream `stream` (a raw `CUstream`).
    #[pyo3(signature = (stream, x, w, y, *, bias=None, residual=None, c=None))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        stream: usize,
        x: &Bound<'_, PyAny>,
        w: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        bias: Option<&Bound<'_, PyAny>>,
        residual: Option<&Bound<'_, PyAny>>,
        c: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        const OP: &str = "conv2d";
        guard(py, OP, || {
            let (x, w, y) = (raw(OP, "x", x)?, raw(OP, "w", w)?, raw(OP, "out", y)?);
            let bias = opt_raw(OP, "bias", bias)?;
            let residual = opt_raw(OP, "residual", residual)?;
            let c = opt_raw(OP, "c", c)?;
            let s = borrowed_stream!(self.ctx, stream);
            py.detach(|| {
                let mut ops = Operands::new();
                if let Some(t) = &bias {
                    ops = ops.bias_col(t.input());
                }
                if let Some(t) = &residual {
                    ops = ops.residual(t.input());
                }
                if let Some(t) = &c {
                    ops = ops.c(t.input());
                }
                self.conv.launch(&s, x.input(), w.input(), y.output(), ops)
            })
            .or_kernel(py, CONV_NAMES)
        })
    }
}
