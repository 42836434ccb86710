// tessera: the fixed functions that call the generated tessera_ep_element.

// Elements (lrow, lcol) and (lrow, lcol + 1) when the latter is inside the launch; stores D
// (two at a time when a.d_pair and lcol is even). kCase: tessera_ep_block_case's answer for a
// block holding both elements (0: decide every predicate per element).
template <int kCase = 0>
__device__ __forceinline__ void tessera_ep_pair(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                int b, int lrow, int lcol, float acc0, float acc1) {
  const float d0 = tessera_ep_element<kCase>(a, cta, b, lrow, lcol, acc0);
  const long long i = tessera_ep_at(a.batch_d, a.ldd, b, a.row0 + lrow, a.col0 + lcol);
  // The second element's column, clamped into the launch: a load of it executed ahead of the
  // branch (tessera_ep_ld) reads inside the input.
  const bool second = lcol + 1 < a.cols;
  const int lcol1 = second ? lcol + 1 : lcol;
  if (second) {
    const float d1 = tessera_ep_element<kCase>(a, cta, b, lrow, lcol1, acc1);
    if (a.d_pair && (lcol & 1) == 0) {
      tessera_store2(a.d, i, d0, d1, TESSERA_EP_DT_D);
    } else {
      tessera_store(a.d, i, d0, TESSERA_EP_DT_D);
      tessera_store(a.d, i + 1, d1, TESSERA_EP_DT_D);
    }
  } else {
    tessera_store(a.d, i, d0, TESSERA_EP_DT_D);
  }
}

// The input pointers of `a` through an asm statement the compiler cannot see into, ordered
// after every earlier store: loads through them cannot be moved above this point.
__device__ __forceinline__ void tessera_ep_opaque_inputs(TesseraEpArgs& a) {
  unsigned long long c = reinterpret_cast<unsigned long long>(a.c),
                     r = reinterpret_cast<unsigned long long>(a.residual),
                     x = reinterpret_cast<unsigned long long>(a.aux_in),
                     br = reinterpret_cast<unsigned long long>(a.bias_row),
                     bc = reinterpret_cast<unsigned long long>(a.bias_col);
  asm volatile("" : "+l"(c), "+l"(r), "+l"(x), "+l"(br), "+l"(bc) : : "memory");
  a.c = reinterpret_cast<const void*>(c);
  a.residual = reinterpret_cast<const void*>(r);
  a.aux_in = reinterpret_cast<const void*>(x);
  a.bias_row = reinterpret_cast<const void*>(br);
  a.bias_col = reinterpret_cast<const void*>(bc);
}

// tessera_ep_pair for a pair the caller knows is inside the launch, with D stored two at a
// time (a.d_pair, lcol even): no branch between the two elements and the store.
template <int kCase = 0>
__device__ __forceinline__ void tessera_ep_pair_inside(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                       int b, int lrow, int lcol, float acc0,
                                                       float acc1) {
  const float d0 = tessera_ep_element<kCase>(a, cta, b, lrow, lcol, acc0);
  const float d1 = tessera_ep_element<kCase>(a, cta, b, lrow, lcol + 1, acc1);
  tessera_store2(a.d, tessera_ep_at(a.batch_d, a.ldd, b, a.row0 + lrow, a.col0 + lcol), d0, d1,
                 TESSERA_EP_DT_D);
}

// Shared-memory floats the CTA hooks use for a tile_rows x tile_cols tile (0: no reduction).
__host__ __device__ constexpr int tessera_ep_smem_floats(int tile_rows, int tile_cols) {
  return (kTesseraEpRowSum ? tile_rows : 0) + (kTesseraEpColSum ? tile_cols : 0);
}

// Before a tile's elements; the caller then runs __syncthreads(). `smem` (may be null: every
// element then adds to global memory) holds tessera_ep_smem_floats(tile_rows, tile_cols) floats.
__device__ __forceinline__ void tessera_ep_cta_begin(TesseraEpCta& cta, float* smem, int tile_row0,
                                                     int tile_col0, int tile_rows, int tile_cols,
                                                     int tid, int nthreads) {
  cta.tile_row0 = tile_row0;
  cta.tile_col0 = tile_col0;
  cta.tile_rows = tile_rows;
  cta.tile_cols = tile_cols;
  cta.row_sum = kTesseraEpRowSum && smem ? smem : nullptr;
  cta.col_sum = kTesseraEpColSum && smem ? smem + (kTesseraEpRowSum ? tile_rows : 0) : nullptr;
  if (smem) {
    for (int i = tid; i < tessera_ep_smem_floats(tile_rows, tile_cols); i += nthreads) smem[i] = 0.0f;
  }
}

// After a tile's elements and a __syncthreads(): one global atomicAdd per row and column
// (nothing when the sums were not staged).
__device__ __forceinline__ void tessera_ep_cta_end(const TesseraEpArgs& a, const TesseraEpCta& cta,
                                                   int b, int tid, int nthreads) {
  if (kTesseraEpRowSum && cta.row_sum) {
    for (int i = tid; i < cta.tile_rows; i += nthreads) {
      const int lrow = cta.tile_row0 + i;
      if (lrow < a.rows) atomicAdd(&a.bgrad_row[b * a.batch_bgrad_row + a.row0 + lrow], cta.row_sum[i]);
    }
  }
  if (kTesseraEpColSum && cta.col_sum) {
    for (int i = tid; i < cta.tile_cols; i += nthreads) {
      const int lcol = cta.tile_col0 + i;
      if (lcol < a.cols) atomicAdd(&a.bgrad_col[b * a.batch_bgrad_col + a.col0 + lcol], cta.col_sum[i]);
    }
  }
}

// TESSERA_EP_REG_SUMS: adds a finished partial sum of launch-relative row `lrow` or column
// `lcol` to the fp32 workspace.
__device__ __forceinline__ void tessera_ep_flush_row(const TesseraEpArgs& a, int b, int lrow, float s) {
  atomicAdd(&a.bgrad_row[b * a.batch_bgrad_row + a.row0 + lrow], s);
}
__device__ __forceinline__ void tessera_ep_flush_col(const TesseraEpArgs& a, int b, int lcol, float s) {
  atomicAdd(&a.bgrad_col[b * a.batch_bgrad_col + a.col0 + lcol], s);
}
