//! Public functions never panic: any text that parses goes through every analysis, which
//! answers or returns an error.

use proptest::prelude::*;
use tessera_swizzle::{
    algebra, bank_conflicts, is_bijective, picture, vectorization, AnyLayout, F2Map,
};

/// Text over the alphabet of swizzled-layout literals, mostly near-valid.
fn layout_like_text() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "Sw<",
        ">",
        " o ",
        ",",
        "(",
        ")",
        ":",
        "-",
        "0",
        "1",
        "2",
        "3",
        "7",
        "8",
        "16",
        "64",
        "4611686018427387904",
        "-9223372036854775808",
        "_",
    ]);
    prop_oneof![
        prop::collection::vec(token, 0..24).prop_map(|v| v.concat()),
        (
            0i64..6,
            0i64..8,
            -8i64..8,
            -1000i64..1000,
            -300i64..300,
            1i64..40,
            1i64..40,
            -99i64..99
        )
            .prop_map(|(b, m, s, o, d0, n0, n1, d1)| {
                format!("Sw<{b},{m},{s}> o {o} o ({n0},{n1}):({d0},{d1})")
            }),
    ]
}

proptest! {
    #[test]
    fn nothing_panics(text in layout_like_text(), eb in -2i64..20, n in -2i64..20) {
        if let Ok(l) = text.parse::<AnyLayout>() {
            let _ = l.to_string();
            let _ = l.cosize();
            let _ = l.image_bounds();
            let _ = l.offsets();
            let _ = is_bijective(&l);
            let _ = bank_conflicts(&l, eb);
            let _ = vectorization(&l, eb);
            let _ = F2Map::of(&l).map(|f| (f.rank(), f.inverse().is_ok(), f.to_string()));
            let _ = picture::print_layout(&l);
            let _ = picture::svg_layout(&l);
            let _ = picture::print_tv_layout(&l, &"(8,8)".parse().unwrap());
            let _ = algebra::slice_and_offset(&l, &"(1,_)".parse().unwrap());
            if let AnyLayout::Swizzled(s) = &l {
                let _ = algebra::right_inverse(s);
                let _ = algebra::left_inverse(s);
                let _ = algebra::upcast(s, n);
                let _ = algebra::downcast(s, n);
                let _ = algebra::coalesce(s);
                let _ = s.swizzle.upcast(n);
                let _ = s.swizzle.downcast(n);
                let _ = s.swizzle.compose(&s.swizzle);
            }
        }
    }
}
