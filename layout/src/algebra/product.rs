//! `logical_product`, its rearrangements, `blocked_product`, `raked_product`, `tile_to_shape`.

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use super::common::make_ordered_layout;
use super::complement::complement;
use super::composition::composition_parts;
use super::divide::{by_mode, tile_unzip, unpack_zipped};
use super::support::compact_col_major;
use super::support::concat;
use super::tiler::Tiler;

fn product_layout(a: &Layout, b: &Layout) -> Result<Layout> {
    let bound = crate::error::mul("logical_product", a.size(), b.cosize())?;
    let c = complement(a, &IntTuple::Int(bound))?;
    let cb = composition_parts(&c, &[(b.shape(), b.stride())], || Ok(b.clone()))?;
    concat("logical_product", [a.clone(), cb])
}

/// `(A, complement(A, size(A)*cosize(B)) ∘ B)` (CuTe's `logical_product`): mode 0 is `A`,
/// mode 1 places copies of `A` as `B` lays out its elements, in the space `A` leaves free. A
/// by-mode tiler multiplies mode by mode and keeps A's modes beyond the tiler; `_` keeps a
/// mode; an integer `n` is `n:1`.
///
/// Post-condition (layout `B`): `R` has rank 2, mode 0 is `A`, and mode 1 is `C ∘ B` with
/// `C = complement(A, size(A)*cosize(B))` (so `R(i, j) = A(i) + C(B(j))`). If `A` and `B` are
/// injective, `B`'s strides are non-negative and the copies fit in A's holes
/// (`size(C) >= cosize(B)`), `R` is injective. When A's holes are too few (its sorted strides
/// leave gaps that do not tile, e.g. `(2,2):(2,6)` against `3:1`), C's last mode extends, as in
/// CuTe, and copies may overlap A. Mode by mode for a by-mode tiler.
///
/// ```
/// use tessera_layout::{logical_product, Layout, Tiler};
/// let a: Layout = "(2,2):(4,1)".parse().unwrap();
/// let b: Tiler = "6:1".parse().unwrap();
/// assert_eq!(logical_product(&a, &b).unwrap().to_string(), "((2,2),(2,3)):((4,1),(2,8))");
/// ```
#[doc(alias = "repeat")]
pub fn logical_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    logical_product_in("logical_product", a, b)
}

/// [`logical_product`] with its errors labelled `op`, the operation the caller called.
fn logical_product_in(op: &'static str, a: &Layout, b: &Tiler) -> Result<Layout> {
    by_mode(op, a, b, &product_layout).map_err(|e| e.within(op, || format!("{a}, {b}")))
}

/// `((A modes), (product modes, A's modes beyond the tiler))` (CuTe's `zipped_product`): the
/// modes of [`logical_product`] regrouped by [`zipped_divide`](super::zipped_divide)'s rule.
/// A by-mode product multiplies each mode on its own, so copies of different modes may land
/// on the same offsets (below, mode 1's copies step by 2 and 1 and meet A's own offsets);
/// [`blocked_product`] is the product that keeps them apart.
///
/// ```
/// use tessera_layout::{zipped_product, Layout, Tiler};
/// let a: Layout = "(2,2):(1,2)".parse().unwrap();
/// let b: Tiler = "<3,2>".parse().unwrap();
/// assert_eq!(zipped_product(&a, &b).unwrap().to_string(), "((2,2),(3,2)):((1,2),(2,1))");
/// ```
pub fn zipped_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    zipped_product_in("zipped_product", a, b)
}

fn zipped_product_in(op: &'static str, a: &Layout, b: &Tiler) -> Result<Layout> {
    let lp = logical_product_in(op, a, b)?;
    tile_unzip(op, lp, b).map_err(|e| e.within(op, || format!("{a}, {b}")))
}

/// `((A modes), product modes...)` (CuTe's `tiled_product`): [`zipped_product`] with mode 1
/// unpacked.
///
/// ```
/// use tessera_layout::{tiled_product, Layout, Tiler};
/// let a: Layout = "(2,2):(1,2)".parse().unwrap();
/// let b: Tiler = "<3,2>".parse().unwrap();
/// assert_eq!(tiled_product(&a, &b).unwrap().to_string(), "((2,2),3,2):((1,2),2,1)");
/// ```
pub fn tiled_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    Ok(unpack_zipped(
        zipped_product_in("tiled_product", a, b)?,
        false,
    ))
}

/// `(A modes..., product modes...)` (CuTe's `flat_product`): [`zipped_product`] with both
/// modes unpacked.
///
/// ```
/// use tessera_layout::{flat_product, Layout, Tiler};
/// let a: Layout = "(2,2):(1,2)".parse().unwrap();
/// let b: Tiler = "<3,2>".parse().unwrap();
/// assert_eq!(flat_product(&a, &b).unwrap().to_string(), "(2,2,3,2):(1,2,2,1)");
/// ```
pub fn flat_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    Ok(unpack_zipped(
        zipped_product_in("flat_product", a, b)?,
        true,
    ))
}

/// Pads `l` to rank `r` with `1:0` modes (CuTe's `append<R>`); an integral layout stays
/// integral when `r == 1`.
fn pad_to_rank(l: &Layout, r: usize) -> Result<Layout> {
    if l.rank() >= r {
        return Ok(l.clone());
    }
    let mut modes: Vec<Layout> = l.modes().collect();
    while modes.len() < r {
        modes.push(Layout::int(1, 0)?);
    }
    Layout::concat(modes)
}

/// Shared body of the rank-sensitive products: `(mode i of A, mode i of the copies)` zipped
/// in the order `blocked` asks for.
fn zip_product(op: &'static str, a: &Layout, b: &Layout, block_first: bool) -> Result<Layout> {
    let r = a.rank().max(b.rank());
    let pa = pad_to_rank(a, r)?;
    let pb = pad_to_rank(b, r)?;
    let lp = product_layout(&pa, &pb)?;
    let (m0, m1) = (lp.mode(0)?, lp.mode(1)?);
    let pair = |x: Layout, y: Layout| {
        if block_first {
            Layout::concat([x, y])
        } else {
            Layout::concat([y, x])
        }
    };
    let modes = if r == 1 {
        vec![pair(m0, m1)?]
    } else {
        m0.modes()
            .zip(m1.modes())
            .map(|(x, y)| pair(x, y))
            .collect::<Result<Vec<_>>>()?
    };
    Layout::concat(modes).map_err(|e| e.within(op, String::new))
}

/// Copies of the block `A` arranged by `B`, mode by mode: mode `i` is `(A_i, (C∘B)_i)` where
/// `(A, C∘B)` is [`logical_product`]`(A, B)` (CuTe's `blocked_product`). Ranks are padded
/// with `1:0` to the larger one; as in CuTe 3.9 and later, nothing is coalesced. Rank-1
/// operands give a rank-1 result `((A, C∘B))`.
///
/// Post-condition: rank `max(rank A, rank B)`; mode `i` holds mode `i` of the padded `A` and
/// mode `i` of the copies of `logical_product`, so `R` is the same function on the same
/// coordinates, regrouped; injective under the condition [`logical_product`] states.
///
/// ```
/// use tessera_layout::{blocked_product, Layout};
/// let a: Layout = "(2,5):(5,1)".parse().unwrap();
/// let b: Layout = "(3,4):(1,3)".parse().unwrap();
/// assert_eq!(blocked_product(&a, &b).unwrap().to_string(), "((2,3),(5,4)):((5,10),(1,30))");
/// ```
pub fn blocked_product(a: &Layout, b: &Layout) -> Result<Layout> {
    zip_product("blocked_product", a, b, true)
        .map_err(|e| e.within("blocked_product", || format!("{a}, {b}")))
}

/// `A`'s elements interleaved across the copies: mode `i` is `((C∘B)_i, A_i)` (CuTe's
/// `raked_product`); otherwise as [`blocked_product`].
///
/// ```
/// use tessera_layout::{raked_product, Layout};
/// let a: Layout = "(2,5):(5,1)".parse().unwrap();
/// let b: Layout = "(3,4):(1,3)".parse().unwrap();
/// assert_eq!(raked_product(&a, &b).unwrap().to_string(), "((3,2),(4,5)):((10,5),(30,1))");
/// ```
pub fn raked_product(a: &Layout, b: &Layout) -> Result<Layout> {
    zip_product("raked_product", a, b, false)
        .map_err(|e| e.within("raked_product", || format!("{a}, {b}")))
}

/// Product of each top-level mode (CuTe's `product_each`); an integer stays itself.
fn product_each(t: &IntTuple) -> Result<IntTuple> {
    match t {
        IntTuple::Int(_) => Ok(t.clone()),
        IntTuple::Tuple(ms) => Ok(IntTuple::flat(
            ms.iter()
                .map(IntTuple::product)
                .collect::<Result<Vec<_>>>()?,
        )),
    }
}

/// Repeats `block` to cover `target_shape` (CuTe's `tile_to_shape`): the block is padded to
/// the target's rank, and copies of it are laid out by `make_ordered_layout(target / block,
/// order)` (column-major, i.e. along the first mode first, when `order` is `None`) through
/// [`blocked_product`].
///
/// Post-condition: mode `i` of `R` is `(block_i, copies_i)` and the product of the extents of
/// mode `i` is the product of mode `i` of `target_shape`; injective if the block is compact.
///
/// Errors: `Inadmissible` if the block has more modes than the target, or a block mode's size
/// does not divide the target's (CuTe asserts the same).
///
/// ```
/// use tessera_layout::{tile_to_shape, IntTuple, Layout};
/// let block: Layout = "(2,2):(1,2)".parse().unwrap();
/// let target: IntTuple = "(4,6)".parse().unwrap();
/// assert_eq!(
///     tile_to_shape(&block, &target, None).unwrap().to_string(),
///     "((2,2),(2,3)):((1,4),(2,8))"
/// );
/// let order: IntTuple = "(1,0)".parse().unwrap();
/// assert_eq!(
///     tile_to_shape(&block, &target, Some(&order)).unwrap().to_string(),
///     "((2,2),(2,3)):((1,12),(2,4))"
/// );
/// ```
pub fn tile_to_shape(
    block: &Layout,
    target_shape: &IntTuple,
    order: Option<&IntTuple>,
) -> Result<Layout> {
    const OP: &str = "tile_to_shape";
    let ctx = || match order {
        Some(o) => format!("{block}, {target_shape}, {o}"),
        None => format!("{block}, {target_shape}"),
    };
    let run = || -> Result<Layout> {
        crate::shape::Shape(target_shape.clone()).validate(OP)?;
        let r = target_shape.rank();
        if block.rank() > r {
            return Err(LayoutError::inadmissible(
                OP,
                String::new(),
                format!("the block has rank {} above the target's {r}", block.rank()),
            ));
        }
        let padded = pad_to_rank(block, r)?;
        let block_shape = product_each(padded.shape())?;
        let target = product_each(target_shape)?;
        let (bl, tl) = (block_shape.leaves(), target.leaves());
        let mut copies = Vec::with_capacity(bl.len());
        for (i, (&b, &t)) in bl.iter().zip(tl.iter()).enumerate() {
            if t % b != 0 {
                return Err(LayoutError::inadmissible(
                    OP,
                    String::new(),
                    format!("in mode {i}, the block's size {b} does not divide the target's {t}"),
                ));
            }
            copies.push(t / b);
        }
        let product_shape = if target.is_int() {
            IntTuple::Int(copies[0])
        } else {
            IntTuple::flat(copies)
        };
        let arrangement = match order {
            Some(o) => make_ordered_layout(&product_shape, o)?,
            None => Layout::new(product_shape.clone(), compact_col_major(&product_shape, 1)?)?,
        };
        blocked_product(&padded, &arrangement)
    };
    run().map_err(|e| e.within(OP, ctx))
}
