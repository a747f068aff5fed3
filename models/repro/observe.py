"""Watching a training run: per-layer gradient statistics, update ratios and DFP-16 GEMM operands.

Provides :class:`GradObserver`, the ``observer`` a models.trainer.Trainer calls on its histogram
steps (``gradients`` after backward, ``updates`` after an applied optimizer step), and
:func:`capture_dfp_gemms`, a context manager that keeps a sample of the DFP-16 GEMM operands a
``dfp16`` run multiplies (for the int32 overflow statistics of models.repro.dfpstats).

The observer divides gradients by the loss scale of the step (an exact power-of-two division in
float64), so what it records is what the 16-bit format would have to hold unscaled; on an fp32
run without a multiplier that is the gradient as training produced it (the natural scale).

Imports numpy, autograd and models.repro.gradstats.
"""

from __future__ import annotations

import contextlib

import numpy as np

import autograd

from .gradstats import LayerStats, UpdateRatioStats

__all__ = ["GradObserver", "capture_dfp_gemms", "layer_of"]


def layer_of(param_name):
    """The layer a parameter belongs to: its module path ("layers.0.weight" -> "layers.0")."""
    return param_name.rpartition(".")[0] or param_name


class GradObserver:
    """Per-layer weight- and activation-gradient statistics (models.repro.gradstats.LayerStats)
    and the |update| / |w| histogram, collected on the trainer's histogram steps."""

    def __init__(self, fmt="fp16"):
        self.layers = LayerStats(fmt)
        self.updates_hist = UpdateRatioStats()
        self._names = None

    def _param_names(self, trainer):
        if self._names is None:
            self._names = {id(p): n for n, p in trainer.model.named_parameters()}
        return self._names

    def gradients(self, trainer, step, scale):
        """Called after backward on a histogram step (the model's taps still hold their
        gradients)."""
        names = self._param_names(trainer)
        inv = 1.0 / float(scale)
        for p in trainer.params:
            if p.grad is not None:
                name = layer_of(names.get(id(p), "?"))
                self.layers.add("weight_grad", name, np.asarray(p.grad, np.float64) * inv, step)
        for name, t in trainer.model.taps or ():
            if t.grad is not None:
                self.layers.add("activation_grad", name, np.asarray(t.grad, np.float64) * inv,
                                step)

    def updates(self, trainer, step, before, nonzero):
        """Called after an applied step: ``before`` the stored weights (fp32 masters where there
        are some) before the step, ``nonzero`` the masks of non-zero gradient elements."""
        for b, s, m in zip(before, trainer._stored(), nonzero):
            if m is not None:
                self.updates_hist.add(b, s.data, m)

    def to_dict(self):
        return {"layers": self.layers.to_dict(), "update_ratio": self.updates_hist.to_dict()}


@contextlib.contextmanager
def capture_dfp_gemms(trainer=None, *, every=1, limit=64):
    """Keep the operands (two DFPTensors) of the DFP-16 GEMMs of training steps, while active.

    The dfp16 policy's GEMMs call ``softfloat.dfp.gemm`` through the module attribute; this
    wraps that attribute for the duration and restores it.  A call is kept when gradients are
    enabled (training, not evaluation), the trainer's current step is a multiple of ``every``
    and fewer than ``limit`` were kept.  Yields the list the operand pairs are appended to.
    """
    from softfloat import dfp

    original = dfp.gemm
    kept = []

    def recording(a, b, **kw):
        step = 0 if trainer is None else trainer.step_no
        if len(kept) < limit and autograd.is_grad_enabled() and step % every == 0:
            kept.append((a, b))
        return original(a, b, **kw)

    dfp.gemm = recording
    try:
        yield kept
    finally:
        dfp.gemm = original
