"""Elementwise softfloat calls on dask arrays, lazily, chunk by chunk, without importing dask.

Provides
    is_dask_array(x)                       duck typing: ``map_blocks``, ``chunks`` and ``compute``
    chunk_runs(loc, shape)                 the contiguous runs of a chunk in C-order flat indices
    map_elementwise(fn, arrays, *, dtype, index_offset, name)
                                           one ``map_blocks`` task per chunk calling
                                           ``fn(*chunk_operands, index_offset=...)``

A dask array is recognised by its methods; softfloat never imports dask (the layering rule:
softfloat imports numpy and numba only), so the result is built with the input's own
``map_blocks``.  Results equal the numpy call on the whole array bit for bit, stochastic rounding
included: element i of the whole array draws the random bits of its global C-order flat index
``index_offset + i``.  A chunk is one contiguous run of flat indices when it spans every axis after
its first partial one (e.g. a 1-d chunk, or a block of whole rows); otherwise it is cut into such
runs (each row segment of a 2-d block), and ``fn`` is called once per run with that run's offset.

Any elementwise softfloat function taking ``index_offset=`` can use this wrapper: ``sf.round`` and
the arithmetic do; dfp.quantize and mx.quantize can (their block-wise exponents aside).

IEEE flag counts are not collected through dask (``flags=`` with a dask array is a ValueError
asking to compute first or to round the numpy array): counting them would force the lazy graph.

Imports numpy only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["is_dask_array", "chunk_runs", "map_elementwise"]


def is_dask_array(x) -> bool:
    """True for a dask array (or anything with its map_blocks / chunks / compute interface)."""
    return (not isinstance(x, np.ndarray) and hasattr(x, "map_blocks")
            and hasattr(x, "chunks") and hasattr(x, "compute"))


def chunk_runs(loc, shape):
    """The chunk at ``loc`` ((start, stop) per axis) of an array of ``shape`` as contiguous runs
    of the whole array's C-order flat index: a list of (global offset of the run, index of the
    run's first element in the chunk's flat order, length).  One run when the chunk spans every
    axis after its first partial one."""
    nd = len(shape)
    sizes = [b - a for a, b in loc]
    if nd == 0:
        return [(0, 0, 1)]
    strides = [math.prod(shape[d + 1:]) for d in range(nd)]
    # k: the last axis the chunk does not span in full (runs are contiguous from there on).
    k = nd - 1
    while k > 0 and sizes[k] == shape[k]:
        k -= 1
    run = math.prod(sizes[k:])
    runs = []
    for j, idx in enumerate(np.ndindex(*sizes[:k])):
        off = sum((a + i) * s for (a, _), i, s in zip(loc[:k], idx, strides[:k]))
        runs.append((off + loc[k][0] * strides[k], j * run, run))
    return runs


def _apply(*blocks, fn, dtype, index_offset, shape, block_info=None):
    """One chunk: fn on each contiguous run of its elements, with the run's global offset."""
    info = block_info[None]
    loc = info["array-location"]
    out_shape = tuple(b - a for a, b in loc)
    # array operands flattened in C order (scalars passed as they are)
    flat = [b.reshape(-1) if isinstance(b, np.ndarray) else b for b in blocks]
    out = np.empty(math.prod(out_shape), dtype=dtype)
    for off, start, n in chunk_runs(loc, shape):
        args = [f[start:start + n] if isinstance(f, np.ndarray) else f for f in flat]
        out[start:start + n] = fn(*args, index_offset=index_offset + off)
    return out.reshape(out_shape)


def map_elementwise(fn, arrays, *, dtype, index_offset: int, name: str):
    """fn applied lazily to the dask operands ``arrays`` (dask arrays of one shape, or scalars),
    chunk by chunk, each run of elements given its global ``index_offset``; returns a dask array
    of ``dtype`` with the chunks of the first dask operand."""
    lead = next(a for a in arrays if is_dask_array(a))
    shape = tuple(int(s) for s in lead.shape)
    if any(math.isnan(s) for s in lead.shape):
        raise ValueError(f"{name}: a dask array of unknown shape (NaN chunk sizes) is not "
                         "accepted; call compute_chunk_sizes() first")
    ops = []
    for a in arrays:
        if is_dask_array(a):
            if tuple(a.shape) != shape:
                raise ValueError(f"{name}: dask operands must have the same shape, got "
                                 f"{tuple(a.shape)} and {shape}")
            ops.append(a.rechunk(lead.chunks) if a.chunks != lead.chunks else a)
        elif isinstance(a, np.ndarray) and a.ndim > 0:
            raise TypeError(f"{name}: a numpy array cannot be combined with a dask array; "
                            "pass both as dask arrays (dask.array.from_array) or a scalar")
        else:
            ops.append(a)
    first = next(i for i, a in enumerate(arrays) if is_dask_array(a))
    others = ops[:first] + ops[first + 1:]

    def block_fn(*blocks, block_info=None):
        blocks = list(blocks)
        ordered = blocks[1:first + 1] + [blocks[0]] + blocks[first + 1:]
        return _apply(*ordered, fn=fn, dtype=dtype, index_offset=index_offset, shape=shape,
                      block_info=block_info)

    return ops[first].map_blocks(block_fn, *others, dtype=dtype)
