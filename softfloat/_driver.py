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
field, ``record_<Name>``, names the record class, from which the driver picks the chunk
function and the field order at compile time.  Numba's parallel loops cannot take a tuple
inside a tuple, so records are flat: the format's fields are among the record's, and
``format_params_of`` rebuilds the FormatParams inside the chunk function where round_value &
co need one.  The arrays in args are the caller's (make uint32/uint64 views in Python and pass
them: writes through a view made inside a parallel Numba function can be lost).  Numba compiles
the driver once per (record class, static field types, argument types); the values are
run-time data.

Numba caching caveat: the compiled drivers are cached with this file's timestamp, and a chunk
function is compiled into them; after editing a chunk function clear the caches (see
docs/design.md), as for any kernel that calls into another module.

Imports numpy, numba and softfloat._threads only.
"""

from __future__ import annotations

import collections
import copyreg
import functools
import importlib

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
    order."""
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
    return cls


def _chunk_caller(cls):
    """The compiled-side caller of cls's chunk function: builds the record (the static fields
    read from the structured array, the dynamic ones converted to their declared types) and
    calls the chunk function.  Generated source: the field list is the class's."""
    cast = {np.bool_: "bool"}
    conv = [cast.get(t, f"np.{t.__name__}") for t in cls.dynamic_types]
    fields = ([f"r.{f}" for f in cls.static_fields]
              + [f"{cv}(dyn[{i}])" for i, cv in enumerate(conv)])
    src = ("def impl(static, dyn, lo, hi, c, args):\n"
           "    r = static[0]\n"
           f"    k = cls({', '.join(fields)})\n"
           "    chunk(k, lo, hi, c, *args)\n")
    scope = {"np": np, "cls": cls, "chunk": cls.chunk}
    exec(compile(src, f"<softfloat._driver record {cls.__name__}>", "exec"), scope)
    return scope["impl"]


def _call_chunk(static, dyn, lo, hi, c, args):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(_call_chunk)
def _call_chunk_impl(static, dyn, lo, hi, c, args):
    # Chosen at compile time from the structured array's type: its first field names the
    # record class.
    cls = _RECORDS[static.dtype.members[0][0]]
    if len(dyn) != len(cls.dynamic_types):
        raise TypeError(f"{cls.__name__}: launch takes {len(cls.dynamic_types)} dynamic "
                        f"values, got {len(dyn)}")
    return _chunk_caller(cls)


@njit(cache=True, inline="always")
def _run_chunk(static, dyn, n, c, args):
    """Chunk c of [0, n): elements [c * CHUNK, min(n, (c + 1) * CHUNK)), row c."""
    # Numba types the prange index as int64 when it types drive_parallel and as uint64 in the
    # parallel region it builds: np.int64 keeps one signature for the chunk functions (else
    # each is compiled twice, doubling the cold compile time).  (Inlined: the cast sits in the
    # loop body as if written there.)
    ci = np.int64(c)
    lo = ci * CHUNK
    _call_chunk(static, dyn, lo, min(n, lo + CHUNK), ci, args)


@njit(parallel=True, cache=True)
def drive_parallel(static, dyn, n, args):
    """Chunks of [0, n) in a prange loop (see the module docstring)."""
    for c in prange((n + CHUNK - 1) // CHUNK):
        _run_chunk(static, dyn, n, c, args)


@njit(cache=True)
def drive_serial(static, dyn, n, args):
    """The same chunks in the same order, on the calling thread."""
    for c in range((n + CHUNK - 1) // CHUNK):
        _run_chunk(static, dyn, n, c, args)


def launch(static, dynamic: tuple, n: int, *args) -> None:
    """Run the chunk function of the record class of ``static`` (a ``Cls.params`` array) with
    the per-call values ``dynamic`` over the n elements: serially when n <= SERIAL_MAX (read at
    call time, so tests can move it), in parallel otherwise; nothing for n = 0."""
    if n <= 0:
        return
    # n as a Python int (typed int64, as np.int64 would be): Numba types a numpy scalar
    # argument about 1.5 us slower per call (measured)
    (drive_serial if n <= SERIAL_MAX else drive_parallel)(static, dynamic, int(n), args)
