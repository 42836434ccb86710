"""`tessera.ops` on PyTorch tensors, against PyTorch itself.

Each test that computes runs on the CPU (the ops' float64 reference: the plumbing, outputs,
autograd, `torch.compile`) and on CUDA (the kernels), written once: the CUDA case skips with
its reason where there is no GPU or the package was built without the `cuda` feature, and
fails instead when `TESSERA_REQUIRE_GPU=1` (the GPU host), so a broken driver cannot pass.
The rest needs no device at all: the fake implementations, the problem read off strides,
the refusals that name their argument. Every reference is float64 on the same (rounded)
inputs; tolerances are a few units of the output type's last place.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

try:
    import torch
except ImportError:
    if os.environ.get("TESSERA_REQUIRE_TORCH") == "1":
        raise
    pytest.skip("PyTorch is not installed", allow_module_level=True)
F = torch.nn.functional

import tessera  # noqa: E402
import tessera.ops as ops  # noqa: E402
from tessera.ops import _gemm, _reference  # noqa: E402


from devices import cuda_or_skip, device  # noqa: E402,F401


def sizes(device, small, large):
    return small if device == "cpu" else large


def rand(*shape, dtype=torch.bfloat16, device="cpu", scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)


def tol(dtype):
    return {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}[dtype]


def close(got, want, dtype=None):
    t = tol(dtype or got.dtype)
    torch.testing.assert_close(got.double().cpu(), want.double().cpu(), rtol=t, atol=t)


ACTS = {
    "none": lambda x: x,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


# ---------------------------------------------------------------------------------------------
# No device: imports, epilogue descriptions, problems read off strides, fake implementations


def test_import_tessera_ops_does_not_import_torch():
    code = "import sys, tessera, tessera.ops; tessera.ops.describe_epilogue('acc'); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_describe_epilogue_names_inputs_and_outputs():
    d = ops.describe_epilogue("gelu_aux(acc + bias_col + residual)")
    assert (d["inputs"], d["aux"], d["bgrad"], d["sum_k"]) == (("residual", "bias_col"), "out", (), ())
    d = ops.describe_epilogue("bgrad_col(acc * drelu(aux_in_bits)); sum_k_a")
    assert (d["inputs"], d["aux"], d["bgrad"], d["sum_k"]) == (("aux_in_bits",), None, ("col",), ("a",))
    assert ops.describe_epilogue("relu(aux_bits(acc))")["aux"] == "bits"
    assert ops.describe_epilogue("aux(acc, fp32)")["aux"] == "fp32"
    with pytest.raises(ValueError, match="argument 'epilogue'"):
        ops.describe_epilogue("relu(acc +")


def test_storage_orders_come_from_strides():
    w = torch.empty(48, 32)
    p = _gemm.problem("gemm", (64, 32), (32, 1), "bf16", w.t().shape, w.t().stride(), "bf16", None)
    assert (p.m, p.n, p.k, p.batch, p.a, p.b, p.d) == (64, 48, 32, 0, "row", "col", "row")
    # A sliced view keeps its leading dimension; a 3-D A batches, a 2-D B is shared.
    p = _gemm.problem("gemm", (3, 64, 32), (4096, 64, 1), "fp16", (32, 48), (48, 1), "fp16", "fp32")
    assert (p.batch, p.out_dtype, p.d_shape()) == (3, "fp32", (3, 64, 48))
    assert _gemm.matrix(p, 256, "fp16", (32, 48), (48, 1)) == (256, "fp16", (32, 48, 3), (48, 1, 0))
    assert _gemm.matrix(p, 256, "fp16", (3, 64, 32), (4096, 64, 1)) == (256, "fp16", (64, 32, 3), (64, 1, 4096))
    assert _gemm.vector(p, 256, "fp32", (3, 48), (48, 1)) == (256, "fp32", (48, 3), (1, 48))
    # A column-major out makes D column-major.
    out = torch.empty(48, 64).t()
    p = _gemm.problem("gemm", (64, 32), (32, 1), "bf16", (32, 48), (1, 32), "bf16", None, out.shape, out.stride())
    assert p.d == "col" and p.mask_shape() == (48, 4)


def test_bit_masks_are_words_in_bits():
    p = _gemm.Problem(5, 200, 8, 0, "bf16", "bf16", "row", "col", "row")
    assert p.mask_shape() == (5, 8)  # 200 bits padded to 256: 8 words
    assert _gemm.mask(p, 512, (5, 8), (8, 1)) == (512, "words", (5, 200), (256, 1), 40)
    bits = torch.rand(2, 5, 200, generator=torch.Generator().manual_seed(1)) > 0.5
    for major in ("row", "col"):
        words = _reference.pack_mask(bits, major)
        assert words.dtype == torch.int32
        assert torch.equal(_reference.unpack_mask(words, 5, 200, major), bits)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a, b: ops.gemm(torch.zeros(64, 64, dtype=torch.bfloat16)[:, ::2], b), "argument 'a' has strides (64, 2) with no unit stride"),
        (lambda a, b: ops.gemm(a, b[:16]), "argument 'b' has shape (16, 48), expected (32, N)"),
        (lambda a, b: ops.gemm(a, b.half()), "argument 'b' has dtype fp16, 'a' has bf16"),
        (lambda a, b: ops.gemm(a.float(), b.float()), "argument 'a' has dtype fp32, expected bf16 or fp16"),
        (lambda a, b: ops.gemm(a, b, "relu(acc + bias_col)"), "reads bias_col: pass bias="),
        (lambda a, b: ops.gemm(a, b, "relu(acc)", bias=torch.zeros(48)), "argument 'bias' is given but"),
        (lambda a, b: ops.gemm(a, b, "acc + beta * c", c=torch.zeros(64, 48)), "argument 'c' is given but the epilogue `acc + beta * c` does not read it with beta = 0"),
        (lambda a, b: ops.gemm(a, b, out=torch.empty(48, 64)), "argument 'out' has shape (48, 64), expected (64, 48)"),
        (lambda a, b: ops.gemm(a, b, "relu(acc +"), "argument 'epilogue'"),
        (lambda a, b: ops.gemm(a, b, "acc + bias_col", bias=torch.zeros(48)), "argument 'bias' has dtype torch.float32, expected torch.bfloat16"),
        (lambda a, b: ops.gemm(a, b, "acc + residual", residual=torch.zeros(48, 64).bfloat16()), "argument 'residual' has shape (48, 64), expected (64, 48)"),
        (lambda a, b: ops.gemm(a, b, out=torch.zeros(64, 1).bfloat16().expand(64, 48)), "argument 'out' has stride 0 in dimension 1"),
    ],
)
def test_refusals_name_the_argument(call, message):
    a = torch.zeros(64, 64, dtype=torch.bfloat16)[:, :32]
    b = torch.zeros(32, 48, dtype=torch.bfloat16)
    with pytest.raises(ValueError) as e:
        call(a, b)
    assert message in str(e.value)


def test_fake_implementations_give_every_output_shape_and_type():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(3, 64, 32, dtype=torch.float16, device="cuda")
        b = torch.empty(32, 48, dtype=torch.float16, device="cuda")
        r = torch.ops.tessera.gemm(a, b, "relu(aux_bits(acc)); sum_k_b", None, None, None, None, None, 1.0, 0.0, torch.float32)
        got = [(tuple(t.shape), t.dtype, t.device.type) for t in r]
        assert got == [((3, 64, 48), torch.float32, "cuda"), ((3, 64, 4), torch.int32, "cuda"), ((3, 48), torch.float32, "cuda")]
        bias = torch.empty(48, dtype=torch.float16, device="cuda")
        r = torch.ops.tessera.gemm(a[0], b, "bgrad_col(gelu(aux(acc + bias_col)))", None, None, None, None, bias, 1.0, 0.0, None)
        assert [(tuple(t.shape), t.dtype) for t in r] == [((64, 48), torch.float16), ((64, 48), torch.float16), ((48,), torch.float32)]
        x = torch.empty(2, 5, 32, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(16, 32, dtype=torch.bfloat16, device="cuda")
        out, pre = torch.ops.tessera.linear(x, w, None, "gelu", None, "none", True)
        assert (out.shape, pre.shape) == ((2, 5, 16), (2, 5, 16))
        dx, dw, db = torch.ops.tessera.linear_backward(out, x, w, True, None, "none", True, True)
        assert (dx.shape, dw.shape, db.shape) == ((2, 5, 32), (16, 32), (16,))
        y = torch.empty(16, 32, dtype=torch.bfloat16, device="cuda")  # trans_y: N x K
        out, rs = torch.ops.tessera.fused_gemm_epilogue(x[0], y, torch.empty(16, dtype=torch.bfloat16, device="cuda"), False, True, "relu", True)
        assert (out.shape, rs.shape, rs.dtype) == ((5, 16), (5, 4), torch.int32)
        dx, dy, db = torch.ops.tessera.fused_gemm_epilogue_grad(x[0], y, None, out, False, True, "none", True, True, True)
        assert (dx.shape, dy.shape, db.shape) == ((5, 32), (16, 32), (16,))
        # The fakes check what the real ops check.
        with pytest.raises(ValueError, match="reads bias_col"):
            torch.ops.tessera.gemm(a, b, "acc + bias_col", None, None, None, None, None, 1.0, 0.0, None)


# ---------------------------------------------------------------------------------------------
# gemm against PyTorch


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemm_is_linear_then_activation(device, act, dtype):
    m, n, k = sizes(device, (24, 40, 16), (256, 384, 192))
    x = rand(m, k, dtype=dtype, device=device, seed=1)
    w = rand(n, k, dtype=dtype, device=device, scale=k**-0.5, seed=2)
    b = rand(n, dtype=dtype, device=device, scale=0.5, seed=3)
    pre = F.linear(x.double(), w.double(), b.double())
    epilogue = "acc + bias_col" if act == "none" else f"{act}(aux(acc + bias_col))"
    got = ops.gemm(x, w.t(), epilogue, bias=b)
    if act == "none":
        close(got, pre)
        return
    y, aux = got
    assert y.dtype == dtype and aux.dtype == dtype and y.device.type == device
    close(y, ACTS[act](pre))
    close(aux, pre)


def test_gemm_epilogues_against_torch(device):
    m, n, k = sizes(device, (24, 40, 16), (200, 136, 72))
    dt = torch.bfloat16
    a = rand(2, m, k, device=device, seed=4)
    b = rand(k, n, device=device, scale=k**-0.5, seed=5)  # shared by both batches, row-major
    res = rand(2, m, n, dtype=torch.float32, device=device, seed=6)  # the output's type
    brow = rand(m, dtype=torch.float32, device=device, seed=7)
    acc = a.double() @ b.double()
    # Residual and a per-row bias, batched, fp32 out.
    got = ops.gemm(a, b, "relu(acc + bias_row) + residual", bias_row=brow, residual=res, out_dtype=torch.float32)
    assert got.dtype == torch.float32
    close(got, torch.relu(acc + brow.double()[:, None]) + res.double(), dt)
    # The ReLU bit mask, the column sums and the operand sums.
    d, mask, bcol, sa = ops.gemm(a, b, "bgrad_col(relu(aux_bits(acc))); sum_k_a")
    close(d, torch.relu(acc))
    bits = _reference.unpack_mask(mask.cpu(), m, n)
    agree = (bits == (acc.cpu() > 0)).double().mean()
    assert agree > 0.99  # an accumulator within rounding of 0 may go either way
    close(bcol, torch.relu(acc).sum(1), torch.float32 if device == "cpu" else dt)
    close(sa, a.double().sum(2), torch.float32)
    # Into a column-major out, alpha scaling, the mask back in as an input.
    out = torch.empty(2, n, m, dtype=dt, device=device).transpose(1, 2)
    r = ops.gemm(a, b, "alpha * acc * drelu(aux_in_bits)", aux_in=_reference.pack_mask(acc.cpu() > 0, "col").to(device), alpha=0.5, out=out)
    assert r is out
    close(out, 0.5 * acc * (acc > 0))


def test_gemm_out_and_aux_are_written_in_place(device):
    m, n, k = sizes(device, (16, 24, 16), (128, 128, 64))
    a = rand(m, k, device=device, seed=8)
    b = rand(n, k, device=device, seed=9).t()
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
    aux = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
    bcol = torch.full((n,), float("nan"), dtype=torch.float32, device=device)
    d, x, s = ops.gemm(a, b, "bgrad_col(gelu(aux(acc)))", out=out, aux=aux, bgrad_col=bcol)
    assert d is out and x is aux and s is bcol
    acc = a.double() @ b.double()
    close(out, F.gelu(acc))
    close(aux, acc)
    close(bcol, F.gelu(acc).sum(0), torch.bfloat16)
    with pytest.raises(ValueError, match="argument 'bgrad_col' has shape"):
        ops.gemm(a, b, "bgrad_col(acc)", bgrad_col=bcol[:-1])


# ---------------------------------------------------------------------------------------------
# linear and its autograd


def mlp_reference(params, x, acts):
    h = x
    for (w, b), act in zip(params, acts):
        h = ACTS[act](F.linear(h, w, b))
    return h


@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh"])
def test_linear_gradients_match_autograd(device, act):
    t, din, hid, dout = sizes(device, (12, 16, 24, 8), (256, 192, 384, 128))
    x = rand(t, din, device=device, seed=10).requires_grad_()
    w1 = rand(hid, din, device=device, scale=din**-0.5, seed=11).requires_grad_()
    b1 = rand(hid, device=device, scale=0.5, seed=12).requires_grad_()
    w2 = rand(dout, hid, device=device, scale=hid**-0.5, seed=13).requires_grad_()
    b2 = rand(dout, device=device, scale=0.5, seed=14).requires_grad_()
    g = rand(t, dout, device=device, seed=15)
    h1 = ops.linear(x, w1, b1, act)
    y = ops.linear(h1, w2, b2)
    # The second layer fused the first one's derivative (the link), and h1 is used once more
    # directly, so both gradient paths into the first layer are exercised.
    assert hasattr(h1, "_tessera_pre")
    loss = (y.double() * g.double()).sum() + h1.double().sum()
    grads = torch.autograd.grad(loss, [x, w1, b1, w2, b2])
    leaves = [v.detach().double().requires_grad_() for v in (x, w1, b1, w2, b2)]
    X, W1, B1, W2, B2 = leaves
    H1 = ACTS[act](F.linear(X, W1, B1))
    ref = (F.linear(H1, W2, B2) * g.double()).sum() + H1.sum()
    want = torch.autograd.grad(ref, leaves)
    for name, got, w in zip(["x", "w1", "b1", "w2", "b2"], grads, want):
        assert got.shape == w.shape and got.dtype == torch.bfloat16, name
        err = float((got.double() - w).norm() / w.norm())
        assert err < 2e-2, f"{name}: relative error {err:.2e}"


def test_linear_without_grad_stores_no_pre_activation(device):
    x = rand(8, 16, device=device, seed=16)
    w = rand(24, 16, device=device, seed=17)
    with torch.no_grad():
        y = ops.linear(x, w, None, "relu")
    assert not hasattr(y, "_tessera_pre")
    close(y, torch.relu(x.double() @ w.double().t()))


def test_mlp_training_follows_pytorch(device):
    """A small MLP trained with SGD for a few steps: the loss curve with tessera's fused
    layers is PyTorch's, within bf16 rounding."""
    t, sizes_ = sizes(device, (32, (16, 32, 32, 8)), (512, (256, 512, 512, 128)))
    acts = ["gelu", "relu", "none"]
    x = rand(t, sizes_[0], device=device, seed=20)
    target = rand(t, sizes_[-1], device=device, seed=21)

    def init():
        ps = []
        for i, (fi, fo) in enumerate(zip(sizes_[:-1], sizes_[1:])):
            ps.append((
                rand(fo, fi, device=device, scale=fi**-0.5, seed=30 + i).requires_grad_(),
                rand(fo, device=device, scale=0.1, seed=40 + i).requires_grad_(),
            ))
        return ps

    def train(forward):
        ps = init()
        losses = []
        for _ in range(6):
            y = forward(ps)
            loss = ((y.float() - target.float()) ** 2).mean()
            losses.append(loss.item())
            grads = torch.autograd.grad(loss, [p for pair in ps for p in pair])
            with torch.no_grad():
                for p, gr in zip([p for pair in ps for p in pair], grads):
                    p -= 0.5 * gr
        return losses

    def ours(ps):
        h = x
        for (w, b), act in zip(ps, acts):
            h = ops.linear(h, w, b, act)
        return h

    mine = train(ours)
    theirs = train(lambda ps: mlp_reference(ps, x, acts))
    assert mine[-1] < mine[0]  # it learns
    for step, (a, b) in enumerate(zip(mine, theirs)):
        assert abs(a - b) <= 2e-2 * abs(b) + 1e-3, f"step {step}: tessera {a:.5f}, PyTorch {b:.5f}"


def test_torch_compile_traces_the_ops_without_graph_breaks(device):
    class Block(torch.nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.w1 = torch.nn.Parameter(rand(h, d, device=device, scale=d**-0.5, seed=50))
            self.b1 = torch.nn.Parameter(rand(h, device=device, seed=51))
            self.w2 = torch.nn.Parameter(rand(d, h, device=device, scale=h**-0.5, seed=52))

        def forward(self, x):
            h = ops.linear(x, self.w1, self.b1, "gelu")
            return ops.linear(h, self.w2) + x

    d, h = sizes(device, (16, 32), (256, 512))
    m = Block(d, h)
    x = rand(2, 8, d, device=device, seed=53)
    want = m(x)
    backend = "aot_eager" if device == "cpu" else "inductor"
    compiled = torch.compile(m, backend=backend, fullgraph=True)
    got = compiled(x)
    close(got, want.double())
    got.float().sum().backward()
    assert m.w1.grad is not None and m.b1.grad is not None
    # gemm with its outputs, inference only.
    with torch.no_grad():
        f = torch.compile(lambda a, w, b: ops.gemm(a, w.t(), "relu(aux(acc + bias_col))", bias=b), backend=backend, fullgraph=True)
        y, pre = f(x[0], m.w1, m.b1)
        close(pre, F.linear(x[0].double(), m.w1.double(), m.b1.double()))
        close(y, torch.relu(pre.double()))


# ---------------------------------------------------------------------------------------------
# PaddlePaddle's operators


def tanh_gelu(x):
    return F.gelu(x, approximate="tanh")


PADDLE_ACTS = {"none": lambda x: x, "relu": torch.relu, "gelu": tanh_gelu}


@pytest.mark.parametrize("trans_x, trans_y", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_fused_gemm_epilogue_forward(device, act, trans_x, trans_y):
    m, n, k = sizes(device, (20, 24, 16), (192, 256, 128))
    x = rand(*((k, m) if trans_x else (m, k)), device=device, seed=60)
    y = rand(*((n, k) if trans_y else (k, n)), device=device, scale=k**-0.5, seed=61)
    bias = rand(n, device=device, seed=62)
    out, reserve = ops.fused_gemm_epilogue(x, y, bias, trans_x, trans_y, act)
    pre = (x.t() if trans_x else x).double() @ (y.t() if trans_y else y).double() + bias.double()
    close(out, PADDLE_ACTS[act](pre))
    if act == "none":
        assert reserve is None
    elif act == "gelu":
        close(reserve, pre)
    else:
        assert reserve.shape == (m, _gemm.words_per_row(n)) and reserve.dtype == torch.int32
        bits = _reference.unpack_mask(reserve.cpu(), m, n)
        assert (bits == (pre.cpu() > 0)).double().mean() > 0.99


@pytest.mark.parametrize("trans_y", [False, True])
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_fused_gemm_epilogue_grad_matches_autograd(device, act, trans_y):
    """Two layers with Paddle's operators: the grad operator of the second layer, given the
    first layer's reserve space, returns the gradient of the first layer's pre-activation,
    the second layer's weight gradient and its bias gradient, as torch.autograd does."""
    m, k0, k, n = sizes(device, (16, 12, 20, 24), (256, 128, 192, 320))
    x0 = rand(m, k0, device=device, seed=70)
    w0 = rand(k0, k, device=device, scale=k0**-0.5, seed=71)
    b0 = rand(k, device=device, seed=72)
    y = rand(*((n, k) if trans_y else (k, n)), device=device, scale=k**-0.5, seed=73)
    b1 = rand(n, device=device, seed=74)
    dout = rand(m, n, device=device, seed=75)
    h, reserve = ops.fused_gemm_epilogue(x0, w0, b0, False, False, act)
    out, _ = ops.fused_gemm_epilogue(h, y, b1, False, trans_y, "none")
    dx, dy, db = ops.fused_gemm_epilogue_grad(h, y, reserve, dout, False, trans_y, act)

    pre0 = (x0.double() @ w0.double() + b0.double()).requires_grad_()
    h_ref = PADDLE_ACTS[act](pre0)
    # The second layer reads the h the kernel produced (rounded), as the grad operator does.
    h_used = h.double().requires_grad_()
    Y = y.double().requires_grad_()
    B1 = b1.double().requires_grad_()
    o = h_used @ (Y.t() if trans_y else Y) + B1
    (o * dout.double()).sum().backward()
    dpre0 = torch.autograd.grad(h_ref, pre0, h_used.grad)[0]
    assert dx.shape == h.shape and dy.shape == y.shape and db.shape == (n,)
    for name, got, want in [("x_grad", dx, dpre0), ("y_grad", dy, Y.grad), ("bias_grad", db, B1.grad)]:
        err = float((got.double().cpu() - want.cpu()).norm() / want.norm())
        assert err < 2e-2, f"{name}: relative error {err:.2e}"


def test_fused_gemm_epilogue_grad_refusals():
    x = torch.zeros(8, 16, dtype=torch.bfloat16)
    y = torch.zeros(16, 24, dtype=torch.bfloat16)
    dout = torch.zeros(8, 24, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="argument 'reserve_space' is needed"):
        ops.fused_gemm_epilogue_grad(x, y, None, dout, False, False, "relu")
    with pytest.raises(ValueError, match="argument 'reserve_space' has shape"):
        ops.fused_gemm_epilogue_grad(x, y, torch.zeros(8, 16, dtype=torch.int32), dout, False, False, "relu")
    with pytest.raises(ValueError, match="argument 'out_grad' has shape"):
        ops.fused_gemm_epilogue_grad(x, y, None, dout[:, :8], False, False, "none")
    with pytest.raises(ValueError, match="argument 'activation'"):
        ops.fused_gemm_epilogue(x, y, torch.zeros(24, dtype=torch.bfloat16), False, False, "swish")


# ---------------------------------------------------------------------------------------------
# CUDA only: the library's own operand checks, the stream, no synchronisation


def test_kernel_operand_checks_raise_value_errors_naming_the_argument():
    cuda_or_skip()
    a = rand(64, 32, device="cuda")
    b = rand(48, 32, device="cuda").t()
    # Every other column: D is row-major, so the residual's column stride must be 1.
    strided = torch.zeros(64, 96, dtype=torch.bfloat16, device="cuda")[:, ::2]
    with pytest.raises(ValueError, match="argument 'residual'.*column stride must be 1, not 2"):
        ops.gemm(a, b, "acc + residual", residual=strided)
    # An expanded residual has rows that overlap: stride 0.
    res = torch.zeros(48, dtype=torch.bfloat16, device="cuda").expand(64, 48)
    with pytest.raises(ValueError, match="argument 'residual'"):
        ops.gemm(a, b, "acc + residual", residual=res)
    # A view one element off a 16-byte boundary, where the kernel loads 16 bytes at a time.
    buf = torch.zeros(64 * 40 + 1, dtype=torch.bfloat16, device="cuda")
    odd = buf[1:].view(64, 40)[:, :32]
    with pytest.raises(ValueError, match="argument 'a'"):
        ops.gemm(odd, b)
    with pytest.raises(ValueError, match="argument 'b' is on cpu"):
        ops.gemm(a, b.cpu())


def test_launches_on_the_current_stream_without_synchronising():
    cuda_or_skip()
    m = n = k = 1024
    a = rand(m, k, device="cuda")
    b = rand(n, k, device="cuda").t()
    ops.gemm(a, b)  # compile outside the timed call
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU time queued ahead
        import time

        t0 = time.perf_counter()
        d = ops.gemm(a, b)
        host = time.perf_counter() - t0
        done = torch.cuda.Event()
        done.record(s)
    assert host < 0.2, f"the call took {host:.3f} s: it waited for the stream"
    assert not done.query()  # the GEMM is queued behind the sleep, on that stream
    s.synchronize()
    close(d, a.double() @ b.double())
