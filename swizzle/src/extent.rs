//! Exact image bounds of swizzled layouts, injectivity, and the enumeration helpers they use.
//!
//! The image of `Sw o O o L` is `{ Sw(O + L(i)) }`. `Sw(x)` differs from `x` only in the
//! `ZZZ` bits, so it stays in the aligned block of size [`Swizzle::zzz_block`] that holds `x`.
//! Hence the smallest swizzled offset comes from the unswizzled offsets in the *lowest* such
//! block, and the largest from the *highest* block: only those two windows of the affine
//! image `O + L` are enumerated, however large the layout is. A window is walked by a pruned
//! search over the modes when few coordinates land in it, or sieved (which offsets of the
//! window are reached, one pass per mode) when many do; either stays under
//! [`ENUMERATION_LIMIT`] steps. Only when the swizzle's block itself is wider than that bound
//! is the whole domain enumerated, under the same bound, or an error returned.

use tessera_layout::Layout;

use crate::error::{Result, SwizzleError, ENUMERATION_LIMIT};
use crate::swizzle::Swizzle;

/// The flat `(extent, stride)` leaves of a layout, in colexicographic order.
pub(crate) fn flat_modes(l: &Layout) -> Vec<(i64, i64)> {
    l.shape()
        .leaves()
        .iter()
        .copied()
        .zip(l.stride().leaves().iter().copied())
        .collect()
}

/// Calls `f(L(i))` for `i = 0, 1, ..., size-1` in order, with an odometer over the flat
/// leaves (O(1) per offset). The caller bounds `size`.
pub(crate) fn for_each_offset(l: &Layout, mut f: impl FnMut(i64)) {
    let modes = flat_modes(l);
    let mut coord = vec![0i64; modes.len()];
    let mut off = 0i64;
    for _ in 0..l.size() {
        f(off);
        for (k, &(s, d)) in modes.iter().enumerate() {
            coord[k] += 1;
            // Wrapping: the value past the last coordinate of a mode may leave the i64 range,
            // but the corrected offset (an in-range image point) is exact modulo 2^64.
            off = off.wrapping_add(d);
            if coord[k] < s {
                break;
            }
            coord[k] = 0;
            off = off.wrapping_sub(d.wrapping_mul(s));
        }
    }
}

/// Errors with `TooLarge` unless `needed <= ENUMERATION_LIMIT`.
pub(crate) fn check_enumerable(
    op: &'static str,
    needed: u128,
    operands: impl FnOnce() -> String,
) -> Result<()> {
    if needed <= u128::from(ENUMERATION_LIMIT) {
        Ok(())
    } else {
        Err(SwizzleError::TooLarge {
            op,
            operands: operands(),
            needed,
            limit: ENUMERATION_LIMIT,
        })
    }
}

/// Visits every `u = Σ k_j e_j < w` with `0 <= k_j < n_j` (modes given as `(n_j, e_j)`,
/// `e_j > 0`, largest `e` first so the search prunes early).
fn walk_window(modes: &[(i64, i64)], u: i128, w: i128, visit: &mut impl FnMut(i128)) {
    match modes.split_first() {
        None => visit(u),
        Some((&(n, e), rest)) => {
            for k in 0..n {
                let v = u + i128::from(k) * i128::from(e);
                if v >= w {
                    break;
                }
                walk_window(rest, v, w, visit);
            }
        }
    }
}

/// How many points [`walk_window`] may visit, saturating.
fn window_count(modes: &[(i64, i64)], w: i128) -> u128 {
    modes.iter().fold(1u128, |acc, &(n, e)| {
        let here = ((w - 1) / i128::from(e) + 1).min(i128::from(n)).max(1) as u128;
        acc.saturating_mul(here)
    })
}

/// The exact `(min, max)` of `{ sw(offset + L(i)) : i < size(L) }`.
///
/// Errors: `Overflow` if `offset + L(i)` leaves the `i64` range; `TooLarge` if both the
/// window search and full enumeration exceed [`ENUMERATION_LIMIT`] points.
pub(crate) fn swizzled_bounds(
    op: &'static str,
    sw: Swizzle,
    offset: i64,
    inner: &Layout,
) -> Result<(i64, i64)> {
    let ctx = || format!("{sw} o {offset} o {inner}");
    let (lo, hi) = inner.image_bounds();
    let a = offset
        .checked_add(lo)
        .ok_or_else(|| SwizzleError::overflow(op, ctx()))?;
    let b = offset
        .checked_add(hi)
        .ok_or_else(|| SwizzleError::overflow(op, ctx()))?;
    if sw.is_identity() {
        return Ok((a, b));
    }
    // Moving away from the extreme coordinate of a mode changes the offset by |d| per step.
    let mut modes: Vec<(i64, i64)> = flat_modes(inner)
        .into_iter()
        .filter(|&(n, d)| n > 1 && d != 0)
        .map(|(n, d)| (n, d.unsigned_abs().min(i64::MAX as u64) as i64))
        .collect();
    modes.sort_by_key(|m| std::cmp::Reverse(m.1));
    let k = i128::from(sw.zzz_block());
    let (a128, b128) = (i128::from(a), i128::from(b));
    let w_lo = (a128.div_euclid(k) + 1) * k - a128;
    let w_hi = b128 - b128.div_euclid(k) * k + 1;
    let windows = window_count(&modes, w_lo).saturating_add(window_count(&modes, w_hi));
    // The sieve costs about (rank + 1) * window width, whatever the number of coordinates.
    let rank = modes.len() as u128 + 1;
    let sieve = (w_lo as u128 + w_hi as u128).saturating_mul(rank);
    let limit = u128::from(ENUMERATION_LIMIT);
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    // a + u and b - u stay inside [a, b], so the casts are exact.
    if windows <= limit && windows <= sieve {
        walk_window(&modes, 0, w_lo, &mut |u| {
            min = min.min(sw.apply((a128 + u) as i64));
        });
        walk_window(&modes, 0, w_hi, &mut |u| {
            max = max.max(sw.apply((b128 - u) as i64));
        });
        return Ok((min, max));
    }
    if sieve <= limit {
        for (u, _) in sieve_window(&modes, w_lo as usize)
            .iter()
            .enumerate()
            .filter(|x| *x.1)
        {
            min = min.min(sw.apply((a128 + u as i128) as i64));
        }
        for (u, _) in sieve_window(&modes, w_hi as usize)
            .iter()
            .enumerate()
            .filter(|x| *x.1)
        {
            max = max.max(sw.apply((b128 - u as i128) as i64));
        }
        return Ok((min, max));
    }
    let size = inner.size() as u128;
    check_enumerable(op, windows.min(size), ctx)?;
    for_each_offset(inner, |x| {
        // offset + x lies in [a, b], checked above.
        let v = sw.apply(offset + x);
        min = min.min(v);
        max = max.max(v);
    });
    Ok((min, max))
}

/// Which `u < w` are sums `Σ k_j e_j` with `0 <= k_j < n_j` (modes `(n_j, e_j)`, `e_j > 0`):
/// a sieve over the window, one pass per mode. Adding a mode ORs each position with the
/// `n_j` positions below it at steps of `e_j`, kept as a running count along each residue
/// class modulo `e_j`, so a mode costs O(w) however large `n_j` is.
fn sieve_window(modes: &[(i64, i64)], w: usize) -> Vec<bool> {
    let mut reach = vec![false; w];
    if w == 0 {
        return reach;
    }
    reach[0] = true;
    for &(n, e) in modes {
        let e = usize::try_from(e).unwrap_or(usize::MAX);
        if e >= w {
            continue; // only k = 0 stays in the window
        }
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let mut next = vec![false; w];
        for r in 0..e {
            let mut count = 0usize;
            for (j, pos) in (r..w).step_by(e).enumerate() {
                count += usize::from(reach[pos]);
                if j >= n && reach[pos - n * e] {
                    count -= 1;
                }
                next[pos] = count > 0;
            }
        }
        reach = next;
    }
    reach
}

/// `max - min + 1` of bounds, checked.
pub(crate) fn extent(
    op: &'static str,
    bounds: (i64, i64),
    ctx: impl FnOnce() -> String,
) -> Result<i64> {
    bounds
        .1
        .checked_sub(bounds.0)
        .and_then(|x| x.checked_add(1))
        .ok_or_else(|| SwizzleError::overflow(op, ctx()))
}

/// Whether a plain layout maps its domain to distinct offsets.
///
/// Decided without enumeration when a stride is 0 on a mode of extent > 1 (not injective),
/// when the size exceeds the span of the image (not injective), or when the modes sorted by
/// `|stride|` each step past the span of the smaller ones (injective: a mixed-radix number
/// system with gaps); otherwise by enumerating the offsets (bounded).
pub(crate) fn layout_is_injective(op: &'static str, l: &Layout) -> Result<bool> {
    let mut modes: Vec<(i64, u64)> = flat_modes(l)
        .into_iter()
        .filter(|&(n, _)| n > 1)
        .map(|(n, d)| (n, d.unsigned_abs()))
        .collect();
    if modes.iter().any(|&(_, d)| d == 0) {
        return Ok(false);
    }
    if l.size() > l.cosize() {
        return Ok(false);
    }
    modes.sort_by_key(|&(_, d)| d);
    let mut span: u128 = 0;
    let mut separated = true;
    for &(n, d) in &modes {
        if u128::from(d) <= span {
            separated = false;
            break;
        }
        span += (n as u128 - 1) * u128::from(d);
    }
    if separated {
        return Ok(true);
    }
    check_enumerable(op, l.size() as u128, || l.to_string())?;
    let mut all = Vec::with_capacity(l.size() as usize);
    for_each_offset(l, |x| all.push(x));
    all.sort_unstable();
    Ok(all.windows(2).all(|w| w[0] != w[1]))
}
