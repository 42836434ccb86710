//! `logical_divide` and its rearrangements `zipped_divide`, `tiled_divide`, `flat_divide`.

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use super::coalesce::{coalesced_modes, from_flat_modes};
use super::complement::complement;
use super::composition::composition_parts;
use super::support::concat;
use super::tiler::Tiler;

/// Applies `f` mode by mode for a by-mode tiler, keeping the layout's modes beyond the tiler
/// (CuTe's `transform_layout(layout, tiler, f)`); `_` keeps the layout; a layout tiler is
/// handed to `f` whole.
pub(crate) fn by_mode(
    op: &'static str,
    l: &Layout,
    t: &Tiler,
    f: &impl Fn(&Layout, &Layout) -> Result<Layout>,
) -> Result<Layout> {
    match t {
        Tiler::Layout(tl) => f(l, tl),
        Tiler::Skip => Ok(l.clone()),
        Tiler::ByMode(ts) => {
            if ts.len() > l.rank() {
                return Err(LayoutError::OutOfRange {
                    op,
                    operand: l.to_string(),
                    index: format!("tiler {t} of rank {}", ts.len()),
                    rank: l.rank(),
                });
            }
            let mut modes = Vec::with_capacity(l.rank());
            for (i, m) in l.modes().enumerate() {
                modes.push(match ts.get(i) {
                    Some(ti) => by_mode(op, &m, ti, f)?,
                    None => m,
                });
            }
            concat(op, modes)
        }
    }
}

/// A layout's shape and stride, taken apart.
type Parts = (IntTuple, IntTuple);

/// The top-level modes of a shape and stride (an integer is its own single mode).
fn modes_of(p: Parts) -> Vec<Parts> {
    match p {
        (IntTuple::Tuple(s), IntTuple::Tuple(d)) => s.into_iter().zip(d).collect(),
        p => vec![p],
    }
}

/// The top-level modes of a shape and stride, by value, without collecting them.
fn into_modes(p: Parts) -> impl Iterator<Item = Parts> {
    let (one, many) = match p {
        (IntTuple::Tuple(s), IntTuple::Tuple(d)) => (None, Some(s.into_iter().zip(d))),
        p => (Some(p), None),
    };
    one.into_iter().chain(many.into_iter().flatten())
}

/// Splits the rank-2 modes that a divide or product leaves at the tiler's layout items into
/// `(first parts, second parts + the layout's modes beyond the tiler)` (CuTe's `zip2_by`).
fn zip2_by(op: &'static str, p: Parts, guide: &Tiler) -> Result<(Parts, Parts)> {
    match guide {
        Tiler::ByMode(gs) => {
            let rank = p.0.rank();
            if gs.len() > rank {
                return Err(LayoutError::OutOfRange {
                    op,
                    operand: format!("{}:{}", p.0, p.1),
                    index: format!("tiler {guide} of rank {}", gs.len()),
                    rank,
                });
            }
            let (mut f0, mut f1) = (Vec::with_capacity(gs.len()), Vec::with_capacity(gs.len()));
            let (mut s0, mut s1) = (Vec::with_capacity(rank), Vec::with_capacity(rank));
            for (i, m) in into_modes(p).enumerate() {
                match gs.get(i) {
                    Some(g) => {
                        let (a, b) = zip2_by(op, m, g)?;
                        f0.push(a.0);
                        f1.push(a.1);
                        s0.push(b.0);
                        s1.push(b.1);
                    }
                    None => {
                        s0.push(m.0);
                        s1.push(m.1);
                    }
                }
            }
            Ok((
                (IntTuple::Tuple(f0), IntTuple::Tuple(f1)),
                (IntTuple::Tuple(s0), IntTuple::Tuple(s1)),
            ))
        }
        _ => match p {
            (IntTuple::Tuple(s), IntTuple::Tuple(d)) if s.len() == 2 && d.len() == 2 => {
                match (<[IntTuple; 2]>::try_from(s), <[IntTuple; 2]>::try_from(d)) {
                    (Ok([a0, b0]), Ok([a1, b1])) => Ok(((a0, a1), (b0, b1))),
                    _ => Err(LayoutError::inadmissible(op, String::new(), "rank-2 split")),
                }
            }
            (s, d) => Err(LayoutError::inadmissible(
                op,
                String::new(),
                format!("mode {s}:{d} under tiler item {guide} is not rank 2 (CuTe's zip2_by)"),
            )),
        },
    }
}

/// CuTe's `tile_unzip`: `((first parts), (second parts, further modes))` of a divide or
/// product result `l` along the tiler. The leaves are those of `l`, only regrouped, so the
/// result is a valid layout without further checks.
pub(crate) fn tile_unzip(op: &'static str, l: Layout, t: &Tiler) -> Result<Layout> {
    let (s, d) = l.into_parts();
    let ((fs, fd), (ss, sd)) = zip2_by(op, (s.into_inner(), d.into_inner()), t)?;
    Ok(Layout::from_parts_unchecked(
        IntTuple::Tuple(vec![fs, ss]),
        IntTuple::Tuple(vec![fd, sd]),
    ))
}

/// Unpacks mode 1 (`tiled_*`) or both modes (`flat_*`) of a zipped result into top-level
/// modes; the leaves stay the same, so no check is needed.
pub(crate) fn unpack_zipped(z: Layout, both: bool) -> Layout {
    let (s, d) = z.into_parts();
    let mut modes = modes_of((s.into_inner(), d.into_inner())).into_iter();
    let mut out: Vec<Parts> = Vec::new();
    if let Some(m0) = modes.next() {
        if both {
            out.extend(modes_of(m0));
        } else {
            out.push(m0);
        }
    }
    for m in modes {
        out.extend(modes_of(m));
    }
    let (shapes, strides): (Vec<_>, Vec<_>) = out.into_iter().unzip();
    Layout::from_parts_unchecked(IntTuple::Tuple(shapes), IntTuple::Tuple(strides))
}

fn divide_layout(l: &Layout, t: &Layout) -> Result<Layout> {
    // coalesce(L) is the same function as L on its domain and depends on nothing else, so
    // composing with it (rather than with L) makes the tiles that overhang L's domain, and so
    // the answer, depend on L as a function and not on how it is written.
    let modes = coalesced_modes(l);
    let cl = from_flat_modes(&modes);
    let cotarget = cl.shape().as_tuple().clone();
    let c = complement(t, &cotarget)?;
    composition_parts(
        &cl,
        &[(t.shape(), t.stride()), (c.shape(), c.stride())],
        || Layout::concat([t.clone(), c.clone()]),
    )
}

/// `coalesce(L) ∘ (T, complement(T, shape(coalesce(L))))` (CuTe's `logical_divide`, which
/// composes `L` itself): mode 0 indexes inside a tile `L ∘ T`, mode 1 runs over the tiles. A
/// by-mode tiler divides mode by mode and keeps L's modes beyond the tiler; `_` keeps a mode;
/// an integer `n` is the tiler `n:1`.
///
/// When the tile does not divide L, the rest mode rounds up and the last tiles overhang L's
/// domain (`48:1 / 32:1 = (32,2):(1,32)`; offsets 48..63 are past L): CuTe does the same,
/// and a kernel predicates those elements. The overhang follows the extended domain of
/// `coalesce(L)` (its last mode running on), which is fixed by L's values on its domain: two
/// layouts equal as functions get the same answer (`(3,1):(1,4)` and `3:1`, both divided by
/// `2:1`, give `(2,2):(1,2)`). CuTe composes `L` as written, so its overhang differs when L
/// ends in a size-1 mode or mergeable modes.
///
/// Post-condition (layout tiler `T`): `R` has rank 2, `shape(T)` and `shape(C)` are
/// compatible with its modes, and `R(i, j) == coalesce(L)(T(i) + C(j))` for `i < size(T)`,
/// `j < size(C)`, where `C = complement(T, shape(coalesce(L)))`; so `R(i, j) == L(T(i) + C(j))`
/// wherever `T(i) + C(j) < size(L)`. Mode by mode for a by-mode tiler.
///
/// Errors: those of [`complement`] (for `T`) and [`composition`](super::composition) (for
/// `coalesce(L)` and `(T, C)`), labelled `logical_divide`.
///
/// ```
/// use tessera_layout::{logical_divide, Layout, Tiler};
/// let l: Layout = "(4,2,3):(2,1,8)".parse().unwrap();
/// let t: Tiler = "4:2".parse().unwrap();
/// assert_eq!(logical_divide(&l, &t).unwrap().to_string(), "((2,2),(2,3)):((4,1),(2,8))");
/// let l: Layout = "(9,(4,8)):(59,(13,1))".parse().unwrap();
/// let t: Tiler = "<3:3, (2,4):(1,8)>".parse().unwrap();
/// assert_eq!(
///     logical_divide(&l, &t).unwrap().to_string(),
///     "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"
/// );
/// ```
#[doc(alias = "tile")]
#[doc(alias = "split")]
pub fn logical_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    logical_divide_in("logical_divide", l, t)
}

/// [`logical_divide`] with its errors labelled `op`, the operation the caller called.
fn logical_divide_in(op: &'static str, l: &Layout, t: &Tiler) -> Result<Layout> {
    by_mode(op, l, t, &divide_layout).map_err(|e| e.within(op, || format!("{l}, {t}")))
}

/// `((tile modes), (rest modes, L's modes beyond the tiler))` (CuTe's `zipped_divide`): the
/// modes of [`logical_divide`] regrouped so that mode 0 is one whole tile and mode 1 indexes
/// the tiles. For a layout tiler it equals `logical_divide`.
///
/// Post-condition: the same function as `logical_divide(L, T)`, modes regrouped as stated.
///
/// ```
/// use tessera_layout::{zipped_divide, Layout, Tiler};
/// let l: Layout = "(8,6):(1,8)".parse().unwrap();
/// let t: Tiler = "<4,3>".parse().unwrap();
/// assert_eq!(zipped_divide(&l, &t).unwrap().to_string(), "((4,3),(2,2)):((1,8),(4,24))");
/// ```
pub fn zipped_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    zipped_divide_in("zipped_divide", l, t)
}

fn zipped_divide_in(op: &'static str, l: &Layout, t: &Tiler) -> Result<Layout> {
    let ld = logical_divide_in(op, l, t)?;
    tile_unzip(op, ld, t).map_err(|e| e.within(op, || format!("{l}, {t}")))
}

/// `((tile modes), rest modes..., L's modes beyond the tiler...)` (CuTe's `tiled_divide`):
/// [`zipped_divide`] with mode 1 unpacked.
///
/// ```
/// use tessera_layout::{tiled_divide, Layout, Tiler};
/// let l: Layout = "(8,6):(1,8)".parse().unwrap();
/// let t: Tiler = "<4,3>".parse().unwrap();
/// assert_eq!(tiled_divide(&l, &t).unwrap().to_string(), "((4,3),2,2):((1,8),4,24)");
/// ```
pub fn tiled_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    Ok(unpack_zipped(
        zipped_divide_in("tiled_divide", l, t)?,
        false,
    ))
}

/// `(tile modes..., rest modes..., L's modes beyond the tiler...)` (CuTe's `flat_divide`):
/// [`zipped_divide`] with both modes unpacked.
///
/// ```
/// use tessera_layout::{flat_divide, Layout, Tiler};
/// let l: Layout = "(8,6):(1,8)".parse().unwrap();
/// let t: Tiler = "<4,3>".parse().unwrap();
/// assert_eq!(flat_divide(&l, &t).unwrap().to_string(), "(4,3,2,2):(1,8,4,24)");
/// ```
pub fn flat_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    Ok(unpack_zipped(zipped_divide_in("flat_divide", l, t)?, true))
}
