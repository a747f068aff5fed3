"""Scalar Numba kernels of the emulated arithmetic: add, sub, mul, div, sqrt, fma.

Each ``*_scalar`` function takes float64 operand values (float32 operands widen exactly), the
format's FormatParams record ``fp`` (``Format.kernel_params()``) and the mode, random bits and
SR bit count of :func:`softfloat._roundpack.round_value`, computes the EXACT result of its
operands, and rounds it ONCE through ``round_value``.  They are plain ``@njit`` functions so that
other kernels (the Tensor Core GEMM) can call them element by element::

    add_scalar(a, b, fp, mode, u, rbits)          -> (float64, flag bits)
    sub_scalar(a, b, fp, mode, u, rbits)          -> (float64, flag bits)
    mul_scalar(a, b, fp, mode, u, rbits)          -> (float64, flag bits)
    div_scalar(a, b, fp, mode, u, rbits)          -> (float64, flag bits)
    sqrt_scalar(a, fp, mode, u, rbits)            -> (float64, flag bits)
    fma_scalar(a, b, c, fp, mode, u, rbits)       -> (float64, flag bits)
    mul_exact_scalar(a, b, fp, mode, u, rbits)    -- mul when a*b is known to be exact in float64
        (e.g. both operands are float32 values: 24 + 24 bits <= 53, exponents in range)

How the single rounding is kept (the exact result is never available as one float64):

* The exact result x is written as h + t with h = RN(x) a float64 and the error t exact (TwoSum
  for add, Dekker's TwoProduct for mul, the exact remainder for div and sqrt), then folded into
  RO(x), x rounded to odd at 53 bits: if t != 0 and h's last bit is even, step h one ulp toward t.
  Because h = RN(x), x lies strictly between h's two neighbours, so RO(x) is the odd one of
  {h, its neighbour on t's side} -- that is the fold.  fma builds its RO(x) from a 128-bit integer
  sum instead (SoftFloat's shift-right-jam).
* Boldo & Melquiond: rounding RO(x) with k >= p + 2 bits to p bits gives the same result, and the
  same inexact/underflow/overflow flags, as rounding x itself, in every deterministic mode.  With
  k = 53 this covers every target with p <= 51.
* Stochastic rounding with r random bits looks at the first p + r bits of x (the r bits below the
  result's last place are added to the random integer, the rest is truncated).  RO(x) agrees with
  x on its first 52 bits (truncation) and carries the sticky bit in bit 53, so it decides SR like x
  when p + r <= 52; the API enforces the margin p + r + 2 <= 53 (fp32: r <= 27, fp16: r <= 40).
* Operands are pre-scaled by powers of two (exponent bookkeeping, passed to round_value as
  ``escale``) so no intermediate overflows or underflows in float64.

Special values follow IEEE 754: NaN in -> quiet NaN out (no flag); inf - inf, 0 * inf, 0 / 0,
inf / inf, sqrt(x < 0), fma(0, inf, c) (c not NaN) -> NaN with INVALID; x / 0 (x finite nonzero)
-> exact infinity with DIVBYZERO.  An exact zero sum of nonzero or opposite-signed terms is +0,
except -0 when rounding toward -inf (RDN); sqrt(-0) = -0.  Infinite results for formats without
infinity: from infinite operands they go through round_value like a converted Inf (overflow
rules); from x / 0 they are NaN for fn formats and +-max for saturating and "none" formats, with
only DIVBYZERO raised.  A NaN result in a "none" format raises INVALID (round_value's rule).

Arrays of float32 operands do not come here element by element: softfloat._arith_f32 computes
the same round-to-odd proxies branch-free (RO24 in float32 arithmetic, or RO53 in float64), and
softfloat._kernels_arith_f32 hands only the rare rest back to these functions.

Imports numpy, numba, softfloat._primitives and softfloat._roundpack only.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._primitives import (U64_0, U64_1, bit_length64, fold_odd, frexp1, mul64to128, pow2,
                          shl128, shr128_jam, signbit, two_prod_err, two_sum_err)
from ._roundpack import DIVBYZERO, INVALID, RDN, round_value

#: Operation codes of the array kernels.  MUL_EXACT is mul for operands whose float64 product is
#: exact (float32 operands), FMA_EXACT likewise fma whose a * b is exact in float64 (float32 a and
#: b): the API picks them.
ADD, SUB, MUL, MUL_EXACT, DIV, SQRT, FMA, FMA_EXACT = 0, 1, 2, 3, 4, 5, 6, 7

@njit(cache=True)
def _nan_result(fp, flags):
    # A quiet NaN result; "none" formats cannot encode it and raise INVALID (round_value's rule).
    return np.nan, (flags | INVALID) if fp.inf_nan == 2 else flags


@njit(cache=True)
def _exact_zero_sum(mode):
    # IEEE 754 6.3: an exact zero sum of operands of opposite signs (or of nonzero operands that
    # cancel) is +0 in every rounding direction except roundTowardNegative, where it is -0.
    return (-0.0 if mode == RDN else 0.0), 0


@njit(cache=True)
def _divbyzero_result(neg, fp):
    # x / 0 is an exact infinity (IEEE 754 7.3: DIVBYZERO only, no overflow).  Formats without
    # infinity: saturating and "none" formats give +-max, fn formats their NaN.
    if fp.inf_nan == 0 and fp.saturate == 0:
        r = np.inf
    elif fp.inf_nan == 1 and fp.saturate == 0:
        return np.nan, DIVBYZERO
    else:
        r = fp.maxval
    return (-r if neg else r), DIVBYZERO


# ----- add / sub ---------------------------------------------------------------------------------
@njit(cache=True)
def add_scalar(a, b, fp, mode, u, rbits):
    """Round a + b once; returns (result float64, flag bits)."""
    a = np.float64(a)
    b = np.float64(b)
    s = a + b
    if math.isfinite(s):
        if s == 0.0:
            # fl(a + b) == 0 only when a + b == 0 exactly (float addition never underflows to 0).
            if a == 0.0 and b == 0.0 and signbit(a) == signbit(b):
                return a, 0              # (+0) + (+0) = +0, (-0) + (-0) = -0
            return _exact_zero_sum(mode)
        # TwoSum error exact (no overflow).  If s is subnormal, a + b was exact (a sum of
        # multiples of 2^-1074 below 2^-1022 is representable) and t == 0, so fold_odd only ever
        # steps normal numbers.
        t = two_sum_err(a, b, s)
        return round_value(fold_odd(s, t), 0, fp, mode, u, rbits)
    if math.isnan(a) or math.isnan(b):
        return _nan_result(fp, 0)
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and signbit(a) != signbit(b):
            return _nan_result(fp, INVALID)           # inf - inf
        r = a if math.isinf(a) else b                     # exact infinite result
        return round_value(r, 0, fp, mode, u, rbits)
    # Finite operands whose float64 sum overflowed: halve both (escale = 1).  Then
    # max(|a|, |b|) >= 2^1022, so an operand below 2^-1000 sits far below a quarter ulp of the
    # other (2^(1022-54)) and only its sign matters to RO(a + b): replace it by +-2^-1000, which
    # halves exactly (a subnormal might not).
    tiny = pow2(-1000)
    if abs(a) < tiny:
        a = math.copysign(tiny, a)
    if abs(b) < tiny:
        b = math.copysign(tiny, b)
    a *= 0.5
    b *= 0.5
    s = a + b
    t = two_sum_err(a, b, s)
    return round_value(fold_odd(s, t), 1, fp, mode, u, rbits)


@njit(cache=True)
def sub_scalar(a, b, fp, mode, u, rbits):
    """Round a - b once (= a + (-b): negation is exact)."""
    return add_scalar(a, -np.float64(b), fp, mode, u, rbits)


# ----- mul ---------------------------------------------------------------------------------------
@njit(cache=True)
def mul_exact_scalar(a, b, fp, mode, u, rbits):
    """Round a * b once, for operands whose float64 product is exact: two float32 values have
    24-bit significands (product <= 48 bits <= 53) and |product| in [2^-298, 2^256], well inside
    the normal float64 range.  Only valid under that precondition (the kernels check dtypes)."""
    p = np.float64(a) * np.float64(b)
    if math.isnan(p):
        if math.isnan(a) or math.isnan(b):
            return _nan_result(fp, 0)
        return _nan_result(fp, INVALID)               # 0 * inf
    # The float product already has IEEE's sign (xor of signs), also for zeros and infinities.
    return round_value(p, 0, fp, mode, u, rbits)


@njit(cache=True)
def mul_scalar(a, b, fp, mode, u, rbits):
    """Round a * b once for any float64 operands."""
    a = np.float64(a)
    b = np.float64(b)
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0.0 or b == 0.0:
        # Zeros, infinities and NaN: the float64 product is the exact IEEE answer.
        return mul_exact_scalar(a, b, fp, mode, u, rbits)
    fa, ea = frexp1(a)
    fb, eb = frexp1(b)
    # |fa|, |fb| in [1, 2): h = fl(fa * fb) in [1, 4], t exact (Dekker), x = (h + t) 2^(ea+eb).
    h = fa * fb
    t = two_prod_err(fa, fb, h)
    return round_value(fold_odd(h, t), ea + eb, fp, mode, u, rbits)


# ----- div ---------------------------------------------------------------------------------------
@njit(cache=True)
def div_scalar(a, b, fp, mode, u, rbits):
    """Round a / b once."""
    a = np.float64(a)
    b = np.float64(b)
    if math.isnan(a) or math.isnan(b):
        return _nan_result(fp, 0)
    neg = signbit(a) != signbit(b)
    if math.isinf(a):
        if math.isinf(b):
            return _nan_result(fp, INVALID)           # inf / inf
        return round_value(-np.inf if neg else np.inf, 0, fp, mode, u, rbits)
    if math.isinf(b):
        return (-0.0 if neg else 0.0), 0                  # finite / inf: exact signed zero
    if b == 0.0:
        if a == 0.0:
            return _nan_result(fp, INVALID)           # 0 / 0
        return _divbyzero_result(neg, fp)
    if a == 0.0:
        return (-0.0 if neg else 0.0), 0
    fa, ea = frexp1(abs(a))
    fb, eb = frexp1(abs(b))
    # fa, fb in [1, 2): q = RN(fa / fb) in (1/2, 2).  The remainder r = fa - q*fb is exact:
    # (p, pe) = TwoProduct(q, fb) is exact; p = fa (1 + d) with |d| < 2^-51, so fa - p is exact
    # (Sterbenz: p within a factor 2 of fa); and r itself is representable, being a multiple of
    # 2^-105 (ulps of q and fb) smaller than 2^-52 (|r| = fb |fa/fb - q| < 2 * ulp(q)/2), so the
    # final subtraction, whose exact value is r, is exact too.  fb > 0: sign(fa/fb - q) = sign(r).
    q = fa / fb
    p = q * fb
    pe = two_prod_err(q, fb, p)
    r = (fa - p) - pe
    v = fold_odd(q, r)
    return round_value(-v if neg else v, ea - eb, fp, mode, u, rbits)


# ----- sqrt --------------------------------------------------------------------------------------
@njit(cache=True)
def sqrt_scalar(a, fp, mode, u, rbits):
    """Round sqrt(a) once."""
    a = np.float64(a)
    if math.isnan(a):
        return _nan_result(fp, 0)
    if a == 0.0:
        return a, 0                                       # sqrt(+-0) = +-0
    if a < 0.0:
        return _nan_result(fp, INVALID)               # includes -inf
    if math.isinf(a):
        return round_value(a, 0, fp, mode, u, rbits)
    f, e = frexp1(a)
    if e & 1:
        f *= 2.0                                          # even exponent: f in [1, 4)
        e -= 1
    # s = RN(sqrt(f)) in [1, 2) (IEEE sqrt is correctly rounded).  r = f - s^2 is exact: s^2 =
    # p + pe exactly (TwoProduct); p = f (1 + d), |d| < 2^-51, so f - p is exact (Sterbenz); r is
    # a multiple of 2^-104 (ulp(s)^2) with |r| = |sqrt(f) - s| (sqrt(f) + s) < 2^-53 * 4 = 2^-51,
    # i.e. below 2^53 of those units: representable, so (f - p) - pe is exact.  sign(r) =
    # sign(sqrt(f) - s).
    s = math.sqrt(f)
    p = s * s
    pe = two_prod_err(s, s, p)
    r = (f - p) - pe
    return round_value(fold_odd(s, r), e // 2, fp, mode, u, rbits)


# ----- fma: 128-bit integer significands (SoftFloat style) ---------------------------------------
@njit(cache=True)
def _sig53(x):
    """|x| = sig * 2^exp with 2^52 <= sig < 2^53 (x finite nonzero)."""
    f, e = frexp1(abs(x))
    return np.uint64(f * 4503599627370496.0), e - 52      # f * 2^52: exact integer


@njit(cache=True)
def fma_scalar(a, b, c, fp, mode, u, rbits):
    """Round a * b + c once (fused multiply-add)."""
    a = np.float64(a)
    b = np.float64(b)
    c = np.float64(c)
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        # fma(0, inf, NaN): IEEE 754 7.2 leaves INVALID to the implementation; we raise none.
        return _nan_result(fp, 0)
    pneg = signbit(a) != signbit(b)
    if math.isinf(a) or math.isinf(b):
        if a == 0.0 or b == 0.0:
            return _nan_result(fp, INVALID)           # 0 * inf (+ c)
        if math.isinf(c) and signbit(c) != pneg:
            return _nan_result(fp, INVALID)           # inf - inf
        return round_value(-np.inf if pneg else np.inf, 0, fp, mode, u, rbits)
    if math.isinf(c):
        return round_value(c, 0, fp, mode, u, rbits)
    if a == 0.0 or b == 0.0:
        # Exact zero product of sign pneg: the result is (+-0) + c with addition's zero rules.
        return add_scalar(-0.0 if pneg else 0.0, c, fp, mode, u, rbits)
    if c == 0.0:
        return mul_scalar(a, b, fp, mode, u, rbits)
    # All finite nonzero.  |a b| = (sa sb) 2^(ea+eb) with sa sb in [2^104, 2^106) (128-bit
    # integer); |c| = sc 2^ec with sc in [2^52, 2^53).  Place both with their top bit at 124/125:
    # P = (sa sb) << 20 (< 2^126), C = sc << 72 (in [2^124, 2^125)), then align the one with the
    # smaller exponent by a right shift with jam.  Bits can only be lost (jammed into bit 0) when
    # the shift exceeds 20, and then the aligned operand is < 2^105 while the other is >= 2^124,
    # so the sum or difference is >= 2^123: its top 53 bits end at bit >= 71 and the jam bit acts
    # as a pure sticky bit (the exact value lies strictly between the computed integer's odd
    # neighbours, which truncation above bit 1 cannot tell apart).
    sa, ea = _sig53(a)
    sb, eb = _sig53(b)
    sc, ec = _sig53(c)
    cneg = signbit(c)
    phi, plo = mul64to128(sa, sb)
    phi, plo = shl128(phi, plo, 20)
    pexp = ea + eb - 20
    chi, clo = shl128(U64_0, sc, 72)
    cexp = ec - 72
    if pexp >= cexp:
        d = pexp - cexp
        chi, clo = shr128_jam(chi, clo, min(d, 200))
        e0 = pexp
    else:
        d = cexp - pexp
        phi, plo = shr128_jam(phi, plo, min(d, 200))
        e0 = cexp
    if pneg == cneg:
        shi = phi + chi
        slo = plo + clo
        if slo < plo:
            shi += U64_1                                   # both < 2^126: the sum < 2^127
        neg = pneg
    else:
        if phi > chi or (phi == chi and plo >= clo):
            shi = phi - chi - (U64_1 if plo < clo else U64_0)
            slo = plo - clo
            neg = pneg
        else:
            shi = chi - phi - (U64_1 if clo < plo else U64_0)
            slo = clo - plo
            neg = cneg
        if shi == 0 and slo == 0:
            return _exact_zero_sum(mode)                  # exact cancellation
    # Round to odd at 53 bits: keep the top 53 bits, OR everything below into the last one.
    nbits = bit_length64(shi) + 64 if shi != 0 else bit_length64(slo)
    if nbits > 53:
        shi, slo = shr128_jam(shi, slo, nbits - 53)
        e0 += nbits - 53
    v = np.float64(slo)                                   # < 2^53: exact
    return round_value(-v if neg else v, e0, fp, mode, u, rbits)


# ----- dispatch ----------------------------------------------------------------------------------
@njit(cache=True)
def scalar_op(op, x, y, z, fp, mode, u, rbits):
    """round(x (op) y) (z unused), round(sqrt(x)) (y, z unused) or round(x * y + z), for the
    operation code op: the one element-by-element entry of the array kernels."""
    if op == ADD:
        return add_scalar(x, y, fp, mode, u, rbits)
    if op == SUB:
        return sub_scalar(x, y, fp, mode, u, rbits)
    if op == MUL_EXACT:
        return mul_exact_scalar(x, y, fp, mode, u, rbits)
    if op == MUL:
        return mul_scalar(x, y, fp, mode, u, rbits)
    if op == DIV:
        return div_scalar(x, y, fp, mode, u, rbits)
    if op == SQRT:
        return sqrt_scalar(x, fp, mode, u, rbits)
    if op == FMA_EXACT:
        p = np.float64(x) * np.float64(y)
        if p == p:                        # the exact product (not NaN): fma is an add
            return add_scalar(p, z, fp, mode, u, rbits)
    return fma_scalar(x, y, z, fp, mode, u, rbits)
