//! `fused_gemm_epilogue` / `fused_gemm_epilogue_grad`: a two-layer MLP's gradients against
//! central finite differences of its loss, for every activation and transposition.

use tessera_kernels::epilogue::paddle::{
    fused_gemm_epilogue, fused_gemm_epilogue_grad, Matrix, PaddleActivation, ReserveSpace,
    WantGrads,
};
use tessera_kernels::rng::Rng;

fn random(r: &mut Rng, rows: usize, cols: usize) -> Matrix {
    Matrix::new(
        rows,
        cols,
        (0..rows * cols)
            .map(|_| r.uniform(-1.0, 1.0) as f64)
            .collect(),
    )
    .unwrap()
}

/// The parameters of `loss = sum(G * (act(op(x) op(w1) + b1) op(w2) + b2))`, stored as the
/// transposition flags say.
#[derive(Clone)]
struct Mlp {
    x: Matrix,
    w1: Matrix,
    b1: Vec<f64>,
    w2: Matrix,
    b2: Vec<f64>,
    g: Matrix,
    act: PaddleActivation,
    trans_x: bool,
    trans_y: bool,
}

impl Mlp {
    fn new(seed: u64, act: PaddleActivation, trans_x: bool, trans_y: bool) -> Mlp {
        let (batch, d0, d1, d2) = (5, 4, 6, 3);
        let mut r = Rng::new(seed);
        let store = |m: Matrix, t: bool| if t { m.t() } else { m };
        Mlp {
            x: store(random(&mut r, batch, d0), trans_x),
            w1: store(random(&mut r, d0, d1), trans_y),
            b1: (0..d1).map(|_| r.uniform(-0.5, 0.5) as f64).collect(),
            w2: store(random(&mut r, d1, d2), trans_y),
            b2: (0..d2).map(|_| r.uniform(-0.5, 0.5) as f64).collect(),
            g: random(&mut r, batch, d2),
            act,
            trans_x,
            trans_y,
        }
    }

    /// Layer 1's output h, its reserve space, and the loss.
    fn forward(&self) -> (Matrix, Option<ReserveSpace>, f64) {
        let l1 = fused_gemm_epilogue(
            &self.x,
            &self.w1,
            &self.b1,
            self.trans_x,
            self.trans_y,
            self.act,
            true,
        )
        .unwrap();
        // Layer 2 reads h as stored (row-major batch x d1): no trans_x.
        let l2 = fused_gemm_epilogue(
            &l1.out,
            &self.w2,
            &self.b2,
            false,
            self.trans_y,
            PaddleActivation::None,
            false,
        )
        .unwrap();
        let loss = l2
            .out
            .data
            .iter()
            .zip(&self.g.data)
            .map(|(a, b)| a * b)
            .sum();
        (l1.out, l1.reserve_space, loss)
    }

    /// (dx, dw1, db1, dw2, db2) from the fused backward ops.
    fn backward(&self) -> [Vec<f64>; 5] {
        let (h, reserve, _) = self.forward();
        // Layer 2: dOut = G; its X is h, the previous layer's reserve gives act'.
        let g2 = fused_gemm_epilogue_grad(
            &self.g,
            &h,
            &self.w2,
            reserve.as_ref(),
            false,
            self.trans_y,
            self.act,
            WantGrads::ALL,
        )
        .unwrap();
        let dpre1 = g2.dx.unwrap();
        // Layer 1: dOut = d(pre-activation 1); its X is the input, no activation before it.
        let g1 = fused_gemm_epilogue_grad(
            &dpre1,
            &self.x,
            &self.w1,
            None,
            self.trans_x,
            self.trans_y,
            PaddleActivation::None,
            WantGrads::ALL,
        )
        .unwrap();
        [
            g1.dx.unwrap().data,
            g1.dy.unwrap().data,
            g1.dbias.unwrap(),
            g2.dy.unwrap().data,
            g2.dbias.unwrap(),
        ]
    }
}

fn finite_differences(p: &Mlp) -> [Vec<f64>; 5] {
    let h = 1e-6;
    let loss = |q: &Mlp| q.forward().2;
    let mut out: [Vec<f64>; 5] = Default::default();
    for (slot, grad) in out.iter_mut().enumerate() {
        let len = match slot {
            0 => p.x.data.len(),
            1 => p.w1.data.len(),
            2 => p.b1.len(),
            3 => p.w2.data.len(),
            _ => p.b2.len(),
        };
        for i in 0..len {
            let bump = |d: f64| {
                let mut q = p.clone();
                let v = match slot {
                    0 => &mut q.x.data[i],
                    1 => &mut q.w1.data[i],
                    2 => &mut q.b1[i],
                    3 => &mut q.w2.data[i],
                    _ => &mut q.b2[i],
                };
                *v += d;
                loss(&q)
            };
            grad.push((bump(h) - bump(-h)) / (2.0 * h));
        }
    }
    out
}

#[test]
fn mlp_gradients_match_finite_differences() {
    let names = ["dx", "dw1", "db1", "dw2", "db2"];
    for act in [
        PaddleActivation::None,
        PaddleActivation::Relu,
        PaddleActivation::Gelu,
    ] {
        for (trans_x, trans_y) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut seed = 11;
            let p = loop {
                let p = Mlp::new(seed, act, trans_x, trans_y);
                // ReLU: keep every pre-activation away from the kink, where the finite
                // difference straddles two slopes.
                let pre = fused_gemm_epilogue(
                    &p.x,
                    &p.w1,
                    &p.b1,
                    trans_x,
                    trans_y,
                    PaddleActivation::None,
                    false,
                )
                .unwrap();
                if act != PaddleActivation::Relu || pre.out.data.iter().all(|v| v.abs() > 1e-3) {
                    break p;
                }
                seed += 1;
            };
            let got = p.backward();
            let want = finite_differences(&p);
            for k in 0..5 {
                assert_eq!(
                    got[k].len(),
                    want[k].len(),
                    "{act} {trans_x} {trans_y} {}",
                    names[k]
                );
                for (g, w) in got[k].iter().zip(&want[k]) {
                    assert!(
                        (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        "{act} trans_x={trans_x} trans_y={trans_y} {}: fused {g}, finite difference {w}",
                        names[k]
                    );
                }
            }
        }
    }
}

#[test]
fn reserve_space_is_the_mask_or_the_pre_activation() {
    let x = Matrix::new(2, 2, vec![1.0, -1.0, 0.5, 2.0]).unwrap();
    let y = Matrix::new(2, 2, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
    let bias = [0.0, 0.25];
    let f = fused_gemm_epilogue(&x, &y, &bias, false, false, PaddleActivation::Relu, true).unwrap();
    assert_eq!(
        f.reserve_space,
        Some(ReserveSpace::ReluMask {
            rows: 2,
            cols: 2,
            bits: vec![true, false, true, true]
        })
    );
    assert_eq!(f.out.data, vec![1.0, 0.0, 0.5, 2.25]);
    let f = fused_gemm_epilogue(&x, &y, &bias, false, false, PaddleActivation::Gelu, true).unwrap();
    assert_eq!(
        f.reserve_space,
        Some(ReserveSpace::GeluInput(
            Matrix::new(2, 2, vec![1.0, -0.75, 0.5, 2.25]).unwrap()
        ))
    );
    let f =
        fused_gemm_epilogue(&x, &y, &bias, false, false, PaddleActivation::Gelu, false).unwrap();
    assert_eq!(f.reserve_space, None);
}

#[test]
fn bad_arguments_are_errors() {
    let x = Matrix::new(2, 3, vec![0.0; 6]).unwrap();
    let y = Matrix::new(2, 2, vec![0.0; 4]).unwrap();
    assert!(fused_gemm_epilogue(
        &x,
        &y,
        &[0.0, 0.0],
        false,
        false,
        PaddleActivation::None,
        false
    )
    .is_err());
    let y3 = Matrix::new(3, 2, vec![0.0; 6]).unwrap();
    assert!(
        fused_gemm_epilogue(&x, &y3, &[0.0], false, false, PaddleActivation::None, false).is_err()
    );
    assert!(Matrix::new(2, 2, vec![0.0; 3]).is_err());
    assert!("swish".parse::<PaddleActivation>().is_err());
    let dout = Matrix::new(2, 2, vec![0.0; 4]).unwrap();
    // relu grad without its reserve space, and with the wrong kind of reserve space.
    assert!(fused_gemm_epilogue_grad(
        &dout,
        &x,
        &y3,
        None,
        false,
        false,
        PaddleActivation::Relu,
        WantGrads::ALL
    )
    .is_err());
    let pre = ReserveSpace::GeluInput(Matrix::new(2, 3, vec![0.0; 6]).unwrap());
    assert!(fused_gemm_epilogue_grad(
        &dout,
        &x,
        &y3,
        Some(&pre),
        false,
        false,
        PaddleActivation::Relu,
        WantGrads::ALL
    )
    .is_err());
    let wrong_shape = ReserveSpace::GeluInput(Matrix::new(3, 2, vec![0.0; 6]).unwrap());
    assert!(fused_gemm_epilogue_grad(
        &dout,
        &x,
        &y3,
        Some(&wrong_shape),
        false,
        false,
        PaddleActivation::Gelu,
        WantGrads::ALL
    )
    .is_err());
    let dout_bad = Matrix::new(3, 2, vec![0.0; 6]).unwrap();
    assert!(fused_gemm_epilogue_grad(
        &dout_bad,
        &x,
        &y3,
        None,
        false,
        false,
        PaddleActivation::None,
        WantGrads::ALL
    )
    .is_err());
}

#[test]
fn inconsistent_matrices_are_errors_not_panics() {
    let bad = Matrix {
        rows: 2,
        cols: 2,
        data: vec![0.0; 3],
    };
    let y = Matrix::new(2, 2, vec![0.0; 4]).unwrap();
    assert!(fused_gemm_epilogue(
        &bad,
        &y,
        &[0.0, 0.0],
        false,
        false,
        PaddleActivation::None,
        false
    )
    .is_err());
    assert!(fused_gemm_epilogue(
        &y,
        &bad,
        &[0.0, 0.0],
        true,
        true,
        PaddleActivation::None,
        false
    )
    .is_err());
    assert!(fused_gemm_epilogue_grad(
        &bad,
        &y,
        &y,
        None,
        false,
        false,
        PaddleActivation::None,
        WantGrads::ALL
    )
    .is_err());
    let mask = ReserveSpace::ReluMask {
        rows: 2,
        cols: 2,
        bits: vec![true],
    };
    assert!(fused_gemm_epilogue_grad(
        &y,
        &y,
        &y,
        Some(&mask),
        false,
        false,
        PaddleActivation::Relu,
        WantGrads::ALL
    )
    .is_err());
}
