// The issue rate of the sm80-class tensor-core instruction on this device: every warp runs
// kChains independent chains of `mma.sync.m16n8k16` (bf16 in, fp32 accumulate) on operands held
// in registers, so nothing but the MMA pipe limits it. It is the ceiling of any GEMM built on
// mma.sync (the sm80-class path), measured beside cuBLAS by `tessera bench mma`.
#ifndef TESSERA_MMA_CHAINS
#define TESSERA_MMA_CHAINS 8
#endif

extern "C" __global__ void __launch_bounds__(256) tessera_mma_peak(float* out, int iters) {
  constexpr int kChains = TESSERA_MMA_CHAINS;
  // bf16 pairs near 2^-7 and 2^-8: finite for the lengths timed (values do not affect the rate).
  const unsigned t = threadIdx.x & 7u;
  const unsigned a0 = 0x3c003c00u + t, a1 = 0x3b803b80u + t, a2 = a0 ^ 0x00010000u,
                 a3 = a1 ^ 0x00010000u;
  const unsigned b0 = 0x3c003b80u + t, b1 = 0x3b803c00u + t;
  float acc[kChains][4];
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
    acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
  }
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
    s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
