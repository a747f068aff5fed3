"""Numba kernel of the generic accumulation GEMM (softfloat.tensorcore.accum).

Provides ``accum_gemm_kernel``: every output element is c plus the products of its row of A and
column of B, accumulated in an emulated format with one rounding per operation through the
scalar arithmetic of softfloat._arith (``add_scalar``, ``mul_exact_scalar``): products of two
inputs are exact in float64 (precision <= 24 each), so "fused" steps RND(acc + a*b) are
``add_scalar(acc, a*b)`` -- an FMA with a single rounding -- and unfused ones round the product
first.  Orders (codes): 0 sequential, 1 blocked, 2 pairwise; Kahan compensation optional
(sequential and blocked).  Stochastic rounding draws the bits of the r-th rounding of element
(i, j) from random_bits(key, (i * n + j) * STRIDE(k) + r): identical for any thread count.

Imports numpy, numba and softfloat's scalar kernels only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._arith import add_scalar, mul_exact_scalar
from .._roundpack import SR
from ..rng import random_bits

SEQUENTIAL, BLOCKED, PAIRWISE = 0, 1, 2
NFLAGS = 5
_ONE = np.uint64(1)   # uint64 counters: mixing with Python ints would promote to float64


def stride(k: int) -> int:
    """Random-bit indices reserved per output element: at most 5 roundings per product (Kahan
    unfused: mul, sub, add, sub, sub), at most 4 per block (blocked Kahan) and the final add:
    5k + 4k + 1 < 10 (k + 2)."""
    return 10 * (k + 2)


@njit(cache=True)
def _bits(mode, key, idx):
    return random_bits(key, idx) if mode == SR else np.uint64(0)


@njit(cache=True)
def _add(x, y, fp, rbits, mode, key, idx):
    return add_scalar(x, y, fp, mode, _bits(mode, key, idx), rbits)


@njit(cache=True)
def _mul(x, y, fp, rbits, mode, key, idx):
    return mul_exact_scalar(x, y, fp, mode, _bits(mode, key, idx), rbits)


@njit(cache=True)
def _term(a, b, fused, comp, kahan, fp, rbits, mode, key, idx):
    """The addend of one step: a*b (exact, fused) or RND(a*b); with Kahan, minus comp (one
    rounding in the fused case: RND(a*b - comp)).  Returns (y, flags, next idx)."""
    fl = 0
    if fused:
        p = a * b                                  # exact in float64
    else:
        p, f1 = _mul(a, b, fp, rbits, mode, key, idx)
        idx += _ONE
        fl |= f1
    if kahan:
        p, f2 = _add(p, -comp, fp, rbits, mode, key, idx)
        idx += _ONE
        fl |= f2
    return p, fl, idx


@njit(cache=True)
def _seq(av, bv, k0, k1, acc, start_zero, fused, kahan, fp, rbits, mode, key, idx):
    """Sequential accumulation of products k0..k1-1 onto acc.  start_zero: the sum starts at
    the first product itself (RND(a*b)), not at acc.  Returns (acc, flags, idx)."""
    fl = 0
    comp = 0.0
    first = start_zero
    for kk in range(k0, k1):
        a = np.float64(av[kk])
        b = np.float64(bv[kk])
        if first:
            # The sum starts at the first product: RND(a*b) (= RND(0 + a*b) when fused).
            acc, f1 = _mul(a, b, fp, rbits, mode, key, idx)
            idx += _ONE
            fl |= f1
            first = False
            continue
        y, f1, idx = _term(a, b, fused, comp, kahan, fp, rbits, mode, key, idx)
        fl |= f1
        t, f2 = _add(acc, y, fp, rbits, mode, key, idx)
        idx += _ONE
        fl |= f2
        if kahan:
            # comp = RND(RND(t - acc) - y): the part of y that did not make it into t.
            d, f3 = _add(t, -acc, fp, rbits, mode, key, idx)
            idx += _ONE
            comp, f4 = _add(d, -y, fp, rbits, mode, key, idx)
            idx += _ONE
            fl |= f3 | f4
        acc = t
    return acc, fl, idx


@njit(cache=True)
def _element(av, bv, c, order, block, fused, kahan, fp, rbits, mode, key, idx, leaves):
    k = av.shape[0]
    if k == 0:
        return np.float64(c), 0
    if order == SEQUENTIAL:
        acc, fl, idx = _seq(av, bv, 0, k, np.float64(c), False, fused, kahan, fp, rbits, mode,
                            key, idx)
        return acc, fl
    fl = 0
    nb = (k + block - 1) // block
    if order == BLOCKED:
        acc = np.float64(c)
        comp = 0.0
        for t in range(nb):
            s, f1, idx = _seq(av, bv, t * block, min(k, t * block + block), 0.0, True, fused,
                              kahan, fp, rbits, mode, key, idx)
            fl |= f1
            y = s
            if kahan:
                y, f2 = _add(s, -comp, fp, rbits, mode, key, idx)
                idx += _ONE
                fl |= f2
            nacc, f3 = _add(acc, y, fp, rbits, mode, key, idx)
            idx += _ONE
            fl |= f3
            if kahan:
                d, f4 = _add(nacc, -acc, fp, rbits, mode, key, idx)
                idx += _ONE
                comp, f5 = _add(d, -y, fp, rbits, mode, key, idx)
                idx += _ONE
                fl |= f4 | f5
            acc = nacc
        return acc, fl
    # PAIRWISE: leaves are sequential sums of blocks (one rounded product for block = 1),
    # combined level by level in adjacent pairs (an odd last one moves up unchanged); c last.
    for t in range(nb):
        s, f1, idx = _seq(av, bv, t * block, min(k, t * block + block), 0.0, True, fused,
                          False, fp, rbits, mode, key, idx)
        leaves[t] = s
        fl |= f1
    cnt = nb
    while cnt > 1:
        h = cnt // 2
        for t in range(h):
            leaves[t], f1 = _add(leaves[2 * t], leaves[2 * t + 1], fp, rbits, mode, key, idx)
            idx += _ONE
            fl |= f1
        if cnt % 2 == 1:
            leaves[h] = leaves[cnt - 1]
            cnt = h + 1
        else:
            cnt = h
    d, f1 = _add(np.float64(c), leaves[0], fp, rbits, mode, key, idx)
    return d, fl | f1


@njit(parallel=True, cache=True)
def accum_gemm_kernel(av, bv, cv, out, order, block, fused, kahan, fp, rbits, mode, key, counts):
    """out[i, j] = the accumulation of c[i, j] and a[i, k] b[k, j] (see the module docstring);
    counts[i, f] = number of elements of row i that raised flag bit f."""
    m, k = av.shape
    n = bv.shape[1]
    st = np.uint64(10 * (k + 2))
    for i in prange(m):
        leaves = np.empty(max(1, (k + block - 1) // block))
        for j in range(n):
            idx = (np.uint64(i) * np.uint64(n) + np.uint64(j)) * st
            d, fl = _element(av[i], bv[:, j], cv[i, j], order, block, fused, kahan, fp, rbits, mode,
                             key, idx, leaves)
            out[i, j] = d
            for f in range(NFLAGS):
                if fl & (1 << f):
                    counts[i, f] += 1
