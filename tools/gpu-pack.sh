#!/usr/bin/env bash
# Builds the release test binaries and the tessera tool with the `cuda` feature and copies
# them (the test binaries that need a GPU or NVRTC; the rest run here), with gpu-visit.sh, into .gpu/ (git-ignored) for one visit to the GPU host, where
# `bash .gpu/gpu-visit.sh` runs everything. See docs/gpu.md. With OLD=REV it also builds
# the tessera tool of commit REV (in a worktree, its own target folder) as .gpu/tessera-old,
# for gpu-exp.sh's interleaved comparison of two versions.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/tests
cargo build --release --features cuda --bin tessera
cargo build --release -p tessera-kernels --features bench --example sm90_timeline --example launch_overhead
cargo build --release --features cuda --example mlp
cargo test --release --workspace --features cuda --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    name = m.get("target", {}).get("name", "")
    gpu = "gpu" in name or name.endswith("nvrtc") or "nvrtc_" in name
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"] and gpu:
        shutil.copy(m["executable"], ".gpu/tests/" + m["target"]["name"])
'
cp target/release/tessera target/release/examples/sm90_timeline target/release/examples/launch_overhead target/release/examples/mlp tools/gpu-visit.sh tools/gpu-exp.sh .gpu/
if [ -n "${OLD:-}" ]; then
  rm -rf target/old-src && git worktree prune
  git worktree add --detach target/old-src "$OLD" >/dev/null
  (cd target/old-src && CARGO_TARGET_DIR=../old cargo build --release --features cuda --bin tessera)
  cp target/old/release/tessera .gpu/tessera-old
  git worktree remove --force target/old-src
fi
du -sh .gpu
