//! The functions of `tessera eval`, called from Python through the evaluator itself
//! (`tessera::expr::call_function`), so that every function dispatches on its arguments
//! exactly as the calculator does; and what the calculator has no function for yet.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tessera::expr::{self, Value};
use tessera::swizzle::{AnyLayout, ENUMERATION_LIMIT};

use crate::convert::{value, value_to_py};
use crate::errors::{guard, Attr, OrRaise, Raise};
use crate::pictures::any_layout;

/// Calls the function `name` on values already converted.
pub(crate) fn dispatch<'py>(
    py: Python<'py>,
    name: &str,
    args: Vec<Value>,
) -> PyResult<Bound<'py, PyAny>> {
    guard(py, name, || {
        let v = expr::call_function(name, args).or_raise(py)?;
        value_to_py(py, v)
    })
}

/// `call(name, *args)`: the function `name` of `tessera eval` on Python arguments.
#[pyfunction]
#[pyo3(signature = (name, *args))]
pub(crate) fn call<'py>(
    py: Python<'py>,
    name: &str,
    args: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    let vals = guard(py, name, || {
        args.iter()
            .enumerate()
            .map(|(i, a)| value(&a, name, &format!("argument {}", i + 1)))
            .collect::<PyResult<Vec<_>>>()
    })?;
    dispatch(py, name, vals)
}

/// `evaluate(text)`: one expression of `tessera eval`, as a Python value.
#[pyfunction]
pub(crate) fn evaluate<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    guard(py, "eval", || {
        let v = expr::evaluate(text).or_raise(py)?;
        value_to_py(py, v)
    })
}

/// The names and usage lines of the functions `tessera eval --help` lists.
pub(crate) fn functions() -> Vec<(&'static str, &'static str)> {
    expr::FUNCTIONS.to_vec()
}

/// `functionally_equal(a, b)`: the same size and `a(i) == b(i)` for every index, found by
/// enumeration (up to `ENUMERATION_LIMIT` indices; above it, `TooLargeError`).
#[pyfunction]
pub(crate) fn functionally_equal(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    const OP: &str = "functionally_equal";
    guard(py, OP, || {
        let (a, b) = (any_layout(a, OP, "a")?, any_layout(b, OP, "b")?);
        if a.size() != b.size() {
            return Ok(false);
        }
        if a.size() as u64 > ENUMERATION_LIMIT {
            return Err(Raise::new(
                "TooLargeError",
                OP,
                format!(
                    "{OP}: {a}, {b}: needs enumerating {} points, above the bound {ENUMERATION_LIMIT}",
                    a.size()
                ),
            )
            .operands(&format!("{a}, {b}"))
            .attr("needed", Attr::Big(a.size() as u128))
            .attr("limit", Attr::Big(u128::from(ENUMERATION_LIMIT)))
            .into_pyerr(py));
        }
        py.detach(|| same_offsets(&a, &b)).or_raise(py)
    })
}

fn same_offsets(a: &AnyLayout, b: &AnyLayout) -> Result<bool, tessera::swizzle::SwizzleError> {
    for i in 0..a.size() {
        if a.call(i)? != b.call(i)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `congruent`, `weakly_congruent` or `compatible` of two int tuples (CuTe's shape
/// predicates).
#[pyfunction]
pub(crate) fn int_tuple_relation(
    py: Python<'_>,
    name: &str,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    guard(py, name, || {
        let (x, y) = (
            crate::convert::int_tuple(a, name, "a")?,
            crate::convert::int_tuple(b, name, "b")?,
        );
        match name {
            "congruent" => Ok(tessera::layout::congruent(&x, &y)),
            "weakly_congruent" => Ok(tessera::layout::weakly_congruent(&x, &y)),
            "compatible" => Ok(tessera::layout::compatible(&x, &y)),
            other => Err(crate::errors::argument_error(
                py,
                "int_tuple_relation",
                format!("no relation `{other}`"),
            )),
        }
    })
}

/// Panics inside the guard every entry point uses, so the tests can check that a panic
/// reaches Python as `tessera.InternalError` and the interpreter goes on.
#[pyfunction]
pub(crate) fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    guard(py, "_panic_for_tests", || -> PyResult<()> {
        panic!("deliberate panic")
    })
}
