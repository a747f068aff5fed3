"""Conversions to DFP: :func:`quantize` (float -> DFP-P) and :func:`down_convert` (DFP -> DFP-P,
the seed's DFP-32 -> DFP-16 step with the shift taken from the leading-zero count).

Shared-exponent rules (documented in softfloat/dfp/__init__.py) are computed here with numpy on
exact quantities (max |x| is exact; frexp is exact); the per-element rounding runs in the Numba
kernels of _kernels_quant.py.  Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from .._validate import DEFAULT_SR_BITS, as_float_array
from ..rng import seed_key
from . import _kernels_quant as KQ
from ._tensor import (DFPTensor, block_absmax, check_bits, check_dfp, check_int, expand_blocks,
                      exponent_shape, layout_geometry, normalize_layout, parse_rounding)

__all__ = ["quantize", "down_convert", "SCALE_RULES"]

#: floor: E_s = floor(log2 amax) - (P - 2)             (the paper's rule; OCP MX's
#:        floor(log2 amax) - emax_elem with emax_elem = P - 2 for a P-bit integer element)
#: ceil:  E_s = ceil(log2(amax / (2^(P-1) - 1)))       (the smallest E_s with amax / 2^E_s <=
#:        2^(P-1) - 1: never saturates, sometimes one bit less precision)
SCALE_RULES = ("floor", "ceil")


def _sr_args(code, seed, sr_bits):
    if code != KQ.STOCHASTIC:
        if seed is not None or sr_bits is not None:
            raise ValueError("seed and sr_bits are only meaningful with rounding='stochastic'")
        return np.uint64(0), 1
    if seed is None:
        raise ValueError("rounding='stochastic' needs seed=<int>: the random bits of element i "
                         "are a function of (seed, i), so results are reproducible")
    rbits = DEFAULT_SR_BITS if sr_bits is None else check_int(sr_bits, "sr_bits", 1, 62)
    return seed_key(seed), rbits


def _check_finite(arr, name):
    if arr.size and not np.isfinite(arr).all():
        n_nan = int(np.isnan(arr).sum())
        n_inf = int(np.isinf(arr).sum())
        raise ValueError(f"dfp.quantize: {name} contains {n_nan} NaN and {n_inf} infinite "
                         f"value(s); DFP has no NaN or Inf and a shared exponent cannot be "
                         f"chosen for them: pass finite values")


def shared_exponents(amax, bits, scale_rule):
    """E_s for each block maximum (float array, >= 0): int64 array; 0 for all-zero blocks."""
    mant, ex = np.frexp(amax.astype(np.float64))       # amax = mant * 2^ex, mant in [0.5, 1)
    efmax = ex.astype(np.int64) - 1                    # floor(log2 amax), exact
    es = efmax - (bits - 2)
    if scale_rule == "ceil":
        # ceil(log2(amax / M)), M = 2^(P-1) - 1, is E_floor + 1 exactly when amax / 2^E_floor
        # = mant * 2^(P-1) exceeds M, i.e. mant > 1 - 2^(1-P); else E_floor.  (E_floor - 1 is
        # too small: amax / 2^(E_floor - 1) >= 2^(P-1) > M; E_floor + 1 always suffices:
        # amax / 2^(E_floor + 1) < 2^(P-2) <= M.)  Exact in float64: no log2 rounding here.
        es = es + (mant > 1.0 - 2.0 ** (1 - bits))
    return np.where(amax == 0, 0, es).astype(np.int64)


def quantize(x, bits=16, rounding="nearest", *, axis=None, block=None, scale_rule="floor",
             seed=None, sr_bits=None, name="x"):
    """Quantize a float tensor to DFP-P: integers i with |i| <= 2^(P-1) - 1 and shared exponents.

    Parameters
    ----------
    x : float16/float32/float64 array (or Python floats); NaN or Inf raise ValueError
    bits : int P in 8..16
    rounding : "nearest" (ties to even), "stochastic", "biased" (round half up), "floor"
    axis : None for one exponent per tensor; else the axis along which elements share an
        exponent (per row of an (m, k) matrix: axis=1; per column of (k, n): axis=0)
    block : None (the whole axis shares) or N: blocks of N consecutive elements along ``axis``
        (``axis`` defaults to the last axis when a block is given)
    scale_rule : "floor" (E_s = floor(log2 amax) - (P - 2), the paper's; may saturate one value
        per block) or "ceil" (E_s = ceil(log2(amax / (2^(P-1) - 1))), never saturates)
    seed : int, required for rounding="stochastic" (bits of element i: random_bits(key, i), i
        the C-order flat index); sr_bits : random bits per rounding (default 24, at most 62)
    name : how error messages call the tensor

    Returns
    -------
    DFPTensor with mantissa int16, exponent int32, ``saturated`` and ``underflowed`` counts
    """
    bits = check_bits(bits)
    code = parse_rounding(rounding)
    key, rbits = _sr_args(code, seed, sr_bits)
    if scale_rule not in SCALE_RULES:
        raise ValueError(f"scale_rule must be one of {SCALE_RULES}, got {scale_rule!r}")
    if not isinstance(name, str):
        raise TypeError("name must be a str")
    arr = as_float_array(x, name)
    _check_finite(arr, name)
    if block is not None and axis is None:
        axis = -1
    axis, block = normalize_layout(arr.ndim, axis, block)
    outer, L, inner, N, nb = layout_geometry(arr.shape, axis, block)
    es = shared_exponents(block_absmax(arr, arr.shape, axis, block), bits, scale_rule)
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=np.int16)
    counts = np.zeros((max(KQ.n_chunks(flat.size), 1), 2), dtype=np.int64)
    if flat.size:
        pmax = (1 << (bits - 1)) - 1
        KQ.quantize_kernel(flat, inner, L, nb, N, np.ascontiguousarray(es.reshape(-1)), pmax,
                           code, key, rbits, out, counts)
    exponent = es.reshape(exponent_shape(arr.shape, axis, block))
    return DFPTensor(out.reshape(arr.shape), exponent, bits, axis=axis, block=block,
                     saturated=int(counts[:, 0].sum()), underflowed=int(counts[:, 1].sum()))


def lzc32(v):
    """Leading zeros of |v| as an unsigned 32-bit word (|-2^31| = 2^31 has 0; 0 has 32)."""
    v = np.asarray(v, dtype=np.int64)
    mag = np.abs(v)
    bl = np.zeros(mag.shape, dtype=np.int64)
    nz = mag > 0
    # bit length via frexp: exact for integers below 2^53 (frexp(2^k) -> (0.5, k + 1)).
    bl[nz] = np.frexp(mag[nz].astype(np.float64))[1]
    return 32 - bl


def down_convert(t, bits=16, rounding="nearest", *, seed=None, sr_bits=None):
    """DFP -> DFP-P: the seed's DFP-32 -> DFP-16 down-conversion, block by block.

    R_s = max(0, (33 - P) - LZC32(max|I|)), the right shift that leaves max|I| with P - 1
    magnitude bits (bit length BL = 32 - LZC32; BL - R_s = P - 1 when BL >= P); then
    i = round(I / 2^R_s) with ``rounding`` and E_s += R_s.  When R_s > 0, max|I| / 2^R_s lies in
    [2^(P-2), 2^(P-1)) as in quantize, so the rounding can reach 2^(P-1): that value saturates
    to 2^(P-1) - 1 and is counted in ``saturated``.
    For P = 16 this is the seed's R_s = P - LZC when the LZC is counted over the 31 magnitude
    bits below the sign (LZC31 = LZC32 - 1).  No left shift: a block that already fits keeps its
    integers and exponent (R_s = 0).  Stochastic bits: random_bits(key, flat index).
    """
    t = check_dfp(t, "t")
    bits = check_bits(bits)
    code = parse_rounding(rounding)
    key, rbits = _sr_args(code, seed, sr_bits)
    m = t.mantissa.astype(np.int64)
    amax = block_absmax(m, t.shape, t.axis, t.block)
    rs = np.maximum(0, (33 - bits) - lzc32(amax))
    shifts = expand_blocks(rs, t.shape, t.axis, t.block)
    flat = m.reshape(-1)
    out = np.empty(flat.size, dtype=np.int16)
    counts = np.zeros((max(KQ.n_chunks(flat.size), 1), 1), dtype=np.int64)
    if flat.size:
        KQ.shift_kernel(flat, np.ascontiguousarray(shifts.reshape(-1)), (1 << (bits - 1)) - 1,
                        code, key, rbits, out, counts)
    exponent = (t.block_exponents() + rs).reshape(t.exponent.shape)
    return DFPTensor(out.reshape(t.shape), exponent, bits, axis=t.axis, block=t.block,
                     saturated=int(counts[:, 0].sum()))
