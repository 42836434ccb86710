//! The float64 references of a 2-D convolution (cross-correlation, groups 1) on channels-last
//! tensors: the direct loop the GPU checks use, and two independent formulations it is checked
//! against on small cases (an explicit im2col matrix times the filter matrix, and a scatter
//! from every input element to the outputs it feeds, which inverts the index map instead of
//! following it). Pure CPU code on plain slices: it names nothing of the code under test.
//!
//! x is N-H-W-C, the filter K-R-S-C, the output N-P-Q-K, all tight; `x` and `w` are read
//! through accessors so that a tensor of more than 2^31 elements can stay in its 16-bit type.

use std::ops::Range;

/// The problem: sizes, stride, padding `(top, bottom, left, right)` and dilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub r: usize,
    pub s: usize,
    pub stride: (usize, usize),
    pub pad: (usize, usize, usize, usize),
    pub dil: (usize, usize),
}

impl ConvDims {
    /// Output rows: `(H + top + bottom − ((R−1)·dh + 1)) / sh + 1`.
    pub fn p(&self) -> usize {
        (self.h + self.pad.0 + self.pad.1 - ((self.r - 1) * self.dil.0 + 1)) / self.stride.0 + 1
    }

    /// Output columns.
    pub fn q(&self) -> usize {
        (self.w + self.pad.2 + self.pad.3 - ((self.s - 1) * self.dil.1 + 1)) / self.stride.1 + 1
    }

    /// GEMM rows `N·P·Q`.
    pub fn m(&self) -> usize {
        self.n * self.p() * self.q()
    }

    /// The reduction extent `C·R·S`.
    pub fn kk(&self) -> usize {
        self.c * self.r * self.s
    }

    pub fn x_index(&self, n: usize, h: usize, w: usize, c: usize) -> usize {
        ((n * self.h + h) * self.w + w) * self.c + c
    }

    pub fn w_index(&self, k: usize, r: usize, s: usize, c: usize) -> usize {
        ((k * self.r + r) * self.s + s) * self.c + c
    }

    /// x's row and column read by output pixel `(p, q)` at tap `(r, s)`, if inside x.
    fn source(&self, p: usize, q: usize, r: usize, s: usize) -> Option<(usize, usize)> {
        let h = (p * self.stride.0 + r * self.dil.0).checked_sub(self.pad.0)?;
        let w = (q * self.stride.1 + s * self.dil.1).checked_sub(self.pad.2)?;
        (h < self.h && w < self.w).then_some((h, w))
    }
}

/// The direct loop over the output rows `rows` (`m = (n·P + p)·Q + q`), every channel:
/// `(acc, mag)`, each `rows.len() x K` row-major, `acc` the convolution and `mag` its
/// `Σ |x|·|w|` (the scale of its rounding error).
pub fn conv_direct(
    d: &ConvDims,
    x: &dyn Fn(usize) -> f64,
    w: &dyn Fn(usize) -> f64,
    rows: Range<usize>,
) -> (Vec<f64>, Vec<f64>) {
    let (pp, qq) = (d.p(), d.q());
    let len = rows.len() * d.k;
    let (mut acc, mut mag) = (vec![0.0; len], vec![0.0; len]);
    for (i, m) in rows.enumerate() {
        let (n, p, q) = (m / (pp * qq), (m / qq) % pp, m % qq);
        for k in 0..d.k {
            let (mut a, mut g) = (0.0, 0.0);
            for r in 0..d.r {
                for s in 0..d.s {
                    let Some((h, ww)) = d.source(p, q, r, s) else {
                        continue;
                    };
                    for c in 0..d.c {
                        let xv = x(d.x_index(n, h, ww, c));
                        let wv = w(d.w_index(k, r, s, c));
                        a += xv * wv;
                        g += (xv * wv).abs();
                    }
                }
            }
            acc[i * d.k + k] = a;
            mag[i * d.k + k] = g;
        }
    }
    (acc, mag)
}

/// The explicit im2col matrix `A` (`M x C·R·S`, row-major, column `(r·S + s)·C + c`, 0 in the
/// padding) times the filter seen as `C·R·S x K`: every output.
pub fn conv_im2col_gemm(d: &ConvDims, x: &[f64], w: &[f64]) -> Vec<f64> {
    let (pp, qq, kk) = (d.p(), d.q(), d.kk());
    let m = d.m();
    let mut a = vec![0.0; m * kk];
    for n in 0..d.n {
        for p in 0..pp {
            for q in 0..qq {
                let row = (n * pp + p) * qq + q;
                for r in 0..d.r {
                    for s in 0..d.s {
                        if let Some((h, ww)) = d.source(p, q, r, s) {
                            for c in 0..d.c {
                                a[row * kk + (r * d.s + s) * d.c + c] = x[d.x_index(n, h, ww, c)];
                            }
                        }
                    }
                }
            }
        }
    }
    // The filter K-R-S-C is the K x (C·R·S) matrix whose row k is output channel k's taps in
    // the same (r, s, c) order as A's columns.
    let mut y = vec![0.0; m * d.k];
    for i in 0..m {
        for k in 0..d.k {
            y[i * d.k + k] = (0..kk).map(|j| a[i * kk + j] * w[k * kk + j]).sum();
        }
    }
    y
}

/// Every input element scattered to the outputs it feeds: `x[n,h,w,c]` feeds output `(p, q)`
/// through tap `(r, s)` when `h + top − r·dh = p·sh` and `w + left − s·dw = q·sw` with `p < P`
/// and `q < Q`. Inverts the index map the other references follow.
pub fn conv_scatter(d: &ConvDims, x: &[f64], w: &[f64]) -> Vec<f64> {
    let (pp, qq) = (d.p(), d.q());
    let mut y = vec![0.0; d.m() * d.k];
    for n in 0..d.n {
        for h in 0..d.h {
            for ww in 0..d.w {
                for r in 0..d.r {
                    let Some(ph) = (h + d.pad.0).checked_sub(r * d.dil.0) else {
                        continue;
                    };
                    if ph % d.stride.0 != 0 || ph / d.stride.0 >= pp {
                        continue;
                    }
                    for s in 0..d.s {
                        let Some(qw) = (ww + d.pad.2).checked_sub(s * d.dil.1) else {
                            continue;
                        };
                        if qw % d.stride.1 != 0 || qw / d.stride.1 >= qq {
                            continue;
                        }
                        let row = (n * pp + ph / d.stride.0) * qq + qw / d.stride.1;
                        for c in 0..d.c {
                            let xv = x[d.x_index(n, h, ww, c)];
                            for k in 0..d.k {
                                y[row * d.k + k] += xv * w[d.w_index(k, r, s, c)];
                            }
                        }
                    }
                }
            }
        }
    }
    y
}
