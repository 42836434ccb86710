//! The window load: a convolution's A operand for inputs of few channels (C <= 8), where a
//! k-tile of 64 channels a tap (the im2col load) would be mostly zeros.
//!
//! x is staged once into *phase planes*: for a horizontal stride `sw`, plane `φ` of input
//! row `(n, h)` holds the pixels `w = sw·u + φ − pad_left` (u = 0, 1, ...), each pixel one
//! 16-byte *chunk* of 8 channels (zeros past C and outside x). Tap `s` of output pixel `q`
//! reads `w = sw·q − pad_left + s·dw = sw·(q + off(s)) + φ(s) − pad_left` with
//! `off(s) = ⌊s·dw / sw⌋`, `φ(s) = s·dw mod sw`: chunk `q + off(s)` of plane `φ(s)`. So for a
//! tile of output pixels `q0 .. q0 + BM` of one output row, every tap of filter row r is a
//! run of BM consecutive chunks of one plane, shifted by `off(s)`: the A operand's
//! `(row, k-chunk)` element is at byte `16·row + start(chunk)` of a *strip* of
//! `BM + max off` chunks loaded once per plane. That is wgmma's K-major layout without a
//! swizzle (rows 16 bytes apart, 8-row core matrices 128 bytes apart), with the two k-chunks
//! of a k16 step `LBO` bytes apart: any two taps pair up, their strips' distance being the
//! descriptor's `LBO`. Overlapping rows are read, never copied.
//!
//! A k-tile (64 elements of K, 8 chunks) takes `rows_per_ktile` filter rows of S taps each;
//! a filter row past R reads zeros (its load lands outside x) against zero weights, and an
//! odd count of taps pairs its last tap with a strip of zeros. The GEMM is batched over the
//! output rows `(n, p)` (batch `N·P`, `M = Q`, `K = 64·k_tiles`), the filter staged in the
//! k order the strips give ([`WindowTma::slots`]).

use crate::error::{KernelError, Result};
use crate::plan::sm90::ConvGeometry;
use crate::plan::sm90_layouts::{TmaSwizzle, WgmmaDesc};

/// Bytes of one chunk: 8 16-bit channels of a pixel, one row of a wgmma core matrix.
pub const CHUNK_BYTES: i64 = 16;
/// Channels of a chunk (16-bit elements).
pub const CHUNK_CHANNELS: i64 = 8;
/// Chunks in a k-tile of 64 elements.
const KTILE_CHUNKS: i64 = 8;
/// TMA's largest box along a dimension.
const MAX_BOX: i64 = 256;
/// Chunks in one row of a strip's TMA box (128 bytes): TMA moves a box a row at a time, and
/// rows of one 16-byte chunk would make a strip hundreds of rows.
pub const BOX_CHUNKS: i64 = 8;
/// A strip's start, as TMA writes it, is on 128 bytes.
const STRIP_ALIGN: i64 = 128;

/// A convolution loaded by the window load (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowTma {
    /// The convolution.
    pub conv: ConvGeometry,
}

/// One chunk of a k-tile: a tap `(filter row within the k-tile, s)` or the zero strip, and
/// its byte offset in the A stage for the tile's row 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSlot {
    /// `(row within the k-tile, s)`, or `None` for the zero strip.
    pub tap: Option<(i64, i64)>,
    /// Byte offset of row 0's chunk in the stage.
    pub at: i64,
}

impl WindowTma {
    /// Phase planes: the horizontal stride.
    pub fn planes(&self) -> i64 {
        self.conv.stride.1
    }

    /// `(φ(s), off(s))`: tap s reads chunk `q + off` of plane `φ`.
    pub fn phase_off(&self, s: i64) -> (i64, i64) {
        let sw = self.conv.stride.1;
        let d = s * self.conv.dil.1;
        (d % sw, d / sw)
    }

    /// The largest chunk offset of a tap, `off(S − 1)`.
    pub fn max_off(&self) -> i64 {
        self.phase_off(self.conv.rs.1 - 1).1
    }

    /// Chunks of a plane row in the staged copy: the output's Q plus the largest offset,
    /// rounded up to whole box rows (the staged zeros past the last pixel).
    pub fn chunks(&self) -> i64 {
        (self.conv.pq.1 + self.max_off() + BOX_CHUNKS - 1) / BOX_CHUNKS * BOX_CHUNKS
    }

    /// Elements of the staged copy, `N·H·planes·chunks·8`.
    pub fn staged_elems(&self) -> Option<i64> {
        let [n, _, h, _] = self.conv.x;
        [n, h, self.planes(), self.chunks(), CHUNK_CHANNELS]
            .iter()
            .try_fold(1i64, |a, &v| a.checked_mul(v))
    }

    /// Chunks of one strip: `BM` plus the largest offset, in whole box rows of 8.
    pub fn strip_rows(&self, bm: i64) -> i64 {
        (bm + self.max_off() + BOX_CHUNKS - 1) / BOX_CHUNKS * BOX_CHUNKS
    }

    /// Bytes from one strip to the next in a stage (128-byte aligned).
    pub fn strip_bytes(&self, bm: i64) -> i64 {
        (self.strip_rows(bm) * CHUNK_BYTES + STRIP_ALIGN - 1) / STRIP_ALIGN * STRIP_ALIGN
    }

    /// Filter rows per k-tile: as many whole rows of S taps as 8 chunks hold, fewer where
    /// their strips would not fit the stage (`BM x 64` elements). Decided for 64-row tiles,
    /// so that K does not depend on the tile the planner picks: strips that fit a 64-row
    /// stage fit a 128-row one (each strip grows by 1024 bytes, the stage by 8192, and at
    /// most 8 strips of at least 1024 bytes fit the smaller stage).
    pub fn rows_per_ktile(&self) -> i64 {
        let (_, s) = self.conv.rs;
        if !(1..=KTILE_CHUNKS).contains(&s) {
            return 0;
        }
        let bm = 64;
        let stage = bm * KTILE_CHUNKS * CHUNK_BYTES;
        (1..=KTILE_CHUNKS / s)
            .rev()
            .find(|&rows| {
                let strips = rows * self.planes() + i64::from(rows * s % 2 == 1);
                strips * self.strip_bytes(bm) <= stage
            })
            .unwrap_or(0)
    }

    /// The k-tiles: R filter rows, [`WindowTma::rows_per_ktile`] at a time.
    pub fn k_tiles(&self) -> i64 {
        let rows = self.rows_per_ktile().max(1);
        (self.conv.rs.0 + rows - 1) / rows
    }

    /// The GEMM's K: 64 elements a k-tile.
    pub fn gemm_k(&self) -> i64 {
        self.k_tiles() * KTILE_CHUNKS * CHUNK_CHANNELS
    }

    /// Whether a k-tile's taps are odd in number: the last k16 step pairs its last tap with
    /// a strip of zeros (loaded from outside x).
    pub fn zero_strip(&self) -> bool {
        self.rows_per_ktile() * self.conv.rs.1 % 2 == 1
    }

    /// Strips a stage loads: one per filter row of the k-tile and plane, then the zero strip.
    pub fn strips(&self) -> i64 {
        self.rows_per_ktile() * self.planes() + i64::from(self.zero_strip())
    }

    /// Bytes the TMA loads of a stage deliver (every strip's whole box).
    pub fn load_bytes(&self, bm: i64) -> i64 {
        self.strips() * self.strip_rows(bm) * CHUNK_BYTES
    }

    /// A k-tile's chunks in K order: filter row, plane, then offset (so their stage offsets
    /// increase, and every k16 step's second chunk lies after its first: LBO > 0), then the
    /// zero strip. The filter is staged in this order.
    pub fn slots(&self, bm: i64) -> Vec<WindowSlot> {
        let (_, s_taps) = self.conv.rs;
        let sb = self.strip_bytes(bm);
        let mut v = Vec::new();
        for rl in 0..self.rows_per_ktile() {
            for ph in 0..self.planes() {
                for s in 0..s_taps {
                    let (p, off) = self.phase_off(s);
                    if p == ph {
                        v.push(WindowSlot {
                            tap: Some((rl, s)),
                            at: (rl * self.planes() + ph) * sb + off * CHUNK_BYTES,
                        });
                    }
                }
            }
        }
        if self.zero_strip() {
            v.push(WindowSlot {
                tap: None,
                at: self.rows_per_ktile() * self.planes() * sb,
            });
        }
        v
    }

    /// The wgmma k16 steps of a k-tile: each one's start offset in the stage and its
    /// descriptor (no swizzle; SBO 128 bytes: 8 rows of 16; LBO from its first chunk to its
    /// second).
    pub fn k_steps(&self, bm: i64) -> Vec<(i64, WgmmaDesc)> {
        self.slots(bm)
            .chunks(2)
            .map(|p| {
                (
                    p[0].at,
                    WgmmaDesc {
                        lbo_bytes: p[1].at - p[0].at,
                        sbo_bytes: 8 * CHUNK_BYTES,
                        swizzle: TmaSwizzle::None,
                        k_step_bytes: 0,
                    },
                )
            })
            .collect()
    }

    /// [`WindowTma::k_steps`] in words: each step's start and LBO in bytes.
    pub fn describe_steps(&self, bm: i64) -> String {
        let steps: Vec<String> = self
            .k_steps(bm)
            .iter()
            .map(|(at, d)| format!("+{at} LBO {}", d.lbo_bytes))
            .collect();
        steps.join(", ")
    }

    /// Why the window load cannot take this convolution with BM-row tiles, or `None`.
    pub fn refusal(&self, bm: i64) -> Option<String> {
        let [_, c, _, _] = self.conv.x;
        let (_, s) = self.conv.rs;
        if !(1..=CHUNK_CHANNELS).contains(&c) {
            return Some(format!(
                "C = {c}: a tap is one 16-byte chunk of 8 channels (C <= 8)"
            ));
        }
        if s > KTILE_CHUNKS {
            return Some(format!(
                "S = {s}: a filter row's taps must fit one k-tile of 8 chunks"
            ));
        }
        let rows = self.strip_rows(bm);
        if rows / BOX_CHUNKS > MAX_BOX {
            return Some(format!(
                "a strip of {rows} chunks: TMA boxes are at most {MAX_BOX} rows of {BOX_CHUNKS} long"
            ));
        }
        if self.rows_per_ktile() == 0 {
            return Some(format!(
                "{} planes of {} bytes: not one filter row's strips fit a 64-row tile's {}-byte stage",
                self.planes(),
                self.strip_bytes(64),
                64 * KTILE_CHUNKS * CHUNK_BYTES
            ));
        }
        let last = self.slots(bm).last().map_or(0, |v| v.at);
        if last >= (1 << 14) * CHUNK_BYTES {
            return Some("strip offsets beyond the descriptor's 14-bit LBO".to_string());
        }
        let [n, _, h, _] = self.conv.x;
        if [n, h, self.chunks() * self.planes()]
            .iter()
            .any(|&v| v > i32::MAX as i64)
        {
            return Some("a dimension beyond TMA's 32-bit coordinates".to_string());
        }
        None
    }

    /// Checks the window load's own invariants and that the problem is its GEMM: batch
    /// `N·P`, `M = Q`, `K = 64·k_tiles`.
    pub fn check(&self, bm: i64, batch: i64, m: i64, k: i64) -> Result<()> {
        let op = "Sm90Plan";
        if let Some(why) = self.refusal(bm) {
            return Err(KernelError::invalid(op, format!("window load of A: {why}")));
        }
        let [n, _, _, _] = self.conv.x;
        let (p, q) = self.conv.pq;
        if batch != n * p || m != q || k != self.gemm_k() {
            return Err(KernelError::invalid(
                op,
                format!(
                    "window load of A: the problem is {batch} x ({m} x {k}) but the convolution's GEMM is N·P = {} batches of M = Q = {q} by K = {}",
                    n * p,
                    self.gemm_k()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stem() -> WindowTma {
        WindowTma {
            conv: ConvGeometry {
                x: [2, 3, 224, 224],
                rs: (7, 7),
                pq: (112, 112),
                stride: (2, 2),
                pad: (3, 3, 3, 3),
                dil: (1, 1),
            },
        }
    }

    /// Every row of every k16 step reads, through its descriptor (start + 16 row + LBO for
    /// the second chunk), the strip chunk of the tap the slot names: the pixel the
    /// convolution's formula gives. Independent of `slots`' own arithmetic: the stage offset
    /// is decoded back to (strip, chunk) and the pixel recomputed from the staging rule.
    fn check_addressing(t: &WindowTma, bm: i64) {
        let sb = t.strip_bytes(bm);
        let slots = t.slots(bm);
        let steps = t.k_steps(bm);
        assert_eq!(steps.len() as i64, (slots.len() as i64 + 1) / 2);
        let (sw, pl, dw) = (t.conv.stride.1, t.conv.pad.2, t.conv.dil.1);
        for (i, (start, d)) in steps.iter().enumerate() {
            assert!(d.lbo_bytes > 0 && d.lbo_bytes % 16 == 0, "{t:?} step {i}");
            for half in 0..2 {
                let Some(slot) = slots.get(2 * i + half) else {
                    continue;
                };
                for row in [0, 1, 7, 8, 63, bm - 1] {
                    let byte = start + half as i64 * d.lbo_bytes + 16 * row;
                    let (strip, chunk) = (byte / sb, (byte % sb) / 16);
                    match slot.tap {
                        Some((rl, s)) => {
                            assert_eq!(strip, rl * t.planes() + (s * dw) % sw);
                            // Staged: chunk u of plane φ is pixel sw u + φ − pl; the tile's
                            // row `row` starts its strip at u = q0 + 0 (q0 = 0 here).
                            let pixel = sw * chunk + (s * dw) % sw - pl;
                            assert_eq!(pixel, sw * row - pl + s * dw, "{t:?} s {s} row {row}");
                            assert!(chunk < t.strip_rows(bm));
                        }
                        None => assert_eq!(strip, t.rows_per_ktile() * t.planes()),
                    }
                }
            }
        }
    }

    #[test]
    fn the_stem_pairs_taps_across_planes() {
        let t = stem();
        assert_eq!(t.refusal(128), None);
        assert_eq!((t.planes(), t.max_off(), t.chunks()), (2, 3, 120));
        assert_eq!((t.rows_per_ktile(), t.k_tiles(), t.gemm_k()), (1, 7, 448));
        // 7 taps: 4 on plane 0 (s even), 3 on plane 1, then the zero strip.
        assert!(t.zero_strip());
        assert_eq!(t.strips(), 3);
        assert_eq!(t.k_steps(128).len(), 4);
        check_addressing(&t, 128);
    }

    #[test]
    fn descriptors_address_every_tap() {
        for (rs, stride, dil, c) in [
            ((7, 7), (2, 2), (1, 1), 3),
            ((3, 3), (1, 1), (1, 1), 3),
            ((3, 3), (2, 2), (1, 1), 1),
            ((5, 3), (1, 3), (2, 2), 8),
            ((1, 1), (1, 1), (1, 1), 4),
            ((2, 8), (3, 1), (1, 3), 2),
            ((4, 5), (2, 4), (1, 1), 7),
        ] {
            let t = WindowTma {
                conv: ConvGeometry {
                    x: [1, c, 40, 40],
                    rs,
                    pq: (20, 20),
                    stride,
                    pad: (1, 2, 1, 2),
                    dil,
                },
            };
            for bm in [64, 128] {
                if t.refusal(bm).is_none() {
                    check_addressing(&t, bm);
                }
            }
        }
    }

    #[test]
    fn refusals_name_the_rule() {
        let mut t = stem();
        t.conv.x[1] = 9;
        assert!(t.refusal(128).unwrap().contains("C = 9"));
        let mut t = stem();
        t.conv.rs.1 = 9;
        assert!(t.refusal(128).unwrap().contains("S = 9"));
        let mut t = stem();
        t.conv.dil.1 = 2000;
        assert!(t.refusal(128).unwrap().contains("TMA boxes"));
        assert!(stem().check(128, 2 * 112, 112, 448).is_ok());
        assert!(stem().check(128, 2 * 112, 112, 147).is_err());
    }
}
