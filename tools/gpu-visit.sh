#!/usr/bin/env bash
# One visit to the GPU host (run from the folder tools/gpu-pack.sh filled): every test binary
# with the GPU and NVRTC required (a missing device is a failure there), end-to-end runs of
# both kernel paths, then the benchmarks interleaved with cuBLAS/cuBLASLt. Logs and JSON are
# written to a work folder and come back as one archive, $OUT/visit.tgz (the device tool
# returns only a few files); the tables are printed, the test summary last.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 TESSERA_CUDA_INCLUDE=/usr/local/cuda/include
export TESSERA_REQUIRE_GPU=1 TESSERA_REQUIRE_NVRTC=1
cd "$(dirname "$0")"
FINAL=${OUT:-/tmp/tessera-out}; mkdir -p "$FINAL"
OUT=$(mktemp -d /tmp/tessera-visit.XXXXXX)
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,power.draw --format=csv > "$OUT/smi.txt" 2>&1
fails=0
# TESTS=REGEX: only the test binaries whose names match. One test at a time unless THREADS says
# otherwise: the tests share the device, and a kernel that never finishes would stall every test
# running beside it, hiding which one it was.
for t in tests/*; do
  [[ "$(basename "$t")" =~ ${TESTS:-.} ]] || continue
  timeout 400 "$t" --test-threads=${THREADS:-1} > "$OUT/test_$(basename "$t").log" 2>&1
  rc=$?; [ $rc -ne 0 ] && fails=$((fails + 1))
  echo "$(basename "$t"): rc=$rc $(grep -E '^test result' "$OUT/test_$(basename "$t").log" | tail -1)"
done > "$OUT/tests_summary.txt"
# End to end: the fused epilogue on both paths, then trees only the generated epilogue runs.
for path in sm80 sm90; do
  timeout 120 ./tessera run gemm --m 1000 --n 1016 --k 1024 --epilogue bias,gelu,aux,c --path $path
  timeout 120 ./tessera run gemm --m 1000 --n 1016 --k 1024 --epilogue rowbias,relu,aux,c --d-major col --path $path
  for tree in dgelu_bgrad drelu_bgrad relu_aux_bias gelu_aux_bias "select(row < 100, sigmoid(acc), tanh(acc + bias_col))" \
              "bgrad_row(acc * dsigmoid(aux_in)) + relu(acc + residual)"; do
    timeout 120 ./tessera run gemm --m 1000 --n 1016 --k 1024 --epilogue "$tree" --path $path
  done
done > "$OUT/run.log" 2>&1
# API=1 (default): the library API's host cost per launch against a bare cuLaunchKernel of
# the same kernel, its heap allocations per launch, and the disk cache across two processes
# (the second finds the kernel without NVRTC).
if [ "${API:-1}" = 1 ] && [ -x ./launch_overhead ]; then
  rm -rf /tmp/tessera-cache
  for i in 1 2; do
    echo "## process $i"; TESSERA_CACHE_DIR=/tmp/tessera-cache timeout 120 ./launch_overhead
  done > "$OUT/api.log" 2>&1
  [ -x ./mlp ] && { echo "## examples/mlp"; timeout 120 ./mlp; } >> "$OUT/api.log" 2>&1
fi
# SAN=1: compute-sanitizer memcheck and racecheck on end-to-end runs of each kernel family
# (small shapes with edge tiles: the sanitizers slow kernels a hundredfold).
if [ "${SAN:-0}" = 1 ] && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
  for tool in memcheck racecheck; do
    runs=$(cat <<'RUNS'
--path sm90 --tile 128x256
--path sm90 --tile 128x256 --epilogue bias,gelu,aux,c
--path sm90 --schedule pingpong --epilogue rowbias,relu,aux
--path sm90 --cluster 2 --epilogue bias,relu
--path sm90 --epilogue bias,gelu_tanh,aux
--path sm90 --cluster 2 --epilogue rowbias,gelu,aux
--path sm90 --epilogue relu_aux_bias
--path sm90 --schedule pingpong --epilogue relu_aux_bias
--path sm90 --epilogue dgelu_bgrad
--path sm90 --tile 128x256 --epilogue select(col<100,sigmoid(acc),select(row>=128,tanh(acc),acc))
--path sm90 --schedule pingpong --epilogue drelu_bgrad
--path sm90 --epilogue drelu_bgrad
--path sm90 --epilogue relu(acc+bias_row)*0.5+bias_col
--path sm90 --schedule pingpong --epilogue relu(acc+bias_row)+aux_in
--path sm90 --schedule pingpong --epilogue relu(acc+bias_col)*0.5
--path sm90 --schedule pingpong --epilogue drelu
--path sm90 --schedule pingpong --epilogue gelu_aux(acc+bias_col)*0.5
--path sm90 --d-major col --epilogue relu_aux_bias
--path sm90 --stream-k on --epilogue dgelu_bgrad --beta 0.5
--path sm80 --epilogue bias,gelu,aux,c
--path sm80 --epilogue dgelu_bgrad
RUNS
)
    # SAN_QUICK=1: every fourth run only.
    [ "${SAN_QUICK:-0}" = 1 ] && runs=$(echo "$runs" | awk 'NR % 4 == 1')
    while read -r args; do
      echo "## $tool: run gemm $args"
      timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 3 \
        ./tessera run gemm --m 300 --n 264 --k 200 $args 2>&1 | grep -E "PASS|FAIL|ERROR SUMMARY|RACECHECK SUMMARY|Error|error" | cut -c1-160 | tail -4
      echo "rc=${PIPESTATUS[0]}"
    done <<< "$runs"
    # Stream-K over a single wave (small M: every tile split along K), on shapes of its own.
    for args in "--m 16 --n 264 --k 2048" "--m 16 --n 264 --k 2048 --epilogue dgelu_bgrad" \
                "--m 33 --n 1000 --k 520 --epilogue relu_bias --d-major col"; do
      echo "## $tool: run gemm $args"
      timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 3 \
        ./tessera run gemm $args 2>&1 | grep -E "PASS|FAIL|ERROR SUMMARY|RACECHECK SUMMARY|Error|error" | cut -c1-160 | tail -4
      echo "rc=${PIPESTATUS[0]}"
    done
  done > "$OUT/sanitizer.log" 2>&1
fi
# CONV=1: the convolution. cuDNN (the benchmark's comparator) ships inside PyTorch's wheels on
# the host: its lib/ goes on LD_LIBRARY_PATH. End-to-end `tessera run conv` checks on both
# paths (x as the GEMM's A; the im2col gather), the ignored test over 2^31 elements (~30 GB),
# compute-sanitizer on two small runs with SAN=1, then `tessera bench conv` (CONV_BENCH: its
# options, default the whole set).
if [ "${CONV:-0}" = 1 ]; then
  cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))" 2>/dev/null ||
          python3 -c "import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
  [ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn/lib:$LD_LIBRARY_PATH"
  {
    echo "cuDNN folder: ${cudnn:-not found}"
    while read -r args; do
      echo "## run conv $args"
      timeout 120 ./tessera run conv $args 2>&1 | grep -E "path  |PASSED|FAILED|outside|error" | cut -c1-220
    done <<'RUNS'
--n 2 --h 56 --w 56 --c 64 --k 64 --r 3 --s 3 --pad 1 --epilogue bias_residual_relu
--n 2 --h 56 --w 56 --c 64 --k 64 --r 3 --s 3 --pad 1 --epilogue bias_relu_residual --caller-workspace
--n 3 --h 28 --w 28 --c 256 --k 64 --r 1 --s 1 --epilogue bias_residual_relu
--n 2 --h 56 --w 56 --c 256 --k 512 --r 1 --s 1 --stride 2
--n 4 --h 224 --w 224 --c 3 --k 64 --r 7 --s 7 --stride 2 --pad 3 --epilogue relu(acc+bias_col)
--n 3 --h 28 --w 28 --c 127 --k 127 --r 3 --s 3 --pad 1
--n 2 --h 13 --w 13 --c 24 --k 16 --r 3 --s 5 --stride 2,3 --pad 1,2,1,2 --dilation 2
--n 7 --h 13 --w 13 --c 64 --k 100 --r 3 --s 3 --pad 1 --dtype fp16 --out fp32 --epilogue gelu(aux(acc+bias_col))
--n 2 --h 56 --w 56 --c 64 --k 64 --r 3 --s 3 --pad 1 --path sm80 --epilogue bias_residual_relu
RUNS
  } > "$OUT/conv_run.log" 2>&1
  [ -x tests/conv_gpu ] && timeout 900 tests/conv_gpu --ignored --test-threads=1 > "$OUT/conv_big.log" 2>&1
  if [ "${SAN:-0}" = 1 ] && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    for tool in memcheck racecheck; do
      for args in "--n 2 --h 9 --w 11 --c 24 --k 40 --r 3 --s 3 --pad 1 --epilogue bias_residual_relu" \
                  "--n 2 --h 9 --w 11 --c 24 --k 40 --r 1 --s 1 --epilogue bias_relu_residual"; do
        echo "## $tool: run conv $args"
        timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 3 \
          ./tessera run conv $args 2>&1 | grep -E "PASS|FAIL|ERROR SUMMARY|RACECHECK SUMMARY|Error|error" | cut -c1-160 | tail -4
        echo "rc=${PIPESTATUS[0]}"
      done
    done > "$OUT/conv_sanitizer.log" 2>&1
  fi
  timeout 1200 ./tessera bench conv ${CONV_BENCH:-} --json "$OUT/bench_conv.json" > "$OUT/bench_conv.log" 2>&1
fi
# EXP=1: the experiments of gpu-exp.sh (logs in the work folder, printed below). STD=0 skips
# the standard benchmarks.
[ "${EXP:-0}" = 1 ] && OUT="$OUT" bash ./gpu-exp.sh > "$OUT/exp.log" 2>&1
# FULL=1: the GEMM benchmarks on every standard shape (LLM shapes too); otherwise 4096^3 and
# 8192^3. The tree-epilogue benchmark always takes the two cubes.
Q=--quick; [ "${FULL:-0}" = 1 ] && Q=
if [ "${STD:-1}" = 1 ]; then
timeout 300 ./tessera bench epilogues --quick --json "$OUT/bench_epilogues.json" > "$OUT/bench_epilogues.log" 2>&1
timeout 300 ./tessera bench gemm --path sm90 $Q --json "$OUT/bench_sm90.json" > "$OUT/bench_sm90.log" 2>&1
[ "${PP:-1}" = 1 ] && timeout 200 ./tessera bench gemm --path sm90 $Q --schedule pingpong --json "$OUT/bench_sm90_pp.json" > "$OUT/bench_sm90_pp.log" 2>&1
[ "${FULL:-0}" = 1 ] && timeout 120 ./tessera bench mma --json "$OUT/bench_mma.json" > "$OUT/bench_mma.log" 2>&1
fi
[ "${FULL:-0}" = 1 ] && timeout 120 ./tessera bench gemm --path sm80 --quick --json "$OUT/bench_sm80.json" > "$OUT/bench_sm80.log" 2>&1
# SWEEP=1: the sweep, `bench gemm --sweep` (53 shapes in nine classes, plain GEMM against
# cuBLAS, each shape as the planner plans it), 3 rounds of ~10 ms batches: a single row's
# ratio to about +-5%, the class geomeans closer. About 3-4 minutes, most of it NVRTC
# compiling ~15 kernels (a disk cache keeps them for SWEEP_AB). SWEEP_AB=1 adds the ragged and
# skinny classes with the schedule forced each way (is ping-pong's whole-tile domain the right
# one? docs/design/012-planner-rules.md).
if [ "${SWEEP:-0}" = 1 ]; then
  export TESSERA_CACHE_DIR=/tmp/tessera-sweep-cache
  timeout 300 ./tessera bench gemm --sweep --json "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
  echo "exit status $? (0 ok, 3 a shape failed or disagreed with cuBLAS, 124 timed out)" >> "$OUT/sweep.log"
  if [ "${SWEEP_AB:-0}" = 1 ]; then
    for sched in pingpong cooperative; do
      timeout 150 ./tessera bench gemm --sweep --class ragged,skinny --schedule $sched --rounds 5 \
        --json "$OUT/sweep_ab_$sched.json" > "$OUT/sweep_ab_$sched.log" 2>&1
    done
  fi
  unset TESSERA_CACHE_DIR
fi
# NCU=1: warp-state and instruction profiles of two tree epilogues' GEMMs at 4096^3 (the
# first two launches: the tree kernel and the plain GEMM it is compared with).
if [ "${NCU:-0}" = 1 ] && [ -x /usr/local/cuda/bin/ncu ]; then
  for f in ${NCU_FUSIONS:-relu_aux_bias dgelu}; do
    timeout 150 /usr/local/cuda/bin/ncu --kernel-name tessera_gemm --launch-count 2 \
      --section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats \
      ./tessera bench epilogues --fusions $f --shapes 4096x4096x4096 --rounds 1 --coord none > "$OUT/ncu_$f.txt" 2>&1
  done
fi
# NCU_METRICS=1: per tree of NCU_TREES (default relu_bias relu_aux_bias drelu_bgrad), one
# production kernel (sm90_timeline --clock-only) at 4096^3 under ncu, clocks locked to base:
# duration, cycles, instructions, global stores and their sectors, L2 write requests, DRAM
# bytes (docs/design/006-output-mask-stores.md: relu_aux_bias's mask stores were found this way).
if [ "${NCU_METRICS:-0}" = 1 ] && [ -x /usr/local/cuda/bin/ncu ] && [ -x ./sm90_timeline ]; then
  M=gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,smsp__inst_executed_op_global_st.sum
  M=$M,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,lts__t_requests_srcunit_tex_op_write.sum
  M=$M,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum
  for tree in ${NCU_TREES:-relu_bias relu_aux_bias drelu_bgrad}; do
    for sched in pingpong cooperative; do
      echo "## $tree, $sched"
      timeout 120 /usr/local/cuda/bin/ncu --launch-skip 5 --launch-count 1 --metrics $M \
        ./sm90_timeline 4096 4096 4096 --schedule $sched --tree "$tree" --clock-only 2>&1 |
        grep -E "^\s+(gpu__|sm__|dram__|lts__|smsp__|l1tex__)" | awk '{print $1, $(NF-1), $NF}'
    done
  done > "$OUT/ncu_metrics.log" 2>&1
fi
tar czf "$FINAL/visit.tgz" -C "$OUT" .
grep -E "^(tree|PASSED|FAILED|error)|PASS|FAIL" "$OUT/run.log" | cut -c1-200 | tail -30
[ -f "$OUT/api.log" ] && { echo "== library API"; cat "$OUT/api.log"; }
[ -f "$OUT/sanitizer.log" ] && { echo "== compute-sanitizer"; cat "$OUT/sanitizer.log"; }
[ -f "$OUT/ncu_metrics.log" ] && { echo "== ncu metrics"; cat "$OUT/ncu_metrics.log"; }
if [ "${STD:-1}" = 1 ]; then
echo "== tree epilogues"; cat "$OUT/bench_epilogues.log"
echo "== sm90 (Hopper) vs vendor"; grep -E "x[0-9]+x" "$OUT/bench_sm90.log" | head -30
[ -f "$OUT/bench_sm90_pp.log" ] && { echo "== sm90 ping-pong vs vendor"; grep -E "x[0-9]+x" "$OUT/bench_sm90_pp.log" | head -30; }
[ -f "$OUT/bench_mma.log" ] && { echo "== mma.sync ceiling"; cat "$OUT/bench_mma.log"; }
fi
[ -f "$OUT/conv_run.log" ] && { echo "== convolution: run conv"; cat "$OUT/conv_run.log"; }
[ -f "$OUT/conv_big.log" ] && { echo "== convolution: over 2^31 elements"; grep -E "^test |PASSED|FAILED|panicked|outside" "$OUT/conv_big.log" | cut -c1-200; }
[ -f "$OUT/conv_sanitizer.log" ] && { echo "== convolution: compute-sanitizer"; cat "$OUT/conv_sanitizer.log"; }
[ -f "$OUT/bench_conv.log" ] && { echo "== convolution vs cuDNN"; cat "$OUT/bench_conv.log"; }
[ -f "$OUT/exp.log" ] && { echo "== experiments"; grep -vE "^(compiling|warm)" "$OUT/exp.log" | tail -60; }
[ -f "$OUT/bench_sm80.log" ] && { echo "== sm80-class vs vendor"; tail -4 "$OUT/bench_sm80.log"; }
[ -f "$OUT/sweep.log" ] && { echo "== the sweep (bench gemm --sweep, 3 rounds)"; cut -c1-170 "$OUT/sweep.log"; }
for f in "$OUT"/sweep_ab_*.log; do
  [ -f "$f" ] && { echo "== ragged and skinny, $(basename "$f" .log)"; grep -E "^(ragged|skinny|  )" "$f" | cut -c1-150; }
done
echo "== tests"; cat "$OUT/tests_summary.txt"; echo "test binaries failing: $fails"
exit 0
