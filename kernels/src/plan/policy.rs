//! Every tuned rule of the GEMM planners, in one place: the CTA tile, the schedule, stream-K,
//! the pipeline depth, the raster group and the cluster, on both paths. Each rule is a function
//! that returns its choice with the reason ([`Decision`]); the planners ([`super::sm90`],
//! [`super::sm80`]) take the value, and [`super::Plan`]'s `Display` prints the reason.
//!
//! A rule says why in one line and, where it is a heuristic, what it was fitted on. The
//! figures behind the fits are in `docs/design/` (009 the schedule, 002 stream-K, 010 the
//! cluster); `docs/design/012-planner-rules.md` lists every rule with its domain, and predicts
//! per class of shapes of the sweep (`tessera bench gemm --sweep`) where the rules lose.
//!
//! The rules see the product the kernel runs: row-major D (a column-major D is planned as
//! `Dᵀ = Bᵀ Aᵀ`), so "M" below is that product's rows.

use crate::arch::H100_SMS;
use crate::plan::problem::{Activation, BiasMode, GemmProblem};

/// K extent of one Hopper k-tile (the kernel's, not tuned: one 128-byte swizzled row of
/// 16-bit elements).
const BK: i64 = super::sm90::BK;

/// A planner's choice and why it was made.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision<T> {
    /// The choice.
    pub value: T,
    /// Why, in one line.
    pub why: String,
}

impl<T> Decision<T> {
    fn new(value: T, why: impl Into<String>) -> Decision<T> {
        Decision {
            value,
            why: why.into(),
        }
    }
}

/// A stream-K part must hold at least this many k-tiles on average per CTA: a part costs a
/// pipeline start and the partial sums' round trip through L2.
pub const STREAM_K_MIN_SHARE: i64 = 4;

/// A single wave split in whole parts a tile keeps at least this many k-tiles in a part for
/// each partial sum its tile's last part adds in: `k_tiles / parts >= STREAM_K_FIXUP_SHARE *
/// (parts - 1)`. The last part reads the others' fp32 partial tiles back one after another
/// (each about the bytes of a k-tile's operands), outside the pipelined mainloop, so with many
/// short parts the fix-up outlasts the parts. Fitted on five decode shapes with forced grids
/// (H100; the figures in design 012, "Parts and their fix-up").
pub const STREAM_K_FIXUP_SHARE: i64 = 4;

/// Stream-K splits a partial wave only when it would otherwise leave at least this many
/// k-tiles a CTA idle on average (`(grid - r) k_tiles / grid`, `r` tiles in the wave): the
/// parts cost a CTA about the same whatever the shape, so what decides is the idle time won
/// back. Fitted to `bench gemm` on the H100 on the multi-wave standard shapes, M and N
/// multiples of 256 (docs/design/002-stream-k-unit-order.md).
pub const STREAM_K_MIN_IDLE: i64 = 32;

/// The plain GEMM takes the ping-pong schedule up to this many k-tiles (K = 4096): its
/// epilogue runs under the other warpgroup's mainloop, worth more than the cooperative 128 x
/// 256 tile's faster mainloop while tiles are short. Fitted to `bench gemm` on the H100 on the
/// six K = 4096 standard shapes against K = 8192 and 11008
/// (docs/design/009-schedule-choice.md).
pub const PINGPONG_MAX_K_TILES: i64 = 64;

/// The Hopper plan takes as many pipeline stages as fit beside the epilogue, at most this
/// many: six stages of 128 x 128 x 64 keep 192 KB of loads in flight, past what one SM's TMA
/// traffic needs to cover the L2 latency (not tuned further; the 128 x 256 tile fits four).
pub const HOPPER_MAX_STAGES: i64 = 6;

/// The fewest stages of A the ring keeps beside a convolution's B panel
/// ([`crate::plan::Sm90Plan::b_panel`]); with fewer the panel is not taken. (A judgement: four
/// stages keep three loads in flight while the consumers read one.)
pub const PANEL_MIN_STAGES: i64 = 4;

/// The fewest stages the ring keeps beside the row store's buffers (64 rows of D, and of aux,
/// per consumer: [`crate::plan::Sm90Plan::row_store`]); with fewer the plan has no row store
/// and such a D leaves through the fp32 scratch. (The same judgement as [`PANEL_MIN_STAGES`].)
pub const ROW_STORE_MIN_STAGES: i64 = 4;

/// The sm80-class plan's most stages: three 128 x 256 x 64 stages (144 KB). Four (192 KB, which
/// the H100 holds) ran alike at 4096³ and 8192³ (design 025), and three fit the 164 KB of an
/// sm_80 SM.
pub const SM80_MAX_STAGES: i64 = 3;

/// Tile rows per group of the persistent tile order on both paths: a group is walked column
/// by column, so the 132 tiles running at once share about 8 A tile rows and 17 B tile
/// columns in L2 rather than 1 and 132. Triton's and CUTLASS's customary value; not tuned
/// here (`--group-m` to try others).
pub const GROUP_M: i64 = 8;

/// What one unit of work (128 x 128 x 64) costs a cooperative 128 x 128 tile relative to the
/// 128 x 256 tile, for the wave-quantization choice between them ([`hopper_tile`]): the
/// smaller tile issues half-width wgmma, loads a third more bytes per flop and pays the
/// per-tile costs (pipeline start, epilogue, tile decode) over half the work. Not measured: a
/// margin above the difference measured between the two schedules' mainloops, so that the
/// rule flips only where the quantization loss is larger than any per-tile difference seen
/// (docs/design/012-planner-rules.md).
pub const TILE_128X128_COST: f64 = 1.10;

/// The most stream-K parts a tile for which [`hopper_tile`] keeps 128 x 256 on a long-K
/// single wave: past it, the fix-up of the wider tile's partial sums costs more than its
/// fewer bytes a flop save. Fitted on four long-K shapes, H100 and H200 (design 012, "The
/// long-K tile").
pub const LONG_K_MAX_PARTS: i64 = 4;

/// The k-tiles under which the parts of a single wave of 128 x 128 tiles split by stream-K
/// are short enough that [`hopper_tile`] takes 64 x 128 tiles instead, where those run whole
/// in one wave: a part pays a pipeline fill and (the tile's last) a fix-up whatever its
/// length, while the smaller tile's cost (twice the operand bytes a flop of MMA) grows with
/// the work. Fitted on four shapes (H100, 2026-11-27, design 012): parts of 32, 36 and 40
/// k-tiles ran 14-38% faster as whole 64 x 128 tiles, parts of 112 k-tiles 6-10% slower;
/// checked afterwards on two more shapes with parts of 48 (+3-47%).
pub const SHORT_PART_K_TILES: i64 = 64;

/// The fewest k-tiles for [`hopper_tile`] to take 64 x 128 tiles over a single wave of whole
/// 128 x 128 tiles on at most half the SMs: the smaller tiles keep twice the SMs at work, each
/// on half the MMA work, but each still pays a tile's fixed costs (the pipeline's fill, the
/// epilogue), which a short mainloop does not outweigh. Fitted on six shapes (H100,
/// 2026-11-27, design 012, "Half-empty waves"): 20 to 48 k-tiles ran 13-43% faster as 64 x
/// 128 tiles, 16 k-tiles 16% slower (1000³) or within the spread (1024³); checked on five
/// more, four of them 25-38% faster. The fifth (K = 2200) read its operands' rows off the
/// 32-byte sector grid in place and ran 11% slower: there the loads bound the mainloop and the
/// smaller tile reads half as many bytes again a flop, so the rule asks for rows on the grid.
pub const HALF_WAVE_MIN_K_TILES: i64 = 20;

/// The fewest k-tiles a stream-K part of a 128 x 256 tile must have for [`hopper_tile`] to
/// keep that tile on a long-K single wave: a part's fix-up reads back the tile's other
/// partial sums (128 KB each, a few k-tiles' time), which stays under about a tenth of a part
/// this long. An estimate from the per-SM L2 read rate, not fitted.
pub const LONG_K_MIN_PART: i64 = 64;

/// Bytes per second the H100's HBM3 moves in a device-to-device copy (about 3.0 TB/s of the
/// 3.35 TB/s peak): the roofline of a GEMM bound by reading its operands.
pub const COPY_ROOFLINE_BYTES_PER_S: f64 = 3.0e12;

/// FLOPs per byte above which an H100 GEMM is compute-bound: the sustained tensor rate
/// (about 700 TFLOP/s under the power limit, perf.md) over [`COPY_ROOFLINE_BYTES_PER_S`].
pub const RIDGE_FLOP_PER_BYTE: f64 = SUSTAINED_FLOP_PER_S / COPY_ROOFLINE_BYTES_PER_S;

/// FLOPs per second a compute-bound H100 GEMM sustains under the power limit (perf.md).
pub const SUSTAINED_FLOP_PER_S: f64 = 700e12;

/// A memory-bound single wave is split along K when it keeps at most this fraction of the
/// SMs busy: fewer busy SMs than about this cannot read the operands at the device's rate.
/// Estimated from one measurement of a decode shape on 32 busy SMs
/// (docs/design/012-planner-rules.md).
pub const MEMORY_BOUND_BUSY_FRACTION: f64 = 0.5;

/// FLOPs per byte of DRAM traffic of `p` when each operand crosses once: `2 M N K` over the
/// bytes of A, B and D.
pub fn intensity(p: &GemmProblem) -> f64 {
    let (m, n, k) = (p.m as f64, p.n as f64, p.k as f64);
    let bytes = p.input.bytes() as f64 * (m * k + n * k) + p.output.bytes() as f64 * m * n;
    2.0 * m * n * k / bytes
}

/// How much longer a compute-bound Hopper GEMM runs when B's rows start off the 32-byte
/// sector grid (K of 16-bit elements an odd multiple of 8: every 128-byte k-tile row spans
/// five sectors instead of four) and B is read in place, against B copied into aligned rows
/// first, with A read in place either way. A read in place costs little: with only B staged
/// the GEMM ran at 0.91-0.97 of cuBLAS on 4093 x 4104 x 4104 and 8192 x 2048 x 4104, and both
/// read in place ran 1.75 times as long as aligned rows. Fitted on six shapes (H100,
/// 2026-11-27, design 013, "B staged, A in place"): B in place cost 10-54%, median 30%.
pub const OFF_SECTOR_B_SLOWDOWN: f64 = 0.3;

/// How much longer a compute-bound Hopper GEMM runs when the rows of both A and B start off
/// the 32-byte sector grid and are read in place, against rows on the grid: fitted on K =
/// 4104 against 4096 and 4112 (H100, design 013, "Rows off the sector grid"). Where the tile
/// is not wide enough for A to be read in place ([`stage_off_sector_rows`]), the copy of both
/// is weighed against it.
pub const OFF_SECTOR_SLOWDOWN: f64 = 0.75;

/// The most k-tiles for which a GEMM whose K-major rows of A and B are off the 32-byte sector
/// grid loads them by cp.async from every producer thread ([`cp_async_off_sector_rows`])
/// rather than by TMA, staged or in place. Fitted on fourteen shapes (H100, 2026-11-27, design
/// 013, "The cp.async load"): with 3 to 6 k-tiles the cp.async load ran 11-20% faster than the
/// staged copy and TMA; from 12 k-tiles on it ran 5-26% slower than either (the copy pays for
/// itself over a long mainloop, and TMA in place loses less than the cp.async producer).
pub const CP_ASYNC_MAX_K_TILES: i64 = 8;

/// Whether a GEMM whose K-major rows of A and B are 16-byte but not 32-byte multiples loads
/// them by cp.async: at most [`CP_ASYNC_MAX_K_TILES`] k-tiles, where a separate copy of A and
/// B costs a large share of a short GEMM.
pub fn cp_async_off_sector_rows(p: &GemmProblem) -> Decision<bool> {
    let k_tiles = ceil_div(p.k, BK);
    let row = p.k * p.input.bytes();
    if k_tiles <= CP_ASYNC_MAX_K_TILES {
        Decision::new(
            true,
            format!("rows of {row} bytes are off the 32-byte sector grid and {k_tiles} k-tiles (<= {CP_ASYNC_MAX_K_TILES}) too few to pay for a copy: every producer thread loads A and B by cp.async, 16 bytes at a time"),
        )
    } else {
        Decision::new(
            false,
            format!("{k_tiles} k-tiles (> {CP_ASYNC_MAX_K_TILES}): TMA, staged or in place"),
        )
    }
}

/// Which operands a GEMM whose K-major rows of A and B are 16-byte but not 32-byte multiples
/// copies first into rows of whole 128-byte k-tiles (as rows TMA cannot address are,
/// [`crate::plan::gemm::Plan::staged_k`]), on a `BM x BN` tile: `Some(true)` B alone
/// ([`crate::plan::gemm::Plan::stages_b_only`]), `Some(false)` both, `None` neither.
///
/// What an operand read in place off the grid costs follows from how much of it the tile
/// loads per MMA flop: a `BM x BN` tile loads BM rows of A and BN rows of B a k-tile for BM
/// x BN outputs, one row of A per BN output columns and one of B per BM output rows. Where
/// BN is 256 (a row of A per 256 outputs, half of what a 128 x 128 tile loads of either
/// operand) A read in place lost little (0.91-0.97 of cuBLAS with B alone staged on two
/// shapes, 128 x 256), so B alone is weighed: its copy, a read and a write at
/// [`COPY_ROOFLINE_BYTES_PER_S`], against [`OFF_SECTOR_B_SLOWDOWN`] of the GEMM at the
/// sustained 700 TFLOP/s (the copy then pays where M exceeds about 1,560, whatever N and K). On narrower tiles (128 x 128 measured:
/// either operand in place cost 12-28% against both staged) both are weighed, their copy
/// against [`OFF_SECTOR_SLOWDOWN`]. Memory-bound problems never pay: the copy moves twice the
/// bytes the GEMM reads of the operands copied.
pub fn stage_off_sector_rows(p: &GemmProblem, (bm, bn): (i64, i64)) -> Decision<Option<bool>> {
    let (m, n, k, b) = (p.m as f64, p.n as f64, p.k as f64, p.batch as f64);
    // (BM is at most 128: B's share is never below a 128 x 128 tile's.)
    let wide = bn >= 2 * 128;
    let (rows, share, what) = if wide {
        (n, OFF_SECTOR_B_SLOWDOWN, "B")
    } else {
        (m + n, OFF_SECTOR_SLOWDOWN, "A and B")
    };
    let copy = 2.0 * rows * k * b * p.input.bytes() as f64 / COPY_ROOFLINE_BYTES_PER_S;
    let gemm = 2.0 * m * n * k * b / SUSTAINED_FLOP_PER_S;
    let row = p.k * p.input.bytes();
    let pays = copy < share * gemm;
    let tile = if wide {
        format!("the {bm} x {bn} tile loads a row of A per {bn} outputs, so A read in place loses little and B much more")
    } else {
        format!("the {bm} x {bn} tile loads a row of A per {bn} outputs and of B per {bm}, so either read in place loses")
    };
    Decision::new(
        pays.then_some(wide),
        format!(
            "rows of {row} bytes are off the 32-byte sector grid (each 128-byte load spans 5 sectors); {tile}: copying {what} takes ~{:.1} us, {} {share} of the GEMM's ~{:.1} us",
            copy * 1e6,
            if pays { "under" } else { "not under" },
            gemm * 1e6
        ),
    )
}

/// Whether `p` is bound by memory traffic on an H100 ([`RIDGE_FLOP_PER_BYTE`]).
pub fn memory_bound(p: &GemmProblem) -> bool {
    intensity(p) < RIDGE_FLOP_PER_BYTE
}

/// The bytes `p` moves at least (each operand once, every batch): what the GB/s of a
/// memory-bound row is counted on.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn min_bytes(p: &GemmProblem) -> f64 {
    let (m, n, k) = (p.m as f64, p.n as f64, p.k as f64);
    (p.input.bytes() as f64 * (m * k + n * k) + p.output.bytes() as f64 * m * n) * p.batch as f64
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// Tiles of a `bm x bn` tile over `p`, batches included.
fn tiles(p: &GemmProblem, bm: i64, bn: i64) -> i64 {
    ceil_div(p.m, bm) * ceil_div(p.n, bn) * p.batch
}

/// The tile widths between 128 and 256 (the epilogue's 32-column grid) from which
/// [`hopper_tile`] takes the narrowest whose 128-row tiles fit one wave, where 128 x 256 tiles
/// are fewer than the SMs and 128 x 128 tiles more. Fitted on the H100 (design 012, "One wave
/// of a width between"): with the widths forced on six shapes of one to 1.3 waves of 128 x
/// 128 tiles, the narrowest one-wave width was the fastest on every one and the wider
/// one-wave widths slower; the rule against the build before on ten shapes of no list, nine
/// 1-66% faster (1041 x 2064 x 8928 0.58 -> 0.71 of cuBLAS, 2000 x 1200 x 6000 0.64 -> 0.99-1.05)
/// and 768 x 3072 x 8192 within 1%.
pub const ONE_WAVE_WIDTHS: [i64; 3] = [160, 192, 224];

/// The fewest exact-width tiles ([`exact_width`]) the planner takes for N above 128: the
/// fewest the rule was measured on (design 020); below it stream-K's splits decide more than
/// the width, and the other rules stay.
pub const EXACT_WIDTH_MIN_TILES: i64 = 16;

/// The width of equal tile columns that hold `n` in the fewest columns (one per 256, as the
/// widest tile does), each on the epilogue's 32-column grid: `W = ⌈N / c⌉` rounded up to 32
/// with `c = ⌈N / 256⌉`; `Some(W)` where that is narrower than 256 and not 128, i.e. where N
/// is not a multiple of 128 and the standard tiles would leave part of a column empty: 96 for
/// N in 65..=96, 160 to 224 for N in 129..=224, then 160 to 224 for N in 257..=448 (two
/// columns, e.g. 160 for 288 and 320), and so on; `None` for N <= 64 (64- and 32-wide tiles),
/// for N in 97..=128 and for N where the balanced width is 256 anyway (N > 1568 always: from
/// there 256-wide columns pad less than 32 a column).
pub fn exact_width(n: i64) -> Option<i64> {
    if n <= 64 || n % 128 == 0 {
        return None;
    }
    let w = ceil_div(ceil_div(n, ceil_div(n, 256)), 32) * 32;
    (w != 128 && w != 256).then_some(w)
}

/// The Hopper plan's CTA tile `(BM, BN)` when none is forced (the cooperative schedule's;
/// ping-pong takes 128 x 128, [`hopper_pingpong`]):
/// - M <= 64: 64 x 128 (64 x 64 where N <= 64 too), one consumer warpgroup whose 64 rows
///   hold all of M (a 128-row tile would compute at least half zeros);
/// - N <= 64: 128 x 64 (128 x 32 for N <= 32), the same tiles as any wider BN, whose columns
///   past N the MMAs would compute and the epilogue walk for nothing (a convolution with 64
///   output channels, a projection to a few classes). The 32-wide tile's k16 step reads A's
///   2 KB for half the MMA work, so it runs at about two thirds of the tensor cores' rate
///   (bound by shared memory), which still beats computing zeros (design 020);
/// - N that the standard tiles would leave part of a column empty ([`exact_width`]: N not a
///   multiple of 128, balanced columns narrower than 256): 128 x W, the fewest columns of
///   equal width W on the 32-column grid (96 for N = 96, 160 for N = 160, 288 and 320, 224
///   for N = 448): for N > 128 with at least [`EXACT_WIDTH_MIN_TILES`] such tiles unless the
///   GEMM is compute-bound and its 128 x 128 tiles fit one wave, for N <= 96 with at least
///   half the SMs' worth (otherwise the rules below put more CTAs to work); and only where
///   the rows of A and B lie on the 32-byte sector grid ([`stage_off_sector_rows`] was fitted
///   on 128- and 256-wide tiles).
///   The MMA work a tile does is in proportion to its width, so the standard columns would
///   compute up to 127 columns past N (a 128 x 128 pair for N = 160 does 1.6 times the
///   work), and every column reads A again, which for a narrow D is most of the bytes (N =
///   320 in three 128-wide columns reads A three times, in two of 160 twice). The bounds are
///   where the measurements (docs/design/020-exact-width-tiles.md) found the other tiles
///   faster;
/// - fewer 128 x 256 tiles than SMs, compute-bound, stream-K splitting each in 2 to
///   [`LONG_K_MAX_PARTS`] whole parts ([`single_wave_grid`]) of at least
///   [`LONG_K_MIN_PART`] k-tiles (long K against a small D), and
///   N filling 256-wide tiles as fully as 128-wide ones: 128 x 256, since the split fills the
///   SMs with either tile and the wider one reads three quarters of the bytes a flop; with
///   more parts the fix-up of its larger partial sums, and with parts cut across tiles (over
///   half the SMs' tiles) the lost L2 sharing, measured slower;
/// - fewer 128 x 256 tiles than SMs otherwise: 128 x 128, twice the CTAs at work, or, where the
///   problem is memory-bound ([`memory_bound`]), 64 x 128 where its waves are fuller (its
///   tiles fill a larger share of their waves' CTA slots; a tie keeps the larger tile) and
///   stream-K would leave them whole or split them in a whole number of parts a tile (at most
///   half the SMs' tiles, [`single_wave_grid`]): such a GEMM is bound by reading B, each CTA
///   streams its share at a bounded rate, and more CTAs in flight read faster; where stream-K
///   would cut the smaller tiles across tiles, the smaller tile measured slower. Fitted on
///   eleven shapes with M = 96-256, N = 2048-8192 and K = 2048-13824 (H100, 2026-11-26, and
///   H200, 2026-11-27; design 012);
/// - fewer 128 x 256 tiles than SMs, stream-K splitting every 128 x 128 tile along K in
///   parts shorter than [`SHORT_PART_K_TILES`], and the 64 x 128 tiles running whole in one
///   wave: 64 x 128, about as many SMs at work without the split's second pipeline fill and
///   fix-up (fitted on four shapes, see the constant);
/// - fewer 128 x 256 tiles than SMs but more 128 x 128 tiles, compute-bound, rows of A and B
///   on the sector grid: 128 x W for the narrowest W of [`ONE_WAVE_WIDTHS`] whose tiles fit
///   one wave, every SM's work one whole tile of about W / 128 units, against 128 x 128's
///   more than one wave (a stream-K tail or a second wave) and 128 x 256's single wave on
///   fewer SMs doing more each;
/// - fewer 128 x 256 tiles than SMs but more 128 x 128 tiles, and stream-K leaving the 128 x
///   256 wave whole: 128 x 256, one wave against two (the second partial) at
///   [`TILE_128X128_COST`] a 128 x 128 unit (measured on six shapes, design 012, "One wide
///   wave");
/// - fewer 128 x 256 tiles than SMs, the 128 x 128 tiles whole in a single wave on at most
///   half the SMs, the 64 x 128 tiles whole in one wave, at least [`HALF_WAVE_MIN_K_TILES`]
///   k-tiles and rows of A and B (K-major) on the 32-byte sector grid: 64 x 128, twice the
///   SMs at work (fitted on six shapes, see the constant);
/// - else 128 x 256, the faster mainloop, unless its waves quantize so badly that 128 x 128's
///   waves, at [`TILE_128X128_COST`] a unit of work, take less time, and stream-K would not
///   split 128 x 256's last wave anyway.
///
/// The grid is counted on an H100 SXM's 132 SMs (the plan is made before the device is known;
/// [`super::Sm90Plan::compiled_for`] fits stream-K to the device).
///
/// `whole_only`: the kernel runs whole tiles only (the implicit GEMM's im2col load, or
/// stream-K forced off), so no stream-K split is counted on and a wave of 128 x 256 tiles that
/// quantizes badly is weighed against 128 x 128 whatever K is.
pub fn hopper_tile(p: &GemmProblem, whole_only: bool) -> Decision<(i64, i64)> {
    let sms = H100_SMS;
    if p.m <= 64 {
        let bn = if p.n <= 64 { 64 } else { 128 };
        return Decision::new(
            (64, bn),
            format!(
                "M = {} <= 64: one consumer's 64 rows hold all of M; BN {bn} gives {} tiles",
                p.m,
                tiles(p, 64, bn)
            ),
        );
    }
    if p.n <= 64 {
        // (The epilogue's passes are 32 columns: no narrower tile.)
        let bn = if p.n <= 32 { 32 } else { 64 };
        return Decision::new(
            (128, bn),
            format!(
                "N = {} <= {bn}: {bn} columns hold all of N in {} tiles; a wider tile, in as many, would compute zeros past N",
                p.n,
                tiles(p, 128, bn)
            ),
        );
    }
    if let Some(w) = exact_width(p.n) {
        let t = tiles(p, 128, w);
        // Past 128 the standard widths take more columns, each reading A again, and W
        // measured faster from EXACT_WIDTH_MIN_TILES tiles, except where the GEMM is
        // compute-bound and the 128-wide tiles, more of them, still fit one wave: there they
        // put more SMs to work in the same single wave. Up to 96 a 128-wide column reads A
        // once too, and W saves only its padding, which outweighs twice the CTAs of 64-row
        // tiles only where W's tiles fill half the SMs.
        // (And only where A's and B's rows lie on the 32-byte sector grid: off it, which
        // operands are copied first was fitted on 128- and 256-wide tiles, design 013.)
        let one_wave_128 = !memory_bound(p) && tiles(p, 128, 128) <= sms;
        let on_sectors = (p.k * p.input.bytes()) % 32 == 0;
        if on_sectors
            && ((p.n > 128 && t >= EXACT_WIDTH_MIN_TILES && !one_wave_128)
                || (p.n <= 96 && 2 * t >= sms))
        {
            let cols = ceil_div(p.n, w);
            return Decision::new(
                (128, w),
                format!(
                    "N = {} leaves part of a 128- or 256-wide column empty: {cols} column(s) of {w} (the fewest, of equal width on the 32-column grid) compute {} columns past N and read A {cols} time(s), in {t} tiles (128-wide: {} columns past N, A read {} times; 256-wide: {}, {})",
                    p.n,
                    cols * w - p.n,
                    ceil_div(p.n, 128) * 128 - p.n,
                    ceil_div(p.n, 128),
                    ceil_div(p.n, 256) * 256 - p.n,
                    ceil_div(p.n, 256)
                ),
            );
        }
    }
    let (big, small) = (tiles(p, 128, 256), tiles(p, 128, 128));
    let waves = |t: i64| ceil_div(t, sms);
    if big < sms {
        // Fuller waves: the share of their waves' CTA slots the tiles fill, compared as
        // cross products (integers: a tie is exact).
        let rows64 = tiles(p, 64, 128);
        let fill = |t: i64| 100.0 * t as f64 / (waves(t) * sms) as f64;
        let k_tiles = ceil_div(p.k, BK);
        // Whether A's and B's rows (K-major) lie on the 32-byte sector grid.
        let rows_on_sectors = (p.k * p.input.bytes()) % 32 == 0;
        // Whole tiles, or a split in a whole number of parts a tile ([`single_wave_grid`]).
        let whole = whole_only
            || stream_k_split(rows64, sms, sms, k_tiles, STREAM_K_MIN_IDLE, true, false).value == 0
            || 2 * rows64 <= sms;
        if memory_bound(p) && whole && rows64 * waves(small) > small * waves(rows64) {
            return Decision::new(
                (64, 128),
                format!(
                    "{big} tiles of 128x256 are fewer than the {sms} SMs; 128x128 makes {small} ({:.0}% of their waves' CTAs), 64x128 {rows64} ({:.0}%), whole or in whole parts a tile: memory-bound, the fuller waves read B with more CTAs",
                    fill(small),
                    fill(rows64)
                ),
            );
        }
        // Long K: stream-K splits the wave along K whichever tile runs, so both fill the SMs,
        // and the wider tile reads three quarters of the operand bytes a flop. Only where its
        // split is in whole parts a tile (A and B shared in L2, single_wave_grid) and at most
        // 4 of them (each part's fix-up reads back the tile's other partial sums, 128 KB
        // each), and where N fills 256-wide tiles as fully as 128-wide ones.
        let split = !whole_only
            && stream_k_split(big, sms, sms, k_tiles, STREAM_K_MIN_IDLE, false, false).value > 0;
        let no_padding = 2 * ceil_div(p.n, 256) == ceil_div(p.n, 128);
        // (big < sms here, so at least one part a tile.)
        let parts = sms / big;
        if !memory_bound(p)
            && split
            && (2..=LONG_K_MAX_PARTS).contains(&parts)
            && k_tiles / parts >= LONG_K_MIN_PART
            && no_padding
        {
            return Decision::new(
                (128, 256),
                format!(
                    "{big} tiles of 128x256 are fewer than the {sms} SMs, and stream-K splits each in {parts} parts of {} k-tiles along K: the wider tile reads 3/4 the bytes a flop of 128x128",
                    k_tiles / parts
                ),
            );
        }
        // One wave either way: where stream-K would split every 128 x 128 tile while the
        // twice as many 64 x 128 tiles run whole in one wave, the smaller tile keeps about as
        // many SMs busy, each on one pipelined tile, without the split's costs (a second
        // pipeline fill a part, and the last part reading the others' fp32 partial tiles
        // back after its mainloop).
        let split_small = !whole_only
            && stream_k_split(small, sms, sms, k_tiles, STREAM_K_MIN_IDLE, false, false).value > 0;
        let whole_rows64 = rows64 <= sms
            && stream_k_split(rows64, sms, sms, k_tiles, STREAM_K_MIN_IDLE, false, false).value
                == 0;
        // Only where the parts are short: a part's fixed costs weigh against its length,
        // the smaller tile's (half the MMA work a byte of operands) against all of it. (The
        // parts counted as the SMs' share a tile; single_wave_grid may take fewer.)
        let part_small = k_tiles / (sms / small).max(1);
        if split_small && whole_rows64 && part_small < SHORT_PART_K_TILES {
            return Decision::new(
                (64, 128),
                format!(
                    "{big} tiles of 128x256 are fewer than the {sms} SMs; stream-K would split each of 128x128's {small} along K in parts of about {part_small} k-tiles (< {SHORT_PART_K_TILES}), while 64x128's {rows64} run whole in one wave: as many SMs at work without the split's fix-up"
                ),
            );
        }
        // A single wave of whole 128 x 128 tiles that leaves at least half the SMs idle:
        // the twice as many 64 x 128 tiles, whole in one wave too, put twice the SMs to work,
        // each on half the MMA work; where the mainloop outweighs a tile's fixed costs, and
        // where the operands' rows lie on the sector grid (else the loads bound the mainloop
        // and the smaller tile's extra bytes a flop cost more than its SMs gain).
        if !split_small
            && whole_rows64
            && 2 * small <= sms
            && k_tiles >= HALF_WAVE_MIN_K_TILES
            && rows_on_sectors
        {
            return Decision::new(
                (64, 128),
                format!(
                    "{big} tiles of 128x256 are fewer than the {sms} SMs; 128x128's {small} run whole on at most half of them, 64x128's {rows64} whole in one wave on twice as many, with {k_tiles} k-tiles (>= {HALF_WAVE_MIN_K_TILES}) a tile"
                ),
            );
        }
        // One wave of the narrowest tile between 128 and 256 wide (on the 32-column grid)
        // whose tiles fit it, where 128 x 128's take more than one: every SM's work is one
        // whole tile, about w / 128 units of 128 x 128 work, against 128 x 128's
        // small / sms units plus a stream-K tail (parts, fix-up) or a second wave, and
        // 128 x 256's single wave on fewer SMs, each doing 256 / w times the work. (Not with
        // rows off the sector grid: which operands are staged there was fitted on 128- and
        // 256-wide tiles, and forced widths measured mixed, design 012.)
        if small > sms && !memory_bound(p) && rows_on_sectors {
            if let Some(w) = ONE_WAVE_WIDTHS
                .into_iter()
                .find(|&w| tiles(p, 128, w) <= sms)
            {
                let t = tiles(p, 128, w);
                return Decision::new(
                    (128, w),
                    format!(
                        "{big} tiles of 128x256 are fewer than the {sms} SMs, 128x128's {small} more: 128x{w}, the narrowest width whose {t} tiles fit one wave ({:.0}% of the SMs, each a whole tile)",
                        fill(t)
                    ),
                );
            }
        }
        // One wave of 128 x 256 tiles against two of 128 x 128, the second partial: at
        // TILE_128X128_COST a 128 x 128 unit the one wide wave is the shorter, where stream-K
        // leaves it whole (a split wave of the wider tile is cut across tiles: long K).
        if small > sms && !split {
            return Decision::new(
                (128, 256),
                format!(
                    "{big} tiles of 128x256 fit one wave of the {sms} SMs, 128x128's {small} take {}: {:.2} against 2.00 units at {TILE_128X128_COST} a 128x128 unit",
                    waves(small),
                    TILE_128X128_COST * waves(small) as f64
                ),
            );
        }
        return Decision::new(
            (128, 128),
            format!("{big} tiles of 128x256 are fewer than the {sms} SMs: 128x128 makes {small}"),
        );
    }
    let k_tiles = ceil_div(p.k, BK);
    let (w_big, w_small) = (waves(big), waves(small));
    let split = !whole_only
        && stream_k_split(big, sms, sms, k_tiles, STREAM_K_MIN_IDLE, false, false).value > 0;
    let cost_big = 2.0 * w_big as f64;
    let cost_small = TILE_128X128_COST * w_small as f64;
    if !split && cost_small < cost_big {
        return Decision::new(
            (128, 128),
            format!(
                "wave quantization: {big} tiles of 128x256 take {w_big} waves of {sms} ({:.0}% full), {small} of 128x128 {w_small} ({:.0}%): {cost_small:.2} against {cost_big:.2} units at {TILE_128X128_COST} a 128x128 unit",
                100.0 * big as f64 / (w_big * sms) as f64,
                100.0 * small as f64 / (w_small * sms) as f64,
            ),
        );
    }
    Decision::new(
        (128, 256),
        format!(
            "{big} tiles of 128x256 fill the {sms} SMs ({:.1} waves{}): the faster mainloop",
            big as f64 / sms as f64,
            if split {
                ", the last split by stream-K"
            } else {
                ""
            }
        ),
    )
}

/// Whether a plain GEMM left entirely to the planner takes the ping-pong schedule (128 x 128,
/// one warpgroup's epilogue under the other's mainloop): with a 16-bit D and no bias,
/// activation, aux or C; with tiles enough for 128 x 256 to fill the SMs; from 2 to
/// [`PINGPONG_MAX_K_TILES`] k-tiles (one k-tile leaves no mainloop to hide an epilogue
/// under); and inside the domain the rule was fitted on, M and N
/// multiples of 128 and K of 64 (every tile whole): off it the cooperative schedule measured
/// faster (docs/design/012-planner-rules.md).
pub fn hopper_pingpong(p: &GemmProblem) -> Decision<bool> {
    let e = &p.epilogue;
    let k_tiles = ceil_div(p.k, BK);
    let big = tiles(p, 128, 256);
    let no = |why: String| Decision::new(false, why);
    if !(e.act == Activation::None && e.bias == BiasMode::None && !e.aux && e.beta == 0.0) {
        return no("a fused epilogue runs cooperative (under ping-pong it slowed the other warpgroup's mainloop, design 009)".into());
    }
    if p.output.bytes() != 2 {
        return no(format!("{} D (ping-pong was fitted on 16-bit D)", p.output));
    }
    if big < H100_SMS {
        return no(format!(
            "{big} tiles of 128x256 do not fill {H100_SMS} SMs (ping-pong was fitted on shapes that do)"
        ));
    }
    // Ping-pong hides one warpgroup's epilogue under the other's mainloop. A tile of one
    // k-tile has no mainloop to speak of (a single stage of MMAs against a whole tile's
    // stores), so there is nothing to hide under, and both warpgroups on one 128 x 256 tile
    // store it faster. Fitted on five shapes of K = 64; at two k-tiles and more the measurements
    // disagreed, so the rule stops at one (design 012, "One k-tile").
    if k_tiles == 1 {
        return no(format!(
            "K = {} is one k-tile: no mainloop for one warpgroup's epilogue to hide under, both warpgroups store a 128 x 256 tile faster (design 012)",
            p.k
        ));
    }
    if k_tiles > PINGPONG_MAX_K_TILES {
        return no(format!(
            "{k_tiles} k-tiles > {PINGPONG_MAX_K_TILES}: long tiles hide the cooperative epilogue (design 009)"
        ));
    }
    if p.m % 128 != 0 || p.n % 128 != 0 || p.k % BK != 0 {
        return no(format!(
            "{}x{}x{} has edge tiles (M, N not multiples of 128 or K of 64), outside the domain ping-pong was fitted on; there the cooperative 128x256 measured faster (design 012)",
            p.m, p.n, p.k
        ));
    }
    Decision::new(
        true,
        format!(
            "plain GEMM of {k_tiles} <= {PINGPONG_MAX_K_TILES} k-tiles, whole tiles: the epilogue hides under the other warpgroup's mainloop (design 009)"
        ),
    )
}

/// Whether a tree epilogue left to the planner takes the ping-pong schedule: when the plain
/// GEMM of the same problem does ([`hopper_pingpong`]) and the tree is light (no
/// transcendental, no reduction) or stores a full aux and sums nothing: those cost less over
/// the plain GEMM on ping-pong, a transcendental or a reduction more (measured on the six K =
/// 4096 standard shapes, docs/design/009-schedule-choice.md).
pub fn tree_pingpong(plain_pingpong: bool, light: bool, full_aux: bool) -> Decision<bool> {
    match (plain_pingpong, light || full_aux) {
        (false, _) => Decision::new(false, "the plain GEMM of this problem is cooperative"),
        (true, false) => Decision::new(
            false,
            "a transcendental or reducing tree without a full aux slows the other warpgroup's mainloop under ping-pong (design 009)",
        ),
        (true, true) => Decision::new(
            true,
            "the plain GEMM takes it and the tree is light or stores a full aux (cheaper there, design 009)",
        ),
    }
}

/// Pipeline stages of a Hopper plan when none is forced: as many as fit (`fit`), at most
/// [`HOPPER_MAX_STAGES`].
pub fn hopper_stages(fit: i64) -> Decision<i64> {
    Decision::new(
        fit.min(HOPPER_MAX_STAGES),
        format!("as many as fit beside the epilogue, at most {HOPPER_MAX_STAGES}"),
    )
}

/// Tile rows per raster group of the Hopper plan when none is forced ([`GROUP_M`]).
pub fn hopper_group_m() -> Decision<i64> {
    Decision::new(
        GROUP_M,
        "the tiles running at once share A and B rows in L2 (customary, not tuned)",
    )
}

/// CTAs per cluster of a Hopper plan when none is forced: 1. A pair sharing one operand by
/// TMA multicast measured no gain (docs/design/010-cluster-pairs.md), and it rules out stream-K
/// and ping-pong.
pub fn hopper_cluster() -> Decision<i64> {
    Decision::new(
        1,
        "a pair sharing an operand by multicast measured no gain (design 010) and rules out stream-K and ping-pong",
    )
}

/// Whether a Hopper plan may split tiles along K (stream-K) when it is not forced: with the
/// cooperative schedule and no cluster (the kernel's parts need both); each launch then
/// splits per [`stream_k_split`].
pub fn hopper_stream_k(cooperative: bool, cluster: i64) -> Decision<bool> {
    if cooperative && cluster == 1 {
        Decision::new(
            true,
            "cooperative without a cluster: split per launch by the idle rule",
        )
    } else {
        Decision::new(
            false,
            "the parts need the cooperative schedule without a cluster",
        )
    }
}

/// The tiles a launch of `total` tiles (of `k_tiles` k-tiles each) on a persistent grid of
/// `grid` CTAs splits along K over all of them (stream-K), `sms` being the device's SM count
/// (a split needs every CTA resident), `min_idle` [`STREAM_K_MIN_IDLE`] (0 when stream-K was
/// forced on) and `memory_bound` whether the problem is ([`memory_bound`]):
/// - more tiles than CTAs: the `r` tiles of the last, partial wave when it leaves at least
///   `min_idle` k-tiles a CTA idle (`(grid - r) k_tiles / grid`), and with them the `grid`
///   tiles of the wave before where `r` is at most `grid /` [`STREAM_K_JOIN_MIN_PARTS`] and
///   `join` ([`stream_k_join_fits`]), so
///   that no tile has more than two parts (one whole wave fewer, about a tile and a half a
///   CTA in parts);
/// - fewer tiles than CTAs (one partial wave, the grid widened to the SMs by
///   [`single_wave_grid`]): every tile, by the same idle rule, or, memory-bound, when the
///   wave keeps at most [`MEMORY_BOUND_BUSY_FRACTION`] of the SMs busy (the busy SMs cannot
///   read the operands at the device's rate);
///
/// and in both cases only when each CTA's share is at least [`STREAM_K_MIN_SHARE`] k-tiles
/// and `grid r k_tiles` fits the kernel's 32-bit cut; else 0.
pub fn stream_k_split(
    total: i64,
    grid: i64,
    sms: i64,
    k_tiles: i64,
    min_idle: i64,
    memory_bound: bool,
    join: bool,
) -> Decision<i64> {
    let whole = |why: String| Decision::new(0, why);
    if grid < 1 || grid > sms {
        return whole(format!(
            "a grid of {grid} CTAs is not resident at once on {sms} SMs"
        ));
    }
    if total == grid || (total > grid && total % grid == 0) {
        return whole(format!("{total} tiles are whole waves of {grid}"));
    }
    let single = total < grid;
    let r = if single { total } else { total % grid };
    let idle = (grid - r) * k_tiles;
    let lean = single && memory_bound && (r as f64) <= MEMORY_BOUND_BUSY_FRACTION * grid as f64;
    if idle < min_idle * grid && !lean {
        return whole(format!(
            "the {} wave of {r} tiles leaves {:.1} k-tiles a CTA idle, under {min_idle}",
            if single { "only" } else { "last" },
            idle as f64 / grid as f64
        ));
    }
    if r * k_tiles < STREAM_K_MIN_SHARE * grid {
        return whole(format!(
            "{r} tiles of {k_tiles} k-tiles give a CTA {:.1} k-tiles, under {STREAM_K_MIN_SHARE}",
            (r * k_tiles) as f64 / grid as f64
        ));
    }
    // Cut over the G CTAs alone, r tiles give runs of r k_tiles / G k-tiles and a tile G / r
    // parts or more, whose last part adds the others' partial sums one after another. Where
    // that is at least STREAM_K_JOIN_MIN_PARTS parts, the full wave before joins the run
    // (where `join` allows: [`stream_k_join_fits`]): runs of (1 + r / G) k_tiles are longer
    // than a tile, so no tile has more than two parts and each fix-up adds one partial sum.
    let joined = join && stream_k_thin_last_wave(total, grid);
    let split = if joined { r + grid } else { r };
    if grid * split * k_tiles > i32::MAX as i64 {
        return whole(format!(
            "{grid} x {split} x {k_tiles} exceeds the kernel's 32-bit cut"
        ));
    }
    if joined {
        return Decision::new(
            split,
            format!(
                "the last wave of {r} tiles would leave {:.1} k-tiles a CTA idle (>= {min_idle}): it and the wave before it, {split} tiles, split along K over {grid} CTAs ({:.1} k-tiles each: at most two parts a tile, where the last wave alone would cut each in {} or more, at least {STREAM_K_JOIN_MIN_PARTS})",
                idle as f64 / grid as f64,
                (split * k_tiles) as f64 / grid as f64,
                grid / r
            ),
        );
    }
    let why = if lean {
        format!(
            "memory-bound, {r} tiles would keep {r} of {grid} CTAs busy: all split along K over the {grid} ({:.1} k-tiles each)",
            (r * k_tiles) as f64 / grid as f64
        )
    } else {
        format!(
            "the {} wave of {r} tiles would leave {:.1} k-tiles a CTA idle (>= {min_idle}): split along K over {grid} CTAs",
            if single { "only" } else { "last" },
            idle as f64 / grid as f64
        )
    };
    Decision::new(r, why)
}

/// [`stream_k_split`] joins a thin last wave to the wave before it where the last wave's
/// tiles cut over the grid alone would have at least this many parts each (`r <= grid / 8`).
/// Joined, a CTA runs about a tile and a half, no tile has more than two parts and the
/// fix-up adds one partial sum instead of seven or more; but the runs start at scattered K
/// offsets, so the tiles sharing a row of A or a column of B no longer read its k-tiles
/// together. Fitted on the H100 on twelve shapes (design 002, "Joining the wave before"):
/// joined wherever the last wave filled under half the SMs, the six with 8.3-16.5 parts ran
/// 1-20% faster (768 x 3072 x 8192 546-597 -> 615-668 TF/s), and of the six with 2.2-6.3
/// parts five ran 4-28% slower and one (2408 x 3728 x 3720, 6.3 parts) 4% faster.
pub const STREAM_K_JOIN_MIN_PARTS: i64 = 8;

/// Whether `total` tiles on `grid` CTAs end in a last wave thin enough for [`stream_k_split`]
/// to join it to the wave before it: more tiles than CTAs, the last wave's `r` at most
/// `grid /` [`STREAM_K_JOIN_MIN_PARTS`] (and not empty).
pub fn stream_k_thin_last_wave(total: i64, grid: i64) -> bool {
    let r = if grid > 0 { total % grid } else { 0 };
    total > grid && r > 0 && STREAM_K_JOIN_MIN_PARTS * r <= grid
}

/// The most bytes of A and B that the tiles of one wave read over all of K for
/// [`stream_k_split`] to join a thin last wave to the wave before it. Joined, the CTAs' runs
/// start at scattered K offsets, so a tile's slices of A and B are shared with the other
/// tiles of its row or column only while L2 keeps them until those tiles' CTAs get there;
/// in whole-tile waves the CTAs read the same k-tiles together. A guard, not a fit: on the
/// H100 (50 MB of L2) the joined shapes that ran faster read 26-59 MB, and 392 x 12160 x
/// 15840 (280 MB) ran 28% slower joined (design 002, "Joining the wave before"), though its
/// last wave of 60 tiles would not join by [`STREAM_K_JOIN_MIN_PARTS`] either.
pub const STREAM_K_JOIN_MAX_BYTES: i64 = 64 << 20;

/// Whether a wave's tiles read few enough bytes of A and B over all of K
/// ([`STREAM_K_JOIN_MAX_BYTES`]) for [`stream_k_split`] to join a thin last wave to the wave
/// before it: the `grid` tiles running at once, taken in the persistent order's raster groups
/// of `group_m` tile rows, cover about `min(group_m, tiles_m)` tile rows and as many tile
/// columns as the rest of the grid needs, each a `bm`- or `bn`-row slice of `k` elements of
/// `bytes` each (clamped to M and N); where a batch has fewer tiles than the grid, every batch
/// the wave reaches reads its own A and B.
pub fn stream_k_join_fits(
    (m, n, k, batch): (i64, i64, i64, i64),
    (bm, bn): (i64, i64),
    group_m: i64,
    grid: i64,
    bytes: i64,
) -> Decision<bool> {
    let (tiles_m, tiles_n) = (ceil_div(m, bm), ceil_div(n, bn));
    let rows = tiles_m.min(group_m.max(1));
    let cols = ceil_div(grid, rows).min(tiles_n);
    let batches = ceil_div(grid, tiles_m * tiles_n).clamp(1, batch.max(1));
    let footprint = ((rows * bm).min(m) + (cols * bn).min(n)) * k * bytes * batches;
    let fits = footprint <= STREAM_K_JOIN_MAX_BYTES;
    Decision::new(
        fits,
        format!(
            "a wave's {rows} tile rows and {cols} tile columns read {:.1} MB of A and B over K, {} {} MB",
            footprint as f64 / 1e6,
            if fits { "within" } else { "over" },
            STREAM_K_JOIN_MAX_BYTES >> 20
        ),
    )
}

/// The persistent grid of a stream-K plan of `total` tiles (no cluster) under a cap of
/// `max_ctas` CTAs resident at once (the SM count by default), when the tiles are one partial
/// wave that [`stream_k_split`] splits: as many CTAs as give each at least
/// [`STREAM_K_MIN_SHARE`] k-tiles, at most `max_ctas`, rounded down to a multiple of the
/// tiles where that leaves at least two parts a tile (part j of every tile then covers the
/// same k-tiles, the CTAs running at once share A and B in L2, and no CTA runs two parts;
/// cuts across tiles measured slower on every long-K and small-M shape tried, design 012,
/// "Aligned parts"); `None` when the wave is not split (one CTA a tile up to the cap), with
/// the reason.
pub fn single_wave_grid(
    total: i64,
    max_ctas: i64,
    k_tiles: i64,
    min_idle: i64,
    memory_bound: bool,
) -> Decision<Option<i64>> {
    if total >= max_ctas {
        return Decision::new(None, format!("{total} tiles fill the {max_ctas} CTAs"));
    }
    let mut grid = max_ctas.min(total.saturating_mul(k_tiles) / STREAM_K_MIN_SHARE);
    // A whole number of parts a tile, so that part j of every tile covers the same k-tiles:
    // the CTAs running at once read the same slices of A and B (shared in L2), and no CTA
    // runs two parts (two pipeline fills, two fix-ups); cuts across tiles would put the
    // CTAs at different K offsets.
    // Parts long enough for their tile's fix-up (STREAM_K_FIXUP_SHARE), at least two.
    let most = grid / total.max(1);
    let mut parts = most;
    while parts > 2 && k_tiles / parts < STREAM_K_FIXUP_SHARE * (parts - 1) {
        parts -= 1;
    }
    let capped = parts < most;
    let aligned = parts >= 2 && parts * total < grid;
    if aligned {
        grid = parts * total;
    }
    if grid <= total {
        return Decision::new(
            None,
            format!(
                "{total} tiles of {k_tiles} k-tiles cannot give more CTAs {STREAM_K_MIN_SHARE} k-tiles each"
            ),
        );
    }
    let d = stream_k_split(
        total,
        grid,
        max_ctas,
        k_tiles,
        min_idle,
        memory_bound,
        false,
    );
    let why = if aligned {
        format!(
            "{}; {grid} CTAs, {parts} parts a tile (the same k-tiles in every tile: A and B shared in L2{})",
            d.why,
            if capped {
                format!("; no more parts: {} k-tiles a part against {} partial sums to add, at least {STREAM_K_FIXUP_SHARE} k-tiles each", k_tiles / parts, parts - 1)
            } else {
                String::new()
            }
        )
    } else {
        d.why
    };
    Decision::new((d.value > 0).then_some(grid), why)
}

/// The fewest parts a tile from which a single wave split in whole parts
/// ([`single_wave_grid`]) numbers its CTAs part by part (CTA `c` runs part `c / tiles` of tile
/// `c % tiles`, so that the CTAs reading the same k-tiles of tiles that share A's rows or B's
/// columns are numbered together and share those slices in L2) instead of tile by tile (a
/// tile's parts on consecutive CTAs, the CTAs sharing a slice P apart). From 3 parts where
/// the problem is compute-bound and the tile at most 128 wide (the mainloop reading the most
/// bytes a flop, so most bound by the slices it misses); else from 8: a memory-bound split
/// (a decode batch streams B once, each slice read by a few tile rows only) and 128 x 256
/// tiles measured as fast or faster tile by tile with fewer parts, and 2 parts faster tile
/// by tile everywhere (docs/design/022-stream-k-part-order.md).
pub fn stream_k_part_order(memory_bound: bool, bn: i64) -> Decision<i64> {
    if !memory_bound && bn <= 128 {
        Decision::new(
            3,
            "CTAs numbered part by part from 3 parts a tile: compute-bound, tiles of at most 128 columns (design 022)",
        )
    } else {
        Decision::new(
            8,
            format!(
                "CTAs numbered part by part from 8 parts a tile: {} (design 022)",
                if memory_bound {
                    "memory-bound, fewer parts keep a tile's parts together".to_string()
                } else {
                    format!("tiles {bn} wide, fewer parts keep a tile's parts together")
                }
            ),
        )
    }
}

/// The sm80-class plan's CTA tile when none is forced: 128 x 256 x 64 (8 warps) when the
/// problem has as many such tiles as an H100 has SMs, else 128 x 128 x 64 (4 warps), twice
/// the CTAs. (The sm80-class path is the fallback on sm_90a and the path of A100 / L4 / RTX
/// cards; not tuned per card.)
pub fn sm80_tile(p: &GemmProblem) -> Decision<(i64, i64, i64)> {
    let big = tiles(p, 128, 256);
    if big >= H100_SMS {
        Decision::new(
            (128, 256, 64),
            format!("{big} tiles of 128x256 fill {H100_SMS} SMs: 8 warps of 64x64"),
        )
    } else {
        Decision::new(
            (128, 128, 64),
            format!(
                "{big} tiles of 128x256 leave SMs idle: 128x128 makes {}",
                tiles(p, 128, 128)
            ),
        )
    }
}

/// The sm80-class plan's stages when none is forced: as many as fit, at most
/// [`SM80_MAX_STAGES`].
pub fn sm80_stages(fit: i64) -> Decision<i64> {
    Decision::new(
        fit.min(SM80_MAX_STAGES),
        format!("as many as fit, at most {SM80_MAX_STAGES}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::sm90::Sm90Plan;

    /// Below one wave of 128-row tiles, a memory-bound GEMM takes 64 x 128 only where its
    /// waves are fuller and stay whole; a tie, a split wave or a compute-bound problem keeps
    /// 128 x 128 (the shapes of design 012's measurement).
    #[test]
    fn small_m_tiles_fill_the_waves_they_can() {
        for ((m, n, k), want) in [
            ((192, 4096, 4096), (64, 128)),
            ((256, 4096, 4096), (64, 128)),
            ((112, 6144, 6144), (64, 128)),
            ((96, 8192, 8192), (64, 128)),
            // 64 tiles of 64 x 128 split in two parts each (128 CTAs).
            ((128, 4096, 4096), (64, 128)),
            // 80 tiles of 64 x 128 would be cut across tiles: every SM reads B anyway.
            ((128, 5120, 13824), (128, 128)),
            // 64 x 128 fills its two waves no better than 128 x 128 its one.
            ((128, 11008, 4096), (128, 128)),
            // Compute-bound.
            ((1000, 1000, 1000), (128, 128)),
        ] {
            let d = hopper_tile(&GemmProblem::new(m, n, k), false);
            assert_eq!(d.value, want, "{m}x{n}x{k}: {}", d.why);
        }
    }

    /// The nine standard shapes keep the plans they were measured with: ping-pong 128 x 128
    /// at K = 4096, cooperative 128 x 256 (stream-K where the idle rule splits) past it.
    #[test]
    fn standard_shapes_keep_their_plans() {
        let want = [
            ((4096, 4096, 4096), true, false),
            ((8192, 8192, 8192), false, true),
            ((4096, 11008, 4096), true, false),
            ((4096, 4096, 11008), false, false),
            ((4096, 14336, 4096), true, false),
            ((8192, 4096, 4096), true, false),
            ((8192, 11008, 4096), true, false),
            ((8192, 4096, 11008), false, true),
            ((8192, 14336, 4096), true, false),
        ];
        for ((m, n, k), pingpong, split) in want {
            let p = GemmProblem::new(m, n, k);
            let plan = Sm90Plan::new(&p).unwrap().compiled_for(H100_SMS);
            let tile = if pingpong {
                (128, 128, 64)
            } else {
                (128, 256, 64)
            };
            assert_eq!(
                (
                    plan.cta_tile,
                    plan.schedule == crate::plan::Schedule::PingPong
                ),
                (tile, pingpong),
                "{m}x{n}x{k}"
            );
            assert_eq!(plan.stream_k, split, "{m}x{n}x{k}");
            assert_eq!(plan.persistent_ctas(H100_SMS, None), 132, "{m}x{n}x{k}");
        }
    }

    #[test]
    fn a_small_m_product_splits_in_whole_parts_a_tile() {
        // A whole number of parts a tile: 32 tiles of 64 x 128 in four, 64 of 64 x 128 in
        // two, 64 of 128 x 128 in two.
        for (m, n, k, ctas) in [
            (16, 4096, 4096, 128),
            (128, 4096, 4096, 128),
            (256, 4096, 14336, 128),
        ] {
            let plan = Sm90Plan::new(&GemmProblem::new(m, n, k))
                .unwrap()
                .compiled_for(H100_SMS);
            let grid = plan.persistent_ctas(H100_SMS, None);
            assert_eq!(grid, ctas, "{m}x{n}x{k}");
            assert!(plan.stream_k, "{m}x{n}x{k}");
            assert_eq!(
                plan.stream_k_tiles(grid, H100_SMS),
                plan.total_tiles(),
                "{m}x{n}x{k}"
            );
        }
        // 8 tiles of 64 k-tiles: in 4 parts of 16 k-tiles over 32 CTAs (16 parts of 4 would
        // leave each tile 15 partial sums to add: STREAM_K_FIXUP_SHARE).
        let plan = Sm90Plan::new(&GemmProblem::new(64, 1024, 4096)).unwrap();
        assert_eq!(plan.persistent_ctas(H100_SMS, None), 32);
        assert_eq!(plan.compiled_for(H100_SMS).stream_k_tiles(32, H100_SMS), 8);
        // Too short to split (2 k-tiles a tile): one CTA a tile.
        let plan = Sm90Plan::new(&GemmProblem::new(16, 4096, 128)).unwrap();
        assert_eq!(plan.persistent_ctas(H100_SMS, None), plan.total_tiles());
        assert!(!plan.compiled_for(H100_SMS).stream_k);
    }

    #[test]
    fn intensity_separates_decode_from_prefill() {
        assert!(memory_bound(&GemmProblem::new(16, 4096, 4096)));
        assert!(memory_bound(&GemmProblem::new(128, 4096, 4096)));
        assert!(!memory_bound(&GemmProblem::new(4096, 4096, 4096)));
    }
}
