//! The GEMM a user asks for ([`GemmSpec`]) and what tessera makes of it ([`Plan`]): one
//! planner for every caller (the library's [`crate::Gemm`], the command line, the
//! benchmarks), so a problem takes the same path wherever it is run.
//!
//! The planner works on the product with a row-major D: a spec with a column-major D is
//! planned as `Dᵀ = Bᵀ Aᵀ` (A and B exchanged and each seen transposed, the epilogue
//! transposed with [`EpilogueTree::transposed`]), which is the same computation.

use std::fmt;

use crate::arch::Arch;
use crate::epilogue::check::Binding;
use crate::epilogue::{describe, flag_epilogue_for, parse_epilogue, EpilogueTree};
use crate::error::{KernelError, Result};
use crate::plan::problem::{DType, Epilogue, GemmProblem, Major};
use crate::plan::sm90::{ClusterShare, PathOptions, Schedule, Sm90Options, Sm90Plan};
use crate::plan::{plan_path, policy, GemmPath, GemmPlan};

/// A GEMM with a fused epilogue: `D[b] = epilogue(A[b] B[b])` for `b < batch`, A `M x K`, B
/// `K x N`, D `M x N`, each in the storage order given, 16-bit inputs, fp32 accumulation.
///
/// Built once and checked when planned; the operands' memory and strides come at launch.
///
/// ```
/// use tessera_kernels::{DType, GemmSpec, Major};
/// let spec = GemmSpec::new(1024, 4096, 512)
///     .dtype(DType::Bf16)
///     .b(Major::Col)
///     .epilogue("gelu(aux(acc + bias_col))")
///     .unwrap();
/// assert_eq!(spec.to_string(), "1024x4096x512 bf16->bf16 A row, B col, D row: gelu(aux(acc + bias_col))");
/// assert!(GemmSpec::new(16, 16, 16).epilogue("relu(acc +").is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GemmSpec {
    pub(crate) m: i64,
    pub(crate) n: i64,
    pub(crate) k: i64,
    pub(crate) batch: i64,
    pub(crate) dtype: DType,
    pub(crate) out: Option<DType>,
    pub(crate) a: Major,
    pub(crate) b: Major,
    pub(crate) d: Major,
    pub(crate) tree: EpilogueTree,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) options: Options,
    /// A is a convolution's im2col matrix loaded from its input by TMA (set by the
    /// convolution, crate-internal): the Hopper plan's [`crate::plan::Im2colTma`].
    pub(crate) im2col: Option<crate::plan::Im2colTma>,
    /// A is a convolution's im2col matrix loaded by the window load from its phase-staged
    /// input (set by the convolution): the Hopper plan's [`crate::plan::WindowTma`].
    pub(crate) window: Option<crate::plan::WindowTma>,
}

/// Choices the planner would otherwise make itself, for tuning and for comparing paths.
/// The default leaves every choice to the planner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Plan the sm80-class path (cp.async + mma.sync) even where the Hopper path exists.
    pub sm80: bool,
    /// The CTA tile `(BM, BN, BK)`. On the Hopper path BM is 64 or 128, BN a multiple of 32
    /// up to 256 and BK 64.
    pub tile: Option<(i64, i64, i64)>,
    /// The pipeline depth.
    pub stages: Option<i64>,
    /// Hopper path: tile rows per group of the persistent tile order.
    pub group_m: Option<i64>,
    /// Hopper path: how the consumer warpgroups share a CTA's work.
    pub schedule: Option<Schedule>,
    /// Hopper path: CTAs per cluster (1 or 2). A pair runs the flag-driven epilogue only: an
    /// epilogue that takes the generated one is refused with a cluster of 2.
    pub cluster: Option<i64>,
    /// Hopper path, cluster 2: the operand the pair shares.
    pub share: Option<ClusterShare>,
    /// Hopper path: store D through shared memory with TMA where it can.
    pub tma_store: Option<bool>,
    /// Hopper path: split a partial last wave's tiles along K (stream-K); `Some(true)` for
    /// every partial last wave.
    pub stream_k: Option<bool>,
    /// Run the epilogue through the generated tree code even where the flag-driven epilogue
    /// of the GEMM kernels expresses it.
    pub generated_epilogue: bool,
    /// Hopper path: cap the persistent grid at this many CTAs.
    pub max_ctas: Option<i64>,
    /// Hopper path: launch the kernel as a programmatic dependent of the kernel before it on
    /// the stream (default on): it is scheduled as that kernel completes, before its writes
    /// are visible, and waits in the kernel until they are before touching memory, which
    /// shortens the gap between back-to-back kernels. `Some(false)` launches it as any other
    /// kernel. The results are the same either way.
    pub dependent_launch: Option<bool>,
    /// Convolutions on the Hopper path: load A by the halo load ([`crate::plan::Halo`]: one
    /// strip a filter row for all its taps) where it can take the layer (`Some(true)`), never
    /// (`Some(false)`), or (`None`) where its estimate beats TMA's im2col load's.
    pub halo: Option<bool>,
}

impl Options {
    pub(crate) fn path_options(&self) -> PathOptions {
        PathOptions {
            force_sm80: self.sm80,
            sm80: crate::plan::PlanOptions {
                tile: self.tile,
                stages: self.stages,
            },
            sm90: Sm90Options {
                tile: self.tile.map(|(m, n, _)| (m, n)),
                stages: self.stages,
                group_m: self.group_m,
                schedule: self.schedule,
                cluster: self.cluster,
                share: self.share,
                tma_store: self.tma_store,
                stream_k: self.stream_k,
                // Decided by the path from the problem (see `choose_path`).
                cp_async_ab: false,
                epilogue_inputs: None,
                epilogue_vectors: (false, false),
                im2col: None,
                window: None,
                bias_in_acc: false,
                staged_in_store: false,
            },
            generated_epilogue: self.generated_epilogue,
            // Decided by the planner from the problem (see `Plan::staged_k`).
            stage_k: false,
            stage_b_only: false,
        }
    }

    /// Whether a choice of the Hopper path alone is forced.
    fn hopper_given(&self) -> bool {
        self.group_m.is_some()
            || self.schedule.is_some()
            || self.cluster.is_some()
            || self.share.is_some()
            || self.tma_store.is_some()
            || self.stream_k.is_some()
            || self.max_ctas.is_some()
    }
}

impl GemmSpec {
    /// `M x N x K`, one batch, bf16 in and out, every operand row-major, D = the accumulator.
    pub fn new(m: i64, n: i64, k: i64) -> GemmSpec {
        GemmSpec {
            m,
            n,
            k,
            batch: 1,
            dtype: DType::Bf16,
            out: None,
            a: Major::Row,
            b: Major::Row,
            d: Major::Row,
            tree: EpilogueTree::new(crate::epilogue::build::acc()),
            alpha: 1.0,
            beta: 0.0,
            options: Options::default(),
            im2col: None,
            window: None,
        }
    }

    /// nn.Linear's product `y = x Wᵀ` with `tokens` rows, `out_features` columns and
    /// `in_features` summed: A (`x`) row-major, B stored `out x in` (column-major `K x N`),
    /// both K-major as the Hopper kernel loads them.
    ///
    /// ```
    /// use tessera_kernels::{GemmSpec, Major};
    /// assert_eq!(GemmSpec::linear(8, 16, 32), GemmSpec::new(8, 16, 32).b(Major::Col));
    /// ```
    pub fn linear(tokens: i64, out_features: i64, in_features: i64) -> GemmSpec {
        GemmSpec::new(tokens, out_features, in_features).b(Major::Col)
    }

    /// Independent products (strided batch).
    pub fn batch(mut self, batch: i64) -> GemmSpec {
        self.batch = batch;
        self
    }

    /// The type of A and B (bf16 or fp16); D, C and the epilogue's tensors take it too
    /// unless [`GemmSpec::out_dtype`] says otherwise.
    pub fn dtype(mut self, dtype: DType) -> GemmSpec {
        self.dtype = dtype;
        self
    }

    /// The type of D, C, the bias vectors, the residual and a full aux (bf16, fp16 or fp32).
    pub fn out_dtype(mut self, dtype: DType) -> GemmSpec {
        self.out = Some(dtype);
        self
    }

    /// The storage order of A (`M x K`).
    pub fn a(mut self, major: Major) -> GemmSpec {
        self.a = major;
        self
    }

    /// The storage order of B (`K x N`; column-major is nn.Linear's weight `N x K`).
    pub fn b(mut self, major: Major) -> GemmSpec {
        self.b = major;
        self
    }

    /// The storage order of D and of every other `M x N` tensor (C, residual, aux).
    pub fn d(mut self, major: Major) -> GemmSpec {
        self.d = major;
        self
    }

    /// The epilogue in its text form (`gelu(aux(acc + bias_col))`), a named fusion
    /// (`dgelu_bgrad`) or the comma list (`bias,relu`); see the epilogue tutorial.
    pub fn epilogue(mut self, text: &str) -> Result<GemmSpec> {
        self.tree = parse_epilogue(text)
            .map_err(|e| KernelError::invalid("GemmSpec::epilogue", e.to_string()))?;
        Ok(self)
    }

    /// The epilogue as a tree.
    pub fn epilogue_tree(mut self, tree: EpilogueTree) -> GemmSpec {
        self.tree = tree;
        self
    }

    /// The scalar `alpha` of the epilogue (1 by default).
    pub fn alpha(mut self, alpha: f32) -> GemmSpec {
        self.alpha = alpha;
        self
    }

    /// The scalar `beta` (0 by default: C is not read); nonzero needs an epilogue that reads
    /// `c` and a C at launch.
    pub fn beta(mut self, beta: f32) -> GemmSpec {
        self.beta = beta;
        self
    }

    /// Forced planner choices.
    pub fn options(mut self, options: Options) -> GemmSpec {
        self.options = options;
        self
    }

    /// The input type (of A and B).
    pub fn input(&self) -> DType {
        self.dtype
    }

    /// The output type.
    pub fn out(&self) -> DType {
        self.out.unwrap_or(self.dtype)
    }

    /// The epilogue tree.
    pub fn tree(&self) -> &EpilogueTree {
        &self.tree
    }

    /// `(M, N, K, batch)`.
    pub fn extents(&self) -> (i64, i64, i64, i64) {
        (self.m, self.n, self.k, self.batch)
    }

    /// The storage orders of A, B and D.
    pub fn majors(&self) -> (Major, Major, Major) {
        (self.a, self.b, self.d)
    }

    /// The epilogue's scalars `(alpha, beta)`.
    pub fn scalars(&self) -> (f32, f32) {
        (self.alpha, self.beta)
    }

    /// The forced planner choices.
    pub fn forced(&self) -> &Options {
        &self.options
    }

    /// Plans the GEMM for `arch` with `sms` streaming multiprocessors (the persistent
    /// Hopper kernel is compiled for the device's SM count; 132 is the H100 SXM). Needs no
    /// GPU: [`Plan`] prints the decisions and holds the CUDA source.
    pub fn plan(&self, arch: Arch, sms: i64) -> Result<Plan> {
        Plan::new(self, arch, sms)
    }
}

impl fmt::Display for GemmSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)?;
        if self.batch != 1 {
            write!(f, " batch {}", self.batch)?;
        }
        write!(
            f,
            " {}->{} A {}, B {}, D {}: {}",
            self.dtype,
            self.out(),
            self.a,
            self.b,
            self.d,
            self.tree
        )?;
        if self.alpha != 1.0 || self.beta != 0.0 {
            write!(f, " (alpha {}, beta {})", self.alpha, self.beta)?;
        }
        Ok(())
    }
}

/// The kernel a plan runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum KernelPlan {
    /// A GEMM kernel of either path with its flag-driven epilogue (the tree amounts to one of
    /// its fusions: bias, activation, aux, C).
    Flags(GemmPath),
    /// The sm80-class kernel with the generated tree epilogue.
    Sm80Tree(Box<GemmPlan>),
    /// The Hopper kernel with the generated tree epilogue (compiled for the SM count).
    HopperTree(Box<Sm90Plan>),
}

/// What tessera makes of a [`GemmSpec`] on a target: the path, the kernel plan, the epilogue
/// code it runs and the CUDA source, each decision with its reason (`Display`).
///
/// ```
/// use tessera_kernels::{Arch, GemmSpec, Major};
/// let spec = GemmSpec::new(4096, 4096, 4096).b(Major::Col).epilogue("relu(acc + bias_col)").unwrap();
/// let plan = spec.plan(Arch::Sm90a, 132).unwrap();
/// assert_eq!(plan.path(), "sm90");
/// assert!(plan.source().unwrap().contains("tessera_gemm"));
/// // B row-major is not K-major: the Hopper kernel's TMA loads need K contiguous.
/// let rowb = GemmSpec::new(4096, 4096, 4096).plan(Arch::Sm90a, 132).unwrap();
/// assert_eq!(rowb.path(), "sm80");
/// assert!(rowb.to_string().contains("K-major"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub(crate) spec: GemmSpec,
    pub(crate) arch: Arch,
    pub(crate) sms: i64,
    /// The product the kernel runs: row-major D, the plain epilogue (or the flag epilogue's
    /// terms for [`KernelPlan::Flags`]).
    pub(crate) problem: GemmProblem,
    /// The epilogue the kernel runs (transposed for a column-major D), without operand sums.
    pub(crate) tree: EpilogueTree,
    /// The operand sums over K that run beside the GEMM, in the kernel's terms.
    pub(crate) sums: Vec<crate::epilogue::Operand>,
    /// The binding the kernel is compiled for: tight tensors of the spec's types, its alpha
    /// and beta. Launches rebind strides and addresses; types and beta's zeroness are fixed.
    pub(crate) binding: Binding,
    /// Whether the kernel runs `Dᵀ = Bᵀ Aᵀ`.
    pub(crate) transposed: bool,
    pub(crate) kernel: KernelPlan,
    pub(crate) path: PathOptions,
    why_path: String,
    why_epilogue: String,
}

/// Why the Hopper path cannot run `problem` (the kernel's, row-major D) on `arch`, or `None`
/// when it can: what [`plan_path`] decides, in words.
fn hopper_refusal(problem: &GemmProblem, arch: Arch) -> Option<String> {
    if arch != Arch::Sm90a {
        return Some(format!(
            "{arch} has no wgmma or TMA (the Hopper path needs sm_90a)"
        ));
    }
    if problem.a_major != Major::Row || problem.b_major != Major::Col {
        return Some(format!(
            "the Hopper kernel loads K-major operands (A row-major, B column-major in D = A B{}); this one has A {}, B {}",
            if problem.d_major == Major::Col { ", of the transposed product" } else { "" },
            problem.a_major,
            problem.b_major
        ));
    }
    if !Sm90Plan::supports(problem, arch) {
        return Some("the Hopper planner does not take this problem".to_string());
    }
    None
}

/// Whether K makes rows of A and B (K-major) a length TMA cannot address: a tensor map's
/// strides are multiples of 16 bytes.
fn k_rows_unaligned(problem: &GemmProblem) -> bool {
    (problem.k * problem.input.bytes()) % 16 != 0
}

/// Whether K makes rows of A and B that TMA addresses but that start off the 32-byte sector
/// grid (a multiple of 16 bytes, not of 32).
fn k_rows_off_sectors(problem: &GemmProblem) -> bool {
    let row = problem.k * problem.input.bytes();
    row % 16 == 0 && row % 32 != 0
}

/// The byte multiple an operand's rows (and batches, and start) must be on for the Hopper
/// kernel to read it in place when the plan stages A and B: 16 where K makes rows TMA cannot
/// address or the kernel loads them by cp.async (16 bytes a copy), 32 where they are staged
/// for being off the sector grid.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn stage_grid(problem: &GemmProblem, cp_async: bool) -> u64 {
    if k_rows_unaligned(problem) || cp_async {
        16
    } else {
        32
    }
}

/// Elements per staged row of A and B for a K that makes rows TMA cannot address, or rows
/// off the 32-byte sector grid: K rounded up to 128 bytes, the row of one k-tile the kernel loads, so that every such load is one
/// aligned 128-byte segment.
fn staged_row(problem: &GemmProblem) -> i64 {
    let per = 128 / problem.input.bytes();
    (problem.k + per - 1) / per * per
}

/// The path the plan takes (the options the planners get) and why, from the problem's
/// capability rules and the forced options, and whether the rows of A and B are off the
/// 32-byte sector grid and read by TMA (their staging settled with the tile,
/// [`Plan::settle_off_sector_rows`]); forced options that contradict the path are errors
/// naming them.
fn choose_path(
    spec: &GemmSpec,
    problem: &GemmProblem,
    arch: Arch,
) -> Result<(PathOptions, String, bool)> {
    const OP: &str = "plan gemm";
    if spec.options.sm80 && spec.options.hopper_given() {
        return Err(KernelError::invalid(
            OP,
            "the schedule, cluster, TMA-store, stream-K, rasterization-group and grid options are the Hopper path's; the sm80-class path was forced",
        ));
    }
    let mut path = spec.options.path_options();
    path.sm90.im2col = spec.im2col;
    path.sm90.window = spec.window;
    let refusal = hopper_refusal(problem, arch);
    let hopper_ok = refusal.is_none();
    // Where K makes rows TMA cannot address, the Hopper path still runs, on copies of A
    // and B with padded rows: the copy reads and writes each operand once more, while the
    // sm80-class path (which reads such rows in place) runs at a fraction of the Hopper
    // kernel's rate (docs/design/013-staged-operands.md).
    // Rows TMA addresses but off the 32-byte sector grid, which it reads at little more than
    // half the rate, are loaded by cp.async from every producer thread where K is short
    // (policy::cp_async_off_sector_rows; not with a forced cluster, whose multicast is
    // TMA's); else staged where the copy costs less than the slower loads
    // (policy::stage_off_sector_rows, which needs the tile: `Plan::settle_off_sector_rows`
    // decides once the plan has one). (Not an im2col plan: its A is x, read by taps.)
    let off_grid = hopper_ok
        && !path.force_sm80
        && spec.im2col.is_none()
        && spec.window.is_none()
        && k_rows_off_sectors(problem);
    let cp_async = (off_grid && spec.options.cluster.unwrap_or(1) == 1)
        .then(|| policy::cp_async_off_sector_rows(problem))
        .filter(|d| d.value);
    path.sm90.cp_async_ab = cp_async.is_some();
    // Settled with the tile (the plan's staging stays off until then).
    let off_sectors = off_grid && !path.sm90.cp_async_ab;
    // (The cp.async load keeps the staging for operands whose own rows, batches or start
    // are off the 16-byte grid its copies need: those are copied first, the others read in
    // place.)
    path.stage_k =
        hopper_ok && !path.force_sm80 && (k_rows_unaligned(problem) || path.sm90.cp_async_ab);
    let why_path = if path.force_sm80 {
        "sm80: forced (Options::sm80)".to_string()
    } else {
        match &refusal {
            None if off_sectors => "sm90 (rows off the sector grid: settled with the tile)".into(),
            None if cp_async.is_some() => format!(
                "sm90, A and B loaded by cp.async: {}",
                cp_async.as_ref().map_or("", |d| d.why.as_str())
            ),
            None if path.stage_k => format!(
                "sm90, A and B staged: K = {} makes rows of {} bytes, and TMA addresses rows of a multiple of 16 bytes; the launch first copies A and B into the workspace with rows of {} elements (one more read and write of each), rather than taking the sm80-class path",
                problem.k,
                problem.k * problem.input.bytes(),
                staged_row(problem)
            ),
            None => {
                "sm90: sm_90a, K-major 16-bit operands whose rows TMA can address".to_string()
            }
            Some(r) => format!("sm80: {r}"),
        }
    };
    if let (true, Some((_, _, bk))) = (hopper_ok && !path.force_sm80, spec.options.tile) {
        if bk != 64 {
            return Err(KernelError::invalid(
                OP,
                format!("the Hopper tile's BK is 64, not {bk}"),
            ));
        }
    }
    if !hopper_ok && spec.options.hopper_given() && !path.force_sm80 {
        return Err(KernelError::invalid(
            OP,
            format!("Hopper options were forced, but the problem takes the sm80-class path ({why_path})"),
        ));
    }
    Ok((path, why_path, off_sectors))
}

fn flip(m: Major) -> Major {
    match m {
        Major::Row => Major::Col,
        Major::Col => Major::Row,
    }
}

impl Plan {
    fn new(spec: &GemmSpec, arch: Arch, sms: i64) -> Result<Plan> {
        const OP: &str = "plan gemm";
        if sms < 1 {
            return Err(KernelError::invalid(OP, format!("{sms} SMs: at least 1")));
        }
        spec.tree
            .check_structure()
            .map_err(|e| KernelError::invalid(OP, e.to_string()))?;
        let out = spec.out();
        let transposed = spec.d == Major::Col;
        let (m, n, a_major, b_major, tree) = if transposed {
            (
                spec.n,
                spec.m,
                flip(spec.b),
                flip(spec.a),
                spec.tree.transposed(),
            )
        } else {
            (spec.m, spec.n, spec.a, spec.b, spec.tree.clone())
        };
        let problem = GemmProblem {
            m,
            n,
            k: spec.k,
            batch: spec.batch,
            input: spec.dtype,
            output: out,
            a_major,
            b_major,
            d_major: Major::Row,
            epilogue: Epilogue::default(),
        };
        problem.validate()?;
        let reads_c = tree.d.uses(crate::epilogue::tree::Leaf::C);
        if spec.beta != 0.0 && !reads_c {
            return Err(KernelError::invalid(
                OP,
                format!(
                    "beta = {} but the epilogue `{}` does not read `c` (write it as `alpha * acc + beta * c`)",
                    spec.beta, spec.tree
                ),
            ));
        }
        // The operand sums run beside the GEMM (their own kernel), not in its epilogue.
        let sums = tree.sum_k.clone();
        let tree = EpilogueTree::new(tree.d);
        let mut binding = Binding::for_tree(&tree, m, n, spec.k, spec.batch, out);
        binding.alpha = spec.alpha;
        binding.beta = spec.beta;
        let (path, why_path, off_sectors) = choose_path(spec, &problem, arch)?;
        // The flag-driven epilogue where the tree amounts to one of its fusions, except where
        // the tree takes the ping-pong schedule on the Hopper path (there the generated
        // epilogue's placement of the vector loads is the cheaper one).
        let flags = if path.generated_epilogue {
            None
        } else {
            flag_epilogue_for(&tree, &binding, out)
        };
        let mut why_epilogue = String::new();
        let kernel = match flags {
            Some(e) => {
                let mut p = problem;
                p.epilogue = e;
                let gp = plan_path(&p, arch, path)?;
                // The plain GEMM (no epilogue terms) is the flag kernel's own ping-pong plan.
                let pingpong = matches!(gp, GemmPath::Hopper(_))
                    && !e.is_plain()
                    && crate::epilogue::cuda::tree_takes_pingpong(&problem, &tree, path.sm90);
                if pingpong {
                    why_epilogue = "generated tree epilogue: the tree takes the plain GEMM's ping-pong schedule, where the generated code loads its vectors early".into();
                    None
                } else {
                    why_epilogue = format!("the GEMM kernel's flag-driven epilogue (`{e}`): the tree is one of its fusions");
                    Some(KernelPlan::Flags(match gp {
                        GemmPath::Hopper(h) => GemmPath::Hopper(Box::new(h.compiled_for(sms))),
                        other => other,
                    }))
                }
            }
            None => None,
        };
        let kernel = match kernel {
            Some(k) => k,
            None => {
                if why_epilogue.is_empty() {
                    why_epilogue = if path.generated_epilogue {
                        "generated tree epilogue: forced (Options::generated_epilogue)".into()
                    } else {
                        "generated tree epilogue: the tree is not one of the flag-driven fusions"
                            .into()
                    };
                }
                match plan_path(&problem, arch, path)? {
                    GemmPath::Hopper(h) if h.cluster > 1 => {
                        // The generated epilogue's kernel has not been run with a pair of
                        // CTAs on a GPU: refused rather than launched unproven.
                        return Err(KernelError::invalid(
                            OP,
                            format!(
                                "Options::cluster = {} runs with the flag-driven epilogue only, and this epilogue takes the generated one ({why_epilogue}); leave the cluster unset",
                                h.cluster
                            ),
                        ));
                    }
                    GemmPath::Hopper(_) => {
                        let p = crate::epilogue::cuda::tree_sm90_plan(
                            &problem, &tree, &binding, path.sm90,
                        )?;
                        KernelPlan::HopperTree(Box::new(p.compiled_for(sms)))
                    }
                    GemmPath::Sm80(p) => KernelPlan::Sm80Tree(p),
                }
            }
        };
        let mut plan = Plan {
            spec: spec.clone(),
            arch,
            sms,
            problem,
            tree,
            sums,
            binding,
            transposed,
            kernel,
            path,
            why_path,
            why_epilogue,
        };
        if off_sectors {
            plan.settle_off_sector_rows();
        }
        Ok(plan)
    }

    /// Rows of A and B off the 32-byte sector grid, read by TMA (`choose_path` found them):
    /// which operands are staged depends on the tile ([`policy::stage_off_sector_rows`]),
    /// which the tile rules chose without regard to staging.
    fn settle_off_sector_rows(&mut self) {
        let Some((bm, bn, _)) = self.sm90().map(|h| h.cta_tile) else {
            return;
        };
        let d = policy::stage_off_sector_rows(&self.problem, (bm, bn));
        self.path.stage_k = d.value.is_some();
        self.path.stage_b_only = d.value == Some(true);
        self.why_path = match d.value {
            Some(true) => format!(
                "sm90, B staged, A in place: {}; the launch first copies B into the workspace with rows of {} elements",
                d.why,
                staged_row(&self.problem)
            ),
            Some(false) => format!(
                "sm90, A and B staged: {}; the launch first copies them into the workspace with rows of {} elements",
                d.why,
                staged_row(&self.problem)
            ),
            None => format!("sm90, A and B in place: {}", d.why),
        };
    }

    /// The im2col geometry of A where the Hopper kernel loads it from a convolution's input.
    pub(crate) fn problem_im2col(&self) -> Option<crate::plan::Im2colTma> {
        self.sm90().and_then(|p| p.im2col)
    }

    /// The window load's geometry where the Hopper kernel loads A from a convolution's
    /// phase-staged input.
    pub(crate) fn problem_window(&self) -> Option<crate::plan::WindowTma> {
        self.sm90().and_then(|p| p.window)
    }

    /// The spec planned.
    pub fn spec(&self) -> &GemmSpec {
        &self.spec
    }

    /// The target.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// `"sm90"` (TMA + wgmma) or `"sm80"` (cp.async + mma.sync).
    pub fn path(&self) -> &'static str {
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(_)) | KernelPlan::HopperTree(_) => "sm90",
            KernelPlan::Flags(GemmPath::Sm80(_)) | KernelPlan::Sm80Tree(_) => "sm80",
        }
    }

    /// Whether the epilogue runs as generated tree code (else the GEMM kernel's flag-driven
    /// epilogue).
    pub fn generated_epilogue(&self) -> bool {
        !matches!(self.kernel, KernelPlan::Flags(_))
    }

    /// Whether the kernel runs the transposed product `Dᵀ = Bᵀ Aᵀ` (a column-major D).
    pub fn transposed(&self) -> bool {
        self.transposed
    }

    /// The Hopper schedule, when on the Hopper path.
    pub fn schedule(&self) -> Option<Schedule> {
        self.sm90().map(|p| p.schedule)
    }

    /// The CTA tile `(BM, BN, BK)`.
    pub fn cta_tile(&self) -> (i64, i64, i64) {
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => p.cta_tile,
            KernelPlan::Flags(GemmPath::Sm80(p)) | KernelPlan::Sm80Tree(p) => p.cta_tile,
        }
    }

    /// Whether the Hopper kernel can store D as whole rows: N fits one tile and D's 16-bit
    /// rows are off TMA's 16-byte grid (N not a multiple of 8). A launch takes that store
    /// where D's rows are contiguous and start on 16 bytes; else D leaves element pair by
    /// element pair through the fp32 scratch.
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let spec = |n| GemmSpec::linear(4096, n, 1024);
    /// assert!(spec(124).plan(Arch::Sm90a, 132).unwrap().row_store());
    /// // Rows on the grid: TMA's tensor stores.
    /// assert!(!spec(128).plan(Arch::Sm90a, 132).unwrap().row_store());
    /// ```
    pub fn row_store(&self) -> bool {
        self.sm90().is_some_and(|p| p.row_store())
    }

    /// Whether the Hopper kernel loads A and B by cp.async from every producer thread instead
    /// of TMA: where their K-major rows are off the 32-byte sector grid (K an odd multiple of
    /// 8 for 16-bit elements).
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let plan = |k| GemmSpec::linear(2048, 2048, k).plan(Arch::Sm90a, 132).unwrap();
    /// assert!(plan(136).cp_async_ab() && plan(504).cp_async_ab());
    /// // On the grid, unaligned, or long enough for the copy to pay.
    /// assert!(!plan(512).cp_async_ab() && !plan(505).cp_async_ab() && !plan(2056).cp_async_ab());
    /// ```
    pub fn cp_async_ab(&self) -> bool {
        self.sm90().is_some_and(|p| p.cp_async_ab)
    }

    /// Whether the kernel splits tiles along K (stream-K) on this device.
    pub fn stream_k(&self) -> bool {
        self.sm90().is_some_and(|p| p.stream_k)
    }

    /// Dynamic shared memory per CTA, bytes.
    pub fn smem_bytes(&self) -> i64 {
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => p.smem_bytes,
            KernelPlan::Flags(GemmPath::Sm80(p)) | KernelPlan::Sm80Tree(p) => p.smem_bytes,
        }
    }

    /// The kernel's name (a function of the plan).
    pub fn kernel_name(&self) -> String {
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => p.kernel_name(),
            KernelPlan::Flags(GemmPath::Sm80(p)) | KernelPlan::Sm80Tree(p) => p.kernel_name(),
        }
    }

    pub(crate) fn sm90(&self) -> Option<&Sm90Plan> {
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => Some(p),
            _ => None,
        }
    }

    /// Bytes of device workspace a launch needs: the stream-K partial sums and flags, then
    /// the staged copies of A and B where [`Plan::staged_k`] says so; 0 when the kernel
    /// neither splits tiles nor stages operands.
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let plan = GemmSpec::linear(1000, 3000, 4095).plan(Arch::Sm90a, 132).unwrap();
    /// // A (1000 rows) and B (3000 rows) staged in rows of 4096 bf16 elements.
    /// assert!(plan.workspace_bytes() >= (1000 + 3000) * 4096 * 2);
    /// ```
    pub fn workspace_bytes(&self) -> usize {
        let (_, b, end) = self.workspace_regions();
        if b.is_some() {
            end
        } else {
            self.stream_k_bytes()
        }
    }

    /// Bytes of the stream-K partial sums and flags (0 when the kernel never splits tiles).
    pub(crate) fn stream_k_bytes(&self) -> usize {
        match self.sm90() {
            Some(p) if p.stream_k => {
                let slots = (self.sms * p.consumers) as usize;
                slots * (64 * p.cta_tile.1 as usize * 4 + 4)
            }
            _ => 0,
        }
    }

    /// Byte offsets in the workspace of the staged A and B (the kernel's operands) and the
    /// end of the last region, each region 256-byte aligned after the stream-K part; `None`
    /// offsets when nothing is staged.
    pub(crate) fn workspace_regions(&self) -> (Option<usize>, Option<usize>, usize) {
        let sk = self.stream_k_bytes();
        let Some(ld) = self.staged_k() else {
            return (None, None, sk);
        };
        let up = |x: usize| x.div_ceil(256) * 256;
        let p = &self.problem;
        let bytes = |rows: i64| (p.batch * rows * ld * p.input.bytes()) as usize;
        let a = up(sk);
        let b = up(a + bytes(p.m));
        (Some(a), Some(b), b + bytes(p.n))
    }

    /// Whether the staging of [`Plan::staged_k`] copies only B (rows off the 32-byte sector
    /// grid: A is read in place by TMA, which loses little there, while B read in place
    /// costs the GEMM 10-54%; design 013) and A only where its own rows, batches or start
    /// are off TMA's 16-byte grid.
    pub fn stages_b_only(&self) -> bool {
        self.staged_k().is_some() && self.path.stage_b_only
    }

    /// The row length (elements) of the copies of A and B a launch stages into the workspace
    /// before the Hopper kernel reads them, where K makes rows TMA cannot address (a multiple
    /// of 16 bytes), or rows off the 32-byte sector grid (which the kernel loads by cp.async
    /// where K is short, [`crate::plan::policy::cp_async_off_sector_rows`], else B alone
    /// staged where its copy costs less than its slower loads,
    /// [`crate::plan::policy::stage_off_sector_rows`], [`Plan::stages_b_only`]); `None` when
    /// the kernel reads A and B in place.
    ///
    /// An operand the caller already gives with rows and batches on multiples of 16 bytes (32
    /// where staged for the sector grid under a cluster) and a start aligned as much is read
    /// in place even then: under the cp.async load, every operand but one whose own strides
    /// or start are off the 16-byte grid.
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let plan = |m, k| GemmSpec::linear(m, 4096, k).plan(Arch::Sm90a, 132).unwrap();
    /// assert_eq!(plan(4096, 4095).staged_k(), Some(4096));
    /// assert_eq!(plan(4096, 4095).path(), "sm90");
    /// assert_eq!(plan(4096, 4096).staged_k(), None);
    /// // 8208-byte rows, off the sector grid: B staged where the GEMM is long enough to pay,
    /// // A read in place.
    /// assert_eq!(plan(4096, 4104).staged_k(), Some(4160));
    /// assert!(plan(4096, 4104).stages_b_only());
    /// assert_eq!(plan(16, 4104).staged_k(), None);
    /// // On a 128 x 128 tile (2192 x 4096) A read in place would cost as much as B: both.
    /// assert_eq!(plan(2192, 888).staged_k(), Some(896));
    /// assert!(!plan(2192, 888).stages_b_only());
    /// assert!(!plan(4096, 4095).stages_b_only());
    /// // 272-byte rows: loaded by cp.async, copied first only where a caller's operand is
    /// // off the 16-byte grid.
    /// assert_eq!(plan(4096, 136).staged_k(), Some(192));
    /// ```
    pub fn staged_k(&self) -> Option<i64> {
        (self.path.stage_k && self.sm90().is_some()).then(|| staged_row(&self.problem))
    }

    /// The plan in a few words, on the plan's SM count: `pp 128x128 s6` (ping-pong),
    /// `coop 128x256 s4 sk 68/2048 on 132` (cooperative, stream-K splitting 68 of 2048 tiles
    /// over a grid of 132), `... staged` (A and B copied first, [`Plan::staged_k`]; `staged
    /// B`, B alone, [`Plan::stages_b_only`]),
    /// `mma.sync 128x256x64 s3` (the sm80-class path).
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let plan = |m, n, k| GemmSpec::linear(m, n, k).plan(Arch::Sm90a, 132).unwrap().summary();
    /// assert_eq!(plan(8192, 8192, 8192), "coop 128x256 s4 sk 68/2048 on 132");
    /// // One wave of 32 tiles split in four parts each, over 128 CTAs.
    /// assert_eq!(plan(16, 4096, 4096), "coop 64x128 s6 sk 32/32 on 128");
    /// // K = 4095: A and B staged into rows TMA can address.
    /// assert_eq!(plan(4095, 4095, 4095), "coop 128x256 s4 staged");
    /// // K = 328: rows off the sector grid, loaded by cp.async.
    /// assert!(plan(4096, 4096, 328).ends_with(" cp.async"));
    /// ```
    pub fn summary(&self) -> String {
        match self.sm90() {
            Some(p) => {
                let (bm, bn, _) = p.cta_tile;
                let sched = match p.schedule {
                    Schedule::PingPong => "pp",
                    Schedule::Cooperative => "coop",
                };
                let grid = p.persistent_ctas(self.sms, None);
                let split = p.stream_k_tiles(grid, self.sms);
                let sk = if split > 0 {
                    format!(" sk {split}/{} on {grid}", p.total_tiles())
                } else {
                    String::new()
                };
                let staged = if p.cp_async_ab {
                    " cp.async"
                } else if self.stages_b_only() {
                    " staged B"
                } else if self.staged_k().is_some() {
                    " staged"
                } else {
                    ""
                };
                format!("{sched} {bm}x{bn} s{}{sk}{staged}", p.stages)
            }
            None => {
                let (bm, bn, bk) = self.cta_tile();
                format!("mma.sync {bm}x{bn}x{bk} s{}", self.stages())
            }
        }
    }

    /// Pipeline stages of the kernel.
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// assert_eq!(GemmSpec::linear(8192, 8192, 8192).plan(Arch::Sm90a, 132).unwrap().stages(), 4);
    /// ```
    pub fn stages(&self) -> i64 {
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => p.stages,
            KernelPlan::Flags(GemmPath::Sm80(p)) | KernelPlan::Sm80Tree(p) => p.stages,
        }
    }

    /// Each tuned choice of the plan with its reason ([`crate::plan::policy`]), or the option
    /// that forced it: tile, schedule, stream-K, stages, raster group and cluster on the
    /// Hopper path; tile and stages on the sm80-class path.
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let plan = GemmSpec::linear(16, 4096, 4096).plan(Arch::Sm90a, 132).unwrap();
    /// let d = plan.decisions();
    /// assert!(d[0].starts_with("tile 64x128x64: M = 16 <= 64"));
    /// assert!(d.iter().any(|l| l.contains("32 tiles split")));
    /// ```
    pub fn decisions(&self) -> Vec<String> {
        use crate::plan::policy;
        let o = &self.spec.options;
        let forced = |what: &str, opt: &str| format!("{what}: forced (Options::{opt})");
        let mut v = Vec::new();
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Sm80(p)) | KernelPlan::Sm80Tree(p) => {
                let (bm, bn, bk) = p.cta_tile;
                let t = format!("tile {bm}x{bn}x{bk}");
                v.push(match o.tile {
                    Some(_) => forced(&t, "tile"),
                    None => format!("{t}: {}", policy::sm80_tile(&p.kernel_problem()).why),
                });
                let s = format!("stages {}", p.stages);
                v.push(match o.stages {
                    Some(_) => forced(&s, "stages"),
                    None => format!("{s}: {}", policy::sm80_stages(p.stages).why),
                });
            }
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => {
                let kp = p.kernel_problem();
                let tree = matches!(self.kernel, KernelPlan::HopperTree(_));
                let pingpong = p.schedule == Schedule::PingPong;
                let (bm, bn, _) = p.cta_tile;
                let t = format!("tile {bm}x{bn}x64");
                v.push(match o.tile {
                    Some(_) => forced(&t, "tile"),
                    None if pingpong => format!("{t}: the ping-pong tile (a warpgroup holds its whole 128 x BN tile, BN <= 128)"),
                    None => format!(
                        "{t}: {}",
                        policy::hopper_tile(
                            &kp,
                            crate::plan::sm90::whole_tiles_only(
                                p.im2col.is_some() || p.window.is_some(),
                                o.stream_k
                            )
                        )
                        .why
                    ),
                });
                let s = format!(
                    "schedule {}",
                    if pingpong { "ping-pong" } else { "cooperative" }
                );
                v.push(if o.schedule.is_some() {
                    forced(&s, "schedule")
                } else if tree {
                    let d = crate::epilogue::cuda::tree_schedule(&self.problem, &self.tree, self.path.sm90);
                    format!("{s}: tree epilogue, {}", d.why)
                } else if o.hopper_given() || o.tile.is_some() || o.stages.is_some() {
                    format!("{s}: a choice was forced (the planner's ping-pong is for plans left to it)")
                } else {
                    format!("{s}: {}", policy::hopper_pingpong(&kp).why)
                });
                let sms = self.sms;
                v.push(if o.stream_k == Some(false) {
                    forced("stream-K off", "stream_k")
                } else if p.schedule != Schedule::Cooperative || p.cluster != 1 {
                    format!(
                        "stream-K off: {}",
                        policy::hopper_stream_k(false, p.cluster).why
                    )
                } else {
                    let q = Sm90Plan {
                        stream_k: true,
                        ..(**p).clone()
                    };
                    let cap = o.max_ctas.unwrap_or(sms).min(sms);
                    let grid = q.persistent_ctas(cap, None);
                    let d = if q.total_tiles() < cap {
                        let w = q.single_wave(cap);
                        policy::Decision {
                            value: if w.value.is_some() {
                                q.total_tiles()
                            } else {
                                0
                            },
                            why: w.why,
                        }
                    } else {
                        q.stream_k_decision(grid, sms)
                    };
                    format!(
                        "stream-K{} on {sms} SMs, {} tiles on {grid} CTAs: {}{}",
                        if o.stream_k == Some(true) {
                            " (forced on)"
                        } else {
                            ""
                        },
                        p.total_tiles(),
                        if d.value > 0 {
                            format!("{} tiles split; ", d.value)
                        } else {
                            "none split; ".to_string()
                        },
                        d.why
                    )
                });
                let s = format!("stages {}", p.stages);
                v.push(match o.stages {
                    Some(_) => forced(&s, "stages"),
                    None => format!("{s}: {}", policy::hopper_stages(p.stages).why),
                });
                let g = format!("raster groups of {} tile rows", p.group_m);
                v.push(match o.group_m {
                    Some(_) => forced(&g, "group_m"),
                    None => format!("{g}: {}", policy::hopper_group_m().why),
                });
                let c = format!("cluster {}", p.cluster);
                v.push(match o.cluster {
                    Some(_) => forced(&c, "cluster"),
                    None => format!("{c}: {}", policy::hopper_cluster().why),
                });
            }
        }
        v
    }

    /// The complete CUDA source of the kernel, exactly as NVRTC compiles it.
    pub fn source(&self) -> Result<String> {
        let tree_err =
            |e: crate::epilogue::EpilogueError| KernelError::invalid("plan gemm", e.to_string());
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Sm80(p)) => Ok(crate::codegen::cuda_source(p)),
            KernelPlan::Flags(GemmPath::Hopper(p)) => Ok(crate::codegen::sm90::cuda_source(p)),
            KernelPlan::Sm80Tree(p) => {
                crate::epilogue::cuda::gemm_tree_source(p, &self.tree).map_err(tree_err)
            }
            KernelPlan::HopperTree(p) => {
                crate::epilogue::cuda::sm90_tree_source(p, &self.tree, Some(&self.binding))
                    .map_err(tree_err)
            }
        }
    }

    /// Every CUDA program a launch of the plan runs, each exactly as NVRTC compiles it, with
    /// its name: the staging copy where [`Plan::staged_k`] says so, then the GEMM.
    ///
    /// ```
    /// use tessera_kernels::{Arch, GemmSpec};
    /// let plan = |k| GemmSpec::linear(512, 512, k).plan(Arch::Sm90a, 132).unwrap();
    /// assert_eq!(plan(512).sources().unwrap().len(), 1);
    /// let staged = plan(147).sources().unwrap();
    /// assert_eq!(staged[0].0, "tessera_stage_rows");
    /// assert_eq!(staged[1].1, plan(147).source().unwrap());
    /// ```
    pub fn sources(&self) -> Result<Vec<(String, String)>> {
        let mut v = Vec::new();
        if self.staged_k().is_some() {
            v.push((
                crate::codegen::STAGE_ROWS_KERNEL.to_string(),
                crate::codegen::stage_rows_source(),
            ));
        }
        v.push((self.kernel_name(), self.source()?));
        Ok(v)
    }

    /// Compiles the kernel with NVRTC to a CUBIN for the plan's target (no GPU needed).
    #[cfg(feature = "cuda")]
    pub fn compile(&self) -> Result<Vec<u8>> {
        let src = self.source()?;
        Ok(crate::launch::runtime::compile(&src, &self.kernel_name(), self.arch, false)?.cubin)
    }
}

impl fmt::Display for Plan {
    /// The decisions with their reasons, then the kernel plan and the epilogue.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "gemm {} on {} ({} SMs)", self.spec, self.arch, self.sms)?;
        writeln!(f, "  path         {}", self.why_path)?;
        if self.transposed {
            writeln!(
                f,
                "  order        D is column-major: the kernel runs Dᵀ = Bᵀ Aᵀ ({}x{}), the epilogue transposed: {}",
                self.problem.m, self.problem.n, self.tree
            )?;
        }
        writeln!(f, "  epilogue     {}", self.why_epilogue)?;
        for (i, line) in self.decisions().iter().enumerate() {
            let label = if i == 0 { "decisions" } else { "" };
            writeln!(f, "  {label:<12} {line}")?;
        }
        match &self.kernel {
            KernelPlan::Flags(GemmPath::Hopper(p)) | KernelPlan::HopperTree(p) => write!(f, "{p}")?,
            KernelPlan::Flags(GemmPath::Sm80(p)) | KernelPlan::Sm80Tree(p) => write!(f, "{p}")?,
        }
        let d = describe(&self.tree);
        write!(f, "{d}")?;
        if !d.ends_with('\n') {
            writeln!(f)?;
        }
        Ok(())
    }
}
