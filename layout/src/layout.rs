//! `Layout`: a function from coordinates to offsets, given by a shape and a congruent stride.

use std::fmt;

use crate::error::{add, mul, LayoutError, Result};
use crate::int_tuple::{congruent, weakly_congruent, IntTuple};
use crate::shape::{Coord, Shape, Stride};

/// A hierarchical `shape:stride` layout, CuTe's `Layout`.
///
/// Invariants (checked by [`Layout::new`]): shape and stride are congruent, every extent is at
/// least 1, and the size, the image bounds and the span of the image (`max - min + 1`, the
/// [`cosize`](Layout::cosize)) fit in an `i64`. So evaluating any in-range coordinate cannot
/// overflow, and `size`, `cosize`, `coshape` and `image_bounds` are exact and infallible.
/// (`2:-9223372036854775808` is refused: its offsets 0 and `i64::MIN` fit, but its cosize,
/// `2^63 + 1`, does not.)
///
/// ```
/// use tessera_layout::Layout;
/// let l: Layout = "((2,4),3):((1,8),2)".parse().unwrap();
/// assert_eq!(l.size(), 24);
/// assert_eq!(l.call(5).unwrap(), 1 + 2 * 8); // 5 = (1,2) in mode 0, 0 in mode 1
/// assert_eq!(l.to_string(), "((2,4),3):((1,8),2)");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Layout {
    shape: Shape,
    stride: Stride,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.shape, self.stride)
    }
}

impl Layout {
    /// A layout from a shape and a congruent stride.
    ///
    /// Errors: `Mismatch` if they are not congruent, `BadShape` if an extent is below 1,
    /// `Overflow` if the size, the image bounds or the cosize does not fit in an `i64`.
    pub fn new(shape: impl Into<IntTuple>, stride: impl Into<IntTuple>) -> Result<Layout> {
        let shape = Shape(shape.into());
        let stride = Stride(stride.into());
        if !congruent(&shape, &stride) {
            return Err(LayoutError::Mismatch {
                op: "make_layout",
                lhs: shape.to_string(),
                rhs: stride.to_string(),
                relation: "congruent",
            });
        }
        shape.validate("make_layout")?;
        let l = Layout { shape, stride };
        l.size_checked()?;
        l.image_bounds_checked()?;
        Ok(l)
    }

    /// The layout `n:d`.
    pub fn int(n: i64, d: i64) -> Result<Layout> {
        Layout::new(n, d)
    }

    /// Builds a layout whose invariants the caller has established.
    pub(crate) fn from_parts_unchecked(shape: IntTuple, stride: IntTuple) -> Layout {
        debug_assert!(congruent(&shape, &stride));
        Layout {
            shape: Shape(shape),
            stride: Stride(stride),
        }
    }

    /// The column-major (CuTe `LayoutLeft`) layout of `shape`: strides are the exclusive
    /// prefix products of the extents, leftmost fastest.
    ///
    /// ```
    /// # use tessera_layout::{IntTuple, Layout};
    /// let s: IntTuple = "((2,4),3)".parse().unwrap();
    /// assert_eq!(Layout::col_major(s).unwrap().to_string(), "((2,4),3):((1,2),8)");
    /// ```
    pub fn col_major(shape: impl Into<IntTuple>) -> Result<Layout> {
        let shape = Shape(shape.into());
        shape.validate("col_major")?;
        let stride = shape
            .prefix_product(1)
            .map_err(|e| e.within("col_major", || shape.to_string()))?;
        Layout::new(shape.0, stride)
    }

    /// The row-major (CuTe `LayoutRight`) layout of `shape`: the rightmost leaf is fastest.
    ///
    /// ```
    /// # use tessera_layout::{IntTuple, Layout};
    /// let s: IntTuple = "((2,4),3)".parse().unwrap();
    /// assert_eq!(Layout::row_major(s).unwrap().to_string(), "((2,4),3):((12,3),1)");
    /// ```
    pub fn row_major(shape: impl Into<IntTuple>) -> Result<Layout> {
        let shape = Shape(shape.into());
        shape.validate("row_major")?;
        let leaves = shape.leaves();
        let mut strides = vec![0i64; leaves.len()];
        let mut acc = 1i64;
        for i in (0..leaves.len()).rev() {
            strides[i] = acc;
            acc = mul("row_major", acc, leaves[i])
                .map_err(|e| e.within("row_major", || shape.to_string()))?;
        }
        let stride = shape.with_leaves(&strides).expect("same leaf count");
        Layout::new(shape.0, stride)
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The stride.
    pub fn stride(&self) -> &Stride {
        &self.stride
    }

    /// Splits into shape and stride.
    pub fn into_parts(self) -> (Shape, Stride) {
        (self.shape, self.stride)
    }

    fn size_checked(&self) -> Result<i64> {
        self.shape
            .product()
            .map_err(|_| LayoutError::overflow("make_layout", self.to_string()))
    }

    /// Number of coordinates (the domain is `[0, size)`).
    pub fn size(&self) -> i64 {
        self.shape.product().expect("checked by Layout::new")
    }

    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Nesting depth of the shape.
    pub fn depth(&self) -> usize {
        self.shape.depth()
    }

    /// Whether the shape is an integer (not a tuple).
    pub fn is_int(&self) -> bool {
        self.shape.is_int()
    }

    /// The top-level modes as layouts; an integral layout is its own single mode.
    pub fn modes(&self) -> impl ExactSizeIterator<Item = Layout> + '_ {
        self.shape
            .modes()
            .iter()
            .zip(self.stride.modes())
            .map(|(s, d)| Layout::from_parts_unchecked(s.clone(), d.clone()))
    }

    /// Mode `i` (CuTe's `layout<i>` / `get<i>`).
    pub fn mode(&self, i: usize) -> Result<Layout> {
        match (self.shape.mode(i), self.stride.mode(i)) {
            (Some(s), Some(d)) => Ok(Layout::from_parts_unchecked(s.clone(), d.clone())),
            _ => Err(LayoutError::OutOfRange {
                op: "get",
                operand: self.to_string(),
                index: i.to_string(),
                rank: self.rank(),
            }),
        }
    }

    /// The mode at a path of indices: `get(&[i, j])` is mode `j` of mode `i`.
    pub fn get(&self, path: &[usize]) -> Result<Layout> {
        let mut cur = self.clone();
        for &i in path {
            cur = cur.mode(i).map_err(|e| match e {
                LayoutError::OutOfRange { .. } => LayoutError::OutOfRange {
                    op: "get",
                    operand: self.to_string(),
                    index: format!("{path:?}"),
                    rank: cur.rank(),
                },
                e => e,
            })?;
        }
        Ok(cur)
    }

    /// Concatenation of layouts as the modes of a new layout (CuTe's `make_layout(L0, L1, ...)`):
    /// `R(c0, c1, ...) = L0(c0) + L1(c1) + ...`.
    ///
    /// ```
    /// # use tessera_layout::Layout;
    /// let a: Layout = "3:1".parse().unwrap();
    /// let b: Layout = "(2,2):(3,6)".parse().unwrap();
    /// assert_eq!(Layout::concat([a, b]).unwrap().to_string(), "(3,(2,2)):(1,(3,6))");
    /// ```
    pub fn concat(layouts: impl IntoIterator<Item = Layout>) -> Result<Layout> {
        let (shapes, strides): (Vec<_>, Vec<_>) =
            layouts.into_iter().map(|l| (l.shape.0, l.stride.0)).unzip();
        Layout::new(IntTuple::Tuple(shapes), IntTuple::Tuple(strides))
            .map_err(|e| e.within("make_layout", String::new))
    }

    fn from_modes(modes: Vec<Layout>, op: &'static str) -> Result<Layout> {
        Layout::concat(modes).map_err(|e| e.within(op, String::new))
    }

    fn check_range(&self, op: &'static str, begin: usize, end: usize) -> Result<()> {
        if begin <= end && end <= self.rank() {
            Ok(())
        } else {
            Err(LayoutError::OutOfRange {
                op,
                operand: self.to_string(),
                index: format!("[{begin},{end})"),
                rank: self.rank(),
            })
        }
    }

    /// The layout of the selected modes, in the order given (CuTe's `select<I...>`).
    pub fn select(&self, idx: &[usize]) -> Result<Layout> {
        let modes = idx
            .iter()
            .map(|&i| {
                self.mode(i).map_err(|_| LayoutError::OutOfRange {
                    op: "select",
                    operand: self.to_string(),
                    index: i.to_string(),
                    rank: self.rank(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Layout::from_modes(modes, "select")
    }

    /// Modes `[begin, end)` as a tuple layout (CuTe's `take<B,E>`).
    pub fn take(&self, begin: usize, end: usize) -> Result<Layout> {
        self.check_range("take", begin, end)?;
        Layout::from_modes(self.modes().skip(begin).take(end - begin).collect(), "take")
    }

    /// Groups modes `[begin, end)` into one mode (CuTe's `group<B,E>`).
    ///
    /// ```
    /// # use tessera_layout::Layout;
    /// let l: Layout = "(2,3,4):(1,2,6)".parse().unwrap();
    /// assert_eq!(l.group(1, 3).unwrap().to_string(), "(2,(3,4)):(1,(2,6))");
    /// ```
    pub fn group(&self, begin: usize, end: usize) -> Result<Layout> {
        self.check_range("group", begin, end)?;
        let modes: Vec<Layout> = self.modes().collect();
        let mut out: Vec<Layout> = modes[..begin].to_vec();
        out.push(Layout::from_modes(modes[begin..end].to_vec(), "group")?);
        out.extend_from_slice(&modes[end..]);
        Layout::from_modes(out, "group")
    }

    /// The same function with a flat shape and stride.
    pub fn flatten(&self) -> Layout {
        Layout::from_parts_unchecked(self.shape.flatten(), self.stride.flatten())
    }

    /// Appends `m` as a new last mode (an integral layout becomes rank 2).
    pub fn append(&self, m: &Layout) -> Result<Layout> {
        let mut modes: Vec<Layout> = self.modes().collect();
        modes.push(m.clone());
        Layout::from_modes(modes, "append")
    }

    /// Prepends `m` as a new first mode.
    pub fn prepend(&self, m: &Layout) -> Result<Layout> {
        let mut modes = vec![m.clone()];
        modes.extend(self.modes());
        Layout::from_modes(modes, "prepend")
    }

    /// Replaces mode `i` by `m` (an integral layout's mode 0 is the whole layout).
    pub fn replace(&self, i: usize, m: &Layout) -> Result<Layout> {
        self.check_range("replace", i, i + 1)?;
        if self.is_int() {
            return Ok(m.clone());
        }
        let mut modes: Vec<Layout> = self.modes().collect();
        modes[i] = m.clone();
        Layout::from_modes(modes, "replace")
    }

    /// The offset of the 1-D coordinate `i`, CuTe's `L(i)`: the index is split colexicographically
    /// over the modes, and the last mode absorbs whatever is left, so an index past `size()`
    /// extends the last mode. Division truncates toward zero, as in C++.
    pub fn call(&self, i: i64) -> Result<i64> {
        crd2idx_int(i, &self.shape, &self.stride)
            .map_err(|e| e.within("eval", || format!("{self} at {i}")))
    }

    /// The offset of a coordinate: an integer, or a tuple weakly congruent with the shape
    /// whose integer leaves each index a whole sub-mode (CuTe's `crd2idx`).
    pub fn eval(&self, coord: &IntTuple) -> Result<i64> {
        crd2idx(coord, &self.shape, &self.stride)
            .map_err(|e| e.within("eval", || format!("{self} at {coord}")))
    }

    /// All offsets `[L(0), ..., L(size-1)]`.
    pub fn offsets(&self) -> Vec<i64> {
        (0..self.size())
            .map(|i| self.call(i).expect("in-range offsets cannot overflow"))
            .collect()
    }

    fn image_bounds_checked(&self) -> Result<(i64, i64)> {
        let (mut lo, mut hi) = (0i128, 0i128);
        for (s, d) in self.shape.leaves().iter().zip(self.stride.leaves().iter()) {
            let ext = i128::from(s - 1) * i128::from(*d);
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
            // |ext| < 2^126 and at most a few thousand leaves: the sums cannot wrap i128
            // before this test stops them.
            if lo < i128::from(i64::MIN) || hi > i128::from(i64::MAX) {
                return Err(LayoutError::overflow(
                    "make_layout",
                    format!("{self} (its image bounds leave the i64 range)"),
                ));
            }
        }
        if hi - lo + 1 > i128::from(i64::MAX) {
            return Err(LayoutError::overflow(
                "make_layout",
                format!(
                    "{self} (its cosize, max - min + 1 = {} - ({}) + 1, is above i64::MAX)",
                    hi, lo
                ),
            ));
        }
        Ok((lo as i64, hi as i64))
    }

    /// The smallest and largest offset the layout reaches on its domain `[0, size)`.
    ///
    /// Every mode contributes an interval `[0, (s-1)d]` (or `[(s-1)d, 0]` for a negative
    /// stride) independently, so `min = Σ_{d<0} (s-1)d` and `max = Σ_{d>0} (s-1)d`.
    ///
    /// ```
    /// # use tessera_layout::Layout;
    /// let l: Layout = "(4,8):(1,-4)".parse().unwrap();
    /// assert_eq!(l.image_bounds(), (-28, 3));
    /// ```
    pub fn image_bounds(&self) -> (i64, i64) {
        self.image_bounds_checked().expect("checked by Layout::new")
    }

    /// The extent of the image: `max - min + 1 = 1 + Σ (s-1)|d|` (CuTe's `cosize`).
    ///
    /// Post-condition: `0 <= L(i) - min < cosize` for every `i < size`. This is the span of
    /// the image, also with negative strides, where the textbook `L(size-1) + 1` is wrong.
    ///
    /// ```
    /// # use tessera_layout::Layout;
    /// assert_eq!("4:-1".parse::<Layout>().unwrap().cosize(), 4);
    /// assert_eq!("(4,8):(1,-4)".parse::<Layout>().unwrap().cosize(), 32);
    /// assert_eq!("8:0".parse::<Layout>().unwrap().cosize(), 1);
    /// ```
    pub fn cosize(&self) -> i64 {
        let (lo, hi) = self.image_bounds();
        hi - lo + 1
    }

    /// Per-leaf extents of the image, `(s-1)|d| + 1`, in the shape's structure (CuTe's `coshape`).
    pub fn coshape(&self) -> IntTuple {
        let strides = self.stride.leaves();
        let mut k = 0;
        self.shape.map_leaves(&mut |s| {
            let d = strides[k];
            k += 1;
            // An extent-1 leaf may have any stride (i64::MIN too), and contributes 1.
            if s == 1 {
                1
            } else {
                (s - 1) * d.abs() + 1
            }
        })
    }
}

/// `crd2idx` with an integer coordinate: colexicographic split, last mode absorbs the rest.
pub(crate) fn crd2idx_int(c: i64, shape: &IntTuple, stride: &IntTuple) -> Result<i64> {
    match (shape, stride) {
        (IntTuple::Int(_), IntTuple::Int(d)) => mul("crd2idx", c, *d),
        (IntTuple::Tuple(ss), IntTuple::Tuple(ds)) => {
            let mut rest = c;
            let mut acc = 0i64;
            let n = ss.len();
            for (k, (s, d)) in ss.iter().zip(ds).enumerate() {
                let here = if k + 1 == n {
                    rest
                } else {
                    let sz = s.product()?;
                    let m = rest % sz;
                    rest /= sz;
                    m
                };
                acc = add("crd2idx", acc, crd2idx_int(here, s, d)?)?;
            }
            Ok(acc)
        }
        _ => Err(LayoutError::Mismatch {
            op: "crd2idx",
            lhs: shape.to_string(),
            rhs: stride.to_string(),
            relation: "congruent",
        }),
    }
}

/// CuTe's `crd2idx(coord, shape, stride)`: the offset of a coordinate that is weakly congruent
/// with the shape.
pub fn crd2idx(coord: &IntTuple, shape: &IntTuple, stride: &IntTuple) -> Result<i64> {
    match (coord, shape, stride) {
        (IntTuple::Int(c), _, _) => crd2idx_int(*c, shape, stride),
        (IntTuple::Tuple(cs), IntTuple::Tuple(ss), IntTuple::Tuple(ds))
            if cs.len() == ss.len() && ss.len() == ds.len() =>
        {
            cs.iter()
                .zip(ss)
                .zip(ds)
                .try_fold(0i64, |acc, ((c, s), d)| {
                    add("crd2idx", acc, crd2idx(c, s, d)?)
                })
        }
        _ => Err(LayoutError::Mismatch {
            op: "crd2idx",
            lhs: coord.to_string(),
            rhs: shape.to_string(),
            relation: "weakly congruent",
        }),
    }
}

/// CuTe's `idx2crd(idx, shape)`: the natural coordinate of `idx` in `shape`, in the shape's
/// structure. Each leaf is `(idx / prefix) % extent` (C++ truncating division); an integral
/// shape returns `idx` unchanged. A tuple `idx` is split mode by mode.
///
/// ```
/// # use tessera_layout::{idx2crd, IntTuple};
/// let s: IntTuple = "((2,4),3)".parse().unwrap();
/// assert_eq!(idx2crd(&IntTuple::Int(13), &s).unwrap().to_string(), "((1,2),1)");
/// ```
pub fn idx2crd(idx: &IntTuple, shape: &IntTuple) -> Result<IntTuple> {
    match (idx, shape) {
        (IntTuple::Int(i), IntTuple::Int(_)) => Ok(IntTuple::Int(*i)),
        (IntTuple::Int(i), IntTuple::Tuple(_)) => {
            Shape(shape.clone()).validate("idx2crd")?;
            let strides = shape
                .prefix_product(1)
                .map_err(|e| e.within("idx2crd", || shape.to_string()))?;
            let ds = strides.leaves();
            let mut k = 0;
            Ok(shape.map_leaves(&mut |s| {
                let d = ds[k];
                k += 1;
                (i / d) % s
            }))
        }
        (IntTuple::Tuple(is), IntTuple::Tuple(ss)) if is.len() == ss.len() => Ok(IntTuple::Tuple(
            is.iter()
                .zip(ss)
                .map(|(i, s)| idx2crd(i, s))
                .collect::<Result<_>>()?,
        )),
        _ => Err(LayoutError::Mismatch {
            op: "idx2crd",
            lhs: idx.to_string(),
            rhs: shape.to_string(),
            relation: "weakly congruent",
        }),
    }
}

/// Whether `coord` is weakly congruent with `shape` (a valid, possibly coarse, coordinate form).
pub fn is_coord_of(coord: &Coord, shape: &Shape) -> bool {
    weakly_congruent(coord, shape)
}
