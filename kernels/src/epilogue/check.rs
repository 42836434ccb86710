//! The checker run before code generation: a tree against the tensors bound to it and the
//! kernel's limits. Whatever would make the generated code read or write out of bounds,
//! misaligned or in the wrong type is an [`EpilogueError`] here, never a GPU failure.
// The binding checks run at launch (feature `cuda`).
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use crate::plan::problem::DType;

use super::error::{EpilogueError, Result};
use super::tree::{AuxFormat, EpilogueTree, Expr, Leaf, Operand, Sink, VecAxis};

/// An `M x N` tensor (row-major) bound to a leaf or sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatSpec {
    /// Element type (ignored when `bits`).
    pub dtype: DType,
    /// One bit per element (a ReLU mask): `ld` and `batch_stride` count bits.
    pub bits: bool,
    /// Elements (bits) between rows.
    pub ld: i64,
    /// Elements (bits) between batches (0: one tensor for every batch; inputs only).
    pub batch_stride: i64,
    /// The alignment of the base address, in bytes (256 for a fresh `cudaMalloc`).
    pub align_bytes: i64,
}

impl MatSpec {
    /// A tight `m x n` tensor of `dtype`, 256-byte aligned.
    pub fn tight(m: i64, n: i64, dtype: DType) -> MatSpec {
        MatSpec {
            dtype,
            bits: false,
            ld: n,
            batch_stride: m.saturating_mul(n),
            align_bytes: 256,
        }
    }

    /// A bit-mask for `m x n` elements with cuBLASLt's row pitch: N rounded up to 128 bits.
    pub fn tight_bits(m: i64, n: i64) -> MatSpec {
        let ld = n.saturating_add(127) / 128 * 128;
        MatSpec {
            dtype: DType::F32,
            bits: true,
            ld,
            batch_stride: m.saturating_mul(ld),
            align_bytes: 256,
        }
    }
}

/// A vector bound to a broadcast leaf or a reduction sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VecSpec {
    /// Element type (reductions and operand sums: fp32 only).
    pub dtype: DType,
    /// Length.
    pub len: i64,
    /// Elements between batches (0: one vector for every batch; inputs only).
    pub batch_stride: i64,
    /// The alignment of the base address, in bytes.
    pub align_bytes: i64,
}

impl VecSpec {
    /// A vector of `len` elements of `dtype` shared by every batch, 256-byte aligned.
    pub fn shared(len: i64, dtype: DType) -> VecSpec {
        VecSpec {
            dtype,
            len,
            batch_stride: 0,
            align_bytes: 256,
        }
    }

    /// An fp32 vector of `len` per batch (a reduction's workspace).
    pub fn per_batch_f32(len: i64) -> VecSpec {
        VecSpec {
            dtype: DType::F32,
            len,
            batch_stride: len,
            align_bytes: 256,
        }
    }
}

/// The tensors and scalars bound to a tree for one launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    /// Rows of D.
    pub m: i64,
    /// Columns of D.
    pub n: i64,
    /// The GEMM's reduction extent.
    pub k: i64,
    /// Batches.
    pub batch: i64,
    /// alpha.
    pub alpha: f32,
    /// beta (C must be bound when it is not 0 and the tree reads `c`).
    pub beta: f32,
    /// D.
    pub d: MatSpec,
    /// C.
    pub c: Option<MatSpec>,
    /// `residual`.
    pub residual: Option<MatSpec>,
    /// `aux_in`.
    pub aux_in: Option<MatSpec>,
    /// `aux_in_bits` (`bits` set).
    pub aux_in_bits: Option<MatSpec>,
    /// The aux output.
    pub aux: Option<MatSpec>,
    /// `bias_row` (length M).
    pub bias_row: Option<VecSpec>,
    /// `bias_col` (length N).
    pub bias_col: Option<VecSpec>,
    /// `bgrad_row`'s fp32 workspace (length M).
    pub bgrad_row: Option<VecSpec>,
    /// `bgrad_col`'s fp32 workspace (length N).
    pub bgrad_col: Option<VecSpec>,
    /// `sum_k_a`'s fp32 output (length M).
    pub sum_k_a: Option<VecSpec>,
    /// `sum_k_b`'s fp32 output (length N).
    pub sum_k_b: Option<VecSpec>,
}

impl Binding {
    /// Tight tensors for everything `tree` reads or writes: D, C, residual, aux in `out`
    /// (the aux output in its tree type), bias vectors in `out` shared by every batch,
    /// bit-masks with cuBLASLt's pitch, fp32 reductions per batch. alpha 1, beta 0.
    pub fn for_tree(
        tree: &EpilogueTree,
        m: i64,
        n: i64,
        k: i64,
        batch: i64,
        out: DType,
    ) -> Binding {
        let e = &tree.d;
        let mat = |leaf: Leaf| e.uses(leaf).then(|| MatSpec::tight(m, n, out));
        let aux = e.sinks().into_iter().find_map(|s| match s {
            Sink::Aux(AuxFormat::Bits) => Some(MatSpec::tight_bits(m, n)),
            Sink::Aux(AuxFormat::Full(t)) => Some(MatSpec::tight(m, n, t.unwrap_or(out))),
            _ => None,
        });
        let has = |s: Sink| e.sinks().contains(&s);
        Binding {
            m,
            n,
            k,
            batch,
            alpha: 1.0,
            beta: 0.0,
            d: MatSpec::tight(m, n, out),
            c: mat(Leaf::C),
            residual: mat(Leaf::Residual),
            aux_in: mat(Leaf::AuxIn),
            aux_in_bits: e.uses(Leaf::AuxInBits).then(|| MatSpec::tight_bits(m, n)),
            aux,
            bias_row: e.uses(Leaf::BiasRow).then(|| VecSpec::shared(m, out)),
            bias_col: e.uses(Leaf::BiasCol).then(|| VecSpec::shared(n, out)),
            bgrad_row: has(Sink::Bgrad(VecAxis::Row)).then(|| VecSpec::per_batch_f32(m)),
            bgrad_col: has(Sink::Bgrad(VecAxis::Col)).then(|| VecSpec::per_batch_f32(n)),
            sum_k_a: tree
                .sum_k
                .contains(&Operand::A)
                .then(|| VecSpec::per_batch_f32(m)),
            sum_k_b: tree
                .sum_k
                .contains(&Operand::B)
                .then(|| VecSpec::per_batch_f32(n)),
        }
    }
}

/// What a kernel's epilogue supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCaps {
    /// Most nodes in the tree.
    pub max_nodes: usize,
    /// Deepest nesting.
    pub max_depth: usize,
    /// Aux outputs (0 or 1).
    pub aux_outputs: usize,
    /// Whether bias-gradient reductions are supported.
    pub reductions: bool,
    /// Whether operand sums over k are supported.
    pub operand_sums: bool,
    /// Whether `select` on coordinates is supported.
    pub coordinate_select: bool,
}

impl KernelCaps {
    /// The generated epilogue of [`super::cuda`]: everything the tree language has, up to 256
    /// nodes and depth 64 (so the generated function stays small).
    pub const GENERATED: KernelCaps = KernelCaps {
        max_nodes: 256,
        max_depth: 64,
        aux_outputs: 1,
        reductions: true,
        operand_sums: true,
        coordinate_select: true,
    };
}

fn unsupported(msg: String) -> EpilogueError {
    EpilogueError::Unsupported { msg }
}

fn check_extent(name: &'static str, v: i64) -> Result<()> {
    if v < 1 || v > i32::MAX as i64 {
        return Err(EpilogueError::binding(
            name,
            format!("extent {v} is outside 1 ..= 2^31 - 1"),
        ));
    }
    Ok(())
}

/// Checks one `M x N` tensor: pitch, batch stride, alignment, and (when `want` is given) type.
fn check_mat(
    name: &'static str,
    s: &MatSpec,
    b: &Binding,
    output: bool,
    bits: bool,
    want: Option<DType>,
) -> Result<()> {
    if s.bits != bits {
        return Err(EpilogueError::binding(
            name,
            if bits {
                "must be a bit-mask (MatSpec::bits)".to_string()
            } else {
                "is a bit-mask where a typed tensor is read or written".to_string()
            },
        ));
    }
    if let Some(t) = want {
        if !bits && s.dtype != t {
            return Err(EpilogueError::binding(
                name,
                format!("is bound as {} but the tree stores {t}", s.dtype),
            ));
        }
    }
    if s.ld < b.n {
        return Err(EpilogueError::binding(
            name,
            format!("ld = {} is smaller than N = {}", s.ld, b.n),
        ));
    }
    if bits && s.ld % 128 != 0 {
        return Err(EpilogueError::Misaligned {
            operand: name,
            msg: format!(
                "bit-mask ld = {} is not a multiple of 128 (cuBLASLt's rule)",
                s.ld
            ),
        });
    }
    let rows_span = (b.m - 1).checked_mul(s.ld).and_then(|x| x.checked_add(b.n));
    if rows_span.is_none() {
        return Err(EpilogueError::binding(name, "(M - 1) * ld + N overflows"));
    }
    if b.batch > 1 {
        let span = rows_span.unwrap_or(i64::MAX);
        if output && s.batch_stride < span {
            return Err(EpilogueError::binding(
                name,
                format!(
                    "batch stride {} makes batches overlap ((M-1)*ld + N = {span})",
                    s.batch_stride
                ),
            ));
        }
        if s.batch_stride < 0 || (s.batch_stride != 0 && s.batch_stride < span) {
            return Err(EpilogueError::binding(
                name,
                format!("batch stride {} is neither 0 nor >= {span}", s.batch_stride),
            ));
        }
    }
    let total = (b.batch - 1)
        .checked_mul(s.batch_stride)
        .and_then(|x| x.checked_add(rows_span.unwrap_or(i64::MAX)));
    if total.is_none() {
        return Err(EpilogueError::binding(
            name,
            "(batch - 1) * batch stride + (M - 1) * ld + N overflows",
        ));
    }
    let elem = if bits { 4 } else { s.dtype.bytes() };
    if s.align_bytes < 1 || s.align_bytes % elem != 0 {
        return Err(EpilogueError::Misaligned {
            operand: name,
            msg: format!(
                "base alignment {} bytes is not a multiple of {elem}{}",
                s.align_bytes,
                if bits {
                    " (the mask is written in 32-bit words)"
                } else {
                    ""
                }
            ),
        });
    }
    if bits && s.batch_stride % 32 != 0 {
        return Err(EpilogueError::Misaligned {
            operand: name,
            msg: format!(
                "bit-mask batch stride {} is not a multiple of 32",
                s.batch_stride
            ),
        });
    }
    Ok(())
}

fn check_vec(name: &'static str, s: &VecSpec, len: i64, batch: i64, output: bool) -> Result<()> {
    if s.len != len {
        return Err(EpilogueError::binding(
            name,
            format!(
                "has length {} but broadcasts over {} = {len}",
                s.len,
                if name.ends_with("row") || name.ends_with("_a") {
                    "M"
                } else {
                    "N"
                }
            ),
        ));
    }
    if (batch - 1)
        .checked_mul(s.batch_stride)
        .and_then(|x| x.checked_add(len))
        .is_none()
    {
        return Err(EpilogueError::binding(
            name,
            "(batch - 1) * batch stride + length overflows",
        ));
    }
    if output && s.dtype != DType::F32 {
        return Err(EpilogueError::binding(
            name,
            format!("accumulates in an fp32 workspace, bound as {}", s.dtype),
        ));
    }
    if batch > 1
        && (s.batch_stride < 0
            || (s.batch_stride != 0 && s.batch_stride < len)
            || (output && s.batch_stride < len))
    {
        return Err(EpilogueError::binding(
            name,
            format!("batch stride {} with length {len}", s.batch_stride),
        ));
    }
    if s.align_bytes < 1 || s.align_bytes % s.dtype.bytes() != 0 {
        return Err(EpilogueError::Misaligned {
            operand: name,
            msg: format!("base alignment {} bytes for {}", s.align_bytes, s.dtype),
        });
    }
    Ok(())
}

fn need<'a, T>(t: &'a Option<T>, name: &'static str) -> Result<&'a T> {
    t.as_ref()
        .ok_or_else(|| EpilogueError::binding(name, "is used by the tree but not bound"))
}

/// Checks `tree` against `binding` and `caps`: the tree's structure and kinds, the kernel's
/// limits, and for every leaf and sink the tree uses: that a tensor is bound, its length
/// (M for `bias_row`, N for `bias_col`), pitch, batch stride, alignment and type (an aux
/// output must be bound in the type the tree stores; reductions in fp32).
///
/// ```
/// use tessera_kernels::epilogue::{check::check, parse_epilogue, Binding, KernelCaps, VecSpec};
/// use tessera_kernels::DType;
/// let t = parse_epilogue("relu(acc + bias_col)").unwrap();
/// let mut b = Binding::for_tree(&t, 64, 32, 16, 1, DType::Bf16);
/// assert!(check(&t, &b, &KernelCaps::GENERATED).is_ok());
/// b.bias_col = Some(VecSpec::shared(64, DType::Bf16)); // M, not N
/// assert!(check(&t, &b, &KernelCaps::GENERATED).is_err());
/// ```
#[cfg(test)]
pub fn check(tree: &EpilogueTree, b: &Binding, caps: &KernelCaps) -> Result<()> {
    check_tree(tree, caps)?;
    check_binding(tree, b)
}

/// The part of [`check`] that depends on the tree and the kernel alone: the tree's structure
/// and kinds and the kernel's limits. A kernel checks it once, when it is compiled.
pub fn check_tree(tree: &EpilogueTree, caps: &KernelCaps) -> Result<()> {
    tree.check_structure()?;
    let e: &Expr = &tree.d;
    let nodes = e.node_count();
    if nodes > caps.max_nodes {
        return Err(unsupported(format!(
            "{nodes} nodes, the kernel takes at most {}",
            caps.max_nodes
        )));
    }
    let depth = e.depth();
    if depth > caps.max_depth {
        return Err(unsupported(format!(
            "depth {depth}, the kernel takes at most {}",
            caps.max_depth
        )));
    }
    let sinks = e.sinks();
    let aux_sink = sinks.iter().find_map(|s| match s {
        Sink::Aux(f) => Some(*f),
        _ => None,
    });
    if aux_sink.is_some() && caps.aux_outputs == 0 {
        return Err(unsupported("the kernel writes no aux output".into()));
    }
    if sinks.iter().any(|s| matches!(s, Sink::Bgrad(_))) && !caps.reductions {
        return Err(unsupported(
            "the kernel has no bias-gradient reduction".into(),
        ));
    }
    if !tree.sum_k.is_empty() && !caps.operand_sums {
        return Err(unsupported("the kernel has no operand sums".into()));
    }
    if e.any(&|x| matches!(x, Expr::Select(..))) && !caps.coordinate_select {
        return Err(unsupported("the kernel has no coordinate select".into()));
    }
    Ok(())
}

/// The part of [`check`] that depends on the launch: every tensor the tree uses is bound,
/// with its length, pitch, batch stride, alignment and type. Allocates nothing (a launch
/// runs it every time).
pub fn check_binding(tree: &EpilogueTree, b: &Binding) -> Result<()> {
    let e: &Expr = &tree.d;
    let aux_sink = first_aux_sink(e);
    let has_sink = |s: Sink| e.any(&|x| matches!(x, Expr::Sink(y, _) if *y == s));
    for (name, v) in [("M", b.m), ("N", b.n), ("K", b.k), ("batch", b.batch)] {
        check_extent(name, v)?;
    }
    if !(b.alpha.is_finite() && b.beta.is_finite()) {
        return Err(EpilogueError::binding(
            "alpha/beta",
            format!("alpha = {}, beta = {} must be finite", b.alpha, b.beta),
        ));
    }
    check_mat("D", &b.d, b, true, false, None)?;
    if e.uses(Leaf::C) && b.beta != 0.0 {
        check_mat("c", need(&b.c, "c")?, b, false, false, None)?;
    }
    if e.uses(Leaf::Residual) {
        check_mat(
            "residual",
            need(&b.residual, "residual")?,
            b,
            false,
            false,
            None,
        )?;
    }
    if e.uses(Leaf::AuxIn) {
        check_mat("aux_in", need(&b.aux_in, "aux_in")?, b, false, false, None)?;
    }
    if e.uses(Leaf::AuxInBits) {
        check_mat(
            "aux_in_bits",
            need(&b.aux_in_bits, "aux_in_bits")?,
            b,
            false,
            true,
            None,
        )?;
    }
    match aux_sink {
        Some(AuxFormat::Bits) => check_mat("aux", need(&b.aux, "aux")?, b, true, true, None)?,
        Some(AuxFormat::Full(t)) => check_mat(
            "aux",
            need(&b.aux, "aux")?,
            b,
            true,
            false,
            Some(t.unwrap_or(b.d.dtype)),
        )?,
        None => {}
    }
    if e.uses(Leaf::BiasRow) {
        check_vec(
            "bias_row",
            need(&b.bias_row, "bias_row")?,
            b.m,
            b.batch,
            false,
        )?;
    }
    if e.uses(Leaf::BiasCol) {
        check_vec(
            "bias_col",
            need(&b.bias_col, "bias_col")?,
            b.n,
            b.batch,
            false,
        )?;
    }
    if has_sink(Sink::Bgrad(VecAxis::Row)) {
        check_vec(
            "bgrad_row",
            need(&b.bgrad_row, "bgrad_row")?,
            b.m,
            b.batch,
            true,
        )?;
    }
    if has_sink(Sink::Bgrad(VecAxis::Col)) {
        check_vec(
            "bgrad_col",
            need(&b.bgrad_col, "bgrad_col")?,
            b.n,
            b.batch,
            true,
        )?;
    }
    if tree.sum_k.contains(&Operand::A) {
        check_vec("sum_k_a", need(&b.sum_k_a, "sum_k_a")?, b.m, b.batch, true)?;
    }
    if tree.sum_k.contains(&Operand::B) {
        check_vec("sum_k_b", need(&b.sum_k_b, "sum_k_b")?, b.n, b.batch, true)?;
    }
    Ok(())
}

/// The format of the tree's aux output, if it has one (the first, in post order).
fn first_aux_sink(e: &Expr) -> Option<AuxFormat> {
    let mut found = None;
    e.visit_post(&mut |x| {
        if let (None, Expr::Sink(Sink::Aux(f), _)) = (found, x) {
            found = Some(*f);
        }
    });
    found
}
