//! # tessera-kernels
//!
//! Tensor-core GEMM kernels with fused epilogues, planned with the tessera layout algebra.
//!
//! The pipeline: a [`GemmProblem`] and an [`Arch`] go to the planner, which derives a
//! [`GemmPlan`] (CTA tile, warp tiling, swizzled shared-memory layouts, copy and ldmatrix
//! partitions, pipeline depth, accumulator map) with `tessera_layout`; [`codegen`] prints the
//! plan as a small CUDA preamble in front of the hand-written templates in `kernels/cuda/`;
//! with the `cuda` feature, [`runtime`] compiles it with NVRTC for the device's exact target and
//! [`gemm`] launches it. [`reference`](mod@reference) is the float64 CPU reference used to check it.
//!
//! ```
//! use tessera_kernels::{Arch, GemmPlan, GemmProblem};
//! let plan = GemmPlan::new(&GemmProblem::new(4096, 4096, 4096), Arch::Sm90a).unwrap();
//! assert_eq!(plan.cta_tile, (128, 256, 64));
//! assert!(plan.smem_bytes <= Arch::Sm90a.smem_per_block_optin());
//! ```

#![warn(missing_docs)]

// The harnesses shared with the tests name the crate by its public path.
extern crate self as tessera_kernels;

pub mod arch;
pub mod codegen;
pub mod epilogue;
pub mod error;
pub mod plan;
pub mod reference;
pub mod rng;

#[cfg(feature = "cuda")]
pub mod bench;
#[cfg(feature = "cuda")]
pub mod launch;

#[cfg(feature = "cuda")]
pub use launch::gemm::{Context, Gemm};
#[cfg(feature = "cuda")]
pub use launch::operand::{Element, Operands, Tensor, TensorMut};
#[cfg(feature = "cuda")]
pub use launch::runtime::CompileStats;

pub use arch::Arch;
pub use error::{KernelError, Result};
pub use plan::problem::{Activation, BiasMode, DType, Epilogue, GemmProblem, Major};
pub use plan::{GemmPlan, GemmSpec, Options, Plan, PlanOptions};

/// Chapter 4 of the tutorial: tiling a GEMM with the layout algebra.
#[doc = include_str!("../../docs/04_tiling_a_gemm.md")]
pub mod tutorial_04 {}

/// Chapter 5 of the tutorial: the Hopper GEMM, from one shared-memory layout.
#[doc = include_str!("../../docs/05_hopper.md")]
pub mod tutorial_05 {}
