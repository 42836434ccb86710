//! Post-condition checkers, one per operation, shared by the test suites.
//!
//! Each takes the operands and the result of an operation and returns `Ok(())` when the
//! result meets the post-condition the operation documents, or `Err(message)` saying where it
//! fails. They work by brute force over the domain (every index below the size), so they are
//! meant for the small layouts of tests. They call other operations only to build the
//! reference operands the post-condition names (the complement a divide uses, for example),
//! and those have their own checkers.

use std::collections::HashSet;

use crate::int_tuple::{compatible, congruent, IntTuple};
use crate::layout::Layout;

use super::tiler::Tiler;

/// What a checker returns: `Err` says which condition fails and where.
pub type Verdict = Result<(), String>;

fn at(l: &Layout, i: i64) -> Result<i64, String> {
    l.call(i).map_err(|e| format!("evaluating {l} at {i}: {e}"))
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Verdict {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// Whether `l` maps `[0, size)` to distinct offsets.
pub fn is_injective(l: &Layout) -> bool {
    let mut seen = HashSet::new();
    (0..l.size()).all(|i| l.call(i).map(|o| seen.insert(o)).unwrap_or(false))
}

/// `R(i) == L(i)` for every `i < size(L)`, and equal sizes.
pub fn same_function(l: &Layout, r: &Layout) -> Verdict {
    ensure(l.size() == r.size(), || {
        format!(
            "size {} of {r} differs from size {} of {l}",
            r.size(),
            l.size()
        )
    })?;
    for i in 0..l.size() {
        let (a, b) = (at(l, i)?, at(r, i)?);
        ensure(a == b, || {
            format!("{r} differs from {l} at {i}: {b} != {a}")
        })?;
    }
    Ok(())
}

/// `coalesce`: same size, depth at most 1, `R(i) == L(i)` for `i < size(L)`.
pub fn coalesce(l: &Layout, r: &Layout) -> Verdict {
    ensure(r.depth() <= 1, || format!("{r} has depth {}", r.depth()))?;
    same_function(l, r)
}

/// `coalesce(L, profile)`: the same function; where the profile is a tuple, `R` keeps L's
/// rank and each mode under the profile is checked recursively, the others are unchanged.
pub fn coalesce_profile(l: &Layout, profile: &IntTuple, r: &Layout) -> Verdict {
    match profile {
        IntTuple::Int(_) => coalesce(l, r),
        IntTuple::Tuple(ps) => {
            ensure(!r.is_int() && r.rank() == l.rank(), || {
                format!("{r} does not keep the rank {} of {l}", l.rank())
            })?;
            for (i, (lm, rm)) in l.modes().zip(r.modes()).enumerate() {
                match ps.get(i) {
                    Some(p) => coalesce_profile(&lm, p, &rm)?,
                    None => ensure(lm == rm, || format!("mode {i} changed: {lm} -> {rm}"))?,
                }
            }
            same_function(l, r)
        }
    }
}

/// `filter_zeros`: same strides; extent 1 exactly where the stride is 0, else unchanged.
pub fn filter_zeros(l: &Layout, r: &Layout) -> Verdict {
    ensure(
        congruent(l.shape(), r.shape()) && l.stride() == r.stride(),
        || format!("{r} is not {l} with some extents replaced"),
    )?;
    for ((s, d), rs) in l
        .shape()
        .leaves()
        .iter()
        .zip(l.stride().leaves().iter())
        .zip(r.shape().leaves().iter())
    {
        let want = if *d == 0 { 1 } else { *s };
        ensure(*rs == want, || {
            format!("extent {s} with stride {d} became {rs} in {r}")
        })?;
    }
    Ok(())
}

/// `filter`: `R` is the coalesced function of L's non-broadcast modes, with no stride-0 mode
/// unless `R` is `1:0`.
pub fn filter(l: &Layout, r: &Layout) -> Verdict {
    let fz = super::filter_zeros(l);
    filter_zeros(l, &fz)?;
    coalesce(&fz, r)?;
    let trivial = r.size() == 1 && r.stride().leaves().iter().all(|&d| d == 0);
    ensure(trivial || !r.stride().leaves().contains(&0), || {
        format!("{r} still has a stride-0 mode")
    })
}

/// `composition(A, B)`: `shape(B)` compatible with `shape(R)`, and `R(i) == A(B(i))` for every
/// `i < size(B)` (A in its extended domain).
pub fn composition(a: &Layout, b: &Layout, r: &Layout) -> Verdict {
    ensure(compatible(b.shape(), r.shape()), || {
        format!("shape of {b} is not compatible with shape of {r}")
    })?;
    for i in 0..b.size() {
        let bi = at(b, i)?;
        let (want, got) = (at(a, bi)?, at(r, i)?);
        ensure(want == got, || {
            format!("{a} o {b} = {r} fails at i = {i}: A(B(i)) = A({bi}) = {want}, R(i) = {got}")
        })?;
    }
    Ok(())
}

/// `composition(A, tiler)`: a layout item is checked as [`composition`]; `_` keeps the mode;
/// a by-mode tiler gives the tiler's rank, mode by mode.
pub fn composition_tiler(a: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    match t {
        Tiler::Layout(b) => composition(a, b, r),
        Tiler::Skip => ensure(a == r, || format!("`_` changed {a} into {r}")),
        Tiler::ByMode(ts) => {
            ensure(!r.is_int() && r.rank() == ts.len(), || {
                format!("{r} does not have the rank {} of the tiler {t}", ts.len())
            })?;
            for (i, ti) in ts.iter().enumerate() {
                let (am, rm) = (a.mode(i).map_err(|e| e.to_string())?, r.mode(i).unwrap());
                composition_tiler(&am, ti, &rm)?;
            }
            Ok(())
        }
    }
}

/// `complement(L, cotarget)`: `R` flat with positive strictly increasing strides (or `1:0`);
/// `(filter(L), R)` injective (hence `R(j) != L(i)` except at 0); and the largest
/// `extent * |stride|` among the modes of `(filter(L), R)` reaches `size(cotarget)`.
pub fn complement(l: &Layout, cotarget: &IntTuple, r: &Layout) -> Verdict {
    ensure(r.depth() <= 1, || format!("{r} is not flat"))?;
    let rm: Vec<(i64, i64)> = r
        .shape()
        .leaves()
        .iter()
        .copied()
        .zip(r.stride().leaves().iter().copied())
        .collect();
    let trivial = rm == [(1, 0)];
    if !trivial {
        for w in rm.windows(2) {
            ensure(w[0].1 < w[1].1, || {
                format!("strides of {r} do not increase")
            })?;
        }
        for &(s, d) in &rm {
            ensure(s > 1 && d > 0, || format!("{r} has a mode {s}:{d}"))?;
        }
    }
    let f = super::filter(l);
    let both = Layout::concat([f.clone(), r.clone()]).map_err(|e| e.to_string())?;
    ensure(is_injective(&both), || {
        format!("({f}, {r}) is not injective")
    })?;
    let target = cotarget.product().map_err(|e| e.to_string())?;
    let reach = f
        .shape()
        .leaves()
        .iter()
        .zip(f.stride().leaves().iter())
        .chain(r.shape().leaves().iter().zip(r.stride().leaves().iter()))
        .map(|(s, d)| s.saturating_mul(d.saturating_abs()))
        .fold(1, i64::max);
    ensure(reach >= target, || {
        format!("({f}, {r}) reaches only {reach}, below the cotarget {target}")
    })
}

/// `right_inverse(L)`: `L(R(i)) == i` for every `i < size(R)`.
pub fn right_inverse(l: &Layout, r: &Layout) -> Verdict {
    for i in 0..r.size() {
        let ri = at(r, i)?;
        let back = at(l, ri)?;
        ensure(back == i, || format!("L(R({i})) = L({ri}) = {back}"))?;
    }
    Ok(())
}

/// `left_inverse(L)`: `R(L(i)) == i` for every `i < size(L)` when `L` is injective (nothing
/// is promised otherwise).
pub fn left_inverse(l: &Layout, r: &Layout) -> Verdict {
    if !is_injective(l) {
        return Ok(());
    }
    for i in 0..l.size() {
        let li = at(l, i)?;
        let back = at(r, li)?;
        ensure(back == i, || format!("R(L({i})) = R({li}) = {back}"))?;
    }
    Ok(())
}

/// `logical_divide(L, T)`: for a layout tiler, `R` has rank 2, `shape(T)` and `shape(C)` are
/// compatible with its modes, and `R(i, j) == L(T(i) + C(j))` where
/// `C = complement(T, shape(coalesce(L)))`. `_` keeps the mode; by-mode tilers mode by mode,
/// L's further modes unchanged.
pub fn logical_divide(l: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    match t {
        Tiler::Layout(tl) => {
            let cot = super::coalesce(l).shape().as_tuple().clone();
            let c = super::complement(tl, &cot).map_err(|e| e.to_string())?;
            ensure(!r.is_int() && r.rank() == 2, || {
                format!("{r} is not rank 2")
            })?;
            let (r0, r1) = (r.mode(0).unwrap(), r.mode(1).unwrap());
            ensure(
                compatible(tl.shape(), r0.shape()) && compatible(c.shape(), r1.shape()),
                || format!("modes of {r} do not refine ({tl}, {c})"),
            )?;
            for j in 0..c.size() {
                let cj = at(&c, j)?;
                for i in 0..tl.size() {
                    let x = at(tl, i)?
                        .checked_add(cj)
                        .ok_or_else(|| "overflow in the checker".to_string())?;
                    let want = at(l, x)?;
                    let coord = IntTuple::flat([i, j]);
                    let got = r.eval(&coord).map_err(|e| e.to_string())?;
                    ensure(want == got, || {
                        format!("{r} at ({i},{j}) is {got}, L(T({i}) + C({j})) = L({x}) = {want}")
                    })?;
                }
            }
            Ok(())
        }
        _ => by_mode(l, t, r, &logical_divide),
    }
}

/// The by-mode part shared by divide and product checkers.
fn by_mode(
    l: &Layout,
    t: &Tiler,
    r: &Layout,
    each: &impl Fn(&Layout, &Tiler, &Layout) -> Verdict,
) -> Verdict {
    match t {
        Tiler::Layout(_) => each(l, t, r),
        Tiler::Skip => ensure(l == r, || format!("`_` changed {l} into {r}")),
        Tiler::ByMode(ts) => {
            // A by-mode tiler makes a tuple even of an integral layout (CuTe's make_layout
            // of the transformed modes).
            ensure(r.rank() == l.rank(), || {
                format!("{r} does not keep the rank of {l}")
            })?;
            for (i, (lm, rm)) in l.modes().zip(r.modes()).enumerate() {
                match ts.get(i) {
                    Some(ti) => by_mode(&lm, ti, &rm, each)?,
                    None => ensure(lm == rm, || format!("mode {i} changed: {lm} -> {rm}"))?,
                }
            }
            Ok(())
        }
    }
}

fn leaf_pairs(l: &Layout) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = l
        .shape()
        .leaves()
        .iter()
        .copied()
        .zip(l.stride().leaves().iter().copied())
        .collect();
    v.sort_unstable();
    v
}

/// Size of the tile part of a zipped result: the product of the tiler's layout items'
/// sizes (a `_` item takes the size of mode 0 of its mode).
fn tile_size(l: &Layout, t: &Tiler, logical: &Layout) -> Result<i64, String> {
    match t {
        Tiler::Layout(_) | Tiler::Skip => Ok(logical.mode(0).map_err(|e| e.to_string())?.size()),
        Tiler::ByMode(ts) => {
            let mut n = 1i64;
            for (i, ti) in ts.iter().enumerate() {
                let lm = l.mode(i).map_err(|e| e.to_string())?;
                let gm = logical.mode(i).map_err(|e| e.to_string())?;
                n = n.saturating_mul(tile_size(&lm, ti, &gm)?);
            }
            Ok(n)
        }
    }
}

/// `R` regroups the modes of `logical` (same leaves, `shape:stride` pairs as a multiset) with
/// a first part of the tile's size: the post-condition of the zipped, tiled and flat forms.
fn regrouped(l: &Layout, t: &Tiler, logical: &Layout, r: &Layout, tile_first: bool) -> Verdict {
    ensure(leaf_pairs(logical) == leaf_pairs(r), || {
        format!("{r} does not have the modes of {logical}")
    })?;
    ensure(r.size() == logical.size(), || {
        format!("size of {r} differs from {logical}")
    })?;
    if tile_first {
        let want = tile_size(l, t, logical)?;
        let got = r.mode(0).map_err(|e| e.to_string())?.size();
        ensure(want == got, || {
            format!("mode 0 of {r} has size {got}, the tile {want}")
        })?;
    }
    Ok(())
}

/// `zipped_divide(L, T)`: rank 2, mode 0 one whole tile, the modes of `logical_divide(L, T)`
/// (itself checked) regrouped.
pub fn zipped_divide(l: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    let ld = super::logical_divide(l, t).map_err(|e| e.to_string())?;
    logical_divide(l, t, &ld)?;
    ensure(!r.is_int() && r.rank() == 2, || {
        format!("{r} is not rank 2")
    })?;
    regrouped(l, t, &ld, r, true)
}

/// `tiled_divide(L, T)`: mode 0 of `zipped_divide`, then the modes of its mode 1.
pub fn tiled_divide(l: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    let z = super::zipped_divide(l, t).map_err(|e| e.to_string())?;
    zipped_divide(l, t, &z)?;
    let z1 = z.mode(1).unwrap();
    ensure(
        r.rank() == 1 + z1.rank() && r.mode(0).ok() == z.mode(0).ok(),
        || format!("{r} is not mode 0 of {z} followed by the modes of its mode 1"),
    )?;
    regrouped(l, t, &z, r, false)
}

/// `flat_divide(L, T)`: the modes of both modes of `zipped_divide`, in order.
pub fn flat_divide(l: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    let z = super::zipped_divide(l, t).map_err(|e| e.to_string())?;
    zipped_divide(l, t, &z)?;
    let want = z.mode(0).unwrap().rank() + z.mode(1).unwrap().rank();
    ensure(r.rank() == want, || {
        format!("{r} does not have rank {want}")
    })?;
    regrouped(l, t, &z, r, false)
}

/// `logical_product(A, B)`: for a layout `B`, rank 2, mode 0 is `A`, mode 1 is `C ∘ B` with
/// `C = complement(A, size(A)*cosize(B))` (compatible shapes, pointwise equal), and `R` is
/// injective when `A` and `B` are, `B`'s strides are non-negative and the copies fit in the
/// holes (`size(C) >= cosize(B)`). By-mode tilers mode by mode.
pub fn logical_product(a: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    match t {
        Tiler::Layout(b) => {
            ensure(!r.is_int() && r.rank() == 2, || {
                format!("{r} is not rank 2")
            })?;
            let (r0, r1) = (r.mode(0).unwrap(), r.mode(1).unwrap());
            ensure(&r0 == a, || format!("mode 0 of {r} is not {a}"))?;
            let bound = a.size().saturating_mul(b.cosize());
            let c = super::complement(a, &IntTuple::Int(bound)).map_err(|e| e.to_string())?;
            composition(&c, b, &r1)?;
            if copies_fit(a, b, &c) {
                ensure(is_injective(r), || format!("{r} is not injective"))?;
            }
            Ok(())
        }
        _ => by_mode(a, t, r, &logical_product),
    }
}

/// `zipped_product(A, T)`: rank 2, the modes of `logical_product(A, T)` regrouped with one
/// whole block in mode 0.
pub fn zipped_product(a: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    let lp = super::logical_product(a, t).map_err(|e| e.to_string())?;
    logical_product(a, t, &lp)?;
    ensure(!r.is_int() && r.rank() == 2, || {
        format!("{r} is not rank 2")
    })?;
    regrouped(a, t, &lp, r, true)
}

/// `tiled_product(A, T)`: mode 0 of `zipped_product`, then the modes of its mode 1.
pub fn tiled_product(a: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    let z = super::zipped_product(a, t).map_err(|e| e.to_string())?;
    zipped_product(a, t, &z)?;
    let z1 = z.mode(1).unwrap();
    ensure(
        r.rank() == 1 + z1.rank() && r.mode(0).ok() == z.mode(0).ok(),
        || format!("{r} is not mode 0 of {z} followed by the modes of its mode 1"),
    )?;
    regrouped(a, t, &z, r, false)
}

/// `flat_product(A, T)`: the modes of both modes of `zipped_product`, in order.
pub fn flat_product(a: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    let z = super::zipped_product(a, t).map_err(|e| e.to_string())?;
    zipped_product(a, t, &z)?;
    let want = z.mode(0).unwrap().rank() + z.mode(1).unwrap().rank();
    ensure(r.rank() == want, || {
        format!("{r} does not have rank {want}")
    })?;
    regrouped(a, t, &z, r, false)
}

fn padded(l: &Layout, rank: usize) -> Result<Layout, String> {
    if l.rank() >= rank {
        return Ok(l.clone());
    }
    let mut modes: Vec<Layout> = l.modes().collect();
    modes.resize(rank, Layout::int(1, 0).map_err(|e| e.to_string())?);
    Layout::concat(modes).map_err(|e| e.to_string())
}

/// Whether a product's copies provably do not overlap: `A` and `B` injective, `B`'s strides
/// non-negative, and `B`'s offsets inside the domain of the complement `C`.
fn copies_fit(a: &Layout, b: &Layout, c: &Layout) -> bool {
    is_injective(a)
        && is_injective(b)
        && b.stride().leaves().iter().all(|&d| d >= 0)
        && c.size() >= b.cosize()
}

fn zipped_pairs(a: &Layout, b: &Layout, r: &Layout, block_first: bool) -> Verdict {
    let rank = a.rank().max(b.rank());
    let (pa, pb) = (padded(a, rank)?, padded(b, rank)?);
    let lp = super::logical_product(&pa, &Tiler::Layout(pb.clone())).map_err(|e| e.to_string())?;
    logical_product(&pa, &Tiler::Layout(pb.clone()), &lp)?;
    let (m0, m1) = (lp.mode(0).unwrap(), lp.mode(1).unwrap());
    ensure(!r.is_int() && r.rank() == rank, || {
        format!("{r} does not have rank {rank}")
    })?;
    let pairs: Vec<(Layout, Layout)> = if rank == 1 {
        vec![(m0, m1)]
    } else {
        m0.modes().zip(m1.modes()).collect()
    };
    for (i, (x, y)) in pairs.into_iter().enumerate() {
        let want = if block_first { [x, y] } else { [y, x] };
        let want = Layout::concat(want).map_err(|e| e.to_string())?;
        let got = r.mode(i).unwrap();
        ensure(got == want, || {
            format!("mode {i} of {r} is {got}, expected {want}")
        })?;
    }
    let bound = pa.size().saturating_mul(pb.cosize());
    let c = super::complement(&pa, &IntTuple::Int(bound)).map_err(|e| e.to_string())?;
    if copies_fit(&pa, &pb, &c) {
        ensure(is_injective(r), || format!("{r} is not injective"))?;
    }
    Ok(())
}

/// `blocked_product(A, B)`: rank `max(rank A, rank B)`; mode `i` is `(A_i, P_i)` with
/// `(A, P) = logical_product(A, B)` after padding both to that rank (itself checked); injective
/// when `A` and `B` are.
pub fn blocked_product(a: &Layout, b: &Layout, r: &Layout) -> Verdict {
    zipped_pairs(a, b, r, true)
}

/// `raked_product(A, B)`: as [`blocked_product`] with each mode `(P_i, A_i)`.
pub fn raked_product(a: &Layout, b: &Layout, r: &Layout) -> Verdict {
    zipped_pairs(a, b, r, false)
}

/// `tile_to_shape(block, target, order)`: rank of the target; mode `i` holds the padded
/// block's mode `i` first and has the size of the target's mode `i`; injective if the block
/// is compact (a bijection onto `[0, size)`).
pub fn tile_to_shape(block: &Layout, target: &IntTuple, r: &Layout) -> Verdict {
    let rank = target.rank();
    let pb = padded(block, rank)?;
    ensure(r.rank() == rank, || {
        format!("{r} does not have rank {rank}")
    })?;
    for (i, (tm, rm)) in target.modes().iter().zip(r.modes()).enumerate() {
        let want = tm.product().map_err(|e| e.to_string())?;
        ensure(rm.size() == want, || {
            format!("mode {i} of {r} has size {}, target {want}", rm.size())
        })?;
        let bm = if rank == 1 {
            pb.clone()
        } else {
            pb.mode(i).unwrap()
        };
        let first = rm.mode(0).unwrap();
        ensure(first == bm, || {
            format!("mode {i} of {r} does not start with the block mode {bm}")
        })?;
    }
    if compact(block).is_ok() {
        ensure(is_injective(r), || format!("{r} is not injective"))?;
    }
    Ok(())
}

/// `max_common_layout(a, b)`: `a(R(i)) == i` and `b(R(i)) == i` for `i < size(R)`.
pub fn max_common_layout(a: &Layout, b: &Layout, r: &Layout) -> Verdict {
    for i in 0..r.size() {
        let ri = at(r, i)?;
        let (x, y) = (at(a, ri)?, at(b, ri)?);
        ensure(x == i && y == i, || {
            format!("at i = {i}: R(i) = {ri}, a = {x}, b = {y}")
        })?;
    }
    Ok(())
}

/// `max_common_vector(a, b)`: at least 1, and the size of a checked common layout.
pub fn max_common_vector(a: &Layout, b: &Layout, n: i64) -> Verdict {
    let r = super::max_common_layout(a, b).map_err(|e| e.to_string())?;
    max_common_layout(a, b, &r)?;
    ensure(n >= 1 && n == r.size(), || {
        format!("{n} is not the size of {r}")
    })
}

fn image(l: &Layout) -> Result<HashSet<i64>, String> {
    (0..l.size()).map(|i| at(l, i)).collect()
}

/// `upcast(L, n)`: congruent with `L`, and every offset of `R` times `n` is an offset of `L`.
pub fn upcast(l: &Layout, n: i64, r: &Layout) -> Verdict {
    ensure(congruent(l.shape(), r.shape()), || {
        format!("{r} is not congruent with {l}")
    })?;
    let img = image(l)?;
    for i in 0..r.size() {
        let x = at(r, i)?.saturating_mul(n);
        ensure(img.contains(&x), || {
            format!("{n} * R({i}) = {x} is not an offset of {l}")
        })?;
    }
    Ok(())
}

/// `downcast(L, n)`: congruent with `L`; the extent of each stride-±1 leaf times `n`, the
/// other leaves' strides times `n`; every offset of `L` times `n` is an offset of `R`.
pub fn downcast(l: &Layout, n: i64, r: &Layout) -> Verdict {
    ensure(congruent(l.shape(), r.shape()), || {
        format!("{r} is not congruent with {l}")
    })?;
    let unit = l.stride().leaves().iter().filter(|d| d.abs() == 1).count();
    let want = (0..unit).fold(l.size(), |acc, _| acc.saturating_mul(n));
    ensure(r.size() == want, || format!("size of {r} is not {want}"))?;
    let img = image(r)?;
    for i in 0..l.size() {
        let x = at(l, i)?.saturating_mul(n);
        ensure(img.contains(&x), || {
            format!("{n} * L({i}) = {x} is not an offset of {r}")
        })?;
    }
    Ok(())
}

/// `nullspace(L)`: `L(R(i)) == 0` for `i < size(R)`, and `size(R) * size(filter(L)) == size(L)`.
pub fn nullspace(l: &Layout, r: &Layout) -> Verdict {
    for i in 0..r.size() {
        let ri = at(r, i)?;
        let v = at(l, ri)?;
        ensure(v == 0, || format!("L(R({i})) = L({ri}) = {v}"))?;
    }
    let f = super::filter(l).size();
    ensure(r.size().saturating_mul(f) == l.size(), || {
        format!("size {} * size(filter) {f} != size {}", r.size(), l.size())
    })
}

/// The order value of every leaf of `shape`, for an `order` weakly congruent with it.
fn expand_order(order: &IntTuple, shape: &IntTuple, out: &mut Vec<i64>) {
    match order {
        IntTuple::Int(o) => out.extend(std::iter::repeat(*o).take(shape.leaf_count())),
        IntTuple::Tuple(os) => {
            for (o, s) in os.iter().zip(shape.modes()) {
                expand_order(o, s, out);
            }
        }
    }
}

fn ordered_by(r: &Layout, order: &[i64]) -> Verdict {
    let modes: Vec<(i64, i64, i64)> = r
        .shape()
        .leaves()
        .iter()
        .zip(r.stride().leaves().iter())
        .zip(order)
        .filter(|((s, d), _)| **s > 1 && **d != 0)
        .map(|((s, d), o)| (*s, *d, *o))
        .collect();
    for x in &modes {
        for y in &modes {
            if x.2 < y.2 {
                ensure(x.1 < y.1, || {
                    format!(
                        "in {r}, a mode of order {} has stride {} >= {}",
                        x.2, x.1, y.1
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn compact(r: &Layout) -> Verdict {
    let img = image(r)?;
    ensure(
        img.len() as i64 == r.size() && (0..r.size()).all(|x| img.contains(&x)),
        || format!("{r} is not a bijection onto [0, {})", r.size()),
    )
}

/// `make_ordered_layout(shape, order)`: shape kept; with distinct order values, a bijection
/// onto `[0, size)` in which a smaller order value means a smaller stride.
pub fn make_ordered_layout(shape: &IntTuple, order: &IntTuple, r: &Layout) -> Verdict {
    ensure(r.shape().as_tuple() == shape, || {
        format!("{r} does not have shape {shape}")
    })?;
    let mut o = Vec::new();
    expand_order(order, shape, &mut o);
    let mut distinct = order.leaves().to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() == order.leaf_count() {
        compact(r)?;
    }
    ordered_by(r, &o)
}

/// `make_layout_like(L)`: shape kept; stride 0 where L's is 0 (and on extent-1 modes); the
/// rest compact (with distinct strides in `L`) and ordered like L's strides.
pub fn make_layout_like(l: &Layout, r: &Layout) -> Verdict {
    ensure(r.shape() == l.shape(), || {
        format!("{r} does not have the shape of {l}")
    })?;
    for ((s, d), rd) in l
        .shape()
        .leaves()
        .iter()
        .zip(l.stride().leaves().iter())
        .zip(r.stride().leaves().iter())
    {
        ensure((*d == 0 || *s == 1) == (*rd == 0), || {
            format!("{l} -> {r}: stride 0 not kept")
        })?;
    }
    let mut ds: Vec<i64> = l
        .stride()
        .leaves()
        .iter()
        .copied()
        .filter(|d| *d != 0)
        .collect();
    let n = ds.len();
    ds.sort_unstable();
    ds.dedup();
    if ds.len() == n {
        compact(&super::filter(r))?;
    }
    ordered_by(r, &l.stride().leaves())
}

/// `canonical`: `R` is the canonical form (`1:0`, or flat with every extent at least 2 and no
/// adjacent modes `s0:d0, s1:(s0*d0)`), and `R(i) == L(i)` for every `i < size(L)`.
pub fn canonical(l: &Layout, r: &Layout) -> Verdict {
    ensure(r.depth() <= 1, || format!("{r} has depth {}", r.depth()))?;
    let (s, d) = (r.shape().leaves(), r.stride().leaves());
    if r.size() == 1 {
        ensure(r.to_string() == "1:0", || format!("{r} is not 1:0"))?;
    } else {
        ensure(s.iter().all(|&x| x >= 2), || {
            format!("{r} has an extent-1 mode")
        })?;
        for k in 1..s.len() {
            ensure(s[k - 1].checked_mul(d[k - 1]) != Some(d[k]), || {
                format!("modes {} and {k} of {r} merge", k - 1)
            })?;
        }
        ensure(r.is_int() == (s.len() == 1), || {
            format!("{r}: one mode must be an integral layout")
        })?;
    }
    same_function(l, r)
}
