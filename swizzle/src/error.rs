//! The one error type of `tessera-swizzle`.

use tessera_layout::LayoutError;

/// What went wrong in a swizzle operation.
///
/// Every variant names the operation (`op`) and carries its operands in CuTe notation
/// (`Sw<3,4,3> o 0 o (8,64):(64,1)`). Errors of the plain-layout algebra that a swizzled
/// operation forwards to come through unchanged as [`SwizzleError::Layout`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SwizzleError {
    /// An error of the plain-layout algebra (including syntax errors of the text form).
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// `Sw<B,M,S>` parameters CuTe rejects (`B < 0`, `M < 0`, `|S| < B`) or that do not fit
    /// in 62 bits (`M + B + |S| > 62`).
    #[error("{op}: Sw<{b},{m},{s}>: {reason}")]
    BadSwizzle {
        /// The operation.
        op: &'static str,
        /// Number of mask bits `B`.
        b: i64,
        /// Base `M`.
        m: i64,
        /// Shift `S`.
        s: i64,
        /// Which condition fails.
        reason: String,
    },
    /// The operation has no answer for these operands: a precondition fails, or no result
    /// meets the post-condition; `reason` says which.
    #[error("{op}: {operands}: {reason}")]
    Inadmissible {
        /// The operation.
        op: &'static str,
        /// The operands.
        operands: String,
        /// Which condition fails.
        reason: String,
    },
    /// A size, offset or address does not fit in an `i64`.
    #[error("{op}: integer overflow with operands {operands}")]
    Overflow {
        /// The operation.
        op: &'static str,
        /// The operands.
        operands: String,
    },
    /// The answer could only be found by enumerating more points than the stated bound.
    #[error("{op}: {operands}: needs enumerating {needed} points, above the bound {limit}")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// The operands.
        operands: String,
        /// How many points an exact answer would enumerate (saturating).
        needed: u128,
        /// The bound.
        limit: u64,
    },
}

impl SwizzleError {
    /// The name of the operation that failed (`"parse"` for syntax errors).
    pub fn op(&self) -> &'static str {
        match self {
            SwizzleError::Layout(e) => e.op(),
            SwizzleError::BadSwizzle { op, .. }
            | SwizzleError::Inadmissible { op, .. }
            | SwizzleError::Overflow { op, .. }
            | SwizzleError::TooLarge { op, .. } => op,
        }
    }

    /// Whether this is a syntax error of the text form.
    pub fn is_parse(&self) -> bool {
        matches!(self, SwizzleError::Layout(e) if e.is_parse())
    }

    /// The same error reported as an error of `op`, operands unchanged: for an operation
    /// that fails inside another one it calls (a syntax error stays a syntax error).
    pub fn relabel(self, op: &'static str) -> Self {
        match self {
            SwizzleError::Layout(e) => SwizzleError::Layout(e.relabel(op)),
            SwizzleError::BadSwizzle {
                b, m, s, reason, ..
            } => SwizzleError::BadSwizzle {
                op,
                b,
                m,
                s,
                reason,
            },
            SwizzleError::Inadmissible {
                operands, reason, ..
            } => SwizzleError::Inadmissible {
                op,
                operands,
                reason,
            },
            SwizzleError::Overflow { operands, .. } => SwizzleError::Overflow { op, operands },
            SwizzleError::TooLarge {
                operands,
                needed,
                limit,
                ..
            } => SwizzleError::TooLarge {
                op,
                operands,
                needed,
                limit,
            },
        }
    }

    pub(crate) fn inadmissible(
        op: &'static str,
        operands: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        SwizzleError::Inadmissible {
            op,
            operands: operands.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn overflow(op: &'static str, operands: impl Into<String>) -> Self {
        SwizzleError::Overflow {
            op,
            operands: operands.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = SwizzleError> = std::result::Result<T, E>;

/// The bound on enumerated points used where an exact answer needs enumeration: 2^24.
pub const ENUMERATION_LIMIT: u64 = 1 << 24;
