//! `Swizzle`: the function, its masks, `make_swizzle`, composition, up/downcast, text form.
//!
//! Expected values are worked out by hand from CuTe's definition (`x ^ ((x & YYY) >> S)`)
//! or come from the reference implementation `common::ref_apply`, written from the
//! definition bit by bit.

mod common;

use common::{ref_apply, valid_swizzle};
use proptest::prelude::*;
use tessera_swizzle::{Swizzle, SwizzleError};

fn sw(b: i64, m: i64, s: i64) -> Swizzle {
    Swizzle::new(b, m, s).unwrap()
}

/// Post-condition checker of `apply`: agrees with the reference, is an involution, and
/// changes only ZZZ bits.
fn check_apply(s: Swizzle, x: i64) -> Result<(), String> {
    let y = s.apply(x);
    let want = ref_apply(s.bits(), s.base(), s.shift(), x);
    if y != want {
        return Err(format!("{s}({x}) = {y}, reference {want}"));
    }
    if s.apply(y) != x {
        return Err(format!("{s} is not an involution at {x}"));
    }
    if (y ^ x) & !s.zzz_mask() != 0 {
        return Err(format!("{s}({x}) changes bits outside ZZZ"));
    }
    Ok(())
}

#[test]
fn documented_examples() {
    // (swizzle, x, Sw(x)), by hand.
    let table = [
        (sw(3, 4, 3), 0, 0),
        (sw(3, 4, 3), 128, 128 + 16), // Y bit 7 -> Z bit 4
        (sw(3, 4, 3), 0b11_1000_0000, 0b11_1111_0000), // all three Y bits
        (sw(3, 4, 3), 0b11_1111_0000, 0b11_1000_0000),
        (sw(1, 0, 1), 2, 3),
        (sw(1, 0, 1), 3, 2),
        (sw(2, 0, -2), 1, 1 + 4), // S < 0: YYY = bits 0-1, ZZZ = bits 2-3
        (sw(2, 0, -2), 5, 1),
        (sw(0, 4, 3), 12345, 12345), // B = 0 is the identity
        (sw(3, 3, 3), 64, 72),       // row 1 of a 64-wide 16-bit tile -> chunk 1
    ];
    for (s, x, want) in table {
        assert_eq!(s.apply(x), want, "{s}({x})");
        check_apply(s, x).unwrap();
    }
}

#[test]
fn masks_by_hand() {
    assert_eq!(
        (sw(3, 4, 3).yyy_mask(), sw(3, 4, 3).zzz_mask()),
        (0x380, 0x70)
    );
    assert_eq!(
        (sw(2, 1, -5).yyy_mask(), sw(2, 1, -5).zzz_mask()),
        (0b110, 0b1100_0000)
    );
    assert_eq!((sw(0, 4, 3).yyy_mask(), sw(0, 4, 3).zzz_mask()), (0, 0));
    assert_eq!(sw(3, 4, 3).swizzle_code(), 0x3f0);
}

#[test]
fn constructor_rejects_what_cute_rejects() {
    for (b, m, s) in [
        (3, 4, 2),
        (1, 0, 0),
        (-1, 0, 1),
        (1, -1, 1),
        (2, 0, -1),
        (20, 20, 23),
    ] {
        assert!(
            matches!(Swizzle::new(b, m, s), Err(SwizzleError::BadSwizzle { .. })),
            "Sw<{b},{m},{s}> must be rejected"
        );
    }
    assert!(Swizzle::new(0, 0, 0).is_ok());
    assert!(Swizzle::new(20, 20, 22).is_ok()); // 62 bits: the limit
    assert!(Swizzle::new(1, 0, i64::MIN).is_err()); // no panic on |i64::MIN|
}

#[test]
fn make_swizzle_examples_from_cute() {
    // CuTe's documented examples of make_swizzle<Y, Z>().
    assert_eq!(Swizzle::make_swizzle(0b1000, 0b0100).unwrap(), sw(1, 2, 1));
    assert_eq!(
        Swizzle::make_swizzle(0b1100_0000, 0b0000_0110).unwrap(),
        sw(2, 1, 5)
    );
    assert_eq!(Swizzle::make_swizzle(0, 0).unwrap(), Swizzle::identity());
    for (y, z) in [
        (0b11, 0b1),
        (0b101, 0b11),
        (0b11, 0b11),
        (0b110, 0b011),
        (-4, 1),
    ] {
        assert!(
            Swizzle::make_swizzle(y, z).is_err(),
            "make_swizzle({y:#b}, {z:#b})"
        );
    }
}

#[test]
fn text_form() {
    let s: Swizzle = " Sw < 3 , 4 , -3 > ".parse().unwrap();
    assert_eq!(s.to_string(), "Sw<3,4,-3>");
    for bad in [
        "Sw<3,4>",
        "Sw<3,4,3",
        "Sx<1,1,1>",
        "Sw<3,4,2>",
        "Sw<1,1,1> x",
    ] {
        let e = bad.parse::<Swizzle>().unwrap_err();
        assert!(e.is_parse(), "{bad}: {e}");
    }
}

#[test]
fn upcast_downcast_by_hand() {
    // Sw<B,M,S> on 2-byte elements is Sw<B,M+1,S> on bytes.
    assert_eq!(sw(3, 3, 3).downcast(2).unwrap(), sw(3, 4, 3));
    assert_eq!(sw(2, 2, 3).downcast(4).unwrap(), sw(2, 4, 3));
    assert_eq!(sw(3, 4, 3).upcast(16).unwrap(), sw(3, 0, 3));
    assert!(sw(3, 4, 3).upcast(32).is_err()); // M < log2(32)
    assert!(sw(3, 4, 3).upcast(3).is_err());
    assert!(sw(3, 4, 3).downcast(0).is_err());
}

proptest! {
    #[test]
    fn apply_matches_reference_and_is_an_involution(s in valid_swizzle(), x in any::<i64>()) {
        check_apply(s, x).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn masks_round_trip_through_make_swizzle(s in valid_swizzle()) {
        let r = Swizzle::make_swizzle(s.yyy_mask(), s.zzz_mask()).unwrap();
        if s.is_identity() {
            prop_assert!(r.is_identity());
        } else {
            prop_assert_eq!(r, s);
        }
    }

    #[test]
    fn swizzle_text_round_trips(s in valid_swizzle()) {
        prop_assert_eq!(s.to_string().parse::<Swizzle>().unwrap(), s);
    }

    #[test]
    fn composition_is_the_composite_function_or_an_error(
        a in valid_swizzle(), b in valid_swizzle(), xs in prop::collection::vec(0i64..1 << 16, 32)
    ) {
        match a.compose(&b) {
            Ok(r) => {
                for x in xs {
                    prop_assert_eq!(r.apply(x), a.apply(b.apply(x)), "{} o {} = {}", a, b, r);
                }
            }
            Err(_) => {
                // then the composite is not one swizzle: its changed bits are not two equal
                // disjoint runs, or the function differs from the swizzle those runs give.
                let f = |x: i64| a.apply(b.apply(x));
                let (mut y, mut z) = (0i64, 0i64);
                for k in 0..20 {
                    let d = f(1 << k) ^ (1 << k);
                    if d != 0 { y |= 1 << k; z |= d; }
                }
                if let Ok(c) = Swizzle::make_swizzle(y, z) {
                    let same = (0..1i64 << 16).all(|x| c.apply(x) == f(x));
                    prop_assert!(!same, "{} o {} is {} but was refused", a, b, c);
                }
            }
        }
    }

    #[test]
    fn a_swizzle_composed_with_itself_is_the_identity(s in valid_swizzle()) {
        prop_assert!(s.compose(&s).unwrap().is_identity());
    }

    #[test]
    fn downcast_then_upcast_is_the_unit_change(s in valid_swizzle(), k in 0u32..=3, x in 0i64..1 << 20, j in 0i64..8) {
        let n = 1i64 << k;
        let j = j % n;
        let d = s.downcast(n).unwrap();
        // R(n*x + j) == n*S(x) + j
        prop_assert_eq!(d.apply(n * x + j), n * s.apply(x) + j);
        prop_assert_eq!(d.upcast(n).unwrap(), s);
    }
}
