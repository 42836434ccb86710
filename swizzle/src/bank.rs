//! Shared-memory analysis for kernel authors: bank conflicts and vector widths.
//!
//! Both take a layout `L` from `(lane, value)` to an element offset in shared memory: mode 0
//! is the lanes of one warp (up to 32), the remaining modes are the values one lane moves in
//! one instruction, taken in their colexicographic order (index `lane + lanes * value`).

use std::fmt;

use crate::any::AnyLayout;
use crate::error::{Result, SwizzleError};
use crate::extent::check_enumerable;

/// The number of shared-memory banks, each 4 bytes wide.
pub const BANKS: i64 = 32;
/// Bytes served per shared-memory wavefront when nothing conflicts.
pub const WAVEFRONT_BYTES: i64 = 128;

/// The answer of [`bank_conflicts`]: wavefronts the access takes, and the fewest it could
/// take (`ideal`). Displayed as `WAVEFRONTS/IDEAL`, e.g. `8/1`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BankConflicts {
    /// Total wavefronts over all phases.
    pub wavefronts: i64,
    /// `ceil(total bytes / 128)`: the wavefronts a conflict-free access of this many bytes
    /// takes.
    pub ideal: i64,
}

impl BankConflicts {
    /// Whether the access takes no more wavefronts than the ideal.
    pub fn is_conflict_free(&self) -> bool {
        self.wavefronts <= self.ideal
    }
}

impl fmt::Display for BankConflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.wavefronts, self.ideal)
    }
}

/// The lanes (size of mode 0, or the whole size for an integral shape) and values per lane.
fn lanes_and_values(op: &'static str, l: &AnyLayout) -> Result<(i64, i64)> {
    let size = l.size();
    let lanes = if l.shape().is_int() {
        size
    } else {
        l.mode(0)?.size()
    };
    if !(1..=32).contains(&lanes) {
        return Err(SwizzleError::inadmissible(
            op,
            l.to_string(),
            format!("mode 0 must be the lanes of one warp (1 to 32), not {lanes}"),
        ));
    }
    Ok((lanes, size / lanes))
}

fn check_elem_bytes(op: &'static str, l: &AnyLayout, elem_bytes: i64) -> Result<()> {
    if (1..=1 << 20).contains(&elem_bytes) {
        Ok(())
    } else {
        Err(SwizzleError::inadmissible(
            op,
            format!("{l}, {elem_bytes}"),
            "element size must be between 1 and 2^20 bytes",
        ))
    }
}

/// Shared-memory wavefronts of one warp-wide access through `l`, and the ideal.
///
/// Model: `l` maps `(lane, value)` to an element offset (mode 0: the lanes, at most 32; the
/// other modes: the `v = size / lanes` values of one lane). Each lane accesses its `v`
/// elements of `elem_bytes` bytes, `v * elem_bytes` bytes in all. Lanes are served in phases
/// of 128 bytes: `128 / (v * elem_bytes)` consecutive lanes per phase, between 1 and 32
/// (32 lanes for 4-byte accesses, 16 for 8-byte, 8 for 16-byte). In a phase each of the 32
/// banks (4-byte words, bank = word mod 32) serves the distinct words mapped to it one per
/// wavefront; the same word twice is a broadcast and costs nothing. The phase takes as many
/// wavefronts as its busiest bank; the answer is the sum over phases. The ideal is
/// `ceil(total bytes / 128)`.
///
/// Errors: `Inadmissible` if mode 0 has more than 32 lanes or `elem_bytes` is not in
/// `1..=2^20`; `TooLarge` past [`ENUMERATION_LIMIT`](crate::ENUMERATION_LIMIT) accesses.
///
/// ```
/// use tessera_swizzle::{bank_conflicts, AnyLayout};
/// let p = |s: &str| s.parse::<AnyLayout>().unwrap();
/// // 8 lanes each read 16 bytes (8 halves) down a column of a 64-half-wide row-major tile:
/// // all 8 rows start in bank 0.
/// let plain = p("(8,8):(64,1)");
/// assert_eq!(bank_conflicts(&plain, 2).unwrap().to_string(), "8/1");
/// // the same access through the 128-byte swizzle (in 2-byte units: Sw<3,3,3>)
/// let swizzled = p("Sw<3,3,3> o (8,8):(64,1)");
/// assert_eq!(bank_conflicts(&swizzled, 2).unwrap().to_string(), "1/1");
/// ```
pub fn bank_conflicts<L: Clone + Into<AnyLayout>>(l: &L, elem_bytes: i64) -> Result<BankConflicts> {
    const OP: &str = "bank_conflicts";
    let l: AnyLayout = l.clone().into();
    check_elem_bytes(OP, &l, elem_bytes)?;
    let (lanes, v) = lanes_and_values(OP, &l)?;
    // The words are listed, not only the elements: an element of `elem_bytes` bytes spans up
    // to `elem_bytes / 4 + 2` of them.
    let words_per_element = (elem_bytes / 4 + 2) as u128;
    check_enumerable(OP, (lanes * v) as u128 * words_per_element, || {
        l.to_string()
    })?;
    let eb = i128::from(elem_bytes);
    let lane_bytes = i128::from(v) * eb;
    let per_phase = (i128::from(WAVEFRONT_BYTES) / lane_bytes).clamp(1, 32) as i64;
    let mut wavefronts = 0i64;
    let mut lane = 0i64;
    while lane < lanes {
        let end = (lane + per_phase).min(lanes);
        // The distinct 4-byte words this phase touches; sorting and deduplicating keeps the
        // cost n log n in the access size (a broadcast of one word is free).
        let mut words: Vec<i128> = Vec::new();
        for t in lane..end {
            for e in 0..v {
                let off = i128::from(l.call(t + lanes * e)?);
                let first = (off * eb).div_euclid(4);
                let last = (off * eb + eb - 1).div_euclid(4);
                words.extend(first..=last);
            }
        }
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0i64; BANKS as usize];
        for w in &words {
            per_bank[w.rem_euclid(i128::from(BANKS)) as usize] += 1;
        }
        wavefronts += per_bank.iter().copied().max().unwrap_or(0);
        lane = end;
    }
    let total = i128::from(lanes) * lane_bytes;
    let wave = i128::from(WAVEFRONT_BYTES);
    let ideal = ((total + wave - 1) / wave).max(1) as i64;
    Ok(BankConflicts { wavefronts, ideal })
}

/// The answer of [`vectorization`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Vectorization {
    /// The largest `n` dividing the values per lane such that every lane's values come in
    /// runs of `n` consecutive offsets (`L(t, k*n + j) == L(t, k*n) + j`).
    pub contiguous: i64,
    /// The widest vector access usable: the largest power of two `w` dividing `contiguous`,
    /// with `w * elem_bytes <= 16`, whose runs all start at offsets that are multiples of `w`.
    pub vector_elems: i64,
    /// `vector_elems * elem_bytes`: the bytes of one vector access, which is also the
    /// alignment the tile's base address needs.
    pub vector_bytes: i64,
}

/// The widest contiguous vector per lane and the alignment it needs, for a `(lane, value)`
/// layout as in [`bank_conflicts`] (CuTe picks copy vector widths with
/// `max_common_vector`; this answers the same question for one layout, swizzled or not,
/// by checking every lane).
///
/// Errors: as [`bank_conflicts`].
///
/// ```
/// use tessera_swizzle::{vectorization, AnyLayout};
/// let p = |s: &str| s.parse::<AnyLayout>().unwrap();
/// // 8 lanes, 8 contiguous halves each, rows of 64: 16-byte vectors
/// let v = vectorization(&p("Sw<3,3,3> o (8,8):(64,1)"), 2).unwrap();
/// assert_eq!((v.contiguous, v.vector_elems, v.vector_bytes), (8, 8, 16));
/// // a swizzle with M = 1 that XORs the row into bits 1-2 keeps only pairs of halves together
/// let v = vectorization(&p("Sw<2,1,5> o (8,8):(64,1)"), 2).unwrap();
/// assert_eq!((v.contiguous, v.vector_elems), (2, 2));
/// ```
pub fn vectorization<L: Clone + Into<AnyLayout>>(l: &L, elem_bytes: i64) -> Result<Vectorization> {
    const OP: &str = "vectorization";
    let l: AnyLayout = l.clone().into();
    check_elem_bytes(OP, &l, elem_bytes)?;
    let (lanes, v) = lanes_and_values(OP, &l)?;
    check_enumerable(OP, (lanes * v) as u128, || l.to_string())?;
    let mut offs = vec![vec![0i64; v as usize]; lanes as usize];
    for (t, row) in offs.iter_mut().enumerate() {
        for (e, slot) in row.iter_mut().enumerate() {
            *slot = l.call(t as i64 + lanes * e as i64)?;
        }
    }
    let runs_of = |n: i64| {
        offs.iter().all(|row| {
            row.chunks(n as usize).all(|c| {
                c.iter()
                    .enumerate()
                    .all(|(j, &x)| x.checked_sub(c[0]) == Some(j as i64))
            })
        })
    };
    let contiguous = (1..=v)
        .rev()
        .find(|&n| v % n == 0 && runs_of(n))
        .unwrap_or(1);
    let mut w = 1i64;
    while contiguous % (w * 2) == 0
        && w * 2 * elem_bytes <= 16
        && offs.iter().all(|row| {
            row.chunks((w * 2) as usize)
                .all(|c| c[0].rem_euclid(w * 2) == 0)
        })
    {
        w *= 2;
    }
    Ok(Vectorization {
        contiguous,
        vector_elems: w,
        vector_bytes: w * elem_bytes,
    })
}
