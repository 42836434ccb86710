//! `tessera bench conv`: our convolution against cuDNN, interleaved in one process (the
//! order alternated each round, CUDA events, the median per call), on ResNet-50's layers (stride
//! 2 in the 3x3 convolutions)
//! and odd channel counts; plain and with the residual block's epilogue.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::bench::check::Rng;
use crate::bench::conv_check::{Dev, Host};
use crate::bench::cudnn::{self, CudnnConv};
use crate::conv::{Conv2d, ConvSpec};
use crate::epilogue::Leaf;
use crate::error::Result;
use crate::launch::gemm::Context;
use crate::launch::operand::Operands;
use crate::launch::runtime::driver_err;
use crate::plan::problem::DType;

/// A layer of the benchmark: `C → K` channels on an `HxW` square input, an `RxS` square
/// filter, stride and symmetric padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layer {
    /// The layer's name.
    pub id: &'static str,
    /// Input channels.
    pub c: i64,
    /// Output channels.
    pub k: i64,
    /// Input height and width.
    pub hw: i64,
    /// Filter height and width.
    pub rs: i64,
    /// Stride.
    pub stride: i64,
    /// Padding on every side.
    pub pad: i64,
}

const fn layer(id: &'static str, c: i64, k: i64, hw: i64, rs: i64, stride: i64, pad: i64) -> Layer {
    Layer {
        id,
        c,
        k,
        hw,
        rs,
        stride,
        pad,
    }
}

/// ResNet-50's distinct layers (NHWC; stride 2 in the 3x3 convolutions), the standard set.
pub const RESNET50: [Layer; 10] = [
    layer("stem", 3, 64, 224, 7, 2, 3),
    layer("c2a", 64, 64, 56, 3, 1, 1),
    layer("c2b", 64, 256, 56, 1, 1, 0),
    layer("c2c", 256, 64, 56, 1, 1, 0),
    layer("c3s", 128, 128, 56, 3, 2, 1),
    layer("c3a", 128, 128, 28, 3, 1, 1),
    layer("c3d", 256, 512, 56, 1, 2, 0),
    layer("c4a", 256, 256, 14, 3, 1, 1),
    layer("c4c", 1024, 256, 14, 1, 1, 0),
    layer("c5a", 512, 512, 7, 3, 1, 1),
];

/// Odd channel counts at 28x28, 3x3 (cuDNN pads C to a multiple of 8 there).
pub const ODD: [Layer; 3] = [
    layer("odd100", 100, 100, 28, 3, 1, 1),
    layer("odd124", 124, 124, 28, 3, 1, 1),
    layer("odd127", 127, 127, 28, 3, 1, 1),
];

impl Layer {
    /// The layer at batch `n`, bf16, with the epilogue `acc`.
    pub fn spec(&self, n: i64) -> ConvSpec {
        let p = self.pad;
        ConvSpec::new(
            [n, self.c, self.hw, self.hw],
            [self.k, self.c, self.rs, self.rs],
        )
        .stride(self.stride, self.stride)
        .padding(p, p, p, p)
    }
}

/// What the benchmark found for one layer at one batch.
#[derive(Clone, Debug)]
pub struct ConvBenchRow {
    /// The layer's name.
    pub id: &'static str,
    /// The batch.
    pub n: i64,
    /// A 1x1 layer (measured in GB/s against the copy roofline).
    pub one_by_one: bool,
    /// Our path (`gemm` or `im2col+gemm`) and the GEMM's (`sm90`, `sm80`).
    pub path: String,
    /// `2·N·P·Q·K·C·R·S`.
    pub flops: f64,
    /// Bytes a convolution must move at least: x (the pixels its taps read: for a strided
    /// 1x1 layer, one in stride²), w and y once.
    pub bytes: f64,
    /// Our milliseconds per call (median).
    pub ours_ms: f64,
    /// cuDNN's, if it ran.
    pub cudnn_ms: Option<f64>,
    /// cuDNN's algorithm.
    pub cudnn_algo: String,
    /// Ours with `relu(conv + bias + residual)`.
    pub fused_ms: Option<f64>,
    /// `cudnnConvolutionBiasActivationForward`, the same computation.
    pub cudnn_fused_ms: Option<f64>,
    /// Relative Frobenius difference between our y and cuDNN's (plain), on samples.
    pub rel_diff: Option<f64>,
    /// The same for the fused call.
    pub fused_rel_diff: Option<f64>,
    /// Why cuDNN did not run (plain or fused), if it did not.
    pub cudnn_note: String,
}

impl ConvBenchRow {
    /// TFLOP/s of `ms`.
    pub fn tflops(&self, ms: f64) -> f64 {
        self.flops / ms / 1e9
    }

    /// GB/s of `ms` (the bytes a convolution must move).
    pub fn gbps(&self, ms: f64) -> f64 {
        self.bytes / ms / 1e6
    }

    /// cuDNN's time over ours (above 1: ours is faster).
    pub fn speedup(&self) -> Option<f64> {
        self.cudnn_ms.map(|c| c / self.ours_ms)
    }
}

/// The copy roofline the 1x1 layers are measured against, GB/s (the H100's measured copy
/// rate, about 3.0 TB/s).
pub const COPY_ROOFLINE_GBPS: f64 = 3000.0;

/// The class of a standard layer as the convolution's targets group them: `"3x3"`, `"1x1,
/// stride 1"` (memory-bound, against [`COPY_ROOFLINE_GBPS`]), `"stem"` (C <= 8) or `"odd
/// channel counts"` ([`ODD`]); `None` for the strided 1x1 layer and layers of no list.
pub fn class_of(id: &str) -> Option<&'static str> {
    if ODD.iter().any(|l| l.id == id) {
        return Some("odd channel counts");
    }
    let l = RESNET50.iter().find(|l| l.id == id)?;
    match (l.c <= 8, l.rs, l.stride) {
        (true, _, _) => Some("stem"),
        (false, 1, 1) => Some("1x1, stride 1"),
        (false, 3, _) => Some("3x3"),
        _ => None,
    }
}

/// Per batch and class ([`class_of`]), the benchmark's rows against cuDNN in one line each:
/// the plain ratio's geomean and lowest row, the fused residual block's against cuDNN's fused
/// call, its cost over our plain convolution, and for the 1x1 layers GB/s against
/// [`COPY_ROOFLINE_GBPS`]. Rows cuDNN did not run are left out; batches in the rows' order.
pub fn summary(rows: &[ConvBenchRow]) -> Vec<String> {
    let geomean = |v: &[(f64, &str)]| crate::bench::sweep::geomean(v.iter().map(|p| p.0)).1;
    // The least and greatest of `v`.
    let span = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            })
    };
    // The lowest of `(value, id)` pairs (never empty where called).
    fn lowest<'a>(v: &[(f64, &'a str)]) -> (f64, &'a str) {
        v.iter()
            .copied()
            .fold((f64::INFINITY, ""), |a, b| if b.0 < a.0 { b } else { a })
    }
    let mut batches: Vec<i64> = Vec::new();
    for r in rows {
        if !batches.contains(&r.n) {
            batches.push(r.n);
        }
    }
    let mut out = Vec::new();
    for n in batches {
        for class in ["3x3", "1x1, stride 1", "stem", "odd channel counts"] {
            let of: Vec<&ConvBenchRow> = rows
                .iter()
                .filter(|r| r.n == n && class_of(r.id) == Some(class) && r.cudnn_ms.is_some())
                .collect();
            if of.is_empty() {
                continue;
            }
            let plain: Vec<(f64, &str)> = of
                .iter()
                .filter_map(|r| r.speedup().map(|s| (s, r.id)))
                .collect();
            let (low, low_id) = lowest(&plain);
            let mut line = format!(
                "N = {n}, {class} ({}): plain {:.3} of cuDNN (geomean), lowest {low:.3} ({low_id})",
                of.len(),
                geomean(&plain)
            );
            if class == "1x1, stride 1" {
                let gbps: Vec<f64> = of.iter().map(|r| r.gbps(r.ours_ms)).collect();
                let (lo, hi) = span(&gbps);
                line += &format!(
                    "; {lo:.0}-{hi:.0} GB/s ({:.0}-{:.0}% of {COPY_ROOFLINE_GBPS:.0})",
                    100.0 * lo / COPY_ROOFLINE_GBPS,
                    100.0 * hi / COPY_ROOFLINE_GBPS
                );
            }
            let fused: Vec<(f64, &str)> = of
                .iter()
                .filter_map(|r| r.fused_ms.zip(r.cudnn_fused_ms).map(|(o, c)| (c / o, r.id)))
                .collect();
            if !fused.is_empty() {
                let (low, low_id) = lowest(&fused);
                let over: Vec<f64> = of
                    .iter()
                    .filter_map(|r| r.fused_ms.map(|f| 100.0 * (f / r.ours_ms - 1.0)))
                    .collect();
                let (lo, hi) = span(&over);
                line += &format!(
                    "; fused {:.3} of cuDNN's fused call (geomean), lowest {low:.3} ({low_id}), {lo:+.0}% to {hi:+.0}% over our plain",
                    geomean(&fused)
                );
            }
            out.push(line);
        }
    }
    out
}

/// The benchmark's settings.
#[derive(Clone, Debug)]
pub struct ConvBenchConfig {
    /// Layers.
    pub layers: Vec<Layer>,
    /// Batches.
    pub batches: Vec<i64>,
    /// Timed rounds per contender.
    pub rounds: usize,
    /// Also time the fused residual block.
    pub fused: bool,
    /// Seed of the data.
    pub seed: u64,
    /// Forced choices of our convolutions' GEMM planner (its schedule, tile, stages), for
    /// experiments; default: the planner's.
    pub options: crate::plan::Options,
    /// The fused row's epilogue: `None` the residual block `relu(conv + bias_col +
    /// residual)` against cuDNN's fused call; another tree (over `bias_col` and `residual`)
    /// times ours alone, to see what each part of the block costs.
    pub fused_epilogue: Option<crate::epilogue::EpilogueTree>,
}

fn event_ms(
    ctx: &Context,
    stream: &Arc<CudaStream>,
    inner: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<f64> {
    let c = ctx.cudarc();
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let e0 = c.new_event(flags).map_err(driver_err("cuEventCreate"))?;
    let e1 = c.new_event(flags).map_err(driver_err("cuEventCreate"))?;
    e0.record(stream).map_err(driver_err("cuEventRecord"))?;
    for _ in 0..inner {
        f()?;
    }
    e1.record(stream).map_err(driver_err("cuEventRecord"))?;
    e1.synchronize().map_err(driver_err("cuEventSynchronize"))?;
    let ms = e0
        .elapsed_ms(&e1)
        .map_err(driver_err("cuEventElapsedTime"))? as f64;
    Ok(ms / inner as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Times the contenders interleaved: a warm-up, a batch size of about 20 ms each, then
/// `rounds` rounds whose order rotates; the median per contender (`None` where it failed).
fn interleaved(
    ctx: &Context,
    stream: &Arc<CudaStream>,
    rounds: usize,
    fs: &mut [Option<&mut dyn FnMut() -> Result<()>>],
) -> Result<Vec<Option<f64>>> {
    let mut inner = vec![1usize; fs.len()];
    for (i, f) in fs.iter_mut().enumerate() {
        if let Some(g) = f.as_mut() {
            // Ours (the first) must run; a comparator that fails is left out.
            match event_ms(ctx, stream, 2, *g) {
                Ok(ms) => inner[i] = ((20.0 / ms.max(1e-3)).round() as usize).clamp(1, 200),
                Err(e) if i == 0 => return Err(e),
                Err(_) => *f = None,
            }
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); fs.len()];
    for round in 0..rounds {
        for j in 0..fs.len() {
            let i = (j + round) % fs.len();
            if let Some(g) = fs[i].as_mut() {
                times[i].push(event_ms(ctx, stream, inner[i], *g)?);
            }
        }
    }
    Ok(times
        .into_iter()
        .map(|t| (!t.is_empty()).then(|| median(t)))
        .collect())
}

/// Relative Frobenius difference of `a` and `b` (device, `len` elements of `t`) over their
/// first and last million elements.
fn rel_diff(stream: &Arc<CudaStream>, a: &Dev, b: &Dev, len: usize) -> f64 {
    let s = 1 << 20;
    let ranges = if len <= 2 * s {
        std::iter::once(0..len).collect()
    } else {
        vec![0..s, len - s..len]
    };
    let (mut num, mut den) = (0.0, 0.0);
    for r in ranges {
        let (x, y) = (a.download(stream, r.clone()), b.download(stream, r));
        for (u, v) in x.iter().zip(&y) {
            num += (u - v) * (u - v);
            den += v * v;
        }
    }
    (num / den.max(1e-300)).sqrt()
}

fn ptr(stream: &Arc<CudaStream>, d: &Dev) -> u64 {
    d.ptr(stream)
}

/// cuDNN's shared workspace: its device address and bytes (0 bytes without cuDNN).
type Workspace = (u64, usize);

/// One layer's tensors on the device, random bf16: x, the filter, a residual z and a bias.
struct LayerData {
    x: Dev,
    w: Dev,
    z: Dev,
    bias: Dev,
    /// Elements of x.
    x_elems: usize,
    /// Elements of y.
    y_len: usize,
}

impl LayerData {
    fn new(stream: &Arc<CudaStream>, spec: &ConvSpec, rng: &mut Rng) -> Result<LayerData> {
        let [n, c, h, w] = spec.input_dims();
        let [k, _, r, s] = spec.filter_dims();
        let [_, _, p, q] = spec.output_dims()?;
        let y_len = (n * p * q * k) as usize;
        let mut up = |len: i64| Host::random(rng, DType::Bf16, len as usize).upload(stream);
        Ok(LayerData {
            x_elems: (n * h * w * c) as usize,
            x: up(n * h * w * c),
            w: up(k * c * r * s),
            z: up(y_len as i64),
            bias: up(k),
            y_len,
        })
    }
}

/// cuDNN planned for `spec` on the layer's buffers (its algorithm found by timing), or why
/// not.
fn plan_cudnn(
    stream: &Arc<CudaStream>,
    spec: &ConvSpec,
    t: &LayerData,
    y: &Dev,
    ws: Workspace,
) -> std::result::Result<CudnnConv, String> {
    cudnn::version().map_err(|e| e.to_string())?;
    // SAFETY: every address is a live buffer of this layer's extents on `stream`.
    unsafe {
        CudnnConv::new(
            stream,
            spec,
            (ptr(stream, &t.x), ptr(stream, &t.w), ptr(stream, y)),
            ws,
        )
    }
    .map_err(|e| e.to_string())
}

/// Our plain convolution against cuDNN's: `(ours, cuDNN's)` milliseconds and the relative
/// difference of their outputs.
fn time_plain(
    ctx: &Context,
    stream: &Arc<CudaStream>,
    rounds: usize,
    conv: &Conv2d,
    t: &LayerData,
    cd: Option<&CudnnConv>,
    ws: Workspace,
) -> Result<(f64, Option<f64>, Option<f64>)> {
    let mut y_ours = Dev::poisoned(stream, DType::Bf16, t.y_len);
    let y_cudnn = Dev::poisoned(stream, DType::Bf16, t.y_len);
    let mut ours = || {
        conv.launch(
            stream,
            t.x.tensor(),
            t.w.tensor(),
            y_ours.tensor_mut(),
            Operands::new(),
        )
    };
    let (xp, wp, yp) = (ptr(stream, &t.x), ptr(stream, &t.w), ptr(stream, &y_cudnn));
    let mut theirs = || -> Result<()> {
        // SAFETY: the layer's live buffers; the workspace holds what the algorithm needs.
        unsafe { cd.expect("cuDNN planned").forward(xp, wp, yp, ws.0) }
    };
    let ms = interleaved(
        ctx,
        stream,
        rounds,
        &mut [
            Some(&mut ours as &mut dyn FnMut() -> Result<()>),
            cd.map(|_| &mut theirs as &mut dyn FnMut() -> Result<()>),
        ],
    )?;
    let ours_ms = ms[0].ok_or_else(|| {
        crate::error::KernelError::invalid("bench conv", "our convolution did not run")
    })?;
    stream.synchronize().map_err(driver_err("sync"))?;
    let diff = ms[1].map(|_| rel_diff(stream, &y_ours, &y_cudnn, t.y_len));
    Ok((ours_ms, ms[1], diff))
}

/// Ours with `relu(conv + bias + z)` against `cudnnConvolutionBiasActivationForward`:
/// `(ours, cuDNN's, difference, why cuDNN did not run)`.
#[allow(clippy::type_complexity)]
fn time_fused(
    ctx: &Context,
    stream: &Arc<CudaStream>,
    cfg: &ConvBenchConfig,
    spec: &ConvSpec,
    t: &LayerData,
    cd: Option<&CudnnConv>,
    ws: Workspace,
) -> Result<(Option<f64>, Option<f64>, Option<f64>, Option<String>)> {
    let (rounds, tree) = (cfg.rounds, cfg.fused_epilogue.as_ref());
    let fspec = match tree {
        None => spec.clone().bias_residual_relu(),
        Some(t) => spec.clone().epilogue_tree(t.clone()),
    };
    let uses = |leaf| tree.map_or(true, |t| t.d.uses(leaf));
    let fconv = Conv2d::new(ctx, &fspec)?;
    let mut y_ours = Dev::poisoned(stream, DType::Bf16, t.y_len);
    let y_cudnn = Dev::poisoned(stream, DType::Bf16, t.y_len);
    let mut ours = || {
        fconv.launch(stream, t.x.tensor(), t.w.tensor(), y_ours.tensor_mut(), {
            let o = Operands::new();
            let o = if uses(Leaf::BiasCol) {
                o.bias_col(t.bias.tensor())
            } else {
                o
            };
            if uses(Leaf::Residual) {
                o.residual(t.z.tensor())
            } else {
                o
            }
        })
    };
    let (xp, wp, zp, bp, yp) = (
        ptr(stream, &t.x),
        ptr(stream, &t.w),
        ptr(stream, &t.z),
        ptr(stream, &t.bias),
        ptr(stream, &y_cudnn),
    );
    // cuDNN runs the ReLU form with few algorithms: the plain call's if it takes it, else
    // implicit precomputed GEMM.
    let precomp =
        cudarc::cudnn::sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    let cd = if tree.is_some() { None } else { cd };
    let algo = cd.and_then(|cd| {
        [cd.algo.0, precomp].into_iter().find(|&a| {
            // SAFETY: the layer's live buffers and cuDNN's workspace.
            unsafe { cd.fused(a, xp, wp, zp, bp, yp, ws) }.is_ok()
        })
    });
    let note = (cd.is_some() && algo.is_none())
        .then(|| "cudnnConvolutionBiasActivationForward refused every algorithm tried".into());
    let mut theirs = || -> Result<()> {
        let cd = cd.expect("cuDNN planned");
        // SAFETY: as above.
        unsafe { cd.fused(algo.expect("an algorithm"), xp, wp, zp, bp, yp, ws) }
    };
    let ms = interleaved(
        ctx,
        stream,
        rounds,
        &mut [
            Some(&mut ours as &mut dyn FnMut() -> Result<()>),
            algo.map(|_| &mut theirs as &mut dyn FnMut() -> Result<()>),
        ],
    )?;
    stream.synchronize().map_err(driver_err("sync"))?;
    let diff = ms[1].map(|_| rel_diff(stream, &y_ours, &y_cudnn, t.y_len));
    Ok((ms[0], ms[1], diff, note))
}

/// Runs the benchmark on `ctx` (its runtime's stream), calling `on_row` as each row is done.
pub fn run_conv_bench(
    ctx: &Context,
    cfg: &ConvBenchConfig,
    mut on_row: impl FnMut(&ConvBenchRow),
) -> Result<Vec<ConvBenchRow>> {
    let stream = ctx.runtime().stream().clone();
    // cuDNN's workspace: what its algorithms may take (1 GiB), shared by every layer.
    let cudnn_ws: Option<CudaSlice<u8>> = match cudnn::version() {
        Ok(_) => Some(
            stream
                .alloc_zeros::<u8>(1 << 30)
                .map_err(driver_err("cuMemAlloc (cuDNN workspace)"))?,
        ),
        Err(_) => None,
    };
    let ws: Workspace = cudnn_ws
        .as_ref()
        .map_or((0, 0), |w| (w.device_ptr(&stream).0, w.len()));
    let mut rows = Vec::new();
    let mut rng = Rng::new(cfg.seed);
    for &n in &cfg.batches {
        for layer in &cfg.layers {
            let spec = layer.spec(n).options(cfg.options);
            let t = LayerData::new(&stream, &spec, &mut rng)?;
            let [_, c, _, _] = spec.input_dims();
            let rs2 = layer.rs * layer.rs;
            let flops = 2.0 * t.y_len as f64 * (c * rs2) as f64;
            // x as much as the taps read: a 1x1 layer of stride s reads one pixel in s x s
            // (N·P·Q·C elements), not all of x.
            let x_read = if layer.rs == 1 {
                t.y_len / layer.k as usize * c as usize
            } else {
                t.x_elems
            };
            let bytes = (x_read + (layer.k * c * rs2) as usize + t.y_len) as f64 * 2.0;
            let conv = Conv2d::new(ctx, &spec)?;
            let y_probe = Dev::poisoned(&stream, DType::Bf16, t.y_len);
            let cd = plan_cudnn(&stream, &spec, &t, &y_probe, ws);
            let mut note = cd.as_ref().err().cloned().unwrap_or_default();
            let cd = cd.ok();
            let (ours_ms, cudnn_ms, rel) =
                time_plain(ctx, &stream, cfg.rounds, &conv, &t, cd.as_ref(), ws)?;
            let (fused_ms, cudnn_fused_ms, fused_rel) = if cfg.fused {
                let (o, c, d, why) = time_fused(ctx, &stream, cfg, &spec, &t, cd.as_ref(), ws)?;
                if let Some(why) = why {
                    note = why;
                }
                (o, c, d)
            } else {
                (None, None, None)
            };
            let row = ConvBenchRow {
                id: layer.id,
                n,
                one_by_one: layer.rs == 1,
                path: format!("{} ({})", conv.path(), conv.plan().path()),
                flops,
                bytes,
                ours_ms,
                cudnn_ms,
                cudnn_algo: cd.as_ref().map_or("-".into(), |c| c.algo_name()),
                fused_ms,
                cudnn_fused_ms,
                rel_diff: rel,
                fused_rel_diff: fused_rel,
                cudnn_note: note,
            };
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::{class_of, summary, ConvBenchRow};

    fn row(
        id: &'static str,
        n: i64,
        ours: f64,
        cudnn: f64,
        fused: Option<(f64, f64)>,
    ) -> ConvBenchRow {
        ConvBenchRow {
            id,
            n,
            one_by_one: class_of(id) == Some("1x1, stride 1"),
            path: String::new(),
            flops: 1e12,
            bytes: 2.7e8,
            ours_ms: ours,
            cudnn_ms: Some(cudnn),
            cudnn_algo: String::new(),
            fused_ms: fused.map(|f| f.0),
            cudnn_fused_ms: fused.map(|f| f.1),
            rel_diff: None,
            fused_rel_diff: None,
            cudnn_note: String::new(),
        }
    }

    #[test]
    fn classes_follow_the_layers_shapes() {
        assert_eq!(class_of("c3a"), Some("3x3"));
        assert_eq!(class_of("c3s"), Some("3x3"));
        assert_eq!(class_of("c2b"), Some("1x1, stride 1"));
        assert_eq!(class_of("c3d"), None);
        assert_eq!(class_of("stem"), Some("stem"));
        assert_eq!(class_of("odd127"), Some("odd channel counts"));
        assert_eq!(class_of("128:100:28:3:1:1"), None);
    }

    #[test]
    fn the_summary_gives_each_class_its_geomean_and_lowest_row() {
        let rows = [
            // 3x3: ratios 2 and 0.5 (geomean 1), fused 1.5 and 0.75, 20% and 50% over plain.
            row("c2a", 256, 0.1, 0.2, Some((0.12, 0.18))),
            row("c3a", 256, 0.2, 0.1, Some((0.3, 0.225))),
            // 1x1: 2.7e8 bytes in 0.1 ms = 2700 GB/s (90% of the roofline), ratio 1.1.
            row("c2b", 256, 0.1, 0.11, None),
            row("c3d", 256, 0.1, 0.3, None),
            row("odd127", 128, 0.1, 0.18, None),
        ];
        let s = summary(&rows);
        assert_eq!(s.len(), 3, "{s:#?}");
        assert_eq!(
            s[0],
            "N = 256, 3x3 (2): plain 1.000 of cuDNN (geomean), lowest 0.500 (c3a); fused 1.061 of cuDNN's fused call (geomean), lowest 0.750 (c3a), +20% to +50% over our plain"
        );
        assert_eq!(
            s[1],
            "N = 256, 1x1, stride 1 (1): plain 1.100 of cuDNN (geomean), lowest 1.100 (c2b); 2700-2700 GB/s (90-90% of 3000)"
        );
        assert_eq!(
            s[2],
            "N = 128, odd channel counts (1): plain 1.800 of cuDNN (geomean), lowest 1.800 (odd127)"
        );
    }
}
