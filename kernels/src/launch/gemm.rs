//! The library's GEMM: planned and compiled once ([`Gemm::new`]), launched any number of times
//! on the caller's device memory and stream ([`Gemm::launch`]).
//!
//! A launch checks every operand before anything reaches the GPU (element type, layout,
//! extent against the buffer, alignment, outputs that overlap other operands, tensors the
//! epilogue does not use or lacks) and then only queues work on the stream: no host
//! synchronization, no allocation.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};
use tessera_layout::Layout;

use crate::arch::Arch;
use crate::epilogue::check::{Binding, MatSpec, VecSpec};
use crate::epilogue::tree::{Leaf, Operand, Sink, VecAxis};
use crate::error::{KernelError, Result};
use crate::launch::mem::{LaunchCtx, Mem};
use crate::launch::operand::{Bound, Elem, Operands, Tensor, TensorMut};
use crate::launch::runtime::{driver_err, CompileStats, Runtime};
use crate::launch::sm90::on_byte_grid;
use crate::launch::stage::{StageCopy, StageRows};
use crate::launch::tree::{EpBuffers, OperandSum, TreeKernel};
use crate::plan::gemm::{GemmSpec, Plan};
use crate::plan::problem::{DType, GemmStrides, Major};

/// A CUDA device as tessera uses it: the caller's cudarc context, its target, and the cache
/// of compiled kernels (in memory, and on disk when a cache folder is set, so that another
/// process finds a kernel without compiling it). Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Context {
    rt: Arc<Runtime>,
}

impl Context {
    /// The primary context of device `ordinal`. The disk cache is `TESSERA_CACHE_DIR` when
    /// that is set.
    pub fn new(ordinal: usize) -> Result<Context> {
        Context::from_cudarc(Runtime::device_context(ordinal)?)
    }

    /// tessera on the caller's cudarc context.
    pub fn from_cudarc(ctx: Arc<CudaContext>) -> Result<Context> {
        Ok(Context {
            rt: Arc::new(Runtime::from_context(ctx)?),
        })
    }

    #[cfg(feature = "bench")]
    pub(crate) fn from_runtime(rt: Runtime) -> Context {
        Context { rt: Arc::new(rt) }
    }

    /// Keeps compiled kernels in `dir` too (`None`: in memory only), keyed by a hash of the
    /// source, the NVRTC version and the options, which name the target.
    pub fn with_cache_dir(self, dir: Option<PathBuf>) -> Context {
        self.rt.set_cache_dir(dir);
        self
    }

    /// The cudarc context.
    pub fn cudarc(&self) -> &Arc<CudaContext> {
        self.rt.context()
    }

    /// The device's target.
    pub fn arch(&self) -> Arch {
        self.rt.arch()
    }

    /// The device's streaming multiprocessors.
    pub fn sm_count(&self) -> i64 {
        self.rt.sm_count() as i64
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        self.rt.device_name()
    }

    /// What the kernel cache has done so far (compiles, their time, cache hits).
    pub fn compile_stats(&self) -> CompileStats {
        self.rt.compile_stats()
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        &self.rt
    }
}

/// The workspace a `Gemm` owns, and the ordering of its users: a launch on a stream other
/// than the previous user's first waits for the previous launch (an event), so the partial
/// sums of two launches never mix.
pub(crate) struct OwnWorkspace {
    pub(crate) buf: CudaSlice<u8>,
    /// The previous user's stream (its handle as an integer; 0 before the first launch).
    last: Mutex<usize>,
    /// Recorded on the user's stream once its launch has queued its last use.
    pub(crate) done: CudaEvent,
}

impl OwnWorkspace {
    /// `bytes` of zeroed device memory (`what` names it in a driver error), ready before
    /// this returns.
    pub(crate) fn new(rt: &Runtime, bytes: usize, what: &'static str) -> Result<OwnWorkspace> {
        let stream = rt.stream();
        let buf = stream.alloc_zeros::<u8>(bytes).map_err(driver_err(what))?;
        stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))?;
        let done = rt
            .context()
            .new_event(None)
            .map_err(driver_err("cuEventCreate"))?;
        Ok(OwnWorkspace {
            buf,
            last: Mutex::new(0),
            done,
        })
    }

    /// Orders `stream` after the workspace's previous user (on another stream) and takes the
    /// lock that keeps it this stream's until the caller records `done` and drops the guard.
    pub(crate) fn claim(&self, stream: &CudaStream) -> Result<MutexGuard<'_, usize>> {
        let mut last = self
            .last
            .lock()
            .map_err(|_| KernelError::invalid(OP, "workspace lock poisoned"))?;
        let this = stream.cu_stream() as usize;
        if *last != 0 && *last != this {
            stream
                .wait(&self.done)
                .map_err(driver_err("cuStreamWaitEvent (workspace)"))?;
        }
        *last = this;
        Ok(last)
    }
}

/// A planned and compiled GEMM with its epilogue: `D = epilogue(A B)` on the caller's device
/// memory and stream. `Send + Sync`: one `Gemm` may serve several threads and streams.
///
/// ```no_run
/// # #[cfg(feature = "cuda")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use tessera_kernels::{Context, Gemm, GemmSpec, Major, Operands};
/// let ctx = Context::new(0)?;
/// let stream = ctx.cudarc().default_stream();
/// let (m, n, k) = (256, 512, 128);
/// let a = stream.alloc_zeros::<half::bf16>(m * k)?;
/// let b = stream.alloc_zeros::<half::bf16>(n * k)?;
/// let bias = stream.alloc_zeros::<half::bf16>(n)?;
/// let mut d = stream.alloc_zeros::<half::bf16>(m * n)?;
/// let spec = GemmSpec::new(m as i64, n as i64, k as i64).b(Major::Col).epilogue("relu(acc + bias_col)")?;
/// let gemm = Gemm::new(&ctx, &spec)?;
/// gemm.launch(&stream, &a, &b, &mut d, Operands::new().bias_col(&bias))?;
/// # Ok(()) }
/// # #[cfg(not(feature = "cuda"))] fn main() {}
/// ```
pub struct Gemm {
    ctx: Context,
    plan: Plan,
    kernel: TreeKernel,
    sums: Option<OperandSum>,
    /// The staging copy, where the plan stages A and B ([`Plan::staged_k`]).
    stage: Option<StageRows>,
    workspace: Option<OwnWorkspace>,
    built: CompileStats,
}

// A `Gemm` is shared between threads: its kernels are immutable after construction and its
// workspace is behind a lock.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Gemm>();
    send_sync::<Context>();
};

const OP: &str = "gemm launch";

fn operand_err(operand: &'static str, layout: String, rule: String) -> KernelError {
    KernelError::Operand {
        op: OP,
        operand,
        layout,
        rule,
    }
}

/// A matrix's storage as the kernels take it: elements (bits for a bit mask) between rows of
/// its storage order and between batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Strides {
    ld: i64,
    batch: i64,
}

/// What an operand is, for its checks.
#[derive(Clone, Copy)]
struct Want {
    name: &'static str,
    elem: Elem,
    output: bool,
}

fn describe_layout(l: Option<&Layout>, tight: &dyn Fn() -> String) -> String {
    match l {
        Some(l) => l.to_string(),
        None => format!("{} (tight)", tight()),
    }
}

/// The extent, in elements, of `batch` matrices of `outer` rows of `inner` elements.
fn span(batch: i64, bs: i64, outer: i64, ld: i64, inner: i64) -> Option<i64> {
    (batch - 1)
        .checked_mul(bs)?
        .checked_add((outer - 1).checked_mul(ld)?)?
        .checked_add(inner)
}

/// The strides of a `rows x cols` matrix (`batch` of them) stored in `major` order, read off
/// its layout (`(rows, cols)` or `(rows, cols, batch)`, flat, non-negative strides, unit
/// stride along the contiguous extent), or the tight ones without a layout. `bits`: counted
/// in bits, rows padded to 128 bits when tight.
fn matrix_strides(
    w: Want,
    layout: Option<&Layout>,
    (rows, cols, batch): (i64, i64, i64),
    major: Major,
    bits: bool,
) -> Result<Strides> {
    let (outer, inner) = match major {
        Major::Row => (rows, cols),
        Major::Col => (cols, rows),
    };
    let tight_ld = if bits {
        (inner + 127) / 128 * 128
    } else {
        inner
    };
    let tight = || {
        let (sr, sc) = match major {
            Major::Row => (tight_ld, 1),
            Major::Col => (1, tight_ld),
        };
        if batch > 1 {
            format!("({rows},{cols},{batch}):({sr},{sc},{})", outer * tight_ld)
        } else {
            format!("({rows},{cols}):({sr},{sc})")
        }
    };
    let Some(l) = layout else {
        return Ok(Strides {
            ld: tight_ld,
            batch: outer * tight_ld,
        });
    };
    let err = |rule: String| operand_err(w.name, describe_layout(Some(l), &tight), rule);
    let shape = l.shape().leaves();
    let stride = l.stride().leaves();
    let want_shape = format!(
        "({rows},{cols}){}",
        if batch > 1 {
            format!(" or ({rows},{cols},{batch})")
        } else {
            format!(" or ({rows},{cols},1)")
        }
    );
    let expected = if batch > 1 {
        shape.len() == 3 && shape[..] == [rows, cols, batch]
    } else {
        (shape.len() == 2 && shape[..] == [rows, cols])
            || (shape.len() == 3 && shape[..] == [rows, cols, 1])
    };
    if l.depth() > 1 || !expected {
        return Err(err(format!(
            "the shape must be {want_shape} ({}x{} per batch{})",
            rows,
            cols,
            if bits { ", in bits" } else { "" }
        )));
    }
    if let Some(&s) = stride.iter().find(|&&s| s < 0) {
        return Err(err(format!(
            "stride {s} is negative; the kernels address every operand forward"
        )));
    }
    let (s_outer, s_inner) = match major {
        Major::Row => (stride[0], stride[1]),
        Major::Col => (stride[1], stride[0]),
    };
    let (inner_name, outer_name) = match major {
        Major::Row => ("column", "row"),
        Major::Col => ("row", "column"),
    };
    if inner > 1 && s_inner != 1 {
        return Err(err(format!(
            "the Gemm was made for a {major}-major {}: its {inner_name} stride must be 1, not {s_inner}",
            w.name
        )));
    }
    let ld = if outer > 1 { s_outer } else { tight_ld };
    if outer > 1 && ld < inner {
        return Err(err(format!(
            "{outer_name}s overlap: the {outer_name} stride {ld} is below the {inner} elements of a {outer_name}"
        )));
    }
    let one = span(1, 0, outer, ld, inner)
        .ok_or_else(|| err("its extent overflows 64 bits".to_string()))?;
    let bs = if batch > 1 { stride[2] } else { outer * ld };
    if batch > 1 {
        if w.output && bs < one {
            return Err(err(format!(
                "batches overlap: the batch stride {bs} is below one matrix's extent {one} (an output must not overlap itself)"
            )));
        }
        if bs != 0 && bs < one {
            return Err(err(format!(
                "the batch stride {bs} is neither 0 (one matrix for every batch) nor at least one matrix's extent {one}"
            )));
        }
    }
    Ok(Strides { ld, batch: bs })
}

/// The batch stride of a vector of `len` elements (`batch` of them), read off its layout
/// (`(len)` or `(len, batch)`, unit stride), or the default (one vector for every batch for
/// an input, one per batch for an output).
fn vector_stride(w: Want, layout: Option<&Layout>, len: i64, batch: i64) -> Result<i64> {
    let default = if w.output { len } else { 0 };
    let Some(l) = layout else {
        return Ok(default);
    };
    let tight = || format!("{len}:1");
    let err = |rule: String| operand_err(w.name, describe_layout(Some(l), &tight), rule);
    let shape = l.shape().leaves();
    let stride = l.stride().leaves();
    let ok_shape = l.depth() <= 1
        && match shape.len() {
            1 => shape[0] == len,
            2 => shape[0] == len && shape[1] == batch,
            _ => false,
        };
    if !ok_shape {
        return Err(err(format!("the shape must be ({len}) or ({len},{batch})")));
    }
    if len > 1 && stride[0] != 1 {
        return Err(err(format!(
            "the element stride must be 1, not {}",
            stride[0]
        )));
    }
    let bs = if shape.len() == 2 && batch > 1 {
        stride[1]
    } else {
        default
    };
    if batch > 1 && (bs < 0 || (w.output && bs < len) || (bs != 0 && bs < len)) {
        return Err(err(format!(
            "the batch stride {bs} must be {}at least the length {len}",
            if w.output { "" } else { "0 or " }
        )));
    }
    Ok(bs)
}

/// The largest power of two dividing `ptr`, at most 256 (the alignment the epilogue's
/// checks take).
fn alignment(ptr: u64) -> i64 {
    if ptr == 0 {
        256
    } else {
        1i64 << ptr.trailing_zeros().min(8)
    }
}

/// A checked operand: its span (for overlap checks and the launchers) and strides.
#[derive(Clone, Copy)]
struct Checked {
    name: &'static str,
    mem: Mem,
    /// Bytes `[lo, hi)` the launch may touch.
    lo: u64,
    hi: u64,
    strides: Strides,
    output: bool,
}

fn check_bound(w: Want, b: &Bound<'_>, elems: Option<i64>, strides: Strides) -> Result<Checked> {
    let layout = || b.layout.map_or("(tight)".to_string(), |l| l.to_string());
    if b.elem != w.elem {
        return Err(operand_err(
            w.name,
            layout(),
            format!("the buffer holds {}, the Gemm needs {}", b.elem, w.elem),
        ));
    }
    let eb = w.elem.bytes();
    if b.ptr % eb != 0 {
        return Err(operand_err(
            w.name,
            layout(),
            format!(
                "address {:#x} is not aligned to its {eb}-byte elements",
                b.ptr
            ),
        ));
    }
    // Elements the launch may touch (a bit mask: words covering its bits).
    let need = match (elems, w.elem) {
        (Some(n), Elem::Words) => (n + 31) / 32,
        (Some(n), _) => n,
        (None, _) => {
            return Err(operand_err(
                w.name,
                layout(),
                "its extent overflows 64 bits".to_string(),
            ))
        }
    };
    let have = b.len as i64;
    if need > have {
        let mib = |e: i64| e as f64 * eb as f64 / (1024.0 * 1024.0);
        return Err(operand_err(
            w.name,
            layout(),
            format!(
                "needs {need} elements ({:.2} MiB), the buffer has {have} ({:.2} MiB)",
                mib(need),
                mib(have)
            ),
        ));
    }
    let dtype = match w.elem {
        Elem::Real(t) => t,
        Elem::Words => DType::F32,
    };
    Ok(Checked {
        name: w.name,
        mem: Mem {
            ptr: b.ptr,
            len: b.len,
            dtype,
        },
        lo: b.ptr,
        hi: b.ptr + need as u64 * eb,
        strides,
        output: w.output,
    })
}

impl Gemm {
    /// Plans `spec` for the context's device and compiles its kernels (once per process, or
    /// once per cache folder with a disk cache).
    pub fn new(ctx: &Context, spec: &GemmSpec) -> Result<Gemm> {
        let rt = ctx.runtime();
        let before = rt.compile_stats();
        let plan = spec.plan(rt.arch(), rt.sm_count() as i64)?;
        let mut kernel = TreeKernel::from_plan(rt, &plan)?;
        if let Some(n) = spec.options.max_ctas {
            kernel.set_max_ctas(n);
        }
        if let Some(on) = spec.options.dependent_launch {
            kernel.set_dependent_launch(on);
        }
        let sums = if plan.sums.is_empty() {
            None
        } else {
            Some(OperandSum::new(rt)?)
        };
        let stage = match plan.staged_k() {
            Some(_) => Some(StageRows::new(rt)?),
            None => None,
        };
        let bytes = plan.workspace_bytes();
        let workspace = if bytes == 0 {
            None
        } else {
            Some(OwnWorkspace::new(rt, bytes, "cuMemAlloc (Gemm workspace)")?)
        };
        let after = rt.compile_stats();
        Ok(Gemm {
            ctx: ctx.clone(),
            plan,
            kernel,
            sums,
            stage,
            workspace,
            built: CompileStats {
                compiled: after.compiled - before.compiled,
                compile_seconds: after.compile_seconds - before.compile_seconds,
                disk_hits: after.disk_hits - before.disk_hits,
                memory_hits: after.memory_hits - before.memory_hits,
            },
        })
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Bytes of device workspace a launch needs (stream-K's partial sums, the staged copies
    /// of A and B where [`Plan::staged_k`] says so); the `Gemm` owns that much, or a launch
    /// passes its own ([`Operands::workspace`]).
    pub fn workspace_bytes(&self) -> usize {
        self.plan.workspace_bytes()
    }

    /// What building this `Gemm` cost: NVRTC compiles and their seconds, or cache hits.
    pub fn build_stats(&self) -> CompileStats {
        self.built
    }

    #[cfg(feature = "bench")]
    pub(crate) fn kernel(&self) -> &TreeKernel {
        &self.kernel
    }

    /// Registers per thread and local (spill) bytes of the GEMM kernel.
    pub fn resources(&self) -> Result<(i32, i32)> {
        self.kernel.resources()
    }

    /// Queues `D = epilogue(A B)` on `stream` and returns: `a` is `M x K`, `b` `K x N`, `d`
    /// `M x N` (each batch), in the spec's storage orders unless their layouts say
    /// otherwise (of the same order); `ops` holds the epilogue's tensors.
    ///
    /// Every operand is checked first (see the module documentation); an error names the
    /// operand, its layout and the rule, and nothing is queued.
    pub fn launch<'t>(
        &self,
        stream: &CudaStream,
        a: impl Into<Tensor<'t>>,
        b: impl Into<Tensor<'t>>,
        d: impl Into<TensorMut<'t>>,
        ops: Operands<'t>,
    ) -> Result<()> {
        let (a, b, mut d, mut ops) = (a.into(), b.into(), d.into(), ops);
        if !Arc::ptr_eq(stream.context(), self.ctx.cudarc())
            && stream.context().cu_ctx() != self.ctx.cudarc().cu_ctx()
        {
            return Err(KernelError::invalid(
                OP,
                "the stream belongs to another CUDA context than the Gemm's",
            ));
        }
        self.launch_checked(stream, &a, &b, &mut d, &mut ops, None)
    }

    /// [`Gemm::launch`] with `prologue` queued on the stream once every operand has passed
    /// its checks, before the GEMM's own work: a producer of A (the convolution's im2col
    /// gather) runs only when the launch will, so an error still queues nothing.
    pub(crate) fn launch_with_prologue<'t>(
        &self,
        stream: &CudaStream,
        a: Tensor<'t>,
        b: Tensor<'t>,
        mut d: TensorMut<'t>,
        mut ops: Operands<'t>,
        prologue: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        if stream.context().cu_ctx() != self.ctx.cudarc().cu_ctx() {
            return Err(KernelError::invalid(
                OP,
                "the stream belongs to another CUDA context than the Gemm's",
            ));
        }
        self.launch_checked(stream, &a, &b, &mut d, &mut ops, Some(prologue))
    }

    fn launch_checked(
        &self,
        stream: &CudaStream,
        a: &Tensor<'_>,
        b: &Tensor<'_>,
        d: &mut TensorMut<'_>,
        ops: &mut Operands<'_>,
        prologue: Option<&mut dyn FnMut() -> Result<()>>,
    ) -> Result<()> {
        let plan = &self.plan;
        let spec = &plan.spec;
        let (m, n, k, batch) = (spec.m, spec.n, spec.k, spec.batch);
        let input = Elem::Real(spec.dtype);
        let out = spec.out();
        check_operands_given(plan, ops)?;

        let (am, bm, dm) = (spec.a, spec.b, spec.d);
        let want = |name, output, elem| Want { name, elem, output };
        let (a_ck, _ag) = match (&plan.problem_im2col(), &plan.problem_window()) {
            // A is the convolution's x (its layout checked by the convolution): the kernel
            // reads its N·H·W·C elements through the im2col tensor map.
            (Some(g), _) => bind_conv_x(stream, a, want("A", false, input), g.extent(), k)?,
            // A is the phase-staged copy of x the convolution wrote.
            (_, Some(wd)) => {
                let need = wd.staged_elems().ok_or_else(|| {
                    KernelError::invalid(OP, "the window load's staged x overflows 64 bits")
                })?;
                bind_conv_x(stream, a, want("A", false, input), need, k)?
            }
            _ => bind_matrix(stream, a, want("A", false, input), (m, k, batch), am, false)?,
        };
        let (b_ck, _bg) =
            bind_matrix(stream, b, want("B", false, input), (k, n, batch), bm, false)?;
        // D and the other M x N tensors share D's storage order.
        let (d_ck, _dg) = bind_matrix_mut(
            stream,
            d,
            want("D", true, Elem::Real(out)),
            (m, n, batch),
            dm,
            false,
        )?;
        let (ep, workspace) = bind_epilogue(plan, stream, ops)?;
        let ck = ep.checked(a_ck, b_ck, d_ck);
        ck.no_output_overlaps()?;
        let view = KernelView::new(&ck, plan.transposed);
        let bind = launch_binding(plan, &ck, &view);
        let mem = |x: Option<Checked>| x.map(|x| x.mem);
        let bufs = EpBuffers {
            d: Some(d_ck.mem),
            c: mem(ck.c),
            residual: mem(ck.residual),
            aux_in: mem(ck.aux_in),
            aux: mem(ck.aux),
            bias_row: mem(view.bias_row),
            bias_col: mem(view.bias_col),
            bgrad_row: view.bgrad_row.map(|x| x.mem),
            bgrad_col: view.bgrad_col.map(|x| x.mem),
        };

        if let Some(p) = prologue {
            p()?;
        }

        // The reductions accumulate into their outputs: zero them first, on the stream.
        for g in [view.bgrad_row, view.bgrad_col].into_iter().flatten() {
            // SAFETY: [lo, hi) lies inside the output's buffer (checked above).
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    g.lo,
                    0,
                    (g.hi - g.lo) as usize,
                    stream.cu_stream(),
                )
            }
            .map_err(driver_err("cuMemsetD8Async (bias-gradient output)"))?;
        }

        let (work, guard) = self.workspace_for(stream, workspace)?;
        let cx = LaunchCtx {
            rt: self.ctx.runtime(),
            stream,
            work,
        };
        let (ka, kb) = (view.a, view.b);
        // The kernel's A and B: in place, or the staged copies in the workspace.
        let mut ks = view.strides;
        let (mut a_mem, mut b_mem) = (ka.mem, kb.mem);
        if let (Some(stage), Some(ld), Some(base)) = (&self.stage, plan.staged_k(), work) {
            let (ra, rb, _) = plan.workspace_regions();
            let p = &plan.problem;
            // In place where rows, batches and start are on the grid the plan staged for (16
            // bytes, what TMA addresses, or 32, the sector grid; both multiples of 16). Where
            // only B is staged for the sector grid, A needs only TMA's 16 bytes.
            let g_b = crate::plan::gemm::stage_grid(p, plan.sm90().is_some_and(|s| s.cp_async_ab));
            let g_a = if plan.stages_b_only() { 16 } else { g_b };
            let one =
                |x: &Mem, rows: i64, ld_x: &mut i64, bs_x: &mut i64, at: Option<usize>, g: u64| {
                    let Some(at) = at else { return Ok(*x) };
                    let eb = x.dtype.bytes() as u64;
                    if on_byte_grid(x.ptr, *ld_x, *bs_x, p.batch, eb, g)
                        && (p.batch == 1 || *bs_x != 0)
                    {
                        return Ok(*x);
                    }
                    let c = StageCopy {
                        rows,
                        cols: p.k,
                        batch: p.batch,
                        src_ld: *ld_x,
                        src_bs: *bs_x,
                        dst_ld: ld,
                        fill: p.k,
                        src_batch: p.batch,
                    };
                    let dst = base + at as u64;
                    // SAFETY: the operand's checks bound every element `c` reads inside its
                    // buffer; the region at `dst` holds batch x rows x ld elements of the
                    // workspace (sized by the plan, checked against a caller's), 256-byte
                    // aligned; both stay valid while the stream runs the copy (the workspace's
                    // lock is held until the launch's completion event).
                    unsafe {
                        stage.launch(
                            stream,
                            &c,
                            (x.ptr, dst),
                            self.ctx.sm_count(),
                            (false, false),
                        )?
                    };
                    *ld_x = ld;
                    *bs_x = rows * ld;
                    Ok::<Mem, KernelError>(Mem {
                        ptr: dst,
                        len: (p.batch * rows * ld) as usize,
                        dtype: x.dtype,
                    })
                };
            a_mem = one(&ka.mem, p.m, &mut ks.lda, &mut ks.batch_a, ra, g_a)?;
            b_mem = one(&kb.mem, p.n, &mut ks.ldb, &mut ks.batch_b, rb, g_b)?;
        }
        self.kernel.launch(cx, &a_mem, &b_mem, &ks, &bind, &bufs)?;
        if let (Some(own), Some(_held)) = (&self.workspace, &guard) {
            own.done
                .record(stream)
                .map_err(driver_err("cuEventRecord (workspace)"))?;
        }
        drop(guard);
        if let Some(sums) = &self.sums {
            for (which, out) in [(Operand::A, view.sum_k_a), (Operand::B, view.sum_k_b)] {
                let Some(out) = out else { continue };
                let x = if which == Operand::A { &ka } else { &kb };
                sums.launch(
                    stream,
                    &plan.problem,
                    &view.strides,
                    which,
                    &x.mem,
                    &out.mem,
                    out.strides.batch,
                )?;
            }
        }
        Ok(())
    }

    /// The workspace of a launch: the caller's (`given`, checked against the plan's need), or
    /// ours, ordered after its previous user; with ours, the lock that keeps its user's
    /// stream, held until the launch's completion event is recorded.
    fn workspace_for<'w>(
        &'w self,
        stream: &CudaStream,
        given: Option<&mut CudaSlice<u8>>,
    ) -> Result<(Option<u64>, Option<MutexGuard<'w, usize>>)> {
        Ok(match (given, &self.workspace) {
            (Some(w), _) => {
                let need = self.workspace_bytes();
                if need > 0 && w.len() < need {
                    return Err(operand_err(
                        "workspace",
                        format!("{} bytes", w.len()),
                        format!("the plan needs {need} bytes"),
                    ));
                }
                let (p, _g) = w.device_ptr(stream);
                ((need > 0).then_some(p), None)
            }
            (None, Some(own)) => {
                let last = own.claim(stream)?;
                let (p, _g) = own.buf.device_ptr(stream);
                (Some(p), Some(last))
            }
            (None, None) => (None, None),
        })
    }
}

/// Tensors given that the epilogue does not use, and used ones missing, are errors.
fn check_operands_given(plan: &Plan, ops: &Operands<'_>) -> Result<()> {
    let spec = &plan.spec;
    let user_tree = &spec.tree;
    let uses = |l: Leaf| user_tree.d.uses(l);
    let given = [
        ("c", ops.c.is_some(), uses(Leaf::C) && spec.beta != 0.0),
        ("residual", ops.residual.is_some(), uses(Leaf::Residual)),
        (
            "aux_in",
            ops.aux_in.is_some(),
            uses(Leaf::AuxIn) || uses(Leaf::AuxInBits),
        ),
        ("bias_row", ops.bias_row.is_some(), uses(Leaf::BiasRow)),
        ("bias_col", ops.bias_col.is_some(), uses(Leaf::BiasCol)),
        ("aux", ops.aux.is_some(), plan.binding.aux.is_some()),
        (
            "bgrad_row",
            ops.bgrad_row.is_some(),
            has_sink(user_tree, Sink::Bgrad(VecAxis::Row)),
        ),
        (
            "bgrad_col",
            ops.bgrad_col.is_some(),
            has_sink(user_tree, Sink::Bgrad(VecAxis::Col)),
        ),
        (
            "sum_k_a",
            ops.sum_k_a.is_some(),
            user_tree.sum_k.contains(&Operand::A),
        ),
        (
            "sum_k_b",
            ops.sum_k_b.is_some(),
            user_tree.sum_k.contains(&Operand::B),
        ),
    ];
    for (name, is_given, used) in given {
        if is_given != used {
            return Err(KernelError::invalid(
                OP,
                if is_given {
                    format!(
                        "{name} is given but the epilogue `{user_tree}` does not {}",
                        if name == "c" && uses(Leaf::C) {
                            "read it with beta = 0"
                        } else {
                            "use it"
                        }
                    )
                } else {
                    format!("the epilogue `{user_tree}` uses {name}, which is not given")
                },
            ));
        }
    }
    Ok(())
}

/// One bound and checked operand, with the guard that records the launch's use of it.
type BoundOperand<'s> = Option<(Checked, Bound<'s>)>;

/// The epilogue's tensors of one launch, bound to its stream and checked.
struct EpilogueBound<'s> {
    c: BoundOperand<'s>,
    residual: BoundOperand<'s>,
    aux_in: BoundOperand<'s>,
    aux: BoundOperand<'s>,
    bias_row: BoundOperand<'s>,
    bias_col: BoundOperand<'s>,
    bgrad_row: BoundOperand<'s>,
    bgrad_col: BoundOperand<'s>,
    sum_k_a: BoundOperand<'s>,
    sum_k_b: BoundOperand<'s>,
}

impl EpilogueBound<'_> {
    /// Every operand's checks, with A's, B's and D's.
    fn checked(&self, a: Checked, b: Checked, d: Checked) -> Checks {
        let ck = |x: &BoundOperand<'_>| x.as_ref().map(|x| x.0);
        Checks {
            a,
            b,
            d,
            c: ck(&self.c),
            residual: ck(&self.residual),
            aux_in: ck(&self.aux_in),
            aux: ck(&self.aux),
            bias_row: ck(&self.bias_row),
            bias_col: ck(&self.bias_col),
            bgrad_row: ck(&self.bgrad_row),
            bgrad_col: ck(&self.bgrad_col),
            sum_k_a: ck(&self.sum_k_a),
            sum_k_b: ck(&self.sum_k_b),
        }
    }
}

/// Binds and checks the epilogue's tensors of `ops` (M x N ones in D's storage order, in the
/// types the plan's binding gives them), and hands back the caller's workspace, if any.
fn bind_epilogue<'s>(
    plan: &Plan,
    stream: &'s CudaStream,
    ops: &'s mut Operands<'_>,
) -> Result<(EpilogueBound<'s>, Option<&'s mut CudaSlice<u8>>)> {
    let spec = &plan.spec;
    let (m, n, batch) = (spec.m, spec.n, spec.batch);
    let out = spec.out();
    let dm = spec.d;
    let mnb = (m, n, batch);
    let sinks_bits = plan.binding.aux.is_some_and(|s| s.bits);
    let want = |name, output, elem| Want { name, elem, output };
    let typed = |s: Option<MatSpec>| Elem::Real(s.map_or(out, |s| s.dtype));
    let Operands {
        c,
        residual,
        aux_in,
        bias_row,
        bias_col,
        aux,
        bgrad_row,
        bgrad_col,
        sum_k_a,
        sum_k_b,
        workspace,
    } = ops;
    let c = c
        .as_ref()
        .map(|t| {
            bind_matrix(
                stream,
                t,
                want("c", false, typed(plan.binding.c)),
                mnb,
                dm,
                false,
            )
        })
        .transpose()?;
    let residual = residual
        .as_ref()
        .map(|t| {
            let w = want("residual", false, typed(plan.binding.residual));
            bind_matrix(stream, t, w, mnb, dm, false)
        })
        .transpose()?;
    let aux_in_bits = spec.tree.d.uses(Leaf::AuxInBits);
    let aux_in = aux_in
        .as_ref()
        .map(|t| {
            let elem = if aux_in_bits {
                Elem::Words
            } else {
                typed(plan.binding.aux_in)
            };
            bind_matrix(stream, t, want("aux_in", false, elem), mnb, dm, aux_in_bits)
        })
        .transpose()?;
    let aux = aux
        .as_mut()
        .map(|t| {
            let elem = if sinks_bits {
                Elem::Words
            } else {
                typed(plan.binding.aux)
            };
            bind_matrix_mut(stream, t, want("aux", true, elem), mnb, dm, sinks_bits)
        })
        .transpose()?;
    let vin = |name| want(name, false, Elem::Real(out));
    let bias_row = bias_row
        .as_ref()
        .map(|t| bind_vector(stream, t, vin("bias_row"), m, batch))
        .transpose()?;
    let bias_col = bias_col
        .as_ref()
        .map(|t| bind_vector(stream, t, vin("bias_col"), n, batch))
        .transpose()?;
    let f32w = |name| want(name, true, Elem::Real(DType::F32));
    let bgrad_row = bgrad_row
        .as_mut()
        .map(|t| bind_vector_mut(stream, t, f32w("bgrad_row"), m, batch))
        .transpose()?;
    let bgrad_col = bgrad_col
        .as_mut()
        .map(|t| bind_vector_mut(stream, t, f32w("bgrad_col"), n, batch))
        .transpose()?;
    let sum_k_a = sum_k_a
        .as_mut()
        .map(|t| bind_vector_mut(stream, t, f32w("sum_k_a"), m, batch))
        .transpose()?;
    let sum_k_b = sum_k_b
        .as_mut()
        .map(|t| bind_vector_mut(stream, t, f32w("sum_k_b"), n, batch))
        .transpose()?;
    let bound = EpilogueBound {
        c,
        residual,
        aux_in,
        aux,
        bias_row,
        bias_col,
        bgrad_row,
        bgrad_col,
        sum_k_a,
        sum_k_b,
    };
    Ok((bound, workspace.as_deref_mut()))
}

/// Every operand of a launch, checked, as the caller gave them.
#[derive(Clone, Copy)]
struct Checks {
    a: Checked,
    b: Checked,
    d: Checked,
    c: Option<Checked>,
    residual: Option<Checked>,
    aux_in: Option<Checked>,
    aux: Option<Checked>,
    bias_row: Option<Checked>,
    bias_col: Option<Checked>,
    bgrad_row: Option<Checked>,
    bgrad_col: Option<Checked>,
    sum_k_a: Option<Checked>,
    sum_k_b: Option<Checked>,
}

impl Checks {
    /// Outputs must not overlap any other operand, except D written in place over C or the
    /// residual (the same elements, read before written, by the same thread).
    fn no_output_overlaps(&self) -> Result<()> {
        let all: [Option<Checked>; 13] = [
            Some(self.a),
            Some(self.b),
            Some(self.d),
            self.c,
            self.residual,
            self.aux_in,
            self.bias_row,
            self.bias_col,
            self.aux,
            self.bgrad_row,
            self.bgrad_col,
            self.sum_k_a,
            self.sum_k_b,
        ];
        for (i, x) in all.iter().enumerate() {
            let Some(x) = x else { continue };
            for y in all.iter().skip(i + 1).flatten() {
                if !(x.output || y.output) || x.hi <= y.lo || y.hi <= x.lo {
                    continue;
                }
                let in_place = x.name == "D"
                    && (y.name == "c" || y.name == "residual")
                    && x.lo == y.lo
                    && x.strides == y.strides
                    && x.mem.dtype == y.mem.dtype;
                if !in_place {
                    return Err(KernelError::invalid(
                        OP,
                        format!(
                            "{} [{:#x}, {:#x}) overlaps {} [{:#x}, {:#x}): an output may share memory with no other operand (D may be written in place over C or the residual, with the same layout)",
                            x.name, x.lo, x.hi, y.name, y.lo, y.hi
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The kernel's view of a launch's operands: for a column-major D the product is
/// Dᵀ = Bᵀ Aᵀ, whose A is the given B; M x N tensors keep their strides (a column-major
/// M x N is a row-major N x M), and row and column vectors swap.
struct KernelView {
    a: Checked,
    b: Checked,
    bias_row: Option<Checked>,
    bias_col: Option<Checked>,
    bgrad_row: Option<Checked>,
    bgrad_col: Option<Checked>,
    sum_k_a: Option<Checked>,
    sum_k_b: Option<Checked>,
    strides: GemmStrides,
}

impl KernelView {
    fn new(ck: &Checks, transposed: bool) -> KernelView {
        let (a, b) = if transposed {
            (ck.b, ck.a)
        } else {
            (ck.a, ck.b)
        };
        let swap = |x, y| if transposed { (y, x) } else { (x, y) };
        let (bias_row, bias_col) = swap(ck.bias_row, ck.bias_col);
        let (bgrad_row, bgrad_col) = swap(ck.bgrad_row, ck.bgrad_col);
        let (sum_k_a, sum_k_b) = swap(ck.sum_k_a, ck.sum_k_b);
        let strides = GemmStrides {
            lda: a.strides.ld,
            ldb: b.strides.ld,
            batch_a: a.strides.batch,
            batch_b: b.strides.batch,
            ..GemmStrides::default()
        };
        KernelView {
            a,
            b,
            bias_row,
            bias_col,
            bgrad_row,
            bgrad_col,
            sum_k_a,
            sum_k_b,
            strides,
        }
    }
}

/// The plan's binding with the launch's leading dimensions, batch strides and alignments (the
/// vectors' as the kernel sees them).
fn launch_binding(plan: &Plan, ck: &Checks, view: &KernelView) -> Binding {
    let mut bind = plan.binding.clone();
    let mspec = |ck: &Checked, dtype: DType, bits: bool| MatSpec {
        dtype,
        bits,
        ld: ck.strides.ld,
        batch_stride: ck.strides.batch,
        align_bytes: alignment(ck.lo),
    };
    bind.d = mspec(&ck.d, plan.spec.out(), false);
    let set_mat = |slot: &mut Option<MatSpec>, x: Option<Checked>| {
        if let (Some(s), Some(ck)) = (slot.as_mut(), x) {
            *s = mspec(&ck, s.dtype, s.bits);
        }
    };
    set_mat(&mut bind.c, ck.c);
    set_mat(&mut bind.residual, ck.residual);
    if plan.spec.tree.d.uses(Leaf::AuxInBits) {
        set_mat(&mut bind.aux_in_bits, ck.aux_in);
    } else {
        set_mat(&mut bind.aux_in, ck.aux_in);
    }
    set_mat(&mut bind.aux, ck.aux);
    let vspec = |slot: &mut Option<VecSpec>, ck: Option<Checked>| {
        if let (Some(s), Some(ck)) = (slot.as_mut(), ck) {
            s.batch_stride = ck.strides.batch;
            s.align_bytes = alignment(ck.lo);
        }
    };
    vspec(&mut bind.bias_row, view.bias_row);
    vspec(&mut bind.bias_col, view.bias_col);
    vspec(&mut bind.bgrad_row, view.bgrad_row);
    vspec(&mut bind.bgrad_col, view.bgrad_col);
    vspec(&mut bind.sum_k_a, view.sum_k_a);
    vspec(&mut bind.sum_k_b, view.sum_k_b);
    bind
}

/// A of an im2col or window plan: the convolution's x (or its staged copy), checked for its
/// type, alignment and extent (`need` elements: [`crate::plan::Im2colTma::extent`],
/// [`crate::plan::WindowTma::staged_elems`]); the strides the kernel's checks read say a
/// tight `M x K` matrix, which the convolution's tensor maps do not use.
fn bind_conv_x<'s>(
    stream: &'s CudaStream,
    t: &'s Tensor<'_>,
    w: Want,
    need: i64,
    k: i64,
) -> Result<(Checked, Bound<'s>)> {
    let b = t.bind(stream);
    let st = Strides { ld: k, batch: 0 };
    let ck = check_bound(w, &b, Some(need), st)?;
    Ok((ck, b))
}

fn bind_matrix<'s>(
    stream: &'s CudaStream,
    t: &'s Tensor<'_>,
    w: Want,
    dims: (i64, i64, i64),
    major: Major,
    bits: bool,
) -> Result<(Checked, Bound<'s>)> {
    let b = t.bind(stream);
    let st = matrix_strides(w, b.layout, dims, major, bits)?;
    let ck = check_bound(w, &b, matrix_span(dims, st, major, bits), st)?;
    Ok((ck, b))
}

fn bind_matrix_mut<'s>(
    stream: &'s CudaStream,
    t: &'s mut TensorMut<'_>,
    w: Want,
    dims: (i64, i64, i64),
    major: Major,
    bits: bool,
) -> Result<(Checked, Bound<'s>)> {
    let b = t.bind(stream);
    let st = matrix_strides(w, b.layout, dims, major, bits)?;
    let ck = check_bound(w, &b, matrix_span(dims, st, major, bits), st)?;
    Ok((ck, b))
}

fn bind_vector<'s>(
    stream: &'s CudaStream,
    t: &'s Tensor<'_>,
    w: Want,
    len: i64,
    batch: i64,
) -> Result<(Checked, Bound<'s>)> {
    let b = t.bind(stream);
    let bs = vector_stride(w, b.layout, len, batch)?;
    let st = Strides { ld: len, batch: bs };
    let ck = check_bound(w, &b, span(batch, bs, 1, 0, len), st)?;
    Ok((ck, b))
}

fn bind_vector_mut<'s>(
    stream: &'s CudaStream,
    t: &'s mut TensorMut<'_>,
    w: Want,
    len: i64,
    batch: i64,
) -> Result<(Checked, Bound<'s>)> {
    let b = t.bind(stream);
    let bs = vector_stride(w, b.layout, len, batch)?;
    let st = Strides { ld: len, batch: bs };
    let ck = check_bound(w, &b, span(batch, bs, 1, 0, len), st)?;
    Ok((ck, b))
}

/// Elements (bits for a bit mask, whose rows end on a word) the launch may touch.
fn matrix_span(
    (rows, cols, batch): (i64, i64, i64),
    st: Strides,
    major: Major,
    bits: bool,
) -> Option<i64> {
    let (outer, inner) = major_extents(rows, cols, major);
    let inner = if bits { (inner + 31) / 32 * 32 } else { inner };
    span(batch, st.batch, outer, st.ld, inner)
}

fn has_sink(tree: &crate::epilogue::EpilogueTree, s: Sink) -> bool {
    tree.d
        .any(&|e| matches!(e, crate::epilogue::Expr::Sink(x, _) if *x == s))
}

/// `(outer, inner)` of a `rows x cols` matrix in `major` order.
fn major_extents(rows: i64, cols: i64, major: Major) -> (i64, i64) {
    match major {
        Major::Row => (rows, cols),
        Major::Col => (cols, rows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(output: bool) -> Want {
        Want {
            name: "X",
            elem: Elem::Real(DType::Bf16),
            output,
        }
    }

    fn l(s: &str) -> Layout {
        s.parse().unwrap()
    }

    #[test]
    fn tight_strides_follow_the_storage_order() {
        let w = want(false);
        assert_eq!(
            matrix_strides(w, None, (3, 5, 2), Major::Row, false).unwrap(),
            Strides { ld: 5, batch: 15 }
        );
        assert_eq!(
            matrix_strides(w, None, (3, 5, 2), Major::Col, false).unwrap(),
            Strides { ld: 3, batch: 15 }
        );
        // Bit-mask rows are padded to 128 bits.
        assert_eq!(
            matrix_strides(w, None, (3, 5, 1), Major::Row, true).unwrap(),
            Strides {
                ld: 128,
                batch: 384
            }
        );
    }

    #[test]
    fn layouts_give_leading_dimensions_and_batch_strides() {
        let w = want(true);
        let s = matrix_strides(
            w,
            Some(&l("(3,5,2):(8,1,32)")),
            (3, 5, 2),
            Major::Row,
            false,
        );
        assert_eq!(s.unwrap(), Strides { ld: 8, batch: 32 });
        let s = matrix_strides(w, Some(&l("(3,5):(1,4)")), (3, 5, 1), Major::Col, false);
        assert_eq!(s.unwrap(), Strides { ld: 4, batch: 20 });
    }

    #[test]
    fn each_layout_rule_is_an_error_naming_the_operand() {
        let w = want(true);
        let bad = [
            ("(5,3):(3,1)", "shape"),
            ("(3,5):(5,2)", "column stride must be 1"),
            ("(3,5):(1,3)", "column stride must be 1"),
            ("(3,5):(4,1)", "overlap"),
            ("(3,5):(-5,1)", "negative"),
            ("((3,1),5):((5,1),1)", "shape"),
        ];
        for (layout, rule) in bad {
            let e = matrix_strides(w, Some(&l(layout)), (3, 5, 1), Major::Row, false)
                .unwrap_err()
                .to_string();
            assert!(e.contains("X") && e.contains(rule), "{layout}: {e}");
        }
        // Batches of an output may not overlap; an input's may be shared (stride 0).
        let e = matrix_strides(
            w,
            Some(&l("(3,5,2):(5,1,10)")),
            (3, 5, 2),
            Major::Row,
            false,
        );
        assert!(e.unwrap_err().to_string().contains("batches overlap"));
        let r = matrix_strides(
            want(false),
            Some(&l("(3,5,2):(5,1,0)")),
            (3, 5, 2),
            Major::Row,
            false,
        );
        assert_eq!(r.unwrap(), Strides { ld: 5, batch: 0 });
    }

    #[test]
    fn a_single_row_may_have_any_row_stride() {
        // PyTorch gives size-1 dimensions arbitrary strides; they are never used.
        let s = matrix_strides(
            want(false),
            Some(&l("(1,8):(3,1)")),
            (1, 8, 1),
            Major::Row,
            false,
        );
        assert_eq!(s.unwrap().ld, 8);
    }

    #[test]
    fn vectors_are_contiguous_and_shared_or_per_batch() {
        assert_eq!(vector_stride(want(false), None, 7, 3).unwrap(), 0);
        assert_eq!(vector_stride(want(true), None, 7, 3).unwrap(), 7);
        assert_eq!(
            vector_stride(want(false), Some(&l("(7,3):(1,8)")), 7, 3).unwrap(),
            8
        );
        assert!(vector_stride(want(false), Some(&l("7:2")), 7, 1).is_err());
        assert!(vector_stride(want(true), Some(&l("(7,3):(1,0)")), 7, 3).is_err());
    }

    #[test]
    fn alignment_is_the_largest_power_of_two_up_to_256() {
        assert_eq!(alignment(0x1000), 256);
        assert_eq!(alignment(0x1002), 2);
        assert_eq!(alignment(0x1030), 16);
    }
}
