//! From plans to CUDA source: the generated preambles of the sm80-class and Hopper kernels in
//! front of the hand-written templates of `kernels/cuda/`.

pub mod sm80;
pub mod sm90;

#[cfg(any(all(test, feature = "cuda"), feature = "bench"))]
pub use sm80::MMA_PEAK_CUH;
pub use sm80::{cuda_source, modes_expr, preamble, COMMON_CUH, GEMM_SM80_CUH};

/// The entry point of [`stage_rows_source`].
pub(crate) const STAGE_ROWS_KERNEL: &str = "tessera_stage_rows";

/// The staging kernel's source, exactly as NVRTC compiles it: the copy of a K-major operand
/// into rows TMA can address, queued before a GEMM whose K makes rows of a length TMA
/// cannot (one module serves every plan: the sizes are run-time arguments).
pub(crate) fn stage_rows_source() -> String {
    format!(
        "// tessera: staging of a GEMM operand into TMA-addressable rows\n{}",
        include_str!("stage_rows.cuh")
    )
}
