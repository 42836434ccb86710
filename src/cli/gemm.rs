//! `tessera plan|run|bench gemm`: the GEMM planner, runner and benchmark.

use std::process::ExitCode;

/// `tessera plan ...`
#[derive(clap::Subcommand)]
pub enum PlanCommand {
    /// Plan a GEMM.
    Gemm,
}

/// `tessera run ...`
#[derive(clap::Subcommand)]
pub enum RunCommand {
    /// Run and verify a GEMM on the GPU.
    Gemm,
}

/// `tessera bench ...`
#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Benchmark GEMMs against cuBLAS / cuBLASLt.
    Gemm,
}

/// Runs `tessera plan`.
pub fn plan(_cmd: PlanCommand) -> ExitCode {
    eprintln!("error: plan: not built yet");
    ExitCode::from(1)
}

/// Runs `tessera run`.
pub fn run(_cmd: RunCommand) -> ExitCode {
    eprintln!("error: run: not built yet");
    ExitCode::from(1)
}

/// Runs `tessera bench`.
pub fn bench(_cmd: BenchCommand) -> ExitCode {
    eprintln!("error: bench: not built yet");
    ExitCode::from(1)
}
