//! Swizzle synthesis against brute force: for each case of the table, `best_swizzle` takes
//! the fewest wavefronts of every `Sw<B,M,S>` in range that keeps the vector widths (counted
//! here from the definition of a wavefront, not by the library), and `best_xor_swizzle` is
//! never worse. The wavefront schedule behind the pictures agrees with `bank_conflicts`.

mod common;

use common::ref_apply;
use proptest::prelude::*;
use tessera_layout::Layout;
use tessera_swizzle::{
    bank_conflicts, best_swizzle, best_xor_swizzle, wavefront_schedule, AnyLayout, Swizzle,
    SwizzledLayout,
};

fn lay(s: &str) -> Layout {
    s.parse().unwrap()
}

/// Wavefronts of one warp access, from the definition: `offs[lane + lanes * value]` are
/// element offsets; phases of `128 / (values * bytes)` lanes (1 to 32); in a phase each bank
/// serves one distinct 4-byte word per wavefront; a phase takes its busiest bank's count.
fn ref_wavefronts(offs: &[i64], lanes: usize, bytes: i64) -> i64 {
    let values = offs.len() / lanes;
    let per_phase = (128 / (values as i64 * bytes)).clamp(1, 32) as usize;
    let mut total = 0;
    for start in (0..lanes).step_by(per_phase) {
        let mut words = std::collections::BTreeSet::new();
        for t in start..(start + per_phase).min(lanes) {
            for v in 0..values {
                let b = offs[t + lanes * v] * bytes;
                for byte in b..b + bytes {
                    words.insert(byte / 4);
                }
            }
        }
        let mut per_bank = [0; 32];
        for w in words {
            per_bank[(w % 32) as usize] += 1;
        }
        total += per_bank.iter().max().unwrap();
    }
    total
}

/// The widest power-of-two vector (at most 16 bytes) each lane's values form: runs of `w`
/// consecutive offsets starting at multiples of `w`.
fn ref_vector(offs: &[i64], lanes: usize, bytes: i64) -> i64 {
    let values = offs.len() / lanes;
    let mut best = 1;
    let mut w = 2;
    while w as usize <= values && w * bytes <= 16 {
        let ok = (0..lanes).all(|t| {
            (0..values).all(|v| {
                let start = v - v % w as usize;
                let s = offs[t + lanes * start];
                s % w == 0 && offs[t + lanes * v] == s + (v - start) as i64
            })
        });
        if !ok {
            break;
        }
        best = w;
        w *= 2;
    }
    best
}

/// Element offsets of an access through `smem` (unswizzled) and the lanes.
fn resolve(access: &Layout, smem: &Layout) -> (Vec<i64>, usize) {
    let lanes = if access.is_int() {
        access.size()
    } else {
        access.mode(0).unwrap().size()
    } as usize;
    let offs = (0..access.size())
        .map(|i| smem.call(access.call(i).unwrap()).unwrap())
        .collect();
    (offs, lanes)
}

/// The brute-force optimum over every swizzle whose bits lie in the tile's offset bits
/// (`M + B + |S| <= bits`, `|S| >= B`, `B >= 1`, and the identity), that maps the tile's
/// offsets onto themselves and keeps every access's vector width: its total wavefronts and
/// every swizzle reaching it.
fn brute_force(accesses: &[Layout], smem: &Layout, bytes: i64) -> (i64, Vec<(i64, i64, i64)>) {
    let image: std::collections::BTreeSet<i64> = smem.offsets().into_iter().collect();
    let max = *image.iter().max().unwrap();
    let bits = 64 - max.leading_zeros() as i64;
    let resolved: Vec<_> = accesses.iter().map(|a| resolve(a, smem)).collect();
    let widths: Vec<i64> = resolved
        .iter()
        .map(|(o, l)| ref_vector(o, *l, bytes))
        .collect();
    let mut params = vec![(0, 0, 0)];
    for b in 1..=bits {
        for m in 0..=bits {
            for s in -bits..=bits {
                if s.abs() >= b && m + b + s.abs() <= bits {
                    params.push((b, m, s));
                }
            }
        }
    }
    let mut best = i64::MAX;
    let mut winners = Vec::new();
    for (b, m, s) in params {
        if image
            .iter()
            .any(|&x| !image.contains(&ref_apply(b, m, s, x)))
        {
            continue;
        }
        let mut total = 0;
        let mut keeps = true;
        for ((offs, lanes), w) in resolved.iter().zip(&widths) {
            let sw: Vec<i64> = offs.iter().map(|&x| ref_apply(b, m, s, x)).collect();
            keeps &= ref_vector(&sw, *lanes, bytes) >= *w;
            total += ref_wavefronts(&sw, *lanes, bytes);
        }
        if !keeps || total > best {
            continue;
        }
        if total < best {
            best = total;
            winners.clear();
        }
        winners.push((b, m, s));
    }
    (best, winners)
}

struct Case {
    name: &'static str,
    smem: &'static str,
    accesses: &'static [&'static str],
    bytes: i64,
    /// The textbook swizzle and its wavefronts per access.
    textbook: (&'static str, &'static [i64]),
    /// The fewest wavefronts per access, worked out by hand.
    best: &'static [i64],
}

/// The table. Coordinates are column-major indices of the tile's shape (`m + rows * n`).
const CASES: &[Case] = &[
    Case {
        // 8 rows of 128 bytes of halves; ldmatrix: 8 lanes read 16 bytes each down chunk 0
        name: "128-byte rows, column of 16-byte chunks",
        smem: "(8,64):(64,1)",
        accesses: &["(8,8):(1,8)"],
        bytes: 2,
        textbook: ("Sw<3,3,3>", &[1]),
        best: &[1],
    },
    Case {
        // 64-byte rows: two rows per 128-byte line; the 64-byte swizzle XORs 2 chunk bits
        name: "64-byte rows, column of 16-byte chunks",
        smem: "(8,32):(32,1)",
        accesses: &["(8,8):(1,8)"],
        bytes: 2,
        textbook: ("Sw<2,3,3>", &[1]),
        best: &[1],
    },
    Case {
        // The 16x32 fp32 transpose: the store writes row 0 (lane t -> (0, t)); the read takes
        // column pairs (lane t -> (t % 16, t / 16)). XOR by the row (Sw<4,0,5>) sends both
        // columns of a pair into the same 16 banks: 2 wavefronts. XOR by twice the row
        // (Sw<4,1,4>) sends them to the even and the odd banks.
        name: "16x32 fp32 transpose",
        smem: "(16,32):(32,1)",
        accesses: &["32:16", "32:1"],
        bytes: 4,
        textbook: ("Sw<4,0,5>", &[1, 2]),
        best: &[1, 1],
    },
    Case {
        // The 16x32 16-bit transpose: rows of 64 bytes; the read takes column n and column
        // n + 16 (lane t -> (t % 16, 16 * (t / 16))). XOR by the row in words (Sw<4,1,4>)
        // puts row m of column 0 and row m ^ 8 of column 16 in the same bank: 2 wavefronts.
        name: "16x32 16-bit transpose",
        smem: "(16,32):(32,1)",
        accesses: &["32:16", "(16,2):(1,256)"],
        bytes: 2,
        textbook: ("Sw<4,1,4>", &[1, 2]),
        best: &[1, 1],
    },
    Case {
        // MN-major 128-byte atom of halves: 8 k-rows of 64 contiguous m; ldmatrix.trans
        // reads 8 k-rows of one 8-element m chunk.
        name: "MN-major 128-byte atom",
        smem: "(64,8):(1,64)",
        accesses: &["(8,8):(64,1)"],
        bytes: 2,
        textbook: ("Sw<3,3,3>", &[1]),
        best: &[1],
    },
    Case {
        // Already conflict-free: a row read. The identity is the answer.
        name: "row read needs no swizzle",
        smem: "(8,64):(64,1)",
        accesses: &["(8,8):(64,8)"],
        bytes: 2,
        textbook: ("Sw<0,0,0>", &[1]),
        best: &[1],
    },
    Case {
        // 4-byte scalars down a column of a 32-float-wide tile: 32 rows, all bank 0.
        name: "fp32 column read",
        smem: "(32,32):(32,1)",
        accesses: &["32:1"],
        bytes: 4,
        textbook: ("Sw<5,0,5>", &[1]),
        best: &[1],
    },
];

#[test]
fn best_swizzle_matches_brute_force_on_the_table() {
    for c in CASES {
        let smem = lay(c.smem);
        let accesses: Vec<Layout> = c.accesses.iter().map(|a| lay(a)).collect();
        let (min, winners) = brute_force(&accesses, &smem, c.bytes);
        let got = best_swizzle(&accesses, &smem, c.bytes).unwrap();
        let per: Vec<i64> = got.conflicts.iter().map(|x| x.wavefronts).collect();
        assert_eq!(per, c.best, "{}: {}", c.name, got.swizzle);
        assert_eq!(got.wavefronts(), min, "{}: {}", c.name, got.swizzle);
        assert!(
            winners.contains(&got.swizzle.into()),
            "{}: {} is not a brute-force optimum {winners:?}",
            c.name,
            got.swizzle
        );
        // The textbook swizzle, counted by the library's own bank_conflicts.
        let tb: Swizzle = c.textbook.0.parse().unwrap();
        let through = SwizzledLayout::new(tb, 0, smem.clone());
        for (a, &want) in accesses.iter().zip(c.textbook.1) {
            let (offs, lanes) = resolve(a, &smem);
            let sw: Vec<i64> = offs.iter().map(|&x| tb.apply(x)).collect();
            assert_eq!(
                ref_wavefronts(&sw, lanes, c.bytes),
                want,
                "{}: textbook",
                c.name
            );
            let composed = tessera_swizzle::algebra::composition(&through, a).unwrap();
            assert_eq!(bank_conflicts(&composed, c.bytes).unwrap().wavefronts, want);
        }
        // The general XOR map is never worse.
        let x = best_xor_swizzle(&accesses, &smem, c.bytes).unwrap();
        assert!(x.wavefronts() <= got.wavefronts(), "{}", c.name);
        for (a, conflicts) in accesses.iter().zip(&x.conflicts) {
            let (offs, lanes) = resolve(a, &smem);
            let mapped: Vec<i64> = offs.iter().map(|&o| x.map.apply(o)).collect();
            assert_eq!(
                ref_wavefronts(&mapped, lanes, c.bytes),
                conflicts.wavefronts
            );
        }
    }
}

/// The transposes: the synthesized swizzles by name.
#[test]
fn transposes_get_the_shifted_xor() {
    let fp32 = best_swizzle(&[lay("32:16"), lay("32:1")], &lay("(16,32):(32,1)"), 4).unwrap();
    assert_eq!(fp32.swizzle.to_string(), "Sw<4,1,4>");
    let half = best_swizzle(
        &[lay("32:16"), lay("(16,2):(1,256)")],
        &lay("(16,32):(32,1)"),
        2,
    )
    .unwrap();
    assert_eq!(half.swizzle.to_string(), "Sw<3,1,5>");
    assert_eq!(half.wavefronts(), 2);
}

#[test]
fn vectors_are_kept() {
    // Each lane reads 8 contiguous halves along a row: a swizzle with M < 3 would split them.
    let smem = lay("(8,64):(64,1)");
    let got = best_swizzle(&[lay("(8,8):(1,8)")], &smem, 2).unwrap();
    assert_eq!(got.vector_elems, [8]);
    assert!(got.swizzle.base() >= 3);
}

#[test]
fn errors_name_the_rule() {
    let smem = lay("(8,64):(64,1)");
    let e = best_swizzle(&[lay("64:1")], &smem, 2).unwrap_err();
    assert!(e.to_string().contains("lanes of one warp"), "{e}");
    let e = best_swizzle(&[lay("8:100")], &smem, 2).unwrap_err();
    assert!(e.to_string().contains("outside the tile"), "{e}");
    let e = best_swizzle(&[lay("8:1")], &lay("(8,8):(1,1)"), 2).unwrap_err();
    assert!(e.to_string().contains("not injective"), "{e}");
    let e = best_swizzle(&[lay("8:1")], &smem, 3).unwrap_err();
    assert!(e.to_string().starts_with("best_swizzle: "), "{e}");
    let e = best_swizzle(&[lay("8:1")], &lay("8:-1"), 2).unwrap_err();
    assert!(e.to_string().contains("negative offset"), "{e}");
}

proptest! {
    /// The schedule's wavefronts number exactly what `bank_conflicts` counts, each cell's bank
    /// is its word's, and no bank serves two words in one wavefront.
    #[test]
    fn schedule_agrees_with_bank_conflicts(
        sw in (0i64..=3, 0i64..=3, 0i64..=2, any::<bool>()),
        lanes in 1i64..=32,
        values in 1i64..=4,
        stride in 1i64..=80,
        vstride in 1i64..=3,
        bytes in prop::sample::select(vec![1i64, 2, 4, 8]),
    ) {
        let (b, m, extra, neg) = sw;
        let s = if neg { -(b + extra) } else { b + extra };
        let swz = Swizzle::new(b, m, s).unwrap();
        let tile = AnyLayout::from(SwizzledLayout::new(swz, 0, lay("4096:1")));
        let access: Layout = format!("({lanes},{values}):({stride},{vstride})").parse().unwrap();
        prop_assume!(access.image_bounds().1 < 4096);
        let cells = wavefront_schedule(&access, &tile, bytes).unwrap();
        let composed = tessera_swizzle::algebra::composition(
            &SwizzledLayout::new(swz, 0, lay("4096:1")),
            &access,
        ).unwrap();
        let bc = bank_conflicts(&composed, bytes).unwrap();
        let last = cells.iter().map(|c| c.wavefront).max().unwrap();
        prop_assert_eq!(last + 1, bc.wavefronts);
        let mut served = std::collections::HashMap::new();
        for c in &cells {
            prop_assert_eq!(c.offset, swz.apply(c.coord));
            prop_assert_eq!(c.bank, (c.offset * bytes / 4) % 32);
            if bytes <= 4 {
                let word = c.offset * bytes / 4;
                let prev = served.insert((c.wavefront, c.bank), word);
                prop_assert!(prev.map_or(true, |w| w == word));
            }
        }
    }
}

/// Rows 0, 1, 4, 5, 16, 17, 20, 21 of a tile of 128-byte rows read down chunk 0: the row
/// bits that vary (0, 2, 4) are not one contiguous run, so no `Sw<B,M,S>` spreads them over
/// the 3 bank-group bits; a general XOR map sends each to its own bank-group bit.
#[test]
fn general_xor_map_beats_every_swizzle() {
    let smem = lay("(32,64):(64,1)");
    let read = lay("((2,2,2),8):((1,4,16),32)");
    let (min, _) = brute_force(std::slice::from_ref(&read), &smem, 2);
    assert_eq!(min, 2);
    let s = best_swizzle(std::slice::from_ref(&read), &smem, 2).unwrap();
    assert_eq!(s.wavefronts(), 2);
    let x = best_xor_swizzle(std::slice::from_ref(&read), &smem, 2).unwrap();
    assert_eq!(x.wavefronts(), 1);
    assert_eq!(x.swizzle, None);
    assert_eq!(x.vector_elems, [8]);
    // A bijection of the tile: the map permutes [0, 2048).
    let mut seen = vec![false; 2048];
    for o in 0..2048 {
        let y = x.map.apply(o) as usize;
        assert!(!seen[y]);
        seen[y] = true;
    }
    let (offs, lanes) = resolve(&read, &smem);
    let mapped: Vec<i64> = offs.iter().map(|&o| x.map.apply(o)).collect();
    assert_eq!(ref_wavefronts(&mapped, lanes, 2), 1);
}

/// A layout with 1 to 3 modes whose extents and strides range over small and extreme values.
fn wild_layout() -> impl Strategy<Value = Layout> {
    let ext = prop_oneof![1i64..=40, Just(1i64 << 9), Just(1i64 << 31)];
    let stride = prop_oneof![
        -70i64..=70,
        Just(i64::MAX / 4),
        Just(i64::MIN / 4),
        Just(1i64 << 40)
    ];
    prop::collection::vec((ext, stride), 1..=3).prop_filter_map("a valid layout", |m| {
        Layout::new(
            tessera_layout::IntTuple::flat(m.iter().map(|x| x.0)),
            tessera_layout::IntTuple::flat(m.iter().map(|x| x.1)),
        )
        .ok()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    /// Whatever the operands, the new operations return a value or an error.
    #[test]
    fn no_panics_on_wild_operands(
        a in wild_layout(),
        s in wild_layout(),
        bytes in prop::sample::select(vec![0i64, 1, 2, 3, 4, 8, 16, 1 << 21]),
        sw in (0i64..=3, 0i64..=40, 0i64..=3, any::<bool>()),
        offset in prop_oneof![-5i64..5, Just(i64::MAX - 3), Just(i64::MIN + 3)],
    ) {
        let (b, m, extra, neg) = sw;
        let swz = Swizzle::new(b, m, if neg { -(b + extra) } else { b + extra }).unwrap();
        let _ = best_swizzle(std::slice::from_ref(&a), &s, bytes);
        let _ = best_xor_swizzle(std::slice::from_ref(&a), &s, bytes);
        let tile = AnyLayout::from(SwizzledLayout::new(swz, offset, s.clone()));
        let _ = wavefront_schedule(&a, &tile, bytes);
        let _ = tessera_swizzle::equal(&tile, &a);
        let _ = tessera_swizzle::equal(&tile, &AnyLayout::from(SwizzledLayout::new(swz, 0, a.clone())));
        let _ = tessera_swizzle::is_linear(&tile);
        if let Ok(f) = tessera_swizzle::F2Map::of(&tile) {
            let _ = f.compose(&f);
            let _ = f.inverse();
            let _ = f.to_line();
        }
        let _ = tessera_swizzle::picture::print_access(&tile, &a, bytes);
    }
}
