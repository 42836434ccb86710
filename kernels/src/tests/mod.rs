//! The crate's tests of its internals: the planners' layouts against brute force, the
//! generated code (snapshots, NVRTC compiles of every variant), the epilogue language's text
//! form, evaluator, checker and coordinate analysis, and the float64 references. The GPU
//! tests, which use the public API only, are in `kernels/tests/`.

mod atom_choice;
mod conv_layout;
mod conv_reference;
mod epilogue_codegen;
mod epilogue_eval;
mod epilogue_nvrtc;
mod epilogue_paddle;
mod epilogue_text;
mod nvrtc_compile;
mod plan_props;
mod policy_rules;
mod reference_layout;
mod row_store;
mod sm90_layouts;
mod sm90_nvrtc;
