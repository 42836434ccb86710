"""The fused GEMM + bias + GELU from PyTorch: tessera against cuBLASLt's epilogue and against
two unfused PyTorch calls, and the Python call overhead.

    python python/bench/bench_gemm.py [--reps 15] [--iters 20] [--json out.json] [--shapes quick]

For each shape (x: M x K, w: N x K as nn.Linear stores it, bf16) it times, interleaved in one
process (each repetition runs every contender once, so clock and thermal drift hit all alike):

- ``tessera``: ``tessera.ops.gemm(x, w.t(), "gelu(acc + bias_col)", bias=b)`` (erf GELU);
- ``tessera_tanh``: the same with ``gelu_tanh``, the GELU cuBLASLt computes;
- ``addmm_act``: ``torch._addmm_activation(b, x, w.t(), use_gelu=True)`` (cuBLASLt's
  GELU_BIAS epilogue, tanh form);
- ``unfused``: ``F.gelu(F.linear(x, w, b))``.

Each timing is CUDA events around ``--iters`` back-to-back calls; the table shows medians
over ``--reps`` repetitions, TFLOP/s, and tessera's speed relative to ``addmm_act`` (above 1:
tessera faster). Before timing, each shape's results are checked against each other.

Then the call overhead for a 256³ GEMM: host time per call of a long run of calls (the GPU
is idle waiting for them, so the host is the bottleneck), for ``tessera.ops.gemm``, for the
raw launch of the compiled ``Gemm`` with prepared arguments (the floor the Python layer adds
to), and for ``torch._addmm_activation``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import tessera.ops as ops
from tessera.ops import _gemm, _torch

STANDARD = [(4096, 4096, 4096), (8192, 8192, 8192)] + [
    (m, n, k)
    for m in (4096, 8192)
    for (n, k) in ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096))
]


def shapes(which: str):
    seen, out = set(), []
    base = STANDARD if which == "standard" else [(4096, 4096, 4096), (4096, 11008, 4096)]
    for s in base:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def time_ms(fn, iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def bench_shape(m, n, k, reps, iters):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) * k**-0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    wt = w.t()
    contenders = {
        "tessera": lambda: ops.gemm(x, wt, "gelu(acc + bias_col)", bias=b),
        "tessera_tanh": lambda: ops.gemm(x, wt, "gelu_tanh(acc + bias_col)", bias=b),
        "addmm_act": lambda: torch._addmm_activation(b, x, wt, use_gelu=True),
        "unfused": lambda: F.gelu(F.linear(x, w, b)),
    }
    # Correctness first (and the compile, outside the timings).
    ref = F.gelu(F.linear(x.float(), w.float(), b.float()))
    ref_tanh = F.gelu(F.linear(x.float(), w.float(), b.float()), approximate="tanh")
    errors = {}
    for name, fn in contenders.items():
        r = ref_tanh if name in ("tessera_tanh", "addmm_act") else ref
        errors[name] = float((fn().float() - r).norm() / r.norm())
    for name, e in errors.items():
        if e > 2e-2:
            raise SystemExit(f"{m}x{n}x{k}: {name} differs from the fp32 reference by {e:.2e}")
    for fn in contenders.values():  # warm up
        time_ms(fn, 3)
    times = {name: [] for name in contenders}
    for _ in range(reps):
        for name, fn in contenders.items():
            times[name].append(time_ms(fn, iters))
    med = {name: statistics.median(t) for name, t in times.items()}
    flops = 2.0 * m * n * k
    return {
        "shape": [m, n, k],
        "ms": med,
        "tflops": {name: flops / (t * 1e-3) / 1e12 for name, t in med.items()},
        "vs_addmm_act": med["addmm_act"] / med["tessera"],
        "tanh_vs_addmm_act": med["addmm_act"] / med["tessera_tanh"],
        "rel_err": errors,
        "path": _gemm.compiled(
            x.device.index or 0,
            _torch._problem("gemm", x, wt, None, None),
            "gelu(acc + bias_col)", 1.0, 0.0,
        ).path,
    }


def host_us_per_call(fn, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def overhead(calls: int, reps: int):
    m = n = k = 256
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    wt = w.t()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    epi = "gelu(acc + bias_col)"
    ops.gemm(x, wt, epi, bias=b)
    p = _torch._problem("gemm", x, wt, None, None)
    g = _gemm.compiled(0, p, epi, 1.0, 0.0)
    stream = ops.current_stream(x.device.index or 0)
    A = _gemm.matrix(p, x.data_ptr(), "bf16", x.shape, x.stride())
    B = _gemm.matrix(p, wt.data_ptr(), "bf16", wt.shape, wt.stride())
    D = _gemm.matrix(p, out.data_ptr(), "bf16", out.shape, out.stride())
    bias = _gemm.vector(p, b.data_ptr(), "bf16", b.shape, b.stride())
    contenders = {
        "tessera.ops.gemm": lambda: ops.gemm(x, wt, epi, bias=b),
        "tessera.ops.gemm(out=)": lambda: ops.gemm(x, wt, epi, bias=b, out=out),
        "torch.ops.tessera.gemm": lambda: torch.ops.tessera.gemm(x, wt, epi, None, None, None, None, b, 1.0, 0.0, None),
        "raw launch": lambda: g.launch(stream, A, B, D, bias_col=bias),
        "addmm_act": lambda: torch._addmm_activation(b, x, wt, use_gelu=True),
    }
    gpu = {name: time_ms(fn, 200) * 1e3 for name, fn in contenders.items()}
    host = {name: [] for name in contenders}
    for _ in range(reps):
        for name, fn in contenders.items():
            host[name].append(host_us_per_call(fn, calls))
    med = {name: statistics.median(v) for name, v in host.items()}
    return {
        "host_us": med,
        "gpu_us": gpu,
        "python_over_raw_us": med["tessera.ops.gemm"] - med["raw launch"],
        "python_out_over_raw_us": med["tessera.ops.gemm(out=)"] - med["raw launch"],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shapes", choices=["standard", "quick"], default="standard")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gemm: no CUDA device; nothing to measure")
        return 0
    dev = torch.cuda.get_device_name()
    print(f"device {dev}, torch {torch.__version__}, tessera {__import__('tessera').__version__}")
    print(f"medians of {args.reps} interleaved repetitions of {args.iters} calls, bf16, epilogue gelu(acc + bias_col)")
    head = f"{'M x N x K':>20} {'path':>5} {'tessera':>9} {'tess_tanh':>9} {'addmm_act':>9} {'unfused':>9}   TFLOP/s (tessera / tanh / addmm / unfused)   vs addmm (erf, tanh)"
    print(head)
    rows = []
    for m, n, k in shapes(args.shapes):
        r = bench_shape(m, n, k, args.reps, args.iters)
        rows.append(r)
        t, f = r["ms"], r["tflops"]
        print(
            f"{f'{m}x{n}x{k}':>20} {r['path']:>5} {t['tessera']:9.3f} {t['tessera_tanh']:9.3f} {t['addmm_act']:9.3f} {t['unfused']:9.3f}"
            f"   {f['tessera']:6.0f} / {f['tessera_tanh']:4.0f} / {f['addmm_act']:4.0f} / {f['unfused']:4.0f}"
            f"               {r['vs_addmm_act']:.3f}x, {r['tanh_vs_addmm_act']:.3f}x",
            flush=True,
        )
    gm = statistics.geometric_mean([r["vs_addmm_act"] for r in rows])
    gm_tanh = statistics.geometric_mean([r["tanh_vs_addmm_act"] for r in rows])
    print(f"geometric mean vs torch._addmm_activation: {gm:.3f}x (gelu), {gm_tanh:.3f}x (gelu_tanh)")
    o = overhead(calls=2000, reps=7)
    print("\ncall overhead, 256x256x256, host microseconds per call (median of 7 runs of 2000 calls), GPU microseconds per call")
    for name in o["host_us"]:
        print(f"  {name:26} host {o['host_us'][name]:7.2f} us   gpu {o['gpu_us'][name]:7.2f} us")
    print(f"  tessera.ops.gemm over the raw launch: {o['python_over_raw_us']:.2f} us ({o['python_out_over_raw_us']:.2f} us with out=); target <= 10 us")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": dev, "torch": torch.__version__, "shapes": rows, "overhead": o}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
