//! The error of the epilogue module: every malformed tree, text or binding is one of these,
//! before any CUDA source is generated.

use crate::error::KernelError;

/// What is wrong with an epilogue tree, its text form or the tensors bound to it.
///
/// Converts into [`KernelError`] (`?` works in functions returning the crate's `Result`):
/// [`EpilogueError::Misaligned`] becomes [`KernelError::Misaligned`], every other variant
/// [`KernelError::InvalidProblem`] with this error's message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EpilogueError {
    /// The text form does not parse.
    #[error("parse_epilogue: {msg} at byte {pos} of `{text}`")]
    Parse {
        /// The whole text.
        text: String,
        /// Byte offset of the problem.
        pos: usize,
        /// What was expected or found.
        msg: String,
    },
    /// A node's operands have the wrong kind (a coordinate used as a value, a predicate
    /// over values, a non-finite constant, a sink under a select ...).
    #[error("epilogue type error in `{expr}`: {msg}")]
    Type {
        /// The offending sub-expression, in the text form.
        expr: String,
        /// Why.
        msg: String,
    },
    /// A tensor bound to the tree is missing or has the wrong extent or dtype.
    #[error("epilogue binding: {operand}: {msg}")]
    Binding {
        /// The leaf or sink (`bias_col`, `aux`, ...).
        operand: &'static str,
        /// What is wrong, with the values.
        msg: String,
    },
    /// A tensor bound to the tree is not aligned as the generated code accesses it.
    #[error("epilogue binding: {operand} is misaligned: {msg}")]
    Misaligned {
        /// The leaf or sink.
        operand: &'static str,
        /// The requirement that fails, with the values.
        msg: String,
    },
    /// The tree asks for more than the kernel's epilogue supports.
    #[error("epilogue unsupported by the kernel: {msg}")]
    Unsupported {
        /// What, and the limit.
        msg: String,
    },
    /// The CPU evaluator or a CPU reference was given inputs it cannot use.
    #[error("{op}: {msg}")]
    Input {
        /// The function.
        op: &'static str,
        /// What is wrong, with the values.
        msg: String,
    },
}

/// `Result` with [`EpilogueError`].
pub type Result<T> = std::result::Result<T, EpilogueError>;

impl From<EpilogueError> for KernelError {
    fn from(e: EpilogueError) -> KernelError {
        match e {
            EpilogueError::Misaligned { operand, msg } => KernelError::Misaligned {
                op: "epilogue",
                operand,
                msg,
            },
            other => KernelError::InvalidProblem {
                op: "epilogue",
                msg: other.to_string(),
            },
        }
    }
}

impl EpilogueError {
    pub(crate) fn input(op: &'static str, msg: impl Into<String>) -> Self {
        EpilogueError::Input {
            op,
            msg: msg.into(),
        }
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn binding(operand: &'static str, msg: impl Into<String>) -> Self {
        EpilogueError::Binding {
            operand,
            msg: msg.into(),
        }
    }
}
