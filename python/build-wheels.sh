#!/usr/bin/env bash
# What `python/gpu-check.sh` installs on the GPU host, built here: the release abi3 wheel
# with the cuda feature in `.whl/`, and the test tools (pytest, hypothesis and their
# dependencies) as CPython 3.12 manylinux wheels in `.whl/deps/`. `.whl/` is git-ignored:
# carry it to the host with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${TESSERA_BUILD_VENV:-$PWD/target/wheel-venv}
if [ ! -x "$venv/bin/maturin" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check 'maturin>=1.9.4,<2'
fi
rm -rf .whl && mkdir -p .whl/deps
(cd python && "$venv/bin/maturin" build --release --features cuda --out ../.whl)
"$venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64 \
  -d .whl/deps pytest hypothesis
ls -l .whl .whl/deps
du -sh .whl
