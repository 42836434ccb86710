//! `equal` on plain and swizzled layouts: whether two layouts are the same function,
//! decided from their structure where it can be and by bounded enumeration otherwise.

use tessera_layout::{canonical, Layout};

use crate::any::AnyLayout;
use crate::error::{Result, SwizzleError, ENUMERATION_LIMIT};
use crate::extent::{check_enumerable, flat_modes, for_each_offset};
use crate::f2::structural_f2;
use crate::swizzle::Swizzle;

/// Whether `a` and `b` are the same function: equal sizes and `a(i) == b(i)` for every
/// `i < size`, where a swizzled layout is `i ↦ Sw(OFFSET + L(i))` and a plain one `i ↦ L(i)`.
/// As for [`tessera_layout::equal`], the shapes may differ.
///
/// Decided without enumerating the domain in these cases, tried in order (each is exact):
///
/// 1. the swizzles act alike on the images: both are the identity there (a swizzle is the
///    identity on an interval of offsets whose `YYY` bits are all zero), or they are the
///    same `Sw<B,M,S>`. A swizzle is injective, so the layouts are equal iff the offsets are
///    equal and the inner layouts are ([`tessera_layout::equal`], by canonical forms);
/// 2. both are affine over F2 by structure (power-of-two extents whose bits, and the offset's,
///    do not overlap; see [`F2Map`](crate::F2Map)): equal iff the bit matrices and translations are;
/// 3. with `P = 2^T` past the top bit of both swizzles, `Sw(x + kP) = Sw(x) + kP`; so the
///    modes at the end of each canonical inner layout whose strides are multiples of `P`
///    only translate. Where both split at a common index count `n` (the lcm of the sizes of
///    the parts before those modes, at most [`ENUMERATION_LIMIT`]), the layouts are equal
///    iff they agree on `[0, n)` and the translating remainders are equal plain layouts.
///
/// Otherwise the two are compared on every index, when the size is at most
/// [`ENUMERATION_LIMIT`].
///
/// Errors: `TooLarge` when none of the above decides it within the bound (never a guess);
/// `Overflow` when `OFFSET + L(i)` leaves the `i64` range for some `i`.
///
/// ```
/// use tessera_swizzle::{equal, AnyLayout};
/// let p = |s: &str| s.parse::<AnyLayout>().unwrap();
/// // the same atom, nested differently, 2^40 elements: decided by structure
/// assert!(equal(
///     &p("Sw<3,3,3> o ((8,2147483648),64):((64,512),1)"),
///     &p("Sw<3,3,3> o (17179869184,64):(64,1)"),
/// ).unwrap());
/// // the swizzle never sees a YYY bit of this image: it is the plain layout
/// assert!(equal(&p("Sw<3,4,3> o 0 o (64,2):(1,64)"), &p("128:1")).unwrap());
/// // Sw<1,0,1> moves 2 to 3
/// assert!(!equal(&p("Sw<1,0,1> o 4:1"), &p("4:1")).unwrap());
/// assert!(equal(&p("Sw<1,0,1> o 4:1"), &p("Sw<1,0,1> o (2,2):(1,2)")).unwrap());
/// ```
#[doc(alias = "same_function")]
pub fn equal<A, B>(a: &A, b: &B) -> Result<bool>
where
    A: Clone + Into<AnyLayout>,
    B: Clone + Into<AnyLayout>,
{
    const OP: &str = "equal";
    let (a, b): (AnyLayout, AnyLayout) = (a.clone().into(), b.clone().into());
    let ctx = || format!("{a}, {b}");
    if a.size() != b.size() {
        return Ok(false);
    }
    let (ia, ib) = (image(&a), image(&b));
    let ((lo_a, hi_a), (lo_b, hi_b)) = match (ia, ib) {
        (Some(x), Some(y)) => (x, y),
        _ => return Err(SwizzleError::overflow(OP, ctx())),
    };
    let sw_a = effective(a.swizzle(), lo_a, hi_a);
    let sw_b = effective(b.swizzle(), lo_b, hi_b);
    if sw_a == sw_b {
        return Ok(a.offset() == b.offset() && tessera_layout::equal(a.inner(), b.inner()));
    }
    if let (Some(fa), Some(fb)) = (structural_f2(&a), structural_f2(&b)) {
        return Ok(fa == fb);
    }
    let top = |sw: Swizzle| sw.base() + sw.bits() + sw.shift().abs();
    let t = top(sw_a).max(top(sw_b));
    if let Some(verdict) = by_period(&a, &b, t)? {
        return Ok(verdict);
    }
    check_enumerable(OP, a.size() as u128, ctx)?;
    Ok(offsets(&a) == offsets(&b))
}

/// `[OFFSET + min, OFFSET + max]` of the affine part, or `None` on overflow.
fn image(l: &AnyLayout) -> Option<(i64, i64)> {
    let (lo, hi) = l.inner().image_bounds();
    Some((l.offset().checked_add(lo)?, l.offset().checked_add(hi)?))
}

/// The identity swizzle if `sw` is the identity on every offset in `[lo, hi]` (no offset
/// there has a `YYY` bit set), else `sw`.
fn effective(sw: Swizzle, lo: i64, hi: i64) -> Swizzle {
    if sw.is_identity() {
        return Swizzle::identity();
    }
    let y = sw.yyy_mask();
    let (ylow, yhigh) = (y.trailing_zeros(), 64 - (y as u64).leading_zeros());
    // Offsets in one aligned block of 2^yhigh share their YYY bits' block; inside it, the
    // YYY field of x is x mod 2^yhigh >> ylow, which grows with x.
    let block = |x: i64| {
        (
            i128::from(x) >> yhigh,
            i128::from(x) & ((1i128 << yhigh) - 1),
        )
    };
    let ((qa, ra), (qb, rb)) = (block(lo), block(hi));
    if qa == qb && ra >> ylow == 0 && rb >> ylow == 0 {
        Swizzle::identity()
    } else {
        sw
    }
}

/// All offsets; the caller checked the size and that `OFFSET + L(i)` fits.
fn offsets(l: &AnyLayout) -> Vec<i64> {
    let (sw, o) = (l.swizzle(), l.offset());
    let mut out = Vec::with_capacity(usize::try_from(l.size()).unwrap_or(0));
    for_each_offset(l.inner(), |x| out.push(sw.apply(o + x)));
    out
}

/// Flat `(extent, stride)` modes.
type Modes = Vec<(i64, i64)>;

/// The canonical modes of a layout, split before the longest run of trailing modes whose
/// strides are multiples of `2^t`: `(low, high)`.
fn split_translating(l: &Layout, t: i64) -> (Modes, Modes) {
    let modes = flat_modes(&canonical(l));
    let modes: Vec<(i64, i64)> = modes.into_iter().filter(|m| m.0 > 1).collect();
    let p = 1i128 << t;
    let k = modes
        .iter()
        .rposition(|&(_, d)| i128::from(d) % p != 0)
        .map_or(0, |k| k + 1);
    (modes[..k].to_vec(), modes[k..].to_vec())
}

/// The modes after the first `q` indices of `modes` (splitting a mode `s:d` into
/// `r:d, (s/r):(r*d)` when `r` divides `s`), or `None` if `q` does not split them so.
fn drop_prefix(modes: &[(i64, i64)], mut q: i64) -> Option<Vec<(i64, i64)>> {
    let mut out = Vec::new();
    for &(s, d) in modes {
        if q == 1 {
            out.push((s, d));
        } else if q % s == 0 {
            q /= s;
        } else if s % q == 0 {
            out.push((s / q, q.checked_mul(d)?));
            q = 1;
        } else {
            return None;
        }
    }
    (q == 1).then_some(out)
}

fn product(modes: &[(i64, i64)]) -> i64 {
    modes.iter().map(|m| m.0).product()
}

fn layout_of(modes: &[(i64, i64)]) -> Option<Layout> {
    match modes {
        [] => Layout::int(1, 0).ok(),
        _ => Layout::new(
            tessera_layout::IntTuple::flat(modes.iter().map(|m| m.0)),
            tessera_layout::IntTuple::flat(modes.iter().map(|m| m.1)),
        )
        .ok(),
    }
}

/// Step 3 of [`equal`]: `Some(verdict)` when both layouts split at a common, enumerable
/// index count into a head and a translating remainder; `None` when they do not.
fn by_period(a: &AnyLayout, b: &AnyLayout, t: i64) -> Result<Option<bool>> {
    if t >= 62 {
        return Ok(None);
    }
    let (low_a, high_a) = split_translating(a.inner(), t);
    let (low_b, high_b) = split_translating(b.inner(), t);
    let (na, nb) = (product(&low_a), product(&low_b));
    let n = lcm(na, nb);
    if n > ENUMERATION_LIMIT as i64 {
        return Ok(None);
    }
    let (Some(rest_a), Some(rest_b)) = (drop_prefix(&high_a, n / na), drop_prefix(&high_b, n / nb))
    else {
        return Ok(None);
    };
    let (Some(ra), Some(rb)) = (layout_of(&rest_a), layout_of(&rest_b)) else {
        return Ok(None);
    };
    if !tessera_layout::equal(&ra, &rb) {
        return Ok(Some(false));
    }
    for i in 0..n {
        if a.call(i)? != b.call(i)? {
            return Ok(Some(false));
        }
    }
    Ok(Some(true))
}

/// `lcm(a, b)` of positive sizes whose product with anything that divides the layout's size
/// fits: `a` and `b` both divide the common size, so the lcm does too.
fn lcm(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}
