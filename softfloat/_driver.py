"""The one chunked driver of softfloat's elementwise kernels.

Every elementwise kernel (rounding, arithmetic, bit patterns, the IEEE utilities, DFP's
quantization, shifts and sums) is a per-chunk function plus a parameter record; this module
runs it over an array in fixed chunks, on the calling thread for small arrays and on Numba's
number of threads otherwise (tests/test_structure.py checks that no other module writes such a
loop).  What it fixes once for all of them:

* the chunk size ``CHUNK`` (2^14 elements) and the chunk loop, so that each chunk c covers
  elements [c * CHUNK, min(n, (c + 1) * CHUNK));
* the per-chunk result rows (``flag_table``: one row of IEEE flag counts per chunk; kernels that
  report the first bad element keep one (index, status) row per chunk likewise), so that every
  count and every "first offending element" is identical whatever the number of threads;
* the rule "small problem, one thread" (``SERIAL_MAX``): every thread runs the same compiled
  driver on a contiguous run of chunks, so results never depend on the choice or on the number
  of threads;
* the global element index: kernels that draw stochastic-rounding bits receive ``base`` (the
  global flat index of element 0, the API's ``index_offset``) among their arguments and use
  ``base + i`` for element i.

Interface (how to write a kernel that runs on it)::

    @njit(cache=True, **INNER)                      # called by compiled code only
    def _my_chunk(k, lo, hi, c, x, out, counts):   # k: the record; c: the chunk's row
        fp = format_params_of(k)                    # (softfloat._roundpack) FormatParams again
        for i in range(lo, hi):
            out[i], fl = ...                        # the per-element work
            add_flag_counts(counts, c, fl)

    # the kernel's record class: the static fields (here the format's), then the per-call ones
    MyKernel = record("MyKernel", FormatParams._fields, _my_chunk, __name__,
                      dynamic=(("mode", np.int64), ("key", np.uint64)))

    static = MyKernel.params(*fmt.kernel_params())  # once per format (cache it)
    counts = flag_table(x.size)
    launch(static, (int(mode), np.uint64(key)), x.size, x, out, counts)

``launch(static, dynamic, n, *args)`` calls ``chunk(k, lo, hi, c, *args)`` for every chunk, with
``k`` the record class's named tuple of the static fields' values (from ``static``) and the
dynamic ones (from the tuple ``dynamic``, each converted to its declared type).  A record is
passed in two parts because Numba types every argument of every call: a named tuple of numpy
scalars costs about 4 us per call for sf.round's 85 fields (measured), while a read-only
structured array of the static fields (typed from its dtype, made once and cached by the
caller) and a short tuple of Python scalars cost well under 1 us.  The structured array's first
field, ``record_<Name>``, names the record class, whose own compiled driver ``Cls.drive`` (made
by ``record`` from generated source: the field list is the class's) launch calls.  Records are
flat (no tuple inside the tuple): the format's fields are among the record's, and
``format_params_of`` rebuilds the FormatParams inside the chunk function where round_value &
co need one.  The arrays in args are the caller's (make uint32/uint64 views in Python and pass
them).  Numba compiles a driver once per (static field types, argument types); the values are
run-time data.

Threads: a launch above SERIAL_MAX cuts the chunks into ``numba.get_num_threads()`` contiguous
runs and runs them on that many threads (the calling one and a pool of Python threads), each
calling the compiled driver, which releases the GIL (``nogil``).  The thread count is Numba's,
so ``numba.set_num_threads``, ``NUMBA_NUM_THREADS`` and softfloat._threads.serial_if_small
govern these kernels as they govern the ``prange`` kernels of softfloat.tensorcore and
softfloat.mx.  Not a ``prange`` loop because of compile time: Numba optimises and generates
machine code for a called function again in every function it is compiled into, and a
``prange`` loop makes two more (its parallel region and the function around it); see
``_driver``.

Numba caching: a driver is cached under its chunk function's source file and that file's
stamp.  A chunk function that calls into other modules is compiled into the driver as into any
caller; after editing those, clear the caches (see docs/design.md).

Imports numpy, numba, the standard library and softfloat._threads only.
"""

from __future__ import annotations

import collections
import copyreg
import functools
import importlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

from ._threads import PARALLEL_MIN_WORK

__all__ = ["CHUNK", "NFLAGS", "SERIAL_MAX", "INNER", "n_chunks", "flag_table",
           "add_flag_counts", "record", "launch"]

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
    # (one chunk, the small tensors of training loops: no n_chunks call, ~0.3 us less per call)
    if n <= CHUNK:
        return np.zeros((1, cols), dtype=np.int64)
    return np.zeros((n_chunks(n), cols), dtype=np.int64)


@njit(cache=True)
def add_flag_counts(counts, c, fl):
    """Count the flag bits fl in row c."""
    if fl != 0:
        for k in range(NFLAGS):
            if fl & (1 << k):
                counts[c, k] += 1


#: njit options of the functions that only compiled code calls (chunk functions, the passes
#: of a chunk): no CPython wrapper and no C-callable one, which Numba otherwise builds for
#: every function it compiles.  The CPython wrapper's unboxing of a kernel record (sf.round's
#: has 88 fields) was ~0.45 s of a chunk function's 1.2-1.7 s of compilation (a do-nothing
#: chunk function, fresh cache, Zen 3, 2026-11-29).  Such a function must never be called
#: from Python: without its wrapper the call crashes the interpreter (checked, Numba 0.68).  So
#: only private functions that the drivers and other compiled functions call get these
#: options (tests/test_driver.py lists the chunk functions; tests call none of them).
INNER = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}

#: record classes by their structured-array tag ``record_<Name>`` (see ``record``)
_RECORDS: dict = {}

_BUILTIN_DTYPES = {bool: np.bool_, int: np.int64, float: np.float64}


def _field_dtype(name: str, value):
    """The numpy type of a static field from its value: numpy scalars keep theirs, Python
    bool / int / float are bool_ / int64 / float64 (as Numba types them)."""
    if isinstance(value, np.generic):
        return value.dtype
    t = _BUILTIN_DTYPES.get(type(value))
    if t is None:
        raise TypeError(f"record field {name!r}: {value!r} is not a bool, int, float or numpy "
                        "scalar")
    if t is np.int64 and not -(1 << 63) <= value < (1 << 63):
        raise OverflowError(f"record field {name!r}: {value} does not fit int64 (pass a numpy "
                            "scalar of the intended type)")
    return np.dtype(t)


def _params(cls, *values) -> np.ndarray:
    """The static part of a ``cls`` record: a read-only one-element structured array, first
    field the class's tag, then ``cls.static_fields`` typed from ``values`` (see
    _field_dtype)."""
    if len(values) != len(cls.static_fields):
        raise TypeError(f"{cls.__name__}.params takes {len(cls.static_fields)} values "
                        f"({', '.join(cls.static_fields)}), got {len(values)}")
    dt = np.dtype([(cls.tag, np.uint8)]
                  + [(f, _field_dtype(f, v)) for f, v in zip(cls.static_fields, values)])
    arr = np.zeros(1, dtype=dt)
    arr[0] = (0, *values)
    arr.flags.writeable = False
    return arr


class RecordClass(type):
    """The metaclass of the record classes, so that they pickle through ``_record_class``
    (registered with copyreg) rather than as plain classes.

    Numba's cache index of a chunk function holds its signatures, in which the record class
    appears (the type of the chunk function's first argument), pickled by module and name;
    Numba unpickles the whole index before it compares the source file's stamp.  A plain
    class that a newer version of the module renamed or removed would make that unpickling
    fail (``AttributeError: Can't get attribute``) and the kernel call with it, on every
    machine whose cache predates the change.  ``_record_class`` returns a placeholder class
    instead: the index then loads, its stamp differs from the edited source's, and Numba
    discards it and compiles afresh (tests/test_driver.py checks both steps)."""


def _record_class(module: str, name: str):
    """The record class ``name`` of ``module`` (unpickling), or a placeholder class where the
    module no longer defines one by that name (see RecordClass)."""
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:
        cls = None
    return cls if isinstance(cls, RecordClass) else _stale_record(module, name)


@functools.lru_cache(maxsize=None)
def _stale_record(module: str, name: str):
    """A placeholder for a record class that no longer exists: a distinct class (one per
    name) that no current signature names, so nothing cached under it is ever used."""
    return type(f"Stale_{name}", (tuple,), {"__slots__": (), "__module__": __name__})


copyreg.pickle(RecordClass, lambda cls: (_record_class, (cls.__module__, cls.__name__)))


def record(name: str, fields, chunk, module: str, dynamic=()):
    """A flat kernel record class: a named tuple of the static ``fields`` and then the
    ``dynamic`` ones (``(name, numpy scalar type)`` pairs), whose chunk function is ``chunk``;
    assign it to the module-level name ``name`` of ``module`` (Numba's cache refers to the
    class by its module and name, see RecordClass).  ``Cls.params(*values)`` makes the static
    part that ``launch`` takes; the per-call values go in launch's ``dynamic`` tuple, in
    order.  ``chunk=None`` makes a record type only: a class that chunk functions build and
    pass on (``Cls(*k)``) but that cannot be launched."""
    dynamic = tuple(dynamic)
    base = collections.namedtuple(name, tuple(fields) + tuple(f for f, _ in dynamic),
                                  module=module)
    cls = RecordClass(name, (base,), {"__slots__": (), "__module__": module})
    cls.chunk = chunk
    cls.static_fields = tuple(fields)
    cls.dynamic_types = tuple(np.dtype(t).type for _, t in dynamic)
    cls.tag = f"record_{name}"
    if cls.tag in _RECORDS:
        raise ValueError(f"a kernel record class named {name!r} exists already "
                         f"({_RECORDS[cls.tag].__module__})")
    _RECORDS[cls.tag] = cls
    cls.params = classmethod(_params)
    cls.drive = None if chunk is None else _driver(cls)
    return cls


def _driver(cls):
    """cls's compiled driver ``drive(static, dyn, n, c0, c1, args)``: builds the record (the
    static fields read from the structured array, the dynamic ones converted to their declared
    types) and calls the chunk function on chunks c0 .. c1-1 of [0, n), without the GIL.

    Generated source (the field list is the class's), compiled under the chunk function's own
    file name, so that Numba caches the driver beside the chunk function and with that file's
    source stamp: an edit of the chunk's module recompiles it.  (A driver shared by all record
    classes, specialised through an ``@overload`` on the static array's type, compiled the
    record-building code up to three times per class; and a ``prange`` driver made Numba
    optimise and generate machine code for the whole chunk function twice more, in the
    parallel region and in the function around it.  Each such pass over a large chunk
    function, such as the arithmetic's, costs 3-6 s of LLVM time: per record class the
    overload and prange drivers compiled in 24 s what this one compiles in 3 s, Zen 3,
    2026-11-28.)"""
    cast = {np.bool_: "bool"}
    conv = [cast.get(t, f"np.{t.__name__}") for t in cls.dynamic_types]
    fields = ([f"r.{f}" for f in cls.static_fields]
              + [f"{cv}(dyn[{i}])" for i, cv in enumerate(conv)])
    name = f"{cls.__name__}_drive"
    src = (f"def {name}(static, dyn, n, c0, c1, args):\n"
           "    r = static[0]\n"
           f"    k = cls({', '.join(fields)})\n"
           "    for c in range(c0, c1):\n"
           "        lo = c * CHUNK\n"
           "        chunk(k, lo, min(n, lo + CHUNK), c, *args)\n")
    chunk = cls.chunk
    filename = getattr(chunk, "py_func", chunk).__code__.co_filename
    scope = {"np": np, "CHUNK": CHUNK, "cls": cls, "chunk": chunk, "__name__": cls.__module__}
    exec(compile(src, filename, "exec"), scope)
    return njit(cache=True, nogil=True)(scope[name])


#: the worker threads of parallel launches (made on first use; made again in a forked child,
#: which inherits the object but not its threads)
_POOL = None
_POOL_LOCK = threading.Lock()


def _reset_pool_in_child():
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_reset_pool_in_child)


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(max(1, numba.config.NUMBA_NUM_THREADS - 1),
                                           thread_name_prefix="softfloat-driver")
    return _POOL


def runs(nc: int, t: int) -> list:
    """The bounds of t contiguous runs of nc chunks: run i is chunks cut[i] .. cut[i+1]-1, the
    runs' lengths differ by at most one."""
    return [nc * i // t for i in range(t + 1)]


def launch(static, dynamic: tuple, n: int, *args) -> None:
    """Run the chunk function of the record class of ``static`` (a ``Cls.params`` array) with
    the per-call values ``dynamic`` over the n elements: on the calling thread when
    n <= SERIAL_MAX (read at call time, so tests can move it) or Numba's thread count
    (``numba.get_num_threads()``, which ``numba.set_num_threads`` and
    softfloat._threads.serial_if_small set) is 1; otherwise the chunks are cut into that many
    contiguous runs, one per thread, the calling thread taking the first.  Nothing runs for
    n = 0."""
    if n <= 0:
        return
    cls = _RECORDS[static.dtype.names[0]]
    if len(dynamic) != len(cls.dynamic_types):
        raise TypeError(f"{cls.__name__}: launch takes {len(cls.dynamic_types)} dynamic "
                        f"values, got {len(dynamic)}")
    # n as a Python int (typed int64, as np.int64 would be): Numba types a numpy scalar
    # argument about 1.5 us slower per call (measured)
    n = int(n)
    nc = (n + CHUNK - 1) // CHUNK
    drive = cls.drive
    if drive is None:
        raise TypeError(f"{cls.__name__} is a record type without a chunk function: it cannot "
                        "be launched")
    t = 1 if n <= SERIAL_MAX else min(numba.get_num_threads(), nc)
    if t <= 1:
        drive(static, dynamic, n, 0, nc, args)
        return
    cut = runs(nc, t)
    pool = _pool()
    futures = [pool.submit(drive, static, dynamic, n, cut[i], cut[i + 1], args)
               for i in range(1, t)]
    try:
        drive(static, dynamic, n, cut[0], cut[1], args)
    finally:
        # every run has ended before launch returns or raises (the arrays are the caller's)
        for f in futures:
            f.result()
