//! `equal` on swizzled layouts against brute force: every small swizzled layout is compared
//! with another of its function and with one of another function; large layouts are decided
//! by structure or refused, never guessed.

mod common;

use std::collections::HashMap;

use common::ref_offsets;
use tessera_layout::{IntTuple, Layout};
use tessera_swizzle::{equal, AnyLayout, Swizzle, SwizzleError, SwizzledLayout};

/// Every swizzle with `B <= 2`, `M <= 2`, `|S| <= 3` (one identity).
fn swizzles() -> Vec<Swizzle> {
    let mut out = vec![Swizzle::identity()];
    for b in 1..=2 {
        for m in 0..=2 {
            for s in b..=3 {
                out.push(Swizzle::new(b, m, s).unwrap());
                out.push(Swizzle::new(b, m, -s).unwrap());
            }
        }
    }
    out
}

/// Every flat layout of rank 1 or 2 with extents 1..=4 and strides -2..=5.
fn inners() -> Vec<Layout> {
    let mut out = Vec::new();
    for s0 in 1..=4 {
        for d0 in -2..=5 {
            out.push(Layout::int(s0, d0).unwrap());
            for s1 in 1..=4 {
                for d1 in -2..=5 {
                    out.push(
                        Layout::new(IntTuple::flat([s0, s1]), IntTuple::flat([d0, d1])).unwrap(),
                    );
                }
            }
        }
    }
    out
}

#[test]
fn equal_agrees_with_offsets_on_every_small_swizzled_layout() {
    let mut all: Vec<(SwizzledLayout, Vec<i64>)> = Vec::new();
    for sw in swizzles() {
        for offset in [0, 5, -3] {
            for inner in inners() {
                let l = SwizzledLayout::new(sw, offset, inner);
                let offs = ref_offsets(&l);
                all.push((l, offs));
            }
        }
    }
    let mut first: HashMap<&[i64], usize> = HashMap::new();
    let mut by_size: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, (_, offs)) in all.iter().enumerate() {
        first.entry(offs).or_insert(k);
        by_size.entry(offs.len()).or_default().push(k);
    }
    let (mut same, mut different) = (0, 0);
    for (k, (a, offs)) in all.iter().enumerate() {
        let twin = first[&offs[..]];
        assert_eq!(equal(a, &all[twin].0), Ok(true), "{a} vs {}", all[twin].0);
        if twin != k {
            same += 1;
        }
        let peers = &by_size[&offs.len()];
        let (b, offs_b) = &all[peers[(k * 7919) % peers.len()]];
        let want = offs == offs_b;
        assert_eq!(equal(a, b), Ok(want), "{a} vs {b}");
        // A plain layout is the identity-swizzled one.
        if a.swizzle.is_identity() && a.offset == 0 {
            assert_eq!(equal(&a.inner, b), Ok(want), "{} vs {b}", a.inner);
        }
        if want {
            same += 1;
        } else {
            different += 1;
        }
    }
    // Both answers are well represented (not a test that passes by saying `false`).
    assert!(
        same > 20_000 && different > 50_000,
        "{same} equal, {different} not"
    );
}

fn p(s: &str) -> AnyLayout {
    s.parse().unwrap()
}

#[test]
fn large_layouts_are_decided_by_structure() {
    // 2^36 elements: the same swizzle, the inner layouts equal as functions.
    let a = p("Sw<3,3,3> o ((8,16777216),(64,8)):((64,512),(1,8589934592))");
    let b = p("Sw<3,3,3> o (134217728,64,8):(64,1,8589934592)");
    assert_eq!(equal(&a, &b), Ok(true));
    // A column stride off: differs from index 64 * 8 on.
    let c = p("Sw<3,3,3> o (134217728,64,8):(64,1,8589934593)");
    assert_eq!(equal(&a, &c), Ok(false));
    // Sw<1,0,1> reads bit 1, which no offset of (2,2^30):(1,4) has: the plain layout, shown
    // by the F2 view (2^31 elements, power of two).
    assert_eq!(
        equal(
            &p("Sw<1,0,1> o (2,1073741824):(1,4)"),
            &p("(2,1073741824):(1,4)")
        ),
        Ok(true)
    );
    // The same with 3 * 2^31 elements (no F2 view): the modes past the first translate by
    // multiples of 4, the swizzle's period, so the first two indices decide.
    assert_eq!(
        equal(
            &p("Sw<1,0,1> o (2,3,1073741824):(1,4,16)"),
            &p("(2,3,1073741824):(1,4,16)")
        ),
        Ok(true)
    );
    assert_eq!(
        equal(
            &p("Sw<1,0,1> o (2,3,1073741824):(1,2,16)"),
            &p("(2,3,1073741824):(1,2,16)")
        ),
        Ok(false)
    );
    // Different sizes are never equal.
    assert_eq!(
        equal(&p("Sw<3,3,3> o 64:1"), &p("Sw<3,3,3> o 65:1")),
        Ok(false)
    );
}

#[test]
fn undecided_within_the_bound_is_an_error_not_a_guess() {
    // 3 * 2^23 elements through different swizzles, no power-of-two size, and the stride 3
    // is not a multiple of the period: only enumeration could decide, above the bound.
    let r = equal(
        &p("Sw<1,0,1> o (3,8388608):(1,3)"),
        &p("Sw<1,0,2> o (3,8388608):(1,3)"),
    );
    assert!(
        matches!(r, Err(SwizzleError::TooLarge { op: "equal", .. })),
        "{r:?}"
    );
    // Offset plus image past i64.
    let r = equal(&p("Sw<1,0,1> o 9223372036854775800 o 16:1"), &p("16:1"));
    assert!(
        matches!(r, Err(SwizzleError::Overflow { op: "equal", .. })),
        "{r:?}"
    );
}
