//! `tessera plan|run|bench conv`: the convolution's planner, runner and benchmark, on the
//! library's public API (`ConvSpec`, `Conv2d`).

use std::process::ExitCode;

use super::fail;

use tessera_kernels::{Arch, ConvSpec, DType, Options};

/// A convolution, as given on the command line.
#[derive(clap::Args, Clone, Debug)]
pub struct ConvArgs {
    /// Batch.
    #[arg(long)]
    pub n: i64,
    /// Input height.
    #[arg(long)]
    pub h: i64,
    /// Input width.
    #[arg(long)]
    pub w: i64,
    /// Input channels.
    #[arg(long)]
    pub c: i64,
    /// Output channels.
    #[arg(long)]
    pub k: i64,
    /// Filter height.
    #[arg(long)]
    pub r: i64,
    /// Filter width.
    #[arg(long)]
    pub s: i64,
    /// Stride: `S` or `SH,SW`.
    #[arg(long, default_value = "1")]
    pub stride: String,
    /// Zero padding: `P` (every side), `PH,PW` (as PyTorch's padding), or `TOP,BOTTOM,LEFT,RIGHT`.
    #[arg(long, default_value = "0")]
    pub pad: String,
    /// Dilation: `D` or `DH,DW`.
    #[arg(long, default_value = "1")]
    pub dilation: String,
    /// Input type: bf16 or fp16.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Output type: bf16, fp16 or fp32; default: the input type.
    #[arg(long)]
    pub out: Option<String>,
    /// The epilogue over the (N·P·Q) x K output: a GEMM epilogue tree (`acc` the
    /// convolution, `bias_col` the per-channel bias, `residual` a tensor shaped as y), or
    /// `bias_residual_relu` (relu(conv + bias + residual)) or `bias_relu_residual`
    /// (relu(conv + bias) + residual); default: the convolution.
    #[arg(long, default_value = "")]
    pub epilogue: String,
    /// The epilogue's alpha.
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f32,
    /// The epilogue's beta (default 0.5 when the epilogue reads `c`, else 0).
    #[arg(long)]
    pub beta: Option<f32>,
    /// The GEMM's path: `auto` (the planner's), `sm80` (the sm80-class kernel forced), `halo`
    /// (the Hopper path's halo load of A wherever it can take the layer) or `no-halo` (never).
    #[arg(long, default_value = "auto")]
    pub path: String,
}

fn list(flag: &str, s: &str) -> Result<Vec<i64>, String> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<i64>()
                .map_err(|e| format!("--{flag} `{s}`: {e}"))
        })
        .collect()
}

fn pair(flag: &str, s: &str) -> Result<(i64, i64), String> {
    match list(flag, s)?[..] {
        [a] => Ok((a, a)),
        [a, b] => Ok((a, b)),
        _ => Err(format!("--{flag} `{s}`: one value or two (H,W)")),
    }
}

/// The spec of the command line's convolution.
pub fn spec(a: &ConvArgs) -> Result<ConvSpec, String> {
    let e = |x: tessera_kernels::KernelError| x.to_string();
    let (sh, sw) = pair("stride", &a.stride)?;
    let (dh, dw) = pair("dilation", &a.dilation)?;
    let (t, b, l, r) = match list("pad", &a.pad)?[..] {
        [p] => (p, p, p, p),
        [ph, pw] => (ph, ph, pw, pw),
        [t, b, l, r] => (t, b, l, r),
        _ => {
            return Err(format!(
                "--pad `{}`: P, PH,PW or TOP,BOTTOM,LEFT,RIGHT",
                a.pad
            ))
        }
    };
    let input: DType = a.dtype.parse().map_err(e)?;
    let options = match a.path.as_str() {
        "auto" => Options::default(),
        "sm80" => Options {
            sm80: true,
            ..Options::default()
        },
        "halo" | "no-halo" => Options {
            halo: Some(a.path == "halo"),
            ..Options::default()
        },
        p => return Err(format!("--path `{p}`: auto, sm80, halo or no-halo")),
    };
    let mut s = ConvSpec::new([a.n, a.c, a.h, a.w], [a.k, a.c, a.r, a.s])
        .stride(sh, sw)
        .padding(t, b, l, r)
        .dilation(dh, dw)
        .dtype(input)
        .alpha(a.alpha)
        .options(options);
    if let Some(o) = &a.out {
        s = s.out_dtype(o.parse().map_err(e)?);
    }
    if !a.epilogue.trim().is_empty() {
        s = s.epilogue(&a.epilogue).map_err(e)?;
    }
    let reads_c = s.tree().d.uses(tessera_kernels::epilogue::Leaf::C);
    let beta = a.beta.unwrap_or(if reads_c { 0.5 } else { 0.0 });
    s.output_dims().map_err(e)?;
    Ok(s.beta(beta))
}

/// `tessera plan conv`: the im2col layout, the path and why, and the GEMM's plan; or the CUDA
/// sources.
pub fn plan(a: &ConvArgs, arch: &str, emit_cuda: bool, emit_cuda_only: bool) -> ExitCode {
    let arch: Arch = match arch.parse() {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let s = match spec(a) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    // As an H100 SXM (132 SMs) compiles the persistent Hopper kernel.
    let sms = tessera_kernels::H100_SMS;
    let sources = match s.sources(arch, sms) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let emit = || crate::cli::gemm::print_sources(&sources);
    if emit_cuda_only {
        emit();
        return ExitCode::SUCCESS;
    }
    match s.explain(arch, sms) {
        Ok(t) => print!("{t}"),
        Err(e) => return fail(e),
    }
    if emit_cuda {
        println!();
        emit();
    }
    ExitCode::SUCCESS
}

/// `tessera run conv`: the convolution on random channels-last tensors, checked against the
/// float64 direct loop.
#[cfg(feature = "cuda")]
pub fn run(a: &ConvArgs, seed: Option<u64>, caller_workspace: bool) -> ExitCode {
    use tessera_kernels::bench::conv_check::{run_conv_case, ConvCase};
    let s = match spec(a) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let ctx = match super::open_device() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match s.explain(ctx.arch(), ctx.sm_count()) {
        Ok(t) => print!("{t}"),
        Err(e) => return fail(e),
    }
    let seed = seed.unwrap_or_else(super::fresh_seed);
    let case = ConvCase {
        seed,
        caller_workspace,
        ..ConvCase::new(s)
    };
    match run_conv_case(&ctx, &case) {
        Ok(r) => {
            let passed = r.passed();
            super::report(r, passed)
        }
        Err(e) => fail(e),
    }
}

/// `tessera run conv` (built without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub fn run(_a: &ConvArgs, _seed: Option<u64>, _caller_workspace: bool) -> ExitCode {
    fail("run: this tessera was built without the `cuda` feature")
}

/// The options of `tessera bench conv`.
#[derive(clap::Args, Clone, Debug)]
pub struct ConvBenchArgs {
    /// Batches, separated by commas.
    #[arg(long, default_value = "32,128,256")]
    pub batch: String,
    /// Layers by name, separated by commas (`stem`, `c2a` ... `c5a`, `odd100`, `odd124`,
    /// `odd127`, or `C:K:HW:RS:STRIDE:PAD` for a layer of no list); default: ResNet-50's ten
    /// and the odd channel counts.
    #[arg(long)]
    pub layers: Option<String>,
    /// Only batch 128 and the layers stem, c2a, c2b, c4a.
    #[arg(long)]
    pub quick: bool,
    /// Skip the fused residual block `relu(conv + bias + residual)`.
    #[arg(long)]
    pub no_fused: bool,
    /// Timed rounds per contender.
    #[arg(long, default_value_t = 9)]
    pub rounds: usize,
    /// Write the rows as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Force our GEMM's schedule, `cooperative` or `pingpong` (an experiment; default: the
    /// planner's).
    #[arg(long)]
    pub schedule: Option<String>,
    /// Force our GEMM's pipeline depth (an experiment; default: the planner's).
    #[arg(long)]
    pub stages: Option<i64>,
    /// Force our GEMM's Hopper CTA tile, `BMxBN` (an experiment; default: the planner's).
    #[arg(long)]
    pub tile: Option<String>,
    /// Our GEMM kernel launched as a programmatic dependent of the kernel before it, `on`
    /// (default) or `off`.
    #[arg(long)]
    pub dependent_launch: Option<String>,
    /// The halo load of A for the layers it can take, `on` or `off` (an experiment; default:
    /// where its estimate beats the im2col load's).
    #[arg(long)]
    pub halo: Option<String>,
    /// The fused row's epilogue, a tree over `bias_col` and `residual` (an experiment: ours
    /// alone, no cuDNN row); default: the residual block against cuDNN's fused call.
    #[arg(long)]
    pub fused_epilogue: Option<String>,
}

/// The larger of a row's differences from cuDNN (plain and fused), NaN if either is.
#[cfg(feature = "cuda")]
fn worst_diff(r: &tessera_kernels::bench::conv::ConvBenchRow) -> Option<f64> {
    match (r.rel_diff, r.fused_rel_diff) {
        (Some(a), Some(b)) if a.is_nan() || b.is_nan() => Some(f64::NAN),
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A layer of no list, `C:K:HW:RS:STRIDE:PAD` (square input and filter, the same padding on
/// every side), named by that text.
#[cfg(feature = "cuda")]
fn custom_layer(text: &str) -> Result<tessera_kernels::bench::conv::Layer, String> {
    let v: Vec<i64> = text
        .split(':')
        .map(|t| t.trim().parse::<i64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bench conv: layer `{text}`: {e}"))?;
    let [c, k, hw, rs, stride, pad] = v[..] else {
        return Err(format!(
            "bench conv: layer `{text}`: C:K:HW:RS:STRIDE:PAD (six numbers)"
        ));
    };
    // The rows name their layer by a 'static str: the command line's few are kept for the
    // program's life.
    let id: &'static str = Box::leak(text.to_string().into_boxed_str());
    Ok(tessera_kernels::bench::conv::Layer {
        id,
        c,
        k,
        hw,
        rs,
        stride,
        pad,
    })
}

/// `tessera bench conv`.
#[cfg(feature = "cuda")]
pub fn bench(a: &ConvBenchArgs) -> ExitCode {
    use tessera_kernels::bench::conv::{
        run_conv_bench, ConvBenchConfig, ConvBenchRow, ODD, RESNET50,
    };
    let all: Vec<_> = RESNET50.iter().chain(ODD.iter()).copied().collect();
    let (batches, layers) = if a.quick {
        let l = all
            .iter()
            .filter(|l| ["stem", "c2a", "c2b", "c4a"].contains(&l.id))
            .copied()
            .collect();
        (vec![128], l)
    } else {
        let b = match list("batch", &a.batch) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        let l = match &a.layers {
            None => all.clone(),
            Some(names) => {
                let mut v = Vec::new();
                for name in names.split(',').map(str::trim) {
                    match all.iter().find(|l| l.id == name) {
                        Some(l) => v.push(*l),
                        None if name.contains(':') => match custom_layer(name) {
                            Ok(l) => v.push(l),
                            Err(e) => return fail(e),
                        },
                        None => {
                            let ids: Vec<_> = all.iter().map(|l| l.id).collect();
                            return fail(format!(
                                "unknown layer `{name}` (one of {})",
                                ids.join(", ")
                            ));
                        }
                    }
                }
                v
            }
        };
        (b, l)
    };
    if a.rounds == 0 {
        return fail("bench conv: --rounds 0: at least one timed round is needed");
    }
    let schedule = match a.schedule.as_deref() {
        None => None,
        Some("cooperative") => Some(tessera_kernels::plan::Schedule::Cooperative),
        Some("pingpong") | Some("ping-pong") => Some(tessera_kernels::plan::Schedule::PingPong),
        Some(x) => {
            return fail(format!(
                "bench conv: --schedule `{x}`: `cooperative` or `pingpong`"
            ))
        }
    };
    let dependent_launch = match super::gemm::on_off(
        "bench conv: --dependent-launch",
        a.dependent_launch.as_deref(),
    ) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let halo = match super::gemm::on_off("bench conv: --halo", a.halo.as_deref()) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let tile = match a
        .tile
        .as_deref()
        .map(super::gemm::hopper_tile_arg)
        .transpose()
    {
        Ok(t) => t,
        Err(e) => return fail(format!("bench conv: --tile {e}")),
    };
    let fused_epilogue = match a
        .fused_epilogue
        .as_deref()
        .map(tessera_kernels::epilogue::parse_epilogue)
    {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => return fail(format!("bench conv: --fused-epilogue: {e}")),
    };
    let ctx = match tessera_kernels::bench::harness_context(0) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let cudnn = match tessera_kernels::bench::cudnn::version() {
        Ok(v) => format!("cuDNN {v}"),
        Err(e) => format!("no cuDNN ({e}): ours alone"),
    };
    println!(
        "device {} ({}, {} SMs), {cudnn}, {} rounds interleaved (order rotated), median per call, bf16 NHWC",
        ctx.device_name(),
        ctx.arch(),
        ctx.sm_count(),
        a.rounds
    );
    println!("TF/s = 2·N·P·Q·K·C·R·S / time; GB/s = (x as read + w + y) bytes / time, x as read = N·P·Q·C for a 1x1 layer (the 1x1 layers' measure; copy roofline ~3000 GB/s); ratio = cuDNN time / ours");
    let header = format!(
        "{:>7} {:>4} {:>18} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>8} {:>9}  {}",
        "layer",
        "N",
        "path",
        "ours ms",
        "TF/s",
        "cuDNN TF",
        "ratio",
        "GB/s",
        "fused TF",
        "cuDNN f.",
        "ratio",
        "f/plain",
        "rel diff",
        "cuDNN algo"
    );
    println!("{header}");
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    let line = |r: &ConvBenchRow| {
        let one = r.one_by_one;
        format!(
            "{:>7} {:>4} {:>18} {:>9.3} {:>9.1} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>8} {:>9}  {}{}",
            r.id,
            r.n,
            r.path,
            r.ours_ms,
            r.tflops(r.ours_ms),
            opt(r.cudnn_ms, &|m| format!("{:.1}", r.tflops(m))),
            opt(r.speedup(), &|s| format!("{s:.3}")),
            if one { format!("{:.0}", r.gbps(r.ours_ms)) } else { "-".into() },
            opt(r.fused_ms, &|m| format!("{:.1}", r.tflops(m))),
            opt(r.cudnn_fused_ms, &|m| format!("{:.1}", r.tflops(m))),
            opt(r.fused_ms.zip(r.cudnn_fused_ms).map(|(o, c)| c / o), &|s| format!("{s:.3}")),
            opt(r.fused_ms.map(|f| f / r.ours_ms), &|s| format!("{s:.3}")),
            opt(worst_diff(r), &|d| format!("{d:.1e}")),
            r.cudnn_algo,
            if r.cudnn_note.is_empty() { String::new() } else { format!(" ({})", r.cudnn_note) }
        )
    };
    let cfg = ConvBenchConfig {
        layers,
        batches,
        rounds: a.rounds,
        fused: !a.no_fused,
        seed: 2026,
        options: tessera_kernels::plan::Options {
            schedule,
            stages: a.stages,
            tile,
            dependent_launch,
            halo,
            ..Default::default()
        },
        fused_epilogue,
    };
    let rows = match run_conv_bench(&ctx, &cfg, |r| println!("{}", line(r))) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    // By the targets' classes: the 3x3 layers, the 1x1 layers of stride 1, the stem, the odd
    // channel counts.
    let summary = tessera_kernels::bench::conv::summary(&rows);
    if !summary.is_empty() {
        println!("by class (ratio = cuDNN time / ours):");
        for l in summary {
            println!("  {l}");
        }
    }
    if let Some(file) = &a.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "layer": r.id, "n": r.n, "one_by_one": r.one_by_one, "path": r.path,
                    "flops": r.flops, "bytes": r.bytes,
                    "ours_ms": r.ours_ms, "cudnn_ms": r.cudnn_ms, "cudnn_algo": r.cudnn_algo,
                    "fused_ms": r.fused_ms, "cudnn_fused_ms": r.cudnn_fused_ms,
                    "rel_diff": r.rel_diff, "fused_rel_diff": r.fused_rel_diff,
                    "cudnn_note": r.cudnn_note,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "device": ctx.device_name(), "arch": ctx.arch().to_string(), "rounds": a.rounds,
            "cudnn": cudnn, "rows": v,
        });
        if let Err(e) = std::fs::write(file, format!("{doc:#}\n")) {
            return fail(format!("writing {}: {e}", file.display()));
        }
    }
    let bad = rows
        .iter()
        .filter(|r| worst_diff(r).is_some_and(|d| d.is_nan() || d >= 2e-2))
        .count();
    if bad > 0 {
        return fail(format!(
            "{bad} rows differ from cuDNN's result by 2e-2 or more"
        ));
    }
    ExitCode::SUCCESS
}

/// `tessera bench conv` (built without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub fn bench(_a: &ConvBenchArgs) -> ExitCode {
    fail("bench: this tessera was built without the `cuda` feature")
}
