"""DeepSpeed configs: `from_deepspeed_config`, the loss scaler a DeepSpeed-style config dict
asks for, and `fp16_scaler_args`, the one translation of DeepSpeed's "fp16" block (its keys, its
defaults :data:`FP16_DEFAULTS`, its checks) that models.config uses as well.

    {"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16,
              "loss_scale_window": 1000, "hysteresis": 2, "consecutive_hysteresis": false,
              "min_loss_scale": 1}}
        -> DynamicLossScaler.deepspeed(...)          ("loss_scale": 0 means dynamic)
    {"fp16": {"enabled": true, "loss_scale": 128}}  -> StaticLossScaler(128.0)
    {"bf16": {"enabled": true}}                     -> StaticLossScaler(1.0, skip_on_overflow=False)
    neither enabled (fp32 training)                 -> StaticLossScaler(1.0, skip_on_overflow=False)

As in DeepSpeed, a block counts only with "enabled": true (its default is false), and fp16 and
bf16 cannot both be enabled. Keys inside the fp16/bf16 blocks are checked strictly. At the top
level, DeepSpeed's other sections (optimizer, zero_optimization, ...) are accepted and ignored,
because they configure things other than the loss scale; anything else is an error, so that a
typo such as "fp_16" does not silently turn loss scaling off.
Must not import autograd or softfloat (numpy only; see DESIGN.md).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

from .dynamic import DynamicLossScaler
from .static import StaticLossScaler

__all__ = ["BF16_DEFAULTS", "FP16_DEFAULTS", "IGNORED_TOP_LEVEL", "fp16_scaler_args",
           "from_deepspeed_config", "resolve_fp16_block"]

# The "fp16" block's keys and DeepSpeed's defaults for them (docs/loss-scaling.md, 3).
FP16_DEFAULTS = {"enabled": False, "auto_cast": False, "loss_scale": 0, "initial_scale_power": 16,
                 "loss_scale_window": 1000, "hysteresis": 2, "consecutive_hysteresis": False,
                 "min_loss_scale": 1}
BF16_DEFAULTS = {"enabled": False}

# Top-level sections of a DeepSpeed config that say nothing about the loss scale.
IGNORED_TOP_LEVEL = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "optimizer", "scheduler", "gradient_clipping", "prescale_gradients",
    "gradient_predivide_factor", "sparse_gradients", "communication_data_type", "data_types",
    "zero_optimization", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
    "steps_per_print", "wall_clock_breakdown", "memory_breakdown", "dump_state",
    "activation_checkpointing", "flops_profiler", "tensorboard", "wandb", "csv_monitor",
    "comms_logger", "checkpoint", "elasticity", "aio", "autotuning", "data_efficiency",
    "curriculum_learning", "compression_training", "sparse_attention", "seed",
})


def _bool(block: str, key: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{block}.{key}: must be true or false, got {type(value).__name__} "
                        f"{value!r}")
    return value


def _int(block: str, key: str, value, *, minimum: int, maximum: int | None = None) -> int:
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Integral)
          and value >= minimum and (maximum is None or value <= maximum))
    if not ok:
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{block}.{key}: must be an integer >= {minimum}{upper}, got {value!r}")
    return int(value)


def _number(block: str, key: str, value, *, minimum: float, strict: bool) -> float:
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Real)
          and math.isfinite(value) and (value > minimum if strict else value >= minimum))
    if not ok:
        sign = ">" if strict else ">="
        raise ValueError(f"{block}.{key}: must be a finite number {sign} {minimum}, got {value!r}")
    return float(value)


def _block(cfg: Mapping, name: str, defaults: dict) -> dict:
    block = cfg.get(name, {})
    if not isinstance(block, Mapping):
        raise TypeError(f'"{name}" must be a dict, got {type(block).__name__}')
    unknown = sorted(set(block) - set(defaults), key=str)
    if unknown:
        raise ValueError(f'unknown key(s) {unknown} in "{name}"; accepted: {sorted(defaults)}')
    return {**defaults, **block}


def resolve_fp16_block(block: Mapping) -> dict:
    """The DeepSpeed "fp16" block with DeepSpeed's defaults (:data:`FP16_DEFAULTS`) filled in
    and every value checked; errors name the key ("fp16.hysteresis: must be ...").

    initial_scale_power is limited to -126..127: 2^128 overflows float32, and below 2^-126 the
    scale would be a float32 subnormal.
    """
    b = _block({"fp16": block}, "fp16", FP16_DEFAULTS)
    return {
        "enabled": _bool("fp16", "enabled", b["enabled"]),
        # auto_cast casts the model's inputs; it has nothing to do with the loss scale
        "auto_cast": _bool("fp16", "auto_cast", b["auto_cast"]),
        "loss_scale": _number("fp16", "loss_scale", b["loss_scale"], minimum=0.0, strict=False),
        "initial_scale_power": _int("fp16", "initial_scale_power", b["initial_scale_power"],
                                    minimum=-126, maximum=127),
        "loss_scale_window": _int("fp16", "loss_scale_window", b["loss_scale_window"],
                                  minimum=1),
        "hysteresis": _int("fp16", "hysteresis", b["hysteresis"], minimum=1),
        "consecutive_hysteresis": _bool("fp16", "consecutive_hysteresis",
                                        b["consecutive_hysteresis"]),
        "min_loss_scale": _number("fp16", "min_loss_scale", b["min_loss_scale"], minimum=0.0,
                                  strict=True),
    }


def fp16_scaler_args(block: Mapping) -> tuple[str, dict]:
    """DeepSpeed's reading of an "fp16" block (enabled or not): the one translation of its keys
    into a loss scaler, used by :func:`from_deepspeed_config` and by models.config.

    Returns ``("static", {"loss_scale": s})`` when ``loss_scale`` > 0 (a fixed scale), else
    ``("deepspeed", kwargs)`` with the keyword arguments of :meth:`DynamicLossScaler.deepspeed`
    (``loss_scale`` 0 means dynamic, DeepSpeed's convention).
    """
    b = resolve_fp16_block(block)
    if b["loss_scale"] != 0.0:
        return "static", {"loss_scale": b["loss_scale"]}
    power, min_scale = b["initial_scale_power"], b["min_loss_scale"]
    if 2.0**power < min_scale:
        raise ValueError(f"fp16.initial_scale_power: {power} gives 2^{power} = {2.0**power}, "
                         f"below fp16.min_loss_scale {min_scale}")
    return "deepspeed", {"initial_scale_power": power,
                         "loss_scale_window": b["loss_scale_window"],
                         "hysteresis": b["hysteresis"],
                         "consecutive_hysteresis": b["consecutive_hysteresis"],
                         "min_loss_scale": min_scale}


def from_deepspeed_config(cfg: Mapping):
    """Return the scaler that DeepSpeed would use for config `cfg` (see the module docstring)."""
    if not isinstance(cfg, Mapping):
        raise TypeError(f"cfg must be a dict (a DeepSpeed config), got {type(cfg).__name__}")
    known = IGNORED_TOP_LEVEL | {"fp16", "bf16", "bfloat16", "amp"}
    unknown = sorted((k for k in cfg if k not in known), key=str)
    if unknown:
        raise ValueError(f"unknown top-level key(s) {unknown}; the loss scale is read from "
                         '"fp16" and "bf16" (alias "bfloat16"); other DeepSpeed sections accepted '
                         f"and ignored: {sorted(IGNORED_TOP_LEVEL)}")
    if "bf16" in cfg and "bfloat16" in cfg:
        raise ValueError('give "bf16" or its alias "bfloat16", not both')
    amp = cfg.get("amp", {})
    if not isinstance(amp, Mapping):
        raise TypeError(f'"amp" must be a dict, got {type(amp).__name__}')
    if _bool("amp", "enabled", amp.get("enabled", False)):
        raise ValueError('"amp" (apex amp inside DeepSpeed) is not supported here; use '
                         "DynamicLossScaler.apex() directly, or the \"fp16\" block")

    fp16 = _block(cfg, "fp16", FP16_DEFAULTS)
    bf16 = _block(cfg, "bfloat16" if "bfloat16" in cfg else "bf16", BF16_DEFAULTS)
    fp16_on = _bool("fp16", "enabled", fp16["enabled"])
    bf16_on = _bool("bf16", "enabled", bf16["enabled"])
    if fp16_on and bf16_on:
        raise ValueError('"fp16" and "bf16" cannot both be enabled')
    if not fp16_on:
        # bf16 has fp32's exponent range: DeepSpeed neither scales nor checks for overflow.
        return StaticLossScaler(1.0, skip_on_overflow=False)
    kind, args = fp16_scaler_args(fp16)
    if kind == "static":
        return StaticLossScaler(args["loss_scale"])
    return DynamicLossScaler.deepspeed(**args, raise_error_at_min_scale=True)
