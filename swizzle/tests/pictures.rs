//! Pictures of the named atoms: insta snapshots of the text grid and the SVG (the `.snap`
//! files are the reviewed pictures), with the facts that make them right checked by hand.

use tessera_swizzle::atoms::k_sw32;
use tessera_swizzle::{picture, AnyLayout};

#[test]
fn grid_of_the_32_byte_atom() {
    let atom = k_sw32(2).unwrap(); // Sw<1,3,3> o 0 o (8,16):(16,1)
    let grid = picture::print_layout(&atom).unwrap();
    // rows 4-7 (offset bit 6 = Y) swap their two 8-half chunks (bit 3 = Z)
    assert!(grid.contains(" 3  |  48 |  49 |"), "{grid}");
    assert!(grid.contains(" 4  |  72 |  73 |"), "{grid}");
    // cells are num_digits(cosize 128) + 2 = 5 wide, as CuTe's
    assert!(grid.contains("+-----+"), "{grid}");
    insta::assert_snapshot!("grid_k_sw32_16bit", grid);
    insta::assert_snapshot!("svg_k_sw32_16bit", picture::svg_layout(&atom).unwrap());
}

#[test]
fn thread_value_picture_of_an_mma_like_partition() {
    // 8 threads x 4 values over an 8x4 tile: thread t owns row t (values across the row)
    let tv: AnyLayout = "(8,4):(1,8)".parse().unwrap();
    let text = picture::print_tv_layout(&tv, &"(8,4)".parse().unwrap()).unwrap();
    assert!(text.contains(" 5  | T5V0 | T5V1 | T5V2 | T5V3 |"), "{text}");
    insta::assert_snapshot!("tv_grid_8x4", text);
    insta::assert_snapshot!(
        "tv_svg_8x4",
        picture::svg_tv_layout(&tv, &"(8,4)".parse().unwrap()).unwrap()
    );
}

#[test]
fn the_sm80_mma_a_fragment_picture() {
    // mma.m16n8k16 A fragment (16x16, 32 threads x 8 values), as the PTX ISA documents it:
    // thread t = 4*group + i holds a0,a1 at row `group`, columns 2i, 2i+1; a2,a3 at row
    // group+8; a4,a5 at columns +8; a6,a7 at both.
    let tv: AnyLayout = "((4,8),(2,2,2)):((32,1),(16,8,128))".parse().unwrap();
    let tile = "(16,16)".parse().unwrap();
    let cells = picture::tv_cells(&tv, &tile).unwrap();
    for t in 0..32i64 {
        let (g, i) = (t / 4, t % 4);
        let at = |r: i64, c: i64| cells[r as usize][c as usize];
        assert_eq!(at(g, 2 * i), Some((t, 0)));
        assert_eq!(at(g, 2 * i + 1), Some((t, 1)));
        assert_eq!(at(g + 8, 2 * i), Some((t, 2)));
        assert_eq!(at(g + 8, 2 * i + 1), Some((t, 3)));
        assert_eq!(at(g, 2 * i + 8), Some((t, 4)));
        assert_eq!(at(g + 8, 2 * i + 9), Some((t, 7)));
    }
    insta::assert_snapshot!(
        "tv_svg_sm80_mma_a",
        picture::svg_tv_layout(&tv, &tile).unwrap()
    );
}
