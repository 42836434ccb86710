//! `complement`: the layout that fills the holes of an injective layout.

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

/// The complement of `L` with respect to `cotarget` (CuTe's `complement(L, cotarget)`):
/// a layout `R` whose offsets, added to those of `L`, tile the codomain up to `cotarget`
/// (an integer, or a shape whose size is the bound).
///
/// Post-condition: `R`'s strides are strictly increasing, `R(j) != L(i)` unless both are 0,
/// `(L, R)` is injective, and `size(R) * size(L) >= cotarget` rounded as CuTe does.
/// Errors: `Inadmissible` if `L` is not injective.
pub fn complement(l: &Layout, cotarget: &IntTuple) -> Result<Layout> {
    Err(LayoutError::inadmissible(
        "complement",
        format!("{l}, {cotarget}"),
        "not implemented yet",
    ))
}

/// `complement(L, cosize(filter(L)))`: the complement within L's own span.
pub fn complement_default(l: &Layout) -> Result<Layout> {
    Err(LayoutError::inadmissible(
        "complement",
        l.to_string(),
        "not implemented yet",
    ))
}
