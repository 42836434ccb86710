//! Benchmark and verification harnesses (feature `cuda`): cuBLAS / cuBLASLt comparators,
//! poisoned buffers and float64 checks, used by the `tessera` tool.

pub mod buffers;
pub mod cublaslt;
pub mod epilogues;
pub mod gemm;
pub mod sm90;
pub mod verify;
pub mod verify_sm90;
pub mod verify_tree;
