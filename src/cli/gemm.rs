//! `tessera plan|run|bench gemm`: the GEMM planner, runner and benchmark, on the library's
//! public API (`GemmSpec`, `Plan`, `Gemm`): the command line plans and runs exactly what a
//! program calling tessera would.

use std::process::ExitCode;

use super::fail;

use tessera_kernels::plan::{ClusterShare, Schedule};
use tessera_kernels::{Arch, DType, GemmSpec, Major, Options, Plan};

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
    /// The epilogue: a tree (`gelu(aux(acc + bias_col))`), a named fusion (`dgelu_bgrad`) or
    /// a comma list (`bias,relu,aux,c`); default: the accumulator.
    #[arg(long, default_value = "")]
    pub epilogue: String,
    /// The epilogue's alpha.
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f32,
    /// The epilogue's beta (C is read where it is not 0); default: 1 for a comma list with
    /// `c`, 0.5 for another epilogue that reads `c` (so that `tessera run` checks C), else 0.
    #[arg(long)]
    pub beta: Option<f32>,
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
    /// default: ping-pong for a plain GEMM with K up to 4096, whole tiles and nothing else
    /// forced, else cooperative (`plan gemm` prints why).
    #[arg(long)]
    pub schedule: Option<String>,
    /// Hopper path: tile rows per group of the persistent tile order (default 8): a group
    /// is walked column by column, so the tiles running at once share A and B in L2.
    #[arg(long)]
    pub group_m: Option<i64>,
    /// Hopper path: split the tiles of a partial last wave along K over all CTAs (stream-K),
    /// `on` (every partial wave) or `off`; default: waves that leave at least 32 k-tiles a CTA
    /// idle (a single wave too, and memory-bound ones keeping at most half the SMs busy), with
    /// the cooperative schedule and no cluster.
    #[arg(long)]
    pub stream_k: Option<String>,
    /// Hopper path: launch as a programmatic dependent of the kernel before it on the stream,
    /// `on` (default: scheduled as that kernel completes, waiting in the kernel for its
    /// writes) or `off` (a plain launch).
    #[arg(long)]
    pub dependent_launch: Option<String>,
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
            || self.dependent_launch.is_some()
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

/// An `on`/`off` flag's value (`None` when not given).
pub(crate) fn on_off(flag: &str, v: Option<&str>) -> Result<Option<bool>, String> {
    match v {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(x) => Err(format!("{flag} `{x}`: `on` or `off`")),
    }
}

#[cfg(feature = "cuda")]
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

/// A `--tile` for `choice`: `BMxBNxBK` on the sm80-class path, `BMxBN` (BK 64) on the Hopper
/// path, either with `auto`.
fn tile_arg(t: &str, choice: PathChoice) -> Result<(i64, i64, i64), String> {
    let v: Vec<i64> = t
        .split('x')
        .map(|x| x.trim().parse::<i64>().map_err(|e| format!("`{t}`: {e}")))
        .collect::<Result<_, _>>()?;
    match (choice, &v[..]) {
        (PathChoice::Sm80, [bm, bn, bk]) => Ok((*bm, *bn, *bk)),
        (PathChoice::Sm80, _) => Err(format!("`{t}`: expected AxBxC (BMxBNxBK)")),
        (_, [bm, bn]) | (_, [bm, bn, 64]) => Ok((*bm, *bn, 64)),
        (PathChoice::Sm90, _) => Err(format!("`{t}`: the Hopper tile is BMxBN (BK is 64)")),
        (_, [bm, bn, bk]) => Ok((*bm, *bn, *bk)),
        _ => Err(format!("`{t}`: expected BMxBN or BMxBNxBK")),
    }
}

/// A Hopper `--tile`, `BMxBN` (BK 64), as [`tile_arg`] reads it for `--path sm90`.
#[cfg(feature = "cuda")]
pub(super) fn hopper_tile_arg(t: &str) -> Result<(i64, i64, i64), String> {
    tile_arg(t, PathChoice::Sm90)
}

/// The forced choices of `--path`, `--tile`, `--stages` and the Hopper options. The tile is
/// `BMxBNxBK` on the sm80-class path and `BMxBN` (BK 64) on the Hopper path; with `--path
/// auto` either form is taken and the plan checks it for the path it takes.
fn options(k: &KernelArgs) -> Result<Options, String> {
    let choice = path_choice(&k.path)?;
    let tile = k.tile.as_deref().map(|t| tile_arg(t, choice)).transpose()?;
    if choice == PathChoice::Sm80 && k.hopper_given() {
        return Err(
            "--cluster, --share, --tma-store, --schedule, --group-m, --stream-k and --dependent-launch are options of the Hopper path (--path sm90)"
                .into(),
        );
    }
    let share = k
        .share
        .as_deref()
        .map(str::parse::<ClusterShare>)
        .transpose()
        .map_err(|e| e.to_string())?;
    let schedule = match k.schedule.as_deref() {
        None => None,
        Some("cooperative") => Some(Schedule::Cooperative),
        Some("pingpong") | Some("ping-pong") => Some(Schedule::PingPong),
        Some(x) => return Err(format!("--schedule `{x}`: `cooperative` or `pingpong`")),
    };
    Ok(Options {
        sm80: choice == PathChoice::Sm80,
        tile,
        stages: k.stages,
        group_m: k.group_m,
        schedule,
        cluster: k.cluster,
        share,
        tma_store: on_off("--tma-store", k.tma_store.as_deref())?,
        stream_k: on_off("--stream-k", k.stream_k.as_deref())?,
        dependent_launch: on_off("--dependent-launch", k.dependent_launch.as_deref())?,
        ..Options::default()
    })
}

/// The spec of the command line's problem.
fn spec(a: &ProblemArgs) -> Result<GemmSpec, String> {
    let e = |x: tessera_kernels::KernelError| x.to_string();
    let input: DType = a.dtype.parse().map_err(e)?;
    let mut s = GemmSpec::new(a.m, a.n, a.k)
        .batch(a.batch)
        .dtype(input)
        .a(a.a_major.parse::<Major>().map_err(e)?)
        .b(a.b_major.parse::<Major>().map_err(e)?)
        .d(a.d_major.parse::<Major>().map_err(e)?)
        .alpha(a.alpha)
        .options(options(&a.kernel)?);
    if let Some(o) = &a.out {
        s = s.out_dtype(o.parse().map_err(e)?);
    }
    let text = a.epilogue.trim();
    if !text.is_empty() {
        s = s.epilogue(text).map_err(e)?;
    }
    let reads_c = s.tree().d.uses(tessera_kernels::epilogue::Leaf::C);
    let comma_c = text.contains(',') && text.split(',').any(|w| w.trim() == "c");
    let beta = a.beta.unwrap_or(match (reads_c, comma_c) {
        (true, true) => 1.0,
        (true, false) => 0.5,
        _ => 0.0,
    });
    Ok(s.beta(beta))
}

/// The plan of `spec` on `arch` with `sms` SMs, refused when `--path sm90` was asked for and
/// the problem does not take the Hopper path.
fn planned(spec: &GemmSpec, k: &KernelArgs, arch: Arch, sms: i64) -> Result<Plan, String> {
    let plan = spec.plan(arch, sms).map_err(|e| e.to_string())?;
    if path_choice(&k.path)? == PathChoice::Sm90 && plan.path() != "sm90" {
        return Err(format!(
            "--path sm90: the Hopper path does not take this problem:\n{plan}"
        ));
    }
    Ok(plan)
}

/// Prints NVRTC programs exactly as compiled; with more than one (a staging copy, then the
/// GEMM) a comment line names each before it.
pub(crate) fn print_sources(sources: &[(String, String)]) {
    for (i, (name, src)) in sources.iter().enumerate() {
        if sources.len() > 1 {
            println!(
                "// ==== NVRTC program {} of {}: {name} ====",
                i + 1,
                sources.len()
            );
        }
        print!("{src}");
    }
}

/// Runs `tessera plan`.
pub fn plan(cmd: PlanCommand) -> ExitCode {
    let (pa, arch, emit_cuda, emit_cuda_only) = match cmd {
        PlanCommand::Gemm {
            problem,
            arch,
            emit_cuda,
            emit_cuda_only,
        } => (problem, arch, emit_cuda, emit_cuda_only),
        PlanCommand::Sweep { arch, class, why } => return plan_sweep(&arch, class.as_deref(), why),
    };
    let arch: Arch = match arch.parse() {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    // As an H100 SXM (132 SMs) compiles the persistent Hopper kernel.
    let plan =
        match spec(&pa).and_then(|s| planned(&s, &pa.kernel, arch, tessera_kernels::H100_SMS)) {
            Ok(p) => p,
            Err(e) => return fail(e),
        };
    let sources = match plan.sources() {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if emit_cuda_only {
        print_sources(&sources);
        return ExitCode::SUCCESS;
    }
    print!("{plan}");
    if emit_cuda {
        println!();
        print_sources(&sources);
    }
    ExitCode::SUCCESS
}

/// Runs `tessera run`: the GEMM on random data, every output checked against the float64
/// reference (the harness the GPU tests use).
#[cfg(feature = "cuda")]
pub fn run(cmd: RunCommand) -> ExitCode {
    use tessera_kernels::bench::check::{run_case, Case};
    let RunCommand::Gemm { problem: pa, seed } = cmd;
    let s = match spec(&pa) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let ctx = match super::open_device() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match planned(&s, &pa.kernel, ctx.arch(), ctx.sm_count()) {
        Ok(p) => print!("{p}"),
        Err(e) => return fail(e),
    }
    let seed = seed.unwrap_or_else(super::fresh_seed);
    match run_case(
        &ctx,
        &Case {
            seed,
            ..Case::new(s)
        },
    ) {
        Ok(r) => {
            let passed = r.passed();
            super::report(r, passed)
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

/// `tessera plan ...` (parsed once: the size of the problem's variant does not matter)
#[derive(clap::Subcommand)]
#[allow(clippy::large_enum_variant)]
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
    /// The plan of every shape of the sweep (`tessera bench gemm --sweep`), one line each:
    /// path, schedule, tile, stages and the stream-K split on an H100 SXM. Needs no GPU.
    Sweep {
        /// Target: sm_80, sm_86, sm_89 or sm_90a.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Only these classes, separated by commas.
        #[arg(long)]
        class: Option<String>,
        /// Also print each plan's decisions with their reasons.
        #[arg(long)]
        why: bool,
    },
}

/// The sweep's shapes of `classes` (a comma list; all when `None`), or an error naming the
/// unknown class.
fn sweep_shapes(classes: Option<&str>) -> Result<Vec<tessera_kernels::sweep::SweepShape>, String> {
    use tessera_kernels::sweep::{sweep_shapes, ShapeClass};
    let all = sweep_shapes();
    let Some(list) = classes else { return Ok(all) };
    let mut want = Vec::new();
    for name in list.split(',').map(str::trim) {
        match ShapeClass::ALL.iter().find(|c| c.name() == name) {
            Some(c) => want.push(*c),
            None => {
                let names: Vec<&str> = ShapeClass::ALL.iter().map(|c| c.name()).collect();
                return Err(format!(
                    "unknown class `{name}` (one of {})",
                    names.join(", ")
                ));
            }
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| want.contains(&s.class))
        .collect())
}

/// Runs `tessera plan sweep`: each sweep shape's plan in a line (and with `why`, its
/// decisions), as an H100 SXM (132 SMs) would run it.
fn plan_sweep(arch: &str, class: Option<&str>, why: bool) -> ExitCode {
    let arch: Arch = match arch.parse() {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let shapes = match sweep_shapes(class) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    println!(
        "{:<9} {:>22} {:>5} {:>5} {:<34} source",
        "class", "shape", "type", "path", "plan (on 132 SMs)"
    );
    let mut failed = 0;
    for s in &shapes {
        let spec = GemmSpec::linear(s.m, s.n, s.k)
            .batch(s.batch)
            .dtype(s.dtype);
        match spec.plan(arch, tessera_kernels::H100_SMS) {
            Ok(p) => {
                println!(
                    "{:<9} {:>22} {:>5} {:>5} {:<34} {}",
                    s.class.name(),
                    s.to_string(),
                    s.dtype.to_string(),
                    p.path(),
                    p.summary(),
                    s.source
                );
                if why {
                    for d in p.decisions() {
                        println!("{:>10}{d}", "");
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!(
                    "{:<9} {:>22} {:>5} ERROR {e}",
                    s.class.name(),
                    s.to_string(),
                    s.dtype.to_string()
                );
            }
        }
    }
    if failed > 0 {
        return fail(format!("{failed} sweep shapes could not be planned"));
    }
    ExitCode::SUCCESS
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
    /// Timed rounds per contender (default 9; 3 with `--sweep`).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Run the sweep instead of the standard shapes: the public list of shapes by class
    /// (`tessera plan sweep` shows each one's plan), plain GEMM against cuBLAS, with
    /// per-class and overall geomeans, the worst shape and GB/s against the copy roofline.
    #[arg(long)]
    pub sweep: bool,
    /// With `--sweep`: only these classes, separated by commas (decode, ragged, short-k,
    /// long-k, skinny, unaligned, huge, batched, fp16).
    #[arg(long)]
    pub class: Option<String>,
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
        /// A coordinate-aware tree to time against its else branch alone (repeatable; default:
        /// a row split on and off the tile grid). `none` skips this part.
        #[arg(long)]
        coord: Vec<String>,
        /// Timed rounds per contender.
        #[arg(long, default_value_t = 9)]
        rounds: usize,
        /// `off`: every fusion runs the generated tree epilogue, also those the GEMM kernels'
        /// flag-driven epilogue expresses (bias, relu_bias, gelu_bias, gelu_aux_bias); default
        /// `on` (the planner's choice).
        #[arg(long, default_value = "on")]
        flag_epilogue: String,
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
    flag_epilogue: &str,
    kernel: KernelArgs,
) -> ExitCode {
    let mut opts = match options(&kernel) {
        Ok(o) => o,
        Err(e) => return fail(format!("bench epilogues: {e}")),
    };
    opts.generated_epilogue = match on_off("--flag-epilogue", Some(flag_epilogue)) {
        Ok(v) => v == Some(false),
        Err(e) => return fail(format!("bench epilogues: {e}")),
    };
    let shapes = match shapes_arg(shapes, quick) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let fusions = match fusions_arg(fusions) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let trees = match coordinate_trees(coord) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if rounds == 0 {
        return fail("bench epilogues: --rounds 0: at least one timed round is needed");
    }
    let rt = match tessera_kernels::bench::harness_context(0) {
        Ok(c) => c,
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
    let mut all = match bench_fusion_rows(&rt, &shapes, &fusions, rounds, opts) {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    match bench_coordinate_rows(&rt, &shapes, &trees, rounds, opts) {
        Ok(rows) => all.extend(rows),
        Err(e) => return fail(e),
    }
    if let Some(file) = json {
        if let Err(e) = write_epilogues_json(&file, &rt, rounds, &all) {
            return fail(e);
        }
    }
    let bad = all
        .iter()
        .filter(|(_, r)| r.rel_diff.is_some_and(|d| d.is_nan() || d >= 2e-2))
        .count();
    if bad > 0 {
        return fail(format!(
            "{bad} rows differ from the other contender's result by 2e-2 or more"
        ));
    }
    ExitCode::SUCCESS
}

/// `bench epilogues --fusions`: the named fusions, comma-separated; default every fusion
/// without a reduction over K.
#[cfg(feature = "cuda")]
fn fusions_arg(fusions: Option<String>) -> Result<Vec<tessera_kernels::epilogue::Fusion>, String> {
    use tessera_kernels::epilogue::Fusion;

    let Some(list) = fusions else {
        return Ok(Fusion::ALL
            .iter()
            .copied()
            .filter(|f| f.tree().sum_k.is_empty())
            .collect());
    };
    let mut v = Vec::new();
    for name in list.split(',').map(str::trim) {
        match Fusion::ALL.iter().find(|f| f.name() == name) {
            Some(f) => v.push(*f),
            None => {
                let names: Vec<&str> = Fusion::ALL.iter().map(|f| f.name()).collect();
                return Err(format!(
                    "unknown fusion `{name}` (one of {})",
                    names.join(", ")
                ));
            }
        }
    }
    Ok(v)
}

/// `bench epilogues --coord`: the coordinate trees, parsed; default two selects on the row
/// (a split on and off the tile grid), none for `none`.
#[cfg(feature = "cuda")]
fn coordinate_trees(
    coord: Vec<String>,
) -> Result<Vec<tessera_kernels::epilogue::EpilogueTree>, String> {
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
    coord
        .iter()
        .map(|c| {
            tessera_kernels::epilogue::parse_epilogue(c).map_err(|e| format!("--coord `{c}`: {e}"))
        })
        .collect()
}

/// Timed GEMMs per batch of the epilogue benchmark: about 20 ms at 600 TFLOP/s.
#[cfg(feature = "cuda")]
fn epilogue_batch((m, n, k): (i64, i64, i64)) -> usize {
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    ((1.2e13 / flops).round() as usize).clamp(2, 200)
}

/// The rate of a GEMM of `shape` that takes `ms` milliseconds, in TFLOP/s.
#[cfg(feature = "cuda")]
fn gemm_tflops(shape: (i64, i64, i64), ms: f64) -> f64 {
    2.0 * shape.0 as f64 * shape.1 as f64 * shape.2 as f64 / ms / 1e9
}

/// The fusions' part of `bench epilogues`: every fusion on every shape, each row printed as it
/// is measured, under the table's header; the rows tagged `fusion`.
#[cfg(feature = "cuda")]
fn bench_fusion_rows(
    rt: &tessera_kernels::Context,
    shapes: &[(i64, i64, i64)],
    fusions: &[tessera_kernels::epilogue::Fusion],
    rounds: usize,
    opts: Options,
) -> Result<Vec<(String, tessera_kernels::bench::epilogues::EpBenchRow)>, String> {
    use tessera_kernels::bench::epilogues::{bench_fusions, EpBenchRow};

    println!(
        "{:>18} {:>10} {:>14} {:>9} {:>9} {:>9} {:>9} {:>22} {:>8} {:>9} {:>14} {:>9}",
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
    let mut all = Vec::new();
    for &shape in shapes {
        let rows = bench_fusions(
            rt,
            &[shape],
            fusions,
            rounds,
            epilogue_batch(shape),
            opts,
            |r| {
                let (lt_plain, lt_cost) = match (r.vendor_plain_ms, r.vendor_overhead()) {
                    (Some(ms), Some(c)) => (
                        format!("{:.1}", gemm_tflops(r.shape, ms)),
                        format!("{:+.1}%", 100.0 * c),
                    ),
                    _ => ("-".to_string(), "-".to_string()),
                };
                println!(
                    "{:>18} {:>10} {:>14} {:>9.1} {:>9.1} {:>9.1} {:>+8.1}% {:>22} {:>8.3} {:>9} {:>14} {:>9.1e}",
                    format!("{}x{}x{}", r.shape.0, r.shape.1, r.shape.2),
                    r.path,
                    r.name,
                    gemm_tflops(r.shape, r.ours_ms),
                    gemm_tflops(r.shape, r.plain_ms),
                    gemm_tflops(r.shape, r.other_ms),
                    100.0 * r.overhead(),
                    paired(r),
                    r.speedup(),
                    lt_plain,
                    lt_cost,
                    r.rel_diff.unwrap_or(f64::NAN)
                )
            },
        )
        .map_err(|e| e.to_string())?;
        all.extend(rows.into_iter().map(|r| ("fusion".to_string(), r)));
    }
    Ok(all)
}

/// The coordinate trees' part of `bench epilogues`: each tree on the first two shapes against
/// its select's else branch alone, printed under its own header; the rows tagged `coordinate`.
#[cfg(feature = "cuda")]
fn bench_coordinate_rows(
    rt: &tessera_kernels::Context,
    shapes: &[(i64, i64, i64)],
    trees: &[tessera_kernels::epilogue::EpilogueTree],
    rounds: usize,
    opts: Options,
) -> Result<Vec<(String, tessera_kernels::bench::epilogues::EpBenchRow)>, String> {
    use tessera_kernels::bench::epilogues::bench_coordinate;

    if !trees.is_empty() {
        println!(
            "\n{:>18} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}  tree (baseline: the select's else branch alone)",
            "shape", "path", "one TF/s", "plain", "baseline", "vs plain", "vs base"
        );
    }
    let mut all = Vec::new();
    for t in trees {
        for &shape in shapes.iter().take(2) {
            let r = bench_coordinate(rt, shape, t, rounds, epilogue_batch(shape), opts)
                .map_err(|e| format!("{t}: {e}"))?;
            let base = r.baseline_ms.unwrap_or(f64::NAN);
            println!(
                "{:>18} {:>10} {:>9.1} {:>9.1} {:>9.1} {:>+8.1}% {:>+8.1}%  {}",
                format!("{}x{}x{}", shape.0, shape.1, shape.2),
                r.path,
                gemm_tflops(shape, r.ours_ms),
                gemm_tflops(shape, r.plain_ms),
                gemm_tflops(shape, base),
                100.0 * r.overhead(),
                100.0 * (r.ours_ms / base - 1.0),
                r.name
            );
            all.push(("coordinate".to_string(), r));
        }
    }
    Ok(all)
}

/// `bench epilogues --json`: the device, the rounds and every row with its kind.
#[cfg(feature = "cuda")]
fn write_epilogues_json(
    file: &std::path::Path,
    rt: &tessera_kernels::Context,
    rounds: usize,
    all: &[(String, tessera_kernels::bench::epilogues::EpBenchRow)],
) -> Result<(), String> {
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
    std::fs::write(file, format!("{doc:#}\n"))
        .map_err(|e| format!("writing {}: {e}", file.display()))
}

/// Runs `tessera bench`.
#[cfg(feature = "cuda")]
pub fn bench(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Gemm(a) => bench_gemm(a),
        BenchCommand::Epilogues {
            json,
            quick,
            shapes,
            fusions,
            coord,
            rounds,
            flag_epilogue,
            kernel,
        } => bench_epilogues(
            json,
            quick,
            shapes,
            fusions,
            coord,
            rounds,
            &flag_epilogue,
            kernel,
        ),
        BenchCommand::Mma { json, rounds } => bench_mma(json, rounds),
    }
}

/// Runs `tessera bench gemm`: the sweep, or the standard benchmark of shapes and epilogues
/// against the vendor's GEMM.
#[cfg(feature = "cuda")]
fn bench_gemm(args: GemmBenchArgs) -> ExitCode {
    use tessera_kernels::bench::gemm::{run_bench, BenchConfig};

    let GemmBenchArgs {
        json,
        quick,
        shapes,
        epilogues,
        rounds,
        sweep,
        class,
        max_ctas,
        kernel: cl,
    } = args;
    let mut opts = match options(&cl) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    opts.max_ctas = max_ctas;
    if sweep {
        if quick || shapes.is_some() || epilogues.is_some() {
            return fail(
                "--sweep runs its own list of plain GEMMs: no --quick, --shapes or --epilogues",
            );
        }
        if path_choice(&cl.path) == Ok(PathChoice::Sm90) {
            return fail(
                "--sweep reports the path each shape takes: --path auto or sm80, not sm90",
            );
        }
        return bench_sweep(json, rounds.unwrap_or(3), class.as_deref(), opts);
    }
    if class.is_some() {
        return fail("--class selects classes of the sweep: it needs --sweep");
    }
    let rounds = rounds.unwrap_or(9);
    let shapes = match shapes_arg(shapes, quick) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let epilogues = match epilogues_arg(epilogues) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let rt = match tessera_kernels::bench::harness_context(0) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // Every (shape, epilogue) is planned here first, so `--path sm90` refuses a problem the
    // Hopper path does not take before anything runs.
    if let Err(e) = plan_all(&shapes, &epilogues, opts, &cl, &rt) {
        return fail(e);
    }
    let cfg = BenchConfig {
        shapes,
        epilogues,
        rounds,
        options: opts,
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
    let header = bench_header();
    println!("{header}");
    let rows = match run_bench(&rt, &cfg, |r| println!("{}", bench_line(r))) {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    if let Some(path) = json {
        if let Err(e) = write_bench_json(&path, &rt, &cfg, &rows) {
            return fail(e);
        }
    }
    // Short summary last: the plain rows.
    println!("\nsummary (plain GEMM, ours vs cuBLAS):");
    println!("{header}");
    for r in rows.iter().filter(|r| r.epilogue == "acc") {
        println!("{}", bench_line(r));
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

/// `bench gemm --epilogues`: the epilogues separated by `;` (`none` is the plain GEMM, `acc`),
/// default the standard list; the first must be the plain GEMM, which the fused rows are
/// compared with.
#[cfg(feature = "cuda")]
fn epilogues_arg(epilogues: Option<String>) -> Result<Vec<String>, String> {
    let epilogues: Vec<String> = match epilogues {
        Some(s) => s
            .split(';')
            .map(|e| {
                if e.trim() == "none" {
                    "acc".to_string()
                } else {
                    e.trim().to_string()
                }
            })
            .collect(),
        None => tessera_kernels::bench::gemm::standard_epilogues(),
    };
    if epilogues.first().map(String::as_str) != Some("acc") {
        return Err(
            "the first epilogue must be the plain GEMM (`none` or `acc`): fused rows are compared with it"
                .to_string(),
        );
    }
    Ok(epilogues)
}

/// Plans every (shape, epilogue) of `bench gemm` for the device: the first refusal.
#[cfg(feature = "cuda")]
fn plan_all(
    shapes: &[(i64, i64, i64)],
    epilogues: &[String],
    opts: Options,
    cl: &KernelArgs,
    rt: &tessera_kernels::Context,
) -> Result<(), String> {
    for &(m, n, k) in shapes {
        for e in epilogues {
            GemmSpec::new(m, n, k)
                .b(Major::Col)
                .epilogue(e)
                .map(|s| s.options(opts))
                .map_err(|e| e.to_string())
                .and_then(|s| planned(&s, cl, rt.arch(), rt.sm_count()))?;
        }
    }
    Ok(())
}

/// The header of `bench gemm`'s table.
#[cfg(feature = "cuda")]
fn bench_header() -> String {
    format!(
        "{:>20} {:>26} {:>10} {:>10} {:>10} {:>6} {:>8} {:>9}  {:<20} {}",
        "shape",
        "epilogue",
        "path",
        "ours TF/s",
        "vendor TF/s",
        "ratio",
        "vs plain",
        "rel diff",
        "vendor",
        "ours range ms"
    )
}

/// A row of `bench gemm`'s table.
#[cfg(feature = "cuda")]
fn bench_line(r: &tessera_kernels::bench::gemm::BenchRow) -> String {
    format!(
        "{:>20} {:>26} {:>10} {:>10.1} {:>10.1} {:>6.3} {:>8.3} {:>9.2e}  {:<20} {:.3}-{:.3}",
        format!("{}x{}x{}", r.m, r.n, r.k),
        r.epilogue,
        r.path,
        r.ours_tflops,
        r.vendor_tflops,
        r.ratio,
        r.over_plain,
        r.rel_diff,
        r.vendor,
        r.ours_range.0,
        r.ours_range.1
    )
}

/// `bench gemm --json`: the device, the seed, the rounds and every row.
#[cfg(feature = "cuda")]
fn write_bench_json(
    path: &std::path::Path,
    rt: &tessera_kernels::Context,
    cfg: &tessera_kernels::bench::gemm::BenchConfig,
    rows: &[tessera_kernels::bench::gemm::BenchRow],
) -> Result<(), String> {
    let v: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "m": r.m, "n": r.n, "k": r.k, "epilogue": r.epilogue, "kernel": r.kernel,
                "path": r.path, "vendor": r.vendor, "ours_ms": r.ours_ms,
                "vendor_ms": r.vendor_ms, "ours_tflops": r.ours_tflops,
                "vendor_tflops": r.vendor_tflops, "ratio": r.ratio,
                "over_plain": r.over_plain, "rel_diff": r.rel_diff,
                "ours_min_ms": r.ours_range.0, "ours_max_ms": r.ours_range.1,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "device": rt.device_name(), "arch": rt.arch().to_string(), "seed": cfg.seed,
        "rounds": cfg.rounds, "rows": v,
    });
    std::fs::write(path, format!("{doc:#}\n"))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The sweep's JSON document: the device, the settings, the summary and every row; `done`
/// is false while the sweep runs (the file is rewritten after each row, so a run cut short by
/// a timeout still leaves its rows).
#[cfg(feature = "cuda")]
fn write_sweep_json(
    file: &std::path::Path,
    rt: &tessera_kernels::Context,
    cfg: &tessera_kernels::bench::sweep::SweepConfig,
    rows: &[tessera_kernels::bench::sweep::SweepRow],
    done: bool,
) -> Result<(), String> {
    let num = |x: f64| {
        if x.is_finite() {
            serde_json::json!(x)
        } else {
            serde_json::Value::Null
        }
    };
    let sum = tessera_kernels::bench::sweep::summarize(rows);
    let v: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let s = &r.shape;
            serde_json::json!({
                "class": s.class.name(), "source": s.source, "m": s.m, "n": s.n, "k": s.k,
                "batch": s.batch, "dtype": s.dtype.to_string(), "path": r.path,
                "kernel": r.kernel, "plan": r.plan, "decisions": r.decisions,
                "ours_ms": num(r.ours_ms), "vendor_ms": num(r.vendor_ms), "ratio": num(r.ratio),
                "ours_tflops": num(r.ours_tflops), "vendor_tflops": num(r.vendor_tflops),
                "ours_gbs": num(r.ours_gbs), "vendor_gbs": num(r.vendor_gbs),
                "rel_diff": num(r.rel_diff), "error": r.error,
            })
        })
        .collect();
    let classes: Vec<serde_json::Value> = sum
        .classes
        .iter()
        .map(|(c, n, g)| serde_json::json!({"class": c.name(), "rows": n, "geomean": num(*g)}))
        .collect();
    let doc = serde_json::json!({
        "device": rt.device_name(), "arch": rt.arch().to_string(), "sms": rt.sm_count(),
        "seed": cfg.seed, "rounds": cfg.rounds, "batch_ms": cfg.batch_ms,
        "copy_roofline_gbs": tessera_kernels::sweep::COPY_ROOFLINE_BYTES_PER_S / 1e9,
        "done": done, "shapes": cfg.shapes.len(), "classes": classes, "overall": num(sum.overall),
        "worst": sum.worst.map(|i| rows[i].shape.to_string()),
        "below_095": sum.below_095, "off_hopper": sum.off_hopper,
        "errors": sum.errors, "mismatches": sum.mismatches, "rows": v,
    });
    std::fs::write(file, format!("{doc:#}\n"))
        .map_err(|e| format!("writing {}: {e}", file.display()))
}

/// The copy roofline in GB/s.
#[cfg(feature = "cuda")]
fn roofline_gbs() -> f64 {
    tessera_kernels::sweep::COPY_ROOFLINE_BYTES_PER_S / 1e9
}

/// The header of the sweep's table.
#[cfg(feature = "cuda")]
fn sweep_header() -> String {
    format!(
        "{:<9} {:>22} {:>4} {:<36} {:>9} {:>9} {:>6} {:>17} {:>8}  source",
        "class",
        "shape",
        "type",
        "plan",
        "ours TF/s",
        "cuBLAS",
        "ratio",
        "GB/s (roofline)",
        "rel diff"
    )
}

/// One row of the sweep's table: the measurement, or the error's first line (a compile
/// failure's log follows it; the JSON has all of it). GB/s for the decode class, which is
/// bound by reading B.
#[cfg(feature = "cuda")]
fn sweep_line(r: &tessera_kernels::bench::sweep::SweepRow) -> String {
    use tessera_kernels::sweep::ShapeClass;
    let s = &r.shape;
    if let Some(e) = &r.error {
        let e: String = e.lines().next().unwrap_or("").chars().take(240).collect();
        return format!(
            "{:<9} {:>22} {:>4} {:<36} ERROR {e}",
            s.class.name(),
            s.to_string(),
            s.dtype.to_string(),
            if r.plan.is_empty() { "-" } else { &r.plan },
        );
    }
    let gbs = if s.class == ShapeClass::Decode {
        format!(
            "{:.0} ({:.0}%)",
            r.ours_gbs,
            100.0 * r.ours_gbs / roofline_gbs()
        )
    } else {
        "-".to_string()
    };
    format!(
        "{:<9} {:>22} {:>4} {:<36} {:>9.1} {:>9.1} {:>6.3} {:>17} {:>8.1e}  {}{}",
        s.class.name(),
        s.to_string(),
        s.dtype.to_string(),
        format!("{} {}", r.path, r.plan),
        r.ours_tflops,
        r.vendor_tflops,
        r.ratio,
        gbs,
        r.rel_diff,
        s.source,
        if r.agrees() { "" } else { "  MISMATCH" }
    )
}

/// The sweep's summary: the geomean of each class and overall, the worst row, the rows below
/// 0.95 and those off the Hopper path.
#[cfg(feature = "cuda")]
fn print_sweep_summary(
    rows: &[tessera_kernels::bench::sweep::SweepRow],
    sum: &tessera_kernels::bench::sweep::SweepSummary,
    rounds: usize,
) {
    use tessera_kernels::sweep::ShapeClass;
    let roof = roofline_gbs();
    println!(
        "\nsweep summary: ours against cuBLAS (its time over ours), geomean by class ({rounds} rounds)"
    );
    for (c, n, g) in &sum.classes {
        let extra = if *c == ShapeClass::Decode {
            let best = rows
                .iter()
                .filter(|r| r.shape.class == *c && r.error.is_none())
                .map(|r| r.ours_gbs)
                .fold(0.0, f64::max);
            format!(
                "  (ours up to {best:.0} GB/s, {:.0}% of the {roof:.0} GB/s copy roofline)",
                100.0 * best / roof
            )
        } else {
            String::new()
        };
        println!("  {:<9} {n:>3} rows  {g:.3}{extra}", c.name());
    }
    println!(
        "  {:<9} {:>3} rows  {:.3}",
        "overall", sum.measured, sum.overall
    );
    if let Some(i) = sum.worst {
        let r = &rows[i];
        println!(
            "  worst     {} {} ({}): {:.3} on {} {}",
            r.shape.class.name(),
            r.shape,
            r.shape.dtype,
            r.ratio,
            r.path,
            r.plan
        );
    }
    println!(
        "  below 0.95: {}; off the Hopper path (sm80-class): {}{}",
        sum.below_095,
        sum.off_hopper,
        rows.iter()
            .filter(|r| r.path == "sm80")
            .map(|r| format!(" {}", r.shape))
            .collect::<String>()
    );
}

/// Runs `tessera bench gemm --sweep`.
#[cfg(feature = "cuda")]
fn bench_sweep(
    json: Option<std::path::PathBuf>,
    rounds: usize,
    class: Option<&str>,
    opts: Options,
) -> ExitCode {
    use tessera_kernels::bench::sweep::{run_sweep, summarize, SweepConfig};

    let shapes = match sweep_shapes(class) {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => return fail("--class: no shapes"),
        Err(e) => return fail(e),
    };
    if rounds == 0 {
        return fail("--rounds 0: at least one timed round is needed");
    }
    let rt = match tessera_kernels::bench::harness_context(0) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let cfg = SweepConfig {
        shapes,
        rounds,
        options: opts,
        ..SweepConfig::default()
    };
    println!(
        "device {} ({}, {} SMs), seed {}: the sweep, {} shapes, plain GEMM against cuBLAS (cublasGemmEx / \
         cublasGemmStridedBatchedEx, COMPUTE_32F), interleaved, {} rounds of ~{} ms batches, median per GEMM{}",
        rt.device_name(),
        rt.arch(),
        rt.sm_count(),
        cfg.seed,
        cfg.shapes.len(),
        cfg.rounds,
        cfg.batch_ms,
        if cfg.rounds < 5 {
            " (few rounds: read a single row to about +-5%, the geomeans closer)"
        } else {
            ""
        }
    );
    println!("{}", sweep_header());
    let mut partial = Vec::new();
    let rows = match run_sweep(&rt, &cfg, |r| {
        println!("{}", sweep_line(r));
        partial.push(r.clone());
        if let Some(file) = &json {
            if let Err(e) = write_sweep_json(file, &rt, &cfg, &partial, false) {
                eprintln!("{e}");
            }
        }
    }) {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    let sum = summarize(&rows);
    print_sweep_summary(&rows, &sum, cfg.rounds);
    if let Some(file) = &json {
        if let Err(e) = write_sweep_json(file, &rt, &cfg, &rows, true) {
            return fail(e);
        }
    }
    if sum.errors > 0 || sum.mismatches > 0 {
        eprintln!(
            "\nERROR: {} of {} sweep shapes ended in an error and {} disagree with cuBLAS (a valid GEMM must never end in an error):",
            sum.errors,
            rows.len(),
            sum.mismatches
        );
        for r in rows.iter().filter(|r| !r.agrees()) {
            eprintln!(
                "  {} {} ({}): {}",
                r.shape.class.name(),
                r.shape,
                r.shape.dtype,
                r.error
                    .clone()
                    .unwrap_or_else(|| format!("rel diff {:.2e}", r.rel_diff))
            );
        }
        return ExitCode::from(3);
    }
    ExitCode::SUCCESS
}

#[cfg(feature = "cuda")]
fn bench_mma(json: Option<std::path::PathBuf>, rounds: usize) -> ExitCode {
    let rt = match tessera_kernels::bench::harness_context(0) {
        Ok(c) => c,
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
