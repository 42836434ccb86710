//! One module per subcommand of the `tessera` tool.

pub mod conv;
pub mod eval;
pub mod gemm;
pub mod show;

use std::process::ExitCode;

/// A command's error on stderr, exit status 1.
pub(crate) fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

/// A seed from the clock, for a run that was given none (it is printed, to replay the run).
#[cfg(feature = "cuda")]
pub(crate) fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32)
}

/// Device 0's context for `tessera run`, its name, architecture and SMs printed first.
#[cfg(feature = "cuda")]
pub(crate) fn open_device() -> Result<tessera_kernels::Context, ExitCode> {
    let ctx = tessera_kernels::Context::new(0).map_err(fail)?;
    println!(
        "device {} ({}, {} SMs)",
        ctx.device_name(),
        ctx.arch(),
        ctx.sm_count()
    );
    Ok(ctx)
}

/// A run's report on stdout; exit status 2 where a check failed.
#[cfg(feature = "cuda")]
pub(crate) fn report(result: impl std::fmt::Display, passed: bool) -> ExitCode {
    println!("{result}");
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
