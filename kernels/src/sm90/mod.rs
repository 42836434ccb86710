//! The Hopper (sm_90a) GEMM path: TMA loads into an mbarrier ring, `wgmma` from shared
//! memory, a producer warpgroup and consumer warpgroups with register reallocation, and a
//! persistent grid with a grouped tile order.
//!
//! One shared-memory layout per operand drives everything: [`layouts::tma_box_for`] reads the
//! TMA box and swizzle mode off it (and checks element by element that TMA writes exactly that
//! layout), [`layouts::wgmma_desc_for`] the wgmma descriptor's byte offsets and swizzle bits,
//! and [`layouts::wgmma_acc_layout`] is the accumulator fragment the epilogue walks. The
//! planning part needs no GPU; launching needs the `cuda` feature.
//!
//! ```
//! use tessera_kernels::sm90::Sm90Plan;
//! use tessera_kernels::GemmProblem;
//! let plan = Sm90Plan::new(&GemmProblem::new(8192, 8192, 8192)).unwrap();
//! assert_eq!(plan.a.desc.sbo_bytes, 1024);
//! assert_eq!(plan.stages, 4);
//! ```

pub mod codegen;
pub mod layouts;
pub mod plan;

#[cfg(feature = "cuda")]
pub mod bench;
#[cfg(feature = "cuda")]
pub mod launch;
#[cfg(feature = "cuda")]
pub mod verify;

pub use plan::{
    choose_path, plan_path, ClusterShare, GemmPath, PathOptions, Schedule, Sm90Operand,
    Sm90Options, Sm90Plan, Sm90Store,
};

/// Chapter 5 of the tutorial: the Hopper GEMM, from one shared-memory layout.
#[doc = include_str!("../../../docs/05_hopper.md")]
pub mod tutorial_05 {}
