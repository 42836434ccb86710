// tessera: the fixed part of a tree-generated epilogue. Needs common.cuh (tessera_load,
// tessera_store, tessera_store2, tessera_b16_to_f32) in front of it; the generated part
// (tessera_ep_element, tessera_ep_pair, the CTA reduction hooks) follows it.
//
// Coordinates: a launch covers rows [row0, row0 + rows) and columns [col0, col0 + cols) of the
// full M x N output (one launch: row0 = col0 = 0, rows = m, cols = n). The kernel passes
// launch-relative (lrow, lcol); every tensor is indexed with the full-output coordinates
// (row0 + lrow, col0 + lcol) from its base pointer, so a region launch offsets only A and B.

struct TesseraEpArgs {
  int row0, col0, rows, cols;  // this launch's region of the output
  int m, n;                    // the full output
  float alpha, beta;
  void* d;                 long long ldd, batch_d;             int dt_d;
  const void* c;           long long ldc, batch_c;             int dt_c;
  const void* residual;    long long ldr, batch_r;             int dt_r;
  const void* aux_in;      long long ld_aux_in, batch_aux_in;  int dt_aux_in;  // bits: in bits
  void* aux;               long long ldaux, batch_aux;  // type fixed by the tree; bits: in bits
  const void* bias_row;    long long batch_bias_row;           int dt_bias_row;
  const void* bias_col;    long long batch_bias_col;           int dt_bias_col;
  float* bgrad_row;        long long batch_bgrad_row;  // fp32, length m per batch, zeroed by the host
  float* bgrad_col;        long long batch_bgrad_col;  // fp32, length n per batch, zeroed by the host
  int d_pair;  // 1: D may be stored two elements at a time (ldd, batch_d, col0 even; base aligned)
};

// The tensors' types and whether C is read: fields of the arguments, unless the including
// source fixed them at compile time for one binding (the Hopper tree kernel), which folds the
// type switches of every load and store away.
#ifndef TESSERA_EP_DT_D
#define TESSERA_EP_DT_D a.dt_d
#define TESSERA_EP_DT_C a.dt_c
#define TESSERA_EP_DT_R a.dt_r
#define TESSERA_EP_DT_AUX_IN a.dt_aux_in
#define TESSERA_EP_DT_BIAS_ROW a.dt_bias_row
#define TESSERA_EP_DT_BIAS_COL a.dt_bias_col
#define TESSERA_EP_READ_C (a.beta != 0.0f)
#endif

// Per-CTA partial sums of the reductions, in shared memory (null: add straight to global).
// With TESSERA_EP_REG_SUMS defined (the Hopper kernel) the sums go to registers instead: the
// kernel zeroes reg_row before each row's elements and reg_col[0..2) before each column pair,
// and reduces them across the threads that share the row or column itself.
struct TesseraEpCta {
  float* row_sum;  // [tile_rows]
  float* col_sum;  // [tile_cols]
  int tile_row0, tile_col0, tile_rows, tile_cols;  // launch-relative tile origin and extent
  float reg_row;   // TESSERA_EP_REG_SUMS: this thread's part of the current row's sum
  float reg_col0, reg_col1;  // TESSERA_EP_REG_SUMS: of its even and odd column
  // TESSERA_EP_REG_SUMS with word_bits: the aux bits of the current column pair (bit 0 the
  // even column, bit 1 the odd one), which the kernel gathers a word at a time.
  bool word_bits;
  unsigned bits;
  // TESSERA_EP_REG_SUMS with aux_capture: the full aux value of the current element, which
  // the kernel stores itself (tessera_ep_store_aux notes it instead of storing).
  bool aux_capture;
  float aux_val;
  // Inputs the kernel staged (the Hopper fragment path reads C, the residual and aux_in from
  // shared memory): when set, the element's value, in place of a load.
  bool staged_c, staged_r, staged_x;
  float in_c, in_r, in_x;
  // The aux_in mask word holding the element's bit, preloaded (the Hopper fragment path loads
  // each row's word of a block once).
  bool staged_xb;
  unsigned in_xw;
  // Bias vectors the kernel staged (the Hopper fragment path reads a tile's bias_row and
  // bias_col values from shared memory): when set, the element's value, in place of a load.
  bool staged_br, staged_bc;
  float in_br, in_bc;
};

__device__ __forceinline__ long long tessera_ep_at(long long batch_stride, long long ld, int b,
                                                   int row, int col) {
  return b * batch_stride + row * ld + col;
}

// Loads of the epilogue's inputs (C, the residual, aux_in, bias vectors, an input bit mask):
// non-coherent. No load can see a store of the same launch: an element of C, the residual or
// aux_in is read only by the thread that computes that element, before it stores it (also
// when an input aliases D or aux), and bias vectors and input masks are not written.
//
// An asm without side effects may be executed ahead of the branch that guards it; then the
// load of an element past the last row or column, or the 4-byte load of a 16-bit input's
// element i (byte 4i), reads past the end of the input. So the loads are volatile asm, except
// in the Hopper GEMM (TESSERA_EP_MOVABLE_LOADS): there the 16-bit and mask-word loads stay
// movable, since pinned they pushed three of its stream-K tree kernels into spilling; it
// evaluates no element outside its tiles' rows, and the second element of a pair loads at a
// column clamped into the launch (tessera_ep_pair). The 4-byte load is volatile everywhere.
#ifdef TESSERA_EP_MOVABLE_LOADS
#define TESSERA_EP_LD_ASM asm
#else
#define TESSERA_EP_LD_ASM asm volatile
#endif
__device__ __forceinline__ float tessera_ep_ld(const void* p, long long i, int dtype) {
  if (dtype == 2) {
    float v;
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(static_cast<const float*>(p) + i));
    return v;
  }
  tessera_b16 h;
  TESSERA_EP_LD_ASM("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(static_cast<const tessera_b16*>(p) + i));
  return tessera_b16_to_f32(h, dtype);
}

// An element of C, the residual or aux_in: the value the kernel staged, or a load.
__device__ __forceinline__ float tessera_ep_in(bool staged, float v, const void* p, long long i,
                                               int dtype) {
  return staged ? v : tessera_ep_ld(p, i, dtype);
}

__device__ __forceinline__ float tessera_ep_load_bit(const void* p, long long bit) {
  unsigned w;
  TESSERA_EP_LD_ASM("ld.global.nc.u32 %0, [%1];" : "=r"(w) : "l"(static_cast<const unsigned*>(p) + (bit >> 5)));
  return ((w >> (bit & 31)) & 1u) ? 1.0f : 0.0f;
}

// An aux_in mask bit: from the word the kernel preloaded (the one holding bit `bit`, whose
// first bit is launch-relative column lcol & ~31: the kernel preloads only so aligned words),
// or a load.
__device__ __forceinline__ float tessera_ep_in_bit(bool staged, unsigned w, int lcol,
                                                   const void* p, long long bit) {
  // The staged word holds the element's bits of launch-relative columns lcol & ~31 on.
  if (staged) return ((w >> (lcol & 31)) & 1u) ? 1.0f : 0.0f;
  return tessera_ep_load_bit(p, bit);
}

// Each bit is owned by one thread: clear it, then set it. Other threads' bits in the word are
// untouched by both atomics, so concurrent writers of one word compose. With word_bits (the
// Hopper kernel, word-aligned rows) the bit is only noted for the kernel's word stores.
__device__ __forceinline__ void tessera_ep_store_bit(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                     int lcol, long long bit, bool v) {
#ifdef TESSERA_EP_REG_SUMS
  if (cta.word_bits) {
    const unsigned m = 1u << (lcol & 1);
    cta.bits = v ? (cta.bits | m) : (cta.bits & ~m);
    return;
  }
#else
  (void)cta; (void)lcol;
#endif
  unsigned* w = static_cast<unsigned*>(a.aux) + (bit >> 5);
  const unsigned m = 1u << (bit & 31);
  if (v) {
    atomicOr(w, m);
  } else {
    atomicAnd(w, ~m);
  }
}

// The full aux output of one element: stored, or with aux_capture (the Hopper kernel's
// fragment path, which stores aux through shared memory and TMA) only noted.
__device__ __forceinline__ void tessera_ep_store_aux(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                     long long i, float v, int dtype) {
#ifdef TESSERA_EP_REG_SUMS
  if (cta.aux_capture) {
    cta.aux_val = v;
    return;
  }
#else
  (void)cta;
#endif
  tessera_store(a.aux, i, v, dtype);
}

// The activations use the special-function unit's 2^x and 1/x (tessera_ex2, tessera_rcp: a
// few fp32 ulps, subnormals flushed): absolute errors near 1e-7, far below the 16-bit
// outputs' rounding and within the fp32 tests' bounds.
__device__ __forceinline__ float tessera_ep_sigmoid(float x) {
  return tessera_rcp(1.0f + tessera_ex2(-1.4426950408889634f * x));
}
// tanh(|x|) = 1 - 2 / (e^(2|x|) + 1), odd; e^(2|x|) = inf gives 1.
__device__ __forceinline__ float tessera_ep_tanh(float x) {
  const float t = 1.0f - 2.0f * tessera_rcp(tessera_ex2(2.8853900817779268f * fabsf(x)) + 1.0f);
  return copysignf(t, x);
}
__device__ __forceinline__ float tessera_ep_gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
// 0.5 x (1 + tanh(u)) = x sigmoid(2u): the same function without the cancellation for x < 0.
__device__ __forceinline__ float tessera_ep_gelu_tanh(float x) { return tessera_gelu_tanh_fast(x); }
__device__ __forceinline__ float tessera_ep_dgelu(float x) {
  // Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi).
  return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * __expf(-0.5f * x * x);
}
// The derivative of 0.5 x (1 + tanh u), u = s (x + c x^3), is 0.5 (1 + tanh u) +
// 0.5 x (1 - tanh^2 u) s (1 + 3 c x^2). With p = sigmoid(2u) = (1 + tanh u) / 2, 1 - tanh^2 u =
// 4 p (1 - p), so it is p (1 + (1 - p) x (2 s + 6 s c x^2)): e^(-2u) as in
// tessera_gelu_tanh_fast, then six FP32 operations. Beyond |x| = 10 the value is 1 or 0 to
// fp32 precision; clamping there keeps x^3 finite.
__device__ __forceinline__ float tessera_ep_dgelu_tanh(float x) {
  constexpr float s = 0.79788456080286536f, c = 0.044715f;
  constexpr float k1 = -2.0f * s * 1.4426950408889634f, k3 = k1 * c;
  const float xc = fminf(fmaxf(x, -10.0f), 10.0f);
  const float x2 = xc * xc;
  const float p = tessera_rcp(1.0f + tessera_ex2(xc * fmaf(k3, x2, k1)));
  const float g = xc * fmaf(6.0f * s * c, x2, 2.0f * s);
  return p * fmaf(1.0f - p, g, 1.0f);
}
__device__ __forceinline__ float tessera_ep_dsigmoid(float x) {
  const float s = tessera_ep_sigmoid(x);
  return s * (1.0f - s);
}
__device__ __forceinline__ float tessera_ep_dtanh(float x) {
  const float t = tessera_ep_tanh(x);
  return 1.0f - t * t;
}
__device__ __forceinline__ float tessera_ep_dsilu(float x) {
  const float s = tessera_ep_sigmoid(x);
  return s + x * s * (1.0f - s);
}
// Round to a 16-bit type and back (an explicit conversion in the tree).
__device__ __forceinline__ float tessera_ep_round(float x, int dtype) {
  return tessera_b16_to_f32(tessera_f32_to_b16(x, dtype), dtype);
}

// A reduction's contribution of one element: into the CTA's shared partial sums when the
// kernel staged them (tessera_ep_cta_begin), into registers (TESSERA_EP_REG_SUMS), else
// straight into the fp32 workspace.
__device__ __forceinline__ void tessera_ep_add_row(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                   int b, int lrow, float v) {
#ifdef TESSERA_EP_REG_SUMS
  (void)a; (void)b; (void)lrow;
  cta.reg_row += v;
#else
  if (cta.row_sum) {
    atomicAdd(&cta.row_sum[lrow - cta.tile_row0], v);
  } else {
    atomicAdd(&a.bgrad_row[b * a.batch_bgrad_row + a.row0 + lrow], v);
  }
#endif
}
__device__ __forceinline__ void tessera_ep_add_col(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                   int b, int lcol, float v) {
#ifdef TESSERA_EP_REG_SUMS
  (void)a; (void)b;
  if (lcol & 1) {
    cta.reg_col1 += v;
  } else {
    cta.reg_col0 += v;
  }
#else
  if (cta.col_sum) {
    atomicAdd(&cta.col_sum[lcol - cta.tile_col0], v);
  } else {
    atomicAdd(&a.bgrad_col[b * a.batch_bgrad_col + a.col0 + lcol], v);
  }
#endif
}
