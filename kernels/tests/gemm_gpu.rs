//! The library GEMM on the GPU, table-driven over the kernel paths and the planner's forced
//! choices: every case runs through `Gemm::launch` with fresh random operands and
//! NaN-poisoned outputs and is compared with the float64 reference (see `common`). Public API
//! only. Skips without a GPU (`TESSERA_REQUIRE_GPU=1` fails instead).

mod common;

use common::{assert_passed, gpu, hopper, run_case, Case};
use tessera_kernels::plan::{ClusterShare, Schedule};
use tessera_kernels::{DType, GemmSpec, Major, Options};

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

#[test]
fn plain_and_named_fusions_with_tails_in_every_dimension() {
    let mut cases = Vec::new();
    for (m, n, k) in [(256, 384, 128), (197, 263, 136), (1, 8, 8), (64, 40, 520)] {
        for e in [
            "acc",
            "bias",
            "relu_bias",
            "gelu_bias",
            "gelu_aux_bias",
            "relu_aux_bias",
        ] {
            cases.push(Case::new(spec(m, n, k, e)));
        }
    }
    run_table(
        "plain_and_named_fusions_with_tails_in_every_dimension",
        cases,
    );
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
    // A large product, checked on blocks of rows.
    cases.push(Case::new(spec(2048, 2048, 2048, "gelu_bias")));
    run_table("orders_batches_padding_offsets_and_scalars", cases);
}

/// The Hopper planner's choices forced one by one: schedules and tiles, stream-K (every
/// partial last wave split, on a grid capped so that there is one), a CTA pair sharing A or
/// B, the TMA store off; each with plain, flag-driven and generated epilogues.
#[test]
fn hopper_choices() {
    let test = "hopper_choices";
    let Some(ctx) = hopper(test) else { return };
    let o = Options::default;
    let forced: Vec<(&str, Options)> = vec![
        (
            "cooperative 128x256",
            Options {
                schedule: Some(Schedule::Cooperative),
                tile: Some((128, 256, 64)),
                ..o()
            },
        ),
        (
            "cooperative 64x256",
            Options {
                schedule: Some(Schedule::Cooperative),
                tile: Some((64, 256, 64)),
                ..o()
            },
        ),
        (
            "pingpong 128x128",
            Options {
                schedule: Some(Schedule::PingPong),
                tile: Some((128, 128, 64)),
                ..o()
            },
        ),
        (
            "pingpong 64x256",
            Options {
                schedule: Some(Schedule::PingPong),
                tile: Some((64, 256, 64)),
                ..o()
            },
        ),
        (
            "stream-K",
            Options {
                schedule: Some(Schedule::Cooperative),
                stream_k: Some(true),
                max_ctas: Some(5),
                ..o()
            },
        ),
        (
            "pair sharing A",
            Options {
                cluster: Some(2),
                share: Some(ClusterShare::A),
                ..o()
            },
        ),
        (
            "pair sharing B",
            Options {
                cluster: Some(2),
                share: Some(ClusterShare::B),
                ..o()
            },
        ),
        (
            "no TMA store",
            Options {
                tma_store: Some(false),
                ..o()
            },
        ),
        (
            "generated epilogue",
            Options {
                generated_epilogue: true,
                ..o()
            },
        ),
        (
            "group 2",
            Options {
                group_m: Some(2),
                ..o()
            },
        ),
    ];
    for (tag, opts) in forced {
        let mut cases = Vec::new();
        for e in [
            "acc",
            "relu_bias",
            "gelu_aux_bias",
            "relu_aux_bias",
            "dgelu_bgrad",
            "drelu_bgrad",
        ] {
            for (m, n, k) in [(640, 768, 448), (200, 328, 136)] {
                cases.push(Case::new(spec(m, n, k, e).options(opts)));
            }
        }
        cases.push(Case::new(
            spec(384, 512, 256, "alpha * acc + beta * c")
                .beta(0.5)
                .options(opts),
        ));
        run_cases(&ctx, test, tag, &cases);
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
