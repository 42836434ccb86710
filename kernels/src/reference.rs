//! The float64 CPU reference of the flag-driven epilogue's GEMM over rows of the output (the
//! tests' check of the column-major D identity).

use crate::plan::problem::{BiasMode, GemmProblem, GemmStrides};

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
