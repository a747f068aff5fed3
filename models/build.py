"""From a resolved config to engine objects: the precision policy, the loss scaler, the optimizer
and the mixed precision wrapper.

Provides :func:`make_policy`, :func:`make_scaler`, :func:`make_optimizer` and
:func:`make_mixed`.  The wrapper is always ``autograd.mixed.MixedPrecisionOptimizer`` (for fp32
training too: storage fp32, no masters, no scaler), so every configuration runs the same step
code.  When a model's parameters live in two formats (an O2 CNN keeps batch-norm in fp32 while
the rest is fp16) :class:`GroupedMixed` runs one wrapper per storage format around ONE shared loss
scaler: every group skips when any group overflowed, and the scale is updated once per step.

Imports autograd, scalers and numpy.
"""

from __future__ import annotations

import math

import numpy as np

from autograd import get_policy
from autograd.mixed import MixedPrecisionOptimizer, StepResult
from autograd.optim import SGD, Adam, AdamW
from scalers import (
    DynamicLossScaler,
    LogNormalLossScaler,
    StaticLossScaler,
    from_deepspeed_config,
)

from .config import DEEPSPEED_SCALER_KEYS

__all__ = ["GroupedMixed", "make_mixed", "make_optimizer", "make_policy", "make_scaler"]


def make_policy(cfg):
    """The autograd Policy of ``cfg["precision"]`` (tensor_core overrides the accumulation)."""
    prec = cfg["precision"]
    name = "O0" if prec["policy"] == "fp32" else prec["policy"]
    tc = prec["tensor_core"]
    if tc == "default":
        return get_policy(name)
    if tc == "ideal-fp16":  # the fp16-accumulator Tensor Core: products summed in fp16
        return get_policy(name, accumulation=tc, accumulation_format="fp16")
    return get_policy(name, accumulation=tc)


def _power_of_two(value, key):
    p = math.log2(value)
    if p != int(p):
        raise ValueError(f"{key}: the DeepSpeed scaler starts at 2^initial_scale_power; "
                         f"{value} is not a power of two")
    return int(p)


def make_scaler(cfg):
    """The loss scaler of ``cfg["scaler"]`` (None for type "none")."""
    s = cfg["scaler"]
    kind = s["type"]
    if kind == "none":
        return None
    if kind == "static":
        return StaticLossScaler(s["scale"])
    if kind == "dynamic":
        return DynamicLossScaler(init_scale=s["init_scale"], growth_factor=s["growth_factor"],
                                 backoff_factor=s["backoff_factor"],
                                 growth_interval=s["growth_interval"], min_scale=s["min_scale"],
                                 max_scale=s["max_scale"])
    if kind == "apex":
        return DynamicLossScaler.apex(init_scale=s["init_scale"],
                                      scale_window=s["growth_interval"],
                                      min_loss_scale=s["min_scale"],
                                      max_loss_scale=s["max_scale"] or 2.0 ** 24)
    if kind == "deepspeed":
        if cfg["fp16"]["enabled"]:
            block = dict(cfg["fp16"])
            block["loss_scale"] = 0
            return from_deepspeed_config({"fp16": block})
        args = {theirs: s[ours] for ours, theirs in DEEPSPEED_SCALER_KEYS.items()}
        args["initial_scale_power"] = _power_of_two(s["init_scale"], "scaler.init_scale")
        args["min_loss_scale"] = s["min_scale"] or 1.0
        return DynamicLossScaler.deepspeed(**args)
    if kind == "backoff":
        return DynamicLossScaler.openseq2seq_backoff(
            scale_min=s["min_scale"] or 1.0, scale_max=s["max_scale"] or 2.0 ** 24,
            step_factor=s["growth_factor"], step_window=s["growth_interval"])
    if kind == "lognormal":
        return LogNormalLossScaler(scale_min=s["min_scale"] or 1.0,
                                   scale_max=s["max_scale"] or 2.0 ** 24, log_max=s["log_max"],
                                   beta1=s["beta1"], beta2=s["beta2"],
                                   overflow_std_dev=s["overflow_std_dev"],
                                   overflow_value=s["overflow_value"])
    raise ValueError(f"scaler.type: unknown {kind!r}")


def make_optimizer(opt_cfg, params):
    o = opt_cfg
    if o["type"] == "sgd":
        return SGD(params, lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])
    cls = Adam if o["type"] == "adam" else AdamW
    return cls(params, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
               weight_decay=o["weight_decay"])


def make_mixed(cfg, model, policy, scaler):
    """The mixed precision optimizer for ``model``: one wrapper, or a GroupedMixed when the
    parameters are stored in more than one format."""
    o = cfg["optimizer"]
    master = policy.master_weights if o["master_weights"] is None else o["master_weights"]
    kw = {"rounding": "sr" if o["stochastic_rounding"] else "rne", "max_grad_norm": o["grad_clip"],
          "seed": cfg["seed"]}
    groups = {}
    for p in model.parameters():
        groups.setdefault(p.fmt.name, []).append(p)
    if len(groups) == 1:
        (fmt, params), = groups.items()
        # fp32 weights need no fp32 master: the update rounds into fp32 either way.
        use_master = master and fmt != "fp32"
        return MixedPrecisionOptimizer(make_optimizer(o, params), scaler, storage=fmt,
                                       master_weights=use_master, **kw)
    return GroupedMixed(o, groups, scaler, master=master, **kw)


class _SharedScale:
    """What each group's wrapper sees of the one real scaler: scale and unscale pass through;
    found_inf is the verdict over ALL groups (decided before any group steps); only the last
    group's update() reaches the real scaler, once per step."""

    def __init__(self, owner, real, is_last):
        self.owner, self.real, self.is_last = owner, real, is_last
        self.skip_on_overflow = getattr(real, "skip_on_overflow", True)

    def scale(self, loss):
        return self.real.scale(loss)

    def get_scale(self):
        return self.real.get_scale()

    def unscale_(self, grads):
        self.real.unscale_(grads)
        return self.owner.any_inf

    def update(self, found_inf=None):
        if self.is_last:
            return self.real.update(found_inf)
        return bool(found_inf)

    def state_dict(self):
        return self.real.state_dict() if self.is_last else {}

    def load_state_dict(self, state):
        if self.is_last:
            self.real.load_state_dict(state)


class _NoScale:
    skip_on_overflow = True

    def scale(self, loss):
        return loss

    def get_scale(self):
        return 1.0

    def unscale_(self, grads):
        return False

    def update(self, found_inf=None):
        return bool(found_inf)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        if state != {}:
            raise ValueError("this run has no loss scaler; its saved scaler state must be {}")


class GroupedMixed:
    """One MixedPrecisionOptimizer per storage format, one scaler, one skip decision per step."""

    def __init__(self, opt_cfg, groups, scaler, *, master, **kw):
        real = scaler if scaler is not None else _NoScale()
        names = list(groups)
        self.scaler = scaler
        self.any_inf = False
        self.wrappers = []
        for i, fmt in enumerate(names):
            proxy = _SharedScale(self, real, i == len(names) - 1)
            opt = make_optimizer(opt_cfg, groups[fmt])
            self.wrappers.append(MixedPrecisionOptimizer(
                opt, proxy, storage=fmt, master_weights=master and fmt != "fp32", **kw))
        self.params = [p for w in self.wrappers for p in w.params]
        self.master_weights = any(w.master_weights for w in self.wrappers)

    @property
    def slots(self):
        return [s for w in self.wrappers for s in w.slots]

    def zero_grad(self, set_to_none=True):
        for w in self.wrappers:
            w.zero_grad(set_to_none)

    def step(self):
        self.any_inf = not all(np.isfinite(p.grad).all() for p in self.params
                               if p.grad is not None)
        results = [w.step() for w in self.wrappers]
        norm = math.sqrt(sum(r.grad_norm ** 2 for r in results)) if not self.any_inf else math.inf
        return StepResult(results[0].skipped, self.any_inf, results[0].scale, norm)

    def state_dict(self):
        return {"groups": [w.state_dict() for w in self.wrappers]}

    def load_state_dict(self, state):
        if not isinstance(state, dict) or len(state.get("groups", ())) != len(self.wrappers):
            raise ValueError(f"checkpoint holds a different number of parameter groups than "
                             f"this model's {len(self.wrappers)}")
        for w, s in zip(self.wrappers, state["groups"]):
            w.load_state_dict(s)
