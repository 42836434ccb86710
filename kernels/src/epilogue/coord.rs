//! Coordinate predicates: a `select` whose predicate compares one output coordinate with a
//! constant (`row < 100`, `col >= 64`, `batch > 0`) is a half-plane of the output, which the
//! generated epilogue hoists out of its per-element code (a tile on one side of the boundary
//! takes one branch for all its elements, see [`super::cuda`]).

use super::tree::{CmpOp, Coord, Expr, Leaf, UnaryOp};

/// A cut of the output: the predicate `coord < at` (every recognized comparison is one of
/// these or its negation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Boundary {
    /// The coordinate compared.
    pub coord: Coord,
    /// The first coordinate on the far side.
    pub at: i64,
}

/// The value of an integer expression made of constants only.
fn literal(e: &Expr) -> Option<i64> {
    match e {
        Expr::Leaf(Leaf::Int(v)) => Some(*v),
        Expr::Unary(UnaryOp::Neg, x) => literal(x)?.checked_neg(),
        Expr::Binary(op, a, b) => {
            let (a, b) = (literal(a)?, literal(b)?);
            use super::tree::BinaryOp::*;
            match op {
                Add => a.checked_add(b),
                Sub => a.checked_sub(b),
                Mul => a.checked_mul(b),
                Max => Some(a.max(b)),
                Min => Some(a.min(b)),
            }
        }
        _ => None,
    }
}

/// `coord OP value` as a boundary and its sense: `true` when the comparison holds below the
/// boundary (`coord < at`), `false` when at and above it (`coord >= at`).
pub fn half_plane_sense(op: CmpOp, a: &Expr, b: &Expr) -> Option<(Boundary, bool)> {
    let (coord, op, v) = match (a, b) {
        (Expr::Leaf(Leaf::Coord(c)), rhs) => (*c, op, literal(rhs)?),
        // `v OP coord` is `coord OP' v` with the comparison mirrored.
        (lhs, Expr::Leaf(Leaf::Coord(c))) => (
            *c,
            match op {
                CmpOp::Lt => CmpOp::Gt,
                CmpOp::Le => CmpOp::Ge,
                CmpOp::Gt => CmpOp::Lt,
                CmpOp::Ge => CmpOp::Le,
            },
            literal(lhs)?,
        ),
        _ => return None,
    };
    // coord < v and coord >= v cut at v; coord <= v and coord > v cut at v + 1.
    let at = match op {
        CmpOp::Lt | CmpOp::Ge => v,
        CmpOp::Le | CmpOp::Gt => v.checked_add(1)?,
    };
    let below = matches!(op, CmpOp::Lt | CmpOp::Le);
    Some((Boundary { coord, at }, below))
}
