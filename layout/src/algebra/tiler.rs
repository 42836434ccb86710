//! `Tiler`: the right-hand operand of by-mode composition, divide and product.

use std::fmt;
use std::str::FromStr;

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;
use crate::parse::Cursor;

/// A tiler: a layout applied to the whole (1-D) domain, `_` (leave the mode alone), or a
/// by-mode tuple `<T0,T1,...>` whose item `i` applies to mode `i` (CuTe's `Tiler`: a `Layout`,
/// `Underscore`, or a tuple of tilers).
///
/// Text form: `<3:3,_,(2,4):(1,8)>`; inside `<...>` an integer `n` means `n:1` and a shape
/// without strides (`(4,8)`) is the by-mode tiler [`Tiler::from_shape`] gives. Outside `<...>`
/// the text is a layout `s:d`, or a shape without strides, again read as [`Tiler::from_shape`].
///
/// ```
/// use tessera_layout::{algebra::Tiler, Layout};
/// let t: Tiler = "<3:3, _, 4>".parse().unwrap();
/// assert_eq!(t.to_string(), "<3:3,_,4:1>");
/// let s: Tiler = "(4,8)".parse().unwrap();
/// assert_eq!(s.to_string(), "<4:1,8:1>");
/// let l: Tiler = "(4,8):(8,1)".parse().unwrap();
/// assert_eq!(l, Tiler::Layout("(4,8):(8,1)".parse::<Layout>().unwrap()));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Tiler {
    /// A layout, applied to the domain as a whole (a 1-D function).
    Layout(Layout),
    /// `_`: leave the mode as it is.
    Skip,
    /// `<T0,T1,...>`: item `i` applies to mode `i`.
    ByMode(Vec<Tiler>),
}

impl From<Layout> for Tiler {
    fn from(l: Layout) -> Self {
        Tiler::Layout(l)
    }
}

impl Tiler {
    /// The tiler CuTe makes of a shape: an integer `n` is the layout `n:1`, a tuple is the
    /// by-mode tiler of its modes (recursively).
    ///
    /// Errors: `BadShape` if an extent is below 1.
    ///
    /// ```
    /// use tessera_layout::{algebra::Tiler, IntTuple};
    /// let s: IntTuple = "(4,(2,3))".parse().unwrap();
    /// assert_eq!(Tiler::from_shape(&s).unwrap().to_string(), "<4:1,<2:1,3:1>>");
    /// ```
    pub fn from_shape(shape: &IntTuple) -> Result<Tiler> {
        match shape {
            IntTuple::Int(n) => Layout::int(*n, 1)
                .map(Tiler::Layout)
                .map_err(|e| e.within("make_tile", || shape.to_string())),
            IntTuple::Tuple(ms) => Ok(Tiler::ByMode(
                ms.iter().map(Tiler::from_shape).collect::<Result<_>>()?,
            )),
        }
    }

    /// Parses one tiler at the cursor (the grammar of the type's documentation).
    pub fn parse(c: &mut Cursor<'_>) -> Result<Tiler> {
        if c.eat('<') {
            let mut items = Vec::new();
            if c.eat('>') {
                return Ok(Tiler::ByMode(items));
            }
            loop {
                items.push(Tiler::parse_item(c)?);
                if c.eat('>') {
                    return Ok(Tiler::ByMode(items));
                }
                c.expect(',')?;
            }
        }
        Tiler::parse_item(c)
    }

    fn parse_item(c: &mut Cursor<'_>) -> Result<Tiler> {
        match c.peek() {
            Some('<') => Tiler::parse(c),
            Some('_') => {
                c.expect('_')?;
                Ok(Tiler::Skip)
            }
            _ => {
                let start = c.pos();
                let shape = c.int_tuple()?;
                if c.eat(':') {
                    c.set_pos(start);
                    c.layout().map(Tiler::Layout)
                } else {
                    Tiler::from_shape(&shape).map_err(|e| {
                        let mut at = c.clone();
                        at.set_pos(start);
                        at.error(e.to_string())
                    })
                }
            }
        }
    }
}

impl fmt::Display for Tiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tiler::Layout(l) => write!(f, "{l}"),
            Tiler::Skip => f.write_str("_"),
            Tiler::ByMode(items) => {
                f.write_str("<")?;
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
        }
    }
}

impl FromStr for Tiler {
    type Err = LayoutError;
    fn from_str(s: &str) -> Result<Self> {
        let mut c = Cursor::new(s);
        let t = Tiler::parse(&mut c)?;
        if !c.at_end() {
            return Err(c.error("unexpected trailing text"));
        }
        Ok(t)
    }
}
