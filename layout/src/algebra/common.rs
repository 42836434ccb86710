//! Common vectors, element-size recasts, nullspace and layout constructors from shapes.

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

fn todo_err(op: &'static str, operands: String) -> LayoutError {
    LayoutError::inadmissible(op, operands, "not implemented yet")
}

/// The number of leading elements `a` and `b` map to the same contiguous offsets (CuTe's
/// `max_common_vector`): `size(max_common_layout(a, b))`, at least 1.
pub fn max_common_vector(a: &Layout, b: &Layout) -> Result<i64> {
    Err(todo_err("max_common_vector", format!("{a}, {b}")))
}

/// The largest layout `R` with `a(R(i)) == b(R(i)) == i`-style common contiguity (CuTe's
/// `max_common_layout`): `R(i)` indexes elements that are consecutive in both.
pub fn max_common_layout(a: &Layout, b: &Layout) -> Result<Layout> {
    Err(todo_err("max_common_layout", format!("{a}, {b}")))
}

/// The layout of `n` elements per unit (CuTe's `upcast<N>`): strides divided by `n`, extents
/// of unit-stride modes divided by `n`.
pub fn upcast(l: &Layout, n: i64) -> Result<Layout> {
    Err(todo_err("upcast", format!("{l}, {n}")))
}

/// The layout of each element split into `n` (CuTe's `downcast<N>`).
pub fn downcast(l: &Layout, n: i64) -> Result<Layout> {
    Err(todo_err("downcast", format!("{l}, {n}")))
}

/// The modes of `L` that do not move the offset (CuTe's `nullspace`).
pub fn nullspace(l: &Layout) -> Result<Layout> {
    Err(todo_err("nullspace", l.to_string()))
}

/// The compact layout of `shape` whose leaves are ordered fastest-first by `order` (CuTe's
/// `make_ordered_layout`).
pub fn make_ordered_layout(shape: &IntTuple, order: &IntTuple) -> Result<Layout> {
    Err(todo_err("make_ordered_layout", format!("{shape}, {order}")))
}

/// A compact layout of L's shape whose leaves are ordered as L's strides (CuTe's
/// `make_layout_like`).
pub fn make_layout_like(l: &Layout) -> Result<Layout> {
    Err(todo_err("make_layout_like", l.to_string()))
}
