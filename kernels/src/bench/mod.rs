//! Benchmark and verification harnesses (feature `cuda`): cuBLAS / cuBLASLt / cuDNN
//! comparators, poisoned buffers and float64 checks, used by the `tessera` tool.

pub mod buffers;
#[path = "../../tests/common/check.rs"]
#[allow(missing_docs)]
pub mod check;
pub mod conv;
#[path = "../../tests/common/conv.rs"]
#[allow(missing_docs)]
pub mod conv_check;
#[path = "../../tests/common/conv_ref.rs"]
#[allow(missing_docs)]
pub mod conv_ref;
pub mod cublaslt;
pub mod cudnn;
pub mod dev;
pub mod epilogues;
pub mod gemm;
pub mod overhead;
pub mod sweep;
pub mod timeline;

/// The harness's device context: cudarc's event tracking off (the harness orders its work on
/// one stream itself), so timed loops time the kernels and not the bookkeeping.
pub fn harness_context(ordinal: usize) -> crate::error::Result<crate::launch::gemm::Context> {
    Ok(crate::launch::gemm::Context::from_runtime(
        crate::launch::runtime::Runtime::new(ordinal)?,
    ))
}
