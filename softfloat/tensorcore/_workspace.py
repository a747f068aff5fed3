"""Per-thread scratch arrays of the ideal models' fast path: ``scratch(name, shape, dtype)``.

A call of the ideal models needs float64 copies of A and B and the float64 product A @ B, all
private to the call.  Fresh arrays of a few MiB cost a page fault per 4 KiB page on first touch
(about as much as the conversion itself), so they are kept between calls, one set per Python
thread (threading.local: concurrent calls from several threads never share one).  A scratch
array is valid until the next scratch() of the same name on the same thread; nothing that
escapes a public call (the returned D) lives in one.  Arrays above MAX_CACHED elements are not
kept (a huge problem should not pin its memory).

Imports numpy and the standard library only.
"""

from __future__ import annotations

import threading

import numpy as np

#: Largest scratch array kept between calls, in elements (32 MiB of float64).
MAX_CACHED = 1 << 22

_tls = threading.local()


def scratch(name: str, shape: tuple, dtype=np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array of the given shape, reused between calls."""
    size = 1
    for d in shape:
        size *= int(d)
    if size > MAX_CACHED:
        return np.empty(shape, dtype)
    bufs = getattr(_tls, "bufs", None)
    if bufs is None:
        bufs = _tls.bufs = {}
    dt = np.dtype(dtype)
    buf = bufs.get((name, dt))
    if buf is None or buf.size < size:
        buf = bufs[(name, dt)] = np.empty(max(size, 1024), dt)
    return buf[:size].reshape(shape)
