"""`PerTensorLossScaler`: one power-of-two scale per gradient tensor (per layer), picked from the
recent history of that tensor's max|grad|, in the spirit of FP8 "delayed scaling".

One global loss scale must suit the layer with the largest gradients; layers whose gradients
are orders of magnitude smaller still underflow. Here each tensor i gets
    s_i = 2^floor(log2(fmt_max / 2^margin / amax_i)),   amax_i = max of its last `history_len`
max|g_i| (unscaled), so that its largest scaled gradient sits within 2^margin of the storage
format's largest value (65504 for fp16: (2 - 2^-10) * 2^15) while keeping every bit the format
has below it. Powers of two make scaling and unscaling exact (no rounding at all).
On an overflow in tensor i: s_i = max(s_i * backoff_factor, min_scale) and its history restarts.
A tensor whose recorded max|g| is 0 (all of it underflowed, or truly zero) grows by
growth_factor, capped at max_scale.

How an engine uses it: scale the loss by get_scale() (the smallest s_i, so no tensor's
gradient overflows because of the loss scale), multiply the backward signal reaching tensor i by
rescale_factor(i) = s_i / get_scale() (a power of two >= 1), then unscale_ the gradients in the
same order every step (None for a tensor without a gradient keeps the indices aligned).
Must not import autograd or softfloat (numpy only; see DESIGN.md).
"""

from __future__ import annotations

import math

import numpy as np

from ._base import LossScaler, _check_grad, check_int, check_real, to_float32


def _pow2_floor(x: float) -> float:
    """The largest power of two <= x (x > 0, finite), exactly: frexp gives x = m * 2^e with
    m in [0.5, 1), so the answer is 2^(e-1)."""
    _, e = math.frexp(x)
    return math.ldexp(1.0, e - 1)


def _check_pow2(name: str, value) -> float:
    value = check_real(name, value, positive=True)
    if _pow2_floor(value) != value or to_float32(value) != value:
        raise ValueError(f"{name} must be a power of two within float32's range, got {value!r}")
    return value


class PerTensorLossScaler(LossScaler):
    """Per-tensor power-of-two scales from a max|grad| history (see the module docstring)."""

    def __init__(self, n_tensors: int, *, fmt_max: float = 65504.0, margin: int = 1,
                 history_len: int = 16, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, min_scale: float = 1.0, max_scale: float = 2.0**24,
                 loss_id: int = 0):
        super().__init__(loss_id=loss_id)
        self.n_tensors = check_int("n_tensors", n_tensors, minimum=1)
        self.fmt_max = check_real("fmt_max", fmt_max, positive=True)
        self.margin = check_int("margin", margin, minimum=0)
        self.history_len = check_int("history_len", history_len, minimum=1)
        # Every factor and bound is a power of two, so every s_i is one and unscaling is exact.
        self.growth_factor = _check_pow2("growth_factor", growth_factor)
        if self.growth_factor <= 1.0:
            raise ValueError(f"growth_factor must be > 1, got {self.growth_factor!r}")
        self.backoff_factor = _check_pow2("backoff_factor", backoff_factor)
        if self.backoff_factor >= 1.0:
            raise ValueError(f"backoff_factor must be < 1, got {self.backoff_factor!r}")
        self.min_scale = _check_pow2("min_scale", min_scale)
        self.max_scale = _check_pow2("max_scale", max_scale)
        init = _check_pow2("init_scale", init_scale)
        if not self.min_scale <= init <= self.max_scale:
            raise ValueError(f"init_scale {init} must lie in [min_scale, max_scale] = "
                             f"[{self.min_scale}, {self.max_scale}]")
        self._scales = [init] * self.n_tensors
        self._history: list[list[float]] = [[] for _ in range(self.n_tensors)]
        self._reset_pending()
        self._scale = min(self._scales)

    def _reset_pending(self) -> None:
        self._pending_inf = None
        self._tensor_inf = [False] * self.n_tensors
        self._tensor_amax: list[float | None] = [None] * self.n_tensors

    @property
    def scales(self) -> list[float]:
        return list(self._scales)

    def rescale_factor(self, i: int) -> float:
        """s_i / get_scale(): what the backward signal reaching tensor i is multiplied by."""
        return self._scales[i] / self._scale

    def unscale_(self, grads) -> bool:
        """Multiply grads[i] in place by float32(1 / s_i); record per-tensor overflow and max|g|."""
        grads = list(grads)
        if len(grads) != self.n_tensors:
            raise ValueError(f"expected {self.n_tensors} gradients (None for a missing one), "
                             f"got {len(grads)}")
        found = False
        for i, g in enumerate(grads):
            if g is None:
                continue
            g = _check_grad(i, g)
            inv = np.float32(1.0 / self._scales[i])   # exact: s_i is a power of two
            bad = not np.isfinite(g).all()
            with np.errstate(over="ignore", invalid="ignore"):
                np.multiply(g, g.dtype.type(inv), out=g)
            amax = float(np.max(np.abs(g))) if g.size else 0.0
            self._tensor_inf[i] = self._tensor_inf[i] or bad
            prev = self._tensor_amax[i]
            self._tensor_amax[i] = amax if prev is None else max(prev, amax)
            found = found or bad
        self._pending_inf = found or bool(self._pending_inf)
        return found

    def _update(self, found_inf: bool, amax: float) -> None:
        # An overflow that unscale_ cannot attribute to a tensor (a flag passed to update, or a
        # non-finite loss) backs every tensor off.
        attributed = any(self._tensor_inf) or not found_inf
        tensor_inf = self._tensor_inf if attributed else [True] * self.n_tensors
        amaxes = self._tensor_amax
        self._reset_pending()
        for i in range(self.n_tensors):
            self._update_one(i, tensor_inf[i], amaxes[i])
        self._scale = min(self._scales)

    def _update_one(self, i: int, overflow: bool, amax: float | None) -> None:
        s = self._scales[i]
        if overflow:
            self._scales[i] = max(to_float32(s * self.backoff_factor), self.min_scale)
            self._history[i] = []
            return
        if amax is None:          # no gradient for this tensor this step: nothing learned
            return
        hist = self._history[i]
        hist.append(amax)
        del hist[:-self.history_len]
        peak = max(hist)
        if peak == 0.0:
            new = to_float32(s * self.growth_factor)
        else:
            # target / peak overflows only for absurdly small peaks; then max_scale it is.
            target = self.fmt_max / 2.0**self.margin
            ratio = target / peak
            new = _pow2_floor(ratio) if math.isfinite(ratio) else self.max_scale
        self._scales[i] = min(max(new, self.min_scale), self.max_scale)

    def state_dict(self) -> dict:
        return {"n_tensors": self.n_tensors, "fmt_max": self.fmt_max, "margin": self.margin,
                "history_len": self.history_len, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "min_scale": self.min_scale,
                "max_scale": self.max_scale, "scales": list(self._scales),
                "history": [list(h) for h in self._history]}

    def load_state_dict(self, state_dict: dict) -> None:
        keys = ("n_tensors", "fmt_max", "margin", "history_len", "growth_factor", "backoff_factor",
                "min_scale", "max_scale", "scales", "history")
        self._check_state_keys(state_dict, keys)
        d = state_dict
        scales = [float(s) for s in d["scales"]]
        fresh = PerTensorLossScaler(d["n_tensors"], fmt_max=d["fmt_max"], margin=d["margin"],
                                    history_len=d["history_len"], growth_factor=d["growth_factor"],
                                    backoff_factor=d["backoff_factor"], min_scale=d["min_scale"],
                                    max_scale=d["max_scale"], init_scale=d["min_scale"],
                                    loss_id=self.loss_id)
        if len(scales) != fresh.n_tensors or len(d["history"]) != fresh.n_tensors:
            raise ValueError(f"scales and history must have n_tensors = {fresh.n_tensors} entries")
        for s in scales:
            if not fresh.min_scale <= s <= fresh.max_scale or _pow2_floor(s) != s:
                raise ValueError(f"scale {s} is not a power of two in [min_scale, max_scale]")
        self.__dict__.update(fresh.__dict__)
        self._scales = scales
        self._history = [[float(a) for a in h][-self.history_len:] for h in d["history"]]
        self._scale = min(self._scales)
