"""Numba kernels for encodings: carrier value <-> bit pattern, and the bit-level utilities
(next_up / next_down, ulp, exponent, classify) built on them.

A format is described to the kernels by its FormatParams record ``fp`` (``Format.kernel_params()``:
exponent bits e, fraction bits m, bias, emin, subnormals, the Inf/NaN style code 0 ieee, 1 fn,
2 none; see softfloat.formats).
Values arrive as float64 (a float32 carrier widens exactly).  Patterns are uint64 inside the
kernels; the Python layer narrows them to the format's uint8/16/32.

Encoding status codes (the Python layer turns them into ValueError messages):
    OK = 0, OFF_GRID = 1 (not a value of the format), NO_INF = 2 (format has no Inf),
    NO_NAN = 3 (format has no NaN).
Each kernel that can fail writes, per chunk, the first failing element index and its status,
so the Python layer reports the first offending element whatever the thread count.

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._kernels_round import CHUNK
from ._primitives import (F64_EXP_ALL_ONES, F64_FRAC, F64_FRAC_BITS, F64_HIDDEN, F64_SIGN_SHIFT,
                          U64_0, U64_1, bit_length, pow2)

OK, OFF_GRID, NO_INF, NO_NAN = 0, 1, 2, 3

_ONE = U64_1
_ZERO = U64_0
_MASK52 = F64_FRAC
_HIDDEN = F64_HIDDEN
_EXPMASK = F64_EXP_ALL_ONES
_U52 = F64_FRAC_BITS
_U63 = F64_SIGN_SHIFT


@njit(cache=True)
def nan_pattern(fp):
    """Canonical quiet NaN: ieee 0 | 1..1 | 10..0 (fp16 0x7E00, bf16 0x7FC0); fn 0 | 1..1 | 1..1
    (e4m3fn 0x7F).  Meaningless for infnan == 2 (no NaN)."""
    e, m, infnan = fp.exp_bits, fp.man_bits, fp.inf_nan
    if infnan == 0:
        return (((_ONE << np.uint64(e)) - _ONE) << np.uint64(m)) | (_ONE << np.uint64(m - 1))
    return (_ONE << np.uint64(e + m)) - _ONE


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
def encode(x, fp):
    """Bit pattern of the float64 x in the format; returns (pattern, status)."""
    e, m, subn, infnan = fp.exp_bits, fp.man_bits, fp.subnormals, fp.inf_nan
    bias = fp.bias
    emin = fp.emin
    top = (1 << e) - 1
    b = np.float64(x).view(np.uint64)
    sign = (b >> _U63) << np.uint64(e + m)
    E = np.int64((b >> _U52) & _EXPMASK)
    frac = b & _MASK52
    if E == 0x7FF:
        if frac != 0:
            if infnan == 2:
                return _ZERO, NO_NAN
            return nan_pattern(fp), OK
        if infnan != 0:
            return _ZERO, NO_INF
        return sign | (np.uint64(top) << np.uint64(m)), OK
    if E == 0:
        if frac == 0:
            return sign, OK                          # signed zero
        sig = frac                                   # float64 subnormal: frac * 2^-1074
        ex = -1074
    else:
        sig = frac | _HIDDEN                         # 1.frac * 2^(E-1023) = sig * 2^(E-1075)
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
    if infnan == 1 and pat == nan_pattern(fp):
        return _ZERO, OFF_GRID                       # fn: S.1111.111 is NaN, not 448+32
    return sign | pat, OK


@njit(cache=True)
def decode(pat, fp):
    """float64 value of the bit pattern ``pat`` (< 2^(1+e+m)).  Subnormal patterns of a
    flush-to-zero format read as a zero of their sign (denormals-are-zero)."""
    e, m, subn, infnan = fp.exp_bits, fp.man_bits, fp.subnormals, fp.inf_nan
    bias = fp.bias
    top = np.uint64((1 << e) - 1)
    pat = np.uint64(pat)
    neg = (pat >> np.uint64(e + m)) != 0
    efield = (pat >> np.uint64(m)) & top
    mfield = pat & ((_ONE << np.uint64(m)) - _ONE)
    if efield == top:
        if infnan == 0:
            if mfield != 0:
                return np.nan
            return -np.inf if neg else np.inf
        if infnan == 1 and mfield == (_ONE << np.uint64(m)) - _ONE:
            return np.nan
    if efield == 0:
        if subn == 0 or mfield == 0:
            return -0.0 if neg else 0.0
        v = np.float64(mfield) * pow2(1 - bias - m)               # 0.f * 2^emin
    else:
        sig = mfield | (_ONE << np.uint64(m))
        v = np.float64(sig) * pow2(np.int64(efield) - bias - m)   # 1.f * 2^(E - bias)
    return -v if neg else v


@njit(parallel=True, cache=True)
def to_bits_kernel(x, out, fp, bad):
    """out[i] = pattern of x[i]; bad[c] = (first failing index in chunk c, status) or (-1, 0)."""
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = np.int64(c) * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            p, st = encode(np.float64(x[i]), fp)
            out[i] = p
            if st != OK and bad[c, 0] < 0:
                bad[c, 0] = i
                bad[c, 1] = st


@njit(parallel=True, cache=True)
def from_bits_kernel(bits, out, fp):
    n = bits.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = np.int64(c) * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            out[i] = decode(np.uint64(bits[i]), fp)


@njit(cache=True)
def next_up_one(x, fp):
    """Least value of the format above x (x a value of the format); returns (value, status)."""
    e, m, subn, infnan = fp.exp_bits, fp.man_bits, fp.subnormals, fp.inf_nan
    if x != x:
        return x, OK
    p, st = encode(x, fp)
    if st != OK:
        return x, st
    signbit = _ONE << np.uint64(e + m)
    mag = p & (signbit - _ONE)
    top = max_pattern(fp)
    smallest = _ONE if subn != 0 else (_ONE << np.uint64(m))   # 2^(emin-m) or 2^emin
    if (p & signbit) == 0:                       # +0 and positives: one pattern up
        if mag == 0:
            q = smallest
        elif mag > top:                          # +Inf stays
            return x, OK
        elif mag == top:                         # past the largest finite value
            return (np.inf if infnan == 0 else np.nan), OK
        else:
            q = p + _ONE
    else:                                        # negatives: one pattern toward zero
        if mag == 0:                             # -0: same as +0
            q = smallest
        elif mag > top:                          # -Inf -> -max
            q = signbit | top
        elif mag == smallest:                    # -smallest -> -0
            q = signbit
        else:
            q = p - _ONE
    return decode(q, fp), OK


@njit(parallel=True, cache=True)
def next_kernel(x, out, fp, direction, bad):
    """direction +1: next_up; -1: next_down(x) = -next_up(-x)."""
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = np.int64(c) * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            v = np.float64(x[i])
            if direction < 0:
                v = -v
            r, st = next_up_one(v, fp)
            out[i] = -r if direction < 0 else r
            if st != OK and bad[c, 0] < 0:
                bad[c, 0] = i
                bad[c, 1] = st


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
    E = np.int64((b >> _U52) & _EXPMASK)
    if E == 0:                                   # float64 subnormal: frac * 2^-1074
        return np.float64(bit_length(b & _MASK52) - 1 - 1074), OK
    return np.float64(E - 1023), OK


@njit(parallel=True, cache=True)
def exponent_kernel(x, out, fp, bad):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = np.int64(c) * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            r, st = logb_one(np.float64(x[i]), fp)
            out[i] = r
            if st != OK and bad[c, 0] < 0:
                bad[c, 0] = i
                bad[c, 1] = st


@njit(parallel=True, cache=True)
def ulp_kernel(x, out, fp, bad):
    """out[i] = 2^(max(logb(x), emin) - m); zeros give 2^(emin - m); Inf -> Inf; NaN -> NaN."""
    m = fp.man_bits
    emin = fp.emin
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = np.int64(c) * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            lb, st = logb_one(np.float64(x[i]), fp)
            if st != OK and bad[c, 0] < 0:
                bad[c, 0] = i
                bad[c, 1] = st
            if lb != lb or lb == np.inf:
                out[i] = lb
            else:
                k = emin if lb < emin else np.int64(lb)
                out[i] = pow2(k - m)


#: classify codes (ordered like the values they describe); softfloat.bits exports the names.
C_NAN, C_NINF, C_NNORM, C_NSUB, C_NZERO, C_PZERO, C_PSUB, C_PNORM, C_PINF = range(9)


@njit(parallel=True, cache=True)
def classify_kernel(x, out, fp, bad):
    emin = fp.emin
    tiny = pow2(emin)
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = np.int64(c) * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            v = np.float64(x[i])
            if v != v:
                out[i] = C_NAN
                continue
            _, st = encode(v, fp)
            if st != OK and bad[c, 0] < 0:
                bad[c, 0] = i
                bad[c, 1] = st
            neg = np.float64(v).view(np.uint64) >> _U63 != 0
            a = abs(v)
            if a == np.inf:
                k = C_PINF
            elif a >= tiny:
                k = C_PNORM
            elif a == 0:
                k = C_PZERO
            else:
                k = C_PSUB
            # mirror around the zeros: +class k <-> -class (C_NZERO + C_PZERO - k)
            out[i] = (C_NZERO + C_PZERO - k) if neg else k
