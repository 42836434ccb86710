//! The `tessera` command-line tool: a layout calculator, layout pictures, and the GEMM
//! planner, runner and benchmark.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// tessera: CuTe-style layout algebra and tensor-core GEMM kernels derived with it.
#[derive(Parser)]
#[command(name = "tessera", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a layout-algebra expression (`-` reads one expression per line from stdin).
    Eval(cli::eval::EvalArgs),
    /// Print a rank-2 layout as a grid, or write it as an SVG picture.
    Show(cli::show::ShowArgs),
    /// Plan a kernel and print the derived layouts (no GPU needed).
    #[command(subcommand)]
    Plan(cli::gemm::PlanCommand),
    /// Run a kernel on the GPU and verify it against a reference.
    #[command(subcommand)]
    Run(cli::gemm::RunCommand),
    /// Time our kernels against the vendor library, interleaved in one process.
    #[command(subcommand)]
    Bench(cli::gemm::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Eval(args) => cli::eval::run(args),
        Command::Show(args) => cli::show::run(args),
        Command::Plan(cmd) => cli::gemm::plan(cmd),
        Command::Run(cmd) => cli::gemm::run(cmd),
        Command::Bench(cmd) => cli::gemm::bench(cmd),
    }
}
