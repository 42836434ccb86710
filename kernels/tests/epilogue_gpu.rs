//! GPU check of generated epilogues: `tessera_epilogue_apply` over random fp32 "accumulators"
//! against the float64 evaluator, for every named fusion and the examples, in bf16 and
//! fp32, with a batch of 2 and an odd N (the pair path's tail).
//!
//! Skips with a printed reason when there is no device; `TESSERA_REQUIRE_GPU=1` makes that a
//! failure. `TESSERA_SEED=<n>` replays a run.
#![cfg(feature = "cuda")]

use tessera_kernels::bench::buffers::DeviceBuf;
use tessera_kernels::epilogue::check::Binding;
use tessera_kernels::epilogue::eval::{evaluate, EvalInputs};
use tessera_kernels::epilogue::{
    parse_epilogue, residual_relu, AuxFormat, EpilogueTree, Fusion, Sink,
};
use tessera_kernels::launch::runtime::Runtime;
use tessera_kernels::launch::tree::{EpBuffers, EpilogueApply};
use tessera_kernels::plan::{PathOptions, Schedule, Sm90Options};
use tessera_kernels::reference::round_to;
use tessera_kernels::rng::Rng;
use tessera_kernels::DType;

fn runtime() -> Option<Runtime> {
    match Runtime::new(0) {
        Ok(rt) => Some(rt),
        Err(e) => {
            if std::env::var("TESSERA_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("TESSERA_REQUIRE_GPU=1 but no usable GPU: {e}");
            }
            eprintln!("SKIPPED (no GPU): {e}");
            None
        }
    }
}

/// The runtime when its device is sm_90a; else `None` after printing that the test of `what`
/// (a Hopper-path feature) is skipped.
fn hopper_runtime(what: &str) -> Option<Runtime> {
    let rt = runtime()?;
    if rt.arch() != tessera_kernels::Arch::Sm90a {
        eprintln!(
            "SKIPPED: {what} is a Hopper-path feature; this device is {}",
            rt.arch()
        );
        return None;
    }
    Some(rt)
}

fn trees() -> Vec<(String, EpilogueTree)> {
    let mut v: Vec<(String, EpilogueTree)> = Fusion::ALL
        .iter()
        // The apply kernel runs the element-wise part; operand sums are a separate kernel.
        .map(|f| (f.name().to_string(), EpilogueTree::new(f.tree().d)))
        .collect();
    v.push(("residual_relu".into(), residual_relu()));
    for text in [
        "gelu_aux(acc + bias_row)",
        "select(row < 40, sigmoid(acc), tanh(acc))",
        "relu(acc + bias_row + residual)",
        "select(col < 33, relu(acc), select(batch >= 1, silu(acc), clamp(acc, -1, 0.5)))",
        "bgrad_row(bf16(aux(alpha * acc, fp32)) * dsigmoid(aux_in))",
    ] {
        v.push((text.to_string(), parse_epilogue(text).unwrap()));
    }
    v
}

use tessera_kernels::epilogue::tree::bits_to_full;

fn rounded(r: &mut Rng, n: usize, t: DType) -> Vec<f32> {
    (0..n).map(|_| round_to(r.uniform(-2.0, 2.0), t)).collect()
}

/// The float64 product `A B` of `p` (`batch x M x N`, row-major), A and B read with `s`.
fn accumulator(
    p: &tessera_kernels::GemmProblem,
    s: &tessera_kernels::plan::GemmStrides,
    a: &[f32],
    b: &[f32],
) -> Vec<f64> {
    let mut acc = Vec::with_capacity((p.batch * p.m * p.n) as usize);
    for bi in 0..p.batch {
        for i in 0..p.m {
            for j in 0..p.n {
                acc.push(
                    (0..p.k)
                        .map(|kk| {
                            a[s.a_index(p, bi, i, kk)] as f64 * b[s.b_index(p, bi, kk, j)] as f64
                        })
                        .sum(),
                );
            }
        }
    }
    acc
}

/// Random bf16 operands of `p` (A `batch x M x K`, B `batch x K x N`, in that order from `r`),
/// their float64 product (`accumulator`, read with `s`), and A and B on the device.
fn operands(
    rt: &Runtime,
    r: &mut Rng,
    p: &tessera_kernels::GemmProblem,
    s: &tessera_kernels::plan::GemmStrides,
) -> (Vec<f64>, DeviceBuf, DeviceBuf) {
    let (mb, kb, nb) = (
        (p.batch * p.m) as usize,
        p.k as usize,
        (p.batch * p.n) as usize,
    );
    let a = rounded(r, mb * kb, DType::Bf16);
    let b = rounded(r, kb * nb, DType::Bf16);
    let acc = accumulator(p, s, &a, &b);
    let a_d = DeviceBuf::upload(rt, DType::Bf16, &a).unwrap();
    let b_d = DeviceBuf::upload(rt, DType::Bf16, &b).unwrap();
    (acc, a_d, b_d)
}

fn words(rt: &Runtime, buf: &DeviceBuf) -> Vec<u32> {
    buf.download_words(rt).unwrap()
}

#[test]
fn generated_epilogues_match_the_evaluator() {
    let Some(rt) = runtime() else { return };
    let seed = std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(Rng::fresh_seed);
    eprintln!("seed {seed} (replay with TESSERA_SEED={seed})");
    let mut r = Rng::new(seed);
    let (m, n, nb) = (77i64, 101i64, 2i64);
    let (mu, nu, bu) = (m as usize, n as usize, nb as usize);
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    for out in [DType::Bf16, DType::F32] {
        for (name, t) in trees() {
            let mut b = Binding::for_tree(&t, m, n, 16, nb, out);
            b.alpha = 1.5;
            b.beta = if b.c.is_some() { 0.5 } else { 0.0 };
            // Accumulators with bf16 precision: alpha * acc (alpha = 1.5) is then exact in fp32,
            // so an explicit `bf16(...)` in a tree rounds the same value on the GPU as in the
            // float64 evaluator. With full fp32 accumulators the GPU rounds twice (to fp32,
            // then to bf16), and one product in about 2^17 lands on a bf16 midpoint and moves
            // by a whole bf16 unit, which no tolerance on the converted value can cover.
            let acc = rounded(&mut r, bu * mu * nu, DType::Bf16);
            let c = rounded(&mut r, bu * mu * nu, out);
            let res = rounded(&mut r, bu * mu * nu, out);
            let aux_in = rounded(&mut r, bu * mu * nu, out);
            let bias_row = rounded(&mut r, mu, out);
            let bias_col = rounded(&mut r, nu, out);
            let bits: Vec<bool> = (0..bu * mu * nu).map(|_| r.next_u64() & 1 == 1).collect();
            // The bit-mask input with the binding's pitch (bits), as 32-bit words.
            let ld_bits = b.aux_in_bits.map_or(0, |s| s.ld as usize);
            let mut in_words = vec![0u32; (bu * mu * ld_bits).div_ceil(32)];
            // Trees that read no bit-mask have no pitch (ld_bits = 0) and no words to fill.
            for bi in (0..bu).filter(|_| ld_bits > 0) {
                for i in 0..mu {
                    for j in 0..nu {
                        if bits[(bi * mu + i) * nu + j] {
                            let bit = (bi * mu + i) * ld_bits + j;
                            in_words[bit / 32] |= 1 << (bit % 32);
                        }
                    }
                }
            }
            let up = |t: DType, v: &[f32]| DeviceBuf::upload(&rt, t, v).unwrap();
            let acc_d = up(DType::F32, &acc);
            let d = DeviceBuf::poisoned(&rt, out, bu * mu * nu).unwrap();
            let c_d = up(out, &c);
            let res_d = up(out, &res);
            let aux_in_d = if b.aux_in_bits.is_some() {
                up(
                    DType::F32,
                    &in_words
                        .iter()
                        .map(|&w| f32::from_bits(w))
                        .collect::<Vec<f32>>(),
                )
            } else {
                up(out, &aux_in)
            };
            let aux_d = b.aux.map(|s| {
                if s.bits {
                    // Junk bits: the kernel must clear as well as set.
                    let junk: Vec<f32> = (0..(bu * mu * s.ld as usize).div_ceil(32))
                        .map(|_| f32::from_bits(r.next_u64() as u32))
                        .collect();
                    up(DType::F32, &junk)
                } else {
                    DeviceBuf::poisoned(&rt, s.dtype, bu * mu * nu).unwrap()
                }
            });
            let br_d = up(out, &bias_row);
            let bc_d = up(out, &bias_col);
            let gr_d = up(DType::F32, &vec![0.0; bu * mu]);
            let gc_d = up(DType::F32, &vec![0.0; bu * nu]);
            let bufs = EpBuffers {
                d: Some(d.mem(&rt)),
                c: Some(c_d.mem(&rt)),
                residual: Some(res_d.mem(&rt)),
                aux_in: Some(aux_in_d.mem(&rt)),
                aux: aux_d.as_ref().map(|x| x.mem(&rt)),
                bias_row: Some(br_d.mem(&rt)),
                bias_col: Some(bc_d.mem(&rt)),
                bgrad_row: Some(gr_d.mem(&rt)),
                bgrad_col: Some(gc_d.mem(&rt)),
            };
            let k = EpilogueApply::new(&rt, &t).unwrap_or_else(|e| panic!("{name}: {e}"));
            k.launch(rt.stream(), &b, &bufs, &acc_d.mem(&rt))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            rt.stream().synchronize().unwrap();

            let (acc64, c64, res64, aux64, br64, bc64) = (
                f64s(&acc),
                f64s(&c),
                f64s(&res),
                f64s(&aux_in),
                f64s(&bias_row),
                f64s(&bias_col),
            );
            let mut inp = EvalInputs::new(mu, nu, bu, &acc64);
            inp.alpha = b.alpha as f64;
            inp.beta = b.beta as f64;
            inp.c = Some(&c64);
            inp.residual = Some(&res64);
            inp.aux_in = Some(&aux64);
            inp.aux_in_bits = Some(&bits);
            inp.bias_row = Some(&br64);
            inp.bias_col = Some(&bc64);
            let want = evaluate(&t, &inp).unwrap();
            let tol = |w: f64, t: DType| t.unit_roundoff() * w.abs() + 1e-5 * (1.0 + w.abs());
            let got = d.download(&rt).unwrap();
            for (i, (g, w)) in got.iter().zip(&want.d).enumerate() {
                assert!(
                    (g - w).abs() <= tol(*w, out),
                    "{name} {out}: D[{i}] = {g}, want {w}"
                );
            }
            match (
                t.d.sinks().iter().find_map(|s| match s {
                    Sink::Aux(f) => Some(*f),
                    _ => None,
                }),
                &aux_d,
                &want.aux,
            ) {
                (Some(AuxFormat::Bits), Some(a), Some(wa)) => {
                    // The values behind the bits: where fp32 and float64 may disagree on the
                    // sign (|x| tiny), the bit is not compared.
                    let pre = evaluate(&EpilogueTree::new(bits_to_full(&t.d)), &inp)
                        .unwrap()
                        .aux
                        .unwrap();
                    let ws = words(&rt, a);
                    let ld = b.aux.unwrap().ld as usize;
                    for bi in 0..bu {
                        for i in 0..mu {
                            for j in 0..nu {
                                let at = (bi * mu + i) * nu + j;
                                let bit = (bi * mu + i) * ld + j;
                                let g = (ws[bit / 32] >> (bit % 32)) & 1 == 1;
                                if pre[at].abs() > 1e-5 {
                                    assert_eq!(
                                        g,
                                        wa[at] == 1.0,
                                        "{name}: aux bit ({bi}, {i}, {j})"
                                    );
                                }
                            }
                        }
                    }
                }
                (Some(AuxFormat::Full(ty)), Some(a), Some(wa)) => {
                    let ty = ty.unwrap_or(out);
                    for (i, (g, w)) in a.download(&rt).unwrap().iter().zip(wa).enumerate() {
                        assert!(
                            (g - w).abs() <= tol(*w, ty),
                            "{name}: aux[{i}] = {g}, want {w}"
                        );
                    }
                }
                (None, None, None) => {}
                other => panic!(
                    "{name}: aux mismatch {:?}",
                    (other.0, other.1.is_some(), other.2.is_some())
                ),
            }
            for (buf, wantv, len) in [(&gr_d, &want.bgrad_row, m), (&gc_d, &want.bgrad_col, n)] {
                if let Some(wv) = wantv {
                    let scale = (m * n / len) as f64 * 8.0;
                    for (i, (g, w)) in buf.download(&rt).unwrap().iter().zip(wv).enumerate() {
                        assert!(
                            (g - w).abs() <= 1e-5 * scale * (1.0 + w.abs()),
                            "{name}: bgrad[{i}] = {g}, want {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn operand_sums_match_the_evaluator() {
    use tessera_kernels::epilogue::Operand;
    use tessera_kernels::launch::tree::OperandSum;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::{GemmProblem, Major};
    let Some(rt) = runtime() else { return };
    let k = OperandSum::new(&rt).unwrap();
    let mut r = Rng::new(3);
    for (am, bm) in [(Major::Row, Major::Col), (Major::Col, Major::Row)] {
        let mut p = GemmProblem::new(37, 45, 70);
        p.batch = 2;
        p.a_major = am;
        p.b_major = bm;
        let s = GemmStrides::tight(&p);
        let (mu, nu, ku) = (37usize, 45usize, 70usize);
        let a = rounded(&mut r, 2 * mu * ku, DType::Bf16);
        let b = rounded(&mut r, 2 * ku * nu, DType::Bf16);
        let a_d = DeviceBuf::upload(&rt, DType::Bf16, &a).unwrap();
        let b_d = DeviceBuf::upload(&rt, DType::Bf16, &b).unwrap();
        let sa = DeviceBuf::poisoned(&rt, DType::F32, 2 * mu).unwrap();
        let sb = DeviceBuf::poisoned(&rt, DType::F32, 2 * nu).unwrap();
        k.launch(
            rt.stream(),
            &p,
            &s,
            Operand::A,
            &a_d.mem(&rt),
            &sa.mem(&rt),
            mu as i64,
        )
        .unwrap();
        k.launch(
            rt.stream(),
            &p,
            &s,
            Operand::B,
            &b_d.mem(&rt),
            &sb.mem(&rt),
            nu as i64,
        )
        .unwrap();
        let (ga, gb) = (sa.download(&rt).unwrap(), sb.download(&rt).unwrap());
        for bi in 0..2 {
            for i in 0..mu {
                let want: f64 = (0..ku)
                    .map(|kk| a[s.a_index(&p, bi as i64, i as i64, kk as i64)] as f64)
                    .sum();
                assert!(
                    (ga[bi * mu + i] - want).abs() <= 1e-5 * ku as f64,
                    "{am} sum_k_a[{bi}, {i}]"
                );
            }
            for j in 0..nu {
                let want: f64 = (0..ku)
                    .map(|kk| b[s.b_index(&p, bi as i64, kk as i64, j as i64)] as f64)
                    .sum();
                assert!(
                    (gb[bi * nu + j] - want).abs() <= 1e-5 * ku as f64,
                    "{bm} sum_k_b[{bi}, {j}]"
                );
            }
        }
    }
}

#[test]
fn both_coordinate_strategies_match_the_evaluator() {
    use tessera_kernels::epilogue::coord::split_regions;
    let Some(rt) = runtime() else { return };
    let mut r = Rng::new(5);
    let (m, n) = (77i64, 101i64);
    let (mu, nu) = (m as usize, n as usize);
    let out = DType::F32;
    // Boundaries on a 32 x 64 grid and off it.
    for text in [
        "select(row < 64, sigmoid(acc), tanh(acc))",
        "select(row < 40, sigmoid(acc + bias_col), tanh(acc))",
        "select(col >= 33, relu(acc), select(row > 70, silu(acc), -acc))",
    ] {
        let t = parse_epilogue(text).unwrap();
        let b = Binding::for_tree(&t, m, n, 16, 1, out);
        let acc = rounded(&mut r, mu * nu, DType::F32);
        let bias_col = rounded(&mut r, nu, out);
        let acc_d = DeviceBuf::upload(&rt, DType::F32, &acc).unwrap();
        let bc_d = DeviceBuf::upload(&rt, out, &bias_col).unwrap();
        let one = DeviceBuf::poisoned(&rt, out, mu * nu).unwrap();
        let split = DeviceBuf::poisoned(&rt, out, mu * nu).unwrap();
        let bufs = |d: &DeviceBuf| EpBuffers {
            d: Some(d.mem(&rt)),
            bias_col: Some(bc_d.mem(&rt)),
            ..EpBuffers::default()
        };
        EpilogueApply::new(&rt, &t)
            .unwrap()
            .launch(rt.stream(), &b, &bufs(&one), &acc_d.mem(&rt))
            .unwrap();
        let plan = split_regions(&t, m, n, 1).unwrap();
        assert!(plan.regions.len() >= 2, "{text}");
        for reg in &plan.regions {
            assert_eq!(reg.batches, 0..1);
            let rb = Binding::for_tree(&reg.tree, m, n, 16, 1, out);
            EpilogueApply::new(&rt, &reg.tree)
                .unwrap()
                .launch_region(
                    rt.stream(),
                    &rb,
                    &bufs(&split),
                    &acc_d.mem(&rt),
                    reg.rows.clone(),
                    reg.cols.clone(),
                )
                .unwrap();
        }
        let acc64: Vec<f64> = acc.iter().map(|&x| x as f64).collect();
        let bc64: Vec<f64> = bias_col.iter().map(|&x| x as f64).collect();
        let mut inp = EvalInputs::new(mu, nu, 1, &acc64);
        inp.bias_col = Some(&bc64);
        let want = evaluate(&t, &inp).unwrap().d;
        for (name, buf) in [("one kernel", &one), ("per region", &split)] {
            for (i, (g, w)) in buf.download(&rt).unwrap().iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{text} {name}: D[{i}] = {g}, want {w}"
                );
            }
        }
    }
}

#[test]
fn the_gemm_with_a_tree_epilogue_matches_the_evaluator() {
    use tessera_kernels::epilogue::cuda::gemm_has_tree_hook;
    use tessera_kernels::launch::tree::TreeKernel;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::plan::{GemmPath, Schedule, Sm90Options, Sm90Plan};
    use tessera_kernels::{Arch, GemmPlan, GemmProblem};
    if !gemm_has_tree_hook() {
        eprintln!("SKIPPED: the sm80 template has no TESSERA_EPILOGUE_TREE hook yet");
        return;
    }
    let Some(rt) = runtime() else { return };
    let mut r = Rng::new(11);
    let (m, n, k, nb) = (130i64, 200i64, 64i64, 2i64);
    let (mu, nu) = (m as usize, n as usize);
    let out = DType::Bf16;
    let mut p = GemmProblem::new(m, n, k);
    p.batch = nb;
    p.output = out;
    let s = GemmStrides::tight(&p);
    // The sm80-class kernel everywhere; on sm_90a also the Hopper kernel, cooperative 128x256
    // (partial tiles in both directions) and ping-pong 128x128 and 64x256.
    let mut paths = vec![GemmPath::Sm80(Box::new(
        GemmPlan::new(&p, rt.arch()).unwrap(),
    ))];
    if rt.arch() == Arch::Sm90a {
        paths.push(GemmPath::Hopper(Box::new(Sm90Plan::new(&p).unwrap())));
        // With aux_in staged through shared memory (the trees that read it), and the bias
        // vectors staged per tile (the trees that read them).
        let staged = Sm90Options {
            epilogue_inputs: Some(1),
            epilogue_vectors: (true, true),
            ..Sm90Options::default()
        };
        paths.push(GemmPath::Hopper(Box::new(
            Sm90Plan::with_options(&p, staged).unwrap(),
        )));
        for tile in [(128, 128), (64, 256)] {
            let pp = Sm90Options {
                tile: Some(tile),
                schedule: Some(Schedule::PingPong),
                epilogue_inputs: Some(1),
                epilogue_vectors: (true, true),
                ..Sm90Options::default()
            };
            paths.push(GemmPath::Hopper(Box::new(
                Sm90Plan::with_options(&p, pp).unwrap(),
            )));
        }
    }
    let (acc, a_d, b_d) = operands(&rt, &mut r, &p, &s);
    for (t, path, pad) in [
        Fusion::GeluAuxBias.tree(),
        Fusion::ReluAuxBias.tree(),
        Fusion::DGeluBgrad.tree(),
        parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc + bias_col))").unwrap(),
        parse_epilogue("bgrad_row(acc * dsigmoid(aux_in)) + bgrad_col(relu(acc + bias_col))")
            .unwrap(),
        parse_epilogue("relu(acc + bias_row) * 0.5 + bias_col").unwrap(),
    ]
    .iter()
    .flat_map(|t| paths.iter().map(move |path| (t.clone(), path)))
    // D tight (the Hopper kernels store it by TMA) and with rows 4 elements longer (8 bytes:
    // no tensor map, the scratch path).
    .flat_map(|(t, path)| [0usize, 4].map(move |pad| (t.clone(), path, pad)))
    {
        let mut bind = Binding::for_tree(&t, m, n, k, nb, out);
        bind.alpha = 0.5;
        let ldd = nu + pad;
        bind.d.ld = ldd as i64;
        bind.d.batch_stride = (mu * ldd) as i64;
        let g = TreeKernel::new(&rt, path, &t, &bind).unwrap_or_else(|e| panic!("{t}: {e}"));
        let name = match path {
            GemmPath::Hopper(p) => format!("{t} [sm90 {}, ldd {ldd}]", p.kernel_name()),
            GemmPath::Sm80(p) => format!("{t} [sm80 {}, ldd {ldd}]", p.kernel_name()),
        };
        check_tree_gemm(&rt, &mut r, &g, &name, &t, bind, &s, &acc, (&a_d, &b_d));
    }
}

/// Tree epilogues with the tiles of a partial last wave split along K (stream-K, forced on)
/// over persistent grids of 7 and 13 CTAs: 18 tiles of 16 k-tiles in 2 batches, up to four
/// parts a tile; the finishing part runs the tree's hooks (staged inputs and vectors, a
/// mask read or written, row and column sums, C with beta) over its own k-tiles only, and
/// each tile's sums are added once. D, aux and the sums against the float64 evaluator.
#[test]
fn tree_epilogues_on_stream_k_parts_match_the_evaluator() {
    use tessera_kernels::launch::tree::{TreeKernel, TreeSm90};
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::plan::Sm90Plan;
    use tessera_kernels::GemmProblem;
    let Some(rt) = hopper_runtime("stream-K") else {
        return;
    };
    let mut r = Rng::new(23);
    let (m, n, k, nb) = (300i64, 520i64, 1000i64, 2i64);
    let out = DType::Bf16;
    let mut p = GemmProblem::new(m, n, k);
    p.batch = nb;
    p.output = out;
    let s = GemmStrides::tight(&p);
    let (acc, a_d, b_d) = operands(&rt, &mut r, &p, &s);
    let sk = Sm90Options {
        stream_k: Some(true),
        ..Sm90Options::default()
    };
    // Every input and vector staged where the tree has them, and nothing staged.
    let staged = Sm90Options {
        epilogue_inputs: Some(2),
        epilogue_vectors: (true, true),
        ..sk
    };
    let mut split = 0;
    for (text, beta) in [
        ("drelu_bgrad", 0.5),
        ("dgelu_bgrad", 0.0),
        ("relu_aux_bias", 0.0),
        ("drelu", 0.0),
        ("select(row < 100, sigmoid(acc), tanh(acc + bias_col))", 0.0),
        (
            "bgrad_row(acc * dsigmoid(aux_in)) + relu(acc + bias_row + residual)",
            0.0,
        ),
    ] {
        let t = parse_epilogue(text).unwrap();
        for opts in [sk, staged] {
            let plan = Sm90Plan::with_options(&p, opts).unwrap();
            assert!(plan.stream_k, "{text}");
            let mut bind = Binding::for_tree(&t, m, n, k, nb, out);
            bind.alpha = 0.5;
            bind.beta = beta;
            for grid in [7, 13] {
                let mut g =
                    TreeSm90::new(&rt, &plan, &t, &bind).unwrap_or_else(|e| panic!("{text}: {e}"));
                g.set_max_ctas(grid);
                let parts = g.plan().stream_k_tiles(grid, rt.sm_count() as i64);
                assert!(parts > 0, "{text}: grid {grid} splits nothing");
                split += 1;
                let name = format!(
                    "{text} [beta {beta}, {} staged inputs, grid {grid}, {parts} tiles in parts]",
                    g.plan().staged_inputs
                );
                let g = TreeKernel::Hopper(Box::new(g));
                check_tree_gemm(
                    &rt,
                    &mut r,
                    &g,
                    &name,
                    &t,
                    bind.clone(),
                    &s,
                    &acc,
                    (&a_d, &b_d),
                );
            }
        }
    }
    assert_eq!(split, 24);
}

/// The plans the planner picks by itself for a tree at a shape whose plain GEMM takes the
/// ping-pong schedule (132 tiles of 128 x 256, at most 64 k-tiles): the light trees run the
/// generated epilogue on ping-pong 128 x 128 (bias and relu_bias too, which elsewhere take
/// the fused v1 kernel; and GELU_AUX_BIAS, which stores a full aux), a bias gradient the
/// generated epilogue on the cooperative schedule, GELU_BIAS the v1 kernel. D (tight: TMA stores; and one with an odd N: the scratch path), aux
/// and the sums against the float64 evaluator.
#[test]
fn light_trees_take_the_plain_gemm_pingpong_schedule() {
    use tessera_kernels::launch::tree::TreeKernel;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::GemmProblem;
    let Some(rt) = hopper_runtime("the default ping-pong plan") else {
        return;
    };
    let mut r = Rng::new(29);
    let mut checked = 0;
    for (m, n, k) in [(1531i64, 2816i64, 200i64), (1531, 2811, 136)] {
        let p = GemmProblem::new(m, n, k);
        let s = GemmStrides::tight(&p);
        let (acc, a_d, b_d) = operands(&rt, &mut r, &p, &s);
        for (f, beta, want) in [
            (Fusion::Bias, 0.0, Some(Schedule::PingPong)),
            (Fusion::ReluBias, 0.0, Some(Schedule::PingPong)),
            (Fusion::ReluAuxBias, 0.0, Some(Schedule::PingPong)),
            (Fusion::DRelu, 0.0, Some(Schedule::PingPong)),
            (Fusion::DReluBgrad, 0.5, Some(Schedule::Cooperative)),
            (Fusion::GeluAuxBias, 0.0, Some(Schedule::PingPong)),
            (Fusion::GeluBias, 0.0, None),
        ] {
            let t = f.tree();
            let mut bind = Binding::for_tree(&t, m, n, k, 1, DType::Bf16);
            bind.alpha = 0.5;
            bind.beta = beta;
            let g = TreeKernel::plan(&rt, &p, &t, &bind, PathOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", f.name()));
            let name = format!("{} at {m}x{n}x{k} [{}]", f.name(), g.path_name());
            // (None: the fused v1 kernel.)
            match (&g, want) {
                (TreeKernel::Hopper(h), Some(s)) => {
                    let plan = h.plan();
                    assert_eq!(plan.schedule, s, "{name}");
                    let bn = if s == Schedule::PingPong { 128 } else { 256 };
                    assert_eq!((plan.cta_tile.0, plan.cta_tile.1), (128, bn), "{name}");
                }
                (TreeKernel::Fused(_), None) => {}
                _ => panic!("{name}: not the expected kernel"),
            }
            check_tree_gemm(&rt, &mut r, &g, &name, &t, bind, &s, &acc, (&a_d, &b_d));
            checked += 1;
        }
    }
    assert_eq!(checked, 14);
}

/// Launches `g` (compiled for `t` and a binding like `bind`) over A and B (`ab`, read with
/// `s`) with fresh random vectors and inputs, then checks D, aux and the sums against the
/// float64 evaluator of `t` over `acc` (the product `A B`). `bind` gives the extents, D's
/// leading dimension, alpha and beta (C is random, read where beta is not zero).
#[allow(clippy::too_many_arguments)]
fn check_tree_gemm(
    rt: &Runtime,
    r: &mut Rng,
    g: &tessera_kernels::launch::tree::TreeKernel,
    name: &str,
    t: &EpilogueTree,
    mut bind: Binding,
    s: &tessera_kernels::plan::GemmStrides,
    acc: &[f64],
    ab: (&DeviceBuf, &DeviceBuf),
) {
    let (mu, nu, bu) = (bind.m as usize, bind.n as usize, bind.batch as usize);
    let (m, out, ldd) = (bind.m, bind.d.dtype, bind.d.ld as usize);
    // bias_row per batch (bias_col shared by the batches): the staged vectors' batch offsets.
    if let Some(v) = bind.bias_row.as_mut() {
        v.batch_stride = m;
    }
    let bias = rounded(r, nu, out);
    let bias_row = rounded(r, bu * mu, out);
    let aux_in = rounded(r, bu * mu * nu, out);
    let c = rounded(r, bu * mu * nu, out);
    let res = rounded(r, bu * mu * nu, out);
    let bits: Vec<bool> = (0..bu * mu * nu).map(|_| r.next_u64() & 1 == 1).collect();
    let bias_d = DeviceBuf::upload(rt, out, &bias).unwrap();
    let bias_row_d = DeviceBuf::upload(rt, out, &bias_row).unwrap();
    // aux_in as the tree reads it: a bit mask with the binding's pitch (32-bit words), or
    // values.
    let aux_in_d = match bind.aux_in_bits {
        Some(spec) => {
            let ld = spec.ld as usize;
            let mut w = vec![0u32; (bu * mu * ld).div_ceil(32)];
            for (i, _) in bits.iter().enumerate().filter(|(_, &b)| b) {
                let bit = (i / nu) * ld + i % nu;
                w[bit / 32] |= 1 << (bit % 32);
            }
            let w: Vec<f32> = w.iter().map(|&w| f32::from_bits(w)).collect();
            DeviceBuf::upload(rt, DType::F32, &w).unwrap()
        }
        None => DeviceBuf::upload(rt, out, &aux_in).unwrap(),
    };
    let c_d = DeviceBuf::upload(rt, out, &c).unwrap();
    let res_d = DeviceBuf::upload(rt, out, &res).unwrap();
    let d = DeviceBuf::poisoned(rt, out, bu * mu * ldd).unwrap();
    let aux_d = bind.aux.map(|sp| {
        if sp.bits {
            DeviceBuf::upload(
                rt,
                DType::F32,
                &vec![0.0; (bu * mu * sp.ld as usize).div_ceil(32)],
            )
            .unwrap()
        } else {
            DeviceBuf::poisoned(rt, sp.dtype, bu * mu * nu).unwrap()
        }
    });
    let gc = DeviceBuf::upload(rt, DType::F32, &vec![0.0; bu * nu]).unwrap();
    let gr = DeviceBuf::upload(rt, DType::F32, &vec![0.0; bu * mu]).unwrap();
    let bufs = EpBuffers {
        d: Some(d.mem(rt)),
        c: Some(c_d.mem(rt)),
        residual: Some(res_d.mem(rt)),
        aux_in: Some(aux_in_d.mem(rt)),
        aux: aux_d.as_ref().map(|x| x.mem(rt)),
        bias_col: Some(bias_d.mem(rt)),
        bias_row: Some(bias_row_d.mem(rt)),
        bgrad_col: Some(gc.mem(rt)),
        bgrad_row: Some(gr.mem(rt)),
    };
    g.launch(rt.cx(), &ab.0.mem(rt), &ab.1.mem(rt), s, &bind, &bufs)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    rt.stream().synchronize().unwrap();
    let (bias64, bias_row64, aux64): (Vec<f64>, Vec<f64>, Vec<f64>) = (
        bias.iter().map(|&x| x as f64).collect(),
        bias_row.iter().map(|&x| x as f64).collect(),
        aux_in.iter().map(|&x| x as f64).collect(),
    );
    let c64: Vec<f64> = c.iter().map(|&x| x as f64).collect();
    let mut inp = EvalInputs::new(mu, nu, bu, acc);
    inp.alpha = bind.alpha as f64;
    inp.beta = bind.beta as f64;
    let res64: Vec<f64> = res.iter().map(|&x| x as f64).collect();
    inp.c = Some(&c64);
    inp.residual = Some(&res64);
    inp.aux_in_bits = Some(&bits);
    inp.bias_col = Some(&bias64);
    inp.bias_row = Some(&bias_row64);
    inp.aux_in = Some(&aux64);
    let want = evaluate(t, &inp).unwrap();
    let got = d.download(rt).unwrap();
    for (i, w) in want.d.iter().enumerate() {
        let (row, j) = (i / nu, i % nu);
        let gv = got[row * ldd + j];
        let tol = out.unit_roundoff() * w.abs() + 1e-4 * (1.0 + w.abs());
        assert!((gv - w).abs() <= tol, "{name}: D[{i}] = {gv}, want {w}");
    }
    if let (Some(wa), Some(ad)) = (&want.aux, &aux_d) {
        let spec = bind.aux.unwrap();
        if !spec.bits {
            let ty = spec.dtype;
            for (i, (gv, w)) in ad.download(rt).unwrap().iter().zip(wa).enumerate() {
                let tol = ty.unit_roundoff() * w.abs() + 1e-4 * (1.0 + w.abs());
                assert!((gv - w).abs() <= tol, "{name}: aux[{i}] = {gv}, want {w}");
            }
        } else {
            // Every bit of the mask, where fp32 and float64 agree on the sign of the
            // value behind it; the row's padding bits (columns n..ld) stay as uploaded, 0.
            let pre = evaluate(&EpilogueTree::new(bits_to_full(&t.d)), &inp)
                .unwrap()
                .aux
                .unwrap();
            let ws = words(rt, ad);
            let ld = spec.ld as usize;
            for bi in 0..bu {
                for i in 0..mu {
                    for j in 0..ld {
                        let bit = (bi * mu + i) * ld + j;
                        let g = (ws[bit / 32] >> (bit % 32)) & 1 == 1;
                        if j >= nu {
                            assert!(!g, "{name}: padding bit ({bi}, {i}, {j}) was written");
                            continue;
                        }
                        let at = (bi * mu + i) * nu + j;
                        if pre[at].abs() > 1e-3 {
                            assert_eq!(g, wa[at] == 1.0, "{name}: aux bit ({bi}, {i}, {j})");
                        }
                    }
                }
            }
        }
    }
    for (what, buf, wantv) in [
        ("bgrad_col", &gc, &want.bgrad_col),
        ("bgrad_row", &gr, &want.bgrad_row),
    ] {
        if let Some(wv) = wantv {
            for (j, (gv, w)) in buf.download(rt).unwrap().iter().zip(wv).enumerate() {
                assert!(
                    (gv - w).abs() <= 1e-3 * (1.0 + w.abs()),
                    "{name}: {what}[{j}] = {gv}, want {w}"
                );
            }
        }
    }
}

/// Ping-pong over many one-k-tile tiles, launched repeatedly as the benchmark does: the
/// epilogues (drelu reading a mask a word at a time, dgelu with aux_in staged) are long against
/// the mainloop, so the warps of a consumer warpgroup, which store their own rows, drift apart;
/// the turn the warpgroups pass each other must still be seen by every warp once per tile (a
/// warp two phases behind would wait forever: the benchmark hung on drelu at 4096x4096x64
/// before the kernel kept the warps together at each turn). D is compared with the float64
/// evaluator after each batch of launches.
#[test]
fn pingpong_turns_hold_over_many_short_tiles() {
    use tessera_kernels::launch::tree::TreeSm90;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::plan::Sm90Plan;
    use tessera_kernels::GemmProblem;
    let Some(rt) = hopper_runtime("the ping-pong schedule") else {
        return;
    };
    let mut r = Rng::new(29);
    let (m, n, k) = (4096i64, 4096i64, 64i64);
    let (mu, nu) = (m as usize, n as usize);
    let p = GemmProblem::new(m, n, k);
    let s = GemmStrides::tight(&p);
    let opts = Sm90Options {
        tile: Some((128, 128)),
        schedule: Some(Schedule::PingPong),
        epilogue_inputs: Some(1),
        ..Sm90Options::default()
    };
    let plan = Sm90Plan::with_options(&p, opts).unwrap();
    let (acc, a_d, b_d) = operands(&rt, &mut r, &p, &s);
    let aux_in = rounded(&mut r, mu * nu, DType::Bf16);
    let aux64: Vec<f64> = aux_in.iter().map(|&x| x as f64).collect();
    let aux_d = DeviceBuf::upload(&rt, DType::Bf16, &aux_in).unwrap();
    // The mask: the bit patterns of random fp32 values, rows `ld` bits apart.
    let ld = nu.div_ceil(128) * 128;
    let mask = rounded(&mut r, mu * ld / 32, DType::F32);
    let mask_d = DeviceBuf::upload(&rt, DType::F32, &mask).unwrap();
    let bits: Vec<bool> = (0..mu * nu)
        .map(|i| {
            let bit = (i / nu) * ld + i % nu;
            (mask[bit / 32].to_bits() >> (bit % 32)) & 1 == 1
        })
        .collect();
    for f in [Fusion::DRelu, Fusion::DGelu] {
        let t = f.tree();
        let bind = Binding::for_tree(&t, m, n, k, 1, DType::Bf16);
        // 1024 tiles on a CTA per SM: about 4 per consumer warpgroup and launch.
        let g = TreeSm90::new(&rt, &plan, &t, &bind).unwrap();
        let mut inp = EvalInputs::new(mu, nu, 1, &acc);
        inp.aux_in = Some(&aux64);
        inp.aux_in_bits = Some(&bits);
        let want = evaluate(&t, &inp).unwrap();
        for batch in 0..4 {
            let d = DeviceBuf::poisoned(&rt, DType::Bf16, mu * nu).unwrap();
            let bufs = EpBuffers {
                d: Some(d.mem(&rt)),
                aux_in: Some(if f == Fusion::DRelu {
                    mask_d.mem(&rt)
                } else {
                    aux_d.mem(&rt)
                }),
                ..EpBuffers::default()
            };
            for _ in 0..100 {
                g.launch(rt.cx(), &a_d.mem(&rt), &b_d.mem(&rt), &s, &bind, &bufs)
                    .unwrap();
            }
            rt.stream().synchronize().unwrap();
            for (i, (gv, w)) in d.download(&rt).unwrap().iter().zip(&want.d).enumerate() {
                let tol = DType::Bf16.unit_roundoff() * w.abs() + 1e-4 * (1.0 + w.abs());
                assert!(
                    (gv - w).abs() <= tol,
                    "{f:?} batch {batch}: D[{i}] = {gv}, want {w}"
                );
            }
        }
    }
}

/// The named fusions' trees against cuBLASLt's epilogues of the same name: checks the
/// column-major mapping (bias per output column, the mask's bit order, which operand BGRADA
/// sums) on the device, independently of tessera's kernels.
#[test]
fn named_fusions_match_cublaslt() {
    use tessera_kernels::bench::cublaslt::{lt_fused, lt_plain, LtBuffers, LtHandle};
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::GemmProblem;
    let Some(rt) = runtime() else { return };
    let h = LtHandle::new(&rt).unwrap();
    let mut r = Rng::new(17);
    let (m, n, k) = (96i64, 256i64, 64i64);
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let t = DType::Bf16;
    let p = GemmProblem::new(m, n, k); // A row-major, B column-major, bf16
    let s = GemmStrides::tight(&p);
    let a = rounded(&mut r, mu * ku, t);
    let b = rounded(&mut r, nu * ku, t);
    let a_d = DeviceBuf::upload(&rt, t, &a).unwrap();
    let b_d = DeviceBuf::upload(&rt, t, &b).unwrap();
    let mut acc = vec![0f64; mu * nu];
    let a64: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let mut b_rows = vec![0f64; ku * nu]; // B as K x N row-major, for sum_k_b
    for kk in 0..ku {
        for j in 0..nu {
            b_rows[kk * nu + j] = b[s.b_index(&p, 0, kk as i64, j as i64)] as f64;
        }
    }
    for i in 0..mu {
        for j in 0..nu {
            acc[i * nu + j] = (0..ku)
                .map(|kk| a64[i * ku + kk] * b_rows[kk * nu + j])
                .sum();
        }
    }
    let ld_bits = 256usize;
    for f in Fusion::ALL {
        let tree = f.tree();
        let bias = rounded(&mut r, nu, t);
        let pre = rounded(&mut r, mu * nu, t);
        let bits: Vec<bool> = (0..mu * nu).map(|_| r.next_u64() & 1 == 1).collect();
        let mut mask = vec![0u32; mu * ld_bits / 32];
        for i in 0..mu {
            for j in 0..nu {
                if bits[i * nu + j] {
                    mask[(i * ld_bits + j) / 32] |= 1 << ((i * ld_bits + j) % 32);
                }
            }
        }
        let reads_bits = matches!(f, Fusion::DRelu | Fusion::DReluBgrad);
        let writes_bits = f == Fusion::ReluAuxBias;
        let grad = matches!(
            f,
            Fusion::DReluBgrad | Fusion::DGeluBgrad | Fusion::BgradA | Fusion::BgradB
        );
        let d = DeviceBuf::poisoned(&rt, t, mu * nu).unwrap();
        let bias_d = if grad {
            DeviceBuf::poisoned(&rt, t, mu.max(nu)).unwrap()
        } else {
            DeviceBuf::upload(&rt, t, &bias).unwrap()
        };
        let aux_d = if reads_bits || writes_bits {
            DeviceBuf::upload(
                &rt,
                DType::F32,
                &mask
                    .iter()
                    .map(|&w| f32::from_bits(w))
                    .collect::<Vec<f32>>(),
            )
            .unwrap()
        } else if matches!(f, Fusion::DGelu | Fusion::DGeluBgrad) {
            DeviceBuf::upload(&rt, t, &pre).unwrap()
        } else {
            DeviceBuf::poisoned(&rt, t, mu * nu).unwrap()
        };
        let bufs = LtBuffers {
            a: &a_d,
            b: &b_d,
            d: &d,
            bias: Some(&bias_d),
            aux: Some(&aux_d),
            aux_ld: if reads_bits || writes_bits {
                ld_bits as i64
            } else {
                n
            },
        };
        match lt_fused(&rt, &h, f, &p, 1.0, &bufs) {
            Ok(_) => {}
            // A vendor limitation, not ours: cuBLASLt offers no algorithm for some fusions on
            // some operand layouts (seen: BGRADA and BGRADB here). Our side of those fusions is
            // checked against the float64 evaluator in operand_sums_match_the_evaluator.
            Err(e) if e.to_string().contains("NOT_SUPPORTED") => {
                println!(
                    "{}: cuBLASLt has no algorithm for this layout ({e}); not compared",
                    f.name()
                );
                continue;
            }
            Err(e) => panic!("{}: {e}", f.name()),
        }
        rt.stream().synchronize().unwrap();

        let (bias64, pre64): (Vec<f64>, Vec<f64>) = (
            bias.iter().map(|&x| x as f64).collect(),
            pre.iter().map(|&x| x as f64).collect(),
        );
        let mut inp = EvalInputs::new(mu, nu, 1, &acc);
        inp.k = ku;
        inp.a = Some(&a64);
        inp.b = Some(&b_rows);
        inp.bias_col = Some(&bias64);
        inp.aux_in = Some(&pre64);
        inp.aux_in_bits = Some(&bits);
        let want = evaluate(&tree, &inp).unwrap();
        let tol = |w: f64| 2.0 * t.unit_roundoff() * w.abs() + 2e-3 * (1.0 + w.abs());
        for (i, (g, w)) in d.download(&rt).unwrap().iter().zip(&want.d).enumerate() {
            assert!(
                (g - w).abs() <= tol(*w),
                "{}: D[{i}] = {g}, want {w}",
                f.name()
            );
        }
        if f == Fusion::GeluAuxBias {
            for (i, (g, w)) in aux_d
                .download(&rt)
                .unwrap()
                .iter()
                .zip(want.aux.as_ref().unwrap())
                .enumerate()
            {
                assert!(
                    (g - w).abs() <= tol(*w),
                    "{}: aux[{i}] = {g}, want {w}",
                    f.name()
                );
            }
        }
        if writes_bits {
            let pre_act = evaluate(&Fusion::Bias.tree(), &inp).unwrap().d;
            let ws = words(&rt, &aux_d);
            for i in 0..mu {
                for j in 0..nu {
                    let bit = i * ld_bits + j;
                    if pre_act[i * nu + j].abs() > 1e-3 {
                        assert_eq!(
                            (ws[bit / 32] >> (bit % 32)) & 1 == 1,
                            pre_act[i * nu + j] > 0.0,
                            "{}: mask ({i}, {j})",
                            f.name()
                        );
                    }
                }
            }
        }
        let vector = want
            .bgrad_col
            .as_ref()
            .or(want.sum_k_a.as_ref())
            .or(want.sum_k_b.as_ref());
        if let Some(wv) = vector {
            let got = bias_d.download(&rt).unwrap();
            // The vendor writes the reduction in bf16 and may round partial sums to bf16 on the
            // way (per tile of rows); the standard bound for such a sum is
            // (partials + 1) * u * sum |terms|, with at most one partial per 32 terms.
            let terms: Vec<f64> = if want.sum_k_a.is_some() {
                (0..mu)
                    .map(|i| (0..ku).map(|kk| a64[i * ku + kk].abs()).sum())
                    .collect()
            } else if want.sum_k_b.is_some() {
                (0..nu)
                    .map(|j| (0..ku).map(|kk| b_rows[kk * nu + j].abs()).sum())
                    .collect()
            } else {
                (0..nu)
                    .map(|j| (0..mu).map(|i| want.d[i * nu + j].abs()).sum())
                    .collect()
            };
            for (j, w) in wv.iter().enumerate() {
                let partials = (mu.max(ku) as f64 / 32.0).ceil() + 1.0;
                let bound = partials * t.unit_roundoff() * terms.get(j).copied().unwrap_or(0.0)
                    + 1e-2 * (1.0 + w.abs());
                assert!(
                    (got[j] - w).abs() <= bound,
                    "{}: bias gradient[{j}] = {}, want {w}",
                    f.name(),
                    got[j]
                );
            }
        }
    }
    // The vendor's plain GEMM (the benchmark's baseline of its fusions' cost): D = acc, with
    // bias and aux given but not read.
    let d = DeviceBuf::poisoned(&rt, t, mu * nu).unwrap();
    let unread = DeviceBuf::poisoned(&rt, t, mu * nu).unwrap();
    let bufs = LtBuffers {
        a: &a_d,
        b: &b_d,
        d: &d,
        bias: Some(&unread),
        aux: Some(&unread),
        aux_ld: n,
    };
    lt_plain(&rt, &h, &p, 1.0, &bufs).unwrap();
    rt.stream().synchronize().unwrap();
    for (i, (g, w)) in d.download(&rt).unwrap().iter().zip(&acc).enumerate() {
        let tol = 2.0 * t.unit_roundoff() * w.abs() + 2e-3 * (1.0 + w.abs());
        assert!(
            (g - w).abs() <= tol,
            "default epilogue: D[{i}] = {g}, want {w}"
        );
    }
}

#[test]
fn gemm_coordinate_strategies_match_the_evaluator() {
    use tessera_kernels::epilogue::coord::split_regions;
    use tessera_kernels::epilogue::cuda::gemm_has_tree_hook;
    use tessera_kernels::launch::tree::TreeKernel;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::{Arch, GemmProblem};
    if !gemm_has_tree_hook() {
        eprintln!("SKIPPED: the sm80 template has no TESSERA_EPILOGUE_TREE hook yet");
        return;
    }
    let Some(rt) = runtime() else { return };
    let mut r = Rng::new(23);
    let (m, n, k) = (300i64, 520i64, 64i64);
    let (mu, nu) = (m as usize, n as usize);
    let out = DType::F32;
    let mut p = GemmProblem::new(m, n, k);
    p.output = out;
    let s = GemmStrides::tight(&p);
    let (acc, a_d, b_d) = operands(&rt, &mut r, &p, &s);
    // On the 128-row tile grid, and off it (rows and columns).
    // The sm80-class path, and on sm_90a the Hopper path's cooperative and ping-pong plans:
    // their interior 64 x 32 blocks decide hoisted predicates once (blocks on either side of
    // a boundary and across it, one and two predicates).
    let hopper = rt.arch() == Arch::Sm90a;
    let pingpong = PathOptions::hopper(Sm90Options {
        tile: Some((128, 128)),
        schedule: Some(Schedule::PingPong),
        ..Sm90Options::default()
    });
    let pingpong64 = PathOptions::hopper(Sm90Options {
        tile: Some((64, 256)),
        schedule: Some(Schedule::PingPong),
        ..Sm90Options::default()
    });
    for (text, path) in [
        "select(row < 128, sigmoid(acc), tanh(acc))",
        "select(row < 100, sigmoid(acc), tanh(acc))",
        "select(col >= 300, relu(acc), select(row > 250, silu(acc), -acc))",
        "select(batch < 1, select(col < 70, gelu(acc), acc), select(col < 70, acc, -acc))",
    ]
    .into_iter()
    .flat_map(|t| {
        [
            (t, PathOptions::sm80()),
            (t, PathOptions::default()),
            (t, pingpong),
            (t, pingpong64),
        ]
    })
    .filter(|&(_, path)| path.force_sm80 || hopper)
    {
        let t = parse_epilogue(text).unwrap();
        let bind = Binding::for_tree(&t, m, n, k, 1, out);
        let one = DeviceBuf::poisoned(&rt, out, mu * nu).unwrap();
        let split = DeviceBuf::poisoned(&rt, out, mu * nu).unwrap();
        let bufs = |d: &DeviceBuf| EpBuffers {
            d: Some(d.mem(&rt)),
            ..EpBuffers::default()
        };
        let whole = TreeKernel::plan(&rt, &p, &t, &bind, path).unwrap();
        let text = format!("{text} [{} {:?}]", whole.path_name(), path.sm90.schedule);
        whole
            .launch(
                rt.cx(),
                &a_d.mem(&rt),
                &b_d.mem(&rt),
                &s,
                &bind,
                &bufs(&one),
            )
            .unwrap();
        for reg in split_regions(&t, m, n, 1).unwrap().regions {
            let mut rp = p;
            rp.m = reg.rows.end - reg.rows.start;
            rp.n = reg.cols.end - reg.cols.start;
            let rbind = Binding::for_tree(&reg.tree, m, n, k, 1, out);
            TreeKernel::plan(&rt, &rp, &reg.tree, &rbind, path)
                .unwrap()
                .launch_region(
                    rt.cx(),
                    &a_d.mem(&rt),
                    &b_d.mem(&rt),
                    &s,
                    &rbind,
                    &bufs(&split),
                    reg.rows.clone(),
                    reg.cols.clone(),
                )
                .unwrap_or_else(|e| panic!("{text} region {:?} x {:?}: {e}", reg.rows, reg.cols));
        }
        rt.stream().synchronize().unwrap();
        let want = evaluate(&t, &EvalInputs::new(mu, nu, 1, &acc)).unwrap().d;
        for (name, buf) in [("one kernel", &one), ("per region", &split)] {
            for (i, (g, w)) in buf.download(&rt).unwrap().iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{text} {name}: D[{i}] = {g}, want {w}"
                );
            }
        }
    }
}

#[test]
fn the_epilogue_benchmark_runs() {
    use tessera_kernels::bench::epilogues::{bench_coordinate, bench_fusions};
    use tessera_kernels::Arch;
    let Some(rt) = runtime() else { return };
    let paths: &[PathOptions] = if rt.arch() == Arch::Sm90a {
        &[PathOptions::default(), PathOptions::sm80()]
    } else {
        &[PathOptions::sm80()]
    };
    for &path in paths {
        let rows =
            bench_fusions(&rt, &[(256, 512, 128)], &Fusion::ALL, 1, 2, path, |_| {}).unwrap();
        assert_eq!(rows.len(), 9, "every fusion without operand sums");
        for r in &rows {
            assert!(
                r.ours_ms > 0.0 && r.plain_ms > 0.0 && r.other_ms > 0.0,
                "{r:?}"
            );
            // Ours and cuBLASLt on the same inputs: bf16 outputs of the same fp32 sums.
            assert!(r.rel_diff < 1e-2, "{r:?}");
            eprintln!(
                "{} {:14} ours {:.4} ms, plain {:.4} ms, cuBLASLt {:.4} ms, rel diff {:.1e}",
                r.path, r.name, r.ours_ms, r.plain_ms, r.other_ms, r.rel_diff
            );
        }
        let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
        let r = bench_coordinate(&rt, (256, 512, 128), &t, 1, 2, path).unwrap();
        assert!(r.ours_ms > 0.0 && r.other_ms > 0.0, "{r:?}");
        // One kernel and the per-region launches compute the same D.
        assert!(r.rel_diff < 1e-6, "{r:?}");
    }
}

/// RELU_AUX_BIAS over a region whose first column is bit 32 of each mask row (the second word):
/// the rows' words are not 16-byte aligned, so they are stored a word at a time, and the
/// region's edge words only in their own bits. D and the mask against the float64 product,
/// on both Hopper schedules; the mask's words left of the region keep their junk.
#[test]
fn a_mask_region_off_the_16_byte_grid_matches_the_evaluator() {
    use tessera_kernels::launch::tree::TreeKernel;
    use tessera_kernels::plan::GemmStrides;
    use tessera_kernels::GemmProblem;
    let Some(rt) = hopper_runtime("the mask region") else {
        return;
    };
    let mut r = Rng::new(31);
    let (m, n, k) = (300i64, 1000i64, 64i64);
    let (mu, nu) = (m as usize, n as usize);
    let cols = 32i64..n;
    let p = GemmProblem::new(m, n, k);
    let s = GemmStrides::tight(&p);
    let (acc, a_d, b_d) = operands(&rt, &mut r, &p, &s);
    let bias = rounded(&mut r, nu, DType::Bf16);
    let bias_d = DeviceBuf::upload(&rt, DType::Bf16, &bias).unwrap();
    let t = Fusion::ReluAuxBias.tree();
    let bind = Binding::for_tree(&t, m, n, k, 1, DType::Bf16);
    let ld_words = (bind.aux.expect("relu_aux_bias stores a mask").ld / 32) as usize;
    let mut rp = p;
    rp.n = cols.end - cols.start;
    for sched in [Schedule::PingPong, Schedule::Cooperative] {
        let path = PathOptions::hopper(Sm90Options {
            schedule: Some(sched),
            tile: (sched == Schedule::PingPong).then_some((128, 128)),
            ..Sm90Options::default()
        });
        let junk: Vec<u32> = (0..mu * ld_words).map(|_| r.next_u64() as u32).collect();
        let junk_f: Vec<f32> = junk.iter().map(|&w| f32::from_bits(w)).collect();
        let mask_d = DeviceBuf::upload(&rt, DType::F32, &junk_f).unwrap();
        let d = DeviceBuf::poisoned(&rt, DType::Bf16, mu * nu).unwrap();
        let bufs = EpBuffers {
            d: Some(d.mem(&rt)),
            aux: Some(mask_d.mem(&rt)),
            bias_col: Some(bias_d.mem(&rt)),
            ..EpBuffers::default()
        };
        let g = TreeKernel::plan(&rt, &rp, &t, &bind, path).unwrap();
        let name = format!("relu_aux_bias, columns {cols:?} [{}]", g.path_name());
        g.launch_region(
            rt.cx(),
            &a_d.mem(&rt),
            &b_d.mem(&rt),
            &s,
            &bind,
            &bufs,
            0..m,
            cols.clone(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        rt.stream().synchronize().unwrap();
        let got_d = d.download(&rt).unwrap();
        let words = words(&rt, &mask_d);
        let mut checked = 0usize;
        for i in 0..mu {
            for j in 0..nu {
                let bit = (words[i * ld_words + j / 32] >> (j % 32)) & 1;
                if j < cols.start as usize {
                    let was = (junk[i * ld_words + j / 32] >> (j % 32)) & 1;
                    assert_eq!(
                        bit, was,
                        "{name}: mask bit ({i}, {j}) left of the region changed"
                    );
                    continue;
                }
                let pre = acc[i * nu + j] + bias[j] as f64;
                let want = pre.max(0.0);
                let got = got_d[i * nu + j];
                assert!(
                    (got - want).abs() <= 1e-2 * (1.0 + want.abs()),
                    "{name}: D({i}, {j}) = {got}, want {want}"
                );
                // Where fp32 and float64 may disagree on the sign, the bit is not checked.
                if pre.abs() > 1e-3 {
                    assert_eq!(
                        bit == 1,
                        pre > 0.0,
                        "{name}: mask bit ({i}, {j}), pre-activation {pre}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(
            checked > mu * (nu - 32) * 9 / 10,
            "{name}: only {checked} bits checked"
        );
    }
}
