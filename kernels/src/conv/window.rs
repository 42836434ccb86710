//! The window path: convolutions of few input channels (C <= 8) on the Hopper GEMM with A
//! loaded by the window load ([`WindowTma`]; `window.cuh` stages x into phase planes and the
//! filter into the k-tiles' order, then the GEMM runs batched over the output rows).

use crate::arch::Arch;
use crate::conv::im2col::{est_gather, EST_BYTES, EST_FLOPS};
use crate::conv::spec::{ConvSpec, Geometry};
use crate::epilogue::tree::{AuxFormat, EpilogueTree, Expr, Leaf, Sink};
use crate::error::{KernelError, Result};
use crate::plan::window::{WindowTma, CHUNK_CHANNELS};

/// The staging kernels' module name and entry points.
pub(crate) const WINDOW_KERNEL: &str = "tessera_conv_window";

/// The staging kernels' source, exactly as NVRTC compiles it.
pub(crate) fn window_source() -> String {
    format!(
        "// tessera: the window load's staged copies of a convolution\n{}",
        include_str!("window.cuh")
    )
}

/// Whether the epilogue tree means the same over the window GEMM's batched view (batch
/// `(n, p)`, rows q) as over the convolution's `(N·P·Q) x K`: no output coordinates, no
/// per-row vector, no bit masks (their rows are packed), no sums (they would be per batch).
pub(crate) fn tree_fits(tree: &EpilogueTree) -> bool {
    tree.sum_k.is_empty()
        && !tree.d.any(&|e| {
            matches!(
                e,
                Expr::Leaf(Leaf::Coord(_) | Leaf::BiasRow | Leaf::AuxInBits)
                    | Expr::Sink(Sink::Bgrad(_) | Sink::Aux(AuxFormat::Bits), _)
            )
        })
}

/// The window geometry of `spec`, where the window load can take it on `arch` and no
/// option forces another path; `None` otherwise.
pub(crate) fn candidate(spec: &ConvSpec, arch: Arch) -> Result<Option<WindowTma>> {
    let g = spec.geometry()?;
    let o = &spec.options;
    if arch != Arch::Sm90a
        || g.c > CHUNK_CHANNELS
        || o.sm80
        || o.cluster.is_some()
        || o.stream_k == Some(true)
        || !tree_fits(spec.tree())
        || g.n.checked_mul(g.p).map_or(true, |b| b > i32::MAX as i64)
    {
        return Ok(None);
    }
    let wd = of(&g);
    // Either tile height must be possible (the planner picks it from Q).
    if wd.refusal(64).is_some() || wd.refusal(128).is_some() || wd.staged_elems().is_none() {
        return Ok(None);
    }
    Ok(Some(wd))
}

/// The window geometry of a convolution.
pub(crate) fn of(g: &Geometry) -> WindowTma {
    WindowTma { conv: g.loads() }
}

/// The roofline estimate of the window path in seconds, as the other paths' (660 TF/s,
/// 3.0 TB/s, N rounded up to 128-wide tiles): the MMA work of whole tiles of output pixels
/// of one output row (64 or 128 of them) over `64·k_tiles` of K, plus x read once and its
/// staged copy written and read back.
pub(crate) fn estimate(g: &Geometry, wd: &WindowTma, eb: i64) -> f64 {
    let f = |v: i64| v as f64;
    let bm = if g.q <= 64 { 64 } else { 128 };
    let rows = f(g.n) * f(g.p) * f((g.q + bm - 1) / bm * bm);
    let n = f((g.k + 127) / 128 * 128);
    let x = f(g.n) * f(g.h) * f(g.w) * f(g.c) * f(eb);
    let staged = f(wd.staged_elems().unwrap_or(i64::MAX)) * f(eb);
    2.0 * rows * n * f(wd.gemm_k()) / EST_FLOPS + (x + 2.0 * staged) / EST_BYTES
}

/// Whether the window path's estimate beats the gather's (and, where TMA's im2col load
/// could take the layer, the padded implicit GEMM's, `implicit` seconds).
pub(crate) fn preferred(g: &Geometry, wd: &WindowTma, eb: i64, implicit: Option<f64>) -> bool {
    let w = estimate(g, wd, eb);
    w < est_gather(g, eb) && implicit.map_or(true, |i| w < i)
}

/// The workspace of the window path: the staged filter at 0 (`K·k_tiles·64` elements), then,
/// 256-byte aligned, the staged x; `(filter bytes, offset of x, total bytes)`.
pub(crate) fn workspace(g: &Geometry, wd: &WindowTma, eb: i64) -> Result<(i64, i64, i64)> {
    let over = || KernelError::invalid("conv workspace", "the staged copies' bytes overflow i64");
    let wb = [g.k, wd.gemm_k(), eb]
        .iter()
        .try_fold(1i64, |a, &v| a.checked_mul(v))
        .ok_or_else(over)?;
    let x_at = wb.checked_add(255).ok_or_else(over)? / 256 * 256;
    let xb = wd
        .staged_elems()
        .and_then(|e| e.checked_mul(eb))
        .ok_or_else(over)?;
    Ok((wb, x_at, x_at.checked_add(xb).ok_or_else(over)?))
}

/// The staging kernels' argument, field for field `tessera_conv_window_args`.
#[cfg(any(test, feature = "cuda"))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowArgs {
    n: i64,
    h: i64,
    w: i64,
    c: i64,
    planes: i64,
    u: i64,
    pl: i64,
    k: i64,
    r: i64,
    s: i64,
    k_tiles: i64,
    rows: i64,
    slot_r: [i32; 8],
    slot_s: [i32; 8],
}

// The kernel's `static_assert` checks the same size.
#[cfg(any(test, feature = "cuda"))]
const _: () = assert!(std::mem::size_of::<WindowArgs>() == 160);

#[cfg(any(test, feature = "cuda"))]
impl WindowArgs {
    /// The argument for `wd` with the plan's tile height `bm` (the slots' order is the
    /// same for either height; only their stage offsets differ).
    pub fn new(g: &Geometry, wd: &WindowTma, bm: i64) -> WindowArgs {
        let mut slot_r = [0i32; 8];
        let mut slot_s = [-1i32; 8];
        for (i, sl) in wd.slots(bm).iter().enumerate() {
            if let Some((rl, s)) = sl.tap {
                slot_r[i] = rl as i32;
                slot_s[i] = s as i32;
            }
        }
        WindowArgs {
            n: g.n,
            h: g.h,
            w: g.w,
            c: g.c,
            planes: wd.planes(),
            u: wd.chunks(),
            pl: g.pad.2,
            k: g.k,
            r: g.r,
            s: g.s,
            k_tiles: wd.k_tiles(),
            rows: wd.rows_per_ktile(),
            slot_r,
            slot_s,
        }
    }
}

#[cfg(feature = "cuda")]
pub(crate) use gpu::WindowStage;

#[cfg(feature = "cuda")]
mod gpu {
    use cudarc::driver::{CudaFunction, CudaStream};

    use super::{window_source, WindowArgs, WINDOW_KERNEL};
    use crate::error::Result;
    use crate::launch::mem::{launch_kernel, param};
    use crate::launch::runtime::Runtime;

    /// The compiled staging kernels.
    pub(crate) struct WindowStage {
        x: CudaFunction,
        w: CudaFunction,
    }

    impl WindowStage {
        /// Compiles (or finds in the context's cache) the kernels.
        pub fn new(rt: &Runtime) -> Result<WindowStage> {
            let src = window_source();
            let f = |e: &str| rt.function(&src, WINDOW_KERNEL, &format!("{WINDOW_KERNEL}_{e}"), 0);
            Ok(WindowStage {
                x: f("x")?,
                w: f("w")?,
            })
        }

        /// Queues both copies on `stream`: the filter at `w` into `ws`, x at `x` into `xs`.
        ///
        /// # Safety
        /// `x` and `w` must address x's `N·H·W·C` and the filter's `K·R·S·C` elements, `ws`
        /// the `K·k_tiles·64` and `xs` the `N·H·planes·chunks·8` elements written, 16-byte
        /// aligned; all valid on `stream` until the kernels have run.
        pub unsafe fn launch(
            &self,
            stream: &CudaStream,
            args: &WindowArgs,
            (x, w): (u64, u64),
            (xs, ws): (u64, u64),
            sms: i64,
        ) -> Result<()> {
            let grid = |chunks: i64| ((chunks + 255) / 256).clamp(1, (16 * sms).max(1)) as u32;
            let wchunks = args.k * args.k_tiles * 8;
            // x: one CTA a row of chunks (4 rows an iteration), at most 32 CTAs an SM.
            let xrows = ((args.n * args.h + 3) / 4).clamp(1, (32 * sms).max(1)) as u32;
            let mut pw = [param(&w), param(&ws), param(args)];
            launch_kernel(
                &self.w,
                stream,
                (grid(wchunks), 1, 1),
                (256, 1, 1),
                0,
                &mut pw,
                "launch tessera_conv_window_w",
            )?;
            let mut px = [param(&x), param(&xs), param(args)];
            launch_kernel(
                &self.x,
                stream,
                (xrows, 1, 1),
                (256, 1, 1),
                0,
                &mut px,
                "launch tessera_conv_window_x",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::spec::ConvSpec;

    #[test]
    fn the_stem_takes_the_window_path() {
        let spec = ConvSpec::new([256, 3, 224, 224], [64, 3, 7, 7])
            .stride(2, 2)
            .padding(3, 3, 3, 3);
        let wd = candidate(&spec, Arch::Sm90a).unwrap().unwrap();
        let g = spec.geometry().unwrap();
        assert!(estimate(&g, &wd, 2) < est_gather(&g, 2));
        assert!(preferred(&g, &wd, 2, None));
        // 9 channels, an sm80-class device, a per-row bias: not the window.
        let nine = ConvSpec::new([8, 9, 32, 32], [16, 9, 3, 3]);
        assert_eq!(candidate(&nine, Arch::Sm90a).unwrap(), None);
        assert_eq!(candidate(&spec, Arch::Sm80).unwrap(), None);
        let row = spec.clone().epilogue("acc + bias_row").unwrap();
        assert_eq!(candidate(&row, Arch::Sm90a).unwrap(), None);
        let res = spec.epilogue("relu(acc + bias_col + residual)").unwrap();
        assert!(candidate(&res, Arch::Sm90a).unwrap().is_some());
    }

    #[test]
    fn epilogues_that_change_meaning_in_the_batched_view_keep_another_path() {
        use crate::epilogue::parse::parse_epilogue;
        let fits = |e: &str| tree_fits(&parse_epilogue(e).unwrap());
        for e in [
            "acc",
            "relu(acc + bias_col + residual)",
            "gelu(aux(acc + bias_col))",
            "alpha * acc + beta * c",
            "acc * aux_in",
        ] {
            assert!(fits(e), "{e}");
        }
        // Output coordinates (the batched view's row is q), a per-row vector, bit masks
        // (packed along rows), sums (per batch).
        for e in [
            "select(row < 100, acc, 0.0)",
            "select(batch < 1, acc, 0.0)",
            "acc + bias_row",
            "relu_aux(acc + bias_col)",
            "acc * aux_in_bits",
            "bgrad_col(acc)",
        ] {
            assert!(!fits(e), "{e}");
        }
    }

    #[test]
    fn the_filter_slots_follow_the_k_order() {
        let spec = ConvSpec::new([1, 3, 20, 20], [4, 3, 7, 7])
            .stride(2, 2)
            .padding(3, 3, 3, 3);
        let g = spec.geometry().unwrap();
        let a = WindowArgs::new(&g, &of(&g), 128);
        // Plane 0 takes the even taps, plane 1 the odd ones, then the zero strip.
        assert_eq!(a.slot_s, [0, 2, 4, 6, 1, 3, 5, -1]);
        assert_eq!(a.slot_r, [0; 8]);
        assert_eq!((a.k_tiles, a.rows, a.planes, a.u), (7, 1, 2, 16));
    }
}
