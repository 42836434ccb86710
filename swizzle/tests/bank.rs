//! `bank_conflicts` and `vectorization`: a table of accesses worked out by hand, and a
//! brute-force model of the banks written here from the description, byte by byte.

mod common;

use std::collections::{HashMap, HashSet};

use common::{lay, ref_apply, sl};
use proptest::prelude::*;
use tessera_layout::{IntTuple, Layout};
use tessera_swizzle::{
    bank_conflicts, vectorization, AnyLayout, BankConflicts, Swizzle, SwizzledLayout,
};

/// The model, byte by byte: lane `t`, value `e` is at element offset `off(t + lanes*e)`;
/// phases of `clamp(128 / (v * elem_bytes), 1, 32)` lanes; per phase each bank serves its
/// distinct words one per wavefront; ideal = ceil(bytes / 128).
fn brute(offset_of: impl Fn(i64) -> i64, lanes: i64, v: i64, eb: i64) -> (i64, i64) {
    let per_phase = (128 / (v * eb)).clamp(1, 32);
    let mut total = 0;
    for phase_start in (0..lanes).step_by(per_phase as usize) {
        let mut banks: HashMap<i64, HashSet<i64>> = HashMap::new();
        for t in phase_start..(phase_start + per_phase).min(lanes) {
            for e in 0..v {
                let base = offset_of(t + lanes * e) * eb;
                for byte in base..base + eb {
                    let word = byte.div_euclid(4);
                    banks.entry(word.rem_euclid(32)).or_default().insert(word);
                }
            }
        }
        total += banks.values().map(HashSet::len).max().unwrap_or(0) as i64;
    }
    let bytes = lanes * v * eb;
    (total, ((bytes + 127) / 128).max(1))
}

#[track_caller]
fn expect(layout: &str, eb: i64, want: &str) {
    let l: AnyLayout = layout.parse().unwrap();
    let got = bank_conflicts(&l, eb).unwrap();
    assert_eq!(got.to_string(), want, "bank_conflicts({layout}, {eb})");
}

#[test]
fn accesses_worked_out_by_hand() {
    expect("32:1", 4, "1/1"); // one word per bank
    expect("32:32", 4, "32/1"); // every lane in bank 0, 32 different words
    expect("32:2", 4, "2/1"); // even banks, two words each
    expect("32:0", 4, "1/1"); // one word: a broadcast
    expect("32:1", 2, "1/1"); // 64 bytes: 16 words, still one wavefront
    expect("32:1", 8, "2/2"); // 16 lanes per phase, 128 contiguous bytes each
    expect("32:2", 8, "4/2"); // 16-byte stride: lanes t and t+8 share banks in each phase
                              // 8 lanes x 16 bytes down a column of a 64-half-wide tile: all start in bank 0.
    expect("(8,8):(64,1)", 2, "8/1");
    // the 128-byte swizzle in 2-byte units moves row r's chunk 0 to chunk r.
    expect("Sw<3,3,3> o (8,8):(64,1)", 2, "1/1");
    // Sw<3,4,3> applied to 2-byte offsets (it is the byte-address swizzle) pairs rows:
    // rows 0,1 -> bytes 0,128 (banks 0-3), rows 2,3 -> 288,416 (banks 8-11), ...
    expect("Sw<3,4,3> o (8,8):(64,1)", 2, "2/1");
    // 32 lanes x 16 bytes contiguous: 4 phases of 8 lanes, each 128 bytes.
    expect("(32,8):(8,1)", 2, "4/4");
}

#[test]
fn display_and_predicate() {
    let b = BankConflicts {
        wavefronts: 8,
        ideal: 1,
    };
    assert_eq!(b.to_string(), "8/1");
    assert!(!b.is_conflict_free());
    assert!(BankConflicts {
        wavefronts: 4,
        ideal: 4
    }
    .is_conflict_free());
}

#[test]
fn inputs_outside_the_model_are_errors() {
    assert!(bank_conflicts(&lay("64:1"), 4).is_err()); // 64 lanes
    assert!(bank_conflicts(&lay("32:1"), 0).is_err());
    assert!(bank_conflicts(&lay("(32,4):(4,1)"), -2).is_err());
}

#[test]
fn vectorization_by_hand() {
    let v = vectorization(&lay("(32,8):(8,1)"), 2).unwrap();
    assert_eq!((v.contiguous, v.vector_elems, v.vector_bytes), (8, 8, 16));
    // 4-byte elements: at most 16 bytes per vector, so 4 of the 8 contiguous values.
    let v = vectorization(&lay("(32,8):(8,1)"), 4).unwrap();
    assert_eq!((v.contiguous, v.vector_elems, v.vector_bytes), (8, 4, 16));
    // runs of 3 at offsets 3t: contiguous but only 1-aligned
    let v = vectorization(&lay("(32,3):(3,1)"), 4).unwrap();
    assert_eq!((v.contiguous, v.vector_elems), (3, 1));
    // a column: nothing contiguous
    let v = vectorization(&lay("(8,8):(1,8)"), 2).unwrap();
    assert_eq!((v.contiguous, v.vector_elems), (1, 1));
    // the swizzle with M = 3 keeps 8-half chunks whole
    let v = vectorization(&sl("Sw<3,3,3> o (8,8):(64,1)"), 2).unwrap();
    assert_eq!(v.vector_bytes, 16);
}

/// A warp access: 1 to 32 lanes, 1 to 8 values each, strides chosen to collide or not.
fn warp_access_layout() -> impl Strategy<Value = (Layout, i64)> {
    (
        1i64..=32,
        1i64..=8,
        -70i64..=70,
        -70i64..=70,
        prop::sample::select(vec![1i64, 2, 4, 8, 16]),
    )
        .prop_map(|(lanes, v, dl, dv, eb)| {
            (
                Layout::new(IntTuple::flat([lanes, v]), IntTuple::flat([dl, dv])).unwrap(),
                eb,
            )
        })
}

proptest! {
    #[test]
    fn plain_accesses_match_the_brute_force_model((l, eb) in warp_access_layout()) {
        let lanes = l.mode(0).unwrap().size();
        let want = brute(|i| l.call(i).unwrap(), lanes, l.size() / lanes, eb);
        let got = bank_conflicts(&l, eb).unwrap();
        prop_assert_eq!((got.wavefronts, got.ideal), want, "{}", l);
    }

    #[test]
    fn swizzled_accesses_match_the_brute_force_model(
        (l, eb) in warp_access_layout(), b in 0i64..=3, m in 0i64..=4, extra in 0i64..=3, o in 0i64..512
    ) {
        let sw = Swizzle::new(b, m, b + extra).unwrap();
        let s = SwizzledLayout::new(sw, o, l.clone());
        let lanes = l.mode(0).unwrap().size();
        let want = brute(
            |i| ref_apply(b, m, b + extra, o + l.call(i).unwrap()),
            lanes,
            l.size() / lanes,
            eb,
        );
        let got = bank_conflicts(&s, eb).unwrap();
        prop_assert_eq!((got.wavefronts, got.ideal), want, "{}", s);
    }
}

/// The definition of `vectorization`, by brute force over candidate widths.
fn brute_vector(offset_of: impl Fn(i64) -> i64, lanes: i64, v: i64, eb: i64) -> (i64, i64) {
    let ok = |n: i64, aligned: bool| {
        (0..lanes).all(|t| {
            (0..v).all(|e| {
                let start = e - e % n;
                let first = offset_of(t + lanes * start);
                offset_of(t + lanes * e) == first + (e - start) && (!aligned || first % n == 0)
            })
        })
    };
    let contiguous = (1..=v)
        .filter(|n| v % n == 0 && ok(*n, false))
        .max()
        .unwrap();
    let vector = [1i64, 2, 4, 8, 16]
        .into_iter()
        .filter(|&w| contiguous % w == 0 && w * eb <= 16 && ok(w, true))
        .max()
        .unwrap();
    (contiguous, vector)
}

proptest! {
    #[test]
    fn vectorization_matches_its_definition(
        (l, eb) in warp_access_layout(), b in 0i64..=3, m in 0i64..=4, o in 0i64..64
    ) {
        let sw = Swizzle::new(b, m, b + 1).unwrap();
        let s = SwizzledLayout::new(sw, o, l.clone());
        let lanes = l.mode(0).unwrap().size();
        let want = brute_vector(|i| ref_apply(b, m, b + 1, o + l.call(i).unwrap()), lanes, l.size() / lanes, eb);
        let got = vectorization(&s, eb).unwrap();
        prop_assert_eq!((got.contiguous, got.vector_elems), want, "{}", s);
        prop_assert_eq!(got.vector_bytes, got.vector_elems * eb);
    }
}
