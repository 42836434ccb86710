#!/usr/bin/env bash
# The Python package on the GPU host, in one command, building nothing:
#
#   bash python/gpu-check.sh
#
# from the repository root, with `.whl/` (git-ignored) carried beside it: the wheel built on
# the development machine (`python/build-wheels.sh` writes it) and the test tools' wheels in
# `.whl/deps/`. It installs them into a folder of its own ($SITE, default /tmp/site; nothing
# else is touched), runs the GPU tests of `tessera.ops` against the PyTorch installed there
# with the GPU required (a missing device or a package built without the cuda feature fails
# rather than skips), then the benchmark. Logs and JSON go to $OUT (default ./gpu-check-out).
#
# Switches: TESTS=0 skips the tests, BENCH=0 the benchmark (each fits a 10-minute command
# alone; compiled kernels are kept in $TESSERA_CACHE_DIR, default /tmp/tessera-cache, so a
# second run compiles nothing), SHAPES=quick benchmarks two shapes only, ALL=1 also runs the
# whole Python suite (the algebra too).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-$PWD/gpu-check-out}
SITE=${SITE:-/tmp/site}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
log="$OUT/gpu-check.log"
exec > >(tee "$log") 2>&1

echo "== gpu-check $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
"$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name() if torch.cuda.is_available() else None)'

# Install: pip without the network or dependencies; a wheel is a zip of what goes into
# site-packages, so unzipping is the fallback where pip is missing.
ls .whl/*.whl .whl/deps/*.whl >/dev/null || { echo "gpu-check: no wheels in .whl/ (run python/build-wheels.sh and carry .whl)"; exit 2; }
rm -rf "$SITE" && mkdir -p "$SITE"
if "$PY" -m pip --version >/dev/null 2>&1; then
  "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --target "$SITE" .whl/*.whl .whl/deps/*.whl
else
  for w in .whl/*.whl .whl/deps/*.whl; do "$PY" -m zipfile -e "$w" "$SITE"; done
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TESSERA_CUDA_INCLUDE=${TESSERA_CUDA_INCLUDE:-/usr/local/cuda/include}
export TESSERA_REQUIRE_GPU=1
# One kernel cache for the tests and the benchmark: each kernel is compiled once.
export TESSERA_CACHE_DIR=${TESSERA_CACHE_DIR:-/tmp/tessera-cache}
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-quick}
"$PY" -c 'import tessera, tessera.ops as o; print("tessera", tessera.__version__, "from", tessera.__file__, "cuda feature", o.cuda_available())'

status=0
if [ "${TESTS:-1}" != 0 ]; then
  echo "== GPU tests"
  "$PY" -m pytest -p no:cacheprovider -rs -q --durations=10 --junitxml="$OUT/tests.xml" \
    python/tests/test_ops_torch.py python/tests/test_ops_intake.py python/tests/test_ops_conv.py || status=1
fi

if [ "${ALL:-0}" = 1 ]; then
  echo "== the whole Python suite"
  "$PY" -m pytest -p no:cacheprovider -q python/tests || status=1
fi

if [ "${BENCH:-1}" != 0 ]; then
  echo "== benchmark"
  "$PY" python/bench/bench_gemm.py --shapes "${SHAPES:-standard}" --json "$OUT/bench_gemm.json" || status=1
fi

echo "== gpu-check: $([ $status = 0 ] && echo PASSED || echo FAILED); logs in $OUT"
exit $status
