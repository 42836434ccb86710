//! The float64 evaluator against hand-computed values, the derivative functions against
//! central finite differences, and the checker's refusals.

use tessera_kernels::epilogue::check::check;
use tessera_kernels::epilogue::eval::{apply_unary, evaluate, evaluate_region, EvalInputs};
use tessera_kernels::epilogue::{
    parse_epilogue, Binding, EpilogueError, Fusion, KernelCaps, MatSpec, UnaryOp, VecSpec,
};
use tessera_kernels::{DType, KernelError};

fn tree(s: &str) -> tessera_kernels::epilogue::EpilogueTree {
    parse_epilogue(s).unwrap()
}

#[test]
fn bias_relu_with_alpha_beta_by_hand() {
    // 2 x 3: D = relu(2 * acc + 0.5 * c + bias_col).
    let acc = [1.0, -1.0, 0.25, 3.0, 0.0, -4.0];
    let c = [2.0, 2.0, 2.0, -2.0, -2.0, -2.0];
    let bias = [0.5, 1.0, -0.5];
    let mut inp = EvalInputs::new(2, 3, 1, &acc);
    inp.alpha = 2.0;
    inp.beta = 0.5;
    inp.c = Some(&c);
    inp.bias_col = Some(&bias);
    let o = evaluate(&Fusion::ReluBias.tree(), &inp).unwrap();
    // row 0: 2+1+0.5, -2+1+1, 0.5+1-0.5 ; row 1: 6-1+0.5, 0-1+1, -8-1-0.5
    assert_eq!(o.d, vec![3.5, 0.0, 1.0, 5.5, 0.0, 0.0]);
    assert_eq!(o.aux, None);
    // beta = 0: C is not read (not even given).
    inp.beta = 0.0;
    inp.c = None;
    let o = evaluate(&Fusion::Bias.tree(), &inp).unwrap();
    assert_eq!(o.d, vec![2.5, -1.0, 0.0, 6.5, 1.0, -8.5]);
}

#[test]
fn aux_mask_and_bias_gradient_by_hand() {
    let acc = [1.0, -1.0, 0.0, 2.0];
    let inp = EvalInputs::new(2, 2, 1, &acc);
    let o = evaluate(&tree("relu_aux(acc)"), &inp).unwrap();
    assert_eq!(o.aux, Some(vec![1.0, 0.0, 0.0, 1.0]));
    assert_eq!(o.d, vec![1.0, 0.0, 0.0, 2.0]);
    // DRELU_BGRAD: D = acc * mask, dbias[j] = sum_i D[i, j].
    let g = [10.0, 20.0, 30.0, 40.0];
    let bits = [true, false, false, true];
    let mut inp = EvalInputs::new(2, 2, 1, &g);
    inp.aux_in_bits = Some(&bits);
    let o = evaluate(&Fusion::DReluBgrad.tree(), &inp).unwrap();
    assert_eq!(o.d, vec![10.0, 0.0, 0.0, 40.0]);
    assert_eq!(o.bgrad_col, Some(vec![10.0, 40.0]));
    let o = evaluate(&tree("bgrad_row(acc)"), &inp).unwrap();
    assert_eq!(o.bgrad_row, Some(vec![30.0, 70.0]));
}

#[test]
fn batches_vectors_and_coordinates_by_hand() {
    // batch 2 of 2 x 2; bias_row per batch; D = select(batch < 1, acc + bias_row, row * 10 + col).
    let acc = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let bias = [100.0, 200.0, 300.0, 400.0];
    let mut inp = EvalInputs::new(2, 2, 2, &acc);
    inp.bias_row = Some(&bias);
    let o = evaluate(&tree("select(batch < 1, acc + bias_row, 7)"), &inp).unwrap();
    assert_eq!(o.d, vec![101.0, 102.0, 203.0, 204.0, 7.0, 7.0, 7.0, 7.0]);
    let o = evaluate(&tree("select(col >= 1, acc, -acc)"), &inp).unwrap();
    assert_eq!(o.d, vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0, -7.0, 8.0]);
    let o = evaluate(&tree("select(2 * row + col <= 1, acc, 0.0)"), &inp).unwrap();
    assert_eq!(o.d, vec![1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0]);
}

#[test]
fn operand_sums_by_hand() {
    // A 2 x 3, B 3 x 2, acc = A B.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    let acc = [4.0, 5.0, 10.0, 11.0];
    let mut inp = EvalInputs::new(2, 2, 1, &acc);
    inp.k = 3;
    inp.a = Some(&a);
    inp.b = Some(&b);
    let o = evaluate(&Fusion::BgradB.tree(), &inp).unwrap();
    assert_eq!(o.sum_k_a, Some(vec![6.0, 15.0]));
    let o = evaluate(&Fusion::BgradA.tree(), &inp).unwrap();
    assert_eq!(o.sum_k_b, Some(vec![2.0, 2.0]));
    assert_eq!(o.d, acc.to_vec());
}

#[test]
fn activation_values_by_hand() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(
        apply_unary(UnaryOp::Gelu, 1.0),
        0.841_344_746_068_542_9
    )); // Phi(1)
    assert!(close(
        apply_unary(UnaryOp::Sigmoid, 1.0),
        0.731_058_578_630_004_9
    ));
    assert!(close(
        apply_unary(UnaryOp::Silu, 1.0),
        0.731_058_578_630_004_9
    ));
    assert!(close(
        apply_unary(UnaryOp::Tanh, 0.5),
        0.462_117_157_260_009_74
    ));
    // gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)).
    assert!(close(
        apply_unary(UnaryOp::GeluTanh, 1.0),
        0.841_191_990_608_276_8
    ));
    assert_eq!(apply_unary(UnaryOp::Clamp { lo: -1.0, hi: 6.0 }, 7.5), 6.0);
    assert_eq!(apply_unary(UnaryOp::DRelu, 0.0), 0.0);
    // Ties to even: 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7.
    assert_eq!(
        apply_unary(UnaryOp::Round(DType::Bf16), 1.0 + 2f64.powi(-8)),
        1.0
    );
    assert_eq!(
        apply_unary(UnaryOp::Round(DType::Bf16), 1.0 + 3.0 * 2f64.powi(-8)),
        1.0 + 2f64.powi(-6)
    );
    assert_eq!(
        apply_unary(UnaryOp::Round(DType::F16), 1.0 + 2f64.powi(-11)),
        1.0
    );
    assert_eq!(apply_unary(UnaryOp::Round(DType::F32), 0.1), 0.1f32 as f64);
}

#[test]
fn derivatives_match_central_differences() {
    let pairs = [
        (UnaryOp::Relu, UnaryOp::DRelu),
        (UnaryOp::Gelu, UnaryOp::DGelu),
        (UnaryOp::GeluTanh, UnaryOp::DGeluTanh),
        (UnaryOp::Sigmoid, UnaryOp::DSigmoid),
        (UnaryOp::Tanh, UnaryOp::DTanh),
        (UnaryOp::Silu, UnaryOp::DSilu),
        (
            UnaryOp::Clamp { lo: -1.5, hi: 2.0 },
            UnaryOp::DClamp { lo: -1.5, hi: 2.0 },
        ),
    ];
    for (f, df) in pairs {
        assert_eq!(f.derivative(), Some(df));
        for i in 0..=160 {
            let x = -8.0 + i as f64 * 0.1 + 0.013; // off the kinks at 0, -1.5, 2
            let h = 1e-5;
            let fd = (apply_unary(f, x + h) - apply_unary(f, x - h)) / (2.0 * h);
            let d = apply_unary(df, x);
            assert!(
                (fd - d).abs() <= 1e-7 * (1.0 + d.abs()),
                "{f:?} at {x}: fd {fd}, d {d}"
            );
        }
    }
}

#[test]
fn regions_cover_and_sum_to_the_whole() {
    let acc: Vec<f64> = (0..12).map(|v| v as f64 - 5.0).collect();
    let inp = EvalInputs::new(3, 4, 1, &acc);
    let t = tree("bgrad_row(relu(acc))");
    let all = evaluate(&t, &inp).unwrap();
    let top = evaluate_region(&t, &inp, 0..1, 0..4).unwrap();
    let rest = evaluate_region(&t, &inp, 1..3, 0..4).unwrap();
    assert!(top.d[4..].iter().all(|v| v.is_nan()));
    let merged: Vec<f64> = top
        .d
        .iter()
        .zip(&rest.d)
        .map(|(a, b)| if a.is_nan() { *b } else { *a })
        .collect();
    assert_eq!(merged, all.d);
    let sums: Vec<f64> = top
        .bgrad_row
        .unwrap()
        .iter()
        .zip(rest.bgrad_row.unwrap())
        .map(|(a, b)| a + b)
        .collect();
    assert_eq!(Some(sums), all.bgrad_row);
}

#[test]
fn evaluator_refuses_missing_or_misshapen_inputs() {
    let acc = [0.0; 6];
    let inp = EvalInputs::new(2, 3, 1, &acc);
    assert!(matches!(
        evaluate(&tree("acc + residual"), &inp),
        Err(EpilogueError::Input { .. })
    ));
    let mut inp2 = inp.clone();
    inp2.bias_col = Some(&[1.0, 2.0]); // N = 3
    assert!(evaluate(&tree("acc + bias_col"), &inp2).is_err());
    let short = [0.0; 5];
    assert!(evaluate(&tree("acc"), &EvalInputs::new(2, 3, 1, &short)).is_err());
    assert!(evaluate(&Fusion::BgradA.tree(), &inp).is_err()); // no B
    let mut inp3 = inp.clone();
    inp3.beta = 1.0;
    assert!(evaluate(&tree("acc + beta * c"), &inp3).is_err()); // beta != 0 needs C
    assert!(evaluate(
        &tree("select(row * 4611686018427387904 * 4 < 1, acc, c)"),
        &inp
    )
    .is_err());
}

#[test]
fn checker_accepts_default_bindings_of_every_fusion() {
    for f in Fusion::ALL {
        let t = f.tree();
        for out in [DType::Bf16, DType::F16, DType::F32] {
            let b = Binding::for_tree(&t, 100, 72, 64, 3, out);
            check(&t, &b, &KernelCaps::GENERATED).unwrap_or_else(|e| panic!("{}: {e}", f.name()));
        }
    }
}

#[test]
fn checker_refuses_bad_bindings() {
    let t = Fusion::GeluAuxBias.tree();
    let good = Binding::for_tree(&t, 64, 48, 32, 2, DType::Bf16);
    check(&t, &good, &KernelCaps::GENERATED).unwrap();
    let caps = KernelCaps::GENERATED;
    let refuse = |b: &Binding, want: &str| {
        let e = check(&t, b, &caps).expect_err(want);
        assert!(e.to_string().contains(want), "{e}");
        e
    };
    let mut b = good.clone();
    b.bias_col = Some(VecSpec::shared(64, DType::Bf16)); // length M where N is needed
    refuse(&b, "broadcasts over N = 48");
    let mut b = good.clone();
    b.bias_col = None;
    refuse(&b, "not bound");
    let mut b = good.clone();
    b.aux = Some(MatSpec::tight(64, 48, DType::F32)); // the tree stores D's type
    refuse(&b, "the tree stores bf16");
    let mut b = good.clone();
    b.aux = Some(MatSpec {
        ld: 40,
        ..MatSpec::tight(64, 48, DType::Bf16)
    });
    refuse(&b, "smaller than N");
    let mut b = good.clone();
    b.d.batch_stride = 100; // batches of D overlap
    refuse(&b, "overlap");
    let mut b = good.clone();
    b.d.align_bytes = 1;
    let e = refuse(&b, "misaligned");
    assert!(matches!(
        KernelError::from(e),
        KernelError::Misaligned { operand: "D", .. }
    ));
    let mut b = good.clone();
    b.beta = 1.0; // C read but not bound
    b.c = None;
    refuse(&b, "c: is used by the tree but not bound");
    let mut b = good.clone();
    b.m = 0;
    refuse(&b, "extent 0");
    let mut b = good.clone();
    b.residual = None;
    b.aux_in = Some(MatSpec {
        batch_stride: i64::MAX,
        ..MatSpec::tight(64, 48, DType::Bf16)
    });
    let d = tessera_kernels::epilogue::Fusion::DGelu.tree();
    let e = check(&d, &b, &caps).unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");
    let mut b = good.clone();
    b.bias_col = Some(VecSpec {
        batch_stride: i64::MAX,
        ..VecSpec::shared(48, DType::Bf16)
    });
    refuse(&b, "overflows");

    // Bit-masks: pitch in bits, a multiple of 128.
    let r = Fusion::ReluAuxBias.tree();
    let mut b = Binding::for_tree(&r, 64, 48, 32, 1, DType::F16);
    assert_eq!(b.aux.unwrap().ld, 128);
    check(&r, &b, &caps).unwrap();
    b.aux = Some(MatSpec {
        ld: 64,
        ..MatSpec::tight_bits(64, 48)
    });
    assert!(check(&r, &b, &caps)
        .unwrap_err()
        .to_string()
        .contains("multiple of 128"));
    b.aux = Some(MatSpec::tight(64, 48, DType::F16));
    assert!(check(&r, &b, &caps)
        .unwrap_err()
        .to_string()
        .contains("bit-mask"));

    // Reductions accumulate in fp32.
    let g = Fusion::DGeluBgrad.tree();
    let mut b = Binding::for_tree(&g, 64, 48, 32, 1, DType::Bf16);
    b.bgrad_col = Some(VecSpec::shared(48, DType::Bf16));
    assert!(check(&g, &b, &caps)
        .unwrap_err()
        .to_string()
        .contains("fp32"));

    // Kernel limits.
    let no_aux = KernelCaps {
        aux_outputs: 0,
        ..caps
    };
    assert!(matches!(
        check(&t, &good, &no_aux),
        Err(EpilogueError::Unsupported { .. })
    ));
    let small = KernelCaps {
        max_nodes: 4,
        ..caps
    };
    assert!(matches!(
        check(&t, &good, &small),
        Err(EpilogueError::Unsupported { .. })
    ));
    let s = tree("select(row < 3, acc, c)");
    let plain = KernelCaps {
        coordinate_select: false,
        ..caps
    };
    let bs = Binding::for_tree(&s, 8, 8, 8, 1, DType::F32);
    assert!(matches!(
        check(&s, &bs, &plain),
        Err(EpilogueError::Unsupported { .. })
    ));
}

/// An independent model of one correctly rounded conversion from float64: round to odd into
/// fp32 (24 bits, at least two more than the 16-bit types keep), then `half`'s fp32
/// conversion, which rounds to nearest even. Round-to-odd then round-to-nearest equals one
/// rounding to nearest.
fn round_via_odd(x: f64, t: DType) -> f64 {
    let mut f = x as f32;
    if f64::from(f) != x && f.is_finite() && f.to_bits() & 1 == 0 {
        // Step one fp32 unit toward x: the odd neighbour on x's side.
        let up = (f64::from(f) < x) == (f >= 0.0);
        f = f32::from_bits(if up { f.to_bits() + 1 } else { f.to_bits() - 1 });
    }
    match t {
        DType::Bf16 => half::bf16::from_f32(f).to_f64(),
        DType::F16 => half::f16::from_f32(f).to_f64(),
        DType::F32 => f64::from(x as f32),
    }
}

#[test]
fn explicit_conversions_round_once_to_nearest_even() {
    use tessera_kernels::epilogue::eval::round;
    let mut s: u64 = 0x2026_1122;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 11
    };
    for t in [DType::Bf16, DType::F16] {
        for i in 0..400_000 {
            let u = next() as f64 / (1u64 << 53) as f64;
            let x = match i % 4 {
                // Uniform in [-3, 3).
                0 => 6.0 * u - 3.0,
                // Across the exponent range (including fp16 overflow and subnormals).
                1 => (u - 0.5).signum() * 2f64.powf(60.0 * u - 30.0),
                // Near a midpoint of the 16-bit type: a value plus half a unit, nudged.
                _ => {
                    let v = round(6.0 * u - 3.0, t);
                    let ulp = if t == DType::Bf16 {
                        2f64.powi(-8)
                    } else {
                        2f64.powi(-11)
                    };
                    let half_unit = ulp * v.abs().max(1e-3).log2().floor().exp2() / 2.0;
                    v + half_unit * (1.0 + (next() as f64 / (1u64 << 53) as f64 - 0.5) * 1e-9)
                }
            };
            assert_eq!(
                round(x, t).to_bits(),
                round_via_odd(x, t).to_bits(),
                "{t}: {x:e}"
            );
        }
    }
}

/// Correct rounding to 16-bit types at the values `half`'s own conversion gets wrong: just above
/// a midpoint rounds up, an exact midpoint goes to the even neighbour, past fp16's range is
/// infinity.
#[test]
fn round_near_midpoints_and_past_the_range() {
    use tessera_kernels::epilogue::eval::round;
    // Just above the midpoint of 1.25 and 1.2578125 (bf16 neighbours): rounds up.
    assert_eq!(round(1.2539064904531738, DType::Bf16), 1.2578125);
    // An exact midpoint goes to the even neighbour.
    assert_eq!(round(1.25390625, DType::Bf16), 1.25);
    assert_eq!(round(1e6, DType::F16), f64::INFINITY);
}
