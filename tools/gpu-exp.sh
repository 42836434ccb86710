#!/usr/bin/env bash
# Experiments of one GPU visit (gpu-visit.sh runs this with EXP=1, logs into $OUT). Edit per
# visit; docs/perf.md records what each one measured.
set -u
S=4096x4096x4096,8192x8192x8192
b() { echo "## bench gemm $*"; timeout 150 ./tessera bench gemm --path sm90 --shapes $S --rounds 7 "$@" | grep -E "x[0-9]+x|shape"; }
# Ping-pong at 8192^3: does its fused cost follow the store path (TMA store against the
# scratch path's st.global)?
b --schedule pingpong --epilogues "none;bias,relu" --tma-store off
b --schedule pingpong --epilogues "none;bias,relu;bias,gelu" --tma-store on
# Cooperative, the fused rows with the TMA store, and a grid of 128 CTAs (512 tiles = 4 waves).
b --epilogues "bias,relu;bias,gelu" --tma-store on
b --epilogues "none;bias,relu" --max-ctas 128
