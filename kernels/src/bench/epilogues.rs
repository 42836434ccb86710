//! The epilogue benchmark: for each shape and named fusion, the tree-epilogue GEMM
//! ([`crate::launch::tree::TreeKernel`]: the Hopper kernel on sm_90a, else the sm80-class one), our
//! plain GEMM on the same path and with the same plan ([`crate::launch::sm90::Sm90Kernel`] or
//! [`crate::launch::sm80::GemmKernel`]) and cuBLASLt's fusion of the same name
//! ([`super::cublaslt::lt_fused`]) with cuBLASLt's plain GEMM on the same operands
//! ([`super::cublaslt::lt_plain`], the baseline of the vendor's own fusion cost), interleaved
//! in one process (rounds of one timed batch each, the order rotated by one contender each
//! round), medians of timed batches and of each round's ratio of ours to plain; and for a
//! coordinate-aware tree, one kernel against one launch per region.
//!
//! Operands are nn.Linear's (A row-major M x K, B column-major, bf16 in and out, bias per
//! output column). Inputs are random; outputs are not checked here (the GPU tests do that).

use crate::bench::buffers::DeviceBuf;
use crate::bench::gemm::{median, sampled_rel_diff, time_batch};
use crate::error::Result;
use crate::launch::runtime::Runtime;
use crate::launch::sm80::GemmArgs;
use crate::launch::sm90::PathKernel;
use crate::plan::problem::{DType, GemmProblem};
use crate::plan::GemmStrides;
use crate::rng::Rng;

use super::cublaslt::{lt_fused, lt_plain, LtBuffers, LtHandle};
use crate::epilogue::check::Binding;
use crate::epilogue::coord::split_regions;
use crate::epilogue::fusions::Fusion;
use crate::epilogue::tree::EpilogueTree;
use crate::launch::tree::{EpBuffers, TreeKernel};

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
    /// The kernel path of ours and plain: `"sm90"` or `"sm80"`.
    pub path: &'static str,
    /// Relative Frobenius difference between our D and the other contender's on sampled rows
    /// (after one launch of each on the same inputs).
    pub rel_diff: f64,
    /// For a coordinate tree: median milliseconds of the same GEMM with the baseline tree
    /// (the epilogue without the coordinate dependence, [`coordinate_baseline`]).
    pub baseline_ms: Option<f64>,
    /// For a named fusion: median milliseconds of cuBLASLt's GEMM with its default epilogue
    /// on the same operands (the vendor's plain GEMM).
    pub vendor_plain_ms: Option<f64>,
    /// `ours / plain - 1` of each timed round (the two batches of a round ran back to back,
    /// so a drift of the machine's state over the run moves both).
    pub overhead_rounds: Vec<f64>,
}

impl EpBenchRow {
    /// `ours / plain - 1`: the epilogue's cost over the plain GEMM.
    pub fn overhead(&self) -> f64 {
        self.ours_ms / self.plain_ms - 1.0
    }

    /// The median over rounds of each round's `ours / plain - 1` ([`Self::overhead_rounds`]):
    /// the epilogue's cost measured pair by pair.
    pub fn overhead_paired(&self) -> f64 {
        quantile(&self.overhead_rounds, 0.5)
    }

    /// The lower and upper quartiles of [`Self::overhead_rounds`]: the spread of the paired
    /// cost within this run.
    pub fn overhead_quartiles(&self) -> (f64, f64) {
        (
            quantile(&self.overhead_rounds, 0.25),
            quantile(&self.overhead_rounds, 0.75),
        )
    }

    /// `other / ours`: above 1 when ours is faster.
    pub fn speedup(&self) -> f64 {
        self.other_ms / self.ours_ms
    }

    /// `other / vendor plain - 1`: the vendor's cost of the same fusion over its own plain
    /// GEMM (named fusions only).
    pub fn vendor_overhead(&self) -> Option<f64> {
        self.vendor_plain_ms.map(|v| self.other_ms / v - 1.0)
    }
}

/// The `q`-quantile of `v` (nearest rank, `q` in [0, 1]); NaN when `v` is empty.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// Times `N` contenders interleaved: `rounds` rounds of one batch of `inner` launches each
/// (after one warm-up round), round `r` starting with contender `r % N`, so that no contender
/// always follows the same one. Returns each contender's milliseconds per launch, round by
/// round.
fn interleaved<const N: usize>(
    rt: &Runtime,
    rounds: usize,
    inner: usize,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Vec<f64>; N]> {
    let mut t: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    for round in 0..=rounds {
        for j in 0..N {
            let i = (round + j) % N;
            let ms = time_batch(rt, inner, |_| (*fs[i])())? / inner as f64;
            if round > 0 {
                t[i].push(ms);
            }
        }
    }
    Ok(t)
}

/// Each round's `ours / plain - 1`.
fn round_overheads(ours: &[f64], plain: &[f64]) -> Vec<f64> {
    ours.iter().zip(plain).map(|(o, p)| o / p - 1.0).collect()
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

/// Our plain GEMM on the path a tree kernel takes, with the same plan.
fn plain_kernel(
    rt: &Runtime,
    p: &GemmProblem,
    path: crate::plan::PathOptions,
) -> Result<PathKernel> {
    PathKernel::new(rt, &crate::plan::plan_path(p, rt.arch(), path)?)
}

/// Ours, plain, cuBLASLt's fusion and cuBLASLt's plain GEMM for every shape and fusion
/// (`rounds` medians of `inner` launches),
/// on the path `path` picks ([`crate::plan::plan_path`]; the Hopper path on sm_90a unless it
/// forces the sm80-class one). Ours is
/// what [`TreeKernel::plan`] compiles: the fused v1 kernel for the fusions it expresses (the
/// row's `path` then ends in `-v1`), else the generated epilogue. Fusions with operand sums
/// (BGRADA, BGRADB) are skipped: those sums run beside the GEMM.
pub fn bench_fusions(
    rt: &Runtime,
    shapes: &[(i64, i64, i64)],
    fusions: &[Fusion],
    rounds: usize,
    inner: usize,
    path: crate::plan::PathOptions,
    mut progress: impl FnMut(&EpBenchRow),
) -> Result<Vec<EpBenchRow>> {
    let lt = LtHandle::new(rt)?;
    let mut rng = Rng::new(1);
    let mut rows = Vec::new();
    for &shape in shapes {
        let o = operands(rt, shape, &mut rng)?;
        let plain = plain_kernel(rt, &o.p, path)?;
        let plain_args = GemmArgs {
            a: o.a.mem(rt),
            b: o.b.mem(rt),
            c: None,
            d: o.d2.mem(rt),
            bias: None,
            aux: None,
            strides: o.s,
        };
        for &f in fusions {
            let tree = f.tree();
            if !tree.sum_k.is_empty() {
                continue; // the operand sums run beside the GEMM; not this benchmark's subject
            }
            let binding = Binding::for_tree(&tree, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
            let ours = TreeKernel::plan(rt, &o.p, &tree, &binding, path)?;
            let uses_bits = binding.aux.is_some_and(|a| a.bits) || binding.aux_in_bits.is_some();
            let bufs = EpBuffers {
                d: Some(o.d.mem(rt)),
                aux_in: Some(if binding.aux_in_bits.is_some() {
                    o.bits.mem(rt)
                } else {
                    o.aux.mem(rt)
                }),
                aux: Some(if uses_bits {
                    o.bits.mem(rt)
                } else {
                    o.aux.mem(rt)
                }),
                bias_col: Some(o.bias.mem(rt)),
                bgrad_col: Some(o.grad.mem(rt)),
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
            // One launch of each on the same inputs (a fusion that reads aux reads what the
            // other left there: both then read the same values), then compare D.
            ours.launch(rt.cx(), &o.a.mem(rt), &o.b.mem(rt), &o.s, &binding, &bufs)?;
            lt_fused(rt, &lt, f, &o.p, 1.0, &lt_bufs)?;
            let rel_diff = sampled_rel_diff(rt, &o.d, &o.d2, o.p.m, o.p.n)?;
            let mut f_ours =
                || ours.launch(rt.cx(), &o.a.mem(rt), &o.b.mem(rt), &o.s, &binding, &bufs);
            let mut f_plain = || plain.launch(rt.cx(), &plain_args).map(|_| ());
            let mut f_lt = || lt_fused(rt, &lt, f, &o.p, 1.0, &lt_bufs);
            let lt_plain_bufs = LtBuffers {
                bias: None,
                aux: None,
                ..lt_bufs
            };
            let mut f_lt_plain = || lt_plain(rt, &lt, &o.p, 1.0, &lt_plain_bufs);
            let [mut t_ours, mut t_plain, mut t_lt, mut t_lt_plain] = interleaved(
                rt,
                rounds,
                inner,
                &mut [&mut f_ours, &mut f_plain, &mut f_lt, &mut f_lt_plain],
            )?;
            let row = EpBenchRow {
                shape,
                name: f.name().to_string(),
                overhead_rounds: round_overheads(&t_ours, &t_plain),
                plain_ms: median(&mut t_plain),
                ours_ms: median(&mut t_ours),
                other_ms: median(&mut t_lt),
                path: ours.path_name(),
                rel_diff,
                baseline_ms: None,
                vendor_plain_ms: Some(median(&mut t_lt_plain)),
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The epilogue a coordinate-aware tree is measured against: for `select(p, a, b)` at the
/// root, `b` (the branch of the rows or columns past a split); `None` for other trees.
///
/// ```
/// use tessera_kernels::{bench::epilogues::coordinate_baseline, epilogue::parse_epilogue};
/// let t = parse_epilogue("select(row < 2048, sigmoid(acc), tanh(acc))").unwrap();
/// assert_eq!(coordinate_baseline(&t).unwrap().to_string(), "tanh(acc)");
/// assert!(coordinate_baseline(&parse_epilogue("relu(acc)").unwrap()).is_none());
/// ```
pub fn coordinate_baseline(tree: &EpilogueTree) -> Option<EpilogueTree> {
    match &tree.d {
        crate::epilogue::tree::Expr::Select(_, _, b) => Some(EpilogueTree {
            d: (**b).clone(),
            sum_k: tree.sum_k.clone(),
        }),
        _ => None,
    }
}

/// A coordinate-aware tree: one kernel (ours) against one launch per region (other), with the
/// plain GEMM and, when there is one, the [`coordinate_baseline`] tree in one kernel, on the
/// path as in [`bench_fusions`].
pub fn bench_coordinate(
    rt: &Runtime,
    shape: (i64, i64, i64),
    tree: &EpilogueTree,
    rounds: usize,
    inner: usize,
    path: crate::plan::PathOptions,
) -> Result<EpBenchRow> {
    let mut rng = Rng::new(2);
    let o = operands(rt, shape, &mut rng)?;
    let plain = plain_kernel(rt, &o.p, path)?;
    // The plain GEMM writes a third buffer (aux, bf16 M x N) so that D2 keeps the split result.
    let plain_args = GemmArgs {
        a: o.a.mem(rt),
        b: o.b.mem(rt),
        c: None,
        d: o.aux.mem(rt),
        bias: None,
        aux: None,
        strides: o.s,
    };
    let binding = Binding::for_tree(tree, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
    let bufs = |d: &DeviceBuf| EpBuffers {
        d: Some(d.mem(rt)),
        bias_col: Some(o.bias.mem(rt)),
        ..EpBuffers::default()
    };
    let one = TreeKernel::plan(rt, &o.p, tree, &binding, path)?;
    let mut regions = Vec::new();
    for reg in split_regions(tree, o.p.m, o.p.n, 1)?.regions {
        let mut rp = o.p;
        rp.m = reg.rows.end - reg.rows.start;
        rp.n = reg.cols.end - reg.cols.start;
        let rbind = Binding::for_tree(&reg.tree, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
        regions.push((
            TreeKernel::plan(rt, &rp, &reg.tree, &rbind, path)?,
            rbind,
            reg,
        ));
    }
    let (one_bufs, split_bufs) = (bufs(&o.d), bufs(&o.d2));
    let mut f_one = || {
        one.launch(
            rt.cx(),
            &o.a.mem(rt),
            &o.b.mem(rt),
            &o.s,
            &binding,
            &one_bufs,
        )
    };
    let mut f_split = || {
        for (g, b, reg) in &regions {
            g.launch_region(
                rt.cx(),
                &o.a.mem(rt),
                &o.b.mem(rt),
                &o.s,
                b,
                &split_bufs,
                reg.rows.clone(),
                reg.cols.clone(),
            )?;
        }
        Ok(())
    };
    f_one()?;
    f_split()?;
    let rel_diff = sampled_rel_diff(rt, &o.d, &o.d2, o.p.m, o.p.n)?;
    let mut f_plain = || plain.launch(rt.cx(), &plain_args).map(|_| ());
    // The baseline (when the tree has one) writes D2 after the split's comparison above.
    let base = match coordinate_baseline(tree) {
        Some(t) => {
            let bind = Binding::for_tree(&t, o.p.m, o.p.n, o.p.k, 1, DType::Bf16);
            Some((TreeKernel::plan(rt, &o.p, &t, &bind, path)?, bind))
        }
        None => None,
    };
    let base_bufs = bufs(&o.d2);
    let (mut t_one, mut t_plain, mut t_split, t_base) = match &base {
        Some((k, bind)) => {
            let mut f_base =
                || k.launch(rt.cx(), &o.a.mem(rt), &o.b.mem(rt), &o.s, bind, &base_bufs);
            let [a, b, c, d] = interleaved(
                rt,
                rounds,
                inner,
                &mut [&mut f_one, &mut f_plain, &mut f_split, &mut f_base],
            )?;
            (a, b, c, Some(d))
        }
        None => {
            let [a, b, c] = interleaved(
                rt,
                rounds,
                inner,
                &mut [&mut f_one, &mut f_plain, &mut f_split],
            )?;
            (a, b, c, None)
        }
    };
    Ok(EpBenchRow {
        shape,
        name: tree.to_string(),
        overhead_rounds: round_overheads(&t_one, &t_plain),
        plain_ms: median(&mut t_plain),
        ours_ms: median(&mut t_one),
        other_ms: median(&mut t_split),
        path: one.path_name(),
        rel_diff,
        baseline_ms: t_base.map(|mut t| median(&mut t)),
        vendor_plain_ms: None,
    })
}
