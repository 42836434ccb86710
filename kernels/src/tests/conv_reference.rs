//! The float64 convolution reference of the GPU checks (`kernels/tests/common/conv_ref.rs`)
//! against two independent formulations (an explicit im2col matrix times the filter, and a
//! scatter that inverts the index map), and the planner's im2col layout against the same:
//! on small cases whose values are small dyadic numbers, so every sum is exact and the
//! comparisons are equalities.

// The same file is the `bench` module's `conv_ref` when that feature is on; included here so
// that the reference is checked whatever the features.
#[path = "../../tests/common/conv_ref.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod conv_ref;

use conv_ref::{conv_direct, conv_im2col_gemm, conv_scatter, ConvDims};

use crate::ConvSpec;

#[allow(clippy::too_many_arguments)]
fn dims(
    [n, c, h, w]: [usize; 4],
    [k, r, s]: [usize; 3],
    stride: (usize, usize),
    pad: (usize, usize, usize, usize),
    dil: (usize, usize),
) -> ConvDims {
    ConvDims {
        n,
        c,
        h,
        w,
        k,
        r,
        s,
        stride,
        pad,
        dil,
    }
}

/// Small problems over the lists: R != S, stride (2,3), dilation, asymmetric padding,
/// padding wider than half the filter, P or Q = 1, 1x1 filters, one channel.
fn cases() -> Vec<ConvDims> {
    vec![
        dims([1, 1, 3, 3], [1, 2, 2], (1, 1), (0, 0, 0, 0), (1, 1)),
        dims([2, 3, 5, 7], [4, 3, 3], (1, 1), (1, 1, 1, 1), (1, 1)),
        dims([1, 2, 7, 5], [3, 2, 5], (2, 3), (1, 2, 1, 2), (1, 1)),
        dims([3, 2, 7, 7], [2, 3, 2], (1, 2), (2, 2, 2, 2), (2, 3)),
        dims([1, 3, 5, 5], [2, 5, 5], (1, 1), (0, 0, 0, 0), (1, 1)),
        dims([2, 4, 6, 1], [3, 3, 1], (2, 1), (1, 0, 0, 0), (1, 1)),
        dims([2, 8, 4, 4], [5, 1, 1], (1, 1), (0, 0, 0, 0), (1, 1)),
        dims([1, 8, 5, 6], [5, 1, 1], (2, 3), (0, 0, 0, 0), (1, 1)),
        dims([1, 1, 13, 2], [1, 7, 1], (3, 1), (3, 3, 0, 1), (1, 1)),
        dims([2, 3, 2, 2], [2, 3, 3], (1, 1), (2, 1, 1, 2), (2, 1)),
    ]
}

/// Values `j/4` for `j` in `[-4, 4]`: products and their sums are exact in float64.
fn dyadic(len: usize, seed: u64) -> Vec<f64> {
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            z ^= z >> 12;
            z ^= z << 25;
            z ^= z >> 27;
            ((z.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % 9) as f64 / 4.0 - 1.0
        })
        .collect()
}

fn inputs(d: &ConvDims, seed: u64) -> (Vec<f64>, Vec<f64>) {
    (
        dyadic(d.n * d.h * d.w * d.c, seed),
        dyadic(d.k * d.r * d.s * d.c, seed + 1),
    )
}

#[test]
fn a_worked_example() {
    // x = 1..9 in a 3x3 image, filter [[1, 0], [0, -1]]: y[p,q] = x[p,q] - x[p+1,q+1] = -4.
    let d = dims([1, 1, 3, 3], [1, 2, 2], (1, 1), (0, 0, 0, 0), (1, 1));
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let w = [1.0, 0.0, 0.0, -1.0];
    let (acc, mag) = conv_direct(&d, &|i| x[i], &|i| w[i], 0..d.m());
    assert_eq!(acc, vec![-4.0; 4]);
    assert_eq!(mag, vec![6.0, 8.0, 12.0, 14.0]);
    // Padded by one on every side: y[0,0] reads only x[0,0] (through the -1) and the
    // padding; y[3,3] only x[2,2] (through the 1).
    let d = dims([1, 1, 3, 3], [1, 2, 2], (1, 1), (1, 1, 1, 1), (1, 1));
    let (acc, _) = conv_direct(&d, &|i| x[i], &|i| w[i], 0..d.m());
    assert_eq!((d.p(), d.q()), (4, 4));
    assert_eq!(acc[0], -1.0);
    assert_eq!(acc[15], 9.0);
    assert_eq!(acc[5], -4.0);
}

#[test]
fn the_direct_loop_agrees_with_im2col_times_the_filter_and_with_the_scatter() {
    for (i, d) in cases().iter().enumerate() {
        let (x, w) = inputs(d, i as u64);
        let (direct, _) = conv_direct(d, &|j| x[j], &|j| w[j], 0..d.m());
        assert_eq!(direct, conv_im2col_gemm(d, &x, &w), "{d:?}");
        assert_eq!(direct, conv_scatter(d, &x, &w), "{d:?}");
        // A block of rows is the same rows of the whole.
        let rows = d.m() / 3..d.m();
        let (part, _) = conv_direct(d, &|j| x[j], &|j| w[j], rows.clone());
        assert_eq!(part[..], direct[rows.start * d.k..]);
    }
}

fn spec_of(d: &ConvDims) -> ConvSpec {
    let i = |v: usize| v as i64;
    ConvSpec::new(
        [i(d.n), i(d.c), i(d.h), i(d.w)],
        [i(d.k), i(d.c), i(d.r), i(d.s)],
    )
    .stride(i(d.stride.0), i(d.stride.1))
    .padding(i(d.pad.0), i(d.pad.1), i(d.pad.2), i(d.pad.3))
    .dilation(i(d.dil.0), i(d.dil.1))
}

#[test]
fn the_im2col_layout_times_the_filter_is_the_convolution() {
    for (i, d) in cases().iter().enumerate() {
        let spec = spec_of(d);
        assert_eq!(
            spec.output_dims().unwrap(),
            [d.n, d.k, d.p(), d.q()].map(|v| v as i64)
        );
        let (x, w) = inputs(d, 100 + i as u64);
        let (m, kk) = (d.m(), d.kk());
        // A read through the planner's layout and predicate; B is the K-R-S-C filter seen
        // column-major, B(j, k) = w[k·K + j].
        let mut y = vec![0.0; m * d.k];
        for mi in 0..m {
            for j in 0..kk {
                let Some(off) = spec.tap(mi as i64, j as i64).unwrap() else {
                    continue;
                };
                for k in 0..d.k {
                    y[mi * d.k + k] += x[off as usize] * w[k * kk + j];
                }
            }
        }
        let (direct, _) = conv_direct(d, &|j| x[j], &|j| w[j], 0..m);
        assert_eq!(y, direct, "{spec}");
    }
}
