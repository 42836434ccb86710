//! # tessera-kernels
//!
//! Tensor-core GEMM kernels with fused epilogues, for NVIDIA GPUs: an sm80-class path
//! (cp.async + `mma.sync`) and a Hopper path (TMA + `wgmma`, warp-specialized, persistent),
//! whose tiles, shared-memory layouts, swizzles and fragment maps are derived with the tessera
//! layout algebra and compiled at run time with NVRTC.
//!
//! A [`GemmSpec`] says what to compute: `D = epilogue(A B)` with its extents, types, storage
//! orders and an epilogue tree (see [`epilogue`]); [`GemmSpec::plan`] shows what tessera makes
//! of it on a target, with no GPU. With the `cuda` feature, a [`Gemm`] is that plan compiled
//! on a [`Context`] (the caller's cudarc context; compiled kernels are cached in memory and,
//! with a cache folder, on disk), and [`Gemm::launch`] queues it on the caller's stream over
//! the caller's device memory, every operand checked first.
//!
//! ```
//! use tessera_kernels::{Arch, GemmSpec};
//! let spec = GemmSpec::linear(4096, 4096, 4096).epilogue("gelu(aux(acc + bias_col))").unwrap();
//! let plan = spec.plan(Arch::Sm90a, 132).unwrap();
//! assert_eq!(plan.path(), "sm90");
//! assert!(plan.smem_bytes() <= Arch::Sm90a.smem_per_block_optin());
//! ```
//!
//! A [`ConvSpec`] is a 2-D convolution on channels-last tensors, run by a [`Conv2d`] as a GEMM
//! whose A operand is the im2col layout of the input (see `docs/08_convolution.md`).
//!
//! The [`plan`] module holds the planners' derived layouts for kernel authors; [`epilogue`]
//! the epilogue language. The `bench` feature adds the harnesses the `tessera` tool uses
//! (vendor comparisons, float64 checks), which are not part of the library.

#![warn(missing_docs)]

// The harnesses shared with the tests name the crate by its public path.
extern crate self as tessera_kernels;

mod arch;
pub(crate) mod codegen;
pub(crate) mod conv;
pub mod epilogue;
mod error;
pub mod plan;
#[cfg(test)]
pub(crate) mod reference;
#[cfg(any(test, feature = "bench"))]
pub(crate) mod rng;
pub mod sweep;

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "cuda")]
pub(crate) mod launch;

#[cfg(test)]
mod tests;

#[cfg(feature = "cuda")]
pub use launch::gemm::{Context, Gemm};
#[cfg(feature = "cuda")]
pub use launch::operand::{Element, Operands, Tensor, TensorMut};
#[cfg(feature = "cuda")]
pub use launch::paddle::{FusedGemmEpilogue, FusedGemmEpilogueGrad, PaddleActivation};
#[cfg(feature = "cuda")]
pub use launch::runtime::CompileStats;

pub use arch::{Arch, H100_SMS};
#[cfg(feature = "cuda")]
pub use conv::Conv2d;
pub use conv::ConvSpec;
pub use error::{CompileFailure, KernelError, Result};
pub use plan::problem::{DType, Major};
pub use plan::{GemmSpec, Options, Plan};

// The crate's own code and tests also reach these at the root.
#[allow(unused_imports)]
pub(crate) use plan::problem::{Activation, BiasMode, Epilogue, GemmProblem};
#[allow(unused_imports)]
pub(crate) use plan::{GemmPlan, PlanOptions};
