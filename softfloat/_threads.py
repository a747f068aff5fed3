"""The one rule for "small problem, one thread": ``serial_if_small(work)`` runs the Numba
parallel kernels of a call on the calling thread alone when its work is below
PARALLEL_MIN_WORK.

Waking Numba's worker threads costs far more than a small problem (about 45 us per parallel
kernel launch with two threads on this project's 2-core machine, against 1 us with one; up to
~15 ms on a loaded machine), and results never depend on the thread count (every output element
is computed independently, stochastic rounding keyed by element index), so the rule only changes
speed.  A call sets the thread count once, around all of its kernels, with Numba's public
numba.get_num_threads / set_num_threads (thread-local: other threads of the process are not
affected; about 1 us each).

Imports numba only.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba

#: Below this much work (multiply-adds m * n * k of a GEMM, or elements of an elementwise
#: operation) one thread does it: 2^18 products take about 0.2-1 ms in the Tensor Core kernels,
#: the order of a parallel launch on a loaded machine.
PARALLEL_MIN_WORK = 1 << 18


@contextmanager
def serial_if_small(work: int):
    """Run the enclosed kernels on one thread when ``work`` < PARALLEL_MIN_WORK."""
    if work >= PARALLEL_MIN_WORK:
        yield
        return
    old = numba.get_num_threads()
    if old == 1:
        yield
        return
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)
