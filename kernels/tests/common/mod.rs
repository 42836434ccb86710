//! The one GPU test harness: the skip-or-fail rule, the float64 check of a GEMM ([`check`])
//! that `tessera run gemm` runs too, and of a convolution ([`conv`], on the references of
//! [`conv_ref`]) that `tessera run conv` runs.
#![allow(dead_code)]

pub mod check;
pub mod conv;
pub mod conv_ref;

pub use check::*;

use tessera_kernels::Context;

/// The device under test, or `None` with a printed reason. With `TESSERA_REQUIRE_GPU=1` a
/// missing device fails the test instead: a GPU host whose driver broke must not pass by
/// skipping. The tests of a binary share one `Context`, so a kernel two tests build is
/// compiled once.
pub fn gpu(test: &str) -> Option<Context> {
    static CTX: std::sync::OnceLock<Result<Context, String>> = std::sync::OnceLock::new();
    match CTX.get_or_init(|| Context::new(0).map_err(|e| e.to_string())) {
        Ok(ctx) => Some(ctx.clone()),
        Err(e) => {
            if std::env::var("TESSERA_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("{test}: TESSERA_REQUIRE_GPU=1 but no GPU: {e}");
            }
            eprintln!("{test}: skipped, no GPU: {e}");
            None
        }
    }
}

/// The device under test if it is a Hopper (sm_90a) one, else `None` with a printed reason
/// (a failure with `TESSERA_REQUIRE_GPU=1` only when there is no GPU at all).
pub fn hopper(test: &str) -> Option<Context> {
    let ctx = gpu(test)?;
    if ctx.arch() != tessera_kernels::Arch::Sm90a {
        eprintln!("{test}: skipped, {} is not sm_90a", ctx.device_name());
        return None;
    }
    Some(ctx)
}

/// Asserts every comparison of `r` passed, printing them all first.
pub fn assert_passed(what: &str, r: &Report) {
    eprintln!("{what}:\n{r}");
    assert!(r.passed(), "{what}: FAILED");
}
