//! Python values to the evaluator's [`Value`]s and back.
//!
//! Python side, an int tuple is what CuTe's Python DSLs use: an `int` or a (nested) `tuple`
//! of them, or an `IntTuple` object. A tuple holding a `Layout`, a `Tiler` or `None` (CuTe's
//! `_`) anywhere is a by-mode tiler; a tuple of integers only stays an int tuple, which the
//! evaluator reads as a by-mode tiler where an operation wants one (as CuTe does). `bool` is
//! not an integer here, and a `list` is not a tuple: both are more often a mistake than a
//! shape.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyList, PyString, PyTuple};
use tessera::expr::Value;
use tessera::layout::{algebra::Tiler, IntTuple};

use crate::errors::{argument_error, OrRaise};
use crate::objects::{
    PyBankConflicts, PyComposedLayout, PyF2Map, PyIntTuple, PyLayout, PySwizzle, PyTiler,
};

/// What a Python object is, before it is known whether a tuple is a shape or a tiler.
enum Item {
    Tuple(IntTuple),
    Tiler(Tiler),
}

/// A short description of a Python object for error messages: its type and `repr`.
pub(crate) fn describe(obj: &Bound<'_, PyAny>) -> String {
    let ty = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_string());
    let repr = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".to_string());
    // A huge repr (a tensor, a long list) would drown the message.
    let repr = if repr.chars().count() > 60 {
        format!("{}...", repr.chars().take(57).collect::<String>())
    } else {
        repr
    };
    format!("{ty} {repr}")
}

/// A Python integer (anything with `__index__`, but not `bool`) as an `i64`; `Ok(None)` if
/// `obj` is not an integer at all.
fn integer(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Option<i64>> {
    let py = obj.py();
    if obj.is_instance_of::<PyBool>() {
        return Err(argument_error(
            py,
            op,
            format!(
                "{what} is a bool ({}); an integer is expected",
                describe(obj)
            ),
        ));
    }
    if !obj.is_instance_of::<PyInt>() && !obj.hasattr("__index__")? {
        return Ok(None);
    }
    match obj.extract::<i64>() {
        Ok(v) => Ok(Some(v)),
        Err(_) => Err(crate::errors::Raise::new(
            "IntegerOverflowError",
            op,
            format!("{op}: {what} ({}) does not fit in 64 bits", describe(obj)),
        )
        .into_pyerr(py)),
    }
}

fn item(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Item> {
    let py = obj.py();
    if obj.is_none() {
        return Ok(Item::Tiler(Tiler::Skip));
    }
    if let Ok(l) = obj.cast::<PyLayout>() {
        return Ok(Item::Tiler(Tiler::Layout(l.get().0.clone())));
    }
    if let Ok(t) = obj.cast::<PyTiler>() {
        return Ok(Item::Tiler(t.get().0.clone()));
    }
    if let Ok(t) = obj.cast::<PyIntTuple>() {
        return Ok(Item::Tuple(t.get().0.clone()));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let items = t
            .iter()
            .enumerate()
            .map(|(i, x)| item(&x, op, &format!("{what}[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let tuples: Option<Vec<IntTuple>> = items
            .iter()
            .map(|i| match i {
                Item::Tuple(t) => Some(t.clone()),
                Item::Tiler(_) => None,
            })
            .collect();
        if let Some(modes) = tuples {
            return Ok(Item::Tuple(IntTuple::Tuple(modes)));
        }
        let tilers = items
            .into_iter()
            .map(|i| match i {
                Item::Tuple(t) => Tiler::from_shape(&t).or_raise(py),
                Item::Tiler(t) => Ok(t),
            })
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Item::Tiler(Tiler::ByMode(tilers)));
    }
    if let Some(v) = integer(obj, op, what)? {
        return Ok(Item::Tuple(IntTuple::Int(v)));
    }
    let hint = if obj.is_instance_of::<PyList>() {
        " (a list is not an int tuple: use a tuple)"
    } else if obj.is_instance_of::<PyString>() {
        " (text is not parsed here: use Layout(\"...\"), IntTuple(\"...\"), ... or evaluate)"
    } else {
        ""
    };
    Err(argument_error(
        py,
        op,
        format!(
            "{what} is {}, expected an integer, a tuple, a Layout, a Tiler or None{hint}",
            describe(obj)
        ),
    ))
}

/// A Python object as an int tuple (`int`, nested `tuple` of them, or `IntTuple`).
pub(crate) fn int_tuple(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<IntTuple> {
    if obj.is_instance_of::<PyString>() {
        // Text is accepted where a constructor documents it, not as an operand.
        return Err(argument_error(
            obj.py(),
            op,
            format!("{what} is {}, expected an int tuple", describe(obj)),
        ));
    }
    match item(obj, op, what)? {
        Item::Tuple(t) => Ok(t),
        Item::Tiler(_) => Err(argument_error(
            obj.py(),
            op,
            format!(
                "{what} is {}, expected an int tuple (an integer or a tuple of int tuples)",
                describe(obj)
            ),
        )),
    }
}

/// A Python object as an argument of a `tessera eval` function.
pub(crate) fn value(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Value> {
    if let Ok(m) = obj.cast::<PyF2Map>() {
        return Ok(Value::F2Map(m.get().0.clone()));
    }
    if let Ok(l) = obj.cast::<PySwizzle>() {
        return Ok(Value::Swizzle(l.get().0));
    }
    if let Ok(l) = obj.cast::<PyComposedLayout>() {
        return Ok(Value::SwizzledLayout(l.get().0.clone()));
    }
    if obj.is_none() {
        return Err(argument_error(
            obj.py(),
            op,
            format!("{what} is None; `_` (None) only stands inside a tiler tuple"),
        ));
    }
    if let Ok(l) = obj.cast::<PyLayout>() {
        return Ok(Value::Layout(l.get().0.clone()));
    }
    Ok(match item(obj, op, what)? {
        Item::Tuple(t) => Value::IntTuple(t),
        Item::Tiler(t) => Value::Tiler(t),
    })
}

/// An int tuple as a Python `int` or nested `tuple`.
pub(crate) fn int_tuple_to_py<'py>(py: Python<'py>, t: &IntTuple) -> PyResult<Bound<'py, PyAny>> {
    match t {
        IntTuple::Int(v) => Ok(v.into_pyobject(py)?.into_any()),
        IntTuple::Tuple(ms) => {
            let items = ms
                .iter()
                .map(|m| int_tuple_to_py(py, m))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, items)?.into_any())
        }
    }
}

/// A value of the evaluator as a Python object: `int`/`tuple` for int tuples, the classes of
/// `tessera.layout` for layouts, tilers, swizzles and swizzled layouts, `list` for offsets,
/// `bool`, and `BankConflicts` for a wavefront ratio.
pub(crate) fn value_to_py(py: Python<'_>, v: Value) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        Value::IntTuple(t) => int_tuple_to_py(py, &t)?,
        Value::Layout(l) => Bound::new(py, PyLayout(l))?.into_any(),
        Value::Tiler(t) => Bound::new(py, PyTiler(t))?.into_any(),
        Value::Swizzle(s) => Bound::new(py, PySwizzle(s))?.into_any(),
        Value::SwizzledLayout(l) => Bound::new(py, PyComposedLayout(l))?.into_any(),
        Value::List(xs) => PyList::new(py, xs)?.into_any(),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Value::Ratio(wavefronts, ideal) => {
            Bound::new(py, PyBankConflicts { wavefronts, ideal })?.into_any()
        }
        Value::F2Map(m) => Bound::new(py, PyF2Map(m))?.into_any(),
        // A kind of value added to the evaluator later: its printed form, rather than
        // nothing.
        other => PyString::new(py, &other.to_string()).into_any(),
    })
}
