//! The value classes of `tessera.layout`: `Layout`, `IntTuple`, `Swizzle`, `ComposedLayout`,
//! `Tiler`, `BankConflicts` and `F2Map`, each a frozen wrapper of the Rust value.
//!
//! `==` is structural equality (same text in CuTe notation); functional equality is the
//! separate `functionally_equal`. `str()` is CuTe's notation, `repr()` the constructor call
//! that reads it back, and pickling goes through that text.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyString, PyTuple};
use tessera::expr::Value;
use tessera::layout::{algebra::Tiler, IntTuple, Layout};
use tessera::swizzle::{AnyLayout, F2Map, Swizzle, SwizzledLayout};

use crate::calls::dispatch;
use crate::convert::{describe, int_tuple, int_tuple_to_py, value_to_py};
use crate::errors::{argument_error, guard, OrRaise};
use crate::pictures;

fn hash_of<T: Hash>(v: &T) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// `==` and `!=` between two objects of one class; other comparisons and other classes are
/// `NotImplemented`, so Python falls back to identity (and `Layout == ComposedLayout` is
/// `False`).
fn compare<T: PartialEq>(py: Python<'_>, a: &T, b: Option<&T>, op: CompareOp) -> Py<PyAny> {
    let answer = match (b, op) {
        (Some(b), CompareOp::Eq) => a == b,
        (Some(b), CompareOp::Ne) => a != b,
        _ => return py.NotImplemented(),
    };
    PyBool::new(py, answer).to_owned().into_any().unbind()
}

/// A coordinate from `L(...)`'s arguments: one argument is an index or a coordinate, several
/// are the coordinate's modes (`L(1, 2)` is `L((1, 2))`, as in pycute).
fn coordinate(args: &Bound<'_, PyTuple>, op: &str) -> PyResult<IntTuple> {
    match args.len() {
        0 => Err(argument_error(
            args.py(),
            op,
            "expects an index or a coordinate",
        )),
        1 => int_tuple(&args.get_item(0)?, op, "the coordinate"),
        _ => int_tuple(args.as_any(), op, "the coordinate"),
    }
}

/// A mode path from `L[...]`: an index or a tuple of indices (`L[0, 1]` is mode 1 of mode 0).
fn mode_path(key: &Bound<'_, PyAny>, op: &str) -> PyResult<Vec<usize>> {
    let bad = || {
        argument_error(
            key.py(),
            op,
            format!(
                "the key is {}, expected a mode index or a tuple of mode indices (non-negative)",
                describe(key)
            ),
        )
    };
    let path = match int_tuple(key, op, "the key").map_err(|_| bad())? {
        IntTuple::Int(i) => vec![i],
        IntTuple::Tuple(ms) => ms
            .iter()
            .map(|m| m.as_int().ok_or_else(bad))
            .collect::<PyResult<_>>()?,
    };
    path.into_iter()
        .map(|i| usize::try_from(i).map_err(|_| bad()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// IntTuple

/// An integer or a tuple of `IntTuple`s, in CuTe notation: `IntTuple((2, (3, 4)))` prints
/// `(2,(3,4))`; `IntTuple("(2,(3,4))")` reads it. `value` is the Python `int`/`tuple`; `==`
/// compares with `IntTuple`s and with plain `int`s and `tuple`s.
#[pyclass(name = "IntTuple", module = "tessera.layout", frozen)]
pub(crate) struct PyIntTuple(pub IntTuple);

#[pymethods]
impl PyIntTuple {
    #[new]
    fn new(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        guard(py, "IntTuple", || {
            if let Ok(s) = value.cast::<PyString>() {
                return Ok(PyIntTuple(s.to_cow()?.parse::<IntTuple>().or_raise(py)?));
            }
            Ok(PyIntTuple(int_tuple(value, "IntTuple", "the value")?))
        })
    }

    /// The Python value: an `int` or a nested `tuple` of `int`s.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        int_tuple_to_py(py, &self.0)
    }

    /// Whether this is an integer (not a tuple).
    fn is_int(&self) -> bool {
        self.0.is_int()
    }

    /// Number of top-level modes (1 for an integer).
    fn rank(&self) -> usize {
        self.0.rank()
    }

    /// Nesting depth (0 for an integer).
    fn depth(&self) -> usize {
        self.0.depth()
    }

    /// The product of the leaves (CuTe's `size`/`product`).
    fn size(&self, py: Python<'_>) -> PyResult<i64> {
        guard(py, "size", || self.0.product().or_raise(py))
    }

    /// The leaves as a flat tuple (an integer stays an integer).
    fn flatten(&self) -> PyIntTuple {
        PyIntTuple(self.0.flatten())
    }

    fn __len__(&self) -> usize {
        self.0.rank()
    }

    fn __getitem__(&self, py: Python<'_>, i: isize) -> PyResult<PyIntTuple> {
        let m = usize::try_from(i)
            .ok()
            .filter(|_| self.0.is_tuple())
            .and_then(|i| self.0.mode(i));
        match m {
            Some(m) => Ok(PyIntTuple(m.clone())),
            None => Err(
                crate::errors::layout_error(&tessera::layout::LayoutError::OutOfRange {
                    op: "get",
                    operand: self.0.to_string(),
                    index: i.to_string(),
                    rank: if self.0.is_tuple() { self.0.rank() } else { 0 },
                })
                .into_pyerr(py),
            ),
        }
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("IntTuple('{}')", self.0)
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let other = match other.cast::<PyIntTuple>() {
            Ok(t) => Some(t.get().0.clone()),
            Err(_) => int_tuple(other, "==", "other").ok(),
        };
        compare(py, &self.0, other.as_ref(), op)
    }

    /// The hash of `value`, so that an `IntTuple` equal to a `tuple` hashes like it.
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        int_tuple_to_py(py, &self.0)?.hash()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((slf.get_type().into_any(), (slf.get().0.to_string(),)))
    }
}

// ---------------------------------------------------------------------------------------------
// Layout

/// A layout `shape:stride`: a function from coordinates (or indices) to offsets.
///
/// `Layout(shape, stride=None)` (column-major strides when `stride` is omitted) or
/// `Layout("((2,4),3):((1,8),2)")`. `L(i)` and `L(coord)` evaluate; `L[i]` is mode `i`;
/// `len(L)` its rank.
#[pyclass(name = "Layout", module = "tessera.layout", frozen)]
pub(crate) struct PyLayout(pub Layout);

#[pymethods]
impl PyLayout {
    #[new]
    #[pyo3(signature = (shape, stride=None))]
    fn new(
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        stride: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        guard(py, "make_layout", || {
            if let (Ok(s), None) = (shape.cast::<PyString>(), stride) {
                return Ok(PyLayout(s.to_cow()?.parse::<Layout>().or_raise(py)?));
            }
            let s = int_tuple(shape, "make_layout", "the shape")?;
            let l = match stride {
                None => Layout::col_major(s),
                Some(d) => Layout::new(s, int_tuple(d, "make_layout", "the stride")?),
            };
            Ok(PyLayout(l.or_raise(py)?))
        })
    }

    /// The shape: an `int` or a nested `tuple`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        int_tuple_to_py(py, self.0.shape().as_tuple())
    }

    /// The stride: an `int` or a nested `tuple`, congruent with the shape.
    #[getter]
    fn stride<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        int_tuple_to_py(py, self.0.stride().as_tuple())
    }

    /// The number of indices, the product of the shape.
    fn size(&self) -> i64 {
        self.0.size()
    }

    /// The extent of the image: `max - min + 1` over the offsets (exact with negative
    /// strides, where pycute's `L(size-1)+1` is not).
    fn cosize(&self) -> i64 {
        self.0.cosize()
    }

    /// Number of top-level modes.
    fn rank(&self) -> usize {
        self.0.rank()
    }

    /// Nesting depth of the shape.
    fn depth(&self) -> usize {
        self.0.depth()
    }

    /// `[L(0), ..., L(size-1)]` (at most 2^20 offsets).
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dispatch(py, "offsets", vec![Value::Layout(self.0.clone())])
    }

    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<i64> {
        guard(py, "eval", || match coordinate(args, "eval")? {
            IntTuple::Int(i) => self.0.call(i).or_raise(py),
            c => self.0.eval(&c).or_raise(py),
        })
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        guard(py, "get", || {
            Ok(PyLayout(self.0.get(&mode_path(key, "get")?).or_raise(py)?))
        })
    }

    fn __len__(&self) -> usize {
        self.0.rank()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let modes = PyList::new(py, self.0.modes().map(PyLayout))?;
        Ok(modes.as_any().try_iter()?.into_any())
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Layout('{}')", self.0)
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let other = other.cast::<PyLayout>().ok().map(|o| o.get().0.clone());
        compare(py, &self.0, other.as_ref(), op)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.0)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((slf.get_type().into_any(), (slf.get().0.to_string(),)))
    }

    /// The SVG picture Jupyter shows: the `print_layout` grid of a rank-2 layout; `None`
    /// (plain text instead) for other ranks or pictures too large to draw.
    fn _repr_svg_(&self, py: Python<'_>) -> Option<String> {
        pictures::repr_svg(py, &AnyLayout::Plain(self.0.clone()))
    }

    /// The SVG picture of a rank-2 layout; with `elem_bytes`, cells coloured by 16-byte bank
    /// group for elements of that many bytes.
    #[pyo3(signature = (elem_bytes=None))]
    fn svg(&self, py: Python<'_>, elem_bytes: Option<i64>) -> PyResult<String> {
        pictures::svg(py, &AnyLayout::Plain(self.0.clone()), elem_bytes)
    }

    /// Writes [`svg`](Self::svg) to `path`.
    #[pyo3(signature = (path, elem_bytes=None))]
    fn to_svg(&self, py: Python<'_>, path: PathBuf, elem_bytes: Option<i64>) -> PyResult<()> {
        pictures::write(&path, &self.svg(py, elem_bytes)?)
    }
}

// ---------------------------------------------------------------------------------------------
// Swizzle

/// CuTe's `Swizzle<B, M, S>`, printed `Sw<B,M,S>`: `x ^ ((x & YYY) >> S)` with `YYY` the `B`
/// bits from `M + max(0, S)`. `Swizzle(3, 4, 3)` or `Swizzle("Sw<3,4,3>")`; `sw(x)` applies it.
#[pyclass(name = "Swizzle", module = "tessera.layout", frozen)]
pub(crate) struct PySwizzle(pub Swizzle);

#[pymethods]
impl PySwizzle {
    #[new]
    #[pyo3(signature = (bits, base=None, shift=None))]
    fn new(
        py: Python<'_>,
        bits: &Bound<'_, PyAny>,
        base: Option<i64>,
        shift: Option<i64>,
    ) -> PyResult<Self> {
        guard(py, "Swizzle", || {
            match (bits.cast::<PyString>(), base, shift) {
                (Ok(s), None, None) => Ok(PySwizzle(s.to_cow()?.parse::<Swizzle>().or_raise(py)?)),
                (Err(_), Some(m), Some(s)) => {
                    let b = match int_tuple(bits, "Swizzle", "bits")? {
                        IntTuple::Int(b) => b,
                        t => {
                            return Err(argument_error(
                                py,
                                "Swizzle",
                                format!("bits is the tuple {t}, expected an integer"),
                            ))
                        }
                    };
                    Ok(PySwizzle(Swizzle::new(b, m, s).or_raise(py)?))
                }
                _ => Err(argument_error(
                    py,
                    "Swizzle",
                    "expects Swizzle(bits, base, shift) or Swizzle(\"Sw<B,M,S>\")",
                )),
            }
        })
    }

    /// `B`: the number of bits swizzled.
    #[getter]
    fn bits(&self) -> i64 {
        self.0.bits()
    }

    /// `M`: the number of low bits left alone (the unit of the swizzle is `2^M`).
    #[getter]
    fn base(&self) -> i64 {
        self.0.base()
    }

    /// `S`: how far the `YYY` bits are shifted onto the `ZZZ` bits.
    #[getter]
    fn shift(&self) -> i64 {
        self.0.shift()
    }

    /// The mask of the bits that are read (`YYY`).
    #[getter]
    fn yyy_mask(&self) -> i64 {
        self.0.yyy_mask()
    }

    /// The mask of the bits that are flipped (`ZZZ`).
    #[getter]
    fn zzz_mask(&self) -> i64 {
        self.0.zzz_mask()
    }

    fn __call__(&self, x: i64) -> i64 {
        self.0.apply(x)
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "Swizzle({}, {}, {})",
            self.0.bits(),
            self.0.base(),
            self.0.shift()
        )
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let other = other.cast::<PySwizzle>().ok().map(|o| o.get().0);
        compare(py, &self.0, other.as_ref(), op)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.0)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((slf.get_type().into_any(), (slf.get().0.to_string(),)))
    }
}

// ---------------------------------------------------------------------------------------------
// ComposedLayout

/// CuTe's `ComposedLayout`: `layout_a o offset o layout_b`, here a swizzle after an offset
/// after a layout, printed `Sw<3,4,3> o 0 o (8,64):(64,1)`. `ComposedLayout(Swizzle(3,4,3),
/// 0, Layout((8,64),(64,1)))` (CuTe's argument order) or `ComposedLayout("Sw<3,4,3> o ...")`.
/// `cosize()` is the exact extent of the image.
#[pyclass(name = "ComposedLayout", module = "tessera.layout", frozen)]
pub(crate) struct PyComposedLayout(pub SwizzledLayout);

#[pymethods]
impl PyComposedLayout {
    #[new]
    #[pyo3(signature = (layout_a, offset=None, layout_b=None))]
    fn new(
        py: Python<'_>,
        layout_a: &Bound<'_, PyAny>,
        offset: Option<i64>,
        layout_b: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        const OP: &str = "ComposedLayout";
        guard(py, OP, || {
            if let (Ok(s), None, None) = (layout_a.cast::<PyString>(), offset, layout_b) {
                return Ok(PyComposedLayout(
                    s.to_cow()?.parse::<SwizzledLayout>().or_raise(py)?,
                ));
            }
            let Ok(sw) = layout_a.cast::<PySwizzle>() else {
                return Err(argument_error(
                    py,
                    OP,
                    format!(
                        "layout_a is {}; tessera composes a Swizzle after a layout",
                        describe(layout_a)
                    ),
                ));
            };
            let Some(b) = layout_b else {
                return Err(argument_error(
                    py,
                    OP,
                    "expects ComposedLayout(swizzle, offset, layout) or ComposedLayout(\"text\")",
                ));
            };
            let inner = match b.cast::<PyLayout>() {
                Ok(l) => l.get().0.clone(),
                Err(_) => Layout::col_major(int_tuple(b, OP, "layout_b")?).or_raise(py)?,
            };
            Ok(PyComposedLayout(SwizzledLayout::new(
                sw.get().0,
                offset.unwrap_or(0),
                inner,
            )))
        })
    }

    /// The outer function: the swizzle.
    #[getter]
    fn layout_a(&self) -> PySwizzle {
        PySwizzle(self.0.swizzle)
    }

    /// The offset added between the inner layout and the swizzle.
    #[getter]
    fn offset(&self) -> i64 {
        self.0.offset
    }

    /// The inner layout.
    #[getter]
    fn layout_b(&self) -> PyLayout {
        PyLayout(self.0.inner.clone())
    }

    /// The shape (that of the inner layout).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        int_tuple_to_py(py, self.0.shape().as_tuple())
    }

    fn size(&self) -> i64 {
        self.0.size()
    }

    /// The exact extent of the image, `max - min + 1` (CuTe C++'s is the inner layout's:
    /// `cosize_inner`).
    fn cosize(&self, py: Python<'_>) -> PyResult<i64> {
        guard(py, "cosize", || self.0.cosize().or_raise(py))
    }

    fn rank(&self) -> usize {
        self.0.rank()
    }

    fn depth(&self) -> usize {
        self.0.depth()
    }

    /// `[R(0), ..., R(size-1)]` (at most 2^20 offsets).
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dispatch(py, "offsets", vec![Value::SwizzledLayout(self.0.clone())])
    }

    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<i64> {
        guard(py, "eval", || match coordinate(args, "eval")? {
            IntTuple::Int(i) => self.0.call(i).or_raise(py),
            c => self.0.eval(&c).or_raise(py),
        })
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyComposedLayout> {
        guard(py, "get", || {
            Ok(PyComposedLayout(
                self.0.get(&mode_path(key, "get")?).or_raise(py)?,
            ))
        })
    }

    fn __len__(&self) -> usize {
        self.0.rank()
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("ComposedLayout('{}')", self.0)
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let other = other
            .cast::<PyComposedLayout>()
            .ok()
            .map(|o| o.get().0.clone());
        compare(py, &self.0, other.as_ref(), op)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.0)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((slf.get_type().into_any(), (slf.get().0.to_string(),)))
    }

    /// The SVG picture Jupyter shows (rank 2), or `None`.
    fn _repr_svg_(&self, py: Python<'_>) -> Option<String> {
        pictures::repr_svg(py, &AnyLayout::Swizzled(self.0.clone()))
    }

    /// The SVG picture of a rank-2 swizzled layout; with `elem_bytes`, cells coloured by
    /// 16-byte bank group.
    #[pyo3(signature = (elem_bytes=None))]
    fn svg(&self, py: Python<'_>, elem_bytes: Option<i64>) -> PyResult<String> {
        pictures::svg(py, &AnyLayout::Swizzled(self.0.clone()), elem_bytes)
    }

    /// Writes [`svg`](Self::svg) to `path`.
    #[pyo3(signature = (path, elem_bytes=None))]
    fn to_svg(&self, py: Python<'_>, path: PathBuf, elem_bytes: Option<i64>) -> PyResult<()> {
        pictures::write(&path, &self.svg(py, elem_bytes)?)
    }
}

// ---------------------------------------------------------------------------------------------
// Tiler

/// A by-mode tiler `<T0,T1,...>`: item `i` (a `Layout`, a nested tiler, or `None` for CuTe's
/// `_`) applies to mode `i`. `Tiler((Layout(3, 3), None, 4))` or `Tiler("<3:3,_,4>")`; an
/// integer item `n` is `n:1` and a tuple of integers the tiler of its modes. A plain tuple
/// holding a `Layout` or `None` is the same tiler wherever an operation takes one.
#[pyclass(name = "Tiler", module = "tessera.layout", frozen)]
pub(crate) struct PyTiler(pub Tiler);

#[pymethods]
impl PyTiler {
    #[new]
    fn new(py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<Self> {
        guard(py, "make_tile", || {
            if let Ok(s) = items.cast::<PyString>() {
                return Ok(PyTiler(s.to_cow()?.parse::<Tiler>().or_raise(py)?));
            }
            if let Ok(l) = items.cast::<PyLayout>() {
                return Ok(PyTiler(Tiler::Layout(l.get().0.clone())));
            }
            let Ok(t) = items.cast::<PyTuple>() else {
                return Err(argument_error(
                    py,
                    "make_tile",
                    format!(
                        "items is {}, expected a tuple of items, a Layout or text",
                        describe(items)
                    ),
                ));
            };
            let items = t
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    if x.is_none() {
                        return Ok(Tiler::Skip);
                    }
                    match crate::convert::value(&x, "make_tile", &format!("item {i}"))? {
                        Value::Layout(l) => Ok(Tiler::Layout(l)),
                        Value::Tiler(t) => Ok(t),
                        Value::IntTuple(s) => Tiler::from_shape(&s).or_raise(py),
                        _ => Err(argument_error(
                            py,
                            "make_tile",
                            format!(
                                "item {i} is {}, expected a Layout, a shape, a tiler or None",
                                describe(&x)
                            ),
                        )),
                    }
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTiler(Tiler::ByMode(items)))
        })
    }

    fn __len__(&self) -> usize {
        match &self.0 {
            Tiler::ByMode(items) => items.len(),
            _ => 1,
        }
    }

    /// Item `i`: a `Layout`, a `Tiler`, or `None` for `_`.
    fn __getitem__<'py>(&self, py: Python<'py>, i: isize) -> PyResult<Bound<'py, PyAny>> {
        let item = match &self.0 {
            Tiler::ByMode(items) => usize::try_from(i).ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match item {
            Some(Tiler::Skip) => Ok(py.None().into_bound(py)),
            Some(Tiler::Layout(l)) => value_to_py(py, Value::Layout(l.clone())),
            Some(t) => value_to_py(py, Value::Tiler(t.clone())),
            None => Err(
                crate::errors::layout_error(&tessera::layout::LayoutError::OutOfRange {
                    op: "get",
                    operand: self.0.to_string(),
                    index: i.to_string(),
                    rank: self.__len__(),
                })
                .into_pyerr(py),
            ),
        }
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Tiler('{}')", self.0)
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let other = other.cast::<PyTiler>().ok().map(|o| o.get().0.clone());
        compare(py, &self.0, other.as_ref(), op)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.0)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((slf.get_type().into_any(), (slf.get().0.to_string(),)))
    }
}

// ---------------------------------------------------------------------------------------------
// BankConflicts

/// What `bank_conflicts(L, elem_bytes)` returns: the shared-memory wavefronts one warp's
/// access takes, and the fewest any layout could take; printed `WAVEFRONTS/IDEAL` (`8/1`).
#[pyclass(name = "BankConflicts", module = "tessera.layout", frozen)]
pub(crate) struct PyBankConflicts {
    /// Wavefronts of the access.
    #[pyo3(get)]
    pub wavefronts: i64,
    /// Wavefronts of a conflict-free access of the same bytes.
    #[pyo3(get)]
    pub ideal: i64,
}

#[pymethods]
impl PyBankConflicts {
    #[new]
    fn new(wavefronts: i64, ideal: i64) -> Self {
        PyBankConflicts { wavefronts, ideal }
    }

    /// Whether the access takes no more wavefronts than the ideal.
    fn is_conflict_free(&self) -> bool {
        self.wavefronts <= self.ideal
    }

    fn __str__(&self) -> String {
        format!("{}/{}", self.wavefronts, self.ideal)
    }

    fn __repr__(&self) -> String {
        format!(
            "BankConflicts(wavefronts={}, ideal={})",
            self.wavefronts, self.ideal
        )
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let me = (self.wavefronts, self.ideal);
        let other = other
            .cast::<PyBankConflicts>()
            .ok()
            .map(|o| (o.get().wavefronts, o.get().ideal));
        compare(py, &me, other.as_ref(), op)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&(self.wavefronts, self.ideal))
    }
}

// ---------------------------------------------------------------------------------------------
// F2Map

/// What `__reduce__` returns: the class and its constructor's arguments.
type Reduced<'py, A> = (Bound<'py, PyAny>, A);

/// An affine map over bits, `i ↦ translation ^ XOR { columns[k] : bit k of i }` on
/// `[0, 2^len(columns))`: what `f2(L)` and `best_xor_swizzle` return, and what `composition`,
/// the inverses and the predicates take. Printed as its bit matrix `[ROW;ROW;...]` (rows from
/// the top offset bit), as `tessera eval` prints it. `F2Map(columns, translation=0)`.
#[pyclass(name = "F2Map", module = "tessera.layout", frozen)]
pub(crate) struct PyF2Map(pub F2Map);

#[pymethods]
impl PyF2Map {
    #[new]
    #[pyo3(signature = (columns, translation=0))]
    fn new(py: Python<'_>, columns: Vec<i64>, translation: i64) -> PyResult<Self> {
        guard(py, "F2Map", || {
            Ok(PyF2Map(F2Map::new(columns, translation).or_raise(py)?))
        })
    }

    /// The image of each index bit.
    #[getter]
    fn columns(&self) -> Vec<i64> {
        self.0.columns().to_vec()
    }

    /// The image of index 0.
    #[getter]
    fn translation(&self) -> i64 {
        self.0.translation()
    }

    /// Index bits.
    #[getter]
    fn in_bits(&self) -> u32 {
        self.0.in_bits()
    }

    /// Offset bits (the highest bit any column or the translation sets, plus one).
    #[getter]
    fn out_bits(&self) -> u32 {
        self.0.out_bits()
    }

    /// The rank of the linear part over GF(2).
    fn rank(&self) -> u32 {
        self.0.rank()
    }

    /// `F(i)`.
    fn __call__(&self, i: i64) -> i64 {
        self.0.apply(i)
    }

    fn __str__(&self) -> String {
        self.0.to_line()
    }

    /// The matrix over several lines, one per offset bit (`o1  .1 | .`), the translation
    /// after the bar.
    fn matrix(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "F2Map({:?}, translation={})",
            self.0.columns(),
            self.0.translation()
        )
    }

    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let other = other.cast::<PyF2Map>().ok().map(|o| o.get().0.clone());
        compare(py, &self.0, other.as_ref(), op)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&(self.0.columns(), self.0.translation()))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py, (Vec<i64>, i64)>> {
        let m = &slf.get().0;
        Ok((
            slf.get_type().into_any(),
            (m.columns().to_vec(), m.translation()),
        ))
    }
}
