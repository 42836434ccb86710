//! Rust errors as Python exceptions, and the guard that turns a panic into one.
//!
//! The exception classes are defined in Python (`tessera/_errors.py`), where a class can
//! derive from two built-in exceptions (`OutOfRangeError` is a `LayoutError` and an
//! `IndexError`); this file only picks the class and fills in its attributes. Every
//! exception carries `op` (the operation's name, `"parse"` for syntax errors) and `operands`
//! (the operands in CuTe notation, or `None` where the error has no such field), and its
//! message is the Rust error's `Display`, which starts with the operation.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tessera::expr::Error as ExprError;
use tessera::layout::LayoutError;
use tessera::swizzle::SwizzleError;

/// One attribute of a raised exception.
#[derive(Clone)]
pub(crate) enum Attr {
    Str(String),
    Int(i64),
    /// Counts that may exceed `i64` (the points an enumeration would need).
    Big(u128),
}

/// An exception to raise: the class name in `tessera._errors`, the operation, the message
/// and the class's own attributes.
#[derive(Clone)]
pub(crate) struct Raise {
    pub class: &'static str,
    pub op: String,
    pub operands: Option<String>,
    pub msg: String,
    pub attrs: Vec<(&'static str, Attr)>,
}

impl Raise {
    pub(crate) fn new(class: &'static str, op: &str, msg: impl Into<String>) -> Raise {
        Raise {
            class,
            op: op.to_string(),
            operands: None,
            msg: msg.into(),
            attrs: Vec::new(),
        }
    }

    pub(crate) fn operands(mut self, operands: &str) -> Raise {
        self.operands = Some(operands.to_string());
        self
    }

    pub(crate) fn attr(mut self, name: &'static str, value: Attr) -> Raise {
        self.attrs.push((name, value));
        self
    }

    /// The Python exception object, as a `PyErr`.
    pub(crate) fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self.build(py) {
            Ok(e) => e,
            // Only a broken installation (no `tessera._errors`) gets here; say so rather
            // than hide the original message.
            Err(e) => e,
        }
    }

    fn build(self, py: Python<'_>) -> PyResult<PyErr> {
        let cls = class(py, self.class)?;
        let exc = cls.call1((self.msg,))?;
        exc.setattr("op", self.op)?;
        exc.setattr("operands", self.operands)?;
        for (name, value) in self.attrs {
            match value {
                Attr::Str(s) => exc.setattr(name, s)?,
                Attr::Int(v) => exc.setattr(name, v)?,
                Attr::Big(v) => exc.setattr(name, v)?,
            }
        }
        Ok(PyErr::from_value(exc))
    }
}

/// The class `name` of `tessera._errors`, looked up once.
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || py.import("tessera._errors").map(Bound::unbind))?;
    Ok(module.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// The exception for an error of the layout algebra.
pub(crate) fn layout_error(e: &LayoutError) -> Raise {
    let msg = e.to_string();
    let op = e.op();
    match e {
        LayoutError::Parse { input, pos, .. } => Raise::new("ParseError", op, msg)
            .operands(input)
            .attr("input", Attr::Str(input.clone()))
            .attr("pos", Attr::Int(i64::try_from(*pos).unwrap_or(i64::MAX))),
        LayoutError::Mismatch {
            lhs, rhs, relation, ..
        } => Raise::new("MismatchError", op, msg)
            .operands(&format!("{lhs}, {rhs}"))
            .attr("lhs", Attr::Str(lhs.clone()))
            .attr("rhs", Attr::Str(rhs.clone()))
            .attr("relation", Attr::Str(relation.to_string())),
        LayoutError::BadShape { shape, .. } => Raise::new("BadShapeError", op, msg)
            .operands(shape)
            .attr("shape", Attr::Str(shape.clone())),
        LayoutError::Overflow { operands, .. } => {
            Raise::new("IntegerOverflowError", op, msg).operands(operands)
        }
        LayoutError::OutOfRange {
            operand,
            index,
            rank,
            ..
        } => Raise::new("OutOfRangeError", op, msg)
            .operands(operand)
            .attr("index", Attr::Str(index.clone()))
            .attr("rank", Attr::Int(i64::try_from(*rank).unwrap_or(i64::MAX))),
        LayoutError::Inadmissible {
            operands, reason, ..
        } => Raise::new("InadmissibleError", op, msg)
            .operands(operands)
            .attr("reason", Attr::Str(reason.clone())),
        // A variant added to the Rust enum later still raises the base class.
        _ => Raise::new("LayoutError", op, msg),
    }
}

/// The exception for an error of a swizzle operation.
pub(crate) fn swizzle_error(e: &SwizzleError) -> Raise {
    let msg = e.to_string();
    let op = e.op();
    match e {
        SwizzleError::Layout(e) => layout_error(e),
        SwizzleError::BadSwizzle {
            b, m, s, reason, ..
        } => Raise::new("BadSwizzleError", op, msg)
            .operands(&format!("Sw<{b},{m},{s}>"))
            .attr("bits", Attr::Int(*b))
            .attr("base", Attr::Int(*m))
            .attr("shift", Attr::Int(*s))
            .attr("reason", Attr::Str(reason.clone())),
        SwizzleError::Inadmissible {
            operands, reason, ..
        } => Raise::new("InadmissibleError", op, msg)
            .operands(operands)
            .attr("reason", Attr::Str(reason.clone())),
        SwizzleError::Overflow { operands, .. } => {
            Raise::new("IntegerOverflowError", op, msg).operands(operands)
        }
        SwizzleError::TooLarge {
            operands,
            needed,
            limit,
            ..
        } => Raise::new("TooLargeError", op, msg)
            .operands(operands)
            .attr("needed", Attr::Big(*needed))
            .attr("limit", Attr::Big(u128::from(*limit))),
        _ => Raise::new("LayoutError", op, msg),
    }
}

/// The exception for an error of the `tessera eval` language's functions.
pub(crate) fn expr_error(e: &ExprError) -> Raise {
    match e {
        ExprError::Layout(e) => layout_error(e),
        ExprError::Swizzle(e) => swizzle_error(e),
        // The evaluator's own errors are about the arguments of a call.
        ExprError::Call { op, .. } => Raise::new("ArgumentError", op, e.to_string()),
        _ => Raise::new("LayoutError", e.op(), e.to_string()),
    }
}

/// Errors of the Rust crates, raised as Python exceptions.
pub(crate) trait IntoRaise {
    fn raise(&self) -> Raise;
}

impl IntoRaise for LayoutError {
    fn raise(&self) -> Raise {
        layout_error(self)
    }
}

impl IntoRaise for SwizzleError {
    fn raise(&self) -> Raise {
        swizzle_error(self)
    }
}

impl IntoRaise for ExprError {
    fn raise(&self) -> Raise {
        expr_error(self)
    }
}

impl IntoRaise for Raise {
    fn raise(&self) -> Raise {
        self.clone()
    }
}

/// `Result<T, E>` of the Rust crates into a `PyResult`.
pub(crate) trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T, E: IntoRaise> OrRaise<T> for Result<T, E> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| e.raise().into_pyerr(py))
    }
}

/// An `ArgumentError` of `op`: a Python value of the wrong kind for the operation.
pub(crate) fn argument_error(py: Python<'_>, op: &str, msg: impl Into<String>) -> PyErr {
    let msg = format!("{op}: {}", msg.into());
    Raise::new("ArgumentError", op, msg).into_pyerr(py)
}

/// Runs `f`, turning a panic into `tessera.InternalError` naming `op`: the library's public
/// functions are documented never to panic, so a panic is a bug to report, and a Python
/// session must survive it.
pub(crate) fn guard<T>(py: Python<'_>, op: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            let msg = format!("{op}: internal error (a bug in tessera, please report): {what}");
            Err(Raise::new("InternalError", op, msg).into_pyerr(py))
        }
    }
}
