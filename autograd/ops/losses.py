"""Losses and dropout: cross_entropy (integer targets, label smoothing, ignore_index), mse, and
seeded dropout.

cross_entropy is one fused kernel (log-softmax, gather, smoothing and reduction in float64,
rounded once), as PyTorch's; its VJP (softmax - target distribution) is likewise one kernel.
dropout draws its keep-mask from numpy's PCG64 generator seeded with ``seed``: the same seed gives
the same mask bits on every machine.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from ..policy import current_policy
from .._tensor import Tensor, make
from .reductions import log_softmax64
from .shape import as_index

__all__ = ["REDUCTIONS", "cross_entropy", "dropout", "mse"]

REDUCTIONS = ("mean", "sum", "none")


def _reduction(r, op):
    if r not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {r!r}")
    return r


def cross_entropy(logits, target, *, label_smoothing: float = 0.0, reduction: str = "mean",
                  ignore_index: int = -100) -> Tensor:
    """Softmax cross-entropy of logits (N, C) against integer class targets (N,), as
    torch.nn.functional.cross_entropy: with label smoothing eps the target distribution is
    (1 - eps) one-hot + eps / C; targets equal to ignore_index contribute nothing and are left
    out of the mean."""
    if not isinstance(logits, Tensor):
        raise TypeError(f"cross_entropy: logits must be a Tensor, got {type(logits).__name__}")
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy: logits must be (N, C), got {logits.shape}; reshape "
                         "sequence outputs to (N*T, C)")
    _reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    n, c = logits.shape
    t = np.asarray(target.data if isinstance(target, Tensor) else target)
    if t.shape != (n,):
        raise ValueError(f"cross_entropy: target must have shape ({n},), got {t.shape}")
    valid = t != ignore_index
    t = np.where(valid, as_index(np.where(valid, t, 0), c, "cross_entropy"), 0)
    pol = current_policy()
    fmt = pol.op_format("cross_entropy", logits.fmt)
    logp = log_softmax64(logits.data.astype(np.float64), 1)
    eps = float(label_smoothing)
    rows = np.arange(n)
    per = -(1.0 - eps) * logp[rows, t] - eps * logp.mean(axis=1)
    per = np.where(valid, per, 0.0)
    count = int(valid.sum())
    if reduction == "mean":
        val = per.sum() / count if count else np.float64(np.nan)
    else:
        val = per.sum() if reduction == "sum" else per
    out = B.round_to(np.asarray(val), fmt, pol)

    def vjp(g):
        g = np.asarray(g, np.float64)
        p = np.exp(logp)   # the forward's float64 log-softmax: one fused kernel, as in torch
        q = np.full((n, c), eps / c)
        q[rows, t] += 1.0 - eps
        scale = g / count if reduction == "mean" else (g if reduction == "sum" else g[:, None])
        return ((p - q) * valid[:, None] * scale,)
    return make(out, fmt, (logits,), vjp, "cross_entropy")


def mse(pred, target, *, reduction: str = "mean") -> Tensor:
    """Mean squared error (pred - target)^2, as torch.nn.functional.mse_loss; a non-Tensor target
    is a constant in the format the loss computes in (fp32 when mse is on the fp32 list)."""
    if not isinstance(pred, Tensor):
        raise TypeError(f"mse: pred must be a Tensor, got {type(pred).__name__}")
    _reduction(reduction, "mse")
    pol = current_policy()
    if not isinstance(target, Tensor):
        target = Tensor(target, fmt=pol.op_format("mse", pred.fmt))
    if target.shape != pred.shape:
        raise ValueError(f"mse: pred {pred.shape} and target {target.shape} shapes differ")
    fmt = pol.op_format("mse", pred.fmt, target.fmt)
    d = pred.data.astype(np.float64) - target.data.astype(np.float64)
    n = max(d.size, 1)
    sq = d * d
    val = sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)
    out = B.round_to(np.asarray(val), fmt, pol)

    def vjp(g):
        g = np.asarray(g, np.float64)
        gp = 2.0 * d * (g / n if reduction == "mean" else g)
        return (gp if pred.requires_grad else None, -gp if target.requires_grad else None)
    return make(out, fmt, (pred, target), vjp, "mse")


def dropout(x, p: float = 0.5, *, training: bool = True, seed: int | None = None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p); identity when not
    training or p == 0.  ``seed`` (an int) fixes the mask: same seed, same bits."""
    if not isinstance(x, Tensor):
        raise TypeError(f"dropout: x must be a Tensor, got {type(x).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"dropout: seed must be a non-negative int, got {seed!r}")
    keep = np.random.Generator(np.random.PCG64(int(seed))).random(x.shape) >= p
    # x * (mask * scale), as torch computes it (so an Inf that is dropped gives NaN there too)
    mask = keep * (0.0 if p == 1.0 else 1.0 / (1.0 - p))
    pol = current_policy()
    fmt = pol.op_format("dropout", x.fmt)
    with np.errstate(invalid="ignore"):
        out = B.round_to(x.data.astype(np.float64) * mask, fmt, pol)

    def vjp(g):
        with np.errstate(invalid="ignore"):
            return (np.asarray(g, np.float64) * mask,)
    return make(out, fmt, (x,), vjp, "dropout")
