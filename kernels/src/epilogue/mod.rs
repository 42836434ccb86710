//! Epilogues as composable trees.
//!
//! An epilogue is what a GEMM does with each accumulator element before it leaves the
//! kernel. Here it is an expression tree ([`Expr`], [`EpilogueTree`]) over leaves (the
//! accumulator, C, alpha, beta, bias vectors, a residual, an aux input, the output
//! coordinates, constants), element-wise functions and their derivatives, a `select` on a
//! coordinate predicate, and sinks (an aux output, bias-gradient reductions, operand sums).
//!
//! - [`parse_epilogue`] reads the text form (`gelu(aux(acc + bias_col))`, a named fusion such
//!   as `dgelu_bgrad`, or the comma list `bias,gelu,aux`); [`Expr`]'s `Display` writes it
//!   back.
//! - [`Fusion`] names the standard fusions with cuBLASLt's semantics.
//! - [`evaluate`] is the float64 CPU reference of a tree.
//!
//! Before any code exists, a tree is checked against the tensors bound to it and the kernel's
//! limits; the GEMM kernels then run it as generated CUDA, or, where the tree is one of their
//! built-in fusions, through their flag-driven epilogue.

pub(crate) mod check;
pub(crate) mod coord;
pub(crate) mod cuda;
mod error;
pub(crate) mod eval;
pub(crate) mod fusions;
pub(crate) mod paddle;
pub(crate) mod parse;
pub(crate) mod tree;

pub use error::EpilogueError;
pub use eval::{evaluate, evaluate_region, EvalInputs, EvalOutputs};
pub use fusions::Fusion;
pub use parse::parse_epilogue;
pub use tree::{
    bits_to_full, AuxFormat, BinaryOp, CmpOp, Coord, EpilogueTree, Expr, Kind, Leaf, Operand, Sink,
    UnaryOp, VecAxis, MAX_TREE_DEPTH,
};

#[allow(unused_imports)]
pub(crate) use check::{Binding, KernelCaps, MatSpec, VecSpec};
pub(crate) use fusions::describe;
#[cfg(test)]
pub(crate) use fusions::residual_relu;
#[allow(unused_imports)]
pub(crate) use parse::{flag_epilogue_for, from_comma_list, to_comma_list};
pub(crate) use tree::build;
