//! Strategies and brute-force references shared by the swizzle test suites.
//!
//! The references here are written independently of the code under test: the swizzle is
//! applied bit by bit from its definition, and layouts are evaluated with
//! `tessera_layout::Layout::call`, not with anything from `tessera_swizzle`.

#![allow(dead_code)]

use proptest::prelude::*;
use tessera_layout::{IntTuple, Layout};
use tessera_swizzle::{Swizzle, SwizzledLayout};

/// `Sw<B,M,S>(x)` from the definition: for each `k < B`, bit `ZZZ_k` of the result is bit
/// `ZZZ_k` of `x` XOR bit `YYY_k` of `x`, where `YYY` starts at `M + max(0,S)` and `ZZZ` at
/// `M + max(0,-S)`.
pub fn ref_apply(b: i64, m: i64, s: i64, x: i64) -> i64 {
    let mut out = x;
    for k in 0..b {
        let ybit = m + s.max(0) + k;
        let zbit = m + (-s).max(0) + k;
        if (x >> ybit) & 1 == 1 {
            out ^= 1i64 << zbit;
        }
    }
    out
}

/// Every offset of `sw o offset o inner`, by the references.
pub fn ref_offsets(l: &SwizzledLayout) -> Vec<i64> {
    let (b, m, s) = (l.swizzle.bits(), l.swizzle.base(), l.swizzle.shift());
    (0..l.inner.size())
        .map(|i| ref_apply(b, m, s, l.offset + l.inner.call(i).expect("in range")))
        .collect()
}

/// Parameters CuTe accepts: `B, M >= 0`, `|S| >= B`, small enough to enumerate.
pub fn valid_swizzle() -> impl Strategy<Value = Swizzle> {
    (0i64..=4, 0i64..=5, 0i64..=4, any::<bool>()).prop_map(|(b, m, extra, neg)| {
        let s = b + extra;
        Swizzle::new(b, m, if neg { -s } else { s }).expect("valid by construction")
    })
}

/// A layout of rank 1 to 3, possibly nested, extents 1..=6, strides in -40..=40 (negative
/// and zero strides included): small enough to enumerate.
pub fn small_layout_any_strides() -> impl Strategy<Value = Layout> {
    let leaf = (1i64..=6, -40i64..=40);
    prop::collection::vec(prop::collection::vec(leaf, 1..=2), 1..=3).prop_map(|modes| {
        let (shape, stride): (Vec<IntTuple>, Vec<IntTuple>) = modes
            .into_iter()
            .map(|m| {
                if m.len() == 1 {
                    (IntTuple::Int(m[0].0), IntTuple::Int(m[0].1))
                } else {
                    (
                        IntTuple::flat(m.iter().map(|x| x.0)),
                        IntTuple::flat(m.iter().map(|x| x.1)),
                    )
                }
            })
            .unzip();
        Layout::new(IntTuple::Tuple(shape), IntTuple::Tuple(stride)).expect("small")
    })
}

/// A swizzled layout with any offset in -300..300 over [`small_layout_any_strides`].
pub fn enumerable_swizzled_layout() -> impl Strategy<Value = SwizzledLayout> {
    (valid_swizzle(), -300i64..300, small_layout_any_strides())
        .prop_map(|(sw, o, l)| SwizzledLayout::new(sw, o, l))
}

/// A rank-2 layout `(rows, cols)` with power-of-two extents up to 16 and strides that are
/// 0 or signed powers of two up to 256: XOR-linear by construction in many cases, and not in
/// others (colliding bits).
pub fn power_of_two_layout() -> impl Strategy<Value = Layout> {
    let ext = (0u32..=4).prop_map(|k| 1i64 << k);
    let stride = prop_oneof![
        Just(0i64),
        (0u32..=8).prop_map(|k| 1i64 << k),
        (0u32..=8).prop_map(|k| -(1i64 << k)),
    ];
    (ext.clone(), stride.clone(), ext, stride).prop_map(|(a, da, b, db)| {
        Layout::new(IntTuple::flat([a, b]), IntTuple::flat([da, db])).expect("small")
    })
}

/// Parses a swizzled layout literal.
pub fn sl(s: &str) -> SwizzledLayout {
    s.parse().expect("literal")
}

/// Parses a plain layout literal.
pub fn lay(s: &str) -> Layout {
    s.parse().expect("literal")
}
