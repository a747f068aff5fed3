"""dfp.quantize of a dask array: shared exponents now (one reduction), integers lazily.

A dask array is recognised by duck typing (``map_blocks``, ``chunks``, ``compute``); softfloat
never imports dask.  What is computed when:

* EAGERLY, when quantize is called: the block maxima max |x| (one pass over x: dask's own
  ``max`` reduction per tensor or per slice; one max per block of N for blocks, chunk by chunk),
  hence the NaN/Inf check (a ValueError naming the tensor, as for numpy input) and the shared
  exponents, which the result holds as an ordinary numpy array.  A shared exponent is a
  function of the whole block, so no integer can be produced before that reduction.
* LAZILY: the integers.  One ``map_blocks`` task per chunk of x rounds the chunk with the
  exponents of its blocks and records, per element, whether it saturated or underflowed; the
  result's ``mantissa`` (int16) and its ``saturated`` / ``underflowed`` counts (0-d dask
  arrays) are views of that one intermediate, so computing them together (dask.compute, or
  ``DFPTensor.compute()``) rounds every chunk once.

Identical to the numpy call on the whole array, stochastic rounding included: element i draws
the random bits of its GLOBAL C-order flat index (a chunk passes the index of its first element
when its elements are one contiguous run of the whole array, else the map of its elements'
indices).  For blocks of N, chunk boundaries along the shared axis must fall on block
boundaries; x is rechunked along that axis (to multiples of N) when they do not, and the
result has those chunks.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import as_float_array
from . import _quantize as Q
from ._tensor import (DFPTensor, chunk_exponents, exponent_shape, layout_geometry,
                      normalize_layout)

__all__ = ["quantize_lazy", "RECORD"]

#: The per-element record of the lazy intermediate: integer, saturated?, underflowed?
RECORD = np.dtype([("m", np.int16), ("s", np.bool_), ("u", np.bool_)])


def _nonfinite_lazy(x, name):
    n_nan = int(np.isnan(x).sum().compute())
    n_inf = int(np.isinf(x).sum().compute())
    return ValueError(f"dfp.quantize: {name} contains {n_nan} NaN and {n_inf} infinite "
                      f"value(s); DFP has no NaN or Inf and a shared exponent cannot be "
                      f"chosen for them: pass finite values")


def _block_chunks(x, axis, block):
    """x with chunk boundaries along ``axis`` on multiples of ``block`` (rechunked if needed)."""
    sizes = x.chunks[axis]
    if all(c % block == 0 for c in sizes[:-1]):
        return x
    return x.rechunk({axis: block * max(1, max(sizes) // block)})


def _chunk_block_absmax(chunk, axis, block):
    arr = as_float_array(chunk)
    out = Q.layout_absmax(arr, axis, block) if arr.size else np.zeros(
        exponent_shape(arr.shape, axis, block))
    return out.reshape(exponent_shape(arr.shape, axis, block))


def _amax(x, axis, block):
    """The block maxima as a numpy float array of the exponent's shape (computed now)."""
    if axis is None:
        return np.asarray(abs(x).max().compute(), dtype=np.float64).reshape(())
    if block is None:
        return np.asarray(abs(x).max(axis=axis, keepdims=True).compute(), dtype=np.float64)
    nbs = tuple(-(-c // block) for c in x.chunks[axis])
    chunks = tuple(nbs if d == axis else c for d, c in enumerate(x.chunks))
    return x.map_blocks(_chunk_block_absmax, axis, block, chunks=chunks,
                        dtype=np.float64).compute()


def _global_index(loc, shape):
    """(base, None) when the chunk at ``loc`` is one contiguous run of the C-order flat index of
    an array of ``shape``, else (0, the int64 map of its elements' global indices)."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    base = sum(a * s for (a, _), s in zip(loc, strides))
    sizes = [b - a for a, b in loc]
    d = len(shape) - 1
    while d > 0 and sizes[d] == shape[d]:
        d -= 1
    if all(sz == 1 for sz in sizes[:d]):
        return base, None
    idx = np.zeros(sizes, dtype=np.int64)
    for k, ((a, b), s) in enumerate(zip(loc, strides)):
        shp = [1] * len(shape)
        shp[k] = b - a
        idx += (np.arange(a, b, dtype=np.int64) * s).reshape(shp)
    return 0, idx.reshape(-1)


def _quantize_chunk(chunk, es, axis, block, bits, mode, key, rbits, block_info=None):
    """One chunk -> RECORD array: the integers, saturated and underflowed flags."""
    loc = block_info[0]["array-location"]
    arr = as_float_array(chunk)
    out = np.empty(arr.shape, dtype=RECORD)
    if arr.size == 0:
        return out
    base, gidx = _global_index(loc, block_info[0]["shape"])
    e = chunk_exponents(es, loc, axis, block).astype(np.int64)
    geo = layout_geometry(arr.shape, axis, block)
    outer, _, inner, _, nb = geo
    # Unclipped (pmax = 2^15 >= every rounding result) into int32, so that the saturated
    # elements can be told apart from an integer that is exactly 2^(P-1) - 1.
    raw = np.empty(arr.size, dtype=np.int32)
    Q.quantize_blocks(arr.reshape(-1), geo, e.reshape(outer, nb, inner), mode, key, rbits,
                      1 << 15, raw, base=base, gidx=gidx)
    pmax = (1 << (bits - 1)) - 1
    m = np.clip(raw, -pmax, pmax).reshape(arr.shape)
    out["m"] = m
    out["s"] = m != raw.reshape(arr.shape)
    out["u"] = (m == 0) & (arr != 0)
    return out


def quantize_lazy(x, bits, mode, key, rbits, axis, block, scale_rule, name):
    """dfp.quantize of a dask array (arguments already checked by quantize)."""
    if np.dtype(x.dtype).kind != "f" or np.dtype(x.dtype).itemsize > 8:
        raise TypeError(f"{name}: a dask array of dtype {x.dtype} is not accepted; pass real "
                        "floating-point data (float16, float32 or float64)")
    axis, block = normalize_layout(x.ndim, axis, block)
    if block is not None:
        x = _block_chunks(x, axis, block)
    amax = _amax(x, axis, block)
    if not np.isfinite(amax).all():
        raise _nonfinite_lazy(x, name)
    es = Q.shared_exponents(amax, bits, scale_rule).reshape(exponent_shape(x.shape, axis, block))
    inter = x.map_blocks(_quantize_chunk, es, axis, block, bits, mode, key, rbits,
                         dtype=RECORD)
    t = DFPTensor._trusted(inter["m"], es.astype(np.int32), bits, axis, block,
                           inter["s"].sum(), inter["u"].sum())
    t._lazy = inter
    return t
