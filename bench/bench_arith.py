"""Benchmark of the emulated elementwise arithmetic against numpy's float32 ops.

``run()`` times sf.add and sf.mul on 16M float32 elements (values on the target grid, as in
training) for fp16 and bf16 in "rne" and "sr", against numpy's float32 add and mul on the same
arrays; each row names its baseline row and gives ratio = seconds / baseline seconds (target:
<= 3).  Best of a few repeats,
after one warm-up call (Numba compilation is excluded), with short idle gaps between libraries
so the thread pools do not fight over the cores.
"""

from __future__ import annotations

import time

import numpy as np

import softfloat as sf

N = 16 * 1024 * 1024
REPEATS = 5


def _best(fn) -> float:
    fn()                                   # warm-up (compilation, page faults)
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run() -> list[dict]:
    rng = np.random.default_rng(1234)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    base_name = {op: f"numpy float32 {op} (16M)" for op in ("add", "mul")}
    baselines = {
        "add": _best(lambda: np.add(x, y)),
        "mul": _best(lambda: np.multiply(x, y)),
    }
    rows = [{"name": base_name[op], "seconds": t, "baseline": None, "ratio": None}
            for op, t in baselines.items()]
    time.sleep(0.5)
    for fmt in ("fp16", "bf16"):
        a = sf.round(x, fmt)
        b = sf.round(y, fmt)
        for op, fn in (("add", sf.add), ("mul", sf.mul)):
            for mode in ("rne", "sr"):
                kw = {"seed": 7} if mode == "sr" else {}
                t = _best(lambda fn=fn, a=a, b=b, fmt=fmt, mode=mode, kw=kw:
                          fn(a, b, fmt, mode, **kw))
                base = baselines[op]
                rows.append({"name": f"sf.{op} {fmt} {mode} (16M)", "seconds": t,
                             "baseline": base_name[op], "ratio": t / base})
                time.sleep(0.5)
    return rows


if __name__ == "__main__":
    for row in run():
        ratio = "" if row["ratio"] is None else f"ratio {row['ratio']:5.2f}"
        print(f"{row['name']:32s} {row['seconds'] * 1e3:9.2f} ms   {ratio}")
