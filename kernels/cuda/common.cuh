// tessera: device helpers for the sm80-class GEMM: shared-memory addresses, cp.async,
// ldmatrix, mma.sync m16n8k16, and 16-bit float conversions.
//
// The source is self-contained (no #include): 16-bit floats are carried as raw bits
// (tessera_b16) and converted with PTX `cvt`, so NVRTC needs no CUDA headers for it.

typedef unsigned short tessera_b16;

// The shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned tessera_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// 16-byte asynchronous global -> shared copy, issued only where `on` (an instruction
// predicate, not a branch); when `in_bounds` is false nothing is read and the 16 destination
// bytes are zero-filled (src-size 0).
__device__ __forceinline__ void tessera_cp_async16(unsigned dst, const void* src, bool in_bounds,
                                                   bool on) {
  int n = in_bounds ? 16 : 0;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16, %2;\n}\n" ::"r"(dst),
      "l"(src), "r"(n), "r"(static_cast<int>(on)));
}

__device__ __forceinline__ void tessera_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void tessera_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j.
__device__ __forceinline__ void tessera_ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// As tessera_ldsm_x4, each matrix transposed on the way (for MN-major operands).
__device__ __forceinline__ void tessera_ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A * B + D, m16n8k16, A row-major fragment, B column-major fragment, fp32 accumulate.
template <int ELEM>
__device__ __forceinline__ void tessera_mma_16816(float (&d)[4], const unsigned (&a)[4],
                                                  unsigned b0, unsigned b1) {
  if (ELEM == 0) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Element types of the epilogue tensors (C, D, bias, aux): 0 = bf16, 1 = fp16, 2 = fp32.
__device__ __forceinline__ float tessera_b16_to_f32(tessera_b16 h, int dtype) {
  if (dtype == 0) return __uint_as_float(((unsigned)h) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ tessera_b16 tessera_f32_to_b16(float f, int dtype) {
  tessera_b16 h;
  if (dtype == 0) {
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  } else {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  }
  return h;
}

// Packs (lo, hi) into two 16-bit floats, lo in the low half.
__device__ __forceinline__ unsigned tessera_pack2(float lo, float hi, int dtype) {
  unsigned r;
  if (dtype == 0) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// An element's bits as stored (a 16-bit value zero-extended, or an fp32's bits), loaded
// through the non-coherent path, for a value wanted much later: nothing reads the register
// until tessera_raw_to_f32, so the load's latency passes while the warp goes on (converted on
// arrival, the warp waited for it there). The asm is volatile so that the load stays where it
// is written.
__device__ __forceinline__ unsigned tessera_load_raw(const void* p, long long i, int dtype) {
  unsigned v;
  if (dtype == 2) {
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(static_cast<const unsigned*>(p) + i));
  } else {
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=r"(v) : "l"(static_cast<const tessera_b16*>(p) + i));
  }
  return v;
}

__device__ __forceinline__ float tessera_raw_to_f32(unsigned v, int dtype) {
  return dtype == 2 ? __uint_as_float(v) : tessera_b16_to_f32((tessera_b16)v, dtype);
}

__device__ __forceinline__ float tessera_load(const void* p, long long i, int dtype) {
  if (dtype == 2) return static_cast<const float*>(p)[i];
  return tessera_b16_to_f32(static_cast<const tessera_b16*>(p)[i], dtype);
}

__device__ __forceinline__ void tessera_store(void* p, long long i, float v, int dtype) {
  if (dtype == 2) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<tessera_b16*>(p)[i] = tessera_f32_to_b16(v, dtype);
  }
}

// Stores elements i and i+1; the caller guarantees both exist and i is even.
__device__ __forceinline__ void tessera_store2(void* p, long long i, float v0, float v1, int dtype) {
  if (dtype == 2) {
    struct alignas(8) F2 { float x, y; };
    *reinterpret_cast<F2*>(static_cast<float*>(p) + i) = F2{v0, v1};
  } else {
    *reinterpret_cast<unsigned*>(static_cast<tessera_b16*>(p) + i) = tessera_pack2(v0, v1, dtype);
  }
}

// 2^x and 1/x by the special-function unit, subnormals flushed to zero: ex2.approx.ftz (2 ulp
// relative error) and rcp.approx.ftz (1 ulp); 2^(+inf) = +inf, 1/inf = 0. Unlike exp2f/__expf
// and __fdividef they compile to the bare instruction, without range fix-ups.
__device__ __forceinline__ float tessera_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float tessera_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// GELU (tanh approximation) as x sigmoid(2u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715
// x^3): the same function as 0.5 x (1 + tanh(u)) without its cancellation for negative x. The
// constants are folded so that e^(-2u) = 2^(x (k1 + k3 x^2)): three FP32 operations, two
// special-function ones and the product. Relative error a few 1e-7 (a few fp32 ulps);
// x -> -inf gives -0 (2^+inf = inf, 1/inf = 0).
__device__ __forceinline__ float tessera_gelu_tanh_fast(float x) {
  constexpr float k1 = -2.0f * 0.79788456080286536f * 1.4426950408889634f;
  constexpr float k3 = k1 * 0.044715f;
  return x * tessera_rcp(1.0f + tessera_ex2(x * fmaf(k3, x * x, k1)));
}

// Activations: 0 none, 1 ReLU, 2 GELU (erf), 3 GELU (tanh approximation, as cuBLASLt).
// `coarse`: the result is rounded to bf16 (relative error 2^-8), so tanh may use the hardware
// approximation (relative error about 2^-11, one special-function operation); otherwise
// tessera_gelu_tanh_fast (relative error near 1e-7).
__device__ __forceinline__ float tessera_activate(float x, int act, bool coarse = false) {
  if (act == 1) return fmaxf(x, 0.0f);
  if (act == 2) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  if (act == 3) {
    if (!coarse) return tessera_gelu_tanh_fast(x);
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return 0.5f * x * (1.0f + t);
  }
  return x;
}

__device__ __forceinline__ long long tessera_dtype_bytes(int dtype) { return dtype == 2 ? 4 : 2; }
