"""Conversions to DFP: :func:`quantize` (float -> DFP-P) and :func:`down_convert` (DFP -> DFP-P,
the seed's DFP-32 -> DFP-16 step with the shift taken from the leading-zero count).

Shared-exponent rules (documented in softfloat/dfp/__init__.py) are computed here on exact
quantities (max |x| is exact, from the bit patterns or numpy's max; frexp is exact); the
per-element rounding runs in the Numba kernels of _kernels_quant.py.  A dask array given to
quantize goes to _lazy.py.  Imports numpy and softfloat only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _driver
from .._driver import flag_table, launch, n_chunks
from .._primitives import F32_ABS, F32_INF, F64_ABS, F64_EXP_FIELD
from .._validate import as_float_array
from ..modes import Mode
from . import _kernels_quant as KQ
from ._tensor import (DFPTensor, block_absmax, check_bits, check_dfp, exponent_shape,
                      expand_blocks, layout_geometry, normalize_layout, parse_rounding, sr_args)

__all__ = ["quantize", "down_convert", "SCALE_RULES"]

#: floor: E_s = floor(log2 amax) - (P - 2)             (the paper's rule; OCP MX's
#:        floor(log2 amax) - emax_elem with emax_elem = P - 2 for a P-bit integer element)
#: ceil:  E_s = ceil(log2(amax / (2^(P-1) - 1)))       (the smallest E_s with amax / 2^E_s <=
#:        2^(P-1) - 1: never saturates, sometimes one bit less precision)
SCALE_RULES = ("floor", "ceil")


def _nonfinite_error(arr, name):
    n_nan = int(np.isnan(arr).sum())
    n_inf = int(np.isinf(arr).sum())
    return ValueError(f"dfp.quantize: {name} contains {n_nan} NaN and {n_inf} infinite "
                      f"value(s); DFP has no NaN or Inf and a shared exponent cannot be "
                      f"chosen for them: pass finite values")


#: (uint type, magnitude mask, first non-finite magnitude pattern) by float dtype
_PATTERN_OF = {np.dtype(np.float32): (np.uint32, F32_ABS, int(F32_INF)),
               np.dtype(np.float64): (np.uint64, F64_ABS, int(F64_EXP_FIELD))}


def _patterns(flat):
    """(uint view, magnitude mask, first non-finite magnitude pattern, uint type) of a flat
    float32/float64 array."""
    ut, mask, lim = _PATTERN_OF[flat.dtype]
    return flat.view(ut), mask, lim, ut


def tensor_absmax(flat: np.ndarray) -> float:
    """max |x| of a nonempty flat float32/float64 array, as a float (Inf when the array holds a
    NaN or an Inf), from one pass over the bit patterns (see _kernels_quant._absmax_chunk)."""
    xb, mask, lim, _ = _patterns(flat)
    part = np.empty(n_chunks(flat.size), dtype=xb.dtype)
    launch(KQ.ABSMAX[int(mask)], (), flat.size, xb, part)
    # (one chunk: no numpy reduction, ~1 us per call; the small tensors of training loops
    # took ~3 us in numpy's and + max, the kernel ~1 us)
    top = part[0] if part.size == 1 else part.max()
    if top >= lim:
        return math.inf
    return float(top.view(flat.dtype))


def layout_absmax(arr: np.ndarray, axis, block) -> np.ndarray:
    """max |x| of every block of a nonempty float32/float64 array in a layout with an axis: a
    float array of shape (outer, nb, inner), Inf where a block holds a NaN or an Inf."""
    outer, L, inner, N, nb = layout_geometry(arr.shape, axis, block)
    xb, mask, lim, ut = _patterns(arr.reshape(-1))
    out = np.empty(outer * nb * inner, dtype=xb.dtype)
    kern = (KQ.block_absmax_serial if arr.size <= _driver.SERIAL_MAX
            else KQ.block_absmax_kernel)
    kern(xb, L, inner, N, nb, mask, out)
    amax = out.view(arr.dtype).astype(np.float64)
    amax[out >= ut(lim)] = np.inf
    return amax.reshape(outer, nb, inner)


def shared_exponents(amax, bits, scale_rule):
    """E_s for each block maximum (float array, >= 0): int64 array; 0 for all-zero blocks."""
    mant, ex = np.frexp(np.asarray(amax, dtype=np.float64))  # amax = mant * 2^ex, mant in [.5, 1)
    efmax = ex.astype(np.int64) - 1                    # floor(log2 amax), exact
    es = efmax - (bits - 2)
    if scale_rule == "ceil":
        # ceil(log2(amax / M)), M = 2^(P-1) - 1, is E_floor + 1 exactly when amax / 2^E_floor
        # = mant * 2^(P-1) exceeds M, i.e. mant > 1 - 2^(1-P); else E_floor.  (E_floor - 1 is
        # too small: amax / 2^(E_floor - 1) >= 2^(P-1) > M; E_floor + 1 always suffices:
        # amax / 2^(E_floor + 1) < 2^(P-2) <= M.)  Exact in float64: no log2 rounding here.
        es = es + (mant > 1.0 - 2.0 ** (1 - bits))
    return np.where(amax == 0, 0, es).astype(np.int64)


def block_exponents(arr, axis, block, bits, scale_rule, name):
    """The shared exponents of ``arr`` (float32/float64) in a layout, as an int64 array of shape
    (outer, nb, inner); ValueError if arr holds NaN or Inf (found through the maxima: numpy's
    max propagates NaN, and an Inf is its block's maximum)."""
    outer, _, inner, _, nb = layout_geometry(arr.shape, axis, block)
    if axis is None:
        amax = tensor_absmax(arr.reshape(-1)) if arr.size else 0.0
        if not math.isfinite(amax):
            raise _nonfinite_error(arr, name)
        if amax == 0.0:
            return np.zeros((1, 1, 1), dtype=np.int64)
        mant, ex = math.frexp(amax)
        es = ex - 1 - (bits - 2) + (scale_rule == "ceil" and mant > 1.0 - 2.0 ** (1 - bits))
        return np.full((1, 1, 1), es, dtype=np.int64)
    if arr.size == 0:
        return np.zeros((outer, nb, inner), dtype=np.int64)
    amax = layout_absmax(arr, axis, block)
    if not np.isfinite(amax).all():
        raise _nonfinite_error(arr, name)
    return shared_exponents(amax, bits, scale_rule).reshape(outer, nb, inner)


def quantize_blocks(flat, geometry, es, mode, key, rbits, pmax, out, *, base=0, gidx=None):
    """Round the flat C-order array ``flat`` (of a tensor with ``geometry`` = layout_geometry)
    at the per-block exponents es (int64, (outer, nb, inner)) into ``out`` (int16, or int32 for
    unclipped results with pmax = 2^15); returns (saturated, underflowed).  Stochastic bits of
    element i: random_bits(key, base + i), or random_bits(key, gidx[i]) with a map."""
    _, L, inner, N, nb = geometry
    n = flat.size
    if n == 0:
        return 0, 0
    es = es.reshape(-1)
    if flat.dtype == np.float32 and mode != Mode.SR:
        kind = "float"
    elif flat.dtype == np.float32 and rbits <= KQ.FLOAT_SR_MAX_BITS:
        kind = "float_sr"
    else:
        kind = "int"
    # 2^-E in float64, exact: float32 data have E in [-149 - 14, 127 - 6 + 1]
    sc = es.astype(np.float64) if kind == "int" else np.ldexp(1.0, -es)
    counts = flag_table(n, 2)
    launch(KQ.EVALUATOR_STATIC[kind],
           (inner, L, N, nb, int(mode), np.uint64(key), int(base), int(rbits), int(pmax)),
           n, flat, es, sc, gidx, out, counts)
    # small tensors (one chunk): no reduction at all (a numpy reduction costs ~1.5 us per call)
    sat, und = (counts[0] if len(counts) == 1 else counts.sum(axis=0)).tolist()
    return sat, und


def quantize(x, bits=16, mode=None, *, rounding=None, axis=None, block=None,
             scale_rule="floor", seed=None, sr_bits=None, name="x"):
    """Quantize a float tensor to DFP-P: integers i with |i| <= 2^(P-1) - 1 and shared exponents.

    Parameters
    ----------
    x : float16/float32/float64 array (or Python floats), or a dask array of those (a lazy
        result, see softfloat/dfp/_lazy.py); NaN or Inf raise ValueError
    bits : int P in 8..16
    mode : softfloat.Mode or its name (default RNE); DFP's names are aliases: "nearest" (RNE,
        ties to even), "stochastic" (SR), "biased" (RHU, round half up), "floor" (RDN); rna,
        rtz, rup and rto are available too.  ``rounding=`` is the older name of the same
        argument (give one of them)
    axis : None for one exponent per tensor; else the axis along which elements share an
        exponent (per row of an (m, k) matrix: axis=1; per column of (k, n): axis=0)
    block : None (the whole axis shares) or N: blocks of N consecutive elements along ``axis``
        (``axis`` defaults to the last axis when a block is given)
    scale_rule : "floor" (E_s = floor(log2 amax) - (P - 2), the paper's; may saturate one value
        per block) or "ceil" (E_s = ceil(log2(amax / (2^(P-1) - 1))), never saturates)
    seed : int, required by mode SR and refused by the other modes (bits of element i:
        random_bits(key, i), i the C-order flat index); sr_bits : random bits per rounding
        (SR only; default 24, at most 62)
    name : how error messages call the tensor

    Returns
    -------
    DFPTensor with mantissa int16, exponent int32, ``saturated`` and ``underflowed`` counts
    """
    bits = check_bits(bits)
    mode = parse_rounding(mode, rounding, "dfp.quantize")
    key, rbits = sr_args(mode, seed, sr_bits, "dfp.quantize")
    if scale_rule not in SCALE_RULES:
        raise ValueError(f"scale_rule must be one of {SCALE_RULES}, got {scale_rule!r}")
    if not isinstance(name, str):
        raise TypeError("name must be a str")
    if block is not None and axis is None:
        axis = -1
    if _is_dask(x):
        from ._lazy import quantize_lazy
        return quantize_lazy(x, bits, mode, key, rbits, axis, block, scale_rule, name)
    arr = as_float_array(x, name)
    axis, block = normalize_layout(arr.ndim, axis, block)
    es = block_exponents(arr, axis, block, bits, scale_rule, name)
    out = np.empty(arr.shape, dtype=np.int16)
    sat, und = quantize_blocks(arr.reshape(-1), layout_geometry(arr.shape, axis, block), es,
                               mode, key, rbits, (1 << (bits - 1)) - 1, out.reshape(-1))
    exponent = es.astype(np.int32).reshape(exponent_shape(arr.shape, axis, block))
    return DFPTensor._trusted(out, exponent, bits, axis, block, sat, und)


def _is_dask(x) -> bool:
    """A dask array, recognised by duck typing (softfloat never imports dask)."""
    return (not isinstance(x, np.ndarray) and hasattr(x, "map_blocks") and hasattr(x, "chunks")
            and hasattr(x, "compute"))


def lzc32(v):
    """Leading zeros of |v| as an unsigned 32-bit word (|-2^31| = 2^31 has 0; 0 has 32)."""
    v = np.asarray(v, dtype=np.int64)
    mag = np.abs(v)
    bl = np.zeros(mag.shape, dtype=np.int64)
    nz = mag > 0
    # bit length via frexp: exact for integers below 2^53 (frexp(2^k) -> (0.5, k + 1)).
    bl[nz] = np.frexp(mag[nz].astype(np.float64))[1]
    return 32 - bl


def down_convert(t, bits=16, mode=None, *, rounding=None, seed=None, sr_bits=None):
    """DFP -> DFP-P: the seed's DFP-32 -> DFP-16 down-conversion, block by block.

    R_s = max(0, (33 - P) - LZC32(max|I|)), the right shift that leaves max|I| with P - 1
    magnitude bits (bit length BL = 32 - LZC32; BL - R_s = P - 1 when BL >= P); then
    i = round(I / 2^R_s) in ``mode`` (as in quantize; ``rounding=`` its older name) and
    E_s += R_s.  When R_s > 0, max|I| / 2^R_s lies in [2^(P-2), 2^(P-1)) as in quantize, so the
    rounding can reach 2^(P-1): that value saturates to 2^(P-1) - 1 and is counted in
    ``saturated``.
    For P = 16 this is the seed's R_s = P - LZC when the LZC is counted over the 31 magnitude
    bits below the sign (LZC31 = LZC32 - 1).  No left shift: a block that already fits keeps its
    integers and exponent (R_s = 0).  Stochastic bits: random_bits(key, flat index).
    """
    t = check_dfp(t, "t")
    bits = check_bits(bits)
    mode = parse_rounding(mode, rounding, "dfp.down_convert")
    key, rbits = sr_args(mode, seed, sr_bits, "dfp.down_convert")
    m = t.mantissa.astype(np.int64)
    amax = block_absmax(m, t.shape, t.axis, t.block)
    rs = np.maximum(0, (33 - bits) - lzc32(amax))
    shifts = expand_blocks(rs, t.shape, t.axis, t.block)
    flat = m.reshape(-1)
    out = np.empty(flat.size, dtype=np.int16)
    counts = flag_table(flat.size, 1)
    launch(KQ.SHIFT, ((1 << (bits - 1)) - 1, int(mode), np.uint64(key), int(rbits)),
           flat.size, flat, np.ascontiguousarray(shifts.reshape(-1)), out, counts)
    exponent = (t.block_exponents() + rs).reshape(t.exponent.shape)
    return DFPTensor(out.reshape(t.shape), exponent, bits, axis=t.axis, block=t.block,
                     saturated=int(counts[:, 0].sum()))
