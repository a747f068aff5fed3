"""`DynamicLossScaler`: back off on overflow, grow after a window of clean steps.

One rule, parameterised, reproduces four production scalers (docs/loss-scaling.md, 1-4):

    PyTorch GradScaler    the defaults (growth capped at float32's largest finite value)
    apex amp "dynamic"    max_scale=2**24 (optionally min_scale)         -> .apex()
    DeepSpeed fp16        hysteresis, consecutive_hysteresis, min_scale=1,
                          raise_at_min=True, window 1000                 -> .deepspeed()
    OpenSeq2Seq Backoff   starts at max_scale=2**24, clipped to [1, 2**24] -> .openseq2seq_backoff()

Why one growth tracker covers all four. DeepSpeed and OpenSeq2Seq grow when
`(iteration - last_overflow_iteration) % window == 0` on a clean step, with
last_overflow_iteration = -1 at the start. Growth never moves last_overflow_iteration, so growth
happens on the window-th clean step after the last overflow (or after the start), then every
window steps: exactly a counter of clean steps that resets on overflow and on growth, which is
PyTorch's `_growth_tracker` and apex's `_unskipped`.

Must not import autograd or softfloat (numpy only; see DESIGN.md).
"""

from __future__ import annotations

import math

from ._base import LossScaler, check_bool, check_int, check_real, logger, to_float32


class LossScaleAtMinimumError(RuntimeError):
    """DeepSpeed's fatal error: an overflow while the scale already sits at min_scale."""


class DynamicLossScaler(LossScaler):
    """Dynamic loss scaling; the defaults are PyTorch's GradScaler.

    On an overflow: if `hysteresis` overflows have not yet been absorbed, absorb this one (scale
    kept, step still skipped); else scale = max(float32(scale * backoff_factor), min_scale).
    On a clean step: after `growth_interval` of them, scale = float32(scale * growth_factor),
    capped at max_scale, and kept unchanged if that is not finite.
    The scale is stored as a float32 value, as PyTorch's is; apex and DeepSpeed keep a Python
    float, which gives the same numbers whenever the scale stays in float32's range.
    """

    def __init__(self, init_scale: float = 2.0**16, *, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, hysteresis: int = 1,
                 consecutive_hysteresis: bool = False, min_scale: float | None = None,
                 max_scale: float | None = None, raise_at_min: bool = False, loss_id: int = 0):
        super().__init__(loss_id=loss_id)
        self._configure(init_scale=init_scale, growth_factor=growth_factor,
                        backoff_factor=backoff_factor, growth_interval=growth_interval,
                        hysteresis=hysteresis, consecutive_hysteresis=consecutive_hysteresis,
                        min_scale=min_scale, max_scale=max_scale, raise_at_min=raise_at_min)
        self._growth_tracker = 0
        self._cur_hysteresis = self.hysteresis
        self._absorbed = False  # whether the last overflow was absorbed by hysteresis (for the log)

    # -- presets ------------------------------------------------------------------------------
    @classmethod
    def pytorch(cls, **kwargs) -> DynamicLossScaler:
        """torch.amp.GradScaler's defaults (the same as the constructor's)."""
        return cls(**kwargs)

    @classmethod
    def apex(cls, *, init_scale: float = 2.0**16, scale_window: int = 2000,
             min_loss_scale: float | None = None, max_loss_scale: float = 2.0**24,
             loss_id: int = 0) -> DynamicLossScaler:
        """apex.amp's LossScaler("dynamic"): factor 2 both ways, ceiling 2^24, optional floor."""
        # apex tests `if self._min_loss_scale:`, so a floor of 0 means no floor.
        return cls(init_scale, growth_factor=2.0, backoff_factor=0.5, growth_interval=scale_window,
                   min_scale=min_loss_scale or None,
                   max_scale=max_loss_scale, loss_id=loss_id)

    @classmethod
    def apex_legacy(cls, *, loss_id: int = 0) -> DynamicLossScaler:
        """apex.fp16_utils.DynamicLossScaler: starts at 2^32, window 1000, floor 1, no ceiling."""
        return cls(2.0**32, growth_factor=2.0, backoff_factor=0.5, growth_interval=1000,
                   min_scale=1.0, loss_id=loss_id)

    @classmethod
    def deepspeed(cls, *, initial_scale_power: int = 16, loss_scale_window: int = 1000,
                  hysteresis: int = 2, consecutive_hysteresis: bool = False,
                  min_loss_scale: float = 1.0, raise_error_at_min_scale: bool = True,
                  loss_id: int = 0) -> DynamicLossScaler:
        """DeepSpeed's fp16 DynamicLossScaler, config defaults (scale_factor 2, no ceiling)."""
        power = check_int("initial_scale_power", initial_scale_power, minimum=-126)
        if power > 127:
            raise ValueError("initial_scale_power must be <= 127 (2^128 overflows float32), "
                             f"got {power}")
        return cls(2.0**power, growth_factor=2.0, backoff_factor=0.5,
                   growth_interval=loss_scale_window, hysteresis=hysteresis,
                   consecutive_hysteresis=consecutive_hysteresis, min_scale=min_loss_scale,
                   raise_at_min=raise_error_at_min_scale, loss_id=loss_id)

    @classmethod
    def openseq2seq_backoff(cls, *, scale_min: float = 1.0, scale_max: float = 2.0**24,
                            step_factor: float = 2.0, step_window: int = 2000,
                            loss_id: int = 0) -> DynamicLossScaler:
        """OpenSeq2Seq's BackoffScaler: starts at scale_max (2^24), every new scale clipped to
        [scale_min, scale_max].

        The backoff multiplies by 1/step_factor where OpenSeq2Seq divides by step_factor: the
        same number for power-of-two factors (the default 2), one rounding apart otherwise.
        """
        factor = check_real("step_factor", step_factor)
        if factor <= 1.0:
            raise ValueError(f"step_factor must be > 1, got {factor!r}")
        return cls(scale_max, growth_factor=factor, backoff_factor=1.0 / factor,
                   growth_interval=step_window, min_scale=scale_min,
                   max_scale=scale_max, loss_id=loss_id)

    # -- the rule -------------------------------------------------------------------------------
    def _update(self, found_inf: bool, amax: float) -> None:
        self._absorbed = False
        if found_inf:
            if self._cur_hysteresis > 1:
                self._cur_hysteresis -= 1        # absorbed: the scale stays, the step is skipped
                self._absorbed = True
            else:
                if self.raise_at_min and self._scale == self.min_scale:
                    raise LossScaleAtMinimumError(
                        f"loss scale already at its minimum {self.min_scale} and the gradients "
                        "overflowed again: cannot decrease the scale any further")
                new = to_float32(self._scale * self.backoff_factor)
                self._scale = new if self.min_scale is None else max(new, self.min_scale)
            self._growth_tracker = 0             # both branches restart the growth window
            return
        if self.consecutive_hysteresis:
            self._cur_hysteresis = self.hysteresis
        self._growth_tracker += 1
        if self._growth_tracker == self.growth_interval:
            if not self.consecutive_hysteresis:
                self._cur_hysteresis = self.hysteresis
            new = to_float32(self._scale * self.growth_factor)
            if self.max_scale is not None:
                new = min(new, self.max_scale)
            if math.isfinite(new):               # PyTorch: keep the old scale if growth overflows
                self._scale = new
            self._growth_tracker = 0             # reset even when growth was capped

    def _log_skip(self, before: float) -> None:
        if self._absorbed:  # DeepSpeed's "but hysteresis is 2. Reducing hysteresis to 1"
            logger.info("Gradient overflow.  Skipping step, loss scaler %d keeping loss scale "
                        "at %s, hysteresis reduced to %d", self.loss_id, float(self._scale),
                        self._cur_hysteresis)
        else:
            super()._log_skip(before)

    # -- checkpoints ------------------------------------------------------------------------------
    _KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker",
             "hysteresis", "_cur_hysteresis", "consecutive_hysteresis", "min_scale", "max_scale",
             "raise_at_min")

    def state_dict(self) -> dict:
        """PyTorch's five keys, plus the hysteresis and bounds that apex/DeepSpeed modes need."""
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self._growth_tracker, "hysteresis": self.hysteresis,
                "_cur_hysteresis": self._cur_hysteresis,
                "consecutive_hysteresis": self.consecutive_hysteresis,
                "min_scale": self.min_scale, "max_scale": self.max_scale,
                "raise_at_min": self.raise_at_min}

    def load_state_dict(self, state_dict: dict) -> None:
        self._check_state_keys(state_dict, self._KEYS)
        d = state_dict
        self._configure(init_scale=d["scale"], growth_factor=d["growth_factor"],
                        backoff_factor=d["backoff_factor"], growth_interval=d["growth_interval"],
                        hysteresis=d["hysteresis"],
                        consecutive_hysteresis=d["consecutive_hysteresis"],
                        min_scale=d["min_scale"], max_scale=d["max_scale"],
                        raise_at_min=d["raise_at_min"])
        tracker = check_int("_growth_tracker", d["_growth_tracker"], minimum=0)
        if tracker >= self.growth_interval:
            raise ValueError(f"_growth_tracker {tracker} must be < growth_interval "
                             f"{self.growth_interval}")
        cur = check_int("_cur_hysteresis", d["_cur_hysteresis"], minimum=1)
        if cur > self.hysteresis:
            raise ValueError(f"_cur_hysteresis {cur} must be <= hysteresis {self.hysteresis}")
        self._growth_tracker, self._cur_hysteresis = tracker, cur

    def _configure(self, *, init_scale, growth_factor, backoff_factor, growth_interval,
                   hysteresis, consecutive_hysteresis, min_scale, max_scale, raise_at_min) -> None:
        scale = to_float32(check_real("init_scale", init_scale, positive=True))
        if scale == 0.0 or math.isinf(scale):
            # A scale that underflowed to 0 can only be reached by backing off without a floor;
            # it is not a sensible starting point.
            raise ValueError(f"init_scale {init_scale!r} is outside float32's range")
        growth = check_real("growth_factor", growth_factor)
        if growth <= 1.0:
            raise ValueError(f"growth_factor must be > 1, got {growth!r}")
        backoff = check_real("backoff_factor", backoff_factor)
        if not 0.0 < backoff < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff!r}")
        interval = check_int("growth_interval", growth_interval, minimum=1)
        hyst = check_int("hysteresis", hysteresis, minimum=1)
        lo = check_real("min_scale", min_scale, positive=True, allow_none=True)
        hi = check_real("max_scale", max_scale, positive=True, allow_none=True)
        # Bounds are float32 values too, so that a bounded scale is still a float32 value.
        lo = None if lo is None else to_float32(lo)
        hi = None if hi is None else to_float32(hi)
        for name, bound in (("min_scale", lo), ("max_scale", hi)):
            if bound is not None and not 0.0 < bound < math.inf:
                raise ValueError(f"{name} is outside float32's range (about 1.4e-45 to 3.4e38)")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_scale {lo} must be <= max_scale {hi}")
        if (lo is not None and scale < lo) or (hi is not None and scale > hi):
            raise ValueError(f"init_scale {scale} must lie in [min_scale, max_scale] = "
                             f"[{lo}, {hi}]")
        at_min = check_bool("raise_at_min", raise_at_min)
        if at_min and lo is None:
            raise ValueError("raise_at_min=True needs a min_scale (DeepSpeed's min_loss_scale)")
        self._scale, self.growth_factor, self.backoff_factor = scale, growth, backoff
        self.growth_interval, self.hysteresis = interval, hyst
        self.consecutive_hysteresis = check_bool("consecutive_hysteresis", consecutive_hysteresis)
        self.min_scale, self.max_scale, self.raise_at_min = lo, hi, at_min

    def __repr__(self) -> str:
        return (f"DynamicLossScaler(scale={self._scale}, growth_factor={self.growth_factor}, "
                f"backoff_factor={self.backoff_factor}, growth_interval={self.growth_interval}, "
                f"hysteresis={self.hysteresis}, "
                f"consecutive_hysteresis={self.consecutive_hysteresis}, "
                f"min_scale={self.min_scale}, max_scale={self.max_scale}, "
                f"raise_at_min={self.raise_at_min})")
