//! [`Value`]: what an expression evaluates to, and how it prints.

use std::fmt;

use tessera_layout::{IntTuple, Layout, Tiler};
use tessera_swizzle::{F2Map, Swizzle, SwizzledLayout};

use super::Error;

/// The value of an expression.
///
/// `Display` is what `tessera eval` prints: CuTe notation without spaces for layouts, int
/// tuples and tilers, `[a,b,c]` for lists, `true`/`false`, `WAVEFRONTS/IDEAL` for a ratio.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Value {
    /// An integer (`IntTuple::Int`) or an int tuple.
    IntTuple(IntTuple),
    /// A layout `SHAPE:STRIDE`.
    Layout(Layout),
    /// A by-mode tiler `<...>`.
    Tiler(Tiler),
    /// A swizzle `Sw<B,M,S>`.
    Swizzle(Swizzle),
    /// A swizzled layout `Sw<B,M,S> o OFFSET o LAYOUT`.
    SwizzledLayout(SwizzledLayout),
    /// A list of integers, such as the offsets of a layout.
    List(Vec<i64>),
    /// A truth value.
    Bool(bool),
    /// Two integers printed `a/b` (the wavefronts of an access and the ideal count).
    Ratio(i64, i64),
    /// An affine map over bits, printed as its bit matrix `[ROW;ROW;...]` (rows from the top
    /// offset bit, digits from the top index bit), then `^ BITS` for a non-zero translation.
    F2Map(F2Map),
}

impl Value {
    /// The kind of value, for error messages ("a layout", "an integer", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::IntTuple(IntTuple::Int(_)) => "an integer",
            Value::IntTuple(IntTuple::Tuple(_)) => "an int tuple",
            Value::Layout(_) => "a layout",
            Value::Tiler(_) => "a tiler",
            Value::Swizzle(_) => "a swizzle",
            Value::SwizzledLayout(_) => "a swizzled layout",
            Value::List(_) => "a list",
            Value::Bool(_) => "a boolean",
            Value::Ratio(..) => "a ratio",
            Value::F2Map(_) => "an F2 map",
        }
    }

    /// An integer value.
    pub fn int(v: i64) -> Value {
        Value::IntTuple(IntTuple::Int(v))
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::IntTuple(t) => write!(f, "{t}"),
            Value::Layout(l) => write!(f, "{l}"),
            Value::Tiler(t) => write!(f, "{t}"),
            Value::Swizzle(s) => write!(f, "{s}"),
            Value::SwizzledLayout(l) => write!(f, "{l}"),
            Value::List(xs) => {
                f.write_str("[")?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
            Value::Bool(b) => write!(f, "{b}"),
            Value::Ratio(a, b) => write!(f, "{a}/{b}"),
            Value::F2Map(m) => f.write_str(&m.to_line()),
        }
    }
}

/// `(v0, v1, ...)`: every element must be an int tuple.
pub(crate) fn tuple_from(items: Vec<Value>) -> Result<Value, Error> {
    let modes = items
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::IntTuple(t) => Ok(t),
            other => Err(Error::call(
                "tuple",
                format!(
                    "element {i} is {} `{other}`, expected an integer or int tuple",
                    other.kind()
                ),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::IntTuple(IntTuple::Tuple(modes)))
}

/// `SHAPE:STRIDE` from two int tuples.
pub(crate) fn layout_from(shape: Value, stride: Value) -> Result<Value, Error> {
    match (shape, stride) {
        (Value::IntTuple(s), Value::IntTuple(d)) => Ok(Value::Layout(Layout::new(s, d)?)),
        (s, d) => Err(Error::call(
            "make_layout",
            format!(
                "`SHAPE:STRIDE` needs two int tuples, found {} `{s}` and {} `{d}`",
                s.kind(),
                d.kind()
            ),
        )),
    }
}

/// One tiler item: a layout, a shape (CuTe's shape tiler), a nested tiler, or `_` (`None`).
pub(crate) fn tiler_item(item: Option<Value>) -> Result<Tiler, Error> {
    match item {
        None => Ok(Tiler::Skip),
        Some(Value::Layout(l)) => Ok(Tiler::Layout(l)),
        Some(Value::IntTuple(t)) => Ok(Tiler::from_shape(&t)?),
        Some(Value::Tiler(t)) => Ok(t),
        Some(other) => Err(Error::call(
            "make_tile",
            format!(
                "a tiler item must be a layout, a shape, a tiler or `_`, found {} `{other}`",
                other.kind()
            ),
        )),
    }
}

/// `<t0, t1, ...>`.
pub(crate) fn tiler_from(items: Vec<Option<Value>>) -> Result<Value, Error> {
    Ok(Value::Tiler(Tiler::ByMode(
        items
            .into_iter()
            .map(tiler_item)
            .collect::<Result<_, _>>()?,
    )))
}

/// `Sw<B,M,S>`, with CuTe's checks (`|S| >= B`, ...).
pub(crate) fn make_swizzle_literal(b: i64, m: i64, s: i64) -> Result<Value, Error> {
    Ok(Value::Swizzle(Swizzle::new(b, m, s)?))
}

/// `SWIZZLE o OFFSET o LAYOUT`: the offset is an integer (0 when absent), the layout a layout
/// or a shape (its column-major layout).
pub(crate) fn swizzled_from(
    swizzle: Value,
    offset: Option<Value>,
    layout: Value,
) -> Result<Value, Error> {
    let Value::Swizzle(sw) = swizzle else {
        return Err(Error::call(
            "o",
            format!(
                "the left operand of `o` must be a swizzle, found {} `{swizzle}`",
                swizzle.kind()
            ),
        ));
    };
    let offset = match offset {
        None => 0,
        Some(Value::IntTuple(IntTuple::Int(o))) => o,
        Some(other) => {
            return Err(Error::call(
                "o",
                format!(
                    "the offset in `{sw} o OFFSET o LAYOUT` must be an integer, found {} `{other}`",
                    other.kind()
                ),
            ))
        }
    };
    let inner = match layout {
        Value::Layout(l) => l,
        Value::IntTuple(t) => Layout::col_major(t)?,
        other => {
            return Err(Error::call(
                "o",
                format!(
                    "the right operand of `{sw} o` must be a layout, found {} `{other}`",
                    other.kind()
                ),
            ))
        }
    };
    Ok(Value::SwizzledLayout(SwizzledLayout::new(
        sw, offset, inner,
    )))
}
