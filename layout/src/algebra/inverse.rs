//! `right_inverse` and `left_inverse`.

use crate::error::{LayoutError, Result};
use crate::layout::Layout;

use super::coalesce::coalesced_modes;
use super::support::{coalesce_flat, collision, layout_from_modes};

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

/// The modes of `L` as [`left_inverse`] sees them: coalesced, with their index strides, sorted
/// by `|stride|`; and the first reason found why no left inverse exists, with two indices
/// that `L` maps to one offset.
struct Analysis {
    /// `(extent, stride, index stride)`, sorted by `|stride|`, stride-0 modes first.
    modes: Vec<(i64, i64, i64)>,
    /// Each non-zero `|stride|` divides the next one.
    divisible: bool,
    /// Each non-zero `|stride|` is above the span `Σ (s_j - 1)|d_j|` of the modes before it,
    /// so the offsets are a mixed-radix number with gaps: `L` is injective.
    separated: bool,
}

fn analyse(l: &Layout) -> Analysis {
    let mut modes = sorted_modes(l);
    modes.sort_by_key(|m| m.1.unsigned_abs());
    let nonzero: Vec<&(i64, i64, i64)> = modes.iter().filter(|m| m.1 != 0).collect();
    let divisible = nonzero
        .windows(2)
        .all(|w| w[1].1.unsigned_abs() % w[0].1.unsigned_abs() == 0);
    let mut span: u128 = 0;
    let mut separated = true;
    for m in &nonzero {
        let d = u128::from(m.1.unsigned_abs());
        if d <= span {
            separated = false;
        }
        span += (m.0 as u128 - 1) * d;
    }
    Analysis {
        modes,
        divisible,
        separated,
    }
}

/// Two indices `L` maps to one offset, if the analysis shows `L` is not injective, or a
/// search of a small `L` finds them: `(i, j, offset)`.
fn non_injective(l: &Layout, a: &Analysis) -> Option<(i64, i64, i64)> {
    // A broadcast mode: coordinate 1 in it lands where coordinate 0 does.
    if let Some(&(_, _, p)) = a.modes.iter().find(|m| m.1 == 0) {
        return Some((0, p, 0));
    }
    if a.divisible && !a.separated {
        // Strides d_k | d_{k+1} and d_{k+1} < s_k d_k for some k (with divisibility the span
        // test fails exactly there): m = d_{k+1}/d_k < s_k steps of mode k reach one step of
        // mode k+1, or cancel it when the signs differ.
        for w in a.modes.windows(2) {
            let ((s0, d0, p0), (_, d1, p1)) = (w[0], w[1]);
            let m = d1.unsigned_abs() / d0.unsigned_abs();
            if (m as u128) < s0 as u128 {
                let m = m as i64;
                let (i, j) = if (d0 < 0) == (d1 < 0) {
                    (m * p0, p1)
                } else {
                    (0, m * p0 + p1)
                };
                let (i, j) = (i.min(j), i.max(j));
                return Some((i, j, l.call(j).ok()?));
            }
        }
    }
    if !a.separated {
        return collision(l);
    }
    None
}

/// A left inverse of an injective layout (CuTe's `left_inverse`, sort by stride): for the
/// coalesced modes of `L` in order of stride, mode `k` of `R` has extent `d_k / d_{k-1}` and
/// maps back to the index stride of L's mode `k-1`; the offsets below the smallest stride
/// map to 0.
///
/// Post-condition: `R(L(i)) == i` for every `i < size(L)`.
///
/// A layout that maps two indices to one offset has no left inverse: for those, see
/// [`generalized_left_inverse`], which promises only `L(R(L(i))) == L(i)`.
///
/// Errors: `Inadmissible` if `L` is not injective (the message names two indices with one
/// offset: decided without enumeration when a stride is 0 or the strides divide one another,
/// by search up to 2^16 elements otherwise); if `L` has a negative stride, or a stride that is
/// not a multiple of the next smaller one (CuTe's divisibility condition): CuTe's construction
/// has no answer then, though some other layout might.
///
/// ```
/// use tessera_layout::{left_inverse, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// assert_eq!(left_inverse(&p("(4,8):(8,1)")).unwrap().to_string(), "(8,4):(4,1)");
/// assert_eq!(left_inverse(&p("3:2")).unwrap().to_string(), "(2,3):(0,1)");
/// assert_eq!(left_inverse(&p("(4,8):(1,5)")).unwrap().to_string(), "(5,8):(1,4)");
/// // L(1) = L(2) = 1: no layout R has R(1) == 1 and R(1) == 2.
/// assert!(left_inverse(&p("(2,2):(1,1)")).is_err());
/// ```
#[doc(alias = "inverse")]
pub fn left_inverse(l: &Layout) -> Result<Layout> {
    const OP: &str = "left_inverse";
    let ctx = || l.to_string();
    let a = analyse(l);
    if let Some((i, j, x)) = non_injective(l, &a) {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!("not injective, so no left inverse exists: L({i}) = L({j}) = {x}"),
        ));
    }
    let undecided = if a.separated {
        ""
    } else {
        " (whether L is injective was not decided: it has above 2^16 elements)"
    };
    if let Some(&(s, d, _)) = a.modes.iter().find(|m| m.1 < 0) {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!("the mode {s}:{d} has a negative stride, and CuTe's left inverse (by sorted strides) is defined for positive strides only{undecided}"),
        ));
    }
    if !a.divisible {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!(
                "CuTe's divisibility condition fails: {}{undecided}",
                divisibility_witness(&a)
            ),
        ));
    }
    // Positive strides, each a multiple of the one before and above the span of the modes
    // before it: every offset is a mixed-radix number whose digits are L's coordinates, and
    // R reads them back.
    canonical(&a.modes).map_err(|e| e.within(OP, ctx))
}

/// The first pair of sorted non-zero strides where one does not divide the next.
fn divisibility_witness(a: &Analysis) -> String {
    let nonzero: Vec<i64> = a.modes.iter().map(|m| m.1).filter(|&d| d != 0).collect();
    for w in nonzero.windows(2) {
        if w[1].unsigned_abs() % w[0].unsigned_abs() != 0 {
            return format!("stride {} is not a multiple of stride {}", w[1], w[0]);
        }
    }
    String::new()
}

/// CuTe's sort-by-stride construction for modes with non-negative strides sorted by stride,
/// each non-zero stride a multiple of the one before.
fn canonical(modes: &[(i64, i64, i64)]) -> Result<Layout> {
    let mut shapes: Vec<i64> = Vec::new();
    let mut strides: Vec<i64> = vec![0];
    let mut size = 1i64;
    for &(_, d, p) in modes {
        if d == 0 {
            continue;
        }
        debug_assert!(d > 0 && d % size == 0);
        shapes.push(d / size);
        strides.push(p);
        size = d;
    }
    shapes.push(modes.last().map_or(1, |m| m.0));
    let out = coalesce_flat(shapes.into_iter().zip(strides));
    layout_from_modes("left_inverse", &out)
}

/// A generalized left inverse (CuTe's `left_inverse` on any layout, whose post-condition is
/// this one): `R` with `L(R(L(i))) == L(i)` for every `i < size(L)`, `L` evaluated on its
/// extended domain (its last mode running on). For an injective `L` it is [`left_inverse`].
/// For one that is not, `R` picks one index of each offset: `(4,3):(1,0)` gives `4:1`, and
/// every offset `x < 4` comes back as the index `x`, whose offset is `x`.
///
/// The construction is CuTe's (sort by stride, stride-0 modes skipped). With overlapping
/// modes it need not meet the post-condition; whether it does is decided from the modes
/// alone, without enumerating `L`, so the cost grows with the number of modes, not with the
/// size.
///
/// Errors: `Inadmissible` for a negative stride or CuTe's divisibility condition (as
/// [`left_inverse`]); when the construction fails the post-condition (the message names an
/// index where it does).
///
/// ```
/// use tessera_layout::{generalized_left_inverse, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// assert_eq!(generalized_left_inverse(&p("(4,3):(1,0)")).unwrap().to_string(), "4:1");
/// assert_eq!(generalized_left_inverse(&p("4:0")).unwrap().to_string(), "4:0");
/// // L(R(L(5))) = L(R(4)) = L(2) = 1, not 4.
/// assert!(generalized_left_inverse(&p("(2,3):(2,1)")).is_err());
/// ```
pub fn generalized_left_inverse(l: &Layout) -> Result<Layout> {
    const OP: &str = "generalized_left_inverse";
    let ctx = || l.to_string();
    let mut modes = sorted_modes(l);
    modes.sort_by_key(|m| m.1);
    if let Some(&(s, d, _)) = modes.iter().find(|m| m.1 < 0) {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!("the mode {s}:{d} has a negative stride, and CuTe's left inverse (by sorted strides) is defined for positive strides only"),
        ));
    }
    let a = Analysis {
        divisible: modes
            .iter()
            .filter(|m| m.1 != 0)
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[1].1 % w[0].1 == 0),
        separated: false,
        modes,
    };
    if !a.divisible {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!(
                "CuTe's divisibility condition fails: {}",
                divisibility_witness(&a)
            ),
        ));
    }
    let r = canonical(&a.modes).map_err(|e| e.within(OP, ctx))?;
    let Some(i) = failing_index(l, &a.modes) else {
        return Ok(r);
    };
    holds_at(l, &r, i)?;
    // The analysis names an index where the construction fails; one where it holds means the
    // analysis missed a case, and the point-by-point check decides instead.
    debug_assert!(
        false,
        "{OP}({l}): R = {r} holds at the index {i} named as failing"
    );
    check_pointwise(l, r)
}

/// The index `i` of `L` where CuTe's construction `R` (built from `sorted`: L's coalesced
/// modes with their index strides, sorted by stride, non-negative, each non-zero stride
/// dividing the next) fails `L(R(L(i))) == L(i)`, or `None` when it holds for every `i`.
///
/// Why it is exact. Let the non-zero modes sorted by stride be `(s_k, d_k)` with index
/// strides `p_k`, and `r_k = d_{k+1} / d_k`. `R` reads an offset `x` (a multiple of `d_1`) as
/// the mixed-radix digits `c_k` of `x / d_1` in the radices `r_k` (the last digit unbounded)
/// and returns `Σ c_k p_k`. Where every digit is a coordinate of its mode (`c_k < s_k`), that
/// index has offset `Σ c_k d_k = x`, so the post-condition holds, and it holds too where the
/// digit that overflows is that of the mode L's extended domain runs on
/// ([`running_index_stride`]). Digit `k` of `x = Σ a_k d_k` is `(a_k + q_k) mod r_k`, where the
/// carry `q_k` from the lower modes takes every value in `[0, Q_k]`: `Q_1 = 0` and
/// `Q_{k+1} = (Q_k + s_k - 1) / r_k` (the sums `a_k + q_k` fill `[0, Q_k + s_k - 1]`, and
/// dividing an interval from 0 gives one). So digit `k` reaches `min(Q_k + s_k - 1, r_k - 1)`
/// (the last digit `Q_n + s_n - 1`), and the construction fails exactly where that is
/// `s_k` or more for a mode L does not run on: at `x = s_k d_k`, reached with digit `k` equal
/// to `s_k` and the lower digits 0, `R(x) = s_k p_k`, the index of coordinate 1 of the next
/// coalesced mode, whose offset is that mode's stride, which coalescing made differ from
/// `s_k d_k` (past the last mode, the last leaf's stride, which differs unless L runs on).
fn failing_index(l: &Layout, sorted: &[(i64, i64, i64)]) -> Option<i64> {
    let nonzero: Vec<(i128, i128, i128)> = sorted
        .iter()
        .filter(|m| m.1 != 0)
        .map(|&(s, d, p)| (i128::from(s), i128::from(d), i128::from(p)))
        .collect();
    let running = running_index_stride(l, sorted).map(i128::from);
    let mut carry = 0i128;
    for (k, &(s, d, p)) in nonzero.iter().enumerate() {
        let reach = carry + s - 1;
        let radix = nonzero.get(k + 1).map(|next| next.1 / d);
        let top = radix.map_or(reach, |r| reach.min(r - 1));
        if top >= s && Some(p) != running {
            return Some(overflowing_index(&nonzero, k));
        }
        if let Some(r) = radix {
            carry = reach / r;
        }
    }
    None
}

/// An index of `L` whose offset is `s_k d_k` with digit `k` equal to `s_k` and the lower
/// digits 0 (see [`failing_index`], which has checked that the carries reach it): from the
/// top, mode `j` takes as much of the value `v_j` still to reach as its coordinates can
/// (`a_j = min(s_j - 1, v_j)`), and the rest is a carry the modes below make as the
/// multiple `(v_j - a_j) r_{j-1}` of their own unit.
fn overflowing_index(nonzero: &[(i128, i128, i128)], k: usize) -> i64 {
    let mut v = nonzero[k].0;
    let mut index = 0i128;
    for j in (0..=k).rev() {
        let (s, d, p) = nonzero[j];
        let a = v.min(s - 1);
        index += a * p;
        if j > 0 {
            v = (v - a) * (d / nonzero[j - 1].1);
        } else {
            debug_assert_eq!(v, a, "the carries reach the digit");
        }
    }
    // A coordinate of each mode, so an index below size(L).
    i64::try_from(index).unwrap_or(i64::MAX)
}

/// The index stride of the coalesced mode L's extended domain runs on, if any: `L(i)` past
/// `size(L)` grows L's last leaf; that is L's last coalesced mode running on when the leaf is
/// part of it (extent above 1), or when the leaf is an extent-1 leaf whose stride is where
/// that mode would go on (`s_K d_K`). `sorted` holds L's coalesced modes with their index
/// strides; the last one is the one of the largest index stride.
fn running_index_stride(l: &Layout, sorted: &[(i64, i64, i64)]) -> Option<i64> {
    let &(s, d, p) = sorted.iter().max_by_key(|m| m.2)?;
    let leaf = *l.shape().leaves().last()?;
    let leaf_stride = *l.stride().leaves().last()?;
    (leaf > 1 || s.checked_mul(d) == Some(leaf_stride)).then_some(p)
}

/// Largest layout whose generalized left inverse is checked point by point, should the
/// analysis of [`failing_index`] and an evaluation disagree.
const GENERALIZED_CHECK_LIMIT: i64 = 1 << 20;

/// `r` if `L(R(L(i))) == L(i)` for every `i < size(L)`, checked one index at a time (for `L`
/// up to [`GENERALIZED_CHECK_LIMIT`] elements).
fn check_pointwise(l: &Layout, r: Layout) -> Result<Layout> {
    const OP: &str = "generalized_left_inverse";
    let ctx = || l.to_string();
    if l.size() > GENERALIZED_CHECK_LIMIT {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!(
                "the modes overlap, so CuTe's construction {r} needs checking point by point, and L has {} elements, above {GENERALIZED_CHECK_LIMIT}; a generalized inverse may exist",
                l.size()
            ),
        ));
    }
    for i in 0..l.size() {
        holds_at(l, &r, i)?;
    }
    Ok(r)
}

/// `L(R(L(i))) == L(i)` at index `i`, or the error naming `i` where CuTe's construction `r`
/// fails.
fn holds_at(l: &Layout, r: &Layout, i: i64) -> Result<()> {
    const OP: &str = "generalized_left_inverse";
    let ctx = || l.to_string();
    let o = l.call(i).map_err(|e| e.within(OP, ctx))?;
    let back = r
        .call(o)
        .and_then(|j| l.call(j))
        .map_err(|e| e.within(OP, ctx))?;
    if back != o {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            format!(
                "the modes overlap, and CuTe's construction {r} fails at i = {i}: L(i) = {o} but L(R({o})) = {back}"
            ),
        ));
    }
    Ok(())
}
