//! The host cost of a launch: [`Gemm::launch`] (every operand check, the tensor maps, the
//! launch call) against a bare `cuLaunchKernel` of the same compiled kernel with the same
//! arguments, each timed call by call on the host's wall clock.

use cudarc::driver::{CudaFunction, CudaStream};

use crate::epilogue::cuda::EpArgs;
use crate::error::{KernelError, Result};
use crate::launch::gemm::{Context, Gemm};
use crate::launch::mem::{launch_kernel, param, LaunchCtx, Mem};
use crate::launch::sm80::GemmArgs;
use crate::launch::sm90::{PathKernel, Sm90Params, TmaMap};
use crate::launch::tree::TreeKernel;
use crate::plan::problem::DType;
use crate::plan::GemmStrides;
use crate::Operands;

/// Per-call host time, microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Overhead {
    /// Median of `Gemm::launch`.
    pub gemm_median_us: f64,
    /// Median of the bare launch.
    pub raw_median_us: f64,
    /// Mean of `Gemm::launch`.
    pub gemm_mean_us: f64,
    /// Mean of the bare launch.
    pub raw_mean_us: f64,
    /// Calls timed of each.
    pub calls: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A bare launch of a `Gemm`'s Hopper kernel: the arguments its own launcher prepares for
/// the buffers (seven tensor maps, the parameter block, and the tree epilogue's arguments
/// where it has them), passed straight to `cuLaunchKernel`.
struct BareLaunch<'g> {
    func: &'g CudaFunction,
    maps: [TmaMap; 7],
    params: Sm90Params,
    ep: Option<EpArgs>,
    grid: u32,
    threads: u32,
    smem: u32,
}

impl<'g> BareLaunch<'g> {
    /// The launch of `gemm`'s plain `m x n` product over `(a, b, d)`.
    fn prepare(
        gemm: &'g Gemm,
        cx: LaunchCtx<'_>,
        (am, bm, dm): (Mem, Mem, Mem),
        (m, n): (i64, i64),
    ) -> Result<BareLaunch<'g>> {
        let op = "launch_overhead";
        let plan = gemm.plan();
        let strides = GemmStrides::tight(&plan.problem);
        let (func, maps, params, ep, grid, threads, smem) = match gemm.kernel() {
            TreeKernel::Fused(f) => match f.path_kernel() {
                PathKernel::Hopper(k90) => {
                    let args = GemmArgs {
                        a: am,
                        b: bm,
                        c: None,
                        d: dm,
                        bias: None,
                        aux: None,
                        strides,
                    };
                    let (_, maps, params) = k90.prepare(cx, &args)?;
                    (
                        k90.func(),
                        maps,
                        params,
                        None,
                        k90.grid_ctas(),
                        k90.plan().threads,
                        k90.plan().smem_bytes,
                    )
                }
                PathKernel::Sm80(_) => {
                    return Err(KernelError::invalid(
                        op,
                        "the bare-launch baseline is the Hopper kernel's (needs sm_90a)",
                    ))
                }
            },
            TreeKernel::Hopper(t) => {
                let bufs = crate::launch::tree::EpBuffers {
                    d: Some(dm),
                    ..Default::default()
                };
                let (maps, params, ep) =
                    t.prepare_region(cx, &am, &bm, &strides, &plan.binding, &bufs, 0..m, 0..n)?;
                let k90 = t.sm90_kernel();
                (
                    k90.func(),
                    maps,
                    params,
                    Some(ep),
                    k90.grid_ctas(),
                    k90.plan().threads,
                    k90.plan().smem_bytes,
                )
            }
            TreeKernel::Sm80(_) => {
                return Err(KernelError::invalid(
                    op,
                    "the bare-launch baseline is the Hopper kernel's (needs sm_90a)",
                ))
            }
        };
        Ok(BareLaunch {
            func,
            maps,
            params,
            ep,
            grid: grid as u32,
            threads: threads as u32,
            smem: smem as u32,
        })
    }

    fn launch(&self, stream: &CudaStream) -> Result<()> {
        let maps = &self.maps;
        let mut p = [
            param(&maps[0]),
            param(&maps[1]),
            param(&maps[2]),
            param(&maps[3]),
            param(&maps[4]),
            param(&maps[5]),
            param(&maps[6]),
            param(&self.params),
            std::ptr::null_mut(),
        ];
        let n = match &self.ep {
            Some(e) => {
                p[8] = param(e);
                9
            }
            None => 8,
        };
        // SAFETY: the arguments the kernel's own launcher prepared for these buffers.
        unsafe {
            launch_kernel(
                self.func,
                stream,
                (self.grid, 1, 1),
                (self.threads, 1, 1),
                self.smem,
                &mut p[..n],
                "bare launch",
            )
        }
    }
}

/// Times `rounds` alternating batches of `per_round` launches of each (the stream is
/// synchronized between batches, so the launch queue never fills and blocks a call) of the
/// plain `m x n x k` bf16 GEMM with K-major operands on the Hopper path.
pub fn launch_overhead(
    ctx: &Context,
    (m, n, k): (i64, i64, i64),
    rounds: usize,
    per_round: usize,
) -> Result<Overhead> {
    let spec = crate::GemmSpec::new(m, n, k).b(crate::Major::Col);
    let gemm = Gemm::new(ctx, &spec)?;
    // The context's default stream: a second stream would put cudarc's event tracking to
    // work, whose cost is the caller's choice, not the launch's.
    let stream: std::sync::Arc<CudaStream> = ctx.cudarc().default_stream();
    let drv = crate::launch::runtime::driver_err;
    let a = stream
        .alloc_zeros::<half::bf16>((m * k) as usize)
        .map_err(drv("cuMemAlloc"))?;
    let b = stream
        .alloc_zeros::<half::bf16>((n * k) as usize)
        .map_err(drv("cuMemAlloc"))?;
    let mut d = stream
        .alloc_zeros::<half::bf16>((m * n) as usize)
        .map_err(drv("cuMemAlloc"))?;
    // The bare launch's arguments, prepared once by the kernel's own launcher.
    use cudarc::driver::DevicePtr;
    let mem = |p: u64, len: i64| Mem {
        ptr: p,
        len: len as usize,
        dtype: DType::Bf16,
    };
    let (pa, ga) = a.device_ptr(&stream);
    let (pb, gb) = b.device_ptr(&stream);
    let (pd, gd) = d.device_ptr(&stream);
    let (am, bm, dm) = (mem(pa, m * k), mem(pb, n * k), mem(pd, m * n));
    drop((ga, gb, gd));
    let cx = LaunchCtx {
        rt: ctx.runtime(),
        stream: &stream,
        work: None,
    };
    let bare = BareLaunch::prepare(&gemm, cx, (am, bm, dm), (m, n))?;
    let raw = || bare.launch(&stream);
    let mut t_gemm = Vec::with_capacity(rounds * per_round);
    let mut t_raw = Vec::with_capacity(rounds * per_round);
    let sync = |s: &CudaStream| s.synchronize().map_err(drv("cuStreamSynchronize"));
    // Warm-up: both paths, then the queue drained.
    for _ in 0..per_round {
        gemm.launch(&stream, &a, &b, &mut d, Operands::new())?;
        raw()?;
    }
    sync(&stream)?;
    for _ in 0..rounds {
        for _ in 0..per_round {
            let t0 = std::time::Instant::now();
            gemm.launch(&stream, &a, &b, &mut d, Operands::new())?;
            t_gemm.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        sync(&stream)?;
        for _ in 0..per_round {
            let t0 = std::time::Instant::now();
            raw()?;
            t_raw.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        sync(&stream)?;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    Ok(Overhead {
        gemm_mean_us: mean(&t_gemm),
        raw_mean_us: mean(&t_raw),
        calls: t_gemm.len(),
        gemm_median_us: median(&mut t_gemm),
        raw_median_us: median(&mut t_raw),
    })
}
