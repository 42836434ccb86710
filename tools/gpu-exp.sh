#!/usr/bin/env bash
# Experiments of one GPU visit (gpu-visit.sh runs this with EXP=1, logs into $OUT). Edit per
# visit; docs/perf.md records what each one measured.
set -u
S=4096x4096x4096,8192x8192x8192
b() { echo "## bench gemm $*"; timeout 150 ./tessera bench gemm --path sm90 --rounds 7 "$@" | grep -E "x[0-9]+x" | head -6; }
# The ping-pong schedule with short groups of tile rows, against the cooperative default, on
# the three standard epilogues.
b --shapes $S
for g in 1 2 4; do
  b --shapes $S --schedule pingpong --group-m $g
done
echo "## bench epilogues --schedule pingpong --group-m 4"
timeout 200 ./tessera bench epilogues --quick --schedule pingpong --group-m 4 --rounds 7 --coord none --json "$OUT/bench_epilogues_pp4.json"
