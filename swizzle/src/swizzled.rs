//! `SwizzledLayout`: CuTe's `ComposedLayout<Swizzle<B,M,S>, Offset, Layout>`,
//! the function `c ↦ Sw(OFFSET + L(c))`.

use std::fmt;
use std::str::FromStr;

use tessera_layout::{Cursor, IntTuple, Layout, Shape};

use crate::error::{Result, SwizzleError};
use crate::extent::{check_enumerable, extent, for_each_offset, swizzled_bounds};
use crate::swizzle::Swizzle;

/// A swizzled layout `Sw<B,M,S> o OFFSET o L`: `R(c) = Sw(OFFSET + L(c))` (CuTe's
/// `ComposedLayout` with a `Swizzle` outside, printed the same way).
///
/// Domain, shape, size and rank are those of the inner layout `L`. The offset is what slicing
/// a swizzled tensor accumulates: it is added *before* the swizzle, so it cannot be moved to
/// a pointer.
///
/// The fields are public and unconstrained; every operation that could overflow returns an
/// error instead.
///
/// [`cosize`](SwizzledLayout::cosize) is the exact extent of the image (max − min + 1),
/// which CuTe C++ and pycute both get wrong (see the examples there);
/// [`cosize_inner`](SwizzledLayout::cosize_inner) is the C++ value.
///
/// ```
/// use tessera_swizzle::SwizzledLayout;
/// let l: SwizzledLayout = "Sw<3,3,3> o 0 o (8,64):(64,1)".parse().unwrap();
/// assert_eq!(l.size(), 512);
/// assert_eq!(l.eval(&"(1,0)".parse().unwrap()).unwrap(), 64 + 8); // row 1 starts at chunk 1
/// assert_eq!(l.to_string(), "Sw<3,3,3> o 0 o (8,64):(64,1)");
/// // the offset part is optional in the text form:
/// assert_eq!("Sw<3,3,3> o (8,64):(64,1)".parse::<SwizzledLayout>().unwrap(), l);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SwizzledLayout {
    /// The swizzle applied last.
    pub swizzle: Swizzle,
    /// The offset added to the inner layout's offset before the swizzle.
    pub offset: i64,
    /// The inner layout: coordinates to unswizzled offsets.
    pub inner: Layout,
}

impl SwizzledLayout {
    /// `swizzle o offset o inner`.
    pub fn new(swizzle: Swizzle, offset: i64, inner: Layout) -> SwizzledLayout {
        SwizzledLayout {
            swizzle,
            offset,
            inner,
        }
    }

    /// The shape (that of the inner layout).
    pub fn shape(&self) -> &Shape {
        self.inner.shape()
    }

    /// Number of coordinates.
    pub fn size(&self) -> i64 {
        self.inner.size()
    }

    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// Nesting depth of the shape.
    pub fn depth(&self) -> usize {
        self.inner.depth()
    }

    fn finish(&self, op: &'static str, x: i64) -> Result<i64> {
        self.offset
            .checked_add(x)
            .map(|v| self.swizzle.apply(v))
            .ok_or_else(|| SwizzleError::overflow(op, format!("{} + {x} in {self}", self.offset)))
    }

    /// `R(i) = Sw(OFFSET + L(i))` for a 1-D index (CuTe's `layout(i)`; an index past the
    /// size extends the last mode, as for plain layouts).
    pub fn call(&self, i: i64) -> Result<i64> {
        let x = self.inner.call(i)?;
        self.finish("eval", x)
    }

    /// `R(c) = Sw(OFFSET + L(c))` for a coordinate weakly congruent with the shape.
    pub fn eval(&self, coord: &IntTuple) -> Result<i64> {
        let x = self.inner.eval(coord)?;
        self.finish("eval", x)
    }

    /// All offsets `[R(0), ..., R(size-1)]`.
    ///
    /// Errors: `Overflow` if `OFFSET + L(i)` leaves the `i64` range; `TooLarge` above
    /// [`ENUMERATION_LIMIT`](crate::ENUMERATION_LIMIT) offsets.
    pub fn offsets(&self) -> Result<Vec<i64>> {
        check_enumerable("offsets", self.size() as u128, || self.to_string())?;
        let mut out = Vec::with_capacity(usize::try_from(self.size()).unwrap_or(0));
        let mut overflow = false;
        for_each_offset(&self.inner, |x| match self.offset.checked_add(x) {
            Some(v) => out.push(self.swizzle.apply(v)),
            None => overflow = true,
        });
        if overflow {
            return Err(SwizzleError::overflow("offsets", self.to_string()));
        }
        Ok(out)
    }

    /// The exact smallest and largest offset of the image `{ R(i) : i < size }`.
    ///
    /// Found without enumerating the domain where possible: the swizzle only changes the
    /// `ZZZ` bits, so only the lowest and highest aligned `ZZZ` blocks of the affine image
    /// `OFFSET + L` matter. Falls back to enumeration under
    /// [`ENUMERATION_LIMIT`](crate::ENUMERATION_LIMIT) points.
    ///
    /// ```
    /// use tessera_swizzle::SwizzledLayout;
    /// let l: SwizzledLayout = "Sw<1,0,1> o 0 o 3:1".parse().unwrap();
    /// assert_eq!(l.offsets().unwrap(), vec![0, 1, 3]);
    /// assert_eq!(l.image_bounds().unwrap(), (0, 3));
    /// ```
    pub fn image_bounds(&self) -> Result<(i64, i64)> {
        swizzled_bounds("cosize", self.swizzle, self.offset, &self.inner)
    }

    /// The exact extent of the image, `max - min + 1`: the size of the smallest range of
    /// offsets that holds every `R(i)`. With a zero offset and the standard atoms this is the
    /// allocation size; in general also use [`image_bounds`](Self::image_bounds) for where
    /// the range starts.
    ///
    /// Post-condition: `0 <= R(i) - min < cosize` for every `i < size`, and both ends are
    /// reached.
    ///
    /// CuTe C++ returns `cosize(L)` (here [`cosize_inner`](Self::cosize_inner)), ignoring the
    /// swizzle and the offset; pycute returns `2^(B+M+|S|)`. Both are wrong in small cases:
    ///
    /// ```
    /// use tessera_swizzle::SwizzledLayout;
    /// let p = |s: &str| s.parse::<SwizzledLayout>().unwrap();
    /// // image {0, 1, 3}: needs 4 offsets, C++ says 3
    /// assert_eq!(p("Sw<1,0,1> o 3:1").cosize().unwrap(), 4);
    /// assert_eq!(p("Sw<1,0,1> o 3:1").cosize_inner(), 3);
    /// // YYY (bits 0-1) below ZZZ (bits 2-3): 3 -> 15, so 6 elements need 16 offsets
    /// assert_eq!(p("Sw<2,0,-2> o 6:1").cosize().unwrap(), 16);
    /// // an offset shifts the image: reaches 68
    /// assert_eq!(p("Sw<3,0,3> o 5 o (8,8):(8,1)").image_bounds().unwrap(), (5, 68));
    /// ```
    pub fn cosize(&self) -> Result<i64> {
        let b = self.image_bounds()?;
        extent("cosize", b, || self.to_string())
    }

    /// CuTe C++'s `cosize` of a composed layout: the cosize of the inner layout, ignoring the
    /// swizzle and the offset. For porting CUTLASS code; prefer [`cosize`](Self::cosize).
    pub fn cosize_inner(&self) -> i64 {
        self.inner.cosize()
    }

    /// Mode `i` as a swizzled layout with the same swizzle and offset (CuTe's `layout<i>`).
    pub fn mode(&self, i: usize) -> Result<SwizzledLayout> {
        Ok(self.with_inner(self.inner.mode(i)?))
    }

    /// The mode at a path of indices, with the same swizzle and offset (CuTe's
    /// `layout<I...>` on a composed layout).
    pub fn get(&self, path: &[usize]) -> Result<SwizzledLayout> {
        Ok(self.with_inner(self.inner.get(path)?))
    }

    /// The selected modes (CuTe's `select<I...>`), same swizzle and offset.
    pub fn select(&self, idx: &[usize]) -> Result<SwizzledLayout> {
        Ok(self.with_inner(self.inner.select(idx)?))
    }

    /// Modes `[begin, end)` (CuTe's `take<B,E>`), same swizzle and offset.
    pub fn take(&self, begin: usize, end: usize) -> Result<SwizzledLayout> {
        Ok(self.with_inner(self.inner.take(begin, end)?))
    }

    /// Modes `[begin, end)` grouped into one (CuTe's `group<B,E>`), same function.
    pub fn group(&self, begin: usize, end: usize) -> Result<SwizzledLayout> {
        Ok(self.with_inner(self.inner.group(begin, end)?))
    }

    /// The same function with a flat shape (CuTe's `flatten`).
    pub fn flatten(&self) -> SwizzledLayout {
        self.with_inner(self.inner.flatten())
    }

    /// `m` appended as a new last mode of the inner layout (CuTe's `append`).
    pub fn append(&self, m: &Layout) -> Result<SwizzledLayout> {
        Ok(self.with_inner(self.inner.append(m)?))
    }

    /// The same swizzle and offset over another inner layout.
    pub fn with_inner(&self, inner: Layout) -> SwizzledLayout {
        SwizzledLayout {
            swizzle: self.swizzle,
            offset: self.offset,
            inner,
        }
    }

    /// Parses `Sw<B,M,S> o OFFSET o LAYOUT` or `Sw<B,M,S> o LAYOUT` at the cursor, for
    /// grammars that embed swizzled-layout literals. `LAYOUT` is `SHAPE:STRIDE`, or a shape
    /// alone (column-major strides), as for [`Layout`]'s text form.
    pub fn parse(c: &mut Cursor<'_>) -> tessera_layout::Result<SwizzledLayout> {
        let swizzle = Swizzle::parse(c)?;
        expect_o(c)?;
        let start = c.pos();
        let first = c.int_tuple()?;
        if c.peek() == Some(':') {
            c.set_pos(start);
            let inner = c.layout()?;
            return Ok(SwizzledLayout::new(swizzle, 0, inner));
        }
        if let (IntTuple::Int(offset), true) = (&first, peek_o(c)) {
            expect_o(c)?;
            let inner = parse_layout(c)?;
            return Ok(SwizzledLayout::new(swizzle, *offset, inner));
        }
        let inner = Layout::col_major(first).map_err(|e| {
            let mut at = c.clone();
            at.set_pos(start);
            at.error(e.to_string())
        })?;
        Ok(SwizzledLayout::new(swizzle, 0, inner))
    }
}

/// Whether the next token is the composition `o` (followed by something that is not a
/// letter, so that names starting with `o` are not taken for it).
fn peek_o(c: &mut Cursor<'_>) -> bool {
    c.skip_ws();
    let mut chars = c.rest().chars();
    chars.next() == Some('o') && !chars.next().is_some_and(|n| n.is_alphabetic() || n == '_')
}

fn expect_o(c: &mut Cursor<'_>) -> tessera_layout::Result<()> {
    if peek_o(c) {
        c.expect('o')
    } else {
        Err(c.error("expected `o`"))
    }
}

/// A layout `SHAPE:STRIDE` or a shape alone (column-major).
pub(crate) fn parse_layout(c: &mut Cursor<'_>) -> tessera_layout::Result<Layout> {
    let start = c.pos();
    let shape = c.int_tuple()?;
    if c.peek() == Some(':') {
        c.set_pos(start);
        c.layout()
    } else {
        Layout::col_major(shape).map_err(|e| {
            let mut at = c.clone();
            at.set_pos(start);
            at.error(e.to_string())
        })
    }
}

impl fmt::Display for SwizzledLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} o {} o {}", self.swizzle, self.offset, self.inner)
    }
}

impl FromStr for SwizzledLayout {
    type Err = SwizzleError;
    fn from_str(s: &str) -> Result<Self> {
        let mut c = Cursor::new(s);
        let l = SwizzledLayout::parse(&mut c)?;
        if !c.at_end() {
            return Err(c.error("unexpected trailing text").into());
        }
        Ok(l)
    }
}

impl From<Layout> for SwizzledLayout {
    /// A plain layout as `Sw<0,0,0> o 0 o L` (the identity swizzle).
    fn from(l: Layout) -> Self {
        SwizzledLayout::new(Swizzle::identity(), 0, l)
    }
}
