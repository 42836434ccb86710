//! The float64 check of a convolution with its epilogue, on the GPU through the public API:
//! random channels-last tensors described by their logical sizes and strides (junk strides on
//! size-1 dimensions, as PyTorch gives them), NaN-poisoned outputs, one `Conv2d::launch`, and
//! every output compared with the float64 direct loop (`conv_ref`) and the CPU evaluator of
//! the epilogue, within a bound from `Σ |x|·|w|`.
//!
//! Shared by the GPU tests (`kernels/tests/conv_gpu.rs`) and `tessera run conv` (the kernels'
//! `bench` module includes this file). Host tensors stay in their 16-bit type, so a tensor of
//! more than 2^31 elements fits in host memory; large problems are checked on blocks of rows.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::{bf16, f16};
use tessera_kernels::epilogue::{
    evaluate_region, AuxFormat, Coord, EpilogueTree, EvalInputs, Leaf, Sink,
};
use tessera_kernels::{Context, Conv2d, ConvSpec, DType, KernelError, Operands, Tensor, TensorMut};
use tessera_layout::Layout;

use super::check::{round, Compared, Report, Rng};
use super::conv_ref::{conv_direct, ConvDims};

/// A tensor on the host in its element type (16-bit values stay 16-bit).
pub enum Host {
    Bf16(Vec<bf16>),
    F16(Vec<f16>),
    F32(Vec<f32>),
}

impl Host {
    /// `len` values uniform in `[-1, 1)` rounded to `t`.
    pub fn random(rng: &mut Rng, t: DType, len: usize) -> Host {
        match t {
            DType::Bf16 => Host::Bf16((0..len).map(|_| bf16::from_f64(rng.unit())).collect()),
            DType::F16 => Host::F16((0..len).map(|_| f16::from_f64(rng.unit())).collect()),
            _ => Host::F32((0..len).map(|_| rng.unit() as f32).collect()),
        }
    }

    pub fn get(&self, i: usize) -> f64 {
        match self {
            Host::Bf16(v) => v[i].to_f64(),
            Host::F16(v) => v[i].to_f64(),
            Host::F32(v) => v[i] as f64,
        }
    }

    pub fn elems(&self) -> usize {
        match self {
            Host::Bf16(v) => v.len(),
            Host::F16(v) => v.len(),
            Host::F32(v) => v.len(),
        }
    }

    pub fn to_f64(&self) -> Vec<f64> {
        (0..self.elems()).map(|i| self.get(i)).collect()
    }

    pub fn upload(&self, s: &Arc<CudaStream>) -> Dev {
        match self {
            Host::Bf16(v) => Dev::Bf16(s.clone_htod(v).expect("upload")),
            Host::F16(v) => Dev::F16(s.clone_htod(v).expect("upload")),
            Host::F32(v) => Dev::F32(s.clone_htod(v).expect("upload")),
        }
    }
}

/// A device tensor of one of the element types.
pub enum Dev {
    Bf16(CudaSlice<bf16>),
    F16(CudaSlice<f16>),
    F32(CudaSlice<f32>),
}

impl Dev {
    /// `len` elements of `t`, every byte 0xFF: NaN in every type, so an element the kernel does
    /// not write stays NaN.
    pub fn poisoned(s: &Arc<CudaStream>, t: DType, len: usize) -> Dev {
        let bytes = len * t.bytes() as usize;
        let d = match t {
            DType::Bf16 => Dev::Bf16(s.alloc_zeros(len).expect("alloc")),
            DType::F16 => Dev::F16(s.alloc_zeros(len).expect("alloc")),
            _ => Dev::F32(s.alloc_zeros(len).expect("alloc")),
        };
        // SAFETY: the buffer just allocated, `bytes` long, used on this stream only.
        unsafe { cudarc::driver::result::memset_d8_async(d.ptr(s), 0xFF, bytes, s.cu_stream()) }
            .expect("memset");
        d
    }

    pub fn ptr(&self, s: &Arc<CudaStream>) -> u64 {
        match self {
            Dev::Bf16(b) => b.device_ptr(s).0,
            Dev::F16(b) => b.device_ptr(s).0,
            Dev::F32(b) => b.device_ptr(s).0,
        }
    }

    pub fn tensor(&self) -> Tensor<'_> {
        match self {
            Dev::Bf16(b) => b.into(),
            Dev::F16(b) => b.into(),
            Dev::F32(b) => b.into(),
        }
    }

    pub fn tensor_mut(&mut self) -> TensorMut<'_> {
        match self {
            Dev::Bf16(b) => b.into(),
            Dev::F16(b) => b.into(),
            Dev::F32(b) => b.into(),
        }
    }

    /// Elements `range` as float64.
    pub fn download(&self, s: &Arc<CudaStream>, range: Range<usize>) -> Vec<f64> {
        match self {
            Dev::Bf16(b) => s
                .clone_dtoh(&b.slice(range))
                .expect("download")
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            Dev::F16(b) => s
                .clone_dtoh(&b.slice(range))
                .expect("download")
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            Dev::F32(b) => s
                .clone_dtoh(&b.slice(range))
                .expect("download")
                .iter()
                .map(|&x| x as f64)
                .collect(),
        }
    }
}

/// A convolution case: the spec, the data's seed and how the tensors are handed over.
#[derive(Clone, Debug)]
pub struct ConvCase {
    pub spec: ConvSpec,
    pub seed: u64,
    /// Size-1 dimensions get junk strides (accepted: never stepped along).
    pub junk_unit_strides: bool,
    /// Pass the workspace per launch (a `Conv2d` built without one).
    pub caller_workspace: bool,
    /// y written in place over the residual.
    pub y_over_residual: bool,
    /// Launches of the same `Conv2d` before the one checked (y poisoned again before it).
    pub repeat: usize,
}

impl ConvCase {
    pub fn new(spec: ConvSpec) -> ConvCase {
        ConvCase {
            spec,
            seed: 7,
            junk_unit_strides: true,
            caller_workspace: false,
            y_over_residual: false,
            repeat: 0,
        }
    }
}

/// The layout PyTorch reports for a channels-last tensor of logical sizes `dims`, with junk
/// strides on its size-1 dimensions when `junk`.
pub fn torch_channels_last(dims: [usize; 4], junk: bool) -> Layout {
    let [_, c, h, w] = dims;
    let mut st = [h * w * c, 1, w * c, c];
    if junk {
        for (i, s) in st.iter_mut().enumerate() {
            if dims[i] == 1 {
                *s = 7777 + i;
            }
        }
    }
    format!(
        "({},{},{},{}):({},{},{},{})",
        dims[0], dims[1], dims[2], dims[3], st[0], st[1], st[2], st[3]
    )
    .parse()
    .expect("layout")
}

/// Multiply-adds of the reference above which only blocks of rows are checked.
const FULL_REFERENCE_LIMIT: f64 = 4e9;

/// The output rows the reference covers: all, or the first, a middle and the last 64.
fn checked_rows(
    m: usize,
    macs_per_row: f64,
    tree: &EpilogueTree,
) -> Result<Vec<Range<usize>>, KernelError> {
    if m as f64 * macs_per_row <= FULL_REFERENCE_LIMIT {
        return Ok(std::iter::once(0..m).collect());
    }
    if tree.d.uses(Leaf::Coord(Coord::Row)) || tree.d.uses(Leaf::BiasRow) {
        return Err(KernelError::InvalidProblem {
            op: "run conv",
            msg: "a large convolution is checked on blocks of rows: its epilogue may not read `row` or `bias_row`".into(),
        });
    }
    let b = 64.min(m);
    let mid = (m - b) / 2;
    let mut v = vec![0..b, mid..mid + b, m - b..m];
    v.dedup();
    Ok(v)
}

/// The problem in the reference's terms.
fn dims_of(spec: &ConvSpec) -> Result<ConvDims, KernelError> {
    let [n, c, h, w] = spec.input_dims().map(|v| v as usize);
    let [k, _, r, s] = spec.filter_dims().map(|v| v as usize);
    let [_, _, p, q] = spec.output_dims()?.map(|v| v as usize);
    let geo = |v: (i64, i64)| (v.0 as usize, v.1 as usize);
    let (pt, pb, pl, pr) = spec.padding_tblr();
    let d = ConvDims {
        n,
        c,
        h,
        w,
        k,
        r,
        s,
        stride: geo(spec.stride_hw()),
        pad: (pt as usize, pb as usize, pl as usize, pr as usize),
        dil: geo(spec.dilation_hw()),
    };
    assert_eq!((d.p(), d.q()), (p, q), "the reference's output size");
    Ok(d)
}

/// A case's host data: x and the filter in their 16-bit type, and the epilogue's tensors it
/// reads (output-shaped ones `M x K`, row-major), rounded to the output type.
struct HostData {
    x: Host,
    w: Host,
    residual: Option<Vec<f64>>,
    c: Option<Vec<f64>>,
    aux_in: Option<Vec<f64>>,
    bias_col: Vec<f64>,
    /// Empty unless the epilogue reads `bias_row`.
    bias_row: Vec<f64>,
}

fn host_data(spec: &ConvSpec, d: &ConvDims, seed: u64) -> HostData {
    let (input, out) = (spec.input(), spec.out());
    let uses = |l: Leaf| spec.tree().d.uses(l);
    let (m, k) = (d.m(), d.k);
    let mut rng = Rng::new(seed);
    let x = Host::random(&mut rng, input, d.n * d.h * d.w * d.c);
    let w = Host::random(&mut rng, input, k * d.r * d.s * d.c);
    let values = |rng: &mut Rng, len: usize| -> Vec<f64> {
        (0..len).map(|_| round(rng.unit(), out)).collect()
    };
    let mn = |rng: &mut Rng, used: bool| used.then(|| values(rng, m * k));
    let residual = mn(&mut rng, uses(Leaf::Residual));
    let c = mn(&mut rng, uses(Leaf::C) && spec.scalars().1 != 0.0);
    let aux_in = mn(&mut rng, uses(Leaf::AuxIn));
    let bias_col = values(&mut rng, k);
    let bias_row = if uses(Leaf::BiasRow) {
        values(&mut rng, m)
    } else {
        Vec::new()
    };
    HostData {
        x,
        w,
        residual,
        c,
        aux_in,
        bias_col,
        bias_row,
    }
}

/// The type of a full aux output, if the epilogue writes one.
fn aux_type(spec: &ConvSpec) -> Option<DType> {
    spec.tree().d.sinks().iter().find_map(|s| match s {
        Sink::Aux(AuxFormat::Full(t)) => Some(t.unwrap_or(spec.out())),
        _ => None,
    })
}

/// Uploads the case's data, launches `conv` `case.repeat + 1` times into NaN-poisoned
/// outputs (poisoned again before the last), and returns y and the aux output.
fn launch_case(
    stream: &Arc<CudaStream>,
    conv: &Conv2d,
    case: &ConvCase,
    d: &ConvDims,
    data: &HostData,
) -> Result<(Dev, Option<Dev>), KernelError> {
    let out = case.spec.out();
    let uses = |l: Leaf| case.spec.tree().d.uses(l);
    let len = d.m() * d.k;
    let up = |v: &Vec<f64>| {
        let h = match out {
            DType::Bf16 => Host::Bf16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
            DType::F16 => Host::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            _ => Host::F32(v.iter().map(|&x| x as f32).collect()),
        };
        h.upload(stream)
    };
    let (x_d, w_d) = (data.x.upload(stream), data.w.upload(stream));
    let res_d = data.residual.as_ref().map(up);
    let c_d = data.c.as_ref().map(up);
    let auxin_d = data.aux_in.as_ref().map(up);
    let bc_d = up(&data.bias_col);
    let br_d = uses(Leaf::BiasRow).then(|| up(&data.bias_row));
    let mut y_d = match (&data.residual, case.y_over_residual) {
        (Some(r), true) => up(r),
        (None, true) => panic!("y over the residual needs a residual"),
        _ => Dev::poisoned(stream, out, len),
    };
    let mut aux_d = aux_type(&case.spec).map(|t| Dev::poisoned(stream, t, len));
    // A caller's workspace starts as junk (every byte 0xFF, NaN in 16-bit types): what the
    // convolution reads from it must be what it wrote there first.
    let mut ws: Option<CudaSlice<u8>> = case.caller_workspace.then(|| {
        let bytes = conv.workspace_bytes().max(1);
        let buf = stream.alloc_zeros(bytes).expect("alloc");
        // SAFETY: the buffer just allocated, `bytes` long, used on this stream only.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                buf.device_ptr(stream).0,
                0xFF,
                bytes,
                stream.cu_stream(),
            )
        }
        .expect("memset");
        buf
    });
    let junk = case.junk_unit_strides;
    let lx = torch_channels_last([d.n, d.c, d.h, d.w], junk);
    let lw = torch_channels_last([d.k, d.c, d.r, d.s], junk);
    let ly = torch_channels_last([d.n, d.k, d.p(), d.q()], junk);
    for launch in 0..=case.repeat {
        if launch == case.repeat && launch > 0 {
            stream.synchronize().expect("sync");
            y_d = Dev::poisoned(stream, out, len);
        }
        let mut ops = Operands::new();
        if uses(Leaf::BiasCol) {
            ops = ops.bias_col(bc_d.tensor());
        }
        if let Some(b) = &br_d {
            ops = ops.bias_row(b.tensor());
        }
        if let Some(t) = &res_d {
            ops = ops.residual(
                if case.y_over_residual {
                    // SAFETY: y's buffer, alive and on this stream for the whole launch.
                    unsafe { Tensor::from_raw(y_d.ptr(stream), Some(out), len) }
                } else {
                    t.tensor()
                }
                .with_layout_ref(&ly),
            );
        }
        if let Some(t) = &c_d {
            ops = ops.c(t.tensor().with_layout_ref(&ly));
        }
        if let Some(t) = &auxin_d {
            ops = ops.aux_in(t.tensor().with_layout_ref(&ly));
        }
        if let Some(t) = aux_d.as_mut() {
            ops = ops.aux(t.tensor_mut().with_layout_ref(&ly));
        }
        if let Some(b) = ws.as_mut() {
            ops = ops.workspace(b);
        }
        conv.launch(
            stream,
            x_d.tensor().with_layout_ref(&lx),
            w_d.tensor().with_layout_ref(&lw),
            y_d.tensor_mut().with_layout_ref(&ly),
            ops,
        )?;
    }
    stream.synchronize().expect("sync");
    Ok((y_d, aux_d))
}

/// The reference over the rows `rows` (the convolution and its magnitude by the direct loop,
/// the epilogue by the CPU evaluator), and each output of the GPU compared with it within a
/// bound: the output's rounding plus the fp32 accumulation's error scale times the element's
/// magnitude (`Σ |x||w|` through the epilogue's slope, plus the other terms' sizes).
fn compare_rows(
    stream: &Arc<CudaStream>,
    spec: &ConvSpec,
    d: &ConvDims,
    data: &HostData,
    (y, aux): (&Dev, Option<&Dev>),
    rows: &[Range<usize>],
) -> Vec<Compared> {
    let k = d.k;
    let (alpha, beta) = spec.scalars();
    let lip = 1.2 * (alpha.abs() as f64).max(1.0);
    let (mut want_d, mut want_aux, mut scale, mut got_d, mut got_aux) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rb in rows {
        let (acc, mag) = conv_direct(d, &|i| data.x.get(i), &|i| data.w.get(i), rb.clone());
        let bm = rb.len();
        let slice = |v: &Option<Vec<f64>>| v.as_ref().map(|v| v[rb.start * k..rb.end * k].to_vec());
        let (rs, cs, xs) = (slice(&data.residual), slice(&data.c), slice(&data.aux_in));
        let brs = if data.bias_row.is_empty() {
            vec![0.0; bm]
        } else {
            data.bias_row[rb.clone()].to_vec()
        };
        let mut inp = EvalInputs::new(bm, k, 1, &acc);
        inp.alpha = alpha as f64;
        inp.beta = beta as f64;
        inp.residual = rs.as_deref();
        inp.c = cs.as_deref();
        inp.aux_in = xs.as_deref();
        inp.bias_col = Some(&data.bias_col);
        inp.bias_row = Some(&brs);
        let o = evaluate_region(spec.tree(), &inp, 0..bm, 0..k).expect("evaluate");
        for i in 0..bm * k {
            let at = |v: &Option<Vec<f64>>| v.as_ref().map_or(0.0, |v| v[i].abs());
            let other = at(&rs)
                + (beta as f64).abs() * at(&cs)
                + at(&xs)
                + data.bias_col[i % k].abs()
                + brs[i / k].abs();
            scale.push(lip * mag[i] + other);
        }
        want_d.extend(o.d);
        want_aux.extend(o.aux.unwrap_or_default());
        got_d.extend(y.download(stream, rb.start * k..rb.end * k));
        if let Some(a) = aux {
            got_aux.extend(a.download(stream, rb.start * k..rb.end * k));
        }
    }
    let acc_eps = 2f64.powi(-16) + (d.c * d.r * d.s) as f64 * 2f64.powi(-22);
    let cmp = |name: &'static str, got: &[f64], want: &[f64], t: DType| -> Compared {
        let mut cmp = Compared {
            name,
            compared: 0,
            failed: 0,
            worst: 0.0,
        };
        for ((g, w), sc) in got.iter().zip(want).zip(&scale) {
            let b = t.unit_roundoff() * w.abs() + acc_eps * sc + 2f64.powi(-24);
            let ratio = (g - w).abs() / b;
            cmp.compared += 1;
            if ratio.is_nan() || ratio > 1.0 {
                cmp.failed += 1;
            }
            cmp.worst = if ratio.is_nan() {
                f64::INFINITY
            } else {
                cmp.worst.max(ratio)
            };
        }
        cmp
    };
    let mut outputs = vec![cmp("y", &got_d, &want_d, spec.out())];
    if let Some(t) = aux_type(spec) {
        outputs.push(cmp("aux", &got_aux, &want_aux, t));
    }
    outputs
}

/// Runs `case` with fresh random tensors and NaN-poisoned outputs, compares every output with
/// the float64 reference, and reports (or returns the launch's error).
pub fn run_conv_case(ctx: &Context, case: &ConvCase) -> Result<Report, KernelError> {
    let spec = &case.spec;
    let tree = spec.tree();
    let unsupported = !tree.sum_k.is_empty()
        || tree.d.uses(Leaf::AuxInBits)
        || tree
            .d
            .sinks()
            .iter()
            .any(|s| matches!(s, Sink::Bgrad(_) | Sink::Aux(AuxFormat::Bits)));
    if unsupported {
        return Err(KernelError::InvalidProblem {
            op: "run conv",
            msg: format!("the convolution check takes epilogues without bit masks, bias gradients or operand sums; `{tree}` has one"),
        });
    }
    assert!(
        !(case.y_over_residual && case.repeat > 0),
        "in place takes one launch"
    );
    let d = dims_of(spec)?;
    let m = d.m();
    let rows = checked_rows(m, (d.k * d.kk()) as f64, tree)?;
    let conv = if case.caller_workspace {
        Conv2d::without_workspace(ctx, spec)?
    } else {
        Conv2d::new(ctx, spec)?
    };
    let path = format!(
        "{} ({} path of the GEMM, {} epilogue)",
        conv.path(),
        conv.plan().path(),
        if conv.plan().generated_epilogue() {
            "generated tree"
        } else {
            "flag-driven"
        }
    );
    let stream = ctx.cudarc().default_stream();
    let data = host_data(spec, &d, case.seed);
    let (y, aux) = launch_case(&stream, &conv, case, &d, &data)?;
    let outputs = compare_rows(&stream, spec, &d, &data, (&y, aux.as_ref()), &rows);
    let rows_text = if rows.len() == 1 && rows[0] == (0..m) {
        "all".to_string()
    } else {
        rows.iter()
            .map(|r| format!("{}..{}", r.start, r.end))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(Report {
        spec: spec.to_string(),
        path,
        seed: case.seed,
        rows: rows_text,
        outputs,
    })
}
