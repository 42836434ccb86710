// The im2col gather of a convolution's A operand: A (M x K, row-major, rows lda elements
// apart) from channels-last x,
//
//   A(m, k) = x[offset + L(m, k)]  where the tap lies inside x, else 0,
//   L = ((Q,P,N),(C,S,R)) : ((sq, sp, sn),(1, ss, sr)),
//
// the layout `tessera plan conv` prints, passed in as its shape, strides and offset; the
// predicate is the row p*sh - pt + r*dh in [0, H) and the column q*sw - pl + s*dw in [0, W).
// m = (q,p,n) and k = (c,s,r) are split colexicographically, as the layout splits them.
//
// The kernels copy bits: bf16 and fp16 alike, and 0 is all-zero bits in both. Where C is a
// multiple of 8 (of 4), each thread copies 8 (4) consecutive channels of one tap (x and A
// aligned to the vector, so a chunk never straddles two taps and every access is one aligned
// vector); otherwise tessera_conv_im2col_rows8 below. Indices are 64-bit: x and A may hold more than
// 2^31 elements. Grid-stride loops, any grid.

struct tessera_conv_im2col_args {
  // The layout's shape and strides (C's stride is 1) and its offset.
  long long q, p, n, c, s, r;
  long long sq, sp, sn, ss, sr;
  long long offset;
  // The predicate's geometry.
  long long h, w, sh, sw, pt, pl, dh, dw;
  // Elements between rows of A (K, or K padded onto TMA's 16-byte grid).
  long long lda;
};
// The host's mirror (GatherArgs in kernel.rs) asserts the same size.
static_assert(sizeof(tessera_conv_im2col_args) == 168, "the host passes 21 64-bit integers");

struct alignas(8) tessera_u16x4 { unsigned short v[4]; };
struct alignas(16) tessera_u16x8 { unsigned short v[8]; };

template <typename T, int VEC>
__device__ __forceinline__ void tessera_conv_im2col_run(const unsigned short* __restrict__ x,
                                                        unsigned short* __restrict__ a,
                                                        const tessera_conv_im2col_args& g) {
  const long long row_chunks = g.c * g.s * g.r / VEC;  // chunks per row of A
  const long long tap_chunks = g.c / VEC;               // chunks per tap (r, s)
  const long long total = g.q * g.p * g.n * row_chunks;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const long long m = i / row_chunks;
    const long long kc = i - m * row_chunks;
    const long long tap = kc / tap_chunks;
    const long long c = (kc - tap * tap_chunks) * VEC;
    const long long s = tap % g.s, r = tap / g.s;
    const long long q = m % g.q, pn = m / g.q;
    const long long p = pn % g.p, n = pn / g.p;
    const long long row = p * g.sh - g.pt + r * g.dh;
    const long long col = q * g.sw - g.pl + s * g.dw;
    T v{};
    if (row >= 0 && row < g.h && col >= 0 && col < g.w) {
      const long long off = g.offset + q * g.sq + p * g.sp + n * g.sn + c + s * g.ss + r * g.sr;
      v = *reinterpret_cast<const T*>(x + off);
    }
    // lda is a multiple of VEC (K is, and a padded row is a multiple of 64), so the chunk
    // stays one aligned vector.
    *reinterpret_cast<T*>(a + m * g.lda + kc * VEC) = v;
  }
}

extern "C" __global__ void __launch_bounds__(256)
    tessera_conv_im2col_taps4(const unsigned short* x, unsigned short* a, tessera_conv_im2col_args g) {
  tessera_conv_im2col_run<tessera_u16x4, 4>(x, a, g);
}

extern "C" __global__ void __launch_bounds__(256)
    tessera_conv_im2col_taps8(const unsigned short* x, unsigned short* a, tessera_conv_im2col_args g) {
  tessera_conv_im2col_run<tessera_u16x8, 8>(x, a, g);
}

// Where C is not a multiple of 4 (the stem's 3, odd channel counts), a tap's chunk would be
// narrower than an 8-byte store: there each thread writes 8 consecutive elements of one row
// of A as one aligned 16-byte store (lda is a multiple of 8 and A 16-byte aligned), gathering
// them one by one across taps, with each element's predicate. The chunk past K is written
// with zeros; it lies inside the row (lda >= K rounded up to 8) and is never read.
extern "C" __global__ void __launch_bounds__(256)
    tessera_conv_im2col_rows8(const unsigned short* __restrict__ x, unsigned short* __restrict__ a,
                              tessera_conv_im2col_args g) {
  const long long k_total = g.c * g.s * g.r;
  const long long row_chunks = (k_total + 7) / 8;
  const long long total = g.q * g.p * g.n * row_chunks;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const long long m = i / row_chunks;
    const long long k0 = (i - m * row_chunks) * 8;
    const long long q = m % g.q, pn = m / g.q;
    const long long p = pn % g.p, n = pn / g.p;
    const long long base = g.offset + q * g.sq + p * g.sp + n * g.sn;
    const long long row0 = p * g.sh - g.pt, col0 = q * g.sw - g.pl;
    // k = (c, s, r) colexicographically, stepped element by element from k0.
    long long c = k0 % g.c, sr = k0 / g.c;
    long long s = sr % g.s, r = sr / g.s;
    tessera_u16x8 v;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const long long row = row0 + r * g.dh, col = col0 + s * g.dw;
      const bool inside = k0 + j < k_total && row >= 0 && row < g.h && col >= 0 && col < g.w;
      v.v[j] = inside ? x[base + c + s * g.ss + r * g.sr] : (unsigned short)0;
      if (++c == g.c) {
        c = 0;
        if (++s == g.s) {
          s = 0;
          ++r;
        }
      }
    }
    *reinterpret_cast<tessera_u16x8*>(a + m * g.lda + k0) = v;
  }
}
