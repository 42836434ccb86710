//! Running kernels (feature `cuda`): the device runtime and NVRTC, the TMA descriptors, and the
//! launchers of the sm80-class kernel, the Hopper kernel and the tree-epilogue kernels.

pub mod gemm;
pub mod mem;
pub mod operand;
pub mod runtime;
pub mod sm80;
pub mod sm90;
pub mod tree;
