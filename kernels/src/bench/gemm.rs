//! The GEMM benchmark: our kernel against cuBLAS (plain) and cuBLASLt (same fused epilogue),
//! interleaved in one process (ours, vendor, ours, vendor, ...), after warm-up, medians of
//! repeated timed batches, on random data.
//!
//! Operands are nn.Linear's: `X` row-major M x K, `W` stored N x K (B column-major), `Y`
//! row-major M x N in bf16, bias per output feature (per column of Y). cuBLAS is column-major,
//! so it computes `Yᵀ = W Xᵀ` (m = N, n = M, `transa = T`), the usual row-major trick.

use cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig};
use cudarc::cublaslt::{Activation as LtAct, CudaBlasLT, Matmul, MatmulConfig};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use half::bf16;

use crate::bench::buffers::DeviceBuf;
use crate::error::{KernelError, Result};
use crate::launch::gemm::{Context, Gemm};
use crate::launch::operand::{Operands, Tensor, TensorMut};
use crate::launch::runtime::{driver_err, Runtime};
use crate::plan::gemm::{GemmSpec, Options};
use crate::plan::problem::{Activation, BiasMode, DType, Epilogue, Major};
use crate::rng::Rng;

/// The standard shapes: 4096³, 8192³ and LLM shapes M ∈ {4096, 8192} x (N, K) ∈
/// {(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)}.
pub fn standard_shapes() -> Vec<(i64, i64, i64)> {
    let mut v = vec![(4096, 4096, 4096), (8192, 8192, 8192)];
    for m in [4096, 8192] {
        for (n, k) in [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)] {
            if (m, n, k) != (4096, 4096, 4096) {
                v.push((m, n, k));
            }
        }
    }
    v
}

/// The epilogues benchmarked: plain (against cuBLAS), bias+ReLU and bias+GELU(tanh)
/// (against cuBLASLt's RELU_BIAS and GELU_BIAS).
pub fn standard_epilogues() -> Vec<String> {
    ["acc", "relu(acc + bias_col)", "gelu_tanh(acc + bias_col)"]
        .map(String::from)
        .to_vec()
}

/// Benchmark settings.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// `(M, N, K)` shapes.
    pub shapes: Vec<(i64, i64, i64)>,
    /// Epilogues in any text form (plain, or a bias per column with ReLU or GELU(tanh),
    /// which cuBLASLt has).
    pub epilogues: Vec<String>,
    /// Timed rounds (each round times every contender once); the median is reported.
    pub rounds: usize,
    /// Target duration of one timed batch of launches, milliseconds.
    pub batch_ms: f64,
    /// Forced planner choices for our kernel.
    pub options: Options,
    /// Seed of the random data.
    pub seed: u64,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            shapes: standard_shapes(),
            epilogues: standard_epilogues(),
            rounds: 9,
            batch_ms: 20.0,
            options: Options::default(),
            seed: Rng::fresh_seed(),
        }
    }
}

/// One line of the result table.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// M.
    pub m: i64,
    /// N.
    pub n: i64,
    /// K.
    pub k: i64,
    /// The epilogue.
    pub epilogue: String,
    /// Our kernel's name.
    pub kernel: String,
    /// Our kernel's path (`sm90`, `sm80`) and epilogue code (`flags` or `tree`).
    pub path: String,
    /// The vendor call (`cublasGemmEx`, `cublasLt RELU_BIAS`, ...).
    pub vendor: String,
    /// Our median time per GEMM, ms.
    pub ours_ms: f64,
    /// The vendor's median time per GEMM, ms.
    pub vendor_ms: f64,
    /// Our TFLOP/s.
    pub ours_tflops: f64,
    /// The vendor's TFLOP/s.
    pub vendor_tflops: f64,
    /// ours / vendor throughput.
    pub ratio: f64,
    /// Our time over our plain GEMM's time for the same shape (1.0 for the plain row).
    pub over_plain: f64,
    /// Relative Frobenius difference between our D and the vendor's on sampled rows.
    pub rel_diff: f64,
    /// Min and max of our timed batches (per GEMM, ms): the spread.
    pub ours_range: (f64, f64),
}

#[derive(Clone, Copy)]
enum Who {
    Ours(usize),
    Vendor(usize),
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub(crate) fn blas_err<E: std::fmt::Debug>(op: &'static str) -> impl FnOnce(E) -> KernelError {
    move |e| KernelError::Blas {
        op,
        msg: format!("{e:?}"),
    }
}

/// The operands of a benchmark run, sized for its largest shape.
pub(crate) struct Bufs {
    pub(crate) x: DeviceBuf,
    pub(crate) w: DeviceBuf,
    pub(crate) bias: DeviceBuf,
}

/// The flag-driven epilogue a benchmarked tree amounts to (what cuBLAS or cuBLASLt is asked
/// to run beside it), or why it has no vendor counterpart here.
fn vendor_epilogue(spec: &GemmSpec) -> Result<Epilogue> {
    let tree = spec.tree();
    let b = crate::epilogue::check::Binding::for_tree(tree, 16, 16, 16, 1, spec.out());
    let e = crate::epilogue::flag_epilogue_for(tree, &b, spec.out()).unwrap_or(Epilogue {
        aux: true, // no counterpart: refused below
        ..Epilogue::default()
    });
    let lt_ok = e.bias == BiasMode::PerCol
        && matches!(
            e.act,
            Activation::None | Activation::Relu | Activation::GeluTanh
        )
        && !e.aux
        && e.beta == 0.0;
    if !e.is_plain() && !lt_ok {
        return Err(KernelError::invalid(
            "bench",
            format!(
                "epilogue `{}` has no cuBLAS or cuBLASLt counterpart here (acc, bias, relu_bias, gelu_bias)",
                spec.tree()
            ),
        ));
    }
    Ok(e)
}

/// Runs the benchmark, calling `progress` after each row: our [`Gemm`] (on the path its plan
/// takes) against cuBLAS or cuBLASLt on nn.Linear's operands.
pub fn run_bench(
    ctx: &Context,
    cfg: &BenchConfig,
    mut progress: impl FnMut(&BenchRow),
) -> Result<Vec<BenchRow>> {
    if cfg.shapes.is_empty() || cfg.epilogues.is_empty() || cfg.rounds == 0 {
        return Err(KernelError::invalid(
            "bench",
            "no shapes, epilogues or rounds",
        ));
    }
    let rt = ctx.runtime();
    let spec_of = |(m, n, k): (i64, i64, i64), e: &str| -> Result<GemmSpec> {
        Ok(GemmSpec::new(m, n, k)
            .b(Major::Col)
            .epilogue(e)?
            .options(cfg.options))
    };
    for e in &cfg.epilogues {
        vendor_epilogue(&spec_of((16, 16, 16), e)?)?;
    }
    let max_n = cfg.shapes.iter().map(|s| s.1).max().unwrap_or(1);
    let max_mk = cfg.shapes.iter().map(|s| s.0 * s.2).max().unwrap_or(1);
    let max_nk = cfg.shapes.iter().map(|s| s.1 * s.2).max().unwrap_or(1);
    let max_mn = cfg.shapes.iter().map(|s| s.0 * s.1).max().unwrap_or(1);
    let mut rng = Rng::new(cfg.seed);
    let b = Bufs {
        x: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(max_mk as usize, -1.0, 1.0))?,
        w: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(max_nk as usize, -1.0, 1.0))?,
        bias: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(max_n as usize, -1.0, 1.0))?,
    };
    let mut ours = DeviceBuf::poisoned(rt, DType::Bf16, max_mn as usize)?;
    let mut vendor = DeviceBuf::poisoned(rt, DType::Bf16, max_mn as usize)?;
    let blas = CudaBlas::new(rt.stream().clone()).map_err(blas_err("cublasCreate"))?;
    let lt = CudaBlasLT::new(rt.stream().clone()).map_err(blas_err("cublasLtCreate"))?;
    let mut rows = Vec::new();
    for &(m, n, k) in &cfg.shapes {
        let mut gemms = Vec::new();
        let mut eps = Vec::new();
        for e in &cfg.epilogues {
            let spec = spec_of((m, n, k), e)?;
            eps.push(vendor_epilogue(&spec)?);
            gemms.push(Gemm::new(ctx, &spec)?);
        }
        let launch_ours = |i: usize, d: &DeviceBuf| -> Result<()> {
            let g: &Gemm = &gemms[i];
            let t = |x: &DeviceBuf, len: i64| {
                // SAFETY: the harness's buffers outlive the benchmark and are used on its
                // stream only; each holds at least `len` elements (sized for every shape).
                unsafe { Tensor::from_raw(x.ptr(rt), Some(DType::Bf16), len as usize) }
            };
            // SAFETY: as above.
            let dt = unsafe { TensorMut::from_raw(d.ptr(rt), Some(DType::Bf16), (m * n) as usize) };
            let mut ops = Operands::new();
            if g.plan()
                .spec()
                .tree()
                .d
                .uses(crate::epilogue::Leaf::BiasCol)
            {
                ops = ops.bias_col(t(&b.bias, n));
            }
            g.launch(rt.stream(), t(&b.x, m * k), t(&b.w, n * k), dt, ops)
        };
        // Warm-up, and a correctness comparison of each pair on sampled rows.
        let mut rel = Vec::new();
        for (i, e) in eps.iter().enumerate() {
            ours.poison_range(rt, 0, (m * n) as usize)?;
            vendor.poison_range(rt, 0, (m * n) as usize)?;
            launch_ours(i, &ours)?;
            vendor_launch(&blas, &lt, e, (m, n, k), &b, &mut vendor)?;
            rt.stream().synchronize().map_err(driver_err("warm-up"))?;
            rel.push(sampled_rel_diff(rt, &ours, &vendor, m, n)?);
        }
        // Batch size from one timed launch of the plain vendor GEMM.
        let t1 = time_batch(rt, 1, |_| {
            vendor_launch(&blas, &lt, &eps[0], (m, n, k), &b, &mut vendor)
        })?;
        let inner = ((cfg.batch_ms / t1.max(1e-3)).ceil() as usize).clamp(1, 200);
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); 2 * eps.len()];
        for _round in 0..cfg.rounds {
            for i in 0..eps.len() {
                for who in [Who::Ours(i), Who::Vendor(i)] {
                    let (slot, t) = match who {
                        Who::Ours(i) => (2 * i, time_batch(rt, inner, |_| launch_ours(i, &ours))?),
                        Who::Vendor(i) => (
                            2 * i + 1,
                            time_batch(rt, inner, |_| {
                                vendor_launch(&blas, &lt, &eps[i], (m, n, k), &b, &mut vendor)
                            })?,
                        ),
                    };
                    times[slot].push(t / inner as f64);
                }
            }
        }
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let plain_ms = median(&mut times[0].clone());
        for (i, e) in cfg.epilogues.iter().enumerate() {
            let ours = &mut times[2 * i].clone();
            let ours_ms = median(ours);
            let vendor_ms = median(&mut times[2 * i + 1].clone());
            let plan = gemms[i].plan();
            let row = BenchRow {
                m,
                n,
                k,
                epilogue: e.clone(),
                kernel: plan.kernel_name(),
                path: format!(
                    "{}-{}",
                    plan.path(),
                    if plan.generated_epilogue() {
                        "tree"
                    } else {
                        "flags"
                    }
                ),
                vendor: vendor_name(&eps[i]).to_string(),
                ours_ms,
                vendor_ms,
                ours_tflops: flops / ours_ms / 1e9,
                vendor_tflops: flops / vendor_ms / 1e9,
                ratio: vendor_ms / ours_ms,
                over_plain: ours_ms / plain_ms,
                rel_diff: rel[i],
                ours_range: (ours[0], ours[ours.len() - 1]),
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

pub(crate) fn vendor_name(e: &Epilogue) -> &'static str {
    match (e.bias, e.act) {
        (BiasMode::None, _) => "cublasGemmEx",
        (_, Activation::Relu) => "cublasLt RELU_BIAS",
        (_, Activation::GeluTanh) => "cublasLt GELU_BIAS",
        _ => "cublasLt BIAS",
    }
}

/// The vendor library on the same nn.Linear problem: cuBLAS for the plain GEMM, cuBLASLt
/// with the matching epilogue otherwise.
pub(crate) fn vendor_launch(
    blas: &CudaBlas,
    lt: &CudaBlasLT,
    e: &Epilogue,
    (m, n, k): (i64, i64, i64),
    b: &Bufs,
    d: &mut DeviceBuf,
) -> Result<()> {
    // SAFETY: the buffers hold at least max(M K), max(N K), max(N), max(M N) bf16 elements
    // (sized over every shape of the run), and the views below are of those lengths.
    unsafe {
        let x =
            b.x.data
                .transmute::<bf16>((m * k) as usize)
                .ok_or_else(|| KernelError::invalid("bench", "X view"))?;
        let w =
            b.w.data
                .transmute::<bf16>((n * k) as usize)
                .ok_or_else(|| KernelError::invalid("bench", "W view"))?;
        let bias = b
            .bias
            .data
            .transmute::<bf16>(n as usize)
            .ok_or_else(|| KernelError::invalid("bench", "bias view"))?;
        let mut dv = d
            .data
            .transmute_mut::<bf16>((m * n) as usize)
            .ok_or_else(|| KernelError::invalid("bench", "D view"))?;
        if e.is_plain() {
            let cfg = GemmConfig {
                transa: cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T,
                transb: cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
                m: n as i32,
                n: m as i32,
                k: k as i32,
                alpha: bf16::ONE,
                lda: k as i32,
                ldb: k as i32,
                beta: bf16::ZERO,
                ldc: n as i32,
            };
            blas.gemm(cfg, &w, &x, &mut dv)
                .map_err(blas_err("cublasGemmEx"))
        } else {
            let cfg = MatmulConfig {
                transa: true,
                transb: false,
                transc: false,
                m: n as u64,
                n: m as u64,
                k: k as u64,
                alpha: 1.0,
                lda: k,
                ldb: k,
                beta: 0.0,
                ldc: n,
                stride_a: None,
                stride_b: None,
                stride_c: None,
                stride_bias: None,
                batch_size: None,
            };
            let act = match e.act {
                Activation::Relu => Some(LtAct::Relu),
                Activation::GeluTanh => Some(LtAct::Gelu),
                _ => None,
            };
            lt.matmul(cfg, &w, &x, &mut dv, Some(&bias), act.as_ref())
                .map_err(blas_err("cublasLtMatmul"))
        }
    }
}

/// Milliseconds for `inner` calls of `f` between two events on the stream.
pub(crate) fn time_batch(
    rt: &Runtime,
    inner: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    let ctx = rt.context();
    let e0 = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("cuEventCreate"))?;
    let e1 = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("cuEventCreate"))?;
    e0.record(rt.stream())
        .map_err(driver_err("cuEventRecord"))?;
    for i in 0..inner {
        f(i)?;
    }
    e1.record(rt.stream())
        .map_err(driver_err("cuEventRecord"))?;
    e1.synchronize().map_err(driver_err("cuEventSynchronize"))?;
    e0.elapsed_ms(&e1)
        .map(|t| t as f64)
        .map_err(driver_err("cuEventElapsedTime"))
}

/// Relative Frobenius difference of two row-major M x N results over rows at the start,
/// middle and end.
pub(crate) fn sampled_rel_diff(
    rt: &Runtime,
    a: &DeviceBuf,
    b: &DeviceBuf,
    m: i64,
    n: i64,
) -> Result<f64> {
    let rows = 16.min(m);
    let (mut num, mut den) = (0f64, 0f64);
    for start in [0, (m - rows) / 2, m - rows] {
        let x = a.download_range(rt, (start * n) as usize, (rows * n) as usize)?;
        let y = b.download_range(rt, (start * n) as usize, (rows * n) as usize)?;
        for (p, q) in x.iter().zip(&y) {
            if !p.is_finite() || !q.is_finite() {
                return Ok(f64::INFINITY);
            }
            num += (p - q) * (p - q);
            den += q * q;
        }
    }
    Ok(num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE))
}

/// One configuration of the `mma.sync` probe.
#[derive(Clone, Debug)]
pub struct MmaPeakRow {
    /// CTAs of 256 threads per SM.
    pub ctas_per_sm: i64,
    /// Independent MMA chains per warp.
    pub chains: i64,
    /// Median TFLOP/s.
    pub tflops: f64,
}

/// What `tessera bench mma` measured: the `mma.sync.m16n8k16` (bf16, fp32 accumulate) rate
/// with operands in registers, and cuBLAS's plain GEMM at 4096³ and 8192³ in the same rounds.
#[derive(Clone, Debug)]
pub struct MmaPeak {
    /// Each probe configuration.
    pub rows: Vec<MmaPeakRow>,
    /// `(size, TFLOP/s)` of `cublasGemmEx` on `size`³ (nn.Linear layout, bf16).
    pub cublas: Vec<(i64, f64)>,
}

impl MmaPeak {
    /// The best probe rate: the ceiling of any kernel built on `mma.sync`.
    pub fn best(&self) -> f64 {
        self.rows.iter().map(|r| r.tflops).fold(0.0, f64::max)
    }
}

/// Measures the `mma.sync` ceiling of the sm80-class path: [`crate::codegen::MMA_PEAK_CUH`]
/// in a few occupancies, interleaved with cuBLAS's plain GEMM (`rounds` rounds, medians).
pub fn run_mma_peak(ctx: &Context, rounds: usize) -> Result<MmaPeak> {
    let rt = ctx.runtime();
    let configs: [(i64, i64); 4] = [(1, 8), (2, 4), (2, 8), (4, 4)];
    let sms = rt.sm_count() as i64;
    let mut probes = Vec::new();
    for &(per_sm, chains) in &configs {
        let src = format!(
            "#define TESSERA_MMA_CHAINS {chains}\n{}",
            crate::codegen::MMA_PEAK_CUH
        );
        let f = rt.function(&src, "tessera_mma_peak", "tessera_mma_peak", 0)?;
        // About 4 ms per launch at 400 TFLOP/s.
        let iters = 400_000 / (per_sm * chains);
        probes.push((per_sm, chains, f, iters));
    }
    let out = rt
        .stream()
        .alloc_zeros::<f32>((4 * sms * 256) as usize)
        .map_err(driver_err("cuMemAlloc"))?;
    let sizes = [4096i64, 8192];
    let big = 8192i64 * 8192;
    let mut rng = Rng::new(Rng::fresh_seed());
    let b = Bufs {
        x: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(big as usize, -1.0, 1.0))?,
        w: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(big as usize, -1.0, 1.0))?,
        bias: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(8192, -1.0, 1.0))?,
    };
    let mut d = DeviceBuf::poisoned(rt, DType::Bf16, big as usize)?;
    let blas = CudaBlas::new(rt.stream().clone()).map_err(blas_err("cublasCreate"))?;
    let lt = CudaBlasLT::new(rt.stream().clone()).map_err(blas_err("cublasLtCreate"))?;
    let plain = Epilogue::default();
    let launch_probe = |i: usize| -> Result<()> {
        let (per_sm, _, f, iters) = &probes[i];
        let cfg = LaunchConfig {
            grid_dim: ((per_sm * sms) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let iters = *iters as i32;
        let mut builder = rt.stream().launch_builder(f);
        builder.arg(&out);
        builder.arg(&iters);
        // SAFETY: the kernel writes one float per thread of a grid of at most 4 CTAs per SM of
        // 256 threads, which `out` holds; `iters` is an int as declared.
        unsafe { builder.launch(cfg) }.map_err(driver_err("launch tessera_mma_peak"))?;
        Ok(())
    };
    // Warm-up, and batch sizes of about 20 ms for cuBLAS.
    for i in 0..probes.len() {
        time_batch(rt, 1, |_| launch_probe(i))?;
    }
    let mut inner = Vec::new();
    for &s in &sizes {
        vendor_launch(&blas, &lt, &plain, (s, s, s), &b, &mut d)?;
        let t1 = time_batch(rt, 1, |_| {
            vendor_launch(&blas, &lt, &plain, (s, s, s), &b, &mut d)
        })?;
        inner.push(((20.0 / t1.max(1e-3)).ceil() as usize).clamp(1, 200));
    }
    let mut probe_ms: Vec<Vec<f64>> = vec![Vec::new(); probes.len()];
    let mut blas_ms: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    for _ in 0..rounds.max(1) {
        for (i, times) in probe_ms.iter_mut().enumerate() {
            times.push(time_batch(rt, 1, |_| launch_probe(i))?);
        }
        for (j, &s) in sizes.iter().enumerate() {
            let t = time_batch(rt, inner[j], |_| {
                vendor_launch(&blas, &lt, &plain, (s, s, s), &b, &mut d)
            })?;
            blas_ms[j].push(t / inner[j] as f64);
        }
    }
    let rows = probes
        .iter()
        .zip(probe_ms.iter_mut())
        .map(|((per_sm, chains, _, iters), times)| {
            let flops = (per_sm * sms * 8 * iters * chains) as f64 * 4096.0;
            MmaPeakRow {
                ctas_per_sm: *per_sm,
                chains: *chains,
                tflops: flops / median(times) / 1e9,
            }
        })
        .collect();
    let cublas = sizes
        .iter()
        .zip(blas_ms.iter_mut())
        .map(|(&s, times)| (s, 2.0 * (s * s * s) as f64 / median(times) / 1e9))
        .collect();
    Ok(MmaPeak { rows, cublas })
}
