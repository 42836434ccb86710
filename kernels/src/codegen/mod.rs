//! From plans to CUDA source: the generated preambles of the sm80-class and Hopper kernels in
//! front of the hand-written templates of `kernels/cuda/`.

pub mod sm80;
pub mod sm90;

#[cfg(any(all(test, feature = "cuda"), feature = "bench"))]
pub use sm80::MMA_PEAK_CUH;
pub use sm80::{cuda_source, modes_expr, preamble, COMMON_CUH, GEMM_SM80_CUH};
