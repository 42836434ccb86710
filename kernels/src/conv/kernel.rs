//! The im2col gather kernel (`im2col.cuh`): compiled once per context, launched with the
//! im2col layout of a convolution as its argument.

use cudarc::driver::{CudaFunction, CudaStream};

use crate::conv::im2col::{gather_source, Im2col, GATHER_KERNEL};
use crate::error::Result;
use crate::launch::mem::{launch_kernel, param};
use crate::launch::runtime::Runtime;

/// The kernel's argument, field for field `tessera_conv_im2col_args`: the im2col layout's
/// shape, strides and offset, and the predicate's geometry.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GatherArgs {
    q: i64,
    p: i64,
    n: i64,
    c: i64,
    s: i64,
    r: i64,
    sq: i64,
    sp: i64,
    sn: i64,
    ss: i64,
    sr: i64,
    offset: i64,
    h: i64,
    w: i64,
    sh: i64,
    sw: i64,
    pt: i64,
    pl: i64,
    dh: i64,
    dw: i64,
    lda: i64,
}

// The kernel's `static_assert` checks the same size.
const _: () = assert!(std::mem::size_of::<GatherArgs>() == 168);

impl GatherArgs {
    /// The argument for `a`, its shape and strides read off the layout itself, writing rows
    /// of A `lda` elements apart.
    pub fn new(a: &Im2col, lda: i64) -> GatherArgs {
        let shape = a.layout.shape().leaves();
        let stride = a.layout.stride().leaves();
        debug_assert_eq!(stride[3], 1, "C is contiguous");
        let g = &a.g;
        GatherArgs {
            q: shape[0],
            p: shape[1],
            n: shape[2],
            c: shape[3],
            s: shape[4],
            r: shape[5],
            sq: stride[0],
            sp: stride[1],
            sn: stride[2],
            ss: stride[4],
            sr: stride[5],
            offset: a.offset,
            h: g.h,
            w: g.w,
            sh: g.stride.0,
            sw: g.stride.1,
            pt: g.pad.0,
            pl: g.pad.2,
            dh: g.dil.0,
            dw: g.dil.1,
            lda,
        }
    }

    /// Channels of a tap a thread copies as one vector (8 or 4, the widest dividing C), or
    /// `None` where the gather takes whole 16-byte chunks of A's rows instead
    /// (`tessera_conv_im2col_rows8`): C not a multiple of 4, where a tap's chunk would be a
    /// store narrower than 8 bytes. (Measured: rows of 8 ran 2.3-2.5x faster than one channel
    /// a thread for C = 3 and 127, and 17-20% slower than 4 channels for C = 100 and 124;
    /// docs/perf.md.)
    pub fn tap_width(&self) -> Option<i64> {
        [8, 4].into_iter().find(|v| self.c % v == 0)
    }
}

/// The gather kernel's entry points: 8 or 4 channels of a tap per thread, or 8 elements of a
/// row per thread ([`GatherArgs::tap_width`]).
pub(crate) struct Gather {
    taps8: CudaFunction,
    taps4: CudaFunction,
    rows8: CudaFunction,
}

impl Gather {
    /// Compiles (or finds in the context's cache) the kernel.
    pub fn new(rt: &Runtime) -> Result<Gather> {
        let src = gather_source();
        let f =
            |entry: &str| rt.function(&src, GATHER_KERNEL, &format!("{GATHER_KERNEL}_{entry}"), 0);
        Ok(Gather {
            taps8: f("taps8")?,
            taps4: f("taps4")?,
            rows8: f("rows8")?,
        })
    }

    /// Queues the gather of A (at device address `a`, `M` rows `lda` elements apart) from x
    /// (at `x`) on `stream`, with a grid of at most 32 CTAs per SM.
    ///
    /// # Safety
    /// `x` must address x's `N·H·W·C` elements and `a` the `M x lda` elements of A, both
    /// 16-byte aligned and valid on `stream` until the kernel has run.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        args: &GatherArgs,
        x: u64,
        a: u64,
        sms: i64,
    ) -> Result<()> {
        let k = args.c * args.s * args.r;
        let m = args.q * args.p * args.n;
        let (func, chunks) = match args.tap_width() {
            Some(8) => (&self.taps8, m * k / 8),
            Some(_) => (&self.taps4, m * k / 4),
            None => (&self.rows8, m * ((k + 7) / 8)),
        };
        let blocks = ((chunks + 255) / 256).clamp(1, (32 * sms).max(1));
        let mut params = [param(&x), param(&a), param(args)];
        launch_kernel(
            func,
            stream,
            (blocks as u32, 1, 1),
            (256, 1, 1),
            0,
            &mut params,
            "launch tessera_conv_im2col",
        )
    }
}
