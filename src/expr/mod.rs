//! The expression language of `tessera eval`: a calculator for the layout algebra.
//!
//! An expression is a literal or a call `name(arg, ...)`; arguments are expressions, so calls
//! nest. [`evaluate`] parses and evaluates one expression; [`call_function`] calls one function
//! on values already made (what the Python package does); [`Value`]'s `Display` is the text
//! `tessera eval` prints.
//!
//! # Literals
//!
//! | text | value |
//! |---|---|
//! | `12`, `-3` | an integer |
//! | `(1,(2,3))`, `(3)`, `()` | an int tuple (`(3)` is a rank-1 tuple, not the integer 3) |
//! | `((2,4),3):((1,8),2)`, `8:1` | a layout `SHAPE:STRIDE` |
//! | `<3:3,(2,4):(1,8),_,4>` | a by-mode tiler: items are layouts, shapes (an integer `n` is `n:1`, a tuple is a by-mode tiler of its modes), nested tilers, or `_` (leave the mode alone) |
//! | `Sw<3,4,3>` | a swizzle `Sw<B,M,S>` |
//! | `Sw<3,4,3> o 8 o (8,64):(64,1)`, `Sw<3,4,3> o (8,64):(64,1)` | a swizzled layout `SWIZZLE o OFFSET o LAYOUT` (the offset defaults to 0; `∘` may stand for `o`) |
//!
//! Spaces are allowed anywhere between tokens. Tuple elements, the parts of a layout and the
//! items of a tiler may themselves be calls: `(size(4:1),2)`, `shape(L):stride(L)`.
//!
//! # Calls
//!
//! The names are CuTe's, and so is the argument order:
//!
//! - structure: `size rank depth shape stride cosize coshape` (each takes an optional mode path:
//!   `size(L, 1)` is `size(get(L, 1))`), `get(L, i, j, ...)` (mode `i`, then its mode `j`),
//!   `select(L, i, j, ...)`, `take(L, begin, end)`, `group(L, begin, end)`, `flatten(L)`,
//!   `append(L, M)`, `prepend(L, M)`, `replace(L, i, M)`; these accept int tuples too
//!   (`size((2,3))` is 6, `get((2,(3,4)),1,0)` is 3);
//! - construction: `make_layout(L0, L1, ...)` (concatenation of modes; one int tuple gives the
//!   column-major layout of that shape, two int tuples are a shape and a stride), `col_major(S)`,
//!   `row_major(S)`, `make_ordered_layout(S, order)`, `make_layout_like(L)`;
//! - algebra: `coalesce(L[, profile])`, `filter(L)`, `filter_zeros(L)`, `composition(A, B)`,
//!   `complement(L[, cotarget])`, `right_inverse(L)`, `left_inverse(L)` (of an injective
//!   layout), `generalized_left_inverse(L)` (`L(R(L(i))) == L(i)`),
//!   `logical_divide zipped_divide tiled_divide flat_divide logical_product zipped_product
//!   tiled_product flat_product` (`(L, T)`), `blocked_product(A, B)`, `raked_product(A, B)`,
//!   `tile_to_shape(L, S[, order])`, `max_common_vector(A, B)`, `max_common_layout(A, B)`,
//!   `upcast(L, n)`, `downcast(L, n)`, `nullspace(L)`;
//! - evaluation: `eval(L, i)` (the offset `L(i)` of an integer or a coordinate), `offsets(L)`
//!   (the list `[L(0),...,L(size-1)]`), `crd2idx(coord, L)` (also `crd2idx(L, coord)`,
//!   `crd2idx(coord, shape)` with column-major strides, and `crd2idx(coord, shape, stride)`),
//!   `idx2crd(i, shape)` (a layout in place of the shape stands for its shape);
//! - swizzles: `eval(Sw<B,M,S>, x)` applies the swizzle to `x`; `yyy_mask(Sw)`, `zzz_mask(Sw)`,
//!   `make_swizzle(Ymask, Zmask)` (also `make_swizzle(B, M, S)`), `composition(Sw, L)` (the
//!   swizzled layout `Sw o 0 o L`) and `composition(Sw0, Sw1)`, `upcast`/`downcast` of a swizzle;
//! - on plain and swizzled layouts alike: `eval`, `offsets`, `crd2idx`, `cosize` (the exact
//!   extent of the image, `max - min + 1`), `image_bounds(L)` (the tuple `(min,max)`),
//!   `cosize_inner(L)` (CuTe C++'s value: the cosize of the inner layout),
//!   `bank_conflicts(L, elem_bytes)` (mode 0 the lanes of a warp; printed `WAVEFRONTS/IDEAL`),
//!   `is_bijective(L)`, `is_injective(L)`; and, on swizzled layouts, the operations CuTe
//!   forwards to the inner layout (`get select take group flatten coalesce filter
//!   filter_zeros composition complement` the divides and products, `tile_to_shape`) and
//!   `right_inverse`, `left_inverse`, `upcast`, `downcast`.
//! - functions as a whole: `equal(A, B)` (the same function on `[0, size)`, plain or
//!   swizzled), `canonical(L)` (the unique normal form of a plain layout's function);
//! - the F2 view: `f2(L)` (the bit matrix of an XOR-linear layout), `f2(Sw, bits)` (a swizzle
//!   on `[0, 2^bits)`), `is_linear(L)`; on F2 maps `composition(F, G)` (any two, also of
//!   swizzles with different shifts), `right_inverse`/`left_inverse`, `eval(F, i)`,
//!   `is_bijective`, `is_injective`, `is_linear`;
//! - swizzle synthesis: `best_swizzle(access, ..., smem, elem_bytes)` (the swizzled tile
//!   `Sw o 0 o smem` whose `Sw<B,M,S>` takes the fewest bank-conflict wavefronts for the
//!   accesses, `(lane, value) -> coordinate` layouts, keeping their vector widths) and
//!   `best_xor_swizzle(...)` (the same over XOR-linear maps: an F2 map).
//!
//! Where a layout is expected, an int tuple stands for its column-major layout (`(4,8)` is
//! `(4,8):(1,4)`), except as the second operand of `composition`, the divides and the
//! products: there a shape is a by-mode tiler, as in CuTe (`(4,8)` is `<4:1,8:1>`).
//!
//! # Output
//!
//! Layouts in CuTe notation with no spaces (`(4,8):(1,4)`), integers in decimal, int tuples
//! `(1,(1,2))`, tilers `<3:3,_,4:1>`, lists `[0,1,2]`, booleans `true`/`false`, swizzles
//! `Sw<3,4,3>`, swizzled layouts `Sw<3,4,3> o 0 o (8,64):(64,1)`, F2 maps as their bit
//! matrix `[ROW;ROW;...]` (one row per offset bit from the highest, one digit per index bit
//! from the highest), followed by `^ BITS` when the map has a translation.
//!
//! # Errors
//!
//! A malformed literal, an unknown function name or a misplaced token is a syntax error
//! ([`Error::is_syntax`]); everything else (an inadmissible composition, a wrong number or
//! kind of arguments to a known function, an index out of range) is an error of the operation.
//! An error's `Display` starts with the name of the function called (`parse` for syntax
//! errors), whichever step inside it failed. [`explain`] lists the steps of a divide or a
//! product (`tessera eval --explain`).
//!
//! ```
//! use tessera::expr::evaluate;
//! let show = |s: &str| evaluate(s).unwrap().to_string();
//! assert_eq!(show("size((2,3))"), "6");
//! assert_eq!(show("coalesce((2,(1,6)):(1,(6,2)))"), "12:1");
//! assert_eq!(show("composition((6,4):(4,1), (4,6):(6,1))"), "(4,6):(1,4)");
//! assert_eq!(show("logical_divide(8:1, 4)"), "(4,2):(1,4)");
//! assert_eq!(show("offsets((2,2):(2,1))"), "[0,2,1,3]");
//! assert_eq!(show("get(((2,4),3):((1,8),2), 0, 1)"), "4:8");
//! assert!(evaluate("composition((4,6,8):(2,3,5), 6:3)").is_err_and(|e| !e.is_syntax()));
//! assert!(evaluate("size(2:1").is_err_and(|e| e.is_syntax()));
//! assert!(evaluate("no_such_function(2:1)").is_err_and(|e| e.is_syntax()));
//! assert_eq!(show("eval(Sw<3,4,3>, 128)"), "144");
//! assert_eq!(show("cosize(Sw<1,0,1> o 3:1)"), "4"); // the image is {0,1,3}
//! assert_eq!(show("bank_conflicts((8,8):(64,1), 2)"), "8/1");
//! assert_eq!(show("equal((3,1):(1,4), 3:1)"), "true");
//! assert_eq!(show("f2(Sw<1,0,1> o (2,2):(2,1))"), "[01;11]");
//! assert_eq!(show("best_swizzle((8,8):(1,8), (8,64):(64,1), 2)"), "Sw<3,3,3> o 0 o (8,64):(64,1)");
//! ```

mod eval;
mod explain;
mod parse;
mod tuple;
mod value;

use std::fmt;

use tessera_layout::LayoutError;
use tessera_swizzle::SwizzleError;

pub use eval::{call_function, FUNCTIONS};
pub use explain::{explain, Explanation};
pub use parse::{parse, Expr};
pub use value::Value;

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A syntax error (`LayoutError::Parse`) or an error of a layout operation.
    Layout(LayoutError),
    /// An error of a swizzle operation (a `Sw<B,M,S>` CuTe rejects, an inadmissible
    /// swizzled operation, an answer that needs too much enumeration).
    Swizzle(SwizzleError),
    /// A known function called with the wrong number or kind of arguments, or an operation of
    /// the calculator itself (a tuple element that is not an int tuple, a list too long to
    /// print) that failed.
    Call {
        /// The function called.
        op: &'static str,
        /// What is wrong.
        msg: String,
    },
}

impl Error {
    /// Whether this is a syntax error of the expression (as opposed to an error of an
    /// operation): `tessera eval` exits with 2 for these and 1 for the others.
    pub fn is_syntax(&self) -> bool {
        match self {
            Error::Layout(e) => e.is_parse(),
            Error::Swizzle(e) => e.is_parse(),
            Error::Call { .. } => false,
        }
    }

    /// The name of the operation that failed (`"parse"` for syntax errors).
    pub fn op(&self) -> &'static str {
        match self {
            Error::Layout(e) => e.op(),
            Error::Swizzle(e) => e.op(),
            Error::Call { op, .. } => op,
        }
    }

    /// The same error reported as an error of `op`, the function the expression called,
    /// whatever helper raised it (a syntax error stays a syntax error).
    pub fn relabel(self, op: &'static str) -> Self {
        match self {
            Error::Layout(e) => Error::Layout(e.relabel(op)),
            Error::Swizzle(e) => Error::Swizzle(e.relabel(op)),
            Error::Call { msg, .. } => Error::Call { op, msg },
        }
    }

    pub(crate) fn call(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Call {
            op,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Layout(e) => write!(f, "{e}"),
            Error::Swizzle(e) => write!(f, "{e}"),
            Error::Call { op, msg } => write!(f, "{op}: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<LayoutError> for Error {
    fn from(e: LayoutError) -> Self {
        Error::Layout(e)
    }
}

impl From<SwizzleError> for Error {
    fn from(e: SwizzleError) -> Self {
        match e {
            SwizzleError::Layout(e) => Error::Layout(e),
            e => Error::Swizzle(e),
        }
    }
}

/// Parses and evaluates one expression.
///
/// Never panics; see the [module documentation](self) for the language.
pub fn evaluate(src: &str) -> Result<Value, Error> {
    parse(src)?.eval()
}
