//! `logical_divide` and its rearrangements `zipped_divide`, `tiled_divide`, `flat_divide`.

use crate::error::{LayoutError, Result};
use crate::layout::Layout;

use super::tiler::Tiler;

fn todo_err(op: &'static str, l: &Layout, t: &Tiler) -> LayoutError {
    LayoutError::inadmissible(op, format!("{l}, {t}"), "not implemented yet")
}

/// `L ∘ (T, complement(T, shape(coalesce(L))))` (CuTe's `logical_divide`): mode 0 indexes
/// inside a tile, mode 1 over the tiles. A by-mode tiler divides mode by mode and keeps L's
/// modes beyond the tiler.
pub fn logical_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    Err(todo_err("logical_divide", l, t))
}

/// `((tile modes), (rest modes, L's modes beyond the tiler))` (CuTe's `zipped_divide`).
pub fn zipped_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    Err(todo_err("zipped_divide", l, t))
}

/// `((tile modes), rest modes..., L's modes beyond the tiler...)` (CuTe's `tiled_divide`).
pub fn tiled_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    Err(todo_err("tiled_divide", l, t))
}

/// `(tile modes..., rest modes..., L's modes beyond the tiler...)` (CuTe's `flat_divide`).
pub fn flat_divide(l: &Layout, t: &Tiler) -> Result<Layout> {
    Err(todo_err("flat_divide", l, t))
}
