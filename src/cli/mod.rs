//! One module per subcommand of the `tessera` tool.

pub mod conv;
pub mod eval;
pub mod gemm;
pub mod show;
