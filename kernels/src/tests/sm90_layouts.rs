//! The Hopper path's derivations from a shared-memory layout, checked against independent
//! statements of what the hardware does: the TMA box and swizzle (element by element), the
//! wgmma descriptor fields, the accumulator fragment; the planner's limits; and snapshots of
//! the generated preamble. No GPU, no NVRTC.

use tessera_kernels::codegen::sm90::preamble;
use tessera_kernels::plan::sm90_layouts::{
    tma_box_for, tma_split_for, wgmma_acc_layout, wgmma_desc_for, TmaSwizzle,
};
use tessera_kernels::plan::{ClusterShare, Schedule, Sm90Options, Sm90Plan};
use tessera_kernels::plan::{SmemLayout, SwizzleBits};
use tessera_kernels::{BiasMode, DType, Epilogue, GemmProblem};
use tessera_layout::IntTuple;

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
        ((64, 256), Some(Schedule::PingPong)),
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
            tile: Some((128, 192)),
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
        // The cp.async load of A and B runs without a cluster (multicast is TMA's).
        Sm90Options {
            cp_async_ab: true,
            cluster: Some(2),
            ..Default::default()
        },
    ];
    // ... and by itself it plans.
    let cp = Sm90Options {
        cp_async_ab: true,
        ..Default::default()
    };
    assert!(Sm90Plan::with_options(&p, cp).expect("plan").cp_async_ab);
    for o in refuse {
        assert!(Sm90Plan::with_options(&p, o).is_err(), "{o:?}");
    }
    let mut f32_in = p;
    f32_in.input = DType::F32;
    assert!(Sm90Plan::new(&f32_in).is_err());
    assert!(Sm90Plan::new(&GemmProblem::new(0, 8, 8)).is_err());
}

#[test]
fn tma_split_for_writes_the_layout_part_by_part() {
    // Every operand tile the planner makes (64 or 128 rows of A, 32..=256 of B), in 2 parts;
    // and 4 parts where the rows allow.
    for (elem, bits, base, cols) in [(2, 3, 3, 64), (2, 2, 3, 32), (4, 3, 2, 32)] {
        let span = 16 << bits;
        for rows in (32..=256).step_by(32) {
            let s = smem(bits, base, &format!("({rows},{cols}):({cols},1)"));
            for parts in [2, 4] {
                let split = tma_split_for(&s, elem, parts).unwrap_or_else(|e| panic!("{s}: {e}"));
                let part_rows = rows / parts;
                assert_eq!(split.parts, parts);
                assert_eq!(
                    (split.part.inner, split.part.outer, split.part.bytes),
                    (cols, part_rows, part_rows * span),
                    "{s}"
                );
                assert_eq!(split.part.swizzle.span_bytes(), span);
                // Parts lie back to back, each on a whole swizzle period.
                assert_eq!(split.stride_bytes, split.part.bytes);
                assert_eq!(split.stride_bytes % (8 * span), 0);
                // The TMA unit writes part p's element (r, c) where the layout has row
                // p * part_rows + r.
                for p in 0..parts {
                    for r in 0..part_rows {
                        for c in 0..cols {
                            assert_eq!(
                                p * split.stride_bytes + tma_byte(r, c, elem, span),
                                s.offset(p * part_rows + r, c).expect("offset") * elem,
                                "{s}, part {p}, ({r},{c})"
                            );
                        }
                    }
                }
            }
        }
    }
    // Parts that are not whole 8-row atoms, unequal parts, no parts.
    for (rows, parts) in [(8, 2), (24, 2), (64, 3), (64, 0), (32, 8)] {
        let s = smem(3, 3, &format!("({rows},64):(64,1)"));
        assert!(
            tma_split_for(&s, 2, parts).is_err(),
            "{s} in {parts} parts accepted"
        );
    }
}

fn cluster(tile: (i64, i64), share: Option<ClusterShare>) -> Sm90Options {
    Sm90Options {
        tile: Some(tile),
        cluster: Some(2),
        share,
        ..Default::default()
    }
}

#[test]
fn cluster_plans_split_the_shared_operand() {
    let p = GemmProblem::new(4096, 4096, 4096);
    for bm in [64, 128] {
        for bn in (32..=256).step_by(32) {
            let single = Sm90Plan::with_options(
                &p,
                Sm90Options {
                    tile: Some((bm, bn)),
                    ..Default::default()
                },
            )
            .expect("plan");
            assert_eq!((single.cluster, single.share), (1, None));
            assert!(single.a.multicast.is_none() && single.b.multicast.is_none());
            for share in [ClusterShare::A, ClusterShare::B] {
                let plan = Sm90Plan::with_options(&p, cluster((bm, bn), Some(share)))
                    .unwrap_or_else(|e| panic!("{bm}x{bn} sharing {share}: {e}"));
                assert_eq!((plan.cluster, plan.share), (2, Some(share)));
                // Shared memory and pipeline as without the cluster.
                assert_eq!(
                    (plan.smem_bytes, plan.stages, plan.a.tma, plan.b.tma),
                    (single.smem_bytes, single.stages, single.a.tma, single.b.tma)
                );
                let (shared, other) = match share {
                    ClusterShare::A => (&plan.a, &plan.b),
                    ClusterShare::B => (&plan.b, &plan.a),
                };
                assert!(other.multicast.is_none());
                assert_eq!(other.load_box(), other.tma);
                let m = shared.multicast.expect("split");
                assert_eq!(m.part.outer * 2, shared.tile_mn);
                assert_eq!(m.part.bytes * 2, shared.tma.bytes);
                assert_eq!((m.stride_bytes, m.stride_bytes % 1024), (m.part.bytes, 0));
                assert_eq!(shared.load_box(), m.part);
                assert!(plan
                    .kernel_name()
                    .contains(&format!("_c2{}", share.to_string().to_lowercase())));
                let shown = plan.to_string();
                assert!(
                    shown.contains("cluster      2 CTAs") && shown.contains("multicast"),
                    "{shown}"
                );
            }
        }
    }
    // Default share: the larger tile, B on a tie.
    for (tile, share) in [
        ((128, 256), ClusterShare::B),
        ((128, 128), ClusterShare::B),
        ((128, 64), ClusterShare::A),
    ] {
        let plan = Sm90Plan::with_options(&p, cluster(tile, None)).expect("plan");
        assert_eq!(plan.share, Some(share), "{tile:?}");
    }
}

#[test]
fn cluster_tiles_round_the_paired_dimension_up() {
    // 1000 x 1300 in 128 x 256 tiles: 8 x 6 tiles; 300 x 300 in 128 x 128: 3 x 3 (odd both ways).
    let p = GemmProblem::new(1000, 1300, 64);
    let a = Sm90Plan::with_options(&p, cluster((128, 256), Some(ClusterShare::A))).expect("plan");
    let b = Sm90Plan::with_options(&p, cluster((128, 256), Some(ClusterShare::B))).expect("plan");
    assert_eq!(
        (a.cluster_grid_tiles(), b.cluster_grid_tiles()),
        ((8, 3), (4, 6))
    );
    let mut p = GemmProblem::new(300, 300, 64);
    p.batch = 3;
    let a = Sm90Plan::with_options(&p, cluster((128, 128), Some(ClusterShare::A))).expect("plan");
    let b = Sm90Plan::with_options(&p, cluster((128, 128), Some(ClusterShare::B))).expect("plan");
    assert_eq!(
        (a.cluster_grid_tiles(), b.cluster_grid_tiles()),
        ((3, 2), (2, 3))
    );
    assert_eq!((a.total_tiles(), a.total_cluster_tiles()), (27, 18));
    let single = Sm90Plan::new(&p).expect("plan");
    assert_eq!(single.cluster_grid_tiles(), single.grid_tiles());
}

#[test]
fn cluster_refusals() {
    let p = GemmProblem::new(4096, 4096, 4096);
    let refuse = [
        (
            Sm90Options {
                cluster: Some(3),
                ..Default::default()
            },
            "3 CTAs",
        ),
        (
            Sm90Options {
                cluster: Some(0),
                ..Default::default()
            },
            "0 CTAs",
        ),
        (
            Sm90Options {
                share: Some(ClusterShare::A),
                ..Default::default()
            },
            "a share without a cluster",
        ),
        (
            Sm90Options {
                cluster: Some(1),
                share: Some(ClusterShare::B),
                ..Default::default()
            },
            "a share with a cluster of 1",
        ),
        (
            Sm90Options {
                schedule: Some(Schedule::PingPong),
                ..cluster((128, 128), Some(ClusterShare::A))
            },
            "ping-pong",
        ),
    ];
    for (o, why) in refuse {
        let e = Sm90Plan::with_options(&p, o).expect_err(why);
        eprintln!("{why}: {e}");
    }
    assert!("c".parse::<ClusterShare>().is_err());
    assert_eq!("b".parse::<ClusterShare>().expect("share"), ClusterShare::B);
}

#[test]
fn generated_preamble_snapshots() {
    let mut p = GemmProblem::new(4096, 4096, 4096);
    let coop = Sm90Options {
        schedule: Some(Schedule::Cooperative),
        ..Default::default()
    };
    insta::assert_snapshot!(
        "sm90_preamble_128x256",
        preamble(&Sm90Plan::with_options(&p, coop).expect("plan"))
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
    let p = GemmProblem::new(4096, 4096, 4096);
    insta::assert_snapshot!(
        "sm90_preamble_cluster_share_a",
        preamble(
            &Sm90Plan::with_options(&p, cluster((128, 256), Some(ClusterShare::A))).expect("plan")
        )
    );
    insta::assert_snapshot!(
        "sm90_preamble_cluster_share_b",
        preamble(
            &Sm90Plan::with_options(&p, cluster((128, 256), Some(ClusterShare::B))).expect("plan")
        )
    );
}

/// Banks (4-byte words mod 32) hit more than once by one warp's store of register pair `k`
/// (lanes 0-31 of consumer warp `w`, one 4-byte column pair each), through `off(row, col)`
/// in 16-bit elements: the busiest bank's count.
fn busiest_bank(
    acc: &tessera_layout::Layout,
    w: i64,
    k: i64,
    off: &dyn Fn(i64, i64) -> i64,
) -> i64 {
    let mut per_bank = [0i64; 32];
    for lane in 0..32 {
        let x = acc
            .eval(&tessera_layout::IntTuple::flat([32 * w + lane, k]))
            .unwrap();
        let (row, col) = (x % 64, (x / 64) % 32);
        per_bank[((off(row, col) * 2 / 4) % 32) as usize] += 1;
    }
    per_bank.into_iter().max().unwrap()
}

#[test]
fn store_fragment_is_conflict_free_for_every_register_pair() {
    let p = GemmProblem::new(512, 512, 512);
    for bn in (32..=256).step_by(32) {
        let opts = Sm90Options {
            tile: Some((128, bn)),
            ..Default::default()
        };
        let plan = Sm90Plan::with_options(&p, opts).unwrap();
        let st = plan
            .store
            .as_ref()
            .expect("a bf16 plain plan has the TMA store");
        assert_eq!(st.tma.swizzle, TmaSwizzle::B64, "{bn}");
        assert_eq!((st.tma.inner, st.tma.outer, st.tma.bytes), (32, 64, 4096));
        assert_eq!(st.conflicts.wavefronts, st.conflicts.ideal);
        // Every register pair of every pass and warp: one word per bank.
        let swizzled = |r: i64, c: i64| st.smem.offset(r, c).unwrap();
        for w in 0..4 {
            for k in (0..bn / 2).step_by(2) {
                assert_eq!(
                    busiest_bank(&plan.acc, w, k, &swizzled),
                    1,
                    "bn {bn} warp {w} reg {k}"
                );
            }
        }
        // The same stores without the swizzle: rows 64 bytes apart, four rows per bank set.
        let plain = |r: i64, c: i64| r * 32 + c;
        assert_eq!(busiest_bank(&plan.acc, 0, 0, &plain), 4);
    }
}

#[test]
fn each_warp_stores_its_own_rows_with_the_per_warp_box() {
    // Checked independently of the planner's derivation: every register of a consumer thread
    // lies in its warp's 16 rows of the pass, and a TMA store of the per-warp box from the
    // warp's 1024-byte slice of the buffer (TMA's 64-byte swizzle, computed here) reads back
    // exactly the bytes the kernel wrote for those rows.
    let p = GemmProblem::new(512, 512, 512);
    for (tile, schedule) in [
        ((128, 256), None),
        ((128, 128), Some(Schedule::PingPong)),
        ((64, 256), Some(Schedule::PingPong)),
        ((64, 64), None),
    ] {
        let opts = Sm90Options {
            tile: Some(tile),
            schedule,
            ..Default::default()
        };
        let plan = Sm90Plan::with_options(&p, opts).unwrap();
        let st = plan.store.as_ref().expect("bf16 output: TMA store");
        let wb = st.warp_tma;
        assert_eq!(
            (wb.inner, wb.outer, wb.swizzle, wb.bytes),
            (32, 16, TmaSwizzle::B64, 1024)
        );
        let acc = &plan.acc;
        let (threads, regs) = (acc.mode(0).unwrap().size(), acc.mode(1).unwrap().size());
        for t in 0..threads {
            for i in 0..regs {
                let x = acc.eval(&IntTuple::flat([t, i])).unwrap();
                assert_eq!((x % 64) / 16, t / 32, "{tile:?}: thread {t} register {i}");
            }
        }
        for w in 0..4 {
            for r in 0..16 {
                for c in 0..32 {
                    let ours = 2 * st.smem.offset(16 * w + r, c).unwrap();
                    assert_eq!(ours, 1024 * w + tma_byte(r, c, 2, 64), "warp {w} ({r},{c})");
                }
            }
        }
    }
}

#[test]
fn tma_store_is_planned_only_where_it_applies() {
    let mut p = GemmProblem::new(512, 512, 512);
    assert!(Sm90Plan::new(&p).unwrap().store.is_some());
    let off = Sm90Options {
        tma_store: Some(false),
        ..Default::default()
    };
    assert!(Sm90Plan::with_options(&p, off).unwrap().store.is_none());
    let on = Sm90Options {
        tma_store: Some(true),
        ..Default::default()
    };
    // C is read on the scratch path only.
    for e in ["c", "bias,gelu,aux,c"] {
        p.epilogue = Epilogue::parse(e).unwrap();
        assert!(Sm90Plan::new(&p).unwrap().store.is_none(), "{e}");
        let err = Sm90Plan::with_options(&p, on).unwrap_err().to_string();
        assert!(err.contains("TMA-store"), "{e}: {err}");
    }
    // A bias (staged in shared memory per tile) and an aux output are stored with TMA.
    for e in ["aux", "bias,gelu", "rowbias,relu,aux", "bias,gelu,aux"] {
        p.epilogue = Epilogue::parse(e).unwrap();
        let plan = Sm90Plan::new(&p).unwrap();
        assert!(plan.store.is_some(), "{e}");
        let staged = match plan.problem.epilogue.bias {
            BiasMode::None => 0,
            BiasMode::PerCol => plan.consumers * 2 * plan.cta_tile.1 * 4,
            BiasMode::PerRow => plan.consumers * 2 * 64 * plan.m_halves * 4,
        };
        assert_eq!(plan.bias_stage_bytes, staged, "{e}");
        assert!(plan.smem_bytes <= 232_448, "{e}");
    }
    p.epilogue = Epilogue::parse("relu").unwrap();
    assert!(Sm90Plan::new(&p).unwrap().store.is_some());
    p.epilogue = Epilogue::default();
    p.output = DType::F32;
    assert!(Sm90Plan::new(&p).unwrap().store.is_none());
}

/// The TMA-store ring takes only what the stages leave: every default plan keeps between 2
/// and 4 buffers and fits the device, and a plan below the 6-stage cap could not take one
/// more stage (so the extra buffers never cost one).
#[test]
fn the_store_ring_never_costs_a_stage() {
    let budget = tessera_kernels::Arch::Sm90a.smem_per_block_optin();
    let mut checked = 0;
    for (tile, schedule) in [
        ((128, 256), None),
        ((128, 128), None),
        ((64, 256), None),
        ((128, 192), None),
        ((128, 96), None),
        ((128, 128), Some(Schedule::PingPong)),
        ((64, 256), Some(Schedule::PingPong)),
    ] {
        for epi in ["none", "bias", "bias,gelu_tanh,aux", "rowbias,relu,aux"] {
            for (staged, vectors) in [0, 1, 3]
                .into_iter()
                .flat_map(|s| [(s, (false, false)), (s, (true, true)), (s, (false, true))])
            {
                let mut p = GemmProblem::new(4096, 4096, 4096);
                p.epilogue = Epilogue::parse(epi).unwrap();
                let opts = Sm90Options {
                    tile: Some(tile),
                    schedule,
                    epilogue_inputs: Some(staged),
                    epilogue_vectors: vectors,
                    ..Default::default()
                };
                let Ok(plan) = Sm90Plan::with_options(&p, opts) else {
                    continue; // staged inputs that do not fit are refused, not shrunk
                };
                let st = plan
                    .store
                    .as_ref()
                    .expect("a 16-bit D without C stores by TMA");
                assert!((2..=4).contains(&st.buffers), "{plan}");
                assert!(plan.smem_bytes <= budget, "{plan}");
                // The vector stage: a consumer's rows of bias_row, the tile's columns of
                // bias_col, each where asked for.
                let rows = if plan.schedule == Schedule::PingPong {
                    tile.0
                } else {
                    64
                };
                assert_eq!(
                    plan.vector_stage,
                    (
                        if vectors.0 { rows } else { 0 },
                        if vectors.1 { tile.1 } else { 0 }
                    ),
                    "{plan}"
                );
                if plan.stages < 6 {
                    let more = Sm90Options {
                        stages: Some(plan.stages + 1),
                        ..opts
                    };
                    assert!(
                        Sm90Plan::with_options(&p, more).is_err(),
                        "{plan}: one more stage fits beside the minimum store buffers"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 7 * 4 * 3, "{checked} plans checked");
    // Without the TMA-store epilogue nothing is staged (the scratch path loads the vectors).
    let p = GemmProblem::new(4096, 4096, 4096);
    let opts = Sm90Options {
        tma_store: Some(false),
        epilogue_vectors: (true, true),
        ..Default::default()
    };
    assert_eq!(
        Sm90Plan::with_options(&p, opts).unwrap().vector_stage,
        (0, 0)
    );
}

/// Which launches split their last wave along K: the figures worked by hand from the tile
/// counts (128 x 256 tiles, 132 CTAs on 132 SMs), the idle rule at 32 k-tiles a CTA, the
/// share of at least 4 k-tiles a CTA, residency and the 32-bit bound.
#[test]
fn stream_k_splits_by_the_idle_rule() {
    // (Cooperative: the planner's default for a plain GEMM up to 64 k-tiles is ping-pong.)
    let coop = Sm90Options {
        schedule: Some(Schedule::Cooperative),
        ..Default::default()
    };
    let auto = |m, n, k| Sm90Plan::with_options(&GemmProblem::new(m, n, k), coop).unwrap();
    let on = Sm90Options {
        stream_k: Some(true),
        ..Default::default()
    };
    let forced = |m, n, k| Sm90Plan::with_options(&GemmProblem::new(m, n, k), on).unwrap();
    // (shape, tiles in the last wave, idle k-tiles a CTA): split at 32 and above.
    for ((m, n, k), r, split) in [
        ((4096, 4096, 4096), 116, false),  // 16 x 64 / 132 = 7.8
        ((8192, 11008, 4096), 112, false), // 20 x 64 / 132 = 9.7
        ((4096, 14336, 4096), 76, false),  // 56 x 64 / 132 = 27.2
        ((4096, 11008, 4096), 56, true),   // 76 x 64 / 132 = 36.8
        ((8192, 4096, 11008), 100, true),  // 32 x 172 / 132 = 41.7
        ((8192, 14336, 4096), 20, true),   // 112 x 64 / 132 = 54.3
        ((8192, 8192, 8192), 68, true),    // 64 x 128 / 132 = 62.1
    ] {
        // None of these is thin enough (an eighth of the SMs) to join the wave before.
        let tiles = r;
        let want = if split { tiles } else { 0 };
        assert_eq!(auto(m, n, k).stream_k_tiles(132, 132), want, "{m}x{n}x{k}");
        // Asked for, every one of these splits.
        assert_eq!(
            forced(m, n, k).stream_k_tiles(132, 132),
            tiles,
            "{m}x{n}x{k}"
        );
    }
    let p = forced(4096, 4096, 4096);
    // Whole waves, one wave, a grid larger than the SMs (not all resident): never.
    assert_eq!(p.stream_k_tiles(128, 132), 0);
    assert_eq!(p.stream_k_tiles(512, 1024), 0);
    assert_eq!(p.stream_k_tiles(140, 132), 0);
    // Less than 4 k-tiles a CTA: K = 64 gives 116 x 1 over 132 CTAs.
    assert_eq!(forced(4096, 4096, 64).stream_k_tiles(132, 132), 0);
    // grid x r x k_tiles beyond 32 bits: 132 x 116 x (2^25 - 1).
    assert_eq!(
        forced(4096, 4096, (1 << 31) - 64).stream_k_tiles(132, 132),
        0
    );
    // (and within them: 132 x 116 x 2^17)
    assert_eq!(forced(4096, 4096, 64 << 17).stream_k_tiles(132, 132), 116);
    // Ping-pong and cluster plans never split; asking for it there is an error.
    for opts in [
        Sm90Options {
            tile: Some((128, 128)),
            schedule: Some(Schedule::PingPong),
            ..Default::default()
        },
        Sm90Options {
            cluster: Some(2),
            ..Default::default()
        },
    ] {
        let p = Sm90Plan::with_options(&GemmProblem::new(8192, 8192, 8192), opts).unwrap();
        assert!(!p.stream_k);
        assert_eq!(p.stream_k_tiles(132, 132), 0);
        let asked = Sm90Options {
            stream_k: Some(true),
            ..opts
        };
        assert!(Sm90Plan::with_options(&GemmProblem::new(8192, 8192, 8192), asked).is_err());
    }
}

/// The planner's schedule: ping-pong 128 x 128 for a plain GEMM of at most 64 k-tiles whose
/// 128 x 256 tiles fill the device and where nothing else is asked for; cooperative otherwise,
/// and always for tree epilogues.
#[test]
fn plain_gemm_takes_pingpong_up_to_64_k_tiles() {
    use tessera_kernels::epilogue::{cuda::tree_sm90_plan, parse_epilogue, Binding};
    let sched = |p: &GemmProblem, o: Sm90Options| {
        let plan = Sm90Plan::with_options(p, o).unwrap();
        (plan.schedule, plan.cta_tile.0, plan.cta_tile.1)
    };
    let d = Sm90Options::default();
    let pp = (Schedule::PingPong, 128, 128);
    let coop = (Schedule::Cooperative, 128, 256);
    // K = 4096 is 64 k-tiles; 4097 is 65; alpha does not matter.
    for (m, n, k) in [(4096, 4096, 4096), (8192, 14336, 4096), (4096, 4096, 1024)] {
        assert_eq!(sched(&GemmProblem::new(m, n, k), d), pp, "{m}x{n}x{k}");
    }
    let mut scaled = GemmProblem::new(4096, 4096, 4096);
    scaled.epilogue.alpha = 0.5;
    assert_eq!(sched(&scaled, d), pp);
    for (m, n, k) in [(4096, 4096, 4097), (8192, 8192, 8192), (4096, 4096, 11008)] {
        assert_eq!(sched(&GemmProblem::new(m, n, k), d), coop, "{m}x{n}x{k}");
    }
    // Too few 128 x 256 tiles for the device: the cooperative small-problem tile.
    assert_eq!(
        sched(&GemmProblem::new(1024, 1024, 1024), d),
        (Schedule::Cooperative, 128, 128)
    );
    // Any epilogue term, an fp32 D, or any other choice asked for: cooperative.
    for e in ["bias", "rowbias", "relu", "gelu_tanh", "aux,gelu", "c"] {
        let mut p = GemmProblem::new(4096, 4096, 4096);
        p.epilogue = Epilogue::parse(e).unwrap();
        assert_eq!(sched(&p, d).0, Schedule::Cooperative, "{e}");
    }
    let mut f32_out = GemmProblem::new(4096, 4096, 4096);
    f32_out.output = DType::F32;
    assert_eq!(sched(&f32_out, d).0, Schedule::Cooperative);
    let square = GemmProblem::new(4096, 4096, 4096);
    for o in [
        Sm90Options {
            stages: Some(4),
            ..d
        },
        Sm90Options {
            group_m: Some(8),
            ..d
        },
        Sm90Options {
            cluster: Some(2),
            ..d
        },
        Sm90Options {
            stream_k: Some(false),
            ..d
        },
        Sm90Options {
            tma_store: Some(false),
            ..d
        },
    ] {
        assert_eq!(sched(&square, o), coop, "{o:?}");
    }
    // Forced, ping-pong stays available.
    let forced = Sm90Options {
        schedule: Some(Schedule::PingPong),
        ..d
    };
    assert_eq!(sched(&GemmProblem::new(8192, 8192, 8192), forced), pp);
    // A tree epilogue: a light one (no exponential, erf or tanh, no reduction) or one that
    // stores a full aux (and has no reduction) takes the plain GEMM's schedule, ping-pong
    // where the plain GEMM has it; any other tree, or any tree where the plain GEMM is
    // cooperative, plans cooperative; a forced schedule holds.
    let tree_sched = |text: &str, p: &GemmProblem, o: Sm90Options| {
        let t = parse_epilogue(text).unwrap();
        let b = Binding::for_tree(&t, p.m, p.n, p.k, p.batch, DType::Bf16);
        let plan = tree_sm90_plan(p, &t, &b, o).unwrap();
        (plan.schedule, plan.cta_tile.0, plan.cta_tile.1)
    };
    for text in [
        "relu(acc)",
        "relu_aux_bias",
        "drelu",
        "relu(acc + bias_row) + aux_in",
        "gelu_aux_bias",
        "sigmoid(aux(acc))",
    ] {
        assert_eq!(tree_sched(text, &square, d), pp, "{text}");
        let long_k = GemmProblem::new(4096, 4096, 4160);
        assert_eq!(tree_sched(text, &long_k, d), coop, "{text}");
        let few_tiles = GemmProblem::new(2048, 2048, 4096);
        assert_eq!(
            tree_sched(text, &few_tiles, d).0,
            Schedule::Cooperative,
            "{text}"
        );
        let forced_coop = Sm90Options {
            schedule: Some(Schedule::Cooperative),
            ..d
        };
        assert_eq!(tree_sched(text, &square, forced_coop), coop, "{text}");
    }
    for text in [
        "gelu_bias",
        "dgelu",
        "sigmoid(acc)",
        "select(row < 9, acc, tanh(acc))",
        "drelu_bgrad",
        "bgrad_col(relu(acc))",
        "bgrad_col(gelu_aux(acc))",
    ] {
        assert_eq!(tree_sched(text, &square, d), coop, "{text}");
    }
}

/// The Hopper kernel's source for the cooperative 128 x 256 plan: its wgmma instruction, the
/// 3-D TMA load and the high word of A's descriptor.
#[test]
fn cuda_source_has_the_plans_wgmma_tma_and_descriptor() {
    use tessera_kernels::codegen::sm90::cuda_source;
    let src = cuda_source(&Sm90Plan::new(&GemmProblem::new(4096, 4096, 8192)).unwrap());
    assert!(src.contains("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
    assert!(src.contains("cp.async.bulk.tensor.3d"));
    assert!(src.contains("kDescHiA = 0x4000004000010000ull"));
}

/// Sw<2,3,3> o (64,32):(32,1), 16-bit: rows r and r + 8 are 512 bytes apart (a bit no first
/// pair sets: added); columns c + 8j move 16-byte chunks that the swizzle permutes with the
/// row (XOR-ed).
#[test]
fn frag_pair_offsets_add_the_row_step_and_xor_the_column_chunks() {
    use tessera_kernels::codegen::sm90::frag_pair_offsets;
    let plan = Sm90Plan::new(&GemmProblem::new(4096, 4096, 4096)).unwrap();
    let pairs = frag_pair_offsets(&plan).unwrap();
    assert_eq!(
        pairs,
        vec![
            (0, 0),
            (0, 512),
            (16, 0),
            (16, 512),
            (32, 0),
            (32, 512),
            (48, 0),
            (48, 512)
        ]
    );
}

#[test]
fn fragment_pass_form_holds_for_a_small_plans_accumulator() {
    use tessera_kernels::plan::sm90::fragment_pass_form;
    let plan = Sm90Plan::new(&GemmProblem::new(256, 256, 64)).unwrap();
    fragment_pass_form(&plan.acc).unwrap();
}

/// Two CTAs load 128 rows each of a 256-row 128B-swizzled tile; the second half starts 16 KiB
/// (16 swizzle periods) in. Half of one 8-row swizzle atom is not a box that swizzle can write.
#[test]
fn tma_split_for_halves_a_tile_on_swizzle_periods_only() {
    let tile = SmemLayout {
        swizzle: SwizzleBits {
            bits: 3,
            base: 3,
            shift: 3,
        },
        layout: "(256,64):(64,1)".parse().unwrap(),
        atom: "(8,64):(64,1)".parse().unwrap(),
    };
    let s = tma_split_for(&tile, 2, 2).unwrap();
    assert_eq!(
        (s.part.inner, s.part.outer, s.part.bytes, s.stride_bytes),
        (64, 128, 16384, 16384)
    );
    assert_eq!(s.part.swizzle, TmaSwizzle::B128);
    let atom = SmemLayout {
        layout: "(8,64):(64,1)".parse().unwrap(),
        ..tile
    };
    assert!(tma_split_for(&atom, 2, 2).is_err());
}

/// `plan_path` takes the Hopper path on sm_90a by default, the sm80-class path when forced,
/// and plans the Hopper path with the forced Hopper choices.
#[test]
fn plan_path_takes_hopper_by_default_sm80_when_forced_and_the_forced_choices() {
    use tessera_kernels::plan::sm90::PathOptions;
    use tessera_kernels::plan::{plan_path, GemmPath};
    use tessera_kernels::Arch;
    let p = GemmProblem::new(4096, 4096, 4096);
    assert!(matches!(
        plan_path(&p, Arch::Sm90a, PathOptions::default()),
        Ok(GemmPath::Hopper(_))
    ));
    let sm80 = PathOptions {
        force_sm80: true,
        ..PathOptions::default()
    };
    assert!(matches!(
        plan_path(&p, Arch::Sm90a, sm80),
        Ok(GemmPath::Sm80(_))
    ));
    let pp = Sm90Options {
        tile: Some((128, 128)),
        schedule: Some(Schedule::PingPong),
        ..Default::default()
    };
    let hopper = PathOptions {
        sm90: pp,
        ..PathOptions::default()
    };
    match plan_path(&p, Arch::Sm90a, hopper) {
        Ok(GemmPath::Hopper(h)) => assert_eq!(h.schedule, Schedule::PingPong),
        _ => panic!("a Hopper plan"),
    }
}

/// A residual and a column bias: one staged input and the column vector asked for, which the
/// 512 x 512 plan then stages over the CTA tile's columns.
#[test]
fn tree_sm90_options_ask_for_the_staged_residual_and_column_bias() {
    use tessera_kernels::epilogue::cuda::tree_sm90_options;
    use tessera_kernels::epilogue::{parse_epilogue, Binding};
    use tessera_kernels::Major;
    let t = parse_epilogue("relu(acc + bias_col + residual)").unwrap();
    let b = Binding::for_tree(&t, 512, 512, 256, 1, DType::Bf16);
    let o = tree_sm90_options(&t, &b, Sm90Options::default());
    assert_eq!(
        (o.epilogue_inputs, o.epilogue_vectors),
        (Some(1), (false, true))
    );
    let mut p = GemmProblem::new(512, 512, 256);
    p.b_major = Major::Col;
    let plan = Sm90Plan::with_options(&p, o).unwrap();
    assert_eq!(plan.vector_stage, (0, plan.cta_tile.1));
}

/// What `tree_sm90_plan` keeps: the stages before the staged inputs and vectors, and the plain
/// GEMM's ping-pong plan for a light tree.
#[test]
fn tree_sm90_plan_stages_only_what_keeps_the_pipeline_stages() {
    use tessera_kernels::epilogue::cuda::tree_sm90_plan;
    use tessera_kernels::epilogue::{parse_epilogue, Binding};
    use tessera_kernels::Major;
    let mut p = GemmProblem::new(4096, 4096, 4096);
    p.b_major = Major::Col;
    let t = parse_epilogue("relu(acc + bias_col) + aux_in").unwrap();
    let b = Binding::for_tree(&t, 4096, 4096, 4096, 1, DType::Bf16);
    let coop = Sm90Options {
        schedule: Some(Schedule::Cooperative),
        ..Sm90Options::default()
    };
    let plan = tree_sm90_plan(&p, &t, &b, coop).unwrap();
    // Both do not fit beside four 128 x 256 stages: aux_in is staged, the bias is not.
    assert_eq!(
        (plan.stages, plan.staged_inputs, plan.vector_stage),
        (4, 1, (0, 0))
    );
    let t = parse_epilogue("relu(acc + bias_col)").unwrap();
    let b = Binding::for_tree(&t, 4096, 4096, 4096, 1, DType::Bf16);
    let plan = tree_sm90_plan(&p, &t, &b, coop).unwrap();
    assert_eq!((plan.stages, plan.vector_stage), (4, (0, 256)));
    // Left to the planner, that light tree takes the plain GEMM's ping-pong 128 x 128 plan
    // (K is 64 k-tiles), with its six stages.
    let plan = tree_sm90_plan(&p, &t, &b, Sm90Options::default()).unwrap();
    assert_eq!(
        (plan.schedule, plan.cta_tile, plan.stages),
        (Schedule::PingPong, (128, 128, 64), 6)
    );
    // A GELU keeps the cooperative schedule.
    let t = parse_epilogue("gelu(acc + bias_col)").unwrap();
    let plan = tree_sm90_plan(&p, &t, &b, Sm90Options::default()).unwrap();
    assert_eq!(
        (plan.schedule, plan.cta_tile),
        (Schedule::Cooperative, (128, 256, 64))
    );
}

/// The tree planner loads a tree's one staged input into the TMA-store buffers where a
/// consumer's tile has more passes than the input's own buffers (`Sm90Plan::staged_in_store`),
/// and not where the tree also stores an aux output (which takes a store buffer a pass), where
/// it stages two inputs, or where two passes fit its own buffers.
#[test]
fn tree_plans_stage_one_input_in_the_store_buffers_where_passes_outnumber_its_own() {
    use tessera_kernels::epilogue::cuda::tree_sm90_plan;
    use tessera_kernels::epilogue::{parse_epilogue, Binding};
    use tessera_kernels::Major;
    let coop = |tile| Sm90Options {
        schedule: Some(Schedule::Cooperative),
        tile: Some(tile),
        ..Sm90Options::default()
    };
    let plan = |text: &str, tile, beta: f32| {
        let mut p = GemmProblem::new(2048, 1024, 1024);
        p.b_major = Major::Col;
        let t = parse_epilogue(text).unwrap();
        let mut b = Binding::for_tree(&t, 2048, 1024, 1024, 1, DType::Bf16);
        b.beta = beta;
        tree_sm90_plan(&p, &t, &b, coop(tile)).unwrap()
    };
    // 128 x 128: four passes a consumer, two buffers of its own.
    let p = plan("relu(acc + bias_col + residual)", (128, 128), 0.0);
    assert!(p.staged_in_store && p.staged_inputs == 1, "{p}");
    assert_eq!(p.store.as_ref().unwrap().buffers, p.in_buffers);
    assert!(p.in_buffers >= 4 && p.stages == 6, "{p}");
    assert!(plan("acc + c", (128, 128), 0.5).staged_in_store);
    assert!(plan("relu(acc + aux_in)", (128, 96), 0.0).staged_in_store);
    // An aux output beside D; two staged inputs; two passes, both in the input's buffers.
    assert!(!plan("aux(acc + residual)", (128, 128), 0.0).staged_in_store);
    assert!(!plan("acc + c + residual", (128, 128), 0.5).staged_in_store);
    let p = plan("relu(acc + bias_col + residual)", (128, 64), 0.0);
    assert!(!p.staged_in_store && p.staged_inputs == 1, "{p}");
}
