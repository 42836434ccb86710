//! Planning: the problem, the sm80-class and Hopper planners, and the path choice between them.
//! Everything here is pure computation on the layout algebra; no GPU is needed.

pub mod gemm;
pub mod problem;
pub mod sm80;
pub mod sm90;
pub mod sm90_layouts;

pub use gemm::{GemmSpec, Options, Plan};
pub use problem::{Activation, BiasMode, DType, Epilogue, GemmProblem, GemmStrides, Major};
pub use sm80::{
    GemmPlan, OperandPlan, PlanOptions, SmemLayout, StageLayout, SwizzleBits, MAX_STAGES,
};
pub use sm90::{
    choose_path, plan_path, ClusterShare, GemmPath, PathOptions, Schedule, Sm90Operand,
    Sm90Options, Sm90Plan, Sm90Store,
};
