"""Shape ops: reshape, transpose, indexing, concat, stack, and embedding (a gather of rows).

None of them rounds: outputs are the inputs' values (concat and stack store them in the widest
input format, an exact widening).  Their VJPs route gradients back exactly, except where an
index repeats (advanced indexing, embedding lookups of the same row): there the gradients of the
repeats are summed in float64 and rounded once into the input's gradient format.

Attaches to Tensor: indexing ``t[i]``, ``reshape``, ``transpose``, ``flatten``, ``T``.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from ..policy import current_policy
from .._tensor import Tensor, make

__all__ = ["as_index", "concat", "embedding", "getitem", "reshape", "stack", "transpose"]


def _check(x, op) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def reshape(x, shape) -> Tensor:
    x = _check(x, "reshape")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    try:
        out = x.data.reshape(shape)
    except ValueError:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {x.shape} ({x.size} "
                         f"elements) into {shape}") from None
    src = x.shape
    return make(out, x.fmt, (x,), lambda g: (np.reshape(g, src),), "reshape", (True,))


def transpose(x, axes=None) -> Tensor:
    """Permute axes (reverse them when axes is None), as numpy.transpose."""
    x = _check(x, "transpose")
    if axes is not None:
        axes = tuple(int(a) % x.ndim if -x.ndim <= int(a) < x.ndim else -1 for a in axes)
        if sorted(axes) != list(range(x.ndim)):
            raise ValueError(f"transpose: axes must be a permutation of 0..{x.ndim - 1}, "
                             f"got {axes}")
    out = np.transpose(x.data, axes)
    inv = None if axes is None else tuple(np.argsort(axes))
    return make(out, x.fmt, (x,), lambda g: (np.transpose(g, inv),), "transpose", (True,))


def _index_part(i):
    if isinstance(i, Tensor):
        return i.data.astype(np.int64)
    if isinstance(i, list):
        return np.asarray(i)
    return i


def _is_basic(idx) -> bool:
    parts = idx if isinstance(idx, tuple) else (idx,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer))
               for p in parts)


def getitem(x, idx) -> Tensor:
    """x[idx] with numpy semantics (basic and advanced indexing; Tensors as index arrays)."""
    x = _check(x, "getitem")
    idx = tuple(_index_part(i) for i in idx) if isinstance(idx, tuple) else _index_part(idx)
    try:
        out = np.asarray(x.data[idx])
    except IndexError as e:
        raise IndexError(f"getitem: {e} (tensor shape {x.shape})") from None
    basic = _is_basic(idx)
    shape, dtype = x.shape, x.data.dtype

    def vjp(g):
        if basic:
            z = np.zeros(shape, dtype=np.result_type(g, dtype))
            z[idx] = g
        else:
            z = np.zeros(shape, dtype=np.float64)
            np.add.at(z, idx, g)
        return (z,)
    return make(out, x.fmt, (x,), vjp, "getitem", (basic,))


def _tensors(ts, op):
    ts = list(ts)
    if not ts:
        raise ValueError(f"{op}: needs at least one tensor")
    for t in ts:
        _check(t, op)
    return ts


def concat(tensors, axis: int = 0) -> Tensor:
    ts = _tensors(tensors, "concat")
    nd = ts[0].ndim
    if nd == 0:
        raise ValueError("concat: zero-dimensional tensors cannot be concatenated; use stack")
    if not -nd <= axis < nd:
        raise ValueError(f"concat: axis {axis} out of range for {nd}-d tensors")
    ax = axis % nd
    def rest(t):
        return t.shape[:ax] + t.shape[ax + 1:]
    for t in ts:
        if t.ndim != nd or rest(t) != rest(ts[0]):
            raise ValueError(f"concat: shapes {[t.shape for t in ts]} differ outside axis {ax}")
    fmt = current_policy().op_format("concat", *[t.fmt for t in ts])
    out = np.concatenate([B.to_carrier(t.data, fmt) for t in ts], axis=ax)
    cuts = np.cumsum([t.shape[ax] for t in ts])[:-1]
    return make(out, fmt, tuple(ts), lambda g: tuple(np.split(g, cuts, axis=ax)), "concat",
                (True,) * len(ts))


def stack(tensors, axis: int = 0) -> Tensor:
    ts = _tensors(tensors, "stack")
    if any(t.shape != ts[0].shape for t in ts):
        raise ValueError(f"stack: all tensors need the same shape, got {[t.shape for t in ts]}")
    nd = ts[0].ndim + 1
    if not -nd <= axis < nd:
        raise ValueError(f"stack: axis {axis} out of range for the {nd}-d result")
    ax = axis % nd
    fmt = current_policy().op_format("concat", *[t.fmt for t in ts])
    out = np.stack([B.to_carrier(t.data, fmt) for t in ts], axis=ax)
    n = len(ts)
    return make(out, fmt, tuple(ts), lambda g: tuple(np.take(g, i, axis=ax) for i in range(n)),
                "stack", (True,) * n)


def as_index(idx, n: int, op: str) -> np.ndarray:
    """Integer index array from an int array, list or Tensor, each in 0..n-1."""
    arr = np.asarray(idx.data if isinstance(idx, Tensor) else idx)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.round(arr)):
            raise TypeError(f"{op}: indices must be integers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise ValueError(f"{op}: index out of range: accepted 0..{n - 1}, got "
                         f"{arr.min()}..{arr.max()}")
    return arr.astype(np.int64, copy=False)


def embedding(indices, weight) -> Tensor:
    """Rows of ``weight`` (num_embeddings x dim) picked by integer ``indices`` (any shape)."""
    weight = _check(weight, "embedding")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-d (num_embeddings, dim), got {weight.shape}")
    idx = as_index(indices, weight.shape[0], "embedding")
    fmt = current_policy().op_format("embedding", weight.fmt)
    out = B.to_carrier(weight.data[idx], fmt)
    shape = weight.shape

    def vjp(g):
        z = np.zeros(shape, dtype=np.float64)
        np.add.at(z, idx.reshape(-1), np.reshape(g, (-1, shape[1])))
        return (z,)
    return make(out, fmt, (weight,), vjp, "embedding")


# ----- Tensor's methods (attached here: ops import _tensor, never the reverse) ---------------
def _reshape_method(self, *shape):
    """``t.reshape(2, 3)`` or ``t.reshape((2, 3))``."""
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def _transpose_method(self, *axes):
    """``t.transpose()`` (all axes reversed), ``t.transpose(1, 0)`` or ``t.transpose((1, 0))``."""
    return transpose(self, axes[0] if len(axes) == 1 else (axes or None))


def _flatten_method(self, start_dim=0):
    """The dimensions from ``start_dim`` on flattened into one."""
    return reshape(self, self.shape[:start_dim] + (-1,))


Tensor.__getitem__ = getitem
Tensor.reshape, Tensor.transpose = _reshape_method, _transpose_method
Tensor.flatten = _flatten_method
Tensor.T = property(lambda self: transpose(self, None))
