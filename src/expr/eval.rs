//! Evaluating an [`Expr`]: every call name dispatched to the library function of that name.

use tessera_layout::{self as tl, IntTuple, Layout, Tiler};
use tessera_swizzle::{self as tsw, algebra as sa, AnyLayout, Swizzle, SwizzledLayout};

use super::parse::Expr;
use super::tuple;
use super::value::{self, Value};
use super::Error;

mod analysis;

/// The functions of the language and how each is called (`L` a layout, `T` a tiler, `S` a
/// shape, `i` an integer, `[...]` optional).
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("size", "size(L[, i, ...])"),
    ("rank", "rank(L[, i, ...])"),
    ("depth", "depth(L[, i, ...])"),
    ("shape", "shape(L[, i, ...])"),
    ("stride", "stride(L[, i, ...])"),
    ("cosize", "cosize(L[, i, ...])"),
    ("coshape", "coshape(L[, i, ...])"),
    ("get", "get(L, i[, j, ...])"),
    ("select", "select(L, i, ...)"),
    ("take", "take(L, begin, end)"),
    ("group", "group(L, begin, end)"),
    ("flatten", "flatten(L)"),
    ("append", "append(L, M)"),
    ("prepend", "prepend(L, M)"),
    ("replace", "replace(L, i, M)"),
    (
        "make_layout",
        "make_layout(L0, L1, ...) | make_layout(S) | make_layout(S, D)",
    ),
    ("col_major", "col_major(S)"),
    ("row_major", "row_major(S)"),
    (
        "make_ordered_layout",
        "make_ordered_layout(S, order) | make_ordered_layout(L)",
    ),
    ("make_layout_like", "make_layout_like(L)"),
    ("coalesce", "coalesce(L[, profile])"),
    ("filter", "filter(L)"),
    ("filter_zeros", "filter_zeros(L)"),
    (
        "composition",
        "composition(A, B)  (B a layout, tiler, shape or integer)",
    ),
    ("complement", "complement(L[, cotarget])"),
    ("right_inverse", "right_inverse(L)"),
    ("left_inverse", "left_inverse(L)"),
    (
        "generalized_left_inverse",
        "generalized_left_inverse(L)  (R with L(R(L(i))) == L(i))",
    ),
    ("logical_divide", "logical_divide(L, T)"),
    ("zipped_divide", "zipped_divide(L, T)"),
    ("tiled_divide", "tiled_divide(L, T)"),
    ("flat_divide", "flat_divide(L, T)"),
    ("logical_product", "logical_product(A, T)"),
    ("zipped_product", "zipped_product(A, T)"),
    ("tiled_product", "tiled_product(A, T)"),
    ("flat_product", "flat_product(A, T)"),
    ("blocked_product", "blocked_product(A, B)"),
    ("raked_product", "raked_product(A, B)"),
    ("tile_to_shape", "tile_to_shape(L, S[, order])"),
    ("max_common_vector", "max_common_vector(A, B)"),
    ("max_common_layout", "max_common_layout(A, B)"),
    ("upcast", "upcast(L, n)"),
    ("downcast", "downcast(L, n)"),
    ("nullspace", "nullspace(L)"),
    ("idx2crd", "idx2crd(i, S[, D])"),
    (
        "crd2idx",
        "crd2idx(coord, L) | crd2idx(L, coord) | crd2idx(coord, S[, D])",
    ),
    ("eval", "eval(L, i) | eval(L, coord) | eval(Sw, x)"),
    ("offsets", "offsets(L)"),
    (
        "image_bounds",
        "image_bounds(L)  (the smallest and largest offset)",
    ),
    (
        "cosize_inner",
        "cosize_inner(L)  (CuTe C++'s cosize: that of the inner layout)",
    ),
    ("yyy_mask", "yyy_mask(Sw)"),
    ("zzz_mask", "zzz_mask(Sw)"),
    (
        "make_swizzle",
        "make_swizzle(Ymask, Zmask) | make_swizzle(B, M, S)",
    ),
    ("bank_conflicts", "bank_conflicts(L, elem_bytes)"),
    ("is_bijective", "is_bijective(L)"),
    ("is_injective", "is_injective(L)"),
    ("equal", "equal(A, B)  (the same function on [0, size))"),
    (
        "canonical",
        "canonical(L)  (the unique normal form of L's function)",
    ),
    (
        "f2",
        "f2(L) | f2(Sw, bits)  (the bit matrix over GF(2), rows from the top offset bit)",
    ),
    (
        "is_linear",
        "is_linear(L)  (XOR-linear: L(i ^ j) == L(i) ^ L(j))",
    ),
    (
        "best_swizzle",
        "best_swizzle(access, ..., smem, elem_bytes)  (the fewest bank-conflict wavefronts)",
    ),
    (
        "best_xor_swizzle",
        "best_xor_swizzle(access, ..., smem, elem_bytes)  (the same over all XOR-linear maps)",
    ),
];

/// The most offsets `offsets(L)` lists; larger layouts are an error rather than a line of
/// gigabytes.
const MAX_OFFSETS: i64 = 1 << 20;

impl Expr {
    /// Evaluates the expression.
    pub fn eval(&self) -> Result<Value, Error> {
        match self {
            Expr::Lit(v) => Ok(v.clone()),
            Expr::Tuple(items) => value::tuple_from(eval_all(items)?),
            Expr::Layout(s, d) => value::layout_from(s.eval()?, d.eval()?),
            Expr::Tiler(items) => value::tiler_from(
                items
                    .iter()
                    .map(|i| i.as_ref().map(Expr::eval).transpose())
                    .collect::<Result<_, _>>()?,
            ),
            Expr::Swizzled {
                swizzle,
                offset,
                layout,
            } => value::swizzled_from(
                swizzle.eval()?,
                offset.as_ref().map(|o| o.eval()).transpose()?,
                layout.eval()?,
            ),
            // The arguments' errors are their own; every error raised by the call itself,
            // in whatever helper, is reported as an error of the function called.
            Expr::Call { name, args } => call(
                name,
                Args {
                    op: name,
                    vals: eval_all(args)?,
                },
            )
            .map_err(|e| e.relabel(name)),
        }
    }
}

fn eval_all(items: &[Expr]) -> Result<Vec<Value>, Error> {
    items.iter().map(Expr::eval).collect()
}

/// The evaluated arguments of one call, with typed accessors whose errors name the call.
struct Args {
    op: &'static str,
    vals: Vec<Value>,
}

impl Args {
    fn usage(&self) -> &'static str {
        FUNCTIONS
            .iter()
            .find(|(n, _)| *n == self.op)
            .map_or("", |(_, u)| u)
    }

    fn len(&self) -> usize {
        self.vals.len()
    }

    /// Checks `min <= len <= max`.
    fn count(&self, min: usize, max: usize) -> Result<(), Error> {
        let n = self.len();
        if (min..=max).contains(&n) {
            return Ok(());
        }
        let expected = match (min, max) {
            (a, b) if a == b => format!("{a}"),
            (a, usize::MAX) => format!("at least {a}"),
            (a, b) => format!("{a} to {b}"),
        };
        Err(Error::call(
            self.op,
            format!(
                "expects {expected} argument{}, got {n}; usage: {}",
                if min == 1 && (max == 1 || max == usize::MAX) {
                    ""
                } else {
                    "s"
                },
                self.usage()
            ),
        ))
    }

    fn wrong(&self, i: usize, expected: &str) -> Error {
        let v = &self.vals[i];
        Error::call(
            self.op,
            format!(
                "argument {} is {} `{v}`, expected {expected}; usage: {}",
                i + 1,
                v.kind(),
                self.usage()
            ),
        )
    }

    /// Argument `i` as a layout; an int tuple is its column-major layout.
    fn layout(&self, i: usize) -> Result<Layout, Error> {
        match &self.vals[i] {
            Value::Layout(l) => Ok(l.clone()),
            Value::IntTuple(t) => Ok(Layout::col_major(t.clone())?),
            _ => Err(self.wrong(i, "a layout")),
        }
    }

    fn tuple(&self, i: usize) -> Result<IntTuple, Error> {
        match &self.vals[i] {
            Value::IntTuple(t) => Ok(t.clone()),
            _ => Err(self.wrong(i, "an integer or int tuple")),
        }
    }

    /// Argument `i` as a shape: an int tuple, or the shape of a (swizzled) layout.
    fn shape(&self, i: usize) -> Result<IntTuple, Error> {
        match &self.vals[i] {
            Value::IntTuple(t) => Ok(t.clone()),
            Value::Layout(l) => Ok(l.shape().as_tuple().clone()),
            Value::SwizzledLayout(l) => Ok(l.shape().as_tuple().clone()),
            _ => Err(self.wrong(i, "a shape")),
        }
    }

    /// Argument `i` if it is a swizzled layout.
    fn swizzled(&self, i: usize) -> Option<&SwizzledLayout> {
        match &self.vals[i] {
            Value::SwizzledLayout(l) => Some(l),
            _ => None,
        }
    }

    /// Argument `i` as a plain or swizzled layout.
    fn any(&self, i: usize) -> Result<AnyLayout, Error> {
        match &self.vals[i] {
            Value::SwizzledLayout(l) => Ok(AnyLayout::Swizzled(l.clone())),
            Value::Layout(_) | Value::IntTuple(_) => Ok(AnyLayout::Plain(self.layout(i)?)),
            _ => Err(self.wrong(i, "a layout or swizzled layout")),
        }
    }

    /// Argument `i` as a swizzle: a swizzle, or the swizzle of a swizzled layout.
    fn swizzle(&self, i: usize) -> Result<Swizzle, Error> {
        match &self.vals[i] {
            Value::Swizzle(s) => Ok(*s),
            Value::SwizzledLayout(l) => Ok(l.swizzle),
            _ => Err(self.wrong(i, "a swizzle")),
        }
    }

    fn int(&self, i: usize) -> Result<i64, Error> {
        match &self.vals[i] {
            Value::IntTuple(IntTuple::Int(v)) => Ok(*v),
            _ => Err(self.wrong(i, "an integer")),
        }
    }

    fn index(&self, i: usize) -> Result<usize, Error> {
        match &self.vals[i] {
            Value::IntTuple(IntTuple::Int(v)) if *v >= 0 => {
                usize::try_from(*v).map_err(|_| self.wrong(i, "a mode index"))
            }
            _ => Err(self.wrong(i, "a non-negative integer mode index")),
        }
    }

    fn indices(&self, from: usize) -> Result<Vec<usize>, Error> {
        (from..self.len()).map(|i| self.index(i)).collect()
    }

    /// Argument `i` as a tiler: a layout (1-D), a shape (by-mode, CuTe's shape tiler), or a
    /// `<...>` tiler.
    fn tiler(&self, i: usize) -> Result<Tiler, Error> {
        match &self.vals[i] {
            Value::Layout(l) => Ok(Tiler::Layout(l.clone())),
            Value::IntTuple(t) => Ok(Tiler::from_shape(t)?),
            Value::Tiler(t) => Ok(t.clone()),
            _ => Err(self.wrong(i, "a layout, shape or tiler")),
        }
    }
}

/// Calls the function `name` of the language on values already evaluated: what
/// `name(args...)` evaluates to. This is the entry point for callers that hold values
/// rather than text (the Python bindings), so they dispatch exactly as `tessera eval` does.
///
/// Errors: a `name` that is not one of [`FUNCTIONS`] is an error of the operation `call`
/// (not a syntax error: there is no text); otherwise the function's own errors, reported as
/// errors of `name` whatever helper raised them, as `tessera eval` reports them.
///
/// ```
/// use tessera::expr::{call_function, Value};
/// let l = Value::Layout("(6,2):(8,2)".parse().unwrap());
/// let b = Value::Layout("(4,3):(3,1)".parse().unwrap());
/// let r = call_function("composition", vec![l, b]).unwrap();
/// assert_eq!(r.to_string(), "((2,2),3):((24,2),8)");
/// assert!(call_function("no_such_function", vec![]).is_err());
/// // The mode path is followed by `get`, but the error is the call's.
/// let e = call_function("size", vec![Value::Layout("2:1".parse().unwrap()), Value::int(5)]);
/// assert_eq!(e.unwrap_err().op(), "size");
/// ```
pub fn call_function(name: &str, args: Vec<Value>) -> Result<Value, Error> {
    let Some(&(known, _)) = FUNCTIONS.iter().find(|(f, _)| *f == name) else {
        return Err(Error::call("call", format!("unknown function `{name}`")));
    };
    call(
        known,
        Args {
            op: known,
            vals: args,
        },
    )
    .map_err(|e| e.relabel(known))
}

fn call(name: &'static str, a: Args) -> Result<Value, Error> {
    match name {
        _ if analysis::takes(name, &a) => analysis::call(name, a),
        "size" | "rank" | "depth" | "shape" | "stride" | "cosize" | "coshape" => structure(a),
        "get" | "select" | "take" | "group" | "flatten" | "append" | "prepend" | "replace" => {
            modes(name, a)
        }
        "make_layout" | "col_major" | "row_major" | "make_ordered_layout" | "make_layout_like" => {
            construct(name, a)
        }
        "coalesce" => {
            a.count(1, 2)?;
            if let Some(l) = a.swizzled(0) {
                return Ok(swizzled(match a.len() {
                    1 => sa::coalesce(l),
                    _ => sa::coalesce_profile(l, &a.tuple(1)?)?,
                }));
            }
            let l = a.layout(0)?;
            let r = match a.len() {
                1 => tl::coalesce(&l),
                _ => tl::coalesce_profile(&l, &a.tuple(1)?)?,
            };
            // CuTe's coalesce of a shape is a shape.
            Ok(match &a.vals[0] {
                Value::IntTuple(_) => Value::IntTuple(r.shape().as_tuple().clone()),
                _ => Value::Layout(r),
            })
        }
        "filter" => unary(a, |l| Ok(tl::filter(l)), |l| Ok::<_, Error>(sa::filter(l))),
        "filter_zeros" => unary(
            a,
            |l| Ok(tl::filter_zeros(l)),
            |l| Ok::<_, Error>(sa::filter_zeros(l)),
        ),
        "composition" => {
            a.count(2, 2)?;
            match (&a.vals[0], &a.vals[1]) {
                (Value::Swizzle(s0), Value::Swizzle(s1)) => {
                    return Ok(Value::Swizzle(s0.compose(s1)?))
                }
                (Value::Swizzle(s0), _) => {
                    return Ok(swizzled(SwizzledLayout::new(*s0, 0, a.layout(1)?)))
                }
                (Value::SwizzledLayout(l), _) => {
                    return Ok(swizzled(match a.tiler(1)? {
                        Tiler::Layout(b) => sa::composition(l, &b)?,
                        t => sa::composition_tiler(l, &t)?,
                    }))
                }
                _ => {}
            }
            let l = a.layout(0)?;
            let r = match a.tiler(1)? {
                Tiler::Layout(b) => tl::composition(&l, &b)?,
                t => tl::composition_tiler(&l, &t)?,
            };
            Ok(Value::Layout(r))
        }
        "complement" => {
            a.count(1, 2)?;
            // CuTe: the complement of a swizzled layout is that of its inner layout.
            let l = match a.swizzled(0) {
                Some(s) => s.inner.clone(),
                None => a.layout(0)?,
            };
            let r = match a.len() {
                1 => tl::complement_default(&l)?,
                _ => tl::complement(&l, &a.tuple(1)?)?,
            };
            Ok(Value::Layout(r))
        }
        "right_inverse" | "left_inverse" if matches!(a.vals.first(), Some(Value::Swizzle(_))) => {
            // A swizzle is a bijection of the integers: its inverse is both.
            a.count(1, 1)?;
            Ok(Value::Swizzle(a.swizzle(0)?.inverse()))
        }
        "right_inverse" => unary(a, tl::right_inverse, sa::right_inverse),
        "left_inverse" => unary(a, tl::left_inverse, sa::left_inverse),
        "generalized_left_inverse" => unary(a, tl::generalized_left_inverse, |_| {
            Err(not_swizzled("generalized_left_inverse"))
        }),
        "nullspace" => unary(a, tl::nullspace, |_| Err(not_swizzled("nullspace"))),
        "logical_divide" => by_tiler(a, tl::logical_divide, sa::logical_divide),
        "zipped_divide" => by_tiler(a, tl::zipped_divide, sa::zipped_divide),
        "tiled_divide" => by_tiler(a, tl::tiled_divide, sa::tiled_divide),
        "flat_divide" => by_tiler(a, tl::flat_divide, sa::flat_divide),
        "logical_product" => by_tiler(a, tl::logical_product, sa::logical_product),
        "zipped_product" => by_tiler(a, tl::zipped_product, sa::zipped_product),
        "tiled_product" => by_tiler(a, tl::tiled_product, sa::tiled_product),
        "flat_product" => by_tiler(a, tl::flat_product, sa::flat_product),
        "blocked_product" => binary(a, tl::blocked_product, sa::blocked_product),
        "raked_product" => binary(a, tl::raked_product, sa::raked_product),
        "max_common_layout" => binary(a, tl::max_common_layout, |_, _| {
            Err(not_swizzled("max_common_layout"))
        }),
        "max_common_vector" => {
            a.count(2, 2)?;
            let n = tl::max_common_vector(&a.layout(0)?, &a.layout(1)?)?;
            Ok(Value::int(n))
        }
        "tile_to_shape" => {
            a.count(2, 3)?;
            let s = a.shape(1)?;
            let order = if a.len() == 3 {
                Some(a.tuple(2)?)
            } else {
                None
            };
            if let Some(l) = a.swizzled(0) {
                return Ok(swizzled(sa::tile_to_shape(l, &s, order.as_ref())?));
            }
            let l = a.layout(0)?;
            Ok(Value::Layout(tl::tile_to_shape(&l, &s, order.as_ref())?))
        }
        "upcast" | "downcast" => cast(a, name == "upcast"),
        "idx2crd" | "crd2idx" | "eval" | "offsets" | "image_bounds" | "cosize_inner" => {
            evaluate(name, a)
        }
        "yyy_mask" | "zzz_mask" | "make_swizzle" | "bank_conflicts" | "is_bijective"
        | "is_injective" => swizzle_function(name, a),
        // The parser only lets names of `FUNCTIONS` through; a name listed there but not
        // dispatched here is caught by the test that calls every function.
        other => Err(Error::call(other, "is not implemented")),
    }
}

/// The functions of modes: `get`, `select`, `take`, `group`, `flatten`, `append`, `prepend`,
/// `replace`.
fn modes(name: &'static str, a: Args) -> Result<Value, Error> {
    match name {
        "get" => {
            a.count(2, usize::MAX)?;
            let path = a.indices(1)?;
            get_path(&a, &path)
        }
        "select" => {
            a.count(1, usize::MAX)?;
            let idx = a.indices(1)?;
            match &a.vals[0] {
                Value::IntTuple(t) => Ok(Value::IntTuple(tuple::select(t, &idx)?)),
                Value::SwizzledLayout(l) => Ok(swizzled(l.with_inner(l.inner.select(&idx)?))),
                _ => Ok(Value::Layout(a.layout(0)?.select(&idx)?)),
            }
        }
        "take" | "group" => {
            a.count(3, 3)?;
            let (b, e) = (a.index(1)?, a.index(2)?);
            match (&a.vals[0], name) {
                (Value::IntTuple(t), "take") => Ok(Value::IntTuple(tuple::take(t, b, e)?)),
                (Value::IntTuple(t), _) => Ok(Value::IntTuple(tuple::group(t, b, e)?)),
                (Value::SwizzledLayout(l), "take") => {
                    Ok(swizzled(l.with_inner(l.inner.take(b, e)?)))
                }
                (Value::SwizzledLayout(l), _) => Ok(swizzled(l.with_inner(l.inner.group(b, e)?))),
                (_, "take") => Ok(Value::Layout(a.layout(0)?.take(b, e)?)),
                _ => Ok(Value::Layout(a.layout(0)?.group(b, e)?)),
            }
        }
        "flatten" => {
            a.count(1, 1)?;
            match &a.vals[0] {
                Value::IntTuple(t) => Ok(Value::IntTuple(t.flatten())),
                Value::SwizzledLayout(l) => Ok(swizzled(l.with_inner(l.inner.flatten()))),
                _ => Ok(Value::Layout(a.layout(0)?.flatten())),
            }
        }
        "append" | "prepend" => {
            a.count(2, 2)?;
            let front = name == "prepend";
            if let (Value::IntTuple(t), Value::IntTuple(m)) = (&a.vals[0], &a.vals[1]) {
                let r = if front {
                    tuple::prepend(t, m)
                } else {
                    tuple::append(t, m)
                };
                return Ok(Value::IntTuple(r));
            }
            let (l, m) = (a.layout(0)?, a.layout(1)?);
            let r = if front { l.prepend(&m)? } else { l.append(&m)? };
            Ok(Value::Layout(r))
        }
        "replace" => {
            a.count(3, 3)?;
            let i = a.index(1)?;
            if let (Value::IntTuple(t), Value::IntTuple(m)) = (&a.vals[0], &a.vals[2]) {
                return Ok(Value::IntTuple(tuple::replace(t, i, m)?));
            }
            Ok(Value::Layout(a.layout(0)?.replace(i, &a.layout(2)?)?))
        }
        other => Err(Error::call(other, "is not implemented")),
    }
}

/// The functions that make a layout: `make_layout`, `col_major`, `row_major`,
/// `make_ordered_layout`, `make_layout_like`.
fn construct(name: &'static str, a: Args) -> Result<Value, Error> {
    match name {
        "make_layout" => make_layout(a),
        "col_major" | "row_major" => {
            a.count(1, 1)?;
            let s = a.shape(0)?;
            let l = if name == "col_major" {
                Layout::col_major(s)?
            } else {
                Layout::row_major(s)?
            };
            Ok(Value::Layout(l))
        }
        "make_ordered_layout" => {
            a.count(1, 2)?;
            let (s, o) = if a.len() == 1 {
                let l = a.layout(0)?;
                (l.shape().as_tuple().clone(), l.stride().as_tuple().clone())
            } else {
                (a.shape(0)?, a.tuple(1)?)
            };
            Ok(Value::Layout(tl::make_ordered_layout(&s, &o)?))
        }
        "make_layout_like" => unary(a, tl::make_layout_like, |_| {
            Err(not_swizzled("make_layout_like"))
        }),
        other => Err(Error::call(other, "is not implemented")),
    }
}

/// The functions of a layout at given points: `idx2crd`, `crd2idx`, `eval`, `offsets`,
/// `image_bounds`, `cosize_inner`.
fn evaluate(name: &'static str, a: Args) -> Result<Value, Error> {
    match name {
        "idx2crd" => {
            a.count(2, 3)?;
            let idx = a.tuple(0)?;
            if a.len() == 3 {
                let l = Layout::new(a.tuple(1)?, a.tuple(2)?)?;
                return Ok(Value::IntTuple(idx2crd_strided(&idx, &l)?));
            }
            Ok(Value::IntTuple(tl::idx2crd(&idx, &a.shape(1)?)?))
        }
        "crd2idx" => crd2idx(a),
        "eval" => {
            a.count(2, 2)?;
            if let Value::Swizzle(s) = &a.vals[0] {
                return Ok(Value::int(s.apply(a.int(1)?)));
            }
            let l = a.any(0)?;
            let r = match a.tuple(1)? {
                IntTuple::Int(i) => l.call(i)?,
                c => l.eval(&c)?,
            };
            Ok(Value::int(r))
        }
        "offsets" => {
            a.count(1, 1)?;
            let l = a.any(0)?;
            if l.size() > MAX_OFFSETS {
                return Err(Error::call(
                    "offsets",
                    format!(
                        "{l} has {} offsets; at most {MAX_OFFSETS} are listed",
                        l.size()
                    ),
                ));
            }
            Ok(Value::List(l.offsets()?))
        }
        "image_bounds" => {
            a.count(1, 1)?;
            let (lo, hi) = a.any(0)?.image_bounds()?;
            Ok(Value::IntTuple(IntTuple::flat([lo, hi])))
        }
        "cosize_inner" => {
            a.count(1, 1)?;
            Ok(Value::int(a.any(0)?.cosize_inner()))
        }
        other => Err(Error::call(other, "is not implemented")),
    }
}

/// The functions of swizzles and of any layout's injectivity: `yyy_mask`, `zzz_mask`,
/// `make_swizzle`, `bank_conflicts`, `is_bijective`, `is_injective`.
fn swizzle_function(name: &'static str, a: Args) -> Result<Value, Error> {
    match name {
        "yyy_mask" | "zzz_mask" => {
            a.count(1, 1)?;
            let s = a.swizzle(0)?;
            Ok(Value::int(if name == "yyy_mask" {
                s.yyy_mask()
            } else {
                s.zzz_mask()
            }))
        }
        "make_swizzle" => {
            a.count(2, 3)?;
            let s = if a.len() == 2 {
                Swizzle::make_swizzle(a.int(0)?, a.int(1)?)?
            } else {
                Swizzle::new(a.int(0)?, a.int(1)?, a.int(2)?)?
            };
            Ok(Value::Swizzle(s))
        }
        "bank_conflicts" => {
            a.count(2, 2)?;
            let r = tsw::bank_conflicts(&a.any(0)?, a.int(1)?)?;
            Ok(Value::Ratio(r.wavefronts, r.ideal))
        }
        "is_bijective" => {
            a.count(1, 1)?;
            Ok(Value::Bool(a.any(0)?.is_bijective()?))
        }
        "is_injective" => {
            a.count(1, 1)?;
            Ok(Value::Bool(a.any(0)?.is_injective()?))
        }
        other => Err(Error::call(other, "is not implemented")),
    }
}

/// `upcast(L, n)` (`up`) or `downcast(L, n)`, of a swizzle, a swizzled layout or a layout.
fn cast(a: Args, up: bool) -> Result<Value, Error> {
    a.count(2, 2)?;
    let n = a.int(1)?;
    match &a.vals[0] {
        Value::Swizzle(s) => {
            return Ok(Value::Swizzle(if up {
                s.upcast(n)?
            } else {
                s.downcast(n)?
            }))
        }
        Value::SwizzledLayout(l) => {
            return Ok(swizzled(if up {
                sa::upcast(l, n)?
            } else {
                sa::downcast(l, n)?
            }))
        }
        _ => {}
    }
    let l = a.layout(0)?;
    let r = if up {
        tl::upcast(&l, n)?
    } else {
        tl::downcast(&l, n)?
    };
    Ok(Value::Layout(r))
}

fn swizzled(l: SwizzledLayout) -> Value {
    Value::SwizzledLayout(l)
}

/// The error of an operation that has no swizzled form.
fn not_swizzled(op: &'static str) -> Error {
    Error::call(op, "does not take a swizzled layout")
}

/// A one-operand operation: `plain` on a layout, `swz` on a swizzled layout.
fn unary<E: Into<Error>>(
    a: Args,
    plain: impl Fn(&Layout) -> tl::Result<Layout>,
    swz: impl Fn(&SwizzledLayout) -> Result<SwizzledLayout, E>,
) -> Result<Value, Error> {
    a.count(1, 1)?;
    match a.swizzled(0) {
        Some(l) => Ok(swizzled(swz(l).map_err(Into::into)?)),
        None => Ok(Value::Layout(plain(&a.layout(0)?)?)),
    }
}

/// A two-layout operation: the first operand may be swizzled.
fn binary<E: Into<Error>>(
    a: Args,
    plain: impl Fn(&Layout, &Layout) -> tl::Result<Layout>,
    swz: impl Fn(&SwizzledLayout, &Layout) -> Result<SwizzledLayout, E>,
) -> Result<Value, Error> {
    a.count(2, 2)?;
    let b = a.layout(1)?;
    match a.swizzled(0) {
        Some(l) => Ok(swizzled(swz(l, &b).map_err(Into::into)?)),
        None => Ok(Value::Layout(plain(&a.layout(0)?, &b)?)),
    }
}

/// A layout-by-tiler operation (divides, products): the first operand may be swizzled.
fn by_tiler(
    a: Args,
    plain: impl Fn(&Layout, &Tiler) -> tl::Result<Layout>,
    swz: impl Fn(&SwizzledLayout, &Tiler) -> tsw::Result<SwizzledLayout>,
) -> Result<Value, Error> {
    a.count(2, 2)?;
    let t = a.tiler(1)?;
    match a.swizzled(0) {
        Some(l) => Ok(swizzled(swz(l, &t)?)),
        None => Ok(Value::Layout(plain(&a.layout(0)?, &t)?)),
    }
}

/// `get(x, path...)` on a layout, an int tuple or a tiler.
fn get_path(a: &Args, path: &[usize]) -> Result<Value, Error> {
    match &a.vals[0] {
        Value::IntTuple(t) => Ok(Value::IntTuple(tuple::get(t, path)?)),
        Value::Layout(l) => Ok(Value::Layout(l.get(path)?)),
        Value::SwizzledLayout(l) => Ok(swizzled(l.with_inner(l.inner.get(path)?))),
        Value::Tiler(t) => {
            let mut cur = t;
            for &i in path {
                cur = match cur {
                    Tiler::ByMode(items) => items.get(i),
                    _ => None,
                }
                .ok_or_else(|| {
                    Error::call("get", format!("index {i} out of range for tiler {cur}"))
                })?;
            }
            Ok(match cur {
                Tiler::ByMode(_) | Tiler::Skip => Value::Tiler(cur.clone()),
                Tiler::Layout(l) => Value::Layout(l.clone()),
            })
        }
        _ => Err(a.wrong(0, "a layout, int tuple or tiler")),
    }
}

/// `size`, `rank`, `depth`, `shape`, `stride`, `cosize`, `coshape`, with an optional mode path.
fn structure(a: Args) -> Result<Value, Error> {
    a.count(1, usize::MAX)?;
    let target = if a.len() > 1 {
        get_path(&a, &a.indices(1)?)?
    } else {
        a.vals[0].clone()
    };
    let int = |v: usize| Value::int(i64::try_from(v).unwrap_or(i64::MAX));
    match (a.op, &target) {
        ("size", Value::IntTuple(t)) => Ok(Value::int(t.product()?)),
        ("rank", Value::IntTuple(t)) => Ok(int(t.rank())),
        ("depth", Value::IntTuple(t)) => Ok(int(t.depth())),
        ("shape", Value::IntTuple(t)) => Ok(Value::IntTuple(t.clone())),
        ("rank", Value::Tiler(Tiler::ByMode(items))) => Ok(int(items.len())),
        (op, Value::SwizzledLayout(l)) => match op {
            "size" => Ok(Value::int(l.size())),
            "rank" => Ok(int(l.rank())),
            "depth" => Ok(int(l.depth())),
            "shape" => Ok(Value::IntTuple(l.shape().as_tuple().clone())),
            // The exact extent of the image, not CuTe C++'s (see `cosize_inner`).
            "cosize" => Ok(Value::int(l.cosize()?)),
            _ => Err(Error::call(
                a.op,
                format!("`{l}` is a swizzled layout, which has no {op} (CuTe deletes it)"),
            )),
        },
        (_, Value::Layout(_) | Value::IntTuple(_)) => {
            let l = Args {
                op: a.op,
                vals: vec![target],
            }
            .layout(0)?;
            Ok(match a.op {
                "size" => Value::int(l.size()),
                "rank" => int(l.rank()),
                "depth" => int(l.depth()),
                "shape" => Value::IntTuple(l.shape().as_tuple().clone()),
                "stride" => Value::IntTuple(l.stride().as_tuple().clone()),
                "cosize" => Value::int(l.cosize()),
                _ => Value::IntTuple(l.coshape()),
            })
        }
        _ => Err(Error::call(
            a.op,
            format!(
                "argument is {} `{target}`, expected a layout or int tuple; usage: {}",
                target.kind(),
                a.usage()
            ),
        )),
    }
}

/// `make_layout(S)`, `make_layout(S, D)`, `make_layout(L)`, `make_layout(L0, L1, ...)`.
fn make_layout(a: Args) -> Result<Value, Error> {
    a.count(1, usize::MAX)?;
    match (a.len(), &a.vals[0], a.vals.get(1)) {
        (1, Value::IntTuple(s), _) => Ok(Value::Layout(Layout::col_major(s.clone())?)),
        (1, Value::Layout(l), _) => Ok(Value::Layout(l.clone())),
        (1, Value::SwizzledLayout(l), _) => Ok(swizzled(l.clone())),
        (2, Value::IntTuple(s), Some(Value::IntTuple(d))) => {
            Ok(Value::Layout(Layout::new(s.clone(), d.clone())?))
        }
        _ => {
            let modes = (0..a.len())
                .map(|i| a.layout(i))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Layout(Layout::concat(modes)?))
        }
    }
}

/// CuTe's `idx2crd(idx, shape, stride)`: each leaf of the coordinate is
/// `(idx / stride) % shape` (C++ truncating division); a tuple `idx` is split mode by mode.
fn idx2crd_strided(idx: &IntTuple, l: &Layout) -> Result<IntTuple, Error> {
    const OP: &str = "idx2crd";
    fn go(idx: &IntTuple, s: &IntTuple, d: &IntTuple) -> Result<IntTuple, Error> {
        Ok(match (idx, s, d) {
            (IntTuple::Int(i), IntTuple::Int(s), IntTuple::Int(d)) => {
                if *d == 0 {
                    return Err(Error::call(
                        OP,
                        format!(
                            "index {i} reaches a mode {s}:0, and a stride of 0 divides nothing"
                        ),
                    ));
                }
                // i64::MIN / -1 is the only quotient that overflows.
                let q = i.checked_div(*d).ok_or_else(|| {
                    Error::Layout(tessera_layout::LayoutError::overflow(
                        OP,
                        format!("{i} / {d}"),
                    ))
                })?;
                IntTuple::Int(q % s)
            }
            (IntTuple::Int(_), IntTuple::Tuple(ss), IntTuple::Tuple(ds)) => IntTuple::Tuple(
                ss.iter()
                    .zip(ds)
                    .map(|(s, d)| go(idx, s, d))
                    .collect::<Result<_, _>>()?,
            ),
            (IntTuple::Tuple(is), IntTuple::Tuple(ss), IntTuple::Tuple(ds))
                if is.len() == ss.len() =>
            {
                IntTuple::Tuple(
                    is.iter()
                        .zip(ss)
                        .zip(ds)
                        .map(|((i, s), d)| go(i, s, d))
                        .collect::<Result<_, _>>()?,
                )
            }
            _ => {
                return Err(Error::call(
                    OP,
                    format!(
                        "{idx} is not an index of {s} (a tuple index must match the shape's modes)"
                    ),
                ))
            }
        })
    }
    go(idx, l.shape(), l.stride())
}

/// `crd2idx(coord, L)`, `crd2idx(L, coord)`, `crd2idx(coord, S)` (column-major strides) and
/// `crd2idx(coord, S, D)`.
fn crd2idx(a: Args) -> Result<Value, Error> {
    a.count(2, 3)?;
    let (coord, l) = match (&a.vals[0], &a.vals[1]) {
        _ if a.len() == 3 => {
            let l = Layout::new(a.tuple(1)?, a.tuple(2)?)?;
            (a.tuple(0)?, l)
        }
        (Value::SwizzledLayout(l), _) => return Ok(Value::int(l.eval(&a.tuple(1)?)?)),
        (_, Value::SwizzledLayout(l)) => return Ok(Value::int(l.eval(&a.tuple(0)?)?)),
        (Value::Layout(l), _) => (a.tuple(1)?, l.clone()),
        (_, Value::Layout(l)) => (a.tuple(0)?, l.clone()),
        _ => (a.tuple(0)?, Layout::col_major(a.tuple(1)?)?),
    };
    Ok(Value::int(tl::crd2idx(
        &coord,
        l.shape().as_tuple(),
        l.stride().as_tuple(),
    )?))
}
