//! The GEMM planner: from a [`GemmProblem`] and an [`Arch`] to a [`GemmPlan`], a plain value
//! holding every layout the kernel needs, each derived with the layout algebra.
//!
//! Coordinate conventions (CuTe's): an operand tile is the `(mn, k)` coordinate space of shape
//! `(BM, BK)` (A) or `(BN, BK)` (B), linearized colexicographically, `idx = mn + BM * k`.
//! A *coordinate layout* maps some index space (threads, lanes, registers) into such a
//! coordinate index; an *offset layout* maps coordinates to element offsets in memory.

use std::fmt;

use tessera_layout::{
    coalesce, composition, right_inverse, tile_to_shape, zipped_divide, IntTuple, Layout, Tiler,
};
use tessera_swizzle::algebra::composition as sw_composition;
use tessera_swizzle::atoms::{smem_atom, Major as SwMajor};
use tessera_swizzle::{bank_conflicts, BankConflicts, Swizzle, SwizzledLayout};

use crate::arch::Arch;
use crate::error::{KernelError, Result};
use crate::plan::atom_choice::{choose_swizzle, AtomChoice, Candidates, TileAccess};
use crate::plan::problem::{DType, GemmProblem, Major};

/// An XOR swizzle `Sw<B,M,S>` as three numbers, for planners that build their own layouts
/// (the sm80 plan uses `tessera_swizzle::Swizzle` through [`StageLayout`]). Applied to an offset: `o ^ ((o & (((1<<B)-1) << (M+S))) >> S)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwizzleBits {
    /// Number of bits XOR-ed (`B`).
    pub bits: u32,
    /// Bits of the offset left untouched at the bottom (`M`, log2 of the vector length).
    pub base: u32,
    /// Distance from the source bits to the target bits (`S`).
    pub shift: u32,
}

impl SwizzleBits {
    /// The swizzle crate's `Sw<B,M,S>` as three numbers, or `None` for a negative shift
    /// (`YYY` below `ZZZ`), which these planners' kernels do not apply.
    pub fn of(sw: Swizzle) -> Option<SwizzleBits> {
        Some(SwizzleBits {
            bits: u32::try_from(sw.bits()).ok()?,
            base: u32::try_from(sw.base()).ok()?,
            shift: u32::try_from(sw.shift()).ok()?,
        })
    }

    /// Applies the swizzle to an offset.
    pub fn apply(&self, o: i64) -> i64 {
        let mask = ((1i64 << self.bits) - 1) << (self.base + self.shift);
        o ^ ((o & mask) >> self.shift)
    }
}

impl fmt::Display for SwizzleBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sw<{},{},{}>", self.bits, self.base, self.shift)
    }
}

/// A swizzled shared-memory layout: `swizzle o layout`, from tile coordinates `(mn, k)` to the
/// element offset inside one pipeline stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemLayout {
    /// The swizzle applied to the layout's offsets.
    pub swizzle: SwizzleBits,
    /// The unswizzled tile layout `(BMN, BK) -> offset`.
    pub layout: Layout,
    /// The atom the tile layout repeats (before the swizzle).
    pub atom: Layout,
}

impl SmemLayout {
    /// `Sw<bits,3,3> o (rows, cols):(cols, 1)` repeating an 8-row atom: a row-major tile whose
    /// 16-byte chunks (of 16-bit elements) the swizzle permutes within each 8-row group, the
    /// layout TMA writes with the swizzle of span `2^bits` chunks.
    pub fn row_major_swizzled(
        op: &'static str,
        bits: u32,
        rows: i64,
        cols: i64,
    ) -> Result<SmemLayout> {
        let swizzle = SwizzleBits {
            bits,
            base: 3,
            shift: 3,
        };
        SmemLayout::row_major(op, swizzle, rows, cols)
    }

    /// `swizzle o (rows, cols):(cols, 1)` repeating an 8-row atom, for any swizzle.
    pub fn row_major(
        op: &'static str,
        swizzle: SwizzleBits,
        rows: i64,
        cols: i64,
    ) -> Result<SmemLayout> {
        let lay = |s: String| -> Result<Layout> { s.parse().map_err(KernelError::layout(op)) };
        Ok(SmemLayout {
            swizzle,
            layout: lay(format!("({rows},{cols}):({cols},1)"))?,
            atom: lay(format!("(8,{cols}):({cols},1)"))?,
        })
    }

    /// The same layout as a [`SwizzledLayout`] of the swizzle crate, for its algebra and
    /// bank-conflict count.
    pub fn swizzled(&self, op: &'static str) -> Result<SwizzledLayout> {
        let sw = tessera_swizzle::Swizzle::new(
            self.swizzle.bits as i64,
            self.swizzle.base as i64,
            self.swizzle.shift as i64,
        )
        .map_err(KernelError::swizzle(op))?;
        Ok(SwizzledLayout::new(sw, 0, self.layout.clone()))
    }

    /// The swizzled offset of coordinate `(mn, k)`.
    pub fn offset(&self, mn: i64, k: i64) -> Result<i64> {
        let c = tessera_layout::IntTuple::flat([mn, k]);
        let o = self
            .layout
            .eval(&c)
            .map_err(KernelError::layout("SmemLayout::offset"))?;
        Ok(self.swizzle.apply(o))
    }
}

impl fmt::Display for SmemLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} o 0 o {}", self.swizzle, self.layout)
    }
}

/// A swizzled shared-memory layout: from tile coordinates `(mn, k)` to the element offset
/// inside one pipeline stage, `Sw<B,M,S> o 0 o L`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageLayout {
    /// The whole stage: the atom tiled over `(tile_mn, BK)`.
    pub tile: SwizzledLayout,
    /// The swizzle atom: the standard atom's layout (`tessera_swizzle::atoms::smem_atom`)
    /// under the swizzle the plan uses ([`OperandPlan::swizzle`]).
    pub atom: SwizzledLayout,
    /// Shared-memory wavefronts / ideal of one warp's `ldmatrix.x4` (16 bytes per lane).
    pub ldsm_conflicts: BankConflicts,
    /// Shared-memory wavefronts / ideal of one warp's 16-byte `cp.async` writes.
    pub copy_conflicts: BankConflicts,
}

impl StageLayout {
    /// The swizzled offset of coordinate `(mn, k)`.
    pub fn offset(&self, mn: i64, k: i64) -> Result<i64> {
        let c = IntTuple::flat([mn, k]);
        self.tile
            .eval(&c)
            .map_err(KernelError::swizzle("StageLayout::offset"))
    }
}

impl fmt::Display for StageLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.tile)
    }
}

/// One operand's part of the plan (A or B).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperandPlan {
    /// `A` or `B`.
    pub name: &'static str,
    /// Extent of the tile along M (A) or N (B).
    pub tile_mn: i64,
    /// Whether K is the contiguous mode in global memory (A row-major, B column-major).
    pub k_major: bool,
    /// The swizzled shared-memory layout of one stage.
    pub smem: StageLayout,
    /// `(thread, iteration) -> (mn, k)` coordinate index of the first element of each 16-byte
    /// cp.async vector (8 elements along the contiguous mode).
    pub copy: Layout,
    /// The copy's per-iteration step `(d_mn, d_k, d_smem_offset)`.
    pub copy_step: (i64, i64, i64),
    /// `lane -> (mn, k)` coordinate index of the row address each lane hands to
    /// `ldmatrix.x4` (`.trans` when the operand is MN-major), for the first 16x16 (A) or
    /// 16(n)x16(k) (B) block of a warp.
    pub ldsm: Layout,
    /// The stage's swizzle as swizzle synthesis picks it for one warp's `ldmatrix.x4` and one
    /// warp's `cp.async`, against the standard atom's; `smem` has the one it names as used.
    pub swizzle: AtomChoice,
}

/// A GEMM plan: everything the generated preamble and the launch need, as plain values.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPlan {
    /// The problem planned for.
    pub problem: GemmProblem,
    /// The compilation target.
    pub arch: Arch,
    /// CTA tile `(BM, BN, BK)`.
    pub cta_tile: (i64, i64, i64),
    /// Warps along M and N.
    pub warps: (i64, i64),
    /// The tile one warp computes, `(WM, WN)`.
    pub warp_tile: (i64, i64),
    /// MMA atom shape `(M, N, K)`: mma.sync m16n8k16.
    pub mma: (i64, i64, i64),
    /// MMA atoms per warp along M and N.
    pub mma_per_warp: (i64, i64),
    /// Threads per CTA.
    pub threads: i64,
    /// Pipeline depth.
    pub stages: i64,
    /// CTA tile-rows walking N together (L2 raster).
    pub group_m: i64,
    /// `warp index -> (warp_m, warp_n)` coordinate index in the `(warps_m, warps_n)` grid.
    pub warp_layout: Layout,
    /// Operand A.
    pub a: OperandPlan,
    /// Operand B.
    pub b: OperandPlan,
    /// `(lane, register) -> (row, col)` coordinate index `row + 16 * col` of the mma atom's
    /// fp32 accumulator fragment (16 x 8).
    pub acc: Layout,
    /// Shared memory per stage, bytes.
    pub smem_stage_bytes: i64,
    /// fp32 epilogue scratch (16 rows of each warp's tile, rows padded by 8 floats), bytes;
    /// it reuses the pipeline's shared memory after the mainloop.
    pub epilogue_scratch_bytes: i64,
    /// Dynamic shared memory of the kernel: the larger of the pipeline and the scratch, bytes.
    pub smem_bytes: i64,
    /// The target's per-block limit, bytes.
    pub smem_budget: i64,
}

/// Choices the planner would otherwise make itself (for experiments and the benchmark).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Force the CTA tile `(BM, BN, BK)`.
    pub tile: Option<(i64, i64, i64)>,
    /// Force the number of stages.
    pub stages: Option<i64>,
}

const WARP_TILE: (i64, i64) = (64, 64);
const MMA: (i64, i64, i64) = (16, 8, 16);
const VEC: i64 = 8;

fn lay(shape: &str, stride: &str) -> Result<Layout> {
    format!("{shape}:{stride}")
        .parse()
        .map_err(KernelError::layout("GemmPlan"))
}

impl GemmPlan {
    /// Plans `problem` for `arch` with the planner's own choices.
    pub fn new(problem: &GemmProblem, arch: Arch) -> Result<GemmPlan> {
        GemmPlan::with_options(problem, arch, PlanOptions::default())
    }

    /// Plans `problem` for `arch`, with some choices forced.
    ///
    /// A column-major D is planned as the transposed product ([`GemmProblem::row_major_d`]):
    /// every derived quantity below (tile, operand layouts, grid) is that problem's, and the
    /// launch exchanges A and B; `problem` stays the one asked for.
    pub fn with_options(logical: &GemmProblem, arch: Arch, opts: PlanOptions) -> Result<GemmPlan> {
        logical.validate()?;
        let problem = &logical.row_major_d();
        let op = "GemmPlan::new";
        let (bm, bn, bk) = match opts.tile {
            Some(t) => t,
            None => super::policy::sm80_tile(problem).value,
        };
        let (wm, wn) = WARP_TILE;
        if bm % wm != 0 || bn % wn != 0 || bk % 32 != 0 || !(32..=64).contains(&bk) {
            return Err(KernelError::invalid(
                op,
                format!("CTA tile {bm}x{bn}x{bk} must be a multiple of the {wm}x{wn} warp tile, with BK 32 or 64"),
            ));
        }
        if bm < 64 || bn < 64 || bm > 256 || bn > 256 {
            return Err(KernelError::invalid(
                op,
                format!("CTA tile {bm}x{bn}x{bk} outside 64..=256"),
            ));
        }
        let warps = (bm / wm, bn / wn);
        let threads = 32 * warps.0 * warps.1;
        let elem = problem.input.bytes();
        let smem_stage_bytes = (bm + bn) * bk * elem;
        let smem_budget = arch.smem_per_block_optin();
        let fit = smem_budget / smem_stage_bytes;
        let stages = match opts.stages {
            Some(s) => s,
            None => super::policy::sm80_stages(fit).value,
        };
        if stages < 2 || stages > fit {
            return Err(KernelError::UnsupportedArch {
                op,
                arch: arch.to_string(),
                msg: format!(
                    "{stages} stages of {smem_stage_bytes} bytes do not fit the {smem_budget}-byte shared memory (at most {fit}, at least 2)"
                ),
            });
        }
        let epilogue_scratch_bytes = warps.0 * warps.1 * 16 * (wn + 8) * 4;
        let shape = |tile_mn, k_major, warps_along, warp_tile| OperandShape {
            tile_mn,
            bk,
            k_major,
            threads,
            elem_bytes: elem,
            warps_along,
            warp_tile,
        };
        let a = operand_plan("A", shape(bm, problem.a_major == Major::Row, warps.0, wm))?;
        let b = operand_plan("B", shape(bn, problem.b_major == Major::Col, warps.1, wn))?;
        // The CTA tile divided into warp tiles: mode 1 of the zipped divide is the warp grid.
        let cta = Layout::col_major(t2(bm, bn)).map_err(KernelError::layout(op))?;
        let by_warp = zipped_divide(&cta, &tiler2(wm, wn)?).map_err(KernelError::layout(op))?;
        let warp_grid = by_warp.mode(1).map_err(KernelError::layout(op))?;
        let warp_layout = Layout::col_major(warp_grid.shape().as_tuple().clone())
            .map_err(KernelError::layout(op))?;
        // The m16n8k16 fp32 accumulator fragment: lane = (t%4, t/4) holds columns 2(t%4)+{0,1}
        // of rows t/4 and t/4 + 8 (PTX ISA, "Matrix Fragments for mma.m16n8k16").
        let acc = lay("((4,8),(2,2))", "((32,1),(16,8))")?;
        Ok(GemmPlan {
            problem: *logical,
            arch,
            cta_tile: (bm, bn, bk),
            warps,
            warp_tile: WARP_TILE,
            mma: MMA,
            mma_per_warp: (wm / MMA.0, wn / MMA.1),
            threads,
            stages,
            group_m: super::policy::GROUP_M,
            warp_layout,
            a,
            b,
            acc,
            smem_stage_bytes,
            epilogue_scratch_bytes,
            smem_bytes: (stages * smem_stage_bytes).max(epilogue_scratch_bytes),
            smem_budget,
        })
    }

    /// A short name that identifies the generated kernel source.
    pub fn kernel_name(&self) -> String {
        let (bm, bn, bk) = self.cta_tile;
        format!(
            "tessera_gemm_{}_{}{}_{}x{}x{}_s{}_{}",
            self.problem.input,
            if self.a.k_major { "t" } else { "n" },
            if self.b.k_major { "n" } else { "t" },
            bm,
            bn,
            bk,
            self.stages,
            self.arch
        )
    }

    /// The problem the kernel runs: `problem` itself, or its transposed product when D is
    /// column-major ([`GemmProblem::row_major_d`]).
    pub fn kernel_problem(&self) -> GemmProblem {
        self.problem.row_major_d()
    }

    /// CTAs along the kernel problem's M and N.
    pub fn grid_tiles(&self) -> (i64, i64) {
        let (bm, bn, _) = self.cta_tile;
        let p = self.kernel_problem();
        ((p.m + bm - 1) / bm, (p.n + bn - 1) / bn)
    }
}

/// What an operand's plan is derived from: its tile, storage order, the CTA's threads and the
/// warps that read it.
#[derive(Clone, Copy)]
struct OperandShape {
    tile_mn: i64,
    bk: i64,
    k_major: bool,
    threads: i64,
    elem_bytes: i64,
    /// Warps along the operand's MN, each reading `warp_tile` rows of the tile.
    warps_along: i64,
    warp_tile: i64,
}

/// One operand's plan: the copy and ldmatrix partitions, then the stage's swizzle from
/// swizzle synthesis over the two warp accesses they make ([`warp_accesses`]), measured against
/// the standard atom ([`hand_picked_atom`]), then the checks of the stage with the swizzle
/// used.
fn operand_plan(name: &'static str, s: OperandShape) -> Result<OperandPlan> {
    let op = "smem layout";
    let copy = copy_layout(s.tile_mn, s.bk, s.k_major, s.threads)?;
    let ldsm = ldsm_layout(name, s.tile_mn, s.k_major)?;
    let hand = hand_picked_atom(s.bk, s.k_major, s.elem_bytes)?;
    let tile =
        tile_to_shape(&hand.inner, &t2(s.tile_mn, s.bk), None).map_err(KernelError::layout(op))?;
    let accesses = warp_accesses(&copy, &ldsm, s.k_major, s.tile_mn)?;
    let build = |choice: AtomChoice| -> Result<OperandPlan> {
        let sw = choice.used;
        // The generated `smem_*_offset` applies the swizzle as a right shift.
        if sw.shift() < 0 {
            return Err(KernelError::invalid(
                op,
                format!("{sw} has a negative shift, which the kernel's XOR does not apply"),
            ));
        }
        let none = BankConflicts {
            wavefronts: 0,
            ideal: 0,
        };
        let smem = StageLayout {
            tile: SwizzledLayout::new(sw, 0, tile.clone()),
            atom: SwizzledLayout::new(sw, 0, hand.inner.clone()),
            ldsm_conflicts: none,
            copy_conflicts: none,
        };
        let mut o = OperandPlan {
            name,
            tile_mn: s.tile_mn,
            k_major: s.k_major,
            smem,
            copy: copy.clone(),
            copy_step: (0, 0, 0),
            ldsm: ldsm.clone(),
            swizzle: choice,
        };
        o.copy_step = copy_steps(&o, s.threads)?;
        check_banks(&mut o, s.elem_bytes)?;
        check_ldsm_xor(&o, s.warps_along, s.warp_tile, 16, s.bk)?;
        Ok(o)
    };
    let choice = choose_swizzle(
        op,
        &accesses,
        &tile,
        s.elem_bytes,
        Candidates::Every,
        hand.swizzle,
    )?;
    // A synthesized swizzle the planner's own checks refuse gives way to the hand-picked one.
    choice.build(|c| build(c.clone())).map(|(o, _)| o)
}

fn t2(a: i64, b: i64) -> IntTuple {
    IntTuple::flat([a, b])
}

fn tiler2(a: i64, b: i64) -> Result<Tiler> {
    Tiler::from_shape(&t2(a, b)).map_err(KernelError::layout("make_tile"))
}

/// The standard shared-memory atom of an operand, the swizzle crate's, picked by hand for
/// the operand's major order: K-major, 8 rows of BK elements swizzled over BK * elem bytes
/// (so the 8 rows of one ldmatrix 8x8 matrix fall in 8 bank groups); MN-major, 64 elements by
/// 8 k-rows under the 128-byte swizzle. The stage tiles it over the tile by `tile_to_shape`
/// (MN first, then K).
fn hand_picked_atom(bk: i64, k_major: bool, elem_bytes: i64) -> Result<SwizzledLayout> {
    let op = "smem layout";
    let atom = if k_major {
        smem_atom(SwMajor::K, bk * elem_bytes, elem_bytes)
    } else {
        smem_atom(SwMajor::MN, 128, elem_bytes)
    };
    atom.map_err(KernelError::swizzle(op))
}

/// The two warp accesses of an operand's stage, `(lane, value) -> (mn, k)` coordinate index:
/// one warp's `ldmatrix.x4` (each lane's row address, then the row's 8 elements) and one
/// warp's 16-byte `cp.async` writes (the first 32 threads' first vectors). Each lane touches
/// 8 consecutive elements along the contiguous mode.
fn warp_accesses(
    copy: &Layout,
    ldsm: &Layout,
    k_major: bool,
    tile_mn: i64,
) -> Result<[TileAccess; 2]> {
    let op = "bank conflicts";
    let lerr = KernelError::layout;
    let vec_stride = if k_major { tile_mn } else { 1 };
    let vec = Layout::int(VEC, vec_stride).map_err(lerr(op))?;
    let ldsm_access = Layout::concat([ldsm.clone(), vec.clone()]).map_err(lerr(op))?;
    let lanes = composition(
        &copy.mode(0).map_err(lerr(op))?,
        &Layout::int(32, 1).map_err(lerr(op))?,
    )
    .map_err(lerr(op))?;
    let copy_access = Layout::concat([lanes, vec]).map_err(lerr(op))?;
    Ok([
        TileAccess {
            name: "ldmatrix.x4",
            layout: ldsm_access,
        },
        TileAccess {
            name: "cp.async",
            layout: copy_access,
        },
    ])
}

/// Counts the shared-memory wavefronts of one warp's ldmatrix.x4 and one warp's cp.async
/// through the swizzled layout (`bank_conflicts` of the swizzle crate) and requires both to
/// be conflict-free.
fn check_banks(o: &mut OperandPlan, elem_bytes: i64) -> Result<()> {
    let op = "bank conflicts";
    for access in warp_accesses(&o.copy, &o.ldsm, o.k_major, o.tile_mn)? {
        let through =
            sw_composition(&o.smem.tile, &access.layout).map_err(KernelError::swizzle(op))?;
        let c = bank_conflicts(&through, elem_bytes).map_err(KernelError::swizzle(op))?;
        if !c.is_conflict_free() {
            return Err(KernelError::BankConflicts {
                op,
                layout: o.smem.tile.to_string(),
                access: format!("{} {} {}", o.name, access.name, access.layout),
                conflicts: c.wavefronts - c.ideal,
            });
        }
        if access.name == "cp.async" {
            o.smem.copy_conflicts = c;
        } else {
            o.smem.ldsm_conflicts = c;
        }
    }
    Ok(())
}

/// `(thread, iteration) -> (mn, k)` coordinate index of each 8-element (16-byte) vector.
///
/// Derivation: the tile's vectors form a grid `G` (`(T, BK/8)` K-major, `(T/8, BK)` MN-major).
/// Threads cover a block of that grid with the contiguous mode fastest (`thr`, block -> thread);
/// `zipped_divide(G, block)` splits the grid into (position in block, block); the position of
/// thread `t` is `right_inverse(thr)(t)`, and the blocks are the iterations. Composing with
/// `E` (grid -> element coordinate) gives the answer.
fn copy_layout(tile_mn: i64, bk: i64, k_major: bool, threads: i64) -> Result<Layout> {
    let op = "copy partition";
    let err = KernelError::layout;
    let (gm, gk) = if k_major {
        (tile_mn, bk / VEC)
    } else {
        (tile_mn / VEC, bk)
    };
    let (bm, bkk) = if k_major {
        (threads / gk, gk) // rows of whole vector-rows
    } else {
        (gm, threads / gm) // whole vector-columns of k
    };
    if bm < 1 || bkk < 1 || gm % bm != 0 || gk % bkk != 0 {
        return Err(KernelError::invalid(
            op,
            format!(
                "{threads} threads do not tile the {gm}x{gk} vector grid of a {tile_mn}x{bk} tile"
            ),
        ));
    }
    let grid = Layout::col_major(t2(gm, gk)).map_err(err(op))?;
    let divided = zipped_divide(&grid, &tiler2(bm, bkk)?).map_err(err(op))?;
    // Thread layout: block coordinate -> thread index, contiguous mode fastest.
    let thr = if k_major {
        lay(&format!("({bm},{bkk})"), &format!("({bkk},1)"))?
    } else {
        lay(&format!("({bm},{bkk})"), &format!("(1,{bm})"))?
    };
    let thread_pos = composition(
        &divided.mode(0).map_err(err(op))?,
        &right_inverse(&thr).map_err(err(op))?,
    )
    .map_err(err(op))?;
    let iters = coalesce(&divided.mode(1).map_err(err(op))?);
    let tv = Layout::concat([thread_pos, iters]).map_err(err(op))?;
    // Vector grid coordinate -> element coordinate index of the (tile_mn, bk) tile.
    let e = if k_major {
        lay(&format!("({gm},{gk})"), &format!("(1,{})", VEC * tile_mn))?
    } else {
        lay(&format!("({gm},{gk})"), &format!("({VEC},{tile_mn})"))?
    };
    let out = Layout::concat([
        coalesce(&composition(&e, &tv.mode(0).map_err(err(op))?).map_err(err(op))?),
        coalesce(&composition(&e, &tv.mode(1).map_err(err(op))?).map_err(err(op))?),
    ])
    .map_err(err(op))?;
    Ok(out)
}

/// `lane -> (mn, k)` coordinate index of the ldmatrix.x4 row addresses: the hardware atom
/// (which lane addresses which row of which 8x8 matrix, in the register order the MMA
/// fragment wants) composed with the embedding of a 16x16 block into the operand tile.
fn ldsm_layout(name: &str, tile_mn: i64, k_major: bool) -> Result<Layout> {
    let op = "ldmatrix partition";
    // Atoms in the (16, 16) block's coordinate index `mn + 16 k`.
    let atom = match (name, k_major) {
        // matrices (m0-7,k0-7), (m8-15,k0-7), (m0-7,k8-15), (m8-15,k8-15) = a0..a3
        ("A", true) => lay("(8,2,2)", "(1,8,128)")?,
        // .trans: lanes address k-rows; matrix j covers m 8(j%2).., k 8(j/2)..
        ("A", false) => lay("(8,2,2)", "(16,8,128)")?,
        // matrices (n0-7,k0-7), (n0-7,k8-15), (n8-15,k0-7), (n8-15,k8-15) = b0,b1 of two n8 atoms
        (_, true) => lay("(8,2,2)", "(1,128,8)")?,
        (_, false) => lay("(8,2,2)", "(16,128,8)")?,
    };
    let embed = lay("(16,16)", &format!("(1,{tile_mn})"))?;
    composition(&embed, &atom).map_err(KernelError::layout(op))
}

/// Coordinates `(mn, k)` of a coordinate index of a `(tile_mn, _)` tile.
fn coord_of(idx: i64, tile_mn: i64) -> (i64, i64) {
    (idx % tile_mn, idx / tile_mn)
}

/// The copy partition's iteration steps: `(d_mn, d_k, d_offset)` such that iteration `i` of
/// every thread is iteration 0 shifted by `i` steps, in coordinates and in swizzled offset.
/// The kernel keeps one address per thread and adds the steps; an error if that is not exact.
fn copy_steps(o: &OperandPlan, threads: i64) -> Result<(i64, i64, i64)> {
    let op = "copy steps";
    let err = KernelError::layout;
    let iters = o.copy.mode(1).map_err(err(op))?.size();
    let at = |t: i64, i: i64| -> Result<(i64, i64)> {
        let idx = o.copy.eval(&IntTuple::flat([t, i])).map_err(err(op))?;
        Ok(coord_of(idx, o.tile_mn))
    };
    let (m0, k0) = at(0, 0)?;
    let (m1, k1) = if iters > 1 { at(0, 1)? } else { (m0, k0) };
    let (dm, dk) = (m1 - m0, k1 - k0);
    let d_off = o.smem.offset(m1, k1)? - o.smem.offset(m0, k0)?;
    for t in 0..threads {
        let (bm, bk) = at(t, 0)?;
        let base = o.smem.offset(bm, bk)?;
        for i in 0..iters {
            let (cm, ck) = at(t, i)?;
            if (cm, ck) != (bm + i * dm, bk + i * dk) || o.smem.offset(cm, ck)? != base + i * d_off
            {
                return Err(KernelError::invalid(
                    op,
                    format!(
                        "{} copy {} is not affine in the iteration at thread {t}, iteration {i}",
                        o.name, o.copy
                    ),
                ));
            }
        }
    }
    Ok((dm, dk, d_off))
}

/// Checks that every ldmatrix address of a warp's operand slab is the lane's own offset XOR
/// the offset of the step: `sw(L(c_lane + c_step)) == sw(L(c_lane)) ^ sw(L(c_step))`, for
/// every warp position, lane, atom and k-step. Then the kernel computes one offset per lane.
fn check_ldsm_xor(
    o: &OperandPlan,
    warps_along: i64,
    warp_tile: i64,
    atom_step: i64,
    bk: i64,
) -> Result<()> {
    let op = "ldmatrix steps";
    for w in 0..warps_along {
        for lane in 0..32 {
            let (lm, lk) = coord_of(
                o.ldsm.call(lane).map_err(KernelError::layout(op))?,
                o.tile_mn,
            );
            let lm = lm + w * warp_tile;
            let base = o.smem.offset(lm, lk)?;
            for s in 0..warp_tile / atom_step {
                for kk in (0..bk).step_by(16) {
                    let step = o.smem.offset(s * atom_step, kk)?;
                    let got = o.smem.offset(lm + s * atom_step, lk + kk)?;
                    if got != base ^ step {
                        return Err(KernelError::invalid(
                            op,
                            format!("{}: offset of lane {lane} + step ({}, {kk}) is not XOR-separable in {}", o.name, s * atom_step, o.smem),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

impl fmt::Display for GemmPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (bm, bn, bk) = self.cta_tile;
        let (tm, tn) = self.grid_tiles();
        writeln!(f, "GEMM plan {}", self.kernel_name())?;
        writeln!(f, "  problem      {}", self.problem)?;
        if self.problem.d_major == Major::Col {
            writeln!(
                f,
                "  runs as      {} (D column-major: Dᵀ = Bᵀ Aᵀ, A and B exchanged)",
                self.kernel_problem()
            )?;
        }
        writeln!(f, "  target       {}", self.arch)?;
        writeln!(
            f,
            "  CTA tile     {bm}x{bn}x{bk}, grid {tm}x{tn}x{} CTAs, raster groups of {} tile-rows",
            self.problem.batch, self.group_m
        )?;
        writeln!(
            f,
            "  warps        {}x{} ({} threads), warp tile {}x{}, layout {}",
            self.warps.0,
            self.warps.1,
            self.threads,
            self.warp_tile.0,
            self.warp_tile.1,
            self.warp_layout
        )?;
        writeln!(
            f,
            "  MMA atom     mma.sync.m16n8k16.row.col.f32.{0}.{0}.f32, {1}x{2} atoms per warp",
            if self.problem.input == DType::Bf16 {
                "bf16"
            } else {
                "f16"
            },
            self.mma_per_warp.0,
            self.mma_per_warp.1
        )?;
        writeln!(
            f,
            "  accumulator  (lane,reg) -> (row,col) of 16x8: {}",
            self.acc
        )?;
        for o in [&self.a, &self.b] {
            writeln!(
                f,
                "  {} tile       {}x{} {}-major, smem {} (atom {})",
                o.name,
                o.tile_mn,
                bk,
                if o.k_major { "K" } else { "MN" },
                o.smem,
                o.smem.atom
            )?;
            writeln!(
                f,
                "    cp.async   (thread,iter) -> (mn,k): {} (16 B each)",
                o.copy
            )?;
            writeln!(
                f,
                "    ldmatrix   lane -> (mn,k): {}{}",
                o.ldsm,
                if o.k_major { "" } else { " (.trans)" }
            )?;
            writeln!(
                f,
                "    banks      wavefronts/ideal per warp: ldmatrix.x4 {}, cp.async {} ({})",
                o.smem.ldsm_conflicts,
                o.smem.copy_conflicts,
                if o.smem.ldsm_conflicts.is_conflict_free()
                    && o.smem.copy_conflicts.is_conflict_free()
                {
                    "conflict-free"
                } else {
                    "CONFLICTS"
                }
            )?;
            writeln!(f, "    swizzle    {}", o.swizzle)?;
        }
        writeln!(
            f,
            "  smem         {} stages x {} B = {} B (epilogue scratch {} B reuses it) of {} B",
            self.stages,
            self.smem_stage_bytes,
            self.smem_bytes,
            self.epilogue_scratch_bytes,
            self.smem_budget
        )?;
        Ok(())
    }
}
