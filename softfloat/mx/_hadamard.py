"""mx.hadamard: the random Hadamard transform NVFP4 training recipes apply to the inputs of the
weight-gradient GEMM, computed exactly and rounded once.

Along ``axis``, every group of ``size`` consecutive elements x (a row vector) becomes
    y = x R,   R = D H / sqrt(size)
with H the Sylvester Hadamard matrix (H_ij = (-1)^popcount(i & j), symmetric, H H = size I)
and D = diag(d) a random sign vector (d_i = +1 or -1 from the top bit of
random_bits(key(seed), i), the same for every group; seed None: d = 1, the plain normalised
Hadamard transform).  R is orthogonal (R R^T = D H H D / size = I), so for two tensors
transformed along their contraction axis with the same seed, hadamard(x) @ hadamard(w).T
equals x @ w.T up to the roundings of the two transforms.  inverse=True applies R^T
(x = y R^T, i.e. x_i = d_i (y H)_i / sqrt(size)).

Exactness.  size must be a power of 4 (4, 16, 64, ...), so 1 / sqrt(size) = 2^-k is a power of
two and every output is sum_i (+-x_i) * 2^-k: a signed sum of float32 values, rounded ONCE
(RNE) to float32.  The sums come from a float64 matrix product, exact when the group's nonzero
magnitudes span at most 29 - log2(size) binades (_exact_spread: every partial sum, in any
order, is then an integer number of units below 2^53: representable); the rare groups with a
wider spread are summed in exact rational arithmetic instead (slow, but exact).

Imports numpy and softfloat only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .._validate import as_float_array
from ..rng import random_bits, seed_key

__all__ = ["hadamard", "hadamard_matrix", "random_signs"]

def _exact_spread(size: int) -> int:
    """Largest spread e_hi - e_lo of a group's frexp exponents (x = m 2^e, 1/2 <= m < 1) for
    which every float64 partial sum is exact: the values are multiples of 2^(e_lo - 1 - 23)
    (24-bit significands; also true of float32 subnormals, multiples of 2^-149), every partial
    sum is below size * 2^e_hi, so it holds size * 2^(e_hi - e_lo + 24) units, at most 2^53
    when e_hi - e_lo <= 29 - log2(size): 25 for size 16."""
    return 29 - (size.bit_length() - 1)


def hadamard_matrix(size: int) -> np.ndarray:
    """The Sylvester Hadamard matrix of order size (a power of two), entries +-1 (float64)."""
    i = np.arange(size)
    pc = np.zeros((size, size), dtype=np.int64)
    a = i[:, None] & i[None, :]
    while np.any(a):
        pc += a & 1
        a = a >> 1
    return np.where(pc % 2 == 0, 1.0, -1.0)


def random_signs(size: int, seed) -> np.ndarray:
    """d_i = -1 when the top bit of random_bits(key(seed), i) is set, else +1 (float64);
    all +1 when seed is None."""
    if seed is None:
        return np.ones(size)
    key = seed_key(seed)
    return np.array([-1.0 if int(random_bits(key, i)) >> 63 else 1.0 for i in range(size)])


def _round_f32(q: Fraction) -> np.float32:
    """q rounded once to float32 (RNE, subnormals, +-Inf beyond the range)."""
    if q == 0:
        return np.float32(0.0)
    neg = q < 0
    a = -q if neg else q
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    qe = max(e, -126) - 23
    scaled = a / Fraction(2) ** qe
    lo = scaled.numerator // scaled.denominator
    rem = scaled - lo
    lo += 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2) else 0
    with np.errstate(over="ignore"):
        v = np.float32(np.ldexp(float(lo), qe))
    return -v if neg else v


def hadamard(x, size=16, *, seed=None, axis=-1, inverse=False):
    """The random Hadamard transform of x along ``axis`` in groups of ``size`` (a power of 4;
    the axis length a multiple of it); float32 in, float32 out, every output rounded once.
    See the module docstring."""
    arr = as_float_array(x)
    if arr.dtype != np.float32:
        raise TypeError("hadamard takes float32 (or float16) data: every output is rounded "
                        "once to float32; pass x.astype(np.float32)")
    if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)) or \
            size < 4 or (size & (size - 1)) or (size.bit_length() - 1) % 2:
        raise ValueError(f"size must be a power of 4 (4, 16, 64, 256, ...) so that "
                         f"1/sqrt(size) is a power of two; got {size!r}")
    if size > 4096:
        raise ValueError(f"size must be at most 4096, got {size}")
    if arr.ndim == 0:
        raise ValueError("x must have at least one dimension")
    if not isinstance(axis, (int, np.integer)) or not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"axis {axis!r} is out of range for shape {arr.shape}")
    L = arr.shape[axis]
    if L % size:
        raise ValueError(f"the length {L} of axis {axis} is not a multiple of size {size}")
    k = (size.bit_length() - 1) // 2                  # 1/sqrt(size) = 2^-k
    H = hadamard_matrix(size)
    d = random_signs(size, seed)
    R = H * d[None, :] if inverse else d[:, None] * H   # y = x R (forward: D H; inverse: H D)
    moved = np.moveaxis(arr, axis, -1)
    g = moved.reshape(-1, size).astype(np.float64)
    s = g @ R
    # exactness certificate: spread of the group's nonzero binades
    mag = np.abs(g)
    ex = np.frexp(np.where(mag > 0, mag, 1.0))[1]
    hi = np.where(mag > 0, ex, -10 ** 6).max(axis=1)
    lo = np.where(mag > 0, ex, 10 ** 6).min(axis=1)
    wide = np.nonzero((hi - lo > _exact_spread(size)) & (hi > -10 ** 6))[0]
    with np.errstate(over="ignore"):
        y = np.ldexp(s, -k).astype(np.float32)
    Ri = R.astype(np.int64)
    for r in wide:
        row = [Fraction(float(v)) for v in g[r]]
        for j in range(size):
            y[r, j] = _round_f32(sum(Ri[i, j] * row[i] for i in range(size)) / 2 ** k)
    return np.moveaxis(y.reshape(moved.shape), -1, axis)
