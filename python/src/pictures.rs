//! Pictures: the swizzle crate's SVG grids and CuTe's text grids, for Jupyter
//! (`_repr_svg_`), files (`to_svg`) and `print_layout`/`print_tv_layout`.

use std::path::Path;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use tessera::layout::IntTuple;
use tessera::swizzle::{picture, AnyLayout};

use crate::convert::{describe, int_tuple};
use crate::errors::{argument_error, guard, OrRaise};
use crate::objects::{PyComposedLayout, PyLayout};

/// What Jupyter shows: the SVG grid, or `None` where there is no picture (not rank 2, too
/// many cells), so that Jupyter falls back to the text form instead of showing an error.
pub(crate) fn repr_svg(py: Python<'_>, l: &AnyLayout) -> Option<String> {
    guard(py, "svg_layout", || picture::svg_layout(l).or_raise(py)).ok()
}

/// The SVG grid of a rank-2 layout, by 16-byte bank group when `elem_bytes` is given.
pub(crate) fn svg(py: Python<'_>, l: &AnyLayout, elem_bytes: Option<i64>) -> PyResult<String> {
    guard(py, "svg_layout", || match elem_bytes {
        None => picture::svg_layout(l).or_raise(py),
        Some(b) => picture::svg_layout_banks(l, b).or_raise(py),
    })
}

pub(crate) fn write(path: &Path, text: &str) -> PyResult<()> {
    std::fs::write(path, text)
        .map_err(|e| PyOSError::new_err(format!("writing {}: {e}", path.display())))
}

/// A plain or swizzled layout argument.
pub(crate) fn any_layout(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<AnyLayout> {
    if let Ok(l) = obj.cast::<PyLayout>() {
        return Ok(AnyLayout::Plain(l.get().0.clone()));
    }
    if let Ok(l) = obj.cast::<PyComposedLayout>() {
        return Ok(AnyLayout::Swizzled(l.get().0.clone()));
    }
    Err(argument_error(
        obj.py(),
        op,
        format!(
            "{what} is {}, expected a Layout or ComposedLayout",
            describe(obj)
        ),
    ))
}

/// CuTe's `print_layout` grid of a rank-2 layout, as text.
#[pyfunction]
pub(crate) fn layout_grid(py: Python<'_>, layout: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(py, "print_layout", || {
        let l = any_layout(layout, "print_layout", "layout")?;
        picture::print_layout(&l).or_raise(py)
    })
}

/// A thread/value layout over its tile: mode 0 of `layout` is the thread, mode 1 the value,
/// and `layout(t, v)` an index into a column-major tile of shape `tile = (M, N)`. Printing
/// it gives CuTe's `print_tv_layout` grid (`T#V#` in each tile cell); in Jupyter it draws
/// itself, one colour per thread.
#[pyclass(name = "TVLayout", module = "tessera.layout", frozen)]
pub(crate) struct PyTvLayout {
    layout: AnyLayout,
    tile: IntTuple,
}

#[pymethods]
impl PyTvLayout {
    #[new]
    fn new(py: Python<'_>, layout: &Bound<'_, PyAny>, tile: &Bound<'_, PyAny>) -> PyResult<Self> {
        guard(py, "print_tv_layout", || {
            let layout = any_layout(layout, "print_tv_layout", "layout")?;
            let tile = if let Ok(s) = tile.cast::<PyString>() {
                s.to_cow()?.parse::<IntTuple>().or_raise(py)?
            } else {
                int_tuple(tile, "print_tv_layout", "tile")?
            };
            // Check now, so that a bad TV layout fails where it is made, not when drawn.
            picture::tv_cells(&layout, &tile).or_raise(py)?;
            Ok(PyTvLayout { layout, tile })
        })
    }

    /// The thread/value layout.
    #[getter]
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match &self.layout {
            AnyLayout::Plain(l) => Bound::new(py, PyLayout(l.clone()))?.into_any(),
            AnyLayout::Swizzled(l) => Bound::new(py, PyComposedLayout(l.clone()))?.into_any(),
        })
    }

    /// The tile shape `(M, N)`.
    #[getter]
    fn tile<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::convert::int_tuple_to_py(py, &self.tile)
    }

    /// For each tile row, for each column: `(thread, value)` of the first index that lands
    /// there, or `None` where no thread does.
    fn cells(&self, py: Python<'_>) -> PyResult<picture::TvCells> {
        guard(py, "print_tv_layout", || {
            picture::tv_cells(&self.layout, &self.tile).or_raise(py)
        })
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, "print_tv_layout", || {
            picture::print_tv_layout(&self.layout, &self.tile).or_raise(py)
        })
    }

    fn __repr__(&self) -> String {
        format!("TVLayout('{}', '{}')", self.layout, self.tile)
    }

    fn _repr_svg_(&self, py: Python<'_>) -> Option<String> {
        self.svg(py).ok()
    }

    /// The SVG picture: each tile cell coloured by its thread, labelled `T#` over `V#`.
    fn svg(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, "print_tv_layout", || {
            picture::svg_tv_layout(&self.layout, &self.tile).or_raise(py)
        })
    }

    /// Writes [`svg`](Self::svg) to `path`.
    fn to_svg(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        write(&path, &self.svg(py)?)
    }
}
