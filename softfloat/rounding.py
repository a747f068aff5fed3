"""Rounding real numbers onto a format's grid: :func:`round` (conversion) and its flags.

``round(x, fmt, mode)`` rounds every element of x exactly once (float32 and float64 inputs are
both rounded from their own exact values: a float64 input is never rounded through float32) and
returns the carrier array (float32 when the format fits, else float64).  The rounding rules, the
overflow and underflow conventions and the NaN handling are documented in
:mod:`softfloat._roundpack`, the single routine all operations share.

float32 inputs to formats carried in float32 (fp16, bf16, tf32, the fp8 formats, ...) take a
fast path (:mod:`softfloat._kernels_round_f32`) that works on the float32 bit patterns and gives
the same results and flag counts as round_pack, bit for bit (tests/test_exhaustive.py checks all
2^32 float32 inputs for fp16 and bf16); everything else calls round_pack per element.

Imports numpy and the softfloat kernels only.
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

from . import _kernels_round as K
from . import _kernels_round_f32 as KF
from ._validate import (as_float_array, check_flags, check_format, check_index_offset,
                        check_mode, check_sr, finish)

__all__ = ["round"]

#: Arrays of at most this many elements are rounded on the calling thread: waking the parallel
#: kernel's worker threads costs ~30-60 us, and the fast path rounds ~2.5 elements per ns on
#: one thread, so below ~2^18 elements one thread finishes first (measured on 2 cores:
#: 200K elements 105 us serial vs 129 us parallel; 1M 574 vs 372 us).  Training loops round
#: thousands of such tensors.  Both kernels process the same chunks with the same random-bit
#: indices, so the results do not depend on the choice.
SERIAL_MAX = 1 << 18


@functools.lru_cache(maxsize=256)
def _fast_params(fmt, mode: int, rbits: int) -> np.ndarray:
    """KF.fast_params, computed once per (format, mode, sr bits); the kernels never write it."""
    return KF.fast_params(fmt, mode, rbits)


def round(x, fmt, mode="rne", *, seed=None, sr_bits=None, flags=None,  # noqa: A001
          index_offset=0):
    """Round ``x`` onto the grid of ``fmt`` with one rounding per element.

    Parameters
    ----------
    x : array_like of float (float16/32/64 arrays, Python floats or lists)
    fmt : Format or str (e.g. "fp16", "bf16", "e4m3fn")
    mode : rounding mode name or softfloat.Mode ("rne", "rna", "rtz", "rup", "rdn", "rto", "sr")
    seed : int, required for mode "sr"; the random bits of element i depend only on (seed, i)
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
    arr = as_float_array(x)
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=fmt.carrier_dtype)
    counts = np.zeros((builtins.max(K.n_chunks(flat.size), 1), K.NFLAGS), dtype=np.int64)
    if flat.size and flat.dtype == np.float32 and out.dtype == np.float32 and fmt.man_bits < 23:
        # Fast path on the float32 patterns (same results and flags as round_kernel).  The
        # uint32 views are made here: writes through views made inside a parallel Numba
        # function can be lost.
        kern = KF.round_f32_serial if flat.size <= SERIAL_MAX else KF.round_f32_kernel
        kern(flat.view(np.uint32), out.view(np.uint32), _fast_params(fmt, int(mode), rbits),
             fmt.kernel_params(), key, base, flags is not None, counts)
    elif flat.size:
        K.round_kernel(flat, out, fmt.kernel_params(), int(mode), key, base, rbits,
                       flags is not None, counts)
    if flags is not None:
        flags._add_counts(counts, flat.size)
    return finish(out, arr.shape)
