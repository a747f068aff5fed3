"""Numba array kernels of the emulated arithmetic (elementwise add/sub/mul/div, sqrt, fma).

Takes only arrays and integers.  Operands are 1-d contiguous float32/float64 arrays that are
either full length (step 1) or a single broadcast element (step 0); the Python wrapper
(softfloat.arith) expands any other broadcasting.  As in softfloat._kernels_round, work is split
into fixed chunks of CHUNK elements processed by ``prange``; each chunk writes its own row of flag
counts, and stochastic rounding draws the bits of output element i from (key, i), so results and
counts do not depend on the number of threads.  ``fast_binary_kernel`` is the branch-free fast
pass for add/sub/mul of float32 arrays into float32-carrier formats (derivation below), which
hands every element outside its range back to the scalar ops.

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._arith import (add_scalar, div_scalar, fma_scalar, mul_exact_scalar, mul_scalar,
                     sqrt_scalar, sub_scalar)
from ._kernels_round import CHUNK, add_flag_counts
from ._primitives import (F64_ABS, F64_FRAC_BITS, F64_SIGN, U64_0, U64_1, fold_odd_nb,
                          two_sum_err)
from ._roundpack import RDN, RHU, RNA, RNE, RTO, RUP, SR
from .rng import random_bits

#: Operation codes of binary_kernel.  MUL_EXACT is mul for operands whose float64 product is
#: exact (both arrays float32), the fast path; the wrapper picks it.
ADD, SUB, MUL, MUL_EXACT, DIV = 0, 1, 2, 3, 4


@njit(parallel=True, cache=True)
def binary_kernel(op, a, sa, b, sb, out, fp, mode, key, base, rbits, want_flags, counts):
    """out[i] = round(a[i*sa] (op) b[i*sb]) for i < out.size; sa, sb in {0, 1}."""
    n = out.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            u = random_bits(key, base + i) if mode == SR else np.uint64(0)
            x = a[i * sa]
            y = b[i * sb]
            if op == ADD:
                r, fl = add_scalar(x, y, fp, mode, u, rbits)
            elif op == MUL_EXACT:
                r, fl = mul_exact_scalar(x, y, fp, mode, u, rbits)
            elif op == SUB:
                r, fl = sub_scalar(x, y, fp, mode, u, rbits)
            elif op == MUL:
                r, fl = mul_scalar(x, y, fp, mode, u, rbits)
            else:
                r, fl = div_scalar(x, y, fp, mode, u, rbits)
            out[i] = r
            if want_flags:
                add_flag_counts(counts, c, fl)


@njit(parallel=True, cache=True)
def sqrt_kernel(a, out, fp, mode, key, base, rbits, want_flags, counts):
    """out[i] = round(sqrt(a[i]))."""
    n = out.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            u = random_bits(key, base + i) if mode == SR else np.uint64(0)
            r, fl = sqrt_scalar(a[i], fp, mode, u, rbits)
            out[i] = r
            if want_flags:
                add_flag_counts(counts, c, fl)


@njit(parallel=True, cache=True)
def fma_kernel(exact_product, a, sa, b, sb, cc, sc, out, fp, mode, key, base, rbits,
               want_flags, counts):
    """out[i] = round(a[i*sa] * b[i*sb] + cc[i*sc]).  exact_product != 0 (a and b float32
    arrays): a*b is exact in float64 and the fma is an add of that exact product."""
    n = out.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            u = random_bits(key, base + i) if mode == SR else np.uint64(0)
            x = np.float64(a[i * sa])
            y = np.float64(b[i * sb])
            z = cc[i * sc]
            if exact_product != 0 and x * y == x * y:     # product exact and not NaN
                r, fl = add_scalar(x * y, z, fp, mode, u, rbits)
            else:
                r, fl = fma_scalar(x, y, z, fp, mode, u, rbits)
            out[i] = r
            if want_flags:
                add_flag_counts(counts, c, fl)


# ----- fast path: add/sub/mul of float32 arrays into a float32-carrier format ------------------
# For float32 operands the exact result is at hand as a float64 v with escale 0: the product is
# exact (24 + 24 <= 53 bits), the sum is RO(a + b) = fold_odd(TwoSum).  When v's binary exponent
# E lies in [emin, emax) the rounding cannot underflow (|v| >= 2^emin) nor overflow (the result is
# at most 2^(E+1) <= 2^emax <= max), and round_value reduces to rounding v's 64-bit pattern to
# p bits: with d = 52 - m dropped bits, add an increment to the magnitude's pattern and clear the
# d low bits (a carry out of the fraction bumps the exponent field: 1.11..1 + ulp = 10.0):
#   RNE: half - 1 + (last kept bit); RNA: half; RTZ: 0; RUP: low (= 2^d - 1) if v > 0;
#   RDN: low if v < 0; RTO: no increment, then OR the last kept bit with "remainder != 0";
#   RHU (ties toward +inf): half if v > 0, half - 1 if v < 0;
#   SR with r random bits (r < d is enforced: r <= 51 - p = 50 - m < d): increment
#   (u >> (64 - r)) << (d - r).  round_value rounds up iff floor(rem / 2^(d-r)) + A >= 2^r with
#   A = u >> (64 - r); writing rem = hi 2^(d-r) + lo (lo < 2^(d-r)), rem + A 2^(d-r) =
#   (hi + A) 2^(d-r) + lo reaches 2^d iff hi + A >= 2^r: the same decision.
# An exact zero v (x + (-x), or a zero operand) is also handled here: its pattern rounds to itself
# and it carries IEEE's sign (see _exact_f32).  The loop is branch-free so LLVM can vectorise it;
# it writes NaN -- never a fast-path result -- for every element outside the fast range (specials,
# |v| < 2^emin or >= 2^emax), and a second pass recomputes just those with the full scalar op
# (ending in round_value).  Results and flag counts are therefore exactly those of binary_kernel.

_ABS64 = F64_ABS
_SIGN64 = F64_SIGN
_U1 = U64_1
_U52 = F64_FRAC_BITS
_U0 = U64_0


@njit(cache=True)
def _exact_f32(op, rdn, x, y):
    """v for op in (ADD, SUB, MUL_EXACT) on float32 values x, y: exact product, RO(sum).
    Branch-free (both candidates are computed, one is selected) so the loops vectorise.
    An exact zero keeps IEEE's sign: the float64 sum's (+0 unless both operands are -0) except
    in RDN (rdn True), where it is -0 unless both operands are +0; the product's is exact."""
    yy = -y if op == SUB else y
    s = x + yy
    v = fold_odd_nb(s, two_sum_err(x, yy, s))
    zero_rdn = np.uint64((np.float64(x).view(np.uint64) | np.float64(yy).view(np.uint64))
                         & _SIGN64).view(np.float64)
    v = zero_rdn if (rdn & (s == 0.0)) else v
    return x * y if op == MUL_EXACT else v


@njit(cache=True)
def _round_bits(v, d, keep, c0, c1, cpos, cneg, rtobit, inc_sr):
    """Round v's pattern to p bits (valid in the fast range); returns (pattern, rem != 0)."""
    bits = np.float64(v).view(np.uint64)
    mag = bits & _ABS64
    rem = mag & ((_U1 << d) - _U1)
    inc = c0 + (((mag >> d) & _U1) * c1) + (cneg if bits != mag else cpos) + inc_sr
    r = ((mag + inc) & keep) | (rtobit if rem != _U0 else _U0)
    return (bits ^ mag) | r, rem != _U0


@njit(cache=True)
def _chunk_det(op, rdn, xs, ys, os, d, keep, c0, c1, cpos, cneg, rtobit, elo, ehi):
    """Fast pass of one chunk in a deterministic mode; returns (slow count, fast inexact).
    Elements outside the fast range are written as NaN (a value the fast pass never produces)."""
    nslow = 0
    ninexact = 0
    for j in range(os.size):
        v = _exact_f32(op, rdn, np.float64(xs[j]), np.float64(ys[j]))
        E = np.int64((np.float64(v).view(np.uint64) & _ABS64) >> _U52)
        pat, inexact = _round_bits(v, d, keep, c0, c1, cpos, cneg, rtobit, _U0)
        fast = ((E >= elo) & (E < ehi)) | (v == 0.0)
        nslow += not fast
        ninexact += fast & inexact
        os[j] = np.uint64(pat).view(np.float64) if fast else np.nan
    return nslow, ninexact


@njit(cache=True)
def _chunk_sr(op, xs, ys, os, base, key, rbits, d, keep, elo, ehi):
    """Fast pass of one chunk with stochastic rounding (bits of element base + j)."""
    nslow = 0
    ninexact = 0
    s1 = np.uint64(64 - rbits)
    s2 = d - np.uint64(rbits)
    for j in range(os.size):
        v = _exact_f32(op, False, np.float64(xs[j]), np.float64(ys[j]))
        E = np.int64((np.float64(v).view(np.uint64) & _ABS64) >> _U52)
        inc = (random_bits(key, base + j) >> s1) << s2
        pat, inexact = _round_bits(v, d, keep, _U0, _U0, _U0, _U0, _U0, inc)
        fast = ((E >= elo) & (E < ehi)) | (v == 0.0)
        nslow += not fast
        ninexact += fast & inexact
        os[j] = np.uint64(pat).view(np.float64) if fast else np.nan
    return nslow, ninexact


@njit(parallel=True, cache=True)
def fast_binary_kernel(op, a, sa, b, sb, out, fp, mode, key, base, rbits, want_flags,
                       counts):
    """binary_kernel for op in (ADD, SUB, MUL_EXACT), float32 a, b and a float32 carrier out
    (m <= 22), with the fast pass above.  Same results and flag counts as binary_kernel."""
    n = out.size
    nch = (n + CHUNK - 1) // CHUNK
    d = np.uint64(52 - fp.man_bits)
    keep = ~((_U1 << d) - _U1)
    half = _U1 << (d - _U1)
    low = (_U1 << d) - _U1
    c0 = _U0
    c1 = _U0
    cpos = _U0
    cneg = _U0
    if mode == RNE:
        c0 = half - _U1
        c1 = _U1
    elif mode == RNA:
        c0 = half
    elif mode == RHU:
        c0 = half - _U1                     # ties toward +inf: half for positives (cpos = 1),
        cpos = _U1                          # half - 1 (ties truncate) for negatives
    elif mode == RUP:
        cpos = low
    elif mode == RDN:
        cneg = low
    rtobit = (_U1 << d) if mode == RTO else _U0
    elo = np.int64(fp.emin + 1023)         # biased float64 exponent of 2^emin
    ehi = np.int64(fp.emax + 1023)
    for c in prange(nch):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        # Contiguous chunk slices (the loop vectorises); a broadcast scalar is expanded per chunk.
        xs = a[lo:hi] if sa == 1 else np.full(hi - lo, a[0])
        ys = b[lo:hi] if sb == 1 else np.full(hi - lo, b[0])
        os = out[lo:hi]
        if mode == SR:
            nslow, ninexact = _chunk_sr(op, xs, ys, os, base + lo, key, rbits, d, keep, elo,
                                         ehi)
        else:
            nslow, ninexact = _chunk_det(op, mode == RDN, xs, ys, os, d, keep, c0, c1, cpos,
                                         cneg, rtobit, elo, ehi)
        if want_flags:
            counts[c, 0] += ninexact
        if nslow > 0:
            for i in range(lo, hi):
                if not np.isnan(out[i]):
                    continue
                x = np.float64(a[i * sa])
                y = np.float64(b[i * sb])
                u = random_bits(key, base + i) if mode == SR else np.uint64(0)
                if op == MUL_EXACT:
                    r, fl = mul_exact_scalar(x, y, fp, mode, u, rbits)
                elif op == SUB:
                    r, fl = sub_scalar(x, y, fp, mode, u, rbits)
                else:
                    r, fl = add_scalar(x, y, fp, mode, u, rbits)
                out[i] = r
                if want_flags:
                    add_flag_counts(counts, c, fl)
