//! The float64 CPU reference, rounding helpers and the error metrics with their bounds.

use crate::plan::problem::{BiasMode, DType, GemmProblem, GemmStrides};

/// Rounds to the nearest value of `dtype` (ties to even), as the GPU stores it.
pub fn round_to(x: f32, dtype: DType) -> f32 {
    match dtype {
        DType::Bf16 => half::bf16::from_f32(x).to_f32(),
        DType::F16 => half::f16::from_f32(x).to_f32(),
        DType::F32 => x,
    }
}

/// Host operands of a GEMM, as the values the device holds (already rounded to their types).
#[derive(Clone, Debug)]
pub struct HostGemm {
    /// A.
    pub a: Vec<f32>,
    /// B.
    pub b: Vec<f32>,
    /// C, when beta != 0.
    pub c: Option<Vec<f32>>,
    /// Bias, when the epilogue has one.
    pub bias: Option<Vec<f32>>,
}

/// The reference result: D and (when asked for) aux, laid out as the device buffers (the
/// problem's `d_major`, `ldd` / `ldaux`).
#[derive(Clone, Debug)]
pub struct Reference {
    /// `act(pre)` at D's positions.
    pub d: Vec<f64>,
    /// `pre` at aux's positions (empty without aux).
    pub aux: Vec<f64>,
}

/// Computes the epilogue GEMM in float64 for rows `rows` of every batch (all rows: `0..M`).
/// Positions not computed hold NaN.
pub fn reference_rows(p: &GemmProblem, s: &GemmStrides, h: &HostGemm, rows: &[i64]) -> Reference {
    let d_len = GemmStrides::out_extent(p, s.batch_d, s.ldd) as usize;
    let aux_len = if p.epilogue.aux {
        GemmStrides::out_extent(p, s.batch_aux, s.ldaux) as usize
    } else {
        0
    };
    let mut d = vec![f64::NAN; d_len];
    let mut aux = vec![f64::NAN; aux_len];
    let e = p.epilogue;
    let mut acc = vec![0f64; p.n as usize];
    for b in 0..p.batch {
        for &i in rows {
            acc.iter_mut().for_each(|x| *x = 0.0);
            for kk in 0..p.k {
                let av = h.a[s.a_index(p, b, i, kk)] as f64;
                if av == 0.0 {
                    continue;
                }
                for j in 0..p.n {
                    acc[j as usize] += av * h.b[s.b_index(p, b, kk, j)] as f64;
                }
            }
            for j in 0..p.n {
                let mut x = e.alpha as f64 * acc[j as usize];
                if e.beta != 0.0 {
                    if let Some(c) = &h.c {
                        x += e.beta as f64
                            * c[GemmStrides::out_index(p, s.batch_c, s.ldc, b, i, j)] as f64;
                    }
                }
                if let Some(bias) = &h.bias {
                    let bb = b * s.batch_bias;
                    x += match e.bias {
                        BiasMode::None => 0.0,
                        BiasMode::PerRow => bias[(bb + i) as usize] as f64,
                        BiasMode::PerCol => bias[(bb + j) as usize] as f64,
                    };
                }
                if e.aux {
                    aux[GemmStrides::out_index(p, s.batch_aux, s.ldaux, b, i, j)] = x;
                }
                d[GemmStrides::out_index(p, s.batch_d, s.ldd, b, i, j)] = e.act.apply(x);
            }
        }
    }
    Reference { d, aux }
}

/// Error of a result against the reference, over the positions the reference computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorStats {
    /// `||got - ref||_F / ||ref||_F`.
    pub rel_fro: f64,
    /// `max |got - ref|`.
    pub max_abs: f64,
    /// `max |ref|`.
    pub max_ref: f64,
    /// Positions compared.
    pub compared: usize,
    /// Compared positions holding NaN or infinity in the result (unwritten: poisoned).
    pub non_finite: usize,
}

/// Compares `got` with `want` where `want` is not NaN.
pub fn compare(got: &[f64], want: &[f64]) -> ErrorStats {
    let (mut num, mut den, mut max_abs, mut max_ref) = (0f64, 0f64, 0f64, 0f64);
    let (mut compared, mut non_finite) = (0usize, 0usize);
    for (&g, &w) in got.iter().zip(want) {
        if w.is_nan() {
            continue;
        }
        compared += 1;
        if !g.is_finite() {
            non_finite += 1;
            continue;
        }
        num += (g - w) * (g - w);
        den += w * w;
        max_abs = max_abs.max((g - w).abs());
        max_ref = max_ref.max(w.abs());
    }
    ErrorStats {
        rel_fro: if den > 0.0 {
            num.sqrt() / den.sqrt()
        } else {
            num.sqrt()
        },
        max_abs,
        max_ref,
        compared,
        non_finite,
    }
}

/// The error bounds a correct result meets, for output type `out` and reduction length `k`,
/// on the harness's data (A, B, C and bias uniform in [-1, 1)).
///
/// Inputs are exact in both (the reference reads the rounded values), so the error is the
/// fp32 accumulation plus one rounding of the result to `out` (relative at most `u_out`, half
/// an ulp). The accumulation adds K terms of size at most 1 into partial sums that grow like
/// `sqrt(k)`, each addition erring by at most `2^-24` of its partial sum: a random walk of
/// about `K * 2^-24 / 3` (rms), which is `sqrt(K)` times `sqrt(K) * 2^-24 / 3`. So:
/// - relative Frobenius error `<= u_out + 1e-5`;
/// - max abs error scaled by `sqrt(K)`: `max_abs / sqrt(K) <= u_out * max|ref| / sqrt(K) +
///   4 * 2^-24 * sqrt(K)`, a 12-sigma margin on the accumulation term.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// Bound on the relative Frobenius error.
    pub rel_fro: f64,
    /// Bound on the max abs error.
    pub max_abs: f64,
}

impl Bounds {
    /// The bounds for `stats` of a result in `out` with reduction length `k`.
    pub fn for_result(out: DType, k: i64, max_ref: f64) -> Bounds {
        let u = out.unit_roundoff();
        let sk = (k as f64).sqrt();
        Bounds {
            rel_fro: u + 1e-5,
            max_abs: u * max_ref + sk * (4.0 * 2f64.powi(-24) * sk),
        }
    }

    /// Whether `stats` is within the bounds (and fully written).
    pub fn check(&self, stats: &ErrorStats) -> bool {
        stats.non_finite == 0
            && stats.compared > 0
            && stats.rel_fro <= self.rel_fro
            && stats.max_abs <= self.max_abs
    }
}
