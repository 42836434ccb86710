#!/usr/bin/env bash
# One visit to the GPU host (run from the folder tools/gpu-pack.sh filled): every test binary
# with the GPU and NVRTC required (a missing device is a failure there), end-to-end runs of
# both kernel paths, then the benchmarks interleaved with cuBLAS/cuBLASLt. Logs and JSON go
# to $OUT; a short table comes last.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TESSERA_CUDA_INCLUDE=/usr/local/cuda/include
export TESSERA_REQUIRE_GPU=1 TESSERA_REQUIRE_NVRTC=1
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/tessera-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,power.draw --format=csv > "$OUT/smi.txt" 2>&1
fails=0
for t in tests/*; do
  timeout 300 "$t" --test-threads=2 > "$OUT/test_$(basename "$t").log" 2>&1
  rc=$?; [ $rc -ne 0 ] && fails=$((fails + 1))
  echo "$(basename "$t"): rc=$rc $(grep -E '^test result' "$OUT/test_$(basename "$t").log" | tail -1)"
done > "$OUT/tests_summary.txt"
for path in sm80 sm90; do
  timeout 120 ./tessera run gemm --m 1000 --n 1016 --k 1024 --epilogue bias,gelu,aux,c --path $path
done > "$OUT/run.log" 2>&1
timeout 240 ./tessera bench gemm --path sm90 --json "$OUT/bench_sm90.json" > "$OUT/bench_sm90.log" 2>&1
timeout 120 ./tessera bench gemm --path sm80 --quick --json "$OUT/bench_sm80.json" > "$OUT/bench_sm80.log" 2>&1
cat "$OUT/tests_summary.txt"; echo "test binaries failing: $fails"
grep -vE "^  " "$OUT/run.log" | tail -8
echo "== sm90 (Hopper) vs vendor"; grep -vE "^summary" "$OUT/bench_sm90.log" | head -40
echo "== sm80-class vs vendor"; tail -4 "$OUT/bench_sm80.log"
