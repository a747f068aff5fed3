"""Rounding real numbers onto a format's grid: :func:`round` (conversion) and its flags.

``round(x, fmt, mode)`` rounds every element of x exactly once (float32 and float64 inputs are
both rounded from their own exact values: a float64 input is never rounded through float32) and
returns the carrier array (float32 when the format fits, else float64).  The rounding rules, the
overflow and underflow conventions and the NaN handling are documented in
:mod:`softfloat._roundpack`, the single routine all operations share.

float32 and float64 inputs take the vectorised kernel (:mod:`softfloat._kernels_round_vec`)
that works on the bit patterns and gives the same results and flag counts as round_value, bit
for bit (tests/test_exhaustive.py checks all 2^32 float32 inputs for fp16 and bf16,
tests/test_round_core.py every data class in every mode); formats with more than 50 fraction
bits and int64/uint64 inputs call round_value (round_integer) per element.  A dask array is
rounded lazily, chunk by chunk (softfloat._lazy), with the bits of the numpy call.

Imports numpy and the softfloat kernels only.
"""

from __future__ import annotations

import numpy as np

from . import _kernels_round as K
from . import _kernels_round_vec as KV
from ._driver import SERIAL_MAX, flag_table  # noqa: F401  (SERIAL_MAX: re-exported, below)
from ._lazy import is_dask_array, map_elementwise
from ._validate import (as_input_array, check_flags, check_format, check_index_offset, check_mode,
                        check_sr, finish)

__all__ = ["round"]

# SERIAL_MAX (softfloat._driver's) is re-exported: the arithmetic's own kernels decide serial /
# parallel with the same threshold.


def round(x, fmt, mode="rne", *, seed=None, sr_bits=None, flags=None,  # noqa: A001
          index_offset=0):
    """Round ``x`` onto the grid of ``fmt`` with one rounding per element.

    Parameters
    ----------
    x : array_like: float16/32/64 arrays, integer arrays (int64/uint64 beyond 2^53 included),
        ml_dtypes arrays, Python floats, ints or lists; a dask array gives a dask array
    fmt : Format or str (e.g. "fp16", "bf16", "e4m3fn", "e8m0")
    mode : rounding mode name or softfloat.Mode ("rne", "rna", "rtz", "rup", "rdn", "rto", "sr",
        "rhu")
    seed : int, required for mode "sr" (and refused by the others); the random bits of element
        i depend only on (seed, index_offset + i)
    sr_bits : int, random bits per stochastic rounding (default 24, at most 62)
    flags : softfloat.Flags, optional; receives the counts of raised IEEE flags
    index_offset : int, the global flat index of x's first element (default 0): element i
        draws the random bits of index index_offset + i, so rounding the pieces of an array
        (chunks, slices) with their offsets gives the bits of rounding the whole array at once

    Returns
    -------
    ndarray of fmt.carrier_dtype with x's shape (a numpy scalar for scalar input)
    """
    fmt = check_format(fmt)
    mode = check_mode(mode)
    key, rbits = check_sr(mode, seed, sr_bits)
    check_flags(flags)
    base = check_index_offset(index_offset)
    if is_dask_array(x):
        if flags is not None:
            raise ValueError("round: flags= is not supported with a dask array (counting "
                             "would compute it); round x.compute() for flag counts")
        kw = dict(seed=seed, sr_bits=sr_bits)
        return map_elementwise(lambda c, index_offset: round(c, fmt, mode, index_offset=
                                                             index_offset, **kw),
                               [x], dtype=fmt.carrier_dtype, index_offset=base, name="round")
    arr = as_input_array(x)
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=fmt.carrier_dtype)
    counts = flag_table(flat.size)
    round_flat(flat, out, fmt, mode, key, rbits, base, counts, flags is not None)
    if flags is not None:
        flags._add_counts(counts, flat.size)
    return finish(out, arr.shape)


def round_flat(flat, out, fmt, mode, key, rbits, base, counts, want_flags):
    """out = round(flat) for a 1-d contiguous float32 / float64 / int64 / uint64 array into the
    carrier array out; the kernel choice: the vectorised one where it applies, else round_value
    element by element (same results, flags and random bits either way)."""
    if flat.dtype == np.float32 and not KV.vec_supported(fmt, np.float32) and \
            KV.vec_supported(fmt, np.float64):
        flat = flat.astype(np.float64)           # exact: one kernel for float64 carriers
    if flat.dtype.kind == "f" and KV.vec_supported(fmt, flat.dtype):
        # The bit views are made here: writes through views made inside a parallel Numba
        # function can be lost.
        KV.round_vec(flat.view(np.uint32 if flat.dtype == np.float32 else np.uint64),
                     out.view(np.uint32 if out.dtype == np.float32 else np.uint64),
                     fmt, int(mode), key, base, rbits, want_flags, counts)
    else:
        K.round_kernel(flat, out, fmt.kernel_params(), int(mode), key, base, rbits,
                       want_flags, counts)
