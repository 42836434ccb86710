//! The epilogue language seen from Python without a GPU: what an epilogue reads and writes
//! (`describe_epilogue`, which `tessera.ops` uses to allocate outputs and to write the fake
//! implementations of its PyTorch ops), and the float64 reference that evaluates it
//! (`evaluate_epilogue`, behind the ops' CPU implementations and the tests).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tessera::kernels::epilogue::{
    evaluate, parse_epilogue, AuxFormat, EpilogueTree, EvalInputs, Leaf, Operand, Sink, VecAxis,
};

use crate::errors::{guard, Raise};

/// The tree of `text`, or `ValueError` naming `op` and saying what is wrong with the text.
pub(crate) fn tree(op: &str, text: &str) -> PyResult<EpilogueTree> {
    parse_epilogue(text)
        .map_err(|e| PyValueError::new_err(format!("{op}: argument 'epilogue': {e}")))
}

/// The inputs a tree reads, by their names in the epilogue language (`c` included whenever
/// the tree mentions it; it is read only when beta is not 0).
fn inputs(t: &EpilogueTree) -> Vec<&'static str> {
    [
        (Leaf::C, "c"),
        (Leaf::Residual, "residual"),
        (Leaf::AuxIn, "aux_in"),
        (Leaf::AuxInBits, "aux_in_bits"),
        (Leaf::BiasRow, "bias_row"),
        (Leaf::BiasCol, "bias_col"),
    ]
    .into_iter()
    .filter(|(l, _)| t.d.uses(*l))
    .map(|(_, n)| n)
    .collect()
}

/// `describe_epilogue(text)`: a dict with `text` (the tree printed back), `inputs` (the
/// names read), `aux` (`None`, `"out"` for a full aux in D's type, `"fp32"`, `"bf16"`,
/// `"fp16"`, or `"bits"` for the ReLU mask), `bgrad` (`"row"`, `"col"`: fp32 sums) and
/// `sum_k` (`"a"`, `"b"`: fp32 operand sums), in the order the outputs are returned.
#[pyfunction]
pub(crate) fn describe_epilogue<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    const OP: &str = "describe_epilogue";
    guard(py, OP, || {
        let t = tree(OP, text)?;
        let d = PyDict::new(py);
        d.set_item("text", t.to_string())?;
        d.set_item("inputs", inputs(&t))?;
        let mut aux: Option<String> = None;
        let mut bgrad = Vec::new();
        for s in t.d.sinks() {
            match s {
                Sink::Aux(AuxFormat::Bits) => aux = Some("bits".into()),
                Sink::Aux(AuxFormat::Full(None)) => aux = Some("out".into()),
                Sink::Aux(AuxFormat::Full(Some(dt))) => aux = Some(dt.to_string()),
                Sink::Bgrad(VecAxis::Row) => bgrad.push("row"),
                Sink::Bgrad(VecAxis::Col) => bgrad.push("col"),
            }
        }
        bgrad.sort_unstable_by_key(|a| if *a == "row" { 0 } else { 1 });
        bgrad.dedup();
        let mut sum_k: Vec<&str> = t
            .sum_k
            .iter()
            .map(|o| match o {
                Operand::A => "a",
                Operand::B => "b",
            })
            .collect();
        sum_k.sort_unstable();
        sum_k.dedup();
        d.set_item("aux", aux)?;
        d.set_item("bgrad", bgrad)?;
        d.set_item("sum_k", sum_k)?;
        Ok(d)
    })
}

/// One float64 input of the reference: a flat list (or `None`).
type Values = Option<Vec<f64>>;

/// `evaluate_epilogue(text, m, n, batch, k, alpha, beta, acc, c=..., ...)`: the float64
/// reference of the epilogue on flat row-major values (`batch x M x N` matrices, `batch x M`
/// / `batch x N` or shared vectors, `aux_in_bits` as booleans), returning a dict of flat
/// lists: `d`, and `aux`, `bgrad_row`, `bgrad_col`, `sum_k_a`, `sum_k_b` where the tree
/// writes them (`aux_bits` as 1.0 / 0.0).
#[pyfunction]
#[pyo3(signature = (text, m, n, batch, k, alpha, beta, acc, *, c=None, residual=None,
    aux_in=None, aux_in_bits=None, bias_row=None, bias_col=None, a=None, b=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate_epilogue<'py>(
    py: Python<'py>,
    text: &str,
    m: usize,
    n: usize,
    batch: usize,
    k: usize,
    alpha: f64,
    beta: f64,
    acc: Vec<f64>,
    c: Values,
    residual: Values,
    aux_in: Values,
    aux_in_bits: Option<Vec<bool>>,
    bias_row: Values,
    bias_col: Values,
    a: Values,
    b: Values,
) -> PyResult<Bound<'py, PyDict>> {
    const OP: &str = "evaluate_epilogue";
    guard(py, OP, || {
        let t = tree(OP, text)?;
        let mn = m * n * batch;
        let check = |name: &str, v: &Option<Vec<f64>>, want: &[usize]| -> PyResult<()> {
            match v {
                Some(v) if !want.contains(&v.len()) => Err(PyValueError::new_err(format!(
                    "{OP}: argument '{name}' has {} values, expected {want:?}",
                    v.len()
                ))),
                _ => Ok(()),
            }
        };
        check("acc", &Some(acc.clone()), &[mn])?;
        for (name, v) in [("c", &c), ("residual", &residual), ("aux_in", &aux_in)] {
            check(name, v, &[mn])?;
        }
        check("bias_row", &bias_row, &[m, m * batch])?;
        check("bias_col", &bias_col, &[n, n * batch])?;
        check("a", &a, &[m * k * batch])?;
        check("b", &b, &[k * n * batch])?;
        if aux_in_bits.as_ref().is_some_and(|v| v.len() != mn) {
            return Err(PyValueError::new_err(format!(
                "{OP}: argument 'aux_in_bits' must have {mn} values"
            )));
        }
        let mut inp = EvalInputs::new(m, n, batch, &acc);
        inp.k = k;
        inp.alpha = alpha;
        inp.beta = beta;
        inp.c = c.as_deref();
        inp.residual = residual.as_deref();
        inp.aux_in = aux_in.as_deref();
        inp.aux_in_bits = aux_in_bits.as_deref();
        inp.bias_row = bias_row.as_deref();
        inp.bias_col = bias_col.as_deref();
        inp.a = a.as_deref();
        inp.b = b.as_deref();
        let out = evaluate(&t, &inp)
            .map_err(|e| Raise::new("ArgumentError", OP, format!("{OP}: {e}")).into_pyerr(py))?;
        let d = PyDict::new(py);
        d.set_item("d", out.d)?;
        d.set_item("aux", out.aux)?;
        d.set_item("bgrad_row", out.bgrad_row)?;
        d.set_item("bgrad_col", out.bgrad_col)?;
        d.set_item("sum_k_a", out.sum_k_a)?;
        d.set_item("sum_k_b", out.sum_k_b)?;
        Ok(d)
    })
}
