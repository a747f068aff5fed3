"""The run configuration: one JSON object for model, data, precision, optimizer, scaler and budget.

Provides :func:`load_config` (a JSON file) and :func:`resolve_config` (a dict), which validate
every key against the schema below, fill in defaults and return the complete, normalised config
(a plain dict, saved beside each run as ``config.json``).  Errors are :class:`ConfigError` and name
the key path (``optimizer.lr``) and the accepted values or types.

Three ways to choose the precision, as users know them from other tools (at most one may be used,
or all must agree):

* ``"precision": {"policy": "O2", "tensor_core": "v100"}`` -- this project's own block;
* ``"opt_level": "O2"`` -- NVIDIA apex amp style (O1/O2 get a dynamic apex scaler by default);
* ``"fp16": {"enabled": true, "loss_scale": 0, ...}`` / ``"bf16": {"enabled": true}`` -- the
  DeepSpeed blocks, with DeepSpeed's keys and defaults (loss_scale 0 means dynamic).

An explicit ``"scaler"`` block always wins over the scaler implied by opt_level or the fp16 block.
The fp16 block is read by scalers.config (:func:`scalers.config.fp16_scaler_args`), the one
translation of DeepSpeed's keys and defaults.

Checks beyond the schema's types and ranges: a Tensor Core model must take the policy's input
format (asked of softfloat.tensorcore, which knows every model's formats); ``data.path`` is only
for the datasets read from files (mnist, fashion_mnist); a JSON file may not repeat a key within
one object (json would silently keep the last one).

Imports the standard library, models.schema and scalers.config; softfloat.tensorcore and
models.build (hence autograd) lazily, for the Tensor Core check.
"""

from __future__ import annotations

import copy
import json
import os

from scalers.config import FP16_DEFAULTS, fp16_scaler_args, resolve_fp16_block

from .schema import ConfigError, Field, check_section

__all__ = [
    "MODELS",
    "OPTIMIZERS",
    "POLICIES",
    "SCALERS",
    "SCHEMA",
    "TENSOR_CORES",
    "DEEPSPEED_SCALER_KEYS",
    "ConfigError",
    "load_config",
    "resolve_config",
]

POLICIES = ("fp32", "O0", "O1", "O2", "O3", "bf16", "dfp16", "fp8_delayed", "fp8_current")
#: precision.recipe keys each fp8 policy takes (Transformer Engine's recipe arguments; null:
#: the recipe's default).
RECIPE_KEYS = {"fp8_delayed": ("margin", "fp8_format", "amax_history_len", "amax_compute_algo"),
               "fp8_current": ("fp8_format",)}
# "default": the policy's own accumulation; "native": host BLAS (fp32, unspecified order); the
# rest are softfloat.tensorcore models, the same names as autograd.policy.TC_MODELS (a test checks).
TENSOR_CORES = ("default", "native", "ideal-fp32", "ideal-fp16", "v100", "t4", "a100", "ada",
                "h100", "b200")
SCALERS = ("none", "static", "dynamic", "apex", "deepspeed", "backoff", "lognormal")
OPTIMIZERS = ("sgd", "adam", "adamw")
MODELS = ("mlp", "cnn", "lstm", "gru", "transformer")
_DATASETS = ("digits", "mnist", "fashion_mnist", "blobs", "python_text", "synthetic_text")
_FILE_DATASETS = ("mnist", "fashion_mnist")  # read from data.path; the others are built in
_LM_MODELS = ("lstm", "gru", "transformer")

_MODEL_COMMON = {"type": Field(str, None, choices=MODELS, required=True),
                 "init_gain": Field(float, 1.0, minimum=0.0)}
MODEL_SCHEMA = {
    "mlp": {"hidden": Field("list[int]", [64, 64], minimum=1),
            "activation": Field(str, "relu", choices=("relu", "tanh"))},
    "cnn": {"channels": Field("list[int]", [8, 16], minimum=1),
            "hidden": Field(int, 32, minimum=1), "batch_norm": Field(bool, True)},
    "lstm": {"embed": Field(int, 16, minimum=1), "hidden": Field(int, 32, minimum=1),
             "layers": Field(int, 1, minimum=1)},
    "transformer": {"d_model": Field(int, 32, minimum=1), "heads": Field(int, 2, minimum=1),
                    "layers": Field(int, 1, minimum=1), "d_ff": Field(int, 64, minimum=1)},
}
MODEL_SCHEMA["gru"] = MODEL_SCHEMA["lstm"]


def _fp16_field(key, default):
    """A schema Field for one key of DeepSpeed's "fp16" block: the loss scales are numbers
    (DeepSpeed's defaults write them as the integers 0 and 1); the other keys keep the type of
    their default (bool or int)."""
    if key in ("loss_scale", "min_loss_scale"):
        return Field(float, float(default))
    return Field(type(default), default)


SCHEMA = {
    "name": Field(str, "run"),
    "seed": Field(int, 0, minimum=0),
    "data": {
        "name": Field(str, "digits", choices=_DATASETS),
        "path": Field(str, None, nullable=True),
        "batch_size": Field(int, 32, minimum=1),
        "seq_len": Field(int, 32, minimum=1),
        "test_fraction": Field(float, 0.25, minimum=0.01, maximum=0.9),
        "max_chars": Field(int, None, nullable=True, minimum=1000),
        "max_train": Field(int, None, nullable=True, minimum=1),
        "lowercase": Field(bool, False),
        "n": Field(int, 1000, minimum=8), "dim": Field(int, 16, minimum=1),
        "classes": Field(int, 4, minimum=2), "spread": Field(float, 1.0, minimum=0.0),
    },
    "precision": {
        "policy": Field(str, None, nullable=True, choices=POLICIES),
        "tensor_core": Field(str, "default", choices=TENSOR_CORES),
        # The loss is multiplied by this before backward (and the gradients are NOT divided by
        # it): it models the tiny gradients of large models / long sequences.  Not a loss scale.
        "loss_multiplier": Field(float, 1.0, minimum=0.0, exclusive_minimum=True),
        # fp8 policies only: the recipe's arguments (autograd.recipes; null = TE's default)
        "recipe": {
            "margin": Field(int, None, nullable=True, minimum=-100, maximum=100),
            "fp8_format": Field(str, None, nullable=True, choices=("HYBRID", "E4M3")),
            "amax_history_len": Field(int, None, nullable=True, minimum=1),
            "amax_compute_algo": Field(str, None, nullable=True,
                                       choices=("max", "most_recent")),
        },
    },
    "optimizer": {
        "type": Field(str, "sgd", choices=OPTIMIZERS),
        "lr": Field(float, 0.1, minimum=0.0, exclusive_minimum=True),
        "momentum": Field(float, 0.0, minimum=0.0, maximum=1.0),
        "weight_decay": Field(float, 0.0, minimum=0.0),
        "betas": Field("list[float]", [0.9, 0.999], length=2, minimum=0.0, maximum=1.0),
        "eps": Field(float, 1e-8, minimum=0.0),
        "master_weights": Field(bool, None, nullable=True),
        "stochastic_rounding": Field(bool, False),
        "grad_clip": Field(float, None, nullable=True, minimum=0.0, exclusive_minimum=True),
    },
    "scaler": {
        "type": Field(str, None, nullable=True, choices=SCALERS),
        "scale": Field(float, 1.0, minimum=0.0, exclusive_minimum=True),
        "init_scale": Field(float, 2.0 ** 16, minimum=0.0, exclusive_minimum=True),
        "growth_factor": Field(float, 2.0, minimum=1.0, exclusive_minimum=True),
        "backoff_factor": Field(float, 0.5, minimum=0.0, maximum=1.0, exclusive_minimum=True),
        "growth_interval": Field(int, 2000, minimum=1),
        "hysteresis": Field(int, 2, minimum=1),
        "consecutive_hysteresis": Field(bool, False),
        "min_scale": Field(float, None, nullable=True, minimum=0.0, exclusive_minimum=True),
        "max_scale": Field(float, None, nullable=True, minimum=0.0, exclusive_minimum=True),
        "log_max": Field(float, 16.0), "beta1": Field(float, 0.99, minimum=0.0, maximum=1.0),
        "beta2": Field(float, 0.999, minimum=0.0, maximum=1.0),
        "overflow_std_dev": Field(float, 3.09, minimum=0.0),
        # LogNormal: the x fed to its moments on an overflow (null: OpenSeq2Seq's 2**log_max)
        "overflow_value": Field(float, None, nullable=True),
    },
    "budget": {
        "steps": Field(int, 200, minimum=1),
        "eval_every": Field(int, 50, minimum=1),
        "eval_batches": Field(int, None, nullable=True, minimum=1),
        "log_every": Field(int, 1, minimum=1),
    },
    "checkpoint": {
        "every": Field(int, 0, minimum=0),
    },
    "instrument": {
        "histogram_every": Field(int, 50, minimum=0),
        "histogram_steps": Field("list[int]", [], minimum=0),
        "lost_updates": Field(bool, True),
        # steps at which one gradient element is set to +Inf after backward: a simulated
        # overflow, to watch how each loss scaler reacts (skip, back off, hysteresis)
        "inject_overflow_steps": Field("list[int]", [], minimum=0),
    },
    "opt_level": Field(str, None, nullable=True, choices=("O0", "O1", "O2", "O3")),
    # DeepSpeed's "fp16" block: its keys and defaults are scalers.config's (the one place that
    # translates it); its values are checked there (resolve_fp16_block), the types here.
    "fp16": {key: _fp16_field(key, value) for key, value in FP16_DEFAULTS.items()},
    "bf16": {"enabled": Field(bool, False)},
}

#: scaler-block key -> keyword of DynamicLossScaler.deepspeed (DeepSpeed's name); init_scale is
#: 2^initial_scale_power.
DEEPSPEED_SCALER_KEYS = {
    "init_scale": "initial_scale_power", "growth_interval": "loss_scale_window",
    "hysteresis": "hysteresis", "consecutive_hysteresis": "consecutive_hysteresis",
    "min_scale": "min_loss_scale"}

# apex opt_level -> (policy, default scaler); docs/loss-scaling.md section 2.
_APEX = {"O0": ("O0", "none"), "O1": ("O1", "apex"), "O2": ("O2", "apex"), "O3": ("O3", "none")}


def _no_duplicate_keys(path):
    """object_pairs_hook for json.load: a key given twice in one object is an error (json's
    default keeps the last value silently, so a config could say two things at once)."""
    def hook(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                keys = ", ".join(dict.fromkeys(k for k, _ in pairs))
                raise ConfigError(f"{path}: duplicate key {key!r} in one JSON object (the "
                                  f"object with keys {keys}); give each key once")
            seen.add(key)
        return dict(pairs)
    return hook


def load_config(path):
    """Read and resolve a JSON config file (duplicate keys are an error naming the key)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"config file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        try:
            raw = json.load(fh, object_pairs_hook=_no_duplicate_keys(path))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    try:
        return resolve_config(raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _precision_choices(raw, cfg):
    """The policies implied by each precision key the user actually wrote."""
    said = {}
    if (raw.get("precision") or {}).get("policy") is not None:
        said["precision.policy"] = cfg["precision"]["policy"]
    if raw.get("opt_level") is not None:
        said["opt_level"] = _APEX[cfg["opt_level"]][0]
    if cfg["fp16"]["enabled"]:
        said["fp16.enabled"] = "O2"
    if cfg["bf16"]["enabled"]:
        said["bf16.enabled"] = "bf16"
    return said


def _canon(policy):
    return "O0" if policy == "fp32" else policy


def resolve_config(raw):
    """Validate ``raw`` (a dict) and return the complete config with defaults filled in."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config must be a JSON object, got {type(raw).__name__}")
    raw = copy.deepcopy(raw)
    if "model" not in raw:
        raise ConfigError("model: required; a block like {\"type\": \"mlp\"}; accepted types: "
                          + ", ".join(MODELS))
    model_raw = raw["model"]
    if not isinstance(model_raw, dict):
        raise ConfigError(f"model: must be an object, got {type(model_raw).__name__}")
    cfg = check_section(raw, SCHEMA | {"model": None}, "")
    mtype = check_section({"type": model_raw.get("type")}, {"type": _MODEL_COMMON["type"]},
                          "model")["type"]
    cfg["model"] = check_section(model_raw, _MODEL_COMMON | MODEL_SCHEMA[mtype], "model")

    said = _precision_choices(raw, cfg)
    if len({_canon(p) for p in said.values()}) > 1:
        pairs = ", ".join(f"{k} -> {v}" for k, v in said.items())
        raise ConfigError(f"precision: conflicting choices ({pairs}); set only one of "
                          "precision.policy, opt_level, fp16.enabled, bf16.enabled")
    policy = next(iter(said.values()), "fp32")
    cfg["precision"]["policy"] = policy

    try:
        cfg["fp16"] = resolve_fp16_block(cfg["fp16"])
        if cfg["fp16"]["enabled"]:
            fp16_kind, fp16_args = fp16_scaler_args(cfg["fp16"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    scaler = cfg["scaler"]
    if (raw.get("scaler") or {}).get("type") is None:
        if cfg["fp16"]["enabled"]:
            scaler["type"] = fp16_kind
            if fp16_kind == "static":
                scaler["scale"] = fp16_args["loss_scale"]
            else:
                scaler.update({ours: (2.0 ** fp16_args[theirs] if ours == "init_scale"
                                      else fp16_args[theirs])
                               for ours, theirs in DEEPSPEED_SCALER_KEYS.items()})
        elif raw.get("opt_level") is not None:
            scaler["type"] = _APEX[cfg["opt_level"]][1]
        else:
            scaler["type"] = "none"

    data = cfg["data"]
    lm_data = data["name"] in ("python_text", "synthetic_text")
    if (mtype in _LM_MODELS) != lm_data:
        want = "python_text or synthetic_text" if mtype in _LM_MODELS else \
            "digits, mnist, fashion_mnist or blobs"
        raise ConfigError(f"data.name: {data['name']!r} does not fit model.type {mtype!r}; "
                          f"accepted for that model: {want}")
    if data["name"] in _FILE_DATASETS and not data["path"]:
        raise ConfigError(f"data.path: required for data.name {data['name']!r} (a directory "
                          "with train-images-idx3-ubyte[.gz] and the other three IDX files; "
                          "the README's \"MNIST\" section says where to get them)")
    if data["path"] is not None and data["name"] not in _FILE_DATASETS:
        raise ConfigError(f"data.path: given for data.name {data['name']!r}, which is built in "
                          f"and reads no files; data.path is only for "
                          f"{' and '.join(_FILE_DATASETS)} (remove data.path, or choose one of "
                          "those)")
    if mtype == "transformer" and cfg["model"]["d_model"] % cfg["model"]["heads"]:
        raise ConfigError(f"model.heads: {cfg['model']['heads']} must divide model.d_model "
                          f"{cfg['model']['d_model']}")
    if mtype == "cnn" and data["name"] == "blobs":
        side = round(data["dim"] ** 0.5)
        if side * side != data["dim"]:
            raise ConfigError(f"data.dim: the cnn needs square images, {data['dim']} is not a "
                              "perfect square")
    if policy in ("fp32", "O0", "O1") and cfg["optimizer"]["master_weights"] is False:
        raise ConfigError(f"optimizer.master_weights: false makes no sense with policy "
                          f"{policy!r}, whose weights are already fp32")
    given = sorted(k for k, v in cfg["precision"]["recipe"].items() if v is not None)
    bad = [k for k in given if k not in RECIPE_KEYS.get(policy, ())]
    if bad:
        takes = ", ".join(RECIPE_KEYS[policy]) if policy in RECIPE_KEYS else "none"
        raise ConfigError(f"precision.recipe.{bad[0]}: policy {policy!r} takes no such recipe "
                          f"argument (accepted: {takes}; recipes belong to fp8_delayed and "
                          f"fp8_current)")
    if cfg["precision"]["tensor_core"] != "default" and policy in ("fp32", "O0", "dfp16"):
        raise ConfigError(f"precision.tensor_core: {cfg['precision']['tensor_core']!r} needs a "
                          f"policy with fp16/bf16 Tensor Core ops (O1, O2, O3, bf16), got "
                          f"policy {policy!r}")
    _check_tensor_core(cfg, said_tc="tensor_core" in (raw.get("precision") or {}))
    return cfg


def _check_tensor_core(cfg, *, said_tc):
    """The Tensor Core model of the resolved policy must take the policy's input format: ask
    softfloat.tensorcore (get_model raises for a combination no model has), and list the models
    that do take it."""
    from softfloat import tensorcore as tc

    from .build import make_policy

    try:
        policy = make_policy(cfg)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"precision: {exc}") from None
    model, inputs, acc = policy.accumulation, policy.compute_format, policy.accumulation_format
    if model not in tc.list_models():       # host BLAS ("native") or the DFP-16 GEMM
        return
    try:
        tc.get_model(model, inputs, acc)
    except ValueError as exc:
        fits = [name for name, pairs in tc.list_models().items() if (inputs, acc) in pairs]
        key = "precision.tensor_core" if said_tc else "precision.policy"
        raise ConfigError(
            f"{key}: Tensor Core model {model!r} cannot take the {inputs} inputs of policy "
            f"{cfg['precision']['policy']!r} with {acc} accumulation ({exc}); models that take "
            f"{inputs} -> {acc}: {', '.join(fits) or 'none'}") from None


def dumps(cfg):
    """The config as pretty JSON (what is saved beside a run)."""
    return json.dumps(cfg, indent=2, sort_keys=True)
