//! The `tessera` command-line tool: a layout calculator, layout pictures, and the GEMM's and
//! the convolution's planner, runner and benchmark.

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
    Plan(PlanCommand),
    /// Run a kernel on the GPU and verify it against a reference.
    #[command(subcommand)]
    Run(RunCommand),
    /// Time our kernels against the vendor library, interleaved in one process.
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// `tessera plan ...`: the GEMM's subcommands and the convolution's.
#[derive(Subcommand)]
enum PlanCommand {
    #[command(flatten)]
    Gemm(cli::gemm::PlanCommand),
    /// Plan a convolution: the im2col layout of its A operand (evaluated, coalesced, with
    /// the padding's offset and predicate), the path and why, the workspace, and the GEMM's
    /// plan. Needs no GPU.
    Conv {
        /// The convolution.
        #[command(flatten)]
        conv: cli::conv::ConvArgs,
        /// Target: sm_80, sm_86, sm_89 or sm_90a.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Also print the CUDA sources.
        #[arg(long)]
        emit_cuda: bool,
        /// Print only the complete CUDA sources, each exactly as NVRTC compiles it (the
        /// im2col gather, if any, then the GEMM; a comment line between them).
        #[arg(long)]
        emit_cuda_only: bool,
    },
}

/// `tessera run ...`
#[derive(Subcommand)]
enum RunCommand {
    #[command(flatten)]
    Gemm(cli::gemm::RunCommand),
    /// Run a convolution on the GPU on random channels-last tensors and verify it against
    /// the float64 direct loop.
    Conv {
        /// The convolution.
        #[command(flatten)]
        conv: cli::conv::ConvArgs,
        /// Seed of the random data (default: fresh).
        #[arg(long)]
        seed: Option<u64>,
        /// Pass the workspace with the launch instead of the Conv2d owning it.
        #[arg(long)]
        caller_workspace: bool,
    },
}

/// `tessera bench ...`
// Parsed once per process: the size of the GEMM's variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum BenchCommand {
    #[command(flatten)]
    Gemm(cli::gemm::BenchCommand),
    /// Time our convolution against cuDNN (plain, and the fused residual block against
    /// cudnnConvolutionBiasActivationForward), interleaved, on ResNet-50's layers and odd
    /// channel counts.
    Conv(cli::conv::ConvBenchArgs),
}

fn main() -> ExitCode {
    // A reader that stops early (`tessera plan gemm ... --emit-cuda-only | head`) ends the
    // process quietly, as it does other command-line tools, instead of making `println!`
    // panic on the closed pipe (Rust ignores SIGPIPE by default).
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Eval(args) => cli::eval::run(args),
        Command::Show(args) => cli::show::run(args),
        Command::Plan(PlanCommand::Gemm(cmd)) => cli::gemm::plan(cmd),
        Command::Plan(PlanCommand::Conv {
            conv,
            arch,
            emit_cuda,
            emit_cuda_only,
        }) => cli::conv::plan(&conv, &arch, emit_cuda, emit_cuda_only),
        Command::Run(RunCommand::Gemm(cmd)) => cli::gemm::run(cmd),
        Command::Run(RunCommand::Conv {
            conv,
            seed,
            caller_workspace,
        }) => cli::conv::run(&conv, seed, caller_workspace),
        Command::Bench(BenchCommand::Gemm(cmd)) => cli::gemm::bench(cmd),
        Command::Bench(BenchCommand::Conv(args)) => cli::conv::bench(&args),
    }
}
