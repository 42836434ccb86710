//! The Hopper kernel's per-tile timeline (the `sm90_timeline` example's program): an
//! instrumented build of the production kernel, launched, its clock stamps read back.
#![allow(missing_docs)]
use std::time::Instant;

use tessera_kernels::bench::buffers::DeviceBuf;
use tessera_kernels::codegen::sm90::cuda_source;
use tessera_kernels::epilogue::cuda::{sm90_tree_source, tree_sm90_plan};
use tessera_kernels::epilogue::{parse_epilogue, Binding, EpilogueTree};
use tessera_kernels::launch::runtime::Runtime;
use tessera_kernels::launch::sm80::GemmArgs;
use tessera_kernels::launch::sm90::Sm90Kernel;
use tessera_kernels::launch::tree::{EpBuffers, TreeSm90};
use tessera_kernels::plan::sm90::EPI_COLS;
use tessera_kernels::plan::GemmStrides;
use tessera_kernels::plan::{Schedule, Sm90Options, Sm90Plan};
use tessera_kernels::rng::Rng;
use tessera_kernels::{BiasMode, DType, Epilogue, GemmProblem, Major};

/// Slots per (CTA, warpgroup) and events per slot, as in `sm90_gemm.cuh`.
const TILES: usize = 64;
const EVENTS: usize = 4;
/// Pass slots per (CTA, consumer), as `kTlPasses` in `sm90_gemm.cuh`.
const PASSES: usize = 512;

/// One consumer tile: iteration start, turn taken, first stage in, mainloop done, and the
/// next iteration's start (the epilogue's end).
#[derive(Clone, Copy, Debug)]
struct Tile {
    begin: u64,
    turn: u64,
    data: u64,
    main_end: u64,
    epi_end: u64,
}

type Res<T> = Result<T, String>;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> Res<T> {
    args.get(i)
        .ok_or_else(|| format!("missing {name}"))?
        .parse()
        .map_err(|_| format!("{name} `{}` is not a number", args[i]))
}

/// The values of every `name VALUE` pair of `args`, in order.
fn flags<'a>(args: &'a [String], name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    args.windows(2)
        .filter(move |w| w[0] == name)
        .map(|w| w[1].as_str())
}

fn flag<'a>(args: &'a [String], name: &'a str) -> Option<&'a str> {
    flags(args, name).next()
}

/// The stamps of the device array `symbol` of the module compiled from `source`.
fn read_u64(rt: &Runtime, source: &str, symbol: &str) -> Res<Vec<u64>> {
    let bytes = rt.read_global(source, symbol).map_err(|e| e.to_string())?;
    Ok(bytes
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .collect())
}

/// The stamped launch's span on the global timer and the SM clock each CTA ran at (its
/// clock cycles over its global-timer nanoseconds, start to the last consumer's end).
fn print_clock(cta: &[u64], grid: usize) {
    let mut mhz = Vec::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    for s in cta.chunks_exact(4).take(grid) {
        let (clk, ns) = (s[2].saturating_sub(s[0]), s[3].saturating_sub(s[1]));
        if s[1] == 0 || ns == 0 {
            continue;
        }
        first = first.min(s[1]);
        last = last.max(s[3]);
        mhz.push(clk as f64 * 1e3 / ns as f64);
    }
    if mhz.is_empty() {
        return;
    }
    mhz.sort_by(f64::total_cmp);
    println!(
        "stamped launch: {:.1} us from the first CTA's start to the last one's end (global timer); \
         SM clock over a CTA's span: median {:.0} MHz, min {:.0}, max {:.0} ({} CTAs)",
        (last - first) as f64 / 1e3,
        mhz[mhz.len() / 2],
        mhz[0],
        mhz[mhz.len() - 1],
        mhz.len()
    );
}

/// Total length of the union of intervals.
fn union_len(mut v: Vec<(u64, u64)>) -> u64 {
    v.sort();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for (a, b) in v {
        cur = match cur {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// Length of `x` covered by the union of `v`.
fn covered(x: (u64, u64), v: &[(u64, u64)]) -> u64 {
    let clipped: Vec<(u64, u64)> = v
        .iter()
        .map(|&(a, b)| (a.max(x.0), b.min(x.1)))
        .filter(|(a, b)| a < b)
        .collect();
    union_len(clipped)
}

/// The planner's choices forced by the command line (`--schedule`, `--tile`, `--stream-k`,
/// `--stages`, `--group-m`).
fn plan_options(args: &[String]) -> Res<Sm90Options> {
    let mut opts = Sm90Options::default();
    // Without --schedule the planner chooses (ping-pong for a plain GEMM up to K = 4096).
    match flag(args, "--schedule") {
        None => {}
        Some("cooperative") => opts.schedule = Some(Schedule::Cooperative),
        Some("pingpong") => {
            opts.schedule = Some(Schedule::PingPong);
            opts.tile = Some((128, 128));
        }
        Some(s) => return Err(format!("--schedule `{s}`: cooperative or pingpong")),
    }
    if let Some(t) = flag(args, "--tile") {
        let v: Vec<i64> = t.split('x').filter_map(|x| x.parse().ok()).collect();
        if v.len() != 2 {
            return Err(format!("--tile `{t}`: BMxBN"));
        }
        opts.tile = Some((v[0], v[1]));
    }
    opts.stream_k = match flag(args, "--stream-k") {
        None => None,
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(s) => return Err(format!("--stream-k `{s}`: on or off")),
    };
    if let Some(s) = flag(args, "--stages") {
        opts.stages = Some(s.parse().map_err(|_| format!("--stages `{s}`"))?);
    }
    if let Some(g) = flag(args, "--group-m") {
        opts.group_m = Some(g.parse().map_err(|_| format!("--group-m `{g}`"))?);
    }
    Ok(opts)
}

/// The device buffers every launch reads and writes: operands of random values, D poisoned,
/// and the epilogue's vectors, full aux, bit mask and fp32 gradients sized for any epilogue.
struct Buffers {
    x: DeviceBuf,
    w: DeviceBuf,
    bias: DeviceBuf,
    c: DeviceBuf,
    d: DeviceBuf,
    aux: DeviceBuf,
    bits: DeviceBuf,
    grad: DeviceBuf,
}

impl Buffers {
    fn new(rt: &Runtime, (m, n, k): (i64, i64, i64), e: &Epilogue) -> Res<Buffers> {
        let mut rng = Rng::new(7);
        let up = |rng: &mut Rng, len: i64| {
            DeviceBuf::upload(rt, DType::Bf16, &rng.vec(len as usize, -1.0, 1.0))
        };
        let x = up(&mut rng, m * k).map_err(|e| e.to_string())?;
        let w = up(&mut rng, n * k).map_err(|e| e.to_string())?;
        let bias_len = if e.bias == BiasMode::PerRow { m } else { n };
        let bias = up(&mut rng, bias_len.max(m).max(n)).map_err(|e| e.to_string())?;
        let c = up(&mut rng, m * n).map_err(|e| e.to_string())?;
        let d =
            DeviceBuf::poisoned(rt, DType::Bf16, (m * n) as usize).map_err(|e| e.to_string())?;
        let aux = up(&mut rng, m * n).map_err(|e| e.to_string())?;
        // A bit mask's rows are whole words (as `Binding::for_tree` lays them out).
        let words = m as usize * (n as usize).div_ceil(32) + 1;
        let bits =
            DeviceBuf::upload(rt, DType::F32, &vec![0.0; words]).map_err(|e| e.to_string())?;
        let grad = DeviceBuf::upload(rt, DType::F32, &vec![0.0; m.max(n) as usize])
            .map_err(|e| e.to_string())?;
        Ok(Buffers {
            x,
            w,
            bias,
            c,
            d,
            aux,
            bits,
            grad,
        })
    }
}

/// One launch of the kernel compiled from `source`, and its grid: the tree kernel when `tree`
/// is given, else the kernel with the flag-driven epilogue `e`.
type Launch<'a> = (Box<dyn FnMut() -> Res<()> + 'a>, usize);

fn launcher<'a>(
    rt: &'a Runtime,
    plan: &Sm90Plan,
    source: &str,
    tree: Option<(&EpilogueTree, &Binding)>,
    e: &'a Epilogue,
    bufs: &Buffers,
    strides: GemmStrides,
) -> Res<Launch<'a>> {
    let Buffers {
        x,
        w,
        bias,
        c,
        d,
        aux,
        bits,
        grad,
    } = bufs;
    Ok(match tree {
        Some((t, b)) => {
            let tk = TreeSm90::from_source(rt, plan, t, b, source).map_err(|e| e.to_string())?;
            let uses_bits = b.aux.is_some_and(|a| a.bits) || b.aux_in_bits.is_some();
            let grid = tk.grid_ctas() as usize;
            let (x, w, c, d, aux, bits, bias, grad, b) = (
                x.mem(rt),
                w.mem(rt),
                c.mem(rt),
                d.mem(rt),
                aux.mem(rt),
                bits.mem(rt),
                bias.mem(rt),
                grad.mem(rt),
                b.clone(),
            );
            let f = Box::new(move || {
                let bufs = EpBuffers {
                    d: Some(d),
                    aux_in: Some(if b.aux_in_bits.is_some() { bits } else { aux }),
                    aux: Some(if uses_bits { bits } else { aux }),
                    bias_col: Some(bias),
                    bias_row: Some(bias),
                    // (The residual is C's buffer: an M x N tensor of random values.)
                    residual: Some(c),
                    bgrad_col: Some(grad),
                    bgrad_row: Some(grad),
                    ..EpBuffers::default()
                };
                tk.launch(rt.cx(), &x, &w, &strides, &b, &bufs)
                    .map_err(|e| e.to_string())
            });
            (f, grid)
        }
        None => {
            let kernel = Sm90Kernel::from_source(rt, plan, source).map_err(|e| e.to_string())?;
            let grid = kernel.grid_ctas() as usize;
            let (x, w, c, d, aux, bias) = (
                x.mem(rt),
                w.mem(rt),
                c.mem(rt),
                d.mem(rt),
                aux.mem(rt),
                bias.mem(rt),
            );
            let f = Box::new(move || {
                let args = GemmArgs {
                    a: x,
                    b: w,
                    c: (e.beta != 0.0).then_some(c),
                    d,
                    bias: (e.bias != BiasMode::None).then_some(bias),
                    aux: e.aux.then_some(aux),
                    strides,
                };
                kernel
                    .launch(rt.cx(), &args)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            (f, grid)
        }
    })
}

/// Launches `launch` to warm up, for `--sustain MS` milliseconds when asked, then `reps` times
/// timed on the host clock: the mean microseconds a launch.
fn timed_launches(
    args: &[String],
    launch: &mut dyn FnMut() -> Res<()>,
    sync: &dyn Fn() -> Res<()>,
    reps: u32,
) -> Res<f64> {
    for _ in 0..5 {
        launch()?;
    }
    sync()?;
    // `--sustain MS`: back-to-back launches for MS milliseconds first, so that the timed
    // and stamped launches run at the clock that sustained load settles to (the power cap).
    let sustain: f64 = match flag(args, "--sustain") {
        Some(v) => v
            .parse()
            .map_err(|_| format!("--sustain `{v}` is not a number of milliseconds"))?,
        None => 0.0,
    };
    let t_sustain = Instant::now();
    while t_sustain.elapsed().as_secs_f64() * 1e3 < sustain {
        for _ in 0..10 {
            launch()?;
        }
        sync()?;
    }
    let t0 = Instant::now();
    for _ in 0..reps {
        launch()?;
    }
    sync()?;
    Ok(t0.elapsed().as_secs_f64() * 1e6 / reps as f64)
}

/// The per-tile stamps `tessera_timeline` of a launch: slots of (CTA, warpgroup), warpgroup 0
/// the producer.
struct Stamps(Vec<u64>);

impl Stamps {
    fn at(&self, cta: usize, wg: usize, slot: usize, ev: usize) -> u64 {
        self.0[((cta * 3 + wg) * TILES + slot) * EVENTS + ev]
    }
}

/// Sums over every consumer tile of a launch, in clock cycles.
#[derive(Default)]
struct TileTotals {
    turn: u64,
    data: u64,
    main: u64,
    epi: u64,
    /// Epilogue time under another consumer's mainloop.
    hidden: u64,
    tiles: u64,
    /// Per CTA, the share of its span with some mainloop running.
    busy_frac: Vec<f64>,
}

/// The consumer tiles of each CTA (per consumer warpgroup, in order), and their totals.
fn consumer_tiles(
    stamps: &Stamps,
    grid: usize,
    consumers: usize,
) -> (Vec<Vec<Vec<Tile>>>, TileTotals) {
    let mut t = TileTotals::default();
    let mut per_cta: Vec<Vec<Vec<Tile>>> = Vec::new();
    for cta in 0..grid {
        let mut cws = Vec::new();
        for cw in 0..consumers {
            let mut v = Vec::new();
            for slot in 0..TILES - 1 {
                let ev: Vec<u64> = (0..EVENTS)
                    .map(|e| stamps.at(cta, cw + 1, slot, e))
                    .collect();
                if ev[0] == 0 || ev[3] == 0 {
                    break;
                }
                let next = stamps.at(cta, cw + 1, slot + 1, 0);
                v.push(Tile {
                    begin: ev[0],
                    turn: ev[1],
                    data: ev[2],
                    main_end: ev[3],
                    epi_end: next,
                });
            }
            cws.push(v);
        }
        let all: Vec<&Tile> = cws.iter().flatten().collect();
        let (Some(start), Some(end)) = (
            all.iter().map(|t| t.begin).min(),
            all.iter().map(|t| t.epi_end).max(),
        ) else {
            per_cta.push(cws);
            continue;
        };
        let mains: Vec<(u64, u64)> = all.iter().map(|t| (t.data, t.main_end)).collect();
        t.busy_frac
            .push(union_len(mains.clone()) as f64 / (end - start).max(1) as f64);
        for (cw, v) in cws.iter().enumerate() {
            let others: Vec<(u64, u64)> = cws
                .iter()
                .enumerate()
                .filter(|(o, _)| *o != cw)
                .flat_map(|(_, w)| w.iter().map(|t| (t.data, t.main_end)))
                .collect();
            for tile in v {
                t.turn += tile.turn - tile.begin;
                t.data += tile.data - tile.turn;
                t.main += tile.main_end - tile.data;
                t.epi += tile.epi_end.saturating_sub(tile.main_end);
                t.hidden += covered((tile.main_end, tile.epi_end), &others);
                t.tiles += 1;
            }
        }
        per_cta.push(cws);
    }
    (per_cta, t)
}

/// The TMA-store passes' means (warp 0 of each consumer; plans with the TMA-store epilogue),
/// from the pass stamps `ps` of the tiles `per_cta`; nothing when no pass was stamped.
fn print_passes(ps: &[u64], per_cta: &[Vec<Vec<Tile>>], passes_per_tile: usize) {
    let (mut first, mut math, mut wait, mut fill, mut issue, mut n_first, mut n_pass) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for (cta, cws) in per_cta.iter().enumerate() {
        for (cw, v) in cws.iter().enumerate() {
            for (local, t) in v.iter().enumerate() {
                let mut prev_end = t.main_end;
                for pass in 0..passes_per_tile {
                    let seq = local * passes_per_tile + pass;
                    if seq >= PASSES {
                        break;
                    }
                    let e = |ev: usize| ps[((cta * 2 + cw) * PASSES + seq) * 4 + ev];
                    if e(0) == 0 || e(3) == 0 {
                        break;
                    }
                    if pass == 0 {
                        first += e(0).saturating_sub(prev_end);
                        n_first += 1;
                    } else {
                        math += e(0).saturating_sub(prev_end);
                    }
                    wait += e(1) - e(0);
                    fill += e(2) - e(1);
                    issue += e(3) - e(2);
                    n_pass += 1;
                    prev_end = e(3);
                }
            }
        }
    }
    if n_pass > 0 {
        let per = |x: u64, n: u64| x as f64 / n.max(1) as f64;
        println!(
            "TMA-store passes (warp 0, mean cycles over {n_pass}): values of the first pass {:.0} \
             (after the mainloop), of the others {:.0}; buffer wait {:.0}, write + fence {:.0}, store issue {:.0}",
            per(first, n_first),
            per(math, n_pass - n_first),
            per(wait, n_pass),
            per(fill, n_pass),
            per(issue, n_pass)
        );
    }
}

/// CTA `show`'s events, one line a tile: its consumers' tiles (`cws`), then the producer's.
fn print_cta(show: usize, cws: &[Vec<Tile>], stamps: &Stamps) {
    let base = cws.iter().flatten().map(|t| t.begin).min().unwrap_or(0);
    let r = |x: u64| x.saturating_sub(base) as f64 / 1e3;
    println!("CTA {show} (kcycles from its first stamp):");
    for (cw, v) in cws.iter().enumerate() {
        for (i, t) in v.iter().enumerate() {
            println!(
                "  wg{} tile {i:2}: begin {:8.2}  turn {:8.2}  data {:8.2}  main end {:8.2}  epi end {:8.2}",
                cw + 1,
                r(t.begin),
                r(t.turn),
                r(t.data),
                r(t.main_end),
                r(t.epi_end)
            );
        }
    }
    for slot in 0..TILES - 1 {
        let (a, b, c) = (
            stamps.at(show, 0, slot, 0),
            stamps.at(show, 0, slot, 1),
            stamps.at(show, 0, slot, 2),
        );
        if a == 0 {
            break;
        }
        println!(
            "  producer tile {slot:2}: first wait {:8.2} -> {:8.2}, last load {:8.2}",
            r(a),
            r(b),
            r(c)
        );
    }
}

pub fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (m, n, k): (i64, i64, i64) = (
        arg(&args, 0, "M")?,
        arg(&args, 1, "N")?,
        arg(&args, 2, "K")?,
    );
    let opts = plan_options(&args)?;
    let show: usize =
        flag(&args, "--cta").map_or(Ok(0), |s| s.parse().map_err(|_| format!("--cta `{s}`")))?;
    // `--tree TEXT`: a tree epilogue (the generated fragment path), as `bench epilogues`
    // runs it (its staged inputs planned in); else `--epilogue LIST`, the flag-driven one.
    let tree = flag(&args, "--tree")
        .map(|t| parse_epilogue(t).map_err(|e| format!("--tree `{t}`: {e}")))
        .transpose()?;
    let e = match &tree {
        Some(_) => Epilogue::default(),
        None => Epilogue::parse(flag(&args, "--epilogue").unwrap_or("none"))
            .map_err(|e| e.to_string())?,
    };
    let shown = match &tree {
        Some(t) => format!("tree `{t}`"),
        None => format!("epilogue `{e}`"),
    };

    let rt = Runtime::new(0).map_err(|e| e.to_string())?;
    let mut p = GemmProblem::new(m, n, k);
    p.a_major = Major::Row;
    p.b_major = Major::Col;
    p.epilogue = e;
    let binding = tree
        .as_ref()
        .map(|t| Binding::for_tree(t, m, n, k, 1, DType::Bf16));
    let tree = tree.as_ref().zip(binding.as_ref());
    // A tree's plan as `bench epilogues` makes it: with its staged inputs and vectors
    // where they fit.
    let plan = match tree {
        Some((t, b)) => tree_sm90_plan(&p, t, b, opts),
        None => Sm90Plan::with_options(&p, opts),
    }
    .map_err(|e| e.to_string())?
    // As the launchers compile it (without stream-K where a launch splits nothing).
    .compiled_for(rt.sm_count() as i64);
    let sms = rt.sm_count() as usize;
    let len = sms * 3 * TILES * EVENTS;
    // `--define NAME[=VALUE]` (repeatable): more macros for the compiled source.
    let defines: String = flags(&args, "--define")
        .map(|d| format!("#define {}\n", d.replacen('=', " ", 1)))
        .collect();
    let body = match tree {
        Some((t, b)) => sm90_tree_source(&plan, t, Some(b)).map_err(|e| e.to_string())?,
        None => cuda_source(&plan),
    };
    // `--clock-only`: only the per-CTA clock stamps (two a CTA), not the per-tile timeline,
    // so the kernel is the production one but for them.
    let clock_only = args.iter().any(|a| a == "--clock-only");
    let tl_define = if clock_only {
        String::new()
    } else {
        format!("#define TESSERA_SM90_TIMELINE {len}\n")
    };
    let source = format!(
        "{defines}{tl_define}#define TESSERA_SM90_CLOCK {}\n{body}",
        sms * 4
    );

    let bufs = Buffers::new(&rt, (m, n, k), &e)?;
    let strides = GemmStrides::tight(&p);
    let (mut launch, grid) = launcher(&rt, &plan, &source, tree, &e, &bufs, strides)?;
    let sync = || rt.stream().synchronize().map_err(|e| format!("{e:?}"));
    let reps = 20;
    let us = timed_launches(&args, &mut launch, &sync, reps)?;
    let globals: &[&str] = if clock_only {
        &["tessera_timeline_cta"]
    } else {
        &[
            "tessera_timeline",
            "tessera_timeline_pass",
            "tessera_timeline_cta",
        ]
    };
    for g in globals {
        rt.zero_global(&source, g).map_err(|e| e.to_string())?;
    }
    launch()?;
    sync()?;
    println!(
        "{} on {}: {m}x{n}x{k}, {shown}, {:?} schedule, tile {}x{}, {} stages, grid {grid}; \
         {us:.1} us a launch (host clock, {reps} launches)",
        plan.kernel_name(),
        rt.device_name(),
        plan.schedule,
        plan.cta_tile.0,
        plan.cta_tile.1,
        plan.stages
    );
    print_clock(&read_u64(&rt, &source, "tessera_timeline_cta")?, grid);
    if clock_only {
        return Ok(());
    }
    let stamps = Stamps(read_u64(&rt, &source, "tessera_timeline")?);
    let (per_cta, t) = consumer_tiles(&stamps, grid, plan.consumers as usize);
    if t.tiles == 0 {
        return Err("no stamps came back (was the kernel compiled with the timeline?)".into());
    }
    let ps = read_u64(&rt, &source, "tessera_timeline_pass")?;
    // A consumer's passes per tile: its m64 halves times the tile's column blocks.
    let passes_per_tile = (plan.m_halves * plan.cta_tile.1 / EPI_COLS) as usize;
    print_passes(&ps, &per_cta, passes_per_tile);
    let kc = |x: u64| x as f64 / t.tiles as f64 / 1e3;
    let mut busy_frac = t.busy_frac;
    busy_frac.sort_by(f64::total_cmp);
    println!(
        "per tile (mean over {} consumer tiles, kcycles): turn wait {:.2}, first-stage wait {:.2}, \
         mainloop {:.2}, epilogue {:.2}; epilogue under another warpgroup's mainloop {:.1}%",
        t.tiles,
        kc(t.turn),
        kc(t.data),
        kc(t.main),
        kc(t.epi),
        100.0 * t.hidden as f64 / t.epi.max(1) as f64
    );
    println!(
        "a CTA's span with some mainloop running: median {:.1}%, min {:.1}%, max {:.1}%",
        100.0 * busy_frac[busy_frac.len() / 2],
        100.0 * busy_frac[0],
        100.0 * busy_frac[busy_frac.len() - 1]
    );
    if let Some(cws) = per_cta.get(show) {
        print_cta(show, cws, &stamps);
    }
    Ok(())
}
