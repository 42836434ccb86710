//! The library's convolution: planned and compiled once ([`Conv2d::new`]), launched any number
//! of times on the caller's device memory and stream ([`Conv2d::launch`]), on the library's
//! [`Gemm`].
//!
//! A launch checks every tensor before anything is queued: x, the filter, y and the
//! epilogue's output-shaped tensors as channels-last 4-D layouts ([`crate::conv::tensors`]),
//! 16-byte aligned bases, extents against the buffers, outputs overlapping other tensors, the
//! workspace; then the GEMM checks what it checks, and only then is the gather (if any) queued,
//! followed by the GEMM. No host synchronization, no allocation.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use tessera_layout::Layout;

use crate::conv::im2col::{
    gathered_row, gemm_spec_for, padded_workspace, ChannelPadding, ConvPath, Im2col,
};
use crate::conv::kernel::{Gather, GatherArgs};
use crate::conv::spec::ConvSpec;
use crate::conv::tensors::{self, check_channels_last, Role};
use crate::conv::window::{WindowArgs, WindowStage};
use crate::epilogue::tree::Leaf;
use crate::error::{KernelError, Result};
use crate::launch::gemm::{Context, Gemm, OwnWorkspace};
use crate::launch::operand::{Bound, Elem, Operands, Tensor, TensorMut};
use crate::launch::runtime::driver_err;
use crate::launch::stage::{StageCopy, StageRows};
use crate::plan::gemm::Plan;

const OP: &str = "conv launch";

/// A planned and compiled 2-D convolution with its epilogue, `y = epilogue(conv2d(x, w))`, on
/// the caller's device memory and stream. `Send + Sync`.
///
/// It runs on the library's [`Gemm`]: where the im2col layout of x is a flat matrix (a 1x1
/// convolution of stride 1) the GEMM reads x and w directly; otherwise an im2col kernel first
/// copies A into a workspace (`M x K` elements; [`Conv2d::workspace_bytes`]), which the
/// `Conv2d` owns ([`Conv2d::new`]) or each launch passes ([`Conv2d::without_workspace`],
/// [`Operands::workspace`]).
///
/// ```no_run
/// # #[cfg(feature = "cuda")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use half::bf16;
/// use tessera_kernels::{Context, Conv2d, ConvSpec, Operands, Tensor};
/// let ctx = Context::new(0)?;
/// let stream = ctx.cudarc().default_stream();
/// // x (N,C,H,W) = (8,64,56,56), channels-last; w (K,C,R,S) = (64,64,3,3), K-R-S-C.
/// let x = stream.alloc_zeros::<bf16>(8 * 56 * 56 * 64)?;
/// let w = stream.alloc_zeros::<bf16>(64 * 3 * 3 * 64)?;
/// let bias = stream.alloc_zeros::<bf16>(64)?;
/// let skip = stream.alloc_zeros::<bf16>(8 * 56 * 56 * 64)?;
/// let mut y = stream.alloc_zeros::<bf16>(8 * 56 * 56 * 64)?;
/// let spec = ConvSpec::new([8, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1).bias_residual_relu();
/// let conv = Conv2d::new(&ctx, &spec)?;
/// // Strides as PyTorch reports them for a channels-last tensor, checked before launch.
/// let xl = "(8,64,56,56):(200704,1,3584,64)".parse()?;
/// conv.launch(&stream, Tensor::new(&x, xl), &w, &mut y, Operands::new().bias_col(&bias).residual(&skip))?;
/// # Ok(()) }
/// # #[cfg(not(feature = "cuda"))] fn main() {}
/// ```
pub struct Conv2d {
    ctx: Context,
    spec: ConvSpec,
    im2col: Im2col,
    path: ConvPath,
    gemm: Gemm,
    gather: Option<(Gather, GatherArgs)>,
    workspace_bytes: usize,
    own: Option<OwnWorkspace>,
    /// The GEMM loads A from x by TMA's im2col mode (the implicit GEMM).
    implicit: bool,
    /// The implicit GEMM's staged copies where C is not a multiple of 64, or where the
    /// filter is staged to fill its tile columns ([`ChannelPadding::stages`]).
    padded: Option<Padded>,
    /// The window path's staging kernels and their argument, and where the staged x starts
    /// in the workspace (C <= 8: [`crate::plan::WindowTma`]).
    window: Option<(WindowStage, WindowArgs, u64)>,
}

/// The copies the implicit GEMM runs on where C is not a multiple of 64 or the filter fills
/// its tile columns ([`ChannelPadding::stages`]): the filter with every tap's channels padded
/// with zeros to whole k-tiles and zero output channels up to `k_rows`, at the workspace's
/// start, and where x's pixels are not on 16 bytes, x with its pixels `pitch` apart, at
/// `x_at`.
struct Padded {
    stage: StageRows,
    w: StageCopy,
    w_elems: i64,
    x: Option<StageCopy>,
    x_at: u64,
    x_elems: i64,
}

impl Padded {
    fn new(
        rt: &crate::launch::runtime::Runtime,
        g: &crate::conv::spec::Geometry,
        pad: &ChannelPadding,
        eb: i64,
    ) -> Result<Padded> {
        let (_, x_at, _) = padded_workspace(g, pad, eb)?;
        let taps = g.r * g.s;
        Ok(Padded {
            stage: StageRows::new(rt)?,
            // K matrices (output channels) of R·S rows (taps) of C channels, into rows of
            // c_pad with zeros past C, and zero matrices up to k_rows (B's map spans them).
            w: StageCopy {
                rows: taps,
                cols: g.c,
                batch: pad.k_rows,
                src_ld: g.c,
                src_bs: taps * g.c,
                dst_ld: pad.c_pad,
                fill: pad.c_pad,
                src_batch: g.k,
            },
            w_elems: pad.k_rows * taps * pad.c_pad,
            // N·H·W pixels of C channels into pixels `pitch` apart, zeros past C: the tensor
            // map reads all `pitch` channels (im2col_candidate).
            x: pad.stages_x().then_some(StageCopy {
                rows: g.n * g.h * g.w,
                cols: g.c,
                batch: 1,
                src_ld: g.c,
                src_bs: 0,
                dst_ld: pad.pitch,
                fill: pad.pitch,
                src_batch: 1,
            }),
            x_at: x_at as u64,
            x_elems: g.n * g.h * g.w * pad.pitch,
        })
    }
}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Conv2d>();
};

/// A checked tensor: the bytes `[lo, hi)` a launch may touch.
#[derive(Clone, Copy, Debug)]
struct Span {
    name: &'static str,
    lo: u64,
    hi: u64,
    output: bool,
    elem: Elem,
}

impl Span {
    fn overlaps(&self, o: &Span) -> bool {
        self.lo < o.hi && o.lo < self.hi
    }
}

fn operand_err(name: &'static str, b: &Bound<'_>, rule: String) -> KernelError {
    KernelError::Operand {
        op: OP,
        operand: name,
        layout: b
            .layout
            .map_or_else(|| "(tight channels-last)".to_string(), |l| l.to_string()),
        rule,
    }
}

/// Checks one of the convolution's 4-D tensors: its element type (when the convolution fixes
/// it), a channels-last layout of logical sizes `dims`, a 16-byte aligned base and a buffer
/// that holds it.
fn check_4d(
    role: Role,
    dims: [i64; 4],
    b: &Bound<'_>,
    want: Option<Elem>,
    output: bool,
) -> Result<Span> {
    if let Some(want) = want {
        if b.elem != want {
            return Err(operand_err(
                role.name,
                b,
                format!("the buffer holds {}, the convolution needs {want}", b.elem),
            ));
        }
    }
    check_channels_last(OP, role, dims, b.layout)?;
    if b.ptr % 16 != 0 {
        return Err(operand_err(
            role.name,
            b,
            format!(
                "address {:#x} is not 16-byte aligned: a convolution's tensors start on 16 bytes (the GEMM's TMA loads and the gather's vector loads need it)",
                b.ptr
            ),
        ));
    }
    let elems: i64 = dims.iter().product();
    if (b.len as i64) < elems {
        return Err(operand_err(
            role.name,
            b,
            format!("needs {elems} elements, the buffer has {}", b.len),
        ));
    }
    Ok(Span {
        name: role.name,
        lo: b.ptr,
        hi: b.ptr + elems as u64 * b.elem.bytes(),
        output,
        elem: b.elem,
    })
}

/// The GEMM's errors in the convolution's terms: its A is x (or the workspace), its B the
/// filter, its D the output.
fn in_conv_terms(e: KernelError, direct: bool) -> KernelError {
    match e {
        KernelError::Operand {
            op,
            operand,
            layout,
            rule,
        } => KernelError::Operand {
            op,
            operand: match operand {
                "A" if direct => "x (the GEMM's A)",
                "A" => "the im2col workspace (the GEMM's A)",
                "B" => "w (the GEMM's B)",
                "D" => "y (the GEMM's D)",
                other => other,
            },
            layout,
            rule,
        },
        other => other,
    }
}

/// Outputs share memory with no other tensor, except y written in place over the residual or
/// c (the same elements, read before written, by the same thread).
fn no_output_overlaps(spans: &[Span]) -> Result<()> {
    for (i, a) in spans.iter().enumerate() {
        for b in spans.iter().skip(i + 1) {
            if !(a.output || b.output) || !a.overlaps(b) {
                continue;
            }
            let in_place = a.name == "y"
                && (b.name == "residual" || b.name == "c")
                && (a.lo, a.hi, a.elem) == (b.lo, b.hi, b.elem);
            if !in_place {
                return Err(KernelError::invalid(
                    OP,
                    format!(
                        "{} [{:#x}, {:#x}) overlaps {} [{:#x}, {:#x}): an output may share memory with no other tensor (y may be written in place over the residual or c, with the same layout)",
                        a.name, a.lo, a.hi, b.name, b.lo, b.hi
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `(rows, cols, batch)` with the given strides.
fn mat3(rows: i64, cols: i64, batch: i64, (sr, sc, sb): (i64, i64, i64)) -> Layout {
    Layout::new(
        tessera_layout::IntTuple::flat([rows, cols, batch]),
        tessera_layout::IntTuple::flat([sr, sc, sb]),
    )
    .expect("a flat rank-3 layout")
}

fn mat(rows: i64, cols: i64, sr: i64, sc: i64) -> Layout {
    format!("({rows},{cols}):({sr},{sc})")
        .parse()
        .expect("a flat rank-2 layout")
}

impl Conv2d {
    /// Plans `spec` for the context's device, compiles its kernels (once per process, or
    /// once per cache folder with a disk cache) and, on the gather path, allocates its
    /// workspace ([`Conv2d::workspace_bytes`]).
    pub fn new(ctx: &Context, spec: &ConvSpec) -> Result<Conv2d> {
        Conv2d::build(ctx, spec, true)
    }

    /// As [`Conv2d::new`] without a workspace of its own: every launch of a convolution that
    /// needs one passes it ([`Operands::workspace`], at least
    /// [`Conv2d::workspace_bytes`] bytes).
    pub fn without_workspace(ctx: &Context, spec: &ConvSpec) -> Result<Conv2d> {
        Conv2d::build(ctx, spec, false)
    }

    fn build(ctx: &Context, spec: &ConvSpec, own: bool) -> Result<Conv2d> {
        let rt = ctx.runtime();
        let g = spec.geometry()?;
        let im2col = Im2col::new(&g)?;
        let path = im2col.path();
        let gspec = gemm_spec_for(spec, rt.arch(), rt.sm_count() as i64)?;
        let gemm = Gemm::new(ctx, &gspec)?;
        debug_assert_eq!(
            gemm.plan().stream_k_bytes(),
            0,
            "the conv's GEMM takes no stream-K"
        );
        // The implicit GEMM (A loaded from x by TMA's im2col mode) needs no gather and no
        // workspace.
        let implicit = gemm.plan().problem_im2col().is_some();
        let workspace_bytes = spec.workspace_of(gemm.plan())?;
        let eb = spec.input().bytes();
        let padded = match gemm.plan().problem_im2col() {
            Some(t) => {
                let pad = ChannelPadding::new(&g, &t, eb);
                pad.stages()
                    .then(|| Padded::new(rt, &g, &pad, eb))
                    .transpose()?
            }
            None => None,
        };
        let window = match gemm.plan().problem_window() {
            Some(wd) => {
                let bm = gemm.plan().sm90().map_or(128, |p| p.cta_tile.0);
                let x_at = crate::conv::window::workspace(&g, &wd, eb)?.1 as u64;
                Some((WindowStage::new(rt)?, WindowArgs::new(&g, &wd, bm), x_at))
            }
            None => None,
        };
        let gather = match path {
            _ if implicit || window.is_some() => None,
            ConvPath::Gather => {
                let lda = gathered_row(g.gemm_k(), spec.input().bytes());
                Some((Gather::new(rt)?, GatherArgs::new(&im2col, lda)))
            }
            ConvPath::Direct { .. } => None,
        };
        let own = if own && workspace_bytes > 0 {
            Some(OwnWorkspace::new(
                rt,
                workspace_bytes,
                "cuMemAlloc (Conv2d workspace)",
            )?)
        } else {
            None
        };
        Ok(Conv2d {
            ctx: ctx.clone(),
            spec: spec.clone(),
            im2col,
            path,
            gemm,
            gather,
            workspace_bytes,
            own,
            implicit,
            padded,
            window,
        })
    }

    /// The spec.
    pub fn spec(&self) -> &ConvSpec {
        &self.spec
    }

    /// The plan of the GEMM the convolution runs.
    pub fn plan(&self) -> &Plan {
        self.gemm.plan()
    }

    /// `"gemm"` (the GEMM reads x directly as a matrix), `"implicit gemm"` (the GEMM loads
    /// A from x by TMA's im2col mode), `"halo gemm"` (the same GEMM loading one strip of x
    /// per filter row for all its taps, [`crate::plan::Halo`]), `"window gemm"` (C <= 8: the GEMM loads A from x
    /// staged in phase planes, batched over the output rows) or `"im2col+gemm"` (a gather into the workspace, then
    /// the GEMM).
    pub fn path(&self) -> &'static str {
        if self.window.is_some() {
            return "window gemm";
        }
        if self.implicit {
            return if self
                .gemm
                .plan()
                .problem_im2col()
                .is_some_and(|g| g.halo.is_some())
            {
                "halo gemm"
            } else {
                "implicit gemm"
            };
        }
        match self.path {
            ConvPath::Direct { .. } => "gemm",
            ConvPath::Gather => "im2col+gemm",
        }
    }

    /// Bytes of device workspace a launch needs (the im2col copy of A; 0 on the direct
    /// path). The `Conv2d` owns that much unless built [`Conv2d::without_workspace`].
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// Queues `y = epilogue(conv2d(x, w))` on `stream` and returns. x, w and y are the
    /// caller's memory, each with an optional layout over its logical sizes (`(N,C,H,W)`,
    /// `(K,C,R,S)`, `(N,K,P,Q)`) whose strides must be channels-last; without one the tensor
    /// is tight channels-last. The epilogue's tensors come in `ops`: the output-shaped ones
    /// (residual, c, aux_in, a full aux) as y, the vectors and bit masks as the GEMM takes
    /// them, and the workspace for a `Conv2d` built without one.
    ///
    /// Every tensor is checked first; an error names the tensor, its layout and the rule
    /// (for a stride: the dimension, the stride found and the stride expected), and nothing is
    /// queued.
    pub fn launch<'t>(
        &self,
        stream: &CudaStream,
        x: impl Into<Tensor<'t>>,
        w: impl Into<Tensor<'t>>,
        y: impl Into<TensorMut<'t>>,
        ops: Operands<'t>,
    ) -> Result<()> {
        let (x, w, mut y, mut ops) = (x.into(), w.into(), y.into(), ops);
        if stream.context().cu_ctx() != self.ctx.cudarc().cu_ctx() {
            return Err(KernelError::invalid(
                OP,
                "the stream belongs to another CUDA context than the Conv2d's",
            ));
        }
        // x and w stay bound (their guards alive) until the gather or the staging is queued.
        let xb = x.bind(stream);
        let mut spans = self.check_tensors(stream, &xb, &w, &mut y, &mut ops)?;
        let x_ptr = xb.ptr;
        let w_src = w.clone();
        let wb = w_src.bind(stream);
        let user_ws = ops.workspace.take();
        let caller_ws = user_ws.is_some();
        let (ws_ptr, ws_guard) = self.workspace_ptr(stream, user_ws)?;
        if let Some(p) = ws_ptr {
            let ws = Span {
                name: "workspace",
                lo: p,
                hi: p + self.workspace_bytes as u64,
                output: true,
                elem: Elem::Real(self.spec.input()),
            };
            if caller_ws {
                self.workspace_apart(stream, &ws, &mut ops)?;
            }
            spans.push(ws);
        }
        no_output_overlaps(&spans)?;
        let (w2, y2) = self.gemm_view(w, y, &mut ops);
        let own = self.own.as_ref().filter(|_| !caller_ws);
        let r = match (self.path, ws_ptr) {
            // The window path: x and the filter staged, then the batched GEMM on them.
            _ if self.window.is_some() => {
                let ws = ws_ptr.expect("workspace_ptr gives the window path a workspace");
                self.launch_window(stream, (x_ptr, wb.ptr), ws, own, y2, ops)
                    .map_err(|e| in_conv_terms(e, true))
            }
            // The implicit GEMM on padded channels: on the staged filter (and x).
            _ if self.implicit && self.padded.is_some() => {
                let ws = ws_ptr.expect("workspace_ptr gives the padded implicit GEMM a workspace");
                self.launch_padded(stream, (x.clone(), x_ptr), wb.ptr, ws, own, y2, ops)
                    .map_err(|e| in_conv_terms(e, true))
            }
            // The implicit GEMM: x itself is A, read through the im2col tensor map.
            _ if self.implicit => self
                .gemm
                .launch(stream, x.clone(), w2, y2, ops)
                .map_err(|e| in_conv_terms(e, true)),
            (ConvPath::Direct { lda }, _) => {
                let (m, k) = (self.im2col.g.gemm_m(), self.im2col.g.gemm_k());
                let x2 = x.clone().with_layout(mat(m, k, lda, 1));
                self.gemm
                    .launch(stream, x2, w2, y2, ops)
                    .map_err(|e| in_conv_terms(e, true))
            }
            (ConvPath::Gather, Some(a)) => self.launch_gather(stream, (x_ptr, a), own, w2, y2, ops),
            (ConvPath::Gather, None) => unreachable!("workspace_ptr gives the gather a workspace"),
        };
        drop(ws_guard);
        drop(wb);
        drop(xb);
        r
    }

    /// Checks x, the filter, y and the epilogue's output-shaped tensors (see [`check_4d`]);
    /// their spans, x's first.
    fn check_tensors(
        &self,
        stream: &CudaStream,
        xb: &Bound<'_>,
        w: &Tensor<'_>,
        y: &mut TensorMut<'_>,
        ops: &mut Operands<'_>,
    ) -> Result<Vec<Span>> {
        let g = &self.im2col.g;
        let input = Elem::Real(self.spec.input());
        let out = Elem::Real(self.spec.out());
        let out_dims = [g.n, g.k, g.p, g.q];
        let mut spans = vec![
            check_4d(tensors::X, [g.n, g.c, g.h, g.w], xb, Some(input), false)?,
            check_4d(
                tensors::W,
                [g.k, g.c, g.r, g.s],
                &w.bind(stream),
                Some(input),
                false,
            )?,
            check_4d(
                tensors::out("y"),
                out_dims,
                &y.bind(stream),
                Some(out),
                true,
            )?,
        ];
        // The epilogue's types are the GEMM's to check; bit masks keep the GEMM's layouts.
        let (bits_in, bits_out) = self.bit_masks();
        for (name, t) in [
            ("residual", ops.residual.as_ref()),
            ("c", ops.c.as_ref()),
            ("aux_in", ops.aux_in.as_ref().filter(|_| !bits_in)),
        ] {
            if let Some(t) = t {
                let b = t.bind(stream);
                spans.push(check_4d(tensors::out(name), out_dims, &b, None, false)?);
            }
        }
        if let Some(t) = ops.aux.as_mut().filter(|_| !bits_out) {
            let b = t.bind(stream);
            spans.push(check_4d(tensors::out("aux"), out_dims, &b, None, true)?);
        }
        Ok(spans)
    }

    /// Whether the epilogue reads a bit mask (`aux_in_bits`) and writes one (`aux_bits`).
    fn bit_masks(&self) -> (bool, bool) {
        (
            self.spec.tree.d.uses(Leaf::AuxInBits),
            self.gemm.plan().binding.aux.is_some_and(|s| s.bits),
        )
    }

    /// The workspace of a gather-path launch, the caller's or ours, with cudarc's guard of it
    /// (alive until the launch is queued); none on the direct path.
    fn workspace_ptr<'s>(
        &'s self,
        stream: &'s CudaStream,
        user: Option<&'s mut CudaSlice<u8>>,
    ) -> Result<(Option<u64>, Option<SyncOnDrop<'s>>)> {
        let need = self.workspace_bytes;
        // No copies: a workspace passed is not used.
        if need == 0 {
            return Ok((None, None));
        }
        let (p, g) = match (user, &self.own) {
            (Some(buf), _) => {
                if buf.len() < need {
                    return Err(KernelError::Operand {
                        op: OP,
                        operand: "workspace",
                        layout: format!("{} bytes", buf.len()),
                        rule: format!("the convolution needs {need} bytes ({})", self.copies()),
                    });
                }
                buf.device_ptr_mut(stream)
            }
            (None, Some(own)) => own.buf.device_ptr(stream),
            (None, None) => {
                return Err(KernelError::invalid(
                    OP,
                    format!(
                        "this Conv2d was built without a workspace: pass one of at least {need} bytes with Operands::workspace"
                    ),
                ))
            }
        };
        if p % 16 != 0 {
            return Err(KernelError::Operand {
                op: OP,
                operand: "workspace",
                layout: format!("{need} bytes"),
                rule: format!("address {p:#x} is not 16-byte aligned"),
            });
        }
        Ok((Some(p), Some(g)))
    }

    /// What the workspace holds, in words.
    fn copies(&self) -> &'static str {
        if self.window.is_some() {
            return "the filter and x staged for the window load";
        }
        match &self.padded {
            Some(p) if p.x.is_some() => "the filter and x staged with padded channels",
            Some(_) => "the filter staged with padded channels",
            None => "the im2col copy of A",
        }
    }

    /// The gather or the staging writes the caller's workspace: it may share memory with none
    /// of the GEMM's other tensors either (their buffers as given: the GEMM checks their layouts).
    fn workspace_apart(
        &self,
        stream: &CudaStream,
        ws: &Span,
        ops: &mut Operands<'_>,
    ) -> Result<()> {
        let (bits_in, bits_out) = self.bit_masks();
        let mut others: Vec<(&'static str, u64, u64)> = Vec::new();
        let mut note = |name, b: Bound<'_>| {
            others.push((name, b.ptr, b.ptr + b.len as u64 * b.elem.bytes()));
        };
        for (name, t) in [
            ("bias_row", ops.bias_row.as_ref()),
            ("bias_col", ops.bias_col.as_ref()),
            ("aux_in", ops.aux_in.as_ref().filter(|_| bits_in)),
        ] {
            if let Some(t) = t {
                note(name, t.bind(stream));
            }
        }
        for (name, t) in [
            ("aux", ops.aux.as_mut().filter(|_| bits_out)),
            ("bgrad_row", ops.bgrad_row.as_mut()),
            ("bgrad_col", ops.bgrad_col.as_mut()),
            ("sum_k_a", ops.sum_k_a.as_mut()),
            ("sum_k_b", ops.sum_k_b.as_mut()),
        ] {
            if let Some(t) = t {
                note(name, t.bind(stream));
            }
        }
        match others
            .into_iter()
            .find(|&(_, lo, hi)| lo < ws.hi && ws.lo < hi)
        {
            Some((name, lo, hi)) => Err(KernelError::invalid(
                OP,
                format!(
                    "the workspace [{:#x}, {:#x}) overlaps {name} [{lo:#x}, {hi:#x}): {} written there",
                    ws.lo, ws.hi, self.copies()
                ),
            )),
            None => Ok(()),
        }
    }

    /// The GEMM's view of the tensors: B is w as `K x N` column-major, D and the
    /// output-shaped tensors of the epilogue are `(M, N)` row-major.
    fn gemm_view<'t>(
        &self,
        w: Tensor<'t>,
        y: TensorMut<'t>,
        ops: &mut Operands<'t>,
    ) -> (Tensor<'t>, TensorMut<'t>) {
        let g = &self.im2col.g;
        let (m, n, k) = (g.gemm_m(), g.k, g.gemm_k());
        // The window path's GEMM is batched over the output rows (n, p): Q x K each, Q·K
        // elements apart (y's channels-last order unchanged).
        let mn = match self.window {
            Some(_) => mat3(g.q, n, g.n * g.p, (n, 1, g.q * n)),
            None => mat(m, n, n, 1),
        };
        let (bits_in, bits_out) = self.bit_masks();
        ops.residual = ops.residual.take().map(|t| t.with_layout(mn.clone()));
        ops.c = ops.c.take().map(|t| t.with_layout(mn.clone()));
        if !bits_in {
            ops.aux_in = ops.aux_in.take().map(|t| t.with_layout(mn.clone()));
        }
        if !bits_out {
            ops.aux = ops.aux.take().map(|t| t.with_layout(mn.clone()));
        }
        (w.with_layout(mat(k, n, 1, k)), y.with_layout(mn))
    }

    /// The window path: the filter and x staged into the workspace at `ws`, queued after the
    /// GEMM's checks (ordered after the previous user of our own workspace), then the batched
    /// GEMM on the copies, the staged filter shared by every batch.
    fn launch_window<'t>(
        &self,
        stream: &CudaStream,
        (x_ptr, w_ptr): (u64, u64),
        ws: u64,
        own: Option<&OwnWorkspace>,
        y: TensorMut<'t>,
        ops: Operands<'t>,
    ) -> Result<()> {
        let (stage, args, x_at) = self.window.as_ref().expect("the window path's copies");
        let wd = self
            .gemm
            .plan()
            .problem_window()
            .expect("the window path's plan");
        let g = &self.im2col.g;
        let input = self.spec.input();
        let kk = wd.gemm_k();
        let xs_elems = wd.staged_elems().expect("checked when planned");
        // SAFETY: the workspace holds the staged filter (K·kk elements) at its start and the
        // staged x at x_at (sized by window::workspace, checked against a caller's), and
        // outlives the launch: the caller's is borrowed for 't, ours lives with self.
        let b = unsafe { Tensor::from_raw(ws, Some(input), (g.k * kk) as usize) }
            .with_layout(mat3(kk, g.k, g.n * g.p, (1, kk, 0)));
        let a = unsafe { Tensor::from_raw(ws + x_at, Some(input), xs_elems as usize) };
        let sms = self.ctx.sm_count();
        self.launch_staged(stream, own, (a, b, y, ops), || {
            // SAFETY: x and w are checked (channels-last, N·H·W·C and K·R·S·C elements,
            // 16-byte aligned) and bound on this stream; the workspace regions hold the
            // copies' elements, 256-byte aligned.
            unsafe { stage.launch(stream, args, (x_ptr, w_ptr), (ws + x_at, ws), sms) }
        })
    }

    /// The GEMM on `operands` after `copies` (the staging or the gather into the workspace),
    /// queued after the GEMM's checks: with our own workspace, `copies` first claims it
    /// (ordered after its previous user) and the launch records its release.
    fn launch_staged<'t>(
        &self,
        stream: &CudaStream,
        own: Option<&OwnWorkspace>,
        (a, b, y, ops): (Tensor<'t>, Tensor<'t>, TensorMut<'t>, Operands<'t>),
        mut copies: impl FnMut() -> Result<()>,
    ) -> Result<()> {
        let mut guard = None;
        let mut prologue = || -> Result<()> {
            if let Some(own) = own {
                guard = Some(own.claim(stream)?);
            }
            copies()
        };
        let r = self
            .gemm
            .launch_with_prologue(stream, a, b, y, ops, &mut prologue);
        if let (Some(own), Some(_held)) = (own, &guard) {
            own.done
                .record(stream)
                .map_err(driver_err("cuEventRecord (conv workspace)"))?;
        }
        r
    }

    /// The implicit GEMM on padded channels: the filter (and x) staged into the workspace at
    /// `ws`, queued after the GEMM's checks (ordered after the previous user of our own
    /// workspace), then the GEMM on the copies.
    #[allow(clippy::too_many_arguments)]
    fn launch_padded<'t>(
        &self,
        stream: &CudaStream,
        (x, x_ptr): (Tensor<'t>, u64),
        w_ptr: u64,
        ws: u64,
        own: Option<&OwnWorkspace>,
        y: TensorMut<'t>,
        ops: Operands<'t>,
    ) -> Result<()> {
        let pad = self.padded.as_ref().expect("the padded path's copies");
        let t = self
            .gemm
            .plan()
            .problem_im2col()
            .expect("the padded path is an implicit GEMM");
        let input = self.spec.input();
        let (kk, n) = (t.gemm_k(), self.im2col.g.k);
        // SAFETY: the workspace holds the staged filter at its start and the staged x at
        // x_at (sized by padded_workspace, checked against a caller's) and outlives the
        // launch: the caller's is borrowed for 't, ours lives with self.
        let b = unsafe { Tensor::from_raw(ws, Some(input), pad.w_elems as usize) }
            .with_layout(mat(kk, n, 1, kk));
        let a = match pad.x {
            Some(_) => unsafe {
                Tensor::from_raw(ws + pad.x_at, Some(input), pad.x_elems as usize)
            },
            None => x,
        };
        let sms = self.ctx.sm_count();
        self.launch_staged(stream, own, (a, b, y, ops), || {
            // SAFETY: w and x are checked (channels-last, K·R·S·C and N·H·W·C elements,
            // 16-byte aligned) and bound on this stream; the workspace regions hold the
            // copies' K·R·S·c_pad and N·H·W·pitch elements, 256-byte aligned. x's copy may
            // start while the filter's runs (launched right after it, it reads x and writes
            // its own region, neither of which the filter's copy touches).
            unsafe {
                let x_next = pad.x.is_some();
                pad.stage
                    .launch(stream, &pad.w, (w_ptr, ws), sms, (x_next, false))?;
                if let Some(c) = &pad.x {
                    pad.stage
                        .launch(stream, c, (x_ptr, ws + pad.x_at), sms, (false, true))?;
                }
            }
            Ok(())
        })
    }

    /// The gather path: the gather into the workspace at `a`, queued after the GEMM's checks
    /// (ordered after the previous user of our own workspace), then the GEMM on it.
    fn launch_gather<'t>(
        &self,
        stream: &CudaStream,
        (x, a): (u64, u64),
        own: Option<&OwnWorkspace>,
        w: Tensor<'t>,
        y: TensorMut<'t>,
        ops: Operands<'t>,
    ) -> Result<()> {
        let g = &self.im2col.g;
        let (m, k) = (g.gemm_m(), g.gemm_k());
        let (gather, args) = self.gather.as_ref().expect("the gather path's kernel");
        // SAFETY: the workspace holds M x lda elements (checked, or ours) and outlives the
        // launch: the caller's is borrowed for 't, ours lives with self.
        let lda = gathered_row(k, self.spec.input().bytes());
        let at = unsafe { Tensor::from_raw(a, Some(self.spec.input()), (m * lda) as usize) }
            .with_layout(mat(m, k, lda, 1));
        let sms = self.ctx.sm_count();
        self.launch_staged(stream, own, (at, w, y, ops), || {
            // SAFETY: x (checked: N·H·W·C elements, 16-byte aligned, bound on this stream)
            // and the workspace (M x K elements) are valid for the launch.
            unsafe { gather.launch(stream, args, x, a, sms) }
        })
        .map_err(|e| in_conv_terms(e, false))
    }
}
