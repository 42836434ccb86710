#!/usr/bin/env bash
# Compiles the Hopper kernel of a fixed list of plans to CUBIN with NVRTC, without a GPU, into
# the folder DIR: `tools/cubin-snap.sh DIR`. Two snapshots (before and after an edit of the
# kernel source) compared with `cmp` show whether the edit changes any compiled kernel, which
# lets a refactor that keeps every CUBIN byte for byte land without a GPU visit. Needs the
# release tools (`cargo build --release --features cuda --bin tessera --examples -p tessera
# -p tessera-kernels`) and NVRTC: LD_LIBRARY_PATH and TESSERA_CUDA_INCLUDE as .ci/run sets
# them (target/nvrtc-venv after a CI run).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: tools/cubin-snap.sh DIR}
mkdir -p "$dir"
[ -n "${TESSERA_CUDA_INCLUDE:-}" ] || { echo "cubin-snap: set TESSERA_CUDA_INCLUDE and LD_LIBRARY_PATH for NVRTC (see .ci/run)" >&2; exit 1; }
plan=target/release/tessera
compile=target/release/examples/sm90_compile_file
tree=target/release/examples/sm90_tree_source
# Lines: NAME|plan ARGS (tessera plan gemm) or NAME|tree ARGS (sm90_tree_source: a named
# fusion's tree kernel as the tree launcher compiles it).
while IFS='|' read -r name how args; do
  [ -z "$name" ] && continue
  if [ "$how" = plan ]; then
    eval "$plan plan gemm --arch sm_90a $args --emit-cuda-only" > "$dir/$name.cu"
  else
    eval "$tree $args" > "$dir/$name.cu"
  fi
  "$compile" "$dir/$name.cu" "$dir/$name.cubin" > "$dir/$name.log" 2>&1
  echo "$name: $(md5sum < "$dir/$name.cubin" | cut -c1-12) $(grep -o 'Used [0-9]* registers\|[0-9]* bytes spill stores' "$dir/$name.log" | tr '\n' ' ')"
done <<'PLANS'
plain|plan|--m 4096 --n 4096 --k 4096
cooperative|plan|--m 4096 --n 4096 --k 4096 --schedule cooperative
cluster|plan|--m 4096 --n 4096 --k 4096 --cluster 2
streamk|plan|--m 8192 --n 8192 --k 8192
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
PLANS
