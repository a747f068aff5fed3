"""Compile softfloat's most used kernels into Numba's on-disk cache, several processes at once.

    python -m softfloat.precompile            # every chain, one process per core (at most 2)
    python -m softfloat.precompile --jobs 1   # one process, the chains one after the other
    python -m softfloat.precompile --list     # the chains and their groups

Numba compiles a kernel the first time a process calls it with new argument types and keeps the
machine code in its cache (``__pycache__`` beside the sources, or ``NUMBA_CACHE_DIR``), from
which every later process loads it in well under a second.  Cold compilation of the conversion
and arithmetic kernels takes minutes of one core, and two processes that need the same kernel at
the same time both compile it: the test suite's two pytest-xdist workers did so for 670 s of
their 1880 s of compilation on a 2-core host (2026-11-28, measured with Numba's compile events).
``make test`` runs this first, so the workers load these kernels instead.

A *group* is a set of calls that compiles one family of kernels.  Groups that share uncached
inner passes (the rounding passes of one lane width, which are compiled into each caller and not
cached on their own) are in one *chain*, run in order in one process, so that no pass is
compiled twice; the chains run in parallel.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

__all__ = ["GROUPS", "CHAINS", "run_group", "main"]

_OPS = ("add", "sub", "mul", "div", "sqrt", "fma")


def _round(dtype):
    import softfloat as sf
    fmt = sf.get_format("fp16")
    # (one size: small and large arrays run the same compiled driver, softfloat._driver)
    x = np.linspace(-70000.0, 70000.0, 1000).astype(dtype)
    # an fp16 subnormal and a NaN, marked by pass 1: the later passes' launch compiles too
    x[500:502] = 1e-6, np.nan
    for mode, kw in (("rne", {}), ("sr", {"seed": 0})):
        sf.round(x, fmt, mode, **kw)
        sf.round(x, fmt, mode, flags=sf.Flags(), **kw)


def _arith(fname, mode):
    import softfloat as sf
    fmt = sf.get_format(fname)
    kw = {"seed": 0} if mode == "sr" else {}
    x = np.linspace(0.5, 3.0, 1000).astype(np.float32)
    for op in _OPS:
        args = (x,) if op == "sqrt" else (x, x, x) if op == "fma" else (x, x)
        getattr(sf, op)(*args, fmt, mode, flags=sf.Flags(), **kw)


#: name -> (what it compiles, the calls)
GROUPS = {
    "round-float32": ("sf.round of float32 input (32-bit lanes), rne and sr, with and without "
                      "flags", lambda: _round(np.float32)),
    "round-float64": ("sf.round of float64 input (64-bit lanes), rne and sr, with and without "
                      "flags", lambda: _round(np.float64)),
    "arith-fp16-rne": ("the six operations in fp16 rne (float32 proxies, 32-bit lanes)",
                       lambda: _arith("fp16", "rne")),
    "arith-fp16-sr": ("the six operations in fp16 sr (float64 values, 64-bit lanes)",
                      lambda: _arith("fp16", "sr")),
    "arith-fp32-rne": ("the six operations in fp32 rne (float64 values, 64-bit lanes)",
                       lambda: _arith("fp32", "rne")),
}

#: groups run in order in one process (they share uncached passes of one lane width)
CHAINS = (("round-float32", "arith-fp16-rne"),
          ("round-float64", "arith-fp16-sr", "arith-fp32-rne"))


def run_group(name: str) -> float:
    """Run one group's calls in this process; returns the seconds it took."""
    if name not in GROUPS:
        raise ValueError(f"unknown precompile group {name!r}; the groups are "
                         f"{', '.join(GROUPS)}")
    t = time.perf_counter()
    GROUPS[name][1]()
    return time.perf_counter() - t


def _run_chain(i: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softfloat.precompile", "--chain", str(i)],
                          capture_output=True, text=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m softfloat.precompile",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=None,
                   help="processes at once (default: the number of cores, at most "
                        f"{len(CHAINS)})")
    p.add_argument("--list", action="store_true", help="print the chains and groups")
    p.add_argument("--chain", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.list:
        for i, chain in enumerate(CHAINS):
            print(f"chain {i}:")
            for g in chain:
                print(f"  {g}: {GROUPS[g][0]}")
        return 0
    if a.chain is not None:
        if not 0 <= a.chain < len(CHAINS):
            p.error(f"--chain must be 0..{len(CHAINS) - 1}, got {a.chain}")
        for g in CHAINS[a.chain]:
            print(f"{g}: {run_group(g):.1f} s", flush=True)
        return 0
    jobs = a.jobs if a.jobs is not None else min(len(CHAINS), os.cpu_count() or 1)
    if jobs < 1:
        p.error(f"--jobs must be at least 1, got {jobs}")
    from concurrent.futures import ThreadPoolExecutor
    t = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(_run_chain, range(len(CHAINS))))
    rc = 0
    for i, r in enumerate(results):
        sys.stdout.write(r.stdout)
        if r.returncode != 0:
            sys.stderr.write(f"precompile chain {i} failed (exit {r.returncode}):\n{r.stderr}")
            rc = 1
    print(f"precompiled {sum(len(c) for c in CHAINS)} groups in {len(CHAINS)} chains, "
          f"{jobs} at a time: {time.perf_counter() - t:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
