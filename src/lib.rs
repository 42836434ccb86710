//! # tessera
//!
//! CuTe-style layout algebra in Rust ([`layout`], [`swizzle`]) and tensor-core GEMM kernels
//! whose tilings are derived with it ([`kernels`]). This facade re-exports the member crates,
//! holds the `tessera` command-line tool's library parts and the tutorial ([`tutorial`]).
#![warn(missing_docs)]

pub use tessera_kernels as kernels;
pub use tessera_layout as layout;
pub use tessera_swizzle as swizzle;

pub mod expr;

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The tutorial. Every example is a doctest, so `cargo test --doc` runs the whole book.
pub mod tutorial {
    #[doc = include_str!("../docs/01_layouts.md")]
    pub mod ch01_layouts {}
    #[doc = include_str!("../docs/02_algebra.md")]
    pub mod ch02_algebra {}
    #[doc = include_str!("../docs/04_tiling_a_gemm.md")]
    pub mod ch04_tiling_a_gemm {}
    #[doc = include_str!("../docs/05_hopper.md")]
    pub mod ch05_hopper {}
    #[doc = include_str!("../docs/06_epilogues.md")]
    pub mod ch06_epilogues {}
    #[doc = include_str!("../docs/07_calling_tessera.md")]
    pub mod ch07_calling_tessera {}
    #[doc = include_str!("../docs/08_convolution.md")]
    pub mod ch08_convolution {}
    pub use tessera_swizzle::tutorial as ch03_swizzles;
}
