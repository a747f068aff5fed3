"""The scalar reference of the truncating block-FMA models (spec section 2, finite K and F) and
the accumulator rounding every Tensor Core path ends in.

Provides ``trunc_block`` (steps 3-4 of one BLOCK_STEP: alignment, truncation, the exact sum),
``round_out`` (spec ROUND), ``block_special`` (spec step 1) and ``acc_exponent``; the chained DOT
built on them, with special values (the reference that _tile.hw_fix runs on the elements the
SIMD kernel marks), is _superacc.dot_chain, which also chains exact blocks.  The fast GEMM is
_tile.fused_gemm.  Kernels take only arrays and plain numbers.

Operand encoding.  Each input x is carried twice: its value (float64) and its alignment
exponent E = max(floor(log2 |x|), emin) as a float32 holding a small integer (spec step 2:
subnormals take emin), with ZERO_EXP = -4000 for zeros (and Inf/NaN, whose values carry them),
so that a zero product never raises E_max: a sum with a ZERO_EXP term is at most -4000 + 127
(exact in float32), far below every real alignment exponent (>= 2 * -126).

Why float64: every quantity of BLOCK_STEP is an integer times a power of two
that float64 holds EXACTLY, so the SIMD units do the work:
* a product a*b of inputs of precision p <= 26 has at most 52 significant bits (fp16/tf32 22,
  bf16 16, fp8 <= 8) and lies in [2^-298, 2^256]: exact in float64;
* the unit of alignment is 2^(E_max - F); scaling by sc = 2^(F - E_max) is exact (the scaled
  product stays a normal float64, >= 2^-298 * 2^(0 - 300) >> 2^-1022);
* trunc() of a scaled product is T_i = floor(|value_i| / unit) with its sign (truncation of the
  magnitude, spec step 3); T_i < 2^(F+2) because a product of two significands is < 4;
* K of them plus c's stay below (K+1) 2^(F+2) <= 2^53 (checked by TCModel), so every float64
  addition of step 4 is exact, in any order;
* S * 2^(E_max - F) is exact, and ``round_out`` rounds it with one trunc/rint of an exact
  power-of-two scaling (spec ROUND).
Every floating-point operation here is exact; it is integer arithmetic on float64 lanes.

Imports numpy, numba and softfloat._primitives only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._primitives import F64_EXP_FIELD, F64_FRAC_BITS, pow2

#: 2046 << 52: the bits of 2^e and of 2^-e add up to it (biased exponents e+1023 and 1023-e),
#: so 1/q = that minus q's bits for a normal power of two q.
INV_BITS = np.uint64(2046 << 52)

#: Alignment exponent recorded for a zero input (see the module docstring).
ZERO_EXP = -4000.0
#: Clamp of E_max from below when a block has no non-zero term at all: 2^(F+900) and
#: 2^(-900-F) stay finite, the block sum is +0 and rounds to +0.
EMAX_CLAMP = -900


@njit(cache=True, error_model="numpy")
def pow2_floor(x):
    """2^floor(log2 |x|) for a normal float64 x (0 for x = 0): the bits with the sign and the
    fraction cleared."""
    return np.uint64(np.float64(x).view(np.uint64) & F64_EXP_FIELD).view(np.float64)


@njit(cache=True, error_model="numpy")
def acc_exponent(x, emin):
    """Alignment exponent of an accumulator value (decode of spec step 2) as a float:
    max(floor(log2 |x|), emin), ZERO_EXP for x = 0.  Accumulator values are normal float64s."""
    if x == 0.0:
        return ZERO_EXP
    e = np.float64(np.int64(np.float64(x).view(np.uint64) >> F64_FRAC_BITS) & 0x7FF) - 1023.0
    return max(e, np.float64(emin))


@njit(cache=True, error_model="numpy")
def round_out(v, qscale, qmin, lim, rne):
    """ROUND of spec section 2 for an exact float64 v: one rounding (RNE if rne else RZ) to
    ``f`` fraction bits with gradual underflow at emin; overflow gives +-Inf even under RZ.

    qscale = 2^-f, qmin = 2^(emin - f) (the subnormal quantum), lim = 2^(emax + 1).
    The quantum of v is q = 2^(max(floor(log2|v|), emin) - f); v * (1/q) is exact (1/q is a
    power of two built from q's bits) and its rint/trunc is the rounded significand, the carry
    out of rounding included (rint may reach 2^(f+1); r * q is still exact).  A zero v (S = +0)
    stays +0; a tiny negative v that truncates to zero gives -0 (sign * 0, spec 8.6).
    """
    return _round_rne(v, qscale, qmin, lim) if rne else _round_rz(v, qscale, qmin, lim)


@njit(cache=True, error_model="numpy")
def _inv_quantum(v, qscale, qmin):
    """(q, 1/q) for the quantum q of v (see round_out)."""
    q = max(pow2_floor(v) * qscale, qmin)
    return q, np.uint64(INV_BITS - np.float64(q).view(np.uint64)).view(np.float64)


@njit(cache=True, error_model="numpy")
def _round_rz(v, qscale, qmin, lim):
    q, iq = _inv_quantum(v, qscale, qmin)
    r = np.trunc(v * iq) * q
    return np.copysign(np.inf, v) if abs(r) >= lim else r


@njit(cache=True, error_model="numpy")
def _round_rne(v, qscale, qmin, lim):
    q, iq = _inv_quantum(v, qscale, qmin)
    r = np.rint(v * iq) * q
    return np.copysign(np.inf, v) if abs(r) >= lim else r


@njit(cache=True, error_model="numpy")
def block_special(acc, av, bv, k0, k1):
    """Step 1 of BLOCK_STEP: (result, True) when acc or a factor of the block is Inf or NaN,
    (0.0, False) when everything is finite."""
    nan = acc != acc
    pinf = acc == np.inf
    ninf = acc == -np.inf
    special = nan or pinf or ninf
    for kk in range(k0, k1):
        x = np.float64(av[kk])
        y = np.float64(bv[kk])
        if x != x or y != y:
            nan = True
            special = True
        elif abs(x) == np.inf or abs(y) == np.inf:
            special = True
            if x == 0.0 or y == 0.0:
                nan = True              # 0 * Inf
            elif (x > 0.0) == (y > 0.0):
                pinf = True
            else:
                ninf = True
    if not special:
        return 0.0, False
    if nan or (pinf and ninf):
        return np.nan, True
    return (np.inf if pinf else -np.inf), True


@njit(cache=True, error_model="numpy")
def trunc_block(acc, av, ea, bv, eb, k0, k1, F, emin_acc):
    """Steps 3-4 of BLOCK_STEP for finite operands: the exact value S * 2^(E_max - F) of the
    block k0 .. k1-1 started from the accumulator value acc.

    av, bv: the row of A and the column of B (values); ea, eb: their alignment exponents
    (module docstring)."""
    # Step 3: E_max over c and the products (zeros carry ZERO_EXP and never win).
    e = acc_exponent(acc, emin_acc)
    for kk in range(k0, k1):
        e = max(e, np.float64(ea[kk]) + np.float64(eb[kk]))
    e = max(e, np.float64(EMAX_CLAMP))
    sc = pow2(F - np.int64(e))              # 1 / unit
    s = 0.0 + np.trunc(acc * sc)            # 0.0 + : an all-zero sum is +0, never -0
    for kk in range(k0, k1):
        s += np.trunc(np.float64(av[kk]) * np.float64(bv[kk]) * sc)
    return s * pow2(np.int64(e) - F)
