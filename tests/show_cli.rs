//! `tessera show`, run as a program: the text grid, the SVG picture and the thread/value
//! picture, snapshot-tested with insta (the `.snap` files under `tests/snapshots/` are the
//! reviewed pictures), plus hand-checked lines and the error contract.

use std::process::{Command, Output};

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8")
}

fn temp_svg(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-show-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

#[test]
fn plain_grid_is_cutes_print_layout() {
    let o = tessera(&["show", "(2,3):(3,1)"]);
    assert_eq!(o.status.code(), Some(0));
    // CuTe: idx_width = num_digits(cosize 6) + 2 = 3; "  %*d " headers, "| %*d " cells.
    let expected = [
        "(2,3):(3,1)",
        "      0   1   2 ",
        "    +---+---+---+",
        " 0  | 0 | 1 | 2 |",
        "    +---+---+---+",
        " 1  | 3 | 4 | 5 |",
        "    +---+---+---+",
        "",
    ];
    assert_eq!(stdout(&o), expected.join("\n"));
}

#[test]
fn swizzled_grid() {
    let o = tessera(&["show", "Sw<3,0,3> o (8,8):(8,1)"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    // row 1 swaps neighbours (Z bit 0 ^= Y bit 3); row 7 reverses the row.
    assert!(
        text.contains(" 1  |  9 |  8 | 11 | 10 | 13 | 12 | 15 | 14 |"),
        "{text}"
    );
    assert!(
        text.contains(" 7  | 63 | 62 | 61 | 60 | 59 | 58 | 57 | 56 |"),
        "{text}"
    );
    insta::assert_snapshot!("swizzled_grid_sw303_8x8", text);
}

#[test]
fn svg_of_a_swizzled_atom() {
    let path = temp_svg("atom.svg");
    let o = tessera(&[
        "show",
        "Sw<2,1,3> o (4,16):(16,1)",
        "--svg",
        path.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let svg = std::fs::read_to_string(&path).expect("svg written");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("<title>Sw&lt;2,1,3&gt; o 0 o (4,16):(16,1)</title>"));
    // one cell rectangle per grid cell, plus the background
    assert_eq!(svg.matches("<rect ").count(), 4 * 16 + 1);
    insta::assert_snapshot!("svg_sw213_4x16", svg);
}

#[test]
fn thread_value_picture() {
    // 4 threads x 2 values into a 2x4 tile: thread t owns column t (values down the column)
    let path = temp_svg("tv.svg");
    let o = tessera(&[
        "show",
        "(4,2):(2,1)",
        "--tile",
        "(2,4)",
        "--svg",
        path.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    assert!(text.contains(" 0  | T0V0 | T1V0 | T2V0 | T3V0 |"), "{text}");
    assert!(text.contains(" 1  | T0V1 | T1V1 | T2V1 | T3V1 |"), "{text}");
    let svg = std::fs::read_to_string(&path).expect("svg written");
    assert_eq!(svg.matches(">T2<").count(), 2);
    assert_eq!(svg.matches(">V1<").count(), 4);
    insta::assert_snapshot!("tv_grid_4x2_over_2x4", text);
    insta::assert_snapshot!("tv_svg_4x2_over_2x4", svg);
}

#[test]
fn errors_exit_1_with_a_message() {
    for args in [
        vec!["show", "8:1"], // rank 1: CuTe's print_layout needs rank 2
        vec!["show", "Sw<3,4,2> o (8,8):(8,1)"], // |S| < B
        vec!["show", "(8,8):(8"], // syntax
        vec!["show", "(4,2):(2,1)", "--tile", "(2,2)"], // offsets outside the tile
    ] {
        let o = tessera(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).starts_with("error: show: "),
            "{args:?}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// The fill colours of the cells of grid column `col` (cells are the `<rect>`s after the
/// background, row by row).
fn column_fills(svg: &str, cols: usize, col: usize) -> Vec<String> {
    let fills: Vec<String> = svg
        .lines()
        .filter(|l| l.starts_with("<rect ") && l.contains("stroke="))
        .map(|l| {
            l.split("fill=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    fills.iter().skip(col).step_by(cols).cloned().collect()
}

#[test]
fn bank_group_colours_show_the_swizzle() {
    let with = temp_svg("banks.svg");
    let without = temp_svg("banks0.svg");
    for (layout, path) in [
        ("Sw<3,3,3> o (8,64):(64,1)", &with),
        ("(8,64):(64,1)", &without),
    ] {
        let o = tessera(&[
            "show",
            layout,
            "--banks",
            "2",
            "--svg",
            path.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (with, without) = (
        std::fs::read_to_string(&with).unwrap(),
        std::fs::read_to_string(&without).unwrap(),
    );
    for col in [0, 8, 63] {
        // swizzled: the 8 rows of a column are in 8 different 16-byte bank groups
        let mut f = column_fills(&with, 64, col);
        assert_eq!(f.len(), 8);
        f.sort();
        f.dedup();
        assert_eq!(f.len(), 8, "column {col}");
        // plain: all 8 rows in the same group
        let mut g = column_fills(&without, 64, col);
        g.dedup();
        assert_eq!(g.len(), 1, "column {col}");
    }
    let o = tessera(&["show", "(4,2):(2,1)", "--tile", "(2,4)", "--banks", "2"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn banks_text_gives_each_cells_bank() {
    // 4-byte elements, rows of 8: offset 8r + n is in bank 8r + n (mod 32)
    let o = tessera(&["show", "(4,8):(8,1)", "--banks", "4"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    let banks = text
        .split_once("(4,8):(8,1), 4-byte elements: 4-byte bank of each cell\n")
        .expect("the bank grid follows the offset grid")
        .1;
    assert!(
        banks.contains(" 3  | 24 | 25 | 26 | 27 | 28 | 29 | 30 | 31 |"),
        "{text}"
    );
    // 2-byte elements: two per bank; row 1 of 64 halves starts again at bank 0
    let o = tessera(&["show", "(2,64):(64,1)", "--banks", "2"]);
    let text = stdout(&o);
    let banks = text.split_once("bank of each cell\n").unwrap().1;
    let row1: Vec<&str> = banks
        .lines()
        .nth(4)
        .unwrap()
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(&row1[1..5], ["0", "0", "1", "1"], "{text}");
    assert_eq!(row1[64], "31");
    insta::assert_snapshot!(
        "banks_grid_4x8_fp32",
        stdout(&tessera(&["show", "(4,8):(8,1)", "--banks", "4"]))
    );
}

#[test]
fn access_by_wavefront_before_and_after_the_synthesized_swizzle() {
    // 8 rows of 8 floats (32 bytes): rows r and r + 4 start in the same banks, so 8 lanes
    // reading 16 bytes each down the first 4 columns take 2 wavefronts. XOR-ing row bit 2
    // (offset bit 5) into offset bit 2 (Sw<1,2,3>) moves rows 4-7 to banks 4-7, 12-15, ...
    let path = temp_svg("access.svg");
    let o = tessera(&[
        "show",
        "(8,8):(8,1)",
        "--banks",
        "4",
        "--access",
        "(8,4):(1,8)",
        "--best",
        "--svg",
        path.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with(
            "(8,8):(8,1), 4-byte elements, access (8,4):(1,8): 2 wavefronts (ideal 1)"
        ),
        "{first}"
    );
    assert!(first.ends_with("Sw<1,2,3> o 0 o (8,8):(8,1), 4-byte elements, access (8,4):(1,8): 1 wavefront (ideal 1)"), "{first}");
    // before: row 4 waits for wavefront 1 in banks 0-3; after: wavefront 0, banks 4-7
    let row4 = text.lines().find(|l| l.starts_with(" 4  |")).unwrap();
    assert!(
        row4.starts_with(" 4  |  w1/b0 |  w1/b1 |  w1/b2 |  w1/b3 |"),
        "{row4}"
    );
    assert!(
        row4.contains("|    4  |  w0/b4 |  w0/b5 |  w0/b6 |  w0/b7 |"),
        "{row4}"
    );
    assert!(text.contains("before:\nwavefront 0: T0 (0,0)x4 banks 0-3; T1 (1,0)x4 banks 8-11; T2 (2,0)x4 banks 16-19; T3 (3,0)x4 banks 24-27\nwavefront 1: T4 (4,0)x4 banks 0-3;"), "{text}");
    let svg = std::fs::read_to_string(&path).expect("svg written");
    // two panels of 64 cells, and the background
    assert_eq!(svg.matches("<rect ").count(), 2 * 64 + 1);
    assert_eq!(svg.matches(">w1 T4<").count(), 4); // 4 floats of lane 4 in wavefront 1, before
    assert_eq!(svg.matches(">w0 T4<").count(), 4); // and in wavefront 0, after
    insta::assert_snapshot!("access_compare_8x8_fp32", text);
    insta::assert_snapshot!("access_compare_8x8_fp32_svg", svg);
}

#[test]
fn access_without_banks_is_a_usage_error() {
    let o = tessera(&["show", "(8,8):(8,1)", "--access", "8:1"]);
    assert_eq!(o.status.code(), Some(2));
    let o = tessera(&["show", "(8,8):(8,1)", "--banks", "4", "--best"]);
    assert_eq!(o.status.code(), Some(2));
    // an access that leaves the tile
    let o = tessera(&["show", "(8,8):(8,1)", "--banks", "4", "--access", "8:10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: show: "));
}
