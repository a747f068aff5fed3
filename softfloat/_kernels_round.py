"""Numba array kernels for rounding to a format (conversion).

Takes only arrays and integers.  Work is split into fixed chunks of CHUNK elements processed by
``prange``; each chunk writes its own row of flag counts, so results and counts are identical
whatever the number of threads, and stochastic rounding draws its bits from (key, element index).

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._roundpack import SR, round_value
from .rng import random_bits

#: Elements per chunk (2^14 = 16384: large enough to amortise scheduling, small enough to balance
#: two threads on arrays of a few hundred thousand elements).
CHUNK = 1 << 14

NFLAGS = 5  # inexact, underflow, overflow, invalid, divbyzero (bit i of the flag word)


def n_chunks(n: int) -> int:
    return (n + CHUNK - 1) // CHUNK


@njit(cache=True)
def add_flag_counts(counts, c, fl):
    if fl != 0:
        for k in range(NFLAGS):
            if fl & (1 << k):
                counts[c, k] += 1


@njit(parallel=True, cache=True)
def round_kernel(x, out, fp, mode, key, base, rbits, want_flags, counts):
    """out[i] = round(x[i]) for 1-d contiguous x (float32 or float64) and carrier out."""
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        ci = np.int64(c)   # one signature for the callees (prange's index is typed twice)
        lo = ci * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            u = random_bits(key, base + i) if mode == SR else np.uint64(0)
            r, fl = round_value(np.float64(x[i]), 0, fp, mode, u, rbits)
            out[i] = r
            if want_flags:
                add_flag_counts(counts, ci, fl)
