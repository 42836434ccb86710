//! The one error type of `tessera-layout`.

/// What went wrong in a layout operation.
///
/// Every variant names the operation (`op`) and carries its operands printed in CuTe notation,
/// so a message reads like `composition: (4,6,8):(2,3,5) o 6:3: ...`. What CuTe rejects at
/// compile time (divisibility, non-injective complement) is an error here too.
///
/// `Display` shortens long texts (an operand or an input above 240 characters keeps its
/// start and end around an ellipsis), so a message stays readable whatever it quotes; the
/// fields keep the whole text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The text is not a well-formed int tuple, layout or expression.
    #[error("parse: {msg} at position {pos} in `{}`", excerpt(.input, *.pos))]
    Parse {
        /// The whole text that was parsed.
        input: String,
        /// Byte offset of the problem.
        pos: usize,
        /// What was expected or found.
        msg: String,
    },
    /// Two tuples that must have the same (or a compatible) structure do not.
    #[error("{op}: {} and {} are not {relation}", elide(.lhs), elide(.rhs))]
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
    #[error("{op}: shape {} has an extent below 1", elide(.shape))]
    BadShape {
        /// The operation.
        op: &'static str,
        /// The offending shape.
        shape: String,
    },
    /// A size, stride or offset does not fit in an `i64`.
    #[error("{op}: integer overflow with operands {}", elide(.operands))]
    Overflow {
        /// The operation.
        op: &'static str,
        /// The operands.
        operands: String,
    },
    /// A mode index or range is outside the operand's rank.
    #[error("{op}: index {} out of range for {} (rank {rank})", elide(.index), elide(.operand))]
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
    /// The operation has no answer for these operands: a precondition fails (injectivity,
    /// CuTe's divisibility conditions, ...), no layout meets the post-condition, or the
    /// operation could not establish it within its enumeration bounds. `reason` says which
    /// of these holds, and names a witness (an index or a mode) where there is one.
    #[error("{op}: {}: {}", elide(.operands), elide(.reason))]
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

    /// The same error reported as an error of `op`, operands unchanged: for an operation
    /// that fails inside another one it calls (a syntax error stays a syntax error).
    pub fn relabel(self, op: &'static str) -> Self {
        match self {
            e @ LayoutError::Parse { .. } => e,
            LayoutError::Mismatch {
                lhs, rhs, relation, ..
            } => LayoutError::Mismatch {
                op,
                lhs,
                rhs,
                relation,
            },
            LayoutError::BadShape { shape, .. } => LayoutError::BadShape { op, shape },
            LayoutError::Overflow { operands, .. } => LayoutError::Overflow { op, operands },
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
            LayoutError::Inadmissible {
                operands, reason, ..
            } => LayoutError::Inadmissible {
                op,
                operands,
                reason,
            },
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

/// Texts longer than this are shortened in messages.
const SHOWN: usize = 240;

/// `s`, or its first and last characters around an ellipsis if it is longer than [`SHOWN`].
pub(crate) fn elide(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= SHOWN {
        return s.into();
    }
    let head = floor_boundary(s, SHOWN * 2 / 3);
    let tail = ceil_boundary(s, s.len() - SHOWN / 3);
    format!("{}…{} ({} bytes)", &s[..head], &s[tail..], s.len()).into()
}

/// The part of `input` around byte `pos`, with ellipses where it is cut.
fn excerpt(input: &str, pos: usize) -> std::borrow::Cow<'_, str> {
    if input.len() <= SHOWN {
        return input.into();
    }
    let pos = pos.min(input.len());
    let start = floor_boundary(input, pos.saturating_sub(SHOWN / 2));
    let end = ceil_boundary(input, (pos + SHOWN / 2).min(input.len()));
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&input[start..end]);
    if end < input.len() {
        out.push('…');
    }
    out.into()
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
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
