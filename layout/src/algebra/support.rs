//! Small arithmetic and structural helpers shared by the algebra operations.

use crate::error::{mul, LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

/// `ceil(a / b)` for `a >= 0`, `b >= 1` (CuTe's `ceil_div` on positive integers).
pub(crate) fn ceil_div(a: i64, b: i64) -> i64 {
    debug_assert!(a >= 0 && b >= 1);
    a / b + i64::from(a % b != 0)
}

/// CuTe's `ceil_div(shape, n)`: the first mode takes `ceil(s0 / n)`, what is left of `n`
/// (`ceil(n / s0)`) divides the next mode, and so on; nested modes recurse.
pub(crate) fn ceil_div_shape(a: &IntTuple, b: i64) -> Result<IntTuple> {
    match a {
        IntTuple::Int(x) => Ok(IntTuple::Int(ceil_div(*x, b))),
        IntTuple::Tuple(ms) => {
            let mut rest = b;
            let mut out = Vec::with_capacity(ms.len());
            for m in ms {
                out.push(ceil_div_shape(m, rest)?);
                rest = ceil_div(rest, m.product()?);
            }
            Ok(IntTuple::Tuple(out))
        }
    }
}

/// Column-major strides of `shape` starting at `start`, with CuTe's static rule that a
/// size-1 mode gets stride 0 (CuTe's `compact_col_major(shape, start)`).
pub(crate) fn compact_col_major(shape: &IntTuple, start: i64) -> Result<IntTuple> {
    let mut acc = start;
    shape.try_map_leaves(&mut |s| {
        if s == 1 {
            Ok(0)
        } else {
            let here = acc;
            acc = mul("compact_col_major", acc, s)?;
            Ok(here)
        }
    })
}

/// Calls `f(extent, stride)` on the leaves of a congruent shape and stride, left to right,
/// without collecting them.
pub(crate) fn for_each_leaf(shape: &IntTuple, stride: &IntTuple, f: &mut impl FnMut(i64, i64)) {
    match (shape, stride) {
        (IntTuple::Int(s), IntTuple::Int(d)) => f(*s, *d),
        (IntTuple::Tuple(ss), IntTuple::Tuple(ds)) => {
            for (s, d) in ss.iter().zip(ds) {
                for_each_leaf(s, d, f);
            }
        }
        // Not congruent: the caller guarantees it is; visit nothing rather than panic.
        _ => debug_assert!(false, "for_each_leaf on non-congruent tuples"),
    }
}

/// Flat `(extent, stride)` modes, inline up to 8.
pub(crate) type Modes = smallvec::SmallVec<[(i64, i64); 6]>;

/// Drops size-1 modes and merges `s0:d0, s1:(s0*d0)` in a flat mode list.
pub(crate) fn coalesce_flat(modes: impl IntoIterator<Item = (i64, i64)>) -> Modes {
    let mut out = Modes::new();
    for (s, d) in modes {
        push_merged(&mut out, s, d);
    }
    out
}

/// Appends the mode `s:d` to a coalesced list: dropped if `s == 1`, merged into the last mode
/// `s0:d0` if `d == s0*d0`.
pub(crate) fn push_merged(out: &mut Modes, s: i64, d: i64) {
    if s == 1 {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.0.checked_mul(last.1) == Some(d) {
            if let Some(m) = last.0.checked_mul(s) {
                last.0 = m;
                return;
            }
        }
    }
    out.push((s, d));
}

/// A checked layout from flat modes: none is `1:0`, one an integral layout, more a flat tuple.
pub(crate) fn layout_from_modes(op: &'static str, modes: &[(i64, i64)]) -> Result<Layout> {
    match modes {
        [] => Ok(Layout::from_parts_unchecked(
            IntTuple::Int(1),
            IntTuple::Int(0),
        )),
        [(s, d)] => checked_layout(op, IntTuple::Int(*s), IntTuple::Int(*d)),
        _ => checked_layout(
            op,
            IntTuple::flat(modes.iter().map(|m| m.0)),
            IntTuple::flat(modes.iter().map(|m| m.1)),
        ),
    }
}

/// A layout from a shape and a stride that the caller built congruent: checks, in one pass
/// over the leaves, what [`Layout::new`] checks besides congruence (extents at least 1, size
/// and image bounds within `i64`). The algebra builds many small layouts; this keeps that
/// cheap.
pub(crate) fn checked_layout(
    op: &'static str,
    shape: IntTuple,
    stride: IntTuple,
) -> Result<Layout> {
    debug_assert!(crate::int_tuple::congruent(&shape, &stride));
    let mut size = Some(1i64);
    let (mut lo, mut hi) = (Some(0i64), Some(0i64));
    let mut bad_extent = false;
    for_each_leaf(&shape, &stride, &mut |s, d| {
        bad_extent |= s < 1;
        size = size.and_then(|v| v.checked_mul(s));
        match (s - 1).checked_mul(d) {
            Some(ext) if ext < 0 => lo = lo.and_then(|v| v.checked_add(ext)),
            Some(ext) => hi = hi.and_then(|v| v.checked_add(ext)),
            None => size = None,
        }
    });
    if bad_extent {
        return Err(LayoutError::BadShape {
            op,
            shape: shape.to_string(),
        });
    }
    let ok = size.is_some()
        && matches!((lo, hi), (Some(lo), Some(hi)) if hi.checked_sub(lo).and_then(|x| x.checked_add(1)).is_some());
    if ok {
        Ok(Layout::from_parts_unchecked(shape, stride))
    } else {
        Err(LayoutError::overflow(op, format!("{shape}:{stride}")))
    }
}

/// The layout whose modes are `modes` (CuTe's `make_layout(L0, L1, ...)`), checked as
/// [`checked_layout`].
pub(crate) fn concat(op: &'static str, modes: impl IntoIterator<Item = Layout>) -> Result<Layout> {
    let (shapes, strides): (Vec<_>, Vec<_>) = modes
        .into_iter()
        .map(|l| {
            let (s, d) = l.into_parts();
            (s.into_inner(), d.into_inner())
        })
        .unzip();
    checked_layout(op, IntTuple::Tuple(shapes), IntTuple::Tuple(strides))
}

/// The flat `(shape, stride)` pairs of a layout.
pub(crate) fn flat_modes(l: &Layout) -> Vec<(i64, i64)> {
    l.shape()
        .leaves()
        .iter()
        .copied()
        .zip(l.stride().leaves().iter().copied())
        .collect()
}

/// Largest layout searched for a witness of non-injectivity.
pub(crate) const WITNESS_LIMIT: i64 = 1 << 16;

/// Two indices `i < j` with `l(i) == l(j)`, and that offset, found by enumeration when
/// `size(l) <= WITNESS_LIMIT`; `None` if `l` is injective or too large to search.
pub(crate) fn collision(l: &Layout) -> Option<(i64, i64, i64)> {
    if l.size() > WITNESS_LIMIT {
        return None;
    }
    let mut seen = std::collections::HashMap::with_capacity(l.size() as usize);
    for j in 0..l.size() {
        let x = l.call(j).ok()?;
        if let Some(i) = seen.insert(x, j) {
            return Some((i, j, x));
        }
    }
    None
}
