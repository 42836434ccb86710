//! The sweep (`tessera bench gemm --sweep`): every shape of [`crate::sweep::sweep_shapes`],
//! our [`Gemm`] as the planner plans it against cuBLAS on the same operands, interleaved in
//! one process (ours, cuBLAS, ours, ...), after a warm-up, medians of a few timed batches.
//!
//! The vendor side is `cublasGemmEx`, or `cublasGemmStridedBatchedEx` for a batch, with the
//! shape's 16-bit type (`CUDA_R_16BF` / `CUDA_R_16F`) and `CUBLAS_COMPUTE_32F`: the calls take
//! any leading dimension, so the unaligned shapes compare on the same tight operands.
//!
//! A shape our planner refuses, or whose build or launch fails, is a row with the error: the
//! sweep goes on, and the summary counts such rows (a valid GEMM must never end in an error).

use cudarc::cublas::result::{gemm_ex, gemm_strided_batched_ex};
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::CudaBlas;

use crate::bench::buffers::DeviceBuf;
use crate::bench::gemm::{blas_err, median, sampled_rel_diff, time_batch};
use crate::error::{KernelError, Result};
use crate::launch::gemm::{Context, Gemm};
use crate::launch::operand::{Operands, Tensor, TensorMut};
use crate::launch::runtime::{driver_err, Runtime};
use crate::plan::gemm::{GemmSpec, Options, Plan};
use crate::plan::policy;
use crate::plan::problem::{DType, GemmProblem, Major};
use crate::rng::Rng;
use crate::sweep::{ShapeClass, SweepShape};

/// Settings of a sweep.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// The shapes.
    pub shapes: Vec<SweepShape>,
    /// Timed rounds (each times ours and cuBLAS once); the median is reported.
    pub rounds: usize,
    /// Target duration of one timed batch of launches, milliseconds.
    pub batch_ms: f64,
    /// Forced planner choices for our kernel (none by default: the sweep measures the rules).
    pub options: Options,
    /// Seed of the random data.
    pub seed: u64,
}

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            shapes: crate::sweep::sweep_shapes(),
            rounds: 3,
            batch_ms: 10.0,
            options: Options::default(),
            seed: Rng::fresh_seed(),
        }
    }
}

/// One shape's result.
#[derive(Clone, Debug)]
pub struct SweepRow {
    /// The shape.
    pub shape: SweepShape,
    /// Our kernel's name (empty when it was not built).
    pub kernel: String,
    /// `sm90` or `sm80` (empty when not planned).
    pub path: String,
    /// The plan in short: schedule, tile, stages, the stream-K split on this device.
    pub plan: String,
    /// The plan's decisions with their reasons ([`Plan::decisions`]).
    pub decisions: Vec<String>,
    /// Our median time per GEMM, ms.
    pub ours_ms: f64,
    /// cuBLAS's median time per GEMM, ms.
    pub vendor_ms: f64,
    /// cuBLAS's time over ours (above 1: ours faster).
    pub ratio: f64,
    /// Our TFLOP/s.
    pub ours_tflops: f64,
    /// cuBLAS's TFLOP/s.
    pub vendor_tflops: f64,
    /// Our GB/s counting each operand once ([`policy::min_bytes`]).
    pub ours_gbs: f64,
    /// cuBLAS's GB/s, counted alike.
    pub vendor_gbs: f64,
    /// Relative Frobenius difference of our D and cuBLAS's on sampled rows.
    pub rel_diff: f64,
    /// Why there is no measurement: the planner's refusal, a build, launch or vendor error.
    pub error: Option<String>,
}

impl SweepRow {
    fn failed(shape: SweepShape, plan: Option<&Plan>, error: String) -> SweepRow {
        SweepRow {
            shape,
            kernel: plan.map(|p| p.kernel_name()).unwrap_or_default(),
            path: plan.map(|p| p.path().to_string()).unwrap_or_default(),
            plan: plan.map(|p| p.summary()).unwrap_or_default(),
            decisions: plan.map(|p| p.decisions()).unwrap_or_default(),
            ours_ms: f64::NAN,
            vendor_ms: f64::NAN,
            ratio: f64::NAN,
            ours_tflops: f64::NAN,
            vendor_tflops: f64::NAN,
            ours_gbs: f64::NAN,
            vendor_gbs: f64::NAN,
            rel_diff: f64::NAN,
            error: Some(error),
        }
    }

    /// Whether the row was measured and agrees with cuBLAS (relative difference below 2e-2).
    pub fn agrees(&self) -> bool {
        self.error.is_none() && self.rel_diff < 2e-2
    }
}

/// The spec of a sweep shape: nn.Linear's orders, the shape's type and batch.
pub fn sweep_spec(s: &SweepShape, options: Options) -> GemmSpec {
    GemmSpec::new(s.m, s.n, s.k)
        .b(Major::Col)
        .batch(s.batch)
        .dtype(s.dtype)
        .options(options)
}

fn cuda_type(d: DType) -> cudaDataType {
    match d {
        DType::Bf16 => cudaDataType::CUDA_R_16BF,
        DType::F16 => cudaDataType::CUDA_R_16F,
        DType::F32 => cudaDataType::CUDA_R_32F,
    }
}

/// cuBLAS on the shape's operands: column-major `Dᵀ (N x M) = W Xᵀ` per batch, `W` stored
/// `N x K` (`transa = T`), `X` `M x K`, each batch tight after the last.
fn vendor_launch(blas: &CudaBlas, s: &SweepShape, x: u64, w: u64, d: u64) -> Result<()> {
    let (m, n, k) = (s.m, s.n, s.k);
    let t = cuda_type(s.dtype);
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (ap, bp) = (
        &alpha as *const f32 as *const std::ffi::c_void,
        &beta as *const f32 as *const std::ffi::c_void,
    );
    // SAFETY: the harness's buffers hold at least batch x (M K), (N K) and (M N) elements of
    // the shape's type at these addresses (sized over every shape of the sweep), on the
    // handle's stream; alpha and beta are host floats, as the 32F compute type takes them.
    unsafe {
        if s.batch == 1 {
            gemm_ex(
                *blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                ap,
                w as *const _,
                t,
                k as i32,
                x as *const _,
                t,
                k as i32,
                bp,
                d as *mut _,
                t,
                n as i32,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
            .map_err(blas_err("cublasGemmEx"))
        } else {
            gemm_strided_batched_ex(
                *blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                ap,
                w as *const _,
                t,
                k as i32,
                n * k,
                x as *const _,
                t,
                k as i32,
                m * k,
                bp,
                d as *mut _,
                t,
                n as i32,
                m * n,
                s.batch as i32,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
            .map_err(blas_err("cublasGemmStridedBatchedEx"))
        }
    }
}

/// The operands of the sweep, sized for its largest shape: random values in [-1, 1) stored as
/// bf16. An fp16 shape reads the same bytes as fp16 (finite values in (-2, 2)), so both
/// types share one pair of buffers.
struct SweepBufs {
    x: DeviceBuf,
    w: DeviceBuf,
    ours: DeviceBuf,
    vendor: DeviceBuf,
}

fn alloc(rt: &Runtime, shapes: &[SweepShape], seed: u64) -> Result<SweepBufs> {
    let max = |f: &dyn Fn(&SweepShape) -> i64| shapes.iter().map(f).max().unwrap_or(1) as usize;
    let mut rng = Rng::new(seed);
    Ok(SweepBufs {
        x: DeviceBuf::upload(
            rt,
            DType::Bf16,
            &rng.vec(max(&|s| s.batch * s.m * s.k), -1.0, 1.0),
        )?,
        w: DeviceBuf::upload(
            rt,
            DType::Bf16,
            &rng.vec(max(&|s| s.batch * s.n * s.k), -1.0, 1.0),
        )?,
        ours: DeviceBuf::poisoned(rt, DType::Bf16, max(&|s| s.batch * s.m * s.n))?,
        vendor: DeviceBuf::poisoned(rt, DType::Bf16, max(&|s| s.batch * s.m * s.n))?,
    })
}

/// Runs the sweep, calling `progress` after each row. Fails only when the harness itself
/// cannot start (no shapes or rounds, buffers, the cuBLAS handle); a shape's failure is its
/// row's error.
pub fn run_sweep(
    ctx: &Context,
    cfg: &SweepConfig,
    mut progress: impl FnMut(&SweepRow),
) -> Result<Vec<SweepRow>> {
    if cfg.shapes.is_empty() || cfg.rounds == 0 {
        return Err(KernelError::invalid("sweep", "no shapes or rounds"));
    }
    let rt = ctx.runtime();
    let sms = ctx.sm_count();
    let mut b = alloc(rt, &cfg.shapes, cfg.seed)?;
    let blas = CudaBlas::new(rt.stream().clone()).map_err(blas_err("cublasCreate"))?;
    let mut rows = Vec::new();
    for s in &cfg.shapes {
        let spec = sweep_spec(s, cfg.options);
        let plan = match spec.plan(ctx.arch(), sms) {
            Ok(p) => p,
            Err(e) => {
                let row = SweepRow::failed(*s, None, format!("planner: {e}"));
                progress(&row);
                rows.push(row);
                continue;
            }
        };
        let row = match measure(ctx, cfg, s, &spec, &blas, &mut b) {
            Ok(r) => r,
            Err(e) => SweepRow::failed(*s, Some(&plan), e.to_string()),
        };
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// One shape: build, warm up and compare, then the interleaved rounds.
fn measure(
    ctx: &Context,
    cfg: &SweepConfig,
    s: &SweepShape,
    spec: &GemmSpec,
    blas: &CudaBlas,
    b: &mut SweepBufs,
) -> Result<SweepRow> {
    let rt = ctx.runtime();
    let gemm = Gemm::new(ctx, spec)?;
    let (m, n, k, batch) = (s.m, s.n, s.k, s.batch);
    let (x, w) = (b.x.ptr(rt), b.w.ptr(rt));
    let (dp_ours, dp_vendor) = (b.ours.ptr(rt), b.vendor.ptr(rt));
    let launch_ours = || -> Result<()> {
        // SAFETY: the sweep's buffers outlive the run and are used on its stream only; each
        // holds at least the elements named (sized over every shape).
        let (a, bt, d) = unsafe {
            (
                Tensor::from_raw(x, Some(s.dtype), (batch * m * k) as usize),
                Tensor::from_raw(w, Some(s.dtype), (batch * n * k) as usize),
                TensorMut::from_raw(dp_ours, Some(s.dtype), (batch * m * n) as usize),
            )
        };
        gemm.launch(rt.stream(), a, bt, d, Operands::new())
    };
    let launch_vendor = || vendor_launch(blas, s, x, w, dp_vendor);
    // Warm-up, and the comparison on sampled rows (of the batch x M rows of D).
    let len = (batch * m * n) as usize;
    b.ours.dtype = s.dtype;
    b.vendor.dtype = s.dtype;
    b.ours.poison_range(rt, 0, len)?;
    b.vendor.poison_range(rt, 0, len)?;
    launch_ours()?;
    launch_vendor()?;
    rt.stream().synchronize().map_err(driver_err("warm-up"))?;
    let rel_diff = sampled_rel_diff(rt, &b.ours, &b.vendor, batch * m, n)?;
    let t1 = time_batch(rt, 1, |_| launch_vendor())?;
    let inner = ((cfg.batch_ms / t1.max(1e-3)).ceil() as usize).clamp(1, 200);
    let (mut ours, mut vendor) = (Vec::new(), Vec::new());
    for _ in 0..cfg.rounds {
        ours.push(time_batch(rt, inner, |_| launch_ours())? / inner as f64);
        vendor.push(time_batch(rt, inner, |_| launch_vendor())? / inner as f64);
    }
    let (ours_ms, vendor_ms) = (median(&mut ours), median(&mut vendor));
    let mut p = GemmProblem::new(m, n, k);
    p.batch = batch;
    p.input = s.dtype;
    p.output = s.dtype;
    let (flops, bytes) = (p.flops(), policy::min_bytes(&p));
    let plan = gemm.plan();
    Ok(SweepRow {
        shape: *s,
        kernel: plan.kernel_name(),
        path: plan.path().to_string(),
        plan: plan.summary(),
        decisions: plan.decisions(),
        ours_ms,
        vendor_ms,
        ratio: vendor_ms / ours_ms,
        ours_tflops: flops / ours_ms / 1e9,
        vendor_tflops: flops / vendor_ms / 1e9,
        ours_gbs: bytes / ours_ms / 1e6,
        vendor_gbs: bytes / vendor_ms / 1e6,
        rel_diff,
        error: None,
    })
}

/// What a sweep amounts to: per class and overall, the geometric mean of cuBLAS's time over
/// ours on the measured rows, the worst row, and the rows that failed or disagree.
#[derive(Clone, Debug)]
pub struct SweepSummary {
    /// `(class, measured rows, geomean)` for each class with rows.
    pub classes: Vec<(ShapeClass, usize, f64)>,
    /// The geomean over every measured row.
    pub overall: f64,
    /// Measured rows.
    pub measured: usize,
    /// The index of the measured row with the lowest ratio.
    pub worst: Option<usize>,
    /// Measured rows below 0.95.
    pub below_095: usize,
    /// Rows that took the sm80-class path (off the Hopper path).
    pub off_hopper: usize,
    /// Rows with an error (the planner's refusal, a build or launch error).
    pub errors: usize,
    /// Measured rows whose D differs from cuBLAS's by 2e-2 or more.
    pub mismatches: usize,
}

/// The count and the geometric mean of `v` (NaN where it is empty).
pub(crate) fn geomean(v: impl Iterator<Item = f64>) -> (usize, f64) {
    let (mut n, mut s) = (0usize, 0f64);
    for x in v {
        n += 1;
        s += x.ln();
    }
    (
        n,
        if n == 0 {
            f64::NAN
        } else {
            (s / n as f64).exp()
        },
    )
}

/// Summarizes `rows`.
pub fn summarize(rows: &[SweepRow]) -> SweepSummary {
    let ok = |r: &&SweepRow| r.error.is_none() && r.ratio.is_finite() && r.ratio > 0.0;
    let classes = ShapeClass::ALL
        .iter()
        .filter_map(|&c| {
            let (n, g) = geomean(
                rows.iter()
                    .filter(ok)
                    .filter(|r| r.shape.class == c)
                    .map(|r| r.ratio),
            );
            (n > 0).then_some((c, n, g))
        })
        .collect();
    let (measured, overall) = geomean(rows.iter().filter(ok).map(|r| r.ratio));
    let worst = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| ok(r))
        .min_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio))
        .map(|(i, _)| i);
    SweepSummary {
        classes,
        overall,
        measured,
        worst,
        below_095: rows.iter().filter(ok).filter(|r| r.ratio < 0.95).count(),
        off_hopper: rows.iter().filter(|r| r.path == "sm80").count(),
        errors: rows.iter().filter(|r| r.error.is_some()).count(),
        mismatches: rows
            .iter()
            .filter(|r| r.error.is_none() && !r.agrees())
            .count(),
    }
}
