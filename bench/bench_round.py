"""Benchmark of conversion (rounding float32 arrays onto a format's grid), run by ``make bench``.

``run()`` returns rows {"name", "seconds", "baseline", "ratio"}: seconds is the best of
REPEATS = 15 calls (external libraries: fewer) on 16M float32 elements (standard normal),
baseline the name of the row it is divided by (a plain float32 array copy, measured in the same
run) and ratio = seconds / baseline seconds.
The libraries compared, when installed: numpy (astype float16 round trip), ml_dtypes (bfloat16
round trip), pychop and gfloat.  A short idle gap separates libraries, whose thread pools would
otherwise compete for the cores.  Two more rows give the Numba compilation time of the core
kernels, cold (empty cache) and from the cache, measured in subprocesses with NUMBA_CACHE_DIR in
a temporary directory; their baseline is the budget (10 s cold, 1 s cached).

``issue13_rows()`` adds issue #13's rows: the five data classes (N(0,1), gradient-like, all
subnormal, overflow-heavy, 1% NaN/Inf) x fp16/bf16/e4m3fn/e5m2 x rne/sr, each against a copy of
the same array, and float64 inputs against a float64 copy; its first row names the instruction
set (softfloat._intrinsics.ISA; time the AVX2 path of an AVX-512 host with
``NUMBA_CPU_NAME=haswell NUMBA_CACHE_DIR=$(mktemp -d)``).  There each row's copy and
conversion calls alternate (bench.timing.best_interleaved; until 2026-11-29 all of the copy's
calls came first).

Run as a script to print the table: ``python bench/bench_round.py [n_elements]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    from bench.timing import best_interleaved
except ImportError:                        # run as a script: bench/ is the path's first entry
    from timing import best_interleaved

N = 1 << 24
GAP = 0.5          # seconds of idle between libraries
REPEATS = 15       # (5 until 2026-11-29: single rows then varied by up to 1.35x, once 4x)

# The core kernels' first calls, timed in a fresh interpreter (import excluded).
_COMPILE_SNIPPET = r"""
import time
import numpy as np
import softfloat as sf
x32 = np.linspace(-3, 3, 1000, dtype=np.float32)
t = time.perf_counter()
sf.round(x32, "fp16")
sf.round(x32, "bf16", "sr", seed=1)
sf.round(x32.astype(np.float64), "fp16")
sf.from_bits(sf.to_bits(sf.round(x32, "fp16"), "fp16"), "fp16")
print(time.perf_counter() - t)
"""


def _best(f, repeats=REPEATS, warmup=None):
    (warmup or f)()                            # warm up: compile, page in
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def _compile_times() -> tuple[float, float]:
    """(cold, cached) seconds of the first calls of the core kernels."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=root)
        out = []
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], env=env, cwd=root,
                                 capture_output=True, text=True, check=True)
            out.append(float(res.stdout.strip().splitlines()[-1]))
    return out[0], out[1]


def _others(x):
    """(name, function of the array, repeats) for the other libraries that are installed; the
    slow pure-numpy emulators (seconds per call) are timed once, after a warm-up on a slice."""
    cases = [("numpy astype(float16) round trip",
              lambda v: v.astype(np.float16).astype(np.float32), REPEATS)]
    try:
        import ml_dtypes
        cases.append(("ml_dtypes bfloat16 round trip",
                      lambda v: v.astype(ml_dtypes.bfloat16).astype(np.float32), REPEATS))
    except ImportError:
        pass
    try:
        import pychop
        fp16 = pychop.Chop(exp_bits=5, sig_bits=10, rmode=1)
        fp16_sr = pychop.Chop(exp_bits=5, sig_bits=10, rmode=5)
        cases.append(("pychop fp16 rne", fp16, 1))
        cases.append(("pychop fp16 sr", fp16_sr, 1))
    except ImportError:
        pass
    try:
        import gfloat
        from gfloat.formats import format_info_binary16
        srbits = np.random.default_rng(1).integers(0, 1 << 13, x.size, dtype=np.uint32)
        cases.append(("gfloat fp16 rne",
                      lambda v: gfloat.round_ndarray(format_info_binary16, v), 1))
        cases.append(("gfloat fp16 sr",
                      lambda v: gfloat.round_ndarray(format_info_binary16, v,
                                                     gfloat.RoundMode.Stochastic,
                                                     srbits=srbits[:v.size], srnumbits=13), 1))
    except ImportError:
        pass
    return cases


def _classes(n: int, tiny: float, seed: int = 0) -> dict:
    """The five input classes of issue #13 (float32): N(0,1); gradient-like N(0,1) 2^U[-30, 8);
    all subnormal in the target (|x| < tiny); overflow-heavy (|x| up to 2^20); N(0,1) with 1%
    NaN/Inf sprinkled."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(n).astype(np.float32)
    grad = (g * np.exp2(rng.uniform(-30, 8, n))).astype(np.float32)
    sub = (g * np.float32(tiny) * rng.uniform(2.0 ** -12, 1, n)).astype(np.float32)
    big = (g * np.exp2(rng.uniform(0, 20, n))).astype(np.float32)
    spr = g.copy()
    k = rng.integers(0, n, n // 100)
    spr[k] = np.array([np.nan, np.inf, -np.inf], np.float32)[np.arange(k.size) % 3]
    return {"N(0,1)": g, "gradient": grad, "subnormal": sub, "overflow": big, "nan/inf 1%": spr}


def issue13_rows(n: int = N, n64: int = N // 4) -> list[dict]:
    """Issue #13's sf.round rows: every data class x format x mode family (rne, sr), each a
    ratio to a float32 copy of the same array in the same run; float64 inputs (n64 elements)
    against a float64 copy.  The first row names the instruction set Numba compiled for."""
    import softfloat as sf
    from softfloat._intrinsics import ISA

    rows = [dict(name=f"sf.round rows compiled for {ISA}", seconds=0.0, baseline=None,
                 ratio=None)]
    # each row's copy and conversion calls alternate (bench.timing)
    for fmt in ("fp16", "bf16", "e4m3fn", "e5m2"):
        for cls, x in _classes(n, sf.get_format(fmt).tiny).items():
            modes = (("rne", {}), ("sr", {"seed": 1}))
            base, *ts = best_interleaved(
                [lambda x=x: x.copy()] + [lambda x=x, f=fmt, mode=mode, kw=kw:
                                          sf.round(x, f, mode, **kw) for mode, kw in modes],
                REPEATS)
            for (mode, _), t in zip(modes, ts):
                rows.append(dict(name=f"sf.round {fmt} {mode} {cls}", seconds=t,
                                 baseline="float32 copy (same array)", ratio=t / base))
    for fmt in ("fp16", "bf16"):
        x = _classes(n64, 1.0)["gradient"].astype(np.float64) * (1 + 2.0 ** -40)
        base, t = best_interleaved([lambda x=x: x.copy(), lambda x=x, f=fmt: sf.round(x, f)],
                                   REPEATS)
        rows.append(dict(name=f"sf.round float64 -> {fmt} rne gradient", seconds=t,
                         baseline="float64 copy (same array)", ratio=t / base))
    return rows


def run(n: int = N, compile_times: bool = True) -> list[dict]:
    import softfloat as sf

    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    base_name = "float32 copy"
    base = _best(lambda: x.copy())
    rows = [dict(name=base_name, seconds=base, baseline=base_name, ratio=1.0)]

    def add(name, seconds, baseline=base_name, ref=base):
        rows.append(dict(name=name, seconds=seconds, baseline=baseline, ratio=seconds / ref))

    flags = sf.Flags()
    for name, f in [
        ("softfloat fp16 rne", lambda: sf.round(x, "fp16")),
        ("softfloat bf16 rne", lambda: sf.round(x, "bf16")),
        ("softfloat fp16 sr", lambda: sf.round(x, "fp16", "sr", seed=1)),
        ("softfloat bf16 sr", lambda: sf.round(x, "bf16", "sr", seed=1)),
        ("softfloat fp16 rne with flags", lambda: sf.round(x, "fp16", flags=flags)),
        ("softfloat e4m3fn rne", lambda: sf.round(x, "e4m3fn")),
    ]:
        add(name, _best(f))
    for name, fn, repeats in _others(x):
        time.sleep(GAP)
        warm = (lambda fn=fn: fn(x[:4096])) if repeats == 1 else None
        add(name, _best(lambda fn=fn: fn(x), repeats, warmup=warm))
    # the baseline again, last: the ratios are only meaningful if it did not drift
    time.sleep(GAP)
    add("float32 copy (again)", _best(lambda: x.copy()))
    rows += issue13_rows(n, max(n // 4, 1))
    if compile_times:
        cold, cached = _compile_times()
        add("numba compile, cold cache", cold, "budget 10 s", 10.0)
        add("numba compile, from cache", cached, "budget 1 s", 1.0)
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0]) if argv else N
    print(f"{n} float32 elements; best of {REPEATS} (external libraries: fewer)")
    for r in run(n):
        if r["ratio"] is None:
            print(r["name"])
            continue
        print(f"{r['name']:<44} {r['seconds'] * 1e3:10.2f} ms  {r['ratio']:7.2f} x "
              f"{r['baseline']}")


if __name__ == "__main__":
    main()
