//! Every operation against its post-condition checker (`tessera_swizzle::check`, brute force
//! from the definitions), over random layouts; and the checkers themselves reject wrong
//! answers, so a pass means something.

mod common;

use common::{enumerable_swizzled_layout, sl, valid_swizzle};
use proptest::prelude::*;
use tessera_layout::{IntTuple, Layout};
use tessera_swizzle::algebra::{self, SliceCoord};
use tessera_swizzle::{check, is_bijective, AnyLayout, F2Map};

/// A slicing coordinate for `shape`: per top-level mode `_`, a 1-D index, or (for a tuple
/// mode) per-leaf choices, driven by `picks`.
fn slice_coord_for(shape: &IntTuple, picks: &[u16]) -> SliceCoord {
    let mut k = 0usize;
    let mut next = || {
        let p = picks[k % picks.len()];
        k += 1;
        p
    };
    let mut item = |s: &IntTuple| -> SliceCoord {
        match (s, next() % 3) {
            (_, 0) => SliceCoord::All,
            (IntTuple::Tuple(ss), 2) => SliceCoord::Tuple(
                ss.iter()
                    .map(|leaf| {
                        let n = leaf.product().unwrap();
                        let p = next();
                        if p % 2 == 0 {
                            SliceCoord::All
                        } else {
                            SliceCoord::Index(i64::from(p) % n)
                        }
                    })
                    .collect(),
            ),
            _ => SliceCoord::Index(i64::from(next()) % s.product().unwrap()),
        }
    };
    match shape {
        IntTuple::Int(_) => item(shape),
        IntTuple::Tuple(ms) => SliceCoord::Tuple(ms.iter().map(&mut item).collect()),
    }
}

#[test]
fn checkers_reject_wrong_answers() {
    let a = sl("Sw<1,0,1> o 3:1");
    let any = AnyLayout::from(a.clone());
    assert!(check::image_bounds(&any, (0, 2)).is_err()); // the C++ answer
    assert!(check::image_bounds(&any, (0, 3)).is_ok());
    assert!(check::is_bijective(&any, true).is_err());
    assert!(check::apply(&"Sw<3,4,3>".parse().unwrap(), 128, 128).is_err());
    let t = sl("Sw<3,3,3> o (8,64):(64,1)");
    let c: SliceCoord = "(2,_)".parse().unwrap();
    let (r, off) = algebra::slice_and_offset(&t, &c).unwrap();
    assert!(check::slice_and_offset(&t.clone().into(), &c, &r, off).is_ok());
    assert!(check::slice_and_offset(&t.clone().into(), &c, &r, off + 1).is_err());
    let plain_row: AnyLayout = "(64):(1)".parse().unwrap();
    assert!(check::slice_and_offset(&t.into(), &c, &plain_row, 128).is_err()); // unswizzled row
    let inv = algebra::right_inverse(&sl("Sw<3,3,3> o (8,64):(64,1)")).unwrap();
    assert!(check::right_inverse(&sl("Sw<3,3,3> o (8,64):(64,1)"), &inv).is_ok());
    assert!(check::right_inverse(&sl("Sw<2,3,3> o (8,64):(64,1)"), &inv).is_err());
}

proptest! {
    #[test]
    fn apply(s in valid_swizzle(), x in any::<i64>()) {
        check::apply(&s, x, s.apply(x)).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn image_bounds_and_bijectivity(l in enumerable_swizzled_layout()) {
        let any = AnyLayout::from(l);
        check::image_bounds(&any, any.image_bounds().unwrap()).map_err(TestCaseError::fail)?;
        check::is_bijective(&any, is_bijective(&any).unwrap()).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn composition(l in enumerable_swizzled_layout(), n in 1i64..=8, d in -3i64..=3) {
        let b = Layout::new(n, d).unwrap();
        if let Ok(r) = algebra::composition(&l, &b) {
            check::composition(&l, &b, &r).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn inverses(sw in valid_swizzle(), a in 0u32..=3, b in 0u32..=3, row_major in any::<bool>()) {
        let shape = IntTuple::flat([1i64 << a, 1i64 << b]);
        let inner = if row_major { Layout::row_major(shape) } else { Layout::col_major(shape) }.unwrap();
        let l = tessera_swizzle::SwizzledLayout::new(sw, 0, inner);
        if let Ok(r) = algebra::right_inverse(&l) {
            check::right_inverse(&l, &r).map_err(TestCaseError::fail)?;
        }
        if let Ok(r) = algebra::left_inverse(&l) {
            check::left_inverse(&l, &r).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn downcast(l in enumerable_swizzled_layout(), k in 1u32..=2) {
        if let Ok(r) = algebra::downcast(&l, 1 << k) {
            check::downcast(&l, 1 << k, &r).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn slice_and_offset(l in enumerable_swizzled_layout(), picks in prop::collection::vec(any::<u16>(), 1..12)) {
        let any = AnyLayout::from(l.clone());
        let c = slice_coord_for(l.inner.shape(), &picks);
        let (r, off) = algebra::slice_and_offset(&any, &c).unwrap();
        check::slice_and_offset(&any, &c, &r, off).map_err(TestCaseError::fail)?;
        // and the same on the plain inner layout
        let plain = AnyLayout::from(l.inner.clone());
        let (r, off) = algebra::slice_and_offset(&plain, &c).unwrap();
        prop_assert!(matches!(r, AnyLayout::Plain(_)));
        check::slice_and_offset(&plain, &c, &r, off).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn f2_map(sw in valid_swizzle(), o in 0i64..64, l in common::power_of_two_layout()) {
        let any = AnyLayout::from(tessera_swizzle::SwizzledLayout::new(sw, o, l));
        if let Ok(f) = F2Map::of(&any) {
            check::f2_map(&any, &f).map_err(TestCaseError::fail)?;
        }
    }
}
