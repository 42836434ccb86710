//! From a [`GemmPlan`] to CUDA source: a small generated preamble of `constexpr` values and
//! `__device__ __forceinline__` layout functions, followed by the hand-written templates.
//!
//! Every function is printed from a layout of the plan, so the kernel computes exactly the
//! offsets the algebra derived: a layout becomes a sum of `(x / P % S) * D` terms (one per
//! leaf), a swizzle becomes an XOR. The output is deterministic.

use std::fmt::Write;

use tessera_layout::Layout;

use crate::plan::{GemmPlan, OperandPlan, StageLayout};

/// The device helpers (cp.async, ldmatrix, mma.sync, conversions).
pub const COMMON_CUH: &str = include_str!("../../cuda/common.cuh");
/// The sm80-class mainloop and epilogue.
pub const GEMM_SM80_CUH: &str = include_str!("../../cuda/gemm_sm80.cuh");
/// The `mma.sync` issue-rate probe of `tessera bench mma` (entry `tessera_mma_peak`; define
/// `TESSERA_MMA_CHAINS` before it to change the independent MMA chains per warp, default 8).
#[cfg(any(all(test, feature = "cuda"), feature = "bench"))]
pub const MMA_PEAK_CUH: &str = include_str!("../../cuda/mma_peak.cuh");

/// The C++ expression of a one-mode layout (or a whole layout seen as 1-D) at index `arg`.
///
/// For example, `(4,(2,8)):(2,(1,16))` at `t` is `(t % 4) * 2 + (t / 4 % 2) + (t / 8) * 16`.
pub fn index_expr(layout: &Layout, arg: &str) -> String {
    let shapes = layout.shape().leaves();
    let strides = layout.stride().leaves();
    let mut terms = Vec::new();
    let mut prefix = 1i64;
    // The last leaf that matters takes no modulo (CuTe: the last mode absorbs the rest).
    let n = shapes
        .iter()
        .zip(strides.iter())
        .rposition(|(&s, &d)| s != 1 && d != 0)
        .map_or(0, |p| p + 1);
    for (j, (&s, &d)) in shapes.iter().zip(strides.iter()).enumerate().take(n) {
        let last = j + 1 == n;
        if (s == 1 && !last) || d == 0 {
            prefix *= s;
            continue;
        }
        let mut e = arg.to_string();
        if prefix != 1 {
            e = format!("{e} / {prefix}");
        }
        if !last {
            e = format!("{e} % {s}");
        }
        let wrapped = if e == arg { e } else { format!("({e})") };
        let term = if d == 1 {
            wrapped
        } else {
            format!("{wrapped} * {d}")
        };
        terms.push(term);
        prefix *= s;
    }
    if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" + ")
    }
}

/// The C++ expression of a layout evaluated per top-level mode at `args` (one per mode).
pub fn modes_expr(layout: &Layout, args: &[&str]) -> String {
    let parts: Vec<String> = layout
        .modes()
        .zip(args)
        .map(|(m, a)| index_expr(&m, a))
        .filter(|e| e != "0")
        .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(" + ")
    }
}

fn swizzle_expr(s: &StageLayout, var: &str) -> String {
    let sw = s.tile.swizzle;
    let (b, m, sh) = (sw.bits(), sw.base(), sw.shift());
    if b == 0 {
        return var.to_string();
    }
    // Sw<B,M,S> with S > 0 (the only kind the atoms use): the B bits above M+S fold onto the B
    // bits above M.
    let mask = ((1i64 << b) - 1) << (m + sh);
    format!("{var} ^ (({var} & {mask:#x}) >> {sh})")
}

fn offset_expr(s: &StageLayout) -> String {
    let e = modes_expr(&s.tile.inner, &["mn", "k"]);
    if s.tile.offset == 0 {
        e
    } else {
        format!("{} + {e}", s.tile.offset)
    }
}

fn operand_fns(out: &mut String, o: &OperandPlan, bk: i64) {
    let x = o.name.to_lowercase();
    let t = o.tile_mn;
    let _ = writeln!(
        out,
        "// {}: smem {} (atom {}), bank wavefronts ldmatrix {} cp.async {}",
        o.name, o.smem, o.smem.atom, o.smem.ldsm_conflicts, o.smem.copy_conflicts
    );
    let _ = writeln!(
        out,
        "__device__ __forceinline__ int smem_{x}_offset(int mn, int k) {{\n  const int o = {};\n  return {};\n}}",
        offset_expr(&o.smem),
        swizzle_expr(&o.smem, "o")
    );
    let _ = writeln!(
        out,
        "// {}: cp.async (thread,iter) -> (mn,k) of a {t}x{bk} tile: {}",
        o.name, o.copy
    );
    let _ = writeln!(
        out,
        "__device__ __forceinline__ void copy_{x}_coord(int t, int i, int& mn, int& k) {{\n  const int c = {};\n  mn = c % {t};\n  k = c / {t};\n}}",
        modes_expr(&o.copy, &["t", "i"])
    );
    let _ = writeln!(
        out,
        "// {}: ldmatrix.x4{} lane -> (mn,k): {}",
        o.name,
        if o.k_major { "" } else { ".trans" },
        o.ldsm
    );
    let _ = writeln!(
        out,
        "__device__ __forceinline__ void ldsm_{x}_coord(int l, int& mn, int& k) {{\n  const int c = {};\n  mn = c % {t};\n  k = c / {t};\n}}",
        index_expr(&o.ldsm, "l")
    );
}

fn size_of(l: &Layout) -> i64 {
    l.size()
}

fn cosize_of(s: &StageLayout) -> i64 {
    s.tile.inner.cosize()
}

fn modes_sizes(l: &Layout) -> Vec<i64> {
    l.modes().map(|m| m.size()).collect()
}

/// The generated preamble for `plan`: constants and layout functions, no templates.
pub fn preamble(plan: &GemmPlan) -> String {
    let mut s = String::new();
    let (bm, bn, bk) = plan.cta_tile;
    let _ = writeln!(
        s,
        "// ---- generated by tessera from the plan; do not edit ----"
    );
    let _ = writeln!(s, "// {}", plan.kernel_name());
    let _ = writeln!(s, "constexpr int kBM = {bm}, kBN = {bn}, kBK = {bk};");
    let _ = writeln!(
        s,
        "constexpr int kWarpsM = {}, kWarpsN = {}, kThreads = {};",
        plan.warps.0, plan.warps.1, plan.threads
    );
    let _ = writeln!(
        s,
        "constexpr int kWarpTileM = {}, kWarpTileN = {}, kMmaM = {}, kMmaN = {};",
        plan.warp_tile.0, plan.warp_tile.1, plan.mma_per_warp.0, plan.mma_per_warp.1
    );
    let _ = writeln!(
        s,
        "constexpr int kStages = {}, kGroupM = {};",
        plan.stages, plan.group_m
    );
    let _ = writeln!(
        s,
        "constexpr int kElem = {}; // 0 bf16, 1 fp16",
        if plan.problem.input == crate::DType::Bf16 {
            0
        } else {
            1
        }
    );
    let _ = writeln!(
        s,
        "constexpr bool kAKMajor = {}, kBKMajor = {};",
        plan.a.k_major, plan.b.k_major
    );
    let _ = writeln!(
        s,
        "constexpr int kSmemAElems = {}, kSmemBElems = {}; // cosize of one stage",
        cosize_of(&plan.a.smem),
        cosize_of(&plan.b.smem)
    );
    let _ = writeln!(
        s,
        "constexpr int kCopyItersA = {}, kCopyItersB = {};",
        modes_sizes(&plan.a.copy)[1],
        modes_sizes(&plan.b.copy)[1]
    );
    for o in [&plan.a, &plan.b] {
        let _ = writeln!(
            s,
            "constexpr int kCopy{0}StepMN = {1}, kCopy{0}StepK = {2}, kCopy{0}SmemStep = {3}; // per iteration",
            o.name, o.copy_step.0, o.copy_step.1, o.copy_step.2
        );
    }
    let _ = writeln!(s, "// warp -> (warp_m, warp_n): {}", plan.warp_layout);
    let _ = writeln!(
        s,
        "__device__ __forceinline__ void warp_coord(int w, int& wm, int& wn) {{\n  const int c = {};\n  wm = c % {};\n  wn = c / {};\n}}",
        index_expr(&plan.warp_layout, "w"),
        plan.warps.0,
        plan.warps.0
    );
    operand_fns(&mut s, &plan.a, bk);
    operand_fns(&mut s, &plan.b, bk);
    let _ = writeln!(
        s,
        "// accumulator (lane,reg) -> (row,col) of the 16x8 atom: {}",
        plan.acc
    );
    let _ = writeln!(
        s,
        "__device__ __forceinline__ void acc_coord(int l, int r, int& row, int& col) {{\n  const int c = {};\n  row = c % 16;\n  col = c / 16;\n}}",
        modes_expr(&plan.acc, &["l", "r"])
    );
    debug_assert_eq!(size_of(&plan.acc), 128);
    let _ = writeln!(s, "// ---- end of generated preamble ----");
    s
}

/// The complete, self-contained CUDA source NVRTC compiles for `plan`: a header line, the
/// device helpers, the generated preamble and the kernel template, in that order.
pub fn cuda_source(plan: &GemmPlan) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "// tessera sm80-class GEMM `{}`", plan.kernel_name());
    s.push_str(COMMON_CUH);
    s.push('\n');
    s.push_str(&preamble(plan));
    s.push('\n');
    s.push_str(GEMM_SM80_CUH);
    s
}
