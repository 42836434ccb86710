//! Common vectors, element-size recasts, nullspace and layout constructors from shapes.

use crate::error::{mul, LayoutError, Result};
use crate::int_tuple::{weakly_congruent, IntTuple};
use crate::layout::Layout;
use crate::shape::Shape;

use super::coalesce::{coalesce, filter_zeros};
use super::composition::composition;
use super::inverse::right_inverse;
use super::support::{ceil_div, compact_col_major, flat_modes};

/// The largest layout `R` CuTe finds whose indices are consecutive offsets in both `a` and `b`
/// (CuTe's `max_common_layout`): `R = b⁻¹ ∘ (leading stride-1 mode of a ∘ b⁻¹)` with `b⁻¹`
/// the [`right_inverse`] of `b`.
///
/// Where CuTe would compose with an inadmissible prefix of `b⁻¹`, the longest admissible
/// prefix of its modes is used instead, so the answer may be shorter than CuTe's but is never
/// wrong.
///
/// Post-condition: `a(R(i)) == i` and `b(R(i)) == i` for every `i < size(R)`.
///
/// ```
/// use tessera_layout::{max_common_layout, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// let r = max_common_layout(&p("(4,8):(1,4)"), &p("(4,8):(1,8)")).unwrap();
/// assert_eq!(r.to_string(), "4:1");
/// let r = max_common_layout(&p("(4,8):(8,1)"), &p("(4,8):(1,4)")).unwrap();
/// assert_eq!(r.to_string(), "1:0");
/// ```
pub fn max_common_layout(a: &Layout, b: &Layout) -> Result<Layout> {
    let ctx = || format!("{a}, {b}");
    let inv_b = right_inverse(b).map_err(|e| e.within("max_common_layout", ctx))?;
    let trivial = Layout::int(1, 0)?;
    // The longest prefix of inv_b's modes that composes with a.
    let mut common = None;
    for k in (1..=inv_b.rank()).rev() {
        let prefix = if inv_b.is_int() {
            inv_b.clone()
        } else {
            inv_b.take(0, k)?
        };
        if let Ok(c) = composition(a, &prefix) {
            common = Some(coalesce(&c));
            break;
        }
    }
    let Some(common) = common else {
        return Ok(trivial);
    };
    let m0 = common.mode(0)?;
    match (m0.shape().as_int(), m0.stride().as_int()) {
        (Some(s), Some(1)) => Ok(composition(&inv_b, &Layout::int(s, 1)?).unwrap_or(trivial)),
        _ => Ok(trivial),
    }
}

/// The number of leading elements that are consecutive offsets in both `a` and `b` (CuTe's
/// `max_common_vector`): `size(max_common_layout(a, b))`, at least 1.
///
/// Post-condition: `a(R(i)) == b(R(i)) == i` for `i` below the result, `R` the common layout.
///
/// ```
/// use tessera_layout::{max_common_vector, Layout};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// assert_eq!(max_common_vector(&p("(4,8):(1,4)"), &p("(4,8):(1,8)")).unwrap(), 4);
/// assert_eq!(max_common_vector(&p("(8,8):(1,8)"), &p("(8,8):(1,8)")).unwrap(), 64);
/// ```
pub fn max_common_vector(a: &Layout, b: &Layout) -> Result<i64> {
    max_common_layout(a, b)
        .map(|l| l.size())
        .map_err(|e| e.within("max_common_vector", || format!("{a}, {b}")))
}

fn check_factor(op: &'static str, l: &Layout, n: i64) -> Result<()> {
    if n < 1 {
        return Err(LayoutError::inadmissible(
            op,
            format!("{l}, {n}"),
            "the factor must be at least 1",
        ));
    }
    Ok(())
}

/// The layout in units of `n` elements (CuTe's `upcast<N>`): a stride that is a multiple of
/// `n` is divided by it; a mode whose stride divides `n` keeps one element in `n / |stride|`
/// (extent rounded up) at stride `±1`; stride-0 modes are kept.
///
/// Post-condition: `R` is congruent with `L`, and `n * R(c) == L(c')` where `c'` is `c` with
/// the coordinate of every mode whose `|stride| < n` scaled by `n / |stride|`; in particular
/// every offset of `R`, times `n`, is an offset of `L`.
///
/// Errors: `Inadmissible` if a stride and `n` do not divide one another, or `n < 1`.
///
/// ```
/// use tessera_layout::{upcast, Layout};
/// let l: Layout = "(8,(4,2)):(1,(16,8))".parse().unwrap();
/// assert_eq!(upcast(&l, 2).unwrap().to_string(), "(4,(4,2)):(1,(8,4))");
/// ```
#[doc(alias = "recast")]
pub fn upcast(l: &Layout, n: i64) -> Result<Layout> {
    const OP: &str = "upcast";
    check_factor(OP, l, n)?;
    let ctx = || format!("{l}, {n}");
    let mut shapes = Vec::new();
    let mut strides = Vec::new();
    for (s, d) in flat_modes(l) {
        if d == 0 {
            shapes.push(s);
            strides.push(0);
            continue;
        }
        // |d| as u64: i64::MIN has a magnitude but no i64 absolute value.
        let (ad, un) = (d.unsigned_abs(), n.unsigned_abs());
        if ad % un != 0 && un % ad != 0 {
            return Err(LayoutError::inadmissible(
                OP,
                ctx(),
                format!("divisibility: stride {d} and {n} do not divide one another"),
            ));
        }
        if ad >= un {
            // n divides d: the exact quotient, which i64 division gives without overflow
            // for n >= 1.
            shapes.push(s);
            strides.push(d / n);
        } else {
            // |d| divides n: one element in n / |d| is kept, at stride ±1.
            let k = (un / ad) as i64;
            shapes.push(ceil_div(s, k));
            strides.push(d.signum());
        }
    }
    let shape = l.shape().with_leaves(&shapes).expect("same leaf count");
    let stride = l.stride().with_leaves(&strides).expect("same leaf count");
    Layout::new(shape, stride).map_err(|e| e.within(OP, ctx))
}

/// The layout of each element split into `n` (CuTe's `downcast<N>`): a mode of stride `±1`
/// gets `n` times the extent, every other stride is multiplied by `n`.
///
/// Post-condition: `R` is congruent with `L`; `R(c) == n * L(c)` where the coordinate of
/// every stride-`±1` mode of `L` is multiplied by `n`, and those modes fill the `n` offsets
/// in between.
///
/// Errors: `Inadmissible` if no leaf has stride 1 (CuTe: "downcast requires adjacent
/// elements") or `n < 1`; `Overflow`.
///
/// ```
/// use tessera_layout::{downcast, Layout};
/// let l: Layout = "(4,(4,2)):(1,(8,4))".parse().unwrap();
/// assert_eq!(downcast(&l, 2).unwrap().to_string(), "(8,(4,2)):(1,(16,8))");
/// ```
#[doc(alias = "recast")]
pub fn downcast(l: &Layout, n: i64) -> Result<Layout> {
    const OP: &str = "downcast";
    check_factor(OP, l, n)?;
    let ctx = || format!("{l}, {n}");
    if !l.stride().leaves().contains(&1) {
        return Err(LayoutError::inadmissible(
            OP,
            ctx(),
            "no stride-1 mode: downcast requires adjacent elements",
        ));
    }
    let mut shapes = Vec::new();
    let mut strides = Vec::new();
    for (s, d) in flat_modes(l) {
        if d == 1 || d == -1 {
            shapes.push(mul(OP, s, n).map_err(|e| e.within(OP, ctx))?);
            strides.push(d);
        } else {
            shapes.push(s);
            strides.push(mul(OP, d, n).map_err(|e| e.within(OP, ctx))?);
        }
    }
    let shape = l.shape().with_leaves(&shapes).expect("same leaf count");
    let stride = l.stride().with_leaves(&strides).expect("same leaf count");
    Layout::new(shape, stride).map_err(|e| e.within(OP, ctx))
}

/// The modes of `L` that do not move the offset, as a layout into L's (column-major) index
/// space (CuTe's `nullspace`): the stride-0 leaves of `L`, each with the index stride of its
/// position; `1:0` if there is none.
///
/// Post-condition: `L(R(i)) == 0` for every `i < size(R)`, and
/// `size(R) * size(filter(L)) == size(L)`.
///
/// ```
/// use tessera_layout::{nullspace, Layout};
/// let l: Layout = "(2,3,4):(1,0,0)".parse().unwrap();
/// assert_eq!(nullspace(&l).unwrap().to_string(), "(3,4):(2,6)");
/// ```
pub fn nullspace(l: &Layout) -> Result<Layout> {
    let modes = flat_modes(l);
    let flat_shape = IntTuple::flat(modes.iter().map(|m| m.0));
    let index_strides = compact_col_major(&flat_shape, 1)
        .map_err(|e| e.within("nullspace", || l.to_string()))?
        .leaves();
    let picked: Vec<(i64, i64)> = modes
        .iter()
        .zip(index_strides.iter())
        .filter(|((_, d), _)| *d == 0)
        .map(|(&(s, _), &p)| (s, p))
        .collect();
    let out = match picked.as_slice() {
        [] => Layout::new(1, 0),
        [(s, d)] => Layout::new(*s, *d),
        _ => Layout::new(
            IntTuple::flat(picked.iter().map(|m| m.0)),
            IntTuple::flat(picked.iter().map(|m| m.1)),
        ),
    };
    out.map_err(|e| e.within("nullspace", || l.to_string()))
}

/// CuTe's `compact_order`, with ties broken by position: for each leaf `o` of `order` (weakly
/// congruent with `shape`), the sub-shape under it gets column-major strides starting at the
/// product of the sub-shapes that come before it in the order, those with a smaller order
/// value or an equal value at an earlier position. Size-1 modes get stride 0.
///
/// The sub-shapes are then laid out one after another without gaps, so the result is a
/// bijection onto `[0, size)` whatever the order values.
fn compact_order(op: &'static str, shape: &IntTuple, order: &IntTuple) -> Result<IntTuple> {
    if !weakly_congruent(order, shape) {
        return Err(LayoutError::Mismatch {
            op,
            lhs: order.to_string(),
            rhs: shape.to_string(),
            relation: "weakly congruent",
        });
    }
    let mut refs: Vec<(i64, i64)> = Vec::new();
    collect_refs(shape, order, &mut refs)?;
    let mut next = 0usize;
    assign(op, shape, order, &refs, &mut next)
}

fn collect_refs(shape: &IntTuple, order: &IntTuple, out: &mut Vec<(i64, i64)>) -> Result<()> {
    match order {
        IntTuple::Int(o) => out.push((shape.product()?, *o)),
        IntTuple::Tuple(os) => {
            for (s, o) in shape.modes().iter().zip(os) {
                collect_refs(s, o, out)?;
            }
        }
    }
    Ok(())
}

/// Assigns the strides of the sub-shape under the order leaf number `*next` (in the order
/// [`collect_refs`] lists them) and of the leaves after it.
fn assign(
    op: &'static str,
    shape: &IntTuple,
    order: &IntTuple,
    refs: &[(i64, i64)],
    next: &mut usize,
) -> Result<IntTuple> {
    match order {
        IntTuple::Int(o) => {
            let me = *next;
            *next += 1;
            let start = refs
                .iter()
                .enumerate()
                .filter(|&(k, r)| r.1 < *o || (r.1 == *o && k < me))
                .try_fold(1i64, |acc, (_, r)| mul(op, acc, r.0))?;
            compact_col_major(shape, start)
        }
        IntTuple::Tuple(os) => Ok(IntTuple::Tuple(
            shape
                .modes()
                .iter()
                .zip(os)
                .map(|(s, o)| assign(op, s, o, refs, next))
                .collect::<Result<_>>()?,
        )),
    }
}

/// The compact layout of `shape` whose modes are laid out in the order given by `order`
/// (CuTe's `make_ordered_layout`): the mode with the smallest order value is fastest, and
/// of modes with equal order values the one to the left is faster. `order` is weakly
/// congruent with `shape`; a sub-shape under one order value is column-major. Size-1 modes
/// get stride 0 (static CuTe).
///
/// CuTe C++ gives tied modes the same start stride, so its layout for tied orders is not
/// injective (`(2,2)` ordered `(1,1)` would be `(2,2):(1,1)`); breaking ties by position, as
/// PyCuTe does, keeps the promise of the name.
///
/// Post-condition: `R` has the given shape, is a bijection from `[0, size)` onto `[0, size)`,
/// and of two modes of extent above 1, the one with the smaller (order value, position) has
/// the smaller stride.
///
/// ```
/// use tessera_layout::{make_ordered_layout, IntTuple};
/// let t = |s: &str| s.parse::<IntTuple>().unwrap();
/// let l = make_ordered_layout(&t("(2,2,2,2)"), &t("(0,2,3,1)")).unwrap();
/// assert_eq!(l.to_string(), "(2,2,2,2):(1,4,8,2)");
/// let l = make_ordered_layout(&t("(4,(2,3))"), &t("(1,0)")).unwrap();
/// assert_eq!(l.to_string(), "(4,(2,3)):(6,(1,2))");
/// // Ties are broken by position.
/// let l = make_ordered_layout(&t("(2,3,4,2)"), &t("(0,2,3,0)")).unwrap();
/// assert_eq!(l.to_string(), "(2,3,4,2):(1,4,12,2)");
/// ```
pub fn make_ordered_layout(shape: &IntTuple, order: &IntTuple) -> Result<Layout> {
    const OP: &str = "make_ordered_layout";
    Shape(shape.clone()).validate(OP)?;
    let stride = compact_order(OP, shape, order)?;
    Layout::new(shape.clone(), stride).map_err(|e| e.within(OP, || format!("{shape}, {order}")))
}

/// A compact layout with L's shape whose modes are ordered like L's strides (CuTe's
/// `make_layout_like`); stride-0 modes of `L` keep stride 0, and of modes with equal
/// strides the one to the left is faster (as in [`make_ordered_layout`]).
///
/// Post-condition: same shape as `L`; stride 0 exactly where `L` has stride 0 (or extent 1);
/// the other modes form a compact layout (a bijection onto `[0, size(filter(R)))`) ordered by
/// (L's stride, position).
///
/// ```
/// use tessera_layout::{make_layout_like, Layout};
/// let l: Layout = "(2,2,2,2):(0,2,4,1)".parse().unwrap();
/// assert_eq!(make_layout_like(&l).unwrap().to_string(), "(2,2,2,2):(0,2,4,1)");
/// let l: Layout = "(2,3,4,5):(0,42,1,0)".parse().unwrap();
/// assert_eq!(make_layout_like(&l).unwrap().to_string(), "(2,3,4,5):(0,4,1,0)");
/// let l: Layout = "(2,2):(1,1)".parse().unwrap();
/// assert_eq!(make_layout_like(&l).unwrap().to_string(), "(2,2):(1,2)");
/// ```
pub fn make_layout_like(l: &Layout) -> Result<Layout> {
    const OP: &str = "make_layout_like";
    let shape = filter_zeros(l).shape().as_tuple().clone();
    let stride = compact_order(OP, &shape, l.stride())?;
    Layout::new(l.shape().as_tuple().clone(), stride).map_err(|e| e.within(OP, || l.to_string()))
}
