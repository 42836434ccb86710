//! A GEMM problem: extents, element types, storage orders and the fused epilogue.

use std::fmt;
use std::str::FromStr;

use crate::error::{KernelError, Result};

/// Element type of a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// bfloat16.
    Bf16,
    /// IEEE half.
    F16,
    /// IEEE single.
    F32,
}

impl DType {
    /// Bytes per element.
    pub fn bytes(self) -> i64 {
        match self {
            DType::Bf16 | DType::F16 => 2,
            DType::F32 => 4,
        }
    }

    /// The code the kernel's epilogue uses (0 bf16, 1 fp16, 2 fp32).
    pub fn code(self) -> i32 {
        match self {
            DType::Bf16 => 0,
            DType::F16 => 1,
            DType::F32 => 2,
        }
    }

    /// Unit roundoff (half an ulp at 1.0).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::Bf16 => 2f64.powi(-8),
            DType::F16 => 2f64.powi(-11),
            DType::F32 => 2f64.powi(-24),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::Bf16 => "bf16",
            DType::F16 => "fp16",
            DType::F32 => "fp32",
        })
    }
}

impl FromStr for DType {
    type Err = KernelError;
    fn from_str(s: &str) -> Result<DType> {
        match s {
            "bf16" => Ok(DType::Bf16),
            "fp16" | "f16" => Ok(DType::F16),
            "fp32" | "f32" => Ok(DType::F32),
            _ => Err(KernelError::invalid(
                "DType::from_str",
                format!("unknown dtype `{s}` (bf16, fp16, fp32)"),
            )),
        }
    }
}

/// Storage order of a matrix seen as `rows x cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// Row-major: the column index is contiguous, `ld` separates rows.
    Row,
    /// Column-major: the row index is contiguous, `ld` separates columns.
    Col,
}

impl fmt::Display for Major {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Major::Row => "row",
            Major::Col => "col",
        })
    }
}

impl FromStr for Major {
    type Err = KernelError;
    fn from_str(s: &str) -> Result<Major> {
        match s {
            "row" | "r" => Ok(Major::Row),
            "col" | "c" => Ok(Major::Col),
            _ => Err(KernelError::invalid(
                "Major::from_str",
                format!("unknown order `{s}` (row, col)"),
            )),
        }
    }
}

/// The activation of the fused epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// Identity.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `0.5 x (1 + erf(x / sqrt 2))`.
    GeluErf,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, cuBLASLt's GELU.
    GeluTanh,
}

impl Activation {
    /// The code the kernel uses.
    pub fn code(self) -> i32 {
        match self {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::GeluErf => 2,
            Activation::GeluTanh => 3,
        }
    }

    /// Applies the activation in float64 (the reference).
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::GeluErf => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
            Activation::GeluTanh => {
                let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                0.5 * x * (1.0 + u.tanh())
            }
        }
    }
}

/// Where the bias vector broadcasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BiasMode {
    /// No bias.
    None,
    /// One value per row of D (length M), broadcast along each row.
    PerRow,
    /// One value per column of D (length N), broadcast down each column (nn.Linear's bias).
    PerCol,
}

impl BiasMode {
    /// The code the kernel uses.
    pub fn code(self) -> i32 {
        match self {
            BiasMode::None => 0,
            BiasMode::PerRow => 1,
            BiasMode::PerCol => 2,
        }
    }
}

/// The fused epilogue `D = act(alpha * acc + beta * C + bias)`, `aux = alpha * acc + beta * C + bias`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Epilogue {
    /// The activation.
    pub act: Activation,
    /// The bias broadcast.
    pub bias: BiasMode,
    /// Whether the pre-activation is written to an aux matrix (for the backward pass).
    pub aux: bool,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C; C is not read when it is 0.
    pub beta: f32,
}

impl Default for Epilogue {
    fn default() -> Self {
        Epilogue {
            act: Activation::None,
            bias: BiasMode::None,
            aux: false,
            alpha: 1.0,
            beta: 0.0,
        }
    }
}

impl Epilogue {
    /// Parses a comma-separated list: `bias` (per column, as nn.Linear), `rowbias`, `relu`,
    /// `gelu` (erf), `gelu_tanh`, `aux`, `c` (beta = 1). Empty or `none` is the plain GEMM.
    ///
    /// ```
    /// use tessera_kernels::plan::{Activation, BiasMode, Epilogue};
    /// let e = Epilogue::parse("bias,gelu,aux").unwrap();
    /// assert_eq!((e.bias, e.act, e.aux), (BiasMode::PerCol, Activation::GeluErf, true));
    /// assert_eq!(e.to_string(), "bias,gelu,aux");
    /// assert!(Epilogue::parse("relu,gelu").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<Epilogue> {
        let mut e = Epilogue::default();
        let mut acts = 0;
        for word in s
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty() && *w != "none")
        {
            match word {
                "bias" | "colbias" => e.bias = BiasMode::PerCol,
                "rowbias" => e.bias = BiasMode::PerRow,
                "relu" => (e.act, acts) = (Activation::Relu, acts + 1),
                "gelu" | "gelu_erf" => (e.act, acts) = (Activation::GeluErf, acts + 1),
                "gelu_tanh" => (e.act, acts) = (Activation::GeluTanh, acts + 1),
                "aux" => e.aux = true,
                "c" | "beta" => e.beta = 1.0,
                _ => {
                    return Err(KernelError::invalid(
                        "Epilogue::parse",
                        format!("unknown epilogue term `{word}` in `{s}` (bias, rowbias, relu, gelu, gelu_tanh, aux, c)"),
                    ))
                }
            }
        }
        if acts > 1 {
            return Err(KernelError::invalid(
                "Epilogue::parse",
                format!("more than one activation in `{s}`"),
            ));
        }
        Ok(e)
    }

    /// Whether this is the plain GEMM (`D = alpha * acc`).
    pub fn is_plain(&self) -> bool {
        self.act == Activation::None && self.bias == BiasMode::None && !self.aux && self.beta == 0.0
    }
}

impl fmt::Display for Epilogue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = Vec::new();
        if self.beta != 0.0 {
            words.push("c");
        }
        match self.bias {
            BiasMode::None => {}
            BiasMode::PerRow => words.push("rowbias"),
            BiasMode::PerCol => words.push("bias"),
        }
        match self.act {
            Activation::None => {}
            Activation::Relu => words.push("relu"),
            Activation::GeluErf => words.push("gelu"),
            Activation::GeluTanh => words.push("gelu_tanh"),
        }
        if self.aux {
            words.push("aux");
        }
        if words.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&words.join(","))
        }
    }
}

/// A (strided-batched) GEMM: `D[b] (M x N) = epilogue(A[b] (M x K) * B[b] (K x N))`.
///
/// D, C and aux share one storage order (`d_major`) and the output type; bias has the output
/// type too. A column-major D is computed as the row-major transposed product
/// `Dᵀ = Bᵀ Aᵀ` ([`GemmProblem::row_major_d`]): the same kernels, A and B exchanged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmProblem {
    /// Rows of A and D.
    pub m: i64,
    /// Columns of B and D.
    pub n: i64,
    /// The reduction extent.
    pub k: i64,
    /// Number of independent products.
    pub batch: i64,
    /// Element type of A and B (bf16 or fp16).
    pub input: DType,
    /// Element type of C, D, bias and aux.
    pub output: DType,
    /// Storage order of A (M x K).
    pub a_major: Major,
    /// Storage order of B (K x N).
    pub b_major: Major,
    /// Storage order of D, C and aux (M x N).
    pub d_major: Major,
    /// The fused epilogue.
    pub epilogue: Epilogue,
}

impl GemmProblem {
    /// A row-major A times a column-major B (nn.Linear's `x @ w.T`), bf16 in and out, no
    /// epilogue, batch 1.
    pub fn new(m: i64, n: i64, k: i64) -> GemmProblem {
        GemmProblem {
            m,
            n,
            k,
            batch: 1,
            input: DType::Bf16,
            output: DType::Bf16,
            a_major: Major::Row,
            b_major: Major::Col,
            d_major: Major::Row,
            epilogue: Epilogue::default(),
        }
    }

    /// The problem the kernels run: `self` when D is row-major; for a column-major D, the
    /// transposed product `Dᵀ (N x M, row-major) = Bᵀ Aᵀ`. M and N trade places, `Bᵀ` is the
    /// new A (the storage of B read the other way: a row-major K x N B is a column-major
    /// N x K matrix with the same leading dimension), `Aᵀ` the new B, and a bias per row
    /// becomes a bias per column. C and aux are transposed with D.
    ///
    /// ```
    /// use tessera_kernels::plan::{BiasMode, Epilogue, GemmProblem};
    /// use tessera_kernels::Major;
    /// let mut p = GemmProblem::new(100, 300, 64); // A row-major, B column-major
    /// p.d_major = Major::Col;
    /// p.epilogue = Epilogue::parse("rowbias,relu").unwrap();
    /// let t = p.row_major_d();
    /// assert_eq!((t.m, t.n, t.k), (300, 100, 64));
    /// assert_eq!((t.a_major, t.b_major, t.d_major), (Major::Row, Major::Col, Major::Row));
    /// assert_eq!(t.epilogue.bias, BiasMode::PerCol);
    /// assert_eq!(t.row_major_d(), t);
    /// ```
    pub fn row_major_d(&self) -> GemmProblem {
        if self.d_major == Major::Row {
            return *self;
        }
        let flip = |m: Major| match m {
            Major::Row => Major::Col,
            Major::Col => Major::Row,
        };
        let mut e = self.epilogue;
        e.bias = match e.bias {
            BiasMode::None => BiasMode::None,
            BiasMode::PerRow => BiasMode::PerCol,
            BiasMode::PerCol => BiasMode::PerRow,
        };
        GemmProblem {
            m: self.n,
            n: self.m,
            a_major: flip(self.b_major),
            b_major: flip(self.a_major),
            d_major: Major::Row,
            epilogue: e,
            ..*self
        }
    }

    /// Floating-point operations: `2 M N K batch`.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Checks the extents and types.
    pub fn validate(&self) -> Result<()> {
        let op = "GemmProblem::validate";
        for (name, v) in [
            ("M", self.m),
            ("N", self.n),
            ("K", self.k),
            ("batch", self.batch),
        ] {
            if v < 1 {
                return Err(KernelError::invalid(
                    op,
                    format!("{name} = {v} must be at least 1"),
                ));
            }
            if v > i32::MAX as i64 {
                return Err(KernelError::invalid(
                    op,
                    format!("{name} = {v} exceeds 2^31 - 1"),
                ));
            }
        }
        if self.batch > 65_535 {
            return Err(KernelError::invalid(
                op,
                format!("batch = {} exceeds the grid's z limit 65535", self.batch),
            ));
        }
        if self.input == DType::F32 {
            return Err(KernelError::invalid(
                op,
                "inputs must be bf16 or fp16 (the MMA is m16n8k16 on 16-bit floats)",
            ));
        }
        Ok(())
    }
}

impl fmt::Display for GemmProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{}x{}{} {}->{} A {}-major, B {}-major,{} epilogue {}",
            self.m,
            self.n,
            self.k,
            if self.batch > 1 {
                format!(" batch {}", self.batch)
            } else {
                String::new()
            },
            self.input,
            self.output,
            self.a_major,
            self.b_major,
            if self.d_major == Major::Col {
                " D col-major,"
            } else {
                ""
            },
            self.epilogue
        )
    }
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Element strides of every operand: leading dimensions and batch strides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemmStrides {
    /// Leading dimension of A (row stride if row-major, column stride if column-major).
    pub lda: i64,
    /// Leading dimension of B.
    pub ldb: i64,
    /// Leading dimension of C (in the problem's `d_major` order, as D and aux).
    pub ldc: i64,
    /// Leading dimension of D (row stride if row-major, column stride if column-major).
    pub ldd: i64,
    /// Leading dimension of aux.
    pub ldaux: i64,
    /// Elements between consecutive batches of A.
    pub batch_a: i64,
    /// ... of B.
    pub batch_b: i64,
    /// ... of C.
    pub batch_c: i64,
    /// ... of D.
    pub batch_d: i64,
    /// ... of bias (0: one bias for all batches).
    pub batch_bias: i64,
    /// ... of aux.
    pub batch_aux: i64,
}

#[cfg_attr(not(feature = "bench"), allow(dead_code))]
impl GemmStrides {
    /// Tightly packed operands.
    pub fn tight(p: &GemmProblem) -> GemmStrides {
        let lda = if p.a_major == Major::Row { p.k } else { p.m };
        let ldb = if p.b_major == Major::Row { p.n } else { p.k };
        let ld_out = if p.d_major == Major::Row { p.n } else { p.m };
        GemmStrides {
            lda,
            ldb,
            ldc: ld_out,
            ldd: ld_out,
            ldaux: ld_out,
            batch_a: p.m * p.k,
            batch_b: p.k * p.n,
            batch_c: p.m * p.n,
            batch_d: p.m * p.n,
            batch_bias: 0,
            batch_aux: p.m * p.n,
        }
    }

    /// Elements an operand buffer must hold: `(batch-1)*batch_stride + (outer-1)*ld + inner`.
    pub fn extent(batch: i64, batch_stride: i64, outer: i64, ld: i64, inner: i64) -> i64 {
        (batch - 1) * batch_stride + (outer - 1) * ld + inner
    }

    /// Elements an M x N output (D, C or aux) with leading dimension `ld` and batch stride
    /// `batch_stride` must hold, in the problem's `d_major` order.
    #[cfg(test)]
    pub fn out_extent(p: &GemmProblem, batch_stride: i64, ld: i64) -> i64 {
        match p.d_major {
            Major::Row => GemmStrides::extent(p.batch, batch_stride, p.m, ld, p.n),
            Major::Col => GemmStrides::extent(p.batch, batch_stride, p.n, ld, p.m),
        }
    }

    /// Index of element `(b, i, j)` of an M x N output (D, C or aux) with leading dimension
    /// `ld` and batch stride `batch_stride`, in the problem's `d_major` order.
    #[cfg(test)]
    pub fn out_index(p: &GemmProblem, batch_stride: i64, ld: i64, b: i64, i: i64, j: i64) -> usize {
        (b * batch_stride
            + match p.d_major {
                Major::Row => i * ld + j,
                Major::Col => j * ld + i,
            }) as usize
    }

    /// The strides of the problem the kernels run ([`GemmProblem::row_major_d`]): for a
    /// column-major D, A's and B's strides trade places; the outputs' stay (a column-major
    /// M x N matrix with leading dimension `ld` is the row-major N x M one).
    pub fn row_major_d(&self, p: &GemmProblem) -> GemmStrides {
        if p.d_major == Major::Row {
            return *self;
        }
        GemmStrides {
            lda: self.ldb,
            ldb: self.lda,
            batch_a: self.batch_b,
            batch_b: self.batch_a,
            ..*self
        }
    }

    /// Index of A(b, i, kk).
    #[cfg(test)]
    pub fn a_index(&self, p: &GemmProblem, b: i64, i: i64, kk: i64) -> usize {
        (b * self.batch_a
            + match p.a_major {
                Major::Row => i * self.lda + kk,
                Major::Col => kk * self.lda + i,
            }) as usize
    }

    /// Index of B(b, kk, j).
    #[cfg(test)]
    pub fn b_index(&self, p: &GemmProblem, b: i64, kk: i64, j: i64) -> usize {
        (b * self.batch_b
            + match p.b_major {
                Major::Row => kk * self.ldb + j,
                Major::Col => j * self.ldb + kk,
            }) as usize
    }
}
