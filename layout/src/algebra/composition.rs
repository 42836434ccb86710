//! `composition`: `R = A ∘ B`, the layout with `R(i) = A(B(i))`.

use crate::error::{LayoutError, Result};
use crate::layout::Layout;

use super::tiler::Tiler;

/// The functional composition `R = A ∘ B` (CuTe's `composition(A, B)`).
///
/// `A` is evaluated in its extended domain: an index past `size(A)` runs on in A's last mode,
/// as in [`Layout::call`]; that is how `1:1 ∘ 4:1 = 4:1`.
///
/// Post-condition: `shape(B)` is compatible with `shape(R)` and `R(i) == A(B(i))` for every
/// `i < size(B)`. CuTe's divisibility rule accepts pairs where no layout of its form meets this
/// (`(4,6,8):(2,3,5) ∘ 6:3`); those are `Inadmissible` here.
pub fn composition(a: &Layout, b: &Layout) -> Result<Layout> {
    Err(LayoutError::inadmissible(
        "composition",
        format!("{a} o {b}"),
        "not implemented yet",
    ))
}

/// Composition with a tiler (CuTe's `composition(A, Tiler)`): a layout tiler composes with
/// `A` as a whole; `_` leaves `A` as is; a by-mode tiler `<T0,...,Tk>` composes mode `i` of `A`
/// with `Ti` and drops A's modes beyond the tiler.
///
/// Post-condition: mode by mode, that of [`composition`].
pub fn composition_tiler(a: &Layout, t: &Tiler) -> Result<Layout> {
    Err(LayoutError::inadmissible(
        "composition",
        format!("{a} o {t}"),
        "not implemented yet",
    ))
}
