"""The one chunked driver of softfloat's elementwise kernels.

Every elementwise kernel (rounding, arithmetic, bit patterns, the IEEE utilities, DFP's
quantization, shifts and sums) is a per-chunk function plus a parameter record; this module
runs it over an array in fixed chunks, on the calling thread for small arrays and in a
``prange`` loop otherwise (tests/test_structure.py checks that no other module writes such a
loop).  What it fixes once for all of them:

* the chunk size ``CHUNK`` (2^14 elements) and the chunk loop, so that each chunk c covers
  elements [c * CHUNK, min(n, (c + 1) * CHUNK));
* the per-chunk result rows (``flag_table``: one row of IEEE flag counts per chunk; kernels that
  report the first bad element keep one (index, status) row per chunk likewise), so that every
  count and every "first offending element" is identical whatever the number of threads;
* the rule "small problem, one thread" (``SERIAL_MAX``): both drivers run the same chunks in the
  same way, so results never depend on the choice;
* the global element index: kernels that draw stochastic-rounding bits receive ``base`` (the
  global flat index of element 0, the API's ``index_offset``) among their arguments and use
  ``base + i`` for element i.

Interface (how to write a kernel that runs on it)::

    @njit(cache=True)
    def _my_chunk(k, lo, hi, c, x, out, counts):   # k: the record; c: the chunk's row
        fp = format_params_of(k)                    # (softfloat._roundpack) FormatParams again
        for i in range(lo, hi):
            out[i], fl = ...                        # the per-element work
            add_flag_counts(counts, c, fl)

    # the kernel's record class: flat, the format's fields (FormatParams._fields) and its own
    MyKernel = record("MyKernel", FormatParams._fields + ("mode",), _my_chunk, __name__)

    counts = flag_table(x.size)
    launch(MyKernel(*fmt.kernel_params(), int(mode)), x.size, x, out, counts)

``launch(kernel, n, *args)`` calls ``type(kernel).chunk(kernel, lo, hi, c, *args)`` for every
chunk.  Records are FLAT named tuples of scalars and args are arrays and scalars: Numba's parallel
loops cannot take a tuple inside a tuple (a FormatParams inside the record fails to compile), so
the format's fields are copied into the record, and ``format_params_of`` rebuilds the
FormatParams inside the chunk function where round_value & co need one.  The arrays in args are
the caller's (make uint32/uint64 views in Python and pass them: writes through a view made inside
a parallel Numba function can be lost).  Numba compiles the driver once per (record class,
argument types); the record's values are run-time data.

Numba caching caveat: the compiled drivers are cached with this file's timestamp, and a chunk
function is compiled into them; after editing a chunk function clear the caches (see
docs/design.md), as for any kernel that calls into another module.

Imports numpy, numba and softfloat._threads only.
"""

from __future__ import annotations

import collections

import numpy as np
from numba import njit, prange
from numba.extending import overload

from ._threads import PARALLEL_MIN_WORK

__all__ = ["CHUNK", "NFLAGS", "SERIAL_MAX", "n_chunks", "flag_table", "add_flag_counts",
           "record", "launch", "drive_parallel", "drive_serial"]

#: Elements per chunk (2^14 = 16384: large enough to amortise scheduling, small enough to balance
#: two threads on arrays of a few hundred thousand elements, and one chunk of float32 input and
#: output (128 KiB) stays in the L2 cache between a kernel's passes).
CHUNK = 1 << 14

#: Flag columns of the count tables: inexact, underflow, overflow, invalid, divbyzero (bit i of
#: the flag word, softfloat._roundpack's codes).
NFLAGS = 5

#: Arrays of at most this many elements run on the calling thread: softfloat's one rule for
#: "small problem, one thread" (softfloat._threads.PARALLEL_MIN_WORK = 2^18: below it, one
#: thread does the work).  Waking the parallel kernel's worker threads costs ~30-60 us, and the
#: rounding kernels do ~2.5 elements per ns on one thread (measured on 2 cores: 200K elements
#: 105 us serial vs 129 us parallel; 1M 574 vs 372 us).  Training loops round thousands of such
#: tensors.
SERIAL_MAX = PARALLEL_MIN_WORK - 1


def n_chunks(n: int) -> int:
    """Number of chunks of an n-element array (0 for an empty one)."""
    return (n + CHUNK - 1) // CHUNK


def flag_table(n: int, cols: int = NFLAGS) -> np.ndarray:
    """Zeroed int64 counts, one row per chunk (at least one row, for empty arrays): by default
    the IEEE flag counts; ``cols`` other counts (e.g. softfloat.dfp's saturated and
    underflowed)."""
    return np.zeros((max(n_chunks(n), 1), cols), dtype=np.int64)


@njit(cache=True)
def add_flag_counts(counts, c, fl):
    """Count the flag bits fl in row c."""
    if fl != 0:
        for k in range(NFLAGS):
            if fl & (1 << k):
                counts[c, k] += 1


def record(name: str, fields, chunk, module: str):
    """A flat kernel record class (a named tuple with these fields) whose chunk function is
    ``chunk``; assign it to the module-level name ``name`` of ``module`` (Numba's cache refers
    to the class by its module and name)."""
    cls = collections.namedtuple(name, tuple(fields), module=module)
    cls.chunk = chunk
    return cls


def _call_chunk(kernel, lo, hi, c, args):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(_call_chunk)
def _call_chunk_impl(kernel, lo, hi, c, args):
    # Chosen at compile time from the record's type: its class names the chunk function.
    chunk = kernel.instance_class.chunk

    def impl(kernel, lo, hi, c, args):
        chunk(kernel, lo, hi, c, *args)
    return impl


@njit(cache=True, inline="always")
def _run_chunk(kernel, n, c, args):
    """Chunk c of [0, n): elements [c * CHUNK, min(n, (c + 1) * CHUNK)), row c."""
    # Numba types the prange index as int64 when it types drive_parallel and as uint64 in the
    # parallel region it builds: np.int64 keeps one signature for the chunk functions (else
    # each is compiled twice, doubling the cold compile time).  (Inlined: the cast sits in the
    # loop body as if written there.)
    ci = np.int64(c)
    lo = ci * CHUNK
    _call_chunk(kernel, lo, min(n, lo + CHUNK), ci, args)


@njit(parallel=True, cache=True)
def drive_parallel(kernel, n, args):
    """Chunks of [0, n) in a prange loop (see the module docstring)."""
    for c in prange((n + CHUNK - 1) // CHUNK):
        _run_chunk(kernel, n, c, args)


@njit(cache=True)
def drive_serial(kernel, n, args):
    """The same chunks in the same order, on the calling thread."""
    for c in range((n + CHUNK - 1) // CHUNK):
        _run_chunk(kernel, n, c, args)


def launch(kernel, n: int, *args) -> None:
    """Run ``type(kernel).chunk`` over the n elements: serially when n <= SERIAL_MAX (read at
    call time, so tests can move it), in parallel otherwise; nothing for n = 0."""
    if n <= 0:
        return
    (drive_serial if n <= SERIAL_MAX else drive_parallel)(kernel, np.int64(n), args)
