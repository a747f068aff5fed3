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


def _fast_thread_calls():
    """numba's own (get, set) of the thread-local thread count without the per-call checks of
    numba.get_num_threads / set_num_threads (a lock and a launch check each, ~4 us a call),
    after one public call has launched the pool; the public functions if that is not possible."""
    numba.get_num_threads()
    try:
        from numba.np.ufunc import parallel as _par
        get, put = _par._get_num_threads, _par._set_num_threads
        get()
        return get, put
    except Exception:                       # another numba: the public (checked) calls
        return numba.get_num_threads, numba.set_num_threads


_CALLS = []


@contextmanager
def serial_if_small(work: int):
    if work >= PARALLEL_MIN_WORK:
        yield
        return
    if not _CALLS:
        _CALLS.append(_fast_thread_calls())
    get, put = _CALLS[0]
    old = get()
    if old == 1:
        yield
        return
    put(1)
    try:
        yield
    finally:
        put(old)
