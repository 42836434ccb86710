//! From one shared-memory layout to the TMA box, the TMA swizzle mode and the wgmma matrix
//! descriptor; and the wgmma accumulator fragment as a layout.
//!
//! The shared-memory layout of a K-major operand tile is `Sw<B,M,S> o (rows, cols):(cols, 1)`
//! in elements. TMA writes a box of `cols x rows` elements row after row, `cols * elem` bytes
//! apart, XOR-ing the 16-byte chunk index of each byte address with its bits 7.. (the
//! "128B/64B/32B" swizzle modes); wgmma reads the same bytes through a descriptor naming the
//! distance between 8-row groups (the stride byte offset) and the same swizzle. Both are read
//! off the layout here, and [`tma_box_for`] checks element by element that the layout is one
//! the TMA unit writes.

use std::fmt;

use tessera_layout::{IntTuple, Layout};
use tessera_swizzle::{atoms, Swizzle};

use crate::error::{KernelError, Result};
use crate::plan::SmemLayout;

/// The swizzle modes of the TMA unit and of wgmma descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaSwizzle {
    /// No swizzle.
    None,
    /// 16-byte chunks XOR-ed with address bit 7 (span 32 bytes): byte swizzle `Sw<1,4,3>`.
    B32,
    /// Bits 7..8 (span 64 bytes): `Sw<2,4,3>`.
    B64,
    /// Bits 7..9 (span 128 bytes): `Sw<3,4,3>`.
    B128,
}

impl TmaSwizzle {
    /// Every mode, the unswizzled one first and then by span: the candidates of a swizzle
    /// synthesis bound to the hardware, in the order that breaks its ties.
    pub const ALL: [TmaSwizzle; 4] = [
        TmaSwizzle::None,
        TmaSwizzle::B32,
        TmaSwizzle::B64,
        TmaSwizzle::B128,
    ];

    /// The mode as a swizzle of `elem_bytes`-byte element offsets: the byte swizzle
    /// `Sw<bits,4,3>` upcast (the 128-byte mode on 2-byte elements is `Sw<3,3,3>`).
    ///
    /// ```
    /// use tessera_kernels::plan::TmaSwizzle;
    /// assert_eq!(TmaSwizzle::B64.on_elements(2).unwrap().to_string(), "Sw<2,3,3>");
    /// ```
    pub fn on_elements(self, elem_bytes: i64) -> Result<Swizzle> {
        let op = "TmaSwizzle::on_elements";
        atoms::byte_swizzle(self.span_bytes())
            .and_then(|b| b.upcast(elem_bytes))
            .map_err(KernelError::swizzle(op))
    }

    /// The mode for a swizzle of `bits` XOR-ed bits in byte units `Sw<bits,4,3>`.
    fn from_byte_bits(bits: u32) -> Option<TmaSwizzle> {
        match bits {
            0 => Some(TmaSwizzle::None),
            1 => Some(TmaSwizzle::B32),
            2 => Some(TmaSwizzle::B64),
            3 => Some(TmaSwizzle::B128),
            _ => None,
        }
    }

    /// XOR-ed bits of the byte swizzle.
    pub fn bits(self) -> u32 {
        match self {
            TmaSwizzle::None => 0,
            TmaSwizzle::B32 => 1,
            TmaSwizzle::B64 => 2,
            TmaSwizzle::B128 => 3,
        }
    }

    /// The bytes of one swizzled row (the span): 16, 32, 64, 128.
    pub fn span_bytes(self) -> i64 {
        16 << self.bits()
    }

    /// Where the TMA unit puts byte `a` of a densely packed box (the box base aligned to
    /// 8 spans): the 16-byte chunk index XOR the row bits 7...
    pub fn apply(self, a: i64) -> i64 {
        let mask = (1i64 << self.bits()) - 1;
        a ^ (((a >> 7) & mask) << 4)
    }

    /// `CUtensorMapSwizzle` value.
    pub fn tma_code(self) -> u32 {
        self.bits()
    }

    /// The 2-bit swizzle field of a wgmma descriptor (bits 62-63): 0 none, 1 128B, 2 64B, 3 32B.
    pub fn wgmma_code(self) -> u64 {
        match self {
            TmaSwizzle::None => 0,
            TmaSwizzle::B128 => 1,
            TmaSwizzle::B64 => 2,
            TmaSwizzle::B32 => 3,
        }
    }
}

impl fmt::Display for TmaSwizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TmaSwizzle::None => "SWIZZLE_NONE",
            TmaSwizzle::B32 => "SWIZZLE_32B",
            TmaSwizzle::B64 => "SWIZZLE_64B",
            TmaSwizzle::B128 => "SWIZZLE_128B",
        })
    }
}

/// The TMA box that writes a tile with exactly a shared-memory layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaBox {
    /// Elements along the contiguous (inner) dimension, `boxDim[0]`.
    pub inner: i64,
    /// Rows, `boxDim[1]`.
    pub outer: i64,
    /// The swizzle mode.
    pub swizzle: TmaSwizzle,
    /// Bytes the box writes (the transaction count of one load).
    pub bytes: i64,
    /// Alignment the destination needs so the swizzle pattern lines up: 8 spans (1024 bytes
    /// for 128B), or 128 bytes without a swizzle.
    pub align: i64,
}

impl fmt::Display for TmaBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "box {{{}, {}}} {}, {} B per load, smem aligned to {} B",
            self.inner, self.outer, self.swizzle, self.bytes, self.align
        )
    }
}

/// The constant part of a wgmma shared-memory matrix descriptor for a K-major operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaDesc {
    /// Leading byte offset (bits 16-29, in 16-byte units). Unused by K-major swizzled
    /// operands whose k16 slice fits the swizzle span; set to 16 bytes.
    pub lbo_bytes: i64,
    /// Stride byte offset: bytes between consecutive groups of 8 rows (bits 32-45).
    pub sbo_bytes: i64,
    /// The swizzle mode (bits 62-63).
    pub swizzle: TmaSwizzle,
    /// Bytes the start address advances per k16 step (unswizzled offset of `(0, 16)`).
    pub k_step_bytes: i64,
}

impl WgmmaDesc {
    /// The descriptor with a zero start address; the kernel ORs in `(addr & 0x3FFFF) >> 4`.
    pub fn hi_bits(&self) -> u64 {
        (((self.lbo_bytes as u64 >> 4) & 0x3FFF) << 16)
            | (((self.sbo_bytes as u64 >> 4) & 0x3FFF) << 32)
            | (self.swizzle.wgmma_code() << 62)
    }
}

impl fmt::Display for WgmmaDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LBO {} B, SBO {} B, {}, k16 step +{} B, descriptor {:#018x} | addr>>4",
            self.lbo_bytes,
            self.sbo_bytes,
            self.swizzle,
            self.k_step_bytes,
            self.hi_bits()
        )
    }
}

/// `(rows, cols)` of a compact K-major layout `(rows, cols):(cols, 1)`, or why not.
fn k_major_extents(op: &'static str, l: &Layout) -> Result<(i64, i64)> {
    let bad = || {
        KernelError::invalid(
            op,
            format!(
                "{l} is not a compact K-major tile (rows, cols):(cols, 1), the layout TMA writes"
            ),
        )
    };
    if l.rank() != 2 {
        return Err(bad());
    }
    let m0 = l.mode(0).map_err(KernelError::layout(op))?;
    let m1 = l.mode(1).map_err(KernelError::layout(op))?;
    if !m0.is_int() || !m1.is_int() {
        return Err(bad());
    }
    let (rows, cols) = (m0.size(), m1.size());
    let (s0, s1) = (m0.stride().leaves()[0], m1.stride().leaves()[0]);
    if s1 != 1 || (rows > 1 && s0 != cols) {
        return Err(bad());
    }
    Ok((rows, cols))
}

/// The byte swizzle of an element swizzle `Sw<B,M,S>` for `elem_bytes`-byte elements, as a TMA
/// mode, or why it is none.
fn byte_swizzle(op: &'static str, smem: &SmemLayout, elem_bytes: i64) -> Result<TmaSwizzle> {
    let sw = smem.swizzle;
    let log_e = match elem_bytes {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        _ => {
            return Err(KernelError::invalid(
                op,
                format!("element size {elem_bytes} B"),
            ))
        }
    };
    if sw.bits == 0 {
        return Ok(TmaSwizzle::None);
    }
    if sw.base + log_e != 4 || sw.shift != 3 {
        return Err(KernelError::invalid(
            op,
            format!(
                "{sw} on {elem_bytes}-byte elements is Sw<{},{},{}> on bytes; TMA swizzles 16-byte chunks by address bits 7.. (Sw<B,4,3>)",
                sw.bits,
                sw.base + log_e,
                sw.shift
            ),
        ));
    }
    TmaSwizzle::from_byte_bits(sw.bits).ok_or_else(|| {
        KernelError::invalid(op, format!("{sw}: TMA swizzles at most 3 bits (128 bytes)"))
    })
}

/// The TMA box and swizzle mode that write a tile of `elem_bytes`-byte elements with exactly
/// the layout `smem`, or an error when no TMA box does.
///
/// Post-condition: for every coordinate `(r, c)` of the tile, the byte TMA writes it to
/// (`swizzle.apply((r * inner + c) * elem_bytes)`) is `smem.offset(r, c) * elem_bytes`.
///
/// ```
/// use tessera_kernels::plan::{tma_box_for, SmemLayout, SwizzleBits, TmaSwizzle};
/// // The 128-byte K-major atom for 16-bit data, tiled to 128 rows: Sw<3,3,3> o (128,64):(64,1)
/// // in elements, which is Sw<3,4,3> on bytes.
/// let smem = SmemLayout {
///     swizzle: SwizzleBits { bits: 3, base: 3, shift: 3 },
///     layout: "(128,64):(64,1)".parse().unwrap(),
///     atom: "(8,64):(64,1)".parse().unwrap(),
/// };
/// let b = tma_box_for(&smem, 2).unwrap();
/// assert_eq!((b.inner, b.outer, b.swizzle, b.bytes), (64, 128, TmaSwizzle::B128, 16384));
/// // 32 columns (64-byte rows) under the 128-byte swizzle is not a TMA box.
/// let narrow = SmemLayout { layout: "(128,32):(32,1)".parse().unwrap(), ..smem };
/// assert!(tma_box_for(&narrow, 2).is_err());
/// ```
pub fn tma_box_for(smem: &SmemLayout, elem_bytes: i64) -> Result<TmaBox> {
    let op = "tma_box_for";
    let (rows, cols) = k_major_extents(op, &smem.layout)?;
    let swizzle = byte_swizzle(op, smem, elem_bytes)?;
    let row_bytes = cols * elem_bytes;
    if row_bytes % 16 != 0 {
        return Err(KernelError::invalid(
            op,
            format!("rows of {row_bytes} B: TMA boxes need a multiple of 16 B"),
        ));
    }
    if swizzle != TmaSwizzle::None && row_bytes != swizzle.span_bytes() {
        return Err(KernelError::invalid(
            op,
            format!(
                "rows of {row_bytes} B under {swizzle}: the layout's rows must be exactly the {}-byte span",
                swizzle.span_bytes()
            ),
        ));
    }
    if !(1..=256).contains(&rows) || !(1..=256).contains(&cols) {
        return Err(KernelError::invalid(
            op,
            format!("box {cols} x {rows}: each extent must be in 1..=256"),
        ));
    }
    if swizzle != TmaSwizzle::None && rows % 8 != 0 {
        return Err(KernelError::invalid(
            op,
            format!("{rows} rows: a swizzled box is whole 8-row atoms"),
        ));
    }
    for r in 0..rows {
        for c in 0..cols {
            let ours = smem.offset(r, c)? * elem_bytes;
            let tma = swizzle.apply((r * cols + c) * elem_bytes);
            if ours != tma {
                return Err(KernelError::invalid(
                    op,
                    format!("{smem}: ({r},{c}) is at byte {ours}, TMA {swizzle} writes it to byte {tma}"),
                ));
            }
        }
    }
    let align = if swizzle == TmaSwizzle::None {
        128
    } else {
        8 * swizzle.span_bytes()
    };
    Ok(TmaBox {
        inner: cols,
        outer: rows,
        swizzle,
        bytes: rows * row_bytes,
        align,
    })
}

/// A tile written by several TMA boxes, one per CTA of a cluster: part `p` covers rows
/// `[p * part.outer, (p + 1) * part.outer)` of the tile and lands `p * stride_bytes` into the
/// stage. Each CTA loads its part once and multicasts it to every CTA of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaSplit {
    /// The box of one part (same inner extent and swizzle as the whole tile's box).
    pub part: TmaBox,
    /// Parts (CTAs of the cluster).
    pub parts: i64,
    /// Bytes from one part's first element to the next one's in the stage.
    pub stride_bytes: i64,
}

impl fmt::Display for TmaSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} parts of {}, {} B apart",
            self.parts, self.part, self.stride_bytes
        )
    }
}

/// How `parts` TMA boxes of equal row counts write a tile of `elem_bytes`-byte elements with
/// exactly the layout `smem`, or an error when they cannot.
///
/// Post-condition: for every part `p` and coordinate `(r, c)` of the part's box, the byte the
/// TMA unit writes it to when its destination is `p * stride_bytes` past an aligned stage
/// (`p * stride_bytes + part.swizzle.apply((r * inner + c) * elem_bytes)`) is
/// `smem.offset(p * part.outer + r, c) * elem_bytes`. That needs every part to start on a
/// multiple of the swizzle's period (`part.align`, 1024 bytes for 128B): the TMA unit
/// swizzles by the destination's address bits, so a part starting mid-period would be written
/// with another pattern than the one the wgmma descriptor reads.
///
/// For Sw<3,3,3> o (256,64):(64,1) in 2-byte elements (atom (8,64):(64,1)), two parts are
/// 64 x 128 boxes of 16384 bytes with the 128-byte swizzle, the second starting 16384 bytes
/// (16 swizzle periods) in. One 8-row atom cannot be split in two: half of it is not a box
/// the 128-byte swizzle can write.
pub fn tma_split_for(smem: &SmemLayout, elem_bytes: i64, parts: i64) -> Result<TmaSplit> {
    let op = "tma_split_for";
    let whole = tma_box_for(smem, elem_bytes)?;
    if parts < 1 || whole.outer % parts != 0 {
        return Err(KernelError::invalid(
            op,
            format!("{} rows do not split into {parts} equal parts", whole.outer),
        ));
    }
    let rows = whole.outer / parts;
    let part_smem = SmemLayout {
        layout: format!("({rows},{}):({},1)", whole.inner, whole.inner)
            .parse()
            .map_err(KernelError::layout(op))?,
        ..smem.clone()
    };
    let part = tma_box_for(&part_smem, elem_bytes).map_err(|e| {
        KernelError::invalid(
            op,
            format!("{smem} in {parts} parts of {rows} rows: no TMA box writes a part ({e})"),
        )
    })?;
    let stride_bytes = smem.offset(rows, 0)? * elem_bytes - smem.offset(0, 0)? * elem_bytes;
    for p in 0..parts {
        let start = smem.offset(p * rows, 0)? * elem_bytes;
        if start != p * stride_bytes || start % part.align != 0 {
            return Err(KernelError::invalid(
                op,
                format!(
                    "{smem} in {parts} parts: part {p} starts at byte {start} of the stage, not on a {}-byte period of {} (parts must be {} B apart and aligned)",
                    part.align, part.swizzle, stride_bytes
                ),
            ));
        }
        for r in 0..rows {
            for c in 0..whole.inner {
                let ours = smem.offset(p * rows + r, c)? * elem_bytes;
                let tma = start + part.swizzle.apply((r * whole.inner + c) * elem_bytes);
                if ours != tma {
                    return Err(KernelError::invalid(
                        op,
                        format!("{smem}: ({},{c}) is at byte {ours}, part {p}'s TMA box writes it to byte {tma}", p * rows + r),
                    ));
                }
            }
        }
    }
    Ok(TmaSplit {
        part,
        parts,
        stride_bytes,
    })
}

/// The wgmma descriptor (constant part) of a K-major operand stored with `smem`, for k16
/// slices of `elem_bytes`-byte elements.
///
/// ```
/// use tessera_kernels::plan::{wgmma_desc_for, SmemLayout, SwizzleBits};
/// let smem = SmemLayout {
///     swizzle: SwizzleBits { bits: 3, base: 3, shift: 3 },
///     layout: "(256,64):(64,1)".parse().unwrap(),
///     atom: "(8,64):(64,1)".parse().unwrap(),
/// };
/// let d = wgmma_desc_for(&smem, 2).unwrap();
/// assert_eq!((d.lbo_bytes, d.sbo_bytes, d.k_step_bytes), (16, 1024, 32));
/// assert_eq!(d.hi_bits(), (1 << 62) | (64 << 32) | (1 << 16));
/// ```
pub fn wgmma_desc_for(smem: &SmemLayout, elem_bytes: i64) -> Result<WgmmaDesc> {
    let op = "wgmma_desc_for";
    // The layout must be one TMA writes (this also fixes the swizzle and the row pitch).
    let tma = tma_box_for(smem, elem_bytes)?;
    if tma.swizzle == TmaSwizzle::None {
        return Err(KernelError::invalid(
            op,
            "an unswizzled K-major operand is read by wgmma as 8x16-byte core matrices, not as rows; swizzle it",
        ));
    }
    let at = |r: i64, c: i64| -> Result<i64> {
        smem.layout
            .eval(&IntTuple::flat([r, c]))
            .map_err(KernelError::layout(op))
            .map(|o| o * elem_bytes)
    };
    let k16 = 16;
    let k_bytes = k16 * elem_bytes;
    if k_bytes > tma.swizzle.span_bytes() || tma.inner % k16 != 0 {
        return Err(KernelError::invalid(
            op,
            format!(
                "a k16 slice of {k_bytes} B does not tile rows of {} elements",
                tma.inner
            ),
        ));
    }
    // The 8-row groups of a swizzle atom follow each other at 8 row pitches.
    let row_pitch = if tma.outer > 1 {
        at(1, 0)? - at(0, 0)?
    } else {
        tma.inner * elem_bytes
    };
    Ok(WgmmaDesc {
        lbo_bytes: 16,
        sbo_bytes: 8 * row_pitch,
        swizzle: tma.swizzle,
        k_step_bytes: at(0, k16)? - at(0, 0)?,
    })
}

/// The wgmma `m64nNk16` fp32 accumulator fragment: `(thread, register) -> row + 64 * col` of
/// the 64 x N tile of one warpgroup.
///
/// Thread `t` (lane `l = t % 32`, warp `w = t / 32`) holds, in register `i`, row
/// `16 w + l / 4 + 8 ((i / 2) % 2)` and column `8 (i / 4) + 2 (l % 4) + i % 2` (PTX ISA, wgmma
/// "Matrix Fragments", register D). As a layout:
/// `((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`.
///
/// ```
/// use tessera_kernels::plan::wgmma_acc_layout;
/// let acc = wgmma_acc_layout(256).unwrap();
/// assert_eq!(acc.to_string(), "((4,8,4),(2,2,32)):((128,1,16),(64,8,512))");
/// // A bijection onto the 64 x 256 tile.
/// let mut o = acc.offsets();
/// o.sort_unstable();
/// assert!(o.iter().copied().eq(0..64 * 256));
/// ```
pub fn wgmma_acc_layout(n: i64) -> Result<Layout> {
    if n % 8 != 0 || !(8..=256).contains(&n) {
        return Err(KernelError::invalid(
            "wgmma_acc_layout",
            format!("wgmma N = {n} must be a multiple of 8 in 8..=256"),
        ));
    }
    format!("((4,8,4),(2,2,{})):((128,1,16),(64,8,512))", n / 8)
        .parse()
        .map_err(KernelError::layout("wgmma_acc_layout"))
}
