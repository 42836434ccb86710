//! Epilogues as composable trees.
//!
//! An epilogue is what a GEMM does with each accumulator element before it leaves the
//! kernel. Here it is an expression tree ([`Expr`], [`EpilogueTree`]) over leaves (the
//! accumulator, C, alpha, beta, bias vectors, a residual, an aux input, the output
//! coordinates, constants), element-wise functions and their derivatives, a `select` on a
//! coordinate predicate, and sinks (an aux output, bias-gradient reductions, operand sums).
//!
//! - [`parse_epilogue`] reads the text form (`gelu_aux(acc + bias_row)`, `dgelu_bgrad`, or the
//!   v1 comma list `bias,gelu,aux`); [`Expr`]'s `Display` writes it back.
//! - [`fusions`] names the standard fusions with cuBLASLt's semantics.
//! - [`check`] validates a tree against the tensors bound to it, before any code exists.
//! - [`eval`] is the float64 CPU reference of a tree.
//! - [`cuda`] generates the `__device__` epilogue function the GEMM kernels call.
//! - [`coord`] plans coordinate-aware epilogues (one kernel, or one launch per region).
//! - `bench` (feature `cuda`) times tree epilogues against the plain GEMM and cuBLASLt.
//! - `cublaslt` (feature `cuda`) runs the named fusions through cuBLASLt, the GPU reference.
//! - `launch` (feature `cuda`) runs a generated epilogue alone on the GPU, for its checks.
//! - `verify` (feature `cuda`) checks one GEMM with a tree epilogue against [`eval`].
//! - [`paddle`] is the `fused_gemm_epilogue` API with PaddlePaddle's semantics (CPU reference).
//!
//! The [`tutorial`] chapter walks through all of it.

pub mod check;
pub mod coord;
pub mod cuda;
pub mod error;
pub mod eval;
pub mod fusions;
pub mod paddle;
pub mod parse;
pub mod tree;

pub use check::{Binding, KernelCaps, MatSpec, VecSpec};
pub use error::EpilogueError;
pub use eval::{evaluate, evaluate_region, EvalInputs, EvalOutputs};
pub use fusions::{describe, residual_relu, Fusion};
pub use parse::{from_v1, fused_v1_for, parse_epilogue, to_v1};
pub use tree::{
    bits_to_full, build, AuxFormat, BinaryOp, CmpOp, Coord, EpilogueTree, Expr, Kind, Leaf,
    Operand, Sink, UnaryOp, VecAxis,
};

/// Chapter 6 of the tutorial: epilogues as trees.
#[doc = include_str!("../../../docs/06_epilogues.md")]
pub mod tutorial {}
