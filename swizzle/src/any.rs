//! `AnyLayout`: a plain or a swizzled layout, for tools that accept both.

use std::fmt;
use std::str::FromStr;

use tessera_layout::{Cursor, IntTuple, Layout, Shape};

use crate::error::{Result, SwizzleError};
use crate::extent::{check_enumerable, layout_is_injective};
use crate::swizzle::Swizzle;
use crate::swizzled::{parse_layout, SwizzledLayout};

/// A plain layout `S:D` or a swizzled layout `Sw<B,M,S> o OFFSET o L`.
///
/// The text form is either one; [`AnyLayout::parse`] decides by the leading `Sw`.
///
/// ```
/// use tessera_swizzle::AnyLayout;
/// let a: AnyLayout = "(8,8):(8,1)".parse().unwrap();
/// let b: AnyLayout = "Sw<3,0,3> o (8,8):(8,1)".parse().unwrap();
/// assert_eq!(a.eval(&"(1,0)".parse().unwrap()).unwrap(), 8);
/// assert_eq!(b.eval(&"(1,0)".parse().unwrap()).unwrap(), 9);
/// assert_eq!(b.to_string(), "Sw<3,0,3> o 0 o (8,8):(8,1)");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum AnyLayout {
    /// A plain `shape:stride` layout.
    Plain(Layout),
    /// A swizzled layout.
    Swizzled(SwizzledLayout),
}

impl From<Layout> for AnyLayout {
    fn from(l: Layout) -> Self {
        AnyLayout::Plain(l)
    }
}

impl From<SwizzledLayout> for AnyLayout {
    fn from(l: SwizzledLayout) -> Self {
        AnyLayout::Swizzled(l)
    }
}

impl AnyLayout {
    /// The layout from coordinates to unswizzled offsets (the layout itself when plain).
    pub fn inner(&self) -> &Layout {
        match self {
            AnyLayout::Plain(l) => l,
            AnyLayout::Swizzled(s) => &s.inner,
        }
    }

    /// The swizzle (the identity `Sw<0,0,0>` when plain).
    pub fn swizzle(&self) -> Swizzle {
        match self {
            AnyLayout::Plain(_) => Swizzle::identity(),
            AnyLayout::Swizzled(s) => s.swizzle,
        }
    }

    /// The offset added before the swizzle (0 when plain).
    pub fn offset(&self) -> i64 {
        match self {
            AnyLayout::Plain(_) => 0,
            AnyLayout::Swizzled(s) => s.offset,
        }
    }

    /// As a swizzled layout (a plain layout gets `Sw<0,0,0> o 0`).
    pub fn to_swizzled(&self) -> SwizzledLayout {
        match self {
            AnyLayout::Plain(l) => SwizzledLayout::from(l.clone()),
            AnyLayout::Swizzled(s) => s.clone(),
        }
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        self.inner().shape()
    }

    /// Number of coordinates.
    pub fn size(&self) -> i64 {
        self.inner().size()
    }

    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.inner().rank()
    }

    /// Mode `i`, of the same kind.
    pub fn mode(&self, i: usize) -> Result<AnyLayout> {
        Ok(match self {
            AnyLayout::Plain(l) => AnyLayout::Plain(l.mode(i)?),
            AnyLayout::Swizzled(s) => AnyLayout::Swizzled(s.mode(i)?),
        })
    }

    /// The offset of a 1-D index.
    pub fn call(&self, i: i64) -> Result<i64> {
        match self {
            AnyLayout::Plain(l) => Ok(l.call(i)?),
            AnyLayout::Swizzled(s) => s.call(i),
        }
    }

    /// The offset of a coordinate.
    pub fn eval(&self, coord: &IntTuple) -> Result<i64> {
        match self {
            AnyLayout::Plain(l) => Ok(l.eval(coord)?),
            AnyLayout::Swizzled(s) => s.eval(coord),
        }
    }

    /// All offsets in index order.
    ///
    /// Errors: `TooLarge` above [`ENUMERATION_LIMIT`](crate::ENUMERATION_LIMIT) offsets;
    /// `Overflow` as [`SwizzledLayout::offsets`].
    pub fn offsets(&self) -> Result<Vec<i64>> {
        match self {
            AnyLayout::Plain(l) => {
                check_enumerable("offsets", l.size() as u128, || l.to_string())?;
                Ok(l.offsets())
            }
            AnyLayout::Swizzled(s) => s.offsets(),
        }
    }

    /// The exact smallest and largest offset of the image.
    pub fn image_bounds(&self) -> Result<(i64, i64)> {
        match self {
            AnyLayout::Plain(l) => Ok(l.image_bounds()),
            AnyLayout::Swizzled(s) => s.image_bounds(),
        }
    }

    /// The exact extent of the image, `max - min + 1` (see [`SwizzledLayout::cosize`]).
    pub fn cosize(&self) -> Result<i64> {
        match self {
            AnyLayout::Plain(l) => Ok(l.cosize()),
            AnyLayout::Swizzled(s) => s.cosize(),
        }
    }

    /// CuTe C++'s `cosize`: that of the inner layout.
    pub fn cosize_inner(&self) -> i64 {
        self.inner().cosize()
    }

    /// Whether distinct indices map to distinct offsets. The swizzle and the offset are
    /// bijections of the integers, so this is the injectivity of the inner layout.
    pub fn is_injective(&self) -> Result<bool> {
        layout_is_injective("is_injective", self.inner())
    }

    /// Whether the layout is a bijection from `[0, size)` onto the contiguous range
    /// `[min, min + size)` of its image bounds: injective and `cosize == size`. For a smem
    /// tile: "is this a permutation of the tile's storage?".
    ///
    /// ```
    /// use tessera_swizzle::AnyLayout;
    /// let p = |s: &str| s.parse::<AnyLayout>().unwrap();
    /// assert!(p("Sw<3,3,3> o (8,64):(64,1)").is_bijective().unwrap());
    /// assert!(!p("Sw<1,0,1> o 3:1").is_bijective().unwrap()); // image {0,1,3}
    /// assert!(!p("(2,2):(1,1)").is_bijective().unwrap());
    /// ```
    pub fn is_bijective(&self) -> Result<bool> {
        const OP: &str = "is_bijective";
        // Either test failing decides the answer, so a bound hit by one does not matter when
        // the other fails: injectivity first (a stride-0 mode or a size above the inner
        // cosize decides it at once), then the extent of the image.
        let injective = layout_is_injective(OP, self.inner());
        if matches!(injective, Ok(false)) {
            return Ok(false);
        }
        let extent = self.cosize().map_err(|e| e.relabel(OP));
        match (injective, extent) {
            (_, Ok(c)) if c != self.size() => Ok(false),
            (Ok(inj), Ok(_)) => Ok(inj),
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }

    /// Parses a plain or a swizzled layout at the cursor.
    pub fn parse(c: &mut Cursor<'_>) -> tessera_layout::Result<AnyLayout> {
        if Swizzle::at_literal(c) {
            SwizzledLayout::parse(c).map(AnyLayout::Swizzled)
        } else {
            parse_layout(c).map(AnyLayout::Plain)
        }
    }
}

impl fmt::Display for AnyLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyLayout::Plain(l) => l.fmt(f),
            AnyLayout::Swizzled(s) => s.fmt(f),
        }
    }
}

impl FromStr for AnyLayout {
    type Err = SwizzleError;
    fn from_str(s: &str) -> Result<Self> {
        let mut c = Cursor::new(s);
        let l = AnyLayout::parse(&mut c)?;
        if !c.at_end() {
            return Err(c.error("unexpected trailing text").into());
        }
        Ok(l)
    }
}

/// Whether `l` (plain or swizzled) is a bijection from `[0, size)` onto the contiguous range
/// of its image bounds: see [`AnyLayout::is_bijective`].
///
/// ```
/// use tessera_swizzle::{is_bijective, SwizzledLayout};
/// let l: SwizzledLayout = "Sw<2,0,-2> o 16:1".parse().unwrap();
/// assert!(is_bijective(&l).unwrap());
/// ```
pub fn is_bijective<L: Clone + Into<AnyLayout>>(l: &L) -> Result<bool> {
    l.clone().into().is_bijective()
}

/// Whether `l` (plain or swizzled) maps distinct indices to distinct offsets: see
/// [`AnyLayout::is_injective`].
pub fn is_injective<L: Clone + Into<AnyLayout>>(l: &L) -> Result<bool> {
    l.clone().into().is_injective()
}
