//! `complement`: the layout that fills the holes of an injective layout.

use crate::error::{mul, LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use super::support::{
    ceil_div, ceil_div_shape, coalesce_flat, collision, for_each_leaf, layout_from_modes,
    push_merged, Modes,
};

/// The complement of `L` with respect to `cotarget` (CuTe's `complement(L, cotarget)`):
/// a layout `R` whose offsets, added to those of `L`, are all distinct and reach `cotarget`
/// (an integer, or a shape whose size is the bound).
///
/// CuTe's algorithm: sort the modes of `filter(L)` by stride, fill the gap below each stride
/// with a mode of `R` (`d_{k+1} / (s_k d_k)` copies, rounding down, at stride `s_k d_k`),
/// then add a last mode of `ceil_div(cotarget, s_last d_last)` copies. For a shape cotarget
/// CuTe divides mode by mode, which may round up further, or fall short of the cotarget's
/// size when a quotient carried from one mode to the next rounds (`ceil_div((4,2), 6)` is
/// `(1,1)`, so `complement(2:3, (4,2))` would stop at 6 < 8); here the last mode has at
/// least `ceil(size(cotarget) / (s_last d_last))` copies, so it always reaches
/// `size(cotarget)`. Size-1 modes get stride 0, as in CuTe with static integers. Strides of
/// `L` count by their absolute value (CuTe's result for negative strides is not a layout).
///
/// Post-condition: `R`'s strides are positive and strictly increasing; `(L, R)` is
/// injective on its non-broadcast modes (so `R(j) != L(i)` unless both are 0); and the modes
/// of `(filter(L), R)` sorted by stride form a chain that reaches the cotarget: the largest
/// `extent * |stride|` is at least `size(cotarget)`.
///
/// Errors: `Inadmissible` if `filter(L)` is not injective (the message names two indices with
/// one offset when `size(L) <= 2^16`), or its sorted modes interleave (a stride below the
/// extent of the modes before it: CuTe rejects these too; the message names the mode);
/// `BadShape` for a cotarget below 1; `Overflow`.
///
/// ```
/// use tessera_layout::{complement, IntTuple, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// let m = |s: &str| s.parse::<IntTuple>().unwrap();
/// assert_eq!(complement(&p("4:2"), &m("24")).unwrap().to_string(), "(2,3):(1,8)");
/// assert_eq!(complement(&p("(2,2):(1,6)"), &m("24")).unwrap().to_string(), "(3,2):(2,12)");
/// // Not a tiling: 12 does not divide 6 * 4, the gap below stride 6 holds one copy only.
/// assert_eq!(complement(&p("(4,2):(1,6)"), &m("14")).unwrap().to_string(), "2:12");
/// // A shape cotarget: (2:3, R) reaches 8, the size of (4,2).
/// assert_eq!(complement(&p("2:3"), &m("(4,2)")).unwrap().to_string(), "(3,2):(1,6)");
/// assert!(complement(&p("(2,2):(2,3)"), &m("19")).is_err()); // modes interleave
/// ```
pub fn complement(l: &Layout, cotarget: &IntTuple) -> Result<Layout> {
    let ctx = || format!("{l}, {cotarget}");
    if cotarget.leaves().iter().any(|&m| m < 1) {
        return Err(LayoutError::BadShape {
            op: "complement",
            shape: cotarget.to_string(),
        });
    }
    complement_impl(l, cotarget).map_err(|e| e.within("complement", ctx))
}

fn complement_impl(l: &Layout, cotarget: &IntTuple) -> Result<Layout> {
    const OP: &str = "complement";
    // filter(L): stride-0 modes count as extent 1; then coalesce.
    let mut modes = Modes::new();
    for_each_leaf(l.shape(), l.stride(), &mut |s, d| {
        push_merged(&mut modes, if d == 0 { 1 } else { s }, d)
    });
    for m in modes.iter_mut() {
        m.1 =
            m.1.checked_abs()
                .ok_or_else(|| LayoutError::overflow(OP, format!("|{}|", m.1)))?;
    }
    // By stride, stably (CuTe takes the first of equal strides; equal strides are rejected
    // below anyway). An insertion sort: there are a handful of modes.
    for i in 1..modes.len() {
        let mut j = i;
        while j > 0 && modes[j - 1].1 > modes[j].1 {
            modes.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut out = Modes::new();
    let mut reach = 1i64;
    for &(s, d) in &modes {
        let gap = d / reach;
        if gap == 0 {
            let f = super::filter(l);
            let reason = match collision(&f) {
                Some((i, j, x)) => format!(
                    "not injective: filter(L) = {f} maps indices {i} and {j} to the same offset {x}"
                ),
                None => format!(
                    "its modes interleave: sorted by |stride|, the mode {s}:{d} has a stride below {reach}, the extent of the modes before it (CuTe's complement needs each stride to reach past them)"
                ),
            };
            return Err(LayoutError::inadmissible(OP, String::new(), reason));
        }
        out.push((gap, reach));
        reach = mul(OP, s, d)?;
    }
    let rest = match cotarget {
        IntTuple::Int(m) => ceil_div(*m, reach),
        t => {
            // CuTe's mode-by-mode quotient, but never short of size(cotarget).
            let by_mode = ceil_div_shape(t, reach)?.product()?;
            by_mode.max(ceil_div(t.product()?, reach))
        }
    };
    out.push((rest, reach));
    // coalesce_flat drops size-1 modes, so only an all-1 result is left, as `1:0`.
    layout_from_modes(OP, &coalesce_flat(out))
}

/// `complement(L, cosize(filter(L)))` (CuTe's `complement(L)`): the complement within the span
/// of L's own image.
///
/// Post-condition: that of [`complement`] with that cotarget.
///
/// ```
/// use tessera_layout::{complement_default, Layout};
/// let l: Layout = "(2,2):(1,6)".parse().unwrap();
/// assert_eq!(complement_default(&l).unwrap().to_string(), "3:2");
/// ```
pub fn complement_default(l: &Layout) -> Result<Layout> {
    let cotarget = IntTuple::Int(super::filter(l).cosize());
    complement(l, &cotarget).map_err(|e| e.within("complement", || l.to_string()))
}
