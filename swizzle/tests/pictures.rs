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
