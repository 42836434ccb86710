#!/usr/bin/env bash
# Compiles the GEMM kernels of a fixed list of plans (the Hopper kernel's schedules, cluster,
# stream-K, epilogue paths, tree epilogues and debugging timelines, and the sm80-class kernel)
# to CUBIN with NVRTC, without a GPU, into the folder DIR: `tools/cubin-snap.sh DIR`. Two
# snapshots (before and after an edit of the kernel source) compared with `cmp` show whether
# the edit changes any compiled kernel, which lets a refactor that keeps every CUBIN byte for
# byte land without a GPU visit:
#   tools/cubin-snap.sh /tmp/before   # on the old source
#   tools/cubin-snap.sh /tmp/after    # after the edit (rebuild the tools first)
#   for f in /tmp/before/*.cubin; do cmp "$f" "/tmp/after/${f##*/}"; done
# Needs the release tools (`cargo build --release --features cuda --bin tessera --examples -p
# tessera -p tessera-kernels`: the kernel sources are compiled into them, so rebuild after
# every edit) and NVRTC: LD_LIBRARY_PATH and TESSERA_CUDA_INCLUDE as .ci/run sets them
# (target/nvrtc-venv after a CI run).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: tools/cubin-snap.sh DIR}
mkdir -p "$dir"
[ -n "${TESSERA_CUDA_INCLUDE:-}" ] || { echo "cubin-snap: set TESSERA_CUDA_INCLUDE and LD_LIBRARY_PATH for NVRTC (see .ci/run)" >&2; exit 1; }
plan=target/release/tessera
compile=target/release/examples/sm90_compile_file
tree=target/release/examples/sm90_tree_source
# Lines: NAME|plan|ARGS (`tessera plan gemm ARGS`, for sm_90a unless ARGS has --arch; an
# epilogue the fused path cannot run gives the kernel with the generated tree epilogue) or
# NAME|tree|ARGS (sm90_tree_source: a named fusion's tree kernel as the tree launcher compiles
# it), optionally followed by |DEFINES, `NAME=VALUE` words put as #define lines before the
# source (the debugging timeline's builds as sm90_timeline makes them for 132 SMs).
tl="TESSERA_SM90_TIMELINE=101376 TESSERA_SM90_CLOCK=528"
while IFS='|' read -r name how args defines; do
  [ -z "$name" ] && continue
  arch=sm_90a
  if [[ " $args " =~ \ --arch\ ([a-z0-9_]+)\  ]]; then arch=${BASH_REMATCH[1]}; fi
  eval "defines=\"$defines\""
  : > "$dir/$name.cu"
  for d in $defines; do echo "#define ${d%%=*} ${d#*=}" >> "$dir/$name.cu"; done
  if [ "$how" = plan ]; then
    [[ " $args " == *" --arch "* ]] || args="--arch sm_90a $args"
    eval "$plan plan gemm $args --emit-cuda-only" >> "$dir/$name.cu"
  else
    eval "$tree $args" >> "$dir/$name.cu"
  fi
  "$compile" "$dir/$name.cu" "$dir/$name.cubin" tessera_gemm "$arch" > "$dir/$name.log" 2>&1
  echo "$name: $(md5sum < "$dir/$name.cubin" | cut -c1-12) $(grep -o 'Used [0-9]* registers\|[0-9]* bytes spill stores' "$dir/$name.log" | tr '\n' ' ')"
done <<'PLANS'
plain|plan|--m 4096 --n 4096 --k 4096
cooperative|plan|--m 4096 --n 4096 --k 4096 --schedule cooperative
cluster|plan|--m 4096 --n 4096 --k 4096 --cluster 2
streamk|plan|--m 8192 --n 8192 --k 8192
decode|plan|--m 16 --n 4096 --k 4096
decode_fused|plan|--m 16 --n 4096 --k 4096 --epilogue bias,relu
fused|plan|--m 4096 --n 4096 --k 4096 --epilogue bias,gelu_tanh,aux
fused_pp|plan|--m 4096 --n 4096 --k 4096 --epilogue bias,relu --schedule pingpong
bias|tree|bias
bias_pp|tree|bias -1 0 pingpong
relu_bias|tree|relu_bias
gelu_bias_pp|tree|gelu_bias -1 0 pingpong
relu_aux_bias|tree|relu_aux_bias
gelu_aux_bias|tree|gelu_aux_bias
drelu|tree|drelu
dgelu|tree|dgelu
drelu_bgrad_c_sk|tree|drelu_bgrad -1 0.5 auto 8192x8192x8192
dgelu_bgrad|tree|dgelu_bgrad
dgelu_bgrad_pp|tree|dgelu_bgrad -1 0 pingpong
cluster_a|plan|--m 4096 --n 4096 --k 4096 --cluster 2 --share a
cluster_fused|plan|--m 4096 --n 4096 --k 4096 --cluster 2 --epilogue bias,relu,aux
one_consumer|plan|--m 4096 --n 4096 --k 4096 --tile 64x256x64 --schedule cooperative
pp_bm64|plan|--m 4096 --n 4096 --k 4096 --tile 64x256x64 --schedule pingpong
tma_off|plan|--m 4096 --n 4096 --k 4096 --tma-store off
c_bias_relu|plan|--m 4096 --n 4096 --k 4096 --epilogue c,bias,relu
c_rowbias_pp|plan|--m 4096 --n 4096 --k 4096 --epilogue c,rowbias,gelu --schedule pingpong
rowbias_aux|plan|--m 4096 --n 4096 --k 4096 --epilogue rowbias,gelu,aux
fp32_out|plan|--m 4096 --n 4096 --k 4096 --out fp32 --epilogue rowbias,gelu_tanh,aux
fp16_gelu|plan|--m 4096 --n 4096 --k 4096 --dtype fp16 --epilogue bias,gelu_tanh,aux
streamk_fused|plan|--m 8192 --n 8192 --k 8192 --epilogue bias,gelu_tanh,aux
streamk_c|plan|--m 8192 --n 8192 --k 8192 --epilogue c,rowbias,relu
select1|plan|--m 4096 --n 4096 --k 4096 --epilogue 'select(row < 100, relu(acc), acc)'
select2|plan|--m 4096 --n 4096 --k 4096 --epilogue 'select(row < 100, select(col < 50, relu(acc), acc), acc)'
residual|plan|--m 4096 --n 4096 --k 4096 --epilogue 'relu(acc + residual)'
aux_in|plan|--m 4096 --n 4096 --k 4096 --epilogue 'acc * aux_in'
tree_fp32|plan|--m 4096 --n 4096 --k 4096 --out fp32 --epilogue drelu_bgrad
relu_aux_bias_coop|tree|relu_aux_bias -1 0 cooperative
drelu_coop|tree|drelu -1 0 cooperative
drelu_bgrad_c|tree|drelu_bgrad 1 0.5
plain_tl|plan|--m 4096 --n 4096 --k 4096|$tl
cooperative_tl|plan|--m 4096 --n 4096 --k 4096 --schedule cooperative|$tl
streamk_tl|plan|--m 8192 --n 8192 --k 8192|$tl
fused_tl|plan|--m 4096 --n 4096 --k 4096 --epilogue bias,gelu_tanh,aux|$tl
relu_aux_bias_tl|tree|relu_aux_bias|$tl
dgelu_bgrad_pp_tl|tree|dgelu_bgrad -1 0 pingpong|$tl
relu_aux_bias_clock|tree|relu_aux_bias|TESSERA_SM90_CLOCK=528
plain_clock|plan|--m 4096 --n 4096 --k 4096|TESSERA_SM90_CLOCK=528
sm80|plan|--arch sm_80 --m 4096 --n 4096 --k 4096
sm80_colmajor|plan|--arch sm_80 --m 4096 --n 4096 --k 4096 --a-major col --b-major row
sm80_fp16|plan|--arch sm_80 --m 4096 --n 4096 --k 4096 --dtype fp16
sm80_odd|plan|--arch sm_80 --m 1000 --n 1000 --k 1000
sm86|plan|--arch sm_86 --m 4096 --n 4096 --k 4096
sm80_tree|plan|--arch sm_80 --m 4096 --n 4096 --k 4096 --epilogue drelu_bgrad
sm80_select|plan|--arch sm_80 --m 4096 --n 4096 --k 4096 --epilogue 'select(row < 100, relu(acc), acc)'
PLANS
