"""`StaticLossScaler`: one constant scale for the whole run (the paper's constant factors 8 to
32K; apex O3 and DeepSpeed's `"loss_scale": 128` style; scale 1 for fp32 and bf16).

Must not import autograd or softfloat (numpy only; see DESIGN.md).
"""

from __future__ import annotations

from ._base import LossScaler, check_bool, check_real, logger, to_float32


class StaticLossScaler(LossScaler):
    """A loss scale that never changes.

    scale: positive and finite; kept as its float32 rounding, like every scale here (an error if
        that rounding overflows or flushes to zero).
    skip_on_overflow: whether the optimizer wrapper skips a step whose unscaled gradients are
        not finite. True is the paper's recipe; False is DeepSpeed's bf16 (and fp32) mode, which
        never checks and never skips.
    """

    def __init__(self, scale: float = 1.0, *, skip_on_overflow: bool = True, loss_id: int = 0):
        super().__init__(loss_id=loss_id)
        value = check_real("scale", scale, positive=True)
        rounded = to_float32(value)
        if not 0.0 < rounded < float("inf"):
            raise ValueError(f"scale {value!r} is outside float32's range "
                             "(about 1.4e-45 to 3.4e38)")
        self._scale = rounded
        self.skip_on_overflow = check_bool("skip_on_overflow", skip_on_overflow)

    def _update(self, found_inf: bool, amax: float) -> None:
        return None  # a static scale reacts to nothing

    def _log_skip(self, before: float) -> None:
        logger.info("Gradient overflow.  Skipping step, loss scaler %d keeping static loss "
                    "scale %s", self.loss_id, float(self._scale))

    def state_dict(self) -> dict:
        return {"scale": self._scale, "skip_on_overflow": self.skip_on_overflow}

    def load_state_dict(self, state_dict: dict) -> None:
        self._check_state_keys(state_dict, ("scale", "skip_on_overflow"))
        fresh = StaticLossScaler(state_dict["scale"],
                                 skip_on_overflow=state_dict["skip_on_overflow"])
        self._scale, self.skip_on_overflow = fresh._scale, fresh.skip_on_overflow

    def __repr__(self) -> str:
        return f"StaticLossScaler(scale={self._scale}, skip_on_overflow={self.skip_on_overflow})"
