"""Numba kernels for DFP quantization, rounding right shifts and exact conversions to fp32.

Takes only arrays and integers (see softfloat/dfp/__init__.py for the semantics).  Work on flat
arrays is split into fixed chunks of CHUNK elements processed by ``prange``; each chunk writes its
own row of counts, so results and counts do not depend on the thread count, and stochastic
rounding draws the bits of element i from ``random_bits(key, i)``.

Imports numpy, numba and softfloat.rng only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..rng import random_bits

#: Rounding codes (stable; softfloat/dfp/_tensor.py maps the names onto them).
NEAREST, STOCHASTIC, BIASED, FLOOR = 0, 1, 2, 3

#: Elements per parallel chunk: 2^14, as in softfloat/_kernels_round.py.
CHUNK = 1 << 14

_MASK52 = np.uint64((1 << 52) - 1)
_HIDDEN = np.uint64(1 << 52)
_EXPMASK = np.uint64(0x7FF)
_U52 = np.uint64(52)
_U63 = np.uint64(63)
_ONE = np.int64(1)


def n_chunks(n: int) -> int:
    return (n + CHUNK - 1) // CHUNK


@njit(cache=True)
def sar(x, k):
    """Arithmetic right shift of an int64 by k >= 0 bits: floor(x / 2^k).

    Shifts of 64 or more are undefined in LLVM, so k is capped at 63; for |x| < 2^62 the result
    of any k >= 63 is floor(x / 2^k) = 0 (x >= 0) or -1 (x < 0), which x >> 63 also gives.
    """
    if k > 63:
        k = 63
    return x >> k


@njit(cache=True)
def shift_round(x, s, mode, u, rbits):
    """Round the rational x / 2^s to an integer (x an int64 with |x| < 2^62, s >= 0).

    Every mode is defined on the signed value t = x / 2^s (two's complement hardware view):
      FLOOR      floor(t)                          = x >> s (arithmetic shift: toward -inf)
      BIASED     floor(t + 1/2)                    = (x + 2^(s-1)) >> s (round half UP, +inf)
      NEAREST    nearest, ties to even
      STOCHASTIC floor(t) + 1 when floor(f * 2^r) + (u >> (64 - r)) >= 2^r, f = t - floor(t)
                 in [0, 1), r = rbits: probability f up to the r-bit truncation of f (exact when
                 the remainder has at most r bits, as softfloat.round's stochastic mode).
    """
    if s <= 0:
        return x
    q = sar(x, s)
    if mode == FLOOR:
        return q
    if s >= 63:
        # |t| <= 2^62 / 2^63 = 1/2, and t = -1/2 only for x = -2^62, s = 63.  Nearest gives 0
        # (ties to even 0); biased gives floor(t + 1/2) = 0 for every t in [-1/2, 1/2).
        if mode == NEAREST or mode == BIASED:
            return np.int64(0)
        # stochastic: remainder top r bits, f * 2^r = (x >> (s - r)) mod 2^r (floor division)
        r = np.int64(rbits)
        ftop = sar(x, s - r) & ((_ONE << r) - _ONE)
        ur = np.int64(np.uint64(u) >> np.uint64(64 - r))
        return q + 1 if ftop + ur >= (_ONE << r) else q
    rem = x - (q << s)                    # = x mod 2^s in [0, 2^s): exact, no overflow
    # The decisions below are data dependent (half the time up, half down): written as 0/1
    # integers so LLVM can use set-on-condition instead of mispredicted branches.
    half = _ONE << (s - 1)
    if mode == BIASED:
        return q + np.int64(rem >= half)
    if mode == NEAREST:
        return q + (np.int64(rem > half) | (np.int64(rem == half) & (q & _ONE)))
    # STOCHASTIC
    r = np.int64(rbits)
    if s <= r:
        ftop = rem << (r - s)             # the whole remainder: P(up) = rem / 2^s exactly
    else:
        ftop = rem >> (s - r)             # remainder truncated to its top r bits
    ur = np.int64(np.uint64(u) >> np.uint64(64 - r))
    return q + np.int64(ftop + ur >= (_ONE << r))


@njit(cache=True)
def float_parts(v):
    """(sig, e) with v = sig * 2^e exactly, sig a signed int64 (|sig| < 2^53); v finite."""
    b = np.float64(v).view(np.uint64)
    neg = np.int64(b >> _U63)                        # 1 for negative, else 0
    E = np.int64((b >> _U52) & _EXPMASK)
    frac = b & _MASK52
    if E == 0:
        sig = np.int64(frac)
        e = np.int64(-1074)
    else:
        sig = np.int64(frac | _HIDDEN)
        e = E - 1075
    # branch-free conditional negation (the sign is random data): (sig ^ -neg) + neg
    return (sig ^ -neg) + neg, e


@njit(parallel=True, cache=True)
def quantize_kernel(x, inner, L, nb, N, es, pmax, mode, key, rbits, out, counts):
    """out[f] = round(x[f] / 2^E) clipped to [-pmax, pmax] for flat C-order x.

    x is viewed as (outer, L, inner) with the shared axis in the middle; element f belongs to the
    block (o, (f // inner % L) // N, f % inner) of es, an int64 array of shape (outer, nb, inner)
    flattened.  The block index is computed once per chunk and then stepped (integer divisions
    per element cost more than the rounding).  counts[c] = (saturated, underflowed).
    """
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        t = lo % inner                      # position along the inner axes
        q = lo // inner
        col = q % L                         # position along the shared axis
        o = q // L
        cb = col % N                        # position inside the block
        base = (o * nb + col // N) * inner  # es index of (o, block, 0)
        sat = 0
        und = 0
        for f in range(lo, hi):
            v = np.float64(x[f])
            if v == 0.0:
                out[f] = 0
            else:
                sig, e = float_parts(v)
                s = es[base + t] - e
                if s <= 0:
                    # |v| < 2^(E + P - 1) and |sig| >= 1 bound the left shift by P - 2: exact.
                    i = sig << (-s)
                else:
                    u = random_bits(key, f) if mode == STOCHASTIC else np.uint64(0)
                    i = shift_round(sig, s, mode, u, rbits)
                c_ = min(max(i, -pmax), pmax)
                sat += np.int64(c_ != i)
                und += np.int64(c_ == 0)
                out[f] = c_
            t += 1
            if t == inner:
                t = 0
                col += 1
                cb += 1
                if col == L:
                    col = 0
                    cb = 0
                    o += 1
                    base = o * nb * inner
                elif cb == N:
                    cb = 0
                    base += inner
        counts[c, 0] = sat
        counts[c, 1] = und


@njit(parallel=True, cache=True)
def shift_kernel(x, shifts, pmax, mode, key, rbits, out, counts):
    """out[f] = round(x[f] / 2^shifts[f]) clipped to [-pmax, pmax]; counts[c] = saturated."""
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        sat = 0
        for f in range(lo, hi):
            u = random_bits(key, f) if mode == STOCHASTIC else np.uint64(0)
            i = shift_round(np.int64(x[f]), shifts[f], mode, u, rbits)
            if i > pmax:
                i = pmax
                sat += 1
            elif i < -pmax:
                i = -pmax
                sat += 1
            out[f] = i
        counts[c, 0] = sat


@njit(cache=True)
def pow2(k):
    """Exact 2^k as a float64 for -1022 <= k <= 1023 (built from its bit pattern)."""
    return np.uint64((k + 1023) << 52).view(np.float64)


@njit(cache=True)
def int_times_pow2_to_f32(n, e):
    """fp32(n * 2^e) with ONE round-to-nearest-even, for an int64 n and any int e.

    |n| < 2^53: float64(n) is exact.  Otherwise n is first rounded to odd at 53 bits (truncate the
    magnitude, OR the sticky bit into the last place): a round-to-odd value with p + 2 = 26 or more
    bits rounds to the same fp32 as the exact value (Boldo & Melquiond), whatever the final
    precision (subnormal fp32 has fewer bits, which only widens the margin).  Then with
    1 <= |v| < 2^53 the scaling v * 2^e is exact in float64 for -1022 <= e <= 1023 (the product is
    a normal float64, or overflows to Inf, which fp32 would give too).  For e < -1022 the value is
    below 2^53 * 2^-1023 = 2^-970, far under half the smallest fp32 subnormal (2^-150): the RNE
    result is a zero with the sign of n.  The final float64 -> float32 conversion (cvtsd2ss, no
    fastmath) is the one IEEE RNE rounding.
    """
    if n == 0:
        return np.float32(0.0)
    neg = n < 0
    mag = np.uint64(-n) if neg else np.uint64(n)     # -(-2^63) wraps to -2^63 = 2^63 as uint64
    if mag >= np.uint64(1 << 53):
        bl = 54                                        # bit length of mag: 54..64
        while bl < 64 and (mag >> np.uint64(bl)) != np.uint64(0):
            bl += 1
        k = bl - 53
        low = mag & ((np.uint64(1) << np.uint64(k)) - np.uint64(1))
        mag = (mag >> np.uint64(k)) | (np.uint64(1) if low != np.uint64(0) else np.uint64(0))
        e = e + k
    if e < -1022:
        return np.float32(-0.0) if neg else np.float32(0.0)
    if e > 1023:
        e = 1023                                       # |v| >= 1: +-Inf in fp32 either way
    v = np.float64(mag) * pow2(e)                      # exact (or Inf)
    return np.float32(-v if neg else v)


@njit(parallel=True, cache=True)
def sum_to_f32_kernel(ia, ea, ib, eb, out):
    """out[f] = fp32(ia[f] * 2^ea[f] + ib[f] * 2^eb[f]) with one RNE rounding (|ints| <= 2^31).

    Let hi be the operand with the larger exponent, d the exponent difference (units 2^elo).
    d <= 31: the sum (hi << d) + lo is an exact int64 (|.| <= 2^62 + 2^31 < 2^63).
    d >= 32: count in units 2^(ehi - 30): hi is hi * 2^30 units and lo is lo / 2^(d - 30) units
    with |lo / 2^(d - 30)| <= 2^31 / 4 = 2^29, so the exact sum S has |S| >= 2^30 - 2^29 = 2^29
    units.  T = (hi << 30) + floor(lo / 2^(d - 30)) is an integer with T <= S < T + 1, S = T
    exactly when no bit of lo was dropped.  The fp32 quantum at |S| >= 2^29 units is at least
    2^(29 - 23) = 2^6 units (larger still for subnormal fp32 results), so every RNE decision
    point (representable values and midpoints) is an integer number of units, and the proxy
    T + 1/2 (when bits were dropped; exactly T otherwise) rounds like S.  In half-units the
    proxy is the integer 2T + sticky, |2T + 1| <= 2^62 + 2^30 + 1 < 2^63.
    """
    n = ia.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo_ = c * CHUNK
        hi_ = min(n, lo_ + CHUNK)
        for f in range(lo_, hi_):
            a = np.int64(ia[f])
            b = np.int64(ib[f])
            xa = np.int64(ea[f])
            xb = np.int64(eb[f])
            if a == 0:
                out[f] = int_times_pow2_to_f32(b, xb)
                continue
            if b == 0:
                out[f] = int_times_pow2_to_f32(a, xa)
                continue
            if xa >= xb:
                hi, ehi, lo, elo = a, xa, b, xb
            else:
                hi, ehi, lo, elo = b, xb, a, xa
            d = ehi - elo
            if d <= 31:
                out[f] = int_times_pow2_to_f32((hi << d) + lo, elo)
            else:
                sh = d - 30
                fl = sar(lo, sh)
                if sh >= 62:
                    sticky = 1                       # lo != 0 lies wholly below the unit
                else:
                    sticky = 1 if (lo - (fl << sh)) != 0 else 0
                out[f] = int_times_pow2_to_f32(2 * ((hi << 30) + fl) + sticky, ehi - 31)
