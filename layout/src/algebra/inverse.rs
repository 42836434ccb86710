//! `right_inverse` and `left_inverse`.

use crate::error::{LayoutError, Result};
use crate::layout::Layout;

use super::coalesce::coalesced_modes;
use super::support::{coalesce_flat, layout_from_modes};

/// Coalesced flat modes of `l` with the prefix products of their extents (the index stride of
/// each mode in L's domain), sorted stably by stride.
fn sorted_modes(l: &Layout) -> Vec<(i64, i64, i64)> {
    let modes = coalesced_modes(l);
    let mut prefix = 1i64;
    let mut out: Vec<(i64, i64, i64)> = modes
        .iter()
        .map(|&(s, d)| {
            let here = prefix;
            // The product of the extents is size(l), which fits; a prefix of it does too.
            prefix = prefix.saturating_mul(s);
            (s, d, here)
        })
        .collect();
    out.sort_by_key(|m| m.1);
    out
}

/// The right inverse CuTe builds (CuTe's `right_inverse`): starting at offset 1, it follows
/// L's modes in order of stride as long as each stride equals the extent reached so far,
/// and maps offsets back to L's indices through them. Modes off that chain (stride 0,
/// negative strides, gaps) are left out, so `R` may be as small as `1:0`.
///
/// Post-condition: `L(R(i)) == i` for every `i < size(R)`; `R` is coalesced.
///
/// ```
/// use tessera_layout::{right_inverse, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// assert_eq!(right_inverse(&p("(2,4,6):(4,1,8)")).unwrap().to_string(), "(4,2,6):(2,1,8)");
/// assert_eq!(right_inverse(&p("(4,8):(8,1)")).unwrap().to_string(), "(8,4):(4,1)");
/// assert_eq!(right_inverse(&p("(2,2,2):(4,0,1)")).unwrap().to_string(), "2:4");
/// ```
#[doc(alias = "pseudo_inverse")]
pub fn right_inverse(l: &Layout) -> Result<Layout> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    let mut curr = Some(1i64);
    for (s, d, p) in sorted_modes(l) {
        if Some(d) == curr {
            out.push((s, p));
            curr = s.checked_mul(d);
        }
    }
    layout_from_modes("right_inverse", &coalesce_flat(out))
        .map_err(|e| e.within("right_inverse", || l.to_string()))
}

/// CuTe's canonical left inverse (`left_inverse`, sort by stride): for the coalesced modes
/// of `L` in order of stride, mode `k` of `R` has extent `d_k / d_{k-1}` and maps back to
/// the index stride of L's mode `k-1`; the offsets below the smallest stride map to 0.
///
/// Post-condition: `L(R(L(i))) == L(i)` for every `i < size(L)`; so `R(L(i)) == i` when `L`
/// is injective.
///
/// Errors: `Inadmissible` if the modes of `L` overlap so that the canonical answer breaks the
/// post-condition (e.g. `(2,3):(2,1)`), if a stride is not a multiple of the extent of the result so far
/// (CuTe's divisibility condition), or `L` has a negative stride (CuTe's answer is not a
/// layout).
///
/// ```
/// use tessera_layout::{left_inverse, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// assert_eq!(left_inverse(&p("(4,8):(8,1)")).unwrap().to_string(), "(8,4):(4,1)");
/// assert_eq!(left_inverse(&p("3:2")).unwrap().to_string(), "(2,3):(0,1)");
/// assert_eq!(left_inverse(&p("(4,8):(1,5)")).unwrap().to_string(), "(5,8):(1,4)");
/// ```
#[doc(alias = "inverse")]
pub fn left_inverse(l: &Layout) -> Result<Layout> {
    let ctx = || l.to_string();
    let modes = sorted_modes(l);
    let mut shapes: Vec<i64> = Vec::new();
    let mut strides: Vec<i64> = vec![0];
    let mut size = 1i64;
    for &(_, d, p) in &modes {
        if d == 0 {
            continue;
        }
        if d < 0 {
            return Err(LayoutError::inadmissible(
                "left_inverse",
                ctx(),
                format!("negative stride {d}"),
            ));
        }
        if d % size != 0 {
            return Err(LayoutError::inadmissible(
                "left_inverse",
                ctx(),
                format!("divisibility: stride {d} is not a multiple of {size}"),
            ));
        }
        shapes.push(d / size);
        strides.push(p);
        size = d;
    }
    shapes.push(modes.last().map_or(1, |m| m.0));
    let out = coalesce_flat(shapes.into_iter().zip(strides));
    let r = layout_from_modes("left_inverse", &out).map_err(|e| e.within("left_inverse", ctx))?;
    // With the divisibility chain above, L is injective on its non-zero-stride modes exactly
    // when each stride reaches past the previous mode (d_{k+1} >= s_k d_k); then the
    // post-condition holds by the mixed-radix argument. Otherwise (overlapping modes) the
    // canonical answer may be wrong, so it is verified point by point, or refused.
    let chain = modes
        .iter()
        .filter(|m| m.1 != 0)
        .collect::<Vec<_>>()
        .windows(2)
        .all(|w| w[0].0.checked_mul(w[0].1).is_some_and(|e| w[1].1 >= e));
    if !chain {
        let reaches = |i: i64| -> Option<bool> {
            let o = l.call(i).ok()?;
            Some(l.call(r.call(o).ok()?).ok()? == o)
        };
        if l.size() > LEFT_INVERSE_CHECK_LIMIT || !(0..l.size()).all(|i| reaches(i) == Some(true)) {
            return Err(LayoutError::inadmissible(
                "left_inverse",
                ctx(),
                "modes overlap, and no canonical left inverse R satisfies L(R(L(i))) == L(i)",
            ));
        }
    }
    Ok(r)
}

/// Largest non-injective layout whose canonical left inverse is verified point by point.
const LEFT_INVERSE_CHECK_LIMIT: i64 = 1 << 16;
