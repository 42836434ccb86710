//! # tessera-layout
//!
//! Hierarchical `shape:stride` layouts and their algebra, with CuTe's semantics and vocabulary
//! (`size`, `cosize`, `coalesce`, `composition`, `complement`, `logical_divide`, ...), made
//! sound: every operation returns a layout that meets its documented post-condition, or an
//! error naming the operation and the operands.
//!
//! ```
//! use tessera_layout::Layout;
//! let l: Layout = "((2,4),3):((1,8),2)".parse().unwrap();
//! assert_eq!(l.size(), 24);
//! assert_eq!(l.cosize(), 30);
//! ```

#![warn(missing_docs)]

pub mod algebra;
mod error;
mod int_tuple;
mod layout;
mod parse;
mod print;
mod shape;

pub use algebra::{
    blocked_product, canonical, coalesce, coalesce_profile, complement, complement_default,
    composition, composition_tiler, downcast, equal, filter, filter_zeros, flat_divide,
    flat_product, generalized_left_inverse, left_inverse, logical_divide, logical_product,
    make_layout_like, make_ordered_layout, max_common_layout, max_common_vector, nullspace,
    raked_product, right_inverse, tile_to_shape, tiled_divide, tiled_product, upcast,
    zipped_divide, zipped_product, Tiler,
};
pub use error::{LayoutError, Result};
pub use int_tuple::{compatible, congruent, weakly_congruent, IntTuple, Leaves};
pub use layout::{crd2idx, idx2crd, is_coord_of, Layout};
pub use parse::Cursor;
pub use print::{num_digits, print_grid, print_layout};
pub use shape::{Coord, Shape, Stride};
