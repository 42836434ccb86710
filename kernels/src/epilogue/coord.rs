//! Coordinate-aware epilogues: the planner's two strategies for a tree with `select` on a
//! coordinate predicate.
//!
//! - **One kernel** ([`CoordStrategy::OneKernel`]): the generated epilogue branches per
//!   element on the predicate. When every boundary is a multiple of the CTA tile (or outside
//!   the output), the predicate is uniform over each tile, so no warp diverges;
//!   [`SelectAnalysis`] counts the tiles where it is not.
//! - **One launch per region** ([`CoordStrategy::PerRegion`]): the output is cut at every
//!   boundary into rectangles where each predicate is constant, and each rectangle gets the
//!   tree with its selects folded away ([`split_regions`]): a plain epilogue a kernel without
//!   coordinate support (or cuBLASLt) can run. A region launch runs the GEMM on `A[rows, :]`
//!   and `B[:, cols]`, with `row0`/`col0` of the epilogue arguments at the region's origin.
//!
//! Both are exact for any boundary, aligned or not: the region split only needs each
//! predicate to compare one coordinate with a constant (`row < 100`, `col >= 64`,
//! `batch > 0`), which [`boundaries`] recognizes.

use std::ops::Range;

use super::check::KernelCaps;
use super::error::{EpilogueError, Result};
use super::tree::{CmpOp, Coord, EpilogueTree, Expr, Leaf, Operand, UnaryOp};

/// A cut of the output: the predicate `coord < at` (every recognized comparison is one of
/// these or its negation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Boundary {
    /// The coordinate compared.
    pub coord: Coord,
    /// The first coordinate on the far side.
    pub at: i64,
}

/// The value of an integer expression made of constants only.
fn literal(e: &Expr) -> Option<i64> {
    match e {
        Expr::Leaf(Leaf::Int(v)) => Some(*v),
        Expr::Unary(UnaryOp::Neg, x) => literal(x)?.checked_neg(),
        Expr::Binary(op, a, b) => {
            let (a, b) = (literal(a)?, literal(b)?);
            use super::tree::BinaryOp::*;
            match op {
                Add => a.checked_add(b),
                Sub => a.checked_sub(b),
                Mul => a.checked_mul(b),
                Max => Some(a.max(b)),
                Min => Some(a.min(b)),
            }
        }
        _ => None,
    }
}

/// `coord OP value` as a boundary, when the comparison is of that shape.
fn half_plane(op: CmpOp, a: &Expr, b: &Expr) -> Option<Boundary> {
    half_plane_sense(op, a, b).map(|(bd, _)| bd)
}

/// `coord OP value` as a boundary and its sense: `true` when the comparison holds below the
/// boundary (`coord < at`), `false` when at and above it (`coord >= at`).
pub fn half_plane_sense(op: CmpOp, a: &Expr, b: &Expr) -> Option<(Boundary, bool)> {
    let (coord, op, v) = match (a, b) {
        (Expr::Leaf(Leaf::Coord(c)), rhs) => (*c, op, literal(rhs)?),
        // `v OP coord` is `coord OP' v` with the comparison mirrored.
        (lhs, Expr::Leaf(Leaf::Coord(c))) => (
            *c,
            match op {
                CmpOp::Lt => CmpOp::Gt,
                CmpOp::Le => CmpOp::Ge,
                CmpOp::Gt => CmpOp::Lt,
                CmpOp::Ge => CmpOp::Le,
            },
            literal(lhs)?,
        ),
        _ => return None,
    };
    // coord < v and coord >= v cut at v; coord <= v and coord > v cut at v + 1.
    let at = match op {
        CmpOp::Lt | CmpOp::Ge => v,
        CmpOp::Le | CmpOp::Gt => v.checked_add(1)?,
    };
    let below = matches!(op, CmpOp::Lt | CmpOp::Le);
    Some((Boundary { coord, at }, below))
}

/// The boundaries of every select's predicate, sorted and deduplicated, and whether some
/// predicate is not a single-coordinate half-plane (`row + col < 10`: no region split).
pub fn boundaries(tree: &EpilogueTree) -> Result<(Vec<Boundary>, bool)> {
    tree.check_structure()?;
    let mut out = Vec::new();
    let mut general = false;
    tree.d.visit_post(&mut |e| {
        if let Expr::Select(p, _, _) = e {
            match &**p {
                Expr::Cmp(op, a, b) => match half_plane(*op, a, b) {
                    Some(bd) => out.push(bd),
                    None => general = true,
                },
                _ => general = true,
            }
        }
    });
    out.sort();
    out.dedup();
    Ok((out, general))
}

/// How the predicates of a tree meet the CTA tiles of an `M x N` output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectAnalysis {
    /// The boundaries, sorted.
    pub boundaries: Vec<Boundary>,
    /// Some predicate is not a half-plane on one coordinate.
    pub general: bool,
    /// Every predicate is uniform over every CTA tile (no divergence in one kernel).
    pub aligned: bool,
    /// Tiles (per batch) in which some predicate changes value.
    pub divergent_tiles: i64,
    /// Tiles per batch.
    pub tiles: i64,
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// Analyzes `tree`'s predicates for an `m x n` output cut into `tile = (bm, bn)` CTA tiles.
/// A boundary is aligned when it is a multiple of the tile extent or outside `1..extent`;
/// batch boundaries are always aligned (a CTA works on one batch). A general predicate
/// counts as unaligned in every tile.
///
/// ```
/// use tessera_kernels::epilogue::{coord::analyze, parse_epilogue};
/// let t = parse_epilogue("select(row < 128, sigmoid(acc), tanh(acc))").unwrap();
/// assert!(analyze(&t, 1000, 512, (128, 128)).unwrap().aligned);
/// let u = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
/// let a = analyze(&u, 1000, 512, (128, 128)).unwrap();
/// assert_eq!((a.aligned, a.divergent_tiles, a.tiles), (false, 4, 32));
/// ```
pub fn analyze(tree: &EpilogueTree, m: i64, n: i64, tile: (i64, i64)) -> Result<SelectAnalysis> {
    let (bm, bn) = tile;
    let max = i32::MAX as i64;
    if m < 1 || n < 1 || bm < 1 || bn < 1 || m > max || n > max || bm > max || bn > max {
        return Err(EpilogueError::input(
            "coord::analyze",
            format!("extents {m} x {n} and tile {bm} x {bn} must be in 1 ..= 2^31 - 1"),
        ));
    }
    let (bs, general) = boundaries(tree)?;
    let (tm, tn) = (ceil_div(m, bm), ceil_div(n, bn));
    let mut div_rows = std::collections::BTreeSet::new();
    let mut div_cols = std::collections::BTreeSet::new();
    for b in &bs {
        match b.coord {
            Coord::Row if b.at > 0 && b.at < m && b.at % bm != 0 => {
                div_rows.insert(b.at / bm);
            }
            Coord::Col if b.at > 0 && b.at < n && b.at % bn != 0 => {
                div_cols.insert(b.at / bn);
            }
            _ => {}
        }
    }
    let (r, c) = (div_rows.len() as i64, div_cols.len() as i64);
    let divergent = if general {
        tm * tn
    } else {
        r * tn + c * tm - r * c
    };
    Ok(SelectAnalysis {
        boundaries: bs,
        general,
        aligned: divergent == 0,
        divergent_tiles: divergent,
        tiles: tm * tn,
    })
}

/// A rectangle of the output with its own select-free tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Rows of the output.
    pub rows: Range<i64>,
    /// Columns of the output.
    pub cols: Range<i64>,
    /// Batches.
    pub batches: Range<i64>,
    /// The tree with every select folded to the branch taken in this region.
    pub tree: EpilogueTree,
}

/// The per-region plan: disjoint non-empty regions covering the output, and the operand sums
/// (computed once, beside the first launch).
#[derive(Clone, Debug, PartialEq)]
pub struct RegionPlan {
    /// The regions, rows outermost.
    pub regions: Vec<Region>,
    /// The tree's operand sums.
    pub sum_k: Vec<Operand>,
}

/// `e` with every select decided at the point `(b, i, j)`.
fn fold(e: &Expr, b: i64, i: i64, j: i64) -> Result<Expr> {
    let at = |c: Coord| match c {
        Coord::Row => i,
        Coord::Col => j,
        Coord::Batch => b,
    };
    Ok(match e {
        Expr::Leaf(_) => e.clone(),
        Expr::Unary(op, x) => Expr::Unary(*op, Box::new(fold(x, b, i, j)?)),
        Expr::Sink(s, x) => Expr::Sink(*s, Box::new(fold(x, b, i, j)?)),
        Expr::Binary(op, x, y) => Expr::Binary(
            *op,
            Box::new(fold(x, b, i, j)?),
            Box::new(fold(y, b, i, j)?),
        ),
        Expr::Cmp(..) => e.clone(),
        Expr::Select(p, x, y) => {
            let Expr::Cmp(op, l, r) = &**p else {
                return Err(EpilogueError::Unsupported {
                    msg: format!("`{p}` is not a comparison"),
                });
            };
            let Some(bd) = half_plane(*op, l, r) else {
                return Err(EpilogueError::Unsupported {
                    msg: format!("`{p}` is not a half-plane on one coordinate: no region split"),
                });
            };
            // Which side of `coord < at` the point is on, then what the comparison says there.
            let below = at(bd.coord) < bd.at;
            let holds = match op {
                CmpOp::Lt | CmpOp::Le => {
                    if matches!(**l, Expr::Leaf(Leaf::Coord(_))) {
                        below
                    } else {
                        !below
                    }
                }
                CmpOp::Gt | CmpOp::Ge => {
                    if matches!(**l, Expr::Leaf(Leaf::Coord(_))) {
                        !below
                    } else {
                        below
                    }
                }
            };
            fold(if holds { x } else { y }, b, i, j)?
        }
    })
}

fn cuts(extent: i64, coord: Coord, bs: &[Boundary]) -> Vec<i64> {
    let mut v = vec![0, extent];
    v.extend(
        bs.iter()
            .filter(|b| b.coord == coord && b.at > 0 && b.at < extent)
            .map(|b| b.at),
    );
    v.sort_unstable();
    v.dedup();
    v
}

/// Cuts the `batch x m x n` output at every boundary of `tree` into regions where every
/// predicate is constant, folds the selects in each, and merges neighbours whose trees are
/// equal (along columns, then rows, then batches).
///
/// ```
/// use tessera_kernels::epilogue::{coord::split_regions, parse_epilogue};
/// let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
/// let p = split_regions(&t, 300, 64, 1).unwrap();
/// assert_eq!(p.regions.len(), 2);
/// assert_eq!((p.regions[0].rows.clone(), p.regions[0].tree.to_string()), (0..100, "sigmoid(acc)".into()));
/// assert_eq!((p.regions[1].rows.clone(), p.regions[1].tree.to_string()), (100..300, "tanh(acc)".into()));
/// ```
pub fn split_regions(tree: &EpilogueTree, m: i64, n: i64, batch: i64) -> Result<RegionPlan> {
    let max = i32::MAX as i64;
    if m < 1 || n < 1 || batch < 1 || m > max || n > max || batch > max {
        return Err(EpilogueError::input(
            "coord::split_regions",
            format!("extents {batch} x {m} x {n} must be in 1 ..= 2^31 - 1"),
        ));
    }
    let (bs, general) = boundaries(tree)?;
    if general {
        return Err(EpilogueError::Unsupported {
            msg: format!(
                "`{}` has a predicate that is not a half-plane on one coordinate: no region split",
                tree.d
            ),
        });
    }
    let (rc, cc, bc) = (
        cuts(m, Coord::Row, &bs),
        cuts(n, Coord::Col, &bs),
        cuts(batch, Coord::Batch, &bs),
    );
    // Per batch band, per row band: merged column runs.
    type Band = Vec<(Range<i64>, Expr)>;
    type RowBands = Vec<(Range<i64>, Band)>;
    let mut batch_bands: Vec<(Range<i64>, RowBands)> = Vec::new();
    for bw in bc.windows(2) {
        let mut row_bands: RowBands = Vec::new();
        for rw in rc.windows(2) {
            let mut band: Band = Vec::new();
            for cw in cc.windows(2) {
                let t = fold(&tree.d, bw[0], rw[0], cw[0])?;
                match band.last_mut() {
                    Some((r, e)) if *e == t => r.end = cw[1],
                    _ => band.push((cw[0]..cw[1], t)),
                }
            }
            match row_bands.last_mut() {
                Some((r, b)) if *b == band => r.end = rw[1],
                _ => row_bands.push((rw[0]..rw[1], band)),
            }
        }
        match batch_bands.last_mut() {
            Some((r, b)) if *b == row_bands => r.end = bw[1],
            _ => batch_bands.push((bw[0]..bw[1], row_bands)),
        }
    }
    let mut regions = Vec::new();
    for (batches, row_bands) in batch_bands {
        for (rows, band) in row_bands {
            for (cols, d) in band {
                regions.push(Region {
                    rows: rows.clone(),
                    cols,
                    batches: batches.clone(),
                    tree: EpilogueTree::new(d),
                });
            }
        }
    }
    Ok(RegionPlan {
        regions,
        sum_k: tree.sum_k.clone(),
    })
}

/// The planner's choice for a coordinate-aware epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordStrategy {
    /// One launch whose epilogue branches on the predicate.
    OneKernel,
    /// One launch per region of [`split_regions`].
    PerRegion,
}

/// Both strategies for a tree, and the choice.
#[derive(Clone, Debug, PartialEq)]
pub struct CoordPlan {
    /// How the predicates meet the tiles.
    pub analysis: SelectAnalysis,
    /// The region split, when every predicate is a half-plane.
    pub regions: Option<RegionPlan>,
    /// The choice.
    pub choice: CoordStrategy,
    /// Why, in words.
    pub reason: String,
}

/// Plans `tree` over a `batch x m x n` output with CTA tile `tile`, for a kernel with `caps`.
///
/// The rule: one kernel whenever the kernel's epilogue supports coordinate selects (a
/// boundary off the tile grid only makes the tiles it crosses branch, in the epilogue alone,
/// while a region split runs those tiles' main loop twice, partly empty, and adds a launch);
/// per region when it does not. The rule is the planner's prior; the benchmark measures both
/// (`tessera bench gemm`), and the rule is to be revised against its numbers.
pub fn plan_coordinate_epilogue(
    tree: &EpilogueTree,
    m: i64,
    n: i64,
    batch: i64,
    tile: (i64, i64),
    caps: &KernelCaps,
) -> Result<CoordPlan> {
    let analysis = analyze(tree, m, n, tile)?;
    let regions = if analysis.general {
        None
    } else {
        Some(split_regions(tree, m, n, batch)?)
    };
    let (choice, reason) = if caps.coordinate_select {
        (
            CoordStrategy::OneKernel,
            if analysis.aligned {
                "one kernel: every predicate is uniform per tile".to_string()
            } else {
                format!(
                    "one kernel: {} of {} tiles branch in the epilogue",
                    analysis.divergent_tiles, analysis.tiles
                )
            },
        )
    } else if regions.is_some() {
        (
            CoordStrategy::PerRegion,
            "one launch per region: the kernel has no coordinate select".to_string(),
        )
    } else {
        return Err(EpilogueError::Unsupported {
            msg:
                "the kernel has no coordinate select and the predicate cannot be split into regions"
                    .into(),
        });
    };
    Ok(CoordPlan {
        analysis,
        regions,
        choice,
        reason,
    })
}
