//! Coordinate-aware epilogues: the tile analysis against a brute-force count, and the region
//! split against the one-kernel evaluation, for boundaries on and off the tile grid and
//! outside the output.

use tessera_kernels::epilogue::coord::{
    analyze, plan_coordinate_epilogue, split_regions, CoordStrategy,
};
use tessera_kernels::epilogue::eval::{evaluate, evaluate_region, EvalInputs};
use tessera_kernels::epilogue::{parse_epilogue, EpilogueTree, Expr, KernelCaps};
use tessera_kernels::rng::Rng;

fn trees(r0: i64, c0: i64) -> Vec<EpilogueTree> {
    [
        format!("select(row < {r0}, sigmoid(acc), tanh(acc))"),
        format!("select({r0} > row, sigmoid(acc), tanh(acc))"),
        format!("select(row >= {r0}, acc + bias_col, relu(acc))"),
        format!(
            "select(col <= {c0}, relu(acc), select(col < {}, silu(acc), -acc))",
            c0 + 37
        ),
        format!("bgrad_col(select(row < {r0}, acc, select(col > {c0}, 2 * acc, acc + 1)))"),
        format!("select(batch < 1, acc, select({c0} <= col, gelu(acc), acc * 0.5))"),
    ]
    .iter()
    .map(|s| parse_epilogue(s).unwrap())
    .collect()
}

fn has_select(e: &Expr) -> bool {
    e.any(&|x| matches!(x, Expr::Select(..)))
}

/// Tiles whose elements do not all take the same branch of every select, by evaluating the
/// predicates element by element.
fn brute_force_divergent(t: &EpilogueTree, m: i64, n: i64, tile: (i64, i64)) -> i64 {
    // A tree with a distinct value per branch combination: D = select(...) encoded by
    // evaluating the predicate of each select at each element.
    let mut preds = Vec::new();
    t.d.visit_post(&mut |e| {
        if let Expr::Select(p, _, _) = e {
            preds.push((**p).clone());
        }
    });
    let value_of = |p: &Expr, i: i64, j: i64| -> bool {
        let probe = EpilogueTree::new(tessera_kernels::epilogue::build::select(
            p.clone(),
            tessera_kernels::epilogue::build::num(1.0),
            tessera_kernels::epilogue::build::num(0.0),
        ));
        let acc = vec![0.0; (m * n) as usize];
        let inp = EvalInputs::new(m as usize, n as usize, 1, &acc);
        let o = evaluate_region(
            &probe,
            &inp,
            i as usize..i as usize + 1,
            j as usize..j as usize + 1,
        )
        .unwrap();
        o.d[(i * n + j) as usize] == 1.0
    };
    let mut count = 0;
    for ti in 0..(m + tile.0 - 1) / tile.0 {
        for tj in 0..(n + tile.1 - 1) / tile.1 {
            let mut div = false;
            for p in &preds {
                let first = value_of(p, ti * tile.0, tj * tile.1);
                'tile: for i in ti * tile.0..((ti + 1) * tile.0).min(m) {
                    for j in tj * tile.1..((tj + 1) * tile.1).min(n) {
                        if value_of(p, i, j) != first {
                            div = true;
                            break 'tile;
                        }
                    }
                }
            }
            count += i64::from(div);
        }
    }
    count
}

#[test]
fn tile_analysis_matches_brute_force() {
    let (m, n, tile) = (50, 40, (16, 8));
    for (r0, c0) in [
        (16, 8),
        (32, 24),
        (17, 9),
        (0, 40),
        (-3, 100),
        (49, 1),
        (50, 39),
    ] {
        for t in trees(r0, c0) {
            let a = analyze(&t, m, n, tile).unwrap();
            assert!(!a.general);
            assert_eq!(a.tiles, 4 * 5);
            assert_eq!(
                a.divergent_tiles,
                brute_force_divergent(&t, m, n, tile),
                "{t} at ({r0}, {c0})"
            );
            assert_eq!(a.aligned, a.divergent_tiles == 0);
        }
    }
    let g = parse_epilogue("select(row + col < 10, acc, c)").unwrap();
    let a = analyze(&g, m, n, tile).unwrap();
    assert!(a.general && !a.aligned);
}

#[test]
fn region_split_equals_the_one_kernel_result() {
    let (m, n, nb) = (45usize, 70usize, 2usize);
    let mut r = Rng::new(7);
    let acc: Vec<f64> = (0..m * n * nb)
        .map(|_| r.uniform(-3.0, 3.0) as f64)
        .collect();
    let bias: Vec<f64> = (0..n).map(|_| r.uniform(-1.0, 1.0) as f64).collect();
    let mut inp = EvalInputs::new(m, n, nb, &acc);
    inp.bias_col = Some(&bias);
    // Aligned to a 16 x 16 tile, unaligned, at the edges, outside.
    for (r0, c0) in [
        (16, 32),
        (13, 37),
        (0, 0),
        (45, 70),
        (-5, 200),
        (44, 1),
        (1, 69),
    ] {
        for t in trees(r0, c0) {
            let one = evaluate(&t, &inp).unwrap();
            let plan = split_regions(&t, m as i64, n as i64, nb as i64).unwrap();
            let mut covered = vec![0u8; m * n * nb];
            let mut d = vec![f64::NAN; m * n * nb];
            let mut bgrad = vec![0.0; n * nb];
            for reg in &plan.regions {
                assert!(!reg.rows.is_empty() && !reg.cols.is_empty() && !reg.batches.is_empty());
                assert!(!has_select(&reg.tree.d), "{}", reg.tree);
                // The region's plain tree, evaluated on the region only, per batch band.
                let o = evaluate_region(
                    &reg.tree,
                    &inp,
                    reg.rows.start as usize..reg.rows.end as usize,
                    reg.cols.start as usize..reg.cols.end as usize,
                )
                .unwrap();
                for b in reg.batches.clone() {
                    let b = b as usize;
                    for i in reg.rows.clone() {
                        for j in reg.cols.clone() {
                            let at = (b * m + i as usize) * n + j as usize;
                            covered[at] += 1;
                            d[at] = o.d[at];
                        }
                    }
                    if let Some(g) = &o.bgrad_col {
                        for j in 0..n {
                            bgrad[b * n + j] += g[b * n + j];
                        }
                    }
                }
            }
            assert!(
                covered.iter().all(|&c| c == 1),
                "{t} at ({r0}, {c0}): regions overlap or leave gaps"
            );
            assert_eq!(d, one.d, "{t} at ({r0}, {c0})");
            if let Some(g) = &one.bgrad_col {
                for (x, y) in g.iter().zip(&bgrad) {
                    assert!((x - y).abs() <= 1e-12 * (1.0 + x.abs()), "{t}: {x} vs {y}");
                }
            }
        }
    }
}

#[test]
fn one_boundary_gives_two_launches_or_one() {
    let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
    assert_eq!(split_regions(&t, 300, 64, 1).unwrap().regions.len(), 2);
    assert_eq!(split_regions(&t, 100, 64, 1).unwrap().regions.len(), 1);
    assert_eq!(
        split_regions(&t, 100, 64, 1).unwrap().regions[0]
            .tree
            .to_string(),
        "sigmoid(acc)"
    );
    assert_eq!(
        split_regions(&t, 300, 64, 1).unwrap().regions[1].rows,
        100..300
    );
    // Equal trees on both sides merge back into one region.
    let same = parse_epilogue("select(row < 100, relu(acc), relu(acc))").unwrap();
    assert_eq!(split_regions(&same, 300, 64, 1).unwrap().regions.len(), 1);
    let g = parse_epilogue("select(row + col < 10, acc, c)").unwrap();
    assert!(split_regions(&g, 30, 30, 1).is_err());
    assert!(split_regions(&t, 0, 30, 1).is_err());
}

#[test]
fn the_planner_chooses_by_the_kernels_support() {
    let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
    let caps = KernelCaps::GENERATED;
    let p = plan_coordinate_epilogue(&t, 1000, 512, 1, (128, 128), &caps).unwrap();
    assert_eq!(p.choice, CoordStrategy::OneKernel);
    assert_eq!(p.analysis.divergent_tiles, 4);
    assert_eq!(p.regions.as_ref().unwrap().regions.len(), 2);
    let plain = KernelCaps {
        coordinate_select: false,
        ..caps
    };
    let p = plan_coordinate_epilogue(&t, 1000, 512, 1, (128, 128), &plain).unwrap();
    assert_eq!(p.choice, CoordStrategy::PerRegion);
    let g = parse_epilogue("select(row + col < 10, acc, c)").unwrap();
    assert!(plan_coordinate_epilogue(&g, 100, 100, 1, (64, 64), &plain).is_err());
    assert_eq!(
        plan_coordinate_epilogue(&g, 100, 100, 1, (64, 64), &caps)
            .unwrap()
            .choice,
        CoordStrategy::OneKernel
    );
}

#[test]
fn extents_out_of_range_are_errors() {
    let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
    assert!(analyze(&t, i64::MAX, 10, (128, 128)).is_err());
    assert!(analyze(&t, 10, 10, (0, 128)).is_err());
    assert!(split_regions(&t, 10, i64::MAX, 1).is_err());
    let big = parse_epilogue("select(row < 9223372036854775807, acc, c)").unwrap();
    assert_eq!(split_regions(&big, 10, 10, 1).unwrap().regions.len(), 1);
    let edge = parse_epilogue("select(row <= 9223372036854775807, acc, c)").unwrap();
    // `row <= i64::MAX` has no representable cut: not a half-plane the split can use.
    assert!(split_regions(&edge, 10, 10, 1).is_err());
}

/// A random tree of nested selects on random half-planes, with distinct leaves.
fn random_select(r: &mut Rng, depth: u32) -> Expr {
    use tessera_kernels::epilogue::build::*;
    if depth == 0 || r.next_u64() % 4 == 0 {
        return match r.next_u64() % 4 {
            0 => acc(),
            1 => acc().sigmoid(),
            2 => acc() * num((r.next_u64() % 7) as f64),
            _ => acc().tanh() + bias_col(),
        };
    }
    let coord = [row(), col(), batch()][(r.next_u64() % 3) as usize].clone();
    let v = int((r.next_u64() % 70) as i64 - 5);
    let p = match r.next_u64() % 8 {
        0 => coord.lt(v),
        1 => coord.le(v),
        2 => coord.gt(v),
        3 => coord.ge(v),
        4 => v.lt(coord),
        5 => v.le(coord),
        6 => v.gt(coord),
        _ => v.ge(coord),
    };
    select(p, random_select(r, depth - 1), random_select(r, depth - 1))
}

#[test]
fn random_select_trees_split_exactly() {
    let mut r = Rng::new(99);
    for _ in 0..300 {
        let (m, n, nb) = (
            1 + (r.next_u64() % 50) as usize,
            1 + (r.next_u64() % 50) as usize,
            1 + (r.next_u64() % 3) as usize,
        );
        let t = EpilogueTree::new(random_select(&mut r, 3));
        let acc: Vec<f64> = (0..m * n * nb)
            .map(|_| r.uniform(-2.0, 2.0) as f64)
            .collect();
        let bias: Vec<f64> = (0..n).map(|_| r.uniform(-1.0, 1.0) as f64).collect();
        let mut inp = EvalInputs::new(m, n, nb, &acc);
        inp.bias_col = Some(&bias);
        let want = evaluate(&t, &inp).unwrap().d;
        let plan = split_regions(&t, m as i64, n as i64, nb as i64).unwrap();
        let mut got = vec![f64::NAN; m * n * nb];
        let mut count = vec![0u8; m * n * nb];
        for reg in &plan.regions {
            assert!(!has_select(&reg.tree.d));
            let o = evaluate_region(
                &reg.tree,
                &inp,
                reg.rows.start as usize..reg.rows.end as usize,
                reg.cols.start as usize..reg.cols.end as usize,
            )
            .unwrap();
            for b in reg.batches.clone() {
                for i in reg.rows.clone() {
                    for j in reg.cols.clone() {
                        let at = (b as usize * m + i as usize) * n + j as usize;
                        got[at] = o.d[at];
                        count[at] += 1;
                    }
                }
            }
        }
        assert!(count.iter().all(|&c| c == 1), "{t}: {m} x {n} x {nb}");
        assert_eq!(got, want, "{t}: {m} x {n} x {nb}");
        // The tile analysis agrees with brute force on the same trees.
        if nb == 1 {
            let a = analyze(&t, m as i64, n as i64, (8, 16)).unwrap();
            assert_eq!(
                a.divergent_tiles,
                brute_force_divergent(&t, m as i64, n as i64, (8, 16)),
                "{t}"
            );
        }
    }
}

/// The predicates a kernel may decide once per block (`cuda::hoisted_predicates`): for every
/// form of comparison, each one's boundary and sense (`coord < at` or `coord >= at`) agree with
/// the evaluator's value of the predicate at every element, so a block whose first and last
/// coordinates agree is uniform. General predicates are not hoisted, and at most
/// `MAX_HOISTED` are.
#[test]
fn hoisted_predicates_match_the_evaluator() {
    use tessera_kernels::epilogue::cuda::{hoisted_predicates, MAX_HOISTED};
    use tessera_kernels::epilogue::tree::Coord;
    let (m, n, nb) = (23usize, 19usize, 3usize);
    let acc = vec![0.0f64; m * n * nb];
    let inp = EvalInputs::new(m, n, nb, &acc);
    let mut checked = 0;
    for coord in ["row", "col", "batch"] {
        for op in ["<", "<=", ">", ">="] {
            for v in [-2i64, 0, 1, 7, 18, 22, 40] {
                for pred in [
                    format!("{coord} {op} {v}"),
                    format!("{v} {op} {coord}"),
                    format!("{coord} {op} 3 * {v} - 2"),
                ] {
                    let t = parse_epilogue(&format!("select({pred}, acc + 1, acc)")).unwrap();
                    let h = hoisted_predicates(&t);
                    assert_eq!(h.len(), 1, "{pred}");
                    let out = evaluate(&t, &inp).unwrap();
                    for b in 0..nb {
                        for i in 0..m {
                            for j in 0..n {
                                let c = match h[0].boundary.coord {
                                    Coord::Row => i,
                                    Coord::Col => j,
                                    Coord::Batch => b,
                                } as i64;
                                let want = out.d[(b * m + i) * n + j] == 1.0;
                                let got = (c < h[0].boundary.at) == h[0].below;
                                assert_eq!(got, want, "{pred} at batch {b}, ({i}, {j})");
                            }
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 3 * 4 * 7 * 3);
    // A general predicate stays per element; repeated predicates count once; at most
    // MAX_HOISTED.
    let t = parse_epilogue("select(row + col < 10, acc, -acc)").unwrap();
    assert!(hoisted_predicates(&t).is_empty());
    let t = parse_epilogue("select(row < 5, acc, select(row < 5, 2 * acc, -acc))").unwrap();
    assert_eq!(hoisted_predicates(&t).len(), 1);
    let t = parse_epilogue(
        "select(row < 5, acc, select(col < 3, 2 * acc, select(batch < 1, -acc, acc * acc)))",
    )
    .unwrap();
    assert_eq!(hoisted_predicates(&t).len(), MAX_HOISTED);
}
