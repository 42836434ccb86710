//! The F2 view: the bit matrix reproduces the layout, bijectivity and injectivity agree with
//! enumeration, and the inverse inverts.

mod common;

use std::collections::HashSet;

use common::{power_of_two_layout, ref_offsets, sl, valid_swizzle};
use proptest::prelude::*;
use tessera_swizzle::{F2Map, SwizzleError, SwizzledLayout};

#[test]
fn bit_matrix_by_hand() {
    // Sw<3,3,3> o (8,64):(64,1): index bits 0-2 are the row (offset bits 6-8), bits 3-8 the
    // column (offset bits 0-5); row bit k also flips offset bit 3+k.
    let f = F2Map::of(&sl("Sw<3,3,3> o (8,64):(64,1)")).unwrap();
    assert_eq!(f.in_bits(), 9);
    assert_eq!(&f.columns()[..3], &[64 | 8, 128 | 16, 256 | 32]);
    assert_eq!(&f.columns()[3..], &[1, 2, 4, 8, 16, 32]);
    assert_eq!(f.translation(), 0);
    assert_eq!(f.rank(), 9);
    assert!(f.is_bijective());
    let text = f.to_string();
    assert_eq!(text.lines().count(), 9);
    assert_eq!(text.lines().next().unwrap(), "o8  ......1.. | .");
}

#[test]
fn not_linear_or_not_a_power_of_two() {
    assert!(matches!(
        F2Map::of(&sl("Sw<1,0,1> o 3:1")),
        Err(SwizzleError::Inadmissible { .. })
    ));
    // 0, 1, 1, 2: index 3 gives 2, but 1 ^ 1 = 0
    assert!(F2Map::of(&"(2,2):(1,1)".parse::<tessera_layout::Layout>().unwrap()).is_err());
    // an offset that carries into the layout's bits is still affine here ({1, 2}) ...
    let f = F2Map::of(&sl("Sw<0,0,0> o 1 o 2:1")).unwrap();
    assert_eq!((f.translation(), f.columns()), (1, &[3][..]));
    assert!(f.is_injective() && !f.is_bijective()); // {1, 2} is not an aligned block
    assert!(f.inverse().is_err());
}

proptest! {
    #[test]
    fn the_map_reproduces_the_layout(sw in valid_swizzle(), o in 0i64..64, l in power_of_two_layout()) {
        let s = SwizzledLayout::new(sw, o, l);
        let want = ref_offsets(&s);
        match F2Map::of(&s) {
            Ok(f) => {
                for (i, &w) in want.iter().enumerate() {
                    prop_assert_eq!(f.apply(i as i64), w, "{}", s);
                }
                // injective iff the offsets are distinct
                let distinct = want.iter().collect::<HashSet<_>>().len() == want.len();
                prop_assert_eq!(f.is_injective(), distinct, "{}", s);
                // bijective iff the offsets are an aligned block of size 2^n
                let n = want.len() as i64;
                let lo = *want.iter().min().unwrap();
                let block = distinct && lo.rem_euclid(n) == 0 && *want.iter().max().unwrap() == lo + n - 1;
                prop_assert_eq!(f.is_bijective(), block, "{}", s);
                if block {
                    let inv = f.inverse().unwrap();
                    for (i, &w) in want.iter().enumerate() {
                        prop_assert_eq!(inv.apply(w), i as i64);
                    }
                }
            }
            Err(SwizzleError::Inadmissible { .. }) => {
                // then no affine map over bits gives these offsets
                let t = want[0];
                let n = want.len().trailing_zeros();
                let cols: Vec<i64> = (0..n).map(|k| want[1 << k] ^ t).collect();
                let affine = want.iter().enumerate().all(|(i, &w)| {
                    (0..n).filter(|k| (i >> k) & 1 == 1).fold(t, |acc, k| acc ^ cols[k as usize]) == w
                });
                prop_assert!(!affine, "{} was refused but is affine", s);
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        }
    }
}
