//! The float64 check of a GEMM with its epilogue, on the GPU through the public API: fresh
//! random operands (in any storage order, padded or not), NaN-poisoned outputs, one
//! `Gemm::launch`, every output compared with the float64 reference (the product in float64,
//! the epilogue by the CPU evaluator) within bounds derived from the types and K.
//!
//! The one harness of the GPU tests (`kernels/tests/common`) and of `tessera run gemm` (the
//! kernels' `bench` module includes this file), so both check the same way. It names the
//! crate by its public path only.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use half::{bf16, f16};
use tessera_kernels::epilogue::{
    bits_to_full, evaluate_region, AuxFormat, EpilogueTree, EvalInputs, EvalOutputs, Leaf, Operand,
    Sink, VecAxis,
};
use tessera_kernels::{
    Context, DType, Gemm, GemmSpec, KernelError, Major, Operands, Tensor, TensorMut,
};
use tessera_layout::Layout;

/// xorshift64*: the tests' own random numbers (no dependency on the code under test).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[-1, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// `x` rounded to the nearest value of `t` (ties to even), as the GPU stores it.
pub fn round(x: f64, t: DType) -> f64 {
    match t {
        DType::Bf16 => bf16::from_f64(x).to_f64(),
        DType::F16 => f16::from_f64(x).to_f64(),
        _ => x as f32 as f64,
    }
}

/// A device buffer of one of the element types.
pub enum Buf {
    Bf16(CudaSlice<bf16>),
    F16(CudaSlice<f16>),
    F32(CudaSlice<f32>),
    Words(CudaSlice<u32>),
}

impl Buf {
    /// `values` rounded to `t`.
    pub fn upload(s: &Arc<CudaStream>, t: DType, values: &[f64]) -> Buf {
        match t {
            DType::Bf16 => {
                let v: Vec<bf16> = values.iter().map(|&x| bf16::from_f64(x)).collect();
                Buf::Bf16(s.clone_htod(&v).expect("upload"))
            }
            DType::F16 => {
                let v: Vec<f16> = values.iter().map(|&x| f16::from_f64(x)).collect();
                Buf::F16(s.clone_htod(&v).expect("upload"))
            }
            _ => {
                let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
                Buf::F32(s.clone_htod(&v).expect("upload"))
            }
        }
    }

    /// `len` elements of `t`, every byte 0xFF: NaN in bf16, fp16 and fp32, so an element the
    /// kernel does not write stays NaN.
    pub fn poisoned(s: &Arc<CudaStream>, t: DType, len: usize) -> Buf {
        match t {
            DType::Bf16 => Buf::Bf16(
                s.clone_htod(&vec![bf16::from_bits(0xFFFF); len])
                    .expect("alloc"),
            ),
            DType::F16 => Buf::F16(
                s.clone_htod(&vec![f16::from_bits(0xFFFF); len])
                    .expect("alloc"),
            ),
            _ => Buf::F32(
                s.clone_htod(&vec![f32::from_bits(u32::MAX); len])
                    .expect("alloc"),
            ),
        }
    }

    pub fn words(s: &Arc<CudaStream>, w: &[u32]) -> Buf {
        Buf::Words(s.clone_htod(w).expect("upload"))
    }

    pub fn download(&self, s: &Arc<CudaStream>) -> Vec<f64> {
        match self {
            Buf::Bf16(b) => s
                .clone_dtoh(b)
                .expect("download")
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            Buf::F16(b) => s
                .clone_dtoh(b)
                .expect("download")
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            Buf::F32(b) => s
                .clone_dtoh(b)
                .expect("download")
                .iter()
                .map(|&x| x as f64)
                .collect(),
            Buf::Words(b) => s
                .clone_dtoh(b)
                .expect("download")
                .iter()
                .map(|&x| x as f64)
                .collect(),
        }
    }

    pub fn download_words(&self, s: &Arc<CudaStream>) -> Vec<u32> {
        match self {
            Buf::Words(b) => s.clone_dtoh(b).expect("download"),
            _ => panic!("not a bit mask"),
        }
    }

    /// The tensor starting `off` elements into the buffer.
    pub fn tensor_at(&self, s: &Arc<CudaStream>, off: usize) -> Tensor<'_> {
        if off == 0 {
            return self.tensor();
        }
        let (t, eb, len) = self.kind();
        // SAFETY: inside this buffer, which outlives the launch on `s`.
        unsafe { Tensor::from_raw(raw_ptr(s, self) + (off * eb) as u64, t, len - off) }
    }

    /// The output tensor starting `off` elements into the buffer.
    pub fn tensor_mut_at(&mut self, s: &Arc<CudaStream>, off: usize) -> TensorMut<'_> {
        if off == 0 {
            return self.tensor_mut();
        }
        let (t, eb, len) = self.kind();
        // SAFETY: inside this buffer, which outlives the launch on `s`.
        unsafe { TensorMut::from_raw(raw_ptr(s, self) + (off * eb) as u64, t, len - off) }
    }

    /// The element type (`None`: words), its bytes and the buffer's elements.
    fn kind(&self) -> (Option<DType>, usize, usize) {
        match self {
            Buf::Bf16(b) => (Some(DType::Bf16), 2, b.len()),
            Buf::F16(b) => (Some(DType::F16), 2, b.len()),
            Buf::F32(b) => (Some(DType::F32), 4, b.len()),
            Buf::Words(b) => (None, 4, b.len()),
        }
    }

    pub fn tensor(&self) -> Tensor<'_> {
        match self {
            Buf::Bf16(b) => b.into(),
            Buf::F16(b) => b.into(),
            Buf::F32(b) => b.into(),
            Buf::Words(b) => b.into(),
        }
    }

    pub fn tensor_mut(&mut self) -> TensorMut<'_> {
        match self {
            Buf::Bf16(b) => b.into(),
            Buf::F16(b) => b.into(),
            Buf::F32(b) => b.into(),
            Buf::Words(b) => b.into(),
        }
    }
}

/// A strided matrix: `rows x cols` (each of `batch`), element `(b, i, j)` at
/// `b * bs + i * si + j * sj`.
#[derive(Clone, Copy, Debug)]
pub struct Strided {
    /// Elements before the first (a view starting inside its buffer).
    pub off: usize,
    pub rows: usize,
    pub cols: usize,
    pub batch: usize,
    pub si: usize,
    pub sj: usize,
    pub bs: usize,
}

impl Strided {
    /// Tight in `major` order, rows padded by `pad` elements.
    pub fn new(rows: usize, cols: usize, batch: usize, major: Major, pad: usize) -> Strided {
        let (si, sj, outer) = match major {
            Major::Row => (cols + pad, 1, rows),
            Major::Col => (1, rows + pad, cols),
        };
        let ld = si.max(sj);
        Strided {
            off: 0,
            rows,
            cols,
            batch,
            si,
            sj,
            bs: outer * ld,
        }
    }

    pub fn at(&self, b: usize, i: usize, j: usize) -> usize {
        self.off + b * self.bs + i * self.si + j * self.sj
    }

    /// Elements of the buffer (the offset, then the matrix).
    pub fn storage_len(&self) -> usize {
        self.off
            + (self.batch - 1) * self.bs
            + (self.rows - 1) * self.si
            + (self.cols - 1) * self.sj
            + 1
    }

    pub fn layout(&self) -> Layout {
        let text = if self.batch > 1 {
            format!(
                "({},{},{}):({},{},{})",
                self.rows, self.cols, self.batch, self.si, self.sj, self.bs
            )
        } else {
            format!("({},{}):({},{})", self.rows, self.cols, self.si, self.sj)
        };
        text.parse().expect("layout")
    }

    /// Random values (rounded to `t`) at the matrix's positions, NaN in the padding.
    pub fn random(&self, rng: &mut Rng, t: DType) -> (Vec<f64>, Vec<f64>) {
        let mut storage = vec![f64::NAN; self.storage_len()];
        let mut tight = vec![0.0; self.batch * self.rows * self.cols];
        for b in 0..self.batch {
            for i in 0..self.rows {
                for j in 0..self.cols {
                    let v = round(rng.unit(), t);
                    storage[self.at(b, i, j)] = v;
                    tight[(b * self.rows + i) * self.cols + j] = v;
                }
            }
        }
        (storage, tight)
    }

    /// The matrix's values out of `storage`, tight.
    pub fn gather(&self, storage: &[f64]) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.batch * self.rows * self.cols);
        for b in 0..self.batch {
            for i in 0..self.rows {
                for j in 0..self.cols {
                    out.push(storage[self.at(b, i, j)]);
                }
            }
        }
        out
    }
}

/// One checked output: how many elements, how many outside the bound, the worst ratio.
#[derive(Debug)]
pub struct Compared {
    pub name: &'static str,
    pub compared: usize,
    pub failed: usize,
    pub worst: f64,
}

/// `got` against `want`, elementwise within `bound(want)`; NaN (a poisoned element never
/// written) fails.
pub fn compare(
    name: &'static str,
    got: &[f64],
    want: &[f64],
    bound: impl Fn(f64) -> f64,
) -> Compared {
    assert_eq!(got.len(), want.len(), "{name}: lengths");
    let mut c = Compared {
        name,
        compared: 0,
        failed: 0,
        worst: 0.0,
    };
    for (g, w) in got.iter().zip(want) {
        let r = (g - w).abs() / bound(*w);
        c.compared += 1;
        if r.is_nan() || r > 1.0 {
            c.failed += 1;
        }
        c.worst = if r.is_nan() {
            f64::INFINITY
        } else {
            c.worst.max(r)
        };
    }
    c
}

/// A GEMM case: the spec, the operands' padding, and the data's seed.
#[derive(Clone, Debug)]
pub struct Case {
    pub spec: GemmSpec,
    /// Elements of padding after every row (column, for a column-major operand) of A, B and
    /// the `M x N` tensors.
    pub pad: usize,
    pub seed: u64,
    /// D written in place over C (needs beta != 0).
    pub d_over_c: bool,
    /// Elements every `M x N` tensor (D, C, residual, aux_in, a full aux) starts after the
    /// start of its buffer: a base off the 16-byte grid, as a sliced view has.
    pub offset: usize,
    /// Launches of the same `Gemm` before the one checked (the outputs are poisoned again
    /// before the last): state left behind by a launch must not change the next.
    pub repeat: usize,
}

impl Case {
    pub fn new(spec: GemmSpec) -> Case {
        Case {
            spec,
            pad: 0,
            seed: 7,
            d_over_c: false,
            offset: 0,
            repeat: 0,
        }
    }
}

/// What [`run_case`] found.
#[derive(Debug)]
pub struct Report {
    /// The spec, as text.
    pub spec: String,
    /// The plan's path and epilogue code (`sm90, generated tree epilogue`, ...).
    pub path: String,
    /// The seed of the data (run again with it to replay).
    pub seed: u64,
    /// The rows compared (all, or blocks of them for a large product).
    pub rows: String,
    /// One comparison per output.
    pub outputs: Vec<Compared>,
}

impl Report {
    /// Every output within its bound.
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(|c| c.failed == 0)
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} on {}, seed {} (replay with --seed {}), rows {}:",
            self.spec, self.path, self.seed, self.seed, self.rows
        )?;
        for c in &self.outputs {
            writeln!(
                f,
                "  {:10} {:>9} compared, {:>6} outside the bound, worst {:.3} of the bound: {}",
                c.name,
                c.compared,
                c.failed,
                c.worst,
                if c.failed == 0 { "ok" } else { "FAILED" }
            )?;
        }
        write!(f, "{}", if self.passed() { "PASSED" } else { "FAILED" })
    }
}

/// Multiply-adds above which only blocks of rows are compared (the float64 product of the
/// whole output would take minutes on a CPU).
const FULL_REFERENCE_LIMIT: f64 = 8.6e9;

/// The rows the reference covers: all of them, or three blocks (first, middle, last) of a
/// large product. Column reductions sum over every row, so trees with one are refused when
/// large.
fn checked_rows(spec: &GemmSpec) -> Result<Vec<Range<usize>>, KernelError> {
    let (m, n, k, batch) = spec.extents();
    let work = m as f64 * n as f64 * k as f64 * batch as f64;
    if work <= FULL_REFERENCE_LIMIT {
        return Ok(std::iter::once(0..m as usize).collect());
    }
    let tree = spec.tree();
    let col_sums =
        tree.d.sinks().contains(&Sink::Bgrad(VecAxis::Col)) || tree.sum_k.contains(&Operand::B);
    if col_sums {
        return Err(KernelError::InvalidProblem {
            op: "run gemm",
            msg: format!("{work:.2e} multiply-adds with a column reduction is too big for the float64 reference"),
        });
    }
    let m = m as usize;
    let b = 64.min(m);
    let mid = (m - b) / 2;
    let mut v = vec![0..b, mid..mid + b, m - b..m];
    v.dedup();
    Ok(v)
}

/// Bit masks (`aux_in_bits`, a bit-mask aux) in D's storage order: rows padded to 128 bits,
/// packed into `u32` words.
struct BitMask {
    m: usize,
    n: usize,
    nb: usize,
    dm: Major,
    outer: usize,
    ldb: usize,
}

impl BitMask {
    fn new(m: usize, n: usize, nb: usize, dm: Major) -> BitMask {
        let (outer, inner) = match dm {
            Major::Row => (m, n),
            Major::Col => (n, m),
        };
        let ldb = inner.div_ceil(128) * 128;
        BitMask {
            m,
            n,
            nb,
            dm,
            outer,
            ldb,
        }
    }

    /// The bit of element `(i, j)` of batch `b`.
    fn at(&self, b: usize, i: usize, j: usize) -> usize {
        let (o, x) = match self.dm {
            Major::Row => (i, j),
            Major::Col => (j, i),
        };
        (b * self.outer + o) * self.ldb + x
    }

    fn layout(&self) -> Layout {
        let (m, n, nb) = (self.m, self.n, self.nb);
        let (si, sj) = match self.dm {
            Major::Row => (self.ldb, 1),
            Major::Col => (1, self.ldb),
        };
        let t = if nb > 1 {
            format!("({m},{n},{nb}):({si},{sj},{})", self.outer * self.ldb)
        } else {
            format!("({m},{n}):({si},{sj})")
        };
        t.parse().expect("layout")
    }

    fn words(&self) -> usize {
        (self.nb * self.outer * self.ldb).div_ceil(32)
    }

    /// `bits` (tight, `batch x M x N`) as the mask's words.
    fn pack(&self, bits: &[bool]) -> Vec<u32> {
        let mut w = vec![0u32; self.words()];
        for b in 0..self.nb {
            for i in 0..self.m {
                for j in 0..self.n {
                    if bits[(b * self.m + i) * self.n + j] {
                        let p = self.at(b, i, j);
                        w[p / 32] |= 1 << (p % 32);
                    }
                }
            }
        }
        w
    }
}

/// A case's extents and the storage of its operands.
struct Shapes {
    m: usize,
    n: usize,
    k: usize,
    nb: usize,
    a: Strided,
    b: Strided,
    /// D's, and every other `M x N` tensor's.
    mn: Strided,
    mask: BitMask,
}

impl Shapes {
    fn new(case: &Case) -> Shapes {
        let spec = &case.spec;
        let (m, n, k, batch) = spec.extents();
        let (m, n, k, nb) = (m as usize, n as usize, k as usize, batch as usize);
        let (am, bm, dm) = spec.majors();
        Shapes {
            m,
            n,
            k,
            nb,
            a: Strided::new(m, k, nb, am, case.pad),
            b: Strided::new(k, n, nb, bm, case.pad),
            mn: Strided {
                off: case.offset,
                ..Strided::new(m, n, nb, dm, case.pad)
            },
            mask: BitMask::new(m, n, nb, dm),
        }
    }
}

/// The aux output a tree stores: a bit mask, or full values of this type.
fn aux_kind(tree: &EpilogueTree, out: DType) -> (bool, Option<DType>) {
    let sinks = tree.d.sinks();
    let bits = sinks.contains(&Sink::Aux(AuxFormat::Bits));
    let full = sinks.iter().find_map(|s| match s {
        Sink::Aux(AuxFormat::Full(t)) => Some(t.unwrap_or(out)),
        _ => None,
    });
    (bits, full)
}

/// A case's random inputs, each matrix as stored (`_st`, NaN in the padding) and tight (`_t`,
/// for the reference).
struct HostInputs {
    a_st: Vec<f64>,
    a_t: Vec<f64>,
    b_st: Vec<f64>,
    b_t: Vec<f64>,
    c_st: Vec<f64>,
    c_t: Vec<f64>,
    r_st: Vec<f64>,
    r_t: Vec<f64>,
    x_st: Vec<f64>,
    x_t: Vec<f64>,
    bias_row: Vec<f64>,
    bias_col: Vec<f64>,
    bits: Vec<bool>,
}

impl HostInputs {
    fn random(rng: &mut Rng, s: &Shapes, input: DType, out: DType) -> HostInputs {
        let (a_st, a_t) = s.a.random(rng, input);
        let (b_st, b_t) = s.b.random(rng, input);
        let (c_st, c_t) = s.mn.random(rng, out);
        let (r_st, r_t) = s.mn.random(rng, out);
        let (x_st, x_t) = s.mn.random(rng, out);
        let bias_row: Vec<f64> = (0..s.m).map(|_| round(rng.unit(), out)).collect();
        let bias_col: Vec<f64> = (0..s.n).map(|_| round(rng.unit(), out)).collect();
        let bits: Vec<bool> = (0..s.nb * s.m * s.n)
            .map(|_| rng.next_u64() & 1 == 1)
            .collect();
        HostInputs {
            a_st,
            a_t,
            b_st,
            b_t,
            c_st,
            c_t,
            r_st,
            r_t,
            x_st,
            x_t,
            bias_row,
            bias_col,
            bits,
        }
    }
}

/// A case's device buffers: the inputs uploaded, D (C's values when written in place over
/// C) and the epilogue's outputs NaN-poisoned; a bit-mask aux holds junk instead, since the
/// kernel must clear bits as well as set them.
struct DeviceData {
    a: Buf,
    b: Buf,
    c: Buf,
    r: Buf,
    x: Buf,
    bias_row: Buf,
    bias_col: Buf,
    d: Buf,
    aux: Option<Buf>,
    bgrad_row: Option<Buf>,
    bgrad_col: Option<Buf>,
    sum_k_a: Option<Buf>,
    sum_k_b: Option<Buf>,
}

impl DeviceData {
    fn upload(
        stream: &Arc<CudaStream>,
        rng: &mut Rng,
        case: &Case,
        s: &Shapes,
        h: &HostInputs,
    ) -> DeviceData {
        let spec = &case.spec;
        let (input, out, tree) = (spec.input(), spec.out(), spec.tree());
        let (nb, m, n) = (s.nb, s.m, s.n);
        let (aux_bits, aux_full) = aux_kind(tree, out);
        let sinks = tree.d.sinks();
        let a = Buf::upload(stream, input, &h.a_st);
        let b = Buf::upload(stream, input, &h.b_st);
        let c = Buf::upload(stream, out, &h.c_st);
        let r = Buf::upload(stream, out, &h.r_st);
        let x = if tree.d.uses(Leaf::AuxInBits) {
            Buf::words(stream, &s.mask.pack(&h.bits))
        } else {
            Buf::upload(stream, out, &h.x_st)
        };
        let bias_row = Buf::upload(stream, out, &h.bias_row);
        let bias_col = Buf::upload(stream, out, &h.bias_col);
        let d = if case.d_over_c {
            Buf::upload(stream, out, &h.c_st)
        } else {
            Buf::poisoned(stream, out, s.mn.storage_len())
        };
        let aux = if aux_bits {
            let junk: Vec<u32> = (0..s.mask.words()).map(|_| rng.next_u64() as u32).collect();
            Some(Buf::words(stream, &junk))
        } else {
            aux_full.map(|t| Buf::poisoned(stream, t, s.mn.storage_len()))
        };
        let f32_out = |used: bool, len: usize| used.then(|| Buf::poisoned(stream, DType::F32, len));
        DeviceData {
            a,
            b,
            c,
            r,
            x,
            bias_row,
            bias_col,
            d,
            aux,
            bgrad_row: f32_out(sinks.contains(&Sink::Bgrad(VecAxis::Row)), nb * m),
            bgrad_col: f32_out(sinks.contains(&Sink::Bgrad(VecAxis::Col)), nb * n),
            sum_k_a: f32_out(tree.sum_k.contains(&Operand::A), nb * m),
            sum_k_b: f32_out(tree.sum_k.contains(&Operand::B), nb * n),
        }
    }
}

/// Launches `gemm` `case.repeat + 1` times over `dev`, with every tensor the epilogue uses
/// (D poisoned again before the last launch, the one checked).
fn launch_case(
    gemm: &Gemm,
    stream: &Arc<CudaStream>,
    case: &Case,
    s: &Shapes,
    dev: &mut DeviceData,
) -> Result<(), KernelError> {
    let spec = &case.spec;
    let tree = spec.tree();
    let uses = |l: Leaf| tree.d.uses(l);
    let (_, beta) = spec.scalars();
    let out = spec.out();
    let aux_bits = aux_kind(tree, out).0;
    let (la, lb, lmn) = (s.a.layout(), s.b.layout(), s.mn.layout());
    let off = case.offset;
    for launch in 0..=case.repeat {
        if launch == case.repeat && launch > 0 {
            // The checked launch writes into poison again.
            stream.synchronize().expect("sync");
            dev.d = Buf::poisoned(stream, out, s.mn.storage_len());
        }
        let mut ops = Operands::new();
        if uses(Leaf::C) && beta != 0.0 && !case.d_over_c {
            ops = ops.c(dev.c.tensor_at(stream, off).with_layout_ref(&lmn));
        }
        if uses(Leaf::Residual) {
            ops = ops.residual(dev.r.tensor_at(stream, off).with_layout_ref(&lmn));
        }
        if uses(Leaf::AuxInBits) {
            ops = ops.aux_in(dev.x.tensor().with_layout(s.mask.layout()));
        } else if uses(Leaf::AuxIn) {
            ops = ops.aux_in(dev.x.tensor_at(stream, off).with_layout_ref(&lmn));
        }
        if uses(Leaf::BiasRow) {
            ops = ops.bias_row(dev.bias_row.tensor());
        }
        if uses(Leaf::BiasCol) {
            ops = ops.bias_col(dev.bias_col.tensor());
        }
        if let Some(x) = dev.aux.as_mut() {
            ops = ops.aux(if aux_bits {
                x.tensor_mut().with_layout(s.mask.layout())
            } else {
                x.tensor_mut_at(stream, off).with_layout_ref(&lmn)
            });
        }
        if let Some(x) = dev.bgrad_row.as_mut() {
            ops = ops.bgrad_row(x.tensor_mut());
        }
        if let Some(x) = dev.bgrad_col.as_mut() {
            ops = ops.bgrad_col(x.tensor_mut());
        }
        if let Some(x) = dev.sum_k_a.as_mut() {
            ops = ops.sum_k_a(x.tensor_mut());
        }
        if let Some(x) = dev.sum_k_b.as_mut() {
            ops = ops.sum_k_b(x.tensor_mut());
        }
        if case.d_over_c {
            // D in place over C: C is read through D's buffer.
            // SAFETY: D's buffer, alive and on this stream for the whole launch.
            let c_alias = unsafe {
                Tensor::from_raw(
                    raw_ptr(stream, &dev.d) + (off * out.bytes() as usize) as u64,
                    Some(out),
                    s.mn.storage_len() - off,
                )
            };
            ops = ops.c(c_alias.with_layout_ref(&lmn));
        }
        gemm.launch(
            stream,
            dev.a.tensor().with_layout_ref(&la),
            dev.b.tensor().with_layout_ref(&lb),
            dev.d.tensor_mut_at(stream, off).with_layout_ref(&lmn),
            ops,
        )?;
    }
    Ok(())
}

/// Every output of the launch in `dev` against the float64 reference over the rows of
/// `row_blocks`.
fn compare_outputs(
    stream: &Arc<CudaStream>,
    spec: &GemmSpec,
    s: &Shapes,
    h: &HostInputs,
    dev: &DeviceData,
    row_blocks: &[Range<usize>],
) -> Vec<Compared> {
    let (m, n, k, nb) = (s.m, s.n, s.k, s.nb);
    let (alpha, beta) = spec.scalars();
    let out = spec.out();
    let tree: &EpilogueTree = spec.tree();
    let (aux_bits, aux_full) = aux_kind(tree, out);
    let acc = matmul_rows(&h.a_t, &h.b_t, (m, n, k, nb), row_blocks);
    let mut inp = EvalInputs::new(m, n, nb, &acc);
    inp.k = k;
    inp.alpha = alpha as f64;
    inp.beta = beta as f64;
    inp.c = Some(&h.c_t);
    inp.residual = Some(&h.r_t);
    inp.aux_in = Some(&h.x_t);
    inp.aux_in_bits = Some(&h.bits);
    inp.bias_row = Some(&h.bias_row);
    inp.bias_col = Some(&h.bias_col);
    inp.a = Some(&h.a_t);
    inp.b = Some(&h.b_t);
    let eval = |t: &EpilogueTree| -> EvalOutputs {
        let mut o = evaluate_region(t, &inp, row_blocks[0].clone(), 0..n).expect("evaluate");
        for r in &row_blocks[1..] {
            let x = evaluate_region(t, &inp, r.clone(), 0..n).expect("evaluate");
            merge_rows(&mut o, &x, r, (m, n, nb));
        }
        o
    };
    let want = eval(tree);
    let in_rows = |v: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        for b in 0..nb {
            for r in row_blocks {
                out.extend_from_slice(&v[(b * m + r.start) * n..(b * m + r.end) * n]);
            }
        }
        out
    };

    let eps = 1e-4 + 4.0 * k as f64 * 2f64.powi(-24);
    let unit = |t: DType| match t {
        DType::Bf16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-24),
    };
    let elem = |t: DType| move |w: f64| unit(t) * w.abs() + eps * (1.0 + w.abs());
    let vec_bound =
        |terms: usize| move |w: f64| eps * (1.0 + w.abs()) * (terms as f64 / 64.0).max(1.0);
    let d_got = s.mn.gather(&dev.d.download(stream));
    let mut outputs = vec![compare("D", &in_rows(&d_got), &in_rows(&want.d), elem(out))];
    if let (Some(buf), Some(wa)) = (&dev.aux, &want.aux) {
        if aux_bits {
            // The value behind each bit decides it only when not within rounding of zero.
            let pre = eval(&EpilogueTree::new(bits_to_full(&tree.d)))
                .aux
                .unwrap_or_default();
            let words = buf.download_words(stream);
            outputs.push(compare_bits(&words, wa, &pre, s, row_blocks, elem(out)));
        } else {
            let t = aux_full.unwrap_or(out);
            let got = s.mn.gather(&buf.download(stream));
            outputs.push(compare("aux", &in_rows(&got), &in_rows(wa), elem(t)));
        }
    }
    if let (Some(g), Some(w)) = (&dev.bgrad_row, &want.bgrad_row) {
        let (got, want): (Vec<f64>, Vec<f64>) = g
            .download(stream)
            .into_iter()
            .zip(w.iter().copied())
            .enumerate()
            .filter(|(i, _)| row_blocks.iter().any(|r| r.contains(&(i % m))))
            .map(|(_, x)| x)
            .unzip();
        outputs.push(compare("bgrad_row", &got, &want, vec_bound(n)));
    }
    if let (Some(g), Some(w)) = (&dev.bgrad_col, &want.bgrad_col) {
        debug_assert!(row_blocks.len() == 1 && row_blocks[0] == (0..m));
        outputs.push(compare("bgrad_col", &g.download(stream), w, vec_bound(m)));
    }
    if let (Some(g), Some(w)) = (&dev.sum_k_a, &want.sum_k_a) {
        outputs.push(compare("sum_k_a", &g.download(stream), w, vec_bound(k)));
    }
    if let (Some(g), Some(w)) = (&dev.sum_k_b, &want.sum_k_b) {
        outputs.push(compare("sum_k_b", &g.download(stream), w, vec_bound(k)));
    }
    outputs
}

/// A bit-mask aux (`words`) against the reference's bits `want`, at the elements whose value
/// before the mask (`pre`) is not within `bound` of zero.
fn compare_bits(
    words: &[u32],
    want: &[f64],
    pre: &[f64],
    s: &Shapes,
    row_blocks: &[Range<usize>],
    bound: impl Fn(f64) -> f64,
) -> Compared {
    let (m, n) = (s.m, s.n);
    let mut c = Compared {
        name: "aux bits",
        compared: 0,
        failed: 0,
        worst: 0.0,
    };
    for b in 0..s.nb {
        for r in row_blocks {
            for i in r.clone() {
                for j in 0..n {
                    let at = (b * m + i) * n + j;
                    let v = pre[at];
                    if v.abs() <= bound(v) {
                        continue;
                    }
                    let p = s.mask.at(b, i, j);
                    c.compared += 1;
                    if ((words[p / 32] >> (p % 32)) & 1 == 1) != (want[at] == 1.0) {
                        c.failed += 1;
                        c.worst = f64::INFINITY;
                    }
                }
            }
        }
    }
    c
}

/// Runs `case` with fresh random operands and NaN-poisoned outputs, compares every output
/// with the float64 reference, and reports (or returns the launch's error).
pub fn run_case(ctx: &Context, case: &Case) -> Result<Report, KernelError> {
    let spec = &case.spec;
    // In place, each launch reads what the last one wrote.
    assert!(
        !(case.d_over_c && case.repeat > 0),
        "d_over_c takes one launch"
    );
    let row_blocks = checked_rows(spec)?;
    let gemm = Gemm::new(ctx, spec)?;
    let plan = gemm.plan();
    let path = format!(
        "the {} path, {}",
        plan.path(),
        if plan.generated_epilogue() {
            "generated tree epilogue"
        } else {
            "flag-driven epilogue"
        }
    );
    let stream = ctx.cudarc().default_stream();
    let shapes = Shapes::new(case);
    let mut rng = Rng::new(case.seed);
    let host = HostInputs::random(&mut rng, &shapes, spec.input(), spec.out());
    let mut dev = DeviceData::upload(&stream, &mut rng, case, &shapes, &host);
    launch_case(&gemm, &stream, case, &shapes, &mut dev)?;
    stream.synchronize().expect("sync");

    let outputs = compare_outputs(&stream, spec, &shapes, &host, &dev, &row_blocks);
    let full_rows = row_blocks.len() == 1 && row_blocks[0] == (0..shapes.m);
    let rows = if full_rows {
        "all".to_string()
    } else {
        row_blocks
            .iter()
            .map(|r| format!("{}..{}", r.start, r.end))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(Report {
        spec: spec.to_string(),
        path,
        seed: case.seed,
        rows,
        outputs,
    })
}

/// `A B` in float64 over the rows of `blocks` (other rows 0), tight `batch x M x N`.
fn matmul_rows(
    a: &[f64],
    b: &[f64],
    (m, n, k, batch): (usize, usize, usize, usize),
    blocks: &[Range<usize>],
) -> Vec<f64> {
    let mut acc = vec![0.0; batch * m * n];
    for bi in 0..batch {
        for r in blocks {
            for i in r.clone() {
                let row = &mut acc[(bi * m + i) * n..(bi * m + i + 1) * n];
                for kk in 0..k {
                    let x = a[(bi * m + i) * k + kk];
                    let brow = &b[(bi * k + kk) * n..(bi * k + kk + 1) * n];
                    for (o, y) in row.iter_mut().zip(brow) {
                        *o += x * y;
                    }
                }
            }
        }
    }
    acc
}

/// Copies the rows `r` of every batch of `x`'s outputs into `o`.
fn merge_rows(
    o: &mut EvalOutputs,
    x: &EvalOutputs,
    r: &Range<usize>,
    (m, n, nb): (usize, usize, usize),
) {
    let copy = |dst: &mut Vec<f64>, src: &Vec<f64>| {
        for b in 0..nb {
            let s = (b * m + r.start) * n..(b * m + r.end) * n;
            dst[s.clone()].copy_from_slice(&src[s]);
        }
    };
    copy(&mut o.d, &x.d);
    if let (Some(d), Some(s)) = (o.aux.as_mut(), x.aux.as_ref()) {
        copy(d, s);
    }
    if let (Some(d), Some(s)) = (o.bgrad_row.as_mut(), x.bgrad_row.as_ref()) {
        for b in 0..nb {
            d[b * m + r.start..b * m + r.end].copy_from_slice(&s[b * m + r.start..b * m + r.end]);
        }
    }
}

fn raw_ptr(stream: &Arc<CudaStream>, b: &Buf) -> u64 {
    use cudarc::driver::DevicePtr;
    match b {
        Buf::Bf16(x) => x.device_ptr(stream).0,
        Buf::F16(x) => x.device_ptr(stream).0,
        Buf::F32(x) => x.device_ptr(stream).0,
        Buf::Words(x) => x.device_ptr(stream).0,
    }
}
