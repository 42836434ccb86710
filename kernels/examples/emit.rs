//! Prints the CUDA source of one plan (for inspection): `cargo run --example emit`.
use tessera_kernels::{codegen::cuda_source, Arch, GemmPlan, GemmProblem};
fn main() {
    let plan = GemmPlan::new(&GemmProblem::new(4096, 4096, 4096), Arch::Sm90a).expect("plan");
    print!("{}", cuda_source(&plan));
}
