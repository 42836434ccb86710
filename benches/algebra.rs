//! Criterion benchmarks of the layout algebra on the layouts a GEMM planner builds: a
//! 128x64 row-major bf16 tile, its 16x8 sub-tiles, and the thread-value layout of an
//! `mma.m16n8k16` operand.
//!
//! Run: `cargo bench --bench algebra -- --warm-up-time 1 --measurement-time 2`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tessera_layout::{
    coalesce, complement, composition, logical_divide, zipped_divide, IntTuple, Layout, Tiler,
};

fn layout(s: &str) -> Layout {
    s.parse().expect("a valid layout")
}

fn algebra(c: &mut Criterion) {
    // A 128x64 bf16 tile in row-major order.
    let tile = layout("(128,64):(64,1)");
    // The thread-value layout of the A operand of mma.m16n8k16 (32 threads x 8 values into a
    // 16x16 column-major tile).
    let tv = layout("((4,8),(2,2,2)):((32,1),(16,8,128))");
    // A 16x16 sub-tile of the row-major tile.
    let sub = layout("(16,16):(64,1)");
    let warp_tile: Tiler = "<16:1, 8:1>".parse().unwrap();
    let cta_tiler: Tiler = "<(16,8):(1,16), 8:1>".parse().unwrap();
    let block_16x8 = layout("(16,8):(64,1)");
    let cotarget = IntTuple::Int(128 * 64);
    let divided = logical_divide(&tile, &warp_tile).unwrap();
    let col_16x8 = layout_16x8();

    let mut g = c.benchmark_group("algebra");
    g.bench_function("composition sub-tile o mma TV", |b| {
        b.iter(|| composition(black_box(&sub), black_box(&tv)).unwrap())
    });
    g.bench_function("composition tile o 16x8 block", |b| {
        b.iter(|| composition(black_box(&tile), black_box(&col_16x8)).unwrap())
    });
    g.bench_function("complement 16x8 block in 128x64", |b| {
        b.iter(|| complement(black_box(&block_16x8), black_box(&cotarget)).unwrap())
    });
    g.bench_function("logical_divide 128x64 by <16,8>", |b| {
        b.iter(|| logical_divide(black_box(&tile), black_box(&warp_tile)).unwrap())
    });
    g.bench_function("zipped_divide 128x64 by <(16,8):(1,16),8>", |b| {
        b.iter(|| zipped_divide(black_box(&tile), black_box(&cta_tiler)).unwrap())
    });
    g.bench_function("coalesce mma TV", |b| b.iter(|| coalesce(black_box(&tv))));
    g.bench_function("coalesce divided tile", |b| {
        b.iter(|| coalesce(black_box(&divided)))
    });
    g.finish();
}

/// A column-major 16x8 layout (the tile B of a composition).
fn layout_16x8() -> Layout {
    Layout::new(IntTuple::flat([16, 8]), IntTuple::flat([1, 16])).unwrap()
}

criterion_group!(benches, algebra);
criterion_main!(benches);
