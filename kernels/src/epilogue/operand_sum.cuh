// tessera: sums of a 16-bit GEMM operand over k (cuBLASLt's BGRADA / BGRADB), one thread per
// output element: out[b * batch_out + i] = sum_k x(i, k), x(i, k) at i * ld + k when
// k_contiguous, else at k * ld + i. Grid (ceil(outer / 128), batch), 128 threads.
// For A (M x K): outer = M, k_contiguous = A row-major. For B (K x N): outer = N,
// k_contiguous = B column-major.
extern "C" __global__ void __launch_bounds__(128) tessera_ep_operand_sum(
    const tessera_b16* x, long long ld, long long batch_x, int outer, int k, int k_contiguous,
    int elem, float* out, long long batch_out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int b = blockIdx.y;
  if (i >= outer) return;
  const tessera_b16* p = x + b * batch_x;
  float s = 0.0f;
  for (int kk = 0; kk < k; ++kk) {
    s += tessera_b16_to_f32(p[k_contiguous ? i * ld + kk : kk * ld + i], elem);
  }
  out[b * batch_out + i] = s;
}
