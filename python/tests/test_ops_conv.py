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
    # Few channels, wide rows: the window load (phase planes, batched over output rows).
    ((1, 3, 48, 224), (64, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # a stem, C = 3
    ((2, 4, 30, 200), (24, 5, 4), (2, 2), (2, 1, 1, 2), (1, 2)),  # C = 4, dilation along W
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


# ---------------------------------------------------------------------------------------------
# The custom op `torch.ops.tessera.conv2d`: opcheck, fake tensors, torch.compile, autograd


# `torch.ops.tessera.*` are registered when tessera.ops first loads PyTorch (an op's first call).
ops._ops()


def op_args(x, w, bias=None, residual=None, c=None, stride=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1),
            epilogue="acc", alpha=1.0, beta=0.0, out_dtype=None):
    """The op's positional arguments, in its schema's order."""
    return (x, w, bias, residual, c, list(stride), list(pad), list(dil), epilogue, alpha, beta, out_dtype)


def out_size(h, r, stride, lo, hi, dil):
    return (h + lo + hi - dil * (r - 1) - 1) // stride + 1


OP_CASES = [
    # (N, C, H, W), (K, R, S), stride, padding (t, b, l, r), dilation
    ((1, 5, 6, 7), (3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # odd sizes everywhere
    ((2, 3, 9, 8), (5, 3, 2), (2, 3), (1, 2, 0, 1), (2, 1)),  # strides, asymmetric pad, dilation
    ((1, 7, 5, 5), (2, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1x1
]
OP_EPILOGUES = ["acc", "acc + bias_col", "bias_residual_relu", "bias_relu_residual"]


def op_inputs(case, epilogue, dtype=torch.bfloat16):
    """CPU channels-last inputs of a case, the op's arguments for `epilogue`, and the float64
    result that PyTorch computes for them."""
    (n, c, h, wd), (k, r, s), stride, pad, dil = case
    x = rand(n, c, h, wd, dtype=dtype, seed=11)
    w = rand(k, c, r, s, dtype=dtype, seed=12) * 0.3
    p, q = out_size(h, r, stride[0], pad[0], pad[1], dil[0]), out_size(wd, s, stride[1], pad[2], pad[3], dil[1])
    bias = rand(k, dtype=dtype, seed=13) if epilogue != "acc" else None
    residual = rand(n, k, p, q, dtype=dtype, seed=14) if "residual" in epilogue else None
    order = {"acc": "acc", "acc + bias_col": "bias"}.get(epilogue, epilogue)
    want = expected(x, w, bias, residual, stride, pad, dil, order)
    args = op_args(channels_last(x, "cpu"), channels_last(w, "cpu"), bias,
                   None if residual is None else channels_last(residual, "cpu"), None, stride, pad, dil, epilogue)
    return args, want, bound(x, w, stride, pad, dil, dtype)


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: "x".join(map(str, c[0])) + f"_k{c[1][0]}r{c[1][1]}s{c[1][2]}")
@pytest.mark.parametrize("epilogue", OP_EPILOGUES)
def test_the_op_passes_opcheck_and_matches_pytorch(case, epilogue):
    args, want, tol = op_inputs(case, epilogue)
    # Its schema (no input mutated or aliased), the fake implementation against the real one
    # (shape, type, strides), its autograd registration, and tracing with dynamic shapes.
    torch.library.opcheck(torch.ops.tessera.conv2d.default, args)
    y = torch.ops.tessera.conv2d(*args)
    assert y.shape == want.shape and y.dtype == torch.bfloat16
    n, k, p, q = y.shape
    assert y.stride() == (p * q * k, 1, q * k, k)
    err = (y.double() - want).abs().max().item()
    assert err <= tol, (err, epilogue, case)


def test_the_op_with_c_and_out_dtype_passes_opcheck():
    case = OP_CASES[1]
    args, want, _ = op_inputs(case, "acc", dtype=torch.float16)
    c = channels_last(rand(*want.shape, dtype=torch.float32, seed=15), "cpu")
    args = args[:4] + (c,) + args[5:8] + ("alpha * acc + beta * c", 0.5, 2.0, torch.float32)
    torch.library.opcheck(torch.ops.tessera.conv2d.default, args)
    y = torch.ops.tessera.conv2d(*args)
    assert y.dtype == torch.float32
    err = (y.double() - (0.5 * want + 2.0 * c.double())).abs().max().item()
    assert err <= 1e-3, err


def test_the_fake_implementation_gives_shape_type_and_channels_last_strides():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def cl_empty(shape, dtype, device):
        n, c, h, w = shape
        return torch.empty_strided(shape, (h * w * c, 1, w * c, c), dtype=dtype, device=device)

    with FakeTensorMode():
        # No GPU is needed: fake CUDA tensors carry shapes, strides and a device, no data.
        for case in OP_CASES + CASES:
            (n, c, h, wd), (k, r, s), stride, pad, dil = case
            x = cl_empty((n, c, h, wd), torch.float16, "cuda")
            w = cl_empty((k, c, r, s), torch.float16, "cuda")
            y = torch.ops.tessera.conv2d(*op_args(x, w, stride=stride, pad=pad, dil=dil, out_dtype=torch.float32))
            p, q = out_size(h, r, stride[0], pad[0], pad[1], dil[0]), out_size(wd, s, stride[1], pad[2], pad[3], dil[1])
            assert tuple(y.shape) == (n, k, p, q), case
            assert y.stride() == (p * q * k, 1, q * k, k), case
            assert (y.dtype, y.device.type) == (torch.float32, "cuda")
        # The fake checks what the real op checks, with the same words.
        x = cl_empty((2, 8, 5, 5), torch.bfloat16, "cuda")
        w = cl_empty((4, 8, 3, 3), torch.bfloat16, "cuda")
        with pytest.raises(ValueError, match=r"argument 'x'.*dimension C \(size 8\) has stride 25"):
            torch.ops.tessera.conv2d(*op_args(torch.empty(2, 8, 5, 5, dtype=torch.bfloat16, device="cuda"), w, pad=(1, 1, 1, 1)))
        with pytest.raises(ValueError, match=r"reads residual; argument 'residual' is missing"):
            torch.ops.tessera.conv2d(*op_args(x, w, torch.empty(4, dtype=torch.bfloat16, device="cuda"), epilogue="bias_residual_relu"))
        with pytest.raises(ValueError, match=r"argument 'bias' is on cpu but 'x' is on cuda"):
            torch.ops.tessera.conv2d(*op_args(x, w, torch.empty(4, dtype=torch.bfloat16), epilogue="acc + bias_col"))


def test_an_nchw_input_is_refused_through_the_op_with_the_same_words():
    w = channels_last(rand(4, 8, 3, 3), "cpu")
    nchw = rand(2, 8, 5, 5)
    rule = r"conv2d: argument 'x'.*dimension C \(size 8\) has stride 25"
    with pytest.raises(ValueError, match=rule) as wrapper:
        ops.conv2d(nchw, w, padding=1)
    with pytest.raises(ValueError, match=rule) as op:
        torch.ops.tessera.conv2d(*op_args(nchw, w, pad=(1, 1, 1, 1)))
    assert str(op.value) == str(wrapper.value)
    # Traced, the fake implementation refuses it: torch.compile's error carries our ValueError.
    f = torch.compile(lambda a, b: ops.conv2d(a, b, padding=1), backend="eager", fullgraph=True)
    with pytest.raises(RuntimeError) as traced:
        f(nchw, w)
    assert f"ValueError({str(op.value)!r})" in str(traced.value)


def test_torch_compile_traces_conv2d_without_graph_breaks(device):
    # A ResNet basic block, y = relu(conv(relu(conv(x) + b1)) + b2 + x), in one graph.
    x = channels_last(rand(2, 6, 7, 5, seed=20), device)
    w1, w2 = (channels_last(rand(6, 6, 3, 3, seed=s) * 0.3, device) for s in (21, 22))
    b1, b2 = rand(6, seed=23).to(device), rand(6, seed=24).to(device)

    def block(x, w1, b1, w2, b2):
        h = ops.conv2d(x, w1, b1, padding=1, epilogue="relu(acc + bias_col)")
        return ops.conv2d(h, w2, b2, x, padding=(1, 1, 1, 1), epilogue="bias_residual_relu")

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        inner = "aot_eager" if device == "cpu" else "inductor"
        return torch._dynamo.lookup_backend(inner)(gm, example_inputs)

    torch._dynamo.reset()
    got = torch.compile(block, backend=backend, fullgraph=True)(x, w1, b1, w2, b2)
    assert len(graphs) == 1 and str(graphs[0].graph).count("tessera.conv2d") == 2
    assert got.shape == x.shape and got.stride() == x.stride()
    # PyTorch in float64, on the block's rounded intermediate (h is bf16 in both).
    cpu = [t.cpu() for t in (x, w1, b1, w2, b2)]
    h = torch.relu(expected(cpu[0], cpu[1], cpu[2], None, (1, 1), (1, 1, 1, 1), (1, 1), "bias")).to(torch.bfloat16)
    want = expected(h, cpu[3], cpu[4], cpu[0], (1, 1), (1, 1, 1, 1), (1, 1), "bias_residual_relu")
    err = (got.cpu().double() - want).abs().max().item()
    assert err <= bound(h, cpu[3], (1, 1), (1, 1, 1, 1), (1, 1), torch.bfloat16) + 2.0**-6 * want.abs().max().item(), err


def test_torch_compile_writes_into_out():
    x, w = channels_last(rand(1, 4, 5, 6, seed=30), "cpu"), channels_last(rand(3, 4, 3, 2, seed=31), "cpu")
    out = channels_last(torch.zeros(1, 3, 2, 5, dtype=torch.bfloat16), "cpu")
    f = torch.compile(lambda x, w, out: ops.conv2d(x, w, stride=(2, 1), padding=(0, 1, 0, 0), out=out), backend="aot_eager", fullgraph=True)
    assert f(x, w, out) is out
    want = expected(x, w, None, None, (2, 1), (0, 1, 0, 0), (1, 1), "acc")
    assert (out.double() - want).abs().max().item() <= bound(x, w, (2, 1), (0, 1, 0, 0), (1, 1), torch.bfloat16)


def test_conv2d_is_forward_only():
    x = channels_last(rand(1, 4, 5, 5, seed=40), "cpu")
    w = channels_last(rand(3, 4, 3, 3, seed=41), "cpu").requires_grad_()
    # The forward runs (a module's parameters require grad even in inference) ...
    y = ops.conv2d(x, w, padding=1)
    assert y.requires_grad
    # ... and a backward through it is refused, naming what wanted the gradient.
    with pytest.raises(RuntimeError, match=r"conv2d: argument 'w' requires grad .* the op is forward-only"):
        y.float().sum().backward()
    with torch.no_grad():
        assert not ops.conv2d(x, w, padding=1).requires_grad
    # out= takes no part in autograd: refused while an input requires grad, as PyTorch's ops.
    out = channels_last(torch.zeros(1, 3, 5, 5, dtype=torch.bfloat16), "cpu")
    with pytest.raises(RuntimeError, match=r"conv2d: argument 'out' is given but argument 'w' requires grad"):
        ops.conv2d(x, w, padding=1, out=out)
    with torch.no_grad():
        ops.conv2d(x, w, padding=1, out=out)
    assert out.abs().sum().item() > 0
