//! CUDA code generation: a tree becomes one deterministic `__device__ __forceinline__`
//! function, `tessera_ep_element`, plus two constants that switch the reduction hooks on.
//!
//! # The interface a kernel calls
//!
//! The source is, in order: the device helpers of `common.cuh`, [`EPILOGUE_TREE_CUH`] (the
//! argument struct `TesseraEpArgs`, the per-CTA reduction state `TesseraEpCta`, the math
//! helpers), the generated part ([`generate`]), then [`EPILOGUE_TREE_TAIL_CUH`]:
//!
//! - `float tessera_ep_element(const TesseraEpArgs& a, TesseraEpCta& cta, int b, int lrow,
//!   int lcol, float acc)`: one element at launch-relative `(lrow, lcol)` of batch `b`; writes
//!   the aux output and adds to the reductions; returns D's value (not stored).
//! - `void tessera_ep_pair(a, cta, b, lrow, lcol, acc0, acc1)`: elements `lcol` and `lcol + 1`
//!   (the latter when inside the launch), and D's stores, two at a time when `a.d_pair`. This is
//!   the drop-in for the sm80 kernel's `tessera_epilogue_pair(p, C, D, bias, aux, row, col, v0,
//!   v1)` (with `v0`, `v1` the raw accumulators: alpha is a leaf of the tree).
//! - `tessera_ep_smem_floats(tile_rows, tile_cols)`, `tessera_ep_cta_begin(cta, smem, ...)`,
//!   `__syncthreads()`, the elements, `__syncthreads()`, `tessera_ep_cta_end(a, cta, b, tid,
//!   nthreads)`: per-CTA partial sums of `bgrad_row` / `bgrad_col` in shared memory, then one
//!   fp32 `atomicAdd` per row or column into the workspace (zeroed by the host). Without the
//!   hooks (`cta.row_sum == cta.col_sum == nullptr`) each element adds to global memory.
//!
//! [`apply_kernel_source`] wraps all of it in `tessera_epilogue_apply`, a kernel that applies
//! the epilogue to an fp32 matrix standing for the accumulators: the GPU check of a tree that
//! needs no GEMM. Trees with operand sums add `tessera_ep_operand_sum` ([`OPERAND_SUM_CUH`]).
//!
//! Values are fp32; coordinates `long long`. A select is an `if`: only the side taken is
//! computed (a predicate uniform per tile keeps warps from diverging, see
//! [`super::coord`]). Identical sub-trees are computed once.

use std::collections::HashMap;
use std::fmt::Write;

use crate::codegen::{preamble, COMMON_CUH, GEMM_SM80_CUH};
use crate::plan::problem::DType;
use crate::plan::GemmPlan;

use super::error::{EpilogueError, Result};
use super::tree::{
    AuxFormat, BinaryOp, Coord, EpilogueTree, Expr, Kind, Leaf, Sink, UnaryOp, VecAxis,
};

/// The fixed part in front of the generated function.
pub const EPILOGUE_TREE_CUH: &str = include_str!("epilogue_tree.cuh");
/// The fixed functions after the generated one (pair, CTA hooks).
pub const EPILOGUE_TREE_TAIL_CUH: &str = include_str!("epilogue_tree_tail.cuh");
/// The stand-alone epilogue kernel `tessera_epilogue_apply`.
#[cfg(test)]
pub const EPILOGUE_APPLY_CUH: &str = include_str!("epilogue_apply.cuh");
/// The operand-sum kernel `tessera_ep_operand_sum` (BGRADA / BGRADB).
pub const OPERAND_SUM_CUH: &str = include_str!("operand_sum.cuh");

/// The dtype code of the kernels (0 bf16, 1 fp16, 2 fp32).
fn code(t: DType) -> i32 {
    t.code()
}

fn float_lit(v: f64, e: &Expr) -> Result<String> {
    let f = v as f32;
    if !f.is_finite() {
        return Err(EpilogueError::Type {
            expr: e.to_string(),
            msg: format!("constant {v:?} does not fit fp32"),
        });
    }
    let s = format!("{f:?}");
    // `{:?}` of f32 always has a `.` or an exponent, so the suffix makes a float literal.
    Ok(if f.is_sign_negative() {
        format!("({s}f)")
    } else {
        format!("{s}f")
    })
}

fn int_lit(v: i64) -> String {
    if v == i64::MIN {
        "(-9223372036854775807LL - 1)".to_string()
    } else if v < 0 {
        format!("({v}LL)")
    } else {
        format!("{v}LL")
    }
}

/// The most select predicates a kernel can fix per block ([`hoisted_predicates`]): each adds
/// a factor of two to the instantiations of the block's element code.
pub const MAX_HOISTED: usize = 2;

/// A select predicate the kernel may decide once per block of elements: `coord < at` (or its
/// negation, `coord >= at`), so that its value over a block of rows `[r_lo, r_hi]` and columns
/// `[c_lo, c_hi]` is uniform when it is the same at the two corners.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoistedPredicate {
    /// The predicate as the tree prints it (the key of the generated code's memo).
    pub text: String,
    /// The boundary it compares with.
    pub boundary: super::coord::Boundary,
    /// `true` when the predicate is `coord < at`, `false` when it is `coord >= at`.
    pub below: bool,
}

/// The select predicates of `tree` that the generated code lets a kernel fix per block, in
/// order of first appearance (post-order), at most [`MAX_HOISTED`]: those on one coordinate
/// against a constant. Other predicates stay evaluated per element.
pub fn hoisted_predicates(tree: &EpilogueTree) -> Vec<HoistedPredicate> {
    let mut out: Vec<HoistedPredicate> = Vec::new();
    tree.d.visit_post(&mut |e| {
        if let Expr::Select(p, _, _) = e {
            if let Expr::Cmp(op, a, b) = &**p {
                if let Some((boundary, below)) = super::coord::half_plane_sense(*op, a, b) {
                    let text = p.to_string();
                    if out.len() < MAX_HOISTED && !out.iter().any(|h| h.text == text) {
                        out.push(HoistedPredicate {
                            text,
                            boundary,
                            below,
                        });
                    }
                }
            }
        }
    });
    out
}

struct Gen {
    body: String,
    memo: HashMap<String, (String, Kind)>,
    next: usize,
    /// The predicates a block may fix (their index is their bit of `kCase - 1`).
    hoisted: Vec<HoistedPredicate>,
}

/// `(s, k)` as a float: an integer expression converted.
fn as_value((s, k): (String, Kind)) -> String {
    match k {
        Kind::Int { .. } => format!("static_cast<float>({s})"),
        _ => s,
    }
}

/// The C++ expression of leaf `l` (of the expression `e`, for errors).
fn leaf_text(l: &Leaf, e: &Expr) -> Result<String> {
    let at = |bs: &str, ld: &str| format!("tessera_ep_at(a.{bs}, a.{ld}, b, row, col)");
    Ok(match l {
        Leaf::Acc => "acc".to_string(),
        Leaf::Alpha => "a.alpha".to_string(),
        Leaf::Beta => "a.beta".to_string(),
        Leaf::Int(v) => int_lit(*v),
        Leaf::Const(v) => float_lit(*v, e)?,
        // Literals and scalars need no variable.
        Leaf::C => format!(
            "(TESSERA_EP_READ_C ? tessera_ep_in(cta.staged_c, cta.in_c, a.c, {}, TESSERA_EP_DT_C) : 0.0f)",
            at("batch_c", "ldc")
        ),
        Leaf::Residual => {
            format!(
                "tessera_ep_in(cta.staged_r, cta.in_r, a.residual, {}, TESSERA_EP_DT_R)",
                at("batch_r", "ldr")
            )
        }
        Leaf::AuxIn => format!(
            "tessera_ep_in(cta.staged_x, cta.in_x, a.aux_in, {}, TESSERA_EP_DT_AUX_IN)",
            at("batch_aux_in", "ld_aux_in")
        ),
        Leaf::AuxInBits => format!(
            "tessera_ep_in_bit(cta.staged_xb, cta.in_xw, lcol, a.aux_in, {})",
            at("batch_aux_in", "ld_aux_in")
        ),
        Leaf::BiasRow => {
            "tessera_ep_in(cta.staged_br, cta.in_br, a.bias_row, b * a.batch_bias_row + row, TESSERA_EP_DT_BIAS_ROW)"
                .to_string()
        }
        Leaf::BiasCol => {
            "tessera_ep_in(cta.staged_bc, cta.in_bc, a.bias_col, b * a.batch_bias_col + col, TESSERA_EP_DT_BIAS_COL)"
                .to_string()
        }
        Leaf::Coord(Coord::Row) => "static_cast<long long>(row)".to_string(),
        Leaf::Coord(Coord::Col) => "static_cast<long long>(col)".to_string(),
        Leaf::Coord(Coord::Batch) => "static_cast<long long>(b)".to_string(),
    })
}

/// The C++ expression of `op` applied to the emitted operand `xs` (of the expression `e`,
/// for errors).
fn unary_text(op: &UnaryOp, xs: (String, Kind), e: &Expr) -> Result<String> {
    if let (UnaryOp::Neg, Kind::Int { .. }) = (op, xs.1) {
        return Ok(format!("-{}", xs.0));
    }
    let x = as_value(xs);
    Ok(match op {
        UnaryOp::Neg => format!("-{x}"),
        UnaryOp::Relu => format!("fmaxf({x}, 0.0f)"),
        UnaryOp::Gelu => format!("tessera_ep_gelu({x})"),
        UnaryOp::GeluTanh => format!("tessera_ep_gelu_tanh({x})"),
        UnaryOp::Sigmoid => format!("tessera_ep_sigmoid({x})"),
        UnaryOp::Tanh => format!("tessera_ep_tanh({x})"),
        UnaryOp::Silu => format!("{x} * tessera_ep_sigmoid({x})"),
        UnaryOp::Clamp { lo, hi } => {
            format!(
                "fminf(fmaxf({x}, {}), {})",
                float_lit(*lo, e)?,
                float_lit(*hi, e)?
            )
        }
        UnaryOp::DRelu => format!("({x} > 0.0f ? 1.0f : 0.0f)"),
        UnaryOp::DGelu => format!("tessera_ep_dgelu({x})"),
        UnaryOp::DGeluTanh => format!("tessera_ep_dgelu_tanh({x})"),
        UnaryOp::DSigmoid => format!("tessera_ep_dsigmoid({x})"),
        UnaryOp::DTanh => format!("tessera_ep_dtanh({x})"),
        UnaryOp::DSilu => format!("tessera_ep_dsilu({x})"),
        UnaryOp::DClamp { lo, hi } => format!(
            "({x} > {} && {x} < {} ? 1.0f : 0.0f)",
            float_lit(*lo, e)?,
            float_lit(*hi, e)?
        ),
        UnaryOp::Round(DType::F32) => x,
        UnaryOp::Round(t) => format!("tessera_ep_round({x}, {})", code(*t)),
    })
}

/// The C++ expression of `a op b` of kind `kind`, from the emitted operands `xa`, `xb`.
fn binary_text(
    op: &BinaryOp,
    (a, b): (&Expr, &Expr),
    xa: (String, Kind),
    xb: (String, Kind),
    kind: Kind,
) -> String {
    if let Kind::Int { .. } = kind {
        let (x, y) = (xa.0, xb.0);
        return match op {
            BinaryOp::Add => format!("{x} + {y}"),
            BinaryOp::Sub => format!("{x} - {y}"),
            BinaryOp::Mul => format!("{x} * {y}"),
            BinaryOp::Max => format!("({x} > {y} ? {x} : {y})"),
            BinaryOp::Min => format!("({x} < {y} ? {x} : {y})"),
        };
    }
    let (x, y) = (as_value(xa), as_value(xb));
    // beta * C: no term at all where C is not read (beta == 0), as in BLAS,
    // rather than 0 * beta (which the compiler cannot drop: beta might be inf);
    // -0 is what x + (-0) leaves as x, so the sum folds away too.
    let beta_c = matches!(
        (a, b),
        (Expr::Leaf(Leaf::Beta), Expr::Leaf(Leaf::C))
            | (Expr::Leaf(Leaf::C), Expr::Leaf(Leaf::Beta))
    );
    match op {
        BinaryOp::Mul if beta_c => {
            format!("(TESSERA_EP_READ_C ? {x} * {y} : -0.0f)")
        }
        BinaryOp::Add => format!("{x} + {y}"),
        BinaryOp::Sub => format!("{x} - {y}"),
        BinaryOp::Mul => format!("{x} * {y}"),
        BinaryOp::Max => format!("fmaxf({x}, {y})"),
        BinaryOp::Min => format!("fminf({x}, {y})"),
    }
}

impl Gen {
    /// Emits `e` and returns its C++ expression (a variable or a literal) and kind.
    fn emit(&mut self, e: &Expr) -> Result<(String, Kind)> {
        let key = e.to_string();
        if let Some(v) = self.memo.get(&key) {
            return Ok(v.clone());
        }
        let kind = e.kind()?;
        let rhs: String = match e {
            Expr::Leaf(l) => {
                let s = leaf_text(l, e)?;
                if matches!(
                    l,
                    Leaf::Acc | Leaf::Alpha | Leaf::Beta | Leaf::Int(_) | Leaf::Const(_)
                ) {
                    self.memo.insert(key, (s.clone(), kind));
                    return Ok((s, kind));
                }
                s
            }
            Expr::Unary(op, x) => {
                let xs = self.emit(x)?;
                unary_text(op, xs, e)?
            }
            Expr::Binary(op, a, b) => {
                let (xa, xb) = (self.emit(a)?, self.emit(b)?);
                binary_text(op, (&**a, &**b), xa, xb, kind)
            }
            Expr::Cmp(op, a, b) => {
                let (xa, xb) = (self.emit(a)?, self.emit(b)?);
                format!("{} {} {}", xa.0, op.symbol(), xb.0)
            }
            Expr::Select(p, a, b) => return self.emit_select(key, kind, p, [&**a, &**b]),
            Expr::Sink(s, x) => return self.emit_sink(key, s, x),
        };
        let ty = match kind {
            Kind::Value => "float",
            Kind::Int { .. } => "long long",
            Kind::Pred => "bool",
        };
        let name = format!("v{}", self.next);
        self.next += 1;
        let _ = writeln!(self.body, "  const {ty} {name} = {rhs};");
        self.memo.insert(key, (name.clone(), kind));
        Ok((name, kind))
    }

    /// Emits `select(p, sides[0], sides[1])` (text `key`, of kind `kind`) as a variable set in
    /// a branch per side: only the chosen side is computed, and a predicate that is uniform
    /// over a tile (coord::analyze) keeps every warp on one side.
    fn emit_select(
        &mut self,
        key: String,
        kind: Kind,
        p: &Expr,
        sides: [&Expr; 2],
    ) -> Result<(String, Kind)> {
        let xp = self.emit(p)?;
        let ty = if let Kind::Int { .. } = kind {
            "long long"
        } else {
            "float"
        };
        let name = format!("v{}", self.next);
        self.next += 1;
        let _ = writeln!(self.body, "  {ty} {name};");
        let ptext = p.to_string();
        match self.hoisted.iter().position(|h| h.text == ptext) {
            // kCase != 0: the caller's block has this predicate fixed, as bit j of
            // kCase - 1; the branch then folds away at compile time.
            Some(j) => writeln!(
                self.body,
                "  if (kCase ? (((kCase - 1) >> {j}) & 1) != 0 : {}) {{",
                xp.0
            ),
            None => writeln!(self.body, "  if ({}) {{", xp.0),
        }
        .expect("writing to a String");
        for (i, side) in sides.into_iter().enumerate() {
            if i == 1 {
                let _ = writeln!(self.body, "  }} else {{");
            }
            // A side's values are computed inside its branch: none is shared with the other
            // side or with what follows.
            let saved_memo = self.memo.clone();
            let outer = std::mem::take(&mut self.body);
            let x = self.emit(side)?;
            let x = if ty == "float" { as_value(x) } else { x.0 };
            let inner = std::mem::replace(&mut self.body, outer);
            for line in inner.lines() {
                let _ = writeln!(self.body, "  {line}");
            }
            let _ = writeln!(self.body, "    {name} = {x};");
            self.memo = saved_memo;
        }
        let _ = writeln!(self.body, "  }}");
        self.memo.insert(key, (name.clone(), kind));
        Ok((name, kind))
    }

    /// Emits the store or reduction of sink `s` of `x` (text `key`); its value is `x`'s.
    fn emit_sink(&mut self, key: String, s: &Sink, x: &Expr) -> Result<(String, Kind)> {
        let v = as_value(self.emit(x)?);
        let at = "tessera_ep_at(a.batch_aux, a.ldaux, b, row, col)";
        let _ = match s {
            Sink::Aux(AuxFormat::Bits) => writeln!(
                self.body,
                "  tessera_ep_store_bit(a, cta, lcol, {at}, {v} > 0.0f);  // aux_bits"
            ),
            Sink::Aux(AuxFormat::Full(None)) => {
                writeln!(
                    self.body,
                    "  tessera_ep_store_aux(a, cta, {at}, {v}, TESSERA_EP_DT_D);  // aux"
                )
            }
            Sink::Aux(AuxFormat::Full(Some(t))) => writeln!(
                self.body,
                "  tessera_ep_store_aux(a, cta, {at}, {v}, {});  // aux, {t}",
                code(*t)
            ),
            Sink::Bgrad(VecAxis::Row) => {
                writeln!(
                    self.body,
                    "  tessera_ep_add_row(a, cta, b, lrow, {v});  // bgrad_row"
                )
            }
            Sink::Bgrad(VecAxis::Col) => {
                writeln!(
                    self.body,
                    "  tessera_ep_add_col(a, cta, b, lcol, {v});  // bgrad_col"
                )
            }
        };
        self.memo.insert(key, (v.clone(), Kind::Value));
        Ok((v, Kind::Value))
    }
}

/// The generated part for `tree`: the reduction switches and `tessera_ep_element`.
/// Deterministic: the same tree gives the same text.
///
/// For `relu(acc + bias_col)` it holds `const float v1 = acc + v0;` and `fmaxf(v1, 0.0f)`.
pub fn generate(tree: &EpilogueTree) -> Result<String> {
    tree.check_structure()?;
    let hoisted = hoisted_predicates(tree);
    let mut g = Gen {
        body: String::new(),
        memo: HashMap::new(),
        next: 0,
        hoisted: hoisted.clone(),
    };
    let (d, kind) = g.emit(&tree.d)?;
    let d = match kind {
        Kind::Int { .. } => format!("static_cast<float>({d})"),
        _ => d,
    };
    let sinks = tree.d.sinks();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// ---- generated by tessera from the epilogue tree; do not edit ----"
    );
    let _ = writeln!(s, "// D = {}", tree.d);
    for o in &tree.sum_k {
        let _ = writeln!(
            s,
            "// and {o} (tessera_ep_operand_sum, launched beside the GEMM)"
        );
    }
    let _ = writeln!(
        s,
        "constexpr bool kTesseraEpRowSum = {}, kTesseraEpColSum = {}, kTesseraEpBits = {};",
        sinks.contains(&Sink::Bgrad(VecAxis::Row)),
        sinks.contains(&Sink::Bgrad(VecAxis::Col)),
        sinks.contains(&Sink::Aux(AuxFormat::Bits))
    );
    // A full aux output's type, for a kernel that stores it itself (the Hopper fragment path
    // captures the value, `tessera_ep_store_aux`).
    let aux_full = sinks.iter().find_map(|k| match k {
        Sink::Aux(AuxFormat::Full(t)) => Some(*t),
        _ => None,
    });
    let _ = writeln!(
        s,
        "constexpr bool kTesseraEpAuxFull = {};",
        aux_full.is_some()
    );
    // Whether the tree reads a mask, whose words a kernel may preload (the Hopper fragment
    // path).
    let _ = writeln!(
        s,
        "constexpr bool kTesseraEpBitsIn = {};",
        tree.d.uses(Leaf::AuxInBits)
    );
    // Which bias vectors and full inputs the tree reads (a kernel may stage them: the Hopper
    // fragment path).
    let _ = writeln!(
        s,
        "constexpr bool kTesseraEpBiasRow = {}, kTesseraEpBiasCol = {};",
        tree.d.uses(Leaf::BiasRow),
        tree.d.uses(Leaf::BiasCol)
    );
    let _ = writeln!(
        s,
        "constexpr bool kTesseraEpLeafC = {}, kTesseraEpLeafR = {}, kTesseraEpLeafX = {};",
        tree.d.uses(Leaf::C),
        tree.d.uses(Leaf::Residual),
        tree.d.uses(Leaf::AuxIn)
    );
    let _ = writeln!(
        s,
        "__device__ __forceinline__ int tessera_ep_aux_dtype(const TesseraEpArgs& a) {{ (void)a; return {}; }}",
        match aux_full {
            Some(Some(t)) => code(t).to_string(),
            _ => "TESSERA_EP_DT_D".to_string(),
        }
    );
    block_case(&mut s, &hoisted);
    let _ = writeln!(
        s,
        "template <int kCase = 0>\n__device__ __forceinline__ float tessera_ep_element(const TesseraEpArgs& a, TesseraEpCta& cta,\n                                                   int b, int lrow, int lcol, float acc) {{"
    );
    let _ = writeln!(s, "  const int row = a.row0 + lrow, col = a.col0 + lcol;");
    let _ = writeln!(s, "  (void)row; (void)col; (void)cta;");
    s.push_str(&g.body);
    let _ = writeln!(s, "  return {d};");
    let _ = writeln!(s, "}}");
    let _ = writeln!(s, "// ---- end of generated epilogue ----");
    Ok(s)
}

/// `kTesseraEpSides` and `tessera_ep_block_case`: which case of `tessera_ep_element<kCase>` a
/// block of elements may use. Case 0 evaluates every predicate per element; case `1 + v`
/// fixes hoisted predicate `j` to bit `j` of `v`, which is right for a block where each of them
/// has one value: a half-plane on one coordinate is uniform over a block exactly when it has
/// the same value at the block's first and last row and column.
fn block_case(s: &mut String, hoisted: &[HoistedPredicate]) {
    let _ = writeln!(
        s,
        "constexpr int kTesseraEpSides = {};  // select predicates a block may fix\n#define TESSERA_EP_SIDES {}",
        hoisted.len(),
        hoisted.len()
    );
    let _ = writeln!(
        s,
        "// The case of tessera_ep_element for launch-relative rows [lr0, lr1] x columns [lc0, lc1]\n// of batch b: 0 when a hoisted predicate changes value inside, else 1 + their values' bits."
    );
    let _ = writeln!(
        s,
        "__device__ __forceinline__ int tessera_ep_block_case(const TesseraEpArgs& a, int b, int lr0, int lr1,\n                                                     int lc0, int lc1) {{"
    );
    if hoisted.is_empty() {
        let _ = writeln!(
            s,
            "  (void)a; (void)b; (void)lr0; (void)lr1; (void)lc0; (void)lc1;"
        );
        let _ = writeln!(s, "  return 0;");
    } else {
        let _ = writeln!(s, "  int v = 0;");
        for (j, h) in hoisted.iter().enumerate() {
            let (lo, hi) = match h.boundary.coord {
                Coord::Row => (
                    "static_cast<long long>(a.row0) + lr0",
                    "static_cast<long long>(a.row0) + lr1",
                ),
                Coord::Col => (
                    "static_cast<long long>(a.col0) + lc0",
                    "static_cast<long long>(a.col0) + lc1",
                ),
                Coord::Batch => ("static_cast<long long>(b)", "static_cast<long long>(b)"),
            };
            let op = if h.below { "<" } else { ">=" };
            let at = int_lit(h.boundary.at);
            let _ = writeln!(s, "  {{  // {}", h.text);
            let _ = writeln!(
                s,
                "    const bool lo = {lo} {op} {at}, hi = {hi} {op} {at};"
            );
            let _ = writeln!(s, "    if (lo != hi) return 0;");
            let _ = writeln!(s, "    v |= static_cast<int>(lo) << {j};");
            let _ = writeln!(s, "  }}");
        }
        let _ = writeln!(s, "  return 1 + v;");
    }
    let _ = writeln!(s, "}}");
}

/// The epilogue as a kernel includes it: [`EPILOGUE_TREE_CUH`], [`generate`]'s output and
/// [`EPILOGUE_TREE_TAIL_CUH`] (and the operand-sum kernel when the tree asks for one). Needs
/// `common.cuh` in front.
pub fn epilogue_source(tree: &EpilogueTree) -> Result<String> {
    let mut s = String::new();
    s.push_str(EPILOGUE_TREE_CUH);
    s.push('\n');
    s.push_str(&generate(tree)?);
    s.push('\n');
    s.push_str(EPILOGUE_TREE_TAIL_CUH);
    if !tree.sum_k.is_empty() {
        s.push('\n');
        s.push_str(OPERAND_SUM_CUH);
    }
    Ok(s)
}

/// A self-contained source for NVRTC: `common.cuh`, [`epilogue_source`] and the stand-alone
/// kernel `tessera_epilogue_apply` ([`EPILOGUE_APPLY_CUH`]).
#[cfg(test)]
pub fn apply_kernel_source(tree: &EpilogueTree) -> Result<String> {
    let mut s = String::new();
    let _ = writeln!(s, "// tessera epilogue `{tree}`");
    s.push_str(COMMON_CUH);
    s.push('\n');
    s.push_str(&epilogue_source(tree)?);
    s.push('\n');
    s.push_str(&abi_asserts());
    s.push_str(EPILOGUE_APPLY_CUH);
    Ok(s)
}

/// The host mirror of `TesseraEpArgs`: field order and types match the device struct
/// ([`abi_asserts`] makes NVRTC check every offset). Pointers are device addresses (0: none).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EpArgs {
    /// First output row of this launch.
    pub row0: i32,
    /// First output column of this launch.
    pub col0: i32,
    /// Rows of this launch.
    pub rows: i32,
    /// Columns of this launch.
    pub cols: i32,
    /// Rows of the full output.
    pub m: i32,
    /// Columns of the full output.
    pub n: i32,
    /// alpha.
    pub alpha: f32,
    /// beta.
    pub beta: f32,
    /// D.
    pub d: u64,
    /// D's row pitch (elements).
    pub ldd: i64,
    /// D's batch stride (elements).
    pub batch_d: i64,
    /// D's type code.
    pub dt_d: i32,
    /// C.
    pub c: u64,
    /// C's row pitch.
    pub ldc: i64,
    /// C's batch stride.
    pub batch_c: i64,
    /// C's type code.
    pub dt_c: i32,
    /// The residual.
    pub residual: u64,
    /// The residual's row pitch.
    pub ldr: i64,
    /// The residual's batch stride.
    pub batch_r: i64,
    /// The residual's type code.
    pub dt_r: i32,
    /// The aux input (`aux_in` or `aux_in_bits`).
    pub aux_in: u64,
    /// Its row pitch (bits for a mask).
    pub ld_aux_in: i64,
    /// Its batch stride (bits for a mask).
    pub batch_aux_in: i64,
    /// Its type code.
    pub dt_aux_in: i32,
    /// The aux output.
    pub aux: u64,
    /// Its row pitch (bits for a mask).
    pub ldaux: i64,
    /// Its batch stride (bits for a mask).
    pub batch_aux: i64,
    /// `bias_row`.
    pub bias_row: u64,
    /// Its batch stride (0: shared).
    pub batch_bias_row: i64,
    /// Its type code.
    pub dt_bias_row: i32,
    /// `bias_col`.
    pub bias_col: u64,
    /// Its batch stride (0: shared).
    pub batch_bias_col: i64,
    /// Its type code.
    pub dt_bias_col: i32,
    /// `bgrad_row`'s fp32 workspace.
    pub bgrad_row: u64,
    /// Its batch stride.
    pub batch_bgrad_row: i64,
    /// `bgrad_col`'s fp32 workspace.
    pub bgrad_col: u64,
    /// Its batch stride.
    pub batch_bgrad_col: i64,
    /// 1 when D may be stored two elements at a time.
    pub d_pair: i32,
}

impl EpArgs {
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    /// The pitches, strides, types and extents of `binding` (for `tree`: its aux input is
    /// `aux_in_bits` when the tree reads that) for one launch over the whole output (`row0 = col0 = 0`); device addresses are left 0 for the caller to fill.
    /// `d_pair` is set when D's pitch and batch stride are even and its base is 4-byte aligned.
    pub fn from_binding(tree: &EpilogueTree, b: &super::check::Binding) -> EpArgs {
        let mat = |s: &Option<super::check::MatSpec>| {
            s.map_or((0, 0, 0), |s| (s.ld, s.batch_stride, s.dtype.code()))
        };
        let vec = |s: &Option<super::check::VecSpec>| {
            s.map_or((0, 0), |s| (s.batch_stride, s.dtype.code()))
        };
        let (ldc, batch_c, dt_c) = mat(&b.c);
        let (ldr, batch_r, dt_r) = mat(&b.residual);
        let aux_in = if tree.d.uses(Leaf::AuxInBits) {
            &b.aux_in_bits
        } else {
            &b.aux_in
        };
        let (ld_aux_in, batch_aux_in, dt_aux_in) = mat(aux_in);
        let (ldaux, batch_aux, _) = mat(&b.aux);
        let (batch_bias_row, dt_bias_row) = vec(&b.bias_row);
        let (batch_bias_col, dt_bias_col) = vec(&b.bias_col);
        let d_pair = b.d.ld % 2 == 0
            && b.d.batch_stride % 2 == 0
            && b.d.align_bytes % (2 * b.d.dtype.bytes()) == 0;
        EpArgs {
            rows: b.m as i32,
            cols: b.n as i32,
            m: b.m as i32,
            n: b.n as i32,
            alpha: b.alpha,
            beta: b.beta,
            ldd: b.d.ld,
            batch_d: b.d.batch_stride,
            dt_d: b.d.dtype.code(),
            ldc,
            batch_c,
            dt_c,
            ldr,
            batch_r,
            dt_r,
            ld_aux_in,
            batch_aux_in,
            dt_aux_in,
            ldaux,
            batch_aux,
            batch_bias_row,
            dt_bias_row,
            batch_bias_col,
            dt_bias_col,
            batch_bgrad_row: b.bgrad_row.map_or(0, |v| v.batch_stride),
            batch_bgrad_col: b.bgrad_col.map_or(0, |v| v.batch_stride),
            d_pair: i32::from(d_pair),
            ..EpArgs::default()
        }
    }
}

/// Every field of [`EpArgs`] with its byte offset, in declaration order (for checking the
/// device struct's layout: see the `epilogue_codegen` test, which lays out `TesseraEpArgs`
/// from its declaration by the C rules and compares).
#[cfg(test)]
pub fn ep_args_layout() -> Vec<(&'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("row0", offset_of!(EpArgs, row0)),
        ("col0", offset_of!(EpArgs, col0)),
        ("rows", offset_of!(EpArgs, rows)),
        ("cols", offset_of!(EpArgs, cols)),
        ("m", offset_of!(EpArgs, m)),
        ("n", offset_of!(EpArgs, n)),
        ("alpha", offset_of!(EpArgs, alpha)),
        ("beta", offset_of!(EpArgs, beta)),
        ("d", offset_of!(EpArgs, d)),
        ("ldd", offset_of!(EpArgs, ldd)),
        ("batch_d", offset_of!(EpArgs, batch_d)),
        ("dt_d", offset_of!(EpArgs, dt_d)),
        ("c", offset_of!(EpArgs, c)),
        ("ldc", offset_of!(EpArgs, ldc)),
        ("batch_c", offset_of!(EpArgs, batch_c)),
        ("dt_c", offset_of!(EpArgs, dt_c)),
        ("residual", offset_of!(EpArgs, residual)),
        ("ldr", offset_of!(EpArgs, ldr)),
        ("batch_r", offset_of!(EpArgs, batch_r)),
        ("dt_r", offset_of!(EpArgs, dt_r)),
        ("aux_in", offset_of!(EpArgs, aux_in)),
        ("ld_aux_in", offset_of!(EpArgs, ld_aux_in)),
        ("batch_aux_in", offset_of!(EpArgs, batch_aux_in)),
        ("dt_aux_in", offset_of!(EpArgs, dt_aux_in)),
        ("aux", offset_of!(EpArgs, aux)),
        ("ldaux", offset_of!(EpArgs, ldaux)),
        ("batch_aux", offset_of!(EpArgs, batch_aux)),
        ("bias_row", offset_of!(EpArgs, bias_row)),
        ("batch_bias_row", offset_of!(EpArgs, batch_bias_row)),
        ("dt_bias_row", offset_of!(EpArgs, dt_bias_row)),
        ("bias_col", offset_of!(EpArgs, bias_col)),
        ("batch_bias_col", offset_of!(EpArgs, batch_bias_col)),
        ("dt_bias_col", offset_of!(EpArgs, dt_bias_col)),
        ("bgrad_row", offset_of!(EpArgs, bgrad_row)),
        ("batch_bgrad_row", offset_of!(EpArgs, batch_bgrad_row)),
        ("bgrad_col", offset_of!(EpArgs, bgrad_col)),
        ("batch_bgrad_col", offset_of!(EpArgs, batch_bgrad_col)),
        ("d_pair", offset_of!(EpArgs, d_pair)),
    ]
}

/// A `static_assert` that `TesseraEpArgs` has [`EpArgs`]'s size (NVRTC has no `offsetof`;
/// the field offsets are checked on the host against the declaration).
pub fn abi_asserts() -> String {
    format!(
        "static_assert(sizeof(TesseraEpArgs) == {}, \"TesseraEpArgs differs from the host mirror EpArgs\");\n",
        std::mem::size_of::<EpArgs>()
    )
}

/// Tree epilogues address their outputs row-major.
fn row_major_d_only(p: &crate::plan::problem::GemmProblem, tree: &EpilogueTree) -> Result<()> {
    if p.d_major == crate::plan::problem::Major::Col {
        return Err(EpilogueError::Type {
            expr: tree.to_string(),
            msg: format!("{p}: tree epilogues write a row-major D (a column-major D is supported by the flag-driven epilogue only)"),
        });
    }
    Ok(())
}

/// The sm80-class GEMM of `plan` with `tree` as its epilogue: `common.cuh`, the plan's
/// preamble, [`epilogue_source`], `#define TESSERA_EPILOGUE_TREE 1`, then the kernel template,
/// whose second parameter is then the epilogue's arguments (`const TesseraEpArgs
/// tessera_ep_args`).
///
/// The template calls `tessera_ep_pair(tessera_ep_args, TesseraEpCta{}, batch, row, col, v0,
/// v1)` in place of its flag-driven `tessera_epilogue_pair` when `TESSERA_EPILOGUE_TREE` is
/// defined (reductions then add straight to the fp32 workspace: the per-CTA staging of
/// `tessera_ep_cta_begin` / `_end` needs shared memory the plan does not reserve yet).
/// Without that hook in the template the define has no effect; [`gemm_has_tree_hook`] says
/// whether it is there.
pub fn gemm_tree_source(plan: &GemmPlan, tree: &EpilogueTree) -> Result<String> {
    row_major_d_only(&plan.problem, tree)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// tessera sm80-class GEMM `{}` with the epilogue `{tree}`",
        plan.kernel_name()
    );
    s.push_str(COMMON_CUH);
    s.push('\n');
    s.push_str(&preamble(plan));
    s.push('\n');
    s.push_str(EPILOGUE_TREE_CUH);
    s.push_str(&generate(tree)?);
    s.push('\n');
    s.push_str(EPILOGUE_TREE_TAIL_CUH);
    s.push_str(&abi_asserts());
    s.push_str("#define TESSERA_EPILOGUE_TREE 1\n\n");
    s.push_str(GEMM_SM80_CUH);
    Ok(s)
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Whether the sm80 template has the `TESSERA_EPILOGUE_TREE` hook that calls the generated
/// epilogue.
pub fn gemm_has_tree_hook() -> bool {
    GEMM_SM80_CUH.contains("#ifdef TESSERA_EPILOGUE_TREE")
}

/// The Hopper GEMM of `plan` with `tree` as its epilogue: `common.cuh`, the sm_90a PTX
/// helpers, the plan's preamble, `#define TESSERA_EP_REG_SUMS 1` (reductions summed in
/// registers and across the threads of a row or column pair by the kernel),
/// [`epilogue_source`], `#define TESSERA_EPILOGUE_TREE 1`, then the kernel template, whose
/// epilogue then calls `tessera_ep_pair` for each column pair and takes the arguments as a
/// fourth kernel parameter (`const TesseraEpArgs tessera_ep_args`).
///
/// The plan's own epilogue must be the plain one (the tree replaces it). With a `binding`, the
/// tensors' types and whether C is read are compiled in ([`static_types`]); launches must then
/// bind the same.
///
/// With `dgelu_bgrad` on the 4096 x 4096 x 4096 plan, the source sets
/// `kTesseraEpColSum = true` and flushes the column sums (`tessera_ep_flush_col`).
pub fn sm90_tree_source(
    plan: &crate::plan::Sm90Plan,
    tree: &EpilogueTree,
    binding: Option<&super::check::Binding>,
) -> Result<String> {
    use crate::codegen::sm90::{preamble as sm90_preamble, SM90_GEMM_CUH, SM90_PTX_CUH};
    row_major_d_only(&plan.problem, tree)?;
    if plan.problem.epilogue != crate::plan::problem::Epilogue::default() {
        return Err(EpilogueError::Type {
            expr: tree.to_string(),
            msg: format!(
                "the plan already has the epilogue `{}`; a tree needs a plain plan",
                plan.problem.epilogue
            ),
        });
    }
    if !tree.sum_k.is_empty() {
        return Err(EpilogueError::Type {
            expr: tree.to_string(),
            msg: "operand sums run beside the GEMM (OperandSum), not in its epilogue".into(),
        });
    }
    // The fragment path (taken on TMA-store plans) assumes the wgmma fragment's form, which
    // every plan with a TMA store has (`store_plan` checks it when the plan is made).
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// tessera sm_90a GEMM `{}` with the epilogue `{tree}`",
        plan.kernel_name()
    );
    s.push_str(COMMON_CUH);
    s.push('\n');
    s.push_str(SM90_PTX_CUH);
    s.push('\n');
    s.push_str(&sm90_preamble(plan));
    s.push_str("\n#define TESSERA_EP_REG_SUMS 1\n");
    s.push_str("#define TESSERA_EP_MOVABLE_LOADS 1\n");
    if let Some(b) = binding {
        s.push_str(&static_types(tree, b));
    }
    // (With the bias in the accumulators the tree runs without it; the types above stay the
    // whole tree's, the kernel loading the bias with them.)
    if plan.bias_in_acc {
        if !bias_col_in_acc(tree) {
            return Err(EpilogueError::Type {
                expr: tree.to_string(),
                msg: "the plan adds bias_col to the accumulators, and the tree does not read acc + bias_col".into(),
            });
        }
        s.push_str(&epilogue_source(&without_bias_col(tree))?);
    } else {
        s.push_str(&epilogue_source(tree)?);
    }
    s.push('\n');
    s.push_str(&abi_asserts());
    let staged = binding.map_or(Vec::new(), |b| staged_inputs(plan, tree, b));
    let _ = writeln!(
        s,
        "// the staged epilogue inputs\nconstexpr bool kTesseraEpStageC = {}, kTesseraEpStageR = {}, kTesseraEpStageX = {};",
        staged.contains(&StagedInput::C),
        staged.contains(&StagedInput::Residual),
        staged.contains(&StagedInput::AuxIn)
    );
    s.push_str("#define TESSERA_EPILOGUE_TREE 1\n\n");
    s.push_str(SM90_GEMM_CUH);
    Ok(s)
}

/// A full input tensor of a tree that the Hopper kernel's fragment path can stage through
/// shared memory ([`crate::plan::Sm90Plan::staged_inputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StagedInput {
    /// C (read when beta is not zero).
    C,
    /// The residual.
    Residual,
    /// aux_in (the full tensor, not a bit mask).
    AuxIn,
}

/// The inputs the Hopper kernel of `plan` with `tree`, compiled for `binding`, stages through
/// shared memory on its fragment path: the first of [`stageable_inputs`] that the plan has
/// room for (none without the TMA-store epilogue).
pub fn staged_inputs(
    plan: &crate::plan::Sm90Plan,
    tree: &EpilogueTree,
    binding: &super::check::Binding,
) -> Vec<StagedInput> {
    if plan.store.is_none() {
        return Vec::new();
    }
    let mut v = stageable_inputs(tree, binding);
    v.truncate(plan.staged_inputs.max(0) as usize);
    v
}

/// The Hopper options a tree epilogue's kernel is planned with: `opts`, and where it leaves
/// them unset (and the TMA-store epilogue is not turned off), room for the inputs the fragment
/// path can stage ([`stageable_inputs`]) and for the tree's bias vectors, staged per tile
/// ([`crate::plan::Sm90Plan::vector_stage`]). A caller plans with these first and falls back
/// to `opts` when they do not fit.
///
/// For `relu(acc + bias_col + residual)` bound as 512 x 512 x 256 in bf16, the default options
/// become one staged input and the column bias (`epilogue_inputs: Some(1)`,
/// `epilogue_vectors: (false, true)`); the Hopper plan of that problem (B column-major) with
/// them stages the bias over the CTA tile's columns (`vector_stage == (0, cta_tile.1)`).
pub fn tree_sm90_options(
    tree: &EpilogueTree,
    binding: &super::check::Binding,
    opts: crate::plan::Sm90Options,
) -> crate::plan::Sm90Options {
    let mut o = opts;
    if o.tma_store == Some(false) {
        return o;
    }
    if o.epilogue_inputs.is_none() {
        let n = stageable_inputs(tree, binding).len() as i64;
        if n > 0 {
            o.epilogue_inputs = Some(n);
        }
    }
    o.epilogue_vectors = (
        o.epilogue_vectors.0 || tree.d.uses(Leaf::BiasRow),
        o.epilogue_vectors.1 || tree.d.uses(Leaf::BiasCol),
    );
    o
}

/// Whether `tree` is light: no exponential, erf or tanh among its element-wise functions
/// (GELU, sigmoid, tanh, SiLU and their derivatives), no reduction (bias gradients) and no
/// operand sums. ReLU, clamp, their derivatives, negation, conversions, arithmetic,
/// comparisons, selects and aux outputs are light. The planner gives such a tree the plain
/// GEMM's schedule ([`tree_takes_pingpong`]), and a [`full_aux_tree`] as well.
///
/// `relu_aux_bias` and `drelu` are light; `drelu_bgrad`, `gelu_bias` and
/// `select(row < 8, acc, sigmoid(acc))` are not.
pub fn light_tree(tree: &EpilogueTree) -> bool {
    sums_nothing(tree)
        && !tree.d.any(&|e| {
            matches!(
                e,
                Expr::Unary(
                    UnaryOp::Gelu
                        | UnaryOp::GeluTanh
                        | UnaryOp::Sigmoid
                        | UnaryOp::Tanh
                        | UnaryOp::Silu
                        | UnaryOp::DGelu
                        | UnaryOp::DGeluTanh
                        | UnaryOp::DSigmoid
                        | UnaryOp::DTanh
                        | UnaryOp::DSilu,
                    _
                )
            )
        })
}

/// Whether `tree` has no reduction (bias gradient) and no operand sum.
fn sums_nothing(tree: &EpilogueTree) -> bool {
    tree.sum_k.is_empty() && !tree.d.any(&|e| matches!(e, Expr::Sink(Sink::Bgrad(_), _)))
}

/// Whether `tree` stores a full aux tensor (one element per output element, as GELU_AUX_BIAS
/// keeps the pre-activation) and has no reduction (bias gradient) or operand sum.
///
/// `gelu_aux_bias` is one; `gelu_bias` (no aux), `relu_aux_bias` (a bit mask) and
/// `bgrad_col(gelu_aux(acc))` (a reduction) are not.
pub fn full_aux_tree(tree: &EpilogueTree) -> bool {
    sums_nothing(tree)
        && tree
            .d
            .any(&|e| matches!(e, Expr::Sink(Sink::Aux(AuxFormat::Full(_)), _)))
}

/// Whether a tree epilogue left to the planner (`opts.schedule` unset) takes the ping-pong
/// schedule: when `tree` is [`light_tree`] or a [`full_aux_tree`], and the plain GEMM of
/// `problem` with the same options would (the planner's rule,
/// [`crate::plan::policy::PINGPONG_MAX_K_TILES`]). There one warpgroup's epilogue runs under the
/// other's mainloop. Other trees stay cooperative: a transcendental function or a reduction
/// slowed the other warpgroup's mainloop by more than ping-pong hid, except in trees that
/// store a full aux, which measured faster on ping-pong (`docs/design/009-schedule-choice.md`).
pub fn tree_takes_pingpong(
    problem: &crate::plan::problem::GemmProblem,
    tree: &EpilogueTree,
    opts: crate::plan::Sm90Options,
) -> bool {
    opts.schedule.is_none() && tree_schedule(problem, tree, opts).value
}

/// The tree's schedule rule ([`crate::plan::policy::tree_pingpong`]) with its reason: `true`
/// for ping-pong.
pub(crate) fn tree_schedule(
    problem: &crate::plan::problem::GemmProblem,
    tree: &EpilogueTree,
    opts: crate::plan::Sm90Options,
) -> crate::plan::policy::Decision<bool> {
    let mut plain = *problem;
    plain.epilogue = crate::plan::problem::Epilogue::default();
    let plain_pingpong = crate::plan::Sm90Plan::with_options(&plain, opts)
        .is_ok_and(|p| p.schedule == crate::plan::Schedule::PingPong);
    crate::plan::policy::tree_pingpong(plain_pingpong, light_tree(tree), full_aux_tree(tree))
}

/// The Hopper plan of `problem` for a tree epilogue: with the staged inputs and bias vectors
/// of [`tree_sm90_options`] where the plan keeps the stages it has without them; else with the
/// staged inputs alone, else with the vectors alone, else the plan of `opts`: a pipeline stage
/// fewer costs the mainloop more than either saves the epilogue
/// (`docs/design/003-epilogue-vector-loads.md`). Where the plan without them holds a B panel
/// (a convolution's filter), the extras need only keep [`crate::plan::policy::PANEL_MIN_STAGES`]
/// stages (`docs/design/020-exact-width-tiles.md`).
///
/// For a 4096 x 4096 x 4096 bf16 problem (B column-major) with the cooperative schedule asked
/// for, `relu(acc + bias_col) + aux_in` keeps four 128 x 256 stages with aux_in staged and the
/// bias not (both do not fit beside those stages), and `relu(acc + bias_col)` keeps four
/// stages with the bias staged (`vector_stage == (0, 256)`). Left to the planner, that light
/// tree takes the plain GEMM's ping-pong 128 x 128 plan (K is 64 k-tiles) with its six stages;
/// `gelu(acc + bias_col)` keeps the cooperative 128 x 256 one.
pub fn tree_sm90_plan(
    problem: &crate::plan::problem::GemmProblem,
    tree: &EpilogueTree,
    binding: &super::check::Binding,
    opts: crate::plan::Sm90Options,
) -> crate::error::Result<crate::plan::Sm90Plan> {
    let plan = tree_sm90_plan_for(problem, tree, binding, opts)?;
    // The column bias in the accumulators ([`crate::plan::Sm90Plan::bias_in_acc`]) where the
    // tree reads `acc + bias_col`: the same tile and schedule, planned for the tree without
    // the bias (which then stages no bias vector); where that plan cannot take it (its
    // conditions are Sm90Plan's to check), the plan as it was.
    let (bm, bn, _) = plan.cta_tile;
    if bias_col_in_acc(tree) && binding.bias_col.is_some() {
        let o = crate::plan::Sm90Options {
            bias_in_acc: true,
            tile: Some((bm, bn)),
            schedule: Some(plan.schedule),
            ..opts
        };
        let rest = without_bias_col(tree);
        if let Ok(p) = tree_sm90_plan_for(problem, &rest, binding, o) {
            return Ok(staged_in_store(problem, &rest, binding, opts, p));
        }
    }
    Ok(staged_in_store(problem, tree, binding, opts, plan))
}

/// `plan` (of `tree`, the tree its kernel compiles), or where it stages one input, a
/// consumer's tile has more passes than [`crate::plan::sm90::IN_BUFFERS`] (so that the later
/// passes' blocks would be loaded from L2 inside the epilogue) and the plan allows it, the
/// same plan with that input loaded into the store buffers
/// ([`crate::plan::Sm90Plan::staged_in_store`]): every pass's block arrives during the
/// mainloop, in no shared memory of its own, so the plan keeps at least the stages `plan`
/// has (design 021).
fn staged_in_store(
    problem: &crate::plan::problem::GemmProblem,
    tree: &EpilogueTree,
    binding: &super::check::Binding,
    opts: crate::plan::Sm90Options,
    plan: crate::plan::Sm90Plan,
) -> crate::plan::Sm90Plan {
    let (bm, bn, _) = plan.cta_tile;
    let aux_out = tree
        .d
        .any(&|e| matches!(e, Expr::Sink(Sink::Aux(AuxFormat::Full(_)), _)));
    let passes = plan.m_halves * bn / crate::plan::sm90::EPI_COLS;
    if plan.staged_inputs != 1
        || plan.store.is_none()
        || plan.row_store()
        || aux_out
        || passes <= crate::plan::sm90::IN_BUFFERS
    {
        return plan;
    }
    let o = crate::plan::Sm90Options {
        staged_in_store: true,
        epilogue_inputs: Some(1),
        bias_in_acc: plan.bias_in_acc,
        tile: Some((bm, bn)),
        schedule: Some(plan.schedule),
        ..opts
    };
    match tree_sm90_plan_for(problem, tree, binding, o) {
        Ok(p) if p.staged_in_store && p.staged_inputs == 1 && p.stages >= plan.stages => p,
        _ => plan,
    }
}

/// Whether `tree` reads `acc` and `bias_col` once each, as two summands of one sum, as
/// `relu(acc + bias_col + residual)` and `gelu(aux(acc + bias_col))` do: then every value the
/// tree computes depends on them only through their sum, and the bias may start the
/// accumulators ([`crate::plan::Sm90Plan::bias_in_acc`]). Not `relu(alpha * acc + bias_col)`
/// (acc scaled first), `relu(acc + bias_col) + acc` (acc read twice) nor
/// `relu(acc + residual) + bias_col` (not one sum).
pub fn bias_col_in_acc(tree: &EpilogueTree) -> bool {
    let mut acc = 0;
    let mut bias = 0;
    let mut together = false;
    tree.d.visit_post(&mut |e| match e {
        Expr::Leaf(Leaf::Acc) => acc += 1,
        Expr::Leaf(Leaf::BiasCol) => bias += 1,
        Expr::Binary(BinaryOp::Add, _, _) => {
            let mut terms = Vec::new();
            summands(e, &mut terms);
            together |= terms.contains(&&Expr::Leaf(Leaf::Acc))
                && terms.contains(&&Expr::Leaf(Leaf::BiasCol));
        }
        _ => {}
    });
    acc == 1 && bias == 1 && together && tree.sum_k.is_empty()
}

/// The terms of the sum `e` (its nested `+` flattened).
fn summands<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Binary(BinaryOp::Add, a, b) => {
            summands(a, out);
            summands(b, out);
        }
        _ => out.push(e),
    }
}

/// `tree` without its `bias_col` summand (where [`bias_col_in_acc`] holds): what the kernel
/// computes after the bias started the accumulators.
pub fn without_bias_col(tree: &EpilogueTree) -> EpilogueTree {
    fn drop(e: &Expr) -> Expr {
        let bias = Expr::Leaf(Leaf::BiasCol);
        match e {
            Expr::Binary(BinaryOp::Add, a, b) if **a == bias => drop(b),
            Expr::Binary(BinaryOp::Add, a, b) if **b == bias => drop(a),
            Expr::Binary(op, a, b) => Expr::Binary(*op, Box::new(drop(a)), Box::new(drop(b))),
            Expr::Unary(op, x) => Expr::Unary(*op, Box::new(drop(x))),
            Expr::Select(p, a, b) => Expr::Select(p.clone(), Box::new(drop(a)), Box::new(drop(b))),
            Expr::Sink(k, x) => Expr::Sink(*k, Box::new(drop(x))),
            other => other.clone(),
        }
    }
    EpilogueTree {
        d: drop(&tree.d),
        sum_k: tree.sum_k.clone(),
    }
}

/// [`tree_sm90_plan`] without the bias in the accumulators.
fn tree_sm90_plan_for(
    problem: &crate::plan::problem::GemmProblem,
    tree: &EpilogueTree,
    binding: &super::check::Binding,
    opts: crate::plan::Sm90Options,
) -> crate::error::Result<crate::plan::Sm90Plan> {
    use crate::plan::{Schedule, Sm90Plan};
    // Unless asked: ping-pong where the plain GEMM takes it and the tree is light or stores a
    // full aux ([`tree_takes_pingpong`]), else cooperative (under ping-pong other
    // transcendental epilogues and reductions cost more).
    let schedule = match opts.schedule {
        Some(s) => s,
        None if tree_takes_pingpong(problem, tree, opts) => Schedule::PingPong,
        None => Schedule::Cooperative,
    };
    let opts = crate::plan::Sm90Options {
        schedule: Some(schedule),
        ..opts
    };
    let full = tree_sm90_options(tree, binding, opts);
    if opts.im2col.is_some_and(|g| g.halo.is_some()) {
        // The halo load's rows are virtual: the tree's full tensors must all go through the
        // tensor maps (staged), whatever that leaves of the pipeline.
        // (C is read only where beta is not 0.)
        let reads = [
            (Leaf::C, binding.beta != 0.0),
            (Leaf::Residual, true),
            (Leaf::AuxIn, true),
        ]
        .iter()
        .filter(|(l, read)| *read && tree.d.uses(*l))
        .count();
        if stageable_inputs(tree, binding).len() != reads {
            return Err(crate::error::KernelError::invalid(
                "Sm90Plan::new",
                "halo load of A: every full input of the epilogue (C, residual, aux_in) must be a 16-bit tensor the kernel stages",
            ));
        }
        let lean = crate::plan::Sm90Options {
            epilogue_vectors: opts.epilogue_vectors,
            ..full
        };
        return Sm90Plan::with_options(problem, full)
            .or_else(|_| Sm90Plan::with_options(problem, lean));
    }
    let base = Sm90Plan::with_options(problem, opts)?;
    // The stages a plan with the extras must keep: the base's; but where the base holds a
    // convolution's filter as a B panel its ring refills A alone and runs deeper than a ring
    // of A and B in the same bytes, so there a plan that keeps the panel's least ring
    // (PANEL_MIN_STAGES) is taken: an unstaged residual costs the block far more than the
    // stages it gives up (design 020).
    let keeps = if base.b_panel {
        base.stages.min(crate::plan::policy::PANEL_MIN_STAGES)
    } else {
        base.stages
    };
    let candidates = [
        full,
        crate::plan::Sm90Options {
            epilogue_vectors: opts.epilogue_vectors,
            ..full
        },
        crate::plan::Sm90Options {
            epilogue_inputs: opts.epilogue_inputs,
            ..full
        },
    ];
    for o in candidates {
        if o == opts {
            continue;
        }
        if let Ok(p) = Sm90Plan::with_options(problem, o) {
            if p.stages >= keeps {
                return Ok(p);
            }
        }
    }
    Ok(base)
}

/// The inputs of `tree` under `binding` that can be staged, in the kernel's order: those the
/// tree reads (C only with a nonzero beta), bound as 16-bit tensors.
///
/// For `dgelu` bound in bf16 that is the aux input alone ([`StagedInput::AuxIn`]).
pub fn stageable_inputs(tree: &EpilogueTree, b: &super::check::Binding) -> Vec<StagedInput> {
    let half =
        |m: &Option<super::check::MatSpec>| m.is_some_and(|m| !m.bits && m.dtype.bytes() == 2);
    let mut v = Vec::new();
    if tree.d.uses(Leaf::C) && b.beta != 0.0 && half(&b.c) {
        v.push(StagedInput::C);
    }
    if tree.d.uses(Leaf::Residual) && half(&b.residual) {
        v.push(StagedInput::Residual);
    }
    if tree.d.uses(Leaf::AuxIn) && half(&b.aux_in) {
        v.push(StagedInput::AuxIn);
    }
    v
}

/// The part of a binding the Hopper tree kernel compiles in: each tensor's type code and
/// whether C is read. Two bindings with equal `StaticTypes` can share a kernel; its `Display`
/// is the `#define`s (see `epilogue_tree.cuh`) that fold away the type switches of every load
/// and store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticTypes {
    d: i32,
    c: i32,
    residual: i32,
    aux_in: i32,
    bias_row: i32,
    bias_col: i32,
    read_c: bool,
}

impl StaticTypes {
    /// The compiled-in part of `b` for `tree`.
    pub fn of(tree: &EpilogueTree, b: &super::check::Binding) -> StaticTypes {
        let mat = |m: &Option<super::check::MatSpec>| m.map_or(0, |m| code(m.dtype));
        let vec = |v: &Option<super::check::VecSpec>| v.map_or(0, |v| code(v.dtype));
        StaticTypes {
            d: code(b.d.dtype),
            c: mat(&b.c),
            residual: mat(&b.residual),
            aux_in: if tree.d.uses(Leaf::AuxInBits) {
                0
            } else {
                mat(&b.aux_in)
            },
            bias_row: vec(&b.bias_row),
            bias_col: vec(&b.bias_col),
            read_c: tree.d.uses(Leaf::C) && b.beta != 0.0,
        }
    }
}

impl std::fmt::Display for StaticTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "// the binding's types, compiled in")?;
        writeln!(f, "#define TESSERA_EP_DT_STATIC 1")?;
        writeln!(f, "#define TESSERA_EP_DT_D {}", self.d)?;
        writeln!(f, "#define TESSERA_EP_DT_C {}", self.c)?;
        writeln!(f, "#define TESSERA_EP_DT_R {}", self.residual)?;
        writeln!(f, "#define TESSERA_EP_DT_AUX_IN {}", self.aux_in)?;
        writeln!(f, "#define TESSERA_EP_DT_BIAS_ROW {}", self.bias_row)?;
        writeln!(f, "#define TESSERA_EP_DT_BIAS_COL {}", self.bias_col)?;
        writeln!(f, "#define TESSERA_EP_READ_C {}", self.read_c)
    }
}

/// The `#define`s that fix the tensors' types and the reading of C for one binding
/// ([`StaticTypes`] as text).
///
/// For `gelu_aux_bias` bound in bf16 it holds `#define TESSERA_EP_DT_D 0` (bf16) and
/// `#define TESSERA_EP_READ_C false` (beta is 0).
pub fn static_types(tree: &EpilogueTree, b: &super::check::Binding) -> String {
    StaticTypes::of(tree, b).to_string()
}
