//! GPU tests of the Hopper path: fresh random data (seed printed), poisoned outputs, the
//! float64 reference, odd shapes, every epilogue, batches and strides, bad arguments.
//!
//! Skip with a printed reason when there is no sm_90 device; `TESSERA_REQUIRE_GPU=1` makes
//! that a failure. `TESSERA_SEED=<n>` replays a run.
#![cfg(feature = "cuda")]

use tessera_kernels::bench::buffers::DeviceBuf;
use tessera_kernels::bench::verify::require;
use tessera_kernels::bench::verify_sm90::check_sm90;
use tessera_kernels::launch::runtime::Runtime;
use tessera_kernels::launch::sm80::GemmArgs;
use tessera_kernels::launch::sm90::Sm90Kernel;
use tessera_kernels::plan::GemmStrides;
use tessera_kernels::plan::{ClusterShare, Schedule, Sm90Options, Sm90Plan};
use tessera_kernels::rng::Rng;
use tessera_kernels::{
    Activation, Arch, BiasMode, DType, Epilogue, GemmProblem, KernelError, Major,
};

fn runtime() -> Option<Runtime> {
    let required = std::env::var("TESSERA_REQUIRE_GPU").as_deref() == Ok("1");
    match Runtime::new(0) {
        Ok(rt) if rt.arch() == Arch::Sm90a => {
            eprintln!(
                "device: {} ({}), NVRTC {:?}",
                rt.device_name(),
                rt.arch(),
                rt.nvrtc()
            );
            Some(rt)
        }
        Ok(rt) => {
            assert!(
                !required,
                "TESSERA_REQUIRE_GPU=1: the Hopper tests need sm_90, found {}",
                rt.arch()
            );
            eprintln!("SKIPPED (device is {}, not sm_90)", rt.arch());
            None
        }
        Err(e) => {
            assert!(!required, "TESSERA_REQUIRE_GPU=1 but no usable GPU: {e}");
            eprintln!("SKIPPED (no GPU): {e}");
            None
        }
    }
}

fn seed() -> u64 {
    let s = std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(Rng::fresh_seed);
    eprintln!("seed {s} (replay with TESSERA_SEED={s})");
    s
}

/// Plans, compiles, runs and checks; returns the failure, if any.
fn run(
    rt: &Runtime,
    p: &GemmProblem,
    s: GemmStrides,
    opts: Sm90Options,
    max_ctas: Option<i64>,
    rng: &mut Rng,
) -> Vec<String> {
    let plan = Sm90Plan::with_options(p, opts).unwrap_or_else(|e| panic!("plan {p}: {e}"));
    let mut k = Sm90Kernel::new(rt, &plan).unwrap_or_else(|e| panic!("compile {p}: {e}"));
    if let Some(n) = max_ctas {
        k.set_max_ctas(n);
    }
    assert_eq!(k.grid_ctas() % plan.cluster, 0, "{p}: whole clusters");
    eprintln!("{}: {} CTAs", plan.kernel_name(), k.grid_ctas());
    let r = check_sm90(rt, &k, s, rng.next_u64()).unwrap_or_else(|e| panic!("{p}: {e}"));
    eprintln!("{r}");
    match require(r) {
        Ok(_) => vec![],
        Err(e) => vec![e.to_string()],
    }
}

fn tn(m: i64, n: i64, k: i64) -> GemmProblem {
    GemmProblem::new(m, n, k)
}

#[test]
fn sm90_shapes_tiles_and_schedules() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let shapes = [
        (1, 8, 8),
        (64, 64, 64),
        (128, 256, 64),
        (129, 257, 72),
        (7, 300, 64),
        (300, 7, 72),
        (1000, 8, 520),
        (33, 65, 1000),
        (2048, 16, 128),
        (256, 512, 4104),
        (1031, 1029, 1032),
        (4100, 3000, 264),
    ];
    for &(m, n, k) in &shapes {
        let p = tn(m, n, k);
        failures.extend(run(
            &rt,
            &p,
            GemmStrides::tight(&p),
            Sm90Options::default(),
            None,
            &mut rng,
        ));
    }
    // Every tile shape on one ragged problem.
    for tile in [
        (128, 256),
        (128, 128),
        (128, 192),
        (64, 256),
        (64, 128),
        (64, 64),
    ] {
        let p = tn(300, 500, 200);
        let opts = Sm90Options {
            tile: Some(tile),
            ..Default::default()
        };
        failures.extend(run(&rt, &p, GemmStrides::tight(&p), opts, None, &mut rng));
    }
    // Two stages (the ring wraps every other k-tile), odd raster groups, and a grid of 3
    // persistent CTAs walking many tiles each (phases carried across tiles).
    let p = tn(1100, 1300, 328);
    for (stages, group_m, ctas) in [(2, 3, None), (3, 1, Some(3)), (4, 5, Some(7))] {
        let opts = Sm90Options {
            stages: Some(stages),
            group_m: Some(group_m),
            ..Default::default()
        };
        failures.extend(run(&rt, &p, GemmStrides::tight(&p), opts, ctas, &mut rng));
    }
    // The ping-pong schedule, 128 x 128 and 64 x 256 tiles: ragged shapes, persistent grids
    // of 1 and 3 CTAs (the two consumers alternate tiles and find their stages by counting),
    // 2 to 5 stages.
    for tile in [(128, 128), (64, 256)] {
        let pp = |stages, group_m| Sm90Options {
            tile: Some(tile),
            stages,
            group_m,
            schedule: Some(Schedule::PingPong),
            ..Default::default()
        };
        for &(m, n, k) in &[
            (1, 8, 8),
            (129, 257, 72),
            (1031, 1029, 1032),
            (4100, 3000, 264),
        ] {
            let p = tn(m, n, k);
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                pp(None, None),
                None,
                &mut rng,
            ));
        }
        let p = tn(1100, 1300, 328);
        for (stages, group_m, ctas) in [(2, 3, None), (3, 1, Some(3)), (5, 2, Some(1))] {
            let opts = pp(Some(stages), Some(group_m));
            failures.extend(run(&rt, &p, GemmStrides::tight(&p), opts, ctas, &mut rng));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sm90_every_epilogue_and_type() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    for act in [
        Activation::None,
        Activation::Relu,
        Activation::GeluErf,
        Activation::GeluTanh,
    ] {
        for bias in [BiasMode::None, BiasMode::PerRow, BiasMode::PerCol] {
            for aux in [false, true] {
                for beta in [0.0, 0.5] {
                    let mut p = tn(197, 130, 200);
                    p.epilogue = Epilogue {
                        act,
                        bias,
                        aux,
                        alpha: 0.75,
                        beta,
                    };
                    failures.extend(run(
                        &rt,
                        &p,
                        GemmStrides::tight(&p),
                        Sm90Options::default(),
                        None,
                        &mut rng,
                    ));
                    // Ping-pong, both tile heights (one each way, by aux).
                    let opts = Sm90Options {
                        tile: Some(if aux { (64, 256) } else { (128, 128) }),
                        schedule: Some(Schedule::PingPong),
                        ..Default::default()
                    };
                    failures.extend(run(&rt, &p, GemmStrides::tight(&p), opts, None, &mut rng));
                }
            }
        }
    }
    for input in [DType::Bf16, DType::F16] {
        for output in [DType::Bf16, DType::F16, DType::F32] {
            let mut p = tn(150, 136, 264);
            p.input = input;
            p.output = output;
            p.epilogue = Epilogue {
                act: Activation::GeluTanh,
                bias: BiasMode::PerCol,
                aux: true,
                alpha: 1.0,
                beta: 1.0,
            };
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                Sm90Options::default(),
                None,
                &mut rng,
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sm90_strides_and_batches() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    // Padded leading dimensions and batch strides (multiples of 8 elements for A and B, as
    // TMA needs; any for C, D, aux): the padding of D and aux must stay poisoned.
    let mut p = tn(70, 90, 48);
    p.batch = 3;
    p.epilogue = Epilogue {
        act: Activation::Relu,
        bias: BiasMode::PerRow,
        aux: true,
        alpha: 1.0,
        beta: 1.0,
    };
    let mut s = GemmStrides::tight(&p);
    s.lda += 8;
    s.ldb += 16;
    s.ldc += 6;
    s.ldd += 10;
    s.ldaux += 4;
    s.batch_a = p.m * s.lda + 24;
    s.batch_b = p.n * s.ldb + 8;
    s.batch_c = p.m * s.ldc + 2;
    s.batch_d = p.m * s.ldd + 6;
    s.batch_aux = p.m * s.ldaux + 2;
    s.batch_bias = p.m;
    failures.extend(run(&rt, &p, s, Sm90Options::default(), None, &mut rng));
    // Odd leading dimensions of the outputs (single-element stores), several tiles per batch
    // and a persistent grid smaller than the tiles.
    let mut p = tn(300, 301, 136);
    p.batch = 4;
    p.epilogue = Epilogue {
        act: Activation::GeluErf,
        bias: BiasMode::PerCol,
        aux: true,
        alpha: 1.0,
        beta: 0.0,
    };
    let mut s = GemmStrides::tight(&p);
    s.ldd += 1;
    s.ldaux += 3;
    s.batch_d = p.m * s.ldd + 1;
    s.batch_aux = p.m * s.ldaux + 1;
    s.batch_bias = p.n;
    failures.extend(run(&rt, &p, s, Sm90Options::default(), Some(5), &mut rng));
    let opts = Sm90Options {
        tile: Some((128, 128)),
        schedule: Some(Schedule::PingPong),
        ..Default::default()
    };
    failures.extend(run(&rt, &p, s, opts, Some(5), &mut rng));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Stream-K: the last partial wave's tiles split along K over small persistent grids, so that
/// a tile's last part adds one to three others, parts start and end inside tiles, and CTAs
/// hold two parts; every epilogue kind (TMA store and the scratch path with C), batches,
/// 16- and 32-bit outputs, one and two consumers.
#[test]
fn sm90_stream_k_parts() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let gelu_aux = Epilogue {
        act: Activation::GeluTanh,
        bias: BiasMode::PerCol,
        aux: true,
        alpha: 0.75,
        beta: 0.0,
    };
    let relu_c = Epilogue {
        act: Activation::Relu,
        bias: BiasMode::PerRow,
        aux: false,
        alpha: 1.0,
        beta: 0.5,
    };
    // (m, n, k, batch, tile, CTAs, epilogue, output): the last tile over 8 CTAs (7 parts
    // added); runs that cross tile boundaries (CTAs with two parts); batches; one consumer.
    let cases = [
        (
            300,
            520,
            2048,
            1,
            (128, 256),
            8,
            Epilogue::default(),
            DType::Bf16,
        ),
        (1408, 256, 1152, 1, (128, 256), 9, gelu_aux, DType::Bf16),
        (1408, 256, 1152, 1, (128, 256), 9, relu_c, DType::Bf16),
        (200, 300, 2048, 3, (128, 128), 8, gelu_aux, DType::Bf16),
        (200, 300, 2048, 3, (128, 128), 8, relu_c, DType::F32),
        (300, 520, 2048, 1, (64, 256), 7, gelu_aux, DType::Bf16),
        (
            1100,
            1300,
            4104,
            1,
            (128, 256),
            13,
            Epilogue::default(),
            DType::Bf16,
        ),
    ];
    for (m, n, k, batch, tile, ctas, epilogue, output) in cases {
        let mut p = tn(m, n, k);
        p.batch = batch;
        p.epilogue = epilogue;
        p.output = output;
        // Asked for: the planner's own rule would leave some of these small grids whole.
        let opts = Sm90Options {
            tile: Some(tile),
            stream_k: Some(true),
            ..Default::default()
        };
        let plan = Sm90Plan::with_options(&p, opts).unwrap();
        let split = plan.stream_k_tiles(ctas, rt.sm_count() as i64);
        assert!(
            plan.stream_k && split > 0,
            "{p} on {ctas} CTAs should split its last wave"
        );
        eprintln!(
            "{p}: {split} of {} tiles split over {ctas} CTAs",
            plan.total_tiles()
        );
        failures.extend(run(
            &rt,
            &p,
            GemmStrides::tight(&p),
            opts,
            Some(ctas),
            &mut rng,
        ));
    }
    // The same launches three times in a row: each clears the flags it consumed.
    let p = tn(1408, 256, 1152);
    let opts = Sm90Options {
        tile: Some((128, 256)),
        stream_k: Some(true),
        ..Default::default()
    };
    let plan = Sm90Plan::with_options(&p, opts).unwrap();
    let mut kernel = Sm90Kernel::new(&rt, &plan).unwrap();
    kernel.set_max_ctas(9);
    for _ in 0..3 {
        let r = check_sm90(&rt, &kernel, GemmStrides::tight(&p), rng.next_u64())
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        if let Err(e) = require(r) {
            failures.push(e.to_string());
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The TMA-store epilogue: taken whenever D suits a tensor map (checked through the report's
/// paths), clipped at ragged edges, padding of batched D untouched, buffers reused across the
/// tiles of a small persistent grid, both schedules and a cluster; the fp32-scratch fallback
/// for a D TMA cannot address.
#[test]
fn sm90_tma_store_epilogue() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let mut case =
        |p: &GemmProblem, s: GemmStrides, opts: Sm90Options, ctas: Option<i64>, tma: bool| {
            let opts = Sm90Options {
                tma_store: Some(true),
                ..opts
            };
            let plan = Sm90Plan::with_options(p, opts).unwrap_or_else(|e| panic!("plan {p}: {e}"));
            assert!(
                plan.store.is_some(),
                "{p}: the plan should have the TMA store"
            );
            let mut k = Sm90Kernel::new(&rt, &plan).unwrap_or_else(|e| panic!("compile {p}: {e}"));
            if let Some(n) = ctas {
                k.set_max_ctas(n);
            }
            let r = check_sm90(&rt, &k, s, rng.next_u64()).unwrap_or_else(|e| panic!("{p}: {e}"));
            eprintln!("{}: {} CTAs\n{r}", plan.kernel_name(), k.grid_ctas());
            if r.paths.tma_store != tma {
                failures.push(format!(
                    "{p}: tma_store {} (expected {tma})",
                    r.paths.tma_store
                ));
            }
            if let Err(e) = require(r) {
                failures.push(e.to_string());
            }
        };
    let epilogues = [
        Epilogue::default(),
        Epilogue {
            act: Activation::GeluTanh,
            bias: BiasMode::PerCol,
            ..Epilogue::default()
        },
        Epilogue {
            act: Activation::Relu,
            bias: BiasMode::PerRow,
            alpha: 0.5,
            ..Epilogue::default()
        },
        Epilogue {
            act: Activation::GeluErf,
            bias: BiasMode::PerRow,
            ..Epilogue::default()
        },
    ];
    // Ragged M and N (N a multiple of 8, so D rows stay 16-byte aligned), several tiles per
    // CTA; the 128x256 and 128x128 cooperative tiles and the ping-pong schedule.
    for e in epilogues {
        let mut p = tn(329, 264, 200);
        p.epilogue = e;
        for opts in [
            Sm90Options::default(),
            Sm90Options {
                tile: Some((128, 128)),
                ..Default::default()
            },
            Sm90Options {
                tile: Some((128, 128)),
                schedule: Some(Schedule::PingPong),
                ..Default::default()
            },
        ] {
            case(&p, GemmStrides::tight(&p), opts, Some(3), true);
        }
    }
    // Tiles of an odd number of 32-column passes (BN 96, 160, 224), plain and with aux (two
    // stores a pass), several tiles per CTA: the store ring's position runs on across tiles,
    // so a tile never reuses a buffer its last store may still read.
    for tile in [(128, 96), (128, 160), (128, 224)] {
        for e in [
            epilogues[0],
            Epilogue {
                aux: true,
                ..epilogues[1]
            },
        ] {
            let mut p = tn(329, 712, 136);
            p.epilogue = e;
            let opts = Sm90Options {
                tile: Some(tile),
                ..Default::default()
            };
            case(&p, GemmStrides::tight(&p), opts, Some(3), true);
        }
    }
    // Batches with padded rows and batch strides (multiples of 8 elements): the padding
    // stays poisoned; fp16 output.
    let mut p = tn(200, 136, 72);
    p.batch = 3;
    p.output = DType::F16;
    p.input = DType::F16;
    p.epilogue = epilogues[1];
    let mut s = GemmStrides::tight(&p);
    s.ldd += 8;
    s.batch_d = p.m * s.ldd + 24;
    s.batch_bias = p.n;
    case(&p, s, Sm90Options::default(), Some(2), true);
    // A pair sharing B, with the TMA store.
    let p = tn(1000, 1024, 256);
    case(
        &p,
        GemmStrides::tight(&p),
        pair((128, 256), ClusterShare::B),
        None,
        true,
    );
    // A D TMA cannot address (rows of 301 elements, 602 bytes): the general path.
    let p = tn(300, 301, 136);
    case(
        &p,
        GemmStrides::tight(&p),
        Sm90Options::default(),
        None,
        false,
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A pair of CTAs sharing `share` by TMA multicast.
fn pair(tile: (i64, i64), share: ClusterShare) -> Sm90Options {
    Sm90Options {
        tile: Some(tile),
        cluster: Some(2),
        share: Some(share),
        ..Default::default()
    }
}

#[test]
fn sm90_cluster_pairs() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    for share in [ClusterShare::A, ClusterShare::B] {
        // Ragged shapes, many with an odd tile count along the paired dimension (the pair's
        // second tile outside D) and single-tile problems (the second tile wholly outside).
        for &(m, n, k) in &[
            (1, 8, 8),
            (64, 64, 64),
            (129, 257, 72),
            (300, 7, 72),
            (7, 300, 64),
            (1031, 1029, 1032),
            (4100, 3000, 264),
        ] {
            let p = tn(m, n, k);
            for tile in [(128, 256), (128, 128)] {
                failures.extend(run(
                    &rt,
                    &p,
                    GemmStrides::tight(&p),
                    pair(tile, share),
                    None,
                    &mut rng,
                ));
            }
        }
        // Every tile shape on one problem: 300 x 500 is 3 (or 5) tiles along M, 2 to 16 along N.
        for tile in [
            (128, 192),
            (64, 256),
            (64, 128),
            (64, 64),
            (128, 32),
            (64, 96),
        ] {
            let p = tn(300, 500, 200);
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                pair(tile, share),
                None,
                &mut rng,
            ));
        }
        // Persistent grids smaller than the cluster tiles (1 CTA asked: one pair; 3: one pair;
        // 7: three pairs), 2 to 4 stages, odd raster groups: the pair walks many cluster tiles
        // with phases carried across them.
        let p = tn(1100, 1300, 328);
        for (stages, group_m, ctas) in [
            (2, 3, Some(1)),
            (3, 1, Some(3)),
            (4, 5, Some(7)),
            (2, 2, None),
        ] {
            let opts = Sm90Options {
                stages: Some(stages),
                group_m: Some(group_m),
                ..pair((128, 128), share)
            };
            failures.extend(run(&rt, &p, GemmStrides::tight(&p), opts, ctas, &mut rng));
        }
        // Fused epilogues, on a problem with 3 x 3 tiles of 128 x 128 (odd both ways).
        for (act, bias, aux, beta) in [
            (Activation::GeluTanh, BiasMode::PerCol, true, 1.0),
            (Activation::Relu, BiasMode::PerRow, false, 0.5),
            (Activation::GeluErf, BiasMode::None, true, 0.0),
        ] {
            let mut p = tn(300, 290, 200);
            p.epilogue = Epilogue {
                act,
                bias,
                aux,
                alpha: 0.75,
                beta,
            };
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                pair((128, 128), share),
                None,
                &mut rng,
            ));
        }
        for output in [DType::F16, DType::F32] {
            let mut p = tn(150, 136, 264);
            p.input = DType::F16;
            p.output = output;
            p.epilogue = Epilogue {
                act: Activation::GeluTanh,
                bias: BiasMode::PerCol,
                aux: true,
                alpha: 1.0,
                beta: 1.0,
            };
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                pair((128, 128), share),
                None,
                &mut rng,
            ));
        }
        // Batches with padded strides and odd output pitches, a persistent grid of 4 CTAs (2
        // pairs) over 4 batches of 3 x 3 tiles: pairs never straddle batches.
        let mut p = tn(300, 301, 136);
        p.batch = 4;
        p.epilogue = Epilogue {
            act: Activation::GeluErf,
            bias: BiasMode::PerCol,
            aux: true,
            alpha: 1.0,
            beta: 0.0,
        };
        let mut s = GemmStrides::tight(&p);
        s.lda += 8;
        s.ldb += 16;
        s.ldd += 1;
        s.ldaux += 3;
        s.batch_a = p.m * s.lda + 24;
        s.batch_b = p.n * s.ldb + 8;
        s.batch_d = p.m * s.ldd + 1;
        s.batch_aux = p.m * s.ldaux + 1;
        s.batch_bias = p.n;
        failures.extend(run(&rt, &p, s, pair((128, 128), share), Some(4), &mut rng));
        failures.extend(run(&rt, &p, s, pair((128, 256), share), None, &mut rng));
        // Large problems, the default grid (as many pairs as fit at once).
        for (m, n, k) in [(4096, 4096, 4096), (4096, 11008, 4096)] {
            let p = tn(m, n, k);
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                pair((128, 256), share),
                None,
                &mut rng,
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sm90_large_against_reference_rows() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    // (8192³, 4096 x 11008 x 4096 and 8192 x 14336 x 4096 split their last waves on all SMs.)
    for (m, n, k) in [
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (4096, 11008, 4096),
        (8192, 14336, 4096),
    ] {
        let p = tn(m, n, k);
        failures.extend(run(
            &rt,
            &p,
            GemmStrides::tight(&p),
            Sm90Options::default(),
            None,
            &mut rng,
        ));
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sm90_bad_arguments_are_errors() {
    let Some(rt) = runtime() else { return };
    // K = 61: rows of A are 122 bytes apart, not a multiple of 16: TMA cannot load A.
    let p = tn(64, 64, 61);
    let k = Sm90Kernel::new(&rt, &Sm90Plan::new(&p).expect("plan")).expect("compile");
    let a = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 64 * 61]).expect("upload");
    let d = DeviceBuf::poisoned(&rt, DType::Bf16, 64 * 64).expect("alloc");
    let s = GemmStrides::tight(&p);
    let e = k
        .launch(
            rt.cx(),
            &GemmArgs {
                a: a.mem(&rt),
                b: a.mem(&rt),
                c: None,
                d: d.mem(&rt),
                bias: None,
                aux: None,
                strides: s,
            },
        )
        .expect_err("misaligned");
    eprintln!("{e}");
    assert!(matches!(e, KernelError::Misaligned { .. }), "{e:?}");
    // A buffer smaller than the problem.
    let p = tn(64, 64, 64);
    let k = Sm90Kernel::new(&rt, &Sm90Plan::new(&p).expect("plan")).expect("compile");
    let a = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 64 * 64]).expect("upload");
    let small = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 64 * 63]).expect("upload");
    let s = GemmStrides::tight(&p);
    let e = k
        .launch(
            rt.cx(),
            &GemmArgs {
                a: a.mem(&rt),
                b: small.mem(&rt),
                c: None,
                d: d.mem(&rt),
                bias: None,
                aux: None,
                strides: s,
            },
        )
        .expect_err("small");
    assert!(matches!(e, KernelError::InvalidProblem { .. }), "{e:?}");
    // MN-major operands are not this path's.
    let mut p = tn(64, 64, 64);
    p.a_major = Major::Col;
    assert!(Sm90Plan::new(&p).is_err());
}

/// A column-major D on the Hopper path (run as the transposed product, still A row-major and
/// B stored N x K): ragged shapes, both bias directions with C and aux, the TMA-store epilogue
/// (plain), padded leading dimensions and batches, both schedules.
#[test]
fn sm90_column_major_d() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let rowbias = Epilogue {
        act: Activation::Relu,
        bias: BiasMode::PerRow,
        aux: true,
        alpha: 1.0,
        beta: 1.0,
    };
    let colbias = Epilogue {
        act: Activation::GeluTanh,
        bias: BiasMode::PerCol,
        aux: false,
        alpha: 1.0,
        beta: 0.0,
    };
    for &(m, n, k) in &[(300, 301, 136), (1000, 1016, 1024), (64, 520, 64)] {
        for e in [Epilogue::default(), rowbias, colbias] {
            let mut p = tn(m, n, k);
            p.d_major = Major::Col;
            p.epilogue = e;
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                Sm90Options::default(),
                None,
                &mut rng,
            ));
        }
    }
    let mut p = tn(200, 136, 64);
    p.d_major = Major::Col;
    p.batch = 3;
    p.epilogue = rowbias;
    let mut s = GemmStrides::tight(&p);
    s.lda += 8;
    s.ldb += 16;
    s.ldc += 6;
    s.ldd += 10;
    s.ldaux += 4;
    s.batch_a = p.m * s.lda + 24;
    s.batch_b = p.n * s.ldb + 8;
    s.batch_c = p.n * s.ldc + 2;
    s.batch_d = p.n * s.ldd + 6;
    s.batch_aux = p.n * s.ldaux + 2;
    s.batch_bias = p.m;
    failures.extend(run(&rt, &p, s, Sm90Options::default(), Some(3), &mut rng));
    let opts = Sm90Options {
        tile: Some((128, 128)),
        schedule: Some(Schedule::PingPong),
        ..Default::default()
    };
    failures.extend(run(&rt, &p, s, opts, Some(3), &mut rng));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
