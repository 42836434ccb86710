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
use crate::launch::gemm::{Context, Gemm};
use crate::launch::operand::{Operands as Ops, Tensor, TensorMut};
use crate::launch::runtime::Runtime;
use crate::plan::gemm::{GemmSpec, Options};
use crate::plan::problem::{DType, GemmProblem, Major};
use crate::rng::Rng;

use super::cublaslt::{lt_fused, lt_plain, LtBuffers, LtHandle};
use crate::epilogue::fusions::Fusion;
use crate::epilogue::tree::{AuxFormat, EpilogueTree, Leaf, Sink, VecAxis};

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
    /// Ours: the kernel path and the epilogue code (`sm90-tree`, `sm90-flags`, `sm80-tree`).
    pub path: String,
    /// Relative Frobenius difference between our D and cuBLASLt's on sampled rows (after one
    /// launch of each on the same inputs); `None` for a coordinate tree, whose contenders
    /// compute different epilogues.
    pub rel_diff: Option<f64>,
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
    let mut p = GemmProblem::new(m, n, k);
    p.a_major = Major::Row;
    p.b_major = Major::Col;
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
    })
}

/// The nn.Linear GEMM of `o`'s shape with `tree`, compiled with `opts`.
fn gemm(ctx: &Context, o: &Operands, tree: &EpilogueTree, opts: Options) -> Result<Gemm> {
    let spec = GemmSpec::new(o.p.m, o.p.n, o.p.k)
        .b(Major::Col)
        .epilogue_tree(tree.clone())
        .options(opts);
    Gemm::new(ctx, &spec)
}

/// `g` on `o`'s operands, writing `d`, with the tensors its epilogue uses (bit masks in the
/// bits buffer, full aux in the aux buffer).
fn launch(rt: &Runtime, g: &Gemm, o: &Operands, d: &DeviceBuf) -> Result<()> {
    let (m, n, k) = (o.p.m, o.p.n, o.p.k);
    let tree = g.plan().spec().tree();
    let words = |x: &DeviceBuf| {
        if x.dtype == DType::F32 {
            None
        } else {
            Some(x.dtype)
        }
    };
    // SAFETY: the benchmark's buffers outlive every launch and are used on the harness's one
    // stream; each holds at least `len` elements (checked again by the launch).
    let r = |x: &DeviceBuf| unsafe { Tensor::from_raw(x.ptr(rt), words(x), x.len) };
    let w = |x: &DeviceBuf| unsafe { TensorMut::from_raw(x.ptr(rt), words(x), x.len) };
    let f32w = |x: &DeviceBuf, len: i64| unsafe {
        TensorMut::from_raw(x.ptr(rt), Some(DType::F32), len as usize)
    };
    let mut ops = Ops::new();
    if tree.d.uses(Leaf::BiasCol) {
        ops = ops
            .bias_col(unsafe { Tensor::from_raw(o.bias.ptr(rt), Some(DType::Bf16), n as usize) });
    }
    if tree.d.uses(Leaf::AuxInBits) {
        ops = ops.aux_in(r(&o.bits));
    } else if tree.d.uses(Leaf::AuxIn) {
        ops = ops.aux_in(r(&o.aux));
    }
    let sinks = tree.d.sinks();
    if sinks.contains(&Sink::Aux(AuxFormat::Bits)) {
        ops = ops.aux(w(&o.bits));
    } else if sinks.iter().any(|s| matches!(s, Sink::Aux(_))) {
        ops = ops.aux(w(&o.aux));
    }
    if sinks.contains(&Sink::Bgrad(VecAxis::Col)) {
        ops = ops.bgrad_col(f32w(&o.grad, n));
    }
    let a = unsafe { Tensor::from_raw(o.a.ptr(rt), Some(DType::Bf16), (m * k) as usize) };
    let b = unsafe { Tensor::from_raw(o.b.ptr(rt), Some(DType::Bf16), (n * k) as usize) };
    let d = unsafe { TensorMut::from_raw(d.ptr(rt), Some(DType::Bf16), (m * n) as usize) };
    g.launch(rt.stream(), a, b, d, ops)
}

fn path_name(g: &Gemm) -> String {
    let p = g.plan();
    format!(
        "{}-{}",
        p.path(),
        if p.generated_epilogue() {
            "tree"
        } else {
            "flags"
        }
    )
}

/// Ours, plain, cuBLASLt's fusion and cuBLASLt's plain GEMM for every shape and fusion
/// (`rounds` medians of `inner` launches). Ours and plain are [`Gemm`]s planned with `opts`
/// (the row's `path` says which kernel and epilogue code ours took). Fusions with operand
/// sums (BGRADA, BGRADB) are skipped: those sums run beside the GEMM.
#[allow(clippy::too_many_arguments)]
pub fn bench_fusions(
    ctx: &Context,
    shapes: &[(i64, i64, i64)],
    fusions: &[Fusion],
    rounds: usize,
    inner: usize,
    opts: Options,
    mut progress: impl FnMut(&EpBenchRow),
) -> Result<Vec<EpBenchRow>> {
    let rt = ctx.runtime();
    let lt = LtHandle::new(rt)?;
    let mut rng = Rng::new(1);
    let mut rows = Vec::new();
    for &shape in shapes {
        let o = operands(rt, shape, &mut rng)?;
        let plain = gemm(
            ctx,
            &o,
            &EpilogueTree::new(crate::epilogue::build::acc()),
            opts,
        )?;
        for &f in fusions {
            let tree = f.tree();
            if !tree.sum_k.is_empty() {
                continue; // the operand sums run beside the GEMM; not this benchmark's subject
            }
            let ours = gemm(ctx, &o, &tree, opts)?;
            let uses_bits = tree.d.sinks().contains(&Sink::Aux(AuxFormat::Bits))
                || tree.d.uses(Leaf::AuxInBits);
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
            launch(rt, &ours, &o, &o.d)?;
            lt_fused(rt, &lt, f, &o.p, 1.0, &lt_bufs)?;
            let rel_diff = sampled_rel_diff(rt, &o.d, &o.d2, o.p.m, o.p.n)?;
            let mut f_ours = || launch(rt, &ours, &o, &o.d);
            let mut f_plain = || launch(rt, &plain, &o, &o.d2);
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
                path: path_name(&ours),
                rel_diff: Some(rel_diff),
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

/// A coordinate-aware tree in one kernel (ours) against the plain GEMM and the
/// [`coordinate_baseline`] tree (the `other` contender), with the same options.
pub fn bench_coordinate(
    ctx: &Context,
    shape: (i64, i64, i64),
    tree: &EpilogueTree,
    rounds: usize,
    inner: usize,
    opts: Options,
) -> Result<EpBenchRow> {
    let rt = ctx.runtime();
    let mut rng = Rng::new(2);
    let o = operands(rt, shape, &mut rng)?;
    let plain = gemm(
        ctx,
        &o,
        &EpilogueTree::new(crate::epilogue::build::acc()),
        opts,
    )?;
    let one = gemm(ctx, &o, tree, opts)?;
    let base_tree = coordinate_baseline(tree)
        .unwrap_or_else(|| EpilogueTree::new(crate::epilogue::build::acc()));
    let base = gemm(ctx, &o, &base_tree, opts)?;
    let mut f_one = || launch(rt, &one, &o, &o.d);
    let mut f_plain = || launch(rt, &plain, &o, &o.d2);
    let mut f_base = || launch(rt, &base, &o, &o.d2);
    let [mut t_one, mut t_plain, mut t_base] = interleaved(
        rt,
        rounds,
        inner,
        &mut [&mut f_one, &mut f_plain, &mut f_base],
    )?;
    Ok(EpBenchRow {
        shape,
        name: tree.to_string(),
        overhead_rounds: round_overheads(&t_one, &t_plain),
        plain_ms: median(&mut t_plain),
        ours_ms: median(&mut t_one),
        other_ms: median(&mut t_base.clone()),
        path: path_name(&one),
        rel_diff: None,
        baseline_ms: Some(median(&mut t_base)),
        vendor_plain_ms: None,
    })
}
