"""Numba functions that round one element of a block onto its element grid, and its codes.

Provides
    round_elem(v, escale, EP, u)   THE adapter to softfloat._roundpack.round_value (the one
                                   rounding routine): v * 2^escale rounded once onto the
                                   element grid with saturation; (float64 value, flag bits)
    encode(r, EP)                  magnitude code of an element value
    code_byte(neg, code, nbits, is_int)   the element's bit pattern (sign bit, or two's
                                   complement for MXINT8)
    ro_div(a, d)                   the round-to-odd float64 proxy of the exact quotient a / d

EP is BlockFormat.elem_params' int64 array: [m, emin, emax, subnormals, inf_nan, saturate,
bits of max as float64, max code, code bits, is_int, mode, sr bits, exponent bits].  The
vectorised twin of round_elem for float32 data is softfloat/mx/_kernels_fast.py.

Imports numpy, numba, softfloat's round-pack routine, exact toolkit (_primitives) and
FormatParams only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._roundpack import INEXACT, OVERFLOW, round_value
from .._primitives import fold_odd, two_prod_err
from ..formats import FormatParams

__all__ = ["round_elem", "encode", "code_byte", "ro_div", "INEXACT", "OVERFLOW"]

@njit(cache=True)
def round_elem(v, escale, EP, u):
    """round_value(v, escale, <element format>, mode, u, rbits): the ONE call of the round-pack
    routine in softfloat.mx; the element format's FormatParams is rebuilt from EP (bias =
    1 - emin)."""
    fp = FormatParams(EP[0], EP[12], 1 - EP[1], EP[1], EP[2], EP[3], EP[4], EP[5],
                      1, 1, 1 + EP[12] + EP[0],           # signed, with zero, width 1 + e + m
                      np.int64(EP[6]).view(np.float64))
    if np.isinf(v):
        # mx's own rule for an infinite element (unchanged): kept by ieee elements, else
        # saturated to +-max and counted as such.  (round_value, with the OCP conversion
        # rules, would give a saturating format +-max with INVALID instead.)
        if EP[4] == 0:
            return v, 0
        return (-fp.maxval if v < 0 else fp.maxval), OVERFLOW | INEXACT
    return round_value(v, escale, fp, EP[10], u, EP[11])


@njit(cache=True)
def encode(r, EP):
    """Magnitude code of an element value r (a float64 on the element grid, |r| <= max)."""
    m = EP[0]
    emin = EP[1]
    b = np.float64(abs(r)).view(np.uint64)
    if b == 0:
        return np.int64(0)
    e = np.int64(b >> np.uint64(52)) - 1023
    if e < emin:
        return np.int64(abs(r) * np.float64(2.0) ** (m - emin))
    return ((e - emin + 1) << m) | np.int64((b >> np.uint64(52 - m)) & np.uint64((1 << m) - 1))


@njit(cache=True, inline="always")
def code_byte(neg, code, nbits, is_int):
    """Bit pattern of an element: sign-magnitude (sign bit nbits - 1) for the FP elements,
    two's complement (a zero is +0) for MXINT8."""
    if is_int:
        return np.uint8((256 - code) & 0xFF) if neg else np.uint8(code)
    return np.uint8(code | ((1 << (nbits - 1)) if neg else 0))


@njit(cache=True)
def ro_div(a, d):
    """Round-to-odd 53-bit proxy of the exact quotient a / d (float64, d > 0 finite).  q = fl(a /
    d) is the RNE quotient; the remainder a - q d is computed exactly (Dekker's product q d =
    p + e, then (a - p) is exact by Sterbenz's lemma since p is within a factor 2 of a, and its
    sign after subtracting e is exact), so the exact quotient lies above or below q, or equals
    it; when inexact and q's last bit is even, the odd neighbour on the side of the exact
    quotient is the round-to-odd value.  A round-to-odd value with 53 >= p + 2 bits rounds like
    the exact quotient in every mode (Boldo & Melquiond) -- also in stochastic rounding with
    r <= 53 - p - 1 bits, which only reads the truncated bits above the last one."""
    q = a / d
    if a == 0.0:
        return q
    if not abs(q) >= 2.0 ** -900:
        # Below 2^-900 (or underflowed to 0): every proxy of that sign rounds like the exact
        # quotient onto grids whose quantum is >= 2^-149 (0 or the smallest value, by mode; SR
        # with at most 62 bits never rounds up a fraction below 2^-62 of a quantum).
        return 2.0 ** -900 if (a > 0.0) == (d > 0.0) else -(2.0 ** -900)
    if not abs(q) <= 2.0 ** 900:
        return q                # far above every grid: overflows (saturates) either way
    p = q * d
    e = two_prod_err(q, d, p)
    rem = (a - p) - e
    # a / d - q = rem / d has rem's sign (d > 0): the exact quotient lies on rem's side of q
    return fold_odd(q, rem)
