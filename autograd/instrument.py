"""Instrumentation: per-layer statistics of activations, activation gradients, weight gradients
and update/weight ratios, the raw material of Micikevicius et al.'s Figure 2b (weight gradient
histogram) and Figure 3 (activation gradient histogram).

Provides :func:`tensor_stats` (a histogram of floor(log2|x|) with separate zero and non-finite
counts, and for each given format the number of values that would underflow to zero, become
subnormal or overflow when rounded to it) and :class:`Recorder`, a context manager that collects
them for every named submodule of a model::

    with Recorder(model, formats=("fp16", "bf16")) as rec:
        loss = F.cross_entropy(model(x), y); loss.backward()   # gradients recorded on backward
        rec.snapshot_weights(); opt.step(); rec.record_updates(); rec.step()
    rec.histogram("activation_grad"); rec.fractions("weight_grad", "fp16")

With no recorder active the engine only tests ``ACTIVE[0] is None`` once per module call and once
per backward: recording off costs nothing.

Imports numpy and the engine's _backend only (tensors and modules are used by duck typing, so
the engine can import this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _backend as B

__all__ = ["ACTIVE", "EXP_RANGE", "KINDS", "Recorder", "TensorStats", "tensor_stats"]

#: The recorder in use, or None.  Read by Module.__call__ and Tensor.backward.
ACTIVE: list = [None]
#: Histogram bins are the integer exponents e = floor(log2|x|) in [lo, hi]: -160..129 covers
#: every float32 value (smallest subnormal 2^-149, largest finite < 2^128); values outside fall
#: into the end bins.
EXP_RANGE = (-160, 129)
KINDS = ("activation", "activation_grad", "weight_grad", "update_ratio")
_COUNTS = ("underflow", "subnormal", "overflow")


@dataclass
class TensorStats:
    """Counts over one tensor.  ``hist[i]`` counts the nonzero finite values with
    floor(log2|x|) == exp_lo + i; ``formats[name]`` has the underflow / subnormal / overflow
    counts for that format (round to nearest even)."""

    n: int
    zeros: int
    nonfinite: int
    exp_lo: int
    hist: np.ndarray
    formats: dict = field(default_factory=dict)

    @property
    def nonzero(self) -> int:
        """Nonzero finite values: the denominator of the fractions."""
        return self.n - self.zeros - self.nonfinite

    @property
    def exponents(self) -> np.ndarray:
        return np.arange(self.exp_lo, self.exp_lo + len(self.hist))

    def fraction(self, what: str, fmt) -> float:
        """Share of the nonzero finite values that would underflow / become subnormal /
        overflow in fmt (0.0 when there are none)."""
        if what not in _COUNTS:
            raise ValueError(f"fraction: what must be one of {_COUNTS}, got {what!r}")
        name = B.get_fmt(fmt).name
        if name not in self.formats:
            raise ValueError(f"fraction: format {name!r} was not recorded; recorded: "
                             f"{sorted(self.formats)}")
        return self.formats[name][what] / self.nonzero if self.nonzero else 0.0

    def merge(self, other: TensorStats) -> TensorStats:
        fm = {k: {c: v[c] + other.formats[k][c] for c in _COUNTS}
              for k, v in self.formats.items() if k in other.formats}
        return TensorStats(self.n + other.n, self.zeros + other.zeros,
                           self.nonfinite + other.nonfinite, self.exp_lo,
                           self.hist + other.hist, fm)

    def to_dict(self) -> dict:
        return {"n": self.n, "zeros": self.zeros, "nonfinite": self.nonfinite,
                "exp_lo": self.exp_lo, "hist": self.hist.tolist(), "formats": self.formats}


def tensor_stats(x, formats=("fp16",), exp_range=EXP_RANGE) -> TensorStats:
    """Histogram of floor(log2|x|) and per-format underflow/subnormal/overflow counts."""
    lo, hi = exp_range
    if hi < lo:
        raise ValueError(f"tensor_stats: exp_range {exp_range} is empty")
    x = np.asarray(x).ravel()
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    finite = np.isfinite(x)
    v = x[finite & (x != 0)]
    # frexp gives v = m * 2^e with 0.5 <= |m| < 1, so floor(log2|v|) = e - 1 exactly.
    e = np.frexp(v)[1].astype(np.int64) - 1
    hist = np.bincount(np.clip(e - lo, 0, hi - lo), minlength=hi - lo + 1).astype(np.int64)
    fm = {}
    for f in formats:
        fmt = B.get_fmt(f)
        r = B.round_to(v, fmt)
        a = np.abs(r)
        if fmt.saturate:
            # Saturation hides overflow in r: compare with the rounding threshold max + ulp/2,
            # ulp = 2^(emax - man_bits) at the top binade.
            over = np.abs(v) >= fmt.max + 2.0 ** (fmt.emax - fmt.man_bits - 1)
        else:
            over = ~np.isfinite(r)
        fm[fmt.name] = {"underflow": int(np.count_nonzero(r == 0)),
                        "subnormal": int(np.count_nonzero((a > 0) & (a < fmt.tiny))),
                        "overflow": int(np.count_nonzero(over))}
    return TensorStats(int(x.size), int(np.count_nonzero(x == 0)),
                       int(x.size - np.count_nonzero(finite)), lo, hist, fm)


class Recorder:
    """Collects :class:`TensorStats` per (step, layer, kind) for the named submodules of
    ``model`` while active (``with Recorder(model) as rec:``).  Rows are dicts with keys step,
    layer, kind, param (weight gradients and updates), stats, and ratio (updates: the norm ratio
    ||dW|| / ||W||)."""

    def __init__(self, model, *, formats=("fp16",), activations: bool = True,
                 activation_grads: bool = True, weight_grads: bool = True,
                 exp_range=EXP_RANGE):
        if not hasattr(model, "named_modules"):
            raise TypeError(f"Recorder: model must be an autograd.nn.Module, got "
                            f"{type(model).__name__}")
        self.model = model
        self.formats = tuple(B.get_fmt(f).name for f in formats)
        self.kinds = {"activation": activations, "activation_grad": activation_grads,
                      "weight_grad": weight_grads}
        self.exp_range = exp_range
        self.rows: list[dict] = []
        self.step_index = 0
        self._names = {id(m): (name or "<model>") for name, m in model.named_modules()}
        self._pending: list = []
        self._before: dict | None = None
        self._prev = None

    # ----- activation --------------------------------------------------------------------------
    def __enter__(self):
        self._prev = ACTIVE[0]
        ACTIVE[0] = self
        return self

    def __exit__(self, *exc):
        ACTIVE[0] = self._prev
        for _, t in self._pending:
            t._retain, t.grad = False, None
        self._pending = []
        return False

    def _add(self, layer, kind, values, param=None, ratio=None):
        self.rows.append({"step": self.step_index, "layer": layer, "kind": kind, "param": param,
                          "ratio": ratio,
                          "stats": tensor_stats(values, self.formats, self.exp_range)})

    # ----- hooks called by the engine ------------------------------------------------------------
    def _on_module_output(self, module, out):
        name = self._names.get(id(module))
        if name is None or not hasattr(out, "retain_grad"):
            return
        if self.kinds["activation"]:
            self._add(name, "activation", out.data)
        if self.kinds["activation_grad"] and out.requires_grad:
            out.retain_grad()
            self._pending.append((name, out))

    def _after_backward(self):
        for name, t in self._pending:
            if t.grad is not None:
                self._add(name, "activation_grad", t.grad)
        # Release only after every name was read: a model's output is also its last layer's.
        for _, t in self._pending:
            t._retain, t.grad = False, None
        self._pending = []
        if self.kinds["weight_grad"]:
            for pname, p in self.model.named_parameters():
                if p.grad is not None:
                    self._add(pname.rpartition(".")[0] or "<model>", "weight_grad", p.grad,
                              param=pname)

    # ----- updates and steps ----------------------------------------------------------------------
    def snapshot_weights(self) -> None:
        """Remember the weights; call before the optimizer step."""
        self._before = {n: p.data.astype(np.float64) for n, p in self.model.named_parameters()}

    def record_updates(self) -> None:
        """Record |dW| / |W| elementwise (histogram) and ||dW|| / ||W|| per parameter; call after
        the optimizer step."""
        if self._before is None:
            raise RuntimeError("record_updates: call snapshot_weights() before the step")
        for n, p in self.model.named_parameters():
            w0 = self._before[n]
            d = p.data.astype(np.float64) - w0
            nz = w0 != 0
            ratio = np.abs(d[nz]) / np.abs(w0[nz])
            norm_w = float(np.linalg.norm(w0))
            self._add(n.rpartition(".")[0] or "<model>", "update_ratio", ratio, param=n,
                      ratio=float(np.linalg.norm(d)) / norm_w if norm_w else float("nan"))
        self._before = None

    def step(self) -> None:
        """Advance the step counter that labels new rows."""
        self.step_index += 1

    # ----- queries --------------------------------------------------------------------------------
    def select(self, kind: str, layer: str | None = None, step: int | None = None) -> list:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        return [r for r in self.rows if r["kind"] == kind
                and (layer is None or r["layer"] == layer) and (step is None or r["step"] == step)]

    def merged(self, kind: str, layer: str | None = None, step: int | None = None) -> TensorStats:
        rows = self.select(kind, layer, step)
        if not rows:
            raise ValueError(f"no {kind} recorded for layer={layer!r}, step={step!r}")
        out = rows[0]["stats"]
        for r in rows[1:]:
            out = out.merge(r["stats"])
        return out

    def histogram(self, kind: str, layer: str | None = None, step: int | None = None):
        """(exponents, counts, zeros) summed over the selected rows."""
        s = self.merged(kind, layer, step)
        return s.exponents, s.hist, s.zeros

    def fractions(self, kind: str, fmt, layer: str | None = None, step: int | None = None):
        """{"underflow", "subnormal", "overflow"} shares of nonzero values for fmt."""
        s = self.merged(kind, layer, step)
        return {w: s.fraction(w, fmt) for w in _COUNTS}

    def layers(self, kind: str) -> list[str]:
        seen = []
        for r in self.select(kind):
            if r["layer"] not in seen:
                seen.append(r["layer"])
        return seen
