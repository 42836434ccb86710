#!/usr/bin/env bash
# Experiments for one GPU visit (gpu-visit.sh runs this with EXP=1); their logs go to $OUT. Each
# visit; docs/perf.md records what each one measured.
set -u
S=4096x4096x4096,8192x8192x8192
b() { echo "## bench gemm $*"; timeout 150 ./tessera bench gemm --path sm90 --rounds 7 "$@" | grep -E "x[0-9]+x" | head -6; }
# The biased epilogues on the scratch path (the previous default) against the TMA store with
# the bias staged in shared memory (the new default, in the standard benchmark).
b --shapes $S --tma-store off
