"""Timing helpers shared by the bench modules.

``best_interleaved(fns, repeats)`` times several functions in alternation: one warm-up call of
each (compilation, page faults), then ``repeats`` rounds that call every function once, in the
order given; it returns each function's best time.  A ratio of two of these bests compares the
two over the same minutes; timed in separate blocks (all of the baseline's calls, then all of
the emulation's), a burst of load from the host's other tenants can cover one block and not the
other (single ratios varied by up to 2x between runs on the shared 2-core hosts: README,
Status).  For baselines that run no thread pool of their own (numpy's elementwise operations,
a copy): the driver's pool and Numba's workers wait without spinning (softfloat sets
OMP_WAIT_POLICY=PASSIVE), but OpenBLAS's workers spin for a while after a call, so a BLAS
baseline keeps its idle gap and blocks.
"""

from __future__ import annotations

import time


def best_interleaved(fns, repeats: int) -> list[float]:
    """Each function's best time (seconds) over ``repeats`` rounds that call every function
    once, in order, after one warm-up call of each."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    fns = list(fns)
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best
