//! `tessera plan|run|bench gemm`: the GEMM planner, runner and benchmark.

use std::process::ExitCode;

use tessera_kernels::codegen::cuda_source;
use tessera_kernels::epilogue::{describe, parse_epilogue, to_v1};
#[cfg(feature = "cuda")]
use tessera_kernels::plan::PathOptions;
use tessera_kernels::plan::{choose_path, ClusterShare, GemmPath, Schedule, Sm90Options, Sm90Plan};
use tessera_kernels::{Arch, DType, Epilogue, GemmPlan, GemmProblem, Major, PlanOptions};

/// The problem, as given on the command line.
#[derive(clap::Args, Clone, Debug)]
pub struct ProblemArgs {
    /// Rows of A and D.
    #[arg(long)]
    pub m: i64,
    /// Columns of B and D.
    #[arg(long)]
    pub n: i64,
    /// The reduction extent.
    #[arg(long)]
    pub k: i64,
    /// Independent products (strided batch).
    #[arg(long, default_value_t = 1)]
    pub batch: i64,
    /// Input type: bf16 or fp16.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Output type (C, D, bias, aux): bf16, fp16 or fp32; default: the input type.
    #[arg(long)]
    pub out: Option<String>,
    /// Storage order of A (M x K): row or col.
    #[arg(long, default_value = "row")]
    pub a_major: String,
    /// Storage order of B (K x N): row or col (col = nn.Linear's weight).
    #[arg(long, default_value = "col")]
    pub b_major: String,
    /// Storage order of D, C and aux (M x N): row or col (col runs as Dᵀ = Bᵀ Aᵀ).
    #[arg(long, default_value = "row")]
    pub d_major: String,
    /// Fused epilogue terms: bias, rowbias, relu, gelu, gelu_tanh, aux, c.
    #[arg(long, default_value = "")]
    pub epilogue: String,
    /// The kernel's path and its forced choices.
    #[command(flatten)]
    pub kernel: KernelArgs,
}

/// The kernel path and the choices a user may force, shared by `plan`, `run` and `bench gemm`.
#[derive(clap::Args, Clone, Debug)]
pub struct KernelArgs {
    /// Force the CTA tile, `BMxBNxBK` (e.g. 128x256x32).
    #[arg(long)]
    pub tile: Option<String>,
    /// Force the pipeline depth.
    #[arg(long)]
    pub stages: Option<i64>,
    /// Hopper path: CTAs per cluster, 1 (default) or 2 (a pair sharing one operand tile
    /// through TMA multicast).
    #[arg(long)]
    pub cluster: Option<i64>,
    /// Hopper path, with `--cluster 2`: the operand the pair shares, `a` (pair along N) or
    /// `b` (pair along M); default: the larger tile.
    #[arg(long)]
    pub share: Option<String>,
    /// Hopper path: store D (and aux) through shared memory with TMA, `on` (16-bit output,
    /// no C) or `off`; default: on when possible.
    #[arg(long)]
    pub tma_store: Option<String>,
    /// Hopper path: how the consumer warpgroups share a CTA's work, `cooperative` (both on
    /// every tile) or `pingpong` (alternate tiles; BM 64, or BM 128 with BN at most 128);
    /// default: ping-pong for a plain GEMM with K up to 4096 and nothing else forced, else
    /// cooperative.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Hopper path: tile rows per group of the persistent tile order (default 8): a group
    /// is walked column by column, so the tiles running at once share A and B in L2.
    #[arg(long)]
    pub group_m: Option<i64>,
    /// Hopper path: split the tiles of a partial last wave along K over all CTAs (stream-K),
    /// `on` (every partial last wave) or `off`; default: last waves that leave at least 32
    /// k-tiles a CTA idle, with the cooperative schedule and no cluster.
    #[arg(long)]
    pub stream_k: Option<String>,
    /// Kernel path: `auto` (the Hopper TMA + wgmma path on sm_90a when it supports the
    /// problem, else the sm80-class path), `sm80` or `sm90`.
    #[arg(long, default_value = "auto")]
    pub path: String,
}

impl KernelArgs {
    /// Whether an option of the Hopper path alone was given.
    fn hopper_given(&self) -> bool {
        self.cluster.is_some()
            || self.share.is_some()
            || self.tma_store.is_some()
            || self.schedule.is_some()
            || self.group_m.is_some()
            || self.stream_k.is_some()
    }
}

/// The kernel path asked for on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathChoice {
    Auto,
    Sm80,
    Sm90,
}

fn path_choice(s: &str) -> Result<PathChoice, String> {
    match s {
        "auto" => Ok(PathChoice::Auto),
        "sm80" => Ok(PathChoice::Sm80),
        "sm90" | "sm90a" => Ok(PathChoice::Sm90),
        _ => Err(format!("--path `{s}`: expected auto, sm80 or sm90")),
    }
}

/// Hopper planning options from `--tile BMxBN[xBK]`, `--stages`, `--cluster` and `--share`
/// (BK is fixed at 64 there).
fn sm90_options(cl: &KernelArgs) -> Result<Sm90Options, String> {
    let tile = match &cl.tile {
        None => None,
        Some(t) => {
            let v: Vec<i64> = t
                .split('x')
                .map(|x| x.trim().parse::<i64>().map_err(|e| format!("`{t}`: {e}")))
                .collect::<Result<_, _>>()?;
            match v[..] {
                [bm, bn] | [bm, bn, 64] => Some((bm, bn)),
                _ => return Err(format!("`{t}`: the Hopper tile is BMxBN (BK is 64)")),
            }
        }
    };
    let share = cl
        .share
        .as_deref()
        .map(str::parse::<ClusterShare>)
        .transpose()
        .map_err(|e| e.to_string())?;
    let tma_store = on_off("--tma-store", cl.tma_store.as_deref())?;
    let schedule = match cl.schedule.as_deref() {
        None => None,
        Some("cooperative") => Some(Schedule::Cooperative),
        Some("pingpong") | Some("ping-pong") => Some(Schedule::PingPong),
        Some(x) => return Err(format!("--schedule `{x}`: `cooperative` or `pingpong`")),
    };
    let stream_k = on_off("--stream-k", cl.stream_k.as_deref())?;
    Ok(Sm90Options {
        tile,
        stages: cl.stages,
        stream_k,
        cluster: cl.cluster,
        share,
        tma_store,
        schedule,
        group_m: cl.group_m,
        epilogue_inputs: None,
        epilogue_vectors: (false, false),
    })
}

/// An `on`/`off` flag's value (`None` when not given).
fn on_off(flag: &str, v: Option<&str>) -> Result<Option<bool>, String> {
    match v {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(x) => Err(format!("{flag} `{x}`: `on` or `off`")),
    }
}

/// The path options of a tree epilogue's kernel (`run gemm` / `bench epilogues`): the Hopper
/// path where the device has it, with the Hopper options given, or `sm80` (no options).
#[cfg(feature = "cuda")]
fn tree_path_options(cl: &KernelArgs, op: &str) -> Result<PathOptions, String> {
    match path_choice(&cl.path)? {
        PathChoice::Sm80 if cl.hopper_given() || cl.tile.is_some() || cl.stages.is_some() => Err(
            format!("{op}: with a tree epilogue, --tile, --stages and the Hopper options need the Hopper path"),
        ),
        PathChoice::Sm80 => Ok(PathOptions::sm80()),
        PathChoice::Auto | PathChoice::Sm90 => Ok(PathOptions::hopper(sm90_options(cl)?)),
    }
}

/// The plan of the path asked for, with the forced choices.
fn any_plan(a: &ProblemArgs, p: &GemmProblem, arch: Arch) -> Result<GemmPath, String> {
    let k = &a.kernel;
    let choice = path_choice(&k.path)?;
    let hopper = match choice {
        PathChoice::Sm80 => false,
        PathChoice::Sm90 => true,
        PathChoice::Auto => matches!(choose_path(p, arch), Ok(GemmPath::Hopper(_))),
    };
    if hopper {
        if !Sm90Plan::supports(p, arch) {
            return Err(format!(
                "the Hopper path does not support this problem on {arch} (it needs sm_90a and K-major bf16/fp16 operands: A row-major and B column-major, or with a column-major D the reverse)"
            ));
        }
        Sm90Plan::with_options(p, sm90_options(k)?)
            .map(|p| GemmPath::Hopper(Box::new(p)))
            .map_err(|e| e.to_string())
    } else {
        if k.hopper_given() {
            return Err(
                "--cluster, --share, --tma-store, --schedule and --stream-k are options of the Hopper path (--path sm90)"
                    .to_string(),
            );
        }
        GemmPlan::with_options(p, arch, plan_options(&k.tile, k.stages)?)
            .map(|p| GemmPath::Sm80(Box::new(p)))
            .map_err(|e| e.to_string())
    }
}

/// `tessera plan ...`
#[derive(clap::Subcommand)]
pub enum PlanCommand {
    /// Plan a GEMM: print the derived layouts, the shared-memory budget, the bank-conflict
    /// check and (optionally) the generated CUDA source. Needs no GPU.
    Gemm {
        /// The problem.
        #[command(flatten)]
        problem: ProblemArgs,
        /// Target: sm_80, sm_86, sm_89 or sm_90a.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Also print the CUDA source.
        #[arg(long)]
        emit_cuda: bool,
        /// Print only the complete CUDA source, exactly as NVRTC compiles it.
        #[arg(long)]
        emit_cuda_only: bool,
    },
}

/// `tessera run ...`
#[derive(clap::Subcommand)]
pub enum RunCommand {
    /// Run a GEMM on the GPU on random data and verify it against the float64 reference.
    Gemm {
        /// The problem.
        #[command(flatten)]
        problem: ProblemArgs,
        /// Seed of the random data (default: fresh).
        #[arg(long)]
        seed: Option<u64>,
    },
}

/// The options of `tessera bench gemm`.
#[derive(clap::Args)]
pub struct GemmBenchArgs {
    /// Write the rows as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Only 4096³ and 8192³.
    #[arg(long)]
    pub quick: bool,
    /// Shapes, `MxNxK` separated by commas (default: the standard list).
    #[arg(long)]
    pub shapes: Option<String>,
    /// Epilogues separated by `;` (terms as in `plan gemm --epilogue`; `none` = plain).
    #[arg(long)]
    pub epilogues: Option<String>,
    /// Timed rounds per contender.
    #[arg(long, default_value_t = 9)]
    pub rounds: usize,
    /// Hopper path: cap our persistent grid at this many CTAs (default: the SM count and,
    /// with a cluster, the clusters the device holds at once).
    #[arg(long)]
    pub max_ctas: Option<i64>,
    /// Our kernel's path and its forced choices.
    #[command(flatten)]
    pub kernel: KernelArgs,
}

/// `tessera bench ...`
#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Time our GEMM against cuBLAS (plain) and cuBLASLt (same fused epilogue), interleaved.
    Gemm(GemmBenchArgs),
    /// Time tree epilogues: each named fusion against our plain GEMM, cuBLASLt's fusion of the
    /// same name and cuBLASLt's plain GEMM, and coordinate-aware trees in one kernel against
    /// one launch per region.
    Epilogues {
        /// Write the rows as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
        /// Only 4096³ and 8192³.
        #[arg(long)]
        quick: bool,
        /// Shapes, `MxNxK` separated by commas (default: the standard list).
        #[arg(long)]
        shapes: Option<String>,
        /// Fusions by their lower-case cuBLASLt names, separated by commas (default: all but
        /// the operand sums bgrada and bgradb).
        #[arg(long)]
        fusions: Option<String>,
        /// A coordinate-aware tree to time both ways (repeatable; default: a row split on and
        /// off the tile grid). `none` skips this part.
        #[arg(long)]
        coord: Vec<String>,
        /// Timed rounds per contender.
        #[arg(long, default_value_t = 9)]
        rounds: usize,
        /// `off`: every fusion runs the generated epilogue, also those the fused v1 epilogue
        /// expresses (bias, relu_bias, gelu_bias, gelu_aux_bias); default `on`.
        #[arg(long, default_value = "on")]
        fused_v1: String,
        /// Our kernels' path and the Hopper planner's forced choices (e.g. `--schedule
        /// pingpong`), for the plain GEMM and every tree alike.
        #[command(flatten)]
        kernel: KernelArgs,
    },
    /// The ceiling of the sm80-class path: the `mma.sync` (m16n8k16, bf16, fp32 accumulate)
    /// rate with operands in registers, beside cuBLAS's plain GEMM at 4096³ and 8192³.
    Mma {
        /// Write the result as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
        /// Timed rounds per contender.
        #[arg(long, default_value_t = 9)]
        rounds: usize,
    },
}

fn parse_triple(s: &str) -> Result<(i64, i64, i64), String> {
    let v: Vec<i64> = s
        .split('x')
        .map(|t| t.trim().parse::<i64>().map_err(|e| format!("`{s}`: {e}")))
        .collect::<Result<_, _>>()?;
    match v[..] {
        [a, b, c] => Ok((a, b, c)),
        _ => Err(format!("`{s}`: expected AxBxC")),
    }
}

fn plan_options(tile: &Option<String>, stages: Option<i64>) -> Result<PlanOptions, String> {
    Ok(PlanOptions {
        tile: tile.as_deref().map(parse_triple).transpose()?,
        stages,
    })
}

fn problem(a: &ProblemArgs) -> Result<GemmProblem, String> {
    let input: DType = a.dtype.parse().map_err(|e| format!("{e}"))?;
    let output = match &a.out {
        Some(o) => o.parse().map_err(|e| format!("{e}"))?,
        None => input,
    };
    Ok(GemmProblem {
        m: a.m,
        n: a.n,
        k: a.k,
        batch: a.batch,
        input,
        output,
        a_major: a.a_major.parse::<Major>().map_err(|e| format!("{e}"))?,
        b_major: a.b_major.parse::<Major>().map_err(|e| format!("{e}"))?,
        d_major: a.d_major.parse::<Major>().map_err(|e| format!("{e}"))?,
        epilogue: epilogue_v1(&a.epilogue)?,
    })
}

/// The `--epilogue` text as the kernels' fused epilogue: the comma list (`bias,gelu,aux`), or
/// an epilogue tree (`gelu_aux(acc + bias_col)`, `relu_bias`, ...) that the fused epilogue of
/// the GEMM kernels can run. Other trees run through the generated tree epilogue (`plan`
/// emits that kernel, `run` checks it with `check_tree`).
fn epilogue_v1(text: &str) -> Result<Epilogue, String> {
    if let Ok(e) = Epilogue::parse(text) {
        return Ok(e);
    }
    let tree = parse_epilogue(text).map_err(|e| e.to_string())?;
    to_v1(&tree).ok_or_else(|| {
        format!(
            "epilogue `{tree}` needs the generated tree epilogue (`tessera run gemm` runs it; \
             `tessera bench gemm` times the fused epilogue only, see `tessera bench epilogues`)"
        )
    })
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

/// Runs `tessera plan`.
pub fn plan(cmd: PlanCommand) -> ExitCode {
    let PlanCommand::Gemm {
        problem: pa,
        arch,
        emit_cuda,
        emit_cuda_only,
    } = cmd;
    let tree = if pa.epilogue.trim().is_empty() {
        None
    } else {
        match Epilogue::parse(&pa.epilogue)
            .map(|e| tessera_kernels::epilogue::from_v1(&e))
            .or_else(|_| parse_epilogue(&pa.epilogue))
        {
            Ok(t) => Some(t),
            Err(e) => return fail(e),
        }
    };
    // A tree the fused epilogue cannot run is still shown; the mainloop is planned without it.
    let runnable = pa.epilogue.trim().is_empty() || epilogue_v1(&pa.epilogue).is_ok();
    let pa = if runnable {
        pa
    } else {
        ProblemArgs {
            epilogue: String::new(),
            ..pa
        }
    };
    let p = match problem(&pa) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let arch: Arch = match arch.parse() {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    // The source that runs: the fused epilogue's kernel, or for other trees the kernel with
    // the generated tree epilogue.
    let tree_src =
        |r: Result<String, tessera_kernels::epilogue::EpilogueError>| r.map_err(|e| e.to_string());
    let planned = match any_plan(&pa, &p, arch) {
        Ok(GemmPath::Sm80(plan)) => match (&tree, runnable) {
            (Some(t), false) => {
                tree_src(tessera_kernels::epilogue::cuda::gemm_tree_source(&plan, t))
                    .map(|src| (plan.to_string(), src))
            }
            _ => Ok((plan.to_string(), cuda_source(&plan))),
        },
        Ok(GemmPath::Hopper(plan)) => match (&tree, runnable) {
            (Some(t), false) => {
                // The binding `tessera run gemm` launches: tight tensors of the output type,
                // C read when the tree reads it (beta != 0).
                let mut b = tessera_kernels::epilogue::Binding::for_tree(
                    t, p.m, p.n, p.k, p.batch, p.output,
                );
                if b.c.is_some() {
                    b.beta = 0.5;
                }
                // The plan it runs: with the inputs and bias vectors its fragment path
                // stages, where they fit.
                let plan = sm90_options(&pa.kernel)
                    .ok()
                    .and_then(|o| {
                        tessera_kernels::epilogue::cuda::tree_sm90_plan(&p, t, &b, o).ok()
                    })
                    .map_or(plan, Box::new);
                // As an H100 SXM (132 SMs) compiles it (Sm90Plan::compiled_for).
                tree_src(tessera_kernels::epilogue::cuda::sm90_tree_source(
                    &plan.compiled_for(tessera_kernels::arch::H100_SMS),
                    t,
                    Some(&b),
                ))
                .map(|src| (plan.to_string(), src))
            }
            _ => Ok((
                plan.to_string(),
                tessera_kernels::codegen::sm90::cuda_source(
                    &plan.compiled_for(tessera_kernels::arch::H100_SMS),
                ),
            )),
        },
        Err(e) => Err(e),
    };
    let (text, source) = match planned {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if emit_cuda_only {
        print!("{source}");
        return ExitCode::SUCCESS;
    }
    print!("{text}");
    if let Some(t) = &tree {
        let d = describe(t);
        print!("{d}");
        if !d.ends_with('\n') {
            println!();
        }
    }
    if emit_cuda {
        println!();
        print!("{source}");
    }
    ExitCode::SUCCESS
}

/// Runs `tessera run`.
#[cfg(feature = "cuda")]
pub fn run(cmd: RunCommand) -> ExitCode {
    use tessera_kernels::bench::verify::check_plan;
    use tessera_kernels::launch::runtime::Runtime;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::rng::Rng;

    let RunCommand::Gemm { problem: pa, seed } = cmd;
    // A tree the fused epilogue cannot run goes through the generated tree epilogue.
    if !pa.epilogue.trim().is_empty() && epilogue_v1(&pa.epilogue).is_err() {
        return run_tree(pa, seed);
    }
    let p = match problem(&pa) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let rt = match Runtime::new(0) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let plan = match any_plan(&pa, &p, rt.arch()) {
        Ok(pl) => pl,
        Err(e) => return fail(e),
    };
    println!(
        "device {} ({}), NVRTC {:?}",
        rt.device_name(),
        rt.arch(),
        rt.nvrtc()
    );
    let seed = seed.unwrap_or_else(Rng::fresh_seed);
    let report = match plan {
        GemmPath::Sm80(plan) => {
            print!("{plan}");
            check_plan(&rt, &plan, GemmStrides::tight(&p), seed)
        }
        GemmPath::Hopper(plan) => {
            print!("{plan}");
            tessera_kernels::launch::sm90::Sm90Kernel::new(&rt, &plan).and_then(|k| {
                match k.max_clusters() {
                    Some(c) => println!(
                        "  grid         {} CTAs (the driver holds {c} clusters at once)",
                        k.grid_ctas()
                    ),
                    None => println!("  grid         {} CTAs", k.grid_ctas()),
                }
                tessera_kernels::bench::verify_sm90::check_sm90(
                    &rt,
                    &k,
                    GemmStrides::tight(&p),
                    seed,
                )
            })
        }
    };
    match report {
        Ok(r) => {
            println!("{r}");
            if r.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Err(e) => fail(e),
    }
}

/// `tessera run gemm --epilogue TREE` for a tree only the generated tree epilogue runs: the
/// float64 check of every output ([`tessera_kernels::bench::verify_tree::check_tree`]).
#[cfg(feature = "cuda")]
fn run_tree(pa: ProblemArgs, seed: Option<u64>) -> ExitCode {
    use tessera_kernels::bench::verify_tree::check_tree;
    use tessera_kernels::launch::runtime::Runtime;
    use tessera_kernels::rng::Rng;

    let tree = match parse_epilogue(&pa.epilogue) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let path = match tree_path_options(&pa.kernel, "run gemm") {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let p = match problem(&ProblemArgs {
        epilogue: String::new(),
        ..pa.clone()
    }) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let rt = match Runtime::new(0) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    if path_choice(&pa.kernel.path) == Ok(PathChoice::Sm90)
        && !matches!(choose_path(&p, rt.arch()), Ok(GemmPath::Hopper(_)))
    {
        return fail(format!(
            "the Hopper path does not support {p} on {} (it needs sm_90a, K-major operands with 16-byte rows)",
            rt.arch()
        ));
    }
    println!(
        "device {} ({}), NVRTC {:?}",
        rt.device_name(),
        rt.arch(),
        rt.nvrtc()
    );
    print!("{}", describe(&tree));
    println!();
    let seed = seed.unwrap_or_else(Rng::fresh_seed);
    match check_tree(&rt, &p, &tree, path, seed) {
        Ok(r) => {
            println!("{r}");
            if r.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Err(e) => fail(e),
    }
}

/// Runs `tessera run` (built without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub fn run(_cmd: RunCommand) -> ExitCode {
    fail("run: this tessera was built without the `cuda` feature")
}

#[cfg(feature = "cuda")]
fn shapes_arg(shapes: Option<String>, quick: bool) -> Result<Vec<(i64, i64, i64)>, String> {
    match shapes {
        Some(s) => s.split(',').map(parse_triple).collect(),
        None if quick => Ok(vec![(4096, 4096, 4096), (8192, 8192, 8192)]),
        None => Ok(tessera_kernels::bench::gemm::standard_shapes()),
    }
}

/// Runs `tessera bench epilogues`.
#[cfg(feature = "cuda")]
#[allow(clippy::too_many_arguments)]
fn bench_epilogues(
    json: Option<std::path::PathBuf>,
    quick: bool,
    shapes: Option<String>,
    fusions: Option<String>,
    coord: Vec<String>,
    rounds: usize,
    fused_v1: &str,
    kernel: KernelArgs,
) -> ExitCode {
    use tessera_kernels::bench::epilogues::{bench_coordinate, bench_fusions, EpBenchRow};
    use tessera_kernels::epilogue::Fusion;
    use tessera_kernels::launch::runtime::Runtime;

    let mut path = match tree_path_options(&kernel, "bench epilogues") {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    path.generated_epilogue = match on_off("--fused-v1", Some(fused_v1)) {
        Ok(v) => v == Some(false),
        Err(e) => return fail(format!("bench epilogues: {e}")),
    };
    let shapes = match shapes_arg(shapes, quick) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let fusions: Vec<Fusion> = match fusions {
        None => Fusion::ALL
            .iter()
            .copied()
            .filter(|f| f.tree().sum_k.is_empty())
            .collect(),
        Some(list) => {
            let mut v = Vec::new();
            for name in list.split(',').map(str::trim) {
                match Fusion::ALL.iter().find(|f| f.name() == name) {
                    Some(f) => v.push(*f),
                    None => {
                        let names: Vec<&str> = Fusion::ALL.iter().map(|f| f.name()).collect();
                        return fail(format!(
                            "unknown fusion `{name}` (one of {})",
                            names.join(", ")
                        ));
                    }
                }
            }
            v
        }
    };
    let coord: Vec<String> = if coord.is_empty() {
        vec![
            "select(row < 2048, sigmoid(acc), tanh(acc))".into(),
            "select(row < 2000, sigmoid(acc), tanh(acc))".into(),
        ]
    } else if coord.iter().any(|c| c == "none") {
        Vec::new()
    } else {
        coord
    };
    let mut trees = Vec::new();
    for c in &coord {
        match parse_epilogue(c) {
            Ok(t) => trees.push(t),
            Err(e) => return fail(format!("--coord `{c}`: {e}")),
        }
    }
    if rounds == 0 {
        return fail("bench epilogues: --rounds 0: at least one timed round is needed");
    }
    let rt = match Runtime::new(0) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    println!(
        "device {} ({}, {} SMs), {} rounds, interleaved (the order rotated each round), median per GEMM; \
         `paired`: the median and quartiles of each round's ours / plain",
        rt.device_name(),
        rt.arch(),
        rt.sm_count(),
        rounds
    );
    // About 20 ms per timed batch at 600 TFLOP/s.
    let inner = |(m, n, k): (i64, i64, i64)| {
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        ((1.2e13 / flops).round() as usize).clamp(2, 200)
    };
    let tf = |shape: (i64, i64, i64), ms: f64| {
        2.0 * shape.0 as f64 * shape.1 as f64 * shape.2 as f64 / ms / 1e9
    };
    println!(
        "{:>18} {:>5} {:>14} {:>9} {:>9} {:>9} {:>9} {:>22} {:>8} {:>9} {:>14} {:>9}",
        "shape",
        "path",
        "fusion",
        "ours TF/s",
        "plain",
        "cuBLASLt",
        "vs plain",
        "paired [quartiles]",
        "vs Lt",
        "Lt plain",
        "Lt vs Lt plain",
        "rel diff"
    );
    // A row's paired cost over plain: the median and quartiles of the rounds' ratios.
    let paired = |r: &EpBenchRow| {
        let (q1, q3) = r.overhead_quartiles();
        format!(
            "{:+.1}% [{:+.1}, {:+.1}]",
            100.0 * r.overhead_paired(),
            100.0 * q1,
            100.0 * q3
        )
    };
    let mut all: Vec<(String, EpBenchRow)> = Vec::new();
    for &shape in &shapes {
        let rows = bench_fusions(&rt, &[shape], &fusions, rounds, inner(shape), path, |r| {
            let (lt_plain, lt_cost) = match (r.vendor_plain_ms, r.vendor_overhead()) {
                (Some(ms), Some(c)) => (
                    format!("{:.1}", tf(r.shape, ms)),
                    format!("{:+.1}%", 100.0 * c),
                ),
                _ => ("-".to_string(), "-".to_string()),
            };
            println!(
                "{:>18} {:>5} {:>14} {:>9.1} {:>9.1} {:>9.1} {:>+8.1}% {:>22} {:>8.3} {:>9} {:>14} {:>9.1e}",
                format!("{}x{}x{}", r.shape.0, r.shape.1, r.shape.2),
                r.path,
                r.name,
                tf(r.shape, r.ours_ms),
                tf(r.shape, r.plain_ms),
                tf(r.shape, r.other_ms),
                100.0 * r.overhead(),
                paired(r),
                r.speedup(),
                lt_plain,
                lt_cost,
                r.rel_diff
            )
        });
        match rows {
            Ok(rows) => all.extend(rows.into_iter().map(|r| ("fusion".to_string(), r))),
            Err(e) => return fail(e),
        }
    }
    if !trees.is_empty() {
        println!(
            "\n{:>18} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  tree (baseline: the select's else branch alone)",
            "shape", "path", "one TF/s", "regions", "plain", "baseline", "vs plain", "vs base", "rel diff"
        );
    }
    for t in &trees {
        for &shape in shapes.iter().take(2) {
            match bench_coordinate(&rt, shape, t, rounds, inner(shape), path) {
                Ok(r) => {
                    let (base, vs_base) = match r.baseline_ms {
                        Some(ms) => (
                            format!("{:.1}", tf(shape, ms)),
                            format!("{:+.1}%", 100.0 * (r.ours_ms / ms - 1.0)),
                        ),
                        None => ("-".to_string(), "-".to_string()),
                    };
                    println!(
                        "{:>18} {:>5} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>+8.1}% {:>9} {:>9.1e}  {}",
                        format!("{}x{}x{}", shape.0, shape.1, shape.2),
                        r.path,
                        tf(shape, r.ours_ms),
                        tf(shape, r.other_ms),
                        tf(shape, r.plain_ms),
                        base,
                        100.0 * r.overhead(),
                        vs_base,
                        r.rel_diff,
                        r.name
                    );
                    all.push(("coordinate".to_string(), r));
                }
                Err(e) => return fail(format!("{t}: {e}")),
            }
        }
    }
    if let Some(file) = json {
        let v: Vec<serde_json::Value> = all
            .iter()
            .map(|(kind, r)| {
                serde_json::json!({
                    "kind": kind, "m": r.shape.0, "n": r.shape.1, "k": r.shape.2,
                    "name": r.name, "path": r.path, "ours_ms": r.ours_ms, "plain_ms": r.plain_ms,
                    "other_ms": r.other_ms, "overhead": r.overhead(), "speedup": r.speedup(),
                    "overhead_paired": r.overhead_paired(), "overhead_rounds": r.overhead_rounds,
                    "rel_diff": r.rel_diff, "baseline_ms": r.baseline_ms,
                    "vendor_plain_ms": r.vendor_plain_ms, "vendor_overhead": r.vendor_overhead(),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "device": rt.device_name(), "arch": rt.arch().to_string(), "rounds": rounds,
            "rows": v,
        });
        if let Err(e) = std::fs::write(&file, format!("{doc:#}\n")) {
            return fail(format!("writing {}: {e}", file.display()));
        }
    }
    let bad = all
        .iter()
        .filter(|(_, r)| r.rel_diff.is_nan() || r.rel_diff >= 2e-2)
        .count();
    if bad > 0 {
        return fail(format!(
            "{bad} rows differ from the other contender's result by 2e-2 or more"
        ));
    }
    ExitCode::SUCCESS
}

/// Runs `tessera bench`.
#[cfg(feature = "cuda")]
pub fn bench(cmd: BenchCommand) -> ExitCode {
    use tessera_kernels::bench::gemm::{run_bench, standard_epilogues, BenchConfig};
    use tessera_kernels::launch::runtime::Runtime;

    let GemmBenchArgs {
        json,
        quick,
        shapes,
        epilogues,
        rounds,
        max_ctas,
        kernel: cl,
    } = match cmd {
        BenchCommand::Gemm(a) => a,
        BenchCommand::Epilogues {
            json,
            quick,
            shapes,
            fusions,
            coord,
            rounds,
            fused_v1,
            kernel,
        } => {
            return bench_epilogues(
                json, quick, shapes, fusions, coord, rounds, &fused_v1, kernel,
            )
        }
        BenchCommand::Mma { json, rounds } => return bench_mma(json, rounds),
    };
    let choice = match path_choice(&cl.path) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let shapes = match shapes_arg(shapes, quick) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let epilogues = match epilogues {
        Some(s) => match s
            .split(';')
            .map(Epilogue::parse)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(v) => v,
            Err(e) => return fail(e),
        },
        None => standard_epilogues(),
    };
    if epilogues.first().map(|e| e.is_plain()) != Some(true) {
        return fail(
            "the first epilogue must be the plain GEMM (`none`): fused rows are compared with it",
        );
    }
    // `--tile` reads BMxBNxBK on the sm80-class path and BMxBN[x64] on the Hopper path: the
    // options of the path that runs must parse (both may, before the device is known).
    let sm80_plan = plan_options(&cl.tile, cl.stages);
    let sm90_opts = sm90_options(&cl);
    match (choice, &sm80_plan, &sm90_opts) {
        (PathChoice::Sm80, Err(e), _) | (PathChoice::Sm90, _, Err(e)) => return fail(e),
        (PathChoice::Auto, Err(e), Err(_)) => return fail(e),
        _ => {}
    }
    let rt = match Runtime::new(0) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let hopper = match choice {
        PathChoice::Sm80 => false,
        PathChoice::Sm90 => true,
        PathChoice::Auto => rt.arch() == Arch::Sm90a,
    };
    let plan = match (hopper, sm80_plan) {
        (true, _) => Default::default(),
        (false, Ok(o)) => o,
        (false, Err(e)) => return fail(e),
    };
    let cfg = BenchConfig {
        shapes,
        epilogues,
        rounds,
        plan,
        max_ctas,
        ..BenchConfig::default()
    };
    println!(
        "device {} ({}, {} SMs), seed {}, {} rounds, interleaved ours/vendor, median per GEMM",
        rt.device_name(),
        rt.arch(),
        rt.sm_count(),
        cfg.seed,
        cfg.rounds
    );
    let header = format!(
        "{:>20} {:>16} {:>10} {:>10} {:>6} {:>8} {:>9}  {:<20} {}",
        "shape",
        "epilogue",
        "ours TF/s",
        "vendor TF/s",
        "ratio",
        "vs plain",
        "rel diff",
        "vendor",
        "ours range ms"
    );
    println!("{header}");
    let line = |r: &tessera_kernels::bench::gemm::BenchRow| {
        format!(
            "{:>20} {:>16} {:>10.1} {:>10.1} {:>6.3} {:>8.3} {:>9.2e}  {:<20} {:.3}-{:.3}",
            format!("{}x{}x{}", r.m, r.n, r.k),
            r.epilogue,
            r.ours_tflops,
            r.vendor_tflops,
            r.ratio,
            r.over_plain,
            r.rel_diff,
            r.vendor,
            r.ours_range.0,
            r.ours_range.1
        )
    };
    let result = if hopper {
        let opts = match sm90_opts {
            Ok(o) => o,
            Err(e) => return fail(e),
        };
        println!("kernel path: sm_90a (TMA + wgmma)");
        tessera_kernels::bench::sm90::run_bench_sm90(&rt, &cfg, opts, |r| println!("{}", line(r)))
    } else {
        if cl.hopper_given() || cfg.max_ctas.is_some() {
            return fail(
                "--cluster, --share, --tma-store, --schedule, --stream-k and --max-ctas are options of the Hopper path (--path sm90)",
            );
        }
        println!("kernel path: sm80-class (cp.async + mma.sync)");
        run_bench(&rt, &cfg, |r| println!("{}", line(r)))
    };
    let rows = match result {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    if let Some(path) = json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "m": r.m, "n": r.n, "k": r.k, "epilogue": r.epilogue, "kernel": r.kernel,
                    "vendor": r.vendor, "ours_ms": r.ours_ms, "vendor_ms": r.vendor_ms,
                    "ours_tflops": r.ours_tflops, "vendor_tflops": r.vendor_tflops,
                    "ratio": r.ratio, "over_plain": r.over_plain, "rel_diff": r.rel_diff,
                    "ours_min_ms": r.ours_range.0, "ours_max_ms": r.ours_range.1,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "device": rt.device_name(), "arch": rt.arch().to_string(), "seed": cfg.seed,
            "rounds": cfg.rounds, "rows": v,
        });
        if let Err(e) = std::fs::write(&path, format!("{doc:#}\n")) {
            return fail(format!("writing {}: {e}", path.display()));
        }
    }
    // Short summary last: the plain rows.
    println!("\nsummary (plain GEMM, ours vs cuBLAS):");
    println!("{header}");
    for r in rows.iter().filter(|r| r.epilogue == "none") {
        println!("{}", line(r));
    }
    let bad: Vec<_> = rows
        .iter()
        .filter(|r| r.rel_diff.is_nan() || r.rel_diff >= 2e-2)
        .collect();
    if !bad.is_empty() {
        return fail(format!(
            "{} rows differ from the vendor's result by 2e-2 or more",
            bad.len()
        ));
    }
    ExitCode::SUCCESS
}

#[cfg(feature = "cuda")]
fn bench_mma(json: Option<std::path::PathBuf>, rounds: usize) -> ExitCode {
    use tessera_kernels::launch::runtime::Runtime;
    let rt = match Runtime::new(0) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    println!(
        "device {} ({}, {} SMs), {rounds} rounds, interleaved with cuBLAS, medians",
        rt.device_name(),
        rt.arch(),
        rt.sm_count()
    );
    let r = match tessera_kernels::bench::gemm::run_mma_peak(&rt, rounds) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    println!("mma.sync.m16n8k16 bf16 -> fp32, operands in registers, 256-thread CTAs:");
    println!("{:>11} {:>7} {:>10}", "CTAs/SM", "chains", "TF/s");
    for row in &r.rows {
        println!(
            "{:>11} {:>7} {:>10.1}",
            row.ctas_per_sm, row.chains, row.tflops
        );
    }
    let best = r.best();
    for &(s, t) in &r.cublas {
        println!(
            "cublasGemmEx {s}³: {t:.1} TF/s; mma.sync peak / cuBLAS = {:.3}; 60% of cuBLAS is {:.0}% of the mma.sync peak",
            best / t,
            60.0 * t / best
        );
    }
    if let Some(file) = json {
        let doc = serde_json::json!({
            "device": rt.device_name(),
            "rounds": rounds,
            "mma_sync": r.rows.iter().map(|row| serde_json::json!({
                "ctas_per_sm": row.ctas_per_sm,
                "chains": row.chains,
                "tflops": row.tflops,
            })).collect::<Vec<_>>(),
            "cublas": r.cublas.iter().map(|&(s, t)| serde_json::json!({"size": s, "tflops": t})).collect::<Vec<_>>(),
        });
        if let Err(e) = std::fs::write(&file, format!("{doc:#}\n")) {
            return fail(format!("bench mma: cannot write {}: {e}", file.display()));
        }
    }
    ExitCode::SUCCESS
}

/// Runs `tessera bench` (built without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub fn bench(_cmd: BenchCommand) -> ExitCode {
    fail("bench: this tessera was built without the `cuda` feature")
}
