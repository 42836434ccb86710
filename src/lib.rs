//! placeholder
pub use tessera_layout as layout;
