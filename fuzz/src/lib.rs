//! The fuzz targets' bodies (`targets.rs`), shared with the stable replay test
//! `tests/fuzz_replay.rs` of the workspace.

pub mod targets;
