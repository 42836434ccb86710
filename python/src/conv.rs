//! The convolution seen from Python without a GPU: its spec checked and its epilogue named
//! (`conv_describe`), and each tensor's logical sizes and strides checked against the
//! channels-last rule (`conv_check_layout`), as the kernels' library checks them at launch.
//! `tessera.ops.conv2d` calls both on every path, so a CPU tensor is refused for the same
//! reason, in the same words, as a CUDA one.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tessera::kernels::ConvSpec;
use tessera::layout::{IntTuple, Layout};

use crate::errors::guard;

/// The geometry of one call, as Python gives it.
type Geometry = (
    [i64; 4],
    [i64; 4],
    (i64, i64),
    (i64, i64, i64, i64),
    (i64, i64),
);

/// The spec of `g` with the epilogue `text` (`bias_residual_relu` and `bias_relu_residual`
/// name the two residual orders), or a `ValueError` naming `op` and the rule.
pub(crate) fn spec(op: &str, g: Geometry, text: &str) -> PyResult<ConvSpec> {
    let (x, w, (sh, sw), (t, b, l, r), (dh, dw)) = g;
    let s = ConvSpec::new(x, w)
        .stride(sh, sw)
        .padding(t, b, l, r)
        .dilation(dh, dw)
        .epilogue(text)
        .map_err(|e| PyValueError::new_err(format!("{op}: argument 'epilogue': {e}")))?;
    s.output_dims()
        .map_err(|e| PyValueError::new_err(format!("{op}: {e}")))?;
    Ok(s)
}

/// `conv_describe(x, w, stride, padding, dilation, epilogue)`: a dict with `text` (the
/// epilogue's tree printed) and `out` (y's logical sizes `(N, K, P, Q)`); a `ValueError` for
/// a convolution that is not valid.
#[pyfunction]
pub(crate) fn conv_describe<'py>(
    py: Python<'py>,
    x: [i64; 4],
    w: [i64; 4],
    stride: (i64, i64),
    padding: (i64, i64, i64, i64),
    dilation: (i64, i64),
    epilogue: &str,
) -> PyResult<Bound<'py, PyDict>> {
    const OP: &str = "conv2d";
    guard(py, OP, || {
        let s = spec(OP, (x, w, stride, padding, dilation), epilogue)?;
        let d = PyDict::new(py);
        d.set_item("text", s.tree().to_string())?;
        let out = s
            .output_dims()
            .map_err(|e| PyValueError::new_err(format!("{OP}: {e}")))?;
        d.set_item("out", out.to_vec())?;
        Ok(d)
    })
}

/// `conv_check_layout(x, w, stride, padding, dilation, tensor, shape, strides, name=tensor)`:
/// `None`, or a `ValueError` naming the argument `name`, the dimension and the stride found
/// against the one channels-last needs (any stride is accepted on a dimension of size 1).
/// `tensor` is the convolution's name for it (`x`, `w`, `y`, `residual`, `c`).
#[pyfunction]
#[pyo3(signature = (x, w, stride, padding, dilation, tensor, shape, strides, name=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_check_layout(
    py: Python<'_>,
    x: [i64; 4],
    w: [i64; 4],
    stride: (i64, i64),
    padding: (i64, i64, i64, i64),
    dilation: (i64, i64),
    tensor: &str,
    shape: Vec<i64>,
    strides: Vec<i64>,
    name: Option<&str>,
) -> PyResult<()> {
    const OP: &str = "conv2d";
    let name = name.unwrap_or(tensor);
    guard(py, OP, || {
        let s = spec(OP, (x, w, stride, padding, dilation), "acc")?;
        if shape.len() != 4 || strides.len() != 4 {
            return Err(PyValueError::new_err(format!(
                "{OP}: argument '{name}' has shape {shape:?} and strides {strides:?}, expected 4 of each"
            )));
        }
        let layout = Layout::new(IntTuple::flat(shape), IntTuple::flat(strides))
            .map_err(|e| PyValueError::new_err(format!("{OP}: argument '{name}': {e}")))?;
        s.check_layout(tensor, &layout)
            .map_err(|e| PyValueError::new_err(format!("{OP}: argument '{name}': {e}")))
    })
}
