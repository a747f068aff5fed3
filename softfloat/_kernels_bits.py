"""Numba kernels for encodings: carrier value <-> bit pattern, and the bit-level utilities
(next_up / next_down, ulp, exponent, classify) built on them.

A format is described to the kernels by its FormatParams record ``fp`` (``Format.kernel_params()``:
exponent bits e, fraction bits m, bias, emin, subnormals, the Inf/NaN style code 0 ieee, 1 fn,
2 none, signed, zero, width; see softfloat.formats).
The encoders and decoders read and write the carrier's own bit patterns (uint32 views of float32
carriers, uint64 views of float64 ones), converted to float64 patterns exactly -- NaN payloads
and signalling NaNs included, which a float32 <-> float64 conversion instruction would quiet --
so that every pattern of a format round-trips through from_bits and to_bits.  The utilities
take values as float64 (NaN in, NaN out).  Patterns are uint64 inside the kernels; the Python
layer narrows them to the format's uint8/16/32.

Encoding status codes (the Python layer turns them into ValueError messages):
    OK = 0, OFF_GRID = 1 (not a value of the format), NO_INF = 2 (format has no Inf),
    NO_NAN = 3 (format has no NaN), NEGATIVE = 4 (a negative value, unsigned format),
    NO_ZERO = 5 (zero, and the format has no zero).
Each kernel that can fail writes, per chunk, the first failing element index and its status,
so the Python layer reports the first offending element whatever the thread count.

All kernels run on the one chunked driver (softfloat._driver).

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, types
from numba.extending import overload

from ._driver import INNER, launch, record
from ._primitives import (F32_ABS, F32_INF, F64_EXP_ALL_ONES, F64_EXP_FIELD, F64_FRAC,
                          F64_FRAC_BITS, F64_HIDDEN, F64_SIGN_SHIFT, U64_0, U64_1, bit_length,
                          pow2)
from ._roundpack import format_params_of, signed_nan
from .formats import FormatParams

OK, OFF_GRID, NO_INF, NO_NAN, NEGATIVE, NO_ZERO = 0, 1, 2, 3, 4, 5

_ONE = U64_1
_ZERO = U64_0
_U52 = F64_FRAC_BITS
_U63 = F64_SIGN_SHIFT
_U29 = np.uint64(29)      # float32 -> float64 fraction shift: 52 - 23
_U32 = np.uint64(32)      # float32 -> float64 sign shift: 63 - 31


# ----- carrier patterns <-> float64 patterns, exactly ------------------------------------------

def carrier_bits(xb, i):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(carrier_bits)
def _carrier_bits_impl(xb, i):
    """The float64 pattern of element i of a carrier's bit view (uint32: float32, uint64:
    float64), exact for NaNs too (the fraction shifted up 29 bits, the quiet bit as it was)."""
    if xb.dtype == types.uint64:
        return lambda xb, i: xb[i]

    def widen(xb, i):
        w = xb[i]
        if (w & F32_ABS) > F32_INF:
            w64 = np.uint64(w)
            return ((w64 >> np.uint64(31)) << _U63) | F64_EXP_FIELD | \
                ((w64 & np.uint64(0x7FFFFF)) << _U29)
        return np.float64(np.uint32(w).view(np.float32)).view(np.uint64)
    return widen


def store_carrier(ob, i, p):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(store_carrier)
def _store_carrier_impl(ob, i, p):
    """Store the float64 pattern p into element i of a carrier's bit view; for float32 carriers
    p must be a value of a float32-carried format (exact), or a NaN whose fraction's top 23 bits
    hold its payload (kept bit for bit, signalling or quiet)."""
    if ob.dtype == types.uint64:
        def keep(ob, i, p):
            ob[i] = p
        return keep

    def narrow(ob, i, p):
        if (p & ~(_ONE << _U63)) > F64_EXP_FIELD:
            ob[i] = np.uint32(((p >> _U63) << np.uint64(31)) | np.uint64(0x7F800000)
                              | ((p & F64_FRAC) >> _U29))
        else:
            ob[i] = np.float32(np.uint64(p).view(np.float64)).view(np.uint32)
    return narrow


# ----- one value <-> one pattern -------------------------------------------------------------

@njit(cache=True)
def nan_pattern(fp, b):
    """The pattern of the NaN whose float64 pattern is b: its sign (signed formats) with, in ieee
    formats, the all-ones exponent and the top m bits of b's fraction (the quiet bit when those
    are all zero: the payload does not fit), in fn formats every exponent and fraction bit set
    (e4m3fn 0x7F / 0xFF, e8m0 0xFF).  Meaningless for infnan == 2 (no NaN)."""
    e, m = fp.exp_bits, fp.man_bits
    sign = ((b >> _U63) << np.uint64(e + m)) if fp.signed != 0 else _ZERO
    if fp.inf_nan == 0:
        top = (b & F64_FRAC) >> np.uint64(52 - m)
        if top == 0:
            top = _ONE << np.uint64(m - 1)
        return sign | (((_ONE << np.uint64(e)) - _ONE) << np.uint64(m)) | top
    return sign | ((_ONE << np.uint64(e + m)) - _ONE)


@njit(cache=True)
def max_pattern(fp):
    """Magnitude pattern of the largest finite value.
    ieee: exponent 1..10, fraction all ones; fn: all ones minus one; none: all ones."""
    e, m, infnan = fp.exp_bits, fp.man_bits, fp.inf_nan
    allbits = (_ONE << np.uint64(e + m)) - _ONE
    if infnan == 0:
        return allbits - (_ONE << np.uint64(m))      # clear the lowest exponent bit
    if infnan == 1:
        return allbits - _ONE
    return allbits


@njit(cache=True)
def smallest_pattern(fp):
    """Pattern of the smallest positive value: 1 (2^(emin-m)) with subnormals, 1 << m (2^emin)
    without, 0 (2^emin = 2^-bias) in a format without zero."""
    if fp.zero == 0:
        return _ZERO
    return _ONE if fp.subnormals != 0 else _ONE << np.uint64(fp.man_bits)


@njit(cache=True)
def encode(x, fp):
    """Pattern of the float64 value x; returns (pattern, status).  (The encoder of values, as
    tensorcore's grid check calls it; NaN payloads: see encode_bits.)"""
    return encode_bits(np.float64(x).view(np.uint64), fp)


@njit(cache=True)
def encode_bits(b, fp):
    """Pattern of the value whose float64 pattern is b; returns (pattern, status)."""
    e, m, subn, infnan = fp.exp_bits, fp.man_bits, fp.subnormals, fp.inf_nan
    bias = fp.bias
    emin = fp.emin
    top = (1 << e) - 1
    neg = (b >> _U63) != 0
    sign = ((b >> _U63) << np.uint64(e + m)) if fp.signed != 0 else _ZERO
    E = np.int64((b >> _U52) & F64_EXP_ALL_ONES)
    frac = b & F64_FRAC
    if E == 0x7FF and frac != 0:
        if infnan == 2:
            return _ZERO, NO_NAN
        return nan_pattern(fp, b), OK
    if E == 0 and frac == 0:
        if fp.zero == 0:
            return _ZERO, NO_ZERO
        return sign, OK                              # signed zero (unsigned: +0 for -0 too)
    if neg and fp.signed == 0:
        return _ZERO, NEGATIVE
    if E == 0x7FF:
        if infnan != 0:
            return _ZERO, NO_INF
        return sign | (np.uint64(top) << np.uint64(m)), OK
    if E == 0:
        sig = frac                                   # float64 subnormal: frac * 2^-1074
        ex = -1074
    else:
        sig = frac | F64_HIDDEN                      # 1.frac * 2^(E-1023) = sig * 2^(E-1075)
        ex = E - 1075
    # value = sig * 2^ex with bit length L: its binary exponent is L - 1 + ex
    x_exp = bit_length(sig) - 1 + ex
    if x_exp < emin:
        if subn == 0:
            return _ZERO, OFF_GRID
        qe = emin - m                                # subnormal quantum 2^(emin - m)
        efield = 0
    else:
        qe = x_exp - m                               # normal quantum 2^(x_exp - m)
        efield = x_exp + bias
        if efield > top or (efield == top and infnan == 0):
            return _ZERO, OFF_GRID                   # beyond the largest binade
    # The value must be an integer multiple of 2^qe: sig's low (qe - ex) bits are zero.
    shift = qe - ex
    if shift >= 53:
        return _ZERO, OFF_GRID                       # sig < 2^53 <= 2^shift: not a multiple
    if shift > 0:
        if (sig & ((_ONE << np.uint64(shift)) - _ONE)) != 0:
            return _ZERO, OFF_GRID
        n = sig >> np.uint64(shift)
    else:
        n = sig << np.uint64(-shift)
    # n = value / 2^qe: 2^m <= n < 2^(m+1) when normal (drop the hidden bit), n < 2^m when subnormal
    mfield = n & ((_ONE << np.uint64(m)) - _ONE)
    pat = (np.uint64(efield) << np.uint64(m)) | mfield
    if infnan == 1 and pat == (_ONE << np.uint64(e + m)) - _ONE:
        return _ZERO, OFF_GRID                       # fn: S.1111.111 is NaN, not 448+32
    return sign | pat, OK


@njit(cache=True)
def decode(pat, fp):
    """float64 value of the bit pattern ``pat`` (< 2^width).  Subnormal patterns of a
    flush-to-zero format read as a zero of their sign (denormals-are-zero); a NaN pattern gives
    a NaN with its sign and, in ieee formats, its fraction as the top bits of the float64's."""
    e, m, subn, infnan = fp.exp_bits, fp.man_bits, fp.subnormals, fp.inf_nan
    bias = fp.bias
    top = np.uint64((1 << e) - 1)
    pat = np.uint64(pat)
    neg = fp.signed != 0 and (pat >> np.uint64(e + m)) != 0
    efield = (pat >> np.uint64(m)) & top
    mfield = pat & ((_ONE << np.uint64(m)) - _ONE)
    sign64 = (_ONE << _U63) if neg else _ZERO
    if efield == top:
        if infnan == 0:
            if mfield != 0:
                return np.uint64(sign64 | F64_EXP_FIELD
                                 | (mfield << np.uint64(52 - m))).view(np.float64)
            return -np.inf if neg else np.inf
        if infnan == 1 and mfield == (_ONE << np.uint64(m)) - _ONE:
            return signed_nan(neg)
    if efield == 0 and fp.zero != 0:
        if subn == 0 or mfield == 0:
            return -0.0 if neg else 0.0
        v = np.float64(mfield) * pow2(fp.emin - m)               # 0.f * 2^emin
    else:
        sig = mfield | (_ONE << np.uint64(m))
        v = np.float64(sig) * pow2(np.int64(efield) - bias - m)   # 1.f * 2^(E - bias)
    return -v if neg else v


@njit(cache=True)
def note_bad(bad, c, i, st):
    """Record in row c the first failing element of the chunk."""
    if st != OK and bad[c, 0] < 0:
        bad[c, 0] = i
        bad[c, 1] = st


# ----- kernel records and chunk functions (see softfloat._driver) ----------------------------

@njit(cache=True, **INNER)
def _to_bits_chunk(k, lo, hi, c, xb, out, bad):
    fp = format_params_of(k)
    for i in range(lo, hi):
        p, st = encode_bits(carrier_bits(xb, i), fp)
        out[i] = p
        note_bad(bad, c, i, st)


@njit(cache=True, **INNER)
def _from_bits_chunk(k, lo, hi, c, bits, ob):
    fp = format_params_of(k)
    for i in range(lo, hi):
        store_carrier(ob, i, np.float64(decode(np.uint64(bits[i]), fp)).view(np.uint64))


@njit(cache=True, inline="always")
def _pattern_or_pass(x, fp):
    """(pattern, status) of x for the neighbour functions, which return a NaN x unchanged with
    status OK (its pattern 0 is then unused) and any x off the format unchanged with its
    status."""
    if x != x:
        return _ZERO, OK
    return encode(x, fp)


@njit(cache=True)
def next_up_one(x, fp):
    """Least value of the format above x (x a value of the format); returns (value, status).
    None above max: +Inf in ieee formats, NaN otherwise."""
    p, st = _pattern_or_pass(x, fp)
    if x != x or st != OK:
        return x, st
    signbit = (_ONE << np.uint64(fp.exp_bits + fp.man_bits)) if fp.signed != 0 else _ZERO
    mag = p & ~signbit
    top = max_pattern(fp)
    smallest = smallest_pattern(fp)
    if (p & signbit) == 0 or (mag == 0 and fp.zero != 0):    # +0, -0 and positives: one up
        if mag == 0 and fp.zero != 0:
            q = smallest
        elif mag > top:                          # +Inf stays
            return x, OK
        elif mag == top:                         # past the largest finite value
            return (np.inf if fp.inf_nan == 0 else np.nan), OK
        else:
            q = p + _ONE
    else:                                        # negatives: one pattern toward zero
        if mag > top:                            # -Inf -> -max
            q = signbit | top
        elif mag == smallest:                    # -smallest -> -0 (+smallest without zero)
            q = signbit if fp.zero != 0 else smallest
        else:
            q = p - _ONE
    return decode(q, fp), OK


@njit(cache=True)
def next_down_unsigned(x, fp):
    """Greatest value of an unsigned format below x; NaN when there is none."""
    p, st = _pattern_or_pass(x, fp)
    if x != x or st != OK:
        return x, st
    top = max_pattern(fp)
    if p > top:                                  # +Inf -> max
        return decode(top, fp), OK
    if p == smallest_pattern(fp):
        return (0.0 if fp.zero != 0 else np.nan), OK
    if p == 0:                                   # nothing below zero
        return np.nan, OK
    return decode(p - _ONE, fp), OK


@njit(cache=True, **INNER)
def _next_chunk(k, lo, hi, c, x, out, bad):
    """direction +1: next_up; -1: next_down(x) = -next_up(-x) (signed formats)."""
    fp = format_params_of(k)
    for i in range(lo, hi):
        v = np.float64(x[i])
        if k.direction > 0:
            r, st = next_up_one(v, fp)
        elif fp.signed != 0:
            r, st = next_up_one(-v, fp)
            r = -r
        else:
            r, st = next_down_unsigned(v, fp)
        out[i] = r
        note_bad(bad, c, i, st)


@njit(cache=True)
def logb_one(x, fp):
    """(floor(log2|x|) as float64, status); -inf for zeros, +inf for Inf, NaN for NaN."""
    if x != x:
        return x, OK
    _, st = encode(x, fp)
    if st != OK:
        return 0.0, st
    if x == 0:
        return -np.inf, OK
    if np.isinf(x):
        return np.inf, OK
    b = np.float64(x).view(np.uint64)
    E = np.int64((b >> _U52) & F64_EXP_ALL_ONES)
    if E == 0:                                   # float64 subnormal: frac * 2^-1074
        return np.float64(bit_length(b & F64_FRAC) - 1 - 1074), OK
    return np.float64(E - 1023), OK


@njit(cache=True, **INNER)
def _exponent_chunk(k, lo, hi, c, x, out, bad):
    fp = format_params_of(k)
    for i in range(lo, hi):
        r, st = logb_one(np.float64(x[i]), fp)
        out[i] = r
        note_bad(bad, c, i, st)


@njit(cache=True, **INNER)
def _ulp_chunk(k, lo, hi, c, x, out, bad):
    """out[i] = 2^(max(logb(x), emin) - m); zeros give 2^(emin - m); Inf -> Inf; NaN -> NaN."""
    fp = format_params_of(k)
    for i in range(lo, hi):
        lb, st = logb_one(np.float64(x[i]), fp)
        note_bad(bad, c, i, st)
        if lb != lb or lb == np.inf:
            out[i] = lb
        else:
            e = fp.emin if lb < fp.emin else np.int64(lb)
            out[i] = pow2(e - fp.man_bits)


#: classify codes (ordered like the values they describe); softfloat.bits exports the names.
C_NAN, C_NINF, C_NNORM, C_NSUB, C_NZERO, C_PZERO, C_PSUB, C_PNORM, C_PINF = range(9)


@njit(cache=True, **INNER)
def _classify_chunk(k, lo, hi, c, x, out, bad):
    fp = format_params_of(k)
    tiny = pow2(fp.emin)
    for i in range(lo, hi):
        v = np.float64(x[i])
        if v != v:
            out[i] = C_NAN
            continue
        _, st = encode(v, fp)
        note_bad(bad, c, i, st)
        # an unsigned format's -0.0 is its (only) zero
        neg = fp.signed != 0 and np.float64(v).view(np.uint64) >> _U63 != 0
        a = abs(v)
        if a == np.inf:
            cl = C_PINF
        elif a >= tiny:
            cl = C_PNORM
        elif a == 0:
            cl = C_PZERO
        else:
            cl = C_PSUB
        # mirror around the zeros: +class cl <-> -class (C_NZERO + C_PZERO - cl)
        out[i] = (C_NZERO + C_PZERO - cl) if neg else cl


def _record(name: str, chunk):
    """A kernel record class (see softfloat._driver) whose chunk function is ``chunk``: the
    format's fields, and for next_up/next_down the direction (+1 / -1; 0 for the others)."""
    return record(name, FormatParams._fields, chunk, __name__,
                  dynamic=(("direction", np.int64),))


# The record classes ToBits, FromBits, NextUpDown, Exponent, Ulp and Classify, each bound to its
# module-level name here (Numba's cache refers to a record class by module and name).
for _name, _chunk in (("ToBits", _to_bits_chunk), ("FromBits", _from_bits_chunk),
                      ("NextUpDown", _next_chunk), ("Exponent", _exponent_chunk),
                      ("Ulp", _ulp_chunk), ("Classify", _classify_chunk)):
    globals()[_name] = _record(_name, _chunk)


def run(rec, fp, n, *args, direction=0):
    """Run the kernel of the record class ``rec`` (one of the above) over n elements; fp the
    format's FormatParams."""
    launch(_static(rec, fp), (int(direction),), n, *args)


@functools.lru_cache(maxsize=512)
def _static(rec, fp):
    """The static part of a ``rec`` record for the FormatParams fp (made once per format)."""
    return rec.params(*fp)
