"""The exact toolkit: the bit constants of the carriers and the error-free building blocks that
every kernel of softfloat uses (SoftFloat's "primitives").

Named once, here:

* float64 fields: ``F64_SIGN`` (bit 63), ``F64_ABS`` (the 63 magnitude bits), ``F64_EXP_FIELD``
  (0x7FF << 52, the exponent field in place), ``F64_EXP_ALL_ONES`` (0x7FF, the biased exponent of
  Inf/NaN once shifted down by ``F64_FRAC_BITS`` = 52), ``F64_FRAC`` ((1 << 52) - 1),
  ``F64_HIDDEN`` (1 << 52, the implicit bit), ``F64_BIAS`` (1023), ``F64_ONE`` (the pattern of
  1.0: 1023 << 52);
* float32 fields: ``F32_SIGN``, ``F32_ABS`` (0x7FFFFFFF), ``F32_INF`` (0x7F800000, also the
  exponent field in place), ``F32_QNAN`` (0x7FC00000, the quiet NaN numpy produces),
  ``F32_QUIET`` / ``F64_QUIET`` (the quiet bit, the top fraction bit),
  ``F32_FRAC`` (0x007FFFFF), ``F32_HIDDEN`` (0x00800000);

as numpy scalars of the width the kernels compute in (uint64 / uint32), so that Numba keeps
them as typed constants.

Error-free transformations and integer helpers (all exact, each with its precondition):
``pow2``, ``bit_length`` (q < 2^53), ``bit_length64`` (any uint64), ``signbit``, ``frexp1``,
``two_sum_err`` (Knuth), ``split`` / ``two_prod_err`` (Veltkamp / Dekker), ``fold_odd`` and the
branch-free ``fold_odd_nb`` (round to odd at 53 bits from an RN result and its exact error),
``mul64to128``, ``shl128``, ``shr128_jam`` (SoftFloat's shiftRightJam on 128 bits).

Imports numpy and numba only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ----- float64 fields ---------------------------------------------------------------------------
F64_FRAC_BITS = np.uint64(52)
F64_SIGN_SHIFT = np.uint64(63)
F64_SIGN = np.uint64(1 << 63)
F64_ABS = np.uint64((1 << 63) - 1)
F64_EXP_FIELD = np.uint64(0x7FF << 52)
F64_EXP_ALL_ONES = np.uint64(0x7FF)
F64_FRAC = np.uint64((1 << 52) - 1)
F64_HIDDEN = np.uint64(1 << 52)
F64_BIAS = 1023
F64_ONE = np.uint64(1023 << 52)
#: The quiet bit of a NaN: the top fraction bit (IEEE 754 section 6.2.1).
F64_QUIET = np.uint64(1 << 51)
#: The sign and fraction bits (everything but the exponent field).
F64_NOT_EXP = np.uint64(~(0x7FF << 52) & ((1 << 64) - 1))

# ----- float32 fields ---------------------------------------------------------------------------
F32_SIGN = np.uint32(1 << 31)
F32_ABS = np.uint32(0x7FFFFFFF)
F32_INF = np.uint32(0x7F800000)
F32_QNAN = np.uint32(0x7FC00000)
F32_QUIET = np.uint32(0x00400000)
F32_FRAC = np.uint32(0x007FFFFF)
F32_HIDDEN = np.uint32(0x00800000)

# ----- small integer constants (typed, so that mixing never promotes to float64) ---------------
U64_0 = np.uint64(0)
U64_1 = np.uint64(1)
U64_32 = np.uint64(32)
U64_64 = np.uint64(64)
U64_MASK32 = np.uint64(0xFFFFFFFF)
#: Adding it subtracts 1 modulo 2^64.
U64_MINUS_1 = np.uint64((1 << 64) - 1)

# 2^27 + 1: Veltkamp's constant, splitting a 53-bit float into a 26-bit and a 27-bit part.
_SPLITTER = 134217729.0
# 2^64: multiplying by it lifts any float64 subnormal (>= 2^-1074) into the normal range exactly.
_TWO64 = 18446744073709551616.0


@njit(cache=True)
def pow2(k):
    """Exact 2^k as a float64 for -1074 <= k <= 1023, built from its bit pattern: the biased
    exponent k + 1023 for normals (k >= -1022), the fraction bit k + 1074 for subnormals."""
    if k >= -1022:
        return np.uint64((k + 1023) << 52).view(np.float64)
    return np.uint64(1 << (k + 1074)).view(np.float64)


@njit(cache=True)
def bit_length(q):
    """Number of bits of a uint64 below 2^53 (0 for 0), from the biased exponent of its exact
    float64 conversion: 2^(L-1) <= q < 2^L has biased exponent (L - 1) + 1023, so L = E - 1022."""
    if q == 0:
        return 0
    return np.int64((np.float64(q).view(np.uint64) >> F64_FRAC_BITS) & F64_EXP_ALL_ONES) - 1022


@njit(cache=True)
def bit_length64(x):
    """Number of bits of any uint64 (0 for 0), by binary search over the shift."""
    n = 0
    for k in (32, 16, 8, 4, 2, 1):
        if (x >> np.uint64(k)) != 0:
            x >>= np.uint64(k)
            n += k
    return n + (1 if x != 0 else 0)


@njit(cache=True)
def signbit(x):
    """True for a negative float64 (-0.0 and NaNs with the sign bit included)."""
    return (np.float64(x).view(np.uint64) >> F64_SIGN_SHIFT) != 0


@njit(cache=True)
def frexp1(x):
    """x = f * 2^e exactly with |f| in [1, 2) (x finite, nonzero, any sign); integer bit
    bookkeeping, subnormals lifted first by the exact factor 2^64."""
    raw = np.float64(x).view(np.uint64)
    sub = ((raw >> F64_FRAC_BITS) & F64_EXP_ALL_ONES) == 0
    y = np.float64(x) * _TWO64 if sub else np.float64(x)
    bits = np.float64(y).view(np.uint64)
    E = np.int64((bits >> F64_FRAC_BITS) & F64_EXP_ALL_ONES) - (1023 + 64 if sub else 1023)
    fbits = (bits & F64_NOT_EXP) | F64_ONE
    return np.uint64(fbits).view(np.float64), E


@njit(cache=True)
def two_sum_err(a, b, s):
    """Knuth's TwoSum: for s = fl(a + b), the exact error a + b - s (exact unless a + b
    overflows).  TwoSum needs no |a| >= |b| ordering and stays exact under gradual underflow."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


@njit(cache=True)
def split(x):
    """Veltkamp: (hi, lo) with hi the top 26 bits of x and lo = x - hi the remaining 27 (signed);
    exact for |x| < 2^996 (no overflow in 2^27 * x)."""
    c = _SPLITTER * x
    hi = c - (c - x)
    return hi, x - hi


@njit(cache=True)
def two_prod_err(a, b, p):
    """Dekker's TwoProduct: for p = fl(a * b), the exact error a * b - p.  Exact when nothing
    overflows and the error is not below 2^-1074 (callers keep |a|, |b| in [1, 4): the four
    partial products are then exact 53-bit products of 26/27-bit halves)."""
    ah, al = split(a)
    bh, bl = split(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(cache=True)
def fold_odd(h, t):
    """Round-to-odd at 53 bits of x = h + t, given h = RN(x) (nonzero, normal) and the exact t.

    x lies strictly between h's neighbours, so RO(x) is h when t == 0 or h is odd, else h's
    neighbour on t's side: bits + 1 when t has h's sign (magnitude grows), bits - 1 otherwise
    (at a power of two, bits - 1 is the predecessor in the binade below, which is odd)."""
    bits = np.float64(h).view(np.uint64)
    if t == 0.0 or (bits & U64_1) != 0:
        return h
    step = U64_1 if (t > 0.0) == (h > 0.0) else U64_MINUS_1
    return np.uint64(bits + step).view(np.float64)


@njit(cache=True)
def fold_odd_nb(s, t):
    """fold_odd without branches (both candidates computed, one selected), so that loops
    calling it vectorise; same result as fold_odd for the same preconditions."""
    bits = np.float64(s).view(np.uint64)
    need = (t != 0.0) & ((bits & U64_1) == 0)
    step = U64_1 if (t > 0.0) == (s > 0.0) else U64_MINUS_1
    return np.uint64(bits + (step if need else U64_0)).view(np.float64)


@njit(cache=True)
def mul64to128(a, b):
    """Exact (hi, lo) of a * b for a, b < 2^53, from 32-bit halves: a0 b0 < 2^64, the cross
    terms are < 2^53 each (their sum < 2^54 fits), a1 b1 < 2^42."""
    a0 = a & U64_MASK32
    a1 = a >> U64_32
    b0 = b & U64_MASK32
    b1 = b >> U64_32
    p00 = a0 * b0
    mid = a0 * b1 + a1 * b0
    lo = p00 + ((mid & U64_MASK32) << U64_32)
    carry = U64_1 if lo < p00 else U64_0
    hi = a1 * b1 + (mid >> U64_32) + carry
    return hi, lo


@njit(cache=True)
def shl128(hi, lo, n):
    """(hi, lo) << n for 0 <= n < 128 (bits shifted out of hi are lost)."""
    if n == 0:
        return hi, lo
    if n >= 64:
        return lo << np.uint64(n - 64), U64_0
    return (hi << np.uint64(n)) | (lo >> np.uint64(64 - n)), lo << np.uint64(n)


@njit(cache=True)
def shr128_jam(hi, lo, n):
    """(hi, lo) >> n with every shifted-out 1 ORed into bit 0 (SoftFloat's shiftRightJam)."""
    if n == 0:
        return hi, lo
    if n >= 128:
        return U64_0, (U64_1 if (hi | lo) != 0 else U64_0)
    if n >= 64:
        k = n - 64
        lost = lo | (hi & ((U64_1 << np.uint64(k)) - U64_1)) if k > 0 else lo
        nlo = hi >> np.uint64(k) if k > 0 else hi
        return U64_0, nlo | (U64_1 if lost != 0 else U64_0)
    lost = lo & ((U64_1 << np.uint64(n)) - U64_1)
    nlo = (lo >> np.uint64(n)) | (hi << np.uint64(64 - n))
    return hi >> np.uint64(n), nlo | (U64_1 if lost != 0 else U64_0)
