"""The element-by-element rounding kernels: round_value (or, for 64-bit integers, round_integer)
on every element, through the one chunked driver (softfloat._driver).

They serve what the vectorised kernel (softfloat._kernels_round_vec) does not: formats with more
than 50 fraction bits, and int64 / uint64 inputs, rounded exactly once from their integer values.
They are also the reference the tests compare the vectorised kernels with: same results, same
flag counts, same random bits.

``CHUNK``, ``NFLAGS``, ``n_chunks`` and ``add_flag_counts`` are re-exported from the driver for
the modules that import them from here.

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, types
from numba.extending import overload

from ._driver import CHUNK, INNER, NFLAGS, add_flag_counts, launch, n_chunks, record
from ._roundpack import SR, format_params_of, round_integer, round_value
from .formats import FormatParams
from .rng import random_bits

__all__ = ["CHUNK", "NFLAGS", "n_chunks", "add_flag_counts", "RoundEach", "round_kernel"]


def _round_one(xi, fp, mode, u, rbits):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(_round_one)
def _round_one_impl(xi, fp, mode, u, rbits):
    # Chosen by the element type at compile time: floats widen exactly to float64, integers
    # (int64, uint64) are rounded from their exact values.
    if isinstance(xi, types.Float):
        return lambda xi, fp, mode, u, rbits: round_value(np.float64(xi), 0, fp, mode, u, rbits)
    if isinstance(xi, types.Integer):
        return lambda xi, fp, mode, u, rbits: round_integer(xi, fp, mode, u, rbits)
    return None


@njit(cache=True, **INNER)
def _round_each_chunk(k, lo, hi, c, x, out, counts):
    """out[i] = round(x[i]) for i in [lo, hi): floats through round_value, integers (int64 or
    uint64 arrays) through round_integer."""
    fp = format_params_of(k)
    for i in range(lo, hi):
        u = random_bits(k.key, k.base + i) if k.mode == SR else np.uint64(0)
        r, fl = _round_one(x[i], fp, k.mode, u, k.rbits)
        out[i] = r
        if k.want_flags:
            add_flag_counts(counts, c, fl)


#: The record of the element-by-element rounding: the format's fields, the mode code, the
#: stochastic-rounding key and bit count (0 and 1 in the deterministic modes), the global index
#: of element 0 and whether flags are counted.
RoundEach = record("RoundEach", FormatParams._fields, _round_each_chunk, __name__,
                   dynamic=(("mode", np.int64), ("key", np.uint64), ("rbits", np.int64),
                            ("base", np.int64), ("want_flags", np.bool_)))


@functools.lru_cache(maxsize=256)
def _static(fp):
    """RoundEach's static part for the FormatParams fp (made once per format)."""
    return RoundEach.params(*fp)


def round_kernel(x, out, fp, mode, key, base, rbits, want_flags, counts):
    """out = round(x) element by element for 1-d contiguous x (float32, float64, int64 or
    uint64) and carrier out; counts: a driver flag table (one row per chunk)."""
    launch(_static(fp), (int(mode), np.uint64(key), int(rbits), int(base), bool(want_flags)),
           x.size, x, out, counts)
