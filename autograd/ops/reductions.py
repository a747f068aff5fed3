"""Reductions and normalised exponentials: sum, mean, max (axis, keepdims), softmax, log_softmax.

A reduction is one kernel: it accumulates in float64 and rounds its result once to the op's
format (fp32 when the op is on the policy's fp32 list, else its input's).  softmax and log_softmax
subtract the maximum first (numerically stable) and are likewise evaluated in float64 and rounded
once.  max and the VJPs of sum are exact (they only select or copy values).

Attaches to Tensor: ``sum``, ``mean``, ``max``, ``softmax``, ``log_softmax``.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from ..policy import current_policy
from .._tensor import Tensor, make

__all__ = ["log_softmax", "max", "mean", "normalize_axes", "softmax", "sum"]


def normalize_axes(axis, ndim: int, op: str) -> tuple:
    """axis (None, int or tuple of ints, negatives allowed) as a sorted tuple of distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for a {ndim}-d tensor "
                             f"(accepted: {-ndim}..{ndim - 1})")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _check(x, op) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def _expand(g, axes, keepdims):
    return g if keepdims else np.expand_dims(g, axes)


def sum(x, axis=None, keepdims: bool = False) -> Tensor:
    x = _check(x, "sum")
    pol = current_policy()
    fmt = pol.op_format("sum", x.fmt)
    axes = normalize_axes(axis, x.ndim, "sum")
    out = B.round_to(np.sum(x.data, axis=axes, dtype=np.float64, keepdims=keepdims), fmt, pol)
    shape = x.shape

    def vjp(g):
        return (np.broadcast_to(_expand(g, axes, keepdims), shape),)
    return make(np.asarray(out), fmt, (x,), vjp, "sum", (True,))


def mean(x, axis=None, keepdims: bool = False) -> Tensor:
    x = _check(x, "mean")
    pol = current_policy()
    fmt = pol.op_format("mean", x.fmt)
    axes = normalize_axes(axis, x.ndim, "mean")
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    if n == 0:
        raise ValueError(f"mean: reducing over an empty axis (shape {x.shape}, axes {axes})")
    s = np.sum(x.data, axis=axes, dtype=np.float64, keepdims=keepdims)
    out = B.round_to(s / n, fmt, pol)
    shape = x.shape

    def vjp(g):
        return (np.broadcast_to(_expand(np.asarray(g, np.float64) / n, axes, keepdims), shape),)
    return make(np.asarray(out), fmt, (x,), vjp, "mean")


def max(x, axis=None, keepdims: bool = False) -> Tensor:
    """Maximum over axes; the gradient is split evenly among tied maxima (as torch.amax)."""
    x = _check(x, "max")
    fmt = current_policy().op_format("max", x.fmt)
    axes = normalize_axes(axis, x.ndim, "max")
    if x.size == 0:
        raise ValueError("max: the tensor is empty")
    dx = x.data
    m = np.max(dx, axis=axes, keepdims=True)
    out = B.to_carrier(m if keepdims else np.squeeze(m, axes), fmt)

    def vjp(g):
        mask = dx == m
        count = np.sum(mask, axis=axes, keepdims=True)
        return (np.where(mask, _expand(np.asarray(g, np.float64), axes, keepdims) / count, 0.0),)
    return make(np.asarray(out), fmt, (x,), vjp, "max")


def _axis(axis, ndim, op) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(axis, ndim, op)[0]


def softmax(x, axis: int = -1) -> Tensor:
    x = _check(x, "softmax")
    pol = current_policy()
    fmt = pol.op_format("softmax", x.fmt)
    ax = _axis(axis, x.ndim, "softmax")
    z = x.data.astype(np.float64)
    z = np.exp(z - np.max(z, axis=ax, keepdims=True))
    out = B.round_to(z / np.sum(z, axis=ax, keepdims=True), fmt, pol)

    def vjp(g):
        y = out.astype(np.float64)
        g = np.asarray(g, np.float64)
        return ((g - np.sum(g * y, axis=ax, keepdims=True)) * y,)
    return make(out, fmt, (x,), vjp, "softmax")


def log_softmax64(z: np.ndarray, axis: int) -> np.ndarray:
    """log softmax in float64 along ``axis``: z - max - log(sum(exp(z - max)))."""
    z = z - np.max(z, axis=axis, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def log_softmax(x, axis: int = -1) -> Tensor:
    x = _check(x, "log_softmax")
    pol = current_policy()
    fmt = pol.op_format("log_softmax", x.fmt)
    ax = _axis(axis, x.ndim, "log_softmax")
    out = B.round_to(log_softmax64(x.data.astype(np.float64), ax), fmt, pol)

    def vjp(g):
        g = np.asarray(g, np.float64)
        return (g - np.exp(out.astype(np.float64)) * np.sum(g, axis=ax, keepdims=True),)
    return make(out, fmt, (x,), vjp, "log_softmax")


# ----- Tensor's methods (attached here: ops import _tensor, never the reverse) ---------------
Tensor.sum, Tensor.mean, Tensor.max = sum, mean, max
Tensor.softmax, Tensor.log_softmax = softmax, log_softmax
