//! The native half of the `tessera` Python package (`tessera._tessera`).
//!
//! The Python package (`python/tessera/`) is the public face: `tessera.layout` re-exports the
//! classes defined here and defines one Python function per function of `tessera eval`, each
//! calling [`calls::call`], which hands the converted arguments to the evaluator of the
//! facade crate. Methods of the classes (`L(i)`, `L.size()`, parsing, printing, pictures)
//! call the layout and swizzle crates directly.
//!
//! `tessera.ops` uses [`epilogue`] (what an epilogue reads and writes, and its float64
//! reference, with no GPU) and, with the `cuda` feature, [`gpu`]: the kernels' library
//! (`Gemm`, `FusedGemmEpilogue`, `FusedGemmEpilogueGrad`) on raw device pointers and the
//! caller's stream.
//!
//! No Rust error and no panic crosses into Python as anything but an exception of
//! `tessera._errors` ([`errors`]) or a `ValueError` naming the argument.

use pyo3::prelude::*;

mod calls;
mod conv;
mod convert;
mod epilogue;
mod errors;
#[cfg(feature = "cuda")]
mod gpu;
mod objects;
mod pictures;

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<objects::PyIntTuple>()?;
    m.add_class::<objects::PyLayout>()?;
    m.add_class::<objects::PySwizzle>()?;
    m.add_class::<objects::PyComposedLayout>()?;
    m.add_class::<objects::PyTiler>()?;
    m.add_class::<objects::PyBankConflicts>()?;
    m.add_class::<objects::PyF2Map>()?;
    m.add_class::<pictures::PyTvLayout>()?;
    m.add_function(wrap_pyfunction!(calls::call, m)?)?;
    m.add_function(wrap_pyfunction!(calls::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(calls::functionally_equal, m)?)?;
    m.add_function(wrap_pyfunction!(calls::int_tuple_relation, m)?)?;
    m.add_function(wrap_pyfunction!(pictures::layout_grid, m)?)?;
    m.add_function(wrap_pyfunction!(calls::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(epilogue::describe_epilogue, m)?)?;
    m.add_function(wrap_pyfunction!(epilogue::evaluate_epilogue, m)?)?;
    m.add_function(wrap_pyfunction!(conv::conv_describe, m)?)?;
    m.add_function(wrap_pyfunction!(conv::conv_check_layout, m)?)?;
    #[cfg(feature = "cuda")]
    {
        m.add_class::<gpu::PyGemm>()?;
        m.add_class::<gpu::PyFusedGemmEpilogue>()?;
        m.add_class::<gpu::PyFusedGemmEpilogueGrad>()?;
        m.add_class::<gpu::PyConv2d>()?;
    }
    m.add("CUDA", cfg!(feature = "cuda"))?;
    m.add("FUNCTIONS", calls::functions())?;
    m.add("ENUMERATION_LIMIT", tessera::swizzle::ENUMERATION_LIMIT)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
