//! Post-condition checkers, one per operation, shared by the test suites.
//!
//! Each returns `Ok(())` when the result meets the operation's documented post-condition, or
//! `Err(message)` saying at which index or mode it fails.
