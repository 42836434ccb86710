//! PaddlePaddle's `fused_gemm_epilogue` and `fused_gemm_epilogue_grad` on the GPU against a
//! float64 statement of the operators' semantics written here, for every activation and
//! transposition. Public API only. Skips without a GPU (`TESSERA_REQUIRE_GPU=1` fails).

mod common;

use common::{compare, gpu, round, Buf, Rng};
use tessera_kernels::{DType, FusedGemmEpilogue, FusedGemmEpilogueGrad, PaddleActivation};

const M: usize = 96;
const N: usize = 136;
const K: usize = 72;

fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

fn dgelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let u = c * (x + 0.044715 * x * x * x);
    let t = u.tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)
}

/// `op(X) op(Y)` in float64 from the operands as stored.
fn product(x: &[f64], y: &[f64], tx: bool, ty: bool) -> Vec<f64> {
    let mut acc = vec![0.0; M * N];
    for i in 0..M {
        for k in 0..K {
            let a = if tx { x[k * M + i] } else { x[i * K + k] };
            for j in 0..N {
                let b = if ty { y[j * K + k] } else { y[k * N + j] };
                acc[i * N + j] += a * b;
            }
        }
    }
    acc
}

fn bound(k: usize) -> impl Fn(f64) -> f64 {
    let eps = 1e-4 + 4.0 * k as f64 * 2f64.powi(-24);
    move |w: f64| 2f64.powi(-8) * w.abs() + eps * (1.0 + w.abs())
}

#[test]
fn forward_matches_the_operator_semantics() {
    let Some(ctx) = gpu("forward_matches_the_operator_semantics") else {
        return;
    };
    let s = ctx.cudarc().default_stream();
    let mut rng = Rng::new(11);
    let v = |rng: &mut Rng, n: usize| -> Vec<f64> {
        (0..n).map(|_| round(rng.unit(), DType::Bf16)).collect()
    };
    let (x, y, bias) = (v(&mut rng, M * K), v(&mut rng, K * N), v(&mut rng, N));
    let (xd, yd, bd) = (
        Buf::upload(&s, DType::Bf16, &x),
        Buf::upload(&s, DType::Bf16, &y),
        Buf::upload(&s, DType::Bf16, &bias),
    );
    for act in [
        PaddleActivation::None,
        PaddleActivation::Relu,
        PaddleActivation::Gelu,
    ] {
        for (tx, ty) in [(false, false), (true, false), (false, true), (true, true)] {
            let what = format!("{act} trans_x {tx} trans_y {ty}");
            let reserve = act != PaddleActivation::None;
            let op = FusedGemmEpilogue::new(
                &ctx,
                (M as i64, N as i64, K as i64),
                tx,
                ty,
                act,
                reserve,
                DType::Bf16,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut out = Buf::poisoned(&s, DType::Bf16, M * N);
            let words = M * N.div_ceil(128) * 128 / 32;
            let mut res = match act {
                PaddleActivation::Relu => Some(Buf::words(&s, &vec![0xA5A5_A5A5; words])),
                PaddleActivation::Gelu => Some(Buf::poisoned(&s, DType::Bf16, M * N)),
                PaddleActivation::None => None,
            };
            op.launch(
                &s,
                xd.tensor(),
                yd.tensor(),
                bd.tensor(),
                out.tensor_mut(),
                res.as_mut().map(|r| r.tensor_mut()),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            s.synchronize().expect("sync");
            let pre: Vec<f64> = product(&x, &y, tx, ty)
                .iter()
                .enumerate()
                .map(|(i, a)| a + bias[i % N])
                .collect();
            let want: Vec<f64> = pre
                .iter()
                .map(|&p| match act {
                    PaddleActivation::None => p,
                    PaddleActivation::Relu => p.max(0.0),
                    PaddleActivation::Gelu => gelu_tanh(p),
                })
                .collect();
            let c = compare("out", &out.download(&s), &want, bound(K));
            assert_eq!(c.failed, 0, "{what}: {c:?}");
            match (act, &res) {
                (PaddleActivation::Relu, Some(r)) => {
                    let w = r.download_words(&s);
                    let ld = N.div_ceil(128) * 128;
                    for i in 0..M {
                        for j in 0..N {
                            let p = pre[i * N + j];
                            if p.abs() <= bound(K)(p) {
                                continue;
                            }
                            let bit = (w[(i * ld + j) / 32] >> ((i * ld + j) % 32)) & 1 == 1;
                            assert_eq!(bit, p > 0.0, "{what}: mask bit ({i}, {j}) of {p}");
                        }
                    }
                }
                (PaddleActivation::Gelu, Some(r)) => {
                    let c = compare("reserve", &r.download(&s), &pre, bound(K));
                    assert_eq!(c.failed, 0, "{what}: {c:?}");
                }
                _ => {}
            }
        }
    }
}

#[test]
fn backward_matches_the_operator_semantics() {
    let Some(ctx) = gpu("backward_matches_the_operator_semantics") else {
        return;
    };
    let s = ctx.cudarc().default_stream();
    let mut rng = Rng::new(12);
    let v = |rng: &mut Rng, n: usize| -> Vec<f64> {
        (0..n).map(|_| round(rng.unit(), DType::Bf16)).collect()
    };
    let (x, y, dout) = (v(&mut rng, M * K), v(&mut rng, K * N), v(&mut rng, M * N));
    // The previous layer's pre-activation (shaped as X is stored), and its ReLU mask.
    let prev = v(&mut rng, M * K);
    let (xd, yd, dd) = (
        Buf::upload(&s, DType::Bf16, &x),
        Buf::upload(&s, DType::Bf16, &y),
        Buf::upload(&s, DType::Bf16, &dout),
    );
    for act in [
        PaddleActivation::None,
        PaddleActivation::Relu,
        PaddleActivation::Gelu,
    ] {
        for (tx, ty) in [(false, false), (true, false), (false, true), (true, true)] {
            let what = format!("{act} trans_x {tx} trans_y {ty}");
            let op = FusedGemmEpilogueGrad::new(
                &ctx,
                (M as i64, N as i64, K as i64),
                tx,
                ty,
                act,
                (true, true, true),
                DType::Bf16,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            // The reserve space as X is stored: M x K, or K x M when trans_x.
            let (rows, cols) = if tx { (K, M) } else { (M, K) };
            let reserve = match act {
                PaddleActivation::Relu => {
                    let ld = cols.div_ceil(128) * 128;
                    let mut w = vec![0u32; rows * ld / 32];
                    for r in 0..rows {
                        for c in 0..cols {
                            if prev[r * cols + c] > 0.0 {
                                w[(r * ld + c) / 32] |= 1 << ((r * ld + c) % 32);
                            }
                        }
                    }
                    Some(Buf::words(&s, &w))
                }
                PaddleActivation::Gelu => Some(Buf::upload(&s, DType::Bf16, &prev)),
                PaddleActivation::None => None,
            };
            let mut dx = Buf::poisoned(&s, DType::Bf16, M * K);
            let mut dy = Buf::poisoned(&s, DType::Bf16, K * N);
            let mut db = Buf::poisoned(&s, DType::F32, N);
            op.launch(
                &s,
                dd.tensor(),
                xd.tensor(),
                yd.tensor(),
                reserve.as_ref().map(|r| r.tensor()),
                Some(dx.tensor_mut()),
                Some(dy.tensor_mut()),
                Some(db.tensor_mut()),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            s.synchronize().expect("sync");
            // dX[i, k] = act'(prev) * Σ_j dOut[i, j] op(Y)[k, j], stored like X.
            let mut want_dx = vec![0.0; M * K];
            for i in 0..M {
                for k in 0..K {
                    let g: f64 = (0..N)
                        .map(|j| dout[i * N + j] * if ty { y[j * K + k] } else { y[k * N + j] })
                        .sum();
                    let at = if tx { k * M + i } else { i * K + k };
                    let d = match act {
                        PaddleActivation::None => 1.0,
                        PaddleActivation::Relu => f64::from(u8::from(prev[at] > 0.0)),
                        PaddleActivation::Gelu => dgelu_tanh(prev[at]),
                    };
                    want_dx[at] = g * d;
                }
            }
            // dY[k, j] = Σ_i op(X)[i, k] dOut[i, j], stored like Y.
            let mut want_dy = vec![0.0; K * N];
            for k in 0..K {
                for j in 0..N {
                    let g: f64 = (0..M)
                        .map(|i| (if tx { x[k * M + i] } else { x[i * K + k] }) * dout[i * N + j])
                        .sum();
                    want_dy[if ty { j * K + k } else { k * N + j }] = g;
                }
            }
            let want_db: Vec<f64> = (0..N)
                .map(|j| (0..M).map(|i| dout[i * N + j]).sum())
                .collect();
            let cx = compare("dX", &dx.download(&s), &want_dx, bound(N));
            let cy = compare("dY", &dy.download(&s), &want_dy, bound(M));
            let cb = compare("dBias", &db.download(&s), &want_db, |w| {
                1e-4 * (1.0 + w.abs()) * 4.0
            });
            for c in [cx, cy, cb] {
                assert_eq!(c.failed, 0, "{what}: {c:?}");
            }
        }
    }
}

#[test]
fn a_missing_reserve_space_is_an_error() {
    let Some(ctx) = gpu("a_missing_reserve_space_is_an_error") else {
        return;
    };
    let s = ctx.cudarc().default_stream();
    let op = FusedGemmEpilogue::new(
        &ctx,
        (64, 64, 64),
        false,
        false,
        PaddleActivation::Relu,
        true,
        DType::Bf16,
    )
    .expect("op");
    let a = Buf::upload(&s, DType::Bf16, &vec![0.5; 64 * 64]);
    let bias = Buf::upload(&s, DType::Bf16, &[0.0; 64]);
    let mut out = Buf::poisoned(&s, DType::Bf16, 64 * 64);
    let e = op
        .launch(
            &s,
            a.tensor(),
            a.tensor(),
            bias.tensor(),
            out.tensor_mut(),
            None,
        )
        .expect_err("no reserve");
    assert!(e.to_string().contains("reserve space"), "{e}");
}
