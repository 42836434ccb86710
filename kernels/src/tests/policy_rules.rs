//! The planner's tuned rules (`plan::policy`, crate-internal), each on the values its
//! documentation states: the examples the rules' documentation gave, as unit tests.

/// What [`crate::plan::policy::Decision`] decides, on the values its documentation states.
#[test]
fn decision_rule() {
    use crate::plan::policy::hopper_cluster;
    let d = hopper_cluster();
    assert_eq!(d.value, 1);
    assert!(d.why.contains("design 010"));
}

/// What [`crate::plan::policy::intensity`] decides, on the values its documentation states.
#[test]
fn intensity_rule() {
    use crate::plan::{policy::intensity, GemmProblem};
    // 2 x 4096³ FLOPs over three 32 MiB operands.
    assert!((intensity(&GemmProblem::new(4096, 4096, 4096)) - 4096.0 / 3.0).abs() < 1e-9);
}

/// What [`crate::plan::policy::memory_bound`] decides, on the values its documentation states.
#[test]
fn memory_bound_rule() {
    use crate::plan::{policy::memory_bound, GemmProblem};
    assert!(memory_bound(&GemmProblem::new(16, 4096, 4096))); // a decode step
    assert!(!memory_bound(&GemmProblem::new(4096, 4096, 4096)));
}

/// What [`crate::plan::policy::min_bytes`] decides, on the values its documentation states.
#[test]
fn min_bytes_rule() {
    use crate::plan::{policy::min_bytes, GemmProblem};
    assert_eq!(
        min_bytes(&GemmProblem::new(16, 4096, 4096)),
        2.0 * (16.0 * 4096.0 * 2.0 + 4096.0 * 4096.0)
    );
}

/// What [`crate::plan::policy::exact_width`] and the exact-width tiles of
/// [`crate::plan::policy::hopper_tile`] decide, on the values their documentation states.
#[test]
fn exact_width_rule() {
    use crate::plan::{
        policy::{exact_width, hopper_tile, EXACT_WIDTH_MIN_TILES},
        GemmProblem,
    };
    let widths: Vec<Option<i64>> = [
        64, 65, 96, 97, 128, 129, 160, 200, 224, 225, 256, 288, 320, 384, 448, 449, 600, 1100,
        1568, 1600, 5000,
    ]
    .iter()
    .map(|&n| exact_width(n))
    .collect();
    assert_eq!(
        widths,
        [
            None,
            Some(96),
            Some(96),
            None,
            None,
            Some(160),
            Some(160),
            Some(224),
            Some(224),
            None,
            None,
            Some(160),
            Some(160),
            None,
            Some(224),
            None,
            Some(224),
            Some(224),
            Some(224),
            None,
            None
        ]
    );
    let tile = |m, n, k| hopper_tile(&GemmProblem::new(m, n, k), false).value;
    // A 3x3 convolution with 96 and 160 output channels (M = N·P·Q = 256·28·28).
    assert_eq!(tile(200704, 96, 1152), (128, 96));
    assert_eq!(tile(200704, 160, 1152), (128, 160));
    // N above 128 from EXACT_WIDTH_MIN_TILES tiles; N up to 96 from half the SMs' worth.
    assert_eq!(tile(128 * EXACT_WIDTH_MIN_TILES, 192, 8192), (128, 192));
    assert_ne!(tile(128 * (EXACT_WIDTH_MIN_TILES - 1), 192, 8192).1, 192);
    assert_eq!(tile(128 * 66, 96, 4096), (128, 96));
    assert_ne!(tile(4096, 96, 8192).1, 96);
    // Two balanced columns: N = 320 in two of 160, not three of 128.
    assert_eq!(tile(16384, 320, 4096), (128, 160));
    // Widths the standard tiles fill keep the other rules.
    assert_eq!(tile(200704, 128, 1152).1 % 128, 0);
}

/// What [`crate::plan::policy::hopper_tile`] decides, on the values its documentation states.
#[test]
fn hopper_tile_rule() {
    use crate::plan::policy::hopper_tile;
    use crate::plan::GemmProblem;
    assert_eq!(
        hopper_tile(&GemmProblem::new(16, 4096, 4096), false).value,
        (64, 128)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(1024, 1024, 1024), false).value,
        (128, 128)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(8192, 8192, 8192), false).value,
        (128, 256)
    );
    // 144 tiles of 128 x 256 are two waves, the second nearly empty, and 8 k-tiles are too
    // few to split it: 288 tiles of 128 x 128 in three waves take less time.
    assert_eq!(
        hopper_tile(&GemmProblem::new(2048, 2304, 512), false).value,
        (128, 128)
    );
    // Long K against a small D: 32 tiles of 128 x 256 split in 4 whole parts each.
    assert_eq!(
        hopper_tile(&GemmProblem::new(1024, 1024, 65536), false).value,
        (128, 256)
    );
    // ... but 72 (cut across tiles) do not: 128 x 128 makes 144 tiles, over one wave, and
    // 120 of 128 x 160 fit one; 8 (16 parts) keep 128 x 128 ...
    assert_eq!(
        hopper_tile(&GemmProblem::new(768, 3072, 8192), false).value,
        (128, 160)
    );
    // The narrowest width whose tiles fit one wave: 1170 x 2100 in 128 x 160 makes 140
    // tiles, in 128 x 192 110; 354 x 8632 in 128 x 224 117 (where 128 x 256's 102 were one
    // wide wave); memory-bound or with rows off the sector grid, not.
    assert_eq!(
        hopper_tile(&GemmProblem::new(1170, 2100, 7168), false).value,
        (128, 192)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(354, 8632, 1120), false).value,
        (128, 224)
    );
    assert_ne!(
        hopper_tile(&GemmProblem::new(1040, 2064, 8968), false).value,
        (128, 160)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(512, 512, 131072), false).value,
        (128, 128)
    );
    // ... as does N = 640, which pads a 256-wide tile's columns (3 x 256 against 5 x 128);
    // K = 4096 does not take 128 x 256 either (4 parts a tile of 16 k-tiles each), and its 64
    // tiles of 128 x 128 would split in parts of 32 k-tiles, so 128 of 64 x 128 run whole.
    assert_eq!(
        hopper_tile(&GemmProblem::new(1536, 640, 65536), false).value,
        (128, 128)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(1024, 1024, 4096), false).value,
        (64, 128)
    );
    // N <= 64: the 64-wide tile, as many tiles, no columns of zeros.
    assert_eq!(
        hopper_tile(&GemmProblem::new(401408, 64, 576), false).value,
        (128, 64)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(4096, 40, 4096), false).value,
        (128, 64)
    );
    // N <= 32: the 32-wide tile (a 3x3 convolution to 32 channels at 112 x 112, N = 128).
    assert_eq!(
        hopper_tile(&GemmProblem::new(1605632, 32, 288), false).value,
        (128, 32)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(48, 64, 4096), false).value,
        (64, 64)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(48, 65, 4096), false).value,
        (64, 128)
    );
    // (Memory-bound: 64 tiles of 64 x 128, split in two parts each, against 32 of 128 x 128.)
    assert_eq!(
        hopper_tile(&GemmProblem::new(4096, 65, 4096), false).value,
        (64, 128)
    );
    // Whole tiles only (the im2col load): 196 tiles of 128 x 256 in two waves, 74% full,
    // against 392 of 128 x 128 in three, 99% full; with stream-K the last wave is split.
    let c5a = GemmProblem::new(256 * 49, 512, 4608);
    assert_eq!(
        crate::plan::policy::hopper_tile(&c5a, true).value,
        (128, 128)
    );
    assert_eq!(hopper_tile(&c5a, false).value, (128, 256));
    // A single wave of 128 x 128 tiles split in short parts (52 tiles in 2 parts of 36
    // k-tiles) against 100 whole tiles of 64 x 128: the smaller tile ...
    assert_eq!(
        hopper_tile(&GemmProblem::new(1568, 512, 4608), false).value,
        (64, 128)
    );
    // ... but not where the parts are long (64 tiles in 2 parts of 112 k-tiles) or where the
    // 64-row tiles would not run whole (96 of them leave 35 k-tiles a CTA idle: split too).
    assert_eq!(
        hopper_tile(&GemmProblem::new(256, 4096, 14336), false).value,
        (128, 128)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(1536, 512, 8192), false).value,
        (128, 128)
    );
    // Where the kernel runs whole tiles only, the 52 tiles of 128 x 128 would keep 52 SMs
    // busy: the half-empty wave's rule takes the 100 of 64 x 128.
    assert_eq!(
        hopper_tile(&GemmProblem::new(1568, 512, 4608), true).value,
        (64, 128)
    );
    // A single wave of whole 128 x 128 tiles on at most half the SMs (48, 63): 64 x 128 ...
    assert_eq!(
        hopper_tile(&GemmProblem::new(768, 1024, 2048), false).value,
        (64, 128)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(1152, 896, 2560), false).value,
        (64, 128)
    );
    // ... but not with 16 k-tiles (1024³ above), nor with rows of A and B off the 32-byte
    // sector grid (K = 2200: 4400-byte rows), nor where 128 x 128 keeps more than half the
    // SMs busy (72 tiles).
    assert_eq!(
        hopper_tile(&GemmProblem::new(700, 1100, 2200), false).value,
        (128, 128)
    );
    assert_eq!(
        hopper_tile(&GemmProblem::new(1152, 1024, 2048), false).value,
        (128, 128)
    );
    // Fewer 128 x 256 tiles than SMs but more 128 x 128 ones, and no width between whose
    // tiles fit one wave (2048 x 2048: 208, 176 and 160 tiles of 160, 192 and 224): one wave of
    // the wider tile (128 tiles) against two of the narrower, where stream-K leaves the wave
    // whole.
    assert_eq!(
        hopper_tile(&GemmProblem::new(2048, 2048, 32768), false).value,
        (128, 256)
    );
    // N = 128: 128 x 256 computes half zeros.
    let mut batched = GemmProblem::new(2048, 128, 2048);
    batched.batch = 32;
    assert_eq!(hopper_tile(&batched, false).value, (128, 128));
}

/// What [`crate::plan::policy::hopper_pingpong`] decides, on the values its documentation states.
#[test]
fn hopper_pingpong_rule() {
    use crate::plan::policy::hopper_pingpong;
    use crate::plan::GemmProblem;
    assert!(hopper_pingpong(&GemmProblem::new(4096, 4096, 4096)).value);
    assert!(!hopper_pingpong(&GemmProblem::new(8192, 8192, 8192)).value); // 128 k-tiles
    assert!(!hopper_pingpong(&GemmProblem::new(4000, 4000, 4000)).value); // edge tiles
}

/// What [`crate::plan::policy::tree_pingpong`] decides, on the values its documentation states.
#[test]
fn tree_pingpong_rule() {
    use crate::plan::policy::tree_pingpong;
    assert!(tree_pingpong(true, true, false).value);
    assert!(!tree_pingpong(true, false, false).value); // GELU_BIAS
    assert!(!tree_pingpong(false, true, false).value);
}

/// What [`crate::plan::policy::hopper_stages`] decides, on the values its documentation states.
#[test]
fn hopper_stages_rule() {
    use crate::plan::policy::hopper_stages;
    assert_eq!((hopper_stages(4).value, hopper_stages(9).value), (4, 6));
}

/// What [`crate::plan::policy::hopper_group_m`] decides, on the values its documentation states.
#[test]
fn hopper_group_m_rule() {
    assert_eq!(crate::plan::policy::hopper_group_m().value, 8);
}

/// What [`crate::plan::policy::hopper_cluster`] decides, on the values its documentation states.
#[test]
fn hopper_cluster_rule() {
    assert_eq!(crate::plan::policy::hopper_cluster().value, 1);
}

/// What [`crate::plan::policy::hopper_stream_k`] decides, on the values its documentation states.
#[test]
fn hopper_stream_k_rule() {
    use crate::plan::policy::hopper_stream_k;
    assert!(hopper_stream_k(true, 1).value);
    assert!(!hopper_stream_k(false, 1).value && !hopper_stream_k(true, 2).value);
}

/// What [`crate::plan::policy::stream_k_split`] decides, on the values its documentation states.
#[test]
fn stream_k_split_rule() {
    use crate::plan::policy::stream_k_split;
    // 8192 x 14336 x 4096 in 128 x 256 tiles: 27 waves and 20 tiles, 54 k-tiles idle.
    assert_eq!(
        stream_k_split(3584, 132, 132, 64, 32, false, true).value,
        20
    );
    // 768 x 3072 x 8192 in 128 x 128 tiles: 12 tiles cut over 132 CTAs alone would have 11
    // parts each (8 or more), so the 132 tiles before them join the run (144 tiles, 139.6
    // k-tiles a CTA: at most two parts a tile) ...
    assert_eq!(
        stream_k_split(144, 132, 132, 128, 32, false, true).value,
        144
    );
    // ... unless the wave's operands are too large for L2 to keep between the scattered runs.
    assert_eq!(
        stream_k_split(144, 132, 132, 128, 32, false, false).value,
        12
    );
    // 16 tiles of 16 k-tiles on 7 CTAs, forced: 2 tiles would take 3.5 parts each: alone.
    assert_eq!(stream_k_split(16, 7, 132, 16, 0, false, true).value, 2);
    // 65 tiles of 32 k-tiles on 8 CTAs, forced: the last tile would take 8 parts: with the
    // 8 before it.
    assert_eq!(stream_k_split(65, 8, 132, 32, 0, false, true).value, 9);
    // 4096³: the last wave 116 / 132 full leaves 7.8 k-tiles idle.
    assert_eq!(stream_k_split(512, 132, 132, 64, 32, false, true).value, 0);
    // 16 x 4096 x 4096 in 64 x 128 tiles: 32 tiles on 132 SMs, all split.
    assert_eq!(stream_k_split(32, 132, 132, 64, 32, true, true).value, 32);
    // Memory-bound, 86 of 132 SMs busy and 22 k-tiles idle: whole.
    assert_eq!(stream_k_split(86, 132, 132, 64, 32, true, true).value, 0);
}

/// What [`crate::plan::policy::stream_k_join_fits`] decides: the bytes of A and B a wave's
/// tiles read over K, against the bound.
#[test]
fn stream_k_join_fits_rule() {
    use crate::plan::policy::{stream_k_join_fits, STREAM_K_JOIN_MAX_BYTES};
    // 768 x 3072 x 8192 in 128 x 128 tiles: 6 tile rows (all of A, 12.6 MB) and 22 of 24
    // columns (46.1 MB).
    let d = stream_k_join_fits((768, 3072, 8192, 1), (128, 128), 8, 132, 2);
    assert!(d.value, "{}", d.why);
    assert!(
        d.why
            .contains("6 tile rows and 22 tile columns read 58.7 MB"),
        "{}",
        d.why
    );
    // 392 x 12160 x 15840 in 128 x 256 tiles: 4 rows (392 of A's), 33 columns: 280.1 MB.
    let d = stream_k_join_fits((392, 12160, 15840, 1), (128, 256), 8, 132, 2);
    assert!(!d.value && d.why.contains("280.1 MB"), "{}", d.why);
    // One row of A and one of B, exactly at the bound and one element over it.
    let k = STREAM_K_JOIN_MAX_BYTES / 2 / 2;
    assert!(stream_k_join_fits((1, 1, k, 1), (128, 128), 8, 132, 2).value);
    assert!(!stream_k_join_fits((1, 1, k + 1, 1), (128, 128), 8, 132, 2).value);
    // A batch of 64 small products: a wave of 132 tiles reaches 3 batches of 64 tiles.
    let d = stream_k_join_fits((1024, 1024, 4096, 64), (128, 128), 8, 132, 2);
    assert!(d.why.contains("50.3 MB"), "{}", d.why);
}

/// What [`crate::plan::policy::single_wave_grid`] decides, on the values its documentation states.
#[test]
fn single_wave_grid_rule() {
    use crate::plan::policy::single_wave_grid;
    // 64 x 1024 x 4096 in 64 x 128 tiles: 8 tiles of 64 k-tiles in 4 parts of 16 (over 32
    // CTAs), not 16 parts of 4: a part keeps STREAM_K_FIXUP_SHARE k-tiles per partial sum
    // its tile's last part adds in.
    assert_eq!(single_wave_grid(8, 132, 64, 32, true).value, Some(32));
    // 16 x 128 k-tiles: 6 parts of 21 (7 of 18 would add 6 sums, 4 x 6 > 18); long parts keep
    // the count the SMs allow (16 tiles of 2048 k-tiles in 8).
    assert_eq!(single_wave_grid(16, 132, 128, 32, true).value, Some(96));
    assert_eq!(single_wave_grid(16, 132, 2048, 32, false).value, Some(128));
    // A whole number of parts a tile (4 x 32, 3 x 36), unless that is one.
    assert_eq!(single_wave_grid(32, 132, 64, 32, true).value, Some(128));
    assert_eq!(single_wave_grid(32, 132, 1024, 32, false).value, Some(128));
    assert_eq!(single_wave_grid(36, 132, 256, 32, false).value, Some(108));
    assert_eq!(single_wave_grid(72, 132, 128, 32, false).value, Some(132));
    assert_eq!(single_wave_grid(200, 132, 64, 32, true).value, None); // more than a wave
    assert_eq!(single_wave_grid(2, 132, 3, 32, false).value, None); // 6 k-tiles in all
}

/// What [`crate::plan::policy::stream_k_part_order`] decides, and where a plan's single wave
/// of whole parts is numbered part by part (its text says which).
#[test]
fn stream_k_part_order_rule() {
    use crate::plan::policy::stream_k_part_order;
    use crate::plan::{GemmProblem, Sm90Plan};
    assert_eq!(stream_k_part_order(false, 128).value, 3);
    assert_eq!(stream_k_part_order(false, 256).value, 8);
    assert_eq!(stream_k_part_order(true, 128).value, 8);
    let text = |m, n, k| {
        Sm90Plan::new(&GemmProblem::new(m, n, k))
            .unwrap()
            .to_string()
    };
    // 16 tiles of 128 x 128 in 8 parts; 32 in 4, compute-bound: part by part.
    assert!(text(512, 512, 131072).contains("numbered part by part"));
    assert!(text(1024, 512, 65536).contains("numbered part by part"));
    // 25 tiles in 5 parts and 36 in 3, which do not divide their k-tiles (the cut still
    // falls on the tiles' boundaries): part by part; 48 tiles in 2: tile by tile.
    assert!(text(640, 640, 65536).contains("numbered part by part"));
    assert!(text(768, 768, 16384).contains("numbered part by part"));
    assert!(text(1024, 768, 16384).contains("numbered tile by tile"));
    // 8 tiles of 64 x 128 in 16 parts, memory-bound: part by part.
    assert!(text(256, 256, 262144).contains("numbered part by part"));
    // A decode batch, 32 tiles in 4 parts, memory-bound; 128 x 256 tiles in 4 parts.
    assert!(text(16, 4096, 4096).contains("numbered tile by tile"));
    assert!(text(1024, 1024, 32768).contains("numbered tile by tile"));
}

/// What [`crate::plan::policy::sm80_tile`] decides, on the values its documentation states.
#[test]
fn sm80_tile_rule() {
    use crate::plan::{policy::sm80_tile, GemmProblem};
    assert_eq!(
        sm80_tile(&GemmProblem::new(8192, 8192, 8192)).value,
        (128, 256, 64)
    );
    assert_eq!(
        sm80_tile(&GemmProblem::new(1000, 1000, 1000)).value,
        (128, 128, 64)
    );
}

/// What [`crate::plan::policy::sm80_stages`] decides, on the values its documentation states.
#[test]
fn sm80_stages_rule() {
    use crate::plan::policy::sm80_stages;
    assert_eq!((sm80_stages(2).value, sm80_stages(5).value), (2, 3));
}
