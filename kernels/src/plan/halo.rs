//! The halo load: the implicit GEMM's A for convolutions of stride 1 whose packed pixels TMA
//! can address (C a multiple of 8), each input pixel's channels loaded once for all the taps
//! of a filter row instead of once per tap.
//!
//! TMA's im2col load ([`crate::plan::Im2colTma`]) brings a k-tile of 64 channels of one tap
//! for the tile's 128 output pixels: a 3x3 layer loads every input pixel nine times. Where
//! the tile's output pixels are whole output rows laid out `pitch` rows apart, tap `(r, s)`
//! of the tile's row `i` is input pixel `i + s·dw` of a *strip*: the tile's output rows'
//! input rows for filter row r, each `pitch` pixels long from column `−pad_left` (TMA fills
//! the columns and rows outside x with zeros). So one tiled TMA box per filter row and
//! channel block (`{64 channels, pitch, rows, 1}`, 128-byte swizzled) serves its S taps:
//! tap s is the same box read from `s·dw` rows further on. wgmma's descriptor takes that
//! start as it is (its 128-byte swizzle is a function of the shared-memory address, as TMA's
//! is, so a start `s·dw` rows into the box reads the rows TMA wrote there).
//!
//! The tile's 128 rows are therefore not `128` consecutive output pixels: row `i` of tile
//! `tm` is the *virtual row* `v = 128·tm + i`, output pixel `q = v mod pitch` of output row
//! `v / pitch` (image `n = (v / pitch) / P'`, row `p = (v / pitch) mod P'`, `P'` = P rounded up
//! to whole tiles). Rows with `q >= Q` or `p >= P` are computed and never stored: the
//! epilogue's tensor maps see y as `{K, Q, P, N}` and drop them. The pitch is the least
//! power of two from 16 that holds `Q + (S−1)·dw` (a tap's shift never crosses into the next
//! output row's pixels for a row that is stored); from 128 on, a tile is 128 pixels of one
//! output row and its box `128 + (S−1)·dw` pixels long.

use crate::error::{KernelError, Result};
use crate::plan::sm90::ConvGeometry;

/// Rows of a tile: the cooperative schedule's two consumers of 64 rows.
pub const TILE_ROWS: i64 = 128;
/// Bytes of a pixel's 64 channels in a stage: one 128-byte swizzled row.
const ROW_BYTES: i64 = 128;
/// The least pitch: a consumer warp stores 16 rows of one output row at a time.
const MIN_PITCH: i64 = 16;
/// TMA's largest box along a dimension.
const MAX_BOX: i64 = 256;

/// How the halo load lays a tile's output pixels out (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Halo {
    /// Virtual rows from one output row to the next: a power of two from 16 to 128, or a
    /// multiple of 128 (then a tile is part of one output row).
    pub pitch: i64,
}

impl Halo {
    /// The layout for a convolution: the least pitch that holds `Q + (S−1)·dw` pixels.
    pub fn of(conv: &ConvGeometry) -> Halo {
        let need = conv.pq.1 + (conv.rs.1 - 1) * conv.dil.1;
        let pitch = if need <= TILE_ROWS {
            (need.max(1) as u64)
                .next_power_of_two()
                .max(MIN_PITCH as u64) as i64
        } else {
            (conv.pq.1 + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS
        };
        Halo { pitch }
    }

    /// Output rows a tile covers (1 where the pitch is 128 or more).
    pub fn rows(&self) -> i64 {
        (TILE_ROWS / self.pitch).max(1)
    }

    /// `P'`: the output rows rounded up to whole tiles.
    pub fn p_rounded(&self, conv: &ConvGeometry) -> i64 {
        let t = self.rows();
        (conv.pq.0 + t - 1) / t * t
    }

    /// Tiles along M: `N·P'·pitch / 128`.
    pub fn tiles(&self, conv: &ConvGeometry) -> i64 {
        conv.x[0] * self.p_rounded(conv) * self.pitch / TILE_ROWS
    }

    /// Virtual rows, `N·P'·pitch` (the kernel's M).
    pub fn virtual_rows(&self, conv: &ConvGeometry) -> i64 {
        self.tiles(conv) * TILE_ROWS
    }

    /// The strip's box along W: the pitch (several output rows a tile: the taps of a row
    /// that is stored stay inside its own pitch), or 128 pixels plus the taps' reach (one
    /// output row a tile).
    pub fn box_w(&self, conv: &ConvGeometry) -> i64 {
        if self.rows() > 1 {
            self.pitch
        } else {
            TILE_ROWS + (conv.rs.1 - 1) * conv.dil.1
        }
    }

    /// Bytes the strip's box writes.
    pub fn load_bytes(&self, conv: &ConvGeometry) -> i64 {
        self.box_w(conv) * self.rows() * ROW_BYTES
    }

    /// Bytes of an A stage: the rows tap `S−1` of the tile's last row reads, whole 1024-byte
    /// swizzle atoms. Past the box (several output rows a tile) they are read only by rows
    /// that are never stored; the kernel zeroes them once.
    pub fn stage_bytes(&self, conv: &ConvGeometry) -> i64 {
        let reach = (TILE_ROWS + (conv.rs.1 - 1) * conv.dil.1) * ROW_BYTES;
        let b = reach.max(self.load_bytes(conv));
        (b + 1023) / 1024 * 1024
    }

    /// Byte offset of tap s's rows from the strip's start.
    pub fn tap_bytes(&self, conv: &ConvGeometry, s: i64) -> i64 {
        s * conv.dil.1 * ROW_BYTES
    }

    /// The output pixel `(n, p, q)` of row `i` of tile `tm`, or `None` for a row that is never
    /// stored.
    pub fn pixel(&self, conv: &ConvGeometry, tm: i64, i: i64) -> Option<(i64, i64, i64)> {
        let (n, p, q) = self.virtual_pixel(conv, tm * TILE_ROWS + i);
        (q < conv.pq.1 && p < conv.pq.0 && n < conv.x[0]).then_some((n, p, q))
    }

    /// Virtual row `v` as `(n, p, q)`, stored or not: pixel `v mod pitch` of output row
    /// `v / pitch`, that row `p` of `P'` rows of image `n` (the kernel's decode alike).
    fn virtual_pixel(&self, conv: &ConvGeometry, v: i64) -> (i64, i64, i64) {
        let (q, vr) = (v % self.pitch, v / self.pitch);
        let pr = self.p_rounded(conv);
        (vr / pr, vr % pr, q)
    }

    /// The strip's box origin `(w, h)` in x for filter row r of tile `tm`, and its image.
    pub fn box_origin(&self, conv: &ConvGeometry, tm: i64, r: i64) -> (i64, i64, i64) {
        let (n, p0, q0) = self.virtual_pixel(conv, tm * TILE_ROWS);
        let (pt, _, pl, _) = conv.pad;
        (q0 - pl, p0 - pt + r * conv.dil.0, n)
    }

    /// Why the halo load cannot take this convolution (x's pixels `pitch` elements apart), or
    /// `None`.
    pub fn refusal(&self, conv: &ConvGeometry, x_pitch: i64) -> Option<String> {
        let [n, c, _, _] = conv.x;
        if conv.stride != (1, 1) {
            return Some(format!(
                "stride ({},{}): the halo load's taps are shifts of one strip (stride 1)",
                conv.stride.0, conv.stride.1
            ));
        }
        // (A k-tile's channels past C are outside the tensor map: TMA writes them as zeros,
        // against the filter's zeros there.)
        if c % 8 != 0 || x_pitch != c {
            return Some(format!(
                "C = {c} (pixels {x_pitch} apart): the halo load reads x in place, packed pixels on TMA's 16-byte grid (C a multiple of 8)"
            ));
        }
        let reach = (conv.rs.1 - 1) * conv.dil.1;
        if self.box_w(conv) > MAX_BOX || TILE_ROWS + reach > MAX_BOX {
            return Some(format!(
                "a strip of {} pixels: TMA boxes are at most {MAX_BOX} long",
                self.box_w(conv).max(TILE_ROWS + reach)
            ));
        }
        let ok_pitch =
            (self.pitch < TILE_ROWS && self.pitch.count_ones() == 1 && self.pitch >= MIN_PITCH)
                || self.pitch % TILE_ROWS == 0;
        if !ok_pitch || self.pitch < conv.pq.1 + if self.rows() > 1 { reach } else { 0 } {
            return Some(format!(
                "pitch {}: a power of two from {MIN_PITCH} holding Q + (S-1) dw = {} pixels, or a multiple of {TILE_ROWS} holding Q",
                self.pitch,
                conv.pq.1 + reach
            ));
        }
        let rows = n
            .checked_mul(self.p_rounded(conv))
            .and_then(|v| v.checked_mul(self.pitch));
        if rows.map_or(true, |v| v > i32::MAX as i64 - TILE_ROWS) {
            return Some("virtual rows beyond 32 bits".to_string());
        }
        None
    }

    /// Checks the halo load's invariants for a plan whose tile is `bm` rows and whose
    /// kernel problem has `m` rows and K `k` (the im2col GEMM's).
    pub fn check(&self, conv: &ConvGeometry, x_pitch: i64, bm: i64) -> Result<()> {
        let op = "Sm90Plan";
        if let Some(why) = self.refusal(conv, x_pitch) {
            return Err(KernelError::invalid(op, format!("halo load of A: {why}")));
        }
        if bm != TILE_ROWS {
            return Err(KernelError::invalid(
                op,
                format!("halo load of A: tiles of {TILE_ROWS} rows (two consumers), not {bm}"),
            ));
        }
        Ok(())
    }

    /// The layout in words, for the plan's summary.
    pub fn describe(&self, conv: &ConvGeometry) -> String {
        let t = self.rows();
        let what = if t > 1 {
            format!("{t} output rows a tile, {} pixels apart", self.pitch)
        } else {
            format!("{TILE_ROWS} pixels of one output row a tile")
        };
        format!(
            "{what}; a strip box {{64, {}, {t}, 1}} per filter row and channel block ({} B), its {} taps read {} B apart; {} tiles, {:.1}% of their rows stored",
            self.box_w(conv),
            self.load_bytes(conv),
            conv.rs.1,
            conv.dil.1 * ROW_BYTES,
            self.tiles(conv),
            100.0 * (conv.x[0] * conv.pq.0 * conv.pq.1) as f64 / self.virtual_rows(conv) as f64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(n: i64, c: i64, hw: i64, rs: (i64, i64), pad: i64, dil: (i64, i64)) -> ConvGeometry {
        let p = hw + 2 * pad - (rs.0 - 1) * dil.0;
        let q = hw + 2 * pad - (rs.1 - 1) * dil.1;
        ConvGeometry {
            x: [n, c, hw, hw],
            rs,
            pq: (p, q),
            stride: (1, 1),
            pad: (pad, pad, pad, pad),
            dil,
        }
    }

    /// Every stored row of every tile reads, for every tap, the input pixel the convolution's
    /// formula names: the strip's box origin plus the row's stage offset (`i + s·dw`) decoded
    /// as (row of the box, column of the box), checked against `(p − pt + r·dh, q − pl +
    /// s·dw)` computed from the pixel alone. Every stored pixel appears exactly once.
    fn check_addressing(g: &ConvGeometry) {
        let h = Halo::of(g);
        assert_eq!(h.refusal(g, g.x[1]), None, "{g:?}");
        let (pt, _, pl, _) = g.pad;
        let bw = h.box_w(g);
        let mut seen = std::collections::HashSet::new();
        for tm in 0..h.tiles(g) {
            for i in 0..TILE_ROWS {
                let Some((n, p, q)) = h.pixel(g, tm, i) else {
                    continue;
                };
                assert!(seen.insert((n, p, q)), "{g:?}: pixel twice");
                for r in 0..g.rs.0 {
                    let (w0, h0, nb) = h.box_origin(g, tm, r);
                    assert_eq!(nb, n);
                    for s in 0..g.rs.1 {
                        let row = i + h.tap_bytes(g, s) / ROW_BYTES;
                        // Inside the box that TMA wrote (a stored row never reads the slack).
                        assert!(row < bw * h.rows(), "{g:?} tile {tm} row {i} tap {s}");
                        let (br, bc) = (row / bw, row % bw);
                        assert_eq!(
                            (h0 + br, w0 + bc),
                            (p - pt + r * g.dil.0, q - pl + s * g.dil.1),
                            "{g:?} tile {tm} row {i} tap ({r},{s})"
                        );
                    }
                }
                // The stage holds every row any tap of the tile reads.
                let last = i + h.tap_bytes(g, g.rs.1 - 1) / ROW_BYTES;
                assert!((last + 1) * ROW_BYTES <= h.stage_bytes(g));
            }
        }
        assert_eq!(seen.len() as i64, g.x[0] * g.pq.0 * g.pq.1);
    }

    #[test]
    fn taps_read_their_pixels() {
        for g in [
            conv(2, 64, 56, (3, 3), 1, (1, 1)),
            conv(1, 128, 28, (3, 3), 1, (1, 1)),
            conv(3, 64, 14, (3, 3), 1, (1, 1)),
            conv(1, 64, 7, (3, 3), 1, (1, 1)),
            conv(1, 64, 13, (5, 3), 2, (1, 2)),
            conv(1, 64, 9, (1, 7), 0, (1, 1)),
            conv(2, 64, 150, (3, 3), 1, (1, 1)),
            conv(1, 64, 224, (3, 3), 1, (1, 1)),
            conv(1, 64, 126, (3, 3), 0, (2, 2)),
        ] {
            check_addressing(&g);
        }
    }

    #[test]
    fn the_pitch_holds_a_row_and_its_reach() {
        let g = conv(2, 64, 56, (3, 3), 1, (1, 1));
        let h = Halo::of(&g);
        assert_eq!(
            (h.pitch, h.rows(), h.p_rounded(&g), h.tiles(&g)),
            (64, 2, 56, 56)
        );
        assert_eq!(
            (h.box_w(&g), h.load_bytes(&g), h.stage_bytes(&g)),
            (64, 16384, 17408)
        );
        let g = conv(1, 64, 14, (3, 3), 1, (1, 1));
        let h = Halo::of(&g);
        assert_eq!(
            (h.pitch, h.rows(), h.p_rounded(&g), h.tiles(&g)),
            (16, 8, 16, 2)
        );
        let g = conv(1, 64, 224, (3, 3), 1, (1, 1));
        let h = Halo::of(&g);
        assert_eq!(
            (h.pitch, h.rows(), h.box_w(&g), h.tiles(&g)),
            (256, 1, 130, 448)
        );
        assert_eq!(h.stage_bytes(&g), 17408);
    }

    #[test]
    fn refusals_name_the_rule() {
        let mut g = conv(1, 64, 56, (3, 3), 1, (1, 1));
        assert!(Halo::of(&g).refusal(&g, 64).is_none());
        assert!(Halo::of(&g).refusal(&g, 72).unwrap().contains("packed"));
        g.stride = (2, 2);
        assert!(Halo::of(&g).refusal(&g, 64).unwrap().contains("stride"));
        let g = conv(1, 96, 56, (3, 3), 1, (1, 1));
        assert!(Halo::of(&g).refusal(&g, 96).is_none());
        let g = conv(1, 100, 56, (3, 3), 1, (1, 1));
        assert!(Halo::of(&g).refusal(&g, 100).unwrap().contains("C = 100"));
        let g = conv(1, 64, 300, (3, 3), 1, (1, 70));
        assert!(Halo::of(&g).refusal(&g, 64).unwrap().contains("TMA boxes"));
        let g = conv(1, 64, 56, (3, 3), 1, (1, 1));
        assert!(Halo { pitch: 32 }
            .refusal(&g, 64)
            .unwrap()
            .contains("pitch 32"));
        assert!(Halo::of(&g).check(&g, 64, 64).is_err());
    }
}
