//! The float64 CPU evaluator of an epilogue tree: the reference the GPU epilogue is checked
//! against.
//!
//! Every tensor is tight and row-major, batches outermost: element `(b, i, j)` of an `M x N`
//! tensor is at `(b * M + i) * N + j`. A vector has length M (or N), shared by every batch, or
//! `batch * M` (`batch * N`), one per batch. Functions are evaluated in float64 with the
//! formulas in [`super::tree::UnaryOp`]'s documentation; `fp32(x)`, `bf16(x)`, `fp16(x)` round
//! to the nearest value of the type. Every node is evaluated for every element, so a sink
//! stores whatever the select around it chooses.

use std::ops::Range;

use crate::plan::problem::DType;

use super::error::{EpilogueError, Result};
use super::tree::{
    AuxFormat, BinaryOp, Coord, EpilogueTree, Expr, Leaf, Operand, Sink, UnaryOp, VecAxis,
};

/// The inputs of an evaluation. Leaves the tree does not read may be left `None`.
#[derive(Clone, Debug)]
pub struct EvalInputs<'a> {
    /// Rows of D.
    pub m: usize,
    /// Columns of D.
    pub n: usize,
    /// Batches.
    pub batch: usize,
    /// The reduction extent (for `sum_k_a` / `sum_k_b`).
    pub k: usize,
    /// alpha.
    pub alpha: f64,
    /// beta (when 0, `c` reads as 0 and need not be given).
    pub beta: f64,
    /// The accumulator `A B`, `batch x M x N`.
    pub acc: &'a [f64],
    /// C, `batch x M x N`.
    pub c: Option<&'a [f64]>,
    /// The residual, `batch x M x N`.
    pub residual: Option<&'a [f64]>,
    /// The aux input, `batch x M x N`.
    pub aux_in: Option<&'a [f64]>,
    /// The aux bit input, `batch x M x N` booleans.
    pub aux_in_bits: Option<&'a [bool]>,
    /// `bias_row`: M or `batch x M`.
    pub bias_row: Option<&'a [f64]>,
    /// `bias_col`: N or `batch x N`.
    pub bias_col: Option<&'a [f64]>,
    /// A, `batch x M x K`, for `sum_k_a`.
    pub a: Option<&'a [f64]>,
    /// B, `batch x K x N`, for `sum_k_b`.
    pub b: Option<&'a [f64]>,
}

impl<'a> EvalInputs<'a> {
    /// Inputs with only the accumulator (`batch x M x N`), alpha 1, beta 0, K 0.
    pub fn new(m: usize, n: usize, batch: usize, acc: &'a [f64]) -> EvalInputs<'a> {
        EvalInputs {
            m,
            n,
            batch,
            k: 0,
            alpha: 1.0,
            beta: 0.0,
            acc,
            c: None,
            residual: None,
            aux_in: None,
            aux_in_bits: None,
            bias_row: None,
            bias_col: None,
            a: None,
            b: None,
        }
    }
}

/// The outputs of an evaluation. Outputs the tree does not produce are `None`; positions
/// outside the evaluated region hold NaN.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOutputs {
    /// D, `batch x M x N`.
    pub d: Vec<f64>,
    /// The aux output, `batch x M x N` (for `aux_bits`: 1.0 where the bit is set, else 0.0).
    pub aux: Option<Vec<f64>>,
    /// `bgrad_row`, `batch x M` (sums over the evaluated columns).
    pub bgrad_row: Option<Vec<f64>>,
    /// `bgrad_col`, `batch x N` (sums over the evaluated rows).
    pub bgrad_col: Option<Vec<f64>>,
    /// `sum_k_a`, `batch x M`.
    pub sum_k_a: Option<Vec<f64>>,
    /// `sum_k_b`, `batch x N`.
    pub sum_k_b: Option<Vec<f64>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    F(f64),
    I(i64),
    B(bool),
}

const OP: &str = "epilogue::eval";

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

const GELU_K: f64 = 0.044715;

/// `f(x)` of a unary value function, in float64.
pub fn apply_unary(op: UnaryOp, x: f64) -> f64 {
    use std::f64::consts::{FRAC_2_SQRT_PI, PI, SQRT_2};
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => 0.5 * x * (1.0 + libm::erf(x / SQRT_2)),
        UnaryOp::GeluTanh => {
            let u = (2.0 / PI).sqrt() * (x + GELU_K * x * x * x);
            0.5 * x * (1.0 + u.tanh())
        }
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Clamp { lo, hi } => x.max(lo).min(hi),
        UnaryOp::DRelu => {
            if x > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        UnaryOp::DGelu => {
            // Phi(x) + x phi(x); FRAC_2_SQRT_PI / (2 sqrt 2) = 1 / sqrt(2 pi).
            let phi = (-0.5 * x * x).exp() * FRAC_2_SQRT_PI / (2.0 * SQRT_2);
            0.5 * (1.0 + libm::erf(x / SQRT_2)) + x * phi
        }
        UnaryOp::DGeluTanh => {
            let s = (2.0 / PI).sqrt();
            let t = (s * (x + GELU_K * x * x * x)).tanh();
            0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * GELU_K * x * x)
        }
        UnaryOp::DSigmoid => {
            let s = sigmoid(x);
            s * (1.0 - s)
        }
        UnaryOp::DTanh => {
            let t = x.tanh();
            1.0 - t * t
        }
        UnaryOp::DSilu => {
            let s = sigmoid(x);
            s + x * s * (1.0 - s)
        }
        UnaryOp::DClamp { lo, hi } => {
            if lo < x && x < hi {
                1.0
            } else {
                0.0
            }
        }
        UnaryOp::Round(t) => round(x, t),
    }
}

/// Rounds a float64 to the nearest value of `t` (ties to even), in one rounding.
///
/// `half`'s own `from_f64` is not correctly rounded for 16-bit types (about one input in
/// 20,000 near a midpoint comes out one unit too small in magnitude), so the 16-bit cases
/// settle the answer against the exact midpoints of the neighbouring values.
///
/// So in bf16 1.2539064904531738, just above the midpoint of the neighbours 1.25 and
/// 1.2578125, rounds up to 1.2578125; the exact midpoint 1.25390625 goes to the even
/// neighbour, 1.25; and 1e6 in fp16 is infinity.
pub fn round(x: f64, t: DType) -> f64 {
    match t {
        DType::Bf16 => round_16(
            x,
            |v| half::bf16::from_f64(v).to_bits(),
            |b| half::bf16::from_bits(b).to_f64(),
            0x7f80,
            2f64.powi(128),
        ),
        DType::F16 => round_16(
            x,
            |v| half::f16::from_f64(v).to_bits(),
            |b| half::f16::from_bits(b).to_f64(),
            0x7c00,
            65536.0,
        ),
        DType::F32 => x as f32 as f64,
    }
}

/// Correct rounding of `x` to a 16-bit float type given by its (approximate) conversion, its
/// exact value of a bit pattern, the bits of infinity, and the value the next pattern after
/// the largest finite one would have with an unbounded exponent (the overflow threshold is
/// the midpoint between the two). Positive bit patterns are ordered like their values.
fn round_16(
    x: f64,
    approx: impl Fn(f64) -> u16,
    value: impl Fn(u16) -> f64,
    inf: u16,
    beyond_max: f64,
) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let ax = x.abs();
    let val = |k: u16| if k == inf { beyond_max } else { value(k) };
    // Midpoint of patterns k and k + 1: exact in float64 (both have at most 11 significant
    // bits and neighbouring exponents).
    let mid = |k: u16| (val(k) + val(k + 1)) / 2.0;
    let mut k = approx(ax).min(inf);
    // The approximation is off by at most a unit; walk to the nearest pattern.
    while k > 0 && ax <= mid(k - 1) {
        if ax == mid(k - 1) {
            k -= k & 1; // tie: the even one of k - 1 and k
            break;
        }
        k -= 1;
    }
    while k < inf && ax >= mid(k) {
        if ax == mid(k) {
            k += k & 1;
            break;
        }
        k += 1;
    }
    let r = if k == inf { f64::INFINITY } else { value(k) };
    if x.is_sign_negative() {
        -r
    } else {
        r
    }
}

struct Ctx<'i, 'a> {
    inp: &'i EvalInputs<'a>,
    b: usize,
    i: usize,
    j: usize,
}

impl Ctx<'_, '_> {
    fn mat(&self, t: Option<&[f64]>, name: &'static str) -> Result<f64> {
        let t =
            t.ok_or_else(|| EpilogueError::input(OP, format!("`{name}` is read but not given")))?;
        Ok(t[(self.b * self.inp.m + self.i) * self.inp.n + self.j])
    }

    fn vec(&self, t: Option<&[f64]>, name: &'static str, len: usize, at: usize) -> Result<f64> {
        let t =
            t.ok_or_else(|| EpilogueError::input(OP, format!("`{name}` is read but not given")))?;
        // Length checked in `validate`: `len` (shared) or `batch * len`.
        Ok(if t.len() == len {
            t[at]
        } else {
            t[self.b * len + at]
        })
    }
}

struct Sinks {
    aux: Option<Vec<f64>>,
    bgrad_row: Option<Vec<f64>>,
    bgrad_col: Option<Vec<f64>>,
}

fn int_op(op: BinaryOp, a: i64, b: i64) -> Result<i64> {
    let r = match op {
        BinaryOp::Add => a.checked_add(b),
        BinaryOp::Sub => a.checked_sub(b),
        BinaryOp::Mul => a.checked_mul(b),
        BinaryOp::Max => Some(a.max(b)),
        BinaryOp::Min => Some(a.min(b)),
    };
    r.ok_or_else(|| EpilogueError::input(OP, format!("integer overflow in {a} {op:?} {b}")))
}

fn as_f(v: Val) -> f64 {
    match v {
        Val::F(x) => x,
        Val::I(i) => i as f64,
        Val::B(b) => f64::from(u8::from(b)),
    }
}

fn eval_node(e: &Expr, cx: &Ctx<'_, '_>, sinks: &mut Sinks) -> Result<Val> {
    let inp = cx.inp;
    Ok(match e {
        Expr::Leaf(l) => match l {
            Leaf::Acc => Val::F(cx.mat(Some(inp.acc), "acc")?),
            Leaf::C => {
                if inp.beta == 0.0 {
                    Val::F(0.0)
                } else {
                    Val::F(cx.mat(inp.c, "c")?)
                }
            }
            Leaf::Alpha => Val::F(inp.alpha),
            Leaf::Beta => Val::F(inp.beta),
            Leaf::BiasRow => Val::F(cx.vec(inp.bias_row, "bias_row", inp.m, cx.i)?),
            Leaf::BiasCol => Val::F(cx.vec(inp.bias_col, "bias_col", inp.n, cx.j)?),
            Leaf::Residual => Val::F(cx.mat(inp.residual, "residual")?),
            Leaf::AuxIn => Val::F(cx.mat(inp.aux_in, "aux_in")?),
            Leaf::AuxInBits => {
                let t = inp.aux_in_bits.ok_or_else(|| {
                    EpilogueError::input(OP, "`aux_in_bits` is read but not given")
                })?;
                Val::F(f64::from(u8::from(t[(cx.b * inp.m + cx.i) * inp.n + cx.j])))
            }
            Leaf::Coord(Coord::Row) => Val::I(cx.i as i64),
            Leaf::Coord(Coord::Col) => Val::I(cx.j as i64),
            Leaf::Coord(Coord::Batch) => Val::I(cx.b as i64),
            Leaf::Int(v) => Val::I(*v),
            Leaf::Const(v) => Val::F(*v),
        },
        Expr::Unary(op, x) => match (op, eval_node(x, cx, sinks)?) {
            (UnaryOp::Neg, Val::I(i)) => Val::I(
                i.checked_neg()
                    .ok_or_else(|| EpilogueError::input(OP, "integer overflow in negation"))?,
            ),
            (op, v) => Val::F(apply_unary(*op, as_f(v))),
        },
        Expr::Binary(op, a, b) => match (eval_node(a, cx, sinks)?, eval_node(b, cx, sinks)?) {
            (Val::I(x), Val::I(y)) => Val::I(int_op(*op, x, y)?),
            (x, y) => {
                let (x, y) = (as_f(x), as_f(y));
                Val::F(match op {
                    BinaryOp::Add => x + y,
                    BinaryOp::Sub => x - y,
                    BinaryOp::Mul => x * y,
                    BinaryOp::Max => x.max(y),
                    BinaryOp::Min => x.min(y),
                })
            }
        },
        Expr::Cmp(op, a, b) => match (eval_node(a, cx, sinks)?, eval_node(b, cx, sinks)?) {
            (Val::I(x), Val::I(y)) => Val::B(op.apply(x, y)),
            _ => {
                return Err(EpilogueError::input(
                    OP,
                    format!("`{e}` compares non-integers"),
                ))
            }
        },
        Expr::Select(p, a, b) => {
            let p = eval_node(p, cx, sinks)?;
            let (a, b) = (eval_node(a, cx, sinks)?, eval_node(b, cx, sinks)?);
            match p {
                Val::B(true) => a,
                Val::B(false) => b,
                _ => {
                    return Err(EpilogueError::input(
                        OP,
                        format!("`{e}`: condition is not a predicate"),
                    ))
                }
            }
        }
        Expr::Sink(s, x) => {
            let v = as_f(eval_node(x, cx, sinks)?);
            let (m, n) = (inp.m, inp.n);
            match s {
                Sink::Aux(f) => {
                    let aux = sinks
                        .aux
                        .get_or_insert_with(|| vec![f64::NAN; inp.batch * m * n]);
                    aux[(cx.b * m + cx.i) * n + cx.j] = match f {
                        AuxFormat::Bits => f64::from(u8::from(v > 0.0)),
                        AuxFormat::Full(_) => v,
                    };
                }
                Sink::Bgrad(VecAxis::Row) => {
                    sinks
                        .bgrad_row
                        .get_or_insert_with(|| vec![0.0; inp.batch * m])[cx.b * m + cx.i] += v
                }
                Sink::Bgrad(VecAxis::Col) => {
                    sinks
                        .bgrad_col
                        .get_or_insert_with(|| vec![0.0; inp.batch * n])[cx.b * n + cx.j] += v
                }
            }
            Val::F(v)
        }
    })
}

fn validate(tree: &EpilogueTree, inp: &EvalInputs<'_>) -> Result<()> {
    tree.check_structure()?;
    let (m, n, nb) = (inp.m, inp.n, inp.batch);
    let mn = m
        .checked_mul(n)
        .and_then(|x| x.checked_mul(nb))
        .ok_or_else(|| EpilogueError::input(OP, "batch * M * N overflows"))?;
    let mat = |t: Option<usize>, name: &str| -> Result<()> {
        match t {
            Some(len) if len != mn => Err(EpilogueError::input(
                OP,
                format!("`{name}` has {len} elements, batch x M x N = {nb} x {m} x {n} needs {mn}"),
            )),
            _ => Ok(()),
        }
    };
    mat(Some(inp.acc.len()), "acc")?;
    mat(inp.c.map(<[f64]>::len), "c")?;
    mat(inp.residual.map(<[f64]>::len), "residual")?;
    mat(inp.aux_in.map(<[f64]>::len), "aux_in")?;
    mat(inp.aux_in_bits.map(<[bool]>::len), "aux_in_bits")?;
    for (t, name, len) in [(inp.bias_row, "bias_row", m), (inp.bias_col, "bias_col", n)] {
        if let Some(t) = t {
            if t.len() != len && t.len() != len * nb {
                return Err(EpilogueError::input(
                    OP,
                    format!(
                        "`{name}` has {} elements; it needs {len} or batch x {len} = {}",
                        t.len(),
                        len * nb
                    ),
                ));
            }
        }
    }
    let k_len = |x: usize| {
        nb.checked_mul(x)
            .and_then(|v| v.checked_mul(inp.k))
            .ok_or_else(|| EpilogueError::input(OP, "batch * K * (M or N) overflows"))
    };
    for (o, t, len) in [
        (Operand::A, inp.a, k_len(m)?),
        (Operand::B, inp.b, k_len(n)?),
    ] {
        if tree.sum_k.contains(&o) {
            match t {
                Some(t) if t.len() == len => {}
                Some(t) => {
                    return Err(EpilogueError::input(
                        OP,
                        format!(
                            "operand {o:?} has {} elements, {len} expected (K = {})",
                            t.len(),
                            inp.k
                        ),
                    ))
                }
                None => return Err(EpilogueError::input(OP, format!("{o} needs operand {o:?}"))),
            }
        }
    }
    Ok(())
}

/// Evaluates `tree` over the whole output.
///
/// ```
/// use tessera_kernels::epilogue::{evaluate, parse_epilogue, EvalInputs};
/// let t = parse_epilogue("relu(acc + bias_col)").unwrap();
/// let acc = [1.0, -2.0, 3.0, -4.0]; // 2 x 2
/// let mut inp = EvalInputs::new(2, 2, 1, &acc);
/// inp.bias_col = Some(&[0.5, 1.0]);
/// assert_eq!(evaluate(&t, &inp).unwrap().d, vec![1.5, 0.0, 3.5, 0.0]);
/// ```
pub fn evaluate(tree: &EpilogueTree, inp: &EvalInputs<'_>) -> Result<EvalOutputs> {
    evaluate_region(tree, inp, 0..inp.m, 0..inp.n)
}

/// Evaluates `tree` over the rows `rows` and columns `cols` of every batch (clipped to the
/// output); other positions of D and aux hold NaN, reductions sum over the region only.
/// Coordinates are those of the full output. Operand sums are over the whole operands.
pub fn evaluate_region(
    tree: &EpilogueTree,
    inp: &EvalInputs<'_>,
    rows: Range<usize>,
    cols: Range<usize>,
) -> Result<EvalOutputs> {
    validate(tree, inp)?;
    let (m, n, nb, k) = (inp.m, inp.n, inp.batch, inp.k);
    let mut d = vec![f64::NAN; nb * m * n];
    let mut sinks = Sinks {
        aux: None,
        bgrad_row: None,
        bgrad_col: None,
    };
    for s in tree.d.sinks() {
        match s {
            Sink::Aux(_) => sinks.aux = Some(vec![f64::NAN; nb * m * n]),
            Sink::Bgrad(VecAxis::Row) => sinks.bgrad_row = Some(vec![0.0; nb * m]),
            Sink::Bgrad(VecAxis::Col) => sinks.bgrad_col = Some(vec![0.0; nb * n]),
        }
    }
    let rows = rows.start.min(m)..rows.end.min(m);
    let cols = cols.start.min(n)..cols.end.min(n);
    for b in 0..nb {
        for i in rows.clone() {
            for j in cols.clone() {
                let cx = Ctx { inp, b, i, j };
                d[(b * m + i) * n + j] = as_f(eval_node(&tree.d, &cx, &mut sinks)?);
            }
        }
    }
    let mut out = EvalOutputs {
        d,
        aux: sinks.aux,
        bgrad_row: sinks.bgrad_row,
        bgrad_col: sinks.bgrad_col,
        sum_k_a: None,
        sum_k_b: None,
    };
    if tree.sum_k.contains(&Operand::A) {
        let a = inp.a.unwrap_or(&[]);
        out.sum_k_a = Some(
            (0..nb * m)
                .map(|bi| (0..k).map(|kk| a[bi * k + kk]).sum())
                .collect(),
        );
    }
    if tree.sum_k.contains(&Operand::B) {
        let bm = inp.b.unwrap_or(&[]);
        out.sum_k_b = Some(
            (0..nb * n)
                .map(|bj| {
                    let (b, j) = (bj / n, bj % n);
                    (0..k).map(|kk| bm[(b * k + kk) * n + j]).sum()
                })
                .collect(),
        );
    }
    Ok(out)
}
