//! Tools of kernel development (the `sm90_compile_file` and `sm90_tree_source` examples):
//! NVRTC on a hand-edited or emitted source, and the Hopper tree kernel's source as its
//! launcher compiles it, for CUBIN snapshots and disassembly.

use crate::arch::{Arch, H100_SMS};
use crate::epilogue::check::Binding;
use crate::epilogue::cuda::{sm90_tree_source, tree_sm90_plan};
use crate::epilogue::Fusion;
use crate::error::{KernelError, Result};
use crate::plan::problem::{DType, GemmProblem};
use crate::plan::{Schedule, Sm90Options};

/// `source` compiled with NVRTC for `arch` with ptxas's statistics: `(CUBIN, NVRTC's log)`.
pub fn compile_source(source: &str, kernel: &str, arch: Arch) -> Result<(Vec<u8>, String)> {
    let c = crate::launch::runtime::compile(source, kernel, arch, true)?;
    debug_assert!(!c.options.is_empty());
    Ok((c.cubin, c.log))
}

/// The complete source of the Hopper GEMM with `fusion`'s tree epilogue, as the launcher
/// compiles it for a bf16 binding of `(m, n, k)` on an H100 SXM: `staged` forced staged
/// inputs (`None`: the launcher's choice), C read when `beta` is not 0, `schedule` forced or
/// the planner's.
pub fn tree_source(
    fusion: Fusion,
    staged: Option<i64>,
    beta: f32,
    schedule: Option<Schedule>,
    (m, n, k): (i64, i64, i64),
) -> Result<String> {
    let t = fusion.tree();
    let p = GemmProblem::new(m, n, k);
    let mut b = Binding::for_tree(&t, m, n, k, 1, DType::Bf16);
    b.beta = beta;
    let opts = Sm90Options {
        epilogue_inputs: staged,
        schedule,
        ..Sm90Options::default()
    };
    let plan = tree_sm90_plan(&p, &t, &b, opts)?;
    sm90_tree_source(&plan.compiled_for(H100_SMS), &t, Some(&b))
        .map_err(|e| KernelError::invalid("tree_source", e.to_string()))
}
