"""Per-element functions of the vectorised arithmetic on float32 operands (branch-free, inlined
into the loops of softfloat._kernels_arith_f32, where LLVM vectorises them).

What they compute.  Every emulated operation rounds its exact result x once (softfloat._arith).
For float32 operands x is never needed in full: a proxy that rounds like x is enough.

* ``value64(op, x, y, z, rdn)`` -> (v, ok): v = RO53(x), x rounded to odd at 53 bits, as a
  float64, from float64 arithmetic on the widened operands (the same constructions as the scalar
  ops, see softfloat._arith; here every intermediate is exact for ALL float32 operands, see the
  proofs at each op), and whether the element is OK (below); where not, v is the element's
  special value (below).
* ``lean32(op, a, b, c, rdn)`` -> (pattern, ok): the float32 pattern of RO24(x), x rounded to
  odd at 24 bits (the float32 grid), computed in float32 arithmetic wherever its error terms are
  provably exact; where not OK, the pattern of the special value, or MARK32 where the float32
  arithmetic does not settle the element.  Twice the SIMD lanes of value64.
* ``ro_grid32(v)``: RO53(x) -> RO24(x) (round to odd composes: RO24(RO53(x)) = RO24(x), since
  a 24-bit odd rounding lies strictly between the same 24-bit neighbours).

Why the proxies are enough (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
proved algorithms using rounding to odd", IEEE TC 2008): rounding RO_k(x) to p <= k - 2 bits
gives the result of rounding x, in every deterministic mode, with the same inexact, underflow
and overflow flags (the subnormal grid of a format is a coarser grid still).  So RO24 serves
formats with p <= 22 (fp16, bf16, tf32, the fp8 formats) and RO53 every p <= 51.  Stochastic
rounding with r bits reads the first p + r bits: RO53 agrees with x on 52 (p + r + 2 <= 53 is
enforced by the API), RO24 on too few, so stochastic rounding uses RO53.

Kinds (what the loops do with the element), and the value a proxy function returns for each:
OK (round the proxy: RO24 / RO53 of the exact result); NAN (a NaN operand) and INVALID (an invalid
operation: inf - inf, 0 * inf, 0/0, inf/inf, sqrt(x < 0)): the quiet NaN (F32_QNAN / float64's),
which the rounding keeps in every format, as softfloat._arith._nan_result(fp, ...) (flags: the
rounding's INVALID for a NaN in an inf_nan="none" format is _nan_result's; INVALID's own flag is
not raised by it); DIVBYZERO (x / 0 for finite nonzero x): the infinity of the quotient's sign,
which the rounding keeps in the ieee formats without saturation, as _divbyzero_result (without
its DIVBYZERO flag); SCALAR (route A only: float32 overflow, error terms not provably exact):
MARK32, the NaN pattern with every payload bit set (F32_ABS's bits), a value no other kind
takes.  Infinite results of infinite operands and exact zero results are OK (the rounding of an
infinity or a signed zero is round_value's business).  ``kind_of`` names the kind of an
element from these values (the bench and the tests count them).

Imports numpy, numba and softfloat's _arith, _intrinsics (the intrinsic layer), _primitives and
_roundpack only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._arith import ADD, DIV, FMA, MUL, SQRT, SUB
from ._intrinsics import and32, fma, ge32, lt32, ne32, or32, sel32, sub32
from ._primitives import (F32_ABS, F32_HIDDEN, F32_INF, F32_QNAN, F32_SIGN, F64_SIGN,
                          fold_odd_nb, two_sum_err)

# Element kinds, for kind_of (the proxy loops carry them as values, see above).
OK, SCALAR, NAN, INVALID_OP, DIV_BY_ZERO = (np.uint8(k) for k in range(5))
#: The proxy pattern of an element the float32 arithmetic does not settle (kind SCALAR), and the
#: marker of the elements that softfloat._kernels_arith_f32 settles after the rounding: a NaN
#: that no proxy function returns otherwise (their NaN is F32_QNAN).
MARK32 = F32_ABS

_U32_0 = np.uint32(0)
_U32_1 = np.uint32(1)
_F32_0 = np.float32(0.0)
# float32 patterns (biased exponent << 23): 2^-126 (1 << 23, the smallest normal), 2^-100
# (27 << 23) and 2^127 (254 << 23); the widths of the unsigned pattern ranges [2^-126, Inf) and
# [2^-100, Inf), for the one-compare range tests lt32(pattern - lo, width).
_P_NORM = F32_HIDDEN                   # the pattern of 2^-126 is the hidden bit, 1 << 23
_P_2M100 = np.uint32(27 << 23)
_P_2P127 = np.uint32(254 << 23)
_W_NORM = np.uint32(0x7F800000 - (1 << 23))
_W_2M100 = np.uint32(0x7F800000 - (27 << 23))


# ----- float64: RO53 of the exact result, for any float32 operands ------------------------------

@njit(cache=True, inline="always")
def _sum_ro(x, y, rdn):
    """RO53(x + y) for float64 x, y whose float64 sum cannot overflow (widened float32 values
    and their exact products: |x + y| < 2^257); an exact zero sum gets IEEE's sign: the float64
    sum's (+0 unless both are -0) except in RDN, -0 unless both are +0.  Infinite or NaN sums
    are returned as they are.  TwoSum is exact here: no overflow, and sums never underflow."""
    s = x + y
    v = fold_odd_nb(s, two_sum_err(x, y, s))
    zr = np.uint64((np.float64(x).view(np.uint64) | np.float64(y).view(np.uint64))
                   & F64_SIGN).view(np.float64)
    v = zr if (rdn & (s == 0.0)) else v
    return v if np.isfinite(s) else s


@njit(cache=True, inline="always")
def value64(op, x, y, z, rdn):
    """(RO53 of the exact result, ok) for float64 x, y, z holding float32 values (z: fma); where
    not ok, the special value of the element's kind: float64's quiet NaN (NAN, INVALID_OP) or
    the infinity x / 0 (DIV_BY_ZERO).  Never SCALAR."""
    dbz = False
    if op == ADD or op == SUB:
        v = _sum_ro(x, -y if op == SUB else y, rdn)
    elif op == MUL:
        v = x * y                     # exact: 24 + 24 <= 53 bits, |x y| in [2^-298, 2^256]
    elif op == DIV:
        # q = RN(x/y) is a normal float64 (|x/y| in [2^-277, 2^277]).  r = x - q y is exact and
        # fma gives it: q y is a multiple of g = ulp(q) ulp(y) >= 2^(-277-52-149), and so is x
        # (g <= 2^(e_x - 51) <= ulp(x), ulp(y) being at most 2^-23 |y| or 2^-149), and |r| =
        # |y| |x/y - q| <= |y| ulp(q)/2 < 2^23 g: at most 23 significant bits.  x/y - q = r / y:
        # its sign is sign(r) sign(y).
        q = x / y
        r = fma(-q, y, x)
        f = fold_odd_nb(q, -r if y < 0.0 else r)
        v = f if (np.isfinite(q) & (q != 0.0)) else q
        dbz = (y == 0.0) & (x != 0.0) & np.isfinite(x)
    elif op == SQRT:
        # s = RN(sqrt(x)) is normal (x >= 2^-149: s >= 2^-74.5); r = x - s^2 is a multiple of
        # ulp(s)^2 (x too: x is a multiple of ulp(x) >= ulp(s)^2) with |r| = |sqrt(x) - s|
        # (sqrt(x) + s) < ulp(s)/2 * 2^(e_s + 2), i.e. below 2^53 ulp(s)^2: exact, fma gives it;
        # sign(r) = sign(sqrt(x) - s).
        s = np.sqrt(x)
        f = fold_odd_nb(s, fma(-s, s, x))
        v = f if (np.isfinite(s) & (s > 0.0)) else s
    else:
        v = _sum_ro(x * y, z, rdn)    # x * y exact as for MUL
    # (the quotient of x / 0 is that infinity already)
    nan = np.isnan(v)
    return (np.nan if nan else v), not (nan | dbz)


@njit(cache=True, inline="always")
def ro_grid32(v):
    """(pattern, overflow): RO24 of v onto the float32 grid, subnormals included, from c =
    RN(v) and the exact difference v - c (both float64: exact); Inf and NaN keep their pattern;
    overflow is True when a finite v rounds to Inf (|v| >= 2^128 (1 - 2^-25))."""
    c = np.float32(v)
    cb = np.float32(c).view(np.uint32)
    return _fold32(cb, v - np.float64(c)), ge32(and32(cb, F32_ABS), F32_INF) & np.isfinite(v)


# ----- float32: RO24 of the exact result where the float32 error terms are exact ----------------

@njit(cache=True, inline="always")
def _fold32(hb, t):
    """RO24 pattern of h + t from h = RN(h + t) (pattern hb; a normal float32, or any value with
    t == 0) and the exact error t (float32 or float64): t == 0 keeps hb; otherwise the odd one of
    h and its neighbour on t's side, (hb - 1) | 1 when t points toward zero (h odd: h; h even:
    the neighbour below, across a binade boundary too), hb | 1 when away (h odd: h; even: the
    neighbour above).  A zero h (t != 0) becomes the signed smallest subnormal.  Non-finite h
    (pattern >= Inf) is returned unchanged."""
    tz = t != 0.0
    tneg = t < 0.0
    opp = tneg != ne32(and32(hb, F32_SIGN), _U32_0)
    f = or32(sub32(hb, _U32_1 if (tz & opp) else _U32_0), _U32_1 if tz else _U32_0)
    return hb if ge32(and32(hb, F32_ABS), F32_INF) else f


@njit(cache=True, inline="always")
def lean32(op, a, b, c, rdn):
    """(pattern, ok) for float32 operands: RO24 of the exact result, or where not ok the
    pattern of the element's special value: F32_QNAN (NAN, INVALID_OP), the infinity a / 0
    (DIV_BY_ZERO) or MARK32 (SCALAR: the float32 arithmetic does not settle it)."""
    fin_op = np.isfinite(a) & np.isfinite(b)
    if op == ADD or op == SUB:
        # TwoSum in float32: exact error t for any finite a, b unless an operation overflows,
        # which |s| < 2^127 excludes (|s - a| <= |b| + ulp(s)/2 then stays below FLT_MAX).
        bb = -b if op == SUB else b
        s = a + bb
        t = two_sum_err(a, bb, s)          # float32 in, float32 arithmetic
        sb = np.float32(s).view(np.uint32)
        v = _fold32(sb, t)
        if rdn:
            zr = and32(or32(np.float32(a).view(np.uint32), np.float32(bb).view(np.uint32)),
                       F32_SIGN)
            v = zr if s == _F32_0 else v
        # past 2^127: a NaN, an infinity of infinite operands (OK), or SCALAR
        ok = lt32(and32(sb, F32_ABS), _P_2P127) | (np.isinf(s) & (not fin_op))
        alt = sel32(np.isnan(s), F32_QNAN, MARK32)
    elif op == MUL:
        # e = a b - p exactly (fma) when p = RN(a b) is at least 2^-100: then a b > 2^-101 and
        # the product's ulps, 2^(k_a + k_b) (k: the exponent of an operand's last bit), satisfy
        # k_a + k_b + 48 > -101, i.e. k_a + k_b >= -149; e is a multiple of 2^(k_a + k_b) below
        # ulp(p)/2 <= 2^(k_a + k_b + 24): a float32.  Zero operands give an exact signed zero.
        p = a * b
        e = fma(a, b, -p)
        pb = np.float32(p).view(np.uint32)
        pm = and32(pb, F32_ABS)
        v = _fold32(pb, e)
        zero_op = (a == _F32_0) | (b == _F32_0)
        exact0 = zero_op & (p == _F32_0)
        # else a NaN, an infinity of an infinite operand (OK), or SCALAR (finite operands)
        ok = lt32(sub32(pm, _P_2M100), _W_2M100) | exact0 | ((not np.isnan(p)) & (not fin_op))
        alt = sel32(np.isnan(p), F32_QNAN, MARK32)
    elif op == DIV:
        # r = a - q b exactly (fma) when q = RN(a/b) is normal and |a| >= 2^-100.  With e_x the
        # exponent of x: q b is a multiple of g = ulp(q) ulp(b); so is a (normal b: e_q + e_b <=
        # e_a + 1 gives g <= 2^(e_a - 45); subnormal b, ulp(b) = 2^-149: b = 2^-149 makes q
        # exact, else e_b >= -148 and e_q <= e_a - e_b + 1 give g <= 2^(e_a - 23) = ulp(a));
        # |r| = |b| |a/b - q| <= |b| ulp(q)/2 < 2^23 g; and g >= 2^-149 (normal b: |a/b| >
        # 2^(e_a - e_b - 1) gives e_q + e_b >= e_a - 1 >= -101; subnormal b: q > 2^26).  So r is
        # a float32.  a/b - q = r / b: its sign is sign(r) sign(b).
        q = a / b
        r = fma(-q, b, a)
        r = -r if b < _F32_0 else r
        qb = np.float32(q).view(np.uint32)
        qm = and32(qb, F32_ABS)
        am = and32(np.float32(a).view(np.uint32), F32_ABS)
        norm = lt32(sub32(qm, _P_NORM), _W_NORM) & ge32(am, _P_2M100)
        v = _fold32(qb, r) if norm else qb
        # q = +-0 exactly for 0 / b and a / inf; q = +-inf exactly for inf / b, and for a / 0
        # with a finite and nonzero: DIV_BY_ZERO, whose value is q (0 / 0 and NaN / 0 are NaNs,
        # inf / 0 is OK: b == 0 alone tells the rest; with an isfinite(a) test as well the
        # loop took 25% longer, AVX-512, N(0,1) data).
        exact0 = (q == _F32_0) & ((a == _F32_0) | np.isinf(b))
        ok = norm | exact0 | (np.isinf(q) & np.isinf(a))
        alt = sel32(np.isnan(q), F32_QNAN, sel32(b == _F32_0, qb, MARK32))
    elif op == SQRT:
        # r = a - s^2 exactly (fma) when a >= 2^-100: a multiple of ulp(s)^2 >= 2^-146, below
        # 2^24 ulp(s)^2 in magnitude (see value64).  sqrt(+-0) = +-0, sqrt(+inf) = +inf exact.
        s = np.sqrt(a)
        r = fma(-s, s, a)
        ab = np.float32(a).view(np.uint32)
        norm = lt32(sub32(ab, _P_2M100), _W_2M100)
        v = _fold32(np.float32(s).view(np.uint32), r) if norm else \
            np.float32(s).view(np.uint32)
        ok = norm | (and32(ab, F32_ABS) == _U32_0) | (ab == F32_INF)
        alt = sel32(np.isnan(s), F32_QNAN, MARK32)
    else:
        # fma: the float64 route (a b is exact in float64, float32 arithmetic has no room).
        vv, ok64 = value64(FMA, np.float64(a), np.float64(b), np.float64(c), rdn)
        v, ovf = ro_grid32(vv)            # (float64's quiet NaN becomes F32_QNAN)
        ok = ok64 & (not ovf)
        alt = sel32(ok64, MARK32, v)
    return sel32(ok, v, alt), ok


@njit(cache=True, inline="always")
def kind_of(op, ok, nan, scalar, a, b, c):
    """The kind of an element from its proxy function's ok, whether its special value is the
    quiet NaN (nan) or MARK32 (scalar; route A), and its operands: a NaN result is NAN where an
    operand the operation reads is a NaN, else INVALID_OP; the remaining one is DIV_BY_ZERO."""
    if ok:
        return OK
    if scalar:
        return SCALAR
    if op == SQRT:
        nan_op = np.isnan(a)
    elif op == FMA:
        nan_op = np.isnan(a) | np.isnan(b) | np.isnan(c)
    else:
        nan_op = np.isnan(a) | np.isnan(b)
    return (NAN if nan_op else INVALID_OP) if nan else DIV_BY_ZERO
