"""Benchmark of softfloat.dfp (quantization and the VNNI-style integer GEMM), run by ``make bench``.

``run()`` returns rows {"name", "seconds", "baseline", "ratio"} as bench/__main__.py expects:
``seconds`` is the best of a few repeats, ``baseline`` the name of the row it is divided by and
``ratio`` = seconds / baseline seconds (lower is faster), all measured in the same run:

* quantization of 16M float32 values (4096 x 4096) against a memory copy of the same array
  (``np.copyto``), per tensor / per row / blocks of 32, nearest and stochastic rounding;
* the GEMM at n = 1024 against OpenBLAS sgemm (numpy float32 ``A @ B``); the extra key
  ``speed`` = baseline seconds / seconds (issue 4's target: speed >= 0.25 with one chain per
  output);
* the training-size GEMM of the demo's MLP (a 32 x 64 batch times a 64 x 64 weight, both
  quantized to DFP-16 per tensor, int32 chains of 2 products, as autograd's dfp16 policy runs
  it) against numpy's float32 matmul of the same shapes: per-call overhead, not arithmetic.

A short idle gap separates numpy's BLAS threads from Numba's (they fight over the cores).  The
first line names the instruction set Numba compiles for (time the AVX2 path of an AVX-512 host
with ``NUMBA_CPU_NAME=haswell NUMBA_CACHE_DIR=$(mktemp -d)``).

Run as a script to print the table: ``python bench/bench_dfp.py``.
"""

from __future__ import annotations

import time

import numpy as np

from softfloat import dfp

N = 1024
BIG = 4096
REPEATS = 5
GAP = 0.5
GEMM_BASE = f"numpy float32 matmul n={N}"
COPY_BASE = f"memory copy {BIG}x{BIG} float32"
SMALL = (32, 64, 64)
SMALL_BASE = "numpy float32 matmul 32x64 @ 64x64"


def _best(fn, repeats=REPEATS):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _isa() -> str:
    """The instruction set Numba compiles for: NUMBA_CPU_NAME / NUMBA_CPU_FEATURES if set, else
    the host's (llvmlite's view of the CPU, as Numba's own default)."""
    import os

    import llvmlite.binding as llvm
    name = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
    feats = os.environ.get("NUMBA_CPU_FEATURES")
    if feats is None:
        feats = "" if os.environ.get("NUMBA_CPU_NAME") else llvm.get_host_cpu_features().flatten()
    fs = feats.split(",")
    if "+avx512f" in fs or (not feats and name in ("skylake-avx512", "icelake-server",
                                                   "sapphirerapids", "znver4")):
        return f"avx512 ({name})"
    if "+avx2" in fs or (not feats and name in ("haswell", "broadwell", "skylake", "znver2",
                                                "znver3")):
        return f"avx2 ({name})"
    return name


def _quantize_rows(rng, base, row):
    """Quantization of a large array, against a copy of it (the arrays are freed on return)."""
    big = rng.standard_normal((BIG, BIG)).astype(np.float32)
    dst = np.empty_like(big)
    base(COPY_BASE, _best(lambda: np.copyto(dst, big)))
    time.sleep(GAP)
    for label, kw in (("per tensor, nearest", {}),
                      ("per tensor, stochastic", {"mode": "sr", "seed": 1}),
                      ("per row, nearest", {"axis": 1}),
                      ("blocks of 32, nearest", {"axis": 1, "block": 32})):
        dfp.quantize(big, 16, **kw)                              # compile / load the kernel
        row(f"dfp.quantize {BIG}x{BIG} {label}",
            _best(lambda kw=kw: dfp.quantize(big, 16, **kw), 3), COPY_BASE)


def run() -> list[dict]:
    rows = []

    def base(name, seconds):
        rows.append({"name": name, "seconds": seconds, "baseline": None, "ratio": None})

    def row(name, seconds, against, speed=False):
        b = next(r["seconds"] for r in rows if r["name"] == against)
        r = {"name": name, "seconds": seconds, "baseline": against, "ratio": seconds / b}
        if speed:
            r["speed"] = b / seconds
        rows.append(r)

    rng = np.random.default_rng(0)
    base(f"(kernels compiled for {_isa()})", 0.0)

    _quantize_rows(rng, base, row)
    time.sleep(GAP)

    # ----- the GEMM at n = 1024, against sgemm -----------------------------------------------
    x = rng.standard_normal((N, N)).astype(np.float32)
    y = rng.standard_normal((N, N)).astype(np.float32)
    x @ y                                                        # warm BLAS
    base(GEMM_BASE, _best(lambda: x @ y))
    time.sleep(GAP)
    A = dfp.quantize(x, 16)
    B = dfp.quantize(y, 16)
    dfp.gemm(A, B)                                               # compile / load the kernels
    dfp.gemm(A, B, return_stats=True)
    row(f"dfp.gemm P=16 n={N} one chain per output, wrap", _best(lambda: dfp.gemm(A, B)),
        GEMM_BASE, speed=True)
    row(f"dfp.gemm P=16 n={N} one chain, wrap, return_stats",
        _best(lambda: dfp.gemm(A, B, return_stats=True), 3), GEMM_BASE, speed=True)
    row(f"dfp.gemm P=16 n={N} one chain, saturate",
        _best(lambda: dfp.gemm(A, B, overflow="saturate"), 3), GEMM_BASE, speed=True)
    row(f"dfp.gemm P=16 n={N} chain_len=64, wrap",
        _best(lambda: dfp.gemm(A, B, chain_len=64), 3), GEMM_BASE, speed=True)
    row(f"dfp.gemm P=16 n={N} chain_len=2, wrap",
        _best(lambda: dfp.gemm(A, B, chain_len=2), 3), GEMM_BASE, speed=True)
    time.sleep(GAP)

    # ----- the demo's training GEMM: per-call overhead ---------------------------------------
    m, k, n = SMALL
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)

    def small_sgemm():
        for _ in range(100):
            a @ w

    def small_dfp():
        for _ in range(100):
            dfp.gemm(dfp.quantize(a, 16), dfp.quantize(w, 16), chain_len=2)

    small_dfp()
    base(SMALL_BASE + " (x100)", _best(small_sgemm))
    row("quantize x2 + dfp.gemm chain_len=2, 32x64 @ 64x64 (x100)", _best(small_dfp),
        SMALL_BASE + " (x100)")
    time.sleep(GAP)
    return rows


if __name__ == "__main__":
    for r in run():
        extra = "" if r["ratio"] is None else f"  ratio {r['ratio']:7.3f}"
        if "speed" in r:
            extra += f"  speed {r['speed']:.3f}x"
        print(f"{r['name']:<58s} {r['seconds'] * 1e3:9.2f} ms{extra}")
