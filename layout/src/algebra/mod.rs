//! The layout algebra: CuTe's operations on layouts, each with its post-condition.
//!
//! Every function here follows CuTe C++ (CUTLASS 3.9 and later, every integer treated as
//! static) and adds one thing: soundness. Each documents the post-condition it guarantees
//! and either meets it or returns an error naming the operation and its operands. The
//! checkers in [`check`] state those post-conditions as code.

mod coalesce;
mod common;
mod complement;
mod composition;
mod divide;
mod equal;
mod inverse;
mod product;
mod support;
mod tiler;

#[doc(hidden)]
pub mod check;

pub use coalesce::{coalesce, coalesce_profile, filter, filter_zeros};
pub use common::{
    downcast, make_layout_like, make_ordered_layout, max_common_layout, max_common_vector,
    nullspace, upcast,
};
pub use complement::{complement, complement_default};
pub use composition::{composition, composition_tiler};
pub use divide::{flat_divide, logical_divide, tiled_divide, zipped_divide};
pub use equal::{canonical, equal};
pub use inverse::{generalized_left_inverse, left_inverse, right_inverse};
pub use product::{
    blocked_product, flat_product, logical_product, raked_product, tile_to_shape, tiled_product,
    zipped_product,
};
pub use tiler::Tiler;
