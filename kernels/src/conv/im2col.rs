//! The im2col layout of a convolution's A operand, the path it decides, and the plan's text.
//!
//! For channels-last x (element `(n, h, w, c)` at `((n·H + h)·W + w)·C + c`), the GEMM
//! coordinate `(m, k)` with `m = (q, p, n)` and `k = (c, s, r)` reads
//!
//! ```text
//! x[n, p·sh − pad_top + r·dh, q·sw − pad_left + s·dw, c]
//!   = x[offset + L(m, k)],  L = ((Q,P,N),(C,S,R)) : ((sw·C, sh·W·C, H·W·C),(1, dw·C, dh·W·C)),
//!                          offset = −(pad_top·W + pad_left)·C
//! ```
//!
//! where the row and column it reads lie inside x (the in-bounds predicate), and 0 elsewhere.
//! Padding is the only part that is not affine: everything else is one layout. Coalescing each
//! mode shows what the hardware sees: with `dw = 1`, `(C,S):(1,C)` is one contiguous run of
//! `C·S` elements; for a 1x1 convolution of stride 1, `(Q,P,N)` coalesces to one mode of
//! stride C, so A is x itself, a flat row-major matrix.

use std::fmt::Write as _;

use tessera_layout::{coalesce_profile, IntTuple, Layout};

use crate::arch::Arch;
use crate::conv::spec::{ConvSpec, Geometry};
use crate::error::{KernelError, Result};
use crate::plan::gemm::{GemmSpec, Plan};
use crate::plan::Im2colTma;

/// The im2col gather kernel's entry points, one per vector width (elements per thread).
pub(crate) const GATHER_KERNEL: &str = "tessera_conv_im2col";

/// The gather kernel's source, exactly as NVRTC compiles it (one module serves every
/// convolution: the geometry is a run-time argument).
pub(crate) fn gather_source() -> String {
    format!(
        "// tessera: the im2col gather of a convolution (the gather path)\n{}",
        include_str!("im2col.cuh")
    )
}

/// How a convolution runs on the GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvPath {
    /// A is x itself, a flat row-major `M x K` matrix with rows `lda` elements apart.
    Direct { lda: i64 },
    /// An im2col gather copies A into an `M x K` workspace, then the GEMM runs on it.
    Gather,
}

/// A convolution's A operand as a layout of x (tight channels-last), its offset and the
/// predicate's geometry.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Im2col {
    pub g: Geometry,
    /// `((Q,P,N),(C,S,R)) : ((sw·C, sh·W·C, H·W·C),(1, dw·C, dh·W·C))`.
    pub layout: Layout,
    /// `−(pad_top·W + pad_left)·C`.
    pub offset: i64,
}

impl Im2col {
    pub fn new(g: &Geometry) -> Result<Im2col> {
        let (sw, sh) = (g.stride.1, g.stride.0);
        let (dh, dw) = g.dil;
        let (pt, _, pl, _) = g.pad;
        let (c, w, hwc) = (g.c, g.w, g.h * g.w * g.c);
        let shape = IntTuple::tuple([
            IntTuple::flat([g.q, g.p, g.n]),
            IntTuple::flat([g.c, g.s, g.r]),
        ]);
        let stride = IntTuple::tuple([
            IntTuple::flat([sw * c, sh * w * c, hwc]),
            IntTuple::flat([1, dw * c, dh * w * c]),
        ]);
        let layout = Layout::new(shape, stride).map_err(KernelError::layout("conv im2col"))?;
        Ok(Im2col {
            g: *g,
            layout,
            offset: -(pt * w + pl) * c,
        })
    }

    /// `(h, w)` of x that A's `(m, k)` reads (possibly outside x).
    pub fn pixel(&self, m: i64, k: i64) -> (i64, i64) {
        let g = &self.g;
        let (q, p) = (m % g.q, (m / g.q) % g.p);
        let (s, r) = ((k / g.c) % g.s, k / (g.c * g.s));
        (
            p * g.stride.0 - g.pad.0 + r * g.dil.0,
            q * g.stride.1 - g.pad.2 + s * g.dil.1,
        )
    }

    /// x's element that A's `(m, k)` reads, `None` in the padding.
    pub fn tap(&self, m: i64, k: i64) -> Result<Option<i64>> {
        let (mm, kk) = (self.g.gemm_m(), self.g.gemm_k());
        if !(0..mm).contains(&m) || !(0..kk).contains(&k) {
            return Err(KernelError::invalid(
                "conv im2col",
                format!("A({m}, {k}) is outside A's {mm} x {kk}"),
            ));
        }
        let (h, w) = self.pixel(m, k);
        if !(0..self.g.h).contains(&h) || !(0..self.g.w).contains(&w) {
            return Ok(None);
        }
        let off = self
            .layout
            .eval(&IntTuple::flat([m, k]))
            .map_err(KernelError::layout("conv im2col"))?;
        Ok(Some(self.offset + off))
    }

    /// Each mode coalesced: `(M-mode, K-mode)` with as few sub-modes as the function allows.
    pub fn coalesced(&self) -> Layout {
        coalesce_profile(&self.layout, &IntTuple::flat([1, 1]))
            .expect("a rank-2 profile of a rank-2 layout")
    }

    /// Rows or columns of padding some tap reads: `(top, bottom, left, right)`, each 0 when
    /// no tap reaches it.
    pub fn padding_read(&self) -> (i64, i64, i64, i64) {
        let g = &self.g;
        let last_h = (g.p - 1) * g.stride.0 - g.pad.0 + (g.r - 1) * g.dil.0;
        let last_w = (g.q - 1) * g.stride.1 - g.pad.2 + (g.s - 1) * g.dil.1;
        (
            g.pad.0,
            (last_h - (g.h - 1)).max(0),
            g.pad.2,
            (last_w - (g.w - 1)).max(0),
        )
    }

    /// The path, and why, in words.
    pub fn decide(&self) -> (ConvPath, String) {
        let g = &self.g;
        let (m, k) = (g.gemm_m(), g.gemm_k());
        let co = self.coalesced();
        let mode = |i: usize| co.mode(i).expect("rank 2");
        let (mm, km) = (mode(0), mode(1));
        let single = |l: &Layout| -> Option<i64> {
            l.is_int()
                .then(|| l.stride().as_int().unwrap_or(0))
                .or_else(|| (l.size() == 1).then_some(0))
        };
        let read = self.padding_read();
        if read != (0, 0, 0, 0) {
            return (
                ConvPath::Gather,
                format!(
                    "taps read the zero padding (rows {} above, {} below, columns {} left, {} right): A is x's layout where the tap is in bounds and 0 elsewhere, which no flat matrix expresses",
                    read.0, read.1, read.2, read.3
                ),
            );
        }
        let Some(ks) = single(&km) else {
            return (
                ConvPath::Gather,
                format!(
                    "A's K mode (C,S,R) coalesces to {km}, not one contiguous run: each row of A is {} runs of x, not a slice of it",
                    km.shape().leaves().iter().skip(1).product::<i64>()
                ),
            );
        };
        if k > 1 && ks != 1 {
            return (
                ConvPath::Gather,
                format!("A's K mode coalesces to {km}, whose stride is not 1"),
            );
        }
        let Some(lda) = single(&mm) else {
            let runs: i64 = mm.shape().leaves().iter().skip(1).product();
            return (
                ConvPath::Gather,
                format!(
                    "A is a strided GEMM but not one flat matrix: its M mode (Q,P,N) coalesces to {mm} (stride ({},{}) skips rows of x); the GEMM's operands are flat (rows, cols[, batch]) matrices, and as {runs} products of {} rows it would leave most of each tile idle",
                    g.stride.0,
                    g.stride.1,
                    mm.shape().leaves()[0]
                ),
            );
        };
        let lda = if m == 1 { k } else { lda };
        if m > 1 && lda < k {
            return (
                ConvPath::Gather,
                format!("A coalesces to ({m},{k}):({lda},1), whose rows overlap (row stride {lda} < K = {k}), which the GEMM does not take"),
            );
        }
        (
            ConvPath::Direct { lda },
            format!(
                "A is x itself: the im2col layout coalesces to the flat row-major matrix ({m},{k}):({lda},1) and no tap reads padding, so the GEMM runs on x and w directly (no copy)"
            ),
        )
    }

    pub fn path(&self) -> ConvPath {
        self.decide().0
    }
}

/// The GEMM spec the convolution runs on `arch`: the spec's, with stream-K off where the
/// planner would take it (its partial sums would need a second workspace; the convolution's
/// workspace is the im2col copy alone).
pub(crate) fn gemm_spec_for(spec: &ConvSpec, arch: Arch, sms: i64) -> Result<GemmSpec> {
    let gs = spec.gemm()?;
    if let Some(w) = window_spec(spec, &gs, arch, sms)? {
        return Ok(w);
    }
    if let Some(t) = implicit_tma(spec, arch)? {
        // The implicit GEMM: the Hopper kernel loads A from x by TMA's im2col mode, whole
        // tiles, one CTA a tile; K counts every tap's channels rounded up to whole k-tiles.
        // Where the planner cannot take it after all, the gather path.
        let mut o = spec.options;
        o.stream_k = Some(false);
        let mut implicit = gs.clone().options(o);
        implicit.k = t.gemm_k();
        implicit.im2col = Some(t);
        let mut plan = implicit.plan(arch, sms).ok();
        // A staged filter takes zero output channels up to the tile columns' end (the rows
        // B's loads span): a box of B that runs past its map's rows loads slower (design
        // 024). The filter is staged where C is not a multiple of 64 anyway, and where it
        // would be read in place but its tile columns run past K and the GEMM is long
        // enough to pay for the copy ([`stages_filter_rows`]). The planner's choices do not
        // depend on it, so the plan is the same.
        let g = spec.geometry()?;
        let t = match plan.as_ref().and_then(|p| p.sm90()) {
            Some(p) => {
                let (_, tiles_n) = p.grid_tiles();
                let rows = tiles_n * p.cta_tile.1;
                if t.c_blocks() * 64 != g.c || stages_filter_rows(&g, &t, rows, p.cta_tile.1) {
                    Im2colTma {
                        filter_rows: rows,
                        ..t
                    }
                } else {
                    t
                }
            }
            _ => t,
        };
        if implicit.im2col != Some(t) {
            implicit.im2col = Some(t);
            plan = implicit.plan(arch, sms).ok();
        }
        let tile = plan.as_ref().and_then(|p| p.sm90()).map(|p| p.cta_tile);
        if let Some(h) = halo_candidate(spec, &t)? {
            // The halo load's tiles are 128 rows (two consumers of whole output rows); the
            // width is the one the planner gives the im2col load (N decides it alike). Asked
            // for only where the planner's rows differ, so that the plan's text gives the
            // planner's reason for the tile wherever it stands.
            let mut hs = implicit.clone();
            if let (None, Some((bm, bn, _))) = (hs.options.tile, tile) {
                if bm != 128 {
                    hs.options.tile = Some((128, bn, 64));
                }
            }
            hs.im2col = Some(Im2colTma { halo: Some(h), ..t });
            if let Ok(p) = hs.plan(arch, sms) {
                if p.problem_im2col().is_some_and(|g| g.halo.is_some()) {
                    return Ok(hs);
                }
            }
        }
        if plan.is_some_and(|p| p.problem_im2col().is_some()) {
            return Ok(implicit);
        }
    }
    let plan = gs.plan(arch, sms)?;
    if plan.stream_k_bytes() == 0 {
        return Ok(gs);
    }
    if spec.options.stream_k == Some(true) {
        return Err(KernelError::invalid(
            "conv spec",
            "stream-K was forced, but a convolution's GEMM does not split tiles along K (its partial sums would need a second workspace)",
        ));
    }
    let mut o = spec.options;
    o.stream_k = Some(false);
    Ok(gs.options(o))
}

/// When a filter that TMA reads in place (C a multiple of 64) is staged anyway, with zero
/// output channels up to its tile columns' end, so that no load of B runs past its map: where
/// at least [`STAGE_FILTER_MIN_PAST`] of a [`STAGE_FILTER_WIDTH`]-wide column's rows lie past
/// K and the GEMM's roofline estimate is at least [`STAGE_FILTER_MIN_SECS`]. A heuristic,
/// fitted on C = 128 at 28 x 28 with K from 100 to 127, N = 128 and 256, and checked on two
/// layers of other column widths (design 024 has the figures): with 128-wide columns, loads
/// past the map cost more than the copy from 16 rows past K on, and less below; the other
/// widths gained nothing. The copy is a launch of about 4 us (its bytes are few), so a tenth
/// of the GEMM must exceed it.
pub(crate) const STAGE_FILTER_MIN_SECS: f64 = 40e-6;
/// See [`STAGE_FILTER_MIN_SECS`].
pub(crate) const STAGE_FILTER_MIN_PAST: i64 = 16;
/// See [`STAGE_FILTER_MIN_SECS`].
pub(crate) const STAGE_FILTER_WIDTH: i64 = 128;

/// Whether the implicit GEMM `t` of a layer whose filter TMA reads in place stages it anyway,
/// with zero output channels up to `rows` (its `bn`-wide tile columns' end): see
/// [`STAGE_FILTER_MIN_SECS`].
pub(crate) fn stages_filter_rows(g: &Geometry, t: &Im2colTma, rows: i64, bn: i64) -> bool {
    bn == STAGE_FILTER_WIDTH
        && rows - g.k >= STAGE_FILTER_MIN_PAST
        && est_columns(g, t, rows) >= STAGE_FILTER_MIN_SECS
}

/// The roofline estimate of the implicit GEMM `t` over `rows` output channels (its tile
/// columns), in seconds.
fn est_columns(g: &Geometry, t: &Im2colTma, rows: i64) -> f64 {
    2.0 * g.gemm_m() as f64 * rows as f64 * t.gemm_k() as f64 / EST_FLOPS
}

/// The im2col geometry of TMA's load of A from x where the implicit GEMM can run the
/// convolution (sm_90a, a layer the gather path would take, the tensor map's limits, no
/// operand sums over K, no cluster or forced path, and where C is not a multiple of 64, a
/// roofline estimate that favours it: [`ChannelPadding`]), else `None`: then the gather
/// path.
/// The window path's GEMM (`N·P` batches of `Q x K` by `64·k_tiles`, B shared, A the staged
/// planes: [`crate::plan::WindowTma`]) where the window load can take the layer and its
/// roofline estimate beats the other paths' (see [`crate::conv::window::preferred`]).
fn window_spec(spec: &ConvSpec, gs: &GemmSpec, arch: Arch, sms: i64) -> Result<Option<GemmSpec>> {
    let Some(wd) = crate::conv::window::candidate(spec, arch)? else {
        return Ok(None);
    };
    let g = spec.geometry()?;
    let eb = spec.input().bytes();
    let implicit = match im2col_candidate(spec, arch)? {
        Some((_, pad)) if !pad.pads() => return Ok(None),
        Some((_, pad)) => Some(pad.est_pad),
        None => None,
    };
    if !crate::conv::window::preferred(&g, &wd, eb, implicit) {
        return Ok(None);
    }
    let mut o = spec.options;
    o.stream_k = Some(false);
    let mut w = gs.clone().options(o).batch(g.n * g.p);
    w.m = g.q;
    w.k = wd.gemm_k();
    w.window = Some(wd);
    Ok(match w.plan(arch, sms) {
        Ok(p) if p.problem_window().is_some() => Some(w),
        _ => None,
    })
}

/// The rate at which TMA's im2col load brings A's k-tiles into shared memory when it bounds
/// the mainloop: c2a's (64 channels, a 128 x 64 tile, the filter as a panel) 6272 tiles x 9
/// k-tiles x 16 KB in 145 us on the H100 (design 014, "The epilogue beside the next tile's
/// MMA"); with the halo load's strips the same rate is assumed per byte.
pub(crate) const EST_A_LOAD: f64 = 6.4e12;

/// The implicit GEMM's mainloop estimate in seconds for `tiles` tiles of 128 rows, each
/// loading `a_bytes` of A: the larger of its MMA work (N rounded up to the tile width the
/// planner takes: 64 up to 64 output channels, else 128-wide) at [`EST_FLOPS`] and its A
/// loads at [`EST_A_LOAD`]. x and y cross DRAM alike on both loads of A and are left out.
pub(crate) fn est_mainloop(g: &Geometry, k: i64, tiles: i64, a_bytes: i64) -> f64 {
    let f = |v: i64| v as f64;
    let bn = if g.k <= 64 { 64 } else { 128 };
    let n = (g.k + bn - 1) / bn * bn;
    let mma = 2.0 * f(tiles) * 128.0 * f(n) * f(k) / EST_FLOPS;
    mma.max(f(tiles) * f(a_bytes) / EST_A_LOAD)
}

/// The halo load's layout for the implicit GEMM of `t` where it can take the layer (stride
/// 1, x read in place, an epilogue that means the same over its rows: the window
/// load's rule, [`crate::conv::window::tree_fits`]) and, unless forced by
/// [`crate::plan::Options::halo`], where its estimate beats the im2col load's
/// ([`est_mainloop`]: the halo load computes the rows past Q and P it never stores, and loads
/// one strip per filter row where the im2col load loads a k-tile per tap).
pub(crate) fn halo_candidate(spec: &ConvSpec, t: &Im2colTma) -> Result<Option<crate::plan::Halo>> {
    let h = crate::plan::Halo::of(&t.conv);
    // y (and aux, the residual, C: K channels a pixel alike) leaves and enters by TMA: rows
    // of whole 16-byte chunks.
    let rows_on_grid = [spec.out().bytes(), spec.input().bytes()]
        .iter()
        .all(|b| (spec.filter_dims()[0] * b) % 16 == 0);
    if spec.options.halo == Some(false)
        || h.refusal(&t.conv, t.pitch).is_some()
        || !rows_on_grid
        || !crate::conv::window::tree_fits(spec.tree())
    {
        return Ok(None);
    }
    if spec.options.halo == Some(true) {
        return Ok(Some(h));
    }
    let (halo, im2col) = halo_estimates(&spec.geometry()?, t, &h);
    Ok((halo < im2col).then_some(h))
}

/// [`est_mainloop`] of the halo load `h` and of the im2col load for the implicit GEMM `t`:
/// one strip a filter row and channel block against one 16 KB k-tile a tap and channel
/// block, each over its own tiles.
fn halo_estimates(g: &Geometry, t: &Im2colTma, h: &crate::plan::Halo) -> (f64, f64) {
    let k = t.gemm_k();
    let (r, s, cb) = (g.r, g.s, t.c_blocks());
    (
        est_mainloop(g, k, h.tiles(&t.conv), r * cb * h.load_bytes(&t.conv)),
        est_mainloop(g, k, (g.gemm_m() + 127) / 128, r * s * cb * 128 * 128),
    )
}

pub(crate) fn implicit_tma(spec: &ConvSpec, arch: Arch) -> Result<Option<Im2colTma>> {
    Ok(match im2col_candidate(spec, arch)? {
        Some((t, pad)) if !pad.pads() || pad.chosen() => Some(t),
        _ => None,
    })
}

/// The implicit GEMM's im2col geometry where TMA can load A (before the roofline choice of
/// a padded layer), with its channel padding.
pub(crate) fn im2col_candidate(
    spec: &ConvSpec,
    arch: Arch,
) -> Result<Option<(Im2colTma, ChannelPadding)>> {
    let g = spec.geometry()?;
    let o = &spec.options;
    if arch != Arch::Sm90a
        || Im2col::new(&g)?.path() != ConvPath::Gather
        || o.sm80
        || o.cluster.is_some()
        || o.stream_k == Some(true)
        || !spec.tree().sum_k.is_empty()
        || g.gemm_m() >= i32::MAX as i64 - 256
    {
        return Ok(None);
    }
    let eb = spec.input().bytes();
    let pitch = ChannelPadding::pitch(g.c, eb);
    // A staged x holds zeros in channels C..pitch of every pixel (its pitch is C rounded up
    // to whole k-tiles), so the tensor map sees a convolution of `pitch` channels: each
    // 64-channel load then lies inside the map. A box that runs past the map's channel
    // extent, filled by TMA, loads markedly slower (design 023).
    let mut conv = g.loads();
    conv.x[1] = pitch;
    let t = Im2colTma {
        conv,
        pitch,
        halo: None,
        filter_rows: g.k,
    };
    if t.refusal().is_some() {
        return Ok(None);
    }
    Ok(Some((t, ChannelPadding::new(&g, &t, eb))))
}

/// The workspace of the padded implicit GEMM: the staged filter at 0 (`K·R·S` rows of
/// `c_pad` elements), then, 256-byte aligned, the staged x (`N·H·W` pixels `pitch` apart)
/// where x is staged; `(filter bytes, offset of x, total bytes)`.
pub(crate) fn padded_workspace(
    g: &Geometry,
    pad: &ChannelPadding,
    eb: i64,
) -> Result<(i64, i64, i64)> {
    let over = || KernelError::invalid("conv workspace", "the staged copies' bytes overflow i64");
    let wb = [pad.k_rows, g.r, g.s, pad.c_pad, eb]
        .iter()
        .try_fold(1i64, |a, &v| a.checked_mul(v))
        .ok_or_else(over)?;
    let x_at = wb.checked_add(255).ok_or_else(over)? / 256 * 256;
    let xb = if pad.stages_x() {
        [g.n, g.h, g.w, pad.pitch, eb]
            .iter()
            .try_fold(1i64, |a, &v| a.checked_mul(v))
            .ok_or_else(over)?
    } else {
        0
    };
    Ok((wb, x_at, x_at.checked_add(xb).ok_or_else(over)?))
}

/// The dense 16-bit tensor-core rate the Hopper GEMM reaches on large problems (about 660
/// TF/s on an H100 SXM) and the memory's copy bandwidth (about 3.0 TB/s): the two rates of
/// the roofline estimate in [`ChannelPadding`]. Only their ratio decides anything.
pub(crate) const EST_FLOPS: f64 = 660e12;
pub(crate) const EST_BYTES: f64 = 3.0e12;

/// The gather path's estimate in seconds: the MMA work over K rounded up to whole k-tiles
/// (N rounded up to 128-wide tiles), plus x read once and the gathered A written and read
/// back.
pub(crate) fn est_gather(g: &Geometry, eb: i64) -> f64 {
    let f = |v: i64| v as f64;
    let (m, n) = (f(g.gemm_m()), f((g.k + 127) / 128 * 128));
    let x = f(g.n) * f(g.h) * f(g.w) * f(g.c) * f(eb);
    let kg = gathered_row(g.gemm_k(), eb);
    2.0 * m * n * f((g.gemm_k() + 63) / 64 * 64) / EST_FLOPS
        + (x + 2.0 * m * f(kg) * f(eb)) / EST_BYTES
}

/// How the implicit GEMM takes a layer whose C is not a multiple of 64, and whether it
/// should.
///
/// A k-tile is 64 channels of one tap, so each tap's last k-tile runs past channel C: the
/// tensor map reads those channels as zeros, and the filter is staged into a copy with every
/// tap's channels padded with zeros to `64·c_blocks` (small: `K·R·S` rows). Where C·2 bytes is
/// not a multiple of 16, TMA cannot step from pixel to pixel, so x is staged too, its pixels
/// `pitch` apart (C rounded up to 64: each load of 64 channels is then one aligned line). The price is MMA work on the zero channels; the
/// alternative, the gather, writes and reads back the whole im2col matrix (R·S/(sh·sw) times
/// x). The choice is a roofline estimate, `flops / 660 TF/s + bytes / 3.0 TB/s` for each, the
/// flops those of whole 128-wide tiles along N, the bytes what crosses the memory once (x,
/// the staged copies, the gathered A; not y, which both write): the lower one runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ChannelPadding {
    /// C, and the channels a tap takes in the GEMM's K (C rounded up to 64).
    pub c: i64,
    pub c_pad: i64,
    /// x's pixel pitch: C, or in the staged copy C rounded up to 64.
    pub pitch: i64,
    /// K, and the staged filter's rows (output channels): K and zero rows up to
    /// [`Im2colTma::filter_rows`].
    pub k: i64,
    pub k_rows: i64,
    /// The estimates, in seconds: padded channels, the gather.
    pub est_pad: f64,
    pub est_gather: f64,
}

impl ChannelPadding {
    /// x's pixel pitch: C where its bytes are a multiple of 16 (TMA's step: x is read in
    /// place); else x is staged anyway, and its pixels go whole k-tiles apart (C rounded up
    /// to 64), so that every 64-channel load is one aligned 128-byte line per pixel.
    pub fn pitch(c: i64, elem_bytes: i64) -> i64 {
        if (c * elem_bytes) % 16 == 0 {
            c
        } else {
            (c + 63) / 64 * 64
        }
    }

    pub fn new(g: &Geometry, t: &Im2colTma, eb: i64) -> ChannelPadding {
        let f = |v: i64| v as f64;
        // The Hopper kernel's tiles are at least 128 wide along N: both pay N rounded up.
        let (m, n) = (f(g.gemm_m()), f((g.k + 127) / 128 * 128));
        let x = f(g.n) * f(g.h) * f(g.w) * f(g.c) * f(eb);
        let c_pad = t.c_blocks() * 64;
        let staged_x = if t.pitch != g.c {
            2.0 * f(g.n) * f(g.h) * f(g.w) * f(t.pitch) * f(eb)
        } else {
            0.0
        };
        let staged_w = 2.0 * f(g.k) * f(g.r) * f(g.s) * f(c_pad) * f(eb);
        let est_pad =
            2.0 * m * n * f(t.gemm_k()) / EST_FLOPS + (x + staged_x + staged_w) / EST_BYTES;
        let est_gather = est_gather(g, eb);
        ChannelPadding {
            c: g.c,
            c_pad,
            pitch: t.pitch,
            k: g.k,
            k_rows: t.filter_rows.max(g.k),
            est_pad,
            est_gather,
        }
    }

    /// Whether the layer needs padding at all (C not a multiple of 64).
    pub fn pads(&self) -> bool {
        self.c_pad != self.c
    }

    /// Whether the filter is staged: its channels padded, or its output channels filled
    /// with zeros up to the tile columns' end ([`stages_filter_rows`]).
    pub fn stages(&self) -> bool {
        self.pads() || self.k_rows > self.k
    }

    /// Whether x itself is staged (its pixels are not on TMA's 16-byte grid).
    pub fn stages_x(&self) -> bool {
        self.pitch != self.c
    }

    /// Whether the estimate favours the padded implicit GEMM.
    pub fn chosen(&self) -> bool {
        self.est_pad < self.est_gather
    }

    /// The choice in words, with the estimate.
    pub fn describe(&self) -> String {
        let x = if self.stages_x() {
            format!(
                "x is staged with pixels {} elements apart (C·2 bytes is not a multiple of 16, TMA's step)",
                self.pitch
            )
        } else {
            "x is read in place".to_string()
        };
        let zeros = if self.stages_x() {
            "the staged copy's zeros"
        } else {
            "the tensor map's bounds"
        };
        let rows = if self.k_rows > self.k {
            format!(
                " and zero output channels {}..{} (its tile columns: no load of it runs past its map)",
                self.k, self.k_rows
            )
        } else {
            String::new()
        };
        format!(
            "C = {} is not a multiple of 64: each tap's last k-tile reads channels {}..{} as zeros ({zeros}) against a filter staged with zeros there{rows}; {x}; MMA work x{:.2}. Roofline estimate (660 TF/s, 3.0 TB/s): {} padded, {} gathered",
            self.c,
            self.c,
            self.c_pad,
            self.c_pad as f64 / self.c as f64,
            micros(self.est_pad),
            micros(self.est_gather)
        )
    }
}

/// Elements per row of the gathered A: K where its rows are on TMA's 16-byte grid, else K
/// rounded up to 128 bytes, so that the GEMM reads A in place (only w, the small operand, is
/// then staged; [`Plan::staged_k`]). The padding columns are never written nor read.
pub(crate) fn gathered_row(k: i64, elem_bytes: i64) -> i64 {
    if (k * elem_bytes) % 16 == 0 {
        k
    } else {
        let per = 128 / elem_bytes;
        (k + per - 1) / per * per
    }
}

pub(crate) fn gemm_plan(spec: &ConvSpec, arch: Arch, sms: i64) -> Result<Plan> {
    gemm_spec_for(spec, arch, sms)?.plan(arch, sms)
}

/// Seconds as microseconds with three significant digits.
fn micros(s: f64) -> String {
    let us = s * 1e6;
    let digits = (2 - us.abs().max(1e-9).log10().floor() as i64).clamp(0, 6) as usize;
    format!("{us:.digits$} us")
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// `ConvSpec::explain`.
pub(crate) fn explain(spec: &ConvSpec, arch: Arch, sms: i64) -> Result<String> {
    let g = spec.geometry()?;
    let a = Im2col::new(&g)?;
    let plan = gemm_plan(spec, arch, sms)?;
    let (m, n, k) = (g.gemm_m(), g.k, g.gemm_k());
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "{spec}");
    let _ = writeln!(
        w,
        "  tensors      logical (N,C,H,W) order, strides in elements; channels-last in memory:"
    );
    for (name, dims) in [
        ("x", [g.n, g.c, g.h, g.w]),
        ("w", [g.k, g.c, g.r, g.s]),
        ("y", [g.n, g.k, g.p, g.q]),
    ] {
        let l = crate::conv::tensors::channels_last(dims);
        let also = if name == "y" {
            "  (and residual, c, aux_in, aux)"
        } else {
            ""
        };
        let _ = writeln!(w, "               {name} {l}{also}");
    }
    let _ = writeln!(
        w,
        "  gemm         M = N·P·Q = {m}, N = K = {n}, K = C·R·S = {k}"
    );
    let _ = writeln!(
        w,
        "  A (im2col)   A(m,k) = x[{} + L(m,k)] where the tap is inside x, else 0; m = (q,p,n), k = (c,s,r)",
        a.offset
    );
    let _ = writeln!(w, "               L = {}", a.layout);
    let (pt, _, pl, _) = g.pad;
    let _ = writeln!(
        w,
        "               offset {} = −(pad_top·W + pad_left)·C = −({pt}·{} + {pl})·{}",
        a.offset, g.w, g.c
    );
    let _ = writeln!(
        w,
        "               in bounds: 0 <= p·{} − {pt} + r·{} < {} and 0 <= q·{} − {pl} + s·{} < {}",
        g.stride.0, g.dil.0, g.h, g.stride.1, g.dil.1, g.w
    );
    let co = a.coalesced();
    let km = co.mode(1).expect("rank 2");
    let run = if km.is_int() && k > 1 {
        format!(": each row of A is one contiguous run of {k} elements")
    } else if g.s > 1 && g.dil.1 == 1 && g.c > 1 {
        format!(
            ": (C,S) is one contiguous run of C·S = {} elements (dilation_w 1)",
            g.c * g.s
        )
    } else {
        String::new()
    };
    let _ = writeln!(w, "               coalesced {co}{run}");
    // A few elements evaluated: the first, one in the middle, the last.
    for (mi, ki) in [(0, 0), (m / 2, k / 2), (m - 1, k - 1)] {
        let (h, ww) = a.pixel(mi, ki);
        let at = match a.tap(mi, ki)? {
            Some(o) => format!("x[{o}]"),
            None => "0 (padding)".to_string(),
        };
        let _ = writeln!(
            w,
            "               A({mi},{ki}) reads row {h}, column {ww}: {at}"
        );
    }
    let _ = writeln!(
        w,
        "  B            w as a K x N column-major matrix ({k},{n}):(1,{k}) (K-R-S-C: each output channel's C·R·S weights contiguous)"
    );
    let _ = writeln!(
        w,
        "  D            y as an M x N row-major matrix ({m},{n}):({n},1); the epilogue's M x N tensors likewise"
    );
    explain_path(w, spec, arch, sms, &a, &plan)?;
    if plan.problem_window().is_some() && spec.options.stream_k.is_none() {
        let _ = writeln!(
            w,
            "  stream-K     off: the window load runs whole tiles, one CTA a tile"
        );
    } else if plan.problem_im2col().is_some() && spec.options.stream_k.is_none() {
        let _ = writeln!(
            w,
            "  stream-K     off: the im2col load runs whole tiles, one CTA a tile"
        );
    } else if plan.spec().forced().stream_k == Some(false) && spec.options.stream_k.is_none() {
        let _ = writeln!(
            w,
            "  stream-K     off: its partial sums would need a second workspace"
        );
    }
    let _ = writeln!(w, "the GEMM:");
    let _ = write!(w, "{plan}");
    Ok(s)
}

/// [`explain_path`] for the window path.
fn explain_window(
    w: &mut String,
    spec: &ConvSpec,
    a: &Im2col,
    plan: &Plan,
    wd: &crate::plan::WindowTma,
) -> Result<()> {
    let g = &a.g;
    let eb = spec.input().bytes();
    let bm = plan.sm90().map_or(128, |p| p.cta_tile.0);
    let (sw, pl, dw) = (g.stride.1, g.pad.2, g.dil.1);
    let _ = writeln!(
        w,
        "  path         window gemm: C = {} <= 8 channels, so a tap is one 16-byte chunk; 64 channels a tap (TMA's im2col load) would be {:.0}% zeros",
        g.c,
        100.0 * (1.0 - g.c as f64 / 64.0)
    );
    let _ = writeln!(
        w,
        "               x is staged into {sw} phase plane(s) of {} chunks a row: chunk u of plane φ is pixel {sw}·u + φ − {pl} (zeros outside x and past channel C); tap s of output pixel q is chunk q + ⌊s·{dw}/{sw}⌋ of plane s·{dw} mod {sw}",
        wd.chunks()
    );
    let slots: Vec<String> = wd
        .slots(bm)
        .iter()
        .map(|sl| match sl.tap {
            Some((rl, s)) => format!("(r+{rl}, s={s}) @{}", sl.at),
            None => format!("zeros @{}", sl.at),
        })
        .collect();
    let _ = writeln!(
        w,
        "               a k-tile is {} filter row(s) of {} taps, chunks in K order {}; per filter row and plane one TMA box of {} chunks (a strip, {} bytes apart in the stage){}",
        wd.rows_per_ktile(),
        g.s,
        slots.join(", "),
        wd.strip_rows(bm),
        wd.strip_bytes(bm),
        if wd.zero_strip() {
            ", and a strip of zeros for the odd tap's pair"
        } else {
            ""
        }
    );
    let _ = writeln!(
        w,
        "               A's stage as wgmma reads it: (row, k-chunk j of step i) at byte 16·row + start(i) + j·LBO(i), no swizzle, SBO 128: steps {}",
        wd.describe_steps(bm)
    );
    let _ = writeln!(
        w,
        "               the GEMM runs batched over the output rows (n, p): {} batches of M = Q = {} by K = 64·{} = {}, the filter (staged in that K order) shared by every batch",
        g.n * g.p,
        g.q,
        wd.k_tiles(),
        wd.gemm_k()
    );
    let _ = writeln!(
        w,
        "               roofline estimate (660 TF/s, 3.0 TB/s): {} window, {} gathered",
        micros(crate::conv::window::estimate(g, wd, eb)),
        micros(est_gather(g, eb))
    );
    let bytes = spec.workspace_of(plan)?;
    let _ = writeln!(
        w,
        "  workspace    {bytes} bytes ({}): the staged filter and x; Conv2d::workspace_bytes, owned by the Conv2d or passed per launch",
        mib(bytes as f64)
    );
    Ok(())
}

/// The path part of [`explain`]: which path, why, and its workspace.
/// The implicit GEMM's channel padding where it pads (the staged filter, and x where its
/// pixels are off TMA's grid) and the workspace that takes, in the plan's words.
fn explain_padding(
    w: &mut String,
    spec: &ConvSpec,
    t: &Im2colTma,
    arch: Arch,
    sms: i64,
) -> Result<()> {
    let bytes = spec.workspace_bytes(arch, sms)?;
    // The plan's own geometry: the filter's rows follow its tile columns.
    let g = spec.geometry()?;
    let pad = ChannelPadding::new(&g, t, spec.input().bytes());
    if pad.stages() && !pad.pads() {
        let _ = writeln!(
            w,
            "               the filter is staged with zero output channels {}..{}: at least {STAGE_FILTER_MIN_PAST} rows of its {STAGE_FILTER_WIDTH}-wide tile column lie past K, and loads past B's map run slower; the GEMM's estimate ({}) pays for the copy (at least {}; a heuristic, design 024)",
            pad.k,
            pad.k_rows,
            micros(est_columns(&g, t, pad.k_rows)),
            micros(STAGE_FILTER_MIN_SECS)
        );
        let _ = writeln!(
            w,
            "  workspace    {bytes} bytes ({}): the staged filter; Conv2d::workspace_bytes, owned by the Conv2d or passed per launch",
            mib(bytes as f64)
        );
    } else if pad.pads() {
        let _ = writeln!(w, "               {}", pad.describe());
        let _ = writeln!(
            w,
            "               the GEMM's K = R·S·{} = {}",
            pad.c_pad,
            t.gemm_k()
        );
        let _ = writeln!(
            w,
            "  workspace    {bytes} bytes ({}): the staged filter{}; Conv2d::workspace_bytes, owned by the Conv2d or passed per launch",
            mib(bytes as f64),
            if pad.stages_x() { " and x" } else { "" }
        );
    } else {
        let _ = writeln!(w, "  workspace    0 bytes");
    }
    Ok(())
}

fn explain_path(
    w: &mut String,
    spec: &ConvSpec,
    arch: Arch,
    sms: i64,
    a: &Im2col,
    plan: &Plan,
) -> Result<()> {
    let (m, k) = (a.g.gemm_m(), a.g.gemm_k());
    if let Some(wd) = plan.problem_window() {
        return explain_window(w, spec, a, plan, &wd);
    }
    let (path, why) = a.decide();
    match path {
        ConvPath::Direct { .. } => {
            let _ = writeln!(w, "  path         gemm: {why}");
            let _ = writeln!(w, "  workspace    0 bytes");
        }
        ConvPath::Gather if plan.problem_im2col().is_some_and(|g| g.halo.is_some()) => {
            let g = plan.problem_im2col().expect("an im2col plan");
            let h = g.halo.expect("the halo load");
            let s = g.conv.rs.1;
            let _ = writeln!(w, "  path         halo gemm: {why}");
            let _ = writeln!(
                w,
                "               the Hopper kernel loads A straight from x by the halo load: per filter row and 64 channels one TMA strip of the tile's output rows' input rows, its {s} taps read from it {} B apart (stride 1, x read in place); no copy of A",
                h.tap_bytes(&g.conv, 1)
            );
            let _ = writeln!(w, "               {}", h.describe(&g.conv));
            let (halo, im2col) = halo_estimates(&a.g, &g, &h);
            let _ = writeln!(
                w,
                "               estimate (the larger of the MMA work at 660 TF/s and A's loads at {:.1} TB/s): {} against {} for the im2col load's k-tile per tap",
                EST_A_LOAD / 1e12,
                micros(halo),
                micros(im2col)
            );
            explain_padding(w, spec, &g, arch, sms)?;
        }
        ConvPath::Gather if plan.problem_im2col().is_some() => {
            let g = plan.problem_im2col().expect("an im2col plan");
            let _ = writeln!(w, "  path         implicit gemm: {why}");
            let _ = writeln!(
                w,
                "               the Hopper kernel loads A straight from x with TMA's im2col mode: a k-tile is 64 channels of one tap, a tile's rows the output pixels the tensor map walks (padding read as zeros); no copy of A"
            );
            explain_padding(w, spec, &g, arch, sms)?;
        }
        ConvPath::Gather => {
            let bytes = spec.workspace_bytes(arch, sms)?;
            let _ = writeln!(w, "  path         im2col + gemm: {why}");
            let implicit = match im2col_candidate(spec, arch)? {
                Some((_, pad)) => format!(
                    "the implicit GEMM could take it with padded channels, but: {}",
                    pad.describe()
                ),
                None => {
                    "the implicit GEMM, which loads A from x with TMA im2col, cannot take it here"
                        .to_string()
                }
            };
            let _ = writeln!(
                w,
                "               an im2col kernel copies A into the workspace ({m} x {k} {}, rows {} elements apart), then the GEMM runs on it: this path pays that copy (writing {} and reading it back) ({implicit})",
                spec.input(),
                gathered_row(k, spec.input().bytes()),
                mib(bytes as f64)
            );
            let _ = writeln!(
                w,
                "  workspace    {bytes} bytes ({}): Conv2d::workspace_bytes, owned by the Conv2d or passed per launch",
                mib(bytes as f64)
            );
        }
    }
    Ok(())
}
