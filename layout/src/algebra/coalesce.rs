//! `coalesce`, `filter_zeros`, `filter`: the same function with fewer modes.

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use super::support::{for_each_leaf, push_merged, Modes};

/// Builds a flat layout from `(shape, stride)` modes: no mode gives `1:0`, one mode an integral
/// layout, more a flat tuple. The caller guarantees the modes come from a valid layout with the
/// same image bounds, so no invariant of [`Layout`] can break.
pub(crate) fn from_flat_modes(modes: &[(i64, i64)]) -> Layout {
    match modes {
        [] => Layout::from_parts_unchecked(IntTuple::Int(1), IntTuple::Int(0)),
        [(s, d)] => Layout::from_parts_unchecked(IntTuple::Int(*s), IntTuple::Int(*d)),
        _ => Layout::from_parts_unchecked(
            IntTuple::flat(modes.iter().map(|m| m.0)),
            IntTuple::flat(modes.iter().map(|m| m.1)),
        ),
    }
}

/// The flat `(shape, stride)` modes of a layout after merging: size-1 modes are dropped and
/// `s0:d0` followed by `s1:(s0*d0)` becomes `(s0*s1):d0`.
pub(crate) fn coalesced_modes(l: &Layout) -> Modes {
    let mut out = Modes::new();
    for_each_leaf(l.shape(), l.stride(), &mut |s, d| {
        push_merged(&mut out, s, d)
    });
    out
}

/// The same function on `[0, size)` with as few modes as possible (CuTe's `coalesce`).
///
/// Size-1 modes are dropped and adjacent modes `s0:d0, s1:s0*d0` merge into `s0*s1:d0`.
/// A layout whose modes all have size 1 becomes `1:0`.
///
/// Post-condition: `size(R) == size(L)`, `depth(R) <= 1`, `R(i) == L(i)` for `i < size(L)`.
///
/// ```
/// use tessera_layout::{coalesce, Layout};
/// let l: Layout = "(2,(1,6)):(1,(6,2))".parse().unwrap();
/// assert_eq!(coalesce(&l).to_string(), "12:1");
/// let l: Layout = "(2,4):(1,3)".parse().unwrap();
/// assert_eq!(coalesce(&l).to_string(), "(2,4):(1,3)");
/// assert_eq!(coalesce(&"(1,1):(5,7)".parse().unwrap()).to_string(), "1:0");
/// ```
#[doc(alias = "simplify")]
#[doc(alias = "merge_modes")]
pub fn coalesce(l: &Layout) -> Layout {
    from_flat_modes(&coalesced_modes(l))
}

/// Coalesces mode by mode along a profile (CuTe's `coalesce(L, profile)`): where the profile
/// is a tuple, each of its modes coalesces the matching mode of `L` (recursively) and modes of
/// `L` beyond the profile's rank are kept as they are; where it is an integer (its value is
/// ignored) the whole sub-layout is coalesced.
///
/// Post-condition: `R(i) == L(i)` for `i < size(L)`; where the profile is a tuple, `R` keeps
/// L's rank there (modes under the profile coalesced, the others unchanged).
///
/// Errors: `OutOfRange` if the profile has more modes than the layout at some level.
///
/// ```
/// use tessera_layout::{coalesce_profile, IntTuple, Layout};
/// let l: Layout = "((2,4),(3,1)):((1,2),(8,5))".parse().unwrap();
/// let p: IntTuple = "(1,1)".parse().unwrap();
/// assert_eq!(coalesce_profile(&l, &p).unwrap().to_string(), "(8,3):(1,8)");
/// ```
pub fn coalesce_profile(l: &Layout, profile: &IntTuple) -> Result<Layout> {
    match profile {
        IntTuple::Int(_) => Ok(coalesce(l)),
        IntTuple::Tuple(ps) => {
            if ps.len() > l.rank() {
                return Err(LayoutError::OutOfRange {
                    op: "coalesce",
                    operand: l.to_string(),
                    index: format!("profile {profile}"),
                    rank: l.rank(),
                });
            }
            let mut modes = Vec::with_capacity(l.rank());
            for (i, m) in l.modes().enumerate() {
                modes.push(match ps.get(i) {
                    Some(p) => coalesce_profile(&m, p)?,
                    None => m,
                });
            }
            Layout::concat(modes).map_err(|e| e.within("coalesce", || format!("{l}, {profile}")))
        }
    }
}

/// Replaces every stride-0 mode by a size-1 mode, keeping the structure (CuTe's
/// `filter_zeros`).
///
/// Post-condition: `R` is congruent with `L`, and `R` has the same offsets as `L` restricted
/// to the modes whose stride is not 0.
///
/// ```
/// use tessera_layout::{filter_zeros, Layout};
/// let l: Layout = "(4,(2,3)):(0,(1,2))".parse().unwrap();
/// assert_eq!(filter_zeros(&l).to_string(), "(1,(2,3)):(0,(1,2))");
/// ```
pub fn filter_zeros(l: &Layout) -> Layout {
    let strides = l.stride().leaves();
    let mut k = 0;
    let shape = l.shape().map_leaves(&mut |s| {
        let d = strides[k];
        k += 1;
        if d == 0 {
            1
        } else {
            s
        }
    });
    Layout::from_parts_unchecked(shape, l.stride().as_tuple().clone())
}

/// `coalesce(filter_zeros(L))` (CuTe's `filter`): the layout of the distinct offsets of `L`'s
/// non-broadcast modes, as a flat layout with no size-1 or stride-0 modes (or `1:0`).
///
/// Post-condition: `R = coalesce(filter_zeros(L))`; `R` has no stride-0 mode unless it is `1:0`.
///
/// ```
/// use tessera_layout::{filter, Layout};
/// let l: Layout = "(4,(2,3)):(0,(1,2))".parse().unwrap();
/// assert_eq!(filter(&l).to_string(), "6:1");
/// ```
pub fn filter(l: &Layout) -> Layout {
    coalesce(&filter_zeros(l))
}
