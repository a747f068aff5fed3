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

The recorder is passed in, not polled: entering it registers a forward hook on every named
submodule (``Module.register_forward_hook``) and a gradient hook on every parameter
(``Tensor.register_hook``); each recorded module output gets a gradient hook of its own.
Leaving it removes them all.  The engine calls exactly the hooks it holds, so recording off
costs one empty-dict test per module call and per backward node.

Imports numpy and the engine's _backend only (tensors and modules are used by duck typing: the
engine never imports this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _backend as B

__all__ = ["EXP_RANGE", "KINDS", "Recorder", "TensorStats", "tensor_stats"]

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
        # Overflow from the rounding's own flag: saturating formats and formats without Inf
        # return +-max, which hides it in r, and the tie at max + ulp/2 goes the way the
        # format's rounding decides (e4m3fn's max 448 has an even significand: 464 rounds down).
        r, over = B.round_counting_overflow(v, fmt)
        a = np.abs(r)
        fm[fmt.name] = {"underflow": int(np.count_nonzero(r == 0)),
                        "subnormal": int(np.count_nonzero((a > 0) & (a < fmt.tiny))),
                        "overflow": over}
    return TensorStats(int(x.size), int(np.count_nonzero(x == 0)),
                       int(x.size - np.count_nonzero(finite)), lo, hist, fm)


class Recorder:
    """Collects :class:`TensorStats` per (step, layer, kind) for the named submodules of
    ``model`` while active (``with Recorder(model) as rec:``).  Rows are dicts with keys step,
    layer, kind, param (weight gradients and updates), stats, and ratio (updates: the norm ratio
    ||dW|| / ||W||).

    Rows are listed by step, then kind (activations, activation gradients, weight gradients,
    updates), then: activations and their gradients in the order the modules ran forward,
    weight gradients and updates in ``named_parameters`` order (one run of them per backward).
    """

    _PHASE = {"activation": 0, "activation_grad": 1, "weight_grad": 2, "update_ratio": 3}

    def __init__(self, model, *, formats=("fp16",), activations: bool = True,
                 activation_grads: bool = True, weight_grads: bool = True,
                 exp_range=EXP_RANGE):
        if not hasattr(model, "named_modules") or not hasattr(model, "register_forward_hook"):
            raise TypeError(f"Recorder: model must be an autograd.nn.Module, got "
                            f"{type(model).__name__}")
        self.model = model
        self.formats = tuple(B.get_fmt(f).name for f in formats)
        self.kinds = {"activation": activations, "activation_grad": activation_grads,
                      "weight_grad": weight_grads}
        self.exp_range = exp_range
        self.step_index = 0
        self._rows: list = []       # (sort key, row)
        self._handles: list = []
        self._active = False
        self._seq = 0               # module outputs seen in this step (their forward order)
        self._fired: dict = {}      # parameter name -> weight-gradient hooks fired this step
        self._before: dict | None = None

    @property
    def rows(self) -> list[dict]:
        """Every recorded row, in the order the class docstring gives."""
        return [r for _, r in sorted(self._rows, key=lambda kr: kr[0])]

    # ----- activation --------------------------------------------------------------------------
    def __enter__(self):
        if self._active:
            raise RuntimeError("this Recorder is already active")
        self._active = True
        for name, m in self.model.named_modules():
            self._handles.append(m.register_forward_hook(self._forward_hook(name or "<model>")))
        if self.kinds["weight_grad"]:
            for rank, (pname, p) in enumerate(self.model.named_parameters()):
                self._handles.append(p.register_hook(self._weight_hook(pname, rank)))
        return self

    def __exit__(self, *exc):
        self._active = False
        for h in self._handles:
            h.remove()
        self._handles = []
        return False

    def _add(self, key, layer, kind, values, param=None, ratio=None):
        row = {"step": self.step_index, "layer": layer, "kind": kind, "param": param,
               "ratio": ratio, "stats": tensor_stats(values, self.formats, self.exp_range)}
        self._rows.append(((self.step_index, self._PHASE[kind]) + key, row))

    # ----- hooks given to the engine -------------------------------------------------------------
    def _forward_hook(self, name):
        def hook(module, args, out):
            if not self._active or not hasattr(out, "register_hook"):
                return
            seq = self._seq
            self._seq += 1
            if self.kinds["activation"]:
                self._add((seq,), name, "activation", out.data)
            if self.kinds["activation_grad"] and out.requires_grad:
                # Fires when backward has completed out's gradient; a hook left on a tensor
                # after the recorder exits records nothing.
                def on_grad(g):
                    if self._active:
                        self._add((seq,), name, "activation_grad", g)
                out.register_hook(on_grad)
        return hook

    def _weight_hook(self, pname, rank):
        layer = pname.rpartition(".")[0] or "<model>"

        def hook(g):
            n = self._fired.get(pname, 0)
            self._fired[pname] = n + 1
            self._add((n, rank), layer, "weight_grad", g, param=pname)
        return hook

    # ----- updates and steps ----------------------------------------------------------------------
    def snapshot_weights(self) -> None:
        """Remember the weights; call before the optimizer step."""
        self._before = {n: p.data.astype(np.float64) for n, p in self.model.named_parameters()}

    def record_updates(self) -> None:
        """Record |dW| / |W| elementwise (histogram) and ||dW|| / ||W|| per parameter; call after
        the optimizer step."""
        if self._before is None:
            raise RuntimeError("record_updates: call snapshot_weights() before the step")
        for rank, (n, p) in enumerate(self.model.named_parameters()):
            w0 = self._before[n]
            d = p.data.astype(np.float64) - w0
            nz = w0 != 0
            ratio = np.abs(d[nz]) / np.abs(w0[nz])
            norm_w = float(np.linalg.norm(w0))
            self._add((rank,), n.rpartition(".")[0] or "<model>", "update_ratio", ratio, param=n,
                      ratio=float(np.linalg.norm(d)) / norm_w if norm_w else float("nan"))
        self._before = None

    def step(self) -> None:
        """Advance the step counter that labels new rows."""
        self.step_index += 1
        self._seq = 0
        self._fired = {}

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
