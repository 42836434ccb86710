//! Documented CuTe examples, one table per operation.
//!
//! Every expected layout here was derived by hand from CuTe's algorithms (CUTLASS 3.9+, all
//! integers static) or taken from the CUTLASS documentation and unit tests, never from
//! running this crate. Each row checks the result against the expected layout (as a function
//! and as text) and runs the operation's post-condition checker.

use tessera_layout::algebra::check;
use tessera_layout::*;

fn l(s: &str) -> Layout {
    s.parse().unwrap_or_else(|e| panic!("bad layout {s}: {e}"))
}
fn t(s: &str) -> IntTuple {
    s.parse().unwrap_or_else(|e| panic!("bad tuple {s}: {e}"))
}
fn tl(s: &str) -> Tiler {
    s.parse().unwrap_or_else(|e| panic!("bad tiler {s}: {e}"))
}

/// The result equals the expected layout, as a function and as text.
fn expect_layout(what: &str, got: Result<Layout>, want: &str) -> Layout {
    let got = got.unwrap_or_else(|e| panic!("{what}: unexpected error {e}"));
    let want = l(want);
    check::same_function(&want, &got).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.to_string(), want.to_string(), "{what}");
    got
}

fn expect_inadmissible(what: &str, got: Result<Layout>) {
    match got {
        Err(LayoutError::Inadmissible { .. }) => {}
        other => panic!("{what}: expected Inadmissible, got {other:?}"),
    }
}

fn ok(what: &str, v: check::Verdict) {
    v.unwrap_or_else(|e| panic!("{what}: post-condition fails: {e}"));
}

#[test]
fn coalesce_examples() {
    for (a, want) in [
        ("(2,(1,6)):(1,(6,2))", "12:1"),
        ("(2,4):(1,3)", "(2,4):(1,3)"),
        ("(1,1):(5,7)", "1:0"),
        ("(4,1):(1,0)", "4:1"),
        ("(2,2,2):(1,2,4)", "8:1"),
        ("(2,2):(0,0)", "4:0"),
        ("(4,(3,5)):(-1,(0,0))", "(4,15):(-1,0)"),
        ("((2,4),3):((1,8),2)", "(2,4,3):(1,8,2)"),
    ] {
        let what = format!("coalesce({a})");
        let a = l(a);
        let r = expect_layout(&what, Ok(coalesce(&a)), want);
        ok(&what, check::coalesce(&a, &r));
    }
}

#[test]
fn coalesce_profile_examples() {
    for (a, p, want) in [
        ("((2,4),(3,1)):((1,2),(8,5))", "(1,1)", "(8,3):(1,8)"),
        ("((2,4),(3,1)):((1,2),(8,5))", "(1)", "(8,(3,1)):(1,(8,5))"),
        ("((2,4),(3,1)):((1,2),(8,5))", "7", "24:1"),
        ("(2,(2,2)):(1,(2,4))", "(1,1)", "(2,4):(1,2)"),
    ] {
        let what = format!("coalesce({a}, {p})");
        let (a, p) = (l(a), t(p));
        let r = expect_layout(&what, coalesce_profile(&a, &p), want);
        ok(&what, check::coalesce_profile(&a, &p, &r));
    }
    assert!(coalesce_profile(&l("(2,2):(1,2)"), &t("(1,1,1)")).is_err());
}

#[test]
fn filter_examples() {
    for (a, fz, f) in [
        ("(4,(2,3)):(0,(1,2))", "(1,(2,3)):(0,(1,2))", "6:1"),
        ("(2,4):(0,0)", "(1,1):(0,0)", "1:0"),
        ("(2,1,3):(2,0,4)", "(2,1,3):(2,0,4)", "6:2"),
        ("(2,3):(1,3)", "(2,3):(1,3)", "(2,3):(1,3)"),
    ] {
        let a = l(a);
        let r = expect_layout("filter_zeros", Ok(filter_zeros(&a)), fz);
        ok("filter_zeros", check::filter_zeros(&a, &r));
        let r = expect_layout("filter", Ok(filter(&a)), f);
        ok("filter", check::filter(&a, &r));
    }
}

#[test]
fn composition_examples() {
    for (a, b, want) in [
        // Extension of A's last mode (CUTLASS composition tests).
        ("1:1", "4:1", "4:1"),
        ("1:0", "4:1", "4:0"),
        ("3:1", "4:1", "4:1"),
        ("(4,3,1):(3,1,0)", "24:1", "(4,3,2):(3,1,0)"),
        ("(4,3):(3,1)", "24:1", "(4,6):(3,1)"),
        ("(4,3):(3,1)", "8:1", "(4,2):(3,1)"),
        ("(8,8):(8,1)", "2:3", "2:24"),
        ("(23,5):(2,120)", "7:3", "7:6"),
        // CUTLASS 02_layout_algebra.md examples.
        ("(6,2):(8,2)", "(4,3):(3,1)", "((2,2),3):((24,2),8)"),
        ("(10,2):(16,4)", "(5,4):(1,5)", "(5,(2,2)):(16,(80,4))"),
        ("(6,4):(4,1)", "(4,6):(6,1)", "(4,6):(1,4)"),
        ("(48,24,5):(1,128,3072)", "32:1", "32:1"),
        ("(128,24,5):(1,128,3072)", "480:32", "480:32"),
        // Stride-0 B and stride-0 A.
        ("4:1", "4:0", "4:0"),
        ("4:0", "4:1", "4:0"),
        // Negative strides (CUTLASS "BETA" tests), C++ truncating division.
        ("4:-1", "4:1", "4:-1"),
        ("4:1", "4:-2", "4:-2"),
        ("(1,(2,4)):(0,(-1,512))", "2:-1", "2:1"),
        ("(1,(2,4)):(0,(-1,512))", "4:-1", "(2,2):(1,-512)"),
        (
            "(4,4):(-1,1)",
            "(2,4,2):(1,2,8)",
            "(2,(2,2),2):(-1,(-2,1),2)",
        ),
        // Steps of both signs through a 1-D A: exact at any size, no point-by-point check.
        (
            "1000000:1",
            "(1000,1000):(1,-1000)",
            "(1000,1000):(1,-1000)",
        ),
        // Both signs only in A's last mode: exact too.
        ("(4,1000):(1,7)", "(3,2):(4,-4)", "(3,2):(7,-7)"),
    ] {
        let what = format!("{a} o {b}");
        let (a, b) = (l(a), l(b));
        let r = expect_layout(&what, composition(&a, &b), want);
        ok(&what, check::composition(&a, &b, &r));
    }
}

/// Pairs from CUTLASS's composition unit test, which checks only the post-condition: each
/// must compose and meet it here too.
#[test]
fn composition_cutlass_unit_pairs() {
    for (a, b) in [
        ("1:0", "1:0"),
        ("1:0", "1:1"),
        ("1:1", "1:0"),
        ("4:1", "4:1"),
        ("4:2", "4:1"),
        ("4:0", "4:1"),
        ("4:1", "1:0"),
        ("4:1", "2:1"),
        ("4:2", "2:1"),
        ("4:1", "2:2"),
        ("4:2", "2:2"),
        ("(4,3):(1,4)", "12:1"),
        ("12:1", "(4,3):(1,4)"),
        ("12:2", "(4,3):(1,4)"),
        ("12:1", "(4,3):(3,1)"),
        ("12:2", "(4,3):(3,1)"),
        ("12:1", "(2,3):(2,4)"),
        ("(4,3):(1,4)", "(4,3):(1,4)"),
        ("(4,3):(1,4)", "6:1"),
        ("(4,3):(1,4)", "6:2"),
        ("(4,3):(1,4)", "(6,2):(2,1)"),
        ("(4,3):(1,4)", "(4,3):(3,1)"),
        ("(4,3):(3,1)", "(4,3):(1,4)"),
        ("(4,3):(3,1)", "12:1"),
        ("(4,3):(3,1)", "6:2"),
        ("(4,3):(3,1)", "(6,2):(2,1)"),
        ("(8,8):(1,8)", "((2,2,2),(2,2,2)):((1,16,4),(8,2,32))"),
        ("(8,8):(8,1)", "((2,2,2),(2,2,2)):((1,16,4),(8,2,32))"),
        ("((4,2)):((1,16))", "(4,2):(2,1)"),
        ("(2,2):(2,1)", "(2,2):(2,1)"),
        ("(4,8,2):(1,4,32)", "(2,2,2):(2,8,1)"),
        ("(4,8,2):(2,8,1)", "(2,2,2):(1,8,2)"),
        ("(4,8,2):(2,8,1)", "(4,2,2):(2,8,1)"),
        ("12:1", "4:1"),
        ("(12,3):(1,24)", "4:1"),
        ("16:2", "4:2"),
        ("(128,24,5):(1,128,3072)", "64:2"),
        ("4:1", "4:2"),
        ("4:-1", "4:-1"),
        ("(4,4):(-1,1)", "(2,4,2):(1,4,2)"),
    ] {
        let what = format!("{a} o {b}");
        let (a, b) = (l(a), l(b));
        let r = composition(&a, &b).unwrap_or_else(|e| panic!("{what}: {e}"));
        ok(&what, check::composition(&a, &b, &r));
    }
}

#[test]
fn composition_rejects_inadmissible_pairs() {
    for (a, b) in [
        // CUTLASS #3177: CuTe gives (2,3):(6,3), wrong at i = 2.
        ("(4,6,8):(2,3,5)", "6:3"),
        // CUTLASS #2955: CuTe gives (3,2):(2,3), wrong at (2,1).
        ("(6,2):(1,7)", "(3,2):(2,3)"),
        // pycute returns 5:7 (size 5, not 7).
        ("(5,3):(7,1)", "7:1"),
        // pycute returns 4:2.
        ("(4,6,8):(2,3,5)", "6:1"),
        // Steps of both signs with digits below A's last mode: C++ division truncates, so
        // A(1 - 4) = A(-3) = -3, not A(1) + A(-4) = 1 - 7.
        ("(4,1000000):(1,7)", "(2,1000):(1,-4)"),
    ] {
        let what = format!("{a} o {b}");
        expect_inadmissible(&what, composition(&l(a), &l(b)));
    }
}

/// Pairs CuTe's divisibility rule refuses (or accepts only by luck), for which a layout with
/// B's shape exists: worked out from `R(k) = A(B(k))`.
#[test]
fn compositions_beyond_cutes_rule() {
    for (a, b, want) in [
        // A(0) = 0, A(6) = A(2,1) = 2 + 5 = 7: CuTe static_asserts (6 vs extent 4).
        ("(4,3):(1,5)", "2:6", "2:7"),
        // A(5) = A(1,1) = 1 + 5 = 6.
        ("(4,8):(1,5)", "2:5", "2:6"),
        // A(0, 6, 12, 18) = 0, 0, 1, 1 (mode 0 has stride 0; 12 and 18 are in the last mode).
        ("(10,1):(0,1)", "4:6", "(2,2):(0,1)"),
        // A(0, 3, 6, 9) = 0, 0, 1, 1.
        ("(5,2):(0,1)", "4:3", "(2,2):(0,1)"),
    ] {
        let what = format!("{a} o {b}");
        let (a, b) = (l(a), l(b));
        let r = expect_layout(&what, composition(&a, &b), want);
        ok(&what, check::composition(&a, &b, &r));
    }
}

#[test]
fn composition_tiler_examples() {
    for (a, tiler, want) in [
        (
            "(12,(4,8)):(59,(13,1))",
            "<3:4, 8:2>",
            "(3,(2,4)):(236,(26,1))",
        ),
        ("(12,(4,8)):(59,(13,1))", "<_, 4>", "(12,4):(59,13)"),
        ("(12,(4,8)):(59,(13,1))", "<3:4>", "(3):(236)"),
        ("(12,(4,8)):(59,(13,1))", "_", "(12,(4,8)):(59,(13,1))"),
        (
            "(12,(4,8)):(59,(13,1))",
            "<_, <2,4>>",
            "(12,(2,4)):(59,(13,1))",
        ),
        ("(8,8):(1,8)", "(4,2)", "(4,2):(1,8)"),
    ] {
        let what = format!("{a} o {tiler}");
        let (a, tiler) = (l(a), tl(tiler));
        let r = expect_layout(&what, composition_tiler(&a, &tiler), want);
        ok(&what, check::composition_tiler(&a, &tiler, &r));
    }
    assert!(composition_tiler(&l("4:1"), &tl("<2,2>")).is_err());
}

#[test]
fn complement_examples() {
    for (a, cot, want) in [
        ("4:2", "24", "(2,3):(1,8)"),
        ("(2,2):(1,6)", "24", "(3,2):(2,12)"),
        ("(4,2):(1,6)", "14", "2:12"),
        ("1:0", "8", "8:1"),
        ("4:0", "8", "8:1"),
        ("4:1", "4", "1:0"),
        ("4:1", "16", "4:4"),
        ("2:1", "15", "8:2"),
        // A shape cotarget rounds mode by mode: ceil_div((3,5), 2) = (2,5).
        ("2:1", "(3,5)", "10:2"),
        ("4:1", "(2,8)", "4:4"),
        ("(2,4):(1,6)", "48", "(3,2):(2,24)"),
        // Negative strides count by their absolute value.
        ("2:-1", "4", "2:2"),
        // (2,2):(1,2) leaves no holes.
        ("(2,2):(1,2)", "4", "1:0"),
    ] {
        let what = format!("complement({a}, {cot})");
        let (a, cot) = (l(a), t(cot));
        let r = expect_layout(&what, complement(&a, &cot), want);
        ok(&what, check::complement(&a, &cot, &r));
    }
    for a in ["(2,2):(2,3)", "(4,2):(1,1)", "(3,2):(2,3)", "(2,2):(1,1)"] {
        expect_inadmissible(a, complement(&l(a), &t("24")));
    }
    let r = expect_layout(
        "complement((2,2):(1,6))",
        complement_default(&l("(2,2):(1,6)")),
        "3:2",
    );
    ok(
        "complement_default",
        check::complement(&l("(2,2):(1,6)"), &t("8"), &r),
    );
}

#[test]
fn inverse_examples() {
    for (a, want) in [
        ("(2,4,6):(4,1,8)", "(4,2,6):(2,1,8)"),
        ("(4,8):(8,1)", "(8,4):(4,1)"),
        ("(2,2,2):(4,0,1)", "2:4"),
        ("4:-1", "1:0"),
        ("8:2", "1:0"),
        ("(4,2):(1,5)", "4:1"),
        ("((2,2),3):((3,6),1)", "(3,4):(4,1)"),
    ] {
        let what = format!("right_inverse({a})");
        let a = l(a);
        let r = expect_layout(&what, right_inverse(&a), want);
        ok(&what, check::right_inverse(&a, &r));
    }
    for (a, want) in [
        ("(4,8):(8,1)", "(8,4):(4,1)"),
        ("3:2", "(2,3):(0,1)"),
        ("(4,8):(1,5)", "(5,8):(1,4)"),
        ("(2,3):(3,1)", "(3,2):(2,1)"),
        ("8:1", "8:1"),
    ] {
        let what = format!("left_inverse({a})");
        let a = l(a);
        let r = expect_layout(&what, left_inverse(&a), want);
        ok(&what, check::left_inverse(&a, &r));
    }
    // Injective, but 3 is not a multiple of 2 (CuTe's divisibility condition).
    expect_inadmissible("left_inverse((3,2):(2,3))", left_inverse(&l("(3,2):(2,3)")));
    // Not injective: no left inverse exists.
    for a in ["4:0", "(2,2):(1,1)", "(3,21846):(1,2)", "(2,3):(2,1)"] {
        expect_inadmissible(a, left_inverse(&l(a)));
    }
    for (a, want) in [
        ("4:0", "4:0"),
        ("(4,3):(1,0)", "4:1"),
        // Sorted strides 1, 2: R(x) = x % 2 + 3 (x / 2), and L(R(x)) = x for every even
        // and odd x: the overlap of (3:1) and (21846:2) is below a gap-free chain.
        ("(3,21846):(1,2)", "(2,21846):(1,3)"),
        ("(4,8):(8,1)", "(8,4):(4,1)"),
    ] {
        let what = format!("generalized_left_inverse({a})");
        let a = l(a);
        let r = expect_layout(&what, generalized_left_inverse(&a), want);
        ok(&what, check::generalized_left_inverse(&a, &r));
    }
}

#[test]
fn divide_examples() {
    for (a, tiler, want) in [
        ("(4,2,3):(2,1,8)", "4:2", "((2,2),(2,3)):((4,1),(2,8))"),
        (
            "(9,(4,8)):(59,(13,1))",
            "<3:3, (2,4):(1,8)>",
            "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))",
        ),
        // Tiles that round up overhang: 48 / 32 gives two tiles, the second half empty.
        ("48:1", "32:1", "(32,2):(1,32)"),
        ("2:1", "32:1", "(32,1):(1,0)"),
        ("32:1", "48:1", "(48,1):(1,0)"),
        // All static: CuTe's coalesce merges everything (the C++ unit test with a dynamic
        // extent keeps (64,(2,4)) instead).
        ("(32,4,4):(1,32,128)", "64", "(64,8):(1,64)"),
        ("(8,6):(1,8)", "<4,3>", "((4,2),(3,2)):((1,4),(8,24))"),
        ("(8,6):(1,8)", "<_,3>", "(8,(3,2)):(1,(8,24))"),
        ("6:2", "(2,3):(3,1)", "((2,3),1):((6,2),0)"),
    ] {
        let what = format!("logical_divide({a}, {tiler})");
        let (a, tiler) = (l(a), tl(tiler));
        let r = expect_layout(&what, logical_divide(&a, &tiler), want);
        ok(&what, check::logical_divide(&a, &tiler, &r));
    }
    let (a, tiler) = (l("(8,6):(1,8)"), tl("<4,3>"));
    let r = expect_layout(
        "zipped",
        zipped_divide(&a, &tiler),
        "((4,3),(2,2)):((1,8),(4,24))",
    );
    ok("zipped", check::zipped_divide(&a, &tiler, &r));
    let r = expect_layout(
        "tiled",
        tiled_divide(&a, &tiler),
        "((4,3),2,2):((1,8),4,24)",
    );
    ok("tiled", check::tiled_divide(&a, &tiler, &r));
    let r = expect_layout("flat", flat_divide(&a, &tiler), "(4,3,2,2):(1,8,4,24)");
    ok("flat", check::flat_divide(&a, &tiler, &r));
    // Extra modes go to the rest: a 3-mode layout divided along its first two modes.
    let (a, tiler) = (l("(8,6,2):(1,8,48)"), tl("<4,3>"));
    let r = expect_layout(
        "zipped with an extra mode",
        zipped_divide(&a, &tiler),
        "((4,3),(2,2,2)):((1,8),(4,24,48))",
    );
    ok(
        "zipped with an extra mode",
        check::zipped_divide(&a, &tiler, &r),
    );
    // A layout tiler: zipped is logical.
    let (a, tiler) = (l("48:1"), tl("32:1"));
    let r = expect_layout("zipped 1-D", zipped_divide(&a, &tiler), "(32,2):(1,32)");
    ok("zipped 1-D", check::zipped_divide(&a, &tiler, &r));
}

#[test]
fn product_examples() {
    for (a, tiler, want) in [
        ("(2,2):(4,1)", "6:1", "((2,2),(2,3)):((4,1),(2,8))"),
        ("3:1", "4", "(3,4):(1,3)"),
        ("(2,2):(1,2)", "<3,2>", "((2,3),(2,2)):((1,2),(2,1))"),
        ("(2,2):(1,2)", "<3,_>", "((2,3),2):((1,2),2)"),
    ] {
        let what = format!("logical_product({a}, {tiler})");
        let (a, tiler) = (l(a), tl(tiler));
        let r = expect_layout(&what, logical_product(&a, &tiler), want);
        ok(&what, check::logical_product(&a, &tiler, &r));
    }
    let (a, tiler) = (l("(2,2):(1,2)"), tl("<3,2>"));
    let r = expect_layout(
        "zipped_product",
        zipped_product(&a, &tiler),
        "((2,2),(3,2)):((1,2),(2,1))",
    );
    ok("zipped_product", check::zipped_product(&a, &tiler, &r));
    let r = expect_layout(
        "tiled_product",
        tiled_product(&a, &tiler),
        "((2,2),3,2):((1,2),2,1)",
    );
    ok("tiled_product", check::tiled_product(&a, &tiler, &r));
    let r = expect_layout(
        "flat_product",
        flat_product(&a, &tiler),
        "(2,2,3,2):(1,2,2,1)",
    );
    ok("flat_product", check::flat_product(&a, &tiler, &r));

    for (a, b, blocked, raked) in [
        (
            "(2,5):(5,1)",
            "(3,4):(1,3)",
            "((2,3),(5,4)):((5,10),(1,30))",
            "((3,2),(4,5)):((10,5),(30,1))",
        ),
        ("2:1", "3:1", "((2,3)):((1,2))", "((3,2)):((2,1))"),
        // Rank padding with 1:0: the block is rank 2, the arrangement rank 1.
        (
            "(2,2):(1,2)",
            "3:1",
            "((2,3),(2,1)):((1,4),(2,0))",
            "((3,2),(1,2)):((4,1),(0,2))",
        ),
    ] {
        let (a, b) = (l(a), l(b));
        let r = expect_layout("blocked_product", blocked_product(&a, &b), blocked);
        ok("blocked_product", check::blocked_product(&a, &b, &r));
        let r = expect_layout("raked_product", raked_product(&a, &b), raked);
        ok("raked_product", check::raked_product(&a, &b, &r));
    }
}

#[test]
fn tile_to_shape_examples() {
    let block = l("(2,2):(1,2)");
    let target = t("(4,6)");
    let r = expect_layout(
        "tile_to_shape",
        tile_to_shape(&block, &target, None),
        "((2,2),(2,3)):((1,4),(2,8))",
    );
    ok("tile_to_shape", check::tile_to_shape(&block, &target, &r));
    let order = t("(1,0)");
    let r = expect_layout(
        "tile_to_shape ordered",
        tile_to_shape(&block, &target, Some(&order)),
        "((2,2),(2,3)):((1,12),(2,4))",
    );
    ok(
        "tile_to_shape ordered",
        check::tile_to_shape(&block, &target, &r),
    );
    // A row-major 8x8 atom tiled to 16x64 (a shared-memory tile).
    let block = l("(8,8):(8,1)");
    let target = t("(16,64)");
    let r = expect_layout(
        "tile_to_shape smem",
        tile_to_shape(&block, &target, None),
        "((8,2),(8,8)):((8,64),(1,128))",
    );
    ok(
        "tile_to_shape smem",
        check::tile_to_shape(&block, &target, &r),
    );
    expect_inadmissible(
        "3 does not divide 4",
        tile_to_shape(&l("3:1"), &t("4"), None),
    );
}

#[test]
fn common_examples() {
    let cases = [
        ("(4,8):(1,4)", "(4,8):(1,8)", "4:1"),
        ("(4,8):(8,1)", "(4,8):(1,4)", "1:0"),
        ("(8,8):(1,8)", "(8,8):(1,8)", "64:1"),
        ("(8,8):(8,1)", "(8,8):(8,1)", "(8,8):(8,1)"),
    ];
    for (a, b, want) in cases {
        let what = format!("max_common_layout({a}, {b})");
        let (a, b) = (l(a), l(b));
        let r = expect_layout(&what, max_common_layout(&a, &b), want);
        ok(&what, check::max_common_layout(&a, &b, &r));
        let n = max_common_vector(&a, &b).unwrap();
        ok(&what, check::max_common_vector(&a, &b, n));
    }
    assert_eq!(
        max_common_vector(&l("(8,8):(8,1)"), &l("(8,8):(8,1)")).unwrap(),
        64
    );
}

#[test]
fn recast_and_nullspace_examples() {
    for (a, n, up) in [
        ("(8,(4,2)):(1,(16,8))", 2, "(4,(4,2)):(1,(8,4))"),
        ("(3,4):(2,8)", 4, "(2,4):(1,2)"),
        ("(4,4):(0,1)", 4, "(4,1):(0,1)"),
        ("8:-1", 2, "4:-1"),
    ] {
        let a = l(a);
        let r = expect_layout("upcast", upcast(&a, n), up);
        ok("upcast", check::upcast(&a, n, &r));
    }
    expect_inadmissible("upcast 3", upcast(&l("8:2"), 3));
    // Found by fuzzing: i64::MIN has no i64 absolute value, but 2 divides it; the stride
    // becomes i64::MIN / 2 (an extent-1 leaf may carry any stride).
    let a = l("(1):(-9223372036854775808)");
    let r = expect_layout("upcast", upcast(&a, 2), "(1):(-4611686018427387904)");
    ok("upcast", check::upcast(&a, 2, &r));
    expect_inadmissible("upcast 7", upcast(&a, 7));
    for (a, n, down) in [
        ("(4,(4,2)):(1,(8,4))", 2, "(8,(4,2)):(1,(16,8))"),
        ("(2,3):(3,1)", 4, "(2,12):(12,1)"),
    ] {
        let a = l(a);
        let r = expect_layout("downcast", downcast(&a, n), down);
        ok("downcast", check::downcast(&a, n, &r));
    }
    expect_inadmissible("downcast without a stride-1 mode", downcast(&l("4:2"), 2));
    for (a, want) in [
        ("(2,3,4):(1,0,0)", "(3,4):(2,6)"),
        ("(2,3):(1,2)", "1:0"),
        ("((2,4),3):((0,1),0)", "(2,3):(1,8)"),
    ] {
        let a = l(a);
        let r = expect_layout("nullspace", nullspace(&a), want);
        ok("nullspace", check::nullspace(&a, &r));
    }
}

#[test]
fn constructor_examples() {
    for (s, o, want) in [
        ("(2,2,2,2)", "(0,2,3,1)", "(2,2,2,2):(1,4,8,2)"),
        ("(4,(2,3))", "(1,0)", "(4,(2,3)):(6,(1,2))"),
        ("(4,8)", "(1,0)", "(4,8):(8,1)"),
        ("(4,1,8)", "(0,1,2)", "(4,1,8):(1,0,4)"),
    ] {
        let (s, o) = (t(s), t(o));
        let r = expect_layout("make_ordered_layout", make_ordered_layout(&s, &o), want);
        ok(
            "make_ordered_layout",
            check::make_ordered_layout(&s, &o, &r),
        );
    }
    for (a, want) in [
        ("(2,2,2,2):(0,2,4,1)", "(2,2,2,2):(0,2,4,1)"),
        ("(2,3,4,5):(0,42,1,0)", "(2,3,4,5):(0,4,1,0)"),
        ("(4,8):(100,3)", "(4,8):(8,1)"),
    ] {
        let a = l(a);
        let r = expect_layout("make_layout_like", make_layout_like(&a), want);
        ok("make_layout_like", check::make_layout_like(&a, &r));
    }
}

#[test]
fn tiler_text_round_trips() {
    for s in ["<3:3,_>", "<4:1,<2:1,3:1>>", "(4,8):(8,1)", "<_,_,2:4>"] {
        assert_eq!(tl(s).to_string(), s);
    }
    assert_eq!(tl("< 4 , ( 2 , 3 ) >").to_string(), "<4:1,<2:1,3:1>>");
    assert_eq!(tl("12").to_string(), "12:1");
    assert!("<3:3".parse::<Tiler>().is_err());
    assert!("<3:3,>".parse::<Tiler>().is_err());
    assert!("<0>".parse::<Tiler>().unwrap_err().is_parse());
}

/// Errors name the operation the caller called and its operands in CuTe notation.
#[test]
fn errors_name_the_operation_and_operands() {
    let e = composition(&l("(4,6,8):(2,3,5)"), &l("6:3")).unwrap_err();
    assert_eq!(e.op(), "composition");
    let msg = e.to_string();
    assert!(
        msg.contains("(4,6,8):(2,3,5)") && msg.contains("6:3"),
        "{msg}"
    );

    let e = complement(&l("(2,2):(2,3)"), &t("19")).unwrap_err();
    assert_eq!(e.op(), "complement");
    assert!(e.to_string().contains("(2,2):(2,3)"), "{e}");

    // A divide or product that fails inside reports the operation called.
    let (a, bad) = (l("8:1"), tl("(2,2):(1,1)"));
    for (op, e) in [
        ("logical_divide", logical_divide(&a, &bad).unwrap_err()),
        ("zipped_divide", zipped_divide(&a, &bad).unwrap_err()),
        ("tiled_divide", tiled_divide(&a, &bad).unwrap_err()),
        ("flat_divide", flat_divide(&a, &bad).unwrap_err()),
    ] {
        assert_eq!(e.op(), op, "{e}");
        assert!(e.to_string().contains("(2,2):(1,1)"), "{e}");
    }
    let (a, b) = (l("(2,2):(1,1)"), tl("2:1"));
    for (op, e) in [
        ("logical_product", logical_product(&a, &b).unwrap_err()),
        ("zipped_product", zipped_product(&a, &b).unwrap_err()),
        ("tiled_product", tiled_product(&a, &b).unwrap_err()),
        ("flat_product", flat_product(&a, &b).unwrap_err()),
    ] {
        assert_eq!(e.op(), op, "{e}");
    }

    let e = composition(
        &l("(1,2):(0,1073741824)"),
        &l("(2,2):(4611686018427387904,1)"),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            LayoutError::Overflow {
                op: "composition",
                ..
            }
        ),
        "{e:?}"
    );

    let e = tile_to_shape(&l("3:1"), &t("4"), None).unwrap_err();
    assert_eq!(e.op(), "tile_to_shape");
    let e = upcast(&l("8:2"), 3).unwrap_err();
    assert_eq!(e.op(), "upcast");
}

/// Overlapping modes: `(2,3):(2,1)` maps 1 and 2 to offset 2, so it has no left inverse;
/// CuTe's canonical generalized inverse would be `(2,2):(2,1)`, for which
/// L(R(L(5))) = L(R(4)) = L(2) = 1 != 4, so that operation must refuse rather than return
/// it. With stride-0 (broadcast) modes the weak post-condition still holds.
#[test]
fn left_inverse_of_overlapping_modes() {
    let l: Layout = "(2,3):(2,1)".parse().unwrap();
    let err = left_inverse(&l).unwrap_err();
    assert_eq!(err.op(), "left_inverse");
    assert!(err.to_string().contains("not injective"), "{err}");
    let err = generalized_left_inverse(&l).unwrap_err();
    assert_eq!(err.op(), "generalized_left_inverse");
    assert!(err.to_string().contains("i = 5"), "{err}");
    let l: Layout = "(4,6):(4,1)".parse().unwrap();
    assert!(left_inverse(&l).is_err());
    assert!(generalized_left_inverse(&l).is_err());
    let l: Layout = "(4,3):(1,0)".parse().unwrap();
    assert!(left_inverse(&l).is_err());
    let r = generalized_left_inverse(&l).unwrap();
    for i in 0..l.size() {
        let o = l.call(i).unwrap();
        assert_eq!(l.call(r.call(o).unwrap()).unwrap(), o);
    }
}
