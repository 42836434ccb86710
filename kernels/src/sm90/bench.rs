//! The Hopper kernel against cuBLAS (plain) and cuBLASLt (bias + ReLU / GELU), interleaved in
//! one process: per round, one timed batch of ours then one of the vendor's, for each
//! epilogue; medians over rounds. Same operands and conventions as [`crate::bench`]
//! (nn.Linear: X row-major M x K, W stored N x K, Y row-major M x N, bf16, bias per column).

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::cublaslt::{Activation as LtAct, CudaBlasLT, Matmul, MatmulConfig};
use cudarc::driver::sys::CUevent_flags;
use half::bf16;

use crate::bench::{BenchConfig, BenchRow};
use crate::error::{KernelError, Result};
use crate::gemm::{DeviceBuf, GemmArgs};
use crate::problem::{Activation, BiasMode, DType, Epilogue, GemmProblem, Major};
use crate::reference::GemmStrides;
use crate::rng::Rng;
use crate::runtime::{driver_err, Runtime};

use super::launch::Sm90Kernel;
use super::plan::{Sm90Options, Sm90Plan};

fn blas_err<E: std::fmt::Debug>(op: &'static str) -> impl FnOnce(E) -> KernelError {
    move |e| KernelError::Blas {
        op,
        msg: format!("{e:?}"),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Milliseconds for `inner` calls of `f` between two events on the stream.
fn time_batch(rt: &Runtime, inner: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let ctx = rt.context();
    let e0 = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("cuEventCreate"))?;
    let e1 = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("cuEventCreate"))?;
    e0.record(rt.stream())
        .map_err(driver_err("cuEventRecord"))?;
    for _ in 0..inner {
        f()?;
    }
    e1.record(rt.stream())
        .map_err(driver_err("cuEventRecord"))?;
    e1.synchronize().map_err(driver_err("cuEventSynchronize"))?;
    e0.elapsed_ms(&e1)
        .map(|t| t as f64)
        .map_err(driver_err("cuEventElapsedTime"))
}

struct Operands {
    x: DeviceBuf,
    w: DeviceBuf,
    bias: DeviceBuf,
}

fn vendor_name(e: &Epilogue) -> &'static str {
    match (e.bias, e.act) {
        (BiasMode::None, _) => "cublasGemmEx",
        (_, Activation::Relu) => "cublasLt RELU_BIAS",
        (_, Activation::GeluTanh) => "cublasLt GELU_BIAS",
        _ => "cublasLt BIAS",
    }
}

fn vendor(
    blas: &CudaBlas,
    lt: &CudaBlasLT,
    e: &Epilogue,
    (m, n, k): (i64, i64, i64),
    o: &Operands,
    d: &mut DeviceBuf,
) -> Result<()> {
    let view = |what: &'static str| KernelError::invalid("sm90 bench", format!("{what} view"));
    // SAFETY: the buffers hold at least max(M K), max(N K), max(N), max(M N) bf16 elements
    // over every shape of the run, and the views below are of those lengths.
    unsafe {
        let x =
            o.x.data
                .transmute::<bf16>((m * k) as usize)
                .ok_or_else(|| view("X"))?;
        let w =
            o.w.data
                .transmute::<bf16>((n * k) as usize)
                .ok_or_else(|| view("W"))?;
        let bias = o
            .bias
            .data
            .transmute::<bf16>(n as usize)
            .ok_or_else(|| view("bias"))?;
        let mut dv = d
            .data
            .transmute_mut::<bf16>((m * n) as usize)
            .ok_or_else(|| view("D"))?;
        if e.is_plain() {
            // Column-major cuBLAS computes Yᵀ (N x M) = W (N x K, stored K-major) · Xᵀ.
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

/// Relative Frobenius difference of two row-major M x N results on 16 rows at the start,
/// middle and end (infinite when either holds a non-finite value there).
fn sampled_rel_diff(rt: &Runtime, a: &DeviceBuf, b: &DeviceBuf, m: i64, n: i64) -> Result<f64> {
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

/// Runs the benchmark of the Hopper kernel (planned with `opts`) over `cfg`'s shapes and
/// epilogues, calling `progress` after each row. `cfg.plan` (the sm80-class options) is
/// not used.
pub fn run_bench_sm90(
    rt: &Runtime,
    cfg: &BenchConfig,
    opts: Sm90Options,
    mut progress: impl FnMut(&BenchRow),
) -> Result<Vec<BenchRow>> {
    for e in &cfg.epilogues {
        let lt_ok = e.bias == BiasMode::PerCol
            && matches!(
                e.act,
                Activation::None | Activation::Relu | Activation::GeluTanh
            )
            && !e.aux
            && e.beta == 0.0;
        if !e.is_plain() && !lt_ok {
            return Err(KernelError::invalid(
                "sm90 bench",
                format!("epilogue `{e}` has no cuBLASLt counterpart (plain, bias, bias,relu, bias,gelu_tanh)"),
            ));
        }
    }
    if cfg.shapes.is_empty() || cfg.epilogues.is_empty() || cfg.rounds == 0 {
        return Err(KernelError::invalid(
            "sm90 bench",
            "no shapes, epilogues or rounds",
        ));
    }
    let max = |f: fn(&(i64, i64, i64)) -> i64| cfg.shapes.iter().map(f).max().unwrap_or(1) as usize;
    let mut rng = Rng::new(cfg.seed);
    let o = Operands {
        x: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(max(|s| s.0 * s.2), -1.0, 1.0))?,
        w: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(max(|s| s.1 * s.2), -1.0, 1.0))?,
        bias: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(max(|s| s.1), -1.0, 1.0))?,
    };
    let mut ours = DeviceBuf::poisoned(rt, DType::Bf16, max(|s| s.0 * s.1))?;
    let mut theirs = DeviceBuf::poisoned(rt, DType::Bf16, max(|s| s.0 * s.1))?;
    let blas = CudaBlas::new(rt.stream().clone()).map_err(blas_err("cublasCreate"))?;
    let lt = CudaBlasLT::new(rt.stream().clone()).map_err(blas_err("cublasLtCreate"))?;
    let mut rows = Vec::new();
    for &(m, n, k) in &cfg.shapes {
        let mut kernels = Vec::new();
        for e in &cfg.epilogues {
            let mut p = GemmProblem::new(m, n, k);
            p.a_major = Major::Row;
            p.b_major = Major::Col;
            p.epilogue = *e;
            kernels.push(Sm90Kernel::new(rt, &Sm90Plan::with_options(&p, opts)?)?);
        }
        let launch_ours = |i: usize, d: &DeviceBuf| -> Result<()> {
            let p = kernels[i].plan().problem;
            let args = GemmArgs {
                a: &o.x,
                b: &o.w,
                c: None,
                d,
                bias: Some(&o.bias),
                aux: None,
                strides: GemmStrides::tight(&p),
            };
            kernels[i].launch(rt, &args).map(|_| ())
        };
        let eps = &cfg.epilogues;
        // Warm-up, and each pair's results compared on sampled rows.
        let mut rel = Vec::new();
        for (i, e) in eps.iter().enumerate() {
            ours.poison_range(rt, 0, (m * n) as usize)?;
            theirs.poison_range(rt, 0, (m * n) as usize)?;
            launch_ours(i, &ours)?;
            vendor(&blas, &lt, e, (m, n, k), &o, &mut theirs)?;
            rt.stream().synchronize().map_err(driver_err("warm-up"))?;
            rel.push(sampled_rel_diff(rt, &ours, &theirs, m, n)?);
        }
        let t1 = time_batch(rt, 3, || launch_ours(0, &ours))? / 3.0;
        let inner = ((cfg.batch_ms / t1.max(1e-3)).ceil() as usize).clamp(1, 200);
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); 2 * eps.len()];
        for _ in 0..cfg.rounds {
            for (i, e) in eps.iter().enumerate() {
                times[2 * i].push(time_batch(rt, inner, || launch_ours(i, &ours))? / inner as f64);
                let t = time_batch(rt, inner, || {
                    vendor(&blas, &lt, e, (m, n, k), &o, &mut theirs)
                })?;
                times[2 * i + 1].push(t / inner as f64);
            }
        }
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let plain_ms = median(&mut times[0].clone());
        for (i, e) in eps.iter().enumerate() {
            let mut ours_t = times[2 * i].clone();
            let ours_ms = median(&mut ours_t);
            let vendor_ms = median(&mut times[2 * i + 1].clone());
            let row = BenchRow {
                m,
                n,
                k,
                epilogue: e.to_string(),
                kernel: kernels[i].plan().kernel_name(),
                vendor: vendor_name(e).to_string(),
                ours_ms,
                vendor_ms,
                ours_tflops: flops / ours_ms / 1e9,
                vendor_tflops: flops / vendor_ms / 1e9,
                ratio: vendor_ms / ours_ms,
                over_plain: ours_ms / plain_ms,
                rel_diff: rel[i],
                ours_range: (ours_t[0], ours_t[ours_t.len() - 1]),
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}
