//! Every operation over a small domain, each answer checked by its operation's whole
//! post-condition (`algebra::check`, brute force over the domain), and each refusal by a
//! verifier that the condition the error states really holds (`check::*_refused`).
//!
//! The domain is the issue's: layouts of rank up to 3 and depth up to 2 whose top-level modes
//! have size 1 to 4, every leaf's stride in -4..=8. A top-level mode is a leaf `s:d` (52 of
//! them) or a pair of leaves whose extents multiply to at most 4 (1,352), so the domain holds
//! 52 integral layouts and 1,404^r tuples of rank r: about 2.8 * 10^9 layouts, too many to
//! enumerate in a test that must finish in seconds. So:
//!
//! - **enumerated in full**: every layout of rank up to 3 whose modes are leaves (143,416 with
//!   the rank-1 tuples), every rank-1 layout of one pair mode (1,352), through every unary
//!   operation; every make_ordered_layout shape (flat rank up to 3, and with one pair mode)
//!   with every order, ties included; every layout of rank up to 2 with leaf modes against
//!   every integer cotarget up to 24 and every shape cotarget `(a,b)` up to `(6,6)`; every
//!   such layout composed with every leaf;
//! - **sampled deterministically** (a fixed SplitMix64 stream, so every run tests the same
//!   cases): layouts of the whole domain, stratified so that each rank and each kind of mode
//!   (leaf or pair) is drawn equally often, and pairs of them for the binary operations
//!   (composition, the divides and products by a layout or a by-mode tiler, blocked and raked
//!   products, tile_to_shape, max_common_layout). `EXHAUSTIVE_SCALE=k` multiplies the sample
//!   sizes by `k`.
//!
//! A failure lists the operands, the answer or the error, and what is wrong, for up to 20
//! cases; the counts of each outcome are printed (run with `--nocapture`). The whole file takes
//! about 30 s of CPU in the dev profile, split over nine tests that run in parallel (the root
//! `Cargo.toml` builds tessera-layout at opt-level 2 there, assertions and overflow checks on).

use std::collections::BTreeMap;

use tessera_layout::algebra::check::{self, Verdict};
use tessera_layout::*;

/// Leaf `k < 52`: extent `1 + k % 4`, stride `-4 + k / 4`.
fn leaf(k: usize) -> (i64, i64) {
    (1 + (k % 4) as i64, -4 + (k / 4) as i64)
}

/// Extents of the pair modes: two leaves whose extents multiply to at most 4.
const PAIRS: [(i64, i64); 8] = [
    (1, 1),
    (1, 2),
    (1, 3),
    (1, 4),
    (2, 1),
    (2, 2),
    (3, 1),
    (4, 1),
];

/// A top-level mode as (shape, stride): `k < 52` a leaf, else a pair.
fn mode(k: usize) -> (IntTuple, IntTuple) {
    if k < 52 {
        let (s, d) = leaf(k);
        return (IntTuple::Int(s), IntTuple::Int(d));
    }
    let k = k - 52;
    let (e0, e1) = PAIRS[k % 8];
    let k = k / 8;
    let (d0, d1) = (-4 + (k % 13) as i64, -4 + (k / 13) as i64);
    (IntTuple::flat([e0, e1]), IntTuple::flat([d0, d1]))
}

const MODES: usize = 52 + 8 * 169;

fn tuple_of(modes: &[usize]) -> Layout {
    let (s, d): (Vec<_>, Vec<_>) = modes.iter().map(|&k| mode(k)).unzip();
    Layout::new(IntTuple::Tuple(s), IntTuple::Tuple(d)).expect("a layout of the domain")
}

fn int_leaf(k: usize) -> Layout {
    let (s, d) = leaf(k);
    Layout::int(s, d).unwrap()
}

/// SplitMix64: a fixed stream of pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A top-level mode: a leaf or a pair, each half the time.
    fn mode(&mut self) -> usize {
        if self.below(2) == 0 {
            self.below(52)
        } else {
            52 + self.below(MODES - 52)
        }
    }

    /// A layout of the domain: integral, or of rank 1, 2 or 3, each a quarter of the time.
    fn layout(&mut self) -> Layout {
        match self.below(4) {
            0 => int_leaf(self.below(52)),
            r => {
                let modes: Vec<usize> = (0..r).map(|_| self.mode()).collect();
                tuple_of(&modes)
            }
        }
    }
}

/// How many sampled cases: `n` times `EXHAUSTIVE_SCALE` (default 1).
fn scaled(n: usize) -> usize {
    let k: usize = std::env::var("EXHAUSTIVE_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    n * k
}

/// The layouts enumerated in full (see the module documentation).
fn enumerated() -> Vec<Layout> {
    let mut out = Vec::new();
    for a in 0..52 {
        out.push(int_leaf(a));
        out.push(tuple_of(&[a]));
        for b in 0..52 {
            out.push(tuple_of(&[a, b]));
        }
    }
    for p in 52..MODES {
        out.push(tuple_of(&[p]));
    }
    out
}

/// Every flat rank-3 layout whose first leaf is `a`.
fn flat_rank3(a: usize) -> impl Iterator<Item = Layout> {
    (0..52 * 52).map(move |k| tuple_of(&[a, k % 52, k / 52]))
}

/// Outcome counts and the first failures of one test.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, usize>,
    failures: Vec<String>,
    total_failures: usize,
}

impl Tally {
    /// Records an answer checked by `post` or a refusal checked by `refused`.
    fn judge<T>(
        &mut self,
        what: impl Fn() -> String,
        op: &str,
        got: Result<T>,
        post: impl FnOnce(&T) -> Verdict,
        refused: impl FnOnce(&LayoutError) -> Verdict,
    ) {
        let (kind, verdict) = match &got {
            Ok(v) => ("ok", post(v)),
            Err(e) => ("refused", refused(e)),
        };
        *self.counts.entry(format!("{op} {kind}")).or_default() += 1;
        if let Err(why) = verdict {
            self.total_failures += 1;
            if self.failures.len() < 20 {
                let answer = match &got {
                    Ok(_) => "an answer".to_string(),
                    Err(e) => format!("error `{e}`"),
                };
                self.failures
                    .push(format!("{op}: {}: {answer}: {why}", what()));
            }
        }
    }

    fn finish(self, name: &str) {
        println!("{name}:");
        for (k, v) in &self.counts {
            println!("  {k:<36} {v}");
        }
        assert!(
            self.failures.is_empty(),
            "{name}: {} failures, the first:\n{}",
            self.total_failures,
            self.failures.join("\n")
        );
    }
}

/// Refusals an operation documents only for inputs outside this domain.
fn never(op: &'static str) -> impl Fn(&LayoutError) -> Verdict {
    move |e| Err(format!("{op} has no reason to refuse here: {e}"))
}

/// The operations of one layout, with their documented cotargets, factors and profiles.
fn unary(t: &mut Tally, l: &Layout, cotargets: &[IntTuple]) {
    let w = || l.to_string();
    t.judge(
        w,
        "coalesce",
        Ok(coalesce(l)),
        |r| check::coalesce(l, r),
        never("coalesce"),
    );
    let profile = IntTuple::Tuple(l.shape().modes().iter().map(|m| m.repeat_like(1)).collect());
    t.judge(
        w,
        "coalesce_profile",
        coalesce_profile(l, &profile),
        |r| check::coalesce_profile(l, &profile, r),
        never("coalesce_profile"),
    );
    t.judge(
        w,
        "filter_zeros",
        Ok(filter_zeros(l)),
        |r| check::filter_zeros(l, r),
        never("filter_zeros"),
    );
    t.judge(
        w,
        "filter",
        Ok(filter(l)),
        |r| check::filter(l, r),
        never("filter"),
    );
    t.judge(
        w,
        "right_inverse",
        right_inverse(l),
        |r| check::right_inverse(l, r),
        never("right_inverse"),
    );
    t.judge(
        w,
        "left_inverse",
        left_inverse(l),
        |r| check::left_inverse(l, r),
        |e| check::left_inverse_refused(l, e),
    );
    t.judge(
        w,
        "generalized_left_inverse",
        generalized_left_inverse(l),
        |r| check::generalized_left_inverse(l, r),
        |e| check::generalized_left_inverse_refused(l, e),
    );
    t.judge(
        w,
        "nullspace",
        nullspace(l),
        |r| check::nullspace(l, r),
        never("nullspace"),
    );
    t.judge(
        w,
        "make_layout_like",
        make_layout_like(l),
        |r| check::make_layout_like(l, r),
        never("make_layout_like"),
    );
    for n in [1, 2, 3, 4, 8] {
        let wn = || format!("{l}, {n}");
        t.judge(
            wn,
            "upcast",
            upcast(l, n),
            |r| check::upcast(l, n, r),
            |e| check::upcast_refused(l, n, e),
        );
        t.judge(
            wn,
            "downcast",
            downcast(l, n),
            |r| check::downcast(l, n, r),
            |e| check::downcast_refused(l, n, e),
        );
    }
    let cot = IntTuple::Int(filter(l).cosize());
    t.judge(
        w,
        "complement_default",
        complement_default(l),
        |r| check::complement(l, &cot, r),
        |e| check::complement_refused(l, &cot, e),
    );
    for c in cotargets {
        let wc = || format!("{l}, {c}");
        t.judge(
            wc,
            "complement",
            complement(l, c),
            |r| check::complement(l, c, r),
            |e| check::complement_refused(l, c, e),
        );
    }
}

fn int_cotargets(upto: i64) -> Vec<IntTuple> {
    (1..=upto).map(IntTuple::Int).collect()
}

fn shape_cotargets() -> Vec<IntTuple> {
    let mut v = Vec::new();
    for a in 1..=6 {
        for b in 1..=6 {
            v.push(IntTuple::flat([a, b]));
        }
    }
    v
}

#[test]
fn unary_operations_on_the_enumerated_layouts() {
    let mut t = Tally::default();
    let ints = int_cotargets(12);
    for l in enumerated() {
        unary(&mut t, &l, &ints);
    }
    t.finish("unary operations, enumerated layouts");
}

/// Every flat rank-3 layout (140,608), in two halves so that two test threads share them.
fn unary_on_flat_rank3(first: std::ops::Range<usize>, name: &str) {
    let mut t = Tally::default();
    let cots: Vec<IntTuple> = int_cotargets(6)
        .into_iter()
        .chain([IntTuple::flat([3, 5]), IntTuple::flat([4, 2])])
        .collect();
    for a in first {
        for l in flat_rank3(a) {
            unary(&mut t, &l, &cots);
        }
    }
    t.finish(name);
}

#[test]
fn unary_operations_on_flat_rank3_layouts_first_half() {
    unary_on_flat_rank3(0..26, "unary operations, flat rank 3, first leaf 0..26");
}

#[test]
fn unary_operations_on_flat_rank3_layouts_second_half() {
    unary_on_flat_rank3(26..52, "unary operations, flat rank 3, first leaf 26..52");
}

#[test]
fn complement_against_every_cotarget() {
    let mut t = Tally::default();
    let mut cots = int_cotargets(24);
    cots.extend(shape_cotargets());
    for a in 0..52 {
        for l in [int_leaf(a)]
            .into_iter()
            .chain((0..52).map(|b| tuple_of(&[a, b])))
        {
            for c in &cots {
                let wc = || format!("{l}, {c}");
                t.judge(
                    wc,
                    "complement",
                    complement(&l, c),
                    |r| check::complement(&l, c, r),
                    |e| check::complement_refused(&l, c, e),
                );
            }
        }
    }
    t.finish("complement, every cotarget");
}

#[test]
fn unary_operations_on_sampled_layouts() {
    let mut t = Tally::default();
    let mut rng = Rng(1);
    let mut cots = int_cotargets(8);
    cots.extend([
        IntTuple::flat([3, 5]),
        IntTuple::flat([4, 2]),
        IntTuple::flat([2, 2]),
    ]);
    for _ in 0..scaled(60_000) {
        let l = rng.layout();
        unary(&mut t, &l, &cots);
    }
    t.finish("unary operations, sampled layouts");
}

/// A by-mode tiler for `l` from `picks`: per mode `_`, `n:d`, or a shape item.
fn by_mode_tiler(l: &Layout, rng: &mut Rng) -> Tiler {
    let items = 1 + rng.below(l.rank());
    Tiler::ByMode(
        (0..items)
            .map(|_| match rng.below(4) {
                0 => Tiler::Skip,
                1 => Tiler::from_shape(&IntTuple::Int(1 + rng.below(4) as i64)).unwrap(),
                _ => Tiler::Layout(int_leaf(rng.below(52))),
            })
            .collect(),
    )
}

#[test]
fn compositions() {
    let mut t = Tally::default();
    let mut rng = Rng(2);
    let judge = |t: &mut Tally, a: &Layout, b: &Layout| {
        t.judge(
            || format!("{a} o {b}"),
            "composition",
            composition(a, b),
            |r| check::composition(a, b, r),
            |e| check::composition_refused(a, b, e),
        );
    };
    // Every A of rank up to 2 with leaf modes against every leaf B.
    let small: Vec<Layout> = (0..52)
        .flat_map(|a| std::iter::once(int_leaf(a)).chain((0..52).map(move |b| tuple_of(&[a, b]))))
        .collect();
    for a in &small {
        for k in 0..52 {
            judge(&mut t, a, &int_leaf(k));
        }
    }
    for _ in 0..scaled(500_000) {
        let (a, b) = (rng.layout(), rng.layout());
        judge(&mut t, &a, &b);
    }
    for _ in 0..scaled(20_000) {
        let a = rng.layout();
        let tl = by_mode_tiler(&a, &mut rng);
        t.judge(
            || format!("{a} o {tl}"),
            "composition_tiler",
            composition_tiler(&a, &tl),
            |r| check::composition_tiler(&a, &tl, r),
            |e| match &tl {
                // A by-mode tiler composes mode by mode: find the mode that is refused.
                Tiler::ByMode(ts) => {
                    for (m, ti) in a.modes().zip(ts) {
                        if let (Err(inner), Tiler::Layout(b)) = (composition_tiler(&m, ti), ti) {
                            return check::composition_refused(&m, b, &inner);
                        }
                    }
                    Err(format!("refused, though every mode composes: {e}"))
                }
                _ => Err(format!("unexpected refusal: {e}")),
            },
        );
    }
    t.finish("composition");
}

#[test]
fn divides_and_products() {
    let mut t = Tally::default();
    let mut rng = Rng(3);
    for _ in 0..scaled(60_000) {
        let l = rng.layout();
        let tiler = if rng.below(2) == 0 {
            Tiler::Layout(rng.layout())
        } else {
            by_mode_tiler(&l, &mut rng)
        };
        let w = || format!("{l}, {tiler}");
        let dr = |e: &LayoutError| check::logical_divide_refused(&l, &tiler, e);
        let pr = |e: &LayoutError| check::logical_product_refused(&l, &tiler, e);
        let zd = |e: &LayoutError| check::zipped_refused(&l, &tiler, false, e);
        let zp = |e: &LayoutError| check::zipped_refused(&l, &tiler, true, e);
        t.judge(
            w,
            "logical_divide",
            logical_divide(&l, &tiler),
            |r| check::logical_divide(&l, &tiler, r),
            dr,
        );
        t.judge(
            w,
            "zipped_divide",
            zipped_divide(&l, &tiler),
            |r| check::zipped_divide(&l, &tiler, r),
            zd,
        );
        t.judge(
            w,
            "tiled_divide",
            tiled_divide(&l, &tiler),
            |r| check::tiled_divide(&l, &tiler, r),
            zd,
        );
        t.judge(
            w,
            "flat_divide",
            flat_divide(&l, &tiler),
            |r| check::flat_divide(&l, &tiler, r),
            zd,
        );
        t.judge(
            w,
            "logical_product",
            logical_product(&l, &tiler),
            |r| check::logical_product(&l, &tiler, r),
            pr,
        );
        t.judge(
            w,
            "zipped_product",
            zipped_product(&l, &tiler),
            |r| check::zipped_product(&l, &tiler, r),
            zp,
        );
        t.judge(
            w,
            "tiled_product",
            tiled_product(&l, &tiler),
            |r| check::tiled_product(&l, &tiler, r),
            zp,
        );
        t.judge(
            w,
            "flat_product",
            flat_product(&l, &tiler),
            |r| check::flat_product(&l, &tiler, r),
            zp,
        );
    }
    t.finish("divides and products");
}

#[test]
fn blocked_raked_and_tile_to_shape() {
    let mut t = Tally::default();
    let mut rng = Rng(4);
    for _ in 0..scaled(25_000) {
        let (a, b) = (rng.layout(), rng.layout());
        let w = || format!("{a}, {b}");
        t.judge(
            w,
            "blocked_product",
            blocked_product(&a, &b),
            |r| check::blocked_product(&a, &b, r),
            |e| check::zipped_pairs_refused(&a, &b, e),
        );
        t.judge(
            w,
            "raked_product",
            raked_product(&a, &b),
            |r| check::raked_product(&a, &b, r),
            |e| check::zipped_pairs_refused(&a, &b, e),
        );
        t.judge(
            w,
            "max_common_layout",
            max_common_layout(&a, &b),
            |r| check::max_common_layout(&a, &b, r),
            never("max_common_layout"),
        );
        // A target of the block's rank or more, each mode 1..=3 times the block's (or any
        // extent 1..=6 for the modes beyond it, and now and then one that does not divide).
        let rank = a.rank().max(1 + rng.below(3));
        let sizes: Vec<i64> = a.modes().map(|m| m.size()).collect();
        let target = IntTuple::flat((0..rank).map(|i| match sizes.get(i) {
            Some(&s) if rng.below(8) != 0 => s * (1 + rng.below(3) as i64),
            _ => 1 + rng.below(6) as i64,
        }));
        let orders = [
            None,
            Some(IntTuple::flat((0..rank).map(|_| rng.below(3) as i64))),
        ];
        for order in &orders {
            let o = order.as_ref();
            t.judge(
                || format!("{a}, {target}, {o:?}"),
                "tile_to_shape",
                tile_to_shape(&a, &target, o),
                |r| check::tile_to_shape(&a, &target, r),
                |e| check::tile_to_shape_refused(&a, &target, o, e),
            );
        }
    }
    t.finish("blocked, raked, tile_to_shape, max_common_layout");
}

/// Every shape of rank up to 3 (sizes 1..=4, flat, or with one pair mode) and every order
/// over its modes with values 0..rank (ties included), plus orders nested under a pair mode.
#[test]
fn ordered_layouts_every_order() {
    let mut t = Tally::default();
    let mut shapes: Vec<IntTuple> = Vec::new();
    for r in 1..=3u32 {
        for k in 0..4usize.pow(r) {
            let ext: Vec<i64> = (0..r)
                .map(|i| 1 + ((k / 4usize.pow(i)) % 4) as i64)
                .collect();
            shapes.push(IntTuple::flat(ext.iter().copied()));
            // The same with the first mode replaced by the pair (2,2) or (1,3).
            for pair in [[2, 2], [1, 3]] {
                let mut modes: Vec<IntTuple> = ext.iter().map(|&e| IntTuple::Int(e)).collect();
                modes[0] = IntTuple::flat(pair);
                shapes.push(IntTuple::Tuple(modes));
            }
        }
    }
    for s in &shapes {
        let r = s.rank();
        let mut orders: Vec<IntTuple> = Vec::new();
        for k in 0..r.pow(r as u32) {
            let o: Vec<i64> = (0..r).map(|i| ((k / r.pow(i as u32)) % r) as i64).collect();
            orders.push(IntTuple::flat(o.iter().copied()));
            if s.modes()[0].is_tuple() {
                // An order nested under the pair mode.
                let mut modes: Vec<IntTuple> = o.iter().map(|&x| IntTuple::Int(x)).collect();
                modes[0] = IntTuple::flat([o[0], o[r - 1]]);
                orders.push(IntTuple::Tuple(modes));
            }
        }
        for o in &orders {
            t.judge(
                || format!("{s}, {o}"),
                "make_ordered_layout",
                make_ordered_layout(s, o),
                |l| check::make_ordered_layout(s, o, l),
                never("make_ordered_layout"),
            );
        }
    }
    t.finish("make_ordered_layout");
}
