#!/usr/bin/env bash
# Builds the release test binaries and the tessera tool with the `cuda` feature and copies
# them, with gpu-visit.sh, into .gpu/ (git-ignored) for one visit to the GPU host, where
# `bash .gpu/gpu-visit.sh` runs everything. See ../shared/GPU.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/tests
cargo build --release --features cuda --bin tessera
cargo test --release --workspace --features cuda --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], ".gpu/tests/" + m["target"]["name"])
'
cp target/release/tessera tools/gpu-visit.sh .gpu/
du -sh .gpu
