"""Numba kernels of mx.gemm (semantics in softfloat/mx/__init__.py): the "blocked" model, the
ideal model's exact final scaling (scale_exact) and its dequantized operands (scaled_operand).

For each output (i, j), in k order over the K-blocks b:
    t_b = fp32( sum_{k in b} a_ik b_kj  *  sa_ib * sb_bj * T )          one RNE rounding
    acc = fp32(acc + t_b)                                               IEEE fp32 addition
with acc starting at c_ij (or +0), a and b the unscaled elements, sa, sb the block scales and
T the product of the tensor scales (NVFP4; 1 otherwise).

Exact block sums.  The products of two elements are exact in float64 (at most 8 + 8 significant
bits).  They are summed in two float64 accumulators split at 2^H: ``lo`` takes the products
below 2^H, all multiples of 2^qp (qp = the two elements' quantum exponents added), so its sum of
at most n terms stays below n 2^H and is exact when H + log2(n) - qp <= 53; ``hi`` takes the
others, multiples of 2^(H - pa - pb + 1) (pa, pb the precisions), below n max_a max_b: exact when
log2(n max_a max_b) - (H - pa - pb + 1) <= 53.  block_split() picks H and checks both (e5m2 x
e5m2, the widest pair, needs the split: its products span 2^-32 .. 2^31.8).  Then
    (h, l) = TwoSum(hi, lo)                                exact
    MX:    s = RO53(h + l) * 2^(Ea + Eb)                   exact scaling of the round-to-odd value
    NVFP4: lo holds the whole sum (e2m1 products are multiples of 2^-2 below 36: H covers them),
           h * sa * sb is exact (<= 13 + 4 + 4 bits), and (p, e) = TwoProduct(h sa sb, T)
           gives s = RO53(p + e)
and fp32(s) is one rounding of the exact t_b: rounding a round-to-odd value with 53 >= 24 + 2
bits to 24 bits (or fewer, in fp32's subnormal range) is the rounding of the exact value (Boldo &
Melquiond).  float32(x) for a float64 x and the float32 addition are the hardware's RNE
operations (never fastmath; default MXCSR).

Imports numpy, numba and the sibling kernel module only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._primitives import F32_ABS, F32_HIDDEN, F32_INF, fold_odd, two_prod_err, two_sum_err

__all__ = ["blocked_gemm", "scale_exact", "scaled_operand"]


@njit(cache=True)
def _row(ai, bt, sa_i, sbt, T, c_i, kb, hsplit, nv, out_i, hi, lo):
    """Output row i (see the module docstring); bt is B transposed (n x k), sbt its block
    scales (n x nkb), hi / lo scratch of length n."""
    n = bt.shape[0]
    k = ai.size
    for j in range(n):
        out_i[j] = c_i[j]
    nkb = (k + kb - 1) // kb
    for b in range(nkb):
        k0 = b * kb
        k1 = min(k, k0 + kb)
        for j in range(n):
            h = 0.0
            lw = 0.0
            bj = bt[j]
            for q in range(k0, k1):
                p = np.float64(ai[q]) * np.float64(bj[q])
                big = abs(p) >= hsplit
                h += p if big else 0.0
                lw += 0.0 if big else p
            hi[j] = h
            lo[j] = lw
        for j in range(n):
            s = hi[j] + lo[j]
            t = two_sum_err(hi[j], lo[j], s)
            sc = sa_i[b] * sbt[j, b]
            if nv:
                v = s * sc                      # lo alone holds the exact sum: t = 0
                if T != 1.0 and v != 0.0 and v == v:
                    p = v * T
                    e = two_prod_err(v, T, p)
                    v = fold_odd(p, e)
                else:
                    v = v * T
            else:
                v = fold_odd(s, t) * sc          # sc = 2^(Ea + Eb): exact
            out_i[j] = np.float32(out_i[j] + np.float32(v))


@njit(parallel=True, cache=True)
def blocked_gemm(a, bt, sa, sbt, T, c, kb, hsplit, nv, out):
    """out (m x n float32) by the blocked model; a (m x k) and bt (n x k) float32 elements,
    sa (m x nkb) and sbt (n x nkb) float64 block scales, c (m x n) float32."""
    m = a.shape[0]
    n = bt.shape[0]
    for i in prange(m):
        hi = np.empty(n, dtype=np.float64)
        lo = np.empty(n, dtype=np.float64)
        _row(a[i], bt, sa[i], sbt, T, c[i], kb, hsplit, nv, out[i], hi, lo)


@njit(parallel=True, cache=True)
def scale_exact(S, T, out):
    """out = RO53(S * T) for float64 S (exact sums) and T (an exact product of two float32
    tensor scales): Dekker's product gives S T = p + e exactly, fold_odd its round-to-odd value,
    which rounds (to fp32 or any narrower format) like the exact product.  NaN stays NaN, 0 stays
    +0 (an exact cancellation)."""
    m, n = S.shape
    for i in prange(m):
        for j in range(n):
            v = S[i, j]
            if v == 0.0:
                v = 0.0                          # an exact zero sum is +0, whatever its terms
            elif v == v and T != 1.0:
                p = v * T
                e = two_prod_err(v, T, p)
                v = fold_odd(p, e)
            else:
                v = v * T
            out[i, j] = v




@njit(cache=True, error_model="numpy")
def _put(v, grid):
    """(float32(v), whether float32 does not hold v, whether float32(v) is a non-zero float32
    subnormal with a bit in grid set, whether v is Inf or NaN) for one product v."""
    f = np.float32(v)
    a = f.view(np.uint32) & F32_ABS
    # (F32_HIDDEN, 2^23, is also the pattern of float32's smallest normal, 2^-126)
    return (f, (np.float64(f) != v) & (v == v),
            (a != 0) & (a < F32_HIDDEN) & ((a & grid) != 0), a >= F32_INF)


@njit(cache=True, error_model="numpy")
def scaled_operand(e, s, kb, along_rows, x, out, off, grid):
    """One operand of mx.gemm's ideal model, or one tensor-scale part of it: float32((e * s) * x)
    element by element into out (float32, or float64 holding the same values), at column
    offset off (along_rows False) or row offset off (True) of out.  e (r x c) the float32
    elements; s their block scales in float64, s[i, j // kb] (along_rows False: A, blocked
    along its columns) or s[i // kb, j] (True: B, blocked along its rows); x a float64 factor
    (a part of the tensor scale, 1.0 without one).  Every product is exact in float64 (at most
    8 + 4 + 12 significant bits, exponents far inside float64's range), so out holds the
    dequantized value wherever float32 does.  Returns (inexact, offgrid, nonfinite): how many
    values float32 does not hold (beyond its range, or below its subnormal quantum; a NaN is
    held), how many non-zero float32 subnormals among the results have a bit of ``grid`` set
    (grid = 2^(24 - p) - 1: off the subnormal grid of a format with p significant bits and
    float32's exponent range), and how many results are Inf or NaN.  One thread: O(r c)
    against the GEMM's O(r c n)."""
    r, c = e.shape
    inexact = 0
    offgrid = 0
    nonfinite = 0
    grid = np.uint32(grid)
    if along_rows:
        for i in range(r):
            si = s[i // kb]
            oi = out[off + i]
            ei = e[i]
            for j in range(c):
                oi[j], bad, og, nf = _put((np.float64(ei[j]) * si[j]) * x, grid)
                inexact += bad
                offgrid += og
                nonfinite += nf
    else:
        srow = np.empty(c)                  # row i's scales spread over its columns
        for i in range(r):
            si = s[i]
            for b in range(si.shape[0]):
                srow[b * kb:min(c, (b + 1) * kb)] = si[b]
            oi = out[i]
            ei = e[i]
            for j in range(c):
                oi[off + j], bad, og, nf = _put((np.float64(ei[j]) * srow[j]) * x, grid)
                inexact += bad
                offgrid += og
                nonfinite += nf
    return inexact, offgrid, nonfinite
