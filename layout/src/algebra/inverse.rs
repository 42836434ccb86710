//! `right_inverse` and `left_inverse`.

use crate::error::{LayoutError, Result};
use crate::layout::Layout;

/// The largest right inverse CuTe finds (CuTe's `right_inverse`): a compact layout `R` with
/// `L(R(i)) == i` for every `i < size(R)`.
pub fn right_inverse(l: &Layout) -> Result<Layout> {
    Err(LayoutError::inadmissible(
        "right_inverse",
        l.to_string(),
        "not implemented yet",
    ))
}

/// CuTe's canonical left inverse (sort by stride): `R(L(i)) == i` for every `i < size(L)`,
/// for an injective `L`.
pub fn left_inverse(l: &Layout) -> Result<Layout> {
    Err(LayoutError::inadmissible(
        "left_inverse",
        l.to_string(),
        "not implemented yet",
    ))
}
