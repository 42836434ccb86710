//! Swizzle synthesis: the swizzle of a shared-memory tile that minimises the bank-conflict
//! wavefronts of some warp accesses while keeping their widest vector access, and the
//! wavefront each accessed element takes (for pictures).
//!
//! An *access* is a layout from `(lane, value)` to a coordinate index of the tile (mode 0
//! the lanes of one warp instruction, at most 32; the other modes the values one lane moves,
//! as for [`bank_conflicts`](crate::bank_conflicts)); the *tile* (`smem`) maps those
//! coordinates to element offsets before any swizzle. A swizzle `Sw` makes the tile
//! `Sw o 0 o smem`, and the access then reaches `Sw(smem(access(i)))`.

use std::collections::HashMap;

use tessera_layout::Layout;

use crate::bank::{BankConflicts, BANKS, WAVEFRONT_BYTES};
use crate::error::{Result, SwizzleError};
use crate::extent::{check_enumerable, layout_is_injective};
use crate::f2::F2Map;
use crate::swizzle::Swizzle;

/// The answer of [`best_swizzle`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SwizzleChoice {
    /// The chosen swizzle, in element units.
    pub swizzle: Swizzle,
    /// Wavefronts / ideal of each access through `swizzle o 0 o smem`, in the order given.
    pub conflicts: Vec<BankConflicts>,
    /// The vector width (elements) of each access through it, as [`vectorization`]
    /// (crate::vectorization) computes it; at least the width without a swizzle.
    pub vector_elems: Vec<i64>,
}

impl SwizzleChoice {
    /// Wavefronts summed over the accesses.
    pub fn wavefronts(&self) -> i64 {
        self.conflicts.iter().map(|c| c.wavefronts).sum()
    }
}

/// The answer of [`best_xor_swizzle`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct XorSwizzleChoice {
    /// The chosen XOR-linear bijection of element offsets `[0, 2^map.in_bits())` (offsets
    /// of the tile are below that); the swizzled tile is `i ↦ map(smem(i))`.
    pub map: F2Map,
    /// `Some(sw)` when the map is that `Sw<B,M,S>` (no general map did better).
    pub swizzle: Option<Swizzle>,
    /// Wavefronts / ideal of each access through the map.
    pub conflicts: Vec<BankConflicts>,
    /// The vector width of each access through the map.
    pub vector_elems: Vec<i64>,
}

impl XorSwizzleChoice {
    /// Wavefronts summed over the accesses.
    pub fn wavefronts(&self) -> i64 {
        self.conflicts.iter().map(|c| c.wavefronts).sum()
    }
}

/// One access resolved to unswizzled element offsets, index `lane + lanes * value`.
struct Access {
    lanes: i64,
    values: i64,
    offs: Vec<i64>,
}

/// What is fixed about the tile for every candidate.
struct Tile {
    /// Element offsets are in `[0, 2^bits)`.
    bits: u32,
    /// `Some(size)` when the tile is a bijection onto `[0, size)`; else the image as flags.
    compact: Option<i64>,
    image: Vec<bool>,
}

fn operands(accesses: &[Layout], smem: &Layout, elem_bytes: i64) -> String {
    let list: Vec<String> = accesses.iter().map(|a| a.to_string()).collect();
    format!("[{}], {smem}, {elem_bytes}", list.join(", "))
}

fn resolve(op: &'static str, a: &Layout, smem: &Layout) -> Result<Access> {
    let size = a.size();
    let lanes = if a.is_int() { size } else { a.mode(0)?.size() };
    if !(1..=32).contains(&lanes) {
        return Err(SwizzleError::inadmissible(
            op,
            format!("{a}, {smem}"),
            format!("mode 0 of the access must be the lanes of one warp (1 to 32), not {lanes}"),
        ));
    }
    check_enumerable(op, size as u128, || format!("{a}, {smem}"))?;
    let mut offs = Vec::with_capacity(size as usize);
    for i in 0..size {
        let c = a.call(i)?;
        if !(0..smem.size()).contains(&c) {
            return Err(SwizzleError::inadmissible(
                op,
                format!("{a}, {smem}"),
                format!(
                    "index {i} of the access reaches coordinate {c}, outside the tile's [0, {})",
                    smem.size()
                ),
            ));
        }
        offs.push(smem.call(c)?);
    }
    Ok(Access {
        lanes,
        values: size / lanes,
        offs,
    })
}

fn tile(op: &'static str, smem: &Layout, ctx: impl Fn() -> String) -> Result<Tile> {
    // The cheap checks first: the injectivity test may enumerate the tile.
    let (lo, hi) = smem.image_bounds();
    if lo < 0 {
        return Err(SwizzleError::inadmissible(
            op,
            ctx(),
            format!("the tile {smem} reaches the negative offset {lo}"),
        ));
    }
    check_enumerable(op, hi as u128 + 1, &ctx)?;
    if !layout_is_injective(op, smem)? {
        return Err(SwizzleError::inadmissible(
            op,
            ctx(),
            format!("the tile {smem} is not injective (two coordinates share an offset)"),
        ));
    }
    let bits = 64 - (hi as u64).leading_zeros();
    let compact = (hi + 1 == smem.size()).then_some(smem.size());
    let mut image = Vec::new();
    if compact.is_none() {
        image = vec![false; hi as usize + 1];
        for x in smem.offsets() {
            image[x as usize] = true;
        }
    }
    Ok(Tile {
        bits,
        compact,
        image,
    })
}

impl Tile {
    /// Whether `f` (a bijection of the integers that keeps every aligned block of
    /// `2^block_bits` offsets) maps the tile's image onto itself.
    fn preserved_by(&self, block_bits: u32, f: impl Fn(i64) -> i64) -> bool {
        match self.compact {
            // Whole blocks below the last partial one map onto themselves.
            Some(size) => {
                let start = (size >> block_bits) << block_bits;
                (start..size).all(|x| (0..size).contains(&f(x)))
            }
            None => self
                .image
                .iter()
                .enumerate()
                .filter(|(_, &hit)| hit)
                .all(|(x, _)| {
                    let y = f(x as i64);
                    y >= 0 && (y as usize) < self.image.len() && self.image[y as usize]
                }),
        }
    }
}

fn check_elem_bytes(op: &'static str, elem_bytes: i64, ctx: impl Fn() -> String) -> Result<()> {
    if [1, 2, 4, 8, 16].contains(&elem_bytes) {
        Ok(())
    } else {
        Err(SwizzleError::inadmissible(
            op,
            ctx(),
            "the element size must be 1, 2, 4, 8 or 16 bytes",
        ))
    }
}

/// Lanes served per phase: `128 / bytes per lane`, between 1 and 32 (as `bank_conflicts`).
fn lanes_per_phase(values: i64, elem_bytes: i64) -> i64 {
    (WAVEFRONT_BYTES / (values * elem_bytes)).clamp(1, 32)
}

/// Wavefronts / ideal of an access whose element `i` is at `off(i)`, by the model of
/// [`bank_conflicts`](crate::bank_conflicts): per phase, the busiest bank's count of distinct
/// 4-byte words.
fn count(a: &Access, elem_bytes: i64, off: impl Fn(i64) -> i64) -> BankConflicts {
    let per_phase = lanes_per_phase(a.values, elem_bytes);
    let mut wavefronts = 0;
    let mut words: Vec<i64> = Vec::new();
    let mut lane = 0;
    while lane < a.lanes {
        let end = (lane + per_phase).min(a.lanes);
        words.clear();
        for t in lane..end {
            for e in 0..a.values {
                let x = off(t + a.lanes * e) * elem_bytes;
                words.extend(x / 4..=(x + elem_bytes - 1) / 4);
            }
        }
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0i64; BANKS as usize];
        for w in &words {
            per_bank[w.rem_euclid(BANKS) as usize] += 1;
        }
        wavefronts += per_bank.iter().copied().max().unwrap_or(0);
        lane = end;
    }
    let total = a.lanes * a.values * elem_bytes;
    BankConflicts {
        wavefronts,
        ideal: ((total + WAVEFRONT_BYTES - 1) / WAVEFRONT_BYTES).max(1),
    }
}

/// The vector width (elements) of an access at `off(i)`, as
/// [`vectorization`](crate::vectorization) defines it.
fn vector(a: &Access, elem_bytes: i64, off: impl Fn(i64) -> i64) -> i64 {
    let v = a.values;
    let at = |t: i64, e: i64| off(t + a.lanes * e);
    let runs = |n: i64| (0..a.lanes).all(|t| (0..v).all(|e| at(t, e) - at(t, e - e % n) == e % n));
    let contiguous = (1..=v).rev().find(|&n| v % n == 0 && runs(n)).unwrap_or(1);
    let mut w = 1;
    while contiguous % (w * 2) == 0
        && w * 2 * elem_bytes <= 16
        && (0..a.lanes).all(|t| {
            (0..v)
                .step_by((w * 2) as usize)
                .all(|e| at(t, e) % (w * 2) == 0)
        })
    {
        w *= 2;
    }
    w
}

/// The candidates of [`best_swizzle`] for offsets in `[0, 2^bits)`, in the order that breaks
/// ties: the identity first, then by `(B, |S|, S < 0, M)` ascending, for every `B >= 1`,
/// `M >= 0`, `|S| >= B` with `M + B + |S| <= bits`. Beyond `bits`, a swizzle either reads
/// bits no offset has (a smaller candidate does the same) or moves offsets out of the tile.
pub fn swizzle_family(bits: u32) -> Vec<Swizzle> {
    let n = i64::from(bits.min(62));
    let mut out = vec![Swizzle::identity()];
    for b in 1..=n {
        for abs_s in b..=n - b {
            for s in [abs_s, -abs_s] {
                for m in 0..=n - b - abs_s {
                    if let Ok(sw) = Swizzle::new(b, m, s) {
                        out.push(sw);
                    }
                }
            }
        }
    }
    out
}

/// The swizzle `Sw<B,M,S>` of the tile `smem` (coordinates to element offsets) that
/// minimises the wavefronts of `accesses` (summed), among those that keep each access's
/// vector width (that of the access through the unswizzled tile) and map the tile's offsets
/// onto themselves: the best of [`swizzle_family`] (every `Sw<B,M,S>` within the tile's
/// offset bits), ties broken by that order, so the identity wins when nothing beats it.
/// Found by evaluating every candidate (a few hundred for a 16 KiB tile); [`best_swizzle_among`]
/// restricts the candidates (to the hardware's TMA modes, say).
///
/// Post-condition: no candidate of the family that keeps the vector widths and the tile's
/// offsets takes fewer wavefronts; `conflicts[k]` is
/// `bank_conflicts(composition(swizzle o 0 o smem, accesses[k]), elem_bytes)`.
///
/// Errors: `Inadmissible` if an access has more than 32 lanes or reaches a coordinate outside
/// the tile, the tile is not injective or reaches a negative offset, or `elem_bytes` is not
/// 1, 2, 4, 8 or 16; `TooLarge` past [`ENUMERATION_LIMIT`].
///
/// ```
/// use tessera_layout::Layout;
/// use tessera_swizzle::best_swizzle;
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// // 8 rows of 64 halves (128 bytes); 8 lanes read 8 halves each down column chunk 0:
/// // lane m reads coordinates (m, 0..8), index m + 8k.
/// let smem = p("(8,64):(64,1)");
/// let read = p("(8,8):(1,8)");
/// let c = best_swizzle(&[read], &smem, 2).unwrap();
/// assert_eq!(c.swizzle.to_string(), "Sw<3,3,3>"); // the 128-byte swizzle on halves
/// assert_eq!(c.conflicts[0].to_string(), "1/1"); // 8/1 without it
/// assert_eq!(c.vector_elems, [8]); // still 16-byte vectors
/// ```
pub fn best_swizzle(accesses: &[Layout], smem: &Layout, elem_bytes: i64) -> Result<SwizzleChoice> {
    let bits = swizzle_bits("best_swizzle", smem)?;
    search(
        "best_swizzle",
        accesses,
        smem,
        elem_bytes,
        &swizzle_family(bits),
    )
}

/// [`best_swizzle`] over the given candidates (tried in order; the first of the fewest
/// wavefronts wins): for a planner bound to hardware swizzle modes.
///
/// Errors: as [`best_swizzle`]; `Inadmissible` if no candidate keeps the vector widths and
/// the tile's offsets.
///
/// ```
/// use tessera_layout::Layout;
/// use tessera_swizzle::{atoms, best_swizzle_among, Swizzle};
/// // the TMA modes on 2-byte elements: none, 32, 64, 128 bytes
/// let modes: Vec<Swizzle> = [16, 32, 64, 128]
///     .iter()
///     .map(|&w| atoms::byte_swizzle(w).unwrap().upcast(2).unwrap())
///     .collect();
/// let smem: Layout = "(8,64):(64,1)".parse().unwrap();
/// let read: Layout = "(8,8):(1,8)".parse().unwrap();
/// let c = best_swizzle_among(&[read], &smem, 2, &modes).unwrap();
/// assert_eq!(c.swizzle.to_string(), "Sw<3,3,3>");
/// ```
pub fn best_swizzle_among(
    accesses: &[Layout],
    smem: &Layout,
    elem_bytes: i64,
    candidates: &[Swizzle],
) -> Result<SwizzleChoice> {
    search("best_swizzle", accesses, smem, elem_bytes, candidates)
}

fn swizzle_bits(op: &'static str, smem: &Layout) -> Result<u32> {
    let (lo, hi) = smem.image_bounds();
    if lo < 0 {
        return Err(SwizzleError::inadmissible(
            op,
            smem.to_string(),
            format!("the tile reaches the negative offset {lo}"),
        ));
    }
    Ok(64 - (hi as u64).leading_zeros())
}

fn search(
    op: &'static str,
    accesses: &[Layout],
    smem: &Layout,
    elem_bytes: i64,
    candidates: &[Swizzle],
) -> Result<SwizzleChoice> {
    let ctx = || operands(accesses, smem, elem_bytes);
    check_elem_bytes(op, elem_bytes, ctx)?;
    let acc = accesses
        .iter()
        .map(|a| resolve(op, a, smem))
        .collect::<Result<Vec<_>>>()?;
    let tile = tile(op, smem, ctx)?;
    let widths: Vec<i64> = acc
        .iter()
        .map(|a| vector(a, elem_bytes, |i| a.offs[i as usize]))
        .collect();
    let mut best: Option<SwizzleChoice> = None;
    for &sw in candidates {
        let vector_elems: Vec<i64> = acc
            .iter()
            .map(|a| vector(a, elem_bytes, |i| sw.apply(a.offs[i as usize])))
            .collect();
        if vector_elems.iter().zip(&widths).any(|(v, w)| v < w) {
            continue;
        }
        let conflicts: Vec<BankConflicts> = acc
            .iter()
            .map(|a| count(a, elem_bytes, |i| sw.apply(a.offs[i as usize])))
            .collect();
        let total: i64 = conflicts.iter().map(|c| c.wavefronts).sum();
        // The image check walks the tile, so it runs only for a candidate that would win.
        let top = (sw.base() + sw.bits() + sw.shift().abs()) as u32;
        if best.as_ref().map_or(true, |b| total < b.wavefronts())
            && tile.preserved_by(top, |x| sw.apply(x))
        {
            best = Some(SwizzleChoice {
                swizzle: sw,
                conflicts,
                vector_elems,
            });
        }
    }
    best.ok_or_else(|| {
        SwizzleError::inadmissible(
            op,
            ctx(),
            "no candidate swizzle keeps the vector widths and the tile's offsets",
        )
    })
}

/// A linear map over F2 defined on a subspace: pivots `(h, a)` with distinct leading bits of
/// `h`, meaning `A(h) = a`. Reducing a vector by the pivots (highest leading bit first)
/// writes it uniquely as a sum of pivots plus a residue without leading bits; `A` is 0 on the
/// residue, which extends it linearly to the whole space.
#[derive(Default)]
struct PartialMap {
    pivots: Vec<(u64, u64)>,
}

impl PartialMap {
    /// `(residue, A(x - residue))`.
    fn reduce(&self, mut x: u64) -> (u64, u64) {
        let mut acc = 0;
        for &(h, a) in &self.pivots {
            let lead = 63 - h.leading_zeros();
            if (x >> lead) & 1 == 1 {
                x ^= h;
                acc ^= a;
            }
        }
        (x, acc)
    }

    /// Sets `A(x) = a` for an `x` outside the span of the pivots (inside it, `A(x)` is
    /// already fixed and nothing changes).
    fn define(&mut self, x: u64, a: u64) {
        let (r, acc) = self.reduce(x);
        if r == 0 {
            return;
        }
        self.pivots.push((r, a ^ acc));
        self.pivots
            .sort_by_key(|&(h, _)| std::cmp::Reverse(h.leading_zeros() ^ 63));
    }
}

/// Inserts `v` into an XOR basis kept with distinct leading bits; false if `v` is in its span.
fn insert(basis: &mut Vec<u64>, v: u64) -> bool {
    let mut v = v;
    for &b in basis.iter() {
        v = v.min(v ^ b);
    }
    if v == 0 {
        return false;
    }
    basis.push(v);
    basis.sort_unstable_by(|a, b| b.cmp(a));
    true
}

fn in_span(basis: &[u64], v: u64) -> bool {
    basis.iter().fold(v, |v, &b| v.min(v ^ b)) == 0
}

/// The XOR-linear map of the tile's offsets that minimises the wavefronts of `accesses`
/// (summed) while keeping each access's vector width: a generalisation of [`best_swizzle`]
/// to every map `x ↦ x ^ A(x >> h)` where `A` is any F2-linear map from the offset bits above
/// a 128-byte line (bits `h` and up) into the bits that pick a bank group inside the line
/// (above the vector bits). Such a map is its own inverse, keeps every line of the tile in
/// place, and contains the usual swizzles; `Sw<4,1,4>`, which `best_swizzle` finds for the
/// 16x32 fp32 transpose, is one.
///
/// Synthesis, the linear algebra of Triton's generic swizzling recast for one tile: a phase of
/// an access touches an affine set of units (vector-sized pieces); it is conflict-free when
/// the bank-group bits of its units after the map are linearly independent. For each phase's
/// directions in turn, those whose line bits are new get `A` chosen so that their bank
/// group is a bank-group bit not yet spanned; directions whose `A` is already fixed keep it.
/// The wavefronts of the resulting map are then counted exactly, and compared with the best
/// `Sw<B,M,S>` ([`best_swizzle`]); the better is returned (the swizzle on a tie), so the
/// answer is never worse than the best swizzle.
///
/// Errors: as [`best_swizzle`].
///
/// ```
/// use tessera_layout::Layout;
/// use tessera_swizzle::{best_swizzle, best_xor_swizzle};
/// let p = |s: &str| s.parse::<Layout>().unwrap();
/// let smem = p("(8,64):(64,1)");
/// let read = p("(8,8):(1,8)");
/// let x = best_xor_swizzle(&[read.clone()], &smem, 2).unwrap();
/// let s = best_swizzle(&[read], &smem, 2).unwrap();
/// assert!(x.wavefronts() <= s.wavefronts());
/// assert_eq!(x.conflicts[0].to_string(), "1/1");
/// ```
pub fn best_xor_swizzle(
    accesses: &[Layout],
    smem: &Layout,
    elem_bytes: i64,
) -> Result<XorSwizzleChoice> {
    const OP: &str = "best_xor_swizzle";
    let ctx = || operands(accesses, smem, elem_bytes);
    check_elem_bytes(OP, elem_bytes, ctx)?;
    let tile = tile(OP, smem, ctx)?;
    let swz = search(OP, accesses, smem, elem_bytes, &swizzle_family(tile.bits))?;
    let acc = accesses
        .iter()
        .map(|a| resolve(OP, a, smem))
        .collect::<Result<Vec<_>>>()?;
    let widths: Vec<i64> = acc
        .iter()
        .map(|a| vector(a, elem_bytes, |i| a.offs[i as usize]))
        .collect();
    let eb = elem_bytes.trailing_zeros();
    let v = widths.iter().map(|w| w.trailing_zeros()).max().unwrap_or(0);
    // Offset bits [lo, hi) pick the bank group of a unit inside a 128-byte line.
    let hi = 7u32.saturating_sub(eb);
    let lo = v.max(2u32.saturating_sub(eb)).min(hi);
    let fallback = || XorSwizzleChoice {
        map: F2Map::of_swizzle(&swz.swizzle, tile.bits),
        swizzle: Some(swz.swizzle),
        conflicts: swz.conflicts.clone(),
        vector_elems: swz.vector_elems.clone(),
    };
    if tile.bits <= hi || lo == hi {
        return Ok(fallback());
    }
    let bb = hi - lo;
    let bank_mask = (1u64 << bb) - 1;
    let mut a_map = PartialMap::default();
    for a in &acc {
        let per_phase = lanes_per_phase(a.values, elem_bytes);
        let mut lane = 0;
        while lane < a.lanes {
            let end = (lane + per_phase).min(a.lanes);
            let units: Vec<u64> = (lane..end)
                .flat_map(|t| (0..a.values).map(move |e| t + a.lanes * e))
                .map(|i| (a.offs[i as usize] as u64) >> lo)
                .collect();
            synthesize_phase(&mut a_map, &units, bb, bank_mask);
            lane = end;
        }
    }
    let columns: Vec<i64> = (0..tile.bits)
        .map(|j| {
            let unit = 1i64 << j;
            if j < hi {
                unit
            } else {
                unit | ((a_map.reduce(1u64 << (j - hi)).1 as i64) << lo)
            }
        })
        .collect();
    let map = F2Map::new(columns, 0)?;
    if !tile.preserved_by(hi, |x| map.apply(x)) {
        return Ok(fallback());
    }
    let vector_elems: Vec<i64> = acc
        .iter()
        .map(|a| vector(a, elem_bytes, |i| map.apply(a.offs[i as usize])))
        .collect();
    let conflicts: Vec<BankConflicts> = acc
        .iter()
        .map(|a| count(a, elem_bytes, |i| map.apply(a.offs[i as usize])))
        .collect();
    let total: i64 = conflicts.iter().map(|c| c.wavefronts).sum();
    let keeps = vector_elems.iter().zip(&widths).all(|(v, w)| v >= w);
    if keeps && total < swz.wavefronts() {
        Ok(XorSwizzleChoice {
            map,
            swizzle: None,
            conflicts,
            vector_elems,
        })
    } else {
        Ok(fallback())
    }
}

/// Extends `a_map` so that the units of one phase (offsets `>> lo`: `bb` bank-group bits,
/// then line bits) land in as many distinct bank groups as it can.
fn synthesize_phase(a_map: &mut PartialMap, units: &[u64], bb: u32, bank_mask: u64) {
    let Some(&u0) = units.first() else {
        return;
    };
    let mut dirs: Vec<u64> = Vec::new();
    for &u in units {
        insert(&mut dirs, u ^ u0);
    }
    // Split the directions: those with no line bits (the map leaves their bank group alone)
    // and those with independent line bits.
    let mut banks: Vec<u64> = Vec::new();
    let mut lines: Vec<u64> = Vec::new(); // distinct leading line bits
    let mut moved: Vec<u64> = Vec::new();
    for &d in &dirs {
        // Reduce the line bits by the earlier directions (their leading line bits differ,
        // and `lines` is sorted by them, highest first).
        let mut d = d;
        for &l in &lines {
            if (d ^ l) >> bb < d >> bb {
                d ^= l;
            }
        }
        if d >> bb == 0 {
            insert(&mut banks, d & bank_mask);
        } else {
            lines.push(d);
            lines.sort_unstable_by(|a, b| b.cmp(a));
            moved.push(d);
        }
    }
    for d in moved {
        let (h, b) = (d >> bb, d & bank_mask);
        let (residue, fixed) = a_map.reduce(h);
        if residue == 0 {
            insert(&mut banks, b ^ fixed);
            continue;
        }
        // A free direction: give it the lowest bank-group bit not yet spanned.
        if let Some(g) = (0..bb).map(|k| 1u64 << k).find(|&g| !in_span(&banks, g)) {
            a_map.define(h, b ^ g ^ fixed);
            insert(&mut banks, g);
        }
    }
}

/// `e` as an error of `op`, for an operation that reports what a helper it calls refused.
pub(crate) fn relabel(e: SwizzleError, op: &'static str) -> SwizzleError {
    match e {
        SwizzleError::Inadmissible {
            operands, reason, ..
        } => SwizzleError::Inadmissible {
            op,
            operands,
            reason,
        },
        SwizzleError::TooLarge {
            operands,
            needed,
            limit,
            ..
        } => SwizzleError::TooLarge {
            op,
            operands,
            needed,
            limit,
        },
        SwizzleError::Overflow { operands, .. } => SwizzleError::Overflow { op, operands },
        e => e,
    }
}

/// Where each element of an access goes: its lane and value, coordinate index, offset, the
/// 4-byte bank of its first byte and the wavefront that serves it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AccessCell {
    /// The lane.
    pub lane: i64,
    /// The value index within the lane.
    pub value: i64,
    /// The tile coordinate index.
    pub coord: i64,
    /// The element offset (swizzled, if the tile is).
    pub offset: i64,
    /// `offset * elem_bytes / 4 mod 32`.
    pub bank: i64,
    /// The wavefront (from 0, counted over the whole instruction) in which the element's
    /// last word is served.
    pub wavefront: i64,
}

/// The wavefront schedule of one warp access through a tile (plain or swizzled): each
/// element's bank and wavefront, by the model of [`bank_conflicts`](crate::bank_conflicts).
/// In each phase (lanes in order), the first distinct word a bank sees is served in the
/// phase's first wavefront, the second in the next, and so on; phases follow each other.
/// The last wavefront is `bank_conflicts(...).wavefronts - 1`.
///
/// Errors: as [`bank_conflicts`](crate::bank_conflicts), and `Inadmissible` if the access
/// reaches a coordinate outside the tile.
///
/// ```
/// use tessera_layout::Layout;
/// use tessera_swizzle::{wavefront_schedule, AnyLayout};
/// let tile: AnyLayout = "(8,64):(64,1)".parse().unwrap();
/// let read: Layout = "(8,8):(1,8)".parse().unwrap();
/// let cells = wavefront_schedule(&read, &tile, 2).unwrap();
/// // every row starts in bank 0: lane m waits for wavefront m
/// assert!(cells.iter().all(|c| c.bank == c.value / 2 && c.wavefront == c.lane));
/// ```
pub fn wavefront_schedule<L: Clone + Into<crate::AnyLayout>>(
    access: &Layout,
    tile: &L,
    elem_bytes: i64,
) -> Result<Vec<AccessCell>> {
    const OP: &str = "wavefront_schedule";
    let tile: crate::AnyLayout = tile.clone().into();
    let ctx = || format!("{access}, {tile}, {elem_bytes}");
    if !(1..=1 << 20).contains(&elem_bytes) {
        return Err(SwizzleError::inadmissible(
            OP,
            ctx(),
            "element size must be between 1 and 2^20 bytes",
        ));
    }
    let size = access.size();
    let lanes = if access.is_int() {
        size
    } else {
        access.mode(0)?.size()
    };
    if !(1..=32).contains(&lanes) {
        return Err(SwizzleError::inadmissible(
            OP,
            ctx(),
            format!("mode 0 must be the lanes of one warp (1 to 32), not {lanes}"),
        ));
    }
    check_enumerable(OP, size as u128, ctx)?;
    let values = size / lanes;
    let mut cells = Vec::with_capacity(size as usize);
    for v in 0..values {
        for t in 0..lanes {
            let coord = access.call(t + lanes * v)?;
            if !(0..tile.size()).contains(&coord) {
                return Err(SwizzleError::inadmissible(
                    OP,
                    ctx(),
                    format!("lane {t}, value {v} reaches coordinate {coord}, outside the tile"),
                ));
            }
            let offset = tile.call(coord)?;
            let byte = i128::from(offset) * i128::from(elem_bytes);
            cells.push(AccessCell {
                lane: t,
                value: v,
                coord,
                offset,
                bank: (byte.div_euclid(4)).rem_euclid(i128::from(BANKS)) as i64,
                wavefront: 0,
            });
        }
    }
    let per_phase = (i128::from(WAVEFRONT_BYTES) / (i128::from(values) * i128::from(elem_bytes)))
        .clamp(1, 32) as i64;
    let eb = i128::from(elem_bytes);
    let mut base = 0;
    let mut lane = 0;
    while lane < lanes {
        let end = (lane + per_phase).min(lanes);
        let mut wave_of: HashMap<i128, i64> = HashMap::new();
        let mut used = [0i64; BANKS as usize];
        for t in lane..end {
            for v in 0..values {
                let cell = &mut cells[(t + lanes * v) as usize];
                let byte = i128::from(cell.offset) * eb;
                let mut last = 0;
                for w in byte.div_euclid(4)..=(byte + eb - 1).div_euclid(4) {
                    let bank = w.rem_euclid(i128::from(BANKS)) as usize;
                    let k = *wave_of.entry(w).or_insert_with(|| {
                        used[bank] += 1;
                        used[bank] - 1
                    });
                    last = last.max(k);
                }
                cell.wavefront = base + last;
            }
        }
        base += used.iter().copied().max().unwrap_or(0);
        lane = end;
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_is_ordered_and_in_range() {
        let f = swizzle_family(4);
        assert_eq!(f[0], Swizzle::identity());
        assert!(f
            .iter()
            .skip(1)
            .all(|s| s.base() + s.bits() + s.shift().abs() <= 4));
        let keys: Vec<_> = f[1..]
            .iter()
            .map(|s| (s.bits(), s.shift().abs(), s.shift() < 0, s.base()))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        // B=1: |S|=1 (M 0..=2, both signs), |S|=2 (M 0..=1), |S|=3 (M 0); B=2: |S|=2 (M 0)
        assert_eq!(f.len(), 1 + 2 * (3 + 2 + 1) + 2);
    }
}
