//! `tessera eval`: the layout calculator.

use std::process::ExitCode;

/// Arguments of `tessera eval`.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// The expression, or `-` to read one expression per line from standard input.
    pub expr: String,
}

/// Runs `tessera eval`.
pub fn run(_args: EvalArgs) -> ExitCode {
    eprintln!("error: eval: not built yet");
    ExitCode::from(1)
}
