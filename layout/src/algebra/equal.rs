//! `equal` and `canonical`: whether two layouts are the same function, decided from their
//! modes without evaluating them.

use crate::layout::Layout;

use super::coalesce::{coalesce, coalesced_modes};

/// The unique representative of the function `i ↦ L(i)` on `[0, size(L))`: the layout that
/// `equal` compares. It is [`coalesce`]`(L)`, and the point of this function is the theorem
/// below, which makes that representation unique.
///
/// **The normal form.** Call a layout *canonical* if it is `1:0`, or it is flat with modes
/// `s_0:d_0, ..., s_{n-1}:d_{n-1}` (an integral layout `s_0:d_0` when `n = 1`) such that
///
/// 1. every extent `s_k >= 2`, and
/// 2. no adjacent pair merges: `d_{k+1} != s_k * d_k` for every `k < n - 1`.
///
/// Stride-0 modes need no rule of their own: two adjacent ones merge by (2), since
/// `0 == s * 0`, and a stride-0 mode next to a non-zero one changes the function.
///
/// **Theorem.** Two canonical layouts that agree on every `i < N` (and have size `N`) are
/// identical. So each function has exactly one canonical layout, and `coalesce` finds it.
///
/// *Proof.* By induction on `n`. If `N = 1`, only `1:0` has size 1 (extents are at least
/// 2 otherwise). Let `N >= 2`, so `n >= 1`. For `i < s_0` the index `i` has coordinate `i`
/// in mode 0 and 0 elsewhere, so `f(i) = i * d_0`; in particular `d_0 = f(1)`. If `n >= 2`,
/// the index `s_0` has coordinate 1 in mode 1 (as `s_1 >= 2`) and 0 elsewhere, so
/// `f(s_0) = d_1 != s_0 * d_0` by (2). Hence `s_0` is the least `i` in `[1, N)` with
/// `f(i) != i * f(1)`, or `N` when there is none (then `n = 1`: with `n >= 2` the index
/// `s_0 < N` is such an `i`). So `f` alone fixes `s_0` and `d_0`. The remaining modes
/// form a canonical layout of size `N / s_0` whose function is `j ↦ f(j * s_0)`, fixed by
/// `f`; by induction they are fixed too. ∎
///
/// `coalesce` returns a canonical layout with the same function: it drops extent-1 modes
/// and merges each mode into the previous one while (2) fails, and a merge never makes the
/// previous pair mergeable (the merged mode keeps the first mode's stride).
///
/// Post-condition: `R` is canonical and `R(i) == L(i)` for every `i < size(L)`.
///
/// ```
/// use tessera_layout::{canonical, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// // a trailing extent-1 mode, as blocked_product leaves, is not part of the function
/// assert_eq!(canonical(&p("(3,1):(1,4)")), p("3:1"));
/// // nesting is not part of the function either
/// assert_eq!(canonical(&p("((2,2),3):((1,2),4)")), p("12:1"));
/// // adjacent broadcast modes are one broadcast mode
/// assert_eq!(canonical(&p("(2,3,2):(0,0,5)")), p("(6,2):(0,5)"));
/// assert_eq!(canonical(&p("(1,1):(7,9)")), p("1:0"));
/// ```
#[doc(alias = "normal_form")]
pub fn canonical(l: &Layout) -> Layout {
    coalesce(l)
}

/// Whether `a` and `b` are the same function: equal sizes and `a(i) == b(i)` for every
/// `i < size`. The shapes may differ (`(2,3):(1,2)` equals `6:1`); where the coordinates
/// matter too, compare the shapes as well (with equal shapes the coordinate functions then
/// agree, since a shape fixes the map from coordinates to indices).
///
/// Decided in `O(rank)` without evaluating either layout: by the theorem of [`canonical`],
/// two layouts are equal exactly when their canonical forms are identical. CuTe compares
/// shape and stride literally instead, which tells `3:1` and `(3,1):(1,4)` apart.
///
/// ```
/// use tessera_layout::{equal, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// assert!(equal(&p("(3,1):(1,4)"), &p("3:1")));
/// assert!(equal(&p("(2,2,2):(4,2,1)"), &p("(2,(2,2)):(4,(2,1))")));
/// assert!(!equal(&p("4:1"), &p("(2,2):(1,3)")));
/// // sizes of 2^62: no enumeration
/// assert!(equal(&p("(2147483648,2147483648):(1,2147483648)"), &p("4611686018427387904:1")));
/// ```
#[doc(alias = "same_function")]
pub fn equal(a: &Layout, b: &Layout) -> bool {
    a.size() == b.size() && coalesced_modes(a) == coalesced_modes(b)
}
