"""Numba kernels that prepare Tensor Core operands: the grid check (fused with the conversion to
float64) and the row / column statistics behind the ideal models' certificates.

Provides
    convert_checked(x, out, m, emin, maxval, subn, allow_inf, allow_nan) -> int
        out = float64(x) for a 1-d x, and the flat index of the first element that is not a
        value of the format (-1 when all are)
    prep_rows(x, out, ..., bad, anrm, aexp) / prep_cols(...) / prep_pair_serial(...)
        the same conversion and check for the operands of the ideal models, fused with the
        row (column) statistics of their certificates: the number of off-grid elements,
        sum x^2 (Inf/NaN make it Inf/NaN, which fails the certificates) and the smallest
        exponent max(floor(log2|x|), emin) over the non-zero elements (NO_EXP for none).

The loops are written branch-free so that LLVM vectorises them.  Imports numpy, numba and
softfloat._roundpack only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._roundpack import pow2

_EXPMASK = np.uint64(0x7FF0000000000000)
_S52 = np.uint64(52)
#: Exponent recorded for a row without non-zero elements: 2^(NO_EXP + ...) exceeds every bound,
#: so its (all-zero) products are certified exact.
NO_EXP = 4000
CHUNK = 1 << 14
_INV_BITS = np.uint64(2046 << 52)
_TINY = 2.0 ** -1022
_HUGE = 2.0 ** 1000


@njit(cache=True, error_model="numpy")
def _bad(v, pemin, iqm, maxval, subn, allow_inf, allow_nan, use_div):
    """1 when the float64 v is not a value of the format, else 0 (branch-free, so that the
    loops calling it vectorise).

    The quantum of |v|'s binade is q = 2^(max(floor(log2|v|), emin) - m); |v| is on the grid iff
    |v| / q is an integer.  1/q is built from q's bits ((2046 << 52) - bits(q), exact for a
    normal power of two); formats whose quantum can be below 2^-1022 (float64 carriers) pass
    use_div and take the exact division instead."""
    a = abs(v)
    pf = np.uint64(np.float64(a).view(np.uint64) & _EXPMASK).view(np.float64)
    q = min(max(pf, pemin), _HUGE) * iqm
    iq = np.uint64(_INV_BITS - np.float64(max(q, _TINY)).view(np.uint64)).view(np.float64)
    t = a / q if use_div else a * iq
    fin = a < np.inf
    off = ((np.trunc(t) != t) | (a > maxval) | ((subn == 0) & (a != 0.0) & (a < pemin))) & fin
    special = ((a == np.inf) & (not allow_inf)) | ((v != v) & (not allow_nan))
    return np.int32(off | special)


@njit(cache=True, error_model="numpy")
def _exp32(v, emin):
    """max(floor(log2|v|), emin) as int32 for a non-zero normal float64 v; NO_EXP for 0
    (and 1024 for Inf/NaN, whose statistics are Inf anyway)."""
    e = np.int32(np.int64(np.float64(v).view(np.uint64) >> _S52) & 0x7FF) - np.int32(1023)
    return max(e, np.int32(emin)) if v != 0.0 else np.int32(NO_EXP)


@njit(parallel=True, cache=True, error_model="numpy")
def convert_checked(x, out, m, emin, maxval, subn, allow_inf, allow_nan, use_div):
    """out[t] = float64(x[t]) for a 1-d x; returns the first t whose x[t] is off the format's
    grid, or -1."""
    n = x.shape[0]
    nch = (n + CHUNK - 1) // CHUNK
    counts = np.zeros(max(nch, 1), np.int64)
    pemin = pow2(emin)
    iqm = pow2(-m)
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        cnt = np.int32(0)
        for t in range(lo, hi):
            v = np.float64(x[t])
            out[t] = v
            cnt += _bad(v, pemin, iqm, maxval, subn, allow_inf, allow_nan, use_div)
        counts[c] = cnt
    return _first_bad(x, counts, pemin, iqm, maxval, subn, allow_inf, allow_nan, use_div)


@njit(cache=True, error_model="numpy")
def convert_checked_serial(x, out, m, emin, maxval, subn, allow_inf, allow_nan, use_div):
    """convert_checked on the calling thread (small arrays: no thread launch)."""
    pemin = pow2(emin)
    iqm = pow2(-m)
    cnt = np.int32(0)
    for t in range(x.shape[0]):
        v = np.float64(x[t])
        out[t] = v
        cnt += _bad(v, pemin, iqm, maxval, subn, allow_inf, allow_nan, use_div)
    if cnt == 0:
        return -1
    counts = np.ones(1, np.int64)
    return _first_bad(x, counts, pemin, iqm, maxval, subn, allow_inf, allow_nan, use_div)


@njit(cache=True, error_model="numpy")
def _first_bad(x, counts, pemin, iqm, maxval, subn, allow_inf, allow_nan, use_div):
    n = x.shape[0]
    for c in range(counts.shape[0]):
        if counts[c] > 0:
            for t in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):
                if _bad(np.float64(x[t]), pemin, iqm, maxval, subn, allow_inf, allow_nan,
                        use_div):
                    return t
    return -1


@njit(cache=True, error_model="numpy")
def _prep_row(xr, o, pemin, iqm, maxval, subn, allow_inf, allow_nan, emin, tb, te):
    """One row: o = float64(xr); returns (off-grid count, sum x^2, smallest exponent)."""
    n = xr.shape[0]
    for j in range(n):
        v = np.float64(xr[j])
        o[j] = v
        tb[j] = _bad(v, pemin, iqm, maxval, subn, allow_inf, allow_nan, False)
        te[j] = _exp32(v, emin)
    if n == 0:
        return np.int64(0), 0.0, np.int64(NO_EXP)
    return np.int64(tb[:n].sum()), np.dot(o, o), np.int64(te[:n].min())


@njit(parallel=True, cache=True, error_model="numpy")
def prep_rows(x, out, m, emin, maxval, subn, allow_inf, allow_nan, bad, anrm, aexp):
    """One pass over the operand A (m x k): out = float64(A) (out may be x itself); per row
    the number of off-grid elements (bad), sum a^2 (anrm; BLAS ddot, any order) and the
    smallest exponent (aexp)."""
    rows, n = x.shape
    pemin = pow2(emin)
    iqm = pow2(-m)
    for i in prange(rows):
        tb = np.empty(n, np.int32)
        te = np.empty(n, np.int32)
        bad[i], anrm[i], aexp[i] = _prep_row(x[i], out[i], pemin, iqm, maxval, subn, allow_inf,
                                             allow_nan, emin, tb, te)


@njit(cache=True, error_model="numpy")
def _prep_strip(x, out, j0, w, pemin, iqm, maxval, subn, allow_inf, allow_nan, emin, bad, anrm,
                aexp):
    """Columns j0 .. j0+w-1 of B: conversion, check and statistics (see prep_cols)."""
    rows = x.shape[0]
    # Slices starting at 0: indices LLVM can prove non-negative, so the loops vectorise.
    nr = anrm[j0:j0 + w]
    ex = aexp[j0:j0 + w]
    bd = bad[j0:j0 + w]
    for jj in range(w):
        nr[jj] = 0.0
        ex[jj] = NO_EXP
        bd[jj] = 0
    for i in range(rows):
        xr = x[i, j0:j0 + w]
        orow = out[i, j0:j0 + w]
        for jj in range(w):
            v = np.float64(xr[jj])
            orow[jj] = v
            bd[jj] += _bad(v, pemin, iqm, maxval, subn, allow_inf, allow_nan, False)
            nr[jj] += v * v
            ex[jj] = min(ex[jj], np.int64(_exp32(v, emin)))


#: Columns of B per strip of prep_cols.
STRIP = 256


@njit(parallel=True, cache=True, error_model="numpy")
def prep_cols(x, out, m, emin, maxval, subn, allow_inf, allow_nan, bad, anrm, aexp):
    """One pass over the operand B (k x n): out = float64(B) (out may be x itself); per
    column the number of off-grid elements, sum b^2 and the smallest exponent (vectorised
    over strips of columns)."""
    n = x.shape[1]
    pemin = pow2(emin)
    iqm = pow2(-m)
    nch = (n + STRIP - 1) // STRIP
    for ch in prange(nch):
        j0 = ch * STRIP
        _prep_strip(x, out, j0, min(n, j0 + STRIP) - j0, pemin, iqm, maxval, subn, allow_inf,
                    allow_nan, emin, bad, anrm, aexp)


@njit(cache=True, error_model="numpy")
def prep_pair_serial(xa, oa, xb, ob, m, emin, maxval, subn, allow_inf, allow_nan, bada, nra,
                     exa, badb, nrb, exb):
    """prep_rows on A and prep_cols on B on the calling thread (small problems: one call, no
    thread launch); returns the total number of off-grid elements."""
    pemin = pow2(emin)
    iqm = pow2(-m)
    k = xa.shape[1]
    tb = np.empty(k, np.int32)
    te = np.empty(k, np.int32)
    nbad = 0
    for i in range(xa.shape[0]):
        bada[i], nra[i], exa[i] = _prep_row(xa[i], oa[i], pemin, iqm, maxval, subn, allow_inf,
                                            allow_nan, emin, tb, te)
        nbad += bada[i]
    n = xb.shape[1]
    for j0 in range(0, n, STRIP):
        _prep_strip(xb, ob, j0, min(n, j0 + STRIP) - j0, pemin, iqm, maxval, subn, allow_inf,
                    allow_nan, emin, badb, nrb, exb)
    for j in range(n):
        nbad += badb[j]
    return nbad
