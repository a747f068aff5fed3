"""The one rounding routine every emulated operation ends in (SoftFloat's "round-pack").

``round_value(v, escale, fp, mode, u, rbits)`` rounds the value v * 2^escale (v a float64, escale
an int) ONCE onto the grid of the format described by ``fp`` (its FormatParams record, from
``Format.kernel_params()``: m fraction bits, exponent range [emin, emax], subnormals, Inf/NaN
style, saturation, sign, zero, largest finite value), and returns (result as float64, IEEE flag
bits).  ``round_pack(neg, sig, lg, e, fp, mode, u, rbits)`` is the same rounding of the exact
(-1)^neg * sig * 2^e for any integer significand sig < 2^64 (2^lg <= sig < 2^(lg+1)); it serves
inputs wider than a float64 (int64 / uint64 integers) and round_value itself.

Callers pass either an exact value (a float32/float64 input, an exact float64 product) or a
round-to-odd float64 proxy with at least p + 2 significant bits, which rounds to the same result
in every mode (Boldo & Melquiond); escale lets callers keep huge or tiny exponents out of v.

Everything is integer arithmetic on the significand: no floating-point rounding happens here
except the final exact scaling of an integer by a power of two.

Semantics (the oracles in tests/ implement the same rules independently):
* Signed zeros: a zero input keeps its sign; a result that rounds to zero keeps the input's sign.
* NaN in -> a quiet NaN out, no flag.  It keeps the input's sign (in signed formats) and, in
  "ieee" formats, the top m - 1 bits of its payload below the quiet bit (the bits a narrowing
  IEEE conversion keeps: numpy's float32 -> float16 and ml_dtypes' casts keep the same ones);
  "fn" formats have a single NaN per sign (e4m3fn S.1111.111), unsigned "fn" formats one NaN
  (e8m0 0xFF).  A format without NaN ("none") returns a NaN carrier and raises INVALID; to_bits
  refuses to encode it.  Signalling NaNs are not told apart (float32 -> float64 widening on x86
  quiets them already): the result is quiet either way.
* Infinity in is exact, never an overflow.  "ieee" formats keep it; otherwise (OCP FP8 v1.0
  conversion rules, CUDA's __NV_SATFINITE; ml_dtypes agrees) a saturating format, or one without
  Inf and NaN ("none"), gives +-max, and an "fn" format gives NaN (with the Inf's sign), in every
  rounding mode; those raise INVALID (an exact infinite input with no representation, as IEEE 754
  signals invalid for an infinite input to convertToInteger).  Saturating "ieee" formats give
  +-max too.
* Unsigned formats (signed=False: e8m0, ue4m3): a negative nonzero input (-Inf included) gives
  NaN with INVALID (ml_dtypes' float8_e8m0fnu does the same); -0 gives +0; NaN gives the NaN.
* Formats without zero (zero=False: e8m0): a zero input gives NaN with INVALID (ml_dtypes'
  float8_e8m0fnu agrees); a nonzero value below the smallest value 2^emin gives +-2^emin in every
  mode (there is nothing below it: the grid's bottom saturates, as its top does in saturating
  formats), with UNDERFLOW and INEXACT when it is tiny after rounding, INEXACT otherwise.
* Overflow (the value rounded with unbounded exponent exceeds the largest finite value): saturating
  and "none" formats give +-max; otherwise RNE, RNA, RHU, SR, RUP (positive) and RDN (negative)
  give +-Inf (NaN with the value's sign for fn formats, which have no Inf) and RTZ, RTO, RUP
  (negative), RDN (positive) give +-max, as IEEE 754 section 7.4 prescribes for directed
  roundings.  Flags overflow and inexact.
* Tininess is detected AFTER rounding (IEEE 754 option, as x86 SSE): a nonzero result is tiny when
  rounding the exact value to p bits with an unbounded exponent range gives a magnitude below
  2^emin.  Underflow is flagged when the result is tiny and inexact.  With subnormals=False
  (flush-to-zero) every tiny result is replaced by a zero of the same sign (flags underflow and
  inexact), in every rounding mode (by +-2^emin in a format without zero).
* Stochastic rounding with r random bits (Connolly-Higham-Mary SR with a finite number of bits):
  the r bits below the result's last place are added to an r-bit uniform random integer and the
  sum's carry decides; remainder bits below those r bits are ignored (truncated).  If the
  remainder has at most r bits the probability of rounding up is exactly distance / ulp.

Imports numpy, numba, softfloat._primitives and softfloat.formats (for FormatParams) only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .formats import FormatParams
from ._primitives import (F64_EXP_ALL_ONES, F64_EXP_FIELD, F64_FRAC, F64_FRAC_BITS, F64_HIDDEN,
                          F64_QUIET, F64_SIGN, F64_SIGN_SHIFT, U64_0, U64_1, bit_length,
                          bit_length64, pow2)

# IEEE flag bits (stable codes; softfloat.flags turns them into counts).
INEXACT = 1
UNDERFLOW = 2
OVERFLOW = 4
INVALID = 8
DIVBYZERO = 16

# Mode codes (must match softfloat.modes.Mode).
RNE, RNA, RTZ, RUP, RDN, RTO, SR, RHU = 0, 1, 2, 3, 4, 5, 6, 7

_U63 = F64_SIGN_SHIFT
_U52 = F64_FRAC_BITS


@njit(cache=True, inline="always")
def format_params_of(k):
    """The FormatParams of a flat kernel record holding its fields (see softfloat._driver).
    Inlined: compiled on its own it was a function per record class (each with a CPython
    wrapper unboxing the record), 0.44 s of the first to_bits call's compilation (Zen 3,
    2026-11-29)."""
    return FormatParams(k.man_bits, k.exp_bits, k.bias, k.emin, k.emax, k.subnormals,
                        k.inf_nan, k.saturate, k.signed, k.zero, k.width, k.maxval)


@njit(cache=True)
def round_int(sig, drop, neg, mode, u, rbits):
    """Round the integer sig (< 2^64) shifted right by ``drop`` bits to an integer q.

    Returns (q, inexact).  ``neg`` is the sign of the value (for directed modes), ``u`` 64 random
    bits (SR only; its top ``rbits`` bits are used).
    """
    if drop <= 0:
        return sig << np.uint64(-drop), False
    if drop >= 64:
        # q = 0 and the remainder is sig itself; half a unit is 2^(drop - 1) >= 2^63.
        q = U64_0
        rem = sig
        # half a unit is 2^(drop - 1); 2^63 is the pattern F64_SIGN
        below_half = drop > 64 or sig < F64_SIGN
        is_half = drop == 64 and sig == F64_SIGN
    else:
        q = sig >> np.uint64(drop)
        rem = sig & ((U64_1 << np.uint64(drop)) - U64_1)
        half = U64_1 << np.uint64(drop - 1)
        below_half = rem < half
        is_half = rem == half
    if rem == 0:
        return q, False
    if mode == RNE:
        if not below_half and (not is_half or (q & U64_1) != 0):
            q += U64_1
    elif mode == RNA:
        if not below_half:
            q += U64_1
    elif mode == RHU:
        # Ties toward +inf: a positive tie grows the magnitude, a negative one truncates it.
        if not below_half and (not is_half or not neg):
            q += U64_1
    elif mode == RUP:
        if not neg:
            q += U64_1
    elif mode == RDN:
        if neg:
            q += U64_1
    elif mode == RTO:
        q |= U64_1
    elif mode == SR:
        ur = u >> np.uint64(64 - rbits)
        full = U64_1 << np.uint64(rbits)
        if drop <= rbits:
            # The whole remainder fits in the r bits: P(up) = rem / 2^drop exactly.
            if (rem << np.uint64(rbits - drop)) + ur >= full:
                q += U64_1
        elif drop - rbits < 64:
            if (rem >> np.uint64(drop - rbits)) + ur >= full:
                q += U64_1
        # else: the remainder is below 2^-r ulp and is truncated: never rounds up.
    # RTZ: keep q.
    return q, True


@njit(cache=True)
def signed_nan(neg):
    """The quiet NaN with sign neg, from its pattern (``-np.nan`` compiles to 0 - NaN, whose
    sign x86 does not flip)."""
    return np.uint64((F64_SIGN if neg else U64_0) | F64_EXP_FIELD | F64_QUIET).view(np.float64)


@njit(cache=True)
def overflow_result(neg, mode, fp):
    """Result of an overflow (see module docstring) and its flags; fp a FormatParams."""
    infnan = fp.inf_nan
    if fp.saturate != 0 or infnan == 2:
        r = fp.maxval
    else:
        to_inf = (mode == RNE or mode == RNA or mode == SR or mode == RHU
                  or (mode == RUP and not neg) or (mode == RDN and neg))
        if to_inf:
            if infnan != 0:
                # no Inf: the NaN, with the sign of the value (ml_dtypes' e4m3fn: 0xFF)
                return signed_nan(neg), OVERFLOW | INEXACT
            r = np.inf
        else:
            r = fp.maxval
    return (-r if neg else r), OVERFLOW | INEXACT


@njit(cache=True)
def nan_result(b, fp):
    """The quiet NaN (as a float64) that the NaN with float64 pattern b becomes: its sign kept
    in signed formats, in "ieee" formats its top m fraction bits kept (the quiet bit and the
    m - 1 payload bits below it), every other bit cleared (see the module docstring)."""
    sign = (b & F64_SIGN) if fp.signed != 0 else U64_0
    frac = F64_QUIET
    if fp.inf_nan == 0:
        # The top m of the 52 fraction bits: clear the low 52 - m (m >= 1 in ieee formats).
        frac |= b & F64_FRAC & ~((U64_1 << np.uint64(52 - fp.man_bits)) - U64_1)
    return np.uint64(sign | F64_EXP_FIELD | frac).view(np.float64)


@njit(cache=True)
def inf_result(neg, fp):
    """(result, flags) of an infinite input (see the module docstring)."""
    if neg and fp.signed == 0:
        return np.nan, INVALID
    if fp.saturate != 0 or fp.inf_nan == 2:
        return (-fp.maxval if neg else fp.maxval), INVALID
    if fp.inf_nan == 0:
        return (-np.inf if neg else np.inf), 0
    return signed_nan(neg), INVALID


@njit(cache=True)
def zero_result(neg, fp):
    """(result, flags) of a zero input: itself, +0 in unsigned formats, NaN without zero."""
    if fp.zero == 0:
        return np.nan, INVALID
    if neg and fp.signed != 0:
        return -0.0, 0
    return 0.0, 0


@njit(cache=True)
def round_pack(neg, sig, lg, e, fp, mode, u, rbits):
    """Round the exact (-1)^neg * sig * 2^e (0 < sig < 2^64, 2^lg <= sig < 2^(lg+1)) once onto
    the grid of the format fp; returns (float64 result, flag bits)."""
    m = fp.man_bits
    emin = fp.emin
    subn = fp.subnormals
    if neg and fp.signed == 0:
        return np.nan, INVALID
    # value = sig * 2^e with 2^lg <= sig < 2^(lg+1): its binary exponent is x_exp.
    x_exp = lg + e
    if x_exp > fp.emax:
        # value >= 2^(emax+1) > max in every format: overflow whatever the mode.
        return overflow_result(neg, mode, fp)
    if subn != 0 and x_exp < emin:
        q_exp = emin - m           # subnormal range: fixed quantum 2^(emin - m)
    else:
        q_exp = x_exp - m          # p = m + 1 significant bits
    q, inexact = round_int(sig, q_exp - e, neg, mode, u, rbits)
    flags = INEXACT if inexact else 0
    if q == 0:
        # Rounded to zero (only possible below the normal range): tiny and inexact.
        return (-0.0 if neg else 0.0), flags | UNDERFLOW
    # q <= 2^(m+1) <= 2^53: bit_length's float64 conversion is exact.
    res_exp = bit_length(q) - 1 + q_exp
    if res_exp < emin:
        # Tiny after rounding (for subnormal formats res_exp < emin means q < 2^m, i.e. the
        # p-bit rounding did not carry up to 2^emin -- except exactly at the boundary binade,
        # checked below).
        if subn == 0:
            bottom = 0.0 if fp.zero != 0 else pow2(emin)
            return (-bottom if neg else bottom), UNDERFLOW | INEXACT
        if inexact:
            flags |= UNDERFLOW
    elif subn != 0 and inexact and x_exp == emin - 1:
        # The subnormal rounding carried to 2^emin; tininess after rounding asks whether the
        # p-bit rounding with unbounded exponent would also reach 2^emin.
        q2, _ = round_int(sig, x_exp - m - e, neg, mode, u, rbits)
        if bit_length(q2) - 1 + (x_exp - m) < emin:
            flags |= UNDERFLOW
    mag = np.float64(q) * pow2(q_exp)
    if mag > fp.maxval:
        return overflow_result(neg, mode, fp)
    return (-mag if neg else mag), flags


@njit(cache=True)
def round_value(v, escale, fp, mode, u, rbits):
    """Round v * 2^escale once onto the grid of the format whose FormatParams is fp; returns
    (float64 result, flag bits)."""
    b = np.float64(v).view(np.uint64)
    neg = (b >> _U63) != 0
    E = np.int64((b >> _U52) & F64_EXP_ALL_ONES)
    frac = b & F64_FRAC
    if E == 0x7FF:
        if frac != 0:
            return nan_result(b, fp), (INVALID if fp.inf_nan == 2 else 0)
        return inf_result(neg, fp)
    if E == 0:
        if frac == 0:
            return zero_result(neg, fp)
        return round_pack(neg, frac, bit_length(frac) - 1, escale - 1074, fp, mode, u, rbits)
    return round_pack(neg, frac | F64_HIDDEN, 52, E - 1075 + escale, fp, mode, u, rbits)


@njit(cache=True)
def round_integer(n, fp, mode, u, rbits):
    """round_value for an int64 or uint64 n, exactly (no conversion to float64 first: |n| may
    exceed 2^53).  0 is +0."""
    if n == 0:
        return zero_result(False, fp)
    neg = n < 0
    # |n| as uint64, also for -2^63 (two's complement negation modulo 2^64).
    sig = (U64_0 - np.uint64(n)) if neg else np.uint64(n)
    return round_pack(neg, sig, bit_length64(sig) - 1, 0, fp, mode, u, rbits)
