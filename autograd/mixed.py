"""The mixed precision training recipe around an optimizer (Micikevicius et al., ICLR 2018).

Provides `MixedPrecisionOptimizer` (fp32 master weights, loss scaling, unscale-then-clip, skipped
steps) with the "no master weights" ablation (the update rounded straight into the storage format,
in any rounding mode including stochastic, optionally Kahan-compensated), and `StepResult`.

Why master weights: a 16-bit weight w in [2^e, 2^(e+1)) has neighbours 2^(e-10) apart (fp16's
10 fraction bits), so round-to-nearest discards any update smaller than half of that,
2^(e-11): for w = 2^e exactly, every update with |update / w| < 2^-11 is lost, and no w in the
binade keeps one with |update / w| < 2^-12 (as |w| < 2^(e+1)). An fp32 master accumulates them.

A step, in order (docs/loss-scaling.md, 5):
  1. copy the model's (scaled, 16-bit) gradients to fresh float32 arrays and unscale them in
     place with the scaler (float32 reciprocal of the scale); note overflow;
  2. on overflow (and a scaler that skips): skip -- no weight, master, moment or step count moves;
  3. clip the UNSCALED gradients to `max_grad_norm` (global L2 norm), then let the optimizer
     apply weight decay and its rule to the masters (or to the 16-bit weights, without masters);
  4. model weights = the storage-format rounding of the masters; 5. scaler.update().

The scaler is duck-typed (`scale`, `unscale_`, `update`, `get_scale`, `state_dict`,
`load_state_dict`, optional `skip_on_overflow`), so this module never imports scalers/.
Imports numpy, autograd._backend (the engine's door to softfloat) and autograd.optim only.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from . import _backend as B
from .optim import Optimizer, clip_grad_norm_, update_in_place

__all__ = ["MixedPrecisionOptimizer", "StepResult"]


class StepResult(NamedTuple):
    skipped: bool      # the update was not applied
    found_inf: bool    # the unscaled gradients were not all finite
    scale: float       # the loss scale these gradients were computed with
    grad_norm: float   # L2 norm of all unscaled gradients, before clipping (inf when skipped)


class _Slot:
    """What the inner optimizer sees: an fp32 master, or (no masters) the model's own array."""

    __slots__ = ("data", "grad")

    def __init__(self, data):
        self.data, self.grad = data, None


class _NoScaling:
    """Scale 1, overflow check only: what `scaler=None` means."""

    skip_on_overflow = True

    def scale(self, loss):
        return loss

    def get_scale(self) -> float:
        return 1.0

    def unscale_(self, grads) -> bool:
        return not all(np.isfinite(g).all() for g in grads if g is not None)

    def update(self, found_inf=None) -> bool:
        return bool(found_inf)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict) -> None:
        if state_dict != {}:
            raise ValueError("this optimizer has no loss scaler; its state_dict entry must be {}")


def _sum_round_to_odd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b (float64 arrays) rounded to odd in float64, exactly: 2Sum gives s + e == a + b,
    then if anything was lost (e != 0) and s is even, step s one ulp toward a + b (adjacent
    floats alternate parity). A later rounding to p <= 51 bits (fp32: 24) is then a single
    correct rounding in every mode, since round-to-odd with 2 extra bits keeps ties and
    directions visible."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
        # Only finite sums: with an inf or NaN operand e is NaN, and s is already the answer.
        fix = np.isfinite(s) & (e != 0) & ((s.view(np.int64) & 1) == 0)
        if fix.any():
            s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s


class MixedPrecisionOptimizer:
    """Wrap `optimizer` (built on the model's parameters, whose .data lie on `storage`'s grid).

    scaler: a loss scaler from scalers/ (None: no scaling, still skips non-finite steps).
    storage: the model weights' format ("fp16", "bf16", ... any format inside fp32) for every
        parameter; None takes each parameter's own `.fmt` (autograd.Parameter has one), so an
        apex-O2 model with fp16 weights and fp32 batch-norm parameters is ONE optimizer: one
        scaler, one overflow verdict and skip decision, one global gradient norm per step.
    rounding: mode of every rounding into `storage` ("rne", ..., "sr" with `seed`).
    master_weights: keep an fp32 master for every parameter stored in a format narrower than
        fp32.  A parameter stored in fp32 is its own master: no copy is kept, and its update
        w * mult + delta is rounded once into fp32 (the same as w += delta whenever mult == 1,
        i.e. for every optimizer but AdamW's decoupled weight decay).  False is the ablation:
        every update is rounded once into `storage` (kahan=True adds a compensation buffer,
        itself stored in `storage`).
    max_grad_norm: clip the global L2 norm of the unscaled gradients, over all parameters
        whatever their format or group (torch.nn.utils.clip_grad_norm_; None: no clipping).
    """

    def __init__(self, optimizer: Optimizer, scaler=None, *, storage=None, rounding="rne",
                 master_weights: bool = True, kahan: bool = False,
                 max_grad_norm: float | None = None, seed: int = 0, sr_bits: int | None = None):
        if not isinstance(optimizer, Optimizer):
            raise TypeError("optimizer must be an autograd.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")
        if optimizer.state:
            raise ValueError("wrap the optimizer before its first step (its state must be empty)")
        self.optimizer = optimizer
        self.scaler = _NoScaling() if scaler is None else scaler
        for name in ("scale", "unscale_", "update", "get_scale", "state_dict", "load_state_dict"):
            if not callable(getattr(self.scaler, name, None)):
                raise TypeError(f"scaler has no method {name}(); pass a scalers.* loss scaler "
                                "or None")
        self.rounding = B.parse_mode(rounding)
        for name, flag in (("master_weights", master_weights), ("kahan", kahan)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        if kahan and master_weights:
            raise ValueError("kahan=True compensates the 16-bit update; it needs "
                             "master_weights=False")
        self.master_weights, self.kahan = master_weights, kahan
        bad_norm = max_grad_norm is not None and (
            isinstance(max_grad_norm, bool) or not isinstance(max_grad_norm, numbers.Real)
            or not 0 < max_grad_norm < math.inf)
        if bad_norm:
            raise ValueError("max_grad_norm must be a finite number > 0 or None, got "
                             f"{max_grad_norm!r}")
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.seed = B.derive_seed(seed)  # validates: an int in 0..2^64-1
        self._seed_arg, self.sr_bits = int(seed), sr_bits
        if sr_bits is not None and self.rounding != B.Mode.SR:
            raise ValueError("sr_bits is only meaningful with rounding='sr'")

        self.params = [p for _, p, _ in optimizer._indexed()]
        self.formats = [self._storage_format(i, p, storage) for i, p in enumerate(self.params)]
        #: has_master[i]: parameter i keeps an fp32 master (master_weights, and a storage
        #: format that does not hold every fp32 value).
        self.has_master = [master_weights and not B.contains(f, B.F32) for f in self.formats]
        # Masters are float32 copies (exact: storage values lie on fp32's grid).
        self.slots = [_Slot(p.data.copy() if m else p.data)
                      for p, m in zip(self.params, self.has_master)]
        self.kahan_buffers = [np.zeros_like(p.data) for p in self.params] if kahan else None
        k = 0
        for group in optimizer.param_groups:
            n = len(group["params"])
            group["params"] = self.slots[k:k + n]
            k += n
        self.steps = 0                # step() calls, skipped ones included: keys the SR streams
        self._grads: list | None = None
        self._found_inf = False

    @staticmethod
    def _storage_format(i: int, p, storage) -> B.Format:
        if storage is None and getattr(p, "fmt", None) is None:
            raise ValueError(f"parameter {i} has no .fmt; pass storage= (e.g. 'fp16')")
        fmt = B.get_fmt(p.fmt if storage is None else storage)
        if np.dtype(fmt.carrier_dtype) != np.float32:
            raise ValueError(f"storage format {fmt.name} does not fit in float32 masters")
        if p.data.dtype != np.float32:
            raise TypeError(f"parameter {i}: model data must be a float32 carrier, "
                            f"got {p.data.dtype}")
        if not np.array_equal(B.round_in(p.data, fmt, "rne"), p.data, equal_nan=True):
            raise ValueError(f"parameter {i} is not on the {fmt.name} grid; cast the model to the "
                             "storage format before wrapping the optimizer")
        return fmt

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def scale_loss(self, loss):
        return self.scaler.scale(loss)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad[...] = 0

    def unscale_(self) -> bool:
        """Copy the model's gradients to float32 and unscale them (once per step, as PyTorch)."""
        if self._grads is not None:
            raise RuntimeError("unscale_() has already been called since the last step()")
        grads = [None if p.grad is None else np.array(p.grad, dtype=np.float32, copy=True)
                 for p in self.params]
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if g is not None and g.shape != p.data.shape:
                raise ValueError(f"parameter {i}: grad shape {g.shape} != data shape "
                                 f"{p.data.shape}")
        self._found_inf = bool(self.scaler.unscale_(grads))
        self._grads = grads
        return self._found_inf

    def step(self) -> StepResult:
        scale = float(self.scaler.get_scale())
        if self._grads is None:
            self.unscale_()
        grads, found = self._grads, self._found_inf
        self._grads = None
        skip = found and getattr(self.scaler, "skip_on_overflow", True)
        norm = math.inf
        if not skip:
            # One global norm over every parameter (torch's clip_grad_norm_), clipped or not.
            norm = clip_grad_norm_(grads, self.max_grad_norm if self.max_grad_norm is not None
                                   else math.inf)
            for slot, p, g, m in zip(self.slots, self.params, grads, self.has_master):
                slot.grad = g
                if not m:
                    slot.data = p.data   # the model may have rebound .data since the last step
            self.optimizer.step(apply=self._apply)
            for slot in self.slots:
                slot.grad = None
        self.scaler.update(found)
        self.steps += 1
        return StepResult(bool(skip), bool(found), scale, norm)

    def _round(self, x: np.ndarray, i: int) -> np.ndarray:
        """One rounding into the storage format; SR draws from a stream keyed by (seed, step, i)."""
        fmt = self.formats[i]
        if self.rounding == B.Mode.SR:
            return B.round_in(x, fmt, self.rounding, seed=B.derive_seed(self.seed, self.steps, i),
                            sr_bits=self.sr_bits)
        return B.round_in(x, fmt, self.rounding)

    def _apply(self, i: int, slot: _Slot, mult: float, delta: np.ndarray) -> None:
        if self.has_master[i]:
            # The fp32 master takes the inner optimizer's own update (PyTorch's, in fp32); the
            # model weight is its rounding into the storage format.
            update_in_place(slot.data, mult, delta)
            np.copyto(self.params[i].data, self._round(slot.data, i))
        else:
            self._apply_in_storage(i, slot, mult, delta)

    def stored(self) -> list:
        """Where each parameter's value lives between steps, in ``params`` order: its fp32
        master slot where it has one, else the parameter itself (both have ``.data``)."""
        return [s if m else p for s, p, m in zip(self.slots, self.params, self.has_master)]

    def _apply_in_storage(self, i: int, slot: _Slot, mult: float, delta: np.ndarray) -> None:
        w = slot.data
        # u = w * mult is exact in float64: two 24-bit significands make at most 48 bits.
        u = w.astype(np.float64) * mult if mult != 1.0 else w.astype(np.float64)
        y = delta
        if self.kahan:
            # Kahan: y = delta - c; t = round(u + y); c = (t - u) - y, the part of y that t lost.
            # As in a kernel that computes in fp32 registers and stores 16-bit values: y and
            # the compensation are fp32 operations, t and c are rounded into the storage format.
            c = self.kahan_buffers[i]
            y = delta - c
        t = self._round(_sum_round_to_odd(u, y.astype(np.float64)), i)
        if self.kahan:
            lost = (t.astype(np.float64) - u).astype(np.float32)  # exact when t, u within 2x
            np.copyto(c, B.round_in(lost - y, self.formats[i], "rne"))
        np.copyto(w, t)

    # -- checkpoints -------------------------------------------------------------------------------
    def _config(self) -> dict:
        return {"storage": [f.name for f in self.formats], "rounding": self.rounding.short,
                "master_weights": self.master_weights, "kahan": self.kahan,
                "max_grad_norm": self.max_grad_norm, "seed": self._seed_arg,
                "sr_bits": self.sr_bits}

    def state_dict(self) -> dict:
        """Model weights, masters, Kahan buffers, optimizer and scaler state, step count: a
        checkpoint from which training resumes bit for bit (copies; plain dicts and arrays)."""
        return {"config": self._config(), "steps": self.steps,
                "params": [p.data.copy() for p in self.params],
                "masters": ([s.data.copy() if m else None
                             for s, m in zip(self.slots, self.has_master)]
                            if any(self.has_master) else None),
                "kahan": [c.copy() for c in self.kahan_buffers] if self.kahan else None,
                "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict()}

    def load_state_dict(self, state_dict: dict) -> None:
        keys = {"config", "steps", "params", "masters", "kahan", "optimizer", "scaler"}
        if not isinstance(state_dict, dict) or set(state_dict) != keys:
            raise ValueError(f"state_dict must be a dict with exactly the keys {sorted(keys)}")
        if state_dict["config"] != self._config():
            raise ValueError(f"checkpoint was made with {state_dict['config']}, this optimizer "
                             f"is {self._config()}")
        steps = state_dict["steps"]
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"steps must be an int >= 0, got {steps!r}")
        arrays = [("params", self.params, state_dict["params"])]
        if any(self.has_master):
            arrays.append(("masters", self.slots, state_dict["masters"]))
        elif state_dict["masters"] is not None:
            raise ValueError("'masters' must be None: this optimizer keeps no master weights")
        for name, targets, saved in arrays:
            if saved is None or len(saved) != len(targets):
                raise ValueError(f"'{name}' must hold {len(targets)} entries")
            for i, (t, a) in enumerate(zip(targets, saved)):
                if name == "masters" and (a is None) != (not self.has_master[i]):
                    raise ValueError(f"'masters'[{i}] must be "
                                     f"{'an array' if self.has_master[i] else 'None'}")
                if a is None:
                    continue
                if np.shape(a) != t.data.shape:
                    raise ValueError(f"'{name}'[{i}] has shape {np.shape(a)}, "
                                     f"expected {t.data.shape}")
        saved_kahan = state_dict["kahan"]
        if self.kahan and (saved_kahan is None or len(saved_kahan) != len(self.params)):
            raise ValueError(f"'kahan' must hold {len(self.params)} arrays")
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self.scaler.load_state_dict(state_dict["scaler"])
        for _name, targets, saved in arrays:
            for t, a in zip(targets, saved):
                if a is not None:
                    np.copyto(t.data, np.asarray(a, dtype=np.float32))
        if self.kahan:
            for c, a in zip(self.kahan_buffers, state_dict["kahan"]):
                np.copyto(c, np.asarray(a, dtype=np.float32))
        self.steps, self._grads = int(steps), None
