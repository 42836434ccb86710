// Staging of an operand into rows TMA can address: `batch` matrices of `rows` x `cols`
// 16-bit elements, rows `src_ld` elements apart and matrices `src_bs` apart (any values: the
// source's rows need not be multiples of 16 bytes), copied to `dst` with rows `dst_ld`
// elements apart and matrices `rows * dst_ld` apart. The first `fill` columns of every
// destination row are written (`cols <= fill <= dst_ld`), those past `cols` with zeros: a
// GEMM operand whose K makes rows TMA cannot address fills only the chunk past K (the tensor
// map's extent along K is `cols`, so the columns beyond are never read); a convolution's
// filter padded to whole 64-channel k-tiles fills every padding channel, which the GEMM
// multiplies.
//
// Invariants the host guarantees: dst is 16-byte aligned and dst_ld is a multiple of 8, so
// every 8-element chunk of a destination row is one aligned 16-byte store; the source is read
// element by element (its rows start anywhere). The kernel copies bits, so bf16 and fp16
// alike. Indices are 64-bit; grid-stride loop, any grid.

struct alignas(16) tessera_stage_u16x8 { unsigned short v[8]; };

extern "C" __global__ void __launch_bounds__(256)
    tessera_stage_rows(const unsigned short* __restrict__ src, unsigned short* __restrict__ dst,
                       long long rows, long long cols, long long batch, long long src_ld,
                       long long src_bs, long long dst_ld, long long fill) {
  const long long chunks = (fill + 7) / 8;  // 16-byte chunks written per destination row
  const long long total = batch * rows * chunks;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const long long row = i / chunks;  // over all batches: destination rows are contiguous
    const long long c0 = (i - row * chunks) * 8;
    const long long b = row / rows;
    const unsigned short* s = src + b * src_bs + (row - b * rows) * src_ld + c0;
    tessera_stage_u16x8 v;
#pragma unroll
    for (int j = 0; j < 8; ++j) v.v[j] = c0 + j < cols ? s[j] : (unsigned short)0;
    *reinterpret_cast<tessera_stage_u16x8*>(dst + row * dst_ld + c0) = v;
  }
}
