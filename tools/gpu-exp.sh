#!/usr/bin/env bash
# Experiments for one GPU visit (gpu-visit.sh runs this with EXP=1); their logs go to $OUT. Each
# visit; docs/perf.md records what each one measured.
set -u
# The Hopper path on every standard shape (the LLM shapes too), the three epilogues, against
# cuBLAS / cuBLASLt.
echo "## bench gemm --path sm90 (all shapes)"
timeout 300 ./tessera bench gemm --path sm90 --json "$OUT/bench_sm90_all.json" > "$OUT/bench_sm90_all.log" 2>&1
grep -E "x[0-9]+x" "$OUT/bench_sm90_all.log" | head -32
