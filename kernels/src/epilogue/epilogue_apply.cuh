// tessera: the epilogue alone, over an fp32 accumulator matrix (launch-relative rows x cols,
// pitch ld_acc, batch stride batch_acc): a GPU check of a generated epilogue without a GEMM.
// Grid (ceil(cols / 64), ceil(rows / 32), batch), 128 threads.
constexpr int kTesseraEpApplyRows = 32, kTesseraEpApplyCols = 64;

extern "C" __global__ void __launch_bounds__(128, 1) tessera_epilogue_apply(const TesseraEpArgs a,
                                                                         const float* acc,
                                                                         long long ld_acc,
                                                                         long long batch_acc) {
  __shared__ float red[tessera_ep_smem_floats(kTesseraEpApplyRows, kTesseraEpApplyCols) + 1];
  const int b = blockIdx.z;
  const int tile_row0 = blockIdx.y * kTesseraEpApplyRows, tile_col0 = blockIdx.x * kTesseraEpApplyCols;
  TesseraEpCta cta{};
  tessera_ep_cta_begin(cta, red, tile_row0, tile_col0, kTesseraEpApplyRows, kTesseraEpApplyCols,
                       threadIdx.x, blockDim.x);
  __syncthreads();
  for (int q = threadIdx.x; q < kTesseraEpApplyRows * kTesseraEpApplyCols / 2; q += blockDim.x) {
    const int lrow = tile_row0 + q / (kTesseraEpApplyCols / 2);
    const int lcol = tile_col0 + (q % (kTesseraEpApplyCols / 2)) * 2;
    if (lrow < a.rows && lcol < a.cols) {
      const float* p = acc + b * batch_acc + lrow * ld_acc + lcol;
      tessera_ep_pair(a, cta, b, lrow, lcol, p[0], lcol + 1 < a.cols ? p[1] : 0.0f);
    }
  }
  __syncthreads();
  tessera_ep_cta_end(a, cta, b, threadIdx.x, blockDim.x);
}
