//! `logical_product`, its rearrangements, `blocked_product`, `raked_product`, `tile_to_shape`.

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use super::tiler::Tiler;

fn todo_err(op: &'static str, a: &Layout, b: impl std::fmt::Display) -> LayoutError {
    LayoutError::inadmissible(op, format!("{a}, {b}"), "not implemented yet")
}

/// `(A, complement(A, size(A)*cosize(B)) ∘ B)` (CuTe's `logical_product`): mode 0 is `A`,
/// mode 1 repeats `A` as laid out by `B`. A by-mode tiler multiplies mode by mode.
pub fn logical_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    Err(todo_err("logical_product", a, b))
}

/// `((A modes), (product modes))` of a by-mode product (CuTe's `zipped_product`).
pub fn zipped_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    Err(todo_err("zipped_product", a, b))
}

/// `((A modes), product modes...)` (CuTe's `tiled_product`).
pub fn tiled_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    Err(todo_err("tiled_product", a, b))
}

/// `(A modes..., product modes...)` (CuTe's `flat_product`).
pub fn flat_product(a: &Layout, b: &Tiler) -> Result<Layout> {
    Err(todo_err("flat_product", a, b))
}

/// Mode `i` is `(A_i, B_i)`: copies of the block `A` arranged by `B` (CuTe's
/// `blocked_product`, not coalesced, ranks padded with `1:0`).
pub fn blocked_product(a: &Layout, b: &Layout) -> Result<Layout> {
    Err(todo_err("blocked_product", a, b))
}

/// Mode `i` is `(B_i, A_i)`: `A`'s elements interleaved across the copies (CuTe's
/// `raked_product`, not coalesced, ranks padded with `1:0`).
pub fn raked_product(a: &Layout, b: &Layout) -> Result<Layout> {
    Err(todo_err("raked_product", a, b))
}

/// Repeats `block` to cover `target_shape`, the copies ordered by `order` (column-major when
/// `None`) (CuTe's `tile_to_shape`). Errors if a target extent is not a multiple of the block's.
pub fn tile_to_shape(
    block: &Layout,
    target_shape: &IntTuple,
    order: Option<&IntTuple>,
) -> Result<Layout> {
    let _ = order;
    Err(todo_err("tile_to_shape", block, target_shape))
}
