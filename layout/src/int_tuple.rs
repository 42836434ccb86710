//! `IntTuple`: an integer, or a tuple of `IntTuple`s.

use std::fmt;

use smallvec::SmallVec;

use crate::error::{mul, LayoutError, Result};

/// An integer or a (possibly nested, possibly empty) tuple of `IntTuple`s.
///
/// This is CuTe's `IntTuple`. `3` and `(3)` are different values: the first is an integer
/// (rank 1, depth 0), the second a rank-1 tuple (depth 1).
///
/// ```
/// use tessera_layout::IntTuple;
/// let t: IntTuple = "((2,4),3)".parse().unwrap();
/// assert_eq!(t.rank(), 2);
/// assert_eq!(t.depth(), 2);
/// assert_eq!(t.product().unwrap(), 24);
/// assert_eq!(t.to_string(), "((2,4),3)");
/// assert_ne!("3".parse::<IntTuple>().unwrap(), "(3)".parse::<IntTuple>().unwrap());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum IntTuple {
    /// A leaf.
    Int(i64),
    /// A tuple of modes.
    Tuple(Vec<IntTuple>),
}

/// The leaves of an int tuple in order, as a small vector (no allocation up to 8 leaves).
pub type Leaves = SmallVec<[i64; 8]>;

impl From<i64> for IntTuple {
    fn from(v: i64) -> Self {
        IntTuple::Int(v)
    }
}

impl From<Vec<IntTuple>> for IntTuple {
    fn from(v: Vec<IntTuple>) -> Self {
        IntTuple::Tuple(v)
    }
}

impl IntTuple {
    /// A tuple of the given modes.
    pub fn tuple(modes: impl IntoIterator<Item = IntTuple>) -> Self {
        IntTuple::Tuple(modes.into_iter().collect())
    }

    /// A flat tuple of integers.
    pub fn flat(ints: impl IntoIterator<Item = i64>) -> Self {
        IntTuple::Tuple(ints.into_iter().map(IntTuple::Int).collect())
    }

    /// Whether this is an integer.
    pub fn is_int(&self) -> bool {
        matches!(self, IntTuple::Int(_))
    }

    /// Whether this is a tuple.
    pub fn is_tuple(&self) -> bool {
        matches!(self, IntTuple::Tuple(_))
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            IntTuple::Int(v) => Some(*v),
            IntTuple::Tuple(_) => None,
        }
    }

    /// Number of top-level modes: 1 for an integer.
    pub fn rank(&self) -> usize {
        match self {
            IntTuple::Int(_) => 1,
            IntTuple::Tuple(v) => v.len(),
        }
    }

    /// Nesting depth: 0 for an integer, 1 for a flat tuple.
    pub fn depth(&self) -> usize {
        match self {
            IntTuple::Int(_) => 0,
            IntTuple::Tuple(v) => 1 + v.iter().map(IntTuple::depth).max().unwrap_or(0),
        }
    }

    /// The top-level modes; an integer is its own single mode.
    pub fn modes(&self) -> &[IntTuple] {
        match self {
            IntTuple::Int(_) => std::slice::from_ref(self),
            IntTuple::Tuple(v) => v,
        }
    }

    /// Mode `i` (CuTe's `get<i>`); an integer has only mode 0, itself.
    pub fn mode(&self, i: usize) -> Option<&IntTuple> {
        self.modes().get(i)
    }

    /// The leaves, left to right.
    pub fn leaves(&self) -> Leaves {
        let mut out = Leaves::new();
        self.push_leaves(&mut out);
        out
    }

    fn push_leaves(&self, out: &mut Leaves) {
        match self {
            IntTuple::Int(v) => out.push(*v),
            IntTuple::Tuple(v) => v.iter().for_each(|m| m.push_leaves(out)),
        }
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        match self {
            IntTuple::Int(_) => 1,
            IntTuple::Tuple(v) => v.iter().map(IntTuple::leaf_count).sum(),
        }
    }

    /// The flat tuple of the leaves (an integer stays an integer).
    pub fn flatten(&self) -> IntTuple {
        match self {
            IntTuple::Int(_) => self.clone(),
            IntTuple::Tuple(_) => IntTuple::flat(self.leaves()),
        }
    }

    /// Product of the leaves (1 for the empty tuple), checked for overflow.
    pub fn product(&self) -> Result<i64> {
        self.leaves().iter().try_fold(1i64, |acc, &v| {
            acc.checked_mul(v)
                .ok_or_else(|| LayoutError::overflow("size", self.to_string()))
        })
    }

    /// The same structure with every leaf replaced by `f(leaf)`.
    pub fn map_leaves(&self, f: &mut impl FnMut(i64) -> i64) -> IntTuple {
        match self {
            IntTuple::Int(v) => IntTuple::Int(f(*v)),
            IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|m| m.map_leaves(f)).collect()),
        }
    }

    /// The same structure with every leaf replaced by `f(leaf)`, stopping at the first error.
    pub fn try_map_leaves(&self, f: &mut impl FnMut(i64) -> Result<i64>) -> Result<IntTuple> {
        Ok(match self {
            IntTuple::Int(v) => IntTuple::Int(f(*v)?),
            IntTuple::Tuple(v) => IntTuple::Tuple(
                v.iter()
                    .map(|m| m.try_map_leaves(f))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Rebuilds this structure with leaves taken in order from `leaves`.
    /// Returns `None` if `leaves` has the wrong length.
    pub fn with_leaves(&self, leaves: &[i64]) -> Option<IntTuple> {
        let mut it = leaves.iter().copied();
        let out = self.map_leaves(&mut |_| it.next().unwrap_or(0));
        (leaves.len() == self.leaf_count()).then_some(out)
    }

    /// Same structure as `self`, every leaf `v` (CuTe's `repeat_like`).
    pub fn repeat_like(&self, v: i64) -> IntTuple {
        self.map_leaves(&mut |_| v)
    }

    /// Wraps an integer into a rank-1 tuple; a tuple is returned as is.
    pub fn wrap(self) -> IntTuple {
        match self {
            IntTuple::Int(_) => IntTuple::Tuple(vec![self]),
            t => t,
        }
    }

    /// Unwraps a rank-1 tuple into its only mode (recursively); anything else as is.
    pub fn unwrap_single(self) -> IntTuple {
        match self {
            IntTuple::Tuple(mut v) if v.len() == 1 => v.pop().expect("len 1").unwrap_single(),
            t => t,
        }
    }

    /// Exclusive prefix products of the leaves, in this structure (CuTe's `prefix_product`,
    /// the strides of the column-major layout of this shape), starting from `init`.
    pub fn prefix_product(&self, init: i64) -> Result<IntTuple> {
        let mut acc = init;
        self.try_map_leaves(&mut |v| {
            let here = acc;
            acc = mul("prefix_product", acc, v)?;
            Ok(here)
        })
    }
}

/// `a` and `b` have the same tree structure (CuTe's `congruent`).
///
/// ```
/// use tessera_layout::{congruent, IntTuple};
/// let p = |s: &str| s.parse::<IntTuple>().unwrap();
/// assert!(congruent(&p("((2,4),3)"), &p("((1,8),2)")));
/// assert!(!congruent(&p("(8,3)"), &p("((1,8),2)")));
/// ```
pub fn congruent(a: &IntTuple, b: &IntTuple) -> bool {
    match (a, b) {
        (IntTuple::Int(_), IntTuple::Int(_)) => true,
        (IntTuple::Tuple(x), IntTuple::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| congruent(p, q))
        }
        _ => false,
    }
}

/// `a` is at most as deep as `b` everywhere: an integer in `a` may stand for a whole subtree
/// of `b` (CuTe's `weakly_congruent`).
///
/// ```
/// use tessera_layout::{weakly_congruent, IntTuple};
/// let p = |s: &str| s.parse::<IntTuple>().unwrap();
/// assert!(weakly_congruent(&p("(8,3)"), &p("((2,4),3)")));
/// assert!(!weakly_congruent(&p("((2,4),3)"), &p("(8,3)")));
/// ```
pub fn weakly_congruent(a: &IntTuple, b: &IntTuple) -> bool {
    match (a, b) {
        (IntTuple::Int(_), _) => true,
        (IntTuple::Tuple(_), IntTuple::Int(_)) => false,
        (IntTuple::Tuple(x), IntTuple::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| weakly_congruent(p, q))
        }
    }
}

/// Shape `a` is compatible with shape `b`: they have the same size and every coordinate of
/// `a` is a valid coordinate of `b` (CuTe's `compatible`): an integer in `a` covers a subtree
/// of `b` of the same size.
///
/// ```
/// use tessera_layout::{compatible, IntTuple};
/// let p = |s: &str| s.parse::<IntTuple>().unwrap();
/// assert!(compatible(&p("24"), &p("((2,4),3)")));
/// assert!(compatible(&p("(8,3)"), &p("((2,4),3)")));
/// assert!(!compatible(&p("(4,6)"), &p("((2,4),3)")));
/// ```
pub fn compatible(a: &IntTuple, b: &IntTuple) -> bool {
    match (a, b) {
        (IntTuple::Int(x), _) => b.product().map(|s| s == *x).unwrap_or(false),
        (IntTuple::Tuple(_), IntTuple::Int(_)) => false,
        (IntTuple::Tuple(x), IntTuple::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| compatible(p, q))
        }
    }
}

impl fmt::Display for IntTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntTuple::Int(v) => write!(f, "{v}"),
            IntTuple::Tuple(v) => {
                f.write_str("(")?;
                for (i, m) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{m}")?;
                }
                f.write_str(")")
            }
        }
    }
}
