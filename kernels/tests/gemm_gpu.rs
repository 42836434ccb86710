//! The library GEMM on the GPU, table-driven over the kernel paths and the planner's forced
//! choices: every case runs through `Gemm::launch` with fresh random operands and
//! NaN-poisoned outputs and is compared with the float64 reference (see `common`). Public API
//! only. Skips without a GPU (`TESSERA_REQUIRE_GPU=1` fails instead).

mod common;

use common::{assert_passed, gpu, hopper, run_case, Case};
use tessera_kernels::plan::{ClusterShare, Schedule};
use tessera_kernels::{DType, GemmSpec, Major, Operands, Options};

/// The paths every case of the path-independent tables runs on: the planner's choice (the
/// Hopper path on sm_90a where the problem takes it), and the sm80-class path forced.
fn paths() -> [(&'static str, Options); 2] {
    [
        ("auto", Options::default()),
        (
            "sm80",
            Options {
                sm80: true,
                ..Options::default()
            },
        ),
    ]
}

fn spec(m: i64, n: i64, k: i64, epilogue: &str) -> GemmSpec {
    GemmSpec::new(m, n, k)
        .b(Major::Col)
        .epilogue(epilogue)
        .expect("epilogue")
}

fn run_cases(ctx: &tessera_kernels::Context, test: &str, tag: &str, cases: &[Case]) {
    for c in cases {
        let what = format!("{test} [{tag}] {}", c.spec);
        let r = run_case(ctx, c).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_passed(&what, &r);
    }
}

fn run_table(test: &str, cases: Vec<Case>) {
    let Some(ctx) = gpu(test) else { return };
    for (name, opts) in paths() {
        let cases: Vec<Case> = cases
            .iter()
            .map(|c| Case {
                spec: c.spec.clone().options(opts),
                ..c.clone()
            })
            .collect();
        run_cases(&ctx, test, name, &cases);
    }
}

/// The named fusions (and the plain GEMM) on one shape; one test per shape, so that the
/// shapes run in parallel.
fn fusions_on(test: &str, (m, n, k): (i64, i64, i64)) {
    let cases = [
        "acc",
        "bias",
        "relu_bias",
        "gelu_bias",
        "gelu_aux_bias",
        "relu_aux_bias",
    ]
    .iter()
    .map(|e| Case::new(spec(m, n, k, e)))
    .collect();
    run_table(test, cases);
}

#[test]
fn fusions_on_whole_tiles() {
    fusions_on("fusions_on_whole_tiles", (256, 384, 128));
}

#[test]
fn fusions_with_tails_in_every_dimension() {
    fusions_on("fusions_with_tails_in_every_dimension", (197, 263, 136));
}

/// Rows of D on two elements but not four (N = 198): the sm80-class epilogue's pairs.
#[test]
fn fusions_with_rows_on_two_elements() {
    fusions_on("fusions_with_rows_on_two_elements", (70, 198, 72));
}

#[test]
fn fusions_on_a_single_row() {
    fusions_on("fusions_on_a_single_row", (1, 8, 8));
}

#[test]
fn fusions_with_k_past_eight_tiles() {
    fusions_on("fusions_with_k_past_eight_tiles", (64, 40, 520));
}

#[test]
fn backward_fusions_with_masks_and_reductions() {
    let mut cases = Vec::new();
    for (m, n, k) in [(256, 256, 64), (131, 72, 96)] {
        for e in [
            "drelu",
            "dgelu",
            "drelu_bgrad",
            "dgelu_bgrad",
            "bgrada",
            "bgradb",
        ] {
            cases.push(Case::new(spec(m, n, k, e)));
        }
    }
    // With C read (beta) and a row reduction.
    cases.push(Case::new(spec(160, 96, 64, "dgelu_bgrad").beta(0.5)));
    cases.push(Case::new(spec(
        160,
        96,
        64,
        "bgrad_row(acc * dsigmoid(aux_in)) + relu(acc + residual)",
    )));
    run_table("backward_fusions_with_masks_and_reductions", cases);
}

#[test]
fn orders_batches_padding_offsets_and_scalars() {
    let mut cases = Vec::new();
    // Every storage order of A, B and D (the Hopper path takes K-major A and B, also
    // through the transposed product of a column-major D; the others run on the sm80-class
    // path).
    for a in [Major::Row, Major::Col] {
        for b in [Major::Row, Major::Col] {
            for d in [Major::Row, Major::Col] {
                let s = GemmSpec::new(96, 80, 72)
                    .a(a)
                    .b(b)
                    .d(d)
                    .epilogue("relu(acc + bias_col + bias_row)")
                    .expect("epilogue");
                cases.push(Case::new(s));
            }
        }
    }
    // Strided batch with padded rows, fp16 in and fp32 out, alpha and beta with C.
    let s = GemmSpec::new(72, 136, 64)
        .batch(3)
        .dtype(DType::F16)
        .out_dtype(DType::F32)
        .b(Major::Col)
        .alpha(1.5)
        .beta(0.5)
        .epilogue("alpha * acc + beta * c")
        .expect("epilogue");
    cases.push(Case {
        pad: 8,
        ..Case::new(s)
    });
    // Batched trees with a mask and a reduction, padded.
    cases.push(Case {
        pad: 8,
        ..Case::new(spec(96, 200, 64, "drelu_bgrad").batch(2))
    });
    cases.push(Case::new(spec(96, 200, 64, "relu_aux_bias").batch(3)));
    // D written in place over C, and a residual.
    let s = spec(128, 64, 64, "relu(alpha * acc + beta * c + residual)").beta(1.0);
    cases.push(Case {
        d_over_c: true,
        ..Case::new(s)
    });
    // M x N tensors starting off the 16-byte grid (the TMA store cannot write them: the
    // kernels store element by element instead).
    cases.push(Case {
        offset: 3,
        ..Case::new(spec(130, 72, 64, "relu(acc + residual)"))
    });
    cases.push(Case {
        offset: 1,
        ..Case::new(spec(130, 72, 64, "gelu_aux_bias"))
    });
    // A coordinate-aware epilogue off the tile grid, on a column-major D.
    let s = spec(200, 136, 64, "select(row < 77, sigmoid(acc), tanh(acc))").d(Major::Col);
    cases.push(Case::new(s));
    run_table("orders_batches_padding_offsets_and_scalars", cases);
}

#[test]
fn a_large_product_on_blocks_of_rows() {
    run_table(
        "a_large_product_on_blocks_of_rows",
        vec![Case::new(spec(2048, 2048, 2048, "gelu_bias"))],
    );
}

/// One of the Hopper planner's choices forced: plain, flag-driven and generated epilogues,
/// with masks, reductions and C, on a shape with a tail in every dimension.
fn hopper_choice(test: &str, opts: Options) {
    hopper_choice_on(
        test,
        opts,
        &[
            "acc",
            "relu_bias",
            "gelu_aux_bias",
            "relu_aux_bias",
            "dgelu_bgrad",
            "drelu_bgrad",
        ],
    );
}

/// A forced pair of CTAs: the flag-driven fusions only (the planner refuses a cluster with the
/// generated epilogue), a row bias and an fp32 output among them.
fn hopper_pair(test: &str, share: ClusterShare) {
    let opts = Options {
        cluster: Some(2),
        share: Some(share),
        ..Options::default()
    };
    hopper_choice_on(
        test,
        opts,
        &["acc", "relu_bias", "gelu_aux_bias", "gelu(acc + bias_row)"],
    );
    let Some(ctx) = hopper(test) else { return };
    let s = spec(300, 290, 136, "relu_bias")
        .out_dtype(DType::F32)
        .options(opts);
    run_cases(&ctx, test, "pair fp32", &[Case::new(s)]);
}

fn hopper_choice_on(test: &str, opts: Options, epilogues: &[&str]) {
    let Some(ctx) = hopper(test) else { return };
    let mut cases: Vec<Case> = epilogues
        .iter()
        .map(|e| Case::new(spec(520, 712, 200, e).options(opts)))
        .collect();
    cases.push(Case::new(
        spec(384, 512, 256, "alpha * acc + beta * c")
            .beta(0.5)
            .options(opts),
    ));
    run_cases(&ctx, test, "forced", &cases);
}

#[test]
fn hopper_pair_sharing_a() {
    hopper_pair("hopper_pair_sharing_a", ClusterShare::A);
}

#[test]
fn hopper_pair_sharing_b() {
    hopper_pair("hopper_pair_sharing_b", ClusterShare::B);
}

macro_rules! hopper_choices {
    ($($name:ident: $opts:expr;)*) => {$(
        #[test]
        fn $name() {
            hopper_choice(stringify!($name), $opts);
        }
    )*};
}

hopper_choices! {
    hopper_cooperative_128x256: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 256, 64)), ..Options::default() };
    hopper_cooperative_64x256: Options { schedule: Some(Schedule::Cooperative), tile: Some((64, 256, 64)), ..Options::default() };
    hopper_cooperative_128x64: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 64, 64)), ..Options::default() };
    hopper_cooperative_64x64: Options { schedule: Some(Schedule::Cooperative), tile: Some((64, 64, 64)), ..Options::default() };
    hopper_pingpong_128x128: Options { schedule: Some(Schedule::PingPong), tile: Some((128, 128, 64)), ..Options::default() };
    hopper_pingpong_64x256: Options { schedule: Some(Schedule::PingPong), tile: Some((64, 256, 64)), ..Options::default() };
    hopper_stream_k: Options { schedule: Some(Schedule::Cooperative), stream_k: Some(true), max_ctas: Some(5), ..Options::default() };
    hopper_without_tma_store: Options { tma_store: Some(false), ..Options::default() };
    hopper_generated_epilogue: Options { generated_epilogue: true, ..Options::default() };
    hopper_raster_group_2: Options { group_m: Some(2), ..Options::default() };
    hopper_cooperative_128x32: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 32, 64)), ..Options::default() };
    hopper_cooperative_128x96: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 96, 64)), ..Options::default() };
    hopper_cooperative_128x160: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 160, 64)), ..Options::default() };
    hopper_cooperative_128x192: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 192, 64)), ..Options::default() };
    hopper_cooperative_128x224: Options { schedule: Some(Schedule::Cooperative), tile: Some((128, 224, 64)), ..Options::default() };
    hopper_pingpong_128x96: Options { schedule: Some(Schedule::PingPong), tile: Some((128, 96, 64)), ..Options::default() };
}

/// The planner's exact-width tiles (the fewest equal columns on the 32-column grid where the
/// standard tiles would leave part of a column empty): N = 96, 150, 200, 224 (one column), 300
/// (two of 160) and 600 (three of 224), with tails in M and K, flag-driven and generated
/// epilogues, masks and reductions.
#[test]
fn exact_width_tiles_where_n_pads_wider_ones() {
    let test = "exact_width_tiles_where_n_pads_wider_ones";
    let Some(ctx) = hopper(test) else { return };
    for n in [96, 150, 200, 224, 300, 600] {
        let cases: Vec<Case> = [
            "acc",
            "relu_bias",
            "gelu_aux_bias",
            "drelu_bgrad",
            "relu(acc + bias_col + residual)",
        ]
        .iter()
        .map(|e| Case::new(spec(8500, n, 136, e)))
        .collect();
        run_cases(&ctx, test, &format!("N = {n}"), &cases);
    }
}

/// A tree's staged bias vectors and residual where one tile column covers N, on both
/// schedules, a CTA taking many tiles (the stages' buffers reused); beside a row bias and with
/// a batch.
#[test]
fn tree_stages_over_many_tiles_a_cta() {
    let test = "tree_stages_over_many_tiles_a_cta";
    let Some(ctx) = hopper(test) else { return };
    for schedule in [Schedule::Cooperative, Schedule::PingPong] {
        let opts = Options {
            schedule: Some(schedule),
            tile: Some((128, 64, 64)),
            max_ctas: Some(3),
            ..Options::default()
        };
        let cases = [
            spec(1000, 64, 256, "relu(acc + bias_col + residual)"),
            spec(777, 50, 136, "gelu(acc + bias_col) + residual"),
            spec(700, 64, 128, "relu(acc + bias_col + bias_row)"),
            spec(300, 64, 128, "relu(acc + bias_col + residual)").batch(3),
        ]
        .map(|s| Case::new(s.options(opts)));
        run_cases(&ctx, test, &format!("{schedule:?}"), &cases);
    }
}

/// Many short tiles under ping-pong, the same `Gemm` launched again and again (the turn
/// barriers and the stream-K flags must be left as the next launch expects them).
#[test]
fn repeated_launches_keep_their_state() {
    let test = "repeated_launches_keep_their_state";
    let Some(ctx) = gpu(test) else { return };
    let o = Options::default;
    let mut cases = vec![
        Case {
            repeat: 5,
            ..Case::new(spec(2048, 1024, 64, "relu_bias"))
        },
        Case {
            repeat: 5,
            ..Case::new(spec(1000, 1000, 1000, "drelu_bgrad"))
        },
    ];
    if ctx.arch() == tessera_kernels::Arch::Sm90a {
        cases.push(Case {
            repeat: 5,
            ..Case::new(spec(1024, 2048, 64, "acc").options(Options {
                schedule: Some(Schedule::PingPong),
                ..o()
            }))
        });
        cases.push(Case {
            repeat: 5,
            ..Case::new(spec(768, 1024, 512, "dgelu_bgrad").options(Options {
                stream_k: Some(true),
                max_ctas: Some(7),
                ..o()
            }))
        });
    }
    run_cases(&ctx, test, "repeat", &cases);
}

/// Decode-like products (M at most 256, K in the thousands): fewer tiles than SMs, so the
/// planner splits every tile along K over the SMs (stream-K on a single wave, checked on the
/// plan where the device is a Hopper one). Plain, flag-driven and tree epilogues; tails in M,
/// N and K; a grid narrower than the SMs (8 tiles in 4 parts, 32 CTAs); a batch; fp16 in with
/// fp32 out; a column-major D.
#[test]
fn small_m_splits_every_tile_along_k() {
    let test = "small_m_splits_every_tile_along_k";
    let mut cases: Vec<Case> = ["acc", "relu_bias", "gelu_aux_bias", "dgelu_bgrad"]
        .iter()
        .map(|e| Case::new(spec(16, 2048, 4096, e)))
        .collect();
    cases.push(Case::new(spec(64, 1024, 4096, "acc")));
    cases.push(Case::new(spec(128, 1024, 4096, "bias")));
    cases.push(Case::new(spec(1, 4096, 2048, "acc")));
    cases.push(Case::new(spec(33, 1000, 2504, "relu_bias")));
    cases.push(Case {
        repeat: 3,
        ..Case::new(spec(32, 1024, 2048, "acc").batch(4))
    });
    let s = GemmSpec::new(16, 2048, 4096)
        .dtype(DType::F16)
        .out_dtype(DType::F32)
        .b(Major::Col)
        .beta(0.5)
        .epilogue("alpha * acc + beta * c")
        .expect("epilogue");
    cases.push(Case::new(s));
    cases.push(Case::new(spec(2048, 16, 4096, "acc").d(Major::Col)));
    if let Some(ctx) = hopper(test) {
        for c in &cases {
            let plan = c.spec.plan(ctx.arch(), ctx.sm_count()).expect("plan");
            assert!(plan.stream_k(), "{}: {}", c.spec, plan.summary());
        }
    }
    run_table(test, cases);
}

/// A single wave of compute-bound tiles split along K in a whole number of parts a tile (the
/// grid a multiple of the tiles): many parts (512 x 512 x 8192: 16 tiles in 8), a partial
/// last k-tile, both tile widths (1536 x 1024 x 8192: 128 x 256 in 2 parts), the fusions
/// whose sums and masks cross the parts.
#[test]
fn long_k_waves_split_in_whole_parts_a_tile() {
    let test = "long_k_waves_split_in_whole_parts_a_tile";
    let mut cases: Vec<Case> = ["acc", "gelu_bias", "relu_aux_bias", "dgelu_bgrad"]
        .iter()
        .map(|e| Case::new(spec(512, 512, 8192, e)))
        .collect();
    cases.push(Case::new(spec(768, 768, 8200, "drelu_bgrad")));
    // 48 tiles of 128 x 256 in 2 parts of 64 k-tiles.
    cases.push(Case::new(spec(1536, 1024, 8192, "relu_aux_bias")));
    cases.push(Case::new(spec(768, 3072, 4100, "bias")));
    cases.push(Case {
        repeat: 3,
        ..Case::new(spec(1000, 520, 6000, "acc"))
    });
    if let Some(ctx) = hopper(test) {
        let wide = cases[5]
            .spec
            .plan(ctx.arch(), ctx.sm_count())
            .expect("plan");
        assert_eq!(wide.cta_tile(), (128, 256, 64), "{}", wide.summary());
        for c in &cases[..6] {
            let plan = c.spec.plan(ctx.arch(), ctx.sm_count()).expect("plan");
            let summary = plan.summary();
            // "... sk T/T on G": every tile split, G a multiple of T of at least 2 T.
            let sk: Vec<i64> = summary
                .split(" sk ")
                .nth(1)
                .unwrap_or_else(|| panic!("{}: not split: {summary}", c.spec))
                .split(|ch: char| !ch.is_ascii_digit())
                .filter(|t| !t.is_empty())
                .take(3)
                .map(|t| t.parse().unwrap())
                .collect();
            assert!(
                sk.len() == 3 && sk[0] == sk[1] && sk[2] % sk[0] == 0 && sk[2] >= 2 * sk[0],
                "{}: {summary}",
                c.spec
            );
        }
    }
    run_table(test, cases);
}

/// A last wave thin enough (an eighth of the CTAs) to be joined by the wave before it in the
/// stream-K run: on 8 CTAs, 9 tiles of 128 x 128 (all in runs of 1.125 tiles) and 17 tiles
/// (one whole wave, then 9 tiles in runs), a partial last k-tile and edges in M and N; the
/// fusions whose masks and sums cross the parts, a staged residual, and the flags left for the
/// launches that follow. Then the planner's own plan of a shape whose last wave joins the one
/// before (1536 x 3072 x 8192: 144 tiles of 128 x 256 on the SMs).
#[test]
fn stream_k_joins_a_thin_last_wave_to_the_wave_before() {
    let test = "stream_k_joins_a_thin_last_wave_to_the_wave_before";
    let Some(ctx) = hopper(test) else { return };
    let opts = Options {
        schedule: Some(Schedule::Cooperative),
        tile: Some((128, 128, 64)),
        stream_k: Some(true),
        max_ctas: Some(8),
        ..Options::default()
    };
    let mut cases = Vec::new();
    for (m, n) in [(300, 330), (2100, 100)] {
        for e in [
            "acc",
            "relu_aux_bias",
            "dgelu_bgrad",
            "relu(acc + bias_col + residual)",
        ] {
            cases.push(Case::new(spec(m, n, 2000, e).options(opts)));
        }
        cases.push(Case {
            repeat: 3,
            ..Case::new(spec(m, n, 2000, "gelu_aux_bias").options(opts))
        });
    }
    run_cases(&ctx, test, "forced", &cases);
    let planned = Case::new(spec(1536, 3072, 8192, "acc"));
    let summary = planned
        .spec
        .plan(ctx.arch(), ctx.sm_count())
        .expect("plan")
        .summary();
    assert!(
        summary.contains(" sk 144/144 "),
        "{}: {summary}",
        planned.spec
    );
    run_cases(&ctx, test, "planned", &[planned]);
}

/// The planner's defaults off the standard shapes: a plain GEMM with edge tiles (cooperative,
/// not ping-pong), a fused batch whose 128 x 256 waves quantize badly (128 x 128), a batch of
/// N = 128 products (128 x 128), K with a partial last k-tile, and N <= 64 (64 columns).
#[test]
fn default_plans_off_the_standard_shapes() {
    let test = "default_plans_off_the_standard_shapes";
    let cases = vec![
        Case::new(spec(4000, 4000, 1000, "acc")),
        Case::new(spec(256, 512, 64, "gelu_bias").batch(67)),
        Case::new(spec(256, 128, 128, "gelu_bias").batch(70)),
        Case::new(spec(4096, 4096, 1000, "acc")),
        Case::new(spec(1000, 40, 300, "gelu_aux_bias")),
        Case::new(spec(40, 56, 1000, "acc")),
        // One wave of the narrowest width between 128 and 256 that fits it.
        Case::new(spec(1041, 2064, 1024, "relu(acc + bias_col + residual)")),
        Case::new(spec(1170, 2100, 2048, "gelu_aux_bias")),
    ];
    if let Some(ctx) = hopper(test) {
        let want = [
            (Schedule::Cooperative, (128, 256, 64)),
            (Schedule::Cooperative, (128, 128, 64)),
            (Schedule::Cooperative, (128, 128, 64)),
            (Schedule::Cooperative, (128, 256, 64)),
            (Schedule::Cooperative, (128, 64, 64)),
            (Schedule::Cooperative, (64, 64, 64)),
            (Schedule::Cooperative, (128, 160, 64)),
            (Schedule::Cooperative, (128, 192, 64)),
        ];
        for (c, w) in cases.iter().zip(want) {
            let plan = c.spec.plan(ctx.arch(), ctx.sm_count()).expect("plan");
            assert_eq!(
                (plan.schedule(), plan.cta_tile()),
                (Some(w.0), w.1),
                "{}: {}",
                c.spec,
                plan.summary()
            );
        }
    }
    run_table(test, cases);
}

/// K or N not a multiple of 8: an odd K leaves the Hopper path (rows of A and B off TMA's
/// 16-byte grid); an odd N keeps it, D stored as whole rows where N fits one tile, else
/// element by element (with a split along K at small M); fp16 and a batch with an odd N.
#[test]
fn odd_k_and_n() {
    let mut cases = Vec::new();
    for e in ["acc", "relu_bias"] {
        cases.push(Case::new(spec(100, 75, 77, e)));
        cases.push(Case::new(spec(130, 75, 136, e)));
    }
    cases.push(Case::new(spec(16, 1001, 2048, "acc")));
    cases.push(Case::new(spec(300, 257, 1001, "gelu_aux_bias")));
    let s = GemmSpec::new(50, 77, 88)
        .batch(3)
        .dtype(DType::F16)
        .b(Major::Col)
        .epilogue("relu(acc + bias_col)")
        .expect("epilogue");
    cases.push(Case::new(s));
    run_table("odd_k_and_n", cases);
}

/// N in one tile with D's rows off TMA's 16-byte grid: the Hopper kernel's row store (each
/// warp's rows packed in shared memory and copied out in bulk, the last bytes of a run by the
/// lanes), on both schedules, odd and even N, M with partial warps and tiles, aux beside D,
/// the generated tree epilogue; and where D is not contiguous rows on 16 bytes (padded rows,
/// a base off the grid), the scratch path in the same kernel.
#[test]
fn whole_row_stores_where_n_fits_a_tile() {
    let test = "whole_row_stores_where_n_fits_a_tile";
    let Some(ctx) = gpu(test) else { return };
    let forced = |tile, schedule| Options {
        tile: Some(tile),
        schedule: Some(schedule),
        ..Options::default()
    };
    let mut cases = Vec::new();
    for (m, n, k, opts) in [
        (1001, 124, 320, Options::default()),
        (777, 127, 200, forced((128, 128, 64), Schedule::Cooperative)),
        (515, 60, 136, Options::default()),
        (300, 100, 64, forced((128, 128, 64), Schedule::PingPong)),
        (67, 21, 72, forced((64, 64, 64), Schedule::Cooperative)),
        // (N = 90: even, on a 64-row tile; 65: three passes, one column in the last.)
        (403, 90, 128, Options::default()),
        (259, 65, 96, forced((128, 128, 64), Schedule::Cooperative)),
    ] {
        for e in [
            "acc",
            "relu_bias",
            "gelu_aux_bias",
            "relu(acc + bias_row) + residual",
        ] {
            let s = spec(m, n, k, e).options(opts);
            let plan = tessera_kernels::Gemm::new(&ctx, &s).expect("gemm");
            assert!(
                plan.plan().row_store(),
                "{s}: {}",
                plan.plan().kernel_name()
            );
            cases.push(Case::new(s));
        }
    }
    let mut padded = Case::new(spec(1001, 124, 320, "gelu_aux_bias"));
    padded.pad = 8;
    let mut offset = Case::new(spec(1001, 124, 320, "relu_bias"));
    offset.offset = 3;
    cases.extend([padded, offset]);
    run_cases(&ctx, test, "sm90", &cases);
}

/// K whose rows are off TMA's 16-byte grid on the Hopper path: A and B staged into padded
/// rows of the workspace first. Tight and padded rows (in place where the padding puts them
/// on the grid, staged where it does not), a batch, a column-major D (the staged operands
/// are the transposed product's), stream-K beside the staged copies in one workspace, a
/// generated tree epilogue, fp16, repeated launches.
#[test]
fn staged_operands_where_k_rows_are_off_the_tma_grid() {
    let test = "staged_operands_where_k_rows_are_off_the_tma_grid";
    let Some(ctx) = hopper(test) else { return };
    let mut cases = vec![
        Case::new(spec(1000, 1016, 1001, "gelu_aux_bias")),
        Case::new(spec(
            257,
            300,
            147,
            "select(row < 100, sigmoid(acc), tanh(acc + bias_col))",
        )),
        Case::new(spec(16, 4096, 4095, "acc")),
        Case::new(spec(77, 64, 9, "acc")),
        Case::new(
            GemmSpec::new(300, 200, 333)
                .b(Major::Col)
                .d(Major::Col)
                .epilogue("relu(acc + bias_row)")
                .expect("epilogue"),
        ),
        Case::new(
            GemmSpec::new(130, 90, 99)
                .batch(3)
                .b(Major::Col)
                .epilogue("relu_bias")
                .expect("epilogue"),
        ),
        Case::new(
            GemmSpec::new(512, 520, 4095)
                .dtype(DType::F16)
                .b(Major::Col)
                .epilogue("acc")
                .expect("epilogue"),
        ),
    ];
    for pad in [1, 3] {
        cases.push(Case {
            pad,
            ..Case::new(spec(200, 136, 77, "relu_bias"))
        });
    }
    // Rows of 4112 bytes, off the 32-byte sector grid: B staged, A read in place; with 1
    // element of padding (A's own rows off TMA's 16-byte grid) both staged; with 8 (4128
    // bytes) both read in place.
    for pad in [0, 1, 8] {
        cases.push(Case {
            pad,
            ..Case::new(spec(2048, 2048, 2056, "gelu_aux_bias"))
        });
    }
    // B alone staged where the kernel's operands are exchanged (a column-major D: the
    // kernel's B is the caller's A), batched, fp16 in and fp32 out.
    cases.push(Case::new(
        GemmSpec::new(600, 2000, 1032)
            .batch(2)
            .dtype(DType::F16)
            .out_dtype(DType::F32)
            .b(Major::Col)
            .d(Major::Col)
            .epilogue("relu(acc + bias_row)")
            .expect("epilogue"),
    ));
    cases.push(Case {
        repeat: 2,
        ..Case::new(spec(130, 75, 135, "acc"))
    });
    for c in &cases {
        let plan = c.spec.plan(ctx.arch(), ctx.sm_count()).expect("plan");
        assert_eq!(plan.path(), "sm90", "{}", c.spec);
        assert!(plan.staged_k().is_some(), "{}", c.spec);
        let k = c.spec.to_string();
        let off_sectors = k.contains("x2056") || k.contains("x1032");
        assert_eq!(plan.stages_b_only(), off_sectors, "{}", c.spec);
    }
    run_cases(&ctx, test, "staged", &cases);
}

/// Rows of A and B off the 32-byte sector grid (K an odd multiple of 8) and at most 8 k-tiles
/// load by cp.async from every producer thread: tails in M, N and K (zero-filled rows and
/// chunks), operands padded onto the 16-byte grid (read in place) and off it (copied first), a
/// batch, a column-major D, fp16, both schedules, 128 x 64 and 64 x 128 tiles, stream-K
/// parts, fused and generated epilogues.
#[test]
fn cp_async_loads_where_k_rows_are_off_the_sector_grid() {
    let test = "cp_async_loads_where_k_rows_are_off_the_sector_grid";
    let Some(ctx) = hopper(test) else { return };
    let o = Options::default;
    let mut cases = Vec::new();
    for pad in [0, 1, 8] {
        cases.push(Case {
            pad,
            ..Case::new(spec(333, 290, 136, "relu_aux_bias"))
        });
    }
    for e in [
        "acc",
        "gelu_aux_bias",
        "dgelu_bgrad",
        "relu(acc + bias_col + residual)",
    ] {
        cases.push(Case::new(spec(1000, 1016, 456, e)));
    }
    cases.push(Case::new(
        GemmSpec::new(130, 90, 104)
            .batch(3)
            .b(Major::Col)
            .epilogue("relu_bias")
            .expect("epilogue"),
    ));
    cases.push(Case::new(
        GemmSpec::new(300, 200, 344)
            .b(Major::Col)
            .d(Major::Col)
            .epilogue("relu(acc + bias_row)")
            .expect("epilogue"),
    ));
    cases.push(Case::new(
        GemmSpec::new(512, 520, 488)
            .dtype(DType::F16)
            .b(Major::Col)
            .epilogue("acc")
            .expect("epilogue"),
    ));
    cases.push(Case::new(spec(16, 4096, 344, "acc")));
    let forced = [
        Options {
            schedule: Some(Schedule::PingPong),
            ..o()
        },
        Options {
            tile: Some((128, 64, 64)),
            ..o()
        },
        Options {
            tile: Some((64, 128, 64)),
            ..o()
        },
        Options {
            stream_k: Some(true),
            max_ctas: Some(7),
            ..o()
        },
    ];
    for f in forced {
        cases.push(Case {
            repeat: 2,
            ..Case::new(spec(777, 1100, 440, "relu_bias").options(f))
        });
    }
    for c in &cases {
        let plan = c.spec.plan(ctx.arch(), ctx.sm_count()).expect("plan");
        assert!(plan.cp_async_ab(), "{}: {}", c.spec, plan.summary());
    }
    run_cases(&ctx, test, "cp.async", &cases);
}

/// Back-to-back launches as programmatic dependents (the Hopper default) keep the stream's
/// order of memory: `H = X W1`, then `Y = H W2` reading that H, then `H = X W3` over the H the
/// second GEMM read, three times over with no synchronization between. A CTA touching memory
/// before its predecessor finished would read NaN poison or the other product into Y, or
/// let the third GEMM overwrite H under the second. A stream-K chain (M = 16: every tile in
/// parts, one workspace and its flags shared by the first and third launches) and a chain of
/// whole tiles; rows sampled for the float64 reference.
#[test]
fn dependent_launches_keep_the_stream_order() {
    let test = "dependent_launches_keep_the_stream_order";
    let Some(ctx) = hopper(test) else { return };
    let stream = ctx.cudarc().default_stream();
    for (m, k, n1, n2) in [
        (16usize, 4096usize, 1024usize, 2048usize),
        (1000, 2048, 640, 384),
    ] {
        let mut rng = common::Rng::new(0x5eed_0000 + m as u64);
        let mut rand = |len: usize| -> Vec<f64> {
            (0..len)
                .map(|_| common::round(rng.unit(), DType::Bf16))
                .collect()
        };
        // X is M x K row-major; W1 and W3 (K x N1) and W2 (N1 x N2) column-major, K-major
        // as the Hopper path reads them: element (kk, j) of W1 at j * K + kk.
        let (x, w1, w3, w2) = (rand(m * k), rand(k * n1), rand(k * n1), rand(n1 * n2));
        let gemm = |m: usize, n: usize, k: usize| {
            let spec = GemmSpec::new(m as i64, n as i64, k as i64).b(Major::Col);
            tessera_kernels::Gemm::new(&ctx, &spec).expect("gemm")
        };
        let (g1, g2) = (gemm(m, n1, k), gemm(m, n2, n1));
        for g in [&g1, &g2] {
            assert!(g.plan().path() == "sm90", "{}", g.plan().summary());
        }
        let up = |v: &[f64]| common::Buf::upload(&stream, DType::Bf16, v);
        let (xd, w1d, w3d, w2d) = (up(&x), up(&w1), up(&w3), up(&w2));
        let mut h = common::Buf::poisoned(&stream, DType::Bf16, m * n1);
        let mut y = common::Buf::poisoned(&stream, DType::Bf16, m * n2);
        for _ in 0..3 {
            g1.launch(
                &stream,
                xd.tensor(),
                w1d.tensor(),
                h.tensor_mut(),
                Operands::new(),
            )
            .expect("H = X W1");
            g2.launch(
                &stream,
                h.tensor(),
                w2d.tensor(),
                y.tensor_mut(),
                Operands::new(),
            )
            .expect("Y = H W2");
            g1.launch(
                &stream,
                xd.tensor(),
                w3d.tensor(),
                h.tensor_mut(),
                Operands::new(),
            )
            .expect("H = X W3");
        }
        stream.synchronize().expect("sync");
        let (hg, yg) = (h.download(&stream), y.download(&stream));
        // Each product within 2^-7 of the sum of its terms' magnitudes (the fp32 sum and the
        // bf16 rounding of the result); Y's bound also covers H1's last bit, which the GPU and
        // the float64 reference may round differently.
        let mut worst = 0.0f64;
        for i in (0..m).step_by(m.div_ceil(64)) {
            let row = |w: &[f64], n: usize| -> (Vec<f64>, Vec<f64>) {
                let (mut v, mut s) = (vec![0.0; n], vec![0.0; n]);
                for kk in 0..k {
                    for j in 0..n {
                        v[j] += x[i * k + kk] * w[j * k + kk];
                        s[j] += (x[i * k + kk] * w[j * k + kk]).abs();
                    }
                }
                (v, s)
            };
            let (h3, h3s) = row(&w3, n1);
            for j in 0..n1 {
                let r = (hg[i * n1 + j] - h3[j]).abs() / (h3s[j] / 128.0);
                assert!(
                    r <= 1.0,
                    "{m}x{k}: H[{i},{j}] = {} against {}",
                    hg[i * n1 + j],
                    h3[j]
                );
                worst = worst.max(r);
            }
            let (h1, _) = row(&w1, n1);
            let h1: Vec<f64> = h1.iter().map(|&v| common::round(v, DType::Bf16)).collect();
            for j in 0..n2 {
                let (mut v, mut s) = (0.0, 0.0);
                for kk in 0..n1 {
                    v += h1[kk] * w2[j * n1 + kk];
                    s += (h1[kk] * w2[j * n1 + kk]).abs();
                }
                let r = (yg[i * n2 + j] - v).abs() / (s / 128.0);
                assert!(
                    r <= 1.0,
                    "{m}x{k}: Y[{i},{j}] = {} against {v}",
                    yg[i * n2 + j]
                );
                worst = worst.max(r);
            }
        }
        eprintln!("{test}: {m} x {k} -> {n1} -> {n2}: worst error {worst:.3} of the bound");
    }
}
