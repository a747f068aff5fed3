"""Benchmark of the emulated elementwise arithmetic against numpy's float32 operations.

``run()`` times sf.add, sf.mul, sf.div, sf.sqrt and sf.fma on 4M float32 operands (values on
the target format's grid, as in training) for fp16 and bf16 in "rne", on the five data classes
of issue #13 (N(0,1); gradient-like N(0,1) 2^U[-30, 8); all below the normal range of fp16,
N(0,1) 2^-20; overflow-heavy N(0,1) 2^U[0, 20), |x| up to ~2^21 before rounding; N(0,1) with 1%
NaN/Inf sprinkled), plus "sr" rows for add and mul.  Each row's baseline is numpy's float32
operation on the same arrays in the same run (a + b, a * b, a / b, np.sqrt(a), and a * b + c for
fma: numpy has no fused multiply-add), and ratio = seconds / baseline seconds (issue #13's bars:
add/mul <= 2, div and sqrt <= 3, fma <= 4).  sqrt's operand is |a|.  Each row also gives
``scalar``, the share of elements the arithmetic's passes leave to the scalar ops (see
softfloat._kernels_arith_f32.kind_counts; the rounding itself is sf.round's vectorised
kernel), and the first row the CPU the kernels were compiled for (NUMBA_CPU_NAME=haswell times
the AVX2 code path on an AVX-512 host).  Best of REPEATS = 15 calls after one warm-up call
(Numba compilation is excluded), baseline and emulation alike, their calls alternating
(bench.timing.best_interleaved; until 2026-11-29 all of the baseline's calls came first, so a
burst of load on the shared 2-core host could land on one side only: single ratios varied by
up to 2x between runs, and with 5 calls bf16 add on gradient-like data read 2.46x in one
`make bench` and 1.86x in a run right after), a short idle gap between operations.

Then the small tensors of training (the demo MLP's 32 x 64 activations): sf.round, sf.add and
sf.mul per call (1000 calls per timing), against numpy's own float32 operation per call, where
the cost is the call's (validation, the kernel launch), not the arithmetic.

Run as a script to print the table: ``python bench/bench_arith.py``.
"""

from __future__ import annotations

import time

import numpy as np

import softfloat as sf
from softfloat import _kernels_arith_f32 as KV

try:
    from bench.timing import best_interleaved
except ImportError:                        # run as a script: bench/ is the path's first entry
    from timing import best_interleaved

N = 4 * 1024 * 1024
REPEATS = 15
GAP = 0.3
CLASSES = ("N(0,1)", "gradient", "subnormal", "overflow", "NaN/Inf 1%")
OPS = ("add", "mul", "div", "sqrt", "fma")


def _best(fn) -> float:
    fn()                                   # warm-up (compilation, page faults)
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _data(cls: str, rng) -> np.ndarray:
    x = rng.standard_normal(N)
    if cls == "gradient":
        x *= np.exp2(rng.uniform(-30, 8, N))
    elif cls == "subnormal":
        x *= 2.0 ** -20
    elif cls == "overflow":
        x *= np.exp2(rng.uniform(0, 20, N))
    x = x.astype(np.float32)
    if cls == "NaN/Inf 1%":
        k = rng.choice(N, N // 100, replace=False)
        x[k] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), k.size)
    return x


def _cpu_name() -> str:
    import llvmlite.binding as llvm
    import numba
    return numba.config.CPU_NAME or llvm.get_host_cpu_name()


def _numpy(op, a, b, c):
    def fn():
        with np.errstate(all="ignore"):
            if op == "add":
                return np.add(a, b)
            if op == "mul":
                return np.multiply(a, b)
            if op == "div":
                return np.divide(a, b)
            if op == "sqrt":
                return np.sqrt(a)
            return a * b + c
    return fn


def _sf(op, a, b, c, fmt, mode):
    kw = {"seed": 7} if mode == "sr" else {}
    if op == "sqrt":
        return lambda: sf.sqrt(a, fmt, mode, **kw)
    if op == "fma":
        return lambda: sf.fma(a, b, c, fmt, mode, **kw)
    return lambda: getattr(sf, op)(a, b, fmt, mode, **kw)


def run() -> list[dict]:
    rng = np.random.default_rng(1234)
    rows = []
    for cls in CLASSES:
        raw = [_data(cls, rng) for _ in range(3)]
        for fmt in ("fp16", "bf16"):
            a, b, c = (sf.round(x, fmt) for x in raw)
            for op in OPS:
                x = np.abs(a) if op == "sqrt" else a
                base_name = f"numpy float32 {op} {fmt} {cls}"
                modes = ("rne", "sr") if op in ("add", "mul") and cls == "N(0,1)" else ("rne",)
                # the baseline and the emulation's calls alternate (bench.timing)
                base, *ts = best_interleaved(
                    [_numpy(op, x, b, c)] + [_sf(op, x, b, c, fmt, m) for m in modes], REPEATS)
                rows.append({"name": base_name, "seconds": base, "baseline": None,
                             "ratio": None})
                for mode, t in zip(modes, ts):
                    kinds = KV.kind_counts(op, x, b, c, fmt, mode)
                    row = {"name": f"sf.{op} {fmt} {mode} {cls}", "seconds": t,
                           "baseline": base_name, "ratio": t / base,
                           "scalar": f"{kinds[KV.SCALAR] / N:.3%}"}
                    if not rows[0].get("cpu"):
                        rows[0]["cpu"] = _cpu_name()
                    rows.append(row)
                time.sleep(GAP)
    rows += _small_rows(rng)
    return rows


#: The demo MLP's activations (batch 32, width 64), per call, SMALL_CALLS calls per timing.
SMALL = (32, 64)
SMALL_CALLS = 1000


def _small_rows(rng) -> list[dict]:
    a, b = (sf.round(rng.standard_normal(SMALL).astype(np.float32), "fp16") for _ in range(2))

    def per_call(fn):
        def loop():
            for _ in range(SMALL_CALLS):
                fn()
        return _best(loop) / SMALL_CALLS

    rows = []
    for base_name, base_fn, cases in (
            ("numpy float32 add, 32x64, per call", lambda: np.add(a, b), (
                ("sf.add fp16 rne, 32x64, per call", lambda: sf.add(a, b, "fp16")),
                ("sf.add bf16 sr, 32x64, per call", lambda: sf.add(a, b, "bf16", "sr", seed=7)))),
            ("numpy float32 multiply, 32x64, per call", lambda: np.multiply(a, b), (
                ("sf.mul fp16 rne, 32x64, per call", lambda: sf.mul(a, b, "fp16")),)),
            ("numpy astype(float16) round trip, 32x64, per call",
             lambda: a.astype(np.float16).astype(np.float32), (
                ("sf.round fp16 rne, 32x64, per call", lambda: sf.round(a, "fp16")),
                ("sf.round bf16 sr, 32x64, per call",
                 lambda: sf.round(a, "bf16", "sr", seed=7))))):
        base = per_call(base_fn)
        rows.append({"name": base_name, "seconds": base, "baseline": None, "ratio": None})
        for name, fn in cases:
            t = per_call(fn)
            rows.append({"name": name, "seconds": t, "baseline": base_name, "ratio": t / base})
        time.sleep(GAP)
    return rows


if __name__ == "__main__":
    for row in run():
        ratio = "" if row["ratio"] is None else f"ratio {row['ratio']:5.2f}"
        extra = "  ".join(f"{k}={row[k]}" for k in ("scalar", "cpu") if k in row)
        print(f"{row['name']:44s} {row['seconds'] * 1e3:9.2f} ms   {ratio}  {extra}")
