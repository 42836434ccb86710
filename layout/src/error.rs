//! The one error type of `tessera-layout`.

/// What went wrong in a layout operation.
///
/// Every variant names the operation (`op`) and carries its operands printed in CuTe notation,
/// so a message reads like `composition: (4,6,8):(2,3,5) o 6:3: ...`. What CuTe rejects at
/// compile time (divisibility, non-injective complement) is an error here too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The text is not a well-formed int tuple, layout or expression.
    #[error("parse: {msg} at position {pos} in `{input}`")]
    Parse {
        /// The whole text that was parsed.
        input: String,
        /// Byte offset of the problem.
        pos: usize,
        /// What was expected or found.
        msg: String,
    },
    /// Two tuples that must have the same (or a compatible) structure do not.
    #[error("{op}: {lhs} and {rhs} are not {relation}")]
    Mismatch {
        /// The operation.
        op: &'static str,
        /// Left operand.
        lhs: String,
        /// Right operand.
        rhs: String,
        /// The relation that fails: "congruent", "weakly congruent", "compatible", ...
        relation: &'static str,
    },
    /// A shape has an extent below one.
    #[error("{op}: shape {shape} has an extent below 1")]
    BadShape {
        /// The operation.
        op: &'static str,
        /// The offending shape.
        shape: String,
    },
    /// A size, stride or offset does not fit in an `i64`.
    #[error("{op}: integer overflow with operands {operands}")]
    Overflow {
        /// The operation.
        op: &'static str,
        /// The operands.
        operands: String,
    },
    /// A mode index or range is outside the operand's rank.
    #[error("{op}: index {index} out of range for {operand} (rank {rank})")]
    OutOfRange {
        /// The operation.
        op: &'static str,
        /// The operand indexed.
        operand: String,
        /// The index (or range) asked for.
        index: String,
        /// The operand's rank.
        rank: usize,
    },
    /// The operands violate the operation's precondition (composition admissibility,
    /// divisibility, injectivity, ...), so no layout meets its post-condition.
    #[error("{op}: {operands}: {reason}")]
    Inadmissible {
        /// The operation.
        op: &'static str,
        /// The operands.
        operands: String,
        /// Which condition fails.
        reason: String,
    },
}

impl LayoutError {
    /// The name of the operation that failed (`"parse"` for syntax errors).
    pub fn op(&self) -> &'static str {
        match self {
            LayoutError::Parse { .. } => "parse",
            LayoutError::Mismatch { op, .. }
            | LayoutError::BadShape { op, .. }
            | LayoutError::Overflow { op, .. }
            | LayoutError::OutOfRange { op, .. }
            | LayoutError::Inadmissible { op, .. } => op,
        }
    }

    /// Whether this is a syntax error (as opposed to an algebra error).
    pub fn is_parse(&self) -> bool {
        matches!(self, LayoutError::Parse { .. })
    }

    /// An overflow error of `op` with the given operands.
    pub fn overflow(op: &'static str, operands: impl Into<String>) -> Self {
        LayoutError::Overflow {
            op,
            operands: operands.into(),
        }
    }

    /// An inadmissible-operands error of `op`.
    pub fn inadmissible(
        op: &'static str,
        operands: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        LayoutError::Inadmissible {
            op,
            operands: operands.into(),
            reason: reason.into(),
        }
    }

    /// Re-labels an error raised inside a helper as an error of the public operation `op`
    /// with its operands, so the user sees the operation they called.
    pub fn within(self, op: &'static str, operands: impl FnOnce() -> String) -> Self {
        match self {
            LayoutError::Overflow { .. } => LayoutError::Overflow {
                op,
                operands: operands(),
            },
            LayoutError::Inadmissible { reason, .. } => LayoutError::Inadmissible {
                op,
                operands: operands(),
                reason,
            },
            LayoutError::Mismatch {
                lhs, rhs, relation, ..
            } => LayoutError::Mismatch {
                op,
                lhs,
                rhs,
                relation,
            },
            LayoutError::BadShape { shape, .. } => LayoutError::BadShape { op, shape },
            LayoutError::OutOfRange {
                operand,
                index,
                rank,
                ..
            } => LayoutError::OutOfRange {
                op,
                operand,
                index,
                rank,
            },
            e @ LayoutError::Parse { .. } => e,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = LayoutError> = std::result::Result<T, E>;

/// Checked `a * b`, reporting an overflow of `op`.
pub(crate) fn mul(op: &'static str, a: i64, b: i64) -> Result<i64> {
    a.checked_mul(b)
        .ok_or_else(|| LayoutError::overflow(op, format!("{a} * {b}")))
}

/// Checked `a + b`, reporting an overflow of `op`.
pub(crate) fn add(op: &'static str, a: i64, b: i64) -> Result<i64> {
    a.checked_add(b)
        .ok_or_else(|| LayoutError::overflow(op, format!("{a} + {b}")))
}
