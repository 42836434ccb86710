//! `composition`: `R = A ∘ B`, the layout with `R(i) = A(B(i))`.
//!
//! The algorithm is CuTe's: `A` is flattened and coalesced keeping its extended domain
//! (`coalesce_x`), every leaf `n:d` of `B` is composed with it by dividing `d` out of A's modes
//! from the left, and the results take B's place in B's structure.
//!
//! CuTe's divisibility test is weak, so it returns wrong layouts for some inputs, and strict
//! enough to miss layouts that exist. Here:
//!
//! * per leaf: when the step `|d|` is below a mode's extent `s` and does not divide it, the
//!   walk through that mode is not periodic, so CuTe's layout is exact when all `n` steps fit
//!   inside the mode (`n <= ceil(s / |d|)`) and otherwise only by luck (`(4,6,8):(2,3,5) ∘
//!   6:3`, where CuTe is wrong; `(10,1):(0,1) ∘ 4:6`, where it is right). Such a layout, and
//!   a leaf CuTe's rule has none for (`(4,8):(1,5) ∘ 2:5 = 2:6`), is settled point by point:
//!   the values `A(k*d)`, `k < n`, fix the only coalesced layout that can take them, which is
//!   built and checked (for `n` up to 2^16).
//! * across leaves: `A(x + y) = A(x) + A(y)` when adding the mixed-radix digits of `x` and
//!   `y` (in A's modes) does not carry and, below A's last mode, all have one sign (C++
//!   division truncates, so a negative index has negative digits). Each leaf's
//!   result records the largest digit it can put in each mode of A; the digits of all leaves
//!   must add up below the mode's extent (`(6,2):(1,7) ∘ (3,2):(2,3)` fails this). When that
//!   sufficient test fails, the result is checked point by point if `size(B)` is small, and
//!   rejected otherwise.
//!
//! Each leaf's function is fixed by B's shape (a layout with B's shape evaluates leaf by leaf),
//! so within those bounds a refusal means that no layout with B's shape is `A ∘ B`, and the
//! message gives the index where every candidate fails.

use crate::error::{mul, LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

use smallvec::SmallVec;

use super::support::{ceil_div, checked_layout, concat, for_each_leaf, Modes};
use super::tiler::Tiler;

/// Largest `size(B)` for which a composition that fails the cheap exactness test is verified
/// point by point instead of being rejected.
const BRUTE_FORCE_LIMIT: i64 = 1 << 16;

/// Largest leaf `n:d` of B whose composition is built point by point when CuTe's rule has no
/// exact layout for it.
const LEAF_LIMIT: i64 = 1 << 16;

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
    /// Whether some leaf was built point by point, so its digits are not known.
    unknown: bool,
}

/// What CuTe's rule makes of one leaf `n:d` of B.
enum Leaf {
    /// The leaf's composition, exact by the per-leaf test of the module documentation.
    Exact(IntTuple, IntTuple),
    /// CuTe's layout for the leaf, which its weak divisibility rule accepts but the per-leaf
    /// test cannot vouch for: right only if it takes the values `A(k*d)`.
    Candidate(IntTuple, IntTuple),
    /// CuTe's rule has no layout for the leaf; the text says which of its conditions fails.
    NoRule(String),
}

/// Composes flat `A` (from [`coalesce_x`]) with the leaf `n:d` by CuTe's rule, returning the
/// result's shape and stride (an integer or a flat tuple) and recording the digits it uses.
fn compose_leaf(a: &[(i64, i64)], n: i64, d: i64, digits: &mut Digits) -> Result<Leaf> {
    const OP: &str = "composition";
    if d == 0 {
        return Ok(Leaf::Exact(IntTuple::Int(n), IntTuple::Int(0)));
    }
    if n == 1 {
        // Only A(0) = 0 is reached. Run the walk for CuTe's stride of the size-1 result
        // (it is never used); if that stride overflows, 0 serves as well.
        let st = walk_stride(a, d).unwrap_or(0);
        return Ok(Leaf::Exact(IntTuple::Int(1), IntTuple::Int(st)));
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
    // Set when CuTe's weak rule lets through a walk that the per-leaf test cannot vouch for.
    let mut suspect = false;
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
            return Ok(Leaf::NoRule(format!(
                "CuTe's stride divisibility fails: the step {ad} is neither a multiple nor a divisor of the mode extent {s} of A"
            )));
        }
        // ad < s: the step walks inside this mode.
        let next_shape = ceil_div(s, ad);
        if rest_shape == 1 {
            rest_stride = sign;
            continue;
        }
        // The walk through the mode is not periodic; CuTe's layout is right only by luck.
        suspect |= s % ad != 0 && rest_shape > next_shape;
        let new_shape = next_shape.min(rest_shape);
        if rest_shape % new_shape != 0 {
            return Ok(Leaf::NoRule(format!(
                "CuTe's shape divisibility fails: {rest_shape} steps do not split into runs of {new_shape}"
            )));
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
    let (shape, stride) = if shapes.len() == 1 {
        (IntTuple::Int(shapes[0]), IntTuple::Int(strides[0]))
    } else {
        (IntTuple::flat(shapes), IntTuple::flat(strides))
    };
    Ok(if suspect {
        Leaf::Candidate(shape, stride)
    } else {
        Leaf::Exact(shape, stride)
    })
}

/// The unique coalesced flat modes `M` with `M(k) == f(k)` for every `k < n` (`n >= 2`), or
/// why no layout of size `n` takes the values `f(0), ..., f(n-1)`, with the index where the
/// values break every layout's pattern.
///
/// Why the answer is unique: a coalesced layout's first mode `s0:d0` has `d0 = f(1)` and ends
/// at the first `k` with `f(k) != k*d0` (were `f(s0) == s0*d0`, the next mode would have merged
/// into it); each further mode follows from the index stride reached so far in the same way.
/// So the modes are forced, and if they do not reproduce `f`, no layout does.
fn infer_modes(
    n: i64,
    f: &mut impl FnMut(i64) -> Result<i64>,
) -> Result<std::result::Result<Modes, String>> {
    let v0 = f(0)?;
    if v0 != 0 {
        return Ok(Err(format!(
            "the value at k = 0 is {v0}, and every layout maps 0 to 0"
        )));
    }
    let mut modes = Modes::new();
    let mut p = 1i64;
    while p < n {
        let d = f(p)?;
        let mut s = 2i64;
        while let Some(sp) = s.checked_mul(p).filter(|&sp| sp < n) {
            if s.checked_mul(d) != Some(f(sp)?) {
                break;
            }
            s += 1;
        }
        let reach = s.checked_mul(p).filter(|&r| n % r == 0);
        let Some(reach) = reach else {
            let mut shown = Vec::new();
            for k in 0..n.min(12) {
                shown.push(f(k)?.to_string());
            }
            if n > 12 {
                shown.push("...".to_string());
            }
            let before = if modes.is_empty() {
                String::new()
            } else {
                format!("the modes {} and then ", show_modes(&modes))
            };
            return Ok(Err(format!(
                "the values are {}; a layout taking them has {before}a mode of stride {d} from k = {p} to k = {}, but {p} * {s} does not divide {n}",
                shown.join(", "),
                p.saturating_mul(s)
            )));
        };
        modes.push((s, d));
        p = reach;
    }
    for k in 0..n {
        let want = f(k)?;
        let got = eval_flat(&modes, k);
        if got != Some(want) {
            return Ok(Err(format!(
                "at k = {k} the value is {want}, where the only candidate {} gives {}",
                show_modes(&modes),
                got.map_or("an overflow".to_string(), |g| g.to_string())
            )));
        }
    }
    Ok(Ok(modes))
}

/// `M(k)` for flat modes `M` and `0 <= k < size(M)`, `None` on overflow.
fn eval_flat(modes: &[(i64, i64)], k: i64) -> Option<i64> {
    let mut rest = k;
    let mut acc = 0i64;
    for &(s, d) in modes {
        acc = acc.checked_add((rest % s).checked_mul(d)?)?;
        rest /= s;
    }
    Some(acc)
}

fn show_modes(modes: &[(i64, i64)]) -> String {
    match modes {
        [(s, d)] => format!("{s}:{d}"),
        _ => {
            let s: Vec<String> = modes.iter().map(|m| m.0.to_string()).collect();
            let d: Vec<String> = modes.iter().map(|m| m.1.to_string()).collect();
            format!("({}):({})", s.join(","), d.join(","))
        }
    }
}

/// Composes A with the leaf `n:d`: CuTe's layout where it is exact, else the layout that
/// takes the values `A(k*d)`, found point by point (it is unique, see [`infer_modes`]).
fn compose_leaf_exact(
    a: &Layout,
    flat: &[(i64, i64)],
    n: i64,
    d: i64,
    digits: &mut Digits,
) -> Result<(IntTuple, IntTuple)> {
    const OP: &str = "composition";
    let reason = match compose_leaf(flat, n, d, digits)? {
        Leaf::Exact(s, t) => return Ok((s, t)),
        Leaf::Candidate(s, t) => {
            if n <= LEAF_LIMIT {
                let c = Layout::from_parts_unchecked(s.clone(), t.clone());
                let mut exact = true;
                for k in 0..n {
                    if c.call(k).ok() != Some(a.call(mul(OP, k, d)?)?) {
                        exact = false;
                        break;
                    }
                }
                if exact {
                    digits.unknown = true;
                    return Ok((s, t));
                }
            }
            "CuTe's rule walks a mode whose extent the step does not divide".to_string()
        }
        Leaf::NoRule(reason) => reason,
    };
    if n > LEAF_LIMIT {
        return Err(LayoutError::inadmissible(
            OP,
            String::new(),
            format!(
                "for the leaf {n}:{d} of B {reason}, and with {n} elements (above {LEAF_LIMIT}) the composition is not built point by point; a layout may still exist"
            ),
        ));
    }
    digits.unknown = true;
    let mut f = |k: i64| a.call(mul(OP, k, d)?);
    match infer_modes(n, &mut f)? {
        Ok(modes) => Ok(match modes.as_slice() {
            [(s, t)] => (IntTuple::Int(*s), IntTuple::Int(*t)),
            m => (
                IntTuple::flat(m.iter().map(|x| x.0)),
                IntTuple::flat(m.iter().map(|x| x.1)),
            ),
        }),
        Err(why) => Err(LayoutError::inadmissible(
            OP,
            String::new(),
            format!(
                "no layout of size {n} takes the values A(k*{d}) of the leaf {n}:{d} of B: {why}"
            ),
        )),
    }
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
    a: &Layout,
    flat: &[(i64, i64)],
    shape: &IntTuple,
    stride: &IntTuple,
    digits: &mut Digits,
) -> Result<(IntTuple, IntTuple)> {
    match (shape, stride) {
        (IntTuple::Int(n), IntTuple::Int(d)) => compose_leaf_exact(a, flat, *n, *d, digits),
        (IntTuple::Tuple(ss), IntTuple::Tuple(ds)) => {
            let mut shapes = Vec::with_capacity(ss.len());
            let mut strides = Vec::with_capacity(ss.len());
            for (s, d) in ss.iter().zip(ds) {
                let (rs, rd) = compose_tree(a, flat, s, d, digits)?;
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
/// meets this (`(4,6,8):(2,3,5) ∘ 6:3`, `(6,2):(1,7) ∘ (3,2):(2,3)`) and refuses some for
/// which a layout exists (`(4,8):(1,5) ∘ 2:5 = 2:6`); here the first are refused and the
/// second computed, point by point (see the module documentation).
///
/// Errors: `Inadmissible` when no layout with B's shape takes the values `A(B(i))` (the
/// message names the index where the only candidate fails), or, for a leaf of B above
/// 2^16 elements or a `B` above 2^16 elements whose leaves may interact, when the layout is
/// not established point by point (the message says so: one may exist); `Overflow` when
/// `A(B(i))` leaves the `i64` range, or the layout built for B's shape does (its leaves'
/// offsets add up past `i64` where those of `A ∘ B` do not, so no layout is `A ∘ B`).
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
/// // CuTe's divisibility rule refuses this one, but A(0) = 0 and A(5) = 6 is a layout.
/// assert_eq!(composition(&p("(4,8):(1,5)"), &p("2:5")).unwrap().to_string(), "2:6");
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
        unknown: false,
    };
    let (shape, stride) = if let [(s, d)] = parts {
        compose_tree(a, &flat, s, d, &mut digits)?
    } else {
        let mut shapes = Vec::with_capacity(parts.len());
        let mut strides = Vec::with_capacity(parts.len());
        for (s, d) in parts {
            let (rs, rd) = compose_tree(a, &flat, s, d, &mut digits)?;
            shapes.push(rs);
            strides.push(rd);
        }
        (IntTuple::Tuple(shapes), IntTuple::Tuple(strides))
    };
    let r = checked_layout(OP, shape, stride)?;
    // Mixed signs only matter where some leaf puts digits below A's last mode: multiples of
    // the last mode's index stride add up exactly whatever their signs.
    let carry_free = !digits.unknown
        && (!(digits.pos && digits.neg) || digits.sum.iter().all(|&x| x == 0))
        && digits.sum.iter().zip(&flat).all(|(&sum, &(s, _))| sum < s);
    let leaves: usize = parts.iter().map(|(s, _)| s.leaf_count()).sum();
    if !carry_free && leaves > 1 {
        let b = make_b()?;
        verify_pointwise(a, &b, &r)?;
    }
    Ok(r)
}

/// Checks `R(i) == A(B(i))` for every `i < size(B)`, if `size(B)` is small enough.
///
/// Each leaf of `R` is exact on its own axis (checked, or by the per-leaf test), and a layout
/// with B's shape is the sum of its leaves' functions, which those axes fix; so a point where
/// `R` fails is a point where every layout with B's shape fails.
fn verify_pointwise(a: &Layout, b: &Layout, r: &Layout) -> Result<()> {
    const OP: &str = "composition";
    if b.size() > BRUTE_FORCE_LIMIT {
        return Err(LayoutError::inadmissible(OP, String::new(), format!(
            "the leaves of B may carry into one another in A's modes, and with size(B) = {} (above {BRUTE_FORCE_LIMIT}) the sum of their compositions is not checked point by point; a layout may still exist",
            b.size()
        )));
    }
    for i in 0..b.size() {
        // An evaluation that overflows is an overflow of the composition.
        let bi = b.call(i)?;
        let want = a.call(bi)?;
        let got = r.call(i)?;
        if want != got {
            return Err(LayoutError::inadmissible(OP, String::new(), format!(
                "no layout with B's shape is A o B: each leaf of B composes alone, but at i = {i} A(B(i)) = A({bi}) = {want} while the sum of the leaves' compositions, {r}, gives {got}"
            )));
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
