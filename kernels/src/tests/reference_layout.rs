//! The float64 reference with a column-major D agrees with the reference of the transposed
//! product `Dᵀ = Bᵀ Aᵀ` on the same storage (the identity the kernels rely on), element by
//! element, for every storage order of A and B, with C, both bias directions, aux, padded
//! leading dimensions and batches. No GPU.

use tessera_kernels::plan::GemmStrides;
use tessera_kernels::reference::{reference_rows, HostGemm};
use tessera_kernels::rng::Rng;
use tessera_kernels::{Activation, BiasMode, Epilogue, GemmProblem, Major};

#[test]
fn column_major_d_is_the_transposed_row_major_product() {
    let mut rng = Rng::new(0x5eed_c01d);
    let orders = [Major::Row, Major::Col];
    for a_major in orders {
        for b_major in orders {
            for bias in [BiasMode::PerRow, BiasMode::PerCol] {
                let mut p = GemmProblem::new(13, 7, 5);
                p.batch = 2;
                p.a_major = a_major;
                p.b_major = b_major;
                p.d_major = Major::Col;
                p.epilogue = Epilogue {
                    act: Activation::GeluErf,
                    bias,
                    aux: true,
                    alpha: 0.75,
                    beta: -0.5,
                };
                let mut s = GemmStrides::tight(&p);
                s.lda += 3;
                s.ldb += 2;
                s.ldc += 1;
                s.ldd += 4;
                s.ldaux += 2;
                let (ar, br) = (
                    if a_major == Major::Row { p.m } else { p.k },
                    if b_major == Major::Row { p.k } else { p.n },
                );
                s.batch_a = ar * s.lda + 5;
                s.batch_b = br * s.ldb + 1;
                s.batch_c = p.n * s.ldc + 3;
                s.batch_d = p.n * s.ldd + 2;
                s.batch_aux = p.n * s.ldaux + 1;
                s.batch_bias = 20;
                let len = |st: i64, outer: i64, ld: i64, inner: i64| {
                    GemmStrides::extent(p.batch, st, outer, ld, inner) as usize
                };
                let host = HostGemm {
                    a: rng.vec(
                        len(
                            s.batch_a,
                            ar,
                            s.lda,
                            if a_major == Major::Row { p.k } else { p.m },
                        ),
                        -1.0,
                        1.0,
                    ),
                    b: rng.vec(
                        len(
                            s.batch_b,
                            br,
                            s.ldb,
                            if b_major == Major::Row { p.n } else { p.k },
                        ),
                        -1.0,
                        1.0,
                    ),
                    c: Some(rng.vec(
                        GemmStrides::out_extent(&p, s.batch_c, s.ldc) as usize,
                        -1.0,
                        1.0,
                    )),
                    bias: Some(rng.vec(40, -1.0, 1.0)),
                };
                let rows: Vec<i64> = (0..p.m).collect();
                let want = reference_rows(&p, &s, &host, &rows);
                // The transposed product on the same storage: A and B exchanged.
                let t = p.row_major_d();
                let ts = s.row_major_d(&p);
                let th = HostGemm {
                    a: host.b.clone(),
                    b: host.a.clone(),
                    ..host.clone()
                };
                let trows: Vec<i64> = (0..t.m).collect();
                let got = reference_rows(&t, &ts, &th, &trows);
                assert_eq!(want.d.len(), got.d.len());
                let mut compared = 0;
                for (x, y) in want
                    .d
                    .iter()
                    .zip(&got.d)
                    .chain(want.aux.iter().zip(&got.aux))
                {
                    assert_eq!(x.is_nan(), y.is_nan(), "{p}: positions differ");
                    if !x.is_nan() {
                        assert!((x - y).abs() <= 1e-12 * (1.0 + x.abs()), "{p}: {x} vs {y}");
                        compared += 1;
                    }
                }
                assert_eq!(compared, 2 * 2 * 13 * 7, "{p}: every D and aux element");
                // And one element by hand: D(b=1, i=4, j=6) sits at 1*batch_d + 6*ldd + 4.
                let (b, i, j) = (1i64, 4i64, 6i64);
                let mut acc = 0.0f64;
                for kk in 0..p.k {
                    acc += host.a[s.a_index(&p, b, i, kk)] as f64
                        * host.b[s.b_index(&p, b, kk, j)] as f64;
                }
                let c = host.c.as_ref().unwrap()[(b * s.batch_c + j * s.ldc + i) as usize] as f64;
                let bv = host.bias.as_ref().unwrap()
                    [(b * s.batch_bias + if bias == BiasMode::PerRow { i } else { j }) as usize]
                    as f64;
                let pre = 0.75 * acc - 0.5 * c + bv;
                let at = (b * s.batch_d + j * s.ldd + i) as usize;
                assert!(
                    (want.aux[(b * s.batch_aux + j * s.ldaux + i) as usize] - pre).abs() < 1e-12
                );
                assert!((want.d[at] - Activation::GeluErf.apply(pre)).abs() < 1e-12);
            }
        }
    }
}
