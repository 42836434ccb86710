// The window load's two copies (docs/08_convolution.md, "Few channels"):
//
// tessera_conv_window_x: x (channels-last, C <= 8 channels a pixel, N·H·W pixels) into phase
// planes of 16-byte chunks, xs[n][h][φ][u][0..8), chunk u of plane φ being pixel
// w = sw·u + φ − pl of input row (n, h): its C channels, then zeros; zeros where w is outside
// [0, W) (u runs to a multiple of 8 chunks, the window load's box rows). Tap s of output pixel q then reads chunk q + ⌊s·dw/sw⌋ of plane s·dw mod sw.
//
// tessera_conv_window_w: the filter (K-R-S-C) into the GEMM's K order, ws[k][kt][j][0..8):
// chunk j of k-tile kt is tap (kt·rows + slot_r[j], slot_s[j]) (C channels, then zeros), or
// zeros where the slot is empty (slot_s[j] < 0) or its filter row is past R.
//
// Both copy bits (bf16 and fp16 alike; 0 is all-zero bits in both), one 16-byte chunk a
// thread, 64-bit indices, grid-stride loops over any grid.

struct tessera_conv_window_args {
  long long n, h, w, c;   // x
  long long planes, u, pl;  // the staged planes: sw of them, u chunks a plane row
  long long k, r, s;      // the filter
  long long k_tiles, rows;  // k-tiles, filter rows a k-tile
  int slot_r[8], slot_s[8];
};
// The host's mirror (WindowArgs in window.rs) asserts the same size.
static_assert(sizeof(tessera_conv_window_args) == 160, "12 64-bit integers and 16 32-bit ones");

struct alignas(16) tessera_window_chunk { unsigned short v[8]; };

// One CTA per input row (n, h) (grid-stride over the rows, kRowsAtOnce of them an iteration:
// their loads in flight together), its threads over the row's planes·u chunks; no 64-bit
// division per chunk.
constexpr int kRowsAtOnce = 4;

extern "C" __global__ void tessera_conv_window_x(const unsigned short* __restrict__ x,
                                                 tessera_window_chunk* __restrict__ xs,
                                                 const tessera_conv_window_args g) {
  const long long rows = g.n * g.h;
  // A row's chunks (planes · u) fit 32 bits (the host's TMA limits).
  const int row = (int)(g.planes * g.u), cu = (int)g.u;
  const long long step = (long long)gridDim.x;
  for (long long r0 = blockIdx.x; r0 < rows; r0 += kRowsAtOnce * step) {
    for (int j = threadIdx.x; j < row; j += blockDim.x) {
      const int ph = j / cu, u = j - ph * cu;
      const long long w = (long long)g.planes * u + ph - g.pl;
      const bool inside = w >= 0 && w < g.w;
      tessera_window_chunk v[kRowsAtOnce];
#pragma unroll
      for (int k = 0; k < kRowsAtOnce; ++k) {
        const long long rh = r0 + k * step;
#pragma unroll
        for (int e = 0; e < 8; ++e) v[k].v[e] = 0;
        if (inside && rh < rows) {
          const unsigned short* px = x + (rh * g.w + w) * g.c;
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (e < g.c) v[k].v[e] = px[e];
        }
      }
#pragma unroll
      for (int k = 0; k < kRowsAtOnce; ++k) {
        const long long rh = r0 + k * step;
        if (rh < rows) xs[rh * row + j] = v[k];
      }
    }
  }
}

extern "C" __global__ void tessera_conv_window_w(const unsigned short* __restrict__ wt,
                                                 tessera_window_chunk* __restrict__ ws,
                                                 const tessera_conv_window_args g) {
  const long long total = g.k * g.k_tiles * 8;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const int j = (int)(i % 8);
    const long long kt = (i / 8) % g.k_tiles;
    const long long k = i / (8 * g.k_tiles);
    const long long r = kt * g.rows + g.slot_r[j];
    const int s = g.slot_s[j];
    tessera_window_chunk v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.v[e] = 0;
    if (s >= 0 && r < g.r) {
      const unsigned short* tap = wt + ((k * g.r + r) * g.s + s) * g.c;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e < g.c) v.v[e] = tap[e];
    }
    ws[i] = v;
  }
}
