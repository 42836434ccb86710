// Staging of an operand into rows TMA can address: `batch` matrices of `rows` x `cols`
// 16-bit elements (of which the source holds the first `src_batch`; the rest are written as
// zeros: a convolution's filter padded with zero output channels to its tiles' columns),
// rows `src_ld` elements apart and matrices `src_bs` apart (any values: the source's rows
// need not be multiples of 16 bytes), copied to `dst` with rows `dst_ld`
// elements apart and matrices `rows * dst_ld` apart. The first `fill` columns of every
// destination row are written (`cols <= fill <= dst_ld`), those past `cols` with zeros: a
// GEMM operand whose K makes rows TMA cannot address fills only the chunk past K (the tensor
// map's extent along K is `cols`, so the columns beyond are never read); a convolution's
// filter padded to whole 64-channel k-tiles fills every padding channel, which the GEMM
// multiplies, and its staged x every channel up to the pitch, which the tensor map reads.
//
// Invariants the host guarantees: dst is 16-byte aligned and dst_ld is a multiple of 8, so
// every 8-element chunk of a destination row is one aligned 16-byte store; `vec` (1, 2, 4 or
// 8) divides src_ld, cols and src_bs and the source's address in elements, so the source is
// read `vec` elements at a time (each such run lies wholly before or past `cols`), or element
// by element where its rows start anywhere. The kernel copies bits, so bf16 and fp16 alike.
// Grid-stride loop, any grid; indices are 32-bit where the chunks fit (each chunk divides its
// index by the row's chunks, far cheaper in 32 bits), else 64-bit.

struct alignas(16) tessera_stage_u16x8 { unsigned short v[8]; };
template <int V> struct alignas(2 * V) tessera_stage_vec { unsigned short v[V]; };

template <int V, typename I>
__device__ __forceinline__ void tessera_stage_rows_run(const unsigned short* __restrict__ src,
                                                       unsigned short* __restrict__ dst,
                                                       I rows, I cols, I src_ld, I src_bs,
                                                       I dst_ld, I chunks, I total, I src_batch) {
  const I step = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const I row = i / chunks;  // over all batches: destination rows are contiguous
    const I c0 = (i - row * chunks) * 8;
    const I b = row / rows;
    const unsigned short* s = src + (long long)b * src_bs + (long long)(row - b * rows) * src_ld + c0;
    // The source's columns of this matrix: none past its matrices (never read there).
    const I live = b < src_batch ? cols : 0;
    tessera_stage_u16x8 v;
#pragma unroll
    for (int j = 0; j < 8; j += V) {
      tessera_stage_vec<V> e{};
      if (c0 + j < live) e = *reinterpret_cast<const tessera_stage_vec<V>*>(s + j);
#pragma unroll
      for (int u = 0; u < V; ++u) v.v[j + u] = e.v[u];
    }
    *reinterpret_cast<tessera_stage_u16x8*>(dst + (long long)row * dst_ld + c0) = v;
  }
}

template <typename I>
__device__ __forceinline__ void tessera_stage_rows_vec(const unsigned short* src, unsigned short* dst,
                                                       I rows, I cols, I src_ld, I src_bs,
                                                       I dst_ld, I chunks, I total, I src_batch, int vec) {
  switch (vec) {
    case 8: tessera_stage_rows_run<8, I>(src, dst, rows, cols, src_ld, src_bs, dst_ld, chunks, total, src_batch); break;
    case 4: tessera_stage_rows_run<4, I>(src, dst, rows, cols, src_ld, src_bs, dst_ld, chunks, total, src_batch); break;
    case 2: tessera_stage_rows_run<2, I>(src, dst, rows, cols, src_ld, src_bs, dst_ld, chunks, total, src_batch); break;
    default: tessera_stage_rows_run<1, I>(src, dst, rows, cols, src_ld, src_bs, dst_ld, chunks, total, src_batch); break;
  }
}

extern "C" __global__ void __launch_bounds__(256)
    tessera_stage_rows(const unsigned short* __restrict__ src, unsigned short* __restrict__ dst,
                       long long rows, long long cols, long long batch, long long src_ld,
                       long long src_bs, long long dst_ld, long long fill, long long src_batch,
                       int vec, int signal) {
  // With `signal`, the kernel after this one on the stream may be launched now: the other
  // copy of a convolution's staging, launched as a programmatic dependent of this one. Not
  // before a GEMM: its CTAs would be placed on the SMs as this grid's leave, which runs it
  // slower (design 018).
#if __CUDA_ARCH__ >= 900
  if (signal) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const long long chunks = (fill + 7) / 8;  // 16-byte chunks written per destination row
  const long long total = batch * rows * chunks;
  // 32-bit indices where the chunk index, stepped past the end by one grid, fits (offsets
  // are formed in 64 bits either way).
  if (total < 0x7fffffffLL - (long long)gridDim.x * blockDim.x) {
    tessera_stage_rows_vec<int>(src, dst, (int)rows, (int)cols, (int)src_ld, (int)src_bs, (int)dst_ld, (int)chunks, (int)total, (int)src_batch, vec);
  } else {
    tessera_stage_rows_vec<long long>(src, dst, rows, cols, src_ld, src_bs, dst_ld, chunks, total, src_batch, vec);
  }
  // Launched as a programmatic dependent of the copy before it (the convolution's filter,
  // whose output this grid neither reads nor writes), this grid completes only after that
  // one has: the GEMM after both waits for this grid alone. A no-op otherwise.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
