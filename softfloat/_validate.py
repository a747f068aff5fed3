"""Argument checking shared by the public softfloat API (pure Python, numpy only).

Turns user input into the native-endian contiguous arrays the kernels take, and gives clear
TypeError/ValueError messages for everything else.  The one place that decides which inputs an
array argument accepts:

* real floating-point arrays and scalars (float16 widens exactly to float32; float32, float64);
* ml_dtypes arrays (bfloat16, float8_*, float6_*, float4_*, int2/int4 ...), read exactly through
  their bit patterns (softfloat.interop) -- without importing ml_dtypes;
* integer arrays and Python ints, exactly: int8/int16/uint8/uint16 as float32, int32/uint32 as
  float64; int64/uint64 as float64 when every |n| <= 2^53, otherwise kept as integers for the
  callers that round integers exactly (``as_input_array``: softfloat.round) and refused with a
  ValueError naming the limit by those that take float64 operands (``as_float_array``: the
  arithmetic, to_bits and the utilities);
* Python lists and tuples of those.
bool, complex, object and extended-precision inputs are refused with a TypeError naming them.
"""

from __future__ import annotations

import numpy as np

from .flags import Flags
from .formats import Format, get_format
from .modes import Mode, parse_mode

#: The native float dtypes (a dtype compares with a dtype faster than with a type).
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

_MAX_EXACT_INT = 1 << 53  # every int of magnitude <= 2^53 is exact in float64

_ACCEPTED = ("pass a real floating-point array (float16, float32 or float64), an integer array, "
             "an ml_dtypes array, a Python float or int, or a list of those")


def _ml_array(arr: np.ndarray, name: str) -> np.ndarray:
    """An ml_dtypes array as float32 carrier values (from its bit patterns when softfloat has
    its format, else through ml_dtypes' own exact cast) or, for its integer types, int64."""
    from .interop import ML_DTYPES, from_ml_dtypes
    if arr.dtype.name in ML_DTYPES:
        return np.asarray(from_ml_dtypes(arr), dtype=np.float32)
    if "int" in arr.dtype.name:
        return arr.astype(np.int64)
    if "float" in arr.dtype.name:
        # fnuz formats: every value is a float32 (at most 8 bits), the cast is exact
        with np.errstate(invalid="ignore"):
            return arr.astype(np.float32)
    raise TypeError(f"{name}: dtype {arr.dtype} is not accepted; {_ACCEPTED}")


def _int_array(arr: np.ndarray, name: str, exact_ints: bool) -> np.ndarray:
    """An integer array exactly: as float32 (<= 16 bits), float64 (32 bits, or 64 bits when
    every |n| <= 2^53), or kept as int64/uint64 when ``exact_ints``."""
    if arr.dtype.itemsize <= 2:
        return arr.astype(np.float32)
    if arr.dtype.itemsize <= 4:
        return arr.astype(np.float64)
    wide = arr.astype(np.uint64 if arr.dtype.kind == "u" else np.int64, copy=False)
    flat = wide.reshape(-1)
    if flat.size:
        big = (flat > _MAX_EXACT_INT) if wide.dtype == np.uint64 else \
            ((flat > _MAX_EXACT_INT) | (flat < -_MAX_EXACT_INT))
        if big.any():
            if exact_ints:
                return np.ascontiguousarray(wide.astype(wide.dtype.newbyteorder("="),
                                                        copy=False))
            i = int(np.argmax(big))
            raise ValueError(
                f"{name}: the integer {int(flat[i])} (element {i}) is beyond 2**53 in "
                "magnitude, where float64 operands are not exact; this operation takes float64 "
                "operands, so pass integers of magnitude <= 2**53 (softfloat.round rounds any "
                "int64/uint64 exactly, once)")
    return wide.astype(np.float64)


def as_input_array(x, name: str = "x", *, exact_ints: bool = True) -> np.ndarray:
    """Return ``x`` as a native-endian, C-contiguous array of float32 or float64 (values
    unchanged) or, for integers beyond 2^53 when ``exact_ints``, int64/uint64.  See the module
    docstring for what is accepted."""
    if type(x) is np.ndarray and (x.dtype == F32 or x.dtype == F64) and x.flags.c_contiguous:
        return x                      # what the last line gives it, without the checks
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: bool is not accepted; {_ACCEPTED}")
    if isinstance(x, complex):
        raise TypeError(f"{name}: complex is not accepted; pass a real float")
    if isinstance(x, int):
        if not -(1 << 63) <= x < 1 << 64:
            raise ValueError(f"{name}: the int {x} does not fit in 64 bits; softfloat accepts "
                             "integers in -2**63 .. 2**64 - 1")
        x = np.asarray(x, dtype=np.uint64 if x >= 1 << 63 else np.int64)
    elif isinstance(x, float):
        return np.asarray(x, dtype=np.float64)
    elif isinstance(x, (list, tuple)):
        try:
            x = np.asarray(x)
        except OverflowError:
            x = np.asarray(x, dtype=object)
        if x.dtype == object:
            raise TypeError(f"{name}: a list of mixed or unsupported values (dtype object: "
                            f"e.g. integers beyond 64 bits) is not accepted; {_ACCEPTED}")
        if x.dtype.kind == "f":
            return np.ascontiguousarray(x, dtype=np.float64)
    elif not isinstance(x, (np.ndarray, np.generic)):
        raise TypeError(f"{name}: {type(x).__name__} is not accepted; {_ACCEPTED}")
    arr = np.asarray(x)
    if getattr(arr.dtype.type, "__module__", "") == "ml_dtypes":
        return np.array(_ml_array(arr, name), order="C", copy=None)
    kind = arr.dtype.kind
    if kind in "iu":
        return np.array(_int_array(arr, name, exact_ints), order="C", copy=None)
    if kind != "f":
        raise TypeError(f"{name}: dtype {arr.dtype} is not accepted; {_ACCEPTED}")
    if arr.dtype.itemsize > 8:
        raise TypeError(f"{name}: dtype {arr.dtype} (extended precision) is not accepted; "
                        "use float32 or float64")
    target = np.float64 if arr.dtype.itemsize == 8 else np.float32
    # np.array(order="C") rather than ascontiguousarray, which turns 0-d into 1-d.
    return np.array(arr, dtype=target, order="C", copy=None)


def as_float_array(x, name: str = "x") -> np.ndarray:
    """``as_input_array`` for the operations that take float64 operands: the result is float32
    or float64, and integers beyond 2^53 are refused with a ValueError naming the limit."""
    return as_input_array(x, name, exact_ints=False)


def check_format(fmt) -> Format:
    return get_format(fmt)


def check_mode(mode) -> Mode:
    return parse_mode(mode)


#: Default number of random bits for stochastic rounding.  24 bits quantise the probability to
#: 2^-24; they are exact for every conversion whose remainder has at most 24 bits (float32 to
#: fp16/bf16/fp8 leaves at most 23 - 2 = 21 bits), and p + 24 + 2 <= 53 for p <= 27 keeps the
#: round-to-odd intermediate of the arithmetic exact enough (see softfloat/_arith.py).
DEFAULT_SR_BITS = 24
#: The key of the deterministic modes (unused by them; a numpy scalar is immutable).
_KEY0 = np.uint64(0)


def check_sr(mode: Mode, seed, sr_bits, max_bits: int = 62):
    """Validate seed / sr_bits; returns (key uint64, rbits int).  Both belong to stochastic
    rounding: with a deterministic mode either one is a ValueError (a seed there would be
    silently ignored, so its presence is most likely a mistake)."""
    if mode != Mode.SR:
        for what, val in (("seed", seed), ("sr_bits", sr_bits)):
            if val is not None:
                raise ValueError(
                    f"{what}= is only used by mode 'sr' (stochastic rounding); mode "
                    f"{mode.short!r} is deterministic: drop {what}= or use mode='sr'")
        return _KEY0, 1
    from .rng import seed_key          # (on use: this module imports no Numba code)
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
