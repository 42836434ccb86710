//! The Hopper plan: tile, warpgroups, pipeline depth, and per operand the swizzled
//! shared-memory layout with the TMA box and wgmma descriptor derived from it.

use std::fmt;

use tessera_layout::Layout;

use crate::arch::Arch;
use crate::error::{KernelError, Result};
use crate::plan::atom_choice::{choose_swizzle, AtomChoice, Candidates, TileAccess};
use crate::plan::halo::Halo;
use crate::plan::problem::{BiasMode, DType, GemmProblem, Major};
use crate::plan::window::WindowTma;
use crate::plan::{SmemLayout, SwizzleBits};
use tessera_layout::composition;
use tessera_swizzle::algebra::composition as sw_composition;
use tessera_swizzle::{bank_conflicts, BankConflicts, Swizzle};

use super::policy;
use super::sm90_layouts::{
    tma_box_for, tma_split_for, wgmma_acc_layout, wgmma_desc_for, TmaBox, TmaSplit, TmaSwizzle,
    WgmmaDesc,
};

/// K extent of one stage: 64 16-bit elements, one 128-byte swizzled row.
pub const BK: i64 = 64;
/// Columns of the accumulator one epilogue pass stages through shared memory.
pub const EPI_COLS: i64 = 32;
/// Row pitch of the fp32 epilogue scratch, in floats: 8 more than [`EPI_COLS`], so that the
/// 8-byte fragment writes of a half-warp (4 rows x 4 column pairs) hit 32 distinct banks.
pub const EPI_PITCH: i64 = EPI_COLS + 8;
/// Registers per thread the producer warpgroup keeps (`setmaxnreg.dec`). What the producer
/// gives back is all the consumers can take: a CTA holds the registers it launched with (168 a
/// thread for 384 threads), so `24 + 2 * 240 = 3 * 168`; a consumer asking for more than the
/// producer freed would wait for ever.
pub const PRODUCER_REGS: i64 = 24;
/// Registers per thread the consumer warpgroups take (`setmaxnreg.inc`); with one producer and
/// two consumers, `24 + 2 * 240 = 3 * 168`, the registers the 384-thread CTA launches with (at
/// 232, ptxas spilled in the row-bias + GELU epilogue).
pub const CONSUMER_REGS: i64 = 240;

/// One operand (A or B) of the Hopper plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90Operand {
    /// `A` or `B`.
    pub name: &'static str,
    /// Rows of the operand tile (BM for A, BN for B).
    pub tile_mn: i64,
    /// One stage's shared-memory layout: the 128-byte K-major atom `Sw<3,3,3> o (8,64):(64,1)`
    /// (elements; `Sw<3,4,3>` on bytes) tiled down the rows.
    pub smem: SmemLayout,
    /// The TMA box that writes it.
    pub tma: TmaBox,
    /// The wgmma descriptor that reads it.
    pub desc: WgmmaDesc,
    /// When the CTAs of a cluster share this operand: the part of [`Sm90Operand::tma`] each
    /// of them loads and multicasts to all of them.
    pub multicast: Option<TmaSplit>,
    /// The stage's swizzle as swizzle synthesis picks it among the TMA modes for the TMA
    /// unit's row writes and wgmma's core-matrix reads, against the hand-picked 128-byte mode;
    /// `smem` has the one it names as used.
    pub swizzle: AtomChoice,
}

impl Sm90Operand {
    /// The box one CTA's TMA load writes: the whole tile, or its part of a shared tile.
    pub fn load_box(&self) -> TmaBox {
        self.multicast.map_or(self.tma, |s| s.part)
    }
}

/// The epilogue's TMA store: each consumer warpgroup writes its finished 64 x [`EPI_COLS`]
/// output blocks (after the epilogue, in the output type) into a swizzled shared-memory
/// buffer, and each warp stores its own [`WARP_ROWS`] rows of the block to D with a TMA bulk
/// tensor store (so the warps of a warpgroup never wait for each other). The stores are
/// asynchronous: they drain while the consumers go on (the next block, the next tile's
/// mainloop); a warp's part of a buffer is reused once that warp's store has read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90Store {
    /// One buffer: the 64-byte swizzle atom of the output type tiled to 64 x [`EPI_COLS`]
    /// (16-bit outputs: `Sw<2,3,3> o (64,32):(32,1)`, `Sw<2,4,3>` on bytes).
    pub smem: SmemLayout,
    /// The TMA box that stores one buffer (and that writes exactly `smem`).
    pub tma: TmaBox,
    /// The TMA box of one warp's rows of a buffer, [`WARP_ROWS`] x [`EPI_COLS`]: rows
    /// `[WARP_ROWS w, WARP_ROWS (w + 1))` of `smem` are this box's layout at byte
    /// `w * warp_tma.bytes` (checked element by element). The kernel's tensor maps of D, aux
    /// and the staged epilogue inputs use this box.
    pub warp_tma: TmaBox,
    /// Buffers per consumer warpgroup (store of one overlapping the filling of the next).
    pub buffers: i64,
    /// Shared-memory wavefronts of one warp's fragment store into a buffer (each lane one
    /// 4-byte column pair; `bank_conflicts` of the swizzle crate), checked conflict-free.
    pub conflicts: BankConflicts,
    /// The buffer's swizzle as swizzle synthesis picks it among the TMA modes for the
    /// fragment store and the TMA unit's row reads, against the hand-picked 64-byte mode;
    /// `smem` has the one it names as used.
    pub swizzle: AtomChoice,
}

impl fmt::Display for Sm90Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} buffers of {} B per consumer, each {}; TMA {}, per warp {}; fragment store {} wavefronts/ideal",
            self.buffers, self.tma.bytes, self.smem, self.tma, self.warp_tma, self.conflicts
        )
    }
}

// The tuned rules (tile, schedule, stream-K, stages, raster group, cluster) live in
// `policy`; these names stay here for the kernel authors who know them from this module.
pub use super::policy::{STREAM_K_MIN_IDLE, STREAM_K_MIN_SHARE};

/// Buffers per staged epilogue input and consumer warpgroup ([`Sm90Plan::staged_inputs`]).
pub const IN_BUFFERS: i64 = 2;

/// The most epilogue inputs a plan stages (C, the residual, aux_in).
pub const MAX_STAGED_INPUTS: i64 = 3;

/// Buffers of the TMA-store epilogue per consumer warpgroup, at least: a pass with aux fills
/// two. The planner adds buffers, up to [`MAX_STORE_BUFFERS`], while they fit beside the
/// stages it chose: the buffers form a ring, one per TMA store, and a pass waits only for
/// the stores `buffers - outputs` back to have read theirs, so more stores may be in flight
/// while the next passes compute. The ring's running position also keeps a tile with an odd
/// number of passes from reusing a buffer its last store may still read
/// (`docs/design/011-tma-store-epilogue.md`).
pub const STORE_BUFFERS: i64 = 2;

/// The most TMA-store buffers per consumer warpgroup.
pub const MAX_STORE_BUFFERS: i64 = 4;

/// Rows of a TMA-store buffer that one warp owns and stores (the wgmma accumulator gives warp
/// `w` of a warpgroup rows `[16 w, 16 w + 16)` of its 64; [`store_plan`] checks it).
pub const WARP_ROWS: i64 = 16;

/// The TMA-store epilogue of a plan with accumulator layout `acc` and 16-bit outputs: the
/// buffer layout, its TMA box, and the bank-conflict check of the fragment store.
///
/// Derivation: a consumer's accumulator layout maps `(thread, register)` to `row + 64 col`
/// of its 64 x BN block, the index a colexicographic `(64, BN)` shape gives. A buffer holds
/// the 32 columns of one pass, `(64, 32):(32, 1)` row-major, under the 64-byte swizzle (rows
/// of 32 16-bit elements are 64 bytes, the span of that swizzle; TMA stores such a box with
/// SWIZZLE_64B, which [`tma_box_for`] checks element by element). One warp's store
/// instruction writes lanes 0-31 x registers (2i, 2i + 1): composing the buffer with the first
/// 32 threads and the first register pair of `acc` gives the access `(lane, value) -> offset`
/// whose wavefronts `bank_conflicts` counts. The other register pairs of a pass differ by
/// whole 8-row groups (offsets of 256 elements, above the swizzle's bits) or by 8 columns (one
/// 16-byte chunk, XOR-ed uniformly), neither of which changes the count; the test
/// `store_fragment_is_conflict_free_for_every_register_pair` checks every pair anyway.
///
/// The swizzle is swizzle synthesis's among the TMA modes, for that access and the TMA unit's
/// row reads, measured against the hand-picked 64-byte mode ([`Sm90Store::swizzle`]).
pub fn store_plan(acc: &Layout, out: DType) -> Result<Sm90Store> {
    let op = "Sm90Plan store";
    let lerr = KernelError::layout;
    if out.bytes() != 2 {
        return Err(KernelError::invalid(
            op,
            format!("{out} output: the TMA-store epilogue stages 16-bit outputs"),
        ));
    }
    check_pass_registers(op, acc)?;
    // The row store's packing (`tessera_sm90_row_pass`) and the tree's fragment path take
    // each register pair's row and column from this form.
    fragment_pass_form(acc)?;
    let lanes = composition(
        &acc.mode(0).map_err(lerr(op))?,
        &Layout::int(32, 1).map_err(lerr(op))?,
    )
    .map_err(lerr(op))?;
    let pair = composition(
        &acc.mode(1).map_err(lerr(op))?,
        &Layout::int(2, 1).map_err(lerr(op))?,
    )
    .map_err(lerr(op))?;
    let access = Layout::concat([lanes, pair]).map_err(lerr(op))?;
    // The TMA unit reads the buffer a row at a time, in 16-byte chunks: (chunk, element) ->
    // row 0's coordinate `64 col` of the (64, EPI_COLS) buffer.
    let chunks = EPI_COLS * 2 / 16;
    let row = format!("({chunks},8):({},64)", 64 * 8)
        .parse()
        .map_err(lerr(op))?;
    let accesses = [
        TileAccess {
            name: "fragment store",
            layout: access.clone(),
        },
        TileAccess {
            name: "TMA row",
            layout: row,
        },
    ];
    let inner = format!("(64,{EPI_COLS}):({EPI_COLS},1)")
        .parse()
        .map_err(lerr(op))?;
    // Hand-picked: the 64-byte mode, whose span is one row of EPI_COLS 16-bit outputs.
    let choice = choose_swizzle(
        op,
        &accesses,
        &inner,
        2,
        Candidates::Modes("the best TMA mode", &tma_modes(2)?),
        TmaSwizzle::B64.on_elements(2)?,
    )?;
    let build = |sw: Swizzle| -> Result<(SmemLayout, TmaBox, TmaBox, BankConflicts)> {
        let smem = SmemLayout::row_major(op, swizzle_bits(op, sw)?, 64, EPI_COLS)?;
        let tma = tma_box_for(&smem, 2)?;
        let through =
            sw_composition(&smem.swizzled(op)?, &access).map_err(KernelError::swizzle(op))?;
        let conflicts = bank_conflicts(&through, 2).map_err(KernelError::swizzle(op))?;
        if !conflicts.is_conflict_free() {
            return Err(KernelError::BankConflicts {
                op,
                layout: smem.to_string(),
                access: format!("fragment store {access}"),
                conflicts: conflicts.wavefronts - conflicts.ideal,
            });
        }
        let warp_tma = warp_box(&smem)?;
        Ok((smem, tma, warp_tma, conflicts))
    };
    let ((smem, tma, warp_tma, conflicts), choice) = choice.build(|c| build(c.used))?;
    Ok(Sm90Store {
        smem,
        tma,
        warp_tma,
        buffers: STORE_BUFFERS,
        conflicts,
        swizzle: choice,
    })
}

/// The TMA modes as swizzles of `elem_bytes`-byte element offsets, in [`TmaSwizzle::ALL`]'s
/// order.
fn tma_modes(elem_bytes: i64) -> Result<Vec<Swizzle>> {
    TmaSwizzle::ALL
        .iter()
        .map(|m| m.on_elements(elem_bytes))
        .collect()
}

/// A synthesized swizzle as the three numbers the kernel's layouts carry, or why it has none.
fn swizzle_bits(op: &'static str, sw: Swizzle) -> Result<SwizzleBits> {
    SwizzleBits::of(sw).ok_or_else(|| {
        KernelError::invalid(
            op,
            format!("{sw} has a negative shift, which no TMA mode applies"),
        )
    })
}

/// The kernel names a pass's registers k = 0..EPI_COLS/2 and finds them at the coordinates of
/// register k of the first pass: `acc` must repeat every pass, EPI_COLS columns on, and keep
/// each warp on its own [`WARP_ROWS`] rows (each warp stores its own).
fn check_pass_registers(op: &'static str, acc: &Layout) -> Result<()> {
    let lerr = KernelError::layout;
    let regs = EPI_COLS / 2;
    let (threads, per_thread) = (
        acc.mode(0).map_err(lerr(op))?.size(),
        acc.mode(1).map_err(lerr(op))?.size(),
    );
    for t in 0..threads {
        let at = |i: i64| -> Result<i64> {
            acc.eval(&tessera_layout::IntTuple::flat([t, i]))
                .map_err(lerr(op))
        };
        let (r0, r2) = (at(0)? % 64, at(2)? % 64);
        for i in 0..per_thread {
            let (x, x0) = (at(i)?, at(i % regs)?);
            let row = x % 64;
            if row / WARP_ROWS != t / 32 {
                return Err(KernelError::invalid(
                    op,
                    format!("{acc}: register {i} of thread {t} (warp {}) is on row {row}, outside the warp's {WARP_ROWS} rows (each warp stores its own)", t / 32),
                ));
            }
            if row != r0 && row != r2 {
                return Err(KernelError::invalid(
                    op,
                    format!("{acc}: register {i} of thread {t} is on row {row}, neither that of register 0 ({r0}) nor of register 2 ({r2})"),
                ));
            }
            if x % 64 != x0 % 64 || x / 64 != x0 / 64 + EPI_COLS * (i / regs) {
                return Err(KernelError::invalid(
                    op,
                    format!("{acc}: register {i} of thread {t} is not register {} of its pass, {EPI_COLS} columns on", i % regs),
                ));
            }
        }
    }
    Ok(())
}

/// The per-warp TMA box of the store buffer `smem` (64 x [`EPI_COLS`]): rows
/// `[WARP_ROWS w, WARP_ROWS (w + 1))` of `smem` must be the [`WARP_ROWS`]-row swizzled layout
/// at a byte offset aligned for its swizzle, so that a TMA store of that box from there writes
/// exactly those rows ([`store_plan`] checks that warp `w` holds exactly them).
fn warp_box(smem: &SmemLayout) -> Result<TmaBox> {
    let op = "Sm90Plan store (per warp)";
    let part = SmemLayout::row_major(op, smem.swizzle, WARP_ROWS, EPI_COLS)?;
    let bx = tma_box_for(&part, 2)?;
    for w in 0..64 / WARP_ROWS {
        let base = w * WARP_ROWS * EPI_COLS;
        if (2 * base) % bx.align != 0 {
            return Err(KernelError::invalid(
                op,
                format!(
                    "warp {w}'s rows start at byte {}, not aligned to {} B for {}",
                    2 * base,
                    bx.align,
                    bx.swizzle
                ),
            ));
        }
        for r in 0..WARP_ROWS {
            for c in 0..EPI_COLS {
                let (whole, own) = (
                    smem.offset(w * WARP_ROWS + r, c)?,
                    base + part.offset(r, c)?,
                );
                if whole != own {
                    return Err(KernelError::invalid(
                        op,
                        format!("{smem}: row {} column {c} is at element {whole}, warp {w}'s box puts it at {own}", w * WARP_ROWS + r),
                    ));
                }
            }
        }
    }
    Ok(bx)
}

/// Checks the form the tree epilogue's fragment path relies on (`tessera_sm90_tree_frag` in
/// `sm90_gemm.cuh`): in every pass of [`EPI_COLS`] columns, register `k` of a thread is on the
/// row of its register 0 plus `8 ((k / 2) % 2)` and the column of its register 0 plus
/// `8 (k / 4) + k % 2`, and the column of register 0 is `2 (lane % 4)`. So a register pair is
/// a column pair, a row's columns of a pass are the 4 lanes of a quad, and a column's rows are
/// the 8 lanes of a warp with the same `lane % 4`.
///
/// The accumulator of the plan of a 256 x 256 x 64 GEMM has that form.
pub fn fragment_pass_form(acc: &Layout) -> Result<()> {
    let op = "Sm90Plan fragment form";
    let lerr = KernelError::layout;
    let (threads, per_thread) = (
        acc.mode(0).map_err(lerr(op))?.size(),
        acc.mode(1).map_err(lerr(op))?.size(),
    );
    let regs = EPI_COLS / 2;
    if per_thread % regs != 0 {
        return Err(KernelError::invalid(
            op,
            format!("{acc}: {per_thread} registers per thread are not whole passes of {regs}"),
        ));
    }
    for t in 0..threads {
        let at = |i: i64| -> Result<(i64, i64)> {
            let x = acc
                .eval(&tessera_layout::IntTuple::flat([t, i]))
                .map_err(lerr(op))?;
            Ok((x % 64, x / 64))
        };
        let (r0, c0) = at(0)?;
        if c0 != 2 * (t % 32 % 4) {
            return Err(KernelError::invalid(
                op,
                format!("{acc}: register 0 of thread {t} is on column {c0}, not 2 (lane % 4)"),
            ));
        }
        for i in 0..per_thread {
            let (k, pass) = (i % regs, i / regs);
            let want = (
                r0 + 8 * ((k / 2) % 2),
                c0 + 8 * (k / 4) + k % 2 + EPI_COLS * pass,
            );
            if at(i)? != want {
                return Err(KernelError::invalid(
                    op,
                    format!(
                        "{acc}: register {i} of thread {t} is at (row, col) {:?}, not {want:?}",
                        at(i)?
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A convolution's A operand loaded straight from its input by TMA's im2col mode (the
/// implicit GEMM): x is channels-last, `(N, H, W, C)` in memory with `pitch` elements from one
/// pixel to the next (`pitch = C` for a packed tensor); the GEMM's row m is the output pixel
/// `(n, p, q)` (q fastest) and its k-tile `kt` is 64 channels of one filter tap. Each tap
/// takes [`Im2colTma::c_blocks`] k-tiles: where C is not a multiple of 64 the last one runs
/// past channel C and the tensor map fills those channels with zeros, so the GEMM's K is
/// `R·S·64·c_blocks` with `k = (c, s, r)`, c fastest over the rounded-up channels (the filter
/// must hold zeros there too). The tensor map walks the output pixels of a tile, `(sw, sh)`
/// apart in x, from the first pixel's window corner `(q sw - pl, p sh - pt)`; the tap's
/// offset `(s dw, r dh)` goes with each load; taps in the padding read zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Im2colTma {
    /// The convolution.
    pub conv: ConvGeometry,
    /// Elements from one pixel of x to the next: C when x is packed; more where the pixels
    /// are padded onto TMA's 16-byte grid (a staged copy of x).
    pub pitch: i64,
    /// Load A by the halo load ([`Halo`]: one strip per filter row serves all its taps, the
    /// tile's rows whole output rows `pitch` apart) instead of one im2col box per tap.
    pub halo: Option<Halo>,
    /// Rows of B (the filter, one per output channel) its tensor map spans: K, or where the
    /// filter is a staged copy, K rounded up to the plan's tile columns, the copy holding
    /// zeros in the rows past K, so that no load of B runs past the map.
    pub filter_rows: i64,
}

/// A convolution's geometry as the Hopper kernel's loads of A walk it (the im2col load,
/// [`Im2colTma`], and the window load, [`crate::plan::WindowTma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeometry {
    /// x's logical sizes `(N, C, H, W)`.
    pub x: [i64; 4],
    /// The filter's `(R, S)`.
    pub rs: (i64, i64),
    /// The output's `(P, Q)`.
    pub pq: (i64, i64),
    /// The convolution's stride `(sh, sw)`.
    pub stride: (i64, i64),
    /// The padding `(top, bottom, left, right)`.
    pub pad: (i64, i64, i64, i64),
    /// The dilation `(dh, dw)`.
    pub dil: (i64, i64),
}

impl Im2colTma {
    /// The tensor map's bounding box of window corners, `(lower, upper)` as `[W, H]` offsets
    /// from x's first and last pixel: `-pad` below, `pad_end - (taps - 1) dilation` above.
    pub fn corners(&self) -> ([i64; 2], [i64; 2]) {
        let (pt, pb, pl, pr) = self.conv.pad;
        let (r, s) = self.conv.rs;
        let (dh, dw) = self.conv.dil;
        ([-pl, -pt], [pr - (s - 1) * dw, pb - (r - 1) * dh])
    }

    /// The k-tiles of one tap: C channels rounded up to whole 64-channel loads.
    pub fn c_blocks(&self) -> i64 {
        (self.conv.x[1] + 63) / 64
    }

    /// The GEMM's K: every tap's channels rounded up to whole k-tiles, `R·S·64·c_blocks`.
    pub fn gemm_k(&self) -> i64 {
        self.conv.rs.0 * self.conv.rs.1 * 64 * self.c_blocks()
    }

    /// Elements of x the tensor map may read: up to the last pixel's channel C.
    pub fn extent(&self) -> i64 {
        let [n, c, h, w] = self.conv.x;
        (n * h * w - 1) * self.pitch + c
    }

    /// Why TMA's im2col mode cannot load this convolution's A (64 channels of a tap a load),
    /// or `None`: 16-bit pixels on the 16-byte grid (`pitch` a multiple of 8, at least C),
    /// strides at most 8, the corners within [-128, 127], the taps' offsets within 16 bits.
    pub fn refusal(&self) -> Option<String> {
        let c = self.conv.x[1];
        if self.pitch < c || self.pitch % 8 != 0 {
            return Some(format!(
                "a pixel pitch of {} elements for C = {c} channels: TMA steps from pixel to pixel in multiples of 16 bytes (8 16-bit elements), at least C",
                self.pitch
            ));
        }
        let (sh, sw) = self.conv.stride;
        if !(1..=8).contains(&sh) || !(1..=8).contains(&sw) {
            return Some(format!(
                "stride ({sh},{sw}): TMA's im2col traversal steps at most 8"
            ));
        }
        let (lo, hi) = self.corners();
        if lo
            .iter()
            .chain(hi.iter())
            .any(|v| !(-128..=127).contains(v))
        {
            return Some(format!(
                "window corners {lo:?} .. {hi:?} outside [-128, 127]"
            ));
        }
        let (r, s) = self.conv.rs;
        let (dh, dw) = self.conv.dil;
        if (r - 1) * dh > 0xffff || (s - 1) * dw > 0xffff {
            return Some("tap offsets beyond 16 bits".to_string());
        }
        None
    }
}

/// Choices the Hopper planner would otherwise make itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sm90Options {
    /// Force `(BM, BN)`: BM 64 or 128 (one or two consumer warpgroups), BN a multiple of 32 up
    /// to 256.
    pub tile: Option<(i64, i64)>,
    /// Force the pipeline depth.
    pub stages: Option<i64>,
    /// Force the tile-rows per rasterization group.
    pub group_m: Option<i64>,
    /// Force the consumer schedule. Default: ping-pong (128 x 128) for a plain GEMM of at
    /// most [`policy::PINGPONG_MAX_K_TILES`] k-tiles with no other choice forced, else cooperative.
    pub schedule: Option<Schedule>,
    /// CTAs per cluster: 1 (the default) or 2 (a pair sharing one operand through TMA
    /// multicast; cooperative schedule only).
    pub cluster: Option<i64>,
    /// The operand a pair shares (cluster 2 only); default: the larger tile, B on a tie.
    pub share: Option<ClusterShare>,
    /// Whether the epilogue stores D through shared memory with TMA ([`Sm90Store`]); it can
    /// with a 16-bit output and no C (an aux output is stored alike). Default: whenever it can.
    pub tma_store: Option<bool>,
    /// Full 16-bit input tensors the tree epilogue stages through shared memory
    /// ([`Sm90Plan::staged_inputs`]); needs the TMA-store epilogue. Default 0.
    pub epilogue_inputs: Option<i64>,
    /// Whether the tree epilogue's `bias_row` and `bias_col` vectors are staged per tile in
    /// shared memory ([`Sm90Plan::vector_stage`]); plans without the TMA-store epilogue stage
    /// neither. Default `(false, false)`.
    pub epilogue_vectors: (bool, bool),
    /// Whether the kernel splits the launch's last, partial wave of tiles along K over all
    /// CTAs (stream-K, [`Sm90Plan::stream_k`]). Default: with the cooperative schedule and
    /// no cluster, for last waves that leave at least [`STREAM_K_MIN_IDLE`] k-tiles a CTA
    /// idle; `Some(true)`: for every partial last wave.
    pub stream_k: Option<bool>,
    /// Load A and B with cp.async from every producer thread instead of TMA
    /// ([`Sm90Plan::cp_async_ab`]); no cluster, no im2col or window load.
    pub cp_async_ab: bool,
    /// Load A with TMA's im2col mode from a convolution's input (the implicit GEMM):
    /// cooperative or ping-pong, no cluster, no stream-K.
    pub im2col: Option<Im2colTma>,
    /// Load A with the window load from a convolution's phase-staged input
    /// ([`WindowTma`]): a batched GEMM (batch `N·P`, `M = Q`), B shared by every batch, no
    /// cluster, no stream-K.
    pub window: Option<WindowTma>,
    /// The tree epilogue's column bias added to the accumulators before the mainloop
    /// ([`Sm90Plan::bias_in_acc`]); set by the tree planner where the tree allows it.
    pub bias_in_acc: bool,
    /// The tree epilogue's one staged input loaded into the TMA-store buffers
    /// ([`Sm90Plan::staged_in_store`]); set by the tree planner where the plan allows it.
    pub staged_in_store: bool,
}

/// The operand the two CTAs of a cluster share: each loads half of its tile and multicasts
/// that half to both, so the tile crosses from L2 once per pair instead of once per CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterShare {
    /// A pair along N: the two CTAs take adjacent tile columns of one tile row, whose A tile
    /// is the same.
    A,
    /// A pair along M: adjacent tile rows of one tile column, whose B tile is the same.
    B,
}

impl fmt::Display for ClusterShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClusterShare::A => "A",
            ClusterShare::B => "B",
        })
    }
}

impl std::str::FromStr for ClusterShare {
    type Err = KernelError;

    /// `a` or `b` (either case).
    fn from_str(s: &str) -> Result<ClusterShare> {
        match s.trim() {
            "a" | "A" => Ok(ClusterShare::A),
            "b" | "B" => Ok(ClusterShare::B),
            _ => Err(KernelError::invalid(
                "ClusterShare::from_str",
                format!("`{s}`: the shared operand is `a` or `b`"),
            )),
        }
    }
}

/// How the consumer warpgroups share the work of a CTA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Every consumer takes 64 rows of every tile (tile `64 consumers x BN`); all run the
    /// epilogue together, with the tensor cores idle meanwhile.
    #[default]
    Cooperative,
    /// Two consumers take every other tile, all 128 rows each (two m64 wgmma per k16 step, BN
    /// at most 128); one's epilogue overlaps the other's mainloop.
    PingPong,
}

/// A plan for the sm_90a path: TMA + mbarrier ring + wgmma, one producer warpgroup and
/// `consumers` consumer warpgroups, persistent CTAs.
#[derive(Clone, Debug, PartialEq)]
pub struct Sm90Plan {
    /// The problem.
    pub problem: GemmProblem,
    /// CTA tile `(BM, BN, BK)`.
    pub cta_tile: (i64, i64, i64),
    /// Consumer warpgroups.
    pub consumers: i64,
    /// How the consumers share the CTA's tiles.
    pub schedule: Schedule,
    /// m64 wgmma per k16 step per consumer (1 cooperative; ping-pong BM / 64).
    pub m_halves: i64,
    /// Threads per CTA: `128 * (consumers + 1)`.
    pub threads: i64,
    /// Pipeline stages.
    pub stages: i64,
    /// Tile-rows per rasterization group of the persistent schedule (with a cluster: rows of
    /// cluster tiles, each one tile row along N or two along M).
    pub group_m: i64,
    /// CTAs per cluster (1 or 2). The two CTAs of a cluster always work on the two tiles of
    /// one cluster tile together, stage for stage.
    pub cluster: i64,
    /// The operand the CTAs of a cluster share ([`Sm90Operand::multicast`] says how it is
    /// split); `None` when `cluster` is 1.
    pub share: Option<ClusterShare>,
    /// The wgmma instruction shape `(64, BN, 16)`.
    pub wgmma: (i64, i64, i64),
    /// A (BM x BK per stage).
    pub a: Sm90Operand,
    /// B (BN x BK per stage, stored N x K).
    pub b: Sm90Operand,
    /// `(thread, register) -> row + 64 * col` of a consumer's 64 x BN accumulator.
    pub acc: Layout,
    /// The epilogue's shared memory, bytes: the fp32 scratch (`consumers x 64 x EPI_PITCH`
    /// floats), in whose bytes live the TMA-store buffers ([`Sm90Plan::store`], aligned up
    /// to their box) followed by the staged inputs' buffers; the larger of the two uses.
    pub epilogue_scratch_bytes: i64,
    /// The TMA-store epilogue, when the plan has one. The kernel still takes the fp32-scratch
    /// path at launches whose D TMA cannot address (misaligned address or strides).
    pub store: Option<Sm90Store>,
    /// Full 16-bit input tensors (C, the residual, aux_in) a tree epilogue may stage: each
    /// pass block of each, 64 x [`EPI_COLS`] in the store buffers' layout, is loaded by TMA
    /// into one of [`IN_BUFFERS`] buffers per consumer, the first two of a tile before its
    /// mainloop, the others two passes ahead. 0 without (and on every plan of a
    /// flag-driven epilogue). The barriers add 16 bytes per consumer.
    pub staged_inputs: i64,
    /// The bias of the tile, staged in shared memory (bytes; 0 without a bias): per consumer
    /// warpgroup two fp32 buffers (alternate tiles) of the tile's bias values, BN of a column
    /// bias or `64 * m_halves` of a row bias. Each thread loads its share from global memory
    /// before the tile's mainloop and writes it into the buffer after it, so the epilogue's
    /// bias reads wait for shared memory, not for L2.
    pub bias_stage_bytes: i64,
    /// The tree epilogue's bias vectors staged per tile (the fragment path;
    /// [`Sm90Options::epilogue_vectors`]): fp32 values per consumer warpgroup and buffer,
    /// `(rows, cols)`: the warpgroup's `64 * m_halves` rows of `bias_row`, the tile's BN
    /// columns of `bias_col`, or 0. As with [`Sm90Plan::bias_stage_bytes`], two buffers per
    /// consumer (alternate tiles), loaded with the tile's first k-tile and written after the
    /// mainloop.
    pub vector_stage: (i64, i64),
    /// Stream-K (cooperative schedule, no cluster): when the tiles fill little of the
    /// persistent grid's last wave, the launch splits that wave's tiles along K over all
    /// CTAs ([`Sm90Plan::stream_k_tiles`]): CTA `c` of `G` takes k-tiles `[c I / G, (c + 1) I
    /// / G)` of their concatenation (`I` k-tiles in all), after its whole tiles. A part
    /// without its tile's last k-tile goes to a per-CTA fp32 workspace; the CTA with the
    /// last k-tile adds the parts in and runs the epilogue. The workspace, allocated at a kernel's first split launch and kept with it,
    /// holds `SMs x consumers x 64 x BN` fp32 values (17 MB at 128 x 256 on 132 SMs).
    pub stream_k: bool,
    /// A and B loaded by cp.async, 16 bytes a thread, from all the producer warpgroup's
    /// threads, into the stages' 128-byte-swizzled layout TMA would write: for rows of A and
    /// B that TMA would read off the 32-byte sector grid (K an odd multiple of 8 for 16-bit
    /// elements), which it loads at little more than half the rate (design 013). Each
    /// thread's copies of a stage complete on its `full` barrier (of 128 arrivals).
    pub cp_async_ab: bool,
    /// A loaded from a convolution's input by TMA's im2col mode ([`Im2colTma`]), or `None`
    /// for a tiled load of an `M x K` matrix.
    pub im2col: Option<Im2colTma>,
    /// A loaded by the window load ([`WindowTma`]), or `None`.
    pub window: Option<WindowTma>,
    /// B as a panel: a convolution's filter (one tile column: every tile of the CTA
    /// multiplies the same B), all of its k-tiles in shared memory beside the ring, loaded
    /// with the CTA's first tile and kept; the ring carries A only. Taken by convolution
    /// plans (im2col or window load, whole tiles) on the cooperative schedule (both consumers
    /// wait for the first tile's stages, which bring the panel) where the ring still holds
    /// [`policy::PANEL_MIN_STAGES`] stages beside it.
    pub b_panel: bool,
    /// The column bias of a tree epilogue that reads `acc + bias_col` (each once, summands of
    /// one sum) starts the accumulators: each consumer thread loads its columns' bias values
    /// once, sets its accumulators to them before every tile's mainloop, and the epilogue's
    /// tree is compiled without the bias. Whole tiles (no stream-K: a part would add the bias
    /// once per part), one tile column and one batch (every tile of the CTA then starts from
    /// the same values), BN at most 128 (a register a thread per accumulator).
    pub bias_in_acc: bool,
    /// The one staged input of a tree epilogue (C, the residual or aux_in) is loaded into
    /// the TMA-store buffers instead of buffers of its own: pass `q` of a tile into the store
    /// buffer that pass will store D from, once the store that last used that buffer has
    /// read it. So every pass of the tile is loaded during its mainloop (with buffers of its
    /// own, two a consumer, the later passes waited on L2 inside the epilogue), in no shared
    /// memory beyond the store buffers; each thread reads its input values and writes its D
    /// values at the same places of the buffer. A consumer's passes of a tile
    /// (`m_halves x BN / EPI_COLS`) must fit in the store buffers; no aux output (it would
    /// take a buffer a pass) and no row store.
    pub staged_in_store: bool,
    /// Staged-input barriers per consumer warp: one per input buffer ([`IN_BUFFERS`]), or
    /// with [`Sm90Plan::staged_in_store`] one per store buffer.
    pub in_buffers: i64,
    /// The fewest parts a tile from which a single wave split in whole parts numbers its CTAs
    /// part by part ([`policy::stream_k_part_order`]); without stream-K unused.
    pub sk_part_order_min: i64,
    /// The fewest idle k-tiles a CTA (on average) of a last wave that stream-K splits:
    /// [`STREAM_K_MIN_IDLE`] by default, 0 (any) when stream-K was asked for.
    pub stream_k_min_idle: i64,
    /// Dynamic shared memory: the stages, the barriers (two per stage, two ping-pong turns and
    /// two per consumer for the staged inputs),
    /// the epilogue scratch, the bias stage, the vector stage, and 1024 bytes of alignment slack.
    pub smem_bytes: i64,
}

/// One operand's stage: its swizzle from swizzle synthesis among the TMA modes (the modes
/// the TMA unit writes and wgmma descriptors read), measured against the hand-picked 128-byte
/// mode, then the TMA box and the wgmma descriptor read off the layout with the swizzle used.
///
/// The accesses, in the coordinates `mn + tile_mn * k` of the `(tile_mn, BK)` tile: the TMA
/// unit writes a row at a time in 16-byte chunks (lane = chunk of row 0); a wgmma descriptor
/// reads 8 x 16-byte core matrices, 8 rows of one chunk (lane = row). Neither is a warp
/// instruction, but both move 16-byte pieces through the banks as one would.
fn operand(name: &'static str, tile_mn: i64, elem_bytes: i64) -> Result<Sm90Operand> {
    let op = "Sm90Plan";
    let lay = |s: String| -> Result<Layout> { s.parse().map_err(KernelError::layout(op)) };
    let per_chunk = 16 / elem_bytes;
    let chunks = BK / per_chunk;
    let accesses = [
        TileAccess {
            name: "TMA row",
            layout: lay(format!(
                "({chunks},{per_chunk}):({},{tile_mn})",
                per_chunk * tile_mn
            ))?,
        },
        TileAccess {
            name: "wgmma core matrix",
            layout: lay(format!("(8,{per_chunk}):(1,{tile_mn})"))?,
        },
    ];
    let inner = lay(format!("({tile_mn},{BK}):({BK},1)"))?;
    // Hand-picked: the 128-byte mode, whose span is one row of BK 16-bit elements.
    let choice = choose_swizzle(
        op,
        &accesses,
        &inner,
        elem_bytes,
        Candidates::Modes("the best TMA mode", &tma_modes(elem_bytes)?),
        TmaSwizzle::B128.on_elements(elem_bytes)?,
    )?;
    let build = |sw: Swizzle| -> Result<(SmemLayout, TmaBox, WgmmaDesc)> {
        let smem = SmemLayout::row_major(op, swizzle_bits(op, sw)?, tile_mn, BK)?;
        let tma = tma_box_for(&smem, elem_bytes)?;
        let desc = wgmma_desc_for(&smem, elem_bytes)?;
        Ok((smem, tma, desc))
    };
    let ((smem, tma, desc), choice) = choice.build(|c| build(c.used))?;
    Ok(Sm90Operand {
        name,
        tile_mn,
        smem,
        tma,
        desc,
        multicast: None,
        swizzle: choice,
    })
}

impl Sm90Plan {
    /// Whether the Hopper path can run `problem` on `arch` at all (alignment of the actual
    /// buffers is checked at launch): sm_90a, 16-bit inputs, A row-major and B stored N x K
    /// (both K-major) in the problem the kernel runs ([`GemmProblem::row_major_d`]; a
    /// column-major D keeps that pair).
    pub fn supports(problem: &GemmProblem, arch: Arch) -> bool {
        let problem = problem.row_major_d();
        arch == Arch::Sm90a
            && problem.input != DType::F32
            && problem.a_major == Major::Row
            && problem.b_major == Major::Col
    }

    /// Plans `problem` with the planner's own choices.
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Schedule, Sm90Plan};
    /// let plan = Sm90Plan::new(&GemmProblem::new(8192, 8192, 8192)).unwrap();
    /// assert_eq!((plan.cta_tile, plan.consumers, plan.threads), ((128, 256, 64), 2, 384));
    /// assert_eq!(plan.b.tma.outer, 256);
    /// assert!(plan.smem_bytes <= 232_448);
    /// // A plain GEMM of at most PINGPONG_MAX_K_TILES k-tiles: ping-pong, 128 x 128.
    /// let plan = Sm90Plan::new(&GemmProblem::new(4096, 4096, 4096)).unwrap();
    /// assert_eq!((plan.cta_tile, plan.schedule), ((128, 128, 64), Schedule::PingPong));
    /// ```
    pub fn new(problem: &GemmProblem) -> Result<Sm90Plan> {
        Sm90Plan::with_options(problem, Sm90Options::default())
    }

    /// Plans `problem` with some choices forced.
    ///
    /// A column-major D is planned as the transposed product ([`GemmProblem::row_major_d`]):
    /// tile, operands, epilogue and grid are that problem's, the launch exchanges A and B, and
    /// `problem` stays the one asked for.
    pub fn with_options(logical: &GemmProblem, opts: Sm90Options) -> Result<Sm90Plan> {
        let op = "Sm90Plan::new";
        logical.validate()?;
        let problem = &logical.row_major_d();
        if !Sm90Plan::supports(problem, Arch::Sm90a) {
            return Err(KernelError::invalid(
                op,
                format!("{problem}: the sm_90a path takes 16-bit inputs, A row-major and B column-major (stored N x K)"),
            ));
        }
        let (bm, bn, schedule, consumers, m_halves) = tile_and_schedule(problem, &opts)?;
        let e = problem.input.bytes();
        let mut a = operand("A", bm, e)?;
        let mut b = operand("B", bn, e)?;
        let (cluster, share) = cluster_share(&opts, schedule, (&mut a, &mut b), e)?;
        let a_stage = a_stage_bytes(&a, opts.window.as_ref(), opts.im2col.as_ref(), bm);
        // The halo load's stage carries the B k-tiles of all S taps of its filter row.
        let b_per_stage = halo_taps(opts.im2col.as_ref());
        // The B panel: a convolution's filter, whole (one tile column), loaded once per CTA
        // with its first tile and kept (see `Sm90Plan::b_panel`); the ring then carries A only.
        let panel_k_tiles = (opts.im2col.is_some() || opts.window.is_some())
            && schedule == Schedule::Cooperative
            && (problem.n + bn - 1) / bn == 1;
        let panel_bytes = (problem.k + BK - 1) / BK * b.tma.bytes;
        let budget = Arch::Sm90a.smem_per_block_optin();
        let barriers = 64 * 16 + 16;
        let bias_stage_bytes = match problem.epilogue.bias {
            BiasMode::None => 0,
            BiasMode::PerCol => consumers * 2 * bn * 4,
            BiasMode::PerRow => consumers * 2 * 64 * m_halves * 4,
        };
        let acc = wgmma_acc_layout(bn)?;
        let want_store = wants_tma_store(problem, &opts)?;
        let store = if want_store {
            Some(store_plan(&acc, problem.output)?)
        } else {
            None
        };
        // The tree epilogue's staged inputs: per consumer, IN_BUFFERS pass blocks of each, in
        // the store buffers' layout, after the store buffers (the fragment path only).
        let staged_inputs = opts.epilogue_inputs.unwrap_or(0);
        if !(0..=MAX_STAGED_INPUTS).contains(&staged_inputs)
            || (staged_inputs > 0 && store.is_none())
        {
            return Err(KernelError::invalid(
                op,
                format!("{staged_inputs} staged epilogue inputs: 0 to {MAX_STAGED_INPUTS}, and only with the TMA-store epilogue"),
            ));
        }
        // Staged inputs in the store buffers: a store buffer for every pass of a consumer's
        // tile, and no input buffers of their own.
        let passes = m_halves * bn / EPI_COLS;
        if opts.staged_in_store
            && (staged_inputs != 1
                || store.is_none()
                || rows_off_grid_in_one_tile(problem, bn)
                || passes > MAX_STORE_BUFFERS)
        {
            return Err(KernelError::invalid(
                op,
                format!("staged inputs in the store buffers: one staged input, the TMA-store epilogue without the row store, and at most {MAX_STORE_BUFFERS} passes a consumer (a {bm}x{bn} tile has {passes}), not {staged_inputs} inputs"),
            ));
        }
        let own_in_buffers = if opts.staged_in_store { 0 } else { IN_BUFFERS };
        let fp32_scratch = consumers * 64 * EPI_PITCH * 4;
        // The epilogue's bytes with `buffers` store buffers per consumer.
        let scratch_bytes = |buffers: i64| match &store {
            Some(st) => {
                let bufs = consumers * (buffers + staged_inputs * own_in_buffers) * st.tma.bytes;
                fp32_scratch.max(bufs + st.tma.align - 16)
            }
            None => fp32_scratch,
        };
        let vector_stage = match store {
            Some(_) => (
                if opts.epilogue_vectors.0 {
                    64 * m_halves
                } else {
                    0
                },
                if opts.epilogue_vectors.1 { bn } else { 0 },
            ),
            None => (0, 0),
        };
        let vector_stage_bytes = consumers * 2 * (vector_stage.0 + vector_stage.1) * 4;
        let room = budget - 1024 - barriers - bias_stage_bytes - vector_stage_bytes;
        // With the panel beside it, the ring must still hold PANEL_MIN_STAGES stages of A.
        let b_panel = panel_k_tiles
            && (room - panel_bytes - scratch_bytes(STORE_BUFFERS)) / a_stage
                >= policy::PANEL_MIN_STAGES;
        let (stage, room) = if b_panel {
            (a_stage, room - panel_bytes)
        } else {
            (a_stage + b_per_stage * b.tma.bytes, room)
        };
        // The row store's 64 rows of D (and aux) per consumer, where D's rows are off
        // TMA's 16-byte grid and all of N is in one tile (Sm90Plan::row_store), if the ring
        // keeps ROW_STORE_MIN_STAGES stages beside them.
        let least = match &store {
            Some(st) if rows_off_grid_in_one_tile(problem, bn) => {
                let outs = if problem.epilogue.aux { 2 } else { 1 };
                let rows = outs * 64 * problem.n * problem.output.bytes();
                let least = STORE_BUFFERS.max((rows + st.tma.bytes - 1) / st.tma.bytes);
                let keeps = opts.stages.unwrap_or(policy::ROW_STORE_MIN_STAGES);
                if keeps * stage + scratch_bytes(least) <= room {
                    least
                } else {
                    STORE_BUFFERS
                }
            }
            _ if opts.staged_in_store => STORE_BUFFERS.max(passes),
            _ => STORE_BUFFERS,
        };
        let (stages, buffers) = fit_stages(opts.stages, stage, room, budget, least, scratch_bytes)?;
        let epilogue_scratch_bytes = scratch_bytes(buffers);
        let store = store.map(|st| Sm90Store { buffers, ..st });
        let stream_k = match opts.stream_k {
            Some(true) if schedule != Schedule::Cooperative || cluster != 1 => {
                return Err(KernelError::invalid(
                    op,
                    format!("stream-K takes the cooperative schedule without a cluster, not {schedule:?} with a cluster of {cluster}"),
                ))
            }
            Some(s) => s,
            None => policy::hopper_stream_k(schedule == Schedule::Cooperative, cluster).value,
        };
        if let Some(g) = &opts.im2col {
            // The im2col producer loads whole tiles of one CTA: no parts, no multicast.
            if stream_k || cluster != 1 || problem.batch != 1 {
                return Err(KernelError::invalid(
                    op,
                    "TMA's im2col load of A takes one CTA a tile (no cluster), whole tiles (no stream-K) and no batch",
                ));
            }
            if let Some(why) = g.refusal() {
                return Err(KernelError::invalid(op, format!("im2col load of A: {why}")));
            }
            if let Some(h) = &g.halo {
                h.check(&g.conv, g.pitch, bm)?;
                // (Cooperative only: on ping-pong one warpgroup issues the narrow wgmma of
                // these layers alone, which keeps the tensor cores less busy: design 019.)
                if schedule != Schedule::Cooperative || !want_store {
                    return Err(KernelError::invalid(
                        op,
                        "halo load of A: the cooperative schedule and the TMA-store epilogue (its tensor maps drop the rows that are never stored)",
                    ));
                }
            }
            let [n, _, _, _] = g.conv.x;
            let (p, q) = g.conv.pq;
            if problem.k != g.gemm_k() || problem.m != n * p * q {
                return Err(KernelError::invalid(
                    op,
                    format!(
                        "im2col load of A: the problem is {} x {} but the convolution's GEMM is M = N·P·Q = {} by K = R·S·64·{} = {}",
                        problem.m,
                        problem.k,
                        n * p * q,
                        g.c_blocks(),
                        g.gemm_k()
                    ),
                ));
            }
        }
        if let Some(wd) = &opts.window {
            // The window producer loads whole tiles of one CTA, every batch against the one B.
            if stream_k || cluster != 1 || opts.im2col.is_some() {
                return Err(KernelError::invalid(
                    op,
                    "the window load of A takes one CTA a tile (no cluster), whole tiles (no stream-K), and no im2col load beside it",
                ));
            }
            wd.check(bm, problem.batch, problem.m, problem.k)?;
        }
        // (The cp.async load writes the 128-byte swizzle's layout itself, rows of one 128-byte
        // k-tile row each.)
        if opts.cp_async_ab
            && (cluster != 1
                || opts.im2col.is_some()
                || opts.window.is_some()
                || b_panel
                || [&a, &b]
                    .iter()
                    .any(|o| o.tma.swizzle != TmaSwizzle::B128 || o.tma.inner * e != 128))
        {
            return Err(KernelError::invalid(
                op,
                "the cp.async load of A and B takes one CTA a tile (no cluster), row-major operands (no im2col or window load, no B panel) and stages in the 128-byte swizzle, a 128-byte row a k-tile",
            ));
        }
        if opts.bias_in_acc && (stream_k || problem.n > bn || problem.batch != 1 || bn > 128) {
            return Err(KernelError::invalid(
                op,
                format!("the bias in the accumulators takes whole tiles (no stream-K), one tile column and one batch, BN at most 128: stream-K {stream_k}, N = {} in tiles of {bn}, batch {}", problem.n, problem.batch),
            ));
        }
        let group_m = opts
            .group_m
            .unwrap_or_else(|| policy::hopper_group_m().value);
        if group_m < 1 {
            return Err(KernelError::invalid(
                op,
                format!("group_m = {group_m} must be at least 1"),
            ));
        }
        Ok(Sm90Plan {
            problem: *logical,
            cta_tile: (bm, bn, BK),
            consumers,
            schedule,
            m_halves,
            threads: 128 * (consumers + 1),
            stages,
            group_m,
            cluster,
            share,
            wgmma: (64, bn, 16),
            a,
            b,
            acc,
            epilogue_scratch_bytes,
            store,
            staged_inputs,
            bias_stage_bytes,
            vector_stage,
            stream_k,
            cp_async_ab: opts.cp_async_ab,
            im2col: opts.im2col,
            window: opts.window,
            b_panel,
            bias_in_acc: opts.bias_in_acc,
            staged_in_store: opts.staged_in_store,
            in_buffers: if opts.staged_in_store {
                buffers
            } else {
                IN_BUFFERS
            },
            sk_part_order_min: part_order(problem, bn).value,
            stream_k_min_idle: if opts.stream_k == Some(true) {
                0
            } else {
                STREAM_K_MIN_IDLE
            },
            smem_bytes: stages * stage
                + if b_panel { panel_bytes } else { 0 }
                + 16 * stages
                + 16
                // The staged inputs' barriers: one per buffer, warp and consumer.
                + 8 * if opts.staged_in_store { buffers } else { IN_BUFFERS } * (64 / WARP_ROWS) * consumers
                + epilogue_scratch_bytes
                + bias_stage_bytes
                + vector_stage_bytes
                + 1024,
        })
    }

    /// The problem the kernel runs: `problem` itself, or its transposed product when D is
    /// column-major ([`GemmProblem::row_major_d`]).
    pub fn kernel_problem(&self) -> GemmProblem {
        self.problem.row_major_d()
    }

    /// Bytes of one A stage of the ring ([`Sm90Plan::a`]'s box, or the window load's
    /// strips).
    pub fn a_stage_bytes(&self) -> i64 {
        a_stage_bytes(
            &self.a,
            self.window.as_ref(),
            self.im2col.as_ref(),
            self.cta_tile.0,
        )
    }

    /// The halo load's layout where the plan loads A by it.
    pub fn halo(&self) -> Option<(Halo, ConvGeometry)> {
        self.im2col.and_then(|g| g.halo.map(|h| (h, g.conv)))
    }

    /// Rows of the kernel's M: the problem's, or the halo load's virtual rows.
    pub fn kernel_rows(&self) -> i64 {
        match self.halo() {
            Some((h, g)) => h.virtual_rows(&g),
            None => self.kernel_problem().m,
        }
    }

    /// A short name identifying the generated source.
    pub fn kernel_name(&self) -> String {
        let (bm, bn, bk) = self.cta_tile;
        let e = self.kernel_problem().epilogue;
        let epi = if e.is_plain() {
            String::new()
        } else {
            format!("_{}", e.to_string().replace(',', "_"))
        };
        let cl = match self.share {
            None => String::new(),
            Some(s) => format!("_c{}{}", self.cluster, s.to_string().to_lowercase()),
        };
        let cl = if self.bias_in_acc {
            format!("{cl}_bacc")
        } else {
            cl
        };
        let cl = if self.staged_in_store {
            format!("{cl}_ins")
        } else {
            cl
        };
        let ts = match (&self.store, self.row_store()) {
            (Some(_), true) => "_tsr",
            (Some(_), false) => "_ts",
            (None, _) => "",
        };
        let ts = if self.halo().is_some() {
            format!("{ts}_halo")
        } else if self.im2col.is_some() {
            format!("{ts}_im2col")
        } else if self.window.is_some() {
            format!("{ts}_window")
        } else {
            ts.to_string()
        };
        format!(
            "tessera_gemm_{}_{}_tn_{}x{}x{}_s{}_{}{}{cl}{ts}{epi}_sm_90a",
            self.problem.input,
            self.problem.output,
            bm,
            bn,
            bk,
            self.stages,
            if self.schedule == Schedule::PingPong {
                "pp"
            } else {
                "ws"
            },
            self.consumers
        )
    }

    /// Whether the kernel has the row store: D leaves the store buffers as whole rows by
    /// bulk copies, no tensor map, where a launch's D is contiguous rows off TMA's 16-byte grid
    /// (the launch decides). Compiled in where the problem's N fits one tile and its 16-bit
    /// rows are off that grid (N not a multiple of 8), and 64 such rows fit a consumer's store
    /// buffers: the path's code costs registers the larger trees do not have to spare.
    pub fn row_store(&self) -> bool {
        let p = self.kernel_problem();
        self.store.as_ref().is_some_and(|st| {
            rows_off_grid_in_one_tile(&p, self.cta_tile.1)
                && 64 * p.n * p.output.bytes() <= st.buffers * st.tma.bytes
        })
    }

    /// Tiles along M and N.
    pub fn grid_tiles(&self) -> (i64, i64) {
        let (bm, bn, _) = self.cta_tile;
        let p = self.kernel_problem();
        let m = self.kernel_rows();
        ((m + bm - 1) / bm, (p.n + bn - 1) / bn)
    }

    /// Tiles in all, batches included.
    pub fn total_tiles(&self) -> i64 {
        let (tm, tn) = self.grid_tiles();
        tm * tn * self.problem.batch
    }

    /// Cluster tiles along M and N: the tile grid with the paired dimension halved, rounded
    /// up (an odd last pair has its second tile outside D: it is loaded as zeros and computed,
    /// and its stores are skipped). The tile grid itself when `cluster` is 1.
    ///
    /// ```
    /// use tessera_kernels::plan::{ClusterShare, GemmProblem, Sm90Options, Sm90Plan};
    /// let opts = Sm90Options { tile: Some((128, 256)), cluster: Some(2), share: Some(ClusterShare::A), ..Default::default() };
    /// let plan = Sm90Plan::with_options(&GemmProblem::new(1000, 1300, 512), opts).unwrap();
    /// assert_eq!(plan.grid_tiles(), (8, 6));
    /// assert_eq!(plan.cluster_grid_tiles(), (8, 3));
    /// ```
    pub fn cluster_grid_tiles(&self) -> (i64, i64) {
        let (tm, tn) = self.grid_tiles();
        let c = self.cluster;
        match self.share {
            None => (tm, tn),
            Some(ClusterShare::A) => (tm, (tn + c - 1) / c),
            Some(ClusterShare::B) => ((tm + c - 1) / c, tn),
        }
    }

    /// CTAs of the persistent grid under a cap of `max_ctas` CTAs and, with a cluster, of
    /// `max_clusters` clusters resident at once (the device's SM count and what it holds by
    /// default): one per tile (one pair per cluster tile), at most the caps, whole clusters, at
    /// least one cluster; except that a stream-K plan whose tiles are one partial wave that
    /// [`policy::stream_k_split`] splits takes up to `max_ctas` CTAs (a whole number of parts
    /// a tile where that leaves at least two), every tile split along K over them
    /// ([`policy::single_wave_grid`]).
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Sm90Options, Sm90Plan};
    /// let p = GemmProblem::new(4096, 4096, 4096);
    /// let single = Sm90Plan::new(&p).unwrap();
    /// assert_eq!(single.persistent_ctas(132, None), 132);
    /// let opts = Sm90Options { cluster: Some(2), ..Default::default() };
    /// let pair = Sm90Plan::with_options(&p, opts).unwrap();
    /// assert_eq!(pair.persistent_ctas(132, None), 132);
    /// assert_eq!(pair.persistent_ctas(132, Some(60)), 120); // 60 pairs fit at once
    /// assert_eq!(pair.persistent_ctas(7, None), 6);
    /// assert_eq!(pair.persistent_ctas(1, None), 2);
    /// // 16 x 4096 x 4096: 32 tiles of 64 x 128, each split over four CTAs.
    /// let decode = Sm90Plan::new(&GemmProblem::new(16, 4096, 4096)).unwrap();
    /// assert_eq!((decode.total_tiles(), decode.persistent_ctas(132, None)), (32, 128));
    /// ```
    pub fn persistent_ctas(&self, max_ctas: i64, max_clusters: Option<i64>) -> i64 {
        let c = self.cluster.max(1);
        let mut clusters = (max_ctas / c).max(1);
        if let Some(n) = max_clusters {
            clusters = clusters.min(n.max(1));
        }
        if self.stream_k && c == 1 {
            if let Some(g) = self.single_wave(clusters).value {
                return g;
            }
        }
        self.total_cluster_tiles().min(clusters) * c
    }

    /// [`policy::single_wave_grid`] of this plan under a cap of `max_ctas` CTAs: the grid over
    /// which one partial wave of tiles is split along K, or `None`, with the reason.
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Sm90Plan};
    /// let decode = Sm90Plan::new(&GemmProblem::new(64, 1024, 4096)).unwrap();
    /// // 8 tiles of 64 k-tiles, each in 4 parts of 16 (not 16 parts of 4: the fix-up).
    /// assert_eq!(decode.single_wave(132).value, Some(32));
    /// ```
    pub fn single_wave(&self, max_ctas: i64) -> policy::Decision<Option<i64>> {
        policy::single_wave_grid(
            self.total_tiles(),
            max_ctas,
            self.k_tiles(),
            self.stream_k_min_idle,
            policy::memory_bound(&self.kernel_problem()),
        )
    }

    /// The parts a tile by which a launch splitting `tiles` tiles over `grid` CTAs numbers
    /// its CTAs part by part ([`policy::stream_k_part_order`]), or 0 (tile by tile): where
    /// every tile of the launch is split (one wave, no whole tiles before the parts) into
    /// whole parts, `grid = tiles x P` with P at least [`Sm90Plan::sk_part_order_min`]. Then
    /// the stream-K cut `c I / grid` falls on a tile boundary at every multiple of P, so every
    /// CTA runs one part of one tile and part j of every tile starts at the same k-tile.
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Sm90Plan};
    /// // 16 tiles of 128 x 128 over 128 CTAs: 8 parts a tile, compute-bound.
    /// let long_k = Sm90Plan::new(&GemmProblem::new(512, 512, 131072)).unwrap();
    /// assert_eq!(long_k.sk_parts(128, 16), 8);
    /// // A decode batch, 32 tiles in 4 parts, memory-bound: tile by tile.
    /// let decode = Sm90Plan::new(&GemmProblem::new(16, 4096, 4096)).unwrap();
    /// assert_eq!(decode.sk_parts(128, 32), 0);
    /// ```
    pub fn sk_parts(&self, grid: i64, tiles: i64) -> i64 {
        let parts = grid / tiles.max(1);
        if tiles > 0
            && tiles == self.total_tiles()
            && grid % tiles == 0
            && parts >= self.sk_part_order_min
        {
            parts
        } else {
            0
        }
    }

    /// k-tiles of one tile: `ceil(K / BK)`.
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Sm90Plan};
    /// assert_eq!(Sm90Plan::new(&GemmProblem::new(256, 256, 4000)).unwrap().k_tiles(), 63);
    /// ```
    pub fn k_tiles(&self) -> i64 {
        (self.kernel_problem().k + BK - 1) / BK
    }

    /// The tiles a launch on a persistent grid of `grid` CTAs splits along K (stream-K,
    /// [`Sm90Plan::stream_k`]), by [`policy::stream_k_split`]: the `r` tiles of a partial last
    /// wave (every tile when they are fewer than the CTAs; with the wave before it where `r`
    /// is at most an eighth of the grid, [`policy::STREAM_K_JOIN_MIN_PARTS`]) when the wave leaves at least `stream_k_min_idle` k-tiles a CTA
    /// idle (or, memory-bound, keeps at most half the SMs busy) and each CTA's share of their
    /// k-tiles is at least [`STREAM_K_MIN_SHARE`]; else
    /// 0 (every tile whole). `sms` is the device's SM count: a grid larger than that is not
    /// resident at once, which a CTA waiting for another's part needs.
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Schedule, Sm90Options, Sm90Plan};
    /// let coop = Sm90Options { schedule: Some(Schedule::Cooperative), ..Default::default() };
    /// let plan = Sm90Plan::with_options(&GemmProblem::new(8192, 14336, 4096), coop).unwrap();
    /// assert!(plan.stream_k);
    /// assert_eq!(plan.total_tiles(), 3584); // 27 waves of 132 and 20 tiles
    /// assert_eq!(plan.stream_k_tiles(132, 132), 20); // 9.7 k-tiles a CTA, 54 idle
    /// assert_eq!(plan.stream_k_tiles(128, 132), 0); // 28 whole waves
    /// // 4096^3: 512 tiles, the last wave 116 / 132 full, 7.8 k-tiles a CTA idle: whole.
    /// let square = Sm90Plan::with_options(&GemmProblem::new(4096, 4096, 4096), coop).unwrap();
    /// assert_eq!(square.stream_k_tiles(132, 132), 0);
    /// // 128 x 4096 x 4096: one wave of 64 tiles of 64 x 128 on 132 CTAs, all split.
    /// let decode = Sm90Plan::new(&GemmProblem::new(128, 4096, 4096)).unwrap();
    /// assert_eq!(decode.stream_k_tiles(132, 132), 64);
    /// ```
    pub fn stream_k_tiles(&self, grid: i64, sms: i64) -> i64 {
        if !self.stream_k {
            return 0;
        }
        self.stream_k_decision(grid, sms).value
    }

    /// [`Sm90Plan::stream_k_tiles`] with its reason (whether or not the plan may split).
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Sm90Plan};
    /// let plan = Sm90Plan::new(&GemmProblem::new(8192, 8192, 8192)).unwrap();
    /// let d = plan.stream_k_decision(132, 132);
    /// assert_eq!(d.value, 68);
    /// assert!(d.why.contains("idle"));
    /// ```
    pub fn stream_k_decision(&self, grid: i64, sms: i64) -> policy::Decision<i64> {
        let p = self.kernel_problem();
        let total = self.total_tiles();
        // Whether the wave's operands allow joining, asked only where the last wave is thin
        // enough to join.
        let join = policy::stream_k_thin_last_wave(total, grid).then(|| {
            policy::stream_k_join_fits(
                (p.m, p.n, p.k, p.batch),
                (self.cta_tile.0, self.cta_tile.1),
                self.group_m,
                grid,
                p.input.bytes(),
            )
        });
        let d = policy::stream_k_split(
            total,
            grid,
            sms,
            self.k_tiles(),
            self.stream_k_min_idle,
            policy::memory_bound(&p),
            join.as_ref().is_some_and(|j| j.value),
        );
        match join {
            Some(j) if d.value > 0 => policy::Decision {
                why: format!("{}; {}", d.why, j.why),
                ..d
            },
            _ => d,
        }
    }

    /// The plan as compiled for a device of `sms` SMs: without the stream-K parts' code
    /// when stream-K is automatic ([`Sm90Plan::stream_k_min_idle`] above 0) and a launch on
    /// the full persistent grid splits nothing. (Asked for, stream-K stays compiled in, for
    /// launches on smaller grids, [`crate::launch::sm90::Sm90Kernel::set_max_ctas`].)
    ///
    /// ```
    /// use tessera_kernels::plan::{GemmProblem, Sm90Plan};
    /// let split = Sm90Plan::new(&GemmProblem::new(8192, 8192, 8192)).unwrap();
    /// assert!(split.compiled_for(132).stream_k);
    /// // 4096 x 4096 x 8192 leaves 15.5 k-tiles a CTA idle in its last wave: every tile whole.
    /// let whole = Sm90Plan::new(&GemmProblem::new(4096, 4096, 8192)).unwrap();
    /// assert!(whole.stream_k && !whole.compiled_for(132).stream_k);
    /// ```
    pub fn compiled_for(&self, sms: i64) -> Sm90Plan {
        let grid = self.persistent_ctas(sms, None);
        let splits = self.stream_k_tiles(grid, sms) > 0;
        Sm90Plan {
            stream_k: self.stream_k && (self.stream_k_forced() || splits),
            ..self.clone()
        }
    }

    /// Whether stream-K was asked for ([`Sm90Options::stream_k`] `Some(true)`: every partial
    /// last wave splits), not chosen by the idle rule.
    pub fn stream_k_forced(&self) -> bool {
        self.stream_k && self.stream_k_min_idle == 0
    }

    /// Cluster tiles in all, batches included (what the persistent clusters walk).
    pub fn total_cluster_tiles(&self) -> i64 {
        let (cm, cn) = self.cluster_grid_tiles();
        cm * cn * self.problem.batch
    }
}

/// The CTA tile `(BM, BN)`, schedule, consumer warpgroups and m64 halves per consumer of
/// `problem` under `opts`.
fn tile_and_schedule(
    problem: &GemmProblem,
    opts: &Sm90Options,
) -> Result<(i64, i64, Schedule, i64, i64)> {
    let op = "Sm90Plan::new";
    let auto_pingpong = opts.schedule.is_none() && auto_pingpong(problem, opts);
    let (bm, bn) = match opts.tile {
        Some(t) => t,
        // Ping-pong's consumers each hold a whole 128 x BN tile: at most 128 columns.
        None if opts.schedule == Some(Schedule::PingPong) || auto_pingpong => (128, 128),
        None => {
            policy::hopper_tile(
                problem,
                whole_tiles_only(
                    opts.im2col.is_some() || opts.window.is_some(),
                    opts.stream_k,
                ),
            )
            .value
        }
    };
    if !(bm == 64 || bm == 128) || bn % EPI_COLS != 0 || !(EPI_COLS..=256).contains(&bn) {
        return Err(KernelError::invalid(
            op,
            format!("tile {bm}x{bn}: BM must be 64 or 128, BN a multiple of 32 in 32..=256"),
        ));
    }
    let schedule = opts.schedule.unwrap_or(if auto_pingpong {
        Schedule::PingPong
    } else {
        Schedule::Cooperative
    });
    let (consumers, m_halves) = match schedule {
        Schedule::Cooperative => (bm / 64, 1),
        // A ping-pong consumer holds its whole tile: 64 x BN (one m64 wgmma per k16
        // step) or 128 x BN (two), at most 128 accumulators per thread either way.
        Schedule::PingPong => match (bm, bn) {
            (64, _) => (2, 1),
            (128, bn) if bn <= 128 => (2, 2),
            _ => {
                return Err(KernelError::invalid(
                    op,
                    format!("tile {bm}x{bn}: ping-pong takes BM = 64, or BM = 128 with BN <= 128 (a warpgroup's accumulators hold BM x BN)"),
                ))
            }
        },
    };
    Ok((bm, bn, schedule, consumers, m_halves))
}

/// Bytes of one A stage: the tile's box, or with the window load its strips (each a TMA
/// box's rows, 128-byte aligned), rounded up to the 1024 bytes every stage starts on.
fn a_stage_bytes(
    a: &Sm90Operand,
    window: Option<&WindowTma>,
    im2col: Option<&Im2colTma>,
    bm: i64,
) -> i64 {
    match (window, im2col.and_then(|g| g.halo.map(|h| (h, g.conv)))) {
        (Some(wd), _) => (wd.strips() * wd.strip_bytes(bm) + 1023) / 1024 * 1024,
        (None, Some((h, g))) => h.stage_bytes(&g),
        (None, None) => a.tma.bytes,
    }
}

/// B k-tiles a ring stage carries: the S taps of a filter row with the halo load, else one.
pub(crate) fn halo_taps(im2col: Option<&Im2colTma>) -> i64 {
    match im2col {
        Some(g) if g.halo.is_some() => g.conv.rs.1,
        _ => 1,
    }
}

/// Whether a Hopper kernel runs whole tiles only (no stream-K split the tile rule could count
/// on): with the im2col or window load, or with stream-K forced off.
pub(crate) fn whole_tiles_only(im2col: bool, stream_k: Option<bool>) -> bool {
    im2col || stream_k == Some(false)
}

/// The cluster size and the operand its two CTAs share (multicast), if any; the shared
/// operand of `(a, b)` gets its TMA split.
fn cluster_share(
    opts: &Sm90Options,
    schedule: Schedule,
    (a, b): (&mut Sm90Operand, &mut Sm90Operand),
    e: i64,
) -> Result<(i64, Option<ClusterShare>)> {
    let op = "Sm90Plan::new";
    let (bm, bn) = (a.tile_mn, b.tile_mn);
    let cluster = opts
        .cluster
        .unwrap_or_else(|| policy::hopper_cluster().value);
    let share = match (cluster, opts.share) {
        (1, None) => None,
        (1, Some(s)) => {
            return Err(KernelError::invalid(
                op,
                format!("sharing {s} needs a cluster of 2 CTAs, not 1"),
            ))
        }
        (2, s) => {
            if schedule == Schedule::PingPong {
                return Err(KernelError::invalid(
                    op,
                    "a cluster of 2 takes the cooperative schedule: ping-pong's two consumers walk different tiles, which the pair's lockstep stage protocol does not follow",
                ));
            }
            Some(s.unwrap_or(if bn >= bm {
                ClusterShare::B
            } else {
                ClusterShare::A
            }))
        }
        (c, _) => {
            return Err(KernelError::invalid(
                op,
                format!("cluster of {c} CTAs: 1 or 2"),
            ))
        }
    };
    if let Some(s) = share {
        let o = if s == ClusterShare::A { a } else { b };
        let split = tma_split_for(&o.smem, e, cluster).map_err(|err| {
            KernelError::invalid(
                op,
                format!(
                    "tile {bm}x{bn}, cluster of {cluster} sharing {s}: the {} rows of {s} do not split into {cluster} TMA boxes at 1024-byte-aligned offsets of the stage ({err})",
                    o.tile_mn
                ),
            )
        })?;
        o.multicast = Some(split);
    }
    Ok((cluster, share))
}

/// Whether D goes out through the TMA-store epilogue: as `opts` asks, which needs a 16-bit
/// output and no C; by default whenever it can.
/// The stream-K part-order rule for a problem with D row-major and tiles `bn` wide: one
/// place for the plan's threshold and its text.
fn part_order(problem: &GemmProblem, bn: i64) -> policy::Decision<i64> {
    policy::stream_k_part_order(policy::memory_bound(&problem.row_major_d()), bn)
}

fn wants_tma_store(problem: &GemmProblem, opts: &Sm90Options) -> Result<bool> {
    let op = "Sm90Plan::new";
    let epi = &problem.epilogue;
    let can_store = problem.output.bytes() == 2 && epi.beta == 0.0;
    Ok(match opts.tma_store {
        Some(true) if !can_store => {
            return Err(KernelError::invalid(
                op,
                format!("{problem}: the TMA-store epilogue takes a 16-bit output and no C"),
            ))
        }
        Some(w) => w,
        // By default whenever it can: with the bias staged in shared memory per tile
        // (`bias_stage_bytes`), the fragment-layout epilogue's bias reads do not wait for
        // L2 (`docs/design/003-epilogue-vector-loads.md`).
        None => can_store,
    })
}

/// Whether `p`'s D rows are off TMA's 16-byte grid (N of the output type not a multiple of 16
/// bytes) with all N columns in one tile of `bn`: where the row store applies
/// ([`Sm90Plan::row_store`]).
fn rows_off_grid_in_one_tile(p: &GemmProblem, bn: i64) -> bool {
    p.n <= bn && (p.n * p.output.bytes()) % 16 != 0
}

/// The pipeline stages of `stage` bytes (`forced`, or [`policy::hopper_stages`]) and the store
/// buffers per consumer beside them in `room` bytes, the epilogue taking `scratch_bytes(n)`
/// with `n` buffers: the stages first, then buffers up to [`MAX_STORE_BUFFERS`] in what they
/// leave.
///
/// `least`: the buffers the epilogue needs at least (the row store's 64 rows of D, and of
/// aux, where it applies; [`STORE_BUFFERS`] else), taken before the stages.
fn fit_stages(
    forced: Option<i64>,
    stage: i64,
    room: i64,
    budget: i64,
    least: i64,
    scratch_bytes: impl Fn(i64) -> i64,
) -> Result<(i64, i64)> {
    let op = "Sm90Plan::new";
    let fit = (room - scratch_bytes(least)) / stage;
    let stages = forced.unwrap_or_else(|| policy::hopper_stages(fit).value);
    if stages < 2 || stages > fit {
        return Err(KernelError::UnsupportedArch {
            op,
            arch: Arch::Sm90a.to_string(),
            msg: format!("{stages} stages of {stage} B: between 2 and {fit} fit in {budget} B"),
        });
    }
    // More store buffers in what the stages leave (never fewer stages for them).
    let mut buffers = least;
    while buffers < MAX_STORE_BUFFERS && stages * stage + scratch_bytes(buffers + 1) <= room {
        buffers += 1;
    }
    Ok((stages, buffers))
}

/// Whether a plan left to the planner takes the ping-pong schedule: no choice of
/// [`Sm90Options`] forced (tree epilogues ask for their schedule:
/// [`crate::epilogue::cuda::tree_sm90_plan`]) and [`policy::hopper_pingpong`]'s rule.
fn auto_pingpong(p: &GemmProblem, opts: &Sm90Options) -> bool {
    opts.tile.is_none()
        && opts.stages.is_none()
        && opts.group_m.is_none()
        && opts.cluster.is_none()
        && opts.share.is_none()
        && opts.stream_k.is_none()
        && opts.tma_store != Some(false)
        && opts.epilogue_inputs.is_none()
        && opts.epilogue_vectors == (false, false)
        && policy::hopper_pingpong(p).value
}

impl fmt::Display for Sm90Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (bm, bn, bk) = self.cta_tile;
        let (tm, tn) = self.grid_tiles();
        writeln!(f, "GEMM plan {} (Hopper path)", self.kernel_name())?;
        writeln!(f, "  problem      {}", self.problem)?;
        if self.problem.d_major == Major::Col {
            writeln!(
                f,
                "  runs as      {} (D column-major: Dᵀ = Bᵀ Aᵀ, A and B exchanged)",
                self.kernel_problem()
            )?;
        }
        writeln!(f, "  target       sm_90a")?;
        writeln!(
            f,
            "  CTA tile     {bm}x{bn}x{bk}, {tm}x{tn}x{} tiles, {}, raster groups of {} {}",
            self.problem.batch,
            if self.cluster > 1 {
                "persistent clusters (min(cluster tiles, clusters resident at once))"
            } else {
                "persistent CTAs (min(tiles, SMs))"
            },
            self.group_m,
            if self.cluster > 1 {
                "cluster-tile rows"
            } else {
                "tile-rows"
            }
        )?;
        writeln!(
            f,
            "  warpgroups   1 producer (setmaxnreg.dec {PRODUCER_REGS}, {}) + {} consumers (setmaxnreg.inc {CONSUMER_REGS}, {:?}), {} threads",
            if self.cp_async_ab {
                "every thread copies A and B by cp.async"
            } else {
                "one thread issues TMA"
            },
            self.consumers,
            self.schedule,
            self.threads
        )?;
        writeln!(
            f,
            "  MMA          wgmma.mma_async m{}n{}k{}.f32.{ty}.{ty}, {} per stage per consumer",
            self.wgmma.0,
            self.wgmma.1,
            self.wgmma.2,
            bk / self.wgmma.2 * self.m_halves,
            ty = if self.problem.input == DType::Bf16 {
                "bf16"
            } else {
                "f16"
            },
        )?;
        writeln!(
            f,
            "  accumulator  (thread,reg) -> row + 64 col: {}",
            self.acc
        )?;
        match self.share {
            None => writeln!(f, "  cluster      1 CTA (no multicast)")?,
            Some(s) => {
                let (cm, cn) = self.cluster_grid_tiles();
                writeln!(
                    f,
                    "  cluster      {} CTAs along {} (__cluster_dims__({},1,1)) sharing {s} by TMA multicast, {cm}x{cn}x{} cluster tiles; empty barriers wait for the consumers of both CTAs",
                    self.cluster,
                    if s == ClusterShare::A { "N" } else { "M" },
                    self.cluster,
                    self.problem.batch
                )?;
            }
        }
        for o in [&self.a, &self.b] {
            if let (Some(wd), "A") = (&self.window, o.name) {
                let bm = self.cta_tile.0;
                writeln!(
                    f,
                    "  A tile       {bm}x{bk} by the window load: {} strips of {} 16-byte chunks ({} B apart, no swizzle) a stage, {} B loaded",
                    wd.strips(),
                    wd.strip_rows(bm),
                    wd.strip_bytes(bm),
                    wd.load_bytes(bm)
                )?;
                writeln!(
                    f,
                    "    wgmma desc (row, k-chunk j of step i) at 16 row + start(i) + j LBO(i), SBO 128 B, no swizzle: {}",
                    wd.describe_steps(bm)
                )?;
                continue;
            }
            if let (Some((h, g)), "A") = (self.halo(), o.name) {
                writeln!(
                    f,
                    "  A tile       by the halo load: {}; {} B a stage, its {} taps beside {} B k-tiles each; the {} swizzle as TMA writes it, each tap's descriptor starting at its row",
                    h.describe(&g),
                    self.a_stage_bytes(),
                    g.rs.1,
                    self.b.tma.bytes,
                    o.tma.swizzle
                )?;
                continue;
            }
            writeln!(
                f,
                "  {} tile       {}x{bk} K-major, smem {} (atom {})",
                o.name, o.tile_mn, o.smem, o.smem.atom
            )?;
            writeln!(f, "    TMA        {}", o.tma)?;
            if let Some(m) = &o.multicast {
                writeln!(
                    f,
                    "    multicast  {m}, part r loaded by CTA r of the pair (mask 0b11)"
                )?;
            }
            writeln!(f, "    wgmma desc {}", o.desc)?;
            writeln!(f, "    swizzle    {}", o.swizzle)?;
        }
        match &self.store {
            Some(st) => {
                writeln!(f, "  D store      TMA from smem: {st}")?;
                writeln!(f, "    swizzle    {}", st.swizzle)?;
                if self.row_store() {
                    let n = self.kernel_problem().n;
                    writeln!(
                        f,
                        "    rows       N = {n} in one tile, rows of {} B off TMA's 16-byte grid: where D's rows are contiguous, each warp packs its 16 rows ({} B, a run on 16 bytes) into the buffers and copies them out in bulk; else the fp32 scratch",
                        2 * n,
                        32 * n
                    )?;
                }
            }
            None => writeln!(
                f,
                "  D store      from registers through the fp32 scratch (st.global)"
            )?,
        }
        if self.staged_inputs > 0 || self.vector_stage != (0, 0) {
            writeln!(
                f,
                "  tree stage   {} input(s) by TMA, {}; bias vectors per tile: {} rows, {} columns (fp32, 2 buffers per consumer)",
                self.staged_inputs,
                if self.staged_in_store {
                    "into the store buffers".to_string()
                } else {
                    format!("{IN_BUFFERS} buffers per consumer")
                },
                self.vector_stage.0,
                self.vector_stage.1
            )?;
        }
        if self.staged_in_store {
            writeln!(
                f,
                "  staged in    the store buffers: pass q of a tile into the buffer it stores D from, during the tile's mainloop (no buffers of its own)"
            )?;
        }
        if self.bias_in_acc {
            writeln!(
                f,
                "  bias         bias_col starts the accumulators: each consumer thread loads the column biases of its {} accumulators once and sets them to those before every tile; the tree runs without it",
                self.cta_tile.1 / 2
            )?;
        }
        if self.stream_k {
            let which = if !self.stream_k_forced() {
                format!(
                    "a partial wave leaving at least {} k-tiles a CTA idle (or, memory-bound, at most half the SMs busy; with the wave before it where its tiles would take 8 parts or more)",
                    self.stream_k_min_idle
                )
            } else {
                "every partial wave".to_string()
            };
            writeln!(
                f,
                "  stream-K     {which} split along K over all CTAs, or a single wave over a whole number of parts a tile (fp32 parts through an L2 workspace; at least {STREAM_K_MIN_SHARE} k-tiles a CTA)"
            )?;
            // What that means on an H100 SXM, whose kernels are compiled without the parts'
            // code when they split nothing (compiled_for).
            let sms = crate::arch::H100_SMS;
            let (grid, total) = (self.persistent_ctas(sms, None), self.total_tiles());
            let split = self.stream_k_tiles(grid, sms);
            if split > 0 && total < grid {
                let by_part = self.sk_parts(grid, total) > 0;
                writeln!(
                    f,
                    "               on {sms} SMs: all {total} tiles in parts over {grid} CTAs, numbered {} ({})",
                    if by_part { "part by part" } else { "tile by tile" },
                    part_order(&self.kernel_problem(), self.cta_tile.1).why
                )?;
            } else if split > 0 {
                writeln!(
                    f,
                    "               on {sms} SMs: the last {split} of {total} tiles in parts, {:.1} k-tiles a CTA{}",
                    (split * self.k_tiles()) as f64 / grid as f64,
                    if split > grid {
                        " (the last wave and the one before it: at most two parts a tile)"
                    } else {
                        ""
                    }
                )?;
            } else {
                writeln!(
                    f,
                    "               on {sms} SMs: {total} tiles, none split{}",
                    if self.compiled_for(sms).stream_k {
                        ""
                    } else {
                        " (compiled without the parts' code)"
                    }
                )?;
            }
        }
        writeln!(
            f,
            "  pipeline     {} stages x {} B, full/empty mbarrier pairs; smem {} B",
            self.stages,
            self.a_stage_bytes()
                + if self.b_panel {
                    0
                } else {
                    halo_taps(self.im2col.as_ref()) * self.b.tma.bytes
                },
            self.smem_bytes
        )?;
        if self.b_panel {
            writeln!(
                f,
                "  B panel      {} k-tiles x {} B beside the ring (A only): the filter, loaded with the CTA's first tile and kept",
                self.k_tiles(),
                self.b.tma.bytes
            )?;
        }
        Ok(())
    }
}

/// The GEMM path a problem takes on a target.
#[derive(Clone, Debug, PartialEq)]
pub enum GemmPath {
    /// The sm_90a path (TMA + wgmma).
    Hopper(Box<Sm90Plan>),
    /// The sm80-class path (cp.async + mma.sync).
    Sm80(Box<crate::plan::GemmPlan>),
}

/// How to pick the kernel path of a problem: [`choose_path`]'s choice with the Hopper
/// planner's `sm90` options, or the sm80-class path when `force_sm80` (to run or compare that
/// path on a Hopper device).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathOptions {
    /// Plan the sm80-class path even where the Hopper path is available.
    pub force_sm80: bool,
    /// The Hopper planner's forced choices, used when the Hopper path is taken.
    pub sm90: Sm90Options,
    /// The sm80-class planner's forced choices, used when that path is taken.
    pub sm80: crate::plan::PlanOptions,
    /// Compile a tree epilogue with the generated epilogue even where the flag-driven epilogue
    /// expresses it (`launch::tree::TreeFused`); for comparing the two.
    pub generated_epilogue: bool,
    /// Take the Hopper path even where K makes rows TMA cannot address: the launch stages A
    /// and B into padded rows first ([`crate::plan::gemm::Plan::staged_k`]).
    pub stage_k: bool,
    /// With `stage_k`, where the rows are staged for being off the 32-byte sector grid: only
    /// B is staged, A is read in place wherever its own rows are on TMA's 16-byte grid
    /// ([`crate::plan::policy::stage_off_sector_rows`]).
    pub stage_b_only: bool,
}

/// The plan of `problem` on the path `opts` asks for: [`choose_path`]'s choice planned with
/// `opts.sm90`, or the sm80-class plan when `opts.force_sm80`.
///
/// For 4096 x 4096 x 4096 on sm_90a: the Hopper plan with the default options, the sm80-class
/// plan with `force_sm80`, and with `sm90` forcing a ping-pong 128 x 128 tile, the Hopper plan
/// with that schedule.
pub fn plan_path(problem: &GemmProblem, arch: Arch, opts: PathOptions) -> Result<GemmPath> {
    let sm80 = || {
        crate::plan::GemmPlan::with_options(problem, arch, opts.sm80)
            .map(|p| GemmPath::Sm80(Box::new(p)))
    };
    if opts.force_sm80 {
        sm80()
    } else if Sm90Plan::supports(problem, arch)
        && (opts.stage_k || (problem.k * problem.input.bytes()) % 16 == 0)
    {
        Sm90Plan::with_options(problem, opts.sm90).map(|p| GemmPath::Hopper(Box::new(p)))
    } else {
        sm80()
    }
}
