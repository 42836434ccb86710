//! 2-D convolution as a GEMM whose A operand is an im2col *layout*.
//!
//! A [`ConvSpec`] is the problem: `y[n,k,p,q] = Σ_{c,r,s} x[n,c,h,w] · w[k,c,r,s]` with
//! `h = p·sh − pad_top + r·dh`, `w = q·sw − pad_left + s·dw` (cross-correlation, groups 1),
//! 16-bit inputs, fp32 accumulation and the GEMM's epilogue tree over the output seen as an
//! `(N·P·Q) x K` matrix. Its GEMM view is `M = N·P·Q`, `N = K`, `K = C·R·S`, with
//!
//! - A the im2col layout of x ([`ConvSpec::im2col`]): GEMM coordinate `(m, k)` with
//!   `m = (q,p,n)` and `k = (c,s,r)` maps to x's offset `offset + L(m, k)` where the tap is in
//!   bounds, and reads 0 in the padding;
//! - B the filter, stored K-R-S-C, seen as a `K x N` column-major matrix;
//! - D the output, stored N-P-Q-K, seen as an `M x N` row-major matrix.
//!
//! Every tensor is described as the frameworks describe it: logical sizes in (N, C, H, W)
//! order plus strides, i.e. a flat tessera layout, and must be channels-last in memory
//! ([`tensors`]). With the `cuda` feature, [`Conv2d`] runs the convolution on the library's
//! [`crate::Gemm`]: on x itself where the im2col layout is a flat matrix (1x1 convolutions of
//! stride 1), else after an im2col gather into a workspace.

pub(crate) mod im2col;
pub(crate) mod spec;
pub(crate) mod tensors;
pub(crate) mod window;

#[cfg(feature = "cuda")]
pub(crate) mod kernel;
#[cfg(feature = "cuda")]
mod launch;

pub use spec::ConvSpec;

#[cfg(feature = "cuda")]
pub use launch::Conv2d;
