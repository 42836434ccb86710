//! Exact `cosize` and `image_bounds` of plain and swizzled layouts: against enumeration of
//! the image (by the independent references of `common`), over offsets and negative
//! strides, and on domains far too large to enumerate.

mod common;

use common::{
    enumerable_swizzled_layout, lay, ref_offsets, sl, small_layout_any_strides, valid_swizzle,
};
use proptest::prelude::*;
use tessera_swizzle::{AnyLayout, SwizzleError, SwizzledLayout};

/// Post-condition checker of `image_bounds`/`cosize`: both ends are reached, and every
/// offset lies between them.
fn check_cosize(l: &SwizzledLayout) -> Result<(), String> {
    let offs = ref_offsets(l);
    let (lo, hi) = (*offs.iter().min().unwrap(), *offs.iter().max().unwrap());
    let got = l.image_bounds().map_err(|e| e.to_string())?;
    if got != (lo, hi) {
        return Err(format!(
            "{l}: image_bounds {got:?}, enumeration ({lo}, {hi})"
        ));
    }
    let c = l.cosize().map_err(|e| e.to_string())?;
    if c != hi - lo + 1 {
        return Err(format!("{l}: cosize {c}, enumeration {}", hi - lo + 1));
    }
    Ok(())
}

#[test]
fn the_examples_where_cpp_and_pycute_are_wrong() {
    // (layout, exact cosize, image bounds, C++ value = cosize of the inner layout), by hand.
    // Sw<1,0,1> o 3:1 reaches {0, 1, 3}. Sw<2,0,-2> has YYY = bits 0-1, ZZZ = bits 2-3:
    // 1 -> 5, 2 -> 10, 3 -> 15, 4 -> 4, 5 = 0b0101 -> 0b0001 = 1, so the image of 6:1 is
    // {0, 5, 10, 15, 4, 1}, spanning 0..=15. Sw<3,0,3> o 5 o (8,8):(8,1): row 7, column 7
    // is 5 + 63 = 68 = 0b100_0100, whose Y bits (3-5) are 0, so 68 stays; row 0 column 0 is 5.
    let table = [
        ("Sw<1,0,1> o 3:1", 4, (0, 3), 3),
        ("Sw<2,0,-2> o 6:1", 16, (0, 15), 6),
        ("Sw<3,0,3> o 5 o (8,8):(8,1)", 64, (5, 68), 64),
        ("Sw<3,0,3> o 0 o (16,8):(8,1)", 128, (0, 127), 128),
        ("Sw<3,3,3> o 0 o (8,64):(64,1)", 512, (0, 511), 512),
        ("Sw<0,4,3> o -7 o 4:-2", 7, (-13, -7), 7),
    ];
    for (text, cosize, bounds, cpp) in table {
        let l = sl(text);
        assert_eq!(l.cosize().unwrap(), cosize, "{text}");
        assert_eq!(l.image_bounds().unwrap(), bounds, "{text}");
        assert_eq!(l.cosize_inner(), cpp, "{text}");
        check_cosize(&l).unwrap();
    }
}

#[test]
fn plain_layouts_through_any_layout() {
    let l: AnyLayout = "(4,8):(1,-4)".parse().unwrap();
    assert_eq!(l.image_bounds().unwrap(), (-28, 3));
    assert_eq!(l.cosize().unwrap(), 32);
    assert_eq!(l.cosize_inner(), 32);
}

#[test]
fn huge_domains_are_decided_without_enumeration() {
    // A bijection onto [0, 2^40) permuted inside aligned 1024-blocks: image [0, 2^40).
    let l = sl("Sw<3,4,3> o 0 o (1048576,1048576):(1,1048576)");
    assert_eq!(l.image_bounds().unwrap(), (0, (1 << 40) - 1));
    // The period 2^10 divides the big stride, so Sw(x + k * 2^30) = Sw(x) + k * 2^30 and the
    // ends come from the small mode Sw<3,4,3> o 100 o 8:128 (offsets Sw(100 + 128k), k < 8,
    // by the reference), the largest shifted by the last big step.
    let small = sl("Sw<3,4,3> o 100 o 8:128");
    let offs = ref_offsets(&small);
    let (lo, hi) = (*offs.iter().min().unwrap(), *offs.iter().max().unwrap());
    let big = sl("Sw<3,4,3> o 100 o (8,1073741824):(128,1073741824)");
    assert_eq!(
        big.image_bounds().unwrap(),
        (lo, hi + (1073741823i64 << 30))
    );
}

#[test]
fn too_crowded_windows_are_an_error_not_a_guess() {
    // Stride-1 modes of extent 2^20 with a 2^62 swizzle block: the windows are the whole
    // image, 2^40 points.
    let l = sl("Sw<20,22,20> o 0 o (1048576,1048576):(1,1)");
    assert!(matches!(l.cosize(), Err(SwizzleError::TooLarge { .. })));
}

#[test]
fn offsets_that_overflow_are_errors() {
    let l = SwizzledLayout::new("Sw<1,0,1>".parse().unwrap(), i64::MAX, lay("2:1"));
    assert!(matches!(l.cosize(), Err(SwizzleError::Overflow { .. })));
    assert!(l.call(1).is_err());
    assert!(l.offsets().is_err());
}

proptest! {
    #[test]
    fn cosize_is_the_exact_extent(l in enumerable_swizzled_layout()) {
        check_cosize(&l).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn offsets_match_the_reference(l in enumerable_swizzled_layout()) {
        let want = ref_offsets(&l);
        prop_assert_eq!(l.offsets().unwrap(), want.clone());
        for i in 0..l.size() {
            prop_assert_eq!(l.call(i).unwrap(), want[i as usize]);
        }
    }

    #[test]
    fn exact_cosize_of_big_periodic_layouts(
        sw in valid_swizzle(), o in -300i64..300, small in small_layout_any_strides(), k in 1i64..1 << 20
    ) {
        // Append a mode of extent k whose stride is a multiple of the swizzle's period and
        // beyond the small part's span: the ends follow from the small part's.
        let period = sw.period();
        let big_stride = period * (small.cosize() / period + 1) * 4;
        let inner = small.append(&tessera_layout::Layout::new(k, big_stride).unwrap()).unwrap();
        let l = SwizzledLayout::new(sw, o, inner);
        let offs = ref_offsets(&SwizzledLayout::new(sw, o, small));
        let (lo, hi) = (*offs.iter().min().unwrap(), *offs.iter().max().unwrap());
        prop_assert_eq!(l.image_bounds().unwrap(), (lo, hi + (k - 1) * big_stride));
    }

    #[test]
    fn swizzled_layout_text_round_trips(l in enumerable_swizzled_layout()) {
        prop_assert_eq!(l.to_string().parse::<SwizzledLayout>().unwrap(), l.clone());
        let any: AnyLayout = l.to_string().parse().unwrap();
        prop_assert_eq!(any, AnyLayout::Swizzled(l));
    }
}

#[test]
fn crowded_windows_are_sieved_not_enumerated() {
    // 2^60 coordinates over the contiguous range [0, 5 * 4095]: the lowest 128-block holds 0;
    // the highest, [20352, 20475], has Y bits (7-9) = 0b111, so Sw flips bits 4-6 and the
    // largest result is 20352 + (15 ^ 0x70) = 20479.
    let l = sl("Sw<3,4,3> o 0 o (4096,4096,4096,4096,4096):(1,1,1,1,1)");
    assert_eq!(l.image_bounds().unwrap(), (0, 20479));
}

/// Many small-stride modes over a 2^6..2^8 swizzle block: far more coordinates land in each
/// block than the block has offsets, the case the sieve exists for.
fn crowded_swizzled_layout() -> impl Strategy<Value = SwizzledLayout> {
    let leaf = (2i64..=8, prop_oneof![-4i64..=-1, 1i64..=4]);
    (
        prop::collection::vec(leaf, 4..=4),
        1i64..=3,
        3i64..=4,
        -500i64..500,
    )
        .prop_map(|(modes, b, m, o)| {
            let shape = tessera_layout::IntTuple::flat(modes.iter().map(|x| x.0));
            let stride = tessera_layout::IntTuple::flat(modes.iter().map(|x| x.1));
            let sw = tessera_swizzle::Swizzle::new(b, m, 3).unwrap();
            SwizzledLayout::new(sw, o, tessera_layout::Layout::new(shape, stride).unwrap())
        })
}

proptest! {
    #[test]
    fn cosize_of_crowded_layouts_is_exact(l in crowded_swizzled_layout()) {
        check_cosize(&l).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn compact_text_forms_parse() {
    let want = sl("Sw<3,4,3> o 0 o (8,64):(64,1)");
    for text in [
        "Sw<3,4,3>o0o(8,64):(64,1)",
        "Sw<3,4,3>o(8,64):(64,1)",
        " Sw<3,4,3> o  0  o (8,64):(64,1) ",
    ] {
        assert_eq!(text.parse::<SwizzledLayout>().unwrap(), want, "{text}");
    }
    assert_eq!(sl("Sw<1,0,1> o -3 o 3").to_string(), "Sw<1,0,1> o -3 o 3:1");
    for bad in [
        "Sw<3,4,3>",
        "Sw<3,4,3> o",
        "Sw<3,4,3> o 0 o",
        "Sw<3,4,3> x (8,64):(64,1)",
        "Sw<3,4,3> o 0 o (8,64):(64,1) o 2",
    ] {
        assert!(
            bad.parse::<SwizzledLayout>().unwrap_err().is_parse(),
            "{bad}"
        );
    }
}
