"""Numba kernels for the exact-alignment models (F = infinity): the ideal "one rounding" dot
products of spec section 3 -- exact for every input -- and custom exact block models.

Provides
    exact_gemm(av, bv, cv, out, K, f, emin, emax, rne)   exact blocks of K, each rounded once
    ideal_certify(s0, cv, has_c, ra, aexp, rb, bexp, shift, k, out, bad, left, ...)
                                                         fast path of ideal-fp32 / ideal-fp16
    ideal_fix_rows(av, bt, colmap, cv, has_c, out, bad, rows, ...)
                                                         exact fallback for what it leaves

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

Fast path of the ideal models (K = F = infinity, one rounding).  numpy's float64 matmul gives
s0 = fl(sum a_k b_k).  Every product is exact in float64 (<= 48 significant bits, in
[2^-298, 2^256]), and no partial sum can overflow or reach float64's subnormal range, so:
(1) Exactness certificate: every non-zero input x of a format with m fraction bits is a
    multiple of 2^(E - m), E = max(floor(log2|x|), emin); a product is a multiple of 2^L,
    L >= Emin_row(A) + Emin_col(B) - 2m.  If sum |a_k b_k| <= sqrt(sum a^2) sqrt(sum b^2)
    (Cauchy-Schwarz) stays below 2^(L + 52), every partial sum of ANY order of summation (the
    BLAS blocking, FMA) is a multiple of 2^L below 2^(L + 53): representable, so s0 is exact.
    (The factor 2 below 2^(L+53) covers the roundings of the computed sums of squares.)  c is
    then added exactly as TwoSum + round to odd.  Typical fp16/bf16/fp8 data: most elements.
(2) Interval certificate: whatever the order of the additions, |s0 - sum| <= gamma_(k-1)
    sum |a_k b_k| (Higham, Accuracy and Stability, 3.1; gamma_n = n u / (1 - n u),
    u = 2^-53); adding c costs one more rounding.  With a factor 2 for the roundings of the
    bound, E = (|c| + bound) (k + 4) 2^-52 >= |S - x| for S = fl(s0 + c) and x the exact
    c + sum.  If both ends of [S - E, S + E] (pushed one float64 ulp outward) round to the
    same accumulator value and the bracket excludes 0 (the sign of a zero result depends on
    exactness), every real number in it does, x included (rounding is monotone).
The elements neither certifies (near ties: a few hundred per million for random fp16 data; all
of them for adversarial cancellation) go to ideal_fix_rows, which is exact.  numpy's matmul is
only trusted to perform IEEE float64 additions and multiplications in some order (true of
OpenBLAS, MKL and Accelerate; no Strassen-like algorithm).

Imports numpy, numba and the sibling kernels only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._roundpack import pow2
from ._kernels import _block_special, _round_rne, _round_rz, round_out

_M32 = np.int64(0xFFFFFFFF)
_TWO32 = np.int64(1 << 32)
_U52 = np.uint64(52)
_MASK52 = np.uint64((1 << 52) - 1)
_HIDDEN = np.uint64(1 << 52)

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
    neg = (b >> np.uint64(63)) != 0
    ef = np.int64((b >> _U52) & np.uint64(0x7FF))
    # x = M * 2^(ef - 1075) with M the 53-bit significand (hidden bit set for normal x).
    M = np.int64((b & _MASK52) | _HIDDEN) if ef > 0 else np.int64(b & _MASK52)
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
def exact_block_sum(limbs, av, bv, k0, k1, c):
    """RO53(c + sum_{k0 <= k < k1} a_k b_k) for finite inputs (+0.0 for an exact zero)."""
    lo = NLIMBS
    hi = 0
    if c != 0.0:
        li = _add_term(limbs, c)
        lo = min(lo, li)
        hi = max(hi, li + 2)
    for kk in range(k0, k1):
        p = np.float64(av[kk]) * np.float64(bv[kk])    # exact: <= 52 bits, in range
        if p != 0.0:
            li = _add_term(limbs, p)
            lo = min(lo, li)
            hi = max(hi, li + 2)
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
def exact_dot(limbs, av, bv, c, K, f, emin, emax, rne):
    """DOT with exact alignment: blocks of K (K >= len: one block), each rounded once."""
    qscale = pow2(-f)
    qmin = pow2(emin - f)
    lim = pow2(emax + 1)
    n = av.shape[0]
    acc = np.float64(c)
    for k0 in range(0, n, K):
        k1 = min(n, k0 + K)
        r, sp = _block_special(acc, av, bv, k0, k1)
        if sp:
            acc = r
            continue
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
        e = np.int64(np.float64(mx).view(np.uint64) >> _U52) - 1023
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
    r, sp = _block_special(acc, av, bv, 0, n)
    if sp:
        return r
    nl = extract_levels(av, bv, rem, lev)
    lo = NLIMBS
    hi = 0
    if acc != 0.0:
        li = _add_term(limbs, acc)
        lo = min(lo, li)
        hi = max(hi, li + 2)
    for t in range(nl):
        if lev[t] != 0.0:
            li = _add_term(limbs, lev[t])
            lo = min(lo, li)
            hi = max(hi, li + 2)
    x = _finish_sum(limbs, lo, hi)
    return round_out(x, pow2(-f), pow2(emin - f), pow2(emax + 1), rne)


@njit(parallel=True, cache=True, error_model="numpy")
def exact_gemm(av, bv, cv, out, K, f, emin, emax, rne):
    """out[i, j] = exact_dot(A[i, :], B[:, j], C[i, j]); av, bv, cv, out float64."""
    m = av.shape[0]
    n = bv.shape[1]
    for i in prange(m):
        limbs = np.zeros(NLIMBS, np.int64)
        for j in range(n):
            out[i, j] = exact_dot(limbs, av[i], bv[:, j], cv[i, j], K, f, emin, emax, rne)


@njit(cache=True, error_model="numpy")
def _fold_odd(s, t):
    """RO53(s + t) for s = fl(s + t) non-zero finite and t its exact error (branch-free):
    s itself when t = 0 or s is odd, else s's neighbour on t's side."""
    b = np.float64(s).view(np.uint64)
    even = (b & np.uint64(1)) == 0
    away = (t > 0.0) == (s > 0.0)
    nb = b + np.uint64(1) if away else b - np.uint64(1)
    return np.uint64(nb if (even and t != 0.0) else b).view(np.float64)


@njit(cache=True, error_model="numpy")
def _exact_thresholds(ra_i, aexp_i, rb, bexp, shift, j):
    """(bound of sum_k |a_k b_k|, 2^(L + 52)) for element j of a row (see _certify_row)."""
    e = min(max(aexp_i + bexp[j] + shift, -1022), 1024)
    thr = np.int64((e + 1023) << 52).view(np.float64) if e < 1024 else np.inf
    return ra_i * rb[j], thr


# (1) Exactness, one row at a time.  Every non-zero input x is a multiple of its quantum
# 2^(E - m), E = max(floor(log2|x|), emin), so every product is a multiple of 2^L with
# L >= aexp_i + bexp_j - 2m.  With sum |a_k b_k| <= bnd = sqrt(sum a^2) sqrt(sum b^2)
# (Cauchy-Schwarz) below 2^(L + 52) (shift = 52 - 2m; the factor 2 below 2^(L+53) covers the
# roundings of the sums), every partial sum of ANY summation order is a multiple of 2^L below
# 2^(L+53): exact.  So s0 is the exact sum of the products (and c is added with TwoSum +
# round-to-odd).  One function per case, without run-time flags, so that LLVM vectorises the
# loops.

@njit(cache=True, error_model="numpy")
def _bracket(s, c, bnd, g):
    """The ends of [s - E, s + E], E = (|c| + bnd) g, pushed one float64 ulp outward (the
    subtraction and addition may round inward), and whether the bracket excludes 0."""
    err = (abs(c) + bnd) * g
    lo = s - err
    hi = s + err
    pos = lo > 0.0
    blo = np.float64(lo).view(np.int64)
    bhi = np.float64(hi).view(np.int64)
    # For positive numbers the next float down has bits - 1; for negative ones bits + 1.
    lo2 = np.int64(blo - 1 if pos else blo + 1).view(np.float64)
    hi2 = np.int64(bhi + 1 if pos else bhi - 1).view(np.float64)
    return lo2, hi2, pos | (hi < 0.0)


@njit(cache=True, error_model="numpy")
def _exact_row_rne(s0r, ra_i, aexp_i, rb, bexp, shift, g, outr, badr, qscale, qmin, lim):
    for j in range(s0r.shape[0]):
        x0 = s0r[j]
        bnd, thr = _exact_thresholds(ra_i, aexp_i, rb, bexp, shift, j)
        r = _round_rne(x0, qscale, qmin, lim)
        lo, hi, sided = _bracket(x0, 0.0, bnd, g)
        rlo = _round_rne(lo, qscale, qmin, lim)
        rhi = _round_rne(hi, qscale, qmin, lim)
        exact = bnd < thr
        ok = (exact | (sided & (rlo == rhi) & (abs(hi) < np.inf))) & (abs(x0) < np.inf)
        r = (0.0 if x0 == 0.0 else r) if exact else rlo    # an exact zero sum is +0
        outr[j] = r
        badr[j] = np.uint8(0 if ok else 1)


@njit(cache=True, error_model="numpy")
def _exact_row_rz(s0r, ra_i, aexp_i, rb, bexp, shift, g, outr, badr, qscale, qmin, lim):
    for j in range(s0r.shape[0]):
        x0 = s0r[j]
        bnd, thr = _exact_thresholds(ra_i, aexp_i, rb, bexp, shift, j)
        r = _round_rz(x0, qscale, qmin, lim)
        lo, hi, sided = _bracket(x0, 0.0, bnd, g)
        rlo = _round_rz(lo, qscale, qmin, lim)
        rhi = _round_rz(hi, qscale, qmin, lim)
        exact = bnd < thr
        ok = (exact | (sided & (rlo == rhi) & (abs(hi) < np.inf))) & (abs(x0) < np.inf)
        r = (0.0 if x0 == 0.0 else r) if exact else rlo
        outr[j] = r
        badr[j] = np.uint8(0 if ok else 1)


@njit(cache=True, error_model="numpy")
def _exact_row_c(s0r, cr, ra_i, aexp_i, rb, bexp, shift, g, outr, badr, qscale, qmin, lim,
                 rne):
    for j in range(s0r.shape[0]):
        c = cr[j]
        x0 = s0r[j]
        bnd, thr = _exact_thresholds(ra_i, aexp_i, rb, bexp, shift, j)
        s = x0 + c
        t = (x0 - (s - (s - x0))) + (c - (s - x0))      # TwoSum: x0 + c = s + t exactly
        v = _fold_odd(s, t) if s != 0.0 else 0.0
        r = round_out(v, qscale, qmin, lim, rne)
        lo, hi, sided = _bracket(s, c, bnd, g)
        rlo = round_out(lo, qscale, qmin, lim, rne)
        rhi = round_out(hi, qscale, qmin, lim, rne)
        exact = bnd < thr
        ok = ((exact | (sided & (rlo == rhi) & (abs(hi) < np.inf)))
              & (abs(s) < np.inf) & (abs(c) < np.inf))
        outr[j] = r if exact else rlo
        badr[j] = np.uint8(0 if ok else 1)


@njit(cache=True, error_model="numpy")
def _count(badr):
    left = 0
    for j in range(badr.shape[0]):
        left += np.int64(badr[j])
    return left


@njit(parallel=True, cache=True, error_model="numpy")
def ideal_certify(s0, cv, has_c, ra, aexp, rb, bexp, shift, k, out, bad, left, f, emin, emax,
                  rne):
    """Fast path of the ideal models (see the module docstring).

    s0: fl(A @ B) from numpy's float64 matmul; cv: C (ignored unless has_c); ra / rb:
    sqrt(sum x^2) of each row of A / column of B; aexp / bexp: their smallest exponents;
    shift = 52 - 2 m for inputs with m fraction bits.  Writes out[i, j] (float32) where a
    certificate holds, bad[i, j] = 1 where none does and left[i] = the count of row i (those
    elements go to the exact kernel).
    """
    m, n = s0.shape
    qscale = pow2(-f)
    qmin = pow2(emin - f)
    lim = pow2(emax + 1)
    # 2 (k + 4) u with u = 2^-53 (the factor 2 covers the roundings of the bound).
    g = np.float64(k + 4) * pow2(-52)
    for i in prange(m):
        outr = np.empty(n)
        ci = np.int64(i) if has_c else np.int64(0)
        if has_c:
            _exact_row_c(s0[i], cv[ci], ra[i], aexp[i], rb, bexp, shift, g, outr, bad[i],
                         qscale, qmin, lim, rne)
        elif rne:
            _exact_row_rne(s0[i], ra[i], aexp[i], rb, bexp, shift, g, outr, bad[i], qscale,
                           qmin, lim)
        else:
            _exact_row_rz(s0[i], ra[i], aexp[i], rb, bexp, shift, g, outr, bad[i], qscale,
                          qmin, lim)
        left[i] = _count(bad[i])
        for j in range(n):
            out[i, j] = outr[j]


@njit(parallel=True, cache=True, error_model="numpy")
def ideal_fix_rows(av, bt, colmap, cv, has_c, out, bad, rows, f, emin, emax, rne):
    """out[i, j] = ideal_dot(...) where bad[i, j], for the rows listed; column j of B is the
    contiguous row bt[colmap[j]] (the caller gathers the columns needed)."""
    k = av.shape[1]
    n = colmap.shape[0]
    for t in prange(rows.shape[0]):
        i = rows[t]
        limbs = np.zeros(NLIMBS, np.int64)
        rem = np.empty(max(k, 1))
        lev = np.empty(LEVELS)
        ci = np.int64(i) if has_c else np.int64(0)
        for j in range(n):
            if bad[i, j]:
                c = cv[ci, j] if has_c else 0.0
                out[i, j] = ideal_dot(limbs, rem, lev, av[i], bt[colmap[j]], c, f, emin, emax,
                                      rne)
