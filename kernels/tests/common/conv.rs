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

/// Runs `case` with fresh random tensors and NaN-poisoned outputs, compares every output with
/// the float64 reference, and reports (or returns the launch's error).
pub fn run_conv_case(ctx: &Context, case: &ConvCase) -> Result<Report, KernelError> {
    let spec = &case.spec;
    let tree = spec.tree();
    let sinks = tree.d.sinks();
    let unsupported = !tree.sum_k.is_empty()
        || tree.d.uses(Leaf::AuxInBits)
        || sinks
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
    let m = n * p * q;
    let rows = checked_rows(m, (k * c * r * s) as f64, tree)?;
    let full = rows.len() == 1 && rows[0] == (0..m);

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
    let (input, out) = (spec.input(), spec.out());
    let (alpha, beta) = spec.scalars();
    let mut rng = Rng::new(case.seed);
    let x = Host::random(&mut rng, input, n * h * w * c);
    let wt = Host::random(&mut rng, input, k * r * s * c);
    let uses = |l: Leaf| tree.d.uses(l);
    // The output-shaped inputs, only when the epilogue reads them (M x K each).
    let mn_input = |rng: &mut Rng, used: bool| -> Option<Vec<f64>> {
        used.then(|| (0..m * k).map(|_| round(rng.unit(), out)).collect())
    };
    let res = mn_input(&mut rng, uses(Leaf::Residual));
    let cin = mn_input(&mut rng, uses(Leaf::C) && beta != 0.0);
    let aux_in = mn_input(&mut rng, uses(Leaf::AuxIn));
    let bias_col: Vec<f64> = (0..k).map(|_| round(rng.unit(), out)).collect();
    let bias_row: Vec<f64> = if uses(Leaf::BiasRow) {
        (0..m).map(|_| round(rng.unit(), out)).collect()
    } else {
        Vec::new()
    };
    let aux_full = sinks.iter().find_map(|s| match s {
        Sink::Aux(AuxFormat::Full(t)) => Some(t.unwrap_or(out)),
        _ => None,
    });

    let up = |v: &Vec<f64>| {
        let h = match out {
            DType::Bf16 => Host::Bf16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
            DType::F16 => Host::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            _ => Host::F32(v.iter().map(|&x| x as f32).collect()),
        };
        h.upload(&stream)
    };
    let x_d = x.upload(&stream);
    let w_d = wt.upload(&stream);
    let res_d = res.as_ref().map(up);
    let c_d = cin.as_ref().map(up);
    let auxin_d = aux_in.as_ref().map(up);
    let bc_d = up(&bias_col);
    let br_d = uses(Leaf::BiasRow).then(|| up(&bias_row));
    let mut y_d = if case.y_over_residual {
        up(res.as_ref().expect("y over the residual needs a residual"))
    } else {
        Dev::poisoned(&stream, out, m * k)
    };
    let mut aux_d = aux_full.map(|t| Dev::poisoned(&stream, t, m * k));
    let mut ws: Option<CudaSlice<u8>> = case.caller_workspace.then(|| {
        stream
            .alloc_zeros(conv.workspace_bytes().max(1))
            .expect("alloc")
    });

    let junk = case.junk_unit_strides;
    let lx = torch_channels_last([n, c, h, w], junk);
    let lw = torch_channels_last([k, c, r, s], junk);
    let ly = torch_channels_last([n, k, p, q], junk);
    for launch in 0..=case.repeat {
        if launch == case.repeat && launch > 0 {
            stream.synchronize().expect("sync");
            y_d = Dev::poisoned(&stream, out, m * k);
        }
        let mut ops = Operands::new();
        if uses(Leaf::BiasCol) {
            ops = ops.bias_col(bc_d.tensor());
        }
        if let Some(b) = &br_d {
            ops = ops.bias_row(b.tensor());
        }
        if let Some(t) = &res_d {
            if case.y_over_residual {
                // SAFETY: y's buffer, alive and on this stream for the whole launch.
                let alias = unsafe { Tensor::from_raw(y_d.ptr(&stream), Some(out), m * k) };
                ops = ops.residual(alias.with_layout_ref(&ly));
            } else {
                ops = ops.residual(t.tensor().with_layout_ref(&ly));
            }
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
            &stream,
            x_d.tensor().with_layout_ref(&lx),
            w_d.tensor().with_layout_ref(&lw),
            y_d.tensor_mut().with_layout_ref(&ly),
            ops,
        )?;
    }
    stream.synchronize().expect("sync");

    // The reference, block by block: the convolution and its magnitude by the direct loop,
    // the epilogue by the CPU evaluator over the block's rows.
    let (mut want_d, mut want_aux, mut bound_scale, mut got_d, mut got_aux) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let lip = 1.2 * (alpha.abs() as f64).max(1.0);
    for rb in &rows {
        let (acc, mag) = conv_direct(&d, &|i| x.get(i), &|i| wt.get(i), rb.clone());
        let bm = rb.len();
        let slice = |v: &Option<Vec<f64>>| v.as_ref().map(|v| v[rb.start * k..rb.end * k].to_vec());
        let (rs, cs, xs) = (slice(&res), slice(&cin), slice(&aux_in));
        let brs = if bias_row.is_empty() {
            vec![0.0; bm]
        } else {
            bias_row[rb.clone()].to_vec()
        };
        let mut inp = EvalInputs::new(bm, k, 1, &acc);
        inp.alpha = alpha as f64;
        inp.beta = beta as f64;
        inp.residual = rs.as_deref();
        inp.c = cs.as_deref();
        inp.aux_in = xs.as_deref();
        inp.bias_col = Some(&bias_col);
        inp.bias_row = Some(&brs);
        let o = evaluate_region(tree, &inp, 0..bm, 0..k).expect("evaluate");
        for i in 0..bm * k {
            let other = rs.as_ref().map_or(0.0, |v| v[i].abs())
                + cs.as_ref().map_or(0.0, |v| (beta as f64 * v[i]).abs())
                + xs.as_ref().map_or(0.0, |v| v[i].abs())
                + bias_col[i % k].abs()
                + brs[i / k].abs();
            bound_scale.push(lip * mag[i] + other);
        }
        want_d.extend(o.d);
        if let Some(a) = o.aux {
            want_aux.extend(a);
        }
        got_d.extend(y_d.download(&stream, rb.start * k..rb.end * k));
        if let Some(a) = &aux_d {
            got_aux.extend(a.download(&stream, rb.start * k..rb.end * k));
        }
    }
    // fp32 accumulation over C·R·S terms, then one rounding to the output type: the bound
    // of each element is its rounding plus the accumulation's error scale times its
    // magnitude (Σ |x||w| through the epilogue's slope, plus the other terms' sizes).
    let acc_eps = 2f64.powi(-16) + (c * r * s) as f64 * 2f64.powi(-22);
    let cmp = |name: &'static str, got: &[f64], want: &[f64], t: DType| -> Compared {
        let mut cmp = Compared {
            name,
            compared: 0,
            failed: 0,
            worst: 0.0,
        };
        for ((g, w), scale) in got.iter().zip(want).zip(&bound_scale) {
            let b = t.unit_roundoff() * w.abs() + acc_eps * scale + 2f64.powi(-24);
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
    let mut outputs = vec![cmp("y", &got_d, &want_d, out)];
    if let Some(t) = aux_full {
        outputs.push(cmp("aux", &got_aux, &want_aux, t));
    }
    let rows_text = if full {
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
