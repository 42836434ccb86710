//! The Hopper kernel through the shared correctness harness ([`crate::bench::verify::check_launch`]):
//! fresh random data, poisoned outputs, the float64 reference and its bounds.

use crate::bench::verify::{check_launch, CheckReport};
use crate::error::Result;
use crate::launch::runtime::Runtime;
use crate::plan::GemmStrides;

use crate::launch::sm90::Sm90Kernel;

/// Runs `kernel` once on fresh random data (seed `seed`) with strides `s` and checks D (and
/// aux) against the float64 reference, as [`crate::bench::verify::check_kernel`] does for the
/// sm80-class kernel.
pub fn check_sm90(
    rt: &Runtime,
    kernel: &Sm90Kernel,
    s: GemmStrides,
    seed: u64,
) -> Result<CheckReport> {
    let plan = kernel.plan();
    check_launch(rt, &plan.problem, plan.kernel_name(), s, seed, |args| {
        kernel.launch(rt.cx(), args)
    })
}
