//! The sweep: a public list of GEMM shapes users run, by class, for `tessera bench gemm
//! --sweep` (ours against cuBLAS, interleaved) and `tessera plan sweep` (each shape's plan and
//! why, without a GPU). The planner has no table keyed on these shapes: they measure rules
//! stated from first principles (`plan::policy`).
//!
//! Every shape is nn.Linear's product `y = x Wᵀ` (A row-major `M x K`, B stored `N x K`, D
//! row-major `M x N`), with the dimensions of a real model where one exists.
//!
//! ```
//! use tessera_kernels::sweep::{sweep_shapes, ShapeClass};
//! let shapes = sweep_shapes();
//! assert!(shapes.len() >= 40);
//! for class in ShapeClass::ALL {
//!     assert!(shapes.iter().any(|s| s.class == class), "{class}");
//! }
//! ```

use std::fmt;

use crate::plan::problem::DType;

/// Bytes per second the H100's HBM3 moves in a device-to-device copy (about 3.0 TB/s of the
/// 3.35 TB/s peak): the roofline the sweep reports a memory-bound row's GB/s against, and the
/// one the planner's memory-bound rules assume.
pub const COPY_ROOFLINE_BYTES_PER_S: f64 = crate::plan::policy::COPY_ROOFLINE_BYTES_PER_S;

/// The class of a sweep shape: the way it departs from the benchmark's standard shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShapeClass {
    /// M <= 256 (decode, small batches) with N and K in the thousands: bound by reading B.
    Decode,
    /// M, N or K not a multiple of any tile (primes, 1000, 3000, 4000), K and N multiples of 8.
    Ragged,
    /// K from 64 to 512: short tiles, the epilogue a large part of each.
    ShortK,
    /// K large against M N: few tiles, each long (weight gradients, split-K territory).
    LongK,
    /// Tall-skinny and short-wide (M or N much larger than the other).
    Skinny,
    /// K or N not a multiple of 8: rows of A, B or D not on TMA's 16-byte grid.
    Unaligned,
    /// 16384³ and the like: many waves.
    Huge,
    /// Strided batches of small products (attention-like).
    Batched,
    /// fp16 inputs and output (every other class is bf16).
    Fp16,
}

impl ShapeClass {
    /// Every class, in the order the sweep prints them.
    pub const ALL: [ShapeClass; 9] = [
        ShapeClass::Decode,
        ShapeClass::Ragged,
        ShapeClass::ShortK,
        ShapeClass::LongK,
        ShapeClass::Skinny,
        ShapeClass::Unaligned,
        ShapeClass::Huge,
        ShapeClass::Batched,
        ShapeClass::Fp16,
    ];

    /// The class's name as printed and in JSON.
    ///
    /// ```
    /// use tessera_kernels::sweep::ShapeClass;
    /// assert_eq!(ShapeClass::ShortK.name(), "short-k");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ShapeClass::Decode => "decode",
            ShapeClass::Ragged => "ragged",
            ShapeClass::ShortK => "short-k",
            ShapeClass::LongK => "long-k",
            ShapeClass::Skinny => "skinny",
            ShapeClass::Unaligned => "unaligned",
            ShapeClass::Huge => "huge",
            ShapeClass::Batched => "batched",
            ShapeClass::Fp16 => "fp16",
        }
    }
}

impl fmt::Display for ShapeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One shape of the sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepShape {
    /// Its class.
    pub class: ShapeClass,
    /// Where it comes from (a model's layer), or what it tests.
    pub source: &'static str,
    /// Rows of D (tokens).
    pub m: i64,
    /// Columns of D (output features).
    pub n: i64,
    /// The reduction (input features).
    pub k: i64,
    /// Independent products.
    pub batch: i64,
    /// The type of A, B and D.
    pub dtype: DType,
}

impl fmt::Display for SweepShape {
    /// `MxNxK`, `BATCH x MxNxK` when batched.
    ///
    /// ```
    /// use tessera_kernels::sweep::{sweep_shapes, ShapeClass};
    /// let batched = sweep_shapes().into_iter().find(|s| s.class == ShapeClass::Batched).unwrap();
    /// assert_eq!(batched.to_string(), "64 x 512x512x64");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.batch > 1 {
            write!(f, "{} x ", self.batch)?;
        }
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

const fn shape(
    class: ShapeClass,
    source: &'static str,
    (m, n, k): (i64, i64, i64),
    batch: i64,
    dtype: DType,
) -> SweepShape {
    SweepShape {
        class,
        source,
        m,
        n,
        k,
        batch,
        dtype,
    }
}

/// The sweep's shapes, by class (bf16 unless the class is fp16).
///
/// ```
/// use tessera_kernels::sweep::{sweep_shapes, ShapeClass};
/// let decode = sweep_shapes().into_iter().filter(|s| s.class == ShapeClass::Decode);
/// assert!(decode.clone().all(|s| s.m <= 256));
/// assert!(decode.count() >= 10);
/// ```
pub fn sweep_shapes() -> Vec<SweepShape> {
    use DType::{Bf16 as B, F16 as H};
    use ShapeClass::*;
    vec![
        shape(Decode, "Llama-2-7B q_proj, batch 1", (1, 4096, 4096), 1, B),
        shape(
            Decode,
            "Llama-2-7B o_proj, 16 sequences",
            (16, 4096, 4096),
            1,
            B,
        ),
        shape(
            Decode,
            "Llama-2-7B fused qkv, 16 sequences",
            (16, 12288, 4096),
            1,
            B,
        ),
        shape(
            Decode,
            "Llama-2-7B gate/up, 16 sequences",
            (16, 11008, 4096),
            1,
            B,
        ),
        shape(
            Decode,
            "Llama-2-7B down, 16 sequences",
            (16, 4096, 11008),
            1,
            B,
        ),
        shape(
            Decode,
            "Mistral-7B gate/up, 32 sequences",
            (32, 14336, 4096),
            1,
            B,
        ),
        shape(
            Decode,
            "Mistral-7B k/v proj (8 KV heads), 64 sequences",
            (64, 1024, 4096),
            1,
            B,
        ),
        shape(
            Decode,
            "Llama-2-7B o_proj, 128 sequences",
            (128, 4096, 4096),
            1,
            B,
        ),
        shape(
            Decode,
            "Mistral-7B down, 256 tokens",
            (256, 4096, 14336),
            1,
            B,
        ),
        shape(
            Decode,
            "Llama-2-70B o_proj, 32 sequences",
            (32, 8192, 8192),
            1,
            B,
        ),
        shape(
            Decode,
            "Llama-2-70B gate/up, 8 sequences",
            (8, 28672, 8192),
            1,
            B,
        ),
        shape(
            Decode,
            "GPT-2 LM head, 16 sequences (N odd)",
            (16, 50257, 768),
            1,
            B,
        ),
        shape(Ragged, "round sizes", (1000, 1000, 1000), 1, B),
        shape(
            Ragged,
            "round sizes, K off the k-tile",
            (4000, 4000, 4000),
            1,
            B,
        ),
        shape(Ragged, "round sizes, M != N", (3000, 5000, 2000), 1, B),
        shape(
            Ragged,
            "K tail only (62.5 k-tiles)",
            (4096, 4096, 4000),
            1,
            B,
        ),
        shape(Ragged, "M edge only", (4000, 4096, 4096), 1, B),
        shape(Ragged, "N edge only", (4096, 4000, 4096), 1, B),
        shape(Ragged, "M prime, N and K 8 x 513", (4093, 4104, 4104), 1, B),
        shape(ShortK, "K = 64 (rank-64 update)", (8192, 8192, 64), 1, B),
        shape(ShortK, "K = 128", (8192, 8192, 128), 1, B),
        shape(ShortK, "K = 256, short-wide", (4096, 16384, 256), 1, B),
        shape(ShortK, "K = 512", (8192, 8192, 512), 1, B),
        shape(
            ShortK,
            "ResNet-50 res2 1x1 conv 256->64, batch 32 at 56x56",
            (100352, 64, 256),
            1,
            B,
        ),
        shape(
            LongK,
            "K = 64 Ki against a 1024² D",
            (1024, 1024, 65536),
            1,
            B,
        ),
        shape(
            LongK,
            "K = 128 Ki against a 512² D",
            (512, 512, 131072),
            1,
            B,
        ),
        shape(
            LongK,
            "BERT-base weight gradient, 16384 tokens",
            (768, 768, 16384),
            1,
            B,
        ),
        shape(
            LongK,
            "GPT-2 MLP weight gradient, 8192 tokens",
            (768, 3072, 8192),
            1,
            B,
        ),
        shape(
            LongK,
            "Llama-2-7B weight gradient, 16384 tokens",
            (4096, 4096, 16384),
            1,
            B,
        ),
        shape(
            LongK,
            "K = 32 Ki against a 2048² D",
            (2048, 2048, 32768),
            1,
            B,
        ),
        shape(
            LongK,
            "ResNet-50 res5 3x3 conv 512, batch 32 at 7x7",
            (1568, 512, 4608),
            1,
            B,
        ),
        shape(Skinny, "tall-skinny", (32768, 1024, 1024), 1, B),
        shape(
            Skinny,
            "GPT-2 LM head, 1024 tokens (N odd)",
            (1024, 50257, 768),
            1,
            B,
        ),
        shape(
            Skinny,
            "Llama-2 LM head, 2048 tokens",
            (2048, 32000, 4096),
            1,
            B,
        ),
        shape(
            Skinny,
            "ResNet-50 res2 3x3 conv 64, batch 32 at 56x56",
            (100352, 64, 576),
            1,
            B,
        ),
        shape(
            Skinny,
            "projection to 256 features",
            (65536, 256, 1024),
            1,
            B,
        ),
        shape(Unaligned, "every extent odd", (4095, 4095, 4095), 1, B),
        shape(
            Unaligned,
            "K = 2500, a multiple of 4 only",
            (2048, 2048, 2500),
            1,
            B,
        ),
        shape(Unaligned, "every extent prime", (5003, 5003, 5003), 1, B),
        shape(
            Unaligned,
            "N odd only (D rows off the 16-byte grid)",
            (4096, 4095, 4096),
            1,
            B,
        ),
        shape(
            Unaligned,
            "ResNet-50 conv1 7x7x3, batch 32 at 112x112",
            (401408, 64, 147),
            1,
            B,
        ),
        shape(Huge, "16384³", (16384, 16384, 16384), 1, B),
        shape(
            Huge,
            "Llama-2-70B gate/up, 8192 tokens",
            (8192, 28672, 8192),
            1,
            B,
        ),
        shape(Batched, "attention-like", (512, 512, 64), 64, B),
        shape(
            Batched,
            "BERT-base scores, batch 8 x 12 heads, 512 tokens",
            (512, 512, 64),
            96,
            B,
        ),
        shape(Batched, "BERT-base scores x V", (512, 64, 512), 96, B),
        shape(
            Batched,
            "Llama-2-7B scores, 32 heads, 2048 tokens",
            (2048, 2048, 128),
            32,
            B,
        ),
        shape(Batched, "Llama-2-7B scores x V", (2048, 128, 2048), 32, B),
        shape(Fp16, "4096³ in fp16", (4096, 4096, 4096), 1, H),
        shape(
            Fp16,
            "Llama-2-7B o_proj decode in fp16",
            (16, 4096, 4096),
            1,
            H,
        ),
        shape(Fp16, "4000³ in fp16", (4000, 4000, 4000), 1, H),
        shape(Fp16, "Llama-2-7B scores in fp16", (2048, 2048, 128), 32, H),
        shape(
            Fp16,
            "ResNet-50 res2 3x3 conv in fp16",
            (100352, 64, 576),
            1,
            H,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, GemmSpec, Major};

    /// Shapes of no list: 1000 drawn (M, N, K log-uniform in 1-20000, batches, both 16-bit
    /// types, both majors of B and D, plain, flag-driven and tree epilogues, a tenth with every
    /// extent odd), each planned for sm_90a: a valid GEMM never ends in an error; with K-major
    /// operands it takes the Hopper path (whatever the rows' alignment), and the kernel source
    /// of every plan is generated (a sample's sources are compiled by the NVRTC tests).
    #[test]
    fn drawn_shapes_plan_and_generate_their_kernels() {
        let mut rng = crate::rng::Rng::new(0x7e55_e7a5);
        let mut log_uniform = |lo: f64, hi: f64| -> i64 {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            (lo.ln() + (hi.ln() - lo.ln()) * u).exp().floor() as i64
        };
        let epilogues = [
            "acc",
            "relu_bias",
            "gelu_aux_bias",
            "dgelu_bgrad",
            "relu(acc + bias_col + residual)",
        ];
        let mut hopper = 0;
        for i in 0..1000 {
            let (mut m, mut n, mut k) = (
                log_uniform(1.0, 20000.0),
                log_uniform(1.0, 20000.0),
                log_uniform(1.0, 20000.0),
            );
            if i % 10 == 0 {
                (m, n, k) = (m | 1, n | 1, k | 1);
            }
            let batch = [1, 1, 1, 2, 7][i % 5];
            let b_col = i % 3 != 0;
            let spec = GemmSpec::new(m, n, k)
                .batch(batch)
                .dtype(if i % 4 == 0 { DType::F16 } else { DType::Bf16 })
                .b(if b_col { Major::Col } else { Major::Row })
                .d(if i % 7 == 0 { Major::Col } else { Major::Row })
                .epilogue(epilogues[i % epilogues.len()])
                .expect("epilogue");
            let plan = spec
                .plan(Arch::Sm90a, crate::H100_SMS)
                .unwrap_or_else(|e| panic!("{spec}: {e}"));
            // (A column-major D is the transposed product: B row-major then reads K-major.)
            if b_col && i % 7 != 0 {
                assert_eq!(plan.path(), "sm90", "{spec}: {}", plan.summary());
                hopper += 1;
            }
            let sources = plan.sources().unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(!sources.is_empty(), "{spec}");
        }
        assert!(hopper > 500, "{hopper}");
    }

    /// Every shape plans on sm_90a (a valid GEMM never ends in an error) and takes the Hopper
    /// path; the shapes whose rows TMA cannot address stage A and B first, and those whose
    /// rows are off the 32-byte sector grid load them by cp.async where K is short (staging an
    /// operand given off the 16-byte grid) or stage them where the copy pays.
    #[test]
    fn every_sweep_shape_plans() {
        for s in sweep_shapes() {
            let spec = GemmSpec::new(s.m, s.n, s.k)
                .b(Major::Col)
                .batch(s.batch)
                .dtype(s.dtype);
            let plan = spec
                .plan(Arch::Sm90a, crate::H100_SMS)
                .unwrap_or_else(|e| panic!("{s}: {e}"));
            let row = s.k * s.dtype.bytes();
            let mut p = crate::plan::GemmProblem::new(s.m, s.n, s.k);
            p.batch = s.batch;
            p.input = s.dtype;
            // (Rows off the sector grid: loaded by cp.async where K is short, which keeps the
            // staging for operands off the 16-byte grid; else staged where the copy pays.)
            let aligned = row % 16 == 0
                && (row % 32 == 0
                    || !(crate::plan::policy::cp_async_off_sector_rows(&p).value
                        || crate::plan::policy::stage_off_sector_rows(&p, {
                            let (bm, bn, _) = plan.cta_tile();
                            (bm, bn)
                        })
                        .value
                        .is_some()));
            assert_eq!(plan.path(), "sm90", "{s}");
            assert_eq!(plan.staged_k().is_none(), aligned, "{s}");
        }
    }

    #[test]
    fn the_classes_hold_what_they_say() {
        for s in sweep_shapes() {
            let ok = match s.class {
                ShapeClass::Decode => s.m <= 256 && s.n >= 1000 && s.k >= 700,
                ShapeClass::Ragged => {
                    (s.m % 128 != 0 || s.n % 128 != 0 || s.k % 64 != 0)
                        && s.n % 8 == 0
                        && s.k % 8 == 0
                }
                ShapeClass::ShortK => (64..=512).contains(&s.k),
                ShapeClass::LongK => s.k >= 4 * s.m.min(s.n),
                ShapeClass::Skinny => s.m >= 8 * s.n || s.n >= 8 * s.m,
                ShapeClass::Unaligned => s.k % 8 != 0 || s.n % 8 != 0,
                ShapeClass::Huge => s.m * s.n * s.k >= 1 << 40,
                ShapeClass::Batched => s.batch > 1,
                ShapeClass::Fp16 => s.dtype == DType::F16,
            };
            assert!(ok, "{s} is not {}", s.class);
            assert_eq!(s.dtype == DType::F16, s.class == ShapeClass::Fp16, "{s}");
        }
    }
}
