"""The device rule of the ops' tests: a test that computes runs on the CPU (the float64
reference) and on CUDA (the kernels); the CUDA case skips with its reason where there is no
GPU or the package was built without the `cuda` feature, and fails instead when
`TESSERA_REQUIRE_GPU=1` (the GPU host), so a broken driver cannot pass."""

from __future__ import annotations

import os

import pytest


def cuda_or_skip():
    import torch

    import tessera.ops as ops

    why = None
    if not ops.cuda_available():
        why = "the package was built without the cuda feature"
    elif not torch.cuda.is_available():
        why = "no CUDA device"
    if why:
        if os.environ.get("TESSERA_REQUIRE_GPU") == "1":
            pytest.fail(f"TESSERA_REQUIRE_GPU=1 but {why}")
        pytest.skip(why)


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    if request.param == "cuda":
        cuda_or_skip()
    return request.param
