"""The part every loss scaler shares: scaling a loss, unscaling gradients in place, the
found-inf record, skip logging and argument checks.

Provides `LossScaler` (the base class) and the small validators the scalers use.
Must not import autograd or softfloat: a scaler sees a list of numpy gradient arrays and a
found-inf flag, nothing else (see DESIGN.md, "Layers").
"""

from __future__ import annotations

import abc
import logging
import math
import numbers

import numpy as np

logger = logging.getLogger("scalers")

# float32's largest finite value, (2 - 2^-23) * 2^127: the scale is kept as a float32 value,
# as in PyTorch, where GradScaler's scale is a float32 tensor.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def to_float32(x: float) -> float:
    """Round a Python float to float32 (round to nearest even); return it as a Python float."""
    with np.errstate(over="ignore"):  # overflow gives inf, which callers check for
        return float(np.float32(x))


def check_real(name: str, value, *, positive: bool = False, allow_none: bool = False):
    """Return `value` as a Python float after checking it is a finite real number."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def check_int(name: str, value, *, minimum: int) -> int:
    """Return `value` as an int after checking it is an integer (not a bool) >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def _check_grad(i: int, g) -> np.ndarray:
    if not isinstance(g, np.ndarray):
        raise TypeError(f"grads[{i}] must be a numpy ndarray, got {type(g).__name__}")
    if g.dtype == np.float16:
        # PyTorch refuses too ("Attempting to unscale FP16 gradients."): unscaling must happen
        # on fp32 (master) gradients, or the small unscaled values underflow all over again.
        raise TypeError(f"grads[{i}]: attempting to unscale FP16 gradients; copy them to float32 "
                        "(master gradients) first")
    if g.dtype not in (np.float32, np.float64):
        raise TypeError(f"grads[{i}] must be float32 or float64, got dtype {g.dtype}")
    if not g.flags.writeable:
        raise ValueError(f"grads[{i}] is read-only; unscale_ works in place")
    return g


class LossScaler(abc.ABC):
    """Base class. Subclasses set `self._scale` and implement `_update(found_inf, amax)`.

    Protocol, once per iteration:
        loss_scaled = scaler.scale(loss)        # backward on loss_scaled
        found_inf = scaler.unscale_(grads)      # fp32 grads, in place; may be called per group
        found_inf = scaler.update()             # or update(flag) with a flag of your own;
                                                # skip the step if found_inf (and skip_on_overflow)
    """

    #: Whether a step with non-finite gradients should be skipped by the optimizer wrapper.
    skip_on_overflow = True
    #: Whether unscale_ must also record max|g| of the unscaled gradients (LogMax needs it).
    _needs_amax = False

    def __init__(self, *, loss_id: int = 0):
        self.loss_id = check_int("loss_id", loss_id, minimum=0)
        self._scale = 1.0
        self._pending_inf: bool | None = None  # None: no unscale_ since the last update
        self._pending_amax = 0.0

    # -- the three calls of an iteration ---------------------------------------------------
    def scale(self, loss):
        """Return `loss * scale` (works for numpy values and any object with __mul__)."""
        return loss * self._scale

    def get_scale(self) -> float:
        return self._scale

    def unscale_(self, grads) -> bool:
        """Multiply every gradient in place by float32(1 / float64(scale)); return found_inf.

        As PyTorch: the reciprocal is computed in float64 and rounded once to float32, the
        finiteness check looks at the gradients as they came in (scaled), and the multiply
        happens to every array, even after an inf was found (the step is skipped anyway).
        Several calls between two updates (one per parameter group) are OR-ed together.
        """
        if isinstance(grads, np.ndarray):
            raise TypeError("unscale_ takes a list of gradient arrays, not a single array")
        # None (a parameter without a gradient) is skipped, so callers can keep indices aligned.
        grads = [_check_grad(i, g) for i, g in enumerate(grads) if g is not None]
        with np.errstate(divide="ignore", over="ignore"):
            # An unfloored scale that has underflowed to 0 gives inv = inf, as in PyTorch.
            inv = np.float32(np.float64(1.0) / np.float64(self._scale))
        found = False
        amax = self._pending_amax
        for g in grads:
            if not found and not np.isfinite(g).all():
                found = True
            if inv != np.float32(1.0):  # PyTorch leaves the values untouched when 1/scale == 1
                with np.errstate(over="ignore", invalid="ignore"):  # inf*0 -> nan, as on a GPU
                    np.multiply(g, g.dtype.type(inv), out=g)
            if self._needs_amax and g.size:
                amax = max(amax, float(np.max(np.abs(g))))
        self._pending_inf = bool(found) or bool(self._pending_inf)
        self._pending_amax = amax
        return bool(found)

    def update(self, found_inf=None) -> bool:
        """Advance the scale by one iteration; return whether this iteration overflowed.

        `found_inf` (bool or None) is OR-ed with what unscale_ recorded since the last update.
        With neither (no flag given and no unscale_), there is nothing to decide from: error,
        as PyTorch ("No inf checks were recorded prior to update.").
        """
        if found_inf is None and self._pending_inf is None:
            raise RuntimeError("update() needs found_inf, or a call to unscale_ since the "
                               "last update")
        found = bool(found_inf) or bool(self._pending_inf)
        amax = self._pending_amax
        self._pending_inf, self._pending_amax = None, 0.0
        before = self._scale
        self._update(found, amax)
        if found and self.skip_on_overflow:
            self._log_skip(before)
        return found

    # -- for subclasses ----------------------------------------------------------------------
    @abc.abstractmethod
    def _update(self, found_inf: bool, amax: float) -> None:
        """Move the scale for one iteration (amax: max|g| of the unscaled grads, if recorded)."""

    @abc.abstractmethod
    def state_dict(self) -> dict:
        """Everything needed to resume bit-identically (plain floats, ints and bools)."""

    @abc.abstractmethod
    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what state_dict returned (validated; unknown or missing keys are an error)."""

    def _log_skip(self, before: float) -> None:
        # apex's line, with its two spaces after the first full stop and the NEW scale.
        logger.info("Gradient overflow.  Skipping step, loss scaler %d reducing loss scale to %s",
                    self.loss_id, float(self._scale))

    def _check_state_keys(self, d: dict, keys) -> None:
        if not isinstance(d, dict):
            raise TypeError(f"state_dict must be a dict, got {type(d).__name__}")
        missing = [k for k in keys if k not in d]
        extra = [k for k in d if k not in keys]
        if missing or extra:
            raise ValueError(f"{type(self).__name__}.load_state_dict: missing keys {missing}, "
                             f"unknown keys {extra}; expected exactly {sorted(keys)}")
