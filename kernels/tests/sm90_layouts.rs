//! The Hopper path's derivations from a shared-memory layout, checked against independent
//! statements of what the hardware does: the TMA box and swizzle (element by element), the
//! wgmma descriptor fields, the accumulator fragment; the planner's limits; and snapshots of
//! the generated preamble. No GPU, no NVRTC.

use tessera_kernels::plan::{SmemLayout, SwizzleBits};
use tessera_kernels::sm90::codegen::preamble;
use tessera_kernels::sm90::layouts::{tma_box_for, wgmma_acc_layout, wgmma_desc_for, TmaSwizzle};
use tessera_kernels::sm90::{Schedule, Sm90Options, Sm90Plan};
use tessera_kernels::{DType, Epilogue, GemmProblem};

fn smem(bits: u32, base: u32, layout: &str) -> SmemLayout {
    SmemLayout {
        swizzle: SwizzleBits {
            bits,
            base,
            shift: 3,
        },
        layout: layout.parse().expect("layout"),
        atom: layout.parse().expect("layout"),
    }
}

/// Where the TMA unit puts element (r, c) of a box with rows of `span` bytes under the swizzle
/// of that span: the 16-byte chunk index within the row XOR the row's 128-byte line index
/// modulo the number of chunks a span holds (CUDA driver API, CUtensorMapSwizzle).
fn tma_byte(r: i64, c: i64, elem: i64, span: i64) -> i64 {
    let chunks = span / 16;
    let line = (r * span) / 128;
    let byte = c * elem;
    r * span + ((byte / 16) ^ (line % chunks)) * 16 + byte % 16
}

#[test]
fn tma_box_for_every_swizzle_and_element_size() {
    // (element bytes, swizzle bits, elements per row); base = 4 - log2(element bytes).
    for (elem, bits, base, cols) in [
        (2, 3, 3, 64),
        (2, 2, 3, 32),
        (2, 1, 3, 16),
        (4, 3, 2, 32),
        (1, 3, 4, 128),
        (4, 2, 2, 16),
    ] {
        for rows in [8, 64, 128, 256] {
            let s = smem(bits, base, &format!("({rows},{cols}):({cols},1)"));
            let b = tma_box_for(&s, elem).unwrap_or_else(|e| panic!("{s}: {e}"));
            let span = 16 << bits;
            assert_eq!(
                (b.inner, b.outer, b.bytes, b.align),
                (cols, rows, rows * span, 8 * span),
                "{s}"
            );
            assert_eq!(b.swizzle.span_bytes(), span);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(
                        s.offset(r, c).expect("offset") * elem,
                        tma_byte(r, c, elem, span),
                        "{s} at ({r},{c})"
                    );
                }
            }
            let d = wgmma_desc_for(&s, elem).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(
                (d.sbo_bytes, d.k_step_bytes, d.swizzle),
                (8 * span, 16 * elem, b.swizzle),
                "{s}"
            );
            // The descriptor's fields, decoded as the PTX ISA lays them out.
            let hi = d.hi_bits();
            assert_eq!(hi & 0x3FFF, 0, "start address left to the kernel");
            assert_eq!(((hi >> 16) & 0x3FFF) * 16, d.lbo_bytes as u64);
            assert_eq!(((hi >> 32) & 0x3FFF) * 16, d.sbo_bytes as u64);
            assert_eq!(
                (hi >> 49) & 0x7,
                0,
                "base offset 0: stages are aligned to the pattern"
            );
            let mode = match b.swizzle {
                TmaSwizzle::B128 => 1,
                TmaSwizzle::B64 => 2,
                TmaSwizzle::B32 => 3,
                TmaSwizzle::None => 0,
            };
            assert_eq!(hi >> 62, mode);
        }
    }
}

#[test]
fn layouts_tma_cannot_write_are_errors() {
    let bad = [
        (smem(3, 3, "(128,64):(72,1)"), "padded row pitch"),
        (smem(3, 3, "(128,64):(1,128)"), "MN-major"),
        (smem(3, 3, "(128,32):(32,1)"), "rows shorter than the span"),
        (smem(2, 3, "(128,64):(64,1)"), "rows longer than the span"),
        (smem(3, 2, "(128,64):(64,1)"), "swizzle on 8-byte units"),
        (
            SmemLayout {
                swizzle: SwizzleBits {
                    bits: 3,
                    base: 3,
                    shift: 4,
                },
                ..smem(3, 3, "(128,64):(64,1)")
            },
            "shift 4",
        ),
        (smem(4, 3, "(128,128):(128,1)"), "a 256-byte swizzle"),
        (smem(3, 3, "(512,64):(64,1)"), "512 rows"),
        (smem(3, 3, "(12,64):(64,1)"), "rows not whole atoms"),
        (smem(3, 3, "((8,16),64):((64,512),1)"), "hierarchical rows"),
    ];
    for (s, why) in &bad {
        assert!(tma_box_for(s, 2).is_err(), "{why}: {s} accepted");
        assert!(
            wgmma_desc_for(s, 2).is_err(),
            "{why}: {s} accepted by wgmma_desc_for"
        );
    }
    // TMA can write an unswizzled tile, but wgmma reads K-major operands as rows only swizzled.
    let plain = smem(0, 3, "(64,64):(64,1)");
    assert_eq!(
        tma_box_for(&plain, 2).expect("box").swizzle,
        TmaSwizzle::None
    );
    assert!(wgmma_desc_for(&plain, 2).is_err());
}

#[test]
fn accumulator_fragment_matches_the_ptx_formula() {
    for n in (8..=256).step_by(8) {
        let acc = wgmma_acc_layout(n).expect("layout");
        assert_eq!(acc.size(), 64 * n);
        let mut seen = vec![false; (64 * n) as usize];
        for t in 0..128 {
            for i in 0..n / 2 {
                let (w, l) = (t / 32, t % 32);
                let row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
                let col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
                let idx = acc
                    .eval(&format!("({t},{i})").parse().expect("coord"))
                    .expect("eval");
                assert_eq!(
                    (idx % 64, idx / 64),
                    (row, col),
                    "N = {n}, thread {t}, register {i}"
                );
                assert!(!seen[idx as usize]);
                seen[idx as usize] = true;
            }
        }
    }
    for n in [0, 4, 12, 264] {
        assert!(wgmma_acc_layout(n).is_err(), "N = {n}");
    }
}

#[test]
fn planner_limits() {
    let p = GemmProblem::new(4096, 4096, 4096);
    for (tile, schedule) in [
        ((128, 256), None),
        ((128, 128), Some(Schedule::PingPong)),
        ((64, 64), None),
        ((128, 192), None),
    ] {
        let plan = Sm90Plan::with_options(
            &p,
            Sm90Options {
                tile: Some(tile),
                schedule,
                ..Default::default()
            },
        )
        .expect("plan");
        assert!(plan.smem_bytes <= 232_448 && plan.stages >= 2, "{plan}");
        assert_eq!(plan.threads, 128 * (plan.consumers + 1));
    }
    let refuse = [
        Sm90Options {
            tile: Some((256, 128)),
            ..Default::default()
        },
        Sm90Options {
            tile: Some((128, 48)),
            ..Default::default()
        },
        Sm90Options {
            tile: Some((128, 256)),
            schedule: Some(Schedule::PingPong),
            ..Default::default()
        },
        Sm90Options {
            tile: Some((64, 128)),
            schedule: Some(Schedule::PingPong),
            ..Default::default()
        },
        Sm90Options {
            stages: Some(1),
            ..Default::default()
        },
        Sm90Options {
            stages: Some(5),
            ..Default::default()
        },
        Sm90Options {
            group_m: Some(0),
            ..Default::default()
        },
    ];
    for o in refuse {
        assert!(Sm90Plan::with_options(&p, o).is_err(), "{o:?}");
    }
    let mut f32_in = p;
    f32_in.input = DType::F32;
    assert!(Sm90Plan::new(&f32_in).is_err());
    assert!(Sm90Plan::new(&GemmProblem::new(0, 8, 8)).is_err());
}

#[test]
fn generated_preamble_snapshots() {
    let mut p = GemmProblem::new(4096, 4096, 4096);
    insta::assert_snapshot!(
        "sm90_preamble_128x256",
        preamble(&Sm90Plan::new(&p).expect("plan"))
    );
    p.epilogue = Epilogue::parse("bias,gelu_tanh,aux").expect("epilogue");
    let pp = Sm90Options {
        tile: Some((128, 128)),
        schedule: Some(Schedule::PingPong),
        ..Default::default()
    };
    insta::assert_snapshot!(
        "sm90_preamble_pingpong_gelu_aux",
        preamble(&Sm90Plan::with_options(&p, pp).expect("plan"))
    );
}
