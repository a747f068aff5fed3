"""Numba array kernels of the emulated arithmetic (elementwise add/sub/mul/div, sqrt, fma).

Takes only arrays and integers.  Operands are 1-d contiguous float32/float64 arrays that are
either full length (step 1) or a single broadcast element (step 0); the Python wrapper
(softfloat.arith) expands any other broadcasting.  As in softfloat._kernels_round, work is split
into fixed chunks of CHUNK elements processed by ``prange``; each chunk writes its own row of flag
counts, and stochastic rounding draws the bits of output element i from (key, base + i), so results
and counts do not depend on the number of threads.  These kernels serve float64 operands and
float64 carriers; float32 operands into float32 carriers take the vectorised passes of
softfloat._kernels_arith_f32 (same results and flags).

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._arith import (ADD, DIV, FMA, MUL, MUL_EXACT, SQRT, SUB, add_scalar, div_scalar,
                     fma_scalar, mul_exact_scalar, mul_scalar, sqrt_scalar, sub_scalar)
from ._kernels_round import CHUNK, add_flag_counts
from ._roundpack import SR
from .rng import random_bits

# The operation codes (softfloat._arith's) are part of this module's interface.
__all__ = ["ADD", "DIV", "FMA", "MUL", "MUL_EXACT", "SQRT", "SUB", "binary_kernel", "fma_kernel",
           "sqrt_kernel"]


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
