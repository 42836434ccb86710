//! Post-condition checkers, one per operation, shared by the test suites.
//!
//! Each takes the operands and the result of an operation and returns `Ok(())` when the
//! result meets the post-condition the operation documents, or `Err(message)` saying where it
//! fails. They work by brute force over the domain (every index below the size), so they are
//! meant for the small layouts of tests. They call other operations only to build the
//! reference operands the post-condition names (the complement a divide uses, for example),
//! and those have their own checkers.

use std::collections::HashSet;

use crate::error::LayoutError;
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

/// `R` is in coalesced form: depth at most 1, and `1:0` or modes of extent above 1 of which
/// no two neighbours `s0:d0, s1:d1` have `d1 == s0*d0` (they would merge).
fn coalesced_form(r: &Layout) -> Verdict {
    ensure(r.depth() <= 1, || format!("{r} has depth {}", r.depth()))?;
    let m = flat(r);
    if m == [(1, 0)] {
        return Ok(());
    }
    for &(s, d) in &m {
        ensure(s > 1, || format!("{r} keeps a mode {s}:{d} of extent 1"))?;
    }
    for w in m.windows(2) {
        ensure(w[0].0.checked_mul(w[0].1) != Some(w[1].1), || {
            format!(
                "{r} keeps the modes {}:{} and {}:{}, which merge",
                w[0].0, w[0].1, w[1].0, w[1].1
            )
        })?;
    }
    Ok(())
}

/// The flat `(extent, stride)` leaves of a layout, in order.
fn flat(l: &Layout) -> Vec<(i64, i64)> {
    l.shape()
        .leaves()
        .iter()
        .copied()
        .zip(l.stride().leaves().iter().copied())
        .collect()
}

/// `coalesce`: `R` in coalesced form (depth at most 1; `1:0`, or no mode of extent 1 and no
/// two neighbours that merge), the same size, and `R(i) == L(i)` for `i < size(L)`.
pub fn coalesce(l: &Layout, r: &Layout) -> Verdict {
    coalesced_form(r)?;
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

/// `right_inverse(L)`: `R` in coalesced form and `L(R(i)) == i` for every `i < size(R)`.
pub fn right_inverse(l: &Layout, r: &Layout) -> Verdict {
    coalesced_form(r)?;
    for i in 0..r.size() {
        let ri = at(r, i)?;
        let back = at(l, ri)?;
        ensure(back == i, || format!("L(R({i})) = L({ri}) = {back}"))?;
    }
    Ok(())
}

/// `left_inverse(L)`: `R(L(i)) == i` for every `i < size(L)` (so `L` must be injective: a
/// result for any other `L` fails here).
pub fn left_inverse(l: &Layout, r: &Layout) -> Verdict {
    for i in 0..l.size() {
        let li = at(l, i)?;
        let back = at(r, li)?;
        ensure(back == i, || format!("R(L({i})) = R({li}) = {back}"))?;
    }
    Ok(())
}

/// `generalized_left_inverse(L)`: `L(R(L(i))) == L(i)` for every `i < size(L)`, `L`
/// evaluated on its extended domain.
pub fn generalized_left_inverse(l: &Layout, r: &Layout) -> Verdict {
    for i in 0..l.size() {
        let li = at(l, i)?;
        let ri = at(r, li)?;
        let back = at(l, ri)?;
        ensure(back == li, || {
            format!("L(R(L({i}))) = L(R({li})) = L({ri}) = {back}, not {li}")
        })?;
    }
    Ok(())
}

/// `logical_divide(L, T)`: for a layout tiler, `R` has rank 2, `shape(T)` and `shape(C)` are
/// compatible with its modes, and `R(i, j) == coalesce(L)(T(i) + C(j))` (on the extended
/// domain of `coalesce(L)`) where `C = complement(T, shape(coalesce(L)))`. `_` keeps the
/// mode; by-mode tilers mode by mode, L's further modes unchanged.
pub fn logical_divide(l: &Layout, t: &Tiler, r: &Layout) -> Verdict {
    match t {
        Tiler::Layout(tl) => {
            let cl = super::coalesce(l);
            coalesce(l, &cl)?;
            let cot = cl.shape().as_tuple().clone();
            let c = super::complement(tl, &cot).map_err(|e| e.to_string())?;
            complement(tl, &cot, &c)?;
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
                    let want = at(&cl, x)?;
                    let coord = IntTuple::flat([i, j]);
                    let got = r.eval(&coord).map_err(|e| e.to_string())?;
                    ensure(want == got, || {
                        format!("{r} at ({i},{j}) is {got}, coalesce(L)(T({i}) + C({j})) = {cl}({x}) = {want}")
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
    if bijective_onto_size(block) {
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

/// Every flat coordinate of extents `exts`, in colexicographic order.
fn coords(exts: &[i64]) -> Vec<Vec<i64>> {
    let mut out = vec![Vec::new()];
    for &e in exts {
        out = (0..e)
            .flat_map(|x| {
                out.iter().map(move |c| {
                    let mut c = c.clone();
                    c.push(x);
                    c
                })
            })
            .collect();
    }
    // Each new extent is the outer loop, so earlier coordinates vary fastest: colexicographic.
    out
}

/// `L` at a flat coordinate (one integer per leaf).
fn at_flat(l: &Layout, c: &[i64]) -> Result<i64, String> {
    let coord = match c {
        [x] if l.is_int() => IntTuple::Int(*x),
        _ => IntTuple::flat(c.iter().copied()),
    };
    l.flatten()
        .eval(&coord)
        .map_err(|e| format!("evaluating {l} at {c:?}: {e}"))
}

/// `upcast(L, n)`: `R` congruent with `L`; per leaf `s:d`: stride 0 kept as `s:0`; a stride
/// with `|d| >= n` becomes `s:(d/n)`; one with `|d| < n` becomes `ceil(s/(n/|d|)):sign(d)`;
/// and `n * R(c) == L(c')` for every coordinate `c` of `R`, where `c'` scales the coordinate of
/// every leaf with `0 < |d| < n` by `n/|d|`.
pub fn upcast(l: &Layout, n: i64, r: &Layout) -> Verdict {
    ensure(congruent(l.shape(), r.shape()), || {
        format!("{r} is not congruent with {l}")
    })?;
    let (lm, rm) = (flat(l), flat(r));
    let mut scale = Vec::new();
    for (&(s, d), &(rs, rd)) in lm.iter().zip(&rm) {
        let ad = d.saturating_abs();
        let want = if d == 0 {
            (s, 0)
        } else if ad >= n {
            (s, d / n)
        } else {
            let k = n / ad;
            ((s + k - 1) / k, d.signum())
        };
        ensure((rs, rd) == want, || {
            format!(
                "leaf {s}:{d} became {rs}:{rd} in {r}, expected {}:{}",
                want.0, want.1
            )
        })?;
        scale.push(if d != 0 && ad < n { n / ad } else { 1 });
    }
    let exts: Vec<i64> = rm.iter().map(|m| m.0).collect();
    for c in coords(&exts) {
        let cl: Vec<i64> = c.iter().zip(&scale).map(|(x, k)| x * k).collect();
        let (got, want) = (at_flat(r, &c)?, at_flat(l, &cl)?);
        ensure(got.checked_mul(n) == Some(want), || {
            format!("{n} * R({c:?}) = {n} * {got} differs from L({cl:?}) = {want}")
        })?;
    }
    Ok(())
}

/// `downcast(L, n)`: `R` congruent with `L`; a leaf `s:±1` becomes `(n*s):±1`, any other leaf
/// `s:d` becomes `s:(n*d)`; so `R(c') == n * L(c)` for every coordinate `c` of `L`, where `c'`
/// scales the coordinate of every stride-±1 leaf by `n`, and the `n - 1` coordinates after it
/// step by ±1 through the offsets in between.
pub fn downcast(l: &Layout, n: i64, r: &Layout) -> Verdict {
    ensure(congruent(l.shape(), r.shape()), || {
        format!("{r} is not congruent with {l}")
    })?;
    let (lm, rm) = (flat(l), flat(r));
    let mut unit = Vec::new();
    for (&(s, d), &(rs, rd)) in lm.iter().zip(&rm) {
        let want = if d.unsigned_abs() == 1 {
            (s * n, d)
        } else {
            (s, d * n)
        };
        ensure((rs, rd) == want, || {
            format!(
                "leaf {s}:{d} became {rs}:{rd} in {r}, expected {}:{}",
                want.0, want.1
            )
        })?;
        unit.push(d.unsigned_abs() == 1);
    }
    let exts: Vec<i64> = lm.iter().map(|m| m.0).collect();
    for c in coords(&exts) {
        let cr: Vec<i64> = c
            .iter()
            .zip(&unit)
            .map(|(x, &u)| if u { x * n } else { *x })
            .collect();
        let (got, want) = (at_flat(r, &cr)?, at_flat(l, &c)?);
        ensure(Some(got) == want.checked_mul(n), || {
            format!("R({cr:?}) = {got} differs from {n} * L({c:?}) = {n} * {want}")
        })?;
    }
    Ok(())
}

/// `nullspace(L)`: `R` injective (distinct indices of `L`), `L(R(i)) == 0` for `i < size(R)`,
/// and `size(R) * size(filter(L)) == size(L)`.
pub fn nullspace(l: &Layout, r: &Layout) -> Verdict {
    for i in 0..r.size() {
        let ri = at(r, i)?;
        let v = at(l, ri)?;
        ensure(v == 0, || format!("L(R({i})) = L({ri}) = {v}"))?;
    }
    ensure(is_injective(r), || format!("{r} is not injective"))?;
    let f: i64 = flat(l).iter().filter(|m| m.1 != 0).map(|m| m.0).product();
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

/// Of two leaves of extent above 1 and non-zero stride, the one with the smaller
/// `(order value, position)` has the smaller stride.
fn ordered_by(r: &Layout, order: &[i64]) -> Verdict {
    let modes: Vec<(i64, (i64, usize))> = flat(r)
        .into_iter()
        .zip(order)
        .enumerate()
        .filter(|(_, ((s, d), _))| *s > 1 && *d != 0)
        .map(|(pos, ((_, d), o))| (d, (*o, pos)))
        .collect();
    for x in &modes {
        for y in &modes {
            if x.1 < y.1 {
                ensure(x.0 < y.0, || {
                    format!(
                        "in {r}, the leaf {} (order {}) has stride {} >= {}, the stride of leaf {} (order {})",
                        x.1 .1, x.1 .0, x.0, y.0, y.1 .1, y.1 .0
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The leaves of `r` with extent above 1 and non-zero stride form a bijection onto
/// `[0, product of their extents)`.
fn compact(r: &Layout) -> Verdict {
    let m: Vec<(i64, i64)> = flat(r)
        .into_iter()
        .filter(|m| m.0 > 1 && m.1 != 0)
        .collect();
    let exts: Vec<i64> = m.iter().map(|x| x.0).collect();
    let n: i64 = exts.iter().product();
    let mut img = HashSet::new();
    for c in coords(&exts) {
        let x: i64 = c.iter().zip(&m).map(|(c, (_, d))| c * d).sum();
        img.insert(x);
    }
    ensure(
        img.len() as i64 == n && (0..n).all(|x| img.contains(&x)),
        || format!("{r} is not a bijection onto [0, {n})"),
    )
}

/// Whether `r` maps `[0, size)` one to one onto `[0, size)`.
fn bijective_onto_size(r: &Layout) -> bool {
    image(r)
        .is_ok_and(|img| img.len() as i64 == r.size() && (0..r.size()).all(|x| img.contains(&x)))
}

/// `make_ordered_layout(shape, order)`: shape kept, size-1 leaves have stride 0, a bijection
/// onto `[0, size)`, and of two leaves the one with the smaller `(order value, position)`
/// has the smaller stride.
pub fn make_ordered_layout(shape: &IntTuple, order: &IntTuple, r: &Layout) -> Verdict {
    ensure(r.shape().as_tuple() == shape, || {
        format!("{r} does not have shape {shape}")
    })?;
    for (s, d) in flat(r) {
        ensure(s > 1 || d == 0, || format!("{r} has a leaf {s}:{d}"))?;
    }
    ensure(bijective_onto_size(r), || {
        format!("{r} is not a bijection onto [0, {})", r.size())
    })?;
    let mut o = Vec::new();
    expand_order(order, shape, &mut o);
    ordered_by(r, &o)
}

/// `make_layout_like(L)`: shape kept; stride 0 exactly where L's stride is 0 or the extent is
/// 1; the other leaves a bijection onto `[0, their size)`, ordered by (L's stride, position).
pub fn make_layout_like(l: &Layout, r: &Layout) -> Verdict {
    ensure(r.shape() == l.shape(), || {
        format!("{r} does not have the shape of {l}")
    })?;
    for ((s, d), (_, rd)) in flat(l).into_iter().zip(flat(r)) {
        ensure((d == 0 || s == 1) == (rd == 0), || {
            format!("{l} -> {r}: stride 0 not kept")
        })?;
    }
    compact(r)?;
    ordered_by(r, &l.stride().leaves())
}

// Refusals. Each verifier takes the operands and the error an operation returned and checks,
// by brute force or from the operands alone, that the condition the error states really
// holds: a refusal must be as justified as a result.

/// Whether a layout of size `g.len()` takes the values `g`, by brute force over the ordered
/// factorizations of the size: a layout whose leading modes cover `[0, p)` extends by a mode
/// `s:d` exactly when `g(j*p + r) == j*d + g(r)` for `j < s`, `r < p`, with `d = g(p)`.
pub fn representable(g: &[i64]) -> bool {
    // Whether the values from index p on extend a layout covering [0, p); it depends on p
    // only, so it is remembered per p (else all-zero values would try every factorization).
    fn extend(g: &[i64], p: usize, memo: &mut std::collections::HashMap<usize, bool>) -> bool {
        let n = g.len();
        if p == n {
            return true;
        }
        if let Some(&known) = memo.get(&p) {
            return known;
        }
        let d = g[p];
        let found = (2..=n / p).filter(|s| n % (p * s) == 0).any(|s| {
            (0..p * s).all(|i| {
                let (j, r) = ((i / p) as i64, i % p);
                j.checked_mul(d).and_then(|x| x.checked_add(g[r])) == Some(g[i])
            }) && extend(g, p * s, memo)
        });
        memo.insert(p, found);
        found
    }
    !g.is_empty() && g[0] == 0 && extend(g, 1, &mut std::collections::HashMap::new())
}

/// Whether some layout with B's shape takes the values `A(B(i))`, `i < size(B)` (`A` on its
/// extended domain). A layout compatible with B's shape is, leaf by leaf of B, a layout of the
/// leaf's size applied to the leaf's coordinate, summed: so the values along each leaf's axis
/// fix it, and it exists iff each axis is representable and the sum reproduces every value.
/// `Err` if evaluating `A(B(i))` overflows.
pub fn composition_exists(a: &Layout, b: &Layout) -> Result<bool, String> {
    // Evaluations that overflow are unknown values: a known value that breaks every layout
    // answers "no" even so; only when nothing known does, the overflow is the answer.
    let f: Vec<Option<i64>> = (0..b.size())
        .map(|i| at(b, i).and_then(|x| at(a, x)).ok())
        .collect();
    let exts: Vec<i64> = b.shape().leaves().to_vec();
    let mut axes: Vec<Option<Vec<i64>>> = Vec::new();
    let mut stride = 1i64;
    for &e in &exts {
        axes.push((0..e).map(|c| f[(c * stride) as usize]).collect());
        stride *= e;
    }
    if axes.iter().flatten().any(|g| !representable(g)) {
        return Ok(false);
    }
    let mut unknown = axes.iter().any(Option::is_none);
    for (i, fi) in f.iter().enumerate() {
        let mut rest = i as i64;
        let mut sum = Some(0i64);
        for (g, &e) in axes.iter().zip(&exts) {
            let v = g.as_ref().map(|g| g[(rest % e) as usize]);
            sum = sum.zip(v).and_then(|(s, v)| s.checked_add(v));
            rest /= e;
        }
        match (fi, sum) {
            (Some(x), Some(y)) if *x != y => return Ok(false),
            (Some(_), Some(_)) => {}
            _ => unknown = true,
        }
    }
    if unknown {
        Err(format!("some A(B(i)) of {a} o {b} overflows"))
    } else {
        Ok(true)
    }
}

fn says(e: &LayoutError, what: &str) -> bool {
    e.to_string().contains(what)
}

fn unjustified(op: &str, e: &LayoutError) -> String {
    format!("{op} refused, but its stated condition does not hold: {e}")
}

/// `composition(A, B)` refused with `e`: a bound was hit (a leaf or `size(B)` above 2^16, as
/// the message says), or no layout with B's shape is `A ∘ B`, or `A(B(i))` overflows.
pub fn composition_refused(a: &Layout, b: &Layout, e: &LayoutError) -> Verdict {
    let big = b.size() > 1 << 16 || b.shape().leaves().iter().any(|&n| n > 1 << 16);
    match e {
        LayoutError::Inadmissible { .. } if says(e, "a layout may still exist") => {
            ensure(big, || unjustified("composition", e))
        }
        // A value A(B(i)) that overflows is one no layout takes either.
        LayoutError::Inadmissible { .. } if !big => match composition_exists(a, b) {
            Ok(exists) => ensure(!exists, || unjustified("composition", e)),
            Err(_) => Ok(()),
        },
        // Some A(B(i)) leaves the i64 range, or the values span more than a layout's cosize
        // may (every layout taking them has max - min + 1 of them at least), or no layout
        // takes them (the only candidate, the sum of the leaves' layouts, reaches past i64
        // somewhere A o B does not).
        LayoutError::Overflow { .. } if !big => {
            let values: Result<Vec<i64>, String> =
                (0..b.size()).map(|i| at(a, at(b, i)?)).collect();
            let too_wide = values.as_ref().is_ok_and(|v| {
                let lo = v.iter().copied().min().unwrap_or(0);
                let hi = v.iter().copied().max().unwrap_or(0);
                i128::from(hi) - i128::from(lo) + 1 > i128::from(i64::MAX)
            });
            // Or no layout exists at all: the forced candidate overflowed while being built.
            let none = !matches!(composition_exists(a, b), Ok(true));
            ensure(values.is_err() || too_wide || none, || {
                unjustified("composition", e)
            })
        }
        _ => ensure(big, || unjustified("composition", e)),
    }
}

/// The leaves of `l` with non-zero stride and extent above 1, merged where `s0:d0` is
/// followed by `s1:s0*d0`: the modes CuTe's complement works on.
fn filtered_modes(l: &Layout) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (s, d) in flat(l) {
        if s == 1 || d == 0 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.0.checked_mul(last.1) == Some(d) => last.0 *= s,
            _ => out.push((s, d)),
        }
    }
    out
}

/// `complement(L, cotarget)` refused with `e`: a cotarget extent below 1; `filter(L)` not
/// injective; or its modes, sorted by `|stride|`, interleave (a stride below the extent
/// `s * |d|` of the mode before it).
pub fn complement_refused(l: &Layout, cotarget: &IntTuple, e: &LayoutError) -> Verdict {
    match e {
        LayoutError::BadShape { .. } => ensure(cotarget.leaves().iter().any(|&m| m < 1), || {
            unjustified("complement", e)
        }),
        LayoutError::Inadmissible { .. } if says(e, "not injective") => {
            let f = filtered_modes(l);
            let fl = layout_of(&f)?;
            ensure(!is_injective(&fl), || unjustified("complement", e))
        }
        // An extent times a stride of filter(L), the size of the cotarget, or a stride's
        // magnitude, that leaves the i64 range (the chain the post-condition speaks of
        // cannot be computed); or the last mode the documentation gives, which for a shape
        // cotarget may round up mode by mode, reaches past i64.
        LayoutError::Overflow { .. } => ensure(
            cotarget.product().is_err()
                || flat(l)
                    .iter()
                    .any(|&(s, d)| d.checked_abs().and_then(|a| a.checked_mul(s)).is_none())
                || filtered_modes(l)
                    .iter()
                    .any(|&(s, d)| d.checked_abs().and_then(|a| a.checked_mul(s)).is_none())
                || last_mode_overflows(l, cotarget),
            || unjustified("complement", e),
        ),
        LayoutError::Inadmissible { .. } if says(e, "interleave") => {
            let mut f: Vec<(i64, i64)> = filtered_modes(l)
                .into_iter()
                .map(|(s, d)| (s, d.saturating_abs()))
                .collect();
            f.sort_by_key(|m| m.1);
            ensure(
                f.windows(2).any(|w| w[1].1 < w[0].0.saturating_mul(w[0].1)),
                || unjustified("complement", e),
            )
        }
        _ => Err(unjustified("complement", e)),
    }
}

/// Whether the last mode of `complement(L, cotarget)`, `rest` copies at stride `reach` (the
/// largest `extent * |stride|` of filter(L)), leaves the i64 range: `rest` is
/// `ceil(size(cotarget) / reach)`, or for a shape cotarget CuTe's quotient taken mode by mode
/// (`ceil(c0 / reach)`, then `ceil(c1 / ceil(reach / c0))`, ...) if that is larger.
fn last_mode_overflows(l: &Layout, cotarget: &IntTuple) -> bool {
    let reach = filtered_modes(l)
        .iter()
        .map(|&(s, d)| i128::from(s) * i128::from(d).abs())
        .max()
        .unwrap_or(1);
    let Ok(size) = cotarget.product() else {
        return true;
    };
    let ceil = |a: i128, b: i128| (a + b - 1) / b;
    let mut rest = ceil(i128::from(size), reach);
    if cotarget.is_tuple() {
        let mut div = reach;
        let mut by_mode = 1i128;
        for c in cotarget.leaves() {
            by_mode *= ceil(i128::from(c), div);
            div = ceil(div, i128::from(c));
        }
        rest = rest.max(by_mode);
    }
    (rest - 1) * reach + reach > i128::from(i64::MAX)
}

fn layout_of(modes: &[(i64, i64)]) -> Result<Layout, String> {
    match modes {
        [] => Layout::new(1, 0),
        _ => Layout::new(
            IntTuple::flat(modes.iter().map(|m| m.0)),
            IntTuple::flat(modes.iter().map(|m| m.1)),
        ),
    }
    .map_err(|e| e.to_string())
}

/// The modes CuTe's left inverse works on: `coalesce(L)`'s `(extent, stride, index stride)`,
/// computed from the leaves.
fn coalesced_with_index(l: &Layout) -> Vec<(i64, i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (s, d) in flat(l) {
        if s == 1 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.0.checked_mul(last.1) == Some(d) => last.0 *= s,
            _ => out.push((s, d)),
        }
    }
    let mut p = 1i64;
    out.into_iter()
        .map(|(s, d)| {
            let here = p;
            p = p.saturating_mul(s);
            (s, d, here)
        })
        .collect()
}

/// The sorted non-zero `|stride|`s of `coalesce(L)` do not each divide the next.
fn not_divisible(l: &Layout) -> bool {
    let mut ds: Vec<i64> = coalesced_with_index(l)
        .iter()
        .map(|m| m.1.saturating_abs())
        .filter(|&d| d != 0)
        .collect();
    ds.sort_unstable();
    ds.windows(2).any(|w| w[1] % w[0] != 0)
}

fn negative_stride(l: &Layout) -> bool {
    coalesced_with_index(l).iter().any(|m| m.1 < 0)
}

/// `left_inverse(L)` refused with `e`: `L` not injective; or a negative stride, or CuTe's
/// divisibility condition failing (CuTe's construction has no answer).
pub fn left_inverse_refused(l: &Layout, e: &LayoutError) -> Verdict {
    let ok = match e {
        LayoutError::Inadmissible { .. } if says(e, "not injective") => !is_injective(l),
        LayoutError::Inadmissible { .. } if says(e, "negative stride") => negative_stride(l),
        LayoutError::Inadmissible { .. } if says(e, "divisibility") => not_divisible(l),
        // CuTe's construction has size (largest stride) * (its extent), which may not fit.
        LayoutError::Overflow { .. } => cute_left_inverse(l).is_err(),
        _ => false,
    };
    ensure(ok, || unjustified("left_inverse", e))
}

/// CuTe's sort-by-stride left inverse of `L` (non-negative strides, each non-zero stride a
/// multiple of the one before), written from its definition: mode `k` of `R` has extent
/// `d_k / d_{k-1}` and stride the index stride of the mode of stride `d_{k-1}`, the offsets
/// below the smallest stride map to 0, and the last mode takes the extent of the mode of the
/// largest stride.
fn cute_left_inverse(l: &Layout) -> Result<Layout, String> {
    let mut m = coalesced_with_index(l);
    m.sort_by_key(|x| x.1);
    let mut shapes = Vec::new();
    let mut strides = vec![0i64];
    let mut prev = 1i64;
    for &(_, d, p) in m.iter().filter(|x| x.1 != 0) {
        shapes.push(d.checked_div(prev).ok_or("overflow")?);
        strides.push(p);
        prev = d;
    }
    shapes.push(m.last().map_or(1, |x| x.0));
    Layout::new(IntTuple::flat(shapes), IntTuple::flat(strides)).map_err(|e| e.to_string())
}

/// `generalized_left_inverse(L)` refused with `e`: a negative stride or CuTe's divisibility
/// condition; CuTe's construction failing `L(R(L(i))) == L(i)`; or `L` above 2^20 elements
/// with overlapping modes (not checked).
pub fn generalized_left_inverse_refused(l: &Layout, e: &LayoutError) -> Verdict {
    let ok = match e {
        LayoutError::Inadmissible { .. } if says(e, "negative stride") => negative_stride(l),
        LayoutError::Inadmissible { .. } if says(e, "divisibility") => {
            !negative_stride(l) && not_divisible(l)
        }
        LayoutError::Inadmissible { .. } if says(e, "fails at") => {
            let r = cute_left_inverse(l)?;
            generalized_left_inverse(l, &r).is_err()
        }
        LayoutError::Inadmissible { .. } if says(e, "may exist") => l.size() > 1 << 20,
        LayoutError::Overflow { .. } => cute_left_inverse(l).is_err(),
        _ => false,
    };
    ensure(ok, || unjustified("generalized_left_inverse", e))
}

/// A divide refused with `e`: the tiler has more modes than the layout, or, for the first
/// mode (depth first) whose divide fails, the complement of its tile or the composition of
/// `coalesce(L)` with `(T, C)` is refused for a reason its own verifier accepts.
pub fn logical_divide_refused(l: &Layout, t: &Tiler, e: &LayoutError) -> Verdict {
    match t {
        Tiler::Skip => Err(unjustified("logical_divide (of `_`)", e)),
        Tiler::ByMode(ts) => {
            if ts.len() > l.rank() {
                return ensure(matches!(e, LayoutError::OutOfRange { .. }), || {
                    unjustified("logical_divide", e)
                });
            }
            let mut modes = Vec::new();
            for (i, m) in l.modes().enumerate() {
                match ts.get(i) {
                    Some(ti) => match super::logical_divide(&m, ti) {
                        Err(inner) => return logical_divide_refused(&m, ti, &inner),
                        Ok(r) => modes.push(r),
                    },
                    None => modes.push(m),
                }
            }
            // Every mode has its answer; only putting them together can fail, when the whole
            // leaves the i64 range.
            ensure(
                matches!(e, LayoutError::Overflow { .. }) && Layout::concat(modes).is_err(),
                || unjustified("logical_divide (every mode divides)", e),
            )
        }
        Tiler::Layout(tl) => {
            let cl = super::coalesce(l);
            let cot = cl.shape().as_tuple().clone();
            match super::complement(tl, &cot) {
                Err(ce) => complement_refused(tl, &cot, &ce),
                Ok(c) => match Layout::concat([tl.clone(), c]) {
                    Ok(b) => composition_refused(&cl, &b, e),
                    // The divisor `(tiler, complement)` itself leaves the i64 range: there is
                    // no layout to compose with, and Overflow is the answer.
                    Err(be) => ensure(
                        matches!(e, LayoutError::Overflow { .. })
                            && matches!(be, LayoutError::Overflow { .. }),
                        || unjustified("logical_divide (the tiler and its complement overflow)", e),
                    ),
                },
            }
        }
    }
}

/// A product refused with `e`: as [`logical_divide_refused`], with the complement
/// `complement(A, size(A) * cosize(B))` and the composition of that complement with `B`.
pub fn logical_product_refused(a: &Layout, t: &Tiler, e: &LayoutError) -> Verdict {
    match t {
        Tiler::Skip => Err(unjustified("logical_product (of `_`)", e)),
        Tiler::ByMode(ts) => {
            if ts.len() > a.rank() {
                return ensure(matches!(e, LayoutError::OutOfRange { .. }), || {
                    unjustified("logical_product", e)
                });
            }
            let mut modes = Vec::new();
            for (i, m) in a.modes().enumerate() {
                match ts.get(i) {
                    Some(ti) => match super::logical_product(&m, ti) {
                        Err(inner) => return logical_product_refused(&m, ti, &inner),
                        Ok(r) => modes.push(r),
                    },
                    None => modes.push(m),
                }
            }
            // Every mode has its answer; only putting them together can fail, when the whole
            // leaves the i64 range.
            ensure(
                matches!(e, LayoutError::Overflow { .. }) && Layout::concat(modes).is_err(),
                || unjustified("logical_product (every mode multiplies)", e),
            )
        }
        Tiler::Layout(b) => {
            let Some(bound) = a.size().checked_mul(b.cosize()) else {
                return ensure(matches!(e, LayoutError::Overflow { .. }), || {
                    unjustified("logical_product", e)
                });
            };
            let cot = IntTuple::Int(bound);
            match super::complement(a, &cot) {
                Err(ce) => complement_refused(a, &cot, &ce),
                Ok(c) => composition_refused(&c, b, e),
            }
        }
    }
}

/// `blocked_product` or `raked_product` refused with `e`: the product of the operands padded
/// to one rank is refused for a reason [`logical_product_refused`] accepts.
pub fn zipped_pairs_refused(a: &Layout, b: &Layout, e: &LayoutError) -> Verdict {
    let rank = a.rank().max(b.rank());
    let (pa, pb) = (padded(a, rank)?, padded(b, rank)?);
    let t = Tiler::Layout(pb);
    match super::logical_product(&pa, &t) {
        Err(inner) => logical_product_refused(&pa, &t, &inner),
        Ok(_) => Err(unjustified("blocked/raked product (the product exists)", e)),
    }
}

/// `upcast(L, n)` refused with `e`: `n < 1`, or a non-zero stride and `n` do not divide one
/// another.
pub fn upcast_refused(l: &Layout, n: i64, e: &LayoutError) -> Verdict {
    let bad = n < 1
        || flat(l).iter().any(|&(_, d)| {
            let (ad, un) = (d.unsigned_abs(), n.unsigned_abs());
            d != 0 && ad % un != 0 && un % ad != 0
        });
    ensure(bad, || unjustified("upcast", e))
}

/// `downcast(L, n)` refused with `e`: `n < 1`, or no leaf has stride 1.
pub fn downcast_refused(l: &Layout, n: i64, e: &LayoutError) -> Verdict {
    let bad = match e {
        // The layout downcast would give (extent times n on stride-±1 leaves, stride times n
        // on the others) does not fit.
        LayoutError::Overflow { .. } => {
            let mut shapes = Vec::new();
            let mut strides = Vec::new();
            let mut fits = true;
            for (s, d) in flat(l) {
                let (s2, d2) = if d.unsigned_abs() == 1 {
                    (s.checked_mul(n), Some(d))
                } else {
                    (Some(s), d.checked_mul(n))
                };
                match (s2, d2) {
                    (Some(s2), Some(d2)) => {
                        shapes.push(s2);
                        strides.push(d2);
                    }
                    _ => fits = false,
                }
            }
            !fits || layout_of(&shapes.into_iter().zip(strides).collect::<Vec<_>>()).is_err()
        }
        _ => n < 1 || !flat(l).iter().any(|&(_, d)| d == 1),
    };
    ensure(bad, || unjustified("downcast", e))
}

/// `tile_to_shape(block, target, order)` refused with `e`: a target extent below 1; the block
/// has more modes than the target; a block mode's size does not divide the target mode's; the
/// order does not fit the shape of the copies; or the blocked product is refused for a reason
/// [`zipped_pairs_refused`] accepts.
pub fn tile_to_shape_refused(
    block: &Layout,
    target: &IntTuple,
    order: Option<&IntTuple>,
    e: &LayoutError,
) -> Verdict {
    if target.leaves().iter().any(|&t| t < 1) {
        return ensure(matches!(e, LayoutError::BadShape { .. }), || {
            unjustified("tile_to_shape", e)
        });
    }
    let rank = target.rank();
    if block.rank() > rank {
        return ensure(says(e, "rank"), || unjustified("tile_to_shape", e));
    }
    let pb = padded(block, rank)?;
    let sizes: Vec<i64> = if rank == 1 {
        vec![pb.size()]
    } else {
        pb.modes().map(|m| m.size()).collect()
    };
    let mut copies = Vec::new();
    for (b, t) in sizes.iter().zip(target.modes()) {
        let t = t.product().map_err(|e| e.to_string())?;
        if t % b != 0 {
            return ensure(says(e, "does not divide"), || {
                unjustified("tile_to_shape", e)
            });
        }
        copies.push(t / b);
    }
    let shape = if target.is_int() {
        IntTuple::Int(copies[0])
    } else {
        IntTuple::flat(copies)
    };
    let arrangement = match order {
        Some(o) => match super::make_ordered_layout(&shape, o) {
            Ok(a) => a,
            Err(_) => {
                return ensure(!crate::int_tuple::weakly_congruent(o, &shape), || {
                    unjustified("tile_to_shape", e)
                })
            }
        },
        None => Layout::col_major(shape).map_err(|e| e.to_string())?,
    };
    zipped_pairs_refused(&pb, &arrangement, e)
}

/// A zipped, tiled or flat divide (`product == false`) or product refused with `e`: the
/// logical form is refused (as [`logical_divide_refused`] / [`logical_product_refused`]
/// accept), or a `_` item of the tiler stands over a mode of the logical result that is not
/// of rank 2, which CuTe's `zip2_by` needs to split it.
pub fn zipped_refused(l: &Layout, t: &Tiler, product: bool, e: &LayoutError) -> Verdict {
    let logical = if product {
        super::logical_product(l, t)
    } else {
        super::logical_divide(l, t)
    };
    match logical {
        Err(inner) if product => logical_product_refused(l, t, &inner),
        Err(inner) => logical_divide_refused(l, t, &inner),
        Ok(r) => ensure(skip_over_non_pair(&r, t), || unjustified("zipped form", e)),
    }
}

/// Whether a `_` item of `t` stands over a mode of `r` that is not of rank 2.
fn skip_over_non_pair(r: &Layout, t: &Tiler) -> bool {
    match t {
        Tiler::Skip => r.is_int() || r.rank() != 2,
        Tiler::Layout(_) => false,
        Tiler::ByMode(ts) => r.modes().zip(ts).any(|(m, ti)| skip_over_non_pair(&m, ti)),
    }
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
