"""Argument checking shared by the public softfloat API (pure Python, numpy only).

Turns user input into the native-endian contiguous float32/float64 arrays the kernels take, and
gives clear TypeError/ValueError messages for everything else.
"""

from __future__ import annotations

import numpy as np

from .flags import Flags
from .formats import Format, get_format
from .modes import Mode, parse_mode

_MAX_EXACT_INT = 1 << 53  # every int of magnitude <= 2^53 is exact in float64


def as_float_array(x, name: str = "x") -> np.ndarray:
    """Return ``x`` as a native-endian, C-contiguous float32 or float64 ndarray (values unchanged).

    float16 (and other narrower real float dtypes) are widened exactly to float32.  Python scalars
    and (nested) lists of Python floats/ints become float64; an int there must be exact in float64.
    numpy integer, bool, complex and object arrays are refused with a TypeError naming the dtype.
    """
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        arr = np.asarray(x)
        kind = arr.dtype.kind
        if kind != "f":
            raise TypeError(
                f"{name}: dtype {arr.dtype} is not accepted; pass a real floating-point array "
                "(float16, float32 or float64), a Python float, or a list of floats")
        if arr.dtype.itemsize > 8:
            raise TypeError(f"{name}: dtype {arr.dtype} (extended precision) is not accepted; "
                            "use float32 or float64")
        target = np.float64 if arr.dtype.itemsize == 8 else np.float32
        # np.array(order="C") rather than ascontiguousarray, which turns 0-d into 1-d.
        return np.array(arr, dtype=target, order="C", copy=None)
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: bool is not accepted; pass a float")
    if isinstance(x, complex):
        raise TypeError(f"{name}: complex is not accepted; pass a real float")
    if isinstance(x, (int, float)):
        _check_int(x, name)
        return np.asarray(float(x), dtype=np.float64)
    if isinstance(x, (list, tuple)):
        arr = np.asarray(x)
        if arr.dtype.kind in "iu":
            if arr.size and int(np.max(np.abs(arr.astype(object)))) > _MAX_EXACT_INT:
                raise ValueError(f"{name}: integers above 2**53 are not exact in float64")
            return np.ascontiguousarray(arr, dtype=np.float64)
        if arr.dtype.kind != "f":
            raise TypeError(f"{name}: a list of {arr.dtype} values is not accepted; pass floats")
        return np.ascontiguousarray(arr, dtype=np.float64)
    raise TypeError(f"{name}: {type(x).__name__} is not accepted; pass a float ndarray, a Python "
                    "float or a list of floats")


def _check_int(x, name):
    if isinstance(x, int) and abs(x) > _MAX_EXACT_INT:
        raise ValueError(f"{name}: the int {x} is not exact in float64 (|x| > 2**53)")


def check_format(fmt) -> Format:
    return get_format(fmt)


def check_mode(mode) -> Mode:
    return parse_mode(mode)


#: Default number of random bits for stochastic rounding.  24 bits quantise the probability to
#: 2^-24; they are exact for every conversion whose remainder has at most 24 bits (float32 to
#: fp16/bf16/fp8 leaves at most 23 - 2 = 21 bits), and p + 24 + 2 <= 53 for p <= 27 keeps the
#: round-to-odd intermediate of the arithmetic exact enough (see softfloat/_arith.py).
DEFAULT_SR_BITS = 24


def check_sr(mode: Mode, seed, sr_bits, max_bits: int = 62):
    """Validate seed / sr_bits; returns (key uint64, rbits int)."""
    from .rng import seed_key
    if mode != Mode.SR:
        if sr_bits is not None:
            raise ValueError("sr_bits is only meaningful with mode='sr'")
        return np.uint64(0), 1
    if seed is None:
        raise ValueError("mode 'sr' (stochastic rounding) needs seed=<int>: results are "
                         "reproducible functions of (seed, element index)")
    rbits = DEFAULT_SR_BITS if sr_bits is None else sr_bits
    if isinstance(rbits, bool) or not isinstance(rbits, (int, np.integer)):
        raise TypeError(f"sr_bits must be an int, got {type(rbits).__name__}")
    rbits = int(rbits)
    if not 1 <= rbits <= max_bits:
        raise ValueError(f"sr_bits must be in 1..{max_bits} for this operation, got {rbits}")
    return seed_key(seed), rbits


def check_index_offset(index_offset) -> int:
    """Validate ``index_offset``: the global flat index of the first element, so that a piece
    of a larger array (a chunk of a dask array, a slice) draws the stochastic-rounding bits the
    whole array would give it.  An int >= 0 (at most 2^62, far beyond any array); accepted in
    every mode, used by stochastic rounding only."""
    if isinstance(index_offset, (bool, np.bool_)) or not isinstance(index_offset,
                                                                     (int, np.integer)):
        raise TypeError(f"index_offset must be an int, got {type(index_offset).__name__}")
    index_offset = int(index_offset)
    if not 0 <= index_offset <= 1 << 62:
        raise ValueError(f"index_offset must be in 0..2**62, got {index_offset}")
    return index_offset


def check_flags(flags):
    if flags is not None and not isinstance(flags, Flags):
        raise TypeError(f"flags must be a softfloat.Flags or None, got {type(flags).__name__}")
    return flags


def finish(out: np.ndarray, shape):
    """Reshape a flat kernel output; 0-d results come back as numpy scalars, like ufuncs."""
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out
