//! `tessera show`: layout pictures.

use std::process::ExitCode;

/// Arguments of `tessera show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// The layout, in CuTe notation.
    pub layout: String,
    /// Write an SVG picture to this file.
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
}

/// Runs `tessera show`.
pub fn run(_args: ShowArgs) -> ExitCode {
    eprintln!("error: show: not built yet");
    ExitCode::from(1)
}
