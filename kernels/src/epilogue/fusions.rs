//! The standard fusions as named trees, with cuBLASLt's semantics in tessera's row-major view.
//!
//! cuBLASLt is column-major. The row-major product `D (M x N) = A (M x K) B (K x N)` is run
//! there as `D' = D^T (N x M) = B^T A^T`, so cuBLASLt's names translate as follows:
//!
//! | cuBLASLt (column-major `D'`) | tessera (row-major `D`) |
//! |---|---|
//! | bias "per row of D'", length = rows of `D'` | `bias_col`, length N (nn.Linear's bias) |
//! | bias gradient, length = rows of `D'` (DRELU_BGRAD, DGELU_BGRAD) | `bgrad_col`: `sum_i D[i, j]`, length N |
//! | BGRADA: `sum_k A'[., k]`, `A' = B^T` | `sum_k_b`: `sum_k B[k, j]`, length N |
//! | BGRADB: `sum_k B'[k, .]`, `B' = A^T` | `sum_k_a`: `sum_k A[i, k]`, length M |
//! | ReLU AUX bit-mask, `ld` in bits over rows of `D'` | `aux_bits`, bit `row * ld + col` |
//! | GELU AUX (the pre-activation, D's type) | `aux` in D's type |
//!
//! Every fusion starts from cuBLASLt's linear combination `alpha * acc + beta * c` (`c` reads
//! as 0 when `beta == 0`). cuBLASLt's GELU is the tanh approximation, so the GELU fusions use
//! `gelu_tanh` / `dgelu_tanh`; the text form's `gelu` is the erf form.

use super::tree::build::{acc, alpha, aux_in, aux_in_bits, beta, bias_col, c};
use super::tree::{AuxFormat, EpilogueTree, Leaf, Operand, Sink, UnaryOp, VecAxis};

/// A standard fusion, named as cuBLASLt's `CUBLASLT_EPILOGUE_*` in lower case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// `alpha*acc + beta*c + bias_col`.
    Bias,
    /// `relu(alpha*acc + beta*c + bias_col)`.
    ReluBias,
    /// `gelu_tanh(alpha*acc + beta*c + bias_col)`.
    GeluBias,
    /// `relu(aux_bits(alpha*acc + beta*c + bias_col))`: aux is the 1-bit ReLU mask.
    ReluAuxBias,
    /// `gelu_tanh(aux(alpha*acc + beta*c + bias_col))`: aux is the pre-activation in D's type.
    GeluAuxBias,
    /// `(alpha*acc + beta*c) * drelu(aux_in_bits)`: the mask written by `relu_aux_bias`.
    DRelu,
    /// `(alpha*acc + beta*c) * dgelu_tanh(aux_in)`: the pre-activation written by `gelu_aux_bias`.
    DGelu,
    /// DRELU, and its sum over rows into `bgrad_col` (the bias gradient, length N).
    DReluBgrad,
    /// DGELU, and its sum over rows into `bgrad_col`.
    DGeluBgrad,
    /// `alpha*acc + beta*c`, and `sum_k_b` (length N).
    BgradA,
    /// `alpha*acc + beta*c`, and `sum_k_a` (length M).
    BgradB,
}

impl Fusion {
    /// Every fusion, in cuBLASLt's order.
    pub const ALL: [Fusion; 11] = [
        Fusion::Bias,
        Fusion::ReluBias,
        Fusion::GeluBias,
        Fusion::ReluAuxBias,
        Fusion::GeluAuxBias,
        Fusion::DRelu,
        Fusion::DGelu,
        Fusion::DReluBgrad,
        Fusion::DGeluBgrad,
        Fusion::BgradA,
        Fusion::BgradB,
    ];

    /// The name: cuBLASLt's, lower case, without the `CUBLASLT_EPILOGUE_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Fusion::Bias => "bias",
            Fusion::ReluBias => "relu_bias",
            Fusion::GeluBias => "gelu_bias",
            Fusion::ReluAuxBias => "relu_aux_bias",
            Fusion::GeluAuxBias => "gelu_aux_bias",
            Fusion::DRelu => "drelu",
            Fusion::DGelu => "dgelu",
            Fusion::DReluBgrad => "drelu_bgrad",
            Fusion::DGeluBgrad => "dgelu_bgrad",
            Fusion::BgradA => "bgrada",
            Fusion::BgradB => "bgradb",
        }
    }

    /// The fusion named `name`, if any.
    pub fn from_name(name: &str) -> Option<Fusion> {
        Fusion::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The value of cuBLASLt's `cublasLtEpilogue_t` for this fusion (for the benchmark, which
    /// runs the same fusion through cuBLASLt).
    pub fn cublaslt_epilogue(self) -> u32 {
        match self {
            Fusion::Bias => 4,
            Fusion::ReluBias => 6,
            Fusion::GeluBias => 36,
            Fusion::ReluAuxBias => 134,
            Fusion::GeluAuxBias => 164,
            Fusion::DRelu => 136,
            Fusion::DGelu => 192,
            Fusion::DReluBgrad => 152,
            Fusion::DGeluBgrad => 208,
            Fusion::BgradA => 256,
            Fusion::BgradB => 512,
        }
    }

    /// The tree.
    ///
    /// ```
    /// use tessera_kernels::epilogue::Fusion;
    /// assert_eq!(
    ///     Fusion::DGeluBgrad.tree().to_string(),
    ///     "bgrad_col((alpha * acc + beta * c) * dgelu_tanh(aux_in))"
    /// );
    /// assert_eq!(Fusion::BgradA.tree().to_string(), "alpha * acc + beta * c; sum_k_b");
    /// ```
    pub fn tree(self) -> EpilogueTree {
        let lin = || alpha() * acc() + beta() * c();
        let pre = || lin() + bias_col();
        let d = match self {
            Fusion::Bias => pre(),
            Fusion::ReluBias => pre().relu(),
            Fusion::GeluBias => pre().gelu_tanh(),
            Fusion::ReluAuxBias => pre().store_aux(AuxFormat::Bits).relu(),
            Fusion::GeluAuxBias => pre().store_aux(AuxFormat::Full(None)).gelu_tanh(),
            Fusion::DRelu => lin() * aux_in_bits().unary(UnaryOp::DRelu),
            Fusion::DGelu => lin() * aux_in().unary(UnaryOp::DGeluTanh),
            Fusion::DReluBgrad => (lin() * aux_in_bits().unary(UnaryOp::DRelu)).bgrad(VecAxis::Col),
            Fusion::DGeluBgrad => (lin() * aux_in().unary(UnaryOp::DGeluTanh)).bgrad(VecAxis::Col),
            Fusion::BgradA | Fusion::BgradB => lin(),
        };
        let sum_k = match self {
            Fusion::BgradA => vec![Operand::B],
            Fusion::BgradB => vec![Operand::A],
            _ => Vec::new(),
        };
        EpilogueTree { d, sum_k }
    }
}

/// The residual block `relu(alpha * acc + bias_col + residual)`: a convolution or linear layer
/// with bias, the skip connection's add, then ReLU (CUTLASS's LinearCombinationResidualBlock
/// with identity activation, `plus` and ReLU).
#[cfg(test)]
pub fn residual_relu() -> EpilogueTree {
    EpilogueTree::new((alpha() * acc() + bias_col() + super::tree::build::residual()).relu())
}

/// A few lines for `tessera plan gemm --epilogue TEXT`: the tree, the named fusion it is (if
/// any), what it reads and writes with their extents, and whether the flag-driven
/// epilogue can run it.
///
/// For `gelu_aux_bias` it starts with
/// `epilogue gelu_tanh(aux(alpha * acc + beta * c + bias_col)) = gelu_aux_bias` and has the
/// line `aux: M x N in D's type`.
pub fn describe(tree: &EpilogueTree) -> String {
    let mut s = format!("epilogue {tree}");
    if let Some(f) = Fusion::ALL.into_iter().find(|f| f.tree() == *tree) {
        s += &format!(
            " = {} (cuBLASLt epilogue {})",
            f.name(),
            f.cublaslt_epilogue()
        );
    }
    s.push('\n');
    let e = &tree.d;
    let mut reads = vec!["acc: M x N fp32".to_string()];
    for (leaf, what) in [
        (Leaf::C, "c: M x N (read when beta != 0)"),
        (Leaf::BiasRow, "bias_row: M"),
        (Leaf::BiasCol, "bias_col: N"),
        (Leaf::Residual, "residual: M x N"),
        (Leaf::AuxIn, "aux_in: M x N"),
        (Leaf::AuxInBits, "aux_in_bits: M x N bits"),
    ] {
        if e.uses(leaf) {
            reads.push(what.to_string());
        }
    }
    let mut writes = vec!["D: M x N".to_string()];
    for sink in e.sinks() {
        writes.push(match sink {
            Sink::Aux(AuxFormat::Bits) => "aux: M x N bits (ld a multiple of 128)".to_string(),
            Sink::Aux(AuxFormat::Full(None)) => "aux: M x N in D's type".to_string(),
            Sink::Aux(AuxFormat::Full(Some(t))) => format!("aux: M x N {t}"),
            Sink::Bgrad(VecAxis::Row) => "bgrad_row: M fp32 (sum over columns)".to_string(),
            Sink::Bgrad(VecAxis::Col) => "bgrad_col: N fp32 (sum over rows)".to_string(),
        });
    }
    for o in &tree.sum_k {
        writes.push(match o {
            Operand::A => "sum_k_a: M fp32 (sum of A over k)".to_string(),
            Operand::B => "sum_k_b: N fp32 (sum of B over k)".to_string(),
        });
    }
    s += &format!(
        "  reads  {}\n  writes {}\n",
        reads.join(", "),
        writes.join(", ")
    );
    s += &match super::parse::to_comma_list(tree) {
        Some(flags) => {
            format!("  runs on the flag-driven epilogue as `{flags}` (alpha, beta as bound)\n")
        }
        None => "  needs the generated epilogue (TESSERA_EPILOGUE_TREE)\n".to_string(),
    };
    s
}
