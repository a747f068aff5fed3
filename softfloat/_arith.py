"""Scalar Numba kernels of the emulated arithmetic: add, sub, mul, div, sqrt, fma.

Each ``*_scalar`` function takes float64 operand values (float32 operands widen exactly) and the
format/mode integers of :func:`softfloat._roundpack.round_value`, computes the EXACT result of its
operands, and rounds it ONCE through ``round_value``.  They are plain ``@njit`` functions so that
other kernels (the Tensor Core GEMM) can call them element by element::

    add_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits) -> (float64, int)
    sub_scalar(a, b, ...same...)                                                 -> (float64, int)
    mul_scalar(a, b, ...same...)                                                 -> (float64, int)
    div_scalar(a, b, ...same...)                                                 -> (float64, int)
    sqrt_scalar(a, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)     -> (float64, int)
    fma_scalar(a, b, c, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)-> (float64, int)
    mul_exact_scalar(a, b, ...)  -- mul when a*b is known to be exact in float64 (e.g. both operands
                                    are float32 values: 24 + 24 bits <= 53, exponents in range)

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

Imports numpy, numba and softfloat._roundpack only.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._roundpack import DIVBYZERO, INVALID, RDN, pow2, round_value

_U63 = np.uint64(63)
_U52 = np.uint64(52)
_U32 = np.uint64(32)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_EXPMASK = np.uint64(0x7FF)
_FRACMASK = np.uint64((1 << 52) - 1)
_ONE_BITS = np.uint64(1023 << 52)      # bit pattern of 1.0
_NOT_EXP = np.uint64(~(0x7FF << 52) & ((1 << 64) - 1))   # sign and fraction bits
_MINUS_ONE = np.uint64((1 << 64) - 1)  # adding it subtracts 1 (mod 2^64)
_MASK32 = np.uint64(0xFFFFFFFF)
_SPLITTER = 134217729.0                # 2^27 + 1: Veltkamp splits a 53-bit float into 26 + 27 bits
_TWO64 = 18446744073709551616.0        # 2^64: lifts any float64 subnormal into the normal range


# ----- error-free building blocks --------------------------------------------------------------
@njit(cache=True)
def two_sum_err(a, b, s):
    """Knuth's TwoSum: for s = fl(a + b), the exact error a + b - s (exact unless a+b overflows).
    TwoSum needs no |a| >= |b| ordering and stays exact under gradual underflow."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


@njit(cache=True)
def _split(x):
    # Veltkamp: hi holds the top 26 bits of x, lo = x - hi the remaining 27 (signed); exact
    # for |x| < 2^996 (no overflow in _SPLITTER * x).
    c = _SPLITTER * x
    hi = c - (c - x)
    return hi, x - hi


@njit(cache=True)
def two_prod_err(a, b, p):
    """Dekker's TwoProduct: for p = fl(a * b), the exact error a * b - p.  Exact when nothing
    overflows and the error is not below 2^-1074 -- always true here, where |a|, |b| are in
    [1, 4): the four partial products are exact 53-bit products of 26/27-bit halves."""
    ah, al = _split(a)
    bh, bl = _split(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(cache=True)
def fold_odd(h, t):
    """Round-to-odd at 53 bits of x = h + t, given h = RN(x) (nonzero, normal) and the exact t.

    x lies strictly between h's neighbours, so RO(x) is h when t == 0 or h is odd, else h's
    neighbour on t's side: bits + 1 when t has h's sign (magnitude grows), bits - 1 otherwise
    (at a power of two, bits - 1 is the predecessor in the binade below, which is odd)."""
    bits = np.float64(h).view(np.uint64)
    if t == 0.0 or (bits & _ONE) != 0:
        return h
    # (Numba accepts .view() only on an explicit np.<dtype>(...) scalar.)
    step = _ONE if (t > 0.0) == (h > 0.0) else _MINUS_ONE
    nbits = bits + step
    return np.uint64(nbits).view(np.float64)


@njit(cache=True)
def frexp1(x):
    """x = f * 2^e exactly with |f| in [1, 2) (x finite, nonzero, any sign); integer bit
    bookkeeping, subnormals lifted first by the exact factor 2^64."""
    raw = np.float64(x).view(np.uint64)
    sub = ((raw >> _U52) & _EXPMASK) == 0
    y = np.float64(x) * _TWO64 if sub else np.float64(x)
    bits = np.float64(y).view(np.uint64)
    E = np.int64((bits >> _U52) & _EXPMASK) - (1023 + 64 if sub else 1023)
    fbits = (bits & _NOT_EXP) | _ONE_BITS
    return np.uint64(fbits).view(np.float64), E


@njit(cache=True)
def _signbit(x):
    return (np.float64(x).view(np.uint64) >> _U63) != 0


@njit(cache=True)
def _nan_result(infnan, flags):
    # A quiet NaN result; "none" formats cannot encode it and raise INVALID (round_value's rule).
    return np.nan, (flags | INVALID) if infnan == 2 else flags


@njit(cache=True)
def _exact_zero_sum(mode):
    # IEEE 754 6.3: an exact zero sum of operands of opposite signs (or of nonzero operands that
    # cancel) is +0 in every rounding direction except roundTowardNegative, where it is -0.
    return (-0.0 if mode == RDN else 0.0), 0


@njit(cache=True)
def _divbyzero_result(neg, infnan, sat, maxval):
    # x / 0 is an exact infinity (IEEE 754 7.3: DIVBYZERO only, no overflow).  Formats without
    # infinity: saturating and "none" formats give +-max, fn formats their NaN.
    if infnan == 0 and sat == 0:
        r = np.inf
    elif infnan == 1 and sat == 0:
        return np.nan, DIVBYZERO
    else:
        r = maxval
    return (-r if neg else r), DIVBYZERO


# ----- add / sub ---------------------------------------------------------------------------------
@njit(cache=True)
def add_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round a + b once; returns (result float64, flag bits)."""
    a = np.float64(a)
    b = np.float64(b)
    s = a + b
    if math.isfinite(s):
        if s == 0.0:
            # fl(a + b) == 0 only when a + b == 0 exactly (float addition never underflows to 0).
            if a == 0.0 and b == 0.0 and _signbit(a) == _signbit(b):
                return a, 0              # (+0) + (+0) = +0, (-0) + (-0) = -0
            return _exact_zero_sum(mode)
        # TwoSum error exact (no overflow).  If s is subnormal, a + b was exact (a sum of
        # multiples of 2^-1074 below 2^-1022 is representable) and t == 0, so fold_odd only ever
        # steps normal numbers.
        t = two_sum_err(a, b, s)
        return round_value(fold_odd(s, t), 0, m, emin, emax, subn, infnan, sat, maxval,
                           mode, u, rbits)
    if math.isnan(a) or math.isnan(b):
        return _nan_result(infnan, 0)
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and _signbit(a) != _signbit(b):
            return _nan_result(infnan, INVALID)           # inf - inf
        r = a if math.isinf(a) else b                     # exact infinite result
        return round_value(r, 0, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)
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
    return round_value(fold_odd(s, t), 1, m, emin, emax, subn, infnan, sat, maxval,
                       mode, u, rbits)


@njit(cache=True)
def sub_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round a - b once (= a + (-b): negation is exact)."""
    return add_scalar(a, -np.float64(b), m, emin, emax, subn, infnan, sat, maxval, mode, u,
                      rbits)


# ----- mul ---------------------------------------------------------------------------------------
@njit(cache=True)
def mul_exact_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round a * b once, for operands whose float64 product is exact: two float32 values have
    24-bit significands (product <= 48 bits <= 53) and |product| in [2^-298, 2^256], well inside
    the normal float64 range.  Only valid under that precondition (the kernels check dtypes)."""
    p = np.float64(a) * np.float64(b)
    if math.isnan(p):
        if math.isnan(a) or math.isnan(b):
            return _nan_result(infnan, 0)
        return _nan_result(infnan, INVALID)               # 0 * inf
    # The float product already has IEEE's sign (xor of signs), also for zeros and infinities.
    return round_value(p, 0, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)


@njit(cache=True)
def mul_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round a * b once for any float64 operands."""
    a = np.float64(a)
    b = np.float64(b)
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0.0 or b == 0.0:
        # Zeros, infinities and NaN: the float64 product is the exact IEEE answer.
        return mul_exact_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)
    fa, ea = frexp1(a)
    fb, eb = frexp1(b)
    # |fa|, |fb| in [1, 2): h = fl(fa * fb) in [1, 4], t exact (Dekker), x = (h + t) 2^(ea+eb).
    h = fa * fb
    t = two_prod_err(fa, fb, h)
    return round_value(fold_odd(h, t), ea + eb, m, emin, emax, subn, infnan, sat, maxval,
                       mode, u, rbits)


# ----- div ---------------------------------------------------------------------------------------
@njit(cache=True)
def div_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round a / b once."""
    a = np.float64(a)
    b = np.float64(b)
    if math.isnan(a) or math.isnan(b):
        return _nan_result(infnan, 0)
    neg = _signbit(a) != _signbit(b)
    if math.isinf(a):
        if math.isinf(b):
            return _nan_result(infnan, INVALID)           # inf / inf
        return round_value(-np.inf if neg else np.inf, 0, m, emin, emax, subn, infnan, sat,
                           maxval, mode, u, rbits)
    if math.isinf(b):
        return (-0.0 if neg else 0.0), 0                  # finite / inf: exact signed zero
    if b == 0.0:
        if a == 0.0:
            return _nan_result(infnan, INVALID)           # 0 / 0
        return _divbyzero_result(neg, infnan, sat, maxval)
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
    return round_value(-v if neg else v, ea - eb, m, emin, emax, subn, infnan, sat, maxval,
                       mode, u, rbits)


# ----- sqrt --------------------------------------------------------------------------------------
@njit(cache=True)
def sqrt_scalar(a, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round sqrt(a) once."""
    a = np.float64(a)
    if math.isnan(a):
        return _nan_result(infnan, 0)
    if a == 0.0:
        return a, 0                                       # sqrt(+-0) = +-0
    if a < 0.0:
        return _nan_result(infnan, INVALID)               # includes -inf
    if math.isinf(a):
        return round_value(a, 0, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)
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
    return round_value(fold_odd(s, r), e // 2, m, emin, emax, subn, infnan, sat, maxval,
                       mode, u, rbits)


# ----- fma: 128-bit integer significands (SoftFloat style) ---------------------------------------
@njit(cache=True)
def _sig53(x):
    """|x| = sig * 2^exp with 2^52 <= sig < 2^53 (x finite nonzero)."""
    f, e = frexp1(abs(x))
    return np.uint64(f * 4503599627370496.0), e - 52      # f * 2^52: exact integer


@njit(cache=True)
def _mul64to128(a, b):
    """Exact (hi, lo) of a * b for a, b < 2^53, from 32-bit halves: a0 b0 < 2^64, the cross
    terms are < 2^53 each (their sum < 2^54 fits), a1 b1 < 2^42."""
    a0 = a & _MASK32
    a1 = a >> _U32
    b0 = b & _MASK32
    b1 = b >> _U32
    p00 = a0 * b0
    mid = a0 * b1 + a1 * b0
    lo = p00 + ((mid & _MASK32) << _U32)
    carry = _ONE if lo < p00 else _ZERO
    hi = a1 * b1 + (mid >> _U32) + carry
    return hi, lo


@njit(cache=True)
def _shl128(hi, lo, n):
    # 0 <= n < 128
    if n == 0:
        return hi, lo
    if n >= 64:
        return lo << np.uint64(n - 64), _ZERO
    return (hi << np.uint64(n)) | (lo >> np.uint64(64 - n)), lo << np.uint64(n)


@njit(cache=True)
def _shr128_jam(hi, lo, n):
    """(hi, lo) >> n with every shifted-out 1 ORed into bit 0 (SoftFloat's shiftRightJam)."""
    if n == 0:
        return hi, lo
    if n >= 128:
        return _ZERO, (_ONE if (hi | lo) != 0 else _ZERO)
    if n >= 64:
        k = n - 64
        lost = lo | (hi & ((_ONE << np.uint64(k)) - _ONE)) if k > 0 else lo
        nlo = hi >> np.uint64(k) if k > 0 else hi
        return _ZERO, nlo | (_ONE if lost != 0 else _ZERO)
    lost = lo & ((_ONE << np.uint64(n)) - _ONE)
    nlo = (lo >> np.uint64(n)) | (hi << np.uint64(64 - n))
    return hi >> np.uint64(n), nlo | (_ONE if lost != 0 else _ZERO)


@njit(cache=True)
def _bitlen64(x):
    """Number of bits of a uint64 (0 for 0), by binary search over the shift."""
    n = 0
    for k in (32, 16, 8, 4, 2, 1):
        if (x >> np.uint64(k)) != 0:
            x >>= np.uint64(k)
            n += k
    return n + (1 if x != 0 else 0)


@njit(cache=True)
def fma_scalar(a, b, c, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits):
    """Round a * b + c once (fused multiply-add)."""
    a = np.float64(a)
    b = np.float64(b)
    c = np.float64(c)
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        # fma(0, inf, NaN): IEEE 754 7.2 leaves INVALID to the implementation; we raise none.
        return _nan_result(infnan, 0)
    pneg = _signbit(a) != _signbit(b)
    if math.isinf(a) or math.isinf(b):
        if a == 0.0 or b == 0.0:
            return _nan_result(infnan, INVALID)           # 0 * inf (+ c)
        if math.isinf(c) and _signbit(c) != pneg:
            return _nan_result(infnan, INVALID)           # inf - inf
        return round_value(-np.inf if pneg else np.inf, 0, m, emin, emax, subn, infnan, sat,
                           maxval, mode, u, rbits)
    if math.isinf(c):
        return round_value(c, 0, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)
    if a == 0.0 or b == 0.0:
        # Exact zero product of sign pneg: the result is (+-0) + c with addition's zero rules.
        return add_scalar(-0.0 if pneg else 0.0, c, m, emin, emax, subn, infnan, sat, maxval,
                          mode, u, rbits)
    if c == 0.0:
        return mul_scalar(a, b, m, emin, emax, subn, infnan, sat, maxval, mode, u, rbits)
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
    cneg = _signbit(c)
    phi, plo = _mul64to128(sa, sb)
    phi, plo = _shl128(phi, plo, 20)
    pexp = ea + eb - 20
    chi, clo = _shl128(_ZERO, sc, 72)
    cexp = ec - 72
    if pexp >= cexp:
        d = pexp - cexp
        chi, clo = _shr128_jam(chi, clo, min(d, 200))
        e0 = pexp
    else:
        d = cexp - pexp
        phi, plo = _shr128_jam(phi, plo, min(d, 200))
        e0 = cexp
    if pneg == cneg:
        shi = phi + chi
        slo = plo + clo
        if slo < plo:
            shi += _ONE                                   # both < 2^126: the sum < 2^127
        neg = pneg
    else:
        if phi > chi or (phi == chi and plo >= clo):
            shi = phi - chi - (_ONE if plo < clo else _ZERO)
            slo = plo - clo
            neg = pneg
        else:
            shi = chi - phi - (_ONE if clo < plo else _ZERO)
            slo = clo - plo
            neg = cneg
        if shi == 0 and slo == 0:
            return _exact_zero_sum(mode)                  # exact cancellation
    # Round to odd at 53 bits: keep the top 53 bits, OR everything below into the last one.
    nbits = _bitlen64(shi) + 64 if shi != 0 else _bitlen64(slo)
    if nbits > 53:
        shi, slo = _shr128_jam(shi, slo, nbits - 53)
        e0 += nbits - 53
    v = np.float64(slo)                                   # < 2^53: exact
    return round_value(-v if neg else v, e0, m, emin, emax, subn, infnan, sat, maxval,
                       mode, u, rbits)
