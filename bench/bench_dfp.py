"""Benchmark of softfloat.dfp (the VNNI-style integer GEMM and quantization), run by ``make bench``.

``run()`` returns rows {"name", "seconds", "baseline", "ratio"} as bench/__main__.py expects:
``seconds`` is the best of a few repeats, ``baseline`` the name of the row it is divided by (numpy
float32 ``A @ B`` at n = 1024, measured in the same run) and ``ratio`` = seconds / baseline
seconds; the extra key ``speed`` = baseline seconds / seconds.  Target (issue 4): the DFP GEMM at
P = 16 with one int32 chain per output runs at speed >= 0.25, i.e. ratio <= 4.
A short idle gap separates numpy's BLAS threads from Numba's (they fight over the cores).

Run as a script to print the table: ``python bench/bench_dfp.py``.
"""

from __future__ import annotations

import time

import numpy as np

from softfloat import dfp

N = 1024
REPEATS = 5
GAP = 0.5
BASELINE = f"numpy float32 matmul n={N}"


def _best(fn, repeats=REPEATS):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run() -> list[dict]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, N)).astype(np.float32)
    y = rng.standard_normal((N, N)).astype(np.float32)
    x @ y                                                       # warm BLAS
    base = _best(lambda: x @ y)
    rows = [{"name": BASELINE, "seconds": base, "baseline": None, "ratio": None}]
    time.sleep(GAP)

    A = dfp.quantize(x, 16)
    B = dfp.quantize(y, 16)
    dfp.gemm(A, B)                                              # compile / load the kernels
    dfp.gemm(A, B, return_stats=True)

    def row(name, seconds):
        rows.append({"name": name, "seconds": seconds, "baseline": BASELINE,
                     "ratio": seconds / base, "speed": base / seconds})

    row(f"dfp.gemm P=16 n={N} one chain per output, wrap",
        _best(lambda: dfp.gemm(A, B)))
    row(f"dfp.gemm P=16 n={N} one chain, wrap, return_stats",
        _best(lambda: dfp.gemm(A, B, return_stats=True), 3))
    row(f"dfp.gemm P=16 n={N} one chain, saturate",
        _best(lambda: dfp.gemm(A, B, overflow="saturate"), 3))
    row(f"dfp.gemm P=16 n={N} chain_len=64, wrap",
        _best(lambda: dfp.gemm(A, B, chain_len=64), 3))
    row(f"dfp.quantize fp32 -> DFP-16 {N}x{N} nearest",
        _best(lambda: dfp.quantize(x, 16)))
    time.sleep(GAP)
    return rows


if __name__ == "__main__":
    for r in run():
        extra = "" if r["ratio"] is None else (f"  ratio {r['ratio']:6.2f}  "
                                               f"speed {r['speed']:.3f}x numpy")
        print(f"{r['name']:<48s} {r['seconds'] * 1e3:9.2f} ms{extra}")
