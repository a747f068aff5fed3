"""Normalisation: batch_norm (training and evaluation, running statistics) and layer_norm.

Each is one kernel, as in cuDNN: statistics, normalisation and the affine transform are computed
in float64 and the output is rounded once to the op's format (fp32 when the op is on the policy's
fp32 list, which is how O2 keeps batch-norm in fp32).  The VJPs are the closed forms, also one
float64 kernel per input gradient.  Running statistics are buffers (Tensors without grad): each
update is rounded once into the buffer's own format.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from ..policy import current_policy
from .._tensor import Tensor, make

__all__ = ["batch_norm", "layer_norm"]


def _opt(t, name, shape, op):
    if t is None:
        return None
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor or None, got {type(t).__name__}")
    if t.shape != shape:
        raise ValueError(f"{op}: {name} must have shape {shape}, got {t.shape}")
    return t


def batch_norm(x, running_mean=None, running_var=None, weight=None, bias=None, *,
               training: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation over every axis but 1 of x (N, C, ...), as torch.nn.functional.
    Training normalises with the batch statistics (biased variance) and, when running buffers
    are given, updates them with momentum (unbiased variance); evaluation uses the buffers."""
    if not isinstance(x, Tensor):
        raise TypeError(f"batch_norm: x must be a Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: x must be (N, C, ...), got shape {x.shape}")
    c = x.shape[1]
    rm = _opt(running_mean, "running_mean", (c,), "batch_norm")
    rv = _opt(running_var, "running_var", (c,), "batch_norm")
    w = _opt(weight, "weight", (c,), "batch_norm")
    b = _opt(bias, "bias", (c,), "batch_norm")
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"batch_norm: momentum must be in [0, 1], got {momentum}")
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, c) + (1,) * (x.ndim - 2)
    n = x.size // c
    pol = current_policy()
    fmt = pol.op_format("batch_norm", x.fmt, *[t.fmt for t in (w, b) if t is not None])
    x64 = x.data.astype(np.float64)
    if training:
        if n < 2:
            raise ValueError(f"batch_norm: training needs more than one value per channel, "
                             f"got input shape {x.shape}")
        mean = x64.mean(axis=axes)
        var = x64.var(axis=axes)
        if rm is not None:
            rm.data = B.round_to((1 - momentum) * rm.data + momentum * mean, rm.fmt, pol)
        if rv is not None:
            rv.data = B.round_to((1 - momentum) * rv.data + momentum * var * n / (n - 1),
                                 rv.fmt, pol)
    else:
        if rm is None or rv is None:
            raise ValueError("batch_norm: evaluation mode needs running_mean and running_var")
        mean, var = rm.data.astype(np.float64), rv.data.astype(np.float64)
    invstd = 1.0 / np.sqrt(var + eps)
    w64 = np.ones(c) if w is None else w.data.astype(np.float64)
    xhat = (x64 - mean.reshape(bshape)) * invstd.reshape(bshape)
    y = xhat * w64.reshape(bshape)
    if b is not None:
        y = y + b.data.astype(np.float64).reshape(bshape)
    out = B.round_to(y, fmt, pol)
    dx, mean_s, invstd_s = x.data, mean.reshape(bshape), invstd.reshape(bshape)
    parents = (x,) + tuple(t for t in (w, b) if t is not None)

    def vjp(g):
        g = np.asarray(g, np.float64)
        xh = (dx.astype(np.float64) - mean_s) * invstd_s
        gxh = g * w64.reshape(bshape)
        gx = None
        if x.requires_grad:
            if training:
                # d/dx of (x - mu) / sigma with mu, sigma of the batch:
                # (N gxh - sum gxh - xh sum(gxh xh)) / (N sigma)
                gx = (invstd_s / n) * (n * gxh - gxh.sum(axis=axes, keepdims=True)
                                       - xh * (gxh * xh).sum(axis=axes, keepdims=True))
            else:
                gx = gxh * invstd_s
        rest = []
        if w is not None:
            rest.append((g * xh).sum(axis=axes) if w.requires_grad else None)
        if b is not None:
            rest.append(g.sum(axis=axes) if b.requires_grad else None)
        return (gx, *rest)
    return make(out, fmt, parents, vjp, "batch_norm")


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, as torch.nn.functional."""
    if not isinstance(x, Tensor):
        raise TypeError(f"layer_norm: x must be a Tensor, got {type(x).__name__}")
    ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
        else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or x.shape[x.ndim - k:] != ns:
        raise ValueError(f"layer_norm: normalized_shape {ns} must match the trailing dims of "
                         f"x {x.shape}")
    w = _opt(weight, "weight", ns, "layer_norm")
    b = _opt(bias, "bias", ns, "layer_norm")
    axes = tuple(range(x.ndim - k, x.ndim))
    m = int(np.prod(ns))
    pol = current_policy()
    fmt = pol.op_format("layer_norm", x.fmt, *[t.fmt for t in (w, b) if t is not None])
    x64 = x.data.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    invstd = 1.0 / np.sqrt(x64.var(axis=axes, keepdims=True) + eps)
    xhat = (x64 - mean) * invstd
    w64 = np.ones(ns) if w is None else w.data.astype(np.float64)
    y = xhat * w64
    if b is not None:
        y = y + b.data.astype(np.float64)
    out = B.round_to(y, fmt, pol)
    dx = x.data
    lead = tuple(range(x.ndim - k))
    parents = (x,) + tuple(t for t in (w, b) if t is not None)

    def vjp(g):
        g = np.asarray(g, np.float64)
        xh = (dx.astype(np.float64) - mean) * invstd
        gx = None
        if x.requires_grad:
            gxh = g * w64
            gx = invstd * (gxh - gxh.sum(axis=axes, keepdims=True) / m
                           - xh * (gxh * xh).sum(axis=axes, keepdims=True) / m)
        rest = []
        if w is not None:
            rest.append((g * xh).sum(axis=lead) if w.requires_grad else None)
        if b is not None:
            rest.append(g.sum(axis=lead) if b.requires_grad else None)
        return (gx, *rest)
    return make(out, fmt, parents, vjp, "layer_norm")
