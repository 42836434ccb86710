//! `tessera eval`, run as a program: the command-line contract of the calculator.
//!
//! Every expected answer below is worked out by hand from CuTe's definitions (the derivation
//! is in the comment beside it where it is not a one-liner), or is an example of CuTe's own
//! documentation; none was produced by running the code under test.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use tessera::expr::{evaluate, Value, FUNCTIONS};

fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

fn run(args: &[&str]) -> Output {
    tessera().args(args).output().expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 output")
}

/// `tessera eval EXPR` prints `expected` on one line and exits 0.
#[track_caller]
fn ok(expr: &str, expected: &str) {
    let o = run(&["eval", expr]);
    assert_eq!(
        (stdout(&o).as_str(), o.status.code()),
        (format!("{expected}\n").as_str(), Some(0)),
        "tessera eval '{expr}' (stderr: {})",
        stderr(&o)
    );
}

/// `tessera eval EXPR` fails with `code` and an error line that starts with `error: {op}:`.
#[track_caller]
fn fails(expr: &str, code: i32, op: &str) {
    let o = run(&["eval", expr]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(code), "tessera eval '{expr}': {out}");
    assert_eq!(out.lines().count(), 1, "one line for '{expr}': {out}");
    assert!(
        out.starts_with(&format!("error: {op}: ")),
        "tessera eval '{expr}' printed {out:?}, expected `error: {op}: ...`"
    );
    assert!(
        stderr(&o).contains(out.trim_end()),
        "the error line also goes to stderr for '{expr}'"
    );
}

/// Runs `tessera eval -` with `input` on standard input.
fn run_stdin(input: &str) -> Output {
    let mut child = tessera()
        .args(["eval", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("the binary finishes")
}

#[test]
fn structure_queries() {
    // ((2,4),3):((1,8),2): size 2*4*3, two top modes, depth 2.
    ok("size(((2,4),3):((1,8),2))", "24");
    ok("size((2,3))", "6");
    ok("size(5)", "5");
    ok("size(((2,4),3):((1,8),2), 0)", "8");
    ok("rank(((2,4),3):((1,8),2))", "2");
    ok("rank(8:1)", "1");
    ok("rank((2,3,4))", "3");
    ok("rank(((2,4),3):((1,8),2), 0)", "2");
    ok("depth(((2,4),3):((1,8),2))", "2");
    ok("depth(8:1)", "0");
    ok("depth((1,(2,3)))", "2");
    ok("shape(((2,4),3):((1,8),2))", "((2,4),3)");
    ok("shape(((2,4),3):((1,8),2), 0)", "(2,4)");
    ok("stride(((2,4),3):((1,8),2))", "((1,8),2)");
    ok("stride(((2,4),3):((1,8),2), 0, 1)", "8");
    // cosize = 1 + sum (s-1)|d|: 1 + 1 + 24 + 4.
    ok("cosize(((2,4),3):((1,8),2))", "30");
    // Negative strides: the span of the image, not L(size-1)+1.
    ok("cosize(4:-1)", "4");
    ok("cosize((4,8):(1,-4))", "32");
    ok("cosize(8:0)", "1");
    // coshape: (s-1)|d|+1 leaf by leaf.
    ok("coshape(((2,4),3):((1,8),2))", "((2,25),5)");
    ok("coshape((4,8):(1,-4))", "(4,29)");
}

#[test]
fn mode_operations() {
    ok("get(((2,4),3):((1,8),2), 0, 1)", "4:8");
    ok("get(((2,4),3):((1,8),2), 1)", "3:2");
    ok("get((2,(3,4)), 1, 0)", "3");
    ok("select((2,3,4):(1,2,6), 2, 0)", "(4,2):(6,1)");
    ok("select((2,3,4), 1)", "(3)");
    ok("take((2,3,4):(1,2,6), 1, 3)", "(3,4):(2,6)");
    ok("take((2,3,4), 0, 2)", "(2,3)");
    ok("group((2,3,4):(1,2,6), 1, 3)", "(2,(3,4)):(1,(2,6))");
    ok("group((2,3,4), 0, 2)", "((2,3),4)");
    ok("flatten(((2,4),3):((1,8),2))", "(2,4,3):(1,8,2)");
    ok("flatten((1,(2,(3))))", "(1,2,3)");
    ok("append((2,3):(1,2), 4:6)", "(2,3,4):(1,2,6)");
    ok("append(8:1, 2:8)", "(8,2):(1,8)");
    ok("append((2,3), 4)", "(2,3,4)");
    ok("prepend((2,3):(1,2), 4:6)", "(4,2,3):(6,1,2)");
    ok("prepend((2,3), 4)", "(4,2,3)");
    ok("replace((2,3,4):(1,2,6), 1, 5:7)", "(2,5,4):(1,7,6)");
    ok("replace((2,3,4), 0, (1,1))", "((1,1),3,4)");
}

#[test]
fn constructors() {
    ok("make_layout(3:1, (2,2):(3,6))", "(3,(2,2)):(1,(3,6))");
    ok("make_layout((2,3))", "(2,3):(1,2)");
    ok("make_layout((2,3), (3,1))", "(2,3):(3,1)");
    ok("make_layout(4:2)", "4:2");
    ok("col_major(((2,4),3))", "((2,4),3):((1,2),8)");
    ok("row_major(((2,4),3))", "((2,4),3):((12,3),1)");
    // Smallest order value fastest: modes 0, 3, 1, 2 get strides 1, 2, 4, 8.
    ok(
        "make_ordered_layout((2,2,2,2), (0,2,3,1))",
        "(2,2,2,2):(1,4,8,2)",
    );
    ok("make_ordered_layout((4,3), (1,0))", "(4,3):(3,1)");
    // Mode 1 has the smaller stride, so it becomes the stride-1 mode.
    ok("make_layout_like((2,3):(100,7))", "(2,3):(3,1)");
}

#[test]
fn coalesce_and_filter() {
    ok("coalesce((2,(1,6)):(1,(6,2)))", "12:1");
    ok("coalesce((2,4):(1,3))", "(2,4):(1,3)");
    ok("coalesce((1,1):(5,7))", "1:0");
    // Profile (1,1): each top mode coalesced on its own: (2,4):(1,2) -> 8:1, (3,1):(8,5) -> 3:8.
    ok(
        "coalesce(((2,4),(3,1)):((1,2),(8,5)), (1,1))",
        "(8,3):(1,8)",
    );
    // filter_zeros: stride-0 modes get extent 1; filter then coalesces (2,1,4):(1,0,2) -> 8:1.
    ok("filter_zeros((2,3,4):(1,0,2))", "(2,1,4):(1,0,2)");
    ok("filter((2,3,4):(1,0,2))", "8:1");
}

#[test]
fn composition_every_right_operand() {
    // A(i,j) = 4i+j on (6,4); B(a,b) = 6a+b; A(B(a,b)) = a+4b.
    ok("composition((6,4):(4,1), (4,6):(6,1))", "(4,6):(1,4)");
    ok("composition(20:2, (5,4):(4,1))", "(5,4):(8,2)");
    // By-mode tiler (CuTe's documentation): 12:59 o 3:4 = 3:236, (4,8):(13,1) o 8:2 =
    // (2,4):(26,1).
    ok(
        "composition((12,(4,8)):(59,(13,1)), <3:4, 8:2>)",
        "(3,(2,4)):(236,(26,1))",
    );
    // A shape is a by-mode tiler of n:1 items.
    ok(
        "composition((12,(4,8)):(59,(13,1)), (3,8))",
        "(3,(4,2)):(59,(13,1))",
    );
    // An integer n is n:1: the first 8 offsets of (4,6):(6,1).
    ok("composition((4,6):(6,1), 8)", "(4,2):(6,1)");
    // `_` leaves a mode alone.
    ok("composition((4,6):(6,1), <2:2, _>)", "(2,6):(12,1)");
    // CUTLASS issue #3177: no layout is A o B here (A(B(2)) = A(6) = 7 but the pattern
    // says 3), so it is an error of the operation.
    fails("composition((4,6,8):(2,3,5), 6:3)", 1, "composition");
}

#[test]
fn complement_and_inverses() {
    ok("complement(4:2, 24)", "(2,3):(1,8)");
    ok("complement((2,2):(1,6), 24)", "(3,2):(2,12)");
    ok("complement(4:1, 24)", "6:4");
    // Default cotarget cosize(4:2) = 7: gap 2:1, then ceil(7/8) = 1 copy.
    ok("complement(4:2)", "2:1");
    // The modes interleave: stride 3 falls inside the span of 2:2, so no layout fills the
    // gaps (CuTe's "non-injective layout" static assertion).
    fails("complement((2,2):(2,3), 19)", 1, "complement");
    // Sorted by stride: 4:1 (prefix 2), 2:4 (prefix 1), 6:8 (prefix 8).
    ok("right_inverse((2,4,6):(4,1,8))", "(4,2,6):(2,1,8)");
    ok("right_inverse(8:1)", "8:1");
    // C++'s canonical left inverse of 3:2: (2,3):(0,1), Linv(2i) = i.
    ok("left_inverse(3:2)", "(2,3):(0,1)");
    ok("left_inverse(8:1)", "8:1");
    // A shape cotarget is reached in full: (2:3, R) must reach 8 = size((4,2)); the gap
    // below stride 3 holds 3 copies of stride 1, then ceil(8 / 6) = 2 copies of stride 6.
    ok("complement(2:3, (4,2))", "(3,2):(1,6)");
    ok("complement(4:1, (3,2))", "2:4"); // ceil(6 / 4) = 2 copies of stride 4
                                         // Tied orders are broken by position: a bijection onto [0, 96).
    ok(
        "make_ordered_layout((2,3,4,2), (0,2,3,0))",
        "(2,3,4,2):(1,4,12,2)",
    );
    ok("make_ordered_layout((2,2), (1,1))", "(2,2):(1,2)");
    // L(1) = L(2) = 1: no left inverse exists.
    fails("left_inverse((2,2):(1,1))", 1, "left_inverse");
    fails("left_inverse(4:0)", 1, "left_inverse");
    ok("generalized_left_inverse(4:0)", "4:0");
}

#[test]
fn divides() {
    ok("logical_divide(8:1, 4)", "(4,2):(1,4)");
    // CuTe's documentation examples.
    ok(
        "logical_divide((4,2,3):(2,1,8), 4:2)",
        "((2,2),(2,3)):((4,1),(2,8))",
    );
    ok(
        "logical_divide((9,(4,8)):(59,(13,1)), <3:3, (2,4):(1,8)>)",
        "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))",
    );
    // A tile that does not divide: the rest mode rounds up.
    ok("logical_divide(48:1, 32:1)", "(32,2):(1,32)");
    // Mode by mode: 8:1/4 = (4,2):(1,4), 6:8/3 = (3,2):(8,24).
    ok(
        "zipped_divide((8,6):(1,8), <4,3>)",
        "((4,3),(2,2)):((1,8),(4,24))",
    );
    ok(
        "zipped_divide((8,6):(1,8), (4,3))",
        "((4,3),(2,2)):((1,8),(4,24))",
    );
    ok(
        "tiled_divide((8,6):(1,8), <4,3>)",
        "((4,3),2,2):((1,8),4,24)",
    );
    ok("flat_divide((8,6):(1,8), <4,3>)", "(4,3,2,2):(1,8,4,24)");
    // (3,1):(1,4) and 3:1 are one function on [0, 3): the same divide. The tile 2:1 and its
    // complement 2:2 give indices 0, 1, 2, 3; index 3 overhangs, where coalesce(L) = 3:1
    // runs on: (2,2):(1,2).
    ok("logical_divide((3,1):(1,4), 2:1)", "(2,2):(1,2)");
    ok("logical_divide(3:1, 2:1)", "(2,2):(1,2)");
}

#[test]
fn compositions_beyond_cutes_rule() {
    // A(k*d) for k < n, worked out by hand; CuTe's divisibility rule refuses each.
    ok("composition((10,1):(0,1), 4:6)", "(2,2):(0,1)"); // A(0,6,12,18) = 0,0,1,1
    ok("composition((5,2):(0,1), 4:3)", "(2,2):(0,1)"); // A(0,3,6,9) = 0,0,1,1
    ok("composition((4,8):(1,5), 2:5)", "2:6"); // A(5) = 1 + 5
}

#[test]
fn products() {
    // complement((2,2):(4,1), 24) = (2,3):(2,8), composed with 6:1.
    ok(
        "logical_product((2,2):(4,1), 6:1)",
        "((2,2),(2,3)):((4,1),(2,8))",
    );
    ok("logical_product(3:1, 4)", "(3,4):(1,3)");
    // By mode: 2:1 x 2:1 = (2,2):(1,2); 3:2 x 2:1 = (3,2):(2,1) (complement(3:2, 6) = 2:1).
    ok(
        "zipped_product((2,3):(1,2), <2:1,2:1>)",
        "((2,3),(2,2)):((1,2),(2,1))",
    );
    ok(
        "tiled_product((2,3):(1,2), <2:1,2:1>)",
        "((2,3),2,2):((1,2),2,1)",
    );
    ok(
        "flat_product((2,3):(1,2), <2:1,2:1>)",
        "(2,3,2,2):(1,2,2,1)",
    );
    // CuTe's documentation: complement((2,5):(5,1), 120) = 12:10, o (3,4):(1,3) = (3,4):(10,30).
    ok(
        "blocked_product((2,5):(5,1), (3,4):(1,3))",
        "((2,3),(5,4)):((5,10),(1,30))",
    );
    ok(
        "raked_product((2,5):(5,1), (3,4):(1,3))",
        "((3,2),(4,5)):((10,5),(30,1))",
    );
    // (4,6) / (2,2) = (2,3) blocks; column-major, or row-major with order (1,0).
    ok(
        "tile_to_shape((2,2):(1,2), (4,6))",
        "((2,2),(2,3)):((1,4),(2,8))",
    );
    ok(
        "tile_to_shape((2,2):(1,2), (4,6), (1,0))",
        "((2,2),(2,3)):((1,12),(2,4))",
    );
}

#[test]
fn common_vectors_casts_nullspace() {
    // 0..3 are consecutive in both; then 4 vs 8.
    ok("max_common_vector((4,8):(1,4), (4,8):(1,8))", "4");
    ok("max_common_vector(8:1, 8:1)", "8");
    ok("max_common_layout((4,8):(1,4), (4,8):(1,8))", "4:1");
    ok("max_common_layout((4,8):(8,1), (4,8):(1,4))", "1:0");
    ok("upcast((8,(4,2)):(1,(16,8)), 2)", "(4,(4,2)):(1,(8,4))");
    ok("downcast((4,2):(1,4), 2)", "(8,2):(1,8)");
    // Stride-0 modes 0 and 2; prefix products of (2,3,4) are (1,2,6).
    ok("nullspace((2,3,4):(0,1,0))", "(2,4):(1,6)");
    ok("nullspace(4:1)", "1:0");
}

#[test]
fn coordinates_and_offsets() {
    // 13 = 1 + 2*2 + 8*1 in ((2,4),3).
    ok("idx2crd(13, ((2,4),3))", "((1,2),1)");
    ok("idx2crd(5, 8)", "5");
    ok("crd2idx((1,2), (3,4):(1,3))", "7");
    ok("crd2idx((3,4):(1,3), (1,2))", "7");
    ok("crd2idx((1,2), (3,4), (4,1))", "6");
    ok("crd2idx((1,2), (3,4))", "7");
    // 5 = (2,1) in (3,4): 2*4 + 1.
    ok("crd2idx(5, (3,4):(4,1))", "9");
    // The last mode absorbs an index past the size: 100 % 3 = 1 (offset 2), 33 % 2 = 1
    // (offset 1), and the last leaf takes all of 16 (offset 96): 99, as CuTe documents.
    ok("eval((3,(2,4)):(2,(1,6)), 100)", "99");
    ok("eval(((2,4),3):((1,8),2), ((1,2),1))", "19");
    // Coordinate 3 into mode (2,4):(1,8) is (1,1): 1 + 8, plus 1*2.
    ok("eval(((2,4),3):((1,8),2), (3,1))", "11");
    ok("offsets((2,2):(2,1))", "[0,2,1,3]");
    ok("offsets(4:-1)", "[0,-1,-2,-3]");
}

#[test]
fn spaces_between_tokens() {
    ok(" size ( ( 2 , 3 ) : ( 1 , 2 ) ) ", "6");
    ok("composition( (6,4) : (4,1) ,(4,6):(6,1) )", "(4,6):(1,4)");
    ok(
        "logical_divide( (9,(4,8)):(59,(13,1)) , < 3:3 , (2,4):(1,8) > )",
        "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))",
    );
    ok("  < 3:3 , _ , 4 >  ", "<3:3,_,4:1>");
    // Several words on the command line are one expression.
    let o = run(&["eval", "size(", "(2,3)", ")"]);
    assert_eq!(stdout(&o), "6\n");
}

#[test]
fn literals_print_back_without_spaces() {
    ok("((2,4),3):((1,8),2)", "((2,4),3):((1,8),2)");
    ok("( 1 , ( 2 , 3 ) )", "(1,(2,3))");
    ok("(3)", "(3)");
    ok("()", "()");
    ok("-3", "-3");
    ok("<3:3,(2,4):(1,8),_,4>", "<3:3,(2,4):(1,8),_,4:1>");
    // Parts of literals may be computed.
    ok("(size(4:1), 2)", "(4,2)");
    ok("shape((2,3):(3,1)):stride((2,3):(3,1))", "(2,3):(3,1)");
}

#[test]
fn syntax_errors_exit_2() {
    fails("size(2:1", 2, "parse");
    fails("no_such_function(2:1)", 2, "parse");
    fails("(2,3):(1)", 2, "parse"); // shape and stride not congruent
    fails("0:1", 2, "parse"); // extent below 1
    fails("", 2, "parse");
    fails("size", 2, "parse");
    fails("size(8:1))", 2, "parse");
    fails("<2:1, size>", 2, "parse");
    fails("99999999999999999999", 2, "parse");
    fails("((2,3):(1,2), 4)", 2, "parse"); // a layout is not a tuple element
}

#[test]
fn operation_errors_exit_1() {
    fails("composition((4,6,8):(2,3,5), 6:3)", 1, "composition");
    fails("size()", 1, "size");
    fails("eval(8:1)", 1, "eval");
    fails("take((2,3,4):(1,2,6), 2, 1)", 1, "take");
    fails("coalesce(<2,_>)", 1, "coalesce");
    fails("get((2,3):(1,2), 2)", 1, "get");
    fails("upcast(8:1, size(<2>))", 1, "size");
    fails("(size(4:1), 2:1)", 1, "tuple");
}

/// An error names the function the expression called, whatever helper failed inside it.
#[test]
fn errors_name_the_function_called() {
    // The tiler (2,2):(1,1) is not injective, so its complement fails inside each divide.
    for op in [
        "logical_divide",
        "zipped_divide",
        "tiled_divide",
        "flat_divide",
    ] {
        fails(&format!("{op}(8:1, (2,2):(1,1))"), 1, op);
    }
    // A = (2,2):(1,1) is not injective, so complement(A, ...) fails inside each product.
    for op in [
        "logical_product",
        "zipped_product",
        "tiled_product",
        "flat_product",
        "blocked_product",
        "raked_product",
    ] {
        fails(&format!("{op}((2,2):(1,1), 2:1)"), 1, op);
    }
    fails("size(2:1, 5)", 1, "size");
    fails("shape((2,3):(1,2), 4)", 1, "shape");
    fails("eval(2:1, (1,2))", 1, "eval");
    fails("eval(Sw<1,0,1> o 2:1, (1,2))", 1, "eval");
    // Its image cannot be bounded below 2^26 points, but the stride-0 mode of extent 2
    // already makes it non-injective: false, not an error.
    ok(
        "is_bijective(Sw<25,0,25> o (2,1099511627776):(0,1))",
        "false",
    );
    // Injective, so only the image's extent decides, and bounding it needs 2^26 points: an
    // error of is_bijective (the helper that gave up was cosize).
    fails(
        "is_bijective(Sw<25,0,25> o 1099511627776:1)",
        1,
        "is_bijective",
    );
    // Found by fuzzing: 5.4 million elements of 921 bytes span 1.2 billion words, which the
    // count used to list (minutes and gigabytes); now a bound error, at once.
    fails("bank_conflicts(((),9,65,9218), 921)", 1, "bank_conflicts");
    // i64::MIN / -1 overflows: an overflow, not a zero stride.
    let o = run(&["eval", "idx2crd(-9223372036854775808, 5, -1)"]);
    assert!(
        stdout(&o).starts_with("error: idx2crd: integer overflow"),
        "{}",
        stdout(&o)
    );
    fails("idx2crd(3, 5, 0)", 1, "idx2crd");
}

/// An error line quotes its input shortened: a 2 MB expression gives a line of at most about
/// a kilobyte, with an ellipsis where the middle was.
#[test]
fn error_lines_stay_short() {
    let long = format!("size({}", "(".repeat(1 << 21));
    let o = run_stdin(&format!("{long}\n"));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "one line");
    assert!(
        out.starts_with("error: parse: "),
        "{}",
        &out[..out.len().min(200)]
    );
    assert!(out.len() < 1200, "the line has {} bytes", out.len());
    assert!(out.contains('…'), "{out}");
    let huge_layout = format!(
        "composition({}:1, 6:3)",
        "(2,".repeat(5000) + "2" + &")".repeat(5000)
    );
    let o = run_stdin(&format!("{huge_layout}\n"));
    assert!(
        stdout(&o).len() < 1200,
        "the line has {} bytes",
        stdout(&o).len()
    );
}

#[test]
fn stdin_mode_one_line_per_expression() {
    let o = run_stdin("size(8:1)\nfoo(\n\ncoalesce((2,2):(1,2))\r\ncomposition((4,6,8):(2,3,5), 6:3)\noffsets(3:2)");
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert_eq!(lines[0], "8");
    assert!(lines[1].starts_with("error: parse: "), "{}", lines[1]);
    assert!(lines[2].starts_with("error: parse: "), "{}", lines[2]);
    assert_eq!(lines[3], "4:1");
    assert!(lines[4].starts_with("error: composition: "), "{}", lines[4]);
    assert_eq!(lines[5], "[0,2,4]");
}

#[test]
fn stdin_mode_empty_input() {
    let o = run_stdin("");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "");
}

#[test]
fn help_documents_the_error_streams() {
    let o = run(&["eval", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    assert!(help.contains("standard error"), "{help}");
    assert!(help.contains("exit status"), "{help}");
}

#[test]
fn swizzle_literals_and_application() {
    ok("Sw<3,4,3>", "Sw<3,4,3>");
    ok("Sw < 3 , 4 , 3 >", "Sw<3,4,3>");
    ok("Sw<3,4,3> o (8,64):(64,1)", "Sw<3,4,3> o 0 o (8,64):(64,1)");
    ok(
        "Sw<3,4,3> o 8 o (8,64):(64,1)",
        "Sw<3,4,3> o 8 o (8,64):(64,1)",
    );
    ok(
        "Sw<3,4,3>o 8 o(8,64):(64,1)",
        "Sw<3,4,3> o 8 o (8,64):(64,1)",
    );
    ok("Sw<1,0,-1>", "Sw<1,0,-1>");
    ok(
        "Sw<3,4,3> ∘ 8 ∘ (8,64):(64,1)",
        "Sw<3,4,3> o 8 o (8,64):(64,1)",
    );
    // CuTe requires B >= 0, M >= 0 and |S| >= B: a malformed literal.
    fails("Sw<3,4,2>", 2, "parse");
    fails("Sw<-1,0,1>", 2, "parse");
    fails("Sw<3,4>", 2, "parse");
    fails("4:1 o 2:1", 2, "parse");
    // Sw<3,4,3>: YYY = bits 7..9 (896), ZZZ = bits 4..6 (112); x ^ ((x & YYY) >> 3).
    ok("yyy_mask(Sw<3,4,3>)", "896");
    ok("zzz_mask(Sw<3,4,3>)", "112");
    ok("yyy_mask(Sw<3,4,3> o 8:1)", "896");
    // Negative S puts YYY below ZZZ: Sw<2,0,-2> has YYY = bits 0..1, ZZZ = bits 2..3.
    ok("yyy_mask(Sw<2,0,-2>)", "3");
    ok("zzz_mask(Sw<2,0,-2>)", "12");
    ok("eval(Sw<3,4,3>, 128)", "144"); // bit 7 flips bit 4
    ok("eval(Sw<3,4,3>, 15)", "15"); // no YYY bits: unchanged
    ok("eval(Sw<3,4,3>, 896)", "1008"); // 896 ^ 112
    ok("eval(Sw<1,0,1>, 2)", "3");
    ok("eval(Sw<2,0,-2>, 3)", "15"); // 3 ^ (3 << 2)
    ok("eval(Sw<3,4,3>, eval(Sw<3,4,3>, 1000))", "1000"); // an involution
                                                          // make_swizzle recovers Sw<B,M,S> from the masks (CuTe's documented examples).
    ok("make_swizzle(8, 4)", "Sw<1,2,1>");
    ok("make_swizzle(192, 6)", "Sw<2,1,5>");
    ok("make_swizzle(896, 112)", "Sw<3,4,3>");
    ok(
        "make_swizzle(yyy_mask(Sw<2,0,-2>), zzz_mask(Sw<2,0,-2>))",
        "Sw<2,0,-2>",
    );
    // Y = 0b101 is not a run of bits: no swizzle has these masks.
    fails("make_swizzle(5, 10)", 1, "make_swizzle");
    // A swizzle is an involution: its own inverse.
    ok("right_inverse(Sw<3,4,3>)", "Sw<3,4,3>");
    ok("left_inverse(Sw<2,0,-2>)", "Sw<2,0,-2>");
    ok("composition(Sw<3,4,3>, Sw<3,4,3>)", "Sw<0,0,0>");
    ok("upcast(Sw<3,4,3>, 2)", "Sw<3,3,3>");
    ok("downcast(Sw<3,3,3>, 2)", "Sw<3,4,3>");
}

#[test]
fn swizzled_layouts() {
    // R(c) = Sw(OFFSET + L(c)). Row 1 of (8,64):(64,1) starts at 64 = bit 6, which Sw<3,3,3>
    // copies into bit 3.
    ok("eval(Sw<3,3,3> o (8,64):(64,1), (1,0))", "72");
    ok("eval(Sw<3,0,3> o (8,8):(8,1), (1,0))", "9");
    ok("eval(Sw<3,0,3> o (8,8):(8,1), 8)", "1"); // index 8 is (0,1): offset 1, no YYY bit
    ok("crd2idx((1,0), Sw<3,0,3> o (8,8):(8,1))", "9");
    ok("offsets(Sw<1,0,1> o 4:1)", "[0,1,3,2]");
    ok("offsets(Sw<1,0,1> o 1 o 3:1)", "[1,3,2]"); // Sw(1), Sw(2), Sw(3)
    ok("size(Sw<3,4,3> o (8,64):(64,1))", "512");
    ok("rank(Sw<3,4,3> o (8,64):(64,1))", "2");
    ok("shape(Sw<3,4,3> o (8,64):(64,1))", "(8,64)");
    fails("stride(Sw<3,4,3> o (8,64):(64,1))", 1, "stride");
    // Exact cosize: the image of Sw<1,0,1> o 3:1 is {0,1,3}; CuTe C++ says 3.
    ok("cosize(Sw<1,0,1> o 3:1)", "4");
    ok("cosize_inner(Sw<1,0,1> o 3:1)", "3");
    // Sw<2,0,-2> o 6:1: images 0,5,10,15,4,1: extent 16.
    ok("cosize(Sw<2,0,-2> o 6:1)", "16");
    ok("cosize_inner(Sw<2,0,-2> o 6:1)", "6");
    // The offset shifts the image: OFFSET + L spans 5..68, the swizzle only permutes bits
    // 0..2 inside aligned groups of 8, and 5 and 68 have no bits 3..5 set.
    ok("image_bounds(Sw<3,0,3> o 5 o (8,8):(8,1))", "(5,68)");
    ok("cosize(Sw<3,0,3> o 5 o (8,8):(8,1))", "64");
    ok("cosize_inner(Sw<3,0,3> o 5 o (8,8):(8,1))", "64");
    ok("image_bounds((4,8):(1,-4))", "(-28,3)");
    ok(
        "composition(Sw<3,4,3>, (8,64):(64,1))",
        "Sw<3,4,3> o 0 o (8,64):(64,1)",
    );
    // The algebra acts on the inner layout, the swizzle and offset stay.
    ok(
        "logical_divide(Sw<3,3,3> o (16,64):(64,1), <8,_>)",
        "Sw<3,3,3> o 0 o ((8,2),64):((64,512),1)",
    );
    ok("get(Sw<3,3,3> o (8,64):(64,1), 0)", "Sw<3,3,3> o 0 o 8:64");
    ok(
        "coalesce(Sw<3,3,3> o (8,64):(1,8))",
        "Sw<3,3,3> o 0 o 512:1",
    );
    ok(
        "composition(Sw<3,3,3> o (8,64):(64,1), 8:1)",
        "Sw<3,3,3> o 0 o 8:64",
    );
    // Inner 4:2 leaves gaps 2:1, then two copies of the span 8 fill 16.
    ok("complement(Sw<1,0,1> o 4:2, 16)", "(2,2):(1,8)");
    // Bytes to 2-byte elements: M drops by one, strides halve.
    ok(
        "upcast(Sw<3,4,3> o 0 o (8,128):(128,1), 2)",
        "Sw<3,3,3> o 0 o (8,64):(64,1)",
    );
    ok(
        "downcast(Sw<3,3,3> o 0 o (8,64):(64,1), 2)",
        "Sw<3,4,3> o 0 o (8,128):(128,1)",
    );
    ok("is_bijective(Sw<3,3,3> o (8,64):(64,1))", "true");
    ok("is_bijective(Sw<1,0,1> o 3:1)", "false"); // image {0,1,3} is not contiguous
    ok("is_bijective(4:2)", "false");
    ok("is_injective(4:2)", "true");
}

#[test]
fn bank_conflicts_counts() {
    // 8 lanes read 8 halves (16 bytes) each, rows 128 bytes apart: all start in bank 0.
    ok("bank_conflicts((8,8):(64,1), 2)", "8/1");
    // Through the 128-byte swizzle (Sw<3,3,3> in halves) lane t's row starts 16t bytes
    // further along the banks: conflict-free.
    ok("bank_conflicts(Sw<3,3,3> o (8,8):(64,1), 2)", "1/1");
    // 32 lanes, one float each: consecutive is one wavefront; a column of a 32x32 row-major
    // float matrix is 32 words in bank 0; padding the row to 33 spreads them.
    ok("bank_conflicts(32:1, 4)", "1/1");
    ok("bank_conflicts(32:32, 4)", "32/1");
    ok("bank_conflicts(32:33, 4)", "1/1");
    // The same word for every lane is a broadcast.
    ok("bank_conflicts(32:0, 4)", "1/1");
    fails("bank_conflicts(64:1, 4)", 1, "bank_conflicts"); // more lanes than a warp
}

/// Functions as a whole, the F2 view and swizzle synthesis; answers derived by hand from the
/// definitions (offsets, bit columns, bank words).
#[test]
fn equality_f2_and_synthesis() {
    // 3:1 and (3,1):(1,4) both give 0,1,2; (2,2):(1,3) gives 0,1,3,4
    ok("equal((3,1):(1,4), 3:1)", "true");
    ok("equal(4:1, (2,2):(1,3))", "false");
    ok("equal(4:1, 8:1)", "false");
    ok("canonical(((2,2),3):((1,2),4))", "12:1");
    ok("canonical((1,1):(7,9))", "1:0");
    // Sw<1,0,1> maps 0,1,2,3 to 0,1,3,2 either way
    ok("equal(Sw<1,0,1> o 4:1, Sw<1,0,1> o (2,2):(1,2))", "true");
    ok("equal(Sw<1,0,1> o 4:1, 4:1)", "false");
    fails("canonical(Sw<1,0,1> o 4:1)", 1, "canonical");
    fails(
        "equal(Sw<1,0,1> o (3,8388608):(1,3), Sw<1,0,2> o (3,8388608):(1,3))",
        1,
        "equal",
    );
    // index bit 0 -> offset 2 -> Sw(2) = 3; index bit 1 -> 1
    ok("f2(Sw<1,0,1> o (2,2):(2,1))", "[01;11]");
    ok("eval(f2(Sw<1,0,1> o (2,2):(2,1)), 1)", "3");
    ok("is_bijective(f2(Sw<1,0,1> o (2,2):(2,1)))", "true");
    ok("is_injective(f2((2,2):(1,0)))", "false");
    // an offset of 4 with index bit 0 at offset 1: one column 001, translation 100
    ok("f2(Sw<0,0,0> o 4 o 2:1)", "[0;0;1] ^ 100");
    ok("is_linear(Sw<3,4,3> o (8,64):(64,1))", "true");
    ok("is_linear(3:1)", "false");
    fails("f2(3:1)", 1, "f2");
    // Sw<1,4,3> o Sw<1,5,2> (different shifts): both read bit 7; the inner one writes bit 5,
    // the outer bit 4, so index bit 7 goes to offset bits 7, 5 and 4, every other bit to itself
    ok(
        "composition(f2(Sw<1,4,3>,9), f2(Sw<1,5,2>,9))",
        "[100000000;010000000;001000000;010100000;010010000;000001000;000000100;000000010;000000001]",
    );
    ok(
        "composition(right_inverse(f2(Sw<1,0,1> o (2,2):(2,1))), f2(Sw<1,0,1> o (2,2):(2,1)))",
        "[10;01]",
    );
    fails("right_inverse(f2(4:2))", 1, "right_inverse");
    fails("composition(f2(2:1), f2(2:2))", 1, "composition");
    // 8 lanes read a 16-byte chunk down 8 rows of 128 bytes: 8/1 plain, 1/1 swizzled
    ok("bank_conflicts((8,8):(64,1), 2)", "8/1");
    ok(
        "best_swizzle((8,8):(1,8), (8,64):(64,1), 2)",
        "Sw<3,3,3> o 0 o (8,64):(64,1)",
    );
    ok(
        "bank_conflicts(composition(best_swizzle((8,8):(1,8), (8,64):(64,1), 2), (8,8):(1,8)), 2)",
        "1/1",
    );
    // the 16x32 fp32 transpose: store a row, read column pairs
    ok(
        "best_swizzle(32:16, 32:1, (16,32):(32,1), 4)",
        "Sw<4,1,4> o 0 o (16,32):(32,1)",
    );
    fails("best_swizzle(64:1, (8,64):(64,1), 2)", 1, "best_swizzle");
    fails("best_swizzle((8,64):(64,1), 2)", 1, "best_swizzle");
}

/// One sample call per function name, with its hand-derived answer: adding a name to the
/// language without a case here fails this test.
#[test]
fn every_function_is_dispatched() {
    let cases: &[(&str, &str)] = &[
        ("size", "size((2,3):(1,2))=6"),
        ("rank", "rank((2,3):(1,2))=2"),
        ("depth", "depth((2,3):(1,2))=1"),
        ("shape", "shape((2,3):(1,2))=(2,3)"),
        ("stride", "stride((2,3):(1,2))=(1,2)"),
        ("cosize", "cosize((2,3):(1,4))=10"),
        ("coshape", "coshape((2,3):(1,4))=(2,9)"),
        ("get", "get((2,3):(1,2),1)=3:2"),
        ("select", "select((2,3):(1,2),1,0)=(3,2):(2,1)"),
        ("take", "take((2,3,4):(1,2,6),0,1)=(2):(1)"),
        ("group", "group((2,3,4):(1,2,6),0,2)=((2,3),4):((1,2),6)"),
        ("flatten", "flatten((2,(3,4)):(1,(2,6)))=(2,3,4):(1,2,6)"),
        ("append", "append(2:1,3:2)=(2,3):(1,2)"),
        ("prepend", "prepend(2:1,3:2)=(3,2):(2,1)"),
        ("replace", "replace((2,3):(1,2),0,4:3)=(4,3):(3,2)"),
        ("make_layout", "make_layout(2:1,3:2)=(2,3):(1,2)"),
        ("col_major", "col_major((2,3))=(2,3):(1,2)"),
        ("row_major", "row_major((2,3))=(2,3):(3,1)"),
        (
            "make_ordered_layout",
            "make_ordered_layout((2,3),(1,0))=(2,3):(3,1)",
        ),
        (
            "make_layout_like",
            "make_layout_like((2,3):(9,1))=(2,3):(3,1)",
        ),
        ("coalesce", "coalesce((2,3):(1,2))=6:1"),
        ("filter", "filter((2,3):(0,1))=3:1"),
        ("filter_zeros", "filter_zeros((2,3):(0,1))=(1,3):(0,1)"),
        ("composition", "composition(8:2,4:2)=4:4"),
        ("complement", "complement(2:1,8)=4:2"),
        ("right_inverse", "right_inverse((2,3):(3,1))=(3,2):(2,1)"),
        ("left_inverse", "left_inverse((2,3):(3,1))=(3,2):(2,1)"),
        // L(0..11) = 0,1,2,3,0,1,...: R = 4:1 sends every offset x < 4 to the index x.
        (
            "generalized_left_inverse",
            "generalized_left_inverse((4,3):(1,0))=4:1",
        ),
        ("logical_divide", "logical_divide(6:1,2)=(2,3):(1,2)"),
        ("zipped_divide", "zipped_divide(6:1,2)=(2,3):(1,2)"),
        ("tiled_divide", "tiled_divide(6:1,2)=(2,3):(1,2)"),
        ("flat_divide", "flat_divide(6:1,2)=(2,3):(1,2)"),
        ("logical_product", "logical_product(2:1,3)=(2,3):(1,2)"),
        ("zipped_product", "zipped_product(2:1,3)=(2,3):(1,2)"),
        ("tiled_product", "tiled_product(2:1,3)=(2,3):(1,2)"),
        ("flat_product", "flat_product(2:1,3)=(2,3):(1,2)"),
        // Not coalesced (CUTLASS 3.9 and later): the zip of rank-1 modes is wrapped.
        (
            "blocked_product",
            "blocked_product(2:1,3:1)=((2,3)):((1,2))",
        ),
        ("raked_product", "raked_product(2:1,3:1)=((3,2)):((2,1))"),
        (
            "tile_to_shape",
            "tile_to_shape((2,2):(1,2),(4,4))=((2,2),(2,2)):((1,4),(2,8))",
        ),
        ("max_common_vector", "max_common_vector(6:1,(2,3):(1,2))=6"),
        (
            "max_common_layout",
            "max_common_layout(6:1,(2,3):(1,2))=6:1",
        ),
        ("upcast", "upcast(8:1,4)=2:1"),
        ("downcast", "downcast(2:1,4)=8:1"),
        ("nullspace", "nullspace((2,3):(0,1))=2:1"),
        ("idx2crd", "idx2crd(5,(2,3))=(1,2)"),
        ("crd2idx", "crd2idx((1,2),(2,3):(3,1))=5"),
        ("eval", "eval((2,3):(3,1),5)=5"),
        ("offsets", "offsets((2,3):(3,1))=[0,3,1,4,2,5]"),
        ("image_bounds", "image_bounds((4,8):(1,-4))=(-28,3)"),
        ("cosize_inner", "cosize_inner(Sw<1,0,1> o 3:1)=3"),
        ("yyy_mask", "yyy_mask(Sw<3,4,3>)=896"),
        ("zzz_mask", "zzz_mask(Sw<3,4,3>)=112"),
        ("make_swizzle", "make_swizzle(8,4)=Sw<1,2,1>"),
        ("bank_conflicts", "bank_conflicts((8,8):(64,1),2)=8/1"),
        ("is_bijective", "is_bijective((2,3):(3,1))=true"),
        ("is_injective", "is_injective((2,2):(1,1))=false"),
        ("equal", "equal((3,1):(1,4),3:1)=true"),
        ("canonical", "canonical((2,3,2):(0,0,5))=(6,2):(0,5)"),
        ("f2", "f2(Sw<1,0,1> o (2,2):(2,1))=[01;11]"),
        ("is_linear", "is_linear(4:3)=false"),
        (
            "best_swizzle",
            "best_swizzle((8,8):(1,8),(8,64):(64,1),2)=Sw<3,3,3> o 0 o (8,64):(64,1)",
        ),
        (
            "best_xor_swizzle",
            "best_xor_swizzle((8,8):(1,8),(8,64):(64,1),2)=[100000000;010000000;001000000;100100000;010010000;001001000;000000100;000000010;000000001]",
        ),
    ];
    for (name, _) in FUNCTIONS {
        let Some((_, case)) = cases.iter().find(|(n, _)| n == name) else {
            panic!("no test case for `{name}`");
        };
        let (expr, expected) = case.split_once('=').expect("EXPR=VALUE");
        let got = evaluate(expr).map(|v| v.to_string());
        assert_eq!(got.as_deref(), Ok(expected), "{expr}");
    }
}

/// Text built from the language's own tokens, so random input reaches deep into the
/// evaluator instead of stopping at the first character.
fn token_soup() -> impl Strategy<Value = String> {
    let mut tokens: Vec<String> = FUNCTIONS.iter().map(|(n, _)| format!("{n}(")).collect();
    tokens.extend(
        [
            "(",
            ")",
            ",",
            ":",
            "<",
            ">",
            "_",
            "Sw<",
            " o ",
            "0",
            "1",
            "2",
            "3",
            "4",
            "8",
            "-1",
            "-4",
            "16",
            "6",
            "(2,3)",
            "(4,8):(1,4)",
            "8:1",
            "(2,2):(1,2)",
            "4:-1",
            "3:0",
            "9223372036854775807",
            "-9223372036854775808",
            "4611686018427387904",
            " ",
            "x",
            "[",
        ]
        .map(String::from),
    );
    prop::collection::vec(prop::sample::select(tokens), 0..24).prop_map(|v| v.concat())
}

/// A random int tuple of small extents (1 to 4, at most three leaves, depth at most 2), as
/// text, with a congruent random stride tuple (-4 to 8, zeros included).
fn shape_and_stride() -> impl Strategy<Value = (String, String)> {
    let leaf = (1i64..5, -4i64..9);
    prop_oneof![
        leaf.clone()
            .prop_map(|(s, d)| (s.to_string(), d.to_string())),
        prop::collection::vec(leaf.clone(), 1..4).prop_map(|v| {
            let s: Vec<String> = v.iter().map(|(s, _)| s.to_string()).collect();
            let d: Vec<String> = v.iter().map(|(_, d)| d.to_string()).collect();
            (format!("({})", s.join(",")), format!("({})", d.join(",")))
        }),
        (leaf.clone(), leaf.clone(), leaf).prop_map(|(a, b, c)| {
            (
                format!("(({},{}),{})", a.0, b.0, c.0),
                format!("(({},{}),{})", a.1, b.1, c.1),
            )
        }),
    ]
}

/// A valid swizzle literal (`|S| >= B`).
fn swizzle_literal() -> impl Strategy<Value = String> {
    (0i64..4, 0i64..5, 0i64..3, any::<bool>()).prop_map(|(b, m, k, neg)| {
        let s = if neg { -(b + k) } else { b + k };
        format!("Sw<{b},{m},{s}>")
    })
}

/// A well-formed literal: integer, int tuple, layout, tiler, swizzle or swizzled layout.
fn literal() -> impl Strategy<Value = String> {
    prop_oneof![
        (-2i64..10).prop_map(|v| v.to_string()),
        shape_and_stride().prop_map(|(s, _)| s),
        shape_and_stride().prop_map(|(s, d)| format!("{s}:{d}")),
        prop::collection::vec(
            prop_oneof![
                Just("_".to_string()),
                (1i64..5).prop_map(|v| v.to_string()),
                shape_and_stride().prop_map(|(s, d)| format!("{s}:{d}")),
            ],
            0..3
        )
        .prop_map(|items| format!("<{}>", items.join(","))),
        swizzle_literal(),
        (swizzle_literal(), 0i64..9, shape_and_stride())
            .prop_map(|(sw, o, (s, d))| format!("{sw} o {o} o {s}:{d}")),
    ]
}

/// A well-formed expression: literals and calls of known functions, nested, with any
/// number and kind of arguments.
fn well_formed() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = FUNCTIONS.iter().map(|(n, _)| *n).collect();
    literal().prop_recursive(3, 24, 4, move |inner| {
        (
            prop::sample::select(names.clone()),
            prop::collection::vec(inner, 0..4),
        )
            .prop_map(|(name, args)| format!("{name}({})", args.join(", ")))
    })
}

/// A layout literal `S:D`.
fn layout_literal() -> impl Strategy<Value = String> {
    shape_and_stride().prop_map(|(s, d)| format!("{s}:{d}"))
}

/// A second operand of composition, the divides and the products.
fn tiler_operand() -> impl Strategy<Value = String> {
    prop_oneof![
        (1i64..5).prop_map(|v| v.to_string()),
        layout_literal(),
        shape_and_stride().prop_map(|(s, _)| s),
        literal().prop_filter("a tiler", |t| t.starts_with('<')),
    ]
}

/// An expression whose value should be a (plain or swizzled) layout: literals, and the
/// layout-valued functions applied to arguments of the kinds they take.
fn layout_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => layout_literal(),
        1 => (swizzle_literal(), 0i64..9, layout_literal())
            .prop_map(|(sw, o, l)| format!("{sw} o {o} o {l}")),
    ];
    leaf.prop_recursive(2, 12, 2, |inner| {
        const UNARY: &[&str] = &[
            "coalesce",
            "filter",
            "filter_zeros",
            "right_inverse",
            "left_inverse",
            "make_layout_like",
            "flatten",
            "nullspace",
        ];
        const BY_TILER: &[&str] = &[
            "composition",
            "logical_divide",
            "zipped_divide",
            "tiled_divide",
            "flat_divide",
            "logical_product",
            "zipped_product",
            "tiled_product",
            "flat_product",
        ];
        const BINARY: &[&str] = &[
            "blocked_product",
            "raked_product",
            "max_common_layout",
            "append",
            "prepend",
            "make_layout",
        ];
        prop_oneof![
            (prop::sample::select(UNARY), inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (
                prop::sample::select(BY_TILER),
                inner.clone(),
                tiler_operand()
            )
                .prop_map(|(f, a, t)| format!("{f}({a}, {t})")),
            (prop::sample::select(BINARY), inner.clone(), inner.clone())
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            (
                prop::sample::select(&["upcast", "downcast"][..]),
                inner.clone(),
                0u32..3
            )
                .prop_map(|(f, a, k)| format!("{f}({a}, {})", 1 << k)),
            (inner.clone(), 1i64..64).prop_map(|(a, c)| format!("complement({a}, {c})")),
            (inner.clone(), 0usize..2).prop_map(|(a, i)| format!("get({a}, {i})")),
            (inner, shape_and_stride()).prop_map(|(a, (s, _))| format!("tile_to_shape({a}, {s})")),
        ]
    })
}

/// A typed expression: a layout expression, or a query of one.
fn typed_expr() -> impl Strategy<Value = String> {
    const QUERIES: &[&str] = &[
        "size",
        "rank",
        "depth",
        "shape",
        "stride",
        "cosize",
        "coshape",
        "offsets",
        "image_bounds",
        "cosize_inner",
        "is_bijective",
        "is_injective",
    ];
    prop_oneof![
        layout_expr(),
        (prop::sample::select(QUERIES), layout_expr()).prop_map(|(f, a)| format!("{f}({a})")),
        (layout_expr(), -2i64..40).prop_map(|(a, i)| format!("eval({a}, {i})")),
        (layout_expr(), 0u32..4).prop_map(|(a, k)| format!("bank_conflicts({a}, {})", 1 << k)),
        (layout_expr(), layout_expr()).prop_map(|(a, b)| format!("max_common_vector({a}, {b})")),
        (0i64..40, shape_and_stride()).prop_map(|(i, (s, _))| format!("idx2crd({i}, {s})")),
        (0i64..40, layout_expr()).prop_map(|(i, l)| format!("crd2idx({i}, {l})")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// As below, for expressions that call each function with arguments of the right kinds.
    #[test]
    fn typed_expressions_have_no_syntax_errors(src in typed_expr()) {
        if let Err(e) = evaluate(&src) {
            prop_assert!(!e.is_syntax(), "{} gave the syntax error {}", src, e);
            prop_assert!(e.to_string().starts_with(e.op()), "{}", e);
        }
    }

    /// A well-formed expression has a value or an error of an operation (exit 1), never a
    /// syntax error (exit 2), and never panics.
    #[test]
    fn well_formed_expressions_have_no_syntax_errors(src in well_formed()) {
        if let Err(e) = evaluate(&src) {
            prop_assert!(!e.is_syntax(), "{} gave the syntax error {}", src, e);
            prop_assert!(e.to_string().starts_with(e.op()), "{}", e);
        }
    }

    /// No input makes the evaluator panic; syntax errors and operation errors are both fine.
    #[test]
    fn evaluator_never_panics_on_token_soup(src in token_soup()) {
        let _ = evaluate(&src);
    }

    #[test]
    fn evaluator_never_panics_on_arbitrary_text(src in "\\PC{0,40}") {
        let _ = evaluate(&src);
    }

    /// Whatever evaluates to a layout, int tuple or tiler prints as text that evaluates back
    /// to the same value.
    #[test]
    fn printed_values_read_back(src in token_soup()) {
        if let Ok(
            v @ (Value::Layout(_)
            | Value::IntTuple(_)
            | Value::Tiler(_)
            | Value::Swizzle(_)
            | Value::SwizzledLayout(_)),
        ) = evaluate(&src)
        {
            let text = v.to_string();
            prop_assert!(!text.contains(' ') || matches!(v, Value::SwizzledLayout(_)));
            prop_assert_eq!(evaluate(&text), Ok(v), "{} printed as {}", src, text);
        }
    }
}

#[test]
fn deep_nesting_is_a_syntax_error_not_a_crash() {
    let deep = format!("{}1{}", "(".repeat(30_000), ")".repeat(30_000));
    let o = run(&["eval", &deep]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).starts_with("error: parse: "));
}

/// The typed generator reaches the algebra: a good share of its calls have a value, so the
/// no-panic property is not only about early argument errors.
#[test]
fn typed_generator_reaches_values() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = typed_expr();
    let (mut calls, mut values) = (0, 0);
    for _ in 0..2000 {
        let src = strategy.new_tree(&mut runner).expect("a case").current();
        if src.contains(char::is_alphabetic) && !src.starts_with("Sw") {
            calls += 1;
            if evaluate(&src).is_ok() {
                values += 1;
            }
        }
    }
    eprintln!("{values} of {calls} generated calls have a value");
    assert!(calls > 1000, "only {calls} calls generated");
    assert!(
        values * 3 > calls,
        "only {values} of {calls} calls have a value"
    );
}

/// `tessera eval --explain EXPR` prints the steps of a divide or product and ends with the
/// line `tessera eval EXPR` prints (`= ` before a value).
#[test]
fn explain_shows_the_steps() {
    let explain = |expr: &str| -> (Vec<String>, Option<i32>) {
        let o = run(&["eval", "--explain", expr]);
        (
            stdout(&o).lines().map(str::to_string).collect(),
            o.status.code(),
        )
    };
    for (expr, steps) in [
        (
            "logical_divide((4,2,3):(2,1,8), 4:2)",
            // Stride 2 leaves a gap of 2 copies of stride 1, reach 8; 24 / 8 = 3 copies.
            &[
                "complement(4:2, (4,2,3)) = (2,3):(1,8)",
                "(T, C) = (4,(2,3)):(2,(1,8))",
            ][..],
        ),
        (
            "logical_product((2,2):(4,1), 6:1)",
            // size 4 * cosize 6 = 24; the holes of {0,1,4,5} are 2:2 then 3:8.
            &[
                "size((2,2):(4,1)) * cosize(6:1) = 4 * 6 = 24",
                "complement((2,2):(4,1), 24) = (2,3):(2,8)",
            ][..],
        ),
        (
            "zipped_divide((8,6):(1,8), <4,3>)",
            &[
                "mode 0: 8:1 by 4:1",
                "complement(4:1, 8) = 2:4",
                "complement(3:1, 6) = 2:3",
            ][..],
        ),
        (
            "blocked_product((2,5):(5,1), (3,4):(1,3))",
            &["complement((2,5):(5,1), 120) = 12:10"][..],
        ),
    ] {
        let (lines, code) = explain(expr);
        assert_eq!(code, Some(0), "{expr}: {lines:?}");
        for s in steps {
            assert!(
                lines.iter().any(|l| l.trim() == *s),
                "{expr}: no step `{s}` in {lines:?}"
            );
        }
        let value = stdout(&run(&["eval", expr]));
        assert_eq!(
            lines.last().unwrap(),
            &format!("= {}", value.trim_end()),
            "{expr}"
        );
    }
    // A failing step names the condition and the witness, and the last line is the error
    // line of `tessera eval`.
    for (expr, step) in [
        (
            "logical_divide(8:1, (2,2):(1,1))",
            "maps indices 1 and 2 to the same offset 1",
        ),
        (
            "logical_product((2,2):(1,1), 2:1)",
            "maps indices 1 and 2 to the same offset 1",
        ),
        (
            "logical_divide((6,2):(1,7), (3,2):(2,3))",
            "the mode 2:3 has a stride below 6",
        ),
    ] {
        let (lines, code) = explain(expr);
        assert_eq!(code, Some(1), "{expr}: {lines:?}");
        assert!(lines.iter().any(|l| l.contains(step)), "{expr}: {lines:?}");
        let plain = stdout(&run(&["eval", expr]));
        assert_eq!(lines.last().unwrap(), plain.trim_end(), "{expr}");
    }
    let (lines, code) = explain("size((2,3))");
    assert_eq!((lines, code), (vec!["= 6".to_string()], Some(0)));
}
