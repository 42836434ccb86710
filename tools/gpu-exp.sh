#!/usr/bin/env bash
# Experiments for one GPU visit (gpu-visit.sh runs this with EXP=1); their logs go to $OUT.
# What such experiments measured is in docs/design/, the method in docs/perf.md.
set -u
# AB=1 (with .gpu/tessera-old from gpu-pack.sh OLD=REV): this build and the old one, each
# benchmark run alternately (new, old, new, old) so that both see the same machine states.
# AB_SCHEDULES (default cooperative) lists the schedules compared.
if [ "${AB:-0}" = 1 ] && [ -x ./tessera-old ]; then
  for sched in ${AB_SCHEDULES:-cooperative}; do
    for round in 1 2; do
      for v in new old; do
        bin=./tessera; [ $v = old ] && bin=./tessera-old
        echo "## $v, round $round: bench epilogues --quick --coord none --schedule $sched"
        timeout 240 $bin bench epilogues --quick --coord none --schedule $sched \
          --json "$OUT/ab_epi_${sched}_${v}_$round.json" > "$OUT/ab_epi_${sched}_${v}_$round.log" 2>&1
        grep -vE "^(compiling|warm)" "$OUT/ab_epi_${sched}_${v}_$round.log"
      done
    done
    for v in new old; do
      bin=./tessera; [ $v = old ] && bin=./tessera-old
      echo "## $v: bench gemm --path sm90 --quick --schedule $sched"
      timeout 200 $bin bench gemm --path sm90 --quick --schedule $sched > "$OUT/ab_sm90_${sched}_$v.log" 2>&1
      grep -E "x[0-9]+x" "$OUT/ab_sm90_${sched}_$v.log" | head -12
    done
  done
fi
# KSWEEP=1: the epilogue's own time, both schedules: fusions at small K (where the mainloop is
# short) and at 4096, each against the plain GEMM in the same rounds.
if [ "${KSWEEP:-0}" = 1 ]; then
  for sched in cooperative pingpong; do
    echo "## $sched: bench epilogues, K sweep"
    timeout 240 ./tessera bench epilogues --coord none --schedule $sched --fusions relu_bias,gelu_bias,drelu,dgelu,relu_aux_bias \
      --shapes 4096x4096x64,4096x4096x1024,4096x4096x4096 --json "$OUT/ksweep_$sched.json" > "$OUT/ksweep_$sched.log" 2>&1
    grep -vE "^(compiling|warm)" "$OUT/ksweep_$sched.log"
  done
fi
# ALL=1: the Hopper path on every standard shape (the LLM shapes too), the three epilogues,
# against cuBLAS / cuBLASLt.
if [ "${ALL:-0}" = 1 ]; then
  echo "## bench gemm --path sm90 (all shapes)"
  timeout 300 ./tessera bench gemm --path sm90 --json "$OUT/bench_sm90_all.json" > "$OUT/bench_sm90_all.log" 2>&1
  grep -E "x[0-9]+x" "$OUT/bench_sm90_all.log" | head -32
fi
# TL=1: the Hopper kernel's timeline (kernels/examples/sm90_timeline.rs) for each schedule of
# TL_CONFIGS (SCHEDULE or SCHEDULE:BMxBN; default cooperative and ping-pong 128x128), three
# epilogues, at K = 1024 and 4096: the per-tile waits, mainloop and epilogue, and how much of
# each epilogue another warpgroup's mainloop covers. CTA 0's tiles are printed for TL_SHOW.
if [ "${TL:-0}" = 1 ] && [ -x ./sm90_timeline ]; then
  for shape in "4096 4096 1024" "4096 4096 4096"; do
    for conf in ${TL_CONFIGS:-cooperative pingpong}; do
      sched=${conf%%:*}; tile=; [ "$conf" != "$sched" ] && tile="--tile ${conf#*:}"
      for e in ${TL_EPILOGUES:-none bias,relu bias,gelu_tanh,aux}; do
        echo "## timeline $shape $conf $e"
        f="$OUT/tl_${shape// /x}_${conf//:/-}_${e//,/-}.log"
        timeout 60 ./sm90_timeline $shape --schedule $sched $tile --epilogue $e > "$f" 2>&1
        if [ "$conf $e $shape" = "${TL_SHOW:-pingpong bias,gelu_tanh,aux 4096 4096 1024}" ]; then
          head -40 "$f"
        else
          head -3 "$f"
        fi
      done
    done
  done
fi
