//! The GEMM planners' hand-picked shared-memory swizzles against the synthesized ones: for
//! every kernel variant, `best_swizzle` over the same tile and the same warp accesses takes
//! no more wavefronts and keeps the vector widths. Run with `--nocapture` for the table.
//!
//! The accesses are the ones the planners check (sm80: one warp's `ldmatrix.x4` and one
//! warp's 16-byte `cp.async`; sm90 epilogue: one warp's fragment store), rebuilt here from
//! the plan's public layouts exactly as the planners build them. The sm90 operand tiles are
//! written by TMA and read by wgmma through descriptors; their access is modelled as the
//! 8 rows x 16 bytes of one wgmma core matrix (8 lanes, 16 bytes each) and 8 lanes of 16
//! bytes along one 128-byte row, and the candidates are the swizzle modes the TMA unit has.
//!
//! The planners run the synthesis themselves (`plan::AtomChoice`); the swizzle each plan
//! records as synthesized is checked here against this independent computation.

use tessera::kernels::plan::{GemmPlan, GemmProblem, PlanOptions};
use tessera::kernels::plan::{Sm90Options, Sm90Plan};
use tessera::kernels::{Arch, DType, Major};
use tessera::layout::{composition, Layout};
use tessera::swizzle::algebra::composition as sw_composition;
use tessera::swizzle::{
    atoms, bank_conflicts, best_swizzle, best_swizzle_among, vectorization, Swizzle, SwizzledLayout,
};

/// Elements one lane moves in a 16-byte `ldmatrix` row or `cp.async` (the planners' `VEC`).
const VEC: i64 = 8;

fn lay(s: &str) -> Layout {
    s.parse().unwrap()
}

/// The TMA swizzle modes (none, 32, 64, 128 bytes) on `elem_bytes`-byte elements.
fn tma_modes(elem_bytes: i64) -> Vec<Swizzle> {
    [16, 32, 64, 128]
        .iter()
        .map(|&w| atoms::byte_swizzle(w).unwrap().upcast(elem_bytes).unwrap())
        .collect()
}

/// Wavefronts of each access through `sw o 0 o inner`, and their vector widths, by the
/// library's `bank_conflicts` and `vectorization` (not by the synthesis).
fn measure(sw: Swizzle, inner: &Layout, accesses: &[Layout], bytes: i64) -> (i64, Vec<i64>) {
    let tile = SwizzledLayout::new(sw, 0, inner.clone());
    let mut total = 0;
    let mut widths = Vec::new();
    for a in accesses {
        let through = sw_composition(&tile, a).unwrap();
        total += bank_conflicts(&through, bytes).unwrap().wavefronts;
        widths.push(vectorization(&through, bytes).unwrap().vector_elems);
    }
    (total, widths)
}

/// Compares the hand-picked swizzle with the synthesized one (and, when given, with the best
/// of `restricted`), prints a row of the table and asserts the synthesized one is as good.
fn compare(
    what: &str,
    hand: Swizzle,
    inner: &Layout,
    accesses: &[Layout],
    bytes: i64,
    restricted: Option<&[Swizzle]>,
) {
    let (hand_w, hand_v) = measure(hand, inner, accesses, bytes);
    let best = best_swizzle(accesses, inner, bytes).unwrap();
    let (best_w, best_v) = measure(best.swizzle, inner, accesses, bytes);
    assert_eq!(
        best_w,
        best.wavefronts(),
        "{what}: the synthesis's own count"
    );
    assert!(
        best_w <= hand_w,
        "{what}: {} takes {best_w} > {hand_w}",
        best.swizzle
    );
    assert!(
        best_v.iter().zip(&hand_v).all(|(b, h)| b >= h),
        "{what}: vectors {best_v:?} < {hand_v:?}"
    );
    let ideal: i64 = best.conflicts.iter().map(|c| c.ideal).sum();
    let mut row = format!(
        "{what:<44} ideal {ideal:>2} | hand {hand} {hand_w:>2} | best {} {best_w:>2}",
        best.swizzle
    );
    if let Some(modes) = restricted {
        let r = best_swizzle_among(accesses, inner, bytes, modes).unwrap();
        let (r_w, _) = measure(r.swizzle, inner, accesses, bytes);
        assert!(r_w <= hand_w, "{what}: TMA mode {} takes {r_w}", r.swizzle);
        row.push_str(&format!(" | among TMA modes {} {r_w:>2}", r.swizzle));
    }
    eprintln!("{row}");
}

/// Every sm80 plan variant: 16-bit inputs, each storage order of A and B, the tiles and both
/// BK the planner takes (those it plans).
#[test]
fn sm80_operand_atoms_are_matched_or_beaten() {
    let mut variants = 0;
    for input in [DType::F16, DType::Bf16] {
        for (a_major, b_major) in [
            (Major::Row, Major::Col),
            (Major::Row, Major::Row),
            (Major::Col, Major::Col),
            (Major::Col, Major::Row),
        ] {
            for tile in [(128, 128, 64), (128, 256, 64), (64, 64, 32), (256, 128, 32)] {
                let mut p = GemmProblem::new(4096, 4096, 4096);
                p.input = input;
                p.a_major = a_major;
                p.b_major = b_major;
                let opts = PlanOptions {
                    tile: Some(tile),
                    stages: Some(2),
                };
                // Some tile and order pairs are not plannable (the copy partition does not
                // step affinely); the planner refuses them, and so there is nothing to compare.
                let Ok(plan) = GemmPlan::with_options(&p, Arch::Sm80, opts) else {
                    continue;
                };
                for o in [&plan.a, &plan.b] {
                    let bytes = input.bytes();
                    let vec_stride = if o.k_major { o.tile_mn } else { 1 };
                    let vec = Layout::int(VEC, vec_stride).unwrap();
                    let ldsm = Layout::concat([o.ldsm.clone(), vec.clone()]).unwrap();
                    let lanes = composition(&o.copy.mode(0).unwrap(), &lay("32:1")).unwrap();
                    let copy = Layout::concat([lanes, vec]).unwrap();
                    let what = format!(
                        "sm80 {input} {}x{}x{} {} {}-major",
                        tile.0,
                        tile.1,
                        tile.2,
                        o.name,
                        if o.k_major { "K" } else { "MN" }
                    );
                    let hand = o.smem.tile.swizzle;
                    let planner =
                        o.smem.ldsm_conflicts.wavefronts + o.smem.copy_conflicts.wavefronts;
                    let (hand_w, _) = measure(
                        hand,
                        &o.smem.tile.inner,
                        &[ldsm.clone(), copy.clone()],
                        bytes,
                    );
                    assert_eq!(hand_w, planner, "{what}: the planner's own count");
                    let best =
                        best_swizzle(&[ldsm.clone(), copy.clone()], &o.smem.tile.inner, bytes)
                            .unwrap();
                    assert_eq!(o.swizzle.synthesized, best.swizzle, "{what}: the planner's");
                    compare(&what, hand, &o.smem.tile.inner, &[ldsm, copy], bytes, None);
                    variants += 1;
                }
            }
        }
    }
    assert!(variants >= 40, "only {variants} operand tiles planned");
}

/// The sm90 operand tiles (128-byte TMA swizzle over BK = 64 halves) and the epilogue's
/// store buffer (64-byte swizzle), for both tile widths and both schedules.
#[test]
fn sm90_atoms_are_matched_or_beaten() {
    for tile in [(128, 128), (128, 256), (64, 128)] {
        let opts = Sm90Options {
            tile: Some(tile),
            ..Sm90Options::default()
        };
        let plan = Sm90Plan::with_options(&GemmProblem::new(4096, 4096, 4096), opts).unwrap();
        for o in [&plan.a, &plan.b] {
            let bytes = 2;
            let mn = o.tile_mn;
            // coordinates (mn, k) of the (tile_mn, 64) tile, index mn + tile_mn * k
            let core = Layout::new(
                tessera::layout::IntTuple::flat([8, 8]),
                tessera::layout::IntTuple::flat([1, mn]),
            )
            .unwrap();
            let row = Layout::new(
                tessera::layout::IntTuple::flat([8, 8]),
                tessera::layout::IntTuple::flat([8 * mn, mn]),
            )
            .unwrap();
            let s = &o.smem.swizzle;
            let hand = Swizzle::new(s.bits as i64, s.base as i64, s.shift as i64).unwrap();
            let what = format!(
                "sm90 {}x{} {} K-major (wgmma core, TMA row)",
                tile.0, tile.1, o.name
            );
            let among = best_swizzle_among(
                &[core.clone(), row.clone()],
                &o.smem.layout,
                bytes,
                &tma_modes(bytes),
            )
            .unwrap();
            assert_eq!(
                o.swizzle.synthesized, among.swizzle,
                "{what}: the planner's"
            );
            compare(
                &what,
                hand,
                &o.smem.layout,
                &[core, row],
                bytes,
                Some(&tma_modes(bytes)),
            );
        }
        if let Some(store) = &plan.store {
            let acc = &plan.acc;
            let lanes = composition(&acc.mode(0).unwrap(), &lay("32:1")).unwrap();
            let pair = composition(&acc.mode(1).unwrap(), &lay("2:1")).unwrap();
            let access = Layout::concat([lanes, pair]).unwrap();
            let s = &store.smem.swizzle;
            let hand = Swizzle::new(s.bits as i64, s.base as i64, s.shift as i64).unwrap();
            let (hand_w, _) = measure(hand, &store.smem.layout, std::slice::from_ref(&access), 2);
            assert_eq!(
                hand_w, store.conflicts.wavefronts,
                "the planner's own count"
            );
            let what = format!("sm90 {}x{} epilogue store buffer", tile.0, tile.1);
            let among = best_swizzle_among(
                std::slice::from_ref(&access),
                &store.smem.layout,
                2,
                &tma_modes(2),
            )
            .unwrap();
            assert_eq!(
                store.swizzle.synthesized, among.swizzle,
                "{what}: the planner's"
            );
            compare(
                &what,
                hand,
                &store.smem.layout,
                &[access],
                2,
                Some(&tma_modes(2)),
            );
        }
    }
}

/// The standard atoms of the swizzle crate, each with the column-of-chunks read its swizzle
/// is made for (ldmatrix rows for K-major, `.trans` rows for MN-major).
#[test]
fn standard_atoms_are_matched_or_beaten() {
    for (name, atom) in atoms::all_atoms() {
        let bytes = if name.ends_with("8-bit") {
            1
        } else if name.ends_with("16-bit") {
            2
        } else {
            4
        };
        let per_chunk = 16 / bytes;
        let (rows, cols) = (
            atom.inner.mode(0).unwrap().size(),
            atom.inner.mode(1).unwrap().size(),
        );
        // 8 lanes, one 16-byte chunk each, down the strided dimension
        let read = if name.starts_with("K") {
            Layout::new(
                tessera::layout::IntTuple::flat([rows.min(8), per_chunk]),
                tessera::layout::IntTuple::flat([1, rows]),
            )
        } else {
            Layout::new(
                tessera::layout::IntTuple::flat([cols.min(8), per_chunk]),
                tessera::layout::IntTuple::flat([rows, 1]),
            )
        }
        .unwrap();
        compare(
            &name,
            atom.swizzle,
            &atom.inner,
            &[read],
            bytes,
            Some(&tma_modes(bytes)),
        );
    }
}
