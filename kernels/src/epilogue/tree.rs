//! The epilogue expression tree: leaves, operators, sinks, its text form (`Display`) and its
//! kinds (values, coordinates, predicates).
//!
//! Every node computes one value per output element `(batch, row, col)` of the row-major
//! `M x N` output D. Values are fp32 on the GPU and float64 in the CPU evaluator;
//! coordinates and integer constants are 64-bit integers; predicates are booleans and appear
//! only as the first argument of `select`.

use std::fmt;

use crate::plan::problem::DType;

use super::error::{EpilogueError, Result};

/// An output coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Coord {
    /// The row of D, `0..M`.
    Row,
    /// The column of D, `0..N`.
    Col,
    /// The batch index.
    Batch,
}

/// A leaf of the tree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Leaf {
    /// The fp32 accumulator `(A B)[row, col]`.
    Acc,
    /// The source matrix C (`M x N`). Reads as 0 when `beta == 0`: C is then not read, as in BLAS.
    C,
    /// The run-time scalar alpha.
    Alpha,
    /// The run-time scalar beta.
    Beta,
    /// A vector of length M indexed by the output row (CUTLASS's "per-row" bias).
    BiasRow,
    /// A vector of length N indexed by the output column (nn.Linear's bias, cuBLASLt's "bias
    /// per row of D" after the row-major transposition).
    BiasCol,
    /// A full `M x N` input (a residual).
    Residual,
    /// A full `M x N` auxiliary input: the forward pass's pre-activation, for DGELU.
    AuxIn,
    /// A 1-bit-per-element `M x N` auxiliary input (a ReLU mask as cuBLASLt writes it); reads
    /// as 1.0 or 0.0.
    AuxInBits,
    /// An output coordinate.
    Coord(Coord),
    /// An integer constant (usable as a value or in a coordinate predicate).
    Int(i64),
    /// A floating-point constant.
    Const(f64),
}

/// An element-wise function of one operand. The derivative functions take the
/// pre-activation `x` and return `f'(x)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `max(x, 0)`.
    Relu,
    /// `0.5 x (1 + erf(x / sqrt 2))`.
    Gelu,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (cuBLASLt's GELU).
    GeluTanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `x sigmoid(x)`.
    Silu,
    /// `min(max(x, lo), hi)`, `lo <= hi`.
    Clamp {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// `relu'(x)`: 1 where `x > 0`, else 0.
    DRelu,
    /// `gelu'(x)` (erf form).
    DGelu,
    /// `gelu_tanh'(x)`.
    DGeluTanh,
    /// `sigmoid'(x) = s (1 - s)`.
    DSigmoid,
    /// `tanh'(x) = 1 - tanh(x)^2`.
    DTanh,
    /// `silu'(x) = s + x s (1 - s)`.
    DSilu,
    /// `clamp'(x)`: 1 where `lo < x < hi`, else 0.
    DClamp {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// An explicit conversion: round to the nearest value of the type (ties to even).
    Round(DType),
}

impl UnaryOp {
    /// The name in the text form (`Neg` prints as a prefix `-`).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Clamp { .. } => "clamp",
            UnaryOp::DRelu => "drelu",
            UnaryOp::DGelu => "dgelu",
            UnaryOp::DGeluTanh => "dgelu_tanh",
            UnaryOp::DSigmoid => "dsigmoid",
            UnaryOp::DTanh => "dtanh",
            UnaryOp::DSilu => "dsilu",
            UnaryOp::DClamp { .. } => "dclamp",
            UnaryOp::Round(DType::Bf16) => "bf16",
            UnaryOp::Round(DType::F16) => "fp16",
            UnaryOp::Round(DType::F32) => "fp32",
        }
    }

    /// The derivative of an activation, when it has one in the tree's vocabulary.
    pub fn derivative(self) -> Option<UnaryOp> {
        Some(match self {
            UnaryOp::Relu => UnaryOp::DRelu,
            UnaryOp::Gelu => UnaryOp::DGelu,
            UnaryOp::GeluTanh => UnaryOp::DGeluTanh,
            UnaryOp::Sigmoid => UnaryOp::DSigmoid,
            UnaryOp::Tanh => UnaryOp::DTanh,
            UnaryOp::Silu => UnaryOp::DSilu,
            UnaryOp::Clamp { lo, hi } => UnaryOp::DClamp { lo, hi },
            _ => return None,
        })
    }
}

/// An element-wise function of two values (or, for `+ - * max min`, of two coordinates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `max(a, b)`.
    Max,
    /// `min(a, b)`.
    Min,
}

/// A comparison of two coordinate expressions, giving a predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl CmpOp {
    /// The operator's text.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// Applies the comparison.
    pub fn apply(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// How an aux output is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuxFormat {
    /// One element per output element, in the given type (`None`: D's type, cuBLASLt's default).
    Full(Option<DType>),
    /// One bit per output element, set where the value is `> 0` (cuBLASLt's ReLU mask).
    Bits,
}

/// Which vector a reduction sink produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VecAxis {
    /// Length M: one sum per row of D, over its columns (the gradient of a `bias_row`).
    Row,
    /// Length N: one sum per column of D, over its rows (the gradient of a `bias_col`).
    Col,
}

/// A sink: stores or reduces its operand and passes it through unchanged (like CUTLASS's
/// store nodes), so `relu(aux(x))` stores `x` and computes `relu(x)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sink {
    /// The aux output.
    Aux(AuxFormat),
    /// A sum into an fp32 vector (a bias gradient), over every batch separately.
    Bgrad(VecAxis),
}

/// A GEMM operand whose sum over k the tree asks for (cuBLASLt's BGRADA / BGRADB, in the
/// row-major view: see [`crate::epilogue::fusions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// `sum_k A[row, k]`: length M.
    A,
    /// `sum_k B[k, col]`: length N.
    B,
}

/// A node of the tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A leaf.
    Leaf(Leaf),
    /// `op(x)`.
    Unary(UnaryOp, Box<Expr>),
    /// `a op b`.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `a cmp b` over coordinates.
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// `select(pred, a, b)`: `a` where `pred` holds, else `b`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A sink that passes its operand through.
    Sink(Sink, Box<Expr>),
}

/// A whole epilogue: the expression stored to D (with its sinks inside), and the operand sums
/// over k computed beside the GEMM.
#[derive(Clone, Debug, PartialEq)]
pub struct EpilogueTree {
    /// The value stored to D.
    pub d: Expr,
    /// Operand sums over k (BGRADA / BGRADB), in the order given.
    pub sum_k: Vec<Operand>,
}

/// The deepest tree the checks accept (every pass over a tree recurses once per level).
pub const MAX_TREE_DEPTH: usize = 256;

/// The kind of a node's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An fp32 value.
    Value,
    /// An integer; `literal` when it involves no coordinate (then it may also be used as a
    /// value, exactly converted).
    Int {
        /// Made of integer constants only.
        literal: bool,
    },
    /// A boolean.
    Pred,
}

impl Expr {
    /// The kind of this node's result, or why the node is ill-formed: a coordinate used as a
    /// value, a predicate anywhere but a select's condition, a comparison of values, a sink
    /// under a select, a non-finite constant or clamp bound.
    ///
    /// Trees deeper than [`MAX_TREE_DEPTH`] are refused first (the passes over a tree recurse).
    pub fn kind(&self) -> Result<Kind> {
        let depth = self.depth();
        if depth > MAX_TREE_DEPTH {
            return Err(EpilogueError::Type {
                expr: format!("<a tree of depth {depth}>"),
                msg: format!("deeper than {MAX_TREE_DEPTH}"),
            });
        }
        self.kind_in(false)
    }

    fn kind_in(&self, under_select: bool) -> Result<Kind> {
        let err = |msg: &str| {
            Err(EpilogueError::Type {
                expr: self.to_string(),
                msg: msg.to_string(),
            })
        };
        match self {
            Expr::Leaf(Leaf::Coord(_)) => Ok(Kind::Int { literal: false }),
            Expr::Leaf(Leaf::Int(_)) => Ok(Kind::Int { literal: true }),
            Expr::Leaf(Leaf::Const(v)) => {
                if v.is_finite() {
                    Ok(Kind::Value)
                } else {
                    err("constants must be finite")
                }
            }
            Expr::Leaf(_) => Ok(Kind::Value),
            Expr::Unary(op, x) => {
                if let UnaryOp::Clamp { lo, hi } | UnaryOp::DClamp { lo, hi } = op {
                    if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                        return err("clamp bounds must be finite with lo <= hi");
                    }
                }
                match (op, x.kind_in(under_select)?) {
                    (UnaryOp::Neg, k @ Kind::Int { .. }) => Ok(k),
                    (_, Kind::Value | Kind::Int { literal: true }) => Ok(Kind::Value),
                    (_, Kind::Int { literal: false }) => err(
                        "a coordinate is used as a value; coordinates appear only in select predicates",
                    ),
                    (_, Kind::Pred) => err("a predicate is used as a value"),
                }
            }
            Expr::Binary(_, a, b) => match (a.kind_in(under_select)?, b.kind_in(under_select)?) {
                (Kind::Int { literal: la }, Kind::Int { literal: lb }) => {
                    Ok(Kind::Int { literal: la && lb })
                }
                (Kind::Pred, _) | (_, Kind::Pred) => err("a predicate is used as a value"),
                (Kind::Int { literal: false }, _) | (_, Kind::Int { literal: false }) => err(
                    "a coordinate is used as a value; coordinates appear only in select predicates",
                ),
                _ => Ok(Kind::Value),
            },
            Expr::Cmp(_, a, b) => match (a.kind_in(true)?, b.kind_in(true)?) {
                (Kind::Int { .. }, Kind::Int { .. }) => Ok(Kind::Pred),
                _ => err("predicates compare only coordinates (row, col, batch) and integers"),
            },
            Expr::Select(p, a, b) => {
                if p.kind_in(true)? != Kind::Pred {
                    return err("the first argument of select must be a comparison");
                }
                match (a.kind_in(true)?, b.kind_in(true)?) {
                    (Kind::Int { literal: la }, Kind::Int { literal: lb }) => {
                        Ok(Kind::Int { literal: la && lb })
                    }
                    (Kind::Pred, _) | (_, Kind::Pred) => err("select's branches must be values"),
                    (Kind::Int { literal: false }, _) | (_, Kind::Int { literal: false }) => {
                        err("select's branches mix a coordinate and a value")
                    }
                    _ => Ok(Kind::Value),
                }
            }
            Expr::Sink(_, x) => {
                if under_select {
                    return err("a sink (aux, aux_bits, bgrad) may not sit under a select");
                }
                match x.kind_in(under_select)? {
                    Kind::Value | Kind::Int { literal: true } => Ok(Kind::Value),
                    _ => err("a sink stores values only"),
                }
            }
        }
    }

    /// Calls `f` on every node, children before their parent, left to right.
    pub fn visit_post<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        match self {
            Expr::Leaf(_) => {}
            Expr::Unary(_, x) | Expr::Sink(_, x) => x.visit_post(f),
            Expr::Binary(_, a, b) | Expr::Cmp(_, a, b) => {
                a.visit_post(f);
                b.visit_post(f);
            }
            Expr::Select(p, a, b) => {
                p.visit_post(f);
                a.visit_post(f);
                b.visit_post(f);
            }
        }
        f(self);
    }

    /// Whether some node of the tree satisfies `pred`.
    pub fn any(&self, pred: &impl Fn(&Expr) -> bool) -> bool {
        let mut found = false;
        self.visit_post(&mut |e| found |= pred(e));
        found
    }

    /// Whether the tree reads leaf `leaf`.
    pub fn uses(&self, leaf: Leaf) -> bool {
        self.any(&|e| matches!(e, Expr::Leaf(l) if *l == leaf))
    }

    /// The sinks of the tree, in evaluation order.
    pub fn sinks(&self) -> Vec<Sink> {
        let mut out = Vec::new();
        self.visit_post(&mut |e| {
            if let Expr::Sink(s, _) = e {
                out.push(*s);
            }
        });
        out
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        let mut n = 0;
        self.visit_post(&mut |_| n += 1);
        n
    }

    /// Depth (a leaf has depth 1). Iterative: safe on any tree.
    pub fn depth(&self) -> usize {
        let mut stack = vec![(self, 1usize)];
        let mut max = 0;
        while let Some((e, d)) = stack.pop() {
            max = max.max(d);
            match e {
                Expr::Leaf(_) => {}
                Expr::Unary(_, x) | Expr::Sink(_, x) => stack.push((x, d + 1)),
                Expr::Binary(_, a, b) | Expr::Cmp(_, a, b) => {
                    stack.push((a, d + 1));
                    stack.push((b, d + 1));
                }
                Expr::Select(p, a, b) => {
                    stack.push((p, d + 1));
                    stack.push((a, d + 1));
                    stack.push((b, d + 1));
                }
            }
        }
        max
    }

    /// `self.op(other)`, boxed.
    fn bin(self, op: BinaryOp, other: Expr) -> Expr {
        Expr::Binary(op, Box::new(self), Box::new(other))
    }

    /// `op(self)`.
    pub fn unary(self, op: UnaryOp) -> Expr {
        Expr::Unary(op, Box::new(self))
    }

    /// `relu(self)`.
    pub fn relu(self) -> Expr {
        self.unary(UnaryOp::Relu)
    }

    /// `gelu(self)` (erf form).
    pub fn gelu(self) -> Expr {
        self.unary(UnaryOp::Gelu)
    }

    /// `gelu_tanh(self)`.
    pub fn gelu_tanh(self) -> Expr {
        self.unary(UnaryOp::GeluTanh)
    }

    /// `sigmoid(self)`.
    pub fn sigmoid(self) -> Expr {
        self.unary(UnaryOp::Sigmoid)
    }

    /// `tanh(self)`.
    pub fn tanh(self) -> Expr {
        self.unary(UnaryOp::Tanh)
    }

    /// `silu(self)`.
    pub fn silu(self) -> Expr {
        self.unary(UnaryOp::Silu)
    }

    /// `clamp(self, lo, hi)`.
    pub fn clamp(self, lo: f64, hi: f64) -> Expr {
        self.unary(UnaryOp::Clamp { lo, hi })
    }

    /// `max(self, other)`.
    pub fn max(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Max, other)
    }

    /// `min(self, other)`.
    pub fn min(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Min, other)
    }

    /// The rounding of `self` to `dtype`.
    pub fn round_to(self, dtype: DType) -> Expr {
        self.unary(UnaryOp::Round(dtype))
    }

    /// `aux(self)`: store `self` as the aux output in `format`, pass it on.
    pub fn store_aux(self, format: AuxFormat) -> Expr {
        Expr::Sink(Sink::Aux(format), Box::new(self))
    }

    /// `bgrad_row(self)` / `bgrad_col(self)`: sum `self` into a bias gradient, pass it on.
    pub fn bgrad(self, axis: VecAxis) -> Expr {
        Expr::Sink(Sink::Bgrad(axis), Box::new(self))
    }

    fn cmp(self, op: CmpOp, other: Expr) -> Expr {
        Expr::Cmp(op, Box::new(self), Box::new(other))
    }

    /// `self < other` (coordinates).
    pub fn lt(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Lt, other)
    }

    /// `self <= other` (coordinates).
    pub fn le(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Le, other)
    }

    /// `self > other` (coordinates).
    pub fn gt(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Gt, other)
    }

    /// `self >= other` (coordinates).
    pub fn ge(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Ge, other)
    }
}

impl std::ops::Add for Expr {
    type Output = Expr;
    fn add(self, rhs: Expr) -> Expr {
        self.bin(BinaryOp::Add, rhs)
    }
}

impl std::ops::Sub for Expr {
    type Output = Expr;
    fn sub(self, rhs: Expr) -> Expr {
        self.bin(BinaryOp::Sub, rhs)
    }
}

impl std::ops::Mul for Expr {
    type Output = Expr;
    fn mul(self, rhs: Expr) -> Expr {
        self.bin(BinaryOp::Mul, rhs)
    }
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        self.unary(UnaryOp::Neg)
    }
}

impl From<Leaf> for Expr {
    fn from(l: Leaf) -> Expr {
        Expr::Leaf(l)
    }
}

impl Expr {
    /// An integer constant (usable as a value, or compared with a coordinate).
    pub fn int(v: i64) -> Expr {
        Expr::Leaf(Leaf::Int(v))
    }

    /// A floating-point constant.
    pub fn num(v: f64) -> Expr {
        Expr::Leaf(Leaf::Const(v))
    }

    /// `select(pred, a, b)`: `a` where the coordinate predicate `pred` holds, else `b`.
    ///
    /// ```
    /// use tessera_kernels::epilogue::{Coord, Expr, Leaf};
    /// let acc = || Expr::from(Leaf::Acc);
    /// let row = Expr::from(Leaf::Coord(Coord::Row));
    /// let e = Expr::select(row.lt(Expr::int(100)), acc().sigmoid(), acc().tanh());
    /// assert_eq!(e.to_string(), "select(row < 100, sigmoid(acc), tanh(acc))");
    /// ```
    pub fn select(pred: Expr, a: Expr, b: Expr) -> Expr {
        Expr::Select(Box::new(pred), Box::new(a), Box::new(b))
    }
}

/// Leaf constructors, for building trees in code: `relu(alpha() * acc() + bias_col())` reads
/// as its text form.
pub mod build {
    #[cfg(test)]
    use super::Coord;
    use super::{Expr, Leaf};

    /// `acc`.
    pub fn acc() -> Expr {
        Expr::Leaf(Leaf::Acc)
    }
    /// `c`.
    pub fn c() -> Expr {
        Expr::Leaf(Leaf::C)
    }
    /// `alpha`.
    pub fn alpha() -> Expr {
        Expr::Leaf(Leaf::Alpha)
    }
    /// `beta`.
    pub fn beta() -> Expr {
        Expr::Leaf(Leaf::Beta)
    }
    /// `bias_row` (length M).
    pub fn bias_row() -> Expr {
        Expr::Leaf(Leaf::BiasRow)
    }
    /// `bias_col` (length N).
    pub fn bias_col() -> Expr {
        Expr::Leaf(Leaf::BiasCol)
    }
    /// `residual` (M x N).
    #[cfg(test)]
    pub fn residual() -> Expr {
        Expr::Leaf(Leaf::Residual)
    }
    /// `aux_in` (M x N).
    pub fn aux_in() -> Expr {
        Expr::Leaf(Leaf::AuxIn)
    }
    /// `aux_in_bits` (M x N bits).
    pub fn aux_in_bits() -> Expr {
        Expr::Leaf(Leaf::AuxInBits)
    }
    /// `row`.
    #[cfg(test)]
    pub fn row() -> Expr {
        Expr::Leaf(Leaf::Coord(Coord::Row))
    }
    /// `col`.
    #[cfg(test)]
    pub fn col() -> Expr {
        Expr::Leaf(Leaf::Coord(Coord::Col))
    }
    /// `batch`.
    #[cfg(test)]
    pub fn batch() -> Expr {
        Expr::Leaf(Leaf::Coord(Coord::Batch))
    }
    /// An integer constant.
    pub fn int(v: i64) -> Expr {
        Expr::Leaf(Leaf::Int(v))
    }
    /// A floating-point constant.
    pub fn num(v: f64) -> Expr {
        Expr::Leaf(Leaf::Const(v))
    }
    /// `select(pred, a, b)`.
    pub fn select(pred: Expr, a: Expr, b: Expr) -> Expr {
        Expr::Select(Box::new(pred), Box::new(a), Box::new(b))
    }
}

impl fmt::Display for Leaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leaf::Acc => f.write_str("acc"),
            Leaf::C => f.write_str("c"),
            Leaf::Alpha => f.write_str("alpha"),
            Leaf::Beta => f.write_str("beta"),
            Leaf::BiasRow => f.write_str("bias_row"),
            Leaf::BiasCol => f.write_str("bias_col"),
            Leaf::Residual => f.write_str("residual"),
            Leaf::AuxIn => f.write_str("aux_in"),
            Leaf::AuxInBits => f.write_str("aux_in_bits"),
            Leaf::Coord(Coord::Row) => f.write_str("row"),
            Leaf::Coord(Coord::Col) => f.write_str("col"),
            Leaf::Coord(Coord::Batch) => f.write_str("batch"),
            Leaf::Int(v) => write!(f, "{v}"),
            // `{:?}` always shows a decimal point or an exponent, so the text parses back
            // as a floating-point constant, never as an integer.
            Leaf::Const(v) => write!(f, "{v:?}"),
        }
    }
}

/// Binding strength in the text form: comparisons < `+ -` < `*` < prefix `-` < atoms.
fn prec(e: &Expr) -> u8 {
    match e {
        Expr::Cmp(..) => 1,
        Expr::Binary(BinaryOp::Add | BinaryOp::Sub, ..) => 2,
        Expr::Binary(BinaryOp::Mul, ..) => 3,
        Expr::Unary(UnaryOp::Neg, _) => 4,
        // A negative constant prints with its sign, which binds like a prefix minus.
        Expr::Leaf(Leaf::Int(v)) if *v < 0 => 4,
        Expr::Leaf(Leaf::Const(v)) if v.is_sign_negative() => 4,
        _ => 5,
    }
}

fn write_operand(f: &mut fmt::Formatter<'_>, e: &Expr, paren: bool) -> fmt::Result {
    if paren {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

fn fmt_num(f: &mut fmt::Formatter<'_>, v: f64) -> fmt::Result {
    write!(f, "{v:?}")
}

impl fmt::Display for Expr {
    /// The text form that [`crate::epilogue::parse_epilogue`] reads back to the same tree.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Leaf(l) => write!(f, "{l}"),
            Expr::Unary(UnaryOp::Neg, x) => {
                f.write_str("-")?;
                // The parser folds a minus into the number after it, and `-0` folds to the
                // integer 0: a minus over the integer 0 is what `--0` reads as, and it
                // prints so rather than as `-(0)`, whose parentheses cost one more level
                // than the text it was read from.
                if let Expr::Leaf(Leaf::Int(0)) = **x {
                    return f.write_str("-0");
                }
                // `-(1.0)` and `-(a + b)`: a bare `-1.0` would read back as a constant, and
                // the minus binds tighter than a sum. A nested minus, or a negative constant
                // printed with its sign, needs no parentheses (`--x` reads back as -(-x),
                // `--1.5` as -(-1.5)): each minus then costs the parser one level of nesting,
                // as it did when parsed. The parentheses of `-(1.0)` stand for ones the text
                // had (a folded constant is negative, or the integer 0 above), so every tree
                // the parser accepts prints as text nested no deeper, which it accepts again.
                let signed = match &**x {
                    Expr::Unary(UnaryOp::Neg, _) => true,
                    Expr::Leaf(Leaf::Int(v)) => *v < 0,
                    Expr::Leaf(Leaf::Const(v)) => v.is_sign_negative(),
                    _ => false,
                };
                let literal = matches!(**x, Expr::Leaf(Leaf::Int(_) | Leaf::Const(_)));
                let paren = !signed && (prec(x) <= 4 || literal);
                write_operand(f, x, paren)
            }
            Expr::Unary(op @ (UnaryOp::Clamp { lo, hi } | UnaryOp::DClamp { lo, hi }), x) => {
                write!(f, "{}({x}, ", op.name())?;
                fmt_num(f, *lo)?;
                f.write_str(", ")?;
                fmt_num(f, *hi)?;
                f.write_str(")")
            }
            Expr::Unary(op, x) => write!(f, "{}({x})", op.name()),
            Expr::Binary(op @ (BinaryOp::Max | BinaryOp::Min), a, b) => {
                let name = if *op == BinaryOp::Max { "max" } else { "min" };
                write!(f, "{name}({a}, {b})")
            }
            Expr::Binary(op, a, b) => {
                let p = prec(self);
                write_operand(f, a, prec(a) < p)?;
                f.write_str(match op {
                    BinaryOp::Add => " + ",
                    BinaryOp::Sub => " - ",
                    _ => " * ",
                })?;
                write_operand(f, b, prec(b) <= p)
            }
            Expr::Cmp(op, a, b) => {
                write_operand(f, a, prec(a) <= 1)?;
                write!(f, " {} ", op.symbol())?;
                write_operand(f, b, prec(b) <= 1)
            }
            Expr::Select(p, a, b) => write!(f, "select({p}, {a}, {b})"),
            Expr::Sink(Sink::Aux(AuxFormat::Bits), x) => write!(f, "aux_bits({x})"),
            Expr::Sink(Sink::Aux(AuxFormat::Full(None)), x) => write!(f, "aux({x})"),
            Expr::Sink(Sink::Aux(AuxFormat::Full(Some(t))), x) => write!(f, "aux({x}, {t})"),
            Expr::Sink(Sink::Bgrad(VecAxis::Row), x) => write!(f, "bgrad_row({x})"),
            Expr::Sink(Sink::Bgrad(VecAxis::Col), x) => write!(f, "bgrad_col({x})"),
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operand::A => "sum_k_a",
            Operand::B => "sum_k_b",
        })
    }
}

impl fmt::Display for EpilogueTree {
    /// `EXPR` followed by `; sum_k_a` / `; sum_k_b` for each operand sum. A bare `c` or `beta`
    /// prints in parentheses: alone, those words are the comma list's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sum_k.is_empty() && matches!(self.d, Expr::Leaf(Leaf::C | Leaf::Beta)) {
            return write!(f, "({})", self.d);
        }
        write!(f, "{}", self.d)?;
        for o in &self.sum_k {
            write!(f, "; {o}")?;
        }
        Ok(())
    }
}

impl Expr {
    /// The same epilogue seen on the transposed output `Dᵀ = Bᵀ Aᵀ`: rows and columns swap,
    /// so `bias_row` and `bias_col`, the `row` and `col` coordinates and the two reduction
    /// axes swap; everything else is element-wise and stays.
    pub fn transposed(&self) -> Expr {
        let swap_axis = |a: VecAxis| match a {
            VecAxis::Row => VecAxis::Col,
            VecAxis::Col => VecAxis::Row,
        };
        match self {
            Expr::Leaf(l) => Expr::Leaf(match *l {
                Leaf::BiasRow => Leaf::BiasCol,
                Leaf::BiasCol => Leaf::BiasRow,
                Leaf::Coord(Coord::Row) => Leaf::Coord(Coord::Col),
                Leaf::Coord(Coord::Col) => Leaf::Coord(Coord::Row),
                other => other,
            }),
            Expr::Unary(op, x) => Expr::Unary(*op, Box::new(x.transposed())),
            Expr::Binary(op, a, b) => {
                Expr::Binary(*op, Box::new(a.transposed()), Box::new(b.transposed()))
            }
            Expr::Cmp(op, a, b) => {
                Expr::Cmp(*op, Box::new(a.transposed()), Box::new(b.transposed()))
            }
            Expr::Select(p, a, b) => Expr::Select(
                Box::new(p.transposed()),
                Box::new(a.transposed()),
                Box::new(b.transposed()),
            ),
            Expr::Sink(Sink::Bgrad(a), x) => {
                Expr::Sink(Sink::Bgrad(swap_axis(*a)), Box::new(x.transposed()))
            }
            Expr::Sink(s, x) => Expr::Sink(*s, Box::new(x.transposed())),
        }
    }
}

impl EpilogueTree {
    /// A tree with no operand sums.
    pub fn new(d: Expr) -> EpilogueTree {
        EpilogueTree {
            d,
            sum_k: Vec::new(),
        }
    }

    /// The tree of the transposed product (see [`Expr::transposed`]): `Dᵀ = Bᵀ Aᵀ`, whose A
    /// is the given Bᵀ, so the operand sums swap too (`sum_k_a`, over the rows of the given
    /// A, is then a sum over the columns of the kernel's B).
    ///
    /// ```
    /// use tessera_kernels::epilogue::parse_epilogue;
    /// let t = parse_epilogue("bgrad_col(select(row < 4, relu(acc + bias_row), acc)); sum_k_a").unwrap();
    /// assert_eq!(
    ///     t.transposed().to_string(),
    ///     "bgrad_row(select(col < 4, relu(acc + bias_col), acc)); sum_k_b"
    /// );
    /// assert_eq!(t.transposed().transposed(), t);
    /// ```
    pub fn transposed(&self) -> EpilogueTree {
        EpilogueTree {
            d: self.d.transposed(),
            sum_k: self
                .sum_k
                .iter()
                .map(|o| match o {
                    Operand::A => Operand::B,
                    Operand::B => Operand::A,
                })
                .collect(),
        }
    }

    /// Checks the kinds of every node (see [`Expr::kind`]), that D is a value, and the
    /// structural limits every kernel shares: at most one aux output, at most one reduction
    /// per axis, not both `aux_in` and `aux_in_bits`, each operand sum at most once.
    pub fn check_structure(&self) -> Result<()> {
        match self.d.kind()? {
            Kind::Value | Kind::Int { literal: true } => {}
            _ => {
                return Err(EpilogueError::Type {
                    expr: self.d.to_string(),
                    msg: "D must be a value (a coordinate or predicate cannot be stored)".into(),
                })
            }
        }
        let sinks = self.d.sinks();
        let count = |p: &dyn Fn(&Sink) -> bool| sinks.iter().filter(|s| p(s)).count();
        let unsupported = |msg: String| Err(EpilogueError::Unsupported { msg });
        if count(&|s| matches!(s, Sink::Aux(_))) > 1 {
            return unsupported(format!("`{}` has more than one aux output", self.d));
        }
        for axis in [VecAxis::Row, VecAxis::Col] {
            if count(&|s| *s == Sink::Bgrad(axis)) > 1 {
                return unsupported(format!(
                    "`{}` has more than one {} reduction",
                    self.d,
                    if axis == VecAxis::Row {
                        "bgrad_row"
                    } else {
                        "bgrad_col"
                    }
                ));
            }
        }
        if self.d.uses(Leaf::AuxIn) && self.d.uses(Leaf::AuxInBits) {
            return unsupported(format!("`{}` reads both aux_in and aux_in_bits", self.d));
        }
        for o in [Operand::A, Operand::B] {
            if self.sum_k.iter().filter(|&&x| x == o).count() > 1 {
                return unsupported(format!("{o} is asked for twice"));
            }
        }
        Ok(())
    }
}

/// `e` with its bit-mask aux store (`aux_bits`) turned into an fp32 store: the values the
/// bits test, for checking a mask away from its ties.
///
/// ```
/// use tessera_kernels::epilogue::{bits_to_full, parse_epilogue};
/// let t = parse_epilogue("relu_aux_bias").unwrap();
/// assert!(t.d.to_string().contains("aux_bits"));
/// assert!(!bits_to_full(&t.d).to_string().contains("aux_bits"));
/// ```
pub fn bits_to_full(e: &Expr) -> Expr {
    match e {
        Expr::Leaf(_) => e.clone(),
        Expr::Sink(Sink::Aux(AuxFormat::Bits), x) => {
            bits_to_full(x).store_aux(AuxFormat::Full(Some(DType::F32)))
        }
        Expr::Sink(s, x) => Expr::Sink(*s, Box::new(bits_to_full(x))),
        Expr::Unary(op, x) => Expr::Unary(*op, Box::new(bits_to_full(x))),
        Expr::Binary(op, a, b) => {
            Expr::Binary(*op, Box::new(bits_to_full(a)), Box::new(bits_to_full(b)))
        }
        Expr::Cmp(op, a, b) => Expr::Cmp(*op, Box::new(bits_to_full(a)), Box::new(bits_to_full(b))),
        Expr::Select(p, a, b) => Expr::Select(
            p.clone(),
            Box::new(bits_to_full(a)),
            Box::new(bits_to_full(b)),
        ),
    }
}
