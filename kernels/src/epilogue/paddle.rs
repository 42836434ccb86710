//! `fused_gemm_epilogue` and `fused_gemm_epilogue_grad` with PaddlePaddle's semantics, as a
//! float64 CPU reference built on the epilogue trees and their evaluator.
//!
//! **Forward**: `out = act(op(X) op(Y) + bias)`, `op(X) = X^T` when `trans_x` (X stored
//! `K x M`), else X (`M x K`); `op(Y) = Y^T` when `trans_y` (Y stored `N x K`); bias has length
//! N; `act` is none, relu or gelu (the tanh approximation, as the operator's cuBLASLt epilogue).
//! The epilogue is `bias`, `relu_bias` / `relu_aux_bias`, `gelu_bias` / `gelu_aux_bias`
//! ([`super::Fusion`]); the reserve space, when asked for (relu and gelu only), is the aux
//! output: the ReLU bit-mask, or the GELU pre-activation.
//!
//! **Backward** (`fused_gemm_epilogue_grad`): the operator's X is the layer's *input*, the
//! output of the previous layer's activation, and `reserve_space` is that previous layer's
//! (shaped as X is stored). With `dOut` (`M x N`):
//! - `dX = act'(reserve) * (dOut op(Y)^T)`, stored like X (`M x K`, or `K x M` when
//!   `trans_x`): the epilogue `drelu` (mask), `dgelu` (pre-activation) or none;
//! - `dY = op(X)^T dOut`, stored like Y (`K x N`, or `N x K` when `trans_y`);
//! - `dBias = sum over the M rows of dOut`, fused into the dY product as its operand sum
//!   (`bgrada` when not `trans_y`: dOut is that product's B; `bgradb` when `trans_y`: dOut^T is
//!   its A).
// The GPU operators (feature `cuda`) use the fusions chosen here.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use std::fmt;
use std::str::FromStr;

use super::error::{EpilogueError, Result};
#[cfg(test)]
use super::eval::{evaluate, EvalInputs};
use super::fusions::Fusion;
#[cfg(test)]
use super::tree::Operand;
use super::tree::{build, EpilogueTree};

/// A dense row-major float64 matrix.
#[derive(Clone, Debug, PartialEq)]
#[cfg(test)]
pub struct Matrix {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `rows * cols` values, row-major.
    pub data: Vec<f64>,
}

#[cfg(test)]
impl Matrix {
    /// A matrix from row-major values; `data.len()` must be `rows * cols`.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Matrix> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(EpilogueError::input(
                "Matrix::new",
                format!("{} values for {rows} x {cols}", data.len()),
            ));
        }
        Ok(Matrix { rows, cols, data })
    }

    /// Element `(i, j)`.
    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    /// The transpose.
    pub fn t(&self) -> Matrix {
        let mut data = Vec::with_capacity(self.data.len());
        for j in 0..self.cols {
            for i in 0..self.rows {
                data.push(self.at(i, j));
            }
        }
        Matrix {
            rows: self.cols,
            cols: self.rows,
            data,
        }
    }

    fn op(&self, trans: bool) -> Matrix {
        if trans {
            self.t()
        } else {
            self.clone()
        }
    }
}

/// Checks that `data` holds `rows * cols` values (the fields are public).
#[cfg(test)]
fn valid(op: &'static str, name: &str, x: &Matrix) -> Result<()> {
    if x.rows.checked_mul(x.cols) != Some(x.data.len()) {
        return Err(EpilogueError::input(
            op,
            format!(
                "{name}: {} values for {} x {}",
                x.data.len(),
                x.rows,
                x.cols
            ),
        ));
    }
    Ok(())
}

/// `a b` in float64.
#[cfg(test)]
fn matmul(op: &'static str, a: &Matrix, b: &Matrix) -> Result<Matrix> {
    valid(op, "left operand", a)?;
    valid(op, "right operand", b)?;
    if a.cols != b.rows {
        return Err(EpilogueError::input(
            op,
            format!(
                "inner extents differ: {} x {} times {} x {}",
                a.rows, a.cols, b.rows, b.cols
            ),
        ));
    }
    let mut data = vec![0.0; a.rows * b.cols];
    for i in 0..a.rows {
        for k in 0..a.cols {
            let x = a.at(i, k);
            for j in 0..b.cols {
                data[i * b.cols + j] += x * b.at(k, j);
            }
        }
    }
    Ok(Matrix {
        rows: a.rows,
        cols: b.cols,
        data,
    })
}

/// The operator's `activation` (and `activation_grad`) attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaddleActivation {
    /// `none`.
    None,
    /// `relu`.
    Relu,
    /// `gelu` (tanh approximation).
    Gelu,
}

impl FromStr for PaddleActivation {
    type Err = EpilogueError;
    fn from_str(s: &str) -> Result<PaddleActivation> {
        match s {
            "none" | "identity" => Ok(PaddleActivation::None),
            "relu" => Ok(PaddleActivation::Relu),
            "gelu" => Ok(PaddleActivation::Gelu),
            _ => Err(EpilogueError::input(
                "fused_gemm_epilogue",
                format!("activation `{s}` is not none, relu or gelu"),
            )),
        }
    }
}

impl fmt::Display for PaddleActivation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PaddleActivation::None => "none",
            PaddleActivation::Relu => "relu",
            PaddleActivation::Gelu => "gelu",
        })
    }
}

/// The forward pass's reserve space (the aux output), shaped as the forward output `M x N`.
#[derive(Clone, Debug, PartialEq)]
#[cfg(test)]
pub enum ReserveSpace {
    /// relu: whether each pre-activation was `> 0` (one bit per element on the GPU).
    ReluMask {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// The bits, row-major.
        bits: Vec<bool>,
    },
    /// gelu: the pre-activation.
    GeluInput(Matrix),
}

/// The forward pass's outputs.
#[derive(Clone, Debug, PartialEq)]
#[cfg(test)]
pub struct FusedForward {
    /// `act(op(X) op(Y) + bias)`, `M x N`.
    pub out: Matrix,
    /// The reserve space, when asked for and the activation is relu or gelu.
    pub reserve_space: Option<ReserveSpace>,
}

/// The fused forward fusion Paddle's operator chooses.
pub fn forward_fusion(activation: PaddleActivation, reserve: bool) -> Fusion {
    match (activation, reserve) {
        (PaddleActivation::None, _) => Fusion::Bias,
        (PaddleActivation::Relu, false) => Fusion::ReluBias,
        (PaddleActivation::Relu, true) => Fusion::ReluAuxBias,
        (PaddleActivation::Gelu, false) => Fusion::GeluBias,
        (PaddleActivation::Gelu, true) => Fusion::GeluAuxBias,
    }
}

/// `fused_gemm_epilogue(x, y, bias, trans_x, trans_y, activation)`; `reserve` asks for the
/// reserve space.
#[cfg(test)]
pub fn fused_gemm_epilogue(
    x: &Matrix,
    y: &Matrix,
    bias: &[f64],
    trans_x: bool,
    trans_y: bool,
    activation: PaddleActivation,
    reserve: bool,
) -> Result<FusedForward> {
    const OP: &str = "fused_gemm_epilogue";
    valid(OP, "x", x)?;
    valid(OP, "y", y)?;
    let acc = matmul(OP, &x.op(trans_x), &y.op(trans_y))?;
    let (m, n) = (acc.rows, acc.cols);
    if bias.len() != n {
        return Err(EpilogueError::input(
            OP,
            format!("bias has length {}, N = {n}", bias.len()),
        ));
    }
    let tree = forward_fusion(activation, reserve).tree();
    let mut inp = EvalInputs::new(m, n, 1, &acc.data);
    inp.bias_col = Some(bias);
    let o = evaluate(&tree, &inp)?;
    let reserve_space = match (activation, o.aux) {
        (PaddleActivation::Relu, Some(aux)) => Some(ReserveSpace::ReluMask {
            rows: m,
            cols: n,
            bits: aux.iter().map(|&v| v != 0.0).collect(),
        }),
        (PaddleActivation::Gelu, Some(aux)) => Some(ReserveSpace::GeluInput(Matrix {
            rows: m,
            cols: n,
            data: aux,
        })),
        _ => None,
    };
    Ok(FusedForward {
        out: Matrix {
            rows: m,
            cols: n,
            data: o.d,
        },
        reserve_space,
    })
}

/// Which gradients to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg(test)]
pub struct WantGrads {
    /// dX.
    pub dx: bool,
    /// dY.
    pub dy: bool,
    /// dBias.
    pub dbias: bool,
}

#[cfg(test)]
impl WantGrads {
    /// All three.
    pub const ALL: WantGrads = WantGrads {
        dx: true,
        dy: true,
        dbias: true,
    };
}

/// The backward pass's outputs.
#[derive(Clone, Debug, PartialEq)]
#[cfg(test)]
pub struct FusedGrads {
    /// dX, shaped as X is stored.
    pub dx: Option<Matrix>,
    /// dY, shaped as Y is stored.
    pub dy: Option<Matrix>,
    /// dBias, length N.
    pub dbias: Option<Vec<f64>>,
}

/// The epilogue of the dX product for `activation_grad`: `drelu`, `dgelu` or the plain
/// `alpha * acc + beta * c`.
pub fn dx_fusion(activation_grad: PaddleActivation) -> EpilogueTree {
    match activation_grad {
        PaddleActivation::None => {
            EpilogueTree::new(build::alpha() * build::acc() + build::beta() * build::c())
        }
        PaddleActivation::Relu => Fusion::DRelu.tree(),
        PaddleActivation::Gelu => Fusion::DGelu.tree(),
    }
}

/// `fused_gemm_epilogue_grad(dout, x, y, reserve_space, trans_x, trans_y, activation_grad)`.
///
/// `x`, `y`, `trans_x`, `trans_y` are the forward call's; `reserve_space` is the previous
/// layer's (required for relu and gelu), shaped as `x` is stored.
#[allow(clippy::too_many_arguments)]
#[cfg(test)]
pub fn fused_gemm_epilogue_grad(
    dout: &Matrix,
    x: &Matrix,
    y: &Matrix,
    reserve_space: Option<&ReserveSpace>,
    trans_x: bool,
    trans_y: bool,
    activation_grad: PaddleActivation,
    want: WantGrads,
) -> Result<FusedGrads> {
    const OP: &str = "fused_gemm_epilogue_grad";
    for (name, m) in [("dout", dout), ("x", x), ("y", y)] {
        valid(OP, name, m)?;
    }
    match reserve_space {
        Some(ReserveSpace::ReluMask { rows, cols, bits })
            if rows.checked_mul(*cols) != Some(bits.len()) =>
        {
            return Err(EpilogueError::input(
                OP,
                format!("reserve_space: {} bits for {rows} x {cols}", bits.len()),
            ))
        }
        Some(ReserveSpace::GeluInput(pre)) => valid(OP, "reserve_space", pre)?,
        _ => {}
    }
    let (opx, opy) = (x.op(trans_x), y.op(trans_y));
    let (m, k, n) = (opx.rows, opx.cols, opy.cols);
    if opy.rows != k || dout.rows != m || dout.cols != n {
        return Err(EpilogueError::input(
            OP,
            format!(
                "op(X) {m} x {k}, op(Y) {} x {n} and dOut {} x {} do not fit",
                opy.rows, dout.rows, dout.cols
            ),
        ));
    }
    let mut grads = FusedGrads {
        dx: None,
        dy: None,
        dbias: None,
    };
    if want.dx {
        // Stored like X: dOut op(Y)^T (M x K), or its transpose op(Y) dOut^T (K x M).
        let acc = if trans_x {
            matmul(OP, &opy, &dout.t())?
        } else {
            matmul(OP, dout, &opy.t())?
        };
        let tree = dx_fusion(activation_grad);
        let mut inp = EvalInputs::new(acc.rows, acc.cols, 1, &acc.data);
        let shape_err = |r: usize, c: usize| {
            EpilogueError::input(
                OP,
                format!(
                    "reserve_space is {r} x {c}, X is stored {} x {}",
                    acc.rows, acc.cols
                ),
            )
        };
        match (activation_grad, reserve_space) {
            (PaddleActivation::None, _) => {}
            (PaddleActivation::Relu, Some(ReserveSpace::ReluMask { rows, cols, bits })) => {
                if (*rows, *cols) != (acc.rows, acc.cols) {
                    return Err(shape_err(*rows, *cols));
                }
                inp.aux_in_bits = Some(bits);
            }
            (PaddleActivation::Gelu, Some(ReserveSpace::GeluInput(pre))) => {
                if (pre.rows, pre.cols) != (acc.rows, acc.cols) {
                    return Err(shape_err(pre.rows, pre.cols));
                }
                inp.aux_in = Some(&pre.data);
            }
            (a, r) => {
                return Err(EpilogueError::input(
                    OP,
                    format!(
                        "activation_grad {a} needs its forward reserve space, got {}",
                        match r {
                            None => "none",
                            Some(ReserveSpace::ReluMask { .. }) => "a relu mask",
                            Some(ReserveSpace::GeluInput(_)) => "a gelu input",
                        }
                    ),
                ))
            }
        }
        let o = evaluate(&tree, &inp)?;
        grads.dx = Some(Matrix {
            rows: acc.rows,
            cols: acc.cols,
            data: o.d,
        });
    }
    if want.dy || want.dbias {
        // Stored like Y: op(X)^T dOut (K x N, dOut is B: bgrada), or dOut^T op(X) (N x K,
        // dOut^T is A: bgradb). The reduction extent of both products is M.
        let (a, b) = if trans_y {
            (dout.t(), opx.clone())
        } else {
            (opx.t(), dout.clone())
        };
        let acc = matmul(OP, &a, &b)?;
        let mut tree =
            EpilogueTree::new(build::alpha() * build::acc() + build::beta() * build::c());
        if want.dbias {
            tree = if trans_y {
                Fusion::BgradB
            } else {
                Fusion::BgradA
            }
            .tree();
        }
        let mut inp = EvalInputs::new(acc.rows, acc.cols, 1, &acc.data);
        inp.k = m;
        inp.a = Some(&a.data);
        inp.b = Some(&b.data);
        let o = evaluate(&tree, &inp)?;
        if want.dy {
            grads.dy = Some(Matrix {
                rows: acc.rows,
                cols: acc.cols,
                data: o.d,
            });
        }
        if want.dbias {
            grads.dbias = if tree.sum_k.contains(&Operand::A) {
                o.sum_k_a
            } else {
                o.sum_k_b
            };
        }
    }
    Ok(grads)
}
