"""`LogNormalLossScaler`: OpenSeq2Seq's "LogMax" automatic loss scaling, reproduced faithfully,
weakness included.

The rule models log2 of each iteration's max|grad| (of the UNSCALED gradients) as normal, tracks
its mean with a fast average (beta1) and its variance with slow averages (beta2), both with
Adam-style bias correction, and picks the scale that puts the mean plus `overflow_std_dev`
standard deviations at 2^16 (about fp16's largest value, 65504 = (2 - 2^-10) * 2^15):

    scale = clip(2^(16 - (mu + 3.09 * sigma)), scale_min, scale_max)

3.09 is the standard normal's 99.9% quantile, so P(overflow) is about 0.001 per iteration.

The weakness: on an overflow the original feeds x = 2**log_max = 65536 into the moments (the
value of max|grad|, where log2 of it, 16, was presumably meant). One such x in a slow average
with beta2 = 0.999 adds 0.001 * 65536^2 = 4.3e6 to E[x^2], so sigma is about
sqrt(4.3e6) = 2072 right after, and decays only as 0.999^(n/2) ~ 0.9995^n (the fast mean mu
forgets it within ~1000 steps). The scale leaves scale_min = 1 only once 16 - mu - 3.09*sigma > 0;
for calm gradients with max|g| ~ 2^-8 (mu = -8) that takes ln(2072 * 3.09 / 24) / 0.0005 = 11170
iterations. `overflow_value` makes x a parameter (16.0 removes the weakness).

All state is float32 and every operation rounds to float32, as the TensorFlow original's
variables do (numpy's log2/exp2 may differ from TensorFlow's in the last place).
Must not import autograd or softfloat (numpy only; see DESIGN.md).
"""

from __future__ import annotations

import numpy as np

from ._base import LossScaler, check_real, to_float32

_F32 = np.float32
# The exponent that the cutoff is put at: log2(65504) = 15.9999..., rounded up to 16.
_LOG2_TARGET = _F32(16.0)


class LogNormalLossScaler(LossScaler):
    """OpenSeq2Seq's LogMaxScaler. Starts at scale 1; needs max|g| from unscale_ (recorded
    automatically), or `update(found_inf, amax=...)`.

    overflow_value: the x fed to the moments on an overflow; None is the original's
        2**log_max (65536 with the default log_max=16).
    """

    _needs_amax = True

    def __init__(self, *, scale_min: float = 1.0, scale_max: float = 2.0**24, log_max: float = 16.0,
                 beta1: float = 0.99, beta2: float = 0.999, overflow_std_dev: float = 3.09,
                 overflow_value: float | None = None, loss_id: int = 0):
        super().__init__(loss_id=loss_id)
        self._configure(scale_min=scale_min, scale_max=scale_max, log_max=log_max, beta1=beta1,
                        beta2=beta2, overflow_std_dev=overflow_std_dev,
                        overflow_value=overflow_value)
        self._scale = 1.0
        self.iteration = 0
        # The five float32 accumulators of the original: fast mean, slow mean, slow mean of
        # squares, and the running products beta1^t, beta2^t for the bias corrections.
        self._x_hat = _F32(0.0)
        self._slow_x_hat = _F32(0.0)
        self._xsquared_hat = _F32(0.0)
        self._b1_correction = _F32(1.0)
        self._b2_correction = _F32(1.0)

    def update(self, found_inf=None, *, amax: float | None = None) -> bool:
        """As LossScaler.update; `amax` (max|g| of the unscaled grads) overrides unscale_'s."""
        if amax is not None:
            value = float(amax)
            if not value >= 0.0:
                raise ValueError(f"amax must be >= 0 (max of |grad|), got {amax!r}")
            self._pending_amax = value
        return super().update(found_inf)

    def _update(self, found_inf: bool, amax: float) -> None:
        b1, b2 = self.beta1, self.beta2  # Python floats: each product rounds once to float32
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            amax32 = _F32(amax)
            if found_inf or np.isinf(amax32):
                x = _F32(self.overflow_value)
            else:
                # The original computes log(amax) / log(2); log2 is the same up to the last place.
                # amax == 0 gives -inf here and poisons the moments, as in the original.
                x = np.log(amax32) / np.log(_F32(2.0))
            self._x_hat = b1 * self._x_hat + _F32(1 - b1) * x
            self._b1_correction = self._b1_correction * _F32(b1)
            mu = self._x_hat / (_F32(1.0) - self._b1_correction)
            self._slow_x_hat = b2 * self._slow_x_hat + _F32(1 - b2) * x
            self._xsquared_hat = b2 * self._xsquared_hat + _F32(1 - b2) * (x * x)
            self._b2_correction = self._b2_correction * _F32(b2)
            e_xsquared = self._xsquared_hat / (_F32(1.0) - self._b2_correction)
            slow_mu = self._slow_x_hat / (_F32(1.0) - self._b2_correction)
            sigma = np.sqrt(np.maximum(e_xsquared - slow_mu * slow_mu, _F32(0.0)))
            log_cutoff = sigma * _F32(self.overflow_std_dev) + mu
            proposed = np.power(_F32(2.0), _LOG2_TARGET - log_cutoff)
            self._scale = float(np.clip(proposed, _F32(self.scale_min), _F32(self.scale_max)))
        self.iteration += 1

    # -- checkpoints ------------------------------------------------------------------------------
    _ACCUMULATORS = ("x_hat", "slow_x_hat", "xsquared_hat", "b1_correction", "b2_correction")
    _PARAMS = ("scale_min", "scale_max", "log_max", "beta1", "beta2", "overflow_std_dev",
               "overflow_value")

    def state_dict(self) -> dict:
        d = {name: getattr(self, name) for name in self._PARAMS}
        d.update({name: float(getattr(self, "_" + name)) for name in self._ACCUMULATORS})
        d.update(scale=self._scale, iteration=self.iteration)
        return d

    def load_state_dict(self, state_dict: dict) -> None:
        keys = self._PARAMS + self._ACCUMULATORS + ("scale", "iteration")
        self._check_state_keys(state_dict, keys)
        d = state_dict
        self._configure(**{name: d[name] for name in self._PARAMS})
        for name in self._ACCUMULATORS:
            value = d[name]
            if isinstance(value, bool) or not isinstance(value, (float, int, np.floating)):
                raise TypeError(f"{name} must be a float, got {type(value).__name__}")
            setattr(self, "_" + name, _F32(value))
        # Not check_real: a scale poisoned to NaN by an all-zero gradient (see _update) is
        # state too.
        if isinstance(d["scale"], bool) or not isinstance(d["scale"], (float, int, np.floating)):
            raise TypeError(f"scale must be a float, got {type(d['scale']).__name__}")
        self._scale = to_float32(float(d["scale"]))
        iteration = d["iteration"]
        if isinstance(iteration, bool) or not isinstance(iteration, (int, np.integer)) \
                or iteration < 0:
            raise ValueError(f"iteration must be an int >= 0, got {iteration!r}")
        self.iteration = int(iteration)

    def _configure(self, *, scale_min, scale_max, log_max, beta1, beta2, overflow_std_dev,
                   overflow_value) -> None:
        lo = check_real("scale_min", scale_min, positive=True)
        hi = check_real("scale_max", scale_max, positive=True)
        if lo > hi:
            raise ValueError(f"scale_min {lo} must be <= scale_max {hi}")
        log_max = check_real("log_max", log_max)
        for name, beta in (("beta1", beta1), ("beta2", beta2)):
            value = check_real(name, beta)
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {value!r}")
        std = check_real("overflow_std_dev", overflow_std_dev)
        if std < 0:
            raise ValueError(f"overflow_std_dev must be >= 0, got {std!r}")
        over = check_real("overflow_value", overflow_value, allow_none=True)
        self.scale_min, self.scale_max, self.log_max = to_float32(lo), to_float32(hi), log_max
        self.beta1, self.beta2, self.overflow_std_dev = float(beta1), float(beta2), std
        # tf.pow(2., log_max) in float32: 2^16 = 65536 by default.
        self.overflow_value = float(np.power(_F32(2.0), _F32(log_max))) if over is None else over

    def __repr__(self) -> str:
        return (f"LogNormalLossScaler(scale={self._scale}, scale_min={self.scale_min}, "
                f"scale_max={self.scale_max}, log_max={self.log_max}, beta1={self.beta1}, "
                f"beta2={self.beta2}, overflow_std_dev={self.overflow_std_dev}, "
                f"overflow_value={self.overflow_value})")
