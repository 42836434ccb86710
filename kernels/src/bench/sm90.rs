//! The Hopper kernel against cuBLAS (plain) and cuBLASLt (bias + ReLU / GELU), interleaved in
//! one process: per round, one timed batch of ours then one of the vendor's, for each
//! epilogue; medians over rounds. Same operands and conventions as [`crate::bench`]
//! (nn.Linear: X row-major M x K, W stored N x K, Y row-major M x N, bf16, bias per column).

use cudarc::cublas::CudaBlas;
use cudarc::cublaslt::CudaBlasLT;

use crate::bench::buffers::DeviceBuf;
use crate::bench::gemm::{
    blas_err, median, sampled_rel_diff, time_batch, vendor_launch, vendor_name, BenchConfig,
    BenchRow, Bufs,
};
use crate::error::{KernelError, Result};
use crate::launch::runtime::{driver_err, Runtime};
use crate::launch::sm80::GemmArgs;
use crate::plan::problem::{Activation, BiasMode, DType, GemmProblem, Major};
use crate::plan::GemmStrides;
use crate::rng::Rng;

use crate::launch::sm90::Sm90Kernel;
use crate::plan::sm90::{Sm90Options, Sm90Plan};

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
    let o = Bufs {
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
            let mut k = Sm90Kernel::new(rt, &Sm90Plan::with_options(&p, opts)?)?;
            if let Some(n) = cfg.max_ctas {
                k.set_max_ctas(n);
            }
            kernels.push(k);
        }
        let launch_ours = |i: usize, d: &DeviceBuf| -> Result<()> {
            let p = kernels[i].plan().problem;
            let args = GemmArgs {
                a: o.x.mem(rt),
                b: o.w.mem(rt),
                c: None,
                d: d.mem(rt),
                bias: Some(o.bias.mem(rt)),
                aux: None,
                strides: GemmStrides::tight(&p),
            };
            kernels[i].launch(rt.cx(), &args).map(|_| ())
        };
        let eps = &cfg.epilogues;
        // Warm-up, and each pair's results compared on sampled rows.
        let mut rel = Vec::new();
        for (i, e) in eps.iter().enumerate() {
            ours.poison_range(rt, 0, (m * n) as usize)?;
            theirs.poison_range(rt, 0, (m * n) as usize)?;
            launch_ours(i, &ours)?;
            vendor_launch(&blas, &lt, e, (m, n, k), &o, &mut theirs)?;
            rt.stream().synchronize().map_err(driver_err("warm-up"))?;
            rel.push(sampled_rel_diff(rt, &ours, &theirs, m, n)?);
        }
        let t1 = time_batch(rt, 3, |_| launch_ours(0, &ours))? / 3.0;
        let inner = ((cfg.batch_ms / t1.max(1e-3)).ceil() as usize).clamp(1, 200);
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); 2 * eps.len()];
        for _ in 0..cfg.rounds {
            for (i, e) in eps.iter().enumerate() {
                times[2 * i].push(time_batch(rt, inner, |_| launch_ours(i, &ours))? / inner as f64);
                let t = time_batch(rt, inner, |_| {
                    vendor_launch(&blas, &lt, e, (m, n, k), &o, &mut theirs)
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
