"""Thread count for small problems: ``serial_if_small(work)`` runs the Numba parallel kernels
of a call on the calling thread alone when the work is small.

Waking Numba's worker threads costs far more than a small GEMM (a 16-term dot: ~0.4 ms with
one thread, up to ~15 ms with two on a loaded 2-core machine), and results never depend on the
thread count (every output element is computed independently), so this only changes speed.
numba.set_num_threads is thread-local: other threads of the process are not affected.

Imports numba only.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba

#: Below this many multiply-adds (m * n * k) or elements, one thread does the work:
#: 2^18 products take ~1 ms in the slowest kernel, about the cost of a parallel launch.
PARALLEL_MIN_WORK = 1 << 18


@contextmanager
def serial_if_small(work: int):
    if work >= PARALLEL_MIN_WORK:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)
