//! GPU launch tests: fresh random data (seed printed), poisoned outputs, the float64 reference.
//!
//! Skip with a printed reason when there is no device; `TESSERA_REQUIRE_GPU=1` makes that a
//! failure. `TESSERA_SEED=<n>` replays a run.
#![cfg(feature = "cuda")]

use tessera_kernels::bench::buffers::DeviceBuf;
use tessera_kernels::bench::verify::{check_plan, require};
use tessera_kernels::launch::runtime::Runtime;
use tessera_kernels::launch::sm80::{GemmArgs, GemmKernel};
use tessera_kernels::plan::GemmStrides;
use tessera_kernels::rng::Rng;
use tessera_kernels::{
    Activation, Arch, BiasMode, DType, Epilogue, GemmPlan, GemmProblem, KernelError, Major,
    PlanOptions,
};

fn runtime() -> Option<Runtime> {
    match Runtime::new(0) {
        Ok(rt) => {
            eprintln!(
                "device: {} ({}), NVRTC {:?}",
                rt.device_name(),
                rt.arch(),
                rt.nvrtc()
            );
            Some(rt)
        }
        Err(e) => {
            if std::env::var("TESSERA_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("TESSERA_REQUIRE_GPU=1 but no usable GPU: {e}");
            }
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

fn problem(m: i64, n: i64, k: i64, a: Major, b: Major) -> GemmProblem {
    let mut p = GemmProblem::new(m, n, k);
    p.a_major = a;
    p.b_major = b;
    p
}

fn run(
    rt: &Runtime,
    p: &GemmProblem,
    s: GemmStrides,
    opts: PlanOptions,
    rng: &mut Rng,
) -> Vec<String> {
    let plan =
        GemmPlan::with_options(p, rt.arch(), opts).unwrap_or_else(|e| panic!("plan {p}: {e}"));
    let r = check_plan(rt, &plan, s, rng.next_u64()).unwrap_or_else(|e| panic!("{p}: {e}"));
    eprintln!("{r}");
    match require(r) {
        Ok(_) => vec![],
        Err(e) => vec![e.to_string()],
    }
}

const ORDERS: [(Major, Major); 4] = [
    (Major::Row, Major::Col),
    (Major::Row, Major::Row),
    (Major::Col, Major::Col),
    (Major::Col, Major::Row),
];

#[test]
fn shapes_and_orders() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let shapes = [
        (1, 1, 1),
        (16, 8, 16),
        (128, 128, 32),
        (129, 257, 33),
        (7, 300, 64),
        (300, 7, 72),
        (1000, 8, 520),
        (8, 1000, 512),
        (2048, 16, 128),
        (33, 65, 1000),
        (256, 512, 4104),
        (1031, 1029, 1027),
    ];
    for &(m, n, k) in &shapes {
        for &(a, b) in &ORDERS {
            let p = problem(m, n, k, a, b);
            failures.extend(run(
                &rt,
                &p,
                GemmStrides::tight(&p),
                PlanOptions::default(),
                &mut rng,
            ));
        }
    }
    // Every tile option (and BK = 64) on one ragged shape.
    for tile in [
        (128, 128, 32),
        (128, 256, 32),
        (128, 256, 64),
        (256, 128, 32),
        (128, 128, 64),
        (256, 128, 64),
    ] {
        for &(a, b) in &ORDERS {
            let p = problem(200, 300, 136, a, b);
            let opts = PlanOptions {
                tile: Some(tile),
                stages: None,
            };
            failures.extend(run(&rt, &p, GemmStrides::tight(&p), opts, &mut rng));
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
fn every_epilogue_and_type() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::GeluErf,
        Activation::GeluTanh,
    ];
    let biases = [BiasMode::None, BiasMode::PerRow, BiasMode::PerCol];
    for act in acts {
        for bias in biases {
            for aux in [false, true] {
                for beta in [0.0, 0.5] {
                    let mut p = problem(97, 130, 200, Major::Row, Major::Col);
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
                        PlanOptions::default(),
                        &mut rng,
                    ));
                }
            }
        }
    }
    for input in [DType::Bf16, DType::F16] {
        for output in [DType::Bf16, DType::F16, DType::F32] {
            for &(a, b) in &ORDERS {
                let mut p = problem(150, 136, 264, a, b);
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
                    PlanOptions::default(),
                    &mut rng,
                ));
            }
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
fn large_problem_on_sampled_rows() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    // Above 2^30 multiply-adds the reference covers 32 sampled rows (first, last, random).
    let mut p = problem(4096, 4096, 4096, Major::Row, Major::Col);
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
        PlanOptions::default(),
        &mut rng,
    ));
    let mut p = problem(3000, 5000, 2000, Major::Col, Major::Row);
    p.output = DType::F32;
    failures.extend(run(
        &rt,
        &p,
        GemmStrides::tight(&p),
        PlanOptions::default(),
        &mut rng,
    ));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn strides_batches_and_misalignment() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    for &(a, b) in &ORDERS {
        // Padded leading dimensions: the padding of D and aux must stay poisoned.
        let mut p = problem(70, 90, 48, a, b);
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
        let (ar, br) = (
            if a == Major::Row { p.m } else { p.k },
            if b == Major::Row { p.k } else { p.n },
        );
        s.batch_a = ar * s.lda + 24;
        s.batch_b = br * s.ldb + 8;
        s.batch_c = p.m * s.ldc + 2;
        s.batch_d = p.m * s.ldd + 6;
        s.batch_aux = p.m * s.ldaux + 2;
        s.batch_bias = p.m;
        failures.extend(run(&rt, &p, s, PlanOptions::default(), &mut rng));
        // Odd leading dimensions: A and B take the element-wise copy, D the single stores.
        let mut p = problem(65, 67, 61, a, b);
        p.batch = 2;
        p.epilogue = Epilogue {
            act: Activation::GeluErf,
            bias: BiasMode::PerCol,
            aux: true,
            alpha: 1.0,
            beta: 0.0,
        };
        let mut s = GemmStrides::tight(&p);
        s.lda += 1;
        s.ldb += 3;
        s.ldd += 1;
        s.ldaux += 1;
        s.batch_a = (if a == Major::Row { p.m } else { p.k }) * s.lda + 1;
        s.batch_b = (if b == Major::Row { p.k } else { p.n }) * s.ldb + 1;
        s.batch_d = p.m * s.ldd + 1;
        s.batch_aux = p.m * s.ldaux + 1;
        failures.extend(run(&rt, &p, s, PlanOptions::default(), &mut rng));
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn bad_arguments_are_errors() {
    let Some(rt) = runtime() else { return };
    let p = GemmProblem::new(64, 64, 64);
    let plan = GemmPlan::new(&p, rt.arch()).expect("plan");
    let k = GemmKernel::new(&rt, &plan).expect("compile");
    let a = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 64 * 64]).expect("upload");
    let small = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 64 * 63]).expect("upload");
    let d = DeviceBuf::poisoned(&rt, DType::Bf16, 64 * 64).expect("alloc");
    let f32d = DeviceBuf::poisoned(&rt, DType::F32, 64 * 64).expect("alloc");
    let s = GemmStrides::tight(&p);
    let args = |b: &'static str| -> Result<(), KernelError> {
        let (bb, dd, st) = match b {
            "small" => (&small, &d, s),
            "dtype" => (&a, &f32d, s),
            _ => (&a, &d, GemmStrides { lda: 63, ..s }),
        };
        k.launch(
            rt.stream(),
            &GemmArgs {
                a: a.mem(&rt),
                b: bb.mem(&rt),
                c: None,
                d: dd.mem(&rt),
                bias: None,
                aux: None,
                strides: st,
            },
        )
        .map(|_| ())
    };
    for case in ["small", "dtype", "ld"] {
        let e = args(case).expect_err(case);
        eprintln!("{case}: {e}");
        assert!(
            matches!(e, KernelError::InvalidProblem { .. }),
            "{case}: {e:?}"
        );
    }
    // A plan for another target is refused.
    let other = if rt.arch() == Arch::Sm80 {
        Arch::Sm90a
    } else {
        Arch::Sm80
    };
    let plan = GemmPlan::new(&p, other).expect("plan");
    assert!(GemmKernel::new(&rt, &plan).is_err());
}

/// A column-major D (and C and aux): run as the transposed product, checked against the
/// float64 reference that reads the outputs column-major. Every storage order of A and B,
/// ragged shapes, both bias directions, C and aux, padded leading dimensions and batches
/// (padding checked untouched), a 32-bit output; then an argument error names the exchange.
#[test]
fn column_major_d() {
    let Some(rt) = runtime() else { return };
    let mut rng = Rng::new(seed());
    let mut failures = Vec::new();
    let epilogues = [
        Epilogue {
            act: Activation::Relu,
            bias: BiasMode::PerRow,
            aux: true,
            alpha: 1.0,
            beta: 1.0,
        },
        Epilogue {
            act: Activation::GeluTanh,
            bias: BiasMode::PerCol,
            aux: false,
            alpha: 0.5,
            beta: 0.0,
        },
    ];
    for &(m, n, k) in &[
        (129, 257, 33),
        (7, 300, 64),
        (300, 7, 72),
        (1031, 1029, 1027),
    ] {
        for &(a, b) in &ORDERS {
            for e in epilogues {
                let mut p = problem(m, n, k, a, b);
                p.d_major = Major::Col;
                p.epilogue = e;
                failures.extend(run(
                    &rt,
                    &p,
                    GemmStrides::tight(&p),
                    PlanOptions::default(),
                    &mut rng,
                ));
            }
        }
    }
    for &(a, b) in &ORDERS {
        let mut p = problem(70, 90, 48, a, b);
        p.d_major = Major::Col;
        p.batch = 3;
        p.output = DType::F32;
        p.epilogue = epilogues[0];
        let mut s = GemmStrides::tight(&p);
        s.lda += 8;
        s.ldb += 16;
        s.ldc += 6;
        s.ldd += 10;
        s.ldaux += 4;
        s.batch_a = (if a == Major::Row { p.m } else { p.k }) * s.lda + 24;
        s.batch_b = (if b == Major::Row { p.k } else { p.n }) * s.ldb + 8;
        // Column-major outputs: N columns of `ld` elements.
        s.batch_c = p.n * s.ldc + 2;
        s.batch_d = p.n * s.ldd + 6;
        s.batch_aux = p.n * s.ldaux + 2;
        s.batch_bias = p.m;
        failures.extend(run(&rt, &p, s, PlanOptions::default(), &mut rng));
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // A column-major D whose leading dimension is below M: the error says which.
    let mut p = GemmProblem::new(64, 32, 64);
    p.d_major = Major::Col;
    let plan = GemmPlan::new(&p, rt.arch()).expect("plan");
    let k = GemmKernel::new(&rt, &plan).expect("compile");
    let a = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 64 * 64]).expect("upload");
    let b = DeviceBuf::upload(&rt, DType::Bf16, &vec![0.5; 32 * 64]).expect("upload");
    let d = DeviceBuf::poisoned(&rt, DType::Bf16, 64 * 32).expect("alloc");
    let s = GemmStrides {
        ldd: 63,
        ..GemmStrides::tight(&p)
    };
    let e = k
        .launch(
            rt.stream(),
            &GemmArgs {
                a: a.mem(&rt),
                b: b.mem(&rt),
                c: None,
                d: d.mem(&rt),
                bias: None,
                aux: None,
                strides: s,
            },
        )
        .expect_err("ldd below M");
    eprintln!("{e}");
    assert!(
        matches!(e, KernelError::InvalidProblem { .. }) && e.to_string().contains("column-major"),
        "{e:?}"
    );
}
