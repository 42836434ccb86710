//! Planning: what tessera makes of a [`GemmSpec`] ([`Plan`]), and the planners' derived
//! layouts for kernel authors: the sm80-class plan ([`GemmPlan`]: CTA tile, warp tiling,
//! swizzled shared-memory stages, copy and ldmatrix partitions, accumulator map) and the
//! Hopper plan ([`Sm90Plan`]: TMA boxes, wgmma descriptors, schedule, store buffers). Pure
//! computation on the layout algebra: no GPU is needed.

pub(crate) mod atom_choice;
pub(crate) mod gemm;
pub(crate) mod halo;
pub(crate) mod policy;
pub(crate) mod problem;
pub(crate) mod sm80;
pub(crate) mod sm90;
pub(crate) mod sm90_layouts;
pub(crate) mod window;

pub use atom_choice::{AtomChoice, TileAccess};
pub use gemm::{GemmSpec, Options, Plan};
pub use halo::Halo;
pub use problem::{Activation, BiasMode, Epilogue, GemmProblem};
pub use sm80::{GemmPlan, OperandPlan, PlanOptions, SmemLayout, StageLayout, SwizzleBits};
pub use sm90::{
    store_plan, ClusterShare, ConvGeometry, Im2colTma, Schedule, Sm90Operand, Sm90Options,
    Sm90Plan, Sm90Store,
};
pub use sm90_layouts::{
    tma_box_for, wgmma_acc_layout, wgmma_desc_for, TmaBox, TmaSplit, TmaSwizzle, WgmmaDesc,
};
pub use window::{WindowSlot, WindowTma};

#[cfg(any(test, feature = "cuda"))]
pub(crate) use problem::GemmStrides;
pub(crate) use sm90::{plan_path, GemmPath};
