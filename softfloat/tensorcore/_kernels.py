"""Numba kernels of the truncating block-FMA models (spec section 2, finite K and F).

Provides ``hw_gemm`` (the fast kernel, exact for every output element whose row of A, column of
B and C entry are finite), ``hw_fix_elements`` (the scalar kernel, special values included, run
afterwards on the listed elements), ``hw_dot`` (one DOT), ``split_exponents`` (the operand
encoding both use) and the shared helpers ``round_out`` and ``acc_exponent``.  Kernels take
only arrays and plain numbers.

Operand encoding.  Each input x is carried twice: its value (float64 for A, float32 for B; every
input format fits a float32 exactly) and its alignment exponent E = max(floor(log2 |x|), emin)
as a float32 holding a small integer (spec step 2: subnormals take emin), with ZERO_EXP = -4000
for zeros, so that a zero product never raises E_max: a sum with a ZERO_EXP term is at most
-4000 + 127 (exact in float32), far below every real alignment exponent (>= 2 * -126).

Why float64 and not int64 lanes: every quantity of BLOCK_STEP is an integer times a power of two
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

Imports numpy, numba and softfloat._roundpack only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._roundpack import pow2

_EXPMASK = np.uint64(0x7FF0000000000000)
_S52 = np.uint64(52)
#: 2046 << 52: the bits of 2^e and of 2^-e add up to it (biased exponents e+1023 and 1023-e),
#: so 1/q = that minus q's bits for a normal power of two q.
_INV_BITS = np.uint64(2046 << 52)

#: Alignment exponent recorded for a zero input (see the module docstring).
ZERO_EXP = -4000.0
#: Clamp of E_max from below when a block has no non-zero term at all: 2^(F+900) and
#: 2^(-900-F) stay finite, the block sum is +0 and rounds to +0.
EMAX_CLAMP = -900

#: Rows of A per parallel chunk and columns per tile: the tile of B (k x TILE_J values and
#: exponents, float32: 1 MiB for k = 1024) stays in a core's L2 cache while the chunk's rows
#: pass over it.
ROWS_PER_CHUNK = 16
TILE_J = 512


@njit(cache=True, error_model="numpy")
def pow2_floor(x):
    """2^floor(log2 |x|) for a normal float64 x (0 for x = 0): the bits with the sign and the
    fraction cleared."""
    return np.uint64(np.float64(x).view(np.uint64) & _EXPMASK).view(np.float64)


@njit(cache=True, error_model="numpy")
def acc_exponent(x, emin):
    """Alignment exponent of an accumulator value (decode of spec step 2) as a float:
    max(floor(log2 |x|), emin), ZERO_EXP for x = 0.  Accumulator values are normal float64s."""
    if x == 0.0:
        return ZERO_EXP
    e = np.float64(np.int64(np.float64(x).view(np.uint64) >> _S52) & 0x7FF) - 1023.0
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
    return q, np.uint64(_INV_BITS - np.float64(q).view(np.uint64)).view(np.float64)


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


@njit(parallel=True, cache=True, error_model="numpy")
def split_exponents(x, emin, out):
    """out = alignment exponent of each input (max(floor(log2|x|), emin); ZERO_EXP for zeros
    and for Inf/NaN, which the special-value path handles) as float32, for a 2-d array x."""
    m, n = x.shape
    for i in prange(m):
        for j in range(n):
            v = np.float64(x[i, j])
            if v == 0.0 or abs(v) == np.inf or v != v:
                out[i, j] = ZERO_EXP
            else:
                e = np.float64(np.int64(v.view(np.uint64) >> _S52) & 0x7FF) - 1023.0
                out[i, j] = max(e, np.float64(emin))


@njit(cache=True, error_model="numpy")
def _block_special(acc, av, bv, k0, k1):
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
def hw_dot(av, ea, bv, eb, c, K, F, f, emin_acc, emax_acc, rne):
    """DOT of spec section 2 for one output element, special values included: chained
    BLOCK_STEPs over blocks of K in ascending k (a short last block is the zero-padded one).

    av, bv: the row of A and the column of B (values); ea, eb: their alignment exponents
    (split_exponents); c: the initial accumulator value.
    """
    qscale = pow2(-f)
    qmin = pow2(emin_acc - f)
    lim = pow2(emax_acc + 1)
    n = av.shape[0]
    acc = np.float64(c)
    for k0 in range(0, n, K):
        k1 = min(n, k0 + K)
        r, special = _block_special(acc, av, bv, k0, k1)
        if special:
            acc = r
            continue
        # Step 3: E_max over c and the products (zeros carry ZERO_EXP and never win).
        e = acc_exponent(acc, emin_acc)
        for kk in range(k0, k1):
            e = max(e, np.float64(ea[kk]) + np.float64(eb[kk]))
        e = max(e, np.float64(EMAX_CLAMP))
        sc = pow2(F - np.int64(e))              # 1 / unit
        s = 0.0 + np.trunc(acc * sc)            # 0.0 + : an all-zero sum is +0, never -0
        for kk in range(k0, k1):
            s += np.trunc(np.float64(av[kk]) * np.float64(bv[kk]) * sc)
        acc = round_out(s * pow2(np.int64(e) - F), qscale, qmin, lim, rne)
    return acc


# ----- inner sweeps of _hw_rows ------------------------------------------------------------
# Each sweep handles two rows of A (i and i2, which may be equal) against 4 or 1 rows of
# the B tile, so that every load of B serves two output rows; the loops over the lanes jj of
# the tile are what LLVM vectorises.

@njit(cache=True, error_model="numpy")
def _max1(e0, e1, ea, eb, i, i2, g, j0, w):
    p0, q0 = ea[i, g], ea[i2, g]
    b0 = eb[g, j0:j0 + w]
    for jj in range(w):
        x = b0[jj]
        e0[jj] = max(e0[jj], p0 + x)
        e1[jj] = max(e1[jj], q0 + x)


@njit(cache=True, error_model="numpy")
def _max4(e0, e1, ea, eb, i, i2, g, j0, w):
    p0, p1, p2, p3 = ea[i, g], ea[i, g + 1], ea[i, g + 2], ea[i, g + 3]
    q0, q1, q2, q3 = ea[i2, g], ea[i2, g + 1], ea[i2, g + 2], ea[i2, g + 3]
    b0, b1 = eb[g, j0:j0 + w], eb[g + 1, j0:j0 + w]
    b2, b3 = eb[g + 2, j0:j0 + w], eb[g + 3, j0:j0 + w]
    for jj in range(w):
        x0, x1, x2, x3 = b0[jj], b1[jj], b2[jj], b3[jj]
        e0[jj] = max(e0[jj], max(max(p0 + x0, p1 + x1), max(p2 + x2, p3 + x3)))
        e1[jj] = max(e1[jj], max(max(q0 + x0, q1 + x1), max(q2 + x2, q3 + x3)))


@njit(cache=True, error_model="numpy")
def _sum1(s0, s1, t0, t1, av, bv, i, i2, g, j0, w):
    a0, c0 = av[i, g], av[i2, g]
    b0 = bv[g, j0:j0 + w]
    for jj in range(w):
        x = np.float64(b0[jj])
        s0[jj] += np.trunc(a0 * x * t0[jj])
        s1[jj] += np.trunc(c0 * x * t1[jj])


@njit(cache=True, error_model="numpy")
def _sum4(s0, s1, t0, t1, av, bv, i, i2, g, j0, w):
    a0, a1, a2, a3 = av[i, g], av[i, g + 1], av[i, g + 2], av[i, g + 3]
    c0, c1, c2, c3 = av[i2, g], av[i2, g + 1], av[i2, g + 2], av[i2, g + 3]
    b0, b1 = bv[g, j0:j0 + w], bv[g + 1, j0:j0 + w]
    b2, b3 = bv[g + 2, j0:j0 + w], bv[g + 3, j0:j0 + w]
    for jj in range(w):
        x0, x1 = np.float64(b0[jj]), np.float64(b1[jj])
        x2, x3 = np.float64(b2[jj]), np.float64(b3[jj])
        u, v = t0[jj], t1[jj]
        s0[jj] += ((np.trunc(a0 * x0 * u) + np.trunc(a1 * x1 * u))
                   + (np.trunc(a2 * x2 * u) + np.trunc(a3 * x3 * u)))
        s1[jj] += ((np.trunc(c0 * x0 * v) + np.trunc(c1 * x1 * v))
                   + (np.trunc(c2 * x2 * v) + np.trunc(c3 * x3 * v)))


@njit(cache=True, error_model="numpy")
def _block_start(emx, acc, sc, un, s, w, F):
    """After pass 1: the scale sc = 2^(F - E_max) and unit un = 2^(E_max - F) of each lane,
    built from their bit patterns ((1023 + F - e) << 52 and (1023 - F + e) << 52) without a
    division, and the sum started with c's truncated term."""
    bsc = np.int64(1023 + F)
    bun = np.int64(1023 - F)
    for jj in range(w):
        e = max(np.int64(emx[jj]), EMAX_CLAMP)
        sc[jj] = np.int64((bsc - e) << 52).view(np.float64)
        un[jj] = np.int64((bun + e) << 52).view(np.float64)
        s[jj] = 0.0 + np.trunc(acc[jj] * sc[jj])    # 0.0 + : S = 0 is +0


@njit(cache=True, error_model="numpy")
def _block_end(acc, s, un, emx, w, qscale, qmin, lim, rne, fe):
    """Step 5 for every lane: round S * unit into ACC (an accumulator already +-Inf stays so)
    and record the new accumulator's alignment exponent for the next block.  Separate loops
    per rounding and for the exponents: LLVM vectorises each of them."""
    if rne:
        for jj in range(w):
            x = acc[jj]
            r = _round_rne(s[jj] * un[jj], qscale, qmin, lim)
            acc[jj] = x if abs(x) == np.inf else r
    else:
        for jj in range(w):
            x = acc[jj]
            r = _round_rz(s[jj] * un[jj], qscale, qmin, lim)
            acc[jj] = x if abs(x) == np.inf else r
    for jj in range(w):
        r = acc[jj]
        ex = np.float32(np.int32(np.int64(np.float64(r).view(np.uint64) >> _S52) & 0x7FF)
                        - np.int32(1023))
        emx[jj] = max(ex, fe) if r != 0.0 else np.float32(ZERO_EXP)


@njit(cache=True, error_model="numpy")
def _hw_rows(av, ea, bv, eb, cv, out, i0, i1, K, F, f, emin_acc, emax_acc, rne):
    """Rows i0..i1-1 of hw_gemm, two at a time: a plain function, so that LLVM sees private
    work arrays and vectorises every loop over the lanes jj of a column tile.  k is a multiple
    of K.  (An odd last row is paired with itself and written twice with the same value.)"""
    k = av.shape[1]
    n = bv.shape[1]
    qscale = pow2(-f)
    qmin = pow2(emin_acc - f)
    lim = pow2(emax_acc + 1)
    fe = np.float32(emin_acc)
    acc = np.empty((2, TILE_J))
    s = np.empty((2, TILE_J))
    sc = np.empty((2, TILE_J))
    un = np.empty((2, TILE_J))
    emx = np.empty((2, TILE_J), np.float32)
    for j0 in range(0, n, TILE_J):
        w = min(TILE_J, n - j0)
        for i in range(i0, i1, 2):
            i2 = min(i + 1, i1 - 1)
            for r in range(2):
                for jj in range(w):
                    x = np.float64(cv[i + r * (i2 - i), j0 + jj])
                    acc[r, jj] = x
                    emx[r, jj] = np.float32(acc_exponent(x, emin_acc))
            for k0 in range(0, k, K):
                # Pass 1: E_max = max(Ec, Ea_k + Eb_k).
                g = k0
                while g + 4 <= k0 + K:
                    _max4(emx[0], emx[1], ea, eb, i, i2, g, j0, w)
                    g += 4
                while g < k0 + K:
                    _max1(emx[0], emx[1], ea, eb, i, i2, g, j0, w)
                    g += 1
                for r in range(2):
                    _block_start(emx[r], acc[r], sc[r], un[r], s[r], w, F)
                # Pass 2: S = T_c + sum of T_k (exact integer sums, any order).
                g = k0
                while g + 4 <= k0 + K:
                    _sum4(s[0], s[1], sc[0], sc[1], av, bv, i, i2, g, j0, w)
                    g += 4
                while g < k0 + K:
                    _sum1(s[0], s[1], sc[0], sc[1], av, bv, i, i2, g, j0, w)
                    g += 1
                for r in range(2):
                    _block_end(acc[r], s[r], un[r], emx[r], w, qscale, qmin, lim, rne, fe)
            for jj in range(w):
                out[i, j0 + jj] = acc[0, jj]
                out[i2, j0 + jj] = acc[1, jj]


@njit(parallel=True, cache=True, error_model="numpy")
def hw_gemm(av, ea, bv, eb, cv, out, K, F, f, emin_acc, emax_acc, rne):
    """out[i, j] = DOT(A[i, :], B[:, j], C[i, j]) (see hw_dot) for elements with finite inputs.

    av: m x k float64 values of A, ea: their exponents; bv: k x n float32 values of B, eb:
    their exponents; cv, out: m x n float64; k a multiple of K (zero-padded by the caller).
    Elements whose inputs hold Inf/NaN get meaningless values here and are recomputed by
    hw_fix_elements; a finite element that overflows to +-Inf keeps its Inf in later blocks
    (step 1: c = +-Inf with finite products gives that Inf).
    """
    m = av.shape[0]
    nch = (m + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    for ch in prange(nch):
        _hw_rows(av, ea, bv, eb, cv, out, ch * ROWS_PER_CHUNK,
                 min(m, (ch + 1) * ROWS_PER_CHUNK), K, F, f, emin_acc, emax_acc, rne)


@njit(parallel=True, cache=True, error_model="numpy")
def hw_fix_elements(av, ea, bv, eb, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne):
    """Recompute out[rows[t], cols[t]] with the scalar hw_dot (special values included)."""
    for t in prange(rows.shape[0]):
        i = rows[t]
        j = cols[t]
        out[i, j] = hw_dot(av[i], ea[i], bv[:, j], eb[:, j], cv[i, j], K, F, f,
                           emin_acc, emax_acc, rne)
