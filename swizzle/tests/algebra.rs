//! The algebra on swizzled layouts: forwarded operations act as functions, inverses meet
//! their post-conditions, up/downcast change units, slicing keeps the function and decays
//! exactly when the slice is affine.

mod common;

use common::{enumerable_swizzled_layout, lay, ref_offsets, sl, valid_swizzle};
use proptest::prelude::*;
use tessera_layout::{IntTuple, Layout};
use tessera_swizzle::algebra::{self, slice_and_offset, SliceCoord};
use tessera_swizzle::{AnyLayout, SwizzledLayout};

#[test]
fn forwarded_operations_by_hand() {
    let a = sl("Sw<3,3,3> o 0 o (16,64):(64,1)");
    let t = |s: &str| s.parse().unwrap();
    assert_eq!(
        algebra::zipped_divide(&a, &t("<8,16>"))
            .unwrap()
            .to_string(),
        "Sw<3,3,3> o 0 o ((8,16),(2,4)):((64,1),(512,16))"
    );
    assert_eq!(
        algebra::composition_tiler(&a, &t("<8,_>"))
            .unwrap()
            .to_string(),
        "Sw<3,3,3> o 0 o (8,64):(64,1)"
    );
    assert_eq!(
        algebra::coalesce(&sl("Sw<1,2,3> o 5 o (2,4):(1,2)")).to_string(),
        "Sw<1,2,3> o 5 o 8:1"
    );
    assert_eq!(
        algebra::logical_product(&sl("Sw<1,0,1> o 4:1"), &t("2:1"))
            .unwrap()
            .to_string(),
        "Sw<1,0,1> o 0 o (4,2):(1,4)"
    );
    // errors of the plain algebra come through
    assert!(algebra::composition(&a, &lay("(3,7):(5,11)")).is_err());
}

#[test]
fn up_and_downcast_by_hand() {
    let halves = sl("Sw<3,3,3> o 64 o (8,64):(64,1)");
    let bytes = algebra::downcast(&halves, 2).unwrap();
    assert_eq!(bytes.to_string(), "Sw<3,4,3> o 128 o (8,128):(128,1)");
    assert_eq!(algebra::upcast(&bytes, 2).unwrap(), halves);
    // M = 3 cannot express a unit of 16 elements; an odd offset is not a whole unit
    assert!(algebra::upcast(&halves, 16).is_err());
    assert!(algebra::upcast(&sl("Sw<3,3,3> o 3 o (8,64):(64,1)"), 2).is_err());
}

#[test]
fn inverses_need_offset_zero() {
    assert!(algebra::right_inverse(&sl("Sw<3,3,3> o 8 o (8,64):(64,1)")).is_err());
}

#[test]
fn slices_by_hand() {
    let a = sl("Sw<3,3,3> o (8,64):(64,1)");
    let c = |s: &str| s.parse::<SliceCoord>().unwrap();
    // row 2: chunk q of row 2 goes to chunk q ^ 2: not affine
    let (r, off) = slice_and_offset(&a, &c("(2,_)")).unwrap();
    assert_eq!(
        (r.to_string(), off),
        ("Sw<3,3,3> o 128 o (64):(1)".to_string(), 0)
    );
    // column 8 (chunk 1, element 0): row r -> 64r + 8 * (1 ^ r): 8, 64, 152, 208, ...
    // not affine either (the XOR with 1 alternates)
    let (r, _) = slice_and_offset(&a, &c("(_,8)")).unwrap();
    assert!(matches!(r, AnyLayout::Swizzled(_)), "{r}");
    // column 0: row r -> 64r + 8r = 72r: decays
    let (r, off) = slice_and_offset(&a, &c("(_,0)")).unwrap();
    assert_eq!((r.to_string(), off), ("(8):(72)".to_string(), 0));
    // element 3 of column 0..8 in row 0: the swizzle is the identity on row 0
    let (r, off) = slice_and_offset(&a, &c("(0,_)")).unwrap();
    assert!(matches!(r, AnyLayout::Plain(_)), "{r}");
    assert_eq!(off, 0);
    // a plain layout slices as CuTe: nested coordinates flatten one level
    let (r, off) = slice_and_offset(&lay("((2,3),4):((1,2),6)"), &c("((1,_),_)")).unwrap();
    assert_eq!((r.to_string(), off), ("(3,4):(2,6)".to_string(), 1));
    assert!(slice_and_offset(&a, &c("(8,_)")).is_err()); // out of range
    assert!(slice_and_offset(&a, &c("(_,_,_)")).is_err()); // wrong rank
}

/// An admissible right operand for composition with a layout of size `n`: an injective
/// layout into `[0, n)`.
fn injective_layout_below(n: i64) -> impl Strategy<Value = Layout> {
    (1i64..=n, 1i64..=4).prop_filter_map("fits", move |(a, b)| {
        let l = Layout::new(IntTuple::flat([a, b]), IntTuple::flat([1, a])).ok()?;
        (l.cosize() <= n).then_some(l)
    })
}

proptest! {
    #[test]
    fn composition_is_function_composition(
        sw in valid_swizzle(), o in 0i64..200, b in injective_layout_below(32)
    ) {
        let a = SwizzledLayout::new(sw, o, lay("(4,8):(8,1)"));
        if let Ok(r) = algebra::composition(&a, &b) {
            for i in 0..r.size() {
                prop_assert_eq!(r.call(i).unwrap(), a.call(b.call(i).unwrap()).unwrap());
            }
        }
    }

    #[test]
    fn right_inverse_meets_its_post_condition(sw in valid_swizzle(), rows in 0u32..=3, cols in 0u32..=3, rm in any::<bool>()) {
        let shape = IntTuple::flat([1i64 << rows, 1i64 << cols]);
        let inner = if rm { Layout::row_major(shape) } else { Layout::col_major(shape) }.unwrap();
        let a = SwizzledLayout::new(sw, 0, inner);
        if let Ok(r) = algebra::right_inverse(&a) {
            for i in 0..r.size() {
                prop_assert_eq!(a.call(r.call(i).unwrap()).unwrap(), i, "{} / {}", a, r);
            }
        }
        if let Ok(l) = algebra::left_inverse(&a) {
            for i in 0..a.size() {
                prop_assert_eq!(l.call(a.call(i).unwrap()).unwrap(), i, "{} / {}", a, l);
            }
        }
    }

    #[test]
    fn downcast_spreads_each_element_over_n_units(l in enumerable_swizzled_layout(), k in 0u32..=2) {
        let n = 1i64 << k;
        // downcast needs a stride-1 leaf; only check when it applies
        if let Ok(r) = algebra::downcast(&l, n) {
            let mut want: Vec<i64> = ref_offsets(&l).iter().flat_map(|&x| (0..n).map(move |j| n * x + j)).collect();
            let mut got = ref_offsets(&r);
            want.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!(got, want, "{} -> {}", l, r);
        }
    }

    #[test]
    fn slicing_keeps_the_function(l in enumerable_swizzled_layout(), pick in any::<prop::sample::Index>(), first in any::<bool>()) {
        prop_assume!(l.rank() >= 2);
        let (m0, m1) = (l.inner.mode(0).unwrap(), l.inner.mode(1).unwrap());
        let rank = l.rank();
        // fix one index in mode 0 or 1, keep every other mode
        let (fixed_mode, ext) = if first { (0, m0.size()) } else { (1, m1.size()) };
        let fixed = pick.index(ext as usize) as i64;
        let items: Vec<SliceCoord> = (0..rank)
            .map(|k| if k == fixed_mode { SliceCoord::Index(fixed) } else { SliceCoord::All })
            .collect();
        let (r, off) = slice_and_offset(&l, &SliceCoord::Tuple(items)).unwrap();
        let want = ref_offsets(&l);
        // every full coordinate with that index fixed: A(c) == R(kept part) + off
        let kept_size = r.size();
        prop_assert_eq!(kept_size * ext, l.size());
        let mut k = 0i64;
        for i in 0..l.size() {
            let c0 = i % m0.size();
            let c1 = (i / m0.size()) % m1.size();
            let here = if first { c0 } else { c1 };
            if here != fixed {
                continue;
            }
            prop_assert_eq!(r.call(k).unwrap() + off, want[i as usize], "{} at {}: {}", l, i, r);
            k += 1;
        }
    }
}

proptest! {
    #[test]
    fn max_common_vector_runs_are_consecutive_and_maximal(l in enumerable_swizzled_layout()) {
        let a = AnyLayout::Swizzled(l.clone());
        let b = AnyLayout::Plain(l.inner.clone());
        let Ok(n) = algebra::max_common_vector(&a, &b) else { return Ok(()); };
        let r = tessera_layout::max_common_layout(&l.inner, &l.inner).unwrap();
        let size = r.size();
        prop_assert!(n >= 1 && size % n == 0 || n == 1);
        let want = ref_offsets(&l);
        let runs = |w: i64| (0..size).all(|i| {
            let (s, j) = (i - i % w, i % w);
            let (x, x0) = (r.call(i).unwrap(), r.call(s).unwrap());
            want[x as usize] - want[x0 as usize] == j && l.inner.call(x).unwrap() - l.inner.call(x0).unwrap() == j
        });
        prop_assert!(runs(n), "{} runs of {}", l, n);
        for w in (n + 1)..=size {
            if size % w == 0 {
                prop_assert!(!runs(w), "{}: {} is not maximal ({} works)", l, n, w);
            }
        }
    }
}

proptest! {
    #[test]
    fn layout_after_swizzled_layout_is_function_composition(
        sw in valid_swizzle(), k in 0u32..=3, extra in 0i64..3, l in common::small_layout_any_strides()
    ) {
        let b = SwizzledLayout::new(sw, 0, l);
        // A: a scaled identity long enough for every offset of b (which may be negative:
        // then A's extended domain is used, as in CuTe)
        let a = Layout::new(4096 + extra, 1i64 << k).unwrap();
        let want: Vec<i64> = ref_offsets(&b).iter().map(|&x| a.call(x).unwrap()).collect();
        if let Ok(r) = algebra::composition_layout_swizzled(&a, &b) {
            for (i, &w) in want.iter().enumerate() {
                prop_assert_eq!(r.call(i as i64).unwrap(), w, "{} o {} = {}", a, b, r);
            }
        }
    }
}

#[test]
fn layout_after_swizzled_layout_by_hand() {
    // scaling by 2 shifts the swizzle up one bit; an offset is refused as in CuTe
    let r = algebra::composition_layout_swizzled(&lay("512:2"), &sl("Sw<3,3,3> o (8,64):(64,1)"))
        .unwrap();
    assert_eq!(r.to_string(), "Sw<3,4,3> o 0 o (8,64):(128,2)");
    assert!(algebra::composition_layout_swizzled(
        &lay("512:2"),
        &sl("Sw<3,3,3> o 8 o (8,64):(64,1)")
    )
    .is_err());
}

proptest! {
    #[test]
    fn mode_operations_keep_the_function(l in enumerable_swizzled_layout()) {
        let want = ref_offsets(&l);
        prop_assert_eq!(ref_offsets(&l.flatten()), want.clone());
        if l.rank() >= 2 {
            prop_assert_eq!(ref_offsets(&l.group(0, 2).unwrap()), want.clone());
            // mode 0 is the first size(mode 0) indices
            let m0 = l.get(&[0]).unwrap();
            prop_assert_eq!(&ref_offsets(&m0)[..], &want[..m0.size() as usize]);
            prop_assert_eq!(l.take(0, 1).unwrap().size(), m0.size());
            let m1 = l.inner.mode(1).unwrap().size();
            prop_assert_eq!(l.select(&[1, 0]).unwrap().size(), m0.size() * m1);
        }
    }
}
