//! Compiles one plan with NVRTC, prints ptxas statistics and writes the CUBIN:
//! `cargo run --example compile_one --features cuda -- M N K [BMxBNxBK] [stages] [out.cubin]`.
use tessera_kernels::{
    codegen::cuda_source, launch::runtime::compile, Arch, GemmPlan, GemmProblem, PlanOptions,
};
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: i64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let tile = a.get(3).map(|t| {
        let v: Vec<i64> = t.split('x').map(|x| x.parse().expect("tile")).collect();
        (v[0], v[1], v[2])
    });
    let stages = a.get(4).and_then(|s| s.parse().ok());
    let opts = PlanOptions { tile, stages };
    let plan = GemmPlan::with_options(
        &GemmProblem::new(num(0, 4096), num(1, 4096), num(2, 4096)),
        Arch::Sm90a,
        opts,
    )
    .expect("plan");
    let t = std::time::Instant::now();
    let c = compile(&cuda_source(&plan), &plan.kernel_name(), Arch::Sm90a, true)
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{} {:?}\n{}",
        plan.kernel_name(),
        t.elapsed(),
        c.log
            .lines()
            .filter(|l| l.contains("ptxas"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::fs::write(
        a.get(5).map(String::as_str).unwrap_or("/tmp/k.cubin"),
        &c.cubin,
    )
    .expect("write");
}
