//! # tessera-swizzle
//!
//! XOR swizzles (CuTe's `Swizzle<B,M,S>`), swizzled layouts (`Sw<B,M,S> o OFFSET o L`, CuTe's
//! `ComposedLayout`) with their algebra, the **exact** extent of a swizzled layout's image,
//! and the analyses a kernel author runs on a shared-memory tile: bank conflicts,
//! bijectivity, the XOR-linear (F2) view, vector widths, and the standard smem atoms.
//!
//! ```
//! use tessera_swizzle::{Swizzle, SwizzledLayout};
//! let sw: Swizzle = "Sw<3,4,3>".parse().unwrap();
//! assert_eq!(sw.apply(sw.apply(12345)), 12345);
//! let l: SwizzledLayout = "Sw<1,0,1> o 3:1".parse().unwrap();
//! assert_eq!(l.cosize().unwrap(), 4); // the image is {0, 1, 3}
//! ```
//!
//! Where things live:
//!
//! - [`Swizzle`]: `Sw<B,M,S>`, its masks, `make_swizzle`, composition, up/downcast.
//! - [`SwizzledLayout`]: `Sw o OFFSET o L`, evaluation, exact `cosize`/`image_bounds`, and
//!   `cosize_inner` (the C++ value); [`AnyLayout`]: plain or swizzled, for tools.
//! - [`algebra`]: the layout algebra on swizzled layouts, forwarded as CuTe does, plus
//!   inverses, up/downcast, slicing with decay, `max_common_vector`.
//! - [`bank_conflicts`], [`vectorization`], [`is_bijective`], [`F2Map`], [`is_linear`],
//!   [`equal`]: analyses.
//! - [`best_swizzle`], [`best_xor_swizzle`], [`wavefront_schedule`]: swizzle synthesis and the
//!   wavefront each accessed element takes.
//! - [`atoms`]: the standard shared-memory atoms; [`picture`]: text grids and SVG.
//!
//! The chapter [`tutorial`] explains swizzles, bank conflicts and the cosize pitfall, with
//! doctested examples.

#![warn(missing_docs)]

pub mod algebra;
mod any;
pub mod atoms;
mod bank;
#[doc(hidden)]
pub mod check;
mod equal;
mod error;
mod extent;
mod f2;
pub mod picture;
mod swizzle;
mod swizzled;
mod synthesis;

pub use any::{is_bijective, is_injective, AnyLayout};
pub use bank::{
    bank_conflicts, vectorization, BankConflicts, Vectorization, BANKS, WAVEFRONT_BYTES,
};
pub use equal::equal;
pub use error::{Result, SwizzleError, ENUMERATION_LIMIT};
pub use f2::{is_linear, F2Map};
pub use swizzle::{make_swizzle, Swizzle, MAX_SWIZZLE_BITS};
pub use swizzled::SwizzledLayout;
pub use synthesis::{
    best_swizzle, best_swizzle_among, best_xor_swizzle, swizzle_family, wavefront_schedule,
    AccessCell, SwizzleChoice, XorSwizzleChoice,
};

/// Chapter 3 of the tessera tutorial: swizzles (from `docs/03_swizzles.md`; every example is
/// a doctest).
#[doc = include_str!("../../docs/03_swizzles.md")]
pub mod tutorial {}
