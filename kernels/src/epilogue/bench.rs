//! The epilogue benchmark: for each shape and named fusion, the tree-epilogue GEMM
//! ([`super::launch::TreeGemm`]), the same GEMM without epilogue ([`crate::gemm::GemmKernel`],
//! plain) and cuBLASLt's fusion of the same name ([`super::cublaslt::lt_fused`]), interleaved
//! in one process (ours, plain, cuBLASLt, ours, ...), medians of timed batches; and for a
//! coordinate-aware tree, one kernel against one launch per region.
//!
//! Operands are nn.Linear's (A row-major M x K, B column-major, bf16 in and out, bias per
//! output column). Inputs are random; outputs are not checked here (the GPU tests do that).

use crate::error::Result;
use crate::gemm::{DeviceBuf, GemmArgs, GemmKernel};
use crate::plan::GemmPlan;
use crate::problem::{DType, GemmProblem};
use crate::reference::GemmStrides;
use crate::rng::Rng;
use crate::runtime::{driver_err, Runtime};

use super::check::Binding;
use super::coord::split_regions;
use super::cublaslt::{lt_fused, LtBuffers, LtHandle};
use super::fusions::Fusion;
use super::launch::{EpBuffers, TreeGemm};
use super::tree::EpilogueTree;

/// One measured row.
#[derive(Clone, Debug, PartialEq)]
pub struct EpBenchRow {
    /// `(M, N, K)`.
    pub shape: (i64, i64, i64),
    /// The fusion's name, or the coordinate tree's text.
    pub name: String,
    /// Median milliseconds of the plain GEMM.
    pub plain_ms: f64,
    /// Median milliseconds of ours (for a coordinate tree: one kernel).
    pub ours_ms: f64,
    /// Median milliseconds of the vendor's fusion (for a coordinate tree: the per-region
    /// launches, ours).
    pub other_ms: f64,
}

impl EpBenchRow {
    /// `ours / plain - 1`: the epilogue's cost over the plain GEMM.
    pub fn overhead(&self) -> f64 {
        self.ours_ms / self.plain_ms - 1.0
    }

    /// `other / ours`: above 1 when ours is faster.
    pub fn speedup(&self) -> f64 {
        self.other_ms / self.ours_ms
    }
}

fn time_batch(rt: &Runtime, inner: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    use cudarc::driver::sys::CUevent_flags;
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
    Ok(e0
        .elapsed_ms(&e1)
        .map_err(driver_err("cuEventElapsedTime"))? as f64
        / inner as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Times three contenders interleaved: `rounds` rounds of `inner` launches each, after one
/// warm-up round; returns their medians.
fn interleaved(
    rt: &Runtime,
    rounds: usize,
    inner: usize,
    fs: &mut [&mut dyn FnMut() -> Result<()>; 3],
) -> Result<[f64; 3]> {
    let mut t = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..=rounds {
        for (i, f) in fs.iter_mut().enumerate() {
            let ms = time_batch(rt, inner, &mut **f)?;
            if round > 0 {
                t[i].push(ms);
            }
        }
    }
    let [a, b, c] = t;
    Ok([median(a), median(b), median(c)])
}

struct Operands {
    p: GemmProblem,
    s: GemmStrides,
    a: DeviceBuf,
    b: DeviceBuf,
    d: DeviceBuf,
    d2: DeviceBuf,
    bias: DeviceBuf,
    aux: DeviceBuf,
    bits: DeviceBuf,
    grad: DeviceBuf,
}

fn operands(rt: &Runtime, (m, n, k): (i64, i64, i64), rng: &mut Rng) -> Result<Operands> {
    let p = GemmProblem::new(m, n, k);
    let s = GemmStrides::tight(&p);
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let ld_bits = nu.div_ceil(128) * 128;
    Ok(Operands {
        a: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(mu * ku, -1.0, 1.0))?,
        b: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(ku * nu, -1.0, 1.0))?,
        d: DeviceBuf::upload(rt, DType::Bf16, &vec![0.0; mu * nu])?,
        d2: DeviceBuf::upload(rt, DType::Bf16, &vec![0.0; mu * nu])?,
        bias: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(nu.max(mu), -1.0, 1.0))?,
        aux: DeviceBuf::upload(rt, DType::Bf16, &rng.vec(mu * nu, -1.0, 1.0))?,
        bits: DeviceBuf::upload(rt, DType::F32, &vec![0.0; mu * ld_bits / 32 + 1])?,
        grad: DeviceBuf::upload(rt, DType::F32, &vec![0.0; nu.max(mu)])?,
        p,
        s,
    })
}

/// Ours, plain and cuBLASLt for every shape and fusion (`rounds` medians of `inner` launches).
/// Needs the sm80 template's tree hook.
pub fn bench_fusions(
    rt: &Runtime,
    shapes: &[(i64, i64, i64)],
    fusions: &[Fusion],
    rounds: usize,
    inner: usize,
) -> Result<Vec<EpBenchRow>> {
    let lt = LtHandle::new(rt)?;
    let mut rng = Rng::new(1);
    let mut rows = Vec::new();
    for &shape in shapes {
        let o = operands(rt, shape, &mut rng)?;
        let plan = GemmPlan::new(&o.p, rt.arch())?;
        let plain = GemmKernel::new(rt, &plan)?;
        let plain_args = GemmArgs {
            a: &o.a,
            b: &o.b,
            c: None,
            d: &o.d2,
            bias: None,
            aux: None,
            strides: o.s,
        };
        for &f in fusions {
            let tree = f.tree();
            if !tree.sum_k.is_empty() {
                continue; // the operand sums run beside the GEMM; not this benchmark's subject
            }
            let ours = TreeGemm::new(rt, &plan, &tree)?;
            let binding = Binding::for_tree(&tree, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
            let uses_bits = binding.aux.is_some_and(|a| a.bits) || binding.aux_in_bits.is_some();
            let bufs = EpBuffers {
                d: Some(&o.d),
                aux_in: Some(if binding.aux_in_bits.is_some() {
                    &o.bits
                } else {
                    &o.aux
                }),
                aux: Some(if uses_bits { &o.bits } else { &o.aux }),
                bias_col: Some(&o.bias),
                bgrad_col: Some(&o.grad),
                ..EpBuffers::default()
            };
            let lt_bufs = LtBuffers {
                a: &o.a,
                b: &o.b,
                d: &o.d2,
                bias: Some(&o.bias),
                aux: Some(if uses_bits { &o.bits } else { &o.aux }),
                aux_ld: if uses_bits {
                    (o.p.n + 127) / 128 * 128
                } else {
                    o.p.n
                },
            };
            let mut f_ours = || ours.launch(rt, &o.a, &o.b, &o.s, &binding, &bufs);
            let mut f_plain = || plain.launch(rt, &plain_args).map(|_| ());
            let mut f_lt = || lt_fused(rt, &lt, f, &o.p, 1.0, &lt_bufs);
            let [ours_ms, plain_ms, lt_ms] = interleaved(
                rt,
                rounds,
                inner,
                &mut [&mut f_ours, &mut f_plain, &mut f_lt],
            )?;
            rows.push(EpBenchRow {
                shape,
                name: f.name().to_string(),
                plain_ms,
                ours_ms,
                other_ms: lt_ms,
            });
        }
    }
    Ok(rows)
}

/// A coordinate-aware tree: one kernel (ours) against one launch per region (other), with the
/// plain GEMM for reference. Needs the sm80 template's tree hook.
pub fn bench_coordinate(
    rt: &Runtime,
    shape: (i64, i64, i64),
    tree: &EpilogueTree,
    rounds: usize,
    inner: usize,
) -> Result<EpBenchRow> {
    let mut rng = Rng::new(2);
    let o = operands(rt, shape, &mut rng)?;
    let plan = GemmPlan::new(&o.p, rt.arch())?;
    let plain = GemmKernel::new(rt, &plan)?;
    let plain_args = GemmArgs {
        a: &o.a,
        b: &o.b,
        c: None,
        d: &o.d2,
        bias: None,
        aux: None,
        strides: o.s,
    };
    let binding = Binding::for_tree(tree, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
    let bufs = EpBuffers {
        d: Some(&o.d),
        bias_col: Some(&o.bias),
        ..EpBuffers::default()
    };
    let one = TreeGemm::new(rt, &plan, tree)?;
    let mut regions = Vec::new();
    for reg in split_regions(tree, o.p.m, o.p.n, 1)?.regions {
        let mut rp = o.p;
        rp.m = reg.rows.end - reg.rows.start;
        rp.n = reg.cols.end - reg.cols.start;
        let rplan = GemmPlan::new(&rp, rt.arch())?;
        let rbind = Binding::for_tree(&reg.tree, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
        regions.push((TreeGemm::new(rt, &rplan, &reg.tree)?, rbind, reg));
    }
    let mut f_one = || one.launch(rt, &o.a, &o.b, &o.s, &binding, &bufs);
    let mut f_plain = || plain.launch(rt, &plain_args).map(|_| ());
    let mut f_split = || {
        for (g, b, reg) in &regions {
            g.launch_region(
                rt,
                &o.a,
                &o.b,
                &o.s,
                b,
                &bufs,
                reg.rows.clone(),
                reg.cols.clone(),
            )?;
        }
        Ok(())
    };
    let [ours_ms, plain_ms, split_ms] = interleaved(
        rt,
        rounds,
        inner,
        &mut [&mut f_one, &mut f_plain, &mut f_split],
    )?;
    Ok(EpBenchRow {
        shape,
        name: tree.to_string(),
        plain_ms,
        ours_ms,
        other_ms: split_ms,
    })
}
