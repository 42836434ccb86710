//! PaddlePaddle's `fused_gemm_epilogue` and `fused_gemm_epilogue_grad` on the GPU, built on
//! [`Gemm`], with the operator's semantics:
//!
//! - forward: `out = act(op(X) op(Y) + bias)`, `op(X) = Xᵀ` when `trans_x` (X stored
//!   `K x M`), `op(Y) = Yᵀ` when `trans_y` (Y stored `N x K`), bias of length N, `act` none,
//!   relu or gelu (tanh form); the reserve space, when asked for, is the ReLU bit mask
//!   (32-bit words, rows of N rounded up to 128 bits) or the GELU pre-activation (`M x N`);
//! - backward, with `dOut` (`M x N`) and the *previous* layer's reserve space (shaped as X is
//!   stored): `dX = act'(reserve) * (dOut op(Y)ᵀ)` stored like X, `dY = op(X)ᵀ dOut` stored
//!   like Y, `dBias = sum over the M rows of dOut` (computed beside the dY product, as the sum
//!   over its K of its B operand).

use cudarc::driver::CudaStream;

use crate::epilogue::paddle::{dx_fusion, forward_fusion};
use crate::epilogue::EpilogueTree;
use crate::error::{KernelError, Result};
use crate::launch::gemm::{Context, Gemm};
use crate::launch::operand::{Operands, Tensor, TensorMut};
use crate::plan::gemm::GemmSpec;
use crate::plan::problem::{DType, Major};

pub use crate::epilogue::paddle::PaddleActivation;

fn order(transposed: bool) -> Major {
    if transposed {
        Major::Col
    } else {
        Major::Row
    }
}

/// The forward operator, planned and compiled once for `(M, N, K)`, the transpositions, the
/// activation and whether the reserve space is written.
pub struct FusedGemmEpilogue {
    gemm: Gemm,
    reserve: bool,
}

impl FusedGemmEpilogue {
    /// Plans and compiles the operator; `dtype` is every tensor's type (bf16 or fp16).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &Context,
        (m, n, k): (i64, i64, i64),
        trans_x: bool,
        trans_y: bool,
        activation: PaddleActivation,
        reserve: bool,
        dtype: DType,
    ) -> Result<FusedGemmEpilogue> {
        let spec = GemmSpec::new(m, n, k)
            .dtype(dtype)
            .a(order(trans_x))
            .b(order(trans_y))
            .epilogue_tree(forward_fusion(activation, reserve).tree());
        let reserve = reserve && activation != PaddleActivation::None;
        Ok(FusedGemmEpilogue {
            gemm: Gemm::new(ctx, &spec)?,
            reserve,
        })
    }

    /// The GEMM it runs.
    pub fn gemm(&self) -> &Gemm {
        &self.gemm
    }

    /// Queues `out = act(op(X) op(Y) + bias)` (and the reserve space) on `stream`.
    pub fn launch<'t>(
        &self,
        stream: &CudaStream,
        x: impl Into<Tensor<'t>>,
        y: impl Into<Tensor<'t>>,
        bias: impl Into<Tensor<'t>>,
        out: impl Into<TensorMut<'t>>,
        reserve: Option<TensorMut<'t>>,
    ) -> Result<()> {
        let mut ops = Operands::new().bias_col(bias);
        match (reserve, self.reserve) {
            (Some(r), true) => ops = ops.aux(r),
            (None, false) => {}
            (Some(_), false) => {
                return Err(KernelError::invalid(
                    "fused_gemm_epilogue",
                    "a reserve space is given, but the operator was made without one (or with no activation)",
                ))
            }
            (None, true) => {
                return Err(KernelError::invalid(
                    "fused_gemm_epilogue",
                    "the operator writes a reserve space, none is given",
                ))
            }
        }
        self.gemm.launch(stream, x, y, out, ops)
    }
}

/// The backward operator: the dX and dY products with their epilogues, each planned and
/// compiled once.
pub struct FusedGemmEpilogueGrad {
    dx: Option<Gemm>,
    dy: Option<Gemm>,
    dbias: bool,
    activation_grad: PaddleActivation,
}

impl FusedGemmEpilogueGrad {
    /// Plans and compiles the products for the forward call's `(M, N, K)` and transpositions;
    /// `want` says which of dX, dY and dBias to compute (dBias comes with dY).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &Context,
        (m, n, k): (i64, i64, i64),
        trans_x: bool,
        trans_y: bool,
        activation_grad: PaddleActivation,
        (want_dx, want_dy, want_dbias): (bool, bool, bool),
        dtype: DType,
    ) -> Result<FusedGemmEpilogueGrad> {
        if want_dbias && !want_dy {
            return Err(KernelError::invalid(
                "fused_gemm_epilogue_grad",
                "dBias is summed beside the dY product: ask for dY too",
            ));
        }
        // dX (M x K) = dOut (M x N) op(Y)ᵀ (N x K): op(Y)ᵀ is column-major unless trans_y.
        let dx = want_dx
            .then(|| {
                let spec = GemmSpec::new(m, k, n)
                    .dtype(dtype)
                    .a(Major::Row)
                    .b(order(!trans_y))
                    .d(order(trans_x))
                    .epilogue_tree(dx_fusion(activation_grad));
                Gemm::new(ctx, &spec)
            })
            .transpose()?;
        // dY (K x N) = op(X)ᵀ (K x M) dOut (M x N), dBias its B's sum over its K.
        let dy = want_dy
            .then(|| {
                let tree = EpilogueTree {
                    sum_k: if want_dbias {
                        vec![crate::epilogue::Operand::B]
                    } else {
                        Vec::new()
                    },
                    ..EpilogueTree::new(crate::epilogue::build::acc())
                };
                let spec = GemmSpec::new(k, n, m)
                    .dtype(dtype)
                    .a(order(!trans_x))
                    .b(Major::Row)
                    .d(order(trans_y))
                    .epilogue_tree(tree);
                Gemm::new(ctx, &spec)
            })
            .transpose()?;
        Ok(FusedGemmEpilogueGrad {
            dx,
            dy,
            dbias: want_dbias,
            activation_grad,
        })
    }

    /// Queues the gradients on `stream`: `dout` (`M x N`), the forward call's `x` and `y`,
    /// the previous layer's reserve space (relu and gelu), and the outputs asked for (dBias:
    /// fp32, length N).
    #[allow(clippy::too_many_arguments)]
    pub fn launch<'t>(
        &self,
        stream: &CudaStream,
        dout: impl Into<Tensor<'t>>,
        x: impl Into<Tensor<'t>>,
        y: impl Into<Tensor<'t>>,
        reserve: Option<Tensor<'t>>,
        dx: Option<TensorMut<'t>>,
        dy: Option<TensorMut<'t>>,
        dbias: Option<TensorMut<'t>>,
    ) -> Result<()> {
        const OP: &str = "fused_gemm_epilogue_grad";
        let dout = dout.into();
        let missing = |what: &str| {
            KernelError::invalid(
                OP,
                format!("{what}: not given, or not asked for when the operator was made"),
            )
        };
        match (&self.dx, dx) {
            (Some(g), Some(out)) => {
                let mut ops = Operands::new();
                if self.activation_grad != PaddleActivation::None {
                    ops = ops.aux_in(reserve.ok_or_else(|| missing("the reserve space"))?);
                }
                g.launch(stream, dout.clone(), y, out, ops)?;
            }
            (None, None) => {}
            _ => return Err(missing("dX")),
        }
        match (&self.dy, dy) {
            (Some(g), Some(out)) => {
                let mut ops = Operands::new();
                match (self.dbias, dbias) {
                    (true, Some(b)) => ops = ops.sum_k_b(b),
                    (false, None) => {}
                    _ => return Err(missing("dBias")),
                }
                g.launch(stream, x, dout, out, ops)?;
            }
            (None, None) => {}
            _ => return Err(missing("dY")),
        }
        Ok(())
    }
}
