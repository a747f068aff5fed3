"""mx.quantize of a dask array: lazily, chunk by chunk, bit-identical to the numpy call.

A dask array is recognised by duck typing (``map_blocks``, ``chunks``, ``rechunk``); softfloat
never imports dask.  Every block of a block format depends on its own elements only (NVFP4's
tensor scale is an argument, not computed from the data), so a chunk made of whole blocks can
be quantized alone.  Stochastic rounding keys element i's bits by its global C-order flat
index: a chunk that is one contiguous run of that index quantizes with ``index_offset`` = the
flat index of its first element.  Both hold when x is chunked along axis 0 only, with chunk
boundaries on block boundaries where axis 0 is blocked; x is rechunked to that (the other axes
whole) when it is not already so, and the result has those chunks.

The arguments are checked at once, with the numpy call's messages (quantize runs on a 1-element
sample of x's dtype and layout).  Then ONE ``map_blocks`` task per chunk quantizes the chunk
into a record per element: its value, its code, its block's scale value and code, and (at the
chunk's first element) the chunk's saturated and flushed counts.  The BlockTensor's arrays are
views of that one intermediate -- ``scales`` / ``scale_bits`` take every block's first element
(a strided slice) -- so computing them together (``BlockTensor.compute()``) quantizes every
chunk once.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import math

import numpy as np

from ._tensor import BlockTensor, expand_scales, normalize_layout

__all__ = ["RECORD", "is_dask", "quantize_lazy"]

#: The per-element record of the lazy intermediate.
RECORD = np.dtype([("v", np.float32), ("b", np.uint8), ("sv", np.float32), ("sb", np.uint8),
                   ("nsat", np.int64), ("nflush", np.int64)])


def is_dask(x) -> bool:
    """A dask array, recognised by duck typing (softfloat never imports dask)."""
    return (not isinstance(x, np.ndarray) and hasattr(x, "map_blocks")
            and hasattr(x, "chunks") and hasattr(x, "rechunk") and hasattr(x, "compute"))


def _row_chunks(x, g):
    """x chunked along axis 0 only, with boundaries on multiples of g there."""
    sizes = x.chunks[0]
    whole = all(len(c) == 1 for c in x.chunks[1:])
    if whole and all(c % g == 0 for c in sizes[:-1]):
        return x
    rows = g * max(1, max(sizes) // g)
    return x.rechunk({0: rows, **{d: -1 for d in range(1, x.ndim)}})


def _chunk(chunk, quantize, fmt, block, axis, kwargs, offset, inner, block_info=None):
    out = np.zeros(chunk.shape, dtype=RECORD)
    if chunk.size == 0:
        return out
    r0 = block_info[0]["array-location"][0][0]
    q = quantize(np.asarray(chunk), fmt, block=block, axis=axis,
                 index_offset=offset + r0 * inner, **kwargs)
    out["v"] = q.elements
    out["b"] = q.element_bits
    out["sv"] = expand_scales(q.scales, q._geom, chunk.shape)
    out["sb"] = expand_scales(q.scale_bits, q._geom, chunk.shape)
    flat = out.reshape(-1)
    flat["nsat"][0] = q.saturated
    flat["nflush"][0] = q.flushed
    return out


def quantize_lazy(quantize, x, fmt, block, axis, kwargs, index_offset):
    """mx.quantize of a dask array x; ``quantize`` is the numpy entry point, ``kwargs`` the
    remaining arguments (scale_rule, mode, seed, ...)."""
    dt = np.dtype(x.dtype)
    if dt.kind != "f" or dt.itemsize > 8:
        raise TypeError(f"mx.quantize: a dask array of dtype {dt} is not accepted; pass real "
                        "floating-point data (float16, float32 or float64)")
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (a block needs elements)")
    # every argument checked now, with the numpy call's messages
    probe = quantize(np.zeros((1,) * x.ndim, dtype=dt), fmt, block=block, axis=axis,
                     index_offset=index_offset, **kwargs)
    blk, axes, geom, _ = normalize_layout(x.shape, probe.format, block, axis)
    g = blk[axes.index(0)] if 0 in axes else 1
    x = _row_chunks(x, g)
    inner = math.prod(x.shape[1:])
    ax = axes[0] if len(blk) == 1 else None
    inter = x.map_blocks(_chunk, quantize, probe.format, blk, ax, kwargs, int(index_offset),
                         inner, dtype=RECORD)
    first = tuple(slice(None, None, blk[axes.index(d)]) if d in axes else slice(None)
                  for d in range(x.ndim))
    t = BlockTensor(probe.format, inter["v"], inter["b"], inter["sv"][first],
                    inter["sb"][first], block=blk, axis=axes, geom=geom,
                    scale_rule=probe.scale_rule, tensor_scale=probe.tensor_scale,
                    saturated=inter["nsat"].sum(), flushed=inter["nflush"].sum(),
                    mode=probe.mode)
    t._lazy = inter
    return t
