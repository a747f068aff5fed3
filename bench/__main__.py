"""Run every benchmark module and print its rows as a table of ratios.

Each module ``bench/bench_*.py`` exposes ``run() -> list[dict]`` with rows holding at least
``name``, ``seconds``, ``baseline`` (the name of the baseline row it is compared with, or None)
and ``ratio`` (seconds / baseline seconds: a time ratio, lower is faster; rows may add ``speed``,
its inverse, where an issue states a target as a fraction of the baseline's speed).
Timings are never asserted anywhere: this only prints.  After the last module it prints how
many rows hold issue #13's and #14's bars and which do not (bench/bars.py).
Usage: python -m bench [module-substring ...]
"""

from __future__ import annotations

import os

# Before any library loads an OpenMP runtime: PyTorch (a baseline) loads one on import, and
# if that happens before softfloat's import sets this default, Numba's OpenMP workers inherit
# the active (spinning) wait policy and fight OpenBLAS for the cores (10-30x slower fp16 steps
# on 2 cores).  See softfloat/__init__.py.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import importlib  # noqa: E402
import pkgutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import bench  # noqa: E402
from bench import bars  # noqa: E402


def _fmt(row: dict) -> str:
    ratio = row.get("ratio")
    extra = "".join(f"  {k}={v:.4g}" if isinstance(v, float) else f"  {k}={v}"
                    for k, v in row.items() if k not in ("name", "seconds", "baseline", "ratio"))
    rs = f"{ratio:8.3f}x" if isinstance(ratio, (int, float)) else "        -"
    base = row.get("baseline") or "-"
    return f"  {row['name']:<48s} {row['seconds'] * 1e3:10.2f} ms  {rs}  vs {base}{extra}"


def main(argv=None) -> int:
    wanted = (sys.argv[1:] if argv is None else argv)
    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__)
                   if m.name.startswith("bench_"))
    if wanted:
        names = [n for n in names if any(w in n for w in wanted)]
    timed = []
    for name in names:
        mod = importlib.import_module(f"bench.{name}")
        print(f"\n== {name} ==", flush=True)
        t0 = time.perf_counter()
        for row in mod.run():
            print(_fmt(row), flush=True)
            timed.append(row)
        print(f"  ({time.perf_counter() - t0:.1f} s)", flush=True)
        time.sleep(0.5)  # let thread pools of different libraries go idle between modules
    print("\n== bars (issues #13 and #14, bench/bars.py) ==")
    for line in bars.summary(timed):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
