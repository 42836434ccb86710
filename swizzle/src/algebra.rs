//! The layout algebra on swizzled layouts, forwarded the way CuTe forwards it.
//!
//! CuTe treats `Sw o O o L` as "`L` with a function applied afterwards": composition with a
//! layout or tiler, the divides and products, coalesce, filter and `tile_to_shape` act on the
//! inner layout `L` and keep the swizzle and the offset. Each function here has the name of
//! its `tessera_layout` counterpart and the post-condition:
//!
//! `R == Sw o O o op(L)`, with `op(L)` meeting the plain operation's post-condition.
//!
//! The rest (inverses, up/downcast, slicing) needs swizzle-specific reasoning and says so.

use std::fmt;
use std::str::FromStr;

use tessera_layout::{self as tl, Cursor, IntTuple, Layout, LayoutError, Tiler};

use crate::any::AnyLayout;
use crate::error::{Result, SwizzleError, ENUMERATION_LIMIT};
use crate::extent::{flat_modes, for_each_offset};
use crate::swizzle::Swizzle;
use crate::swizzled::SwizzledLayout;

fn forward(
    a: &SwizzledLayout,
    op: impl FnOnce(&Layout) -> tl::Result<Layout>,
) -> Result<SwizzledLayout> {
    Ok(a.with_inner(op(&a.inner)?))
}

/// `Sw o O o (L o B)`: composition with a layout (CuTe's `composition(ComposedLayout, B)`).
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// use tessera_layout::Layout;
/// let a: SwizzledLayout = "Sw<3,3,3> o (8,64):(64,1)".parse().unwrap();
/// let b: Layout = "8:1".parse().unwrap(); // the first column: rows 0..8
/// let r = algebra::composition(&a, &b).unwrap();
/// assert_eq!(r.to_string(), "Sw<3,3,3> o 0 o 8:64");
/// ```
pub fn composition(a: &SwizzledLayout, b: &Layout) -> Result<SwizzledLayout> {
    forward(a, |l| tl::composition(l, b))
}

/// `A o (Sw o 0 o B)` for a plain `A` (CuTe's `composition(Layout, ComposedLayout)`): the
/// swizzle is moved outside as `Sw' = make_swizzle(A(YYY), A(ZZZ))`, giving
/// `Sw' o 0 o (A o B)`.
///
/// Post-condition: `R(i) == A(B'(i))` for every `i < size(B)`, where `B'` is the swizzled
/// layout; checked on the whole domain.
///
/// Errors: `Inadmissible` if `B`'s offset is not 0 (CuTe requires it too), `A`'s images of
/// the masks are not a swizzle, or the rewritten form fails the check; the plain
/// composition's errors; `TooLarge` past [`ENUMERATION_LIMIT`].
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// use tessera_layout::Layout;
/// // a layout that doubles every offset moves the swizzle's bits up by one
/// let a: Layout = "64:2".parse().unwrap();
/// let b: SwizzledLayout = "Sw<2,1,2> o (8,8):(8,1)".parse().unwrap();
/// let r = algebra::composition_layout_swizzled(&a, &b).unwrap();
/// assert_eq!(r.to_string(), "Sw<2,2,2> o 0 o (8,8):(16,2)");
/// ```
pub fn composition_layout_swizzled(a: &Layout, b: &SwizzledLayout) -> Result<SwizzledLayout> {
    const OP: &str = "composition";
    if b.offset != 0 {
        return Err(SwizzleError::inadmissible(
            OP,
            format!("{a} o {b}"),
            "the swizzled right operand needs offset 0",
        ));
    }
    let sw = if b.swizzle.is_identity() {
        b.swizzle
    } else {
        push_through(OP, a, b.swizzle)?
    };
    let r = SwizzledLayout::new(sw, 0, tl::composition(a, &b.inner)?);
    let n = b.size();
    if n as u64 > ENUMERATION_LIMIT {
        return Err(SwizzleError::TooLarge {
            op: OP,
            operands: format!("{a} o {b}"),
            needed: n as u128,
            limit: ENUMERATION_LIMIT,
        });
    }
    for i in 0..n {
        if r.call(i)? != a.call(b.call(i)?)? {
            return Err(SwizzleError::inadmissible(
                OP,
                format!("{a} o {b}"),
                format!("the swizzle cannot be moved outside {a} (fails at {i})"),
            ));
        }
    }
    Ok(r)
}

/// `Sw o O o (L o T)` for a tiler `T` (CuTe's `composition(ComposedLayout, Tiler)`).
pub fn composition_tiler(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::composition_tiler(l, t))
}

/// `Sw o O o logical_divide(L, T)`.
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// let a: SwizzledLayout = "Sw<3,3,3> o (16,64):(64,1)".parse().unwrap();
/// let r = algebra::logical_divide(&a, &"<8,_>".parse().unwrap()).unwrap();
/// assert_eq!(r.to_string(), "Sw<3,3,3> o 0 o ((8,2),64):((64,512),1)");
/// ```
pub fn logical_divide(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::logical_divide(l, t))
}

/// `Sw o O o zipped_divide(L, T)`.
pub fn zipped_divide(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::zipped_divide(l, t))
}

/// `Sw o O o tiled_divide(L, T)`.
pub fn tiled_divide(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::tiled_divide(l, t))
}

/// `Sw o O o flat_divide(L, T)`.
pub fn flat_divide(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::flat_divide(l, t))
}

/// `Sw o O o logical_product(L, T)`.
pub fn logical_product(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::logical_product(l, t))
}

/// `Sw o O o zipped_product(L, T)`.
pub fn zipped_product(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::zipped_product(l, t))
}

/// `Sw o O o tiled_product(L, T)`.
pub fn tiled_product(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::tiled_product(l, t))
}

/// `Sw o O o flat_product(L, T)`.
pub fn flat_product(a: &SwizzledLayout, t: &Tiler) -> Result<SwizzledLayout> {
    forward(a, |l| tl::flat_product(l, t))
}

/// `Sw o O o blocked_product(L, B)`.
pub fn blocked_product(a: &SwizzledLayout, b: &Layout) -> Result<SwizzledLayout> {
    forward(a, |l| tl::blocked_product(l, b))
}

/// `Sw o O o raked_product(L, B)`.
pub fn raked_product(a: &SwizzledLayout, b: &Layout) -> Result<SwizzledLayout> {
    forward(a, |l| tl::raked_product(l, b))
}

/// `Sw o O o tile_to_shape(L, shape, order)`: an smem atom repeated to fill a tile.
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// let atom: SwizzledLayout = "Sw<3,3,3> o (8,64):(64,1)".parse().unwrap();
/// let tile = algebra::tile_to_shape(&atom, &"(128,64)".parse().unwrap(), None).unwrap();
/// assert_eq!(tile.to_string(), "Sw<3,3,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))");
/// ```
pub fn tile_to_shape(
    a: &SwizzledLayout,
    shape: &IntTuple,
    order: Option<&IntTuple>,
) -> Result<SwizzledLayout> {
    forward(a, |l| tl::tile_to_shape(l, shape, order))
}

/// CuTe's `complement(ComposedLayout, cotarget)`: the complement of the inner layout `L`
/// (a plain layout over `L`'s codomain, before the offset and the swizzle), which is what
/// the divides and products use.
///
/// Post-condition: that of [`tessera_layout::complement`] for `L`.
pub fn complement(a: &SwizzledLayout, cotarget: &IntTuple) -> Result<Layout> {
    Ok(tl::complement(&a.inner, cotarget)?)
}

/// CuTe's `complement(ComposedLayout)`: [`tessera_layout::complement_default`] of the inner
/// layout (its cotarget is the inner layout's cosize, CuTe's `cosize(ComposedLayout)`).
pub fn complement_default(a: &SwizzledLayout) -> Result<Layout> {
    Ok(tl::complement_default(&a.inner)?)
}

/// `Sw o O o coalesce(L)`.
pub fn coalesce(a: &SwizzledLayout) -> SwizzledLayout {
    a.with_inner(tl::coalesce(&a.inner))
}

/// `Sw o O o coalesce(L, profile)`.
pub fn coalesce_profile(a: &SwizzledLayout, profile: &IntTuple) -> Result<SwizzledLayout> {
    forward(a, |l| tl::coalesce_profile(l, profile))
}

/// `Sw o O o filter(L)`.
pub fn filter(a: &SwizzledLayout) -> SwizzledLayout {
    a.with_inner(tl::filter(&a.inner))
}

/// `Sw o O o filter_zeros(L)`.
pub fn filter_zeros(a: &SwizzledLayout) -> SwizzledLayout {
    a.with_inner(tl::filter_zeros(&a.inner))
}

/// The swizzled layout in units `n` times larger (CuTe's `upcast<N>`): `Sw.upcast(n) o O/n o
/// upcast(L, n)`.
///
/// Post-condition: `n * R(c) == A(c')` with `c'` as in [`tessera_layout::upcast`].
///
/// Errors: `Inadmissible` if `n` is not a power of two, the swizzle's `M < log2(n)`, or the
/// offset is not a multiple of `n`; the plain `upcast`'s errors.
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// let bytes: SwizzledLayout = "Sw<3,4,3> o 0 o (8,128):(128,1)".parse().unwrap();
/// assert_eq!(algebra::upcast(&bytes, 2).unwrap().to_string(), "Sw<3,3,3> o 0 o (8,64):(64,1)");
/// ```
pub fn upcast(a: &SwizzledLayout, n: i64) -> Result<SwizzledLayout> {
    let sw = a
        .swizzle
        .upcast(n)
        .map_err(|e| relabel(e, "upcast", a, n))?;
    if a.offset % n != 0 {
        return Err(SwizzleError::inadmissible(
            "upcast",
            format!("{a}, {n}"),
            format!("the offset {} is not a multiple of {n}", a.offset),
        ));
    }
    let inner = tl::upcast(&a.inner, n)?;
    Ok(SwizzledLayout::new(sw, a.offset / n, inner))
}

/// The swizzled layout in units `n` times smaller (CuTe's `downcast<N>`), e.g. from 2-byte
/// elements to bytes: `Sw.downcast(n) o O*n o downcast(L, n)`; `Sw<B,M,S>` becomes
/// `Sw<B,M+log2(n),S>`.
///
/// Post-condition: `R(c) == n * A(c'') + j` where `c''` is `c` with the stride-1 mode's
/// coordinate divided by `n` and `j` its remainder; the image of `R` is
/// `{ n * x + j : x in image(A), 0 <= j < n }`.
///
/// Errors: `Inadmissible` unless the inner layout has exactly one stride-1 leaf and no
/// stride -1 leaf (otherwise widening the unit-stride leaves does not describe the bytes of
/// each element), or `n` is not a power of two; `Overflow`.
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// let halves: SwizzledLayout = "Sw<3,3,3> o 0 o (8,64):(64,1)".parse().unwrap();
/// assert_eq!(algebra::downcast(&halves, 2).unwrap().to_string(), "Sw<3,4,3> o 0 o (8,128):(128,1)");
/// ```
pub fn downcast(a: &SwizzledLayout, n: i64) -> Result<SwizzledLayout> {
    // The plain downcast widens every stride-±1 leaf; that describes the bytes of each
    // element only when there is exactly one such leaf and its stride is +1 (a stride -1
    // leaf would need its bytes in ascending order inside a descending mode).
    let unit: Vec<i64> = flat_modes(&a.inner)
        .into_iter()
        .filter(|&(_, d)| d == 1 || d == -1)
        .map(|(_, d)| d)
        .collect();
    if n > 1 && unit != [1] {
        return Err(SwizzleError::inadmissible(
            "downcast",
            format!("{a}, {n}"),
            "needs exactly one stride-1 leaf and no stride -1 leaf",
        ));
    }
    let sw = a
        .swizzle
        .downcast(n)
        .map_err(|e| relabel(e, "downcast", a, n))?;
    let offset = a
        .offset
        .checked_mul(n)
        .ok_or_else(|| SwizzleError::overflow("downcast", format!("{a}, {n}")))?;
    let inner = tl::downcast(&a.inner, n)?;
    Ok(SwizzledLayout::new(sw, offset, inner))
}

fn relabel(e: SwizzleError, op: &'static str, a: &SwizzledLayout, n: i64) -> SwizzleError {
    match e {
        SwizzleError::Inadmissible { reason, .. } => {
            SwizzleError::inadmissible(op, format!("{a}, {n}"), reason)
        }
        e => e,
    }
}

/// `a o Sw` rewritten as `Sw' o a` (CuTe's `composition(Layout, Swizzle)`): `Sw'` is
/// `make_swizzle(a(YYY), a(ZZZ))`. Only valid in the cases the caller then checks.
fn push_through(op: &'static str, a: &Layout, sw: Swizzle) -> Result<Swizzle> {
    let y = a.call(sw.yyy_mask())?;
    let z = a.call(sw.zzz_mask())?;
    Swizzle::make_swizzle(y, z).map_err(|_| {
        SwizzleError::inadmissible(
            op,
            format!("{a} o {sw}"),
            format!("the swizzle's bits map to Y={y}, Z={z}, which is not a swizzle"),
        )
    })
}

fn require_zero_offset(op: &'static str, a: &SwizzledLayout) -> Result<()> {
    if a.offset == 0 {
        Ok(())
    } else {
        Err(SwizzleError::inadmissible(
            op,
            a.to_string(),
            "needs offset 0 (CuTe's form for a non-zero offset puts the swizzle first)",
        ))
    }
}

fn verify(
    op: &'static str,
    a: &SwizzledLayout,
    n: i64,
    mut ok: impl FnMut(i64) -> Result<bool>,
) -> Result<()> {
    if n as u64 > ENUMERATION_LIMIT {
        return Err(SwizzleError::TooLarge {
            op,
            operands: a.to_string(),
            needed: n as u128,
            limit: ENUMERATION_LIMIT,
        });
    }
    for i in 0..n {
        if !ok(i)? {
            return Err(SwizzleError::inadmissible(
                op,
                a.to_string(),
                format!("no swizzled layout of this form inverts it (fails at {i})"),
            ));
        }
    }
    Ok(())
}

/// A right inverse `R` of `A = Sw o 0 o L`: `A(R(i)) == i` for every `i < size(R)`.
///
/// As CuTe: `R = right_inverse(L) o Sw`, with the swizzle moved outside as
/// `Sw' o 0 o right_inverse(L)`, `Sw' = make_swizzle(L⁻¹(YYY), L⁻¹(ZZZ))`. The
/// post-condition is checked on the whole domain of `R`.
///
/// Errors: `Inadmissible` if the offset is not 0, or the rewritten form fails the check;
/// `TooLarge` past [`ENUMERATION_LIMIT`].
///
/// ```
/// use tessera_swizzle::{algebra, SwizzledLayout};
/// let a: SwizzledLayout = "Sw<3,3,3> o (8,64):(64,1)".parse().unwrap();
/// let r = algebra::right_inverse(&a).unwrap();
/// assert_eq!(r.to_string(), "Sw<3,0,-6> o 0 o (64,8):(8,1)");
/// for i in 0..512 {
///     assert_eq!(a.call(r.call(i).unwrap()).unwrap(), i);
/// }
/// ```
pub fn right_inverse(a: &SwizzledLayout) -> Result<SwizzledLayout> {
    const OP: &str = "right_inverse";
    require_zero_offset(OP, a)?;
    let inv = tl::right_inverse(&a.inner)?;
    let sw = push_through(OP, &inv, a.swizzle)?;
    let r = SwizzledLayout::new(sw, 0, inv);
    verify(OP, a, r.size(), |i| Ok(a.call(r.call(i)?)? == i))?;
    Ok(r)
}

/// A left inverse `R` of `A = Sw o 0 o L`: `R(A(i)) == i` for every `i < size(A)`.
///
/// As CuTe: `R = left_inverse(L) o Sw`, moved outside as for [`right_inverse`], and checked
/// on the whole domain of `A`.
///
/// Errors: as [`right_inverse`]; the plain `left_inverse`'s errors (`L` not injective).
pub fn left_inverse(a: &SwizzledLayout) -> Result<SwizzledLayout> {
    const OP: &str = "left_inverse";
    require_zero_offset(OP, a)?;
    let inv = tl::left_inverse(&a.inner)?;
    let sw = push_through(OP, &inv, a.swizzle)?;
    let r = SwizzledLayout::new(sw, 0, inv);
    verify(OP, a, a.size(), |i| Ok(r.call(a.call(i)?)? == i))?;
    Ok(r)
}

/// A slicing coordinate: an index, `_` (keep the whole mode), or a tuple of those.
///
/// An integer at a tuple position is a 1-D index into that whole sub-mode, as for CuTe
/// coordinates. Text form: `(_,3)`, `((1,_),_)`, `_`, `5`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum SliceCoord {
    /// A fixed 1-D index into the mode.
    Index(i64),
    /// `_`: keep the mode.
    All,
    /// One item per mode.
    Tuple(Vec<SliceCoord>),
}

impl SliceCoord {
    /// Parses a slicing coordinate at the cursor.
    pub fn parse(c: &mut Cursor<'_>) -> tl::Result<SliceCoord> {
        if c.eat('_') {
            return Ok(SliceCoord::All);
        }
        if c.eat('(') {
            let mut items = Vec::new();
            loop {
                items.push(SliceCoord::parse(c)?);
                if c.eat(')') {
                    return Ok(SliceCoord::Tuple(items));
                }
                c.expect(',')?;
            }
        }
        c.integer().map(SliceCoord::Index)
    }
}

impl fmt::Display for SliceCoord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SliceCoord::Index(i) => write!(f, "{i}"),
            SliceCoord::All => f.write_str("_"),
            SliceCoord::Tuple(items) => {
                f.write_str("(")?;
                for (k, it) in items.iter().enumerate() {
                    if k > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{it}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl FromStr for SliceCoord {
    type Err = SwizzleError;
    fn from_str(s: &str) -> Result<Self> {
        let mut c = Cursor::new(s);
        let r = SliceCoord::parse(&mut c)?;
        if !c.at_end() {
            return Err(c.error("unexpected trailing text").into());
        }
        Ok(r)
    }
}

/// Walks a slicing coordinate over a shape and stride: kept modes into `kept` (nested tuples
/// are flattened one level, as CuTe's `slice` does), fixed indices into `offset`.
fn slice_rec(
    c: &SliceCoord,
    s: &IntTuple,
    d: &IntTuple,
    kept: &mut Vec<(IntTuple, IntTuple)>,
    offset: &mut i64,
) -> Result<()> {
    match c {
        SliceCoord::All => kept.push((s.clone(), d.clone())),
        SliceCoord::Index(i) => {
            let size = s.product()?;
            if !(0..size).contains(i) {
                return Err(LayoutError::OutOfRange {
                    op: "slice",
                    operand: format!("{s}:{d}"),
                    index: i.to_string(),
                    rank: s.rank(),
                }
                .into());
            }
            let here = tl::crd2idx(&IntTuple::Int(*i), s, d)?;
            *offset = offset
                .checked_add(here)
                .ok_or_else(|| SwizzleError::overflow("slice", format!("{s}:{d} at {i}")))?;
        }
        SliceCoord::Tuple(cs) => {
            let (IntTuple::Tuple(ss), IntTuple::Tuple(ds)) = (s, d) else {
                return Err(mismatch(c, s));
            };
            if cs.len() != ss.len() {
                return Err(mismatch(c, s));
            }
            for ((ci, si), di) in cs.iter().zip(ss).zip(ds) {
                slice_rec(ci, si, di, kept, offset)?;
            }
        }
    }
    Ok(())
}

fn mismatch(c: &SliceCoord, s: &IntTuple) -> SwizzleError {
    LayoutError::Mismatch {
        op: "slice",
        lhs: c.to_string(),
        rhs: s.to_string(),
        relation: "weakly congruent",
    }
    .into()
}

/// CuTe's `slice_and_offset` on a plain layout: the kept modes and the offset of the fixed
/// ones, `L(c) == R(kept part of c) + offset`.
pub fn slice_layout(c: &SliceCoord, l: &Layout) -> Result<(Layout, i64)> {
    if let SliceCoord::All = c {
        return Ok((l.clone(), 0));
    }
    let mut kept = Vec::new();
    let mut offset = 0i64;
    slice_rec(c, l.shape(), l.stride(), &mut kept, &mut offset)?;
    let (ss, ds): (Vec<_>, Vec<_>) = kept.into_iter().unzip();
    Ok((
        Layout::new(IntTuple::Tuple(ss), IntTuple::Tuple(ds))?,
        offset,
    ))
}

/// Slices a plain or swizzled layout at `c`, returning the layout of the kept modes and an
/// offset, with `A(c) == R(kept part of c) + offset` (CuTe's `slice_and_offset`).
///
/// For a swizzled layout the fixed part is added to the offset *inside* the swizzle,
/// `Sw o (O + d) o L_kept`, and the returned offset is 0. When that function is in fact
/// affine (the kept modes do not touch the swizzled bits, as when slicing one row of a
/// swizzled tile whose rows are whole swizzle units) the result decays to a plain layout
/// plus an offset, as in CuTe. Decay is decided exactly by checking every kept coordinate
/// (up to [`ENUMERATION_LIMIT`]; above that the result stays swizzled, which is never wrong).
///
/// ```
/// use tessera_swizzle::{algebra::{slice_and_offset, SliceCoord}, AnyLayout};
/// let a: AnyLayout = "Sw<3,3,3> o (8,64):(64,1)".parse().unwrap();
/// // one row: the chunks of 8 stay contiguous but are permuted: still swizzled
/// let (r, off) = slice_and_offset(&a, &"(3,_)".parse::<SliceCoord>().unwrap()).unwrap();
/// assert_eq!((r.to_string(), off), ("Sw<3,3,3> o 192 o (64):(1)".to_string(), 0));
/// // one column of 8 rows: affine, decays to a plain layout and an offset
/// let (r, off) = slice_and_offset(&a, &"(_,0)".parse::<SliceCoord>().unwrap()).unwrap();
/// assert_eq!((r.to_string(), off), ("(8):(72)".to_string(), 0));
/// ```
pub fn slice_and_offset<L: Clone + Into<AnyLayout>>(
    a: &L,
    c: &SliceCoord,
) -> Result<(AnyLayout, i64)> {
    match a.clone().into() {
        AnyLayout::Plain(l) => {
            let (r, off) = slice_layout(c, &l)?;
            Ok((AnyLayout::Plain(r), off))
        }
        AnyLayout::Swizzled(s) => {
            let (kept, d) = slice_layout(c, &s.inner)?;
            let x = s
                .offset
                .checked_add(d)
                .ok_or_else(|| SwizzleError::overflow("slice", format!("{s} at {c}")))?;
            let swizzled = SwizzledLayout::new(s.swizzle, x, kept);
            match decay(&swizzled) {
                Some((plain, base)) => Ok((AnyLayout::Plain(plain), base)),
                None => Ok((AnyLayout::Swizzled(swizzled), 0)),
            }
        }
    }
}

/// `Sw o X o L` as `P + base` with a plain `P`, if it is affine on its whole domain.
fn decay(s: &SwizzledLayout) -> Option<(Layout, i64)> {
    if s.size() as u64 > ENUMERATION_LIMIT {
        return None;
    }
    let base = s.swizzle.apply(s.offset);
    let mut strides = Vec::new();
    for (n, d) in s
        .inner
        .shape()
        .leaves()
        .iter()
        .zip(s.inner.stride().leaves().iter())
    {
        strides.push(if *n > 1 {
            s.swizzle
                .apply(s.offset.checked_add(*d)?)
                .checked_sub(base)?
        } else {
            0
        });
    }
    let stride = s.inner.stride().with_leaves(&strides)?;
    let plain = Layout::new(s.inner.shape().0.clone(), stride).ok()?;
    let mut same = true;
    let mut got = Vec::with_capacity(s.size() as usize);
    for_each_offset(&plain, |p| got.push(p));
    let mut k = 0usize;
    for_each_offset(&s.inner, |x| {
        if same {
            let want = s.offset.checked_add(x).map(|v| s.swizzle.apply(v));
            same = want.is_some() && want == got[k].checked_add(base);
        }
        k += 1;
    });
    same.then_some((plain, base))
}

/// The widest vector common to `a` and `b`: the largest `n` dividing `size(R)` such that
/// every run of `n` consecutive elements of their common layout `R` (the plain
/// `max_common_layout` of the inner layouts) is a run of consecutive offsets in both `a`
/// and `b`, after their swizzles and offsets. CuTe's `max_common_vector` on swizzled layouts
/// caps the plain answer at `2^M`; this checks every run instead, so it is exact (at least 1).
///
/// Post-condition: for every `k` and `j < n`, `a(R(k*n + j)) == a(R(k*n)) + j`, and the
/// same for `b`.
///
/// Errors: the plain `max_common_layout`'s errors; `TooLarge` past
/// [`ENUMERATION_LIMIT`] elements.
///
/// ```
/// use tessera_swizzle::{algebra, AnyLayout};
/// let p = |s: &str| s.parse::<AnyLayout>().unwrap();
/// // a swizzled smem tile and the row-major register view: 8 halves (one 16-byte chunk)
/// let n = algebra::max_common_vector(&p("Sw<3,3,3> o (8,64):(64,1)"), &p("(8,64):(64,1)")).unwrap();
/// assert_eq!(n, 8);
/// assert_eq!(algebra::max_common_vector(&p("(8,64):(64,1)"), &p("(8,64):(64,1)")).unwrap(), 512);
/// ```
pub fn max_common_vector<A: Clone + Into<AnyLayout>, B: Clone + Into<AnyLayout>>(
    a: &A,
    b: &B,
) -> Result<i64> {
    const OP: &str = "max_common_vector";
    let (a, b): (AnyLayout, AnyLayout) = (a.clone().into(), b.clone().into());
    let r = tl::max_common_layout(a.inner(), b.inner())?;
    let n = r.size();
    if n as u64 > ENUMERATION_LIMIT {
        return Err(SwizzleError::TooLarge {
            op: OP,
            operands: format!("{a}, {b}"),
            needed: n as u128,
            limit: ENUMERATION_LIMIT,
        });
    }
    let mut offs = Vec::with_capacity(n as usize);
    for i in 0..n {
        let x = r.call(i)?;
        offs.push((a.call(x)?, b.call(x)?));
    }
    let runs_of = |w: usize| {
        offs.chunks(w).all(|c| {
            c.iter().enumerate().all(|(j, &(x, y))| {
                x.checked_sub(c[0].0) == Some(j as i64) && y.checked_sub(c[0].1) == Some(j as i64)
            })
        })
    };
    Ok((1..=n)
        .rev()
        .find(|&w| n % w == 0 && runs_of(w as usize))
        .unwrap_or(1))
}
