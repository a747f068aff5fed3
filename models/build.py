"""From a resolved config to engine objects: the precision policy, the loss scaler, the optimizer
and the mixed precision wrapper.

Provides :func:`make_policy`, :func:`make_scaler`, :func:`make_optimizer` and
:func:`make_mixed`.  The wrapper is always ONE ``autograd.mixed.MixedPrecisionOptimizer`` (for
fp32 training too: storage fp32, no masters, no scaler), so every configuration runs the same
step code.  When a model's parameters live in two formats (an O2 CNN keeps batch-norm in fp32
while the rest is fp16) it reads each parameter's own format: one scaler, one overflow verdict
and skip decision, one global gradient norm (and clipping) per step, fp32 masters only for the
parameters stored narrower than fp32.

Imports autograd, scalers and numpy.
"""

from __future__ import annotations

import math

from autograd import get_policy, recipes
from autograd.mixed import MixedPrecisionOptimizer
from autograd.optim import SGD, Adam, AdamW
from scalers import (
    DynamicLossScaler,
    LogNormalLossScaler,
    StaticLossScaler,
    from_deepspeed_config,
)

from .config import DEEPSPEED_SCALER_KEYS

__all__ = ["make_mixed", "make_optimizer", "make_policy", "make_scaler"]


def make_policy(cfg):
    """The autograd Policy of ``cfg["precision"]`` (tensor_core overrides the accumulation; an
    fp8 policy takes its recipe's arguments from ``precision.recipe``)."""
    prec = cfg["precision"]
    spec = "O0" if prec["policy"] == "fp32" else prec["policy"]
    if spec in ("fp8_delayed", "fp8_current"):
        cls = recipes.DelayedScaling if spec == "fp8_delayed" else recipes.Float8CurrentScaling
        given = {k: v for k, v in prec.get("recipe", {}).items() if v is not None}
        spec = cls(**given)         # get_policy(recipe): its preset, with these arguments
    tc = prec["tensor_core"]
    if tc == "default":
        return get_policy(spec)
    if tc == "ideal-fp16":  # the fp16-accumulator Tensor Core: products summed in fp16
        return get_policy(spec, accumulation=tc, accumulation_format="fp16")
    return get_policy(spec, accumulation=tc)


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
    """The mixed precision optimizer for ``model``: one wrapper over every parameter, each kept
    in its own format (``storage=None``), with fp32 masters for those stored narrower than fp32
    when the policy (or ``optimizer.master_weights``) asks for master weights."""
    o = cfg["optimizer"]
    master = policy.master_weights if o["master_weights"] is None else o["master_weights"]
    return MixedPrecisionOptimizer(
        make_optimizer(o, model.parameters()), scaler, storage=None, master_weights=master,
        rounding="sr" if o["stochastic_rounding"] else "rne", max_grad_norm=o["grad_clip"],
        seed=cfg["seed"])
