//! Post-condition checkers, one per operation, shared by the test suites.
//!
//! Each takes the operands and the result of an operation and returns `Ok(())` when the
//! result meets the documented post-condition, or `Err(message)` saying where it fails. They
//! work by brute force over the domain, evaluating swizzles bit by bit from their definition
//! (not with [`Swizzle::apply`]), so they are meant for the small layouts of tests.

use tessera_layout::Layout;

use crate::algebra::SliceCoord;
use crate::any::AnyLayout;
use crate::f2::F2Map;
use crate::swizzle::Swizzle;
use crate::swizzled::SwizzledLayout;

/// What a checker returns: `Err` says which condition fails and where.
pub type Verdict = Result<(), String>;

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Verdict {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// `Sw<B,M,S>(x)` from the definition: bit `ZZZ_k` ^= bit `YYY_k`, `YYY` at `M + max(0,S)`,
/// `ZZZ` at `M + max(0,-S)`.
pub fn definition(sw: &Swizzle, x: i64) -> i64 {
    let (b, m, s) = (sw.bits(), sw.base(), sw.shift());
    (0..b).fold(x, |acc, k| {
        let (y, z) = (m + s.max(0) + k, m + (-s).max(0) + k);
        acc ^ (((x >> y) & 1) << z)
    })
}

/// Every offset of a plain or swizzled layout, by the definition.
pub fn offsets(l: &AnyLayout) -> Result<Vec<i64>, String> {
    let sw = l.swizzle();
    (0..l.size())
        .map(|i| {
            let x = l.inner().call(i).map_err(|e| e.to_string())?;
            let y = l
                .offset()
                .checked_add(x)
                .ok_or_else(|| format!("{l}: offset overflows at {i}"))?;
            Ok(definition(&sw, y))
        })
        .collect()
}

fn at(l: &AnyLayout, i: i64) -> Result<i64, String> {
    l.call(i).map_err(|e| format!("evaluating {l} at {i}: {e}"))
}

/// `apply`: the definition, an involution, only `ZZZ` bits changed.
pub fn apply(sw: &Swizzle, x: i64, r: i64) -> Verdict {
    ensure(r == definition(sw, x), || {
        format!("{sw}({x}) = {r}, definition {}", definition(sw, x))
    })?;
    ensure(definition(sw, r) == x, || {
        format!("{sw} is not an involution at {x}")
    })?;
    ensure((r ^ x) & !sw.zzz_mask() == 0, || {
        format!("{sw}({x}) changes bits outside ZZZ")
    })
}

/// `image_bounds`: both ends reached, every offset between them.
pub fn image_bounds(l: &AnyLayout, bounds: (i64, i64)) -> Verdict {
    let offs = offsets(l)?;
    let lo = offs.iter().copied().min().unwrap_or(0);
    let hi = offs.iter().copied().max().unwrap_or(0);
    ensure(bounds == (lo, hi), || {
        format!("{l}: bounds {bounds:?}, image spans ({lo}, {hi})")
    })
}

/// `composition(A, B)` (swizzled `A`, plain `B`): `R(i) == A(B(i))` for `i < size(B)`.
pub fn composition(a: &SwizzledLayout, b: &Layout, r: &SwizzledLayout) -> Verdict {
    let (a, r) = (AnyLayout::from(a.clone()), AnyLayout::from(r.clone()));
    ensure(r.size() == b.size(), || {
        format!("size of {r} is not that of {b}")
    })?;
    for i in 0..b.size() {
        let bi = b.call(i).map_err(|e| e.to_string())?;
        let (x, y) = (at(&r, i)?, at(&a, bi)?);
        ensure(x == y, || format!("{r}({i}) = {x} but {a}({b}({i})) = {y}"))?;
    }
    Ok(())
}

/// `right_inverse`: `A(R(i)) == i` for every `i < size(R)`.
pub fn right_inverse(a: &SwizzledLayout, r: &SwizzledLayout) -> Verdict {
    let (a, r) = (AnyLayout::from(a.clone()), AnyLayout::from(r.clone()));
    for i in 0..r.size() {
        let x = at(&a, at(&r, i)?)?;
        ensure(x == i, || format!("{a}({r}({i})) = {x}"))?;
    }
    Ok(())
}

/// `left_inverse`: `R(A(i)) == i` for every `i < size(A)`.
pub fn left_inverse(a: &SwizzledLayout, r: &SwizzledLayout) -> Verdict {
    let (a, r) = (AnyLayout::from(a.clone()), AnyLayout::from(r.clone()));
    for i in 0..a.size() {
        let x = at(&r, at(&a, i)?)?;
        ensure(x == i, || format!("{r}({a}({i})) = {x}"))?;
    }
    Ok(())
}

/// `downcast(A, n)`: the image of `R` is `{ n*x + j : x in image(A), j < n }` (as multisets).
pub fn downcast(a: &SwizzledLayout, n: i64, r: &SwizzledLayout) -> Verdict {
    let mut want: Vec<i64> = offsets(&a.clone().into())?
        .into_iter()
        .flat_map(|x| (0..n).map(move |j| n * x + j))
        .collect();
    let mut got = offsets(&r.clone().into())?;
    want.sort_unstable();
    got.sort_unstable();
    ensure(want == got, || {
        format!("the image of {r} is not {a}'s in units of 1/{n}")
    })
}

/// `slice_and_offset(A, c)`: `A(full) == R(kept) + offset` for every full coordinate that
/// agrees with the fixed part of `c`, taken in order (kept coordinates colexicographic).
pub fn slice_and_offset(a: &AnyLayout, c: &SliceCoord, r: &AnyLayout, offset: i64) -> Verdict {
    // Enumerate A's coordinates; the ones matching c's fixed indices, in A's index order,
    // are R's coordinates 0, 1, 2, ... (the kept modes keep their relative order).
    let flat = crate::extent::flat_modes(a.inner());
    let fixed = fixed_leaves(c, a.inner().shape(), flat.len())?;
    let mut k = 0i64;
    for i in 0..a.size() {
        let mut rest = i;
        let mut matches = true;
        for (leaf, &(n, _)) in flat.iter().enumerate() {
            let ci = rest % n;
            rest /= n;
            if let Some(f) = fixed[leaf] {
                matches &= f == ci;
            }
        }
        if !matches {
            continue;
        }
        let (x, y) = (at(a, i)?, at(r, k)?);
        ensure(x == y + offset, || {
            format!("{a}({i}) = {x} but {r}({k}) + {offset} = {}", y + offset)
        })?;
        k += 1;
    }
    ensure(k == r.size(), || {
        format!("{r} has size {} but {k} coordinates match {c}", r.size())
    })
}

/// For each flat leaf of `shape`, the fixed coordinate `c` gives it, if any.
fn fixed_leaves(
    c: &SliceCoord,
    shape: &tessera_layout::IntTuple,
    leaves: usize,
) -> Result<Vec<Option<i64>>, String> {
    use tessera_layout::IntTuple;
    let mut out = Vec::with_capacity(leaves);
    fn go(c: &SliceCoord, s: &IntTuple, out: &mut Vec<Option<i64>>) -> Result<(), String> {
        match (c, s) {
            (SliceCoord::All, _) => out.extend(std::iter::repeat(None).take(s.leaf_count())),
            (SliceCoord::Index(i), _) => {
                // an index into a whole sub-mode: split colexicographically over its leaves
                let mut rest = *i;
                for n in s.leaves() {
                    out.push(Some(rest % n));
                    rest /= n;
                }
            }
            (SliceCoord::Tuple(cs), IntTuple::Tuple(ss)) if cs.len() == ss.len() => {
                for (ci, si) in cs.iter().zip(ss) {
                    go(ci, si, out)?;
                }
            }
            _ => return Err(format!("{c} does not fit {s}")),
        }
        Ok(())
    }
    go(c, shape, &mut out)?;
    Ok(out)
}

/// `F2Map::of(L)`: `f(i) == L(i)` for every `i`.
pub fn f2_map(l: &AnyLayout, f: &F2Map) -> Verdict {
    for (i, x) in offsets(l)?.into_iter().enumerate() {
        ensure(f.apply(i as i64) == x, || {
            format!(
                "F2 map of {l} gives {} at {i}, layout {x}",
                f.apply(i as i64)
            )
        })?;
    }
    Ok(())
}

/// `is_bijective(L)`: the answer is whether the offsets are distinct and fill
/// `[min, min + size)`.
pub fn is_bijective(l: &AnyLayout, answer: bool) -> Verdict {
    let mut offs = offsets(l)?;
    offs.sort_unstable();
    let lo = offs.first().copied().unwrap_or(0);
    let truth = offs.iter().enumerate().all(|(k, &x)| x == lo + k as i64);
    ensure(answer == truth, || {
        format!("is_bijective({l}) = {answer}, enumeration says {truth}")
    })
}
