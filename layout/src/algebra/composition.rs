//! `composition`: `R = A ∘ B`, the layout with `R(i) = A(B(i))`.
//!
//! The algorithm is CuTe's: `A` is flattened and coalesced keeping its extended domain
//! (`coalesce_x`), every leaf `n:d` of `B` is composed with it by dividing `d` out of A's modes
//! from the left, and the results take B's place in B's structure.
//!
//! CuTe's divisibility test is weak, so it returns wrong layouts for some inputs. Two checks
//! make the result exact here:
//!
//! * per leaf: when the step `|d|` is below a mode's extent `s` and does not divide it, the
//!   walk through that mode is not periodic, so all `n` steps must fit inside the mode
//!   (`n <= ceil(s / |d|)`); CuTe skips this test (`(4,6,8):(2,3,5) ∘ 6:3`).
//! * across leaves: `A(x + y) = A(x) + A(y)` when adding the mixed-radix digits of `x` and
//!   `y` (in A's modes) does not carry and, below A's last mode, all have one sign (C++
//!   division truncates, so a negative index has negative digits). Each leaf's
//!   result records the largest digit it can put in each mode of A; the digits of all leaves
//!   must add up below the mode's extent (`(6,2):(1,7) ∘ (3,2):(2,3)` fails this). When that
//!   sufficient test fails, the result is checked point by point if `size(B)` is small, and
//!   rejected otherwise.

use crate::error::{mul, LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use smallvec::SmallVec;

use super::support::{ceil_div, checked_layout, concat, for_each_leaf, Modes};
use super::tiler::Tiler;

/// Largest `size(B)` for which a composition that fails the cheap exactness test is verified
/// point by point instead of being rejected.
const BRUTE_FORCE_LIMIT: i64 = 1 << 14;

/// CuTe's `coalesce_x`: flat modes of `a` that give the same function on every index,
/// also past `size(a)`. Only the last mode absorbs the quotient, so its extent is not used;
/// a trailing size-1 mode is kept as the last mode.
fn coalesce_x(a: &Layout) -> Modes {
    let mut leaves = Modes::new();
    for_each_leaf(a.shape(), a.stride(), &mut |s, d| leaves.push((s, d)));
    if ends_in_empty_tuple(a.shape()) {
        // The mode that absorbs indices past the size is an empty tuple (`():()` itself, or
        // `(2,(1,())):(3,(5,()))`): it maps everything to 0, as a last mode `1:0` would.
        leaves.push((1, 0));
    }
    let n = leaves.len();
    // The last mode absorbs everything past the others, whatever its extent: give it
    // extent 2 if it is 1 so that it is not dropped (CuTe does the same).
    let mut rev: Modes = Modes::new();
    rev.push((leaves[n - 1].0.max(2), leaves[n - 1].1));
    for k in (0..n - 1).rev() {
        let (s, d) = leaves[k];
        if s == 1 {
            continue;
        }
        let front = rev.last_mut().expect("non-empty");
        if s.checked_mul(d) == Some(front.1) {
            *front = (s.saturating_mul(front.0), d);
        } else {
            rev.push((s, d));
        }
    }
    rev.reverse();
    rev
}

/// Whether the last mode, recursively, is an empty tuple.
fn ends_in_empty_tuple(t: &IntTuple) -> bool {
    match t {
        IntTuple::Int(_) => false,
        IntTuple::Tuple(v) => v.last().map_or(true, ends_in_empty_tuple),
    }
}

/// Per-mode digit budget of the composition of A with the leaves of B seen so far.
struct Digits {
    /// For each mode of A but the last, the sum over B's leaves of the largest digit the leaf
    /// can put in that mode.
    sum: SmallVec<[i64; 8]>,
    /// Whether a leaf with a positive / negative nonzero step was seen.
    pos: bool,
    neg: bool,
}

/// Composes flat `A` (from [`coalesce_x`]) with the leaf `n:d`, returning the result's shape
/// and stride (an integer or a flat tuple) and recording the digits it uses.
fn compose_leaf(
    a: &[(i64, i64)],
    n: i64,
    d: i64,
    digits: &mut Digits,
) -> Result<(IntTuple, IntTuple)> {
    const OP: &str = "composition";
    if d == 0 {
        return Ok((IntTuple::Int(n), IntTuple::Int(0)));
    }
    if n == 1 {
        // Only A(0) = 0 is reached. Run the walk for CuTe's stride of the size-1 result
        // (it is never used); if that stride overflows, 0 serves as well.
        return Ok(
            walk_stride(a, d).map_or((IntTuple::Int(1), IntTuple::Int(0)), |st| {
                (IntTuple::Int(1), IntTuple::Int(st))
            }),
        );
    }
    if d > 0 {
        digits.pos = true;
    } else {
        digits.neg = true;
    }
    let sign = d.signum();
    let (rmodes, last) = a.split_at(a.len() - 1);
    let last_d = last[0].1;
    let mut shapes: SmallVec<[i64; 8]> = SmallVec::new();
    let mut strides: SmallVec<[i64; 8]> = SmallVec::new();
    let mut rest_shape = n;
    let mut rest_stride = d;
    for (k, &(s, sd)) in rmodes.iter().enumerate() {
        let ad = rest_stride
            .checked_abs()
            .ok_or_else(|| LayoutError::overflow(OP, format!("|{rest_stride}|")))?;
        if ad % s == 0 {
            // The step skips this mode entirely.
            rest_stride = sign * (ad / s);
            continue;
        }
        if ad > s {
            if rest_shape == 1 {
                rest_stride = sign * ceil_div(ad, s);
                continue;
            }
            return Err(LayoutError::inadmissible(
                OP,
                String::new(),
                format!("stride divisibility: step {ad} is neither a multiple nor a divisor of mode extent {s}"),
            ));
        }
        // ad < s: the step walks inside this mode.
        let next_shape = ceil_div(s, ad);
        if rest_shape == 1 {
            rest_stride = sign;
            continue;
        }
        if s % ad != 0 && rest_shape > next_shape {
            return Err(LayoutError::inadmissible(
                OP,
                String::new(),
                format!(
                    "stride divisibility: step {ad} does not divide mode extent {s} and {rest_shape} steps do not fit in it"
                ),
            ));
        }
        let new_shape = next_shape.min(rest_shape);
        if rest_shape % new_shape != 0 {
            return Err(LayoutError::inadmissible(
                OP,
                String::new(),
                format!("shape divisibility: {rest_shape} is not a multiple of {new_shape}"),
            ));
        }
        shapes.push(new_shape);
        strides.push(mul(OP, rest_stride, sd)?);
        digits.sum[k] = digits.sum[k].saturating_add((new_shape - 1) * ad);
        rest_shape /= new_shape;
        rest_stride = sign;
    }
    if shapes.is_empty() || rest_shape != 1 {
        shapes.push(rest_shape);
        strides.push(mul(OP, rest_stride, last_d)?);
    }
    Ok(if shapes.len() == 1 {
        (IntTuple::Int(shapes[0]), IntTuple::Int(strides[0]))
    } else {
        (IntTuple::flat(shapes), IntTuple::flat(strides))
    })
}

/// The stride CuTe gives the size-1 composition `A ∘ 1:d`: `d` divided through A's modes
/// (rounding up), times the stride of A's last mode.
fn walk_stride(a: &[(i64, i64)], d: i64) -> Option<i64> {
    let sign = d.signum();
    let mut rest = d.checked_abs()?;
    for &(s, _) in &a[..a.len() - 1] {
        rest = ceil_div(rest, s);
    }
    (sign * rest).checked_mul(a[a.len() - 1].1)
}

fn compose_tree(
    a: &[(i64, i64)],
    shape: &IntTuple,
    stride: &IntTuple,
    digits: &mut Digits,
) -> Result<(IntTuple, IntTuple)> {
    match (shape, stride) {
        (IntTuple::Int(n), IntTuple::Int(d)) => compose_leaf(a, *n, *d, digits),
        (IntTuple::Tuple(ss), IntTuple::Tuple(ds)) => {
            let mut shapes = Vec::with_capacity(ss.len());
            let mut strides = Vec::with_capacity(ss.len());
            for (s, d) in ss.iter().zip(ds) {
                let (rs, rd) = compose_tree(a, s, d, digits)?;
                shapes.push(rs);
                strides.push(rd);
            }
            Ok((IntTuple::Tuple(shapes), IntTuple::Tuple(strides)))
        }
        _ => Err(LayoutError::Mismatch {
            op: "composition",
            lhs: shape.to_string(),
            rhs: stride.to_string(),
            relation: "congruent",
        }),
    }
}

/// The functional composition `R = A ∘ B` (CuTe's `composition(A, B)`).
///
/// `A` is evaluated in its extended domain: an index past `size(A)` runs on in A's last mode,
/// as in [`Layout::call`]; that is how `1:1 ∘ 4:1 = 4:1`. The result has B's structure with
/// each leaf of `B` replaced by the modes of A it walks through.
///
/// Post-condition: `shape(B)` is compatible with `shape(R)` and `R(i) == A(B(i))` for every
/// `i < size(B)`. CuTe's divisibility rule accepts pairs for which no layout of its form
/// meets this (`(4,6,8):(2,3,5) ∘ 6:3`, `(6,2):(1,7) ∘ (3,2):(2,3)`); those are
/// `Inadmissible` here.
///
/// ```
/// use tessera_layout::{composition, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// // Transposing a row-major 4x6 tile through a column-major view of it:
/// let r = composition(&p("(6,4):(4,1)"), &p("(4,6):(6,1)")).unwrap();
/// assert_eq!(r.to_string(), "(4,6):(1,4)");
/// // The last mode of A extends: A is evaluated past its size.
/// assert_eq!(composition(&p("1:1"), &p("4:1")).unwrap().to_string(), "4:1");
/// assert_eq!(composition(&p("(8,8):(8,1)"), &p("2:3")).unwrap().to_string(), "2:24");
/// // CuTe returns (2,3):(6,3) here, which is wrong at i = 2: A(B(2)) = A(6) = 7.
/// assert!(composition(&p("(4,6,8):(2,3,5)"), &p("6:3")).is_err());
/// ```
#[doc(alias = "compose")]
pub fn composition(a: &Layout, b: &Layout) -> Result<Layout> {
    composition_parts(a, &[(b.shape(), b.stride())], || Ok(b.clone()))
        .map_err(|e| e.within("composition", || format!("{a} o {b}")))
}

/// [`composition`] with `B` given as congruent shapes and strides: one `(shape, stride)` is
/// `B` itself, several are the modes of `B` (the divides compose with a `(T, C)` they
/// assemble, and need not build or validate it unless the result must be verified point by
/// point, when `make_b` builds it). Errors are labelled `composition` without operands.
pub(crate) fn composition_parts(
    a: &Layout,
    parts: &[(&IntTuple, &IntTuple)],
    make_b: impl FnOnce() -> Result<Layout>,
) -> Result<Layout> {
    const OP: &str = "composition";
    let flat = coalesce_x(a);
    let mut digits = Digits {
        sum: smallvec::smallvec![0; flat.len() - 1],
        pos: false,
        neg: false,
    };
    let (shape, stride) = if let [(s, d)] = parts {
        compose_tree(&flat, s, d, &mut digits)?
    } else {
        let mut shapes = Vec::with_capacity(parts.len());
        let mut strides = Vec::with_capacity(parts.len());
        for (s, d) in parts {
            let (rs, rd) = compose_tree(&flat, s, d, &mut digits)?;
            shapes.push(rs);
            strides.push(rd);
        }
        (IntTuple::Tuple(shapes), IntTuple::Tuple(strides))
    };
    let r = checked_layout(OP, shape, stride)?;
    // Mixed signs only matter where some leaf puts digits below A's last mode: multiples of
    // the last mode's index stride add up exactly whatever their signs.
    let carry_free = (!(digits.pos && digits.neg) || digits.sum.iter().all(|&x| x == 0))
        && digits.sum.iter().zip(&flat).all(|(&sum, &(s, _))| sum < s);
    let leaves: usize = parts.iter().map(|(s, _)| s.leaf_count()).sum();
    if !carry_free && leaves > 1 {
        let b = make_b()?;
        verify_pointwise(a, &b, &r)
            .map_err(|reason| LayoutError::inadmissible(OP, String::new(), reason))?;
    }
    Ok(r)
}

/// Checks `R(i) == A(B(i))` for every `i < size(B)`, if `size(B)` is small enough.
fn verify_pointwise(a: &Layout, b: &Layout, r: &Layout) -> std::result::Result<(), String> {
    if b.size() > BRUTE_FORCE_LIMIT {
        return Err(format!(
            "B's modes overlap in A's modes (their digits may carry) and size(B) = {} is too large to verify",
            b.size()
        ));
    }
    for i in 0..b.size() {
        let bi = b.call(i).map_err(|e| e.to_string())?;
        let want = a.call(bi).map_err(|e| e.to_string())?;
        let got = r.call(i).map_err(|e| e.to_string())?;
        if want != got {
            return Err(format!(
                "distributing over B's modes is not exact: at i = {i}, A(B(i)) = A({bi}) = {want} but the composed layout gives {got}"
            ));
        }
    }
    Ok(())
}

/// Composition with a tiler (CuTe's `composition(A, Tiler)`): a layout tiler composes with
/// `A` as a whole ([`composition`]); `_` leaves `A` as it is; a by-mode tiler `<T0,...,Tk>`
/// composes mode `i` of `A` with `Ti` (recursively) and drops A's modes beyond the tiler.
///
/// Post-condition: where the tiler is a layout, that of [`composition`]; the result has the
/// tiler's rank wherever the tiler is by-mode.
///
/// Errors: `OutOfRange` if a by-mode tiler has more modes than the layout it applies to.
///
/// ```
/// use tessera_layout::{composition_tiler, Layout, Tiler};
/// let a: Layout = "(12,(4,8)):(59,(13,1))".parse().unwrap();
/// let t: Tiler = "<3:4, 8:2>".parse().unwrap();
/// assert_eq!(composition_tiler(&a, &t).unwrap().to_string(), "(3,(2,4)):(236,(26,1))");
/// let t: Tiler = "<_, 4>".parse().unwrap();
/// assert_eq!(composition_tiler(&a, &t).unwrap().to_string(), "(12,4):(59,13)");
/// ```
pub fn composition_tiler(a: &Layout, t: &Tiler) -> Result<Layout> {
    match t {
        Tiler::Layout(b) => composition(a, b),
        Tiler::Skip => Ok(a.clone()),
        Tiler::ByMode(ts) => {
            if ts.len() > a.rank() {
                return Err(LayoutError::OutOfRange {
                    op: "composition",
                    operand: a.to_string(),
                    index: format!("tiler {t} of rank {}", ts.len()),
                    rank: a.rank(),
                });
            }
            let modes = ts
                .iter()
                .zip(a.modes())
                .map(|(ti, ai)| composition_tiler(&ai, ti))
                .collect::<Result<Vec<_>>>()
                .map_err(|e| e.within("composition", || format!("{a} o {t}")))?;
            concat("composition", modes)
                .map_err(|e| e.within("composition", || format!("{a} o {t}")))
        }
    }
}
