//! General XOR-linear maps: composition and inversion against evaluation, `is_linear`
//! against its definition, and the one-line matrix text.

mod common;

use common::{power_of_two_layout, ref_apply, ref_offsets, valid_swizzle};
use proptest::prelude::*;
use tessera_swizzle::{is_linear, F2Map, SwizzledLayout};

/// An affine map on `bits` input bits whose columns and translation stay below `2^out`.
fn f2_map(bits: u32, out: u32) -> impl Strategy<Value = F2Map> {
    let word = 0i64..(1i64 << out);
    (prop::collection::vec(word.clone(), bits as usize), word)
        .prop_map(|(cols, t)| F2Map::new(cols, t).unwrap())
}

/// `f(i)` from the definition: the translation XOR the columns of the set bits of `i`.
fn ref_eval(cols: &[i64], t: i64, i: i64) -> i64 {
    (0..cols.len()).fold(t, |acc, k| {
        if (i >> k) & 1 == 1 {
            acc ^ cols[k]
        } else {
            acc
        }
    })
}

proptest! {
    #[test]
    fn composition_is_evaluation(outer in f2_map(6, 8), inner in f2_map(4, 6)) {
        let r = outer.compose(&inner).unwrap();
        for i in 0..16 {
            let want = ref_eval(
                outer.columns(),
                outer.translation(),
                ref_eval(inner.columns(), inner.translation(), i),
            );
            prop_assert_eq!(r.apply(i), want);
        }
    }

    #[test]
    fn composition_outside_the_domain_is_refused(outer in f2_map(4, 6), inner in f2_map(3, 6)) {
        let reaches_out = inner.columns().iter().chain([inner.translation()].iter()).any(|&c| c >= 16);
        prop_assert_eq!(outer.compose(&inner).is_err(), reaches_out);
    }

    /// Two swizzles of any shifts compose as maps on 10 bits, and the inverse undoes them.
    #[test]
    fn swizzles_compose_and_invert(a in valid_swizzle(), b in valid_swizzle()) {
        let (fa, fb) = (F2Map::of_swizzle(&a, 12), F2Map::of_swizzle(&b, 12));
        let r = match fa.compose(&fb) {
            Ok(r) => r,
            // b moves some bit of [0, 2^12) past bit 11 (a negative shift near the top)
            Err(_) => return Ok(()),
        };
        let (ta, tb) = (a.into(), b.into());
        let (ta, tb): ((i64, i64, i64), (i64, i64, i64)) = (ta, tb);
        for x in 0..4096 {
            let want = ref_apply(ta.0, ta.1, ta.2, ref_apply(tb.0, tb.1, tb.2, x));
            prop_assert_eq!(r.apply(x), want);
        }
        if r.is_bijective() {
            let inv = r.inverse().unwrap();
            prop_assert_eq!(inv.compose(&r).unwrap(), F2Map::identity(12));
        }
    }

    /// `is_linear(L)` is `size` a power of two and `L(i ^ j) == L(i) ^ L(j)` for all `i, j`.
    #[test]
    fn is_linear_is_its_definition(l in power_of_two_layout(), sw in valid_swizzle(), o in -8i64..8) {
        let s = SwizzledLayout::new(sw, o, l);
        let offs = ref_offsets(&s);
        let n = offs.len();
        let want = n.is_power_of_two()
            && (0..n).all(|i| (0..n).all(|j| offs[i ^ j] == offs[i] ^ offs[j]));
        prop_assert_eq!(is_linear(&s), Ok(want), "{}", s);
    }
}

#[test]
fn matrix_text() {
    // Sw<1,0,1> o (2,2):(2,1): index bit 0 -> Sw(2) = 3, index bit 1 -> 1
    let f = F2Map::new(vec![3, 1], 0).unwrap();
    assert_eq!(f.rows(), ["01", "11"]);
    assert_eq!(f.to_line(), "[01;11]");
    let g = F2Map::new(vec![1], 2).unwrap();
    assert_eq!(g.to_line(), "[0;1] ^ 10");
    assert!(!g.is_linear());
    assert!(F2Map::new(vec![1; 63], 0).is_err());
}
