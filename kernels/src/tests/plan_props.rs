//! The planner's layouts against what the hardware and the kernel need, checked by brute force
//! over every thread, lane and element (no GPU needed), plus snapshots of the printed plan and
//! the generated preamble.

use std::collections::HashSet;

use tessera_kernels::codegen::{cuda_source, preamble, COMMON_CUH, GEMM_SM80_CUH};
use tessera_kernels::plan::OperandPlan;
use tessera_kernels::{Arch, DType, GemmPlan, GemmProblem, Major, PlanOptions};

fn plans() -> Vec<GemmPlan> {
    let mut v = Vec::new();
    for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm90a] {
        for (a, b) in [
            (Major::Row, Major::Col),
            (Major::Row, Major::Row),
            (Major::Col, Major::Col),
            (Major::Col, Major::Row),
        ] {
            for (m, n, k) in [(100, 100, 64), (4096, 4096, 4096)] {
                let mut p = GemmProblem::new(m, n, k);
                p.a_major = a;
                p.b_major = b;
                v.push(GemmPlan::new(&p, arch).expect("plan"));
            }
            for tile in [(128, 256, 32), (256, 128, 64), (128, 128, 32)] {
                let mut p = GemmProblem::new(1000, 1000, 1000);
                p.a_major = a;
                p.b_major = b;
                let opts = PlanOptions {
                    tile: Some(tile),
                    stages: Some(2),
                };
                v.push(GemmPlan::with_options(&p, arch, opts).expect("plan"));
            }
        }
    }
    v
}

fn coord(o: &OperandPlan, idx: i64) -> (i64, i64) {
    (idx % o.tile_mn, idx / o.tile_mn)
}

#[test]
fn smem_tiles_are_bijections() {
    for plan in plans() {
        let bk = plan.cta_tile.2;
        for o in [&plan.a, &plan.b] {
            let mut seen = HashSet::new();
            for mn in 0..o.tile_mn {
                for k in 0..bk {
                    let off = o.smem.offset(mn, k).unwrap();
                    assert!((0..o.tile_mn * bk).contains(&off), "{}: {off}", o.smem);
                    assert!(seen.insert(off), "{}: offset {off} twice", o.smem);
                }
            }
            assert!(
                o.smem.ldsm_conflicts.is_conflict_free()
                    && o.smem.copy_conflicts.is_conflict_free()
            );
        }
    }
}

#[test]
fn copy_partition_covers_each_element_once() {
    for plan in plans() {
        let bk = plan.cta_tile.2;
        for o in [&plan.a, &plan.b] {
            let iters = o.copy.mode(1).unwrap().size();
            let mut seen = HashSet::new();
            for t in 0..plan.threads {
                for i in 0..iters {
                    let idx = o
                        .copy
                        .eval(&tessera_layout::IntTuple::flat([t, i]))
                        .unwrap();
                    let (mn, k) = coord(o, idx);
                    for v in 0..8 {
                        let e = if o.k_major { (mn, k + v) } else { (mn + v, k) };
                        assert!(e.0 < o.tile_mn && e.1 < bk, "{}: {e:?} outside", o.copy);
                        assert!(seen.insert(e), "{} copies {e:?} twice", o.copy);
                    }
                }
            }
            assert_eq!(
                seen.len() as i64,
                o.tile_mn * bk,
                "{} misses elements",
                o.copy
            );
        }
    }
}

/// What thread `t`'s register `j`, half `e`, holds after ldmatrix.x4 (`.trans` for MN-major):
/// tile coordinates `(mn, k)`, from the row addresses the plan hands out.
fn ldsm_holds(o: &OperandPlan, t: i64, j: i64, e: i64) -> (i64, i64) {
    let lane_of = |row: i64| 8 * j + row;
    if o.k_major {
        let (mn, k) = coord(o, o.ldsm.call(lane_of(t / 4)).unwrap());
        (mn, k + 2 * (t % 4) + e)
    } else {
        let (mn, k) = coord(o, o.ldsm.call(lane_of(2 * (t % 4) + e)).unwrap());
        (mn + t / 4, k)
    }
}

#[test]
fn ldmatrix_partitions_deliver_the_mma_fragments() {
    for plan in plans() {
        for t in 0..32 {
            for j in 0..4 {
                for e in 0..2 {
                    // PTX ISA, mma.m16n8k16 .bf16/.f16: a_j holds row t/4 + 8 (j%2), column
                    // 2 (t%4) + e + 8 (j/2).
                    let want_a = (t / 4 + 8 * (j % 2), 2 * (t % 4) + e + 8 * (j / 2));
                    assert_eq!(
                        ldsm_holds(&plan.a, t, j, e),
                        want_a,
                        "A {} t{t} j{j} e{e}",
                        plan.kernel_name()
                    );
                    // b0/b1 of n8 atom j/2: k = 2 (t%4) + e + 8 (j%2), n = t/4 + 8 (j/2).
                    let want_b = (t / 4 + 8 * (j / 2), 2 * (t % 4) + e + 8 * (j % 2));
                    assert_eq!(
                        ldsm_holds(&plan.b, t, j, e),
                        want_b,
                        "B {} t{t} j{j} e{e}",
                        plan.kernel_name()
                    );
                }
            }
        }
    }
}

#[test]
fn accumulator_map_is_the_mma_c_fragment() {
    let plan = GemmPlan::new(&GemmProblem::new(64, 64, 64), Arch::Sm80).unwrap();
    for t in 0..32 {
        for r in 0..4 {
            let idx = plan
                .acc
                .eval(&tessera_layout::IntTuple::flat([t, r]))
                .unwrap();
            // c_r: row t/4 + 8 (r/2), column 2 (t%4) + r%2.
            assert_eq!(
                (idx % 16, idx / 16),
                (t / 4 + 8 * (r / 2), 2 * (t % 4) + r % 2)
            );
        }
    }
}

#[test]
fn plan_choices() {
    let big = GemmPlan::new(&GemmProblem::new(8192, 8192, 8192), Arch::Sm90a).unwrap();
    assert_eq!(
        (big.cta_tile, big.warps, big.stages),
        ((128, 256, 64), (2, 4), 3)
    );
    assert_eq!(big.grid_tiles(), (64, 32));
    let sm86 = GemmPlan::new(&GemmProblem::new(8192, 8192, 8192), Arch::Sm86).unwrap();
    assert_eq!(sm86.stages, 2, "99 KB fit two 48 KB stages");
    let small = GemmPlan::new(&GemmProblem::new(100, 100, 64), Arch::Sm80).unwrap();
    assert_eq!((small.cta_tile, small.threads), ((128, 128, 64), 128));
    for p in plans() {
        assert!(p.smem_bytes <= p.smem_budget, "{}", p.kernel_name());
    }
    // Refusals are errors, not panics.
    let mut bad = GemmProblem::new(0, 8, 8);
    assert!(GemmPlan::new(&bad, Arch::Sm80).is_err());
    bad = GemmProblem::new(8, 8, 8);
    bad.input = DType::F32;
    assert!(GemmPlan::new(&bad, Arch::Sm80).is_err());
    let opts = PlanOptions {
        tile: Some((96, 128, 64)),
        stages: None,
    };
    assert!(GemmPlan::with_options(&GemmProblem::new(8, 8, 8), Arch::Sm80, opts).is_err());
    let opts = PlanOptions {
        tile: Some((256, 256, 64)),
        stages: None,
    };
    assert!(GemmPlan::with_options(&GemmProblem::new(8, 8, 8), Arch::Sm86, opts).is_err());
}

#[test]
fn source_is_preamble_between_the_templates() {
    let plan = GemmPlan::new(&GemmProblem::new(4096, 4096, 4096), Arch::Sm90a).unwrap();
    let src = cuda_source(&plan);
    let pre = preamble(&plan);
    let (c, p, g) = (
        src.find(COMMON_CUH).unwrap(),
        src.find(&pre).unwrap(),
        src.find(GEMM_SM80_CUH).unwrap(),
    );
    assert!(c < p && p < g);
    assert!(
        !src.lines().any(|l| l.trim_start().starts_with("#include")),
        "the source is self-contained"
    );
    assert_eq!(src, cuda_source(&plan), "deterministic");
}

#[test]
fn snapshot_plans() {
    let mut p = GemmProblem::new(4096, 4096, 4096);
    p.epilogue = tessera_kernels::Epilogue::parse("bias,gelu,aux").unwrap();
    insta::assert_snapshot!(
        "plan_4096_tn_sm90a",
        GemmPlan::new(&p, Arch::Sm90a).unwrap().to_string()
    );
    let mut p = GemmProblem::new(100, 100, 64);
    p.input = DType::F16;
    p.a_major = Major::Col;
    p.b_major = Major::Row;
    insta::assert_snapshot!(
        "plan_100_nt_fp16_sm80",
        GemmPlan::new(&p, Arch::Sm80).unwrap().to_string()
    );
}

#[test]
fn snapshot_preambles() {
    let plan = GemmPlan::new(&GemmProblem::new(4096, 4096, 4096), Arch::Sm90a).unwrap();
    insta::assert_snapshot!("preamble_4096_tn_sm90a", preamble(&plan));
    let mut p = GemmProblem::new(100, 100, 64);
    p.a_major = Major::Col;
    p.b_major = Major::Row;
    insta::assert_snapshot!(
        "preamble_100_nt_sm80",
        preamble(&GemmPlan::new(&p, Arch::Sm80).unwrap())
    );
}

/// A column-major D is planned as the transposed row-major product: the plan (both paths)
/// compiles exactly the source of that product's plan, and its grid is that product's, for
/// every storage order of A and B, both bias directions and ragged extents.
#[test]
fn column_major_d_plans_are_the_transposed_products_plans() {
    use tessera_kernels::codegen::sm90::cuda_source as sm90_source;
    use tessera_kernels::plan::Sm90Plan;
    use tessera_kernels::Epilogue;
    let orders = [Major::Row, Major::Col];
    for (m, n, k) in [(100, 300, 64), (4096, 1000, 512), (7, 9, 24)] {
        for a in orders {
            for b in orders {
                for e in ["rowbias,relu,aux", "bias,gelu_tanh,c", ""] {
                    let mut p = GemmProblem::new(m, n, k);
                    p.a_major = a;
                    p.b_major = b;
                    p.d_major = Major::Col;
                    p.epilogue = Epilogue::parse(e).expect("epilogue");
                    let t = p.row_major_d();
                    assert_eq!((t.m, t.n, t.k, t.d_major), (n, m, k, Major::Row));
                    assert_eq!(t.row_major_d(), t, "row-major D is its own kernel problem");
                    for arch in [Arch::Sm80, Arch::Sm90a] {
                        let plan = GemmPlan::new(&p, arch).expect("plan");
                        let direct = GemmPlan::new(&t, arch).expect("plan");
                        assert_eq!(plan.problem, p);
                        assert_eq!(plan.kernel_problem(), t);
                        assert_eq!(cuda_source(&plan), cuda_source(&direct), "{p}");
                        assert_eq!(plan.grid_tiles(), direct.grid_tiles(), "{p}");
                    }
                    // The Hopper path judges the kernel problem (A row-major, B stored N x K
                    // there): the two problems are supported alike.
                    assert_eq!(
                        Sm90Plan::supports(&p, Arch::Sm90a),
                        Sm90Plan::supports(&t, Arch::Sm90a)
                    );
                    if Sm90Plan::supports(&p, Arch::Sm90a) {
                        let plan = Sm90Plan::new(&p).expect("plan");
                        let direct = Sm90Plan::new(&t).expect("plan");
                        assert_eq!(plan.kernel_problem(), t);
                        assert_eq!(plan.kernel_name(), direct.kernel_name());
                        assert_eq!(sm90_source(&plan), sm90_source(&direct), "{p}");
                        assert_eq!(plan.total_tiles(), direct.total_tiles(), "{p}");
                    }
                }
            }
        }
    }
}

/// A pair of CTAs (`Options::cluster = 2`) plans with the flag-driven epilogue, and a tree that
/// needs the generated epilogue is refused with a reason naming the option, never planned.
#[test]
fn cluster_pairs_take_the_flag_epilogue_or_are_refused() {
    use tessera_kernels::plan::ClusterShare;
    use tessera_kernels::{GemmSpec, Options};
    let opts = Options {
        cluster: Some(2),
        share: Some(ClusterShare::A),
        ..Options::default()
    };
    let spec = |e: &str| {
        GemmSpec::new(520, 712, 200)
            .b(Major::Col)
            .epilogue(e)
            .expect("epilogue")
            .options(opts)
    };
    for e in [
        "acc",
        "relu_bias",
        "gelu_aux_bias",
        "alpha * acc + beta * c",
    ] {
        let plan = spec(e).plan(Arch::Sm90a, 132).expect("plan");
        assert!(!plan.generated_epilogue(), "{e}");
        assert!(
            plan.kernel_name().contains("_c2a_"),
            "{e}: {}",
            plan.kernel_name()
        );
    }
    for e in ["relu_aux_bias", "dgelu_bgrad", "relu(acc + residual)"] {
        let err = spec(e).plan(Arch::Sm90a, 132).expect_err(e).to_string();
        assert!(
            err.contains("Options::cluster = 2") && err.contains("generated"),
            "{e}: {err}"
        );
    }
}

/// The C++ expression of a layout at one index: each leaf's coordinate (the index divided by
/// the shapes before it, modulo its own shape) times its stride; the last leaf takes no modulo.
#[test]
fn index_expr_of_a_nested_layout() {
    use tessera_kernels::codegen::sm80::index_expr;
    let l: tessera_layout::Layout = "(4,(2,8)):(2,(1,16))".parse().unwrap();
    assert_eq!(
        index_expr(&l, "t"),
        "(t % 4) * 2 + (t / 4 % 2) + (t / 8) * 16"
    );
}

/// Where K makes rows TMA cannot address, the Hopper path stages A and B: the plan says so,
/// its workspace holds both copies after stream-K's part (256-byte aligned, disjoint), and the
/// paths that cannot stage keep the sm80-class kernel.
#[test]
fn unaligned_k_stages_a_and_b_on_the_hopper_path() {
    use tessera_kernels::{GemmSpec, Options};
    for (m, n, k, batch) in [
        (4095, 4095, 4095, 1),
        (16, 4096, 4095, 1),
        (2048, 2048, 2500, 1),
        (401408, 64, 147, 1),
        (130, 90, 99, 3),
        (7, 9, 1, 1),
    ] {
        let spec = GemmSpec::linear(m, n, k).batch(batch);
        let plan = spec.plan(Arch::Sm90a, 132).expect("plan");
        assert_eq!(plan.path(), "sm90", "{m}x{n}x{k}");
        let ld = plan.staged_k().expect("staged");
        assert!(ld >= k && ld % 64 == 0 && ld - k < 64, "{m}x{n}x{k}: {ld}");
        assert!(plan.summary().ends_with(" staged"), "{}", plan.summary());
        assert!(plan.to_string().contains("A and B staged"), "{plan}");
        let (a, b, end) = plan.workspace_regions();
        let (a, b) = (a.expect("A region"), b.expect("B region"));
        let bytes = |rows: i64| (batch * rows * ld * 2) as usize;
        // The kernel's A is M x K (D row-major: not transposed).
        assert!(a % 256 == 0 && b % 256 == 0);
        assert!(a + bytes(m) <= b && b + bytes(n) == end);
        assert_eq!(plan.workspace_bytes(), end);
        let srcs = plan.sources().expect("sources");
        assert_eq!(srcs.len(), 2);
        assert_eq!(srcs[0].0, "tessera_stage_rows");
        // Forced onto the sm80-class path, or on a target without TMA: no staging.
        let sm80 = spec
            .clone()
            .options(Options {
                sm80: true,
                ..Options::default()
            })
            .plan(Arch::Sm90a, 132)
            .expect("plan");
        assert_eq!((sm80.path(), sm80.staged_k()), ("sm80", None));
        let ampere = spec.plan(Arch::Sm80, 108).expect("plan");
        assert_eq!((ampere.path(), ampere.staged_k()), ("sm80", None));
    }
    // K on the 16-byte grid: read in place, nothing staged.
    let plan = GemmSpec::linear(4096, 4096, 4000)
        .plan(Arch::Sm90a, 132)
        .expect("plan");
    assert_eq!((plan.path(), plan.staged_k()), ("sm90", None));
    assert_eq!(plan.workspace_regions().0, None);
    // A column-major D: the kernel runs the transposed product, whose A is the given B.
    let t = GemmSpec::linear(300, 200, 333)
        .d(Major::Col)
        .plan(Arch::Sm90a, 132)
        .expect("plan");
    let (a, b, end) = t.workspace_regions();
    let ld = t.staged_k().expect("staged");
    assert!(b.unwrap() - a.unwrap() >= (200 * ld * 2) as usize);
    assert_eq!(end - b.unwrap(), (300 * ld * 2) as usize);
}
