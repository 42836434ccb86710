//! Running kernels (feature `cuda`): the device runtime and NVRTC, the TMA descriptors, and the
//! launchers of the sm80-class kernel, the Hopper kernel and the tree-epilogue kernels.
// The harnesses (feature `bench`) drive the launchers further than `Gemm` does (instrumented
// builds, bare launches, the runtime's own stream).
#![cfg_attr(not(feature = "bench"), allow(dead_code))]

pub(crate) mod gemm;
pub(crate) mod mem;
pub(crate) mod operand;
pub(crate) mod paddle;
pub(crate) mod runtime;
pub(crate) mod sm80;
pub(crate) mod sm90;
pub(crate) mod stage;
pub(crate) mod tree;
