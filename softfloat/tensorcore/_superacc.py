"""The superaccumulator of the exact-alignment models (F = infinity): the ideal "one rounding"
dot products of spec section 3 -- exact for every input -- and custom exact block models.

Provides
    exact_gemm(av, bv, cv, out, K, f, emin, emax, rne)   exact blocks of K, each rounded once
    dot_chain(...)                                       one DOT (spec section 2): chained
                                                         blocks, exact (F < 0) or truncating
                                                         (_scalar.trunc_block), special values
                                                         included
    ideal_dot(...)                                       one exact dot product rounded once
                                                         (the last resort of the ideal models'
                                                         fast path, softfloat/tensorcore/
                                                         _certify.py)

Superaccumulator (exact_block_sum, used by exact_gemm and for the last step of ideal_dot).
Terms (c and the products a_k b_k, each exact in float64) are added into a fixed-point
accumulator of 32-bit limbs held in int64 words (every float64 value is an integer multiple of
2^-1074; limb t holds the bits 32t .. 32t+31 above 2^BASE).  After carry propagation the exact
sum is read back as its round-to-odd 53-bit proxy (the top 53 bits, truncated, with the last
bit set when anything below was non-zero), which ``round_out`` rounds to the accumulator:
rounding RO(x) to p <= 51 bits gives the rounding of x in RNE and RZ (Boldo & Melquiond), also
at the subnormal boundary, where even fewer bits are kept.

Exact long dot products (ideal_dot): AccSum's error-free extraction (Rump, Ogita & Oishi 2008)
splits the products into a few float64 level sums whose sum is exact (see extract_levels);
those few numbers and c then go through the superaccumulator.

The fast path of the ideal models (a float64 matmul, certificates, a compensated Dot2
fallback) lives in _certify.py; whatever it cannot certify comes here.

Imports numpy, numba, softfloat._primitives and the sibling kernels only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._primitives import (F64_EXP_ALL_ONES, F64_FRAC, F64_FRAC_BITS, F64_HIDDEN, F64_SIGN_SHIFT,
                          pow2)
from ._scalar import block_special, round_out, trunc_block

_M32 = np.int64(0xFFFFFFFF)
_TWO32 = np.int64(1 << 32)

#: Exponent of bit 0 of limb 0: -1088 = -1074 - 14 keeps every float64 (multiples of 2^-1074)
#: at a non-negative bit offset; 2^1024 needs offset 2112, plus 53 bits of significand and 32
#: bits of carries from up to 2^31 terms: 2197 bits -> 69 limbs of 32 bits.
BASE = -1088
NLIMBS = 72
#: Room for the level sums of extract_levels: two per level, and a level removes at least
#: 52 - M >= 10 bits (2^M >= k + 2, k < 2^41) of a product range below 2^(256 + 298 + 53).
LEVELS = 2 * (610 // 10 + 2)


@njit(cache=True, error_model="numpy")
def _add_term(limbs, x):
    """limbs += x exactly, for a finite non-zero normal float64 x; returns the limb index of
    the term's lowest limb (for the caller's range tracking)."""
    b = np.float64(x).view(np.uint64)
    neg = (b >> F64_SIGN_SHIFT) != 0
    ef = np.int64((b >> F64_FRAC_BITS) & F64_EXP_ALL_ONES)
    # x = M * 2^(ef - 1075) with M the 53-bit significand (hidden bit set for normal x).
    M = np.int64((b & F64_FRAC) | F64_HIDDEN) if ef > 0 else np.int64(b & F64_FRAC)
    e = (ef - 1075) if ef > 0 else -1074
    off = e - BASE
    li = off // 32
    sh = off - li * 32
    # M << sh spans up to 85 bits: split it into three 32-bit pieces without overflowing.
    p0 = (M & ((np.int64(1) << (32 - sh)) - 1)) << sh
    rest = M >> (32 - sh)
    p1 = rest & _M32
    p2 = rest >> 32
    if neg:
        limbs[li] -= p0
        limbs[li + 1] -= p1
        limbs[li + 2] -= p2
    else:
        limbs[li] += p0
        limbs[li + 1] += p1
        limbs[li + 2] += p2
    return li


@njit(cache=True, error_model="numpy")
def _normalise(limbs, lo, hi):
    """Propagate carries over limbs lo..hi (and above); every limb ends in [0, 2^32).
    Returns the final carry out of the top limb (0, or -1 for a negative sum)."""
    carry = np.int64(0)
    for t in range(lo, NLIMBS):
        v = limbs[t] + carry
        low = v & _M32                       # in [0, 2^32): two's complement low bits
        carry = (v - low) // _TWO32          # exact: v - low is a multiple of 2^32
        limbs[t] = low
        if t >= hi and carry == 0:
            break
    return carry


@njit(cache=True, error_model="numpy")
def _read_rto(limbs, lo):
    """The exact non-negative sum in limbs (normalised) as a float64 rounded to odd at 53 bits
    (0.0 when the sum is 0)."""
    top = -1
    for t in range(NLIMBS - 1, lo - 1, -1):
        if limbs[t] != 0:
            top = t
            break
    if top < 0:
        return 0.0
    v = limbs[top]
    bl = 0
    while v > 0:
        v >>= 1
        bl += 1
    msb = 32 * top + bl - 1                   # bit index of the leading one
    sh = msb - 52                             # bit index of the proxy's last place
    # Every term is >= 2^-298 (products of float32-carrier values) or a float32 c, so msb is far
    # above bit 52 and sh > 0; the clamp only keeps the indices in range.
    sh = max(sh, 0)
    li = sh // 32
    sb = sh - li * 32
    # sig = bits sh .. sh+52 of the sum, gathered from limbs li, li+1, li+2.
    sig = limbs[li] >> sb
    if li + 1 < NLIMBS:
        sig |= limbs[li + 1] << (32 - sb)
    if li + 2 < NLIMBS and 64 - sb < 63:
        sig |= limbs[li + 2] << (64 - sb)
    sig &= np.int64((1 << 53) - 1)
    sticky = (limbs[li] & ((np.int64(1) << sb) - 1)) != 0
    for t in range(lo, li):
        if limbs[t] != 0:
            sticky = True
            break
    if sticky:
        sig |= 1                              # round to odd
    return np.float64(sig) * pow2(sh + BASE)


@njit(cache=True, error_model="numpy")
def _add(limbs, x, lo, hi):
    """limbs += x exactly (nothing for x = 0); returns the updated range lo..hi of the limbs
    touched."""
    if x == 0.0:
        return lo, hi
    li = _add_term(limbs, x)
    return min(lo, li), max(hi, li + 2)


@njit(cache=True, error_model="numpy")
def exact_block_sum(limbs, av, bv, k0, k1, c):
    """RO53(c + sum_{k0 <= k < k1} a_k b_k) for finite inputs (+0.0 for an exact zero)."""
    lo, hi = _add(limbs, c, NLIMBS, 0)
    for kk in range(k0, k1):
        # (exact: <= 52 bits, in range)
        lo, hi = _add(limbs, np.float64(av[kk]) * np.float64(bv[kk]), lo, hi)
    return _finish_sum(limbs, lo, hi)


@njit(cache=True, error_model="numpy")
def _finish_sum(limbs, lo, hi):
    """RO53 of the signed sum held in limbs lo..hi (+0.0 when it is exactly 0); clears the
    limbs for the next use."""
    if lo == NLIMBS:
        return 0.0
    carry = _normalise(limbs, lo, hi)
    neg = carry < 0
    if neg:
        # Negative sum: negate every limb and normalise again to get the magnitude.
        for t in range(lo, NLIMBS):
            limbs[t] = -limbs[t]
        _normalise(limbs, lo, NLIMBS - 1)
    r = _read_rto(limbs, lo)
    for t in range(lo, NLIMBS):
        limbs[t] = 0
    return -r if neg else r


@njit(cache=True, error_model="numpy")
def dot_chain(limbs, av, ea, bv, eb, c, K, F, f, emin, emax, rne):
    """DOT of spec section 2 for one output element, special values included: chained
    BLOCK_STEPs over blocks of K in ascending k (a short last block is the zero-padded one),
    each rounded once (round_out).  F >= 0: the truncating blocks of the hardware models
    (_scalar.trunc_block; ea, eb the alignment exponents of av, bv); F < 0: exact blocks (the
    superaccumulator; ea, eb unused)."""
    qscale = pow2(-f)
    qmin = pow2(emin - f)
    lim = pow2(emax + 1)
    n = av.shape[0]
    acc = np.float64(c)
    for k0 in range(0, n, K):
        k1 = min(n, k0 + K)
        r, sp = block_special(acc, av, bv, k0, k1)
        if sp:
            acc = r
            continue
        if F >= 0:
            x = trunc_block(acc, av, ea, bv, eb, k0, k1, F, emin)
        else:
            x = exact_block_sum(limbs, av, bv, k0, k1, acc)
        acc = round_out(x, qscale, qmin, lim, rne)
    return acc


@njit(cache=True, error_model="numpy")
def extract_levels(av, bv, rem, lev):
    """Exact sum of the products a_k b_k as a few float64 level sums (AccSum's extraction,
    Rump, Ogita & Oishi 2008, Lemma 3.3): with sigma = 2^M 2^ceil(log2 max|x|), 2^M >= n + 2,
    q_k = fl(fl(sigma + x_k) - sigma) and x_k - q_k are exact, and the q_k sum exactly in
    float64 in any order (they are multiples of u sigma and their sum stays below sigma).  The
    remainders, below u sigma, go to the next level.  Products lie in [2^-298, 2^256], so
    sigma u stays far above float64's subnormal range.  Returns the number of levels written
    to lev (their exact sum is the exact sum of the products)."""
    n = av.shape[0]
    mx = 0.0
    for t in range(n):
        x = np.float64(av[t]) * np.float64(bv[t])      # exact
        rem[t] = x
        mx = max(mx, abs(x))
    M = 1
    while (1 << M) < n + 2:
        M += 1
    nl = 0
    while mx > 0.0:
        # sigma = 2^(M + floor(log2 mx) + 1) >= 2^M mx.
        e = np.int64(np.float64(mx).view(np.uint64) >> F64_FRAC_BITS) - 1023
        sigma = pow2(e + 1 + M)
        s0 = 0.0
        s1 = 0.0
        nmx = 0.0
        for t in range(n):
            x = rem[t]
            q = (sigma + x) - sigma
            r = x - q
            rem[t] = r
            if t & 1:
                s1 += q
            else:
                s0 += q
            nmx = max(nmx, abs(r))
        lev[nl] = s0
        lev[nl + 1] = s1
        nl += 2
        mx = nmx
    return nl


@njit(cache=True, error_model="numpy")
def ideal_dot(limbs, rem, lev, av, bv, c, f, emin, emax, rne):
    """One rounding of c + sum a_k b_k (the ideal models), special values included."""
    acc = np.float64(c)
    n = av.shape[0]
    r, sp = block_special(acc, av, bv, 0, n)
    if sp:
        return r
    nl = extract_levels(av, bv, rem, lev)
    lo, hi = _add(limbs, acc, NLIMBS, 0)
    for t in range(nl):
        lo, hi = _add(limbs, lev[t], lo, hi)
    x = _finish_sum(limbs, lo, hi)
    return round_out(x, pow2(-f), pow2(emin - f), pow2(emax + 1), rne)


@njit(parallel=True, cache=True, error_model="numpy")
def exact_gemm(av, bv, cv, out, K, f, emin, emax, rne):
    """out[i, j] = DOT(A[i, :], B[:, j], C[i, j]) with exact blocks of K (dot_chain, F < 0);
    av, bv, cv, out float64."""
    m = av.shape[0]
    n = bv.shape[1]
    none = np.empty(0, np.float32)
    for i in prange(m):
        limbs = np.zeros(NLIMBS, np.int64)
        for j in range(n):
            out[i, j] = dot_chain(limbs, av[i], none, bv[:, j], none, cv[i, j], K, -1, f, emin,
                                  emax, rne)
