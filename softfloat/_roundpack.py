"""The one rounding routine every emulated operation ends in (SoftFloat's "round-pack").

``round_value(v, escale, fp, mode, u, rbits)`` rounds the value v * 2^escale (v a float64, escale
an int) ONCE onto the grid of the format described by ``fp`` (its FormatParams record, from
``Format.kernel_params()``: m fraction bits, exponent range [emin, emax], subnormals, Inf/NaN
style, saturation, largest finite value), and returns (result as float64, IEEE flag bits).

Callers pass either an exact value (a float32/float64 input, an exact float64 product) or a
round-to-odd float64 proxy with at least p + 2 significant bits, which rounds to the same result
in every mode (Boldo & Melquiond); escale lets callers keep huge or tiny exponents out of v.

Everything is integer arithmetic on the 53-bit significand: no floating-point rounding happens
here except the final exact scaling of an integer by a power of two.

Semantics (documented for users in softfloat/__init__.py):
* signed zeros: a zero input keeps its sign; a result that rounds to zero keeps the input's sign.
* NaN in -> NaN out, no flag (quiet).  A format without NaN ("none") returns a NaN carrier and
  raises INVALID; to_bits refuses to encode it.
* Infinity in: exact for ieee formats.  For fn/none formats it is treated as an unboundedly large
  finite value, i.e. it overflows (see below).
* Overflow (the value rounded with unbounded exponent exceeds the largest finite value): saturating
  and "none" formats give +-max; otherwise RNE, RNA, RHU, SR, RUP (positive) and RDN (negative)
  give
  +-Inf (NaN for fn formats, which have no Inf) and RTZ, RTO, RUP (negative), RDN (positive)
  give +-max, as IEEE 754 section 7.4 prescribes for directed roundings.
* Tininess is detected AFTER rounding (IEEE 754 option, as x86 SSE): a nonzero result is tiny when
  rounding the exact value to p bits with an unbounded exponent range gives a magnitude below
  2^emin.  Underflow is flagged when the result is tiny and inexact.  With subnormals=False
  (flush-to-zero) every tiny result is replaced by a zero of the same sign (flags underflow and
  inexact), in every rounding mode.
* Stochastic rounding with r random bits (Connolly-Higham-Mary SR with a finite number of bits):
  the r bits below the result's last place are added to an r-bit uniform random integer and the
  sum's carry decides; remainder bits below those r bits are ignored (truncated).  If the
  remainder has at most r bits the probability of rounding up is exactly distance / ulp.

Imports numpy, numba and softfloat._primitives only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._primitives import (F64_EXP_ALL_ONES, F64_FRAC, F64_FRAC_BITS, F64_HIDDEN,
                          F64_SIGN_SHIFT, U64_0, U64_1, bit_length, pow2)

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


@njit(cache=True)
def round_int(sig, drop, neg, mode, u, rbits):
    """Round the integer sig (< 2^53) shifted right by ``drop`` bits to an integer q.

    Returns (q, inexact).  ``neg`` is the sign of the value (for directed modes), ``u`` 64 random
    bits (SR only; its top ``rbits`` bits are used).
    """
    if drop <= 0:
        return sig << np.uint64(-drop), False
    if drop >= 60:
        # sig < 2^53 <= 2^(drop - 7): the whole significand lies strictly below half an ulp.
        q = U64_0
        rem = sig
        below_half = True
        is_half = False
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
def overflow_result(neg, mode, fp):
    """Result of an overflow (see module docstring) and its flags; fp a FormatParams."""
    infnan = fp.inf_nan
    if fp.saturate != 0 or infnan == 2:
        r = fp.maxval
    else:
        to_inf = (mode == RNE or mode == RNA or mode == SR or mode == RHU
                  or (mode == RUP and not neg) or (mode == RDN and neg))
        if to_inf:
            r = np.inf if infnan == 0 else np.nan
        else:
            r = fp.maxval
    return (-r if neg else r), OVERFLOW | INEXACT


@njit(cache=True)
def round_value(v, escale, fp, mode, u, rbits):
    """Round v * 2^escale once onto the grid of the format whose FormatParams is fp; returns
    (float64 result, flag bits)."""
    m = fp.man_bits
    emin = fp.emin
    emax = fp.emax
    subn = fp.subnormals
    infnan = fp.inf_nan
    b = np.float64(v).view(np.uint64)
    neg = (b >> _U63) != 0
    E = np.int64((b >> _U52) & F64_EXP_ALL_ONES)
    frac = b & F64_FRAC
    if E == 0x7FF:
        if frac != 0:
            return np.nan, (INVALID if infnan == 2 else 0)
        if infnan == 0:
            return v, 0
        return overflow_result(neg, mode, fp)
    if E == 0:
        if frac == 0:
            return v, 0
        sig = frac
        e = escale - 1074
        L = bit_length(sig) - 1
    else:
        sig = frac | F64_HIDDEN
        e = E - 1075 + escale
        L = 52
    # value = sig * 2^e with 2^L <= sig < 2^(L+1): its binary exponent is x_exp.
    x_exp = L + e
    if x_exp > emax:
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
    res_exp = bit_length(q) - 1 + q_exp
    if res_exp < emin:
        # Tiny after rounding (for subnormal formats res_exp < emin means q < 2^m, i.e. the
        # p-bit rounding did not carry up to 2^emin -- except exactly at the boundary binade,
        # checked below).
        if subn == 0:
            return (-0.0 if neg else 0.0), UNDERFLOW | INEXACT
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
