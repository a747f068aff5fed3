"""Bit patterns and the IEEE 754 utilities of a format.

Provides
    to_bits(values, fmt)    values of the format -> its own bit patterns (uint8/16/32/64)
    from_bits(bits, fmt)    bit patterns -> carrier values (float32, or float64 when needed)
    next_up(x, fmt), next_down(x, fmt)   IEEE nextUp / nextDown
    ulp(x, fmt)             2^(max(exponent(x), emin) - m), the quantum of x's binade
    exponent(x, fmt)        IEEE logB: floor(log2 |x|) as a float (C ``logb`` conventions)
    classify(x, fmt)        int8 class codes (``FloatClass``), names in ``CLASS_NAMES``

Conventions
* Inputs of to_bits and of the utilities must be values of the format (exactly on its grid, in
  range, and specials the format has; not negative in an unsigned format, not zero in a format
  without zero); otherwise ValueError naming the first offending element (its index and value).
  NaN is always accepted by the utilities (NaN in, NaN out) and by to_bits except for "none"
  formats, which cannot encode it.  -0.0 is accepted by unsigned formats as their zero.
* NaNs keep their sign and payload: to_bits gives a NaN its sign (signed formats) and, in ieee
  formats, the all-ones exponent and the top m bits of the carrier's fraction (the quiet bit
  alone when those are all zero, so that the pattern stays a NaN); fn formats have one NaN per
  sign (e4m3fn 0x7F / 0xFF, the unsigned e8m0 0xFF).  from_bits decodes a NaN pattern to the
  carrier NaN with that sign and the pattern's fraction as the top fraction bits, bit for bit
  (signalling NaN patterns included), so to_bits(from_bits(p)) == p for every pattern p of a
  format with subnormals.  softfloat.round's NaNs are quiet and keep the top m - 1 payload bits
  (fp16: round(-nan) is 0xFE00's carrier).
* Formats without subnormals (flush-to-zero): from_bits reads a pattern with a zero exponent
  field as a zero of its sign (denormals-are-zero); to_bits refuses values below 2^emin.
  Formats without zero (e8m0) read the zero exponent field as the binade 2^-bias.
* next_up(x): the least value of the format greater than x.  next_up(-0) = next_up(+0) = the
  smallest positive value; next_up(-smallest) = -0.0 (+smallest in a signed format without
  zero); next_up(-Inf) = -max; next_up(+Inf) = +Inf; next_up(+max) = +Inf in ieee formats, NaN
  in fn/none formats (no larger value exists).  next_down(x) = -next_up(-x) in signed formats;
  in unsigned ones the greatest value below x, NaN below the smallest value (below 0 when the
  format has a zero).
* ulp(x) = 2^(max(exponent(x), emin) - m) (Goldberg/Harrison "quantum" definition): for x in
  [2^e, 2^(e+1)) the gap between consecutive values of that binade, 2^(emin - m) at zero and in
  the subnormal range (also for flush-to-zero formats); ulp(+-Inf) = +Inf, ulp(NaN) = NaN.
  Returned in the carrier dtype; it need not be a value of the format.
* exponent(x) = floor(log2 |x|), also for subnormals (fp16 smallest subnormal 2^-24 -> -24.0);
  zeros -> -inf, infinities -> +inf, NaN -> NaN; returned as float64.

Imports numpy and the softfloat kernels only.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from . import _kernels_bits as KB
from ._driver import flag_table
from ._validate import as_float_array, check_format, finish

__all__ = ["to_bits", "from_bits", "next_up", "next_down", "ulp", "exponent", "classify",
           "FloatClass", "CLASS_NAMES"]


class FloatClass(IntEnum):
    """classify() codes; ordered like the values they describe (NaN first)."""

    NAN = KB.C_NAN
    NEG_INF = KB.C_NINF
    NEG_NORMAL = KB.C_NNORM
    NEG_SUBNORMAL = KB.C_NSUB
    NEG_ZERO = KB.C_NZERO
    POS_ZERO = KB.C_PZERO
    POS_SUBNORMAL = KB.C_PSUB
    POS_NORMAL = KB.C_PNORM
    POS_INF = KB.C_PINF


#: Names indexed by code: ``np.array(CLASS_NAMES)[classify(x, fmt)]`` gives strings.
CLASS_NAMES = ("nan", "-inf", "-normal", "-subnormal", "-zero",
               "+zero", "+subnormal", "+normal", "+inf")


def _bad_table(n: int) -> np.ndarray:
    bad = flag_table(n, 2)
    bad[:, 0] = -1
    return bad


def _raise_first_bad(bad: np.ndarray, arr: np.ndarray, fmt, what: str):
    hits = bad[bad[:, 0] >= 0]
    if hits.size == 0:
        return
    i, status = hits[np.argmin(hits[:, 0])]
    idx = np.unravel_index(int(i), arr.shape) if arr.ndim else ()
    where = f"element {tuple(int(j) for j in idx)}" if arr.ndim > 1 else \
        (f"element {int(i)}" if arr.ndim == 1 else "the scalar")
    val = arr.reshape(-1)[int(i)]
    if status == KB.OFF_GRID:
        why = (f"is not a value of {fmt.name} (off its grid or beyond its range "
               f"+-{fmt.max!r}); round it first with softfloat.round(x, fmt, mode)")
    elif status == KB.NO_INF:
        why = f"is infinite, and {fmt.name} (inf_nan={fmt.inf_nan!r}) has no infinity"
    elif status == KB.NEGATIVE:
        why = f"is negative, and {fmt.name} is unsigned (it has no negative values)"
    elif status == KB.NO_ZERO:
        why = f"is zero, and {fmt.name} has no zero (its smallest value is {fmt.tiny!r})"
    else:
        why = f"is NaN, and {fmt.name} (inf_nan='none') has no NaN encoding"
    raise ValueError(f"{what}: {where} = {float(val)!r} {why}")


def to_bits(values, fmt):
    """Bit patterns (fmt.bits_dtype: uint8/uint16/uint32/uint64) of values of ``fmt``.

    ``values``: float arrays (or anything softfloat accepts as an array), each element exactly a
    value of the format.  NaN keeps its sign and payload (see the module docstring).
    """
    fmt = check_format(fmt)
    arr = as_float_array(values, "values")
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=fmt.bits_dtype)
    bad = _bad_table(flat.size)
    # the carrier's own patterns (a view made here, not inside the parallel kernel)
    xb = flat.view(np.uint32 if flat.dtype == np.float32 else np.uint64)
    KB.run(KB.ToBits, fmt.kernel_params(), flat.size, xb, out, bad)
    _raise_first_bad(bad, arr, fmt, "to_bits")
    return finish(out, arr.shape)


def _as_bits_array(bits, fmt) -> np.ndarray:
    """Native-endian contiguous unsigned array of the patterns, range-checked."""
    accepted = ("pass unsigned integer patterns (uint8/uint16/uint32/uint64 arrays, or Python "
                "ints and lists of them)")
    if isinstance(bits, (bool, np.bool_)):
        raise TypeError(f"bits: bool is not accepted; {accepted}")
    if isinstance(bits, (np.ndarray, np.generic)):
        arr = np.asarray(bits)
    elif isinstance(bits, (int, list, tuple)):
        try:
            arr = np.asarray(bits)
        except OverflowError:                    # ints beyond int64/uint64 in a list
            arr = np.asarray(bits, dtype=object)
        if arr.dtype == object:
            flat = arr.reshape(-1)
            for i, b in enumerate(flat):
                if isinstance(b, bool) or not isinstance(b, int):
                    raise TypeError(f"bits: element {i} is a {type(b).__name__}; {accepted}")
                if not 0 <= b < 1 << fmt.bits:
                    raise ValueError(f"from_bits: element {i} = {b} is not a {fmt.bits}-bit "
                                     f"pattern of {fmt.name} (accepted: 0.."
                                     f"{(1 << fmt.bits) - 1:#x})")
            arr = arr.astype(np.uint64)
    else:
        raise TypeError(f"bits: {type(bits).__name__} is not accepted; {accepted}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"bits: dtype {arr.dtype} is not accepted; {accepted}")
    flat = arr.reshape(-1)
    if flat.size:
        badmask = np.zeros(flat.shape, dtype=bool)
        if arr.dtype.kind == "i":
            badmask |= flat < 0
        if fmt.bits < 8 * arr.dtype.itemsize:
            badmask |= flat > (1 << fmt.bits) - 1
        if badmask.any():
            i = int(np.argmax(badmask))
            idx = tuple(int(j) for j in np.unravel_index(i, arr.shape)) if arr.ndim > 1 else i
            raise ValueError(f"from_bits: element {idx} = {int(flat[i])} is not a {fmt.bits}-bit "
                             f"pattern of {fmt.name} (accepted: 0..{(1 << fmt.bits) - 1:#x})")
    # np.array(order="C") keeps 0-d inputs 0-d (ascontiguousarray would make them 1-d).
    target = np.uint64 if arr.dtype.kind == "i" else arr.dtype.newbyteorder("=")
    return np.array(arr, dtype=target, order="C", copy=None)


def from_bits(bits, fmt):
    """Carrier values (fmt.carrier_dtype) of the bit patterns ``bits`` of ``fmt``.

    ``bits``: unsigned (or non-negative signed) integer arrays, Python ints or lists of ints,
    each below 2^fmt.bits.  NaN patterns give NaN; see the module docstring for flush-to-zero.
    """
    fmt = check_format(fmt)
    arr = _as_bits_array(bits, fmt)
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=fmt.carrier_dtype)
    ob = out.view(np.uint32 if out.dtype == np.float32 else np.uint64)
    KB.run(KB.FromBits, fmt.kernel_params(), flat.size, flat, ob)
    return finish(out, arr.shape)


def _unary(record, x, fmt, what, out_dtype=None, direction=0):
    fmt = check_format(fmt)
    arr = as_float_array(x)
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=out_dtype or fmt.carrier_dtype)
    bad = _bad_table(flat.size)
    KB.run(record, fmt.kernel_params(), flat.size, flat, out, bad, direction=direction)
    _raise_first_bad(bad, arr, fmt, what)
    return finish(out, arr.shape)


def next_up(x, fmt):
    """IEEE nextUp: the least value of ``fmt`` greater than each element of x."""
    return _unary(KB.NextUpDown, x, fmt, "next_up", direction=1)


def next_down(x, fmt):
    """IEEE nextDown: the greatest value of ``fmt`` less than each element (-next_up(-x) in
    signed formats)."""
    return _unary(KB.NextUpDown, x, fmt, "next_down", direction=-1)


def ulp(x, fmt):
    """2^(max(exponent(x), emin) - m) for each value x of ``fmt`` (see the module docstring)."""
    return _unary(KB.Ulp, x, fmt, "ulp")


def exponent(x, fmt):
    """floor(log2 |x|) as float64 (-inf for zeros, +inf for Inf, NaN for NaN)."""
    return _unary(KB.Exponent, x, fmt, "exponent", out_dtype=np.float64)


def classify(x, fmt):
    """int8 ``FloatClass`` codes of the values x of ``fmt``; names: ``CLASS_NAMES[code]``."""
    return _unary(KB.Classify, x, fmt, "classify", out_dtype=np.int8)
