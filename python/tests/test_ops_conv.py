"""`tessera.ops.conv2d` against PyTorch's own convolution in float64.

Each computing test runs on the CPU (the op's float64 reference: the plumbing, the
geometry, the epilogue over the GEMM view) and on CUDA (the library's `Conv2d`), written
once; the CUDA case skips with its reason without a GPU, and fails instead with
`TESSERA_REQUIRE_GPU=1`. The reference is independent of tessera: PyTorch's `conv2d` in
float64 on the same rounded inputs, the epilogue written out in PyTorch. Tolerances come from
sum |x||w| (the accumulation's scale), in units of the output type's last place.
"""

from __future__ import annotations

import os

import pytest

try:
    import torch
except ImportError:
    if os.environ.get("TESSERA_REQUIRE_TORCH") == "1":
        raise
    pytest.skip("PyTorch is not installed", allow_module_level=True)
F = torch.nn.functional

import tessera.ops as ops  # noqa: E402


from devices import cuda_or_skip, device  # noqa: E402,F401


def rand(*shape, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def channels_last(t, device):
    return t.to(device).contiguous(memory_format=torch.channels_last)


def expected(x, w, bias, residual, stride, pad, dil, order):
    """float64: PyTorch's conv2d (asymmetric padding as an explicit pad), then the epilogue."""
    t, b, l, r = pad
    acc = F.conv2d(F.pad(x.double(), (l, r, t, b)), w.double(), stride=stride, dilation=dil)
    bias64 = 0.0 if bias is None else bias.double().view(1, -1, 1, 1)
    if order == "acc":
        return acc
    if order == "bias":
        return acc + bias64
    if order == "bias_residual_relu":
        return torch.relu(acc + bias64 + residual.double())
    return torch.relu(acc + bias64) + residual.double()


def bound(x, w, stride, pad, dil, dtype):
    """A few units of the output's last place at the scale of sum |x| |w| (the largest the
    accumulation can be), plus the residual's rounding."""
    t, b, l, r = pad
    s = F.conv2d(F.pad(x.double().abs(), (l, r, t, b)), w.double().abs(), stride=stride, dilation=dil)
    eps = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-20}[dtype]
    return 4 * eps * (s.max().item() + 4.0)


CASES = [
    # (N, C, H, W), (K, R, S), stride, padding (t, b, l, r), dilation
    ((2, 64, 8, 8), (64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # a ResNet 3x3 layer, small
    ((2, 3, 15, 15), (16, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # the stem, C = 3
    ((1, 127, 6, 7), (24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # odd channels
    ((3, 32, 9, 9), (16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1x1: x read in place
    ((2, 24, 13, 11), (8, 3, 5), (2, 3), (1, 2, 0, 1), (2, 1)),  # R != S, strides, asymmetric pad, dilation
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + f"_k{c[1][0]}r{c[1][1]}s{c[1][2]}")
@pytest.mark.parametrize("order", ["acc", "bias", "bias_residual_relu", "bias_relu_residual"])
def test_conv2d_matches_pytorch_in_float64(device, case, order):
    (n, c, h, wd), (k, r, s), stride, pad, dil = case
    x, w = rand(n, c, h, wd, seed=1), rand(k, c, r, s, seed=2) * 0.2
    bias = rand(k, seed=3)
    ref_shape = expected(x, w, None, None, stride, pad, dil, "acc").shape
    residual = rand(*ref_shape, seed=4)
    want = expected(x, w, bias, residual, stride, pad, dil, order)
    args = dict(stride=stride, padding=pad, dilation=dil)
    if order == "acc":
        y = ops.conv2d(channels_last(x, device), channels_last(w, device), **args)
    elif order == "bias":
        y = ops.conv2d(channels_last(x, device), channels_last(w, device), bias.to(device), **args)
    else:
        y = ops.conv2d(channels_last(x, device), channels_last(w, device), bias.to(device),
                       channels_last(residual, device), epilogue=order, **args)
    assert y.shape == want.shape and y.dtype == torch.bfloat16
    # y is channels-last in memory, whatever the flag: its strides say so.
    nn_, kk, pp, qq = y.shape
    assert y.stride() == (pp * qq * kk, 1, qq * kk, kk)
    err = (y.cpu().double() - want).abs().max().item()
    assert err <= bound(x, w, stride, pad, dil, torch.bfloat16), (err, order, case)


def test_fp16_in_fp32_out(device):
    x, w = rand(2, 16, 7, 7, dtype=torch.float16, seed=5), rand(8, 16, 3, 3, dtype=torch.float16, seed=6)
    y = ops.conv2d(channels_last(x, device), channels_last(w, device), padding=1, out_dtype=torch.float32)
    assert y.dtype == torch.float32
    want = expected(x, w, None, None, (1, 1), (1, 1, 1, 1), (1, 1), "acc")
    assert (y.cpu().double() - want).abs().max().item() <= bound(x, w, (1, 1), (1, 1, 1, 1), (1, 1), torch.float32) + 1e-3


def test_an_output_that_is_nchw_in_memory_is_refused(device):
    # The extension's bug: an output made NCHW (torch.zeros drops the memory format) handed
    # over as channels-last. The strides are read, not the flag: refused, naming 'out'.
    x, w = channels_last(rand(2, 8, 5, 5), device), channels_last(rand(4, 8, 3, 3), device)
    out = torch.zeros(2, 4, 5, 5, dtype=torch.bfloat16, device=device)
    with pytest.raises(ValueError, match=r"argument 'out'.*dimension K \(size 4\) has stride 25"):
        ops.conv2d(x, w, padding=1, out=out)
    assert out.abs().sum().item() == 0


def test_nchw_and_sliced_inputs_are_refused(device):
    w = channels_last(rand(4, 8, 3, 3), device)
    with pytest.raises(ValueError, match=r"argument 'x'.*dimension C \(size 8\) has stride 25"):
        ops.conv2d(rand(2, 8, 5, 5).to(device), w, padding=1)
    wide = channels_last(rand(2, 8, 5, 10), device)
    with pytest.raises(ValueError, match=r"argument 'x'"):
        ops.conv2d(wide[:, :, :, ::2], w, padding=1)


def test_tensors_the_epilogue_does_not_read_or_lacks_are_refused(device):
    x, w = channels_last(rand(1, 8, 4, 4), device), channels_last(rand(4, 8, 1, 1), device)
    bias = rand(4).to(device)
    res = channels_last(rand(1, 4, 4, 4), device)
    with pytest.raises(ValueError, match=r"argument 'bias' is given but the epilogue `acc`"):
        ops.conv2d(x, w, bias, epilogue="acc")
    with pytest.raises(ValueError, match=r"reads residual; argument 'residual' is missing"):
        ops.conv2d(x, w, bias, epilogue="bias_residual_relu")
    with pytest.raises(ValueError, match=r"argument 'epilogue' must say how the residual"):
        ops.conv2d(x, w, bias, res)
    with pytest.raises(ValueError, match=r"argument 'bias' has shape \(3,\)"):
        ops.conv2d(x, w, bias[:3])
    with pytest.raises(ValueError, match=r"conv2d: .*epilogue"):
        ops.conv2d(x, w, epilogue="relu(acc +")


def test_a_filter_larger_than_the_padded_input_is_an_error_not_a_crash():
    x, w = channels_last(rand(1, 8, 2, 2), "cpu"), channels_last(rand(4, 8, 5, 5), "cpu")
    with pytest.raises(ValueError, match=r"conv2d"):
        ops.conv2d(x, w)
