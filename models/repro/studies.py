"""What ``reproduce`` runs: the studies (one per model, plus the master-weights study), their
configurations and the settings chosen to expose the paper's effects.

Provides :data:`VARIANTS` (configuration key -> label and the config changes that make it),
:func:`studies` (the list of studies of a profile, "quick" or "full"), and
:func:`variant_config`.  Pure data and dict building: imports models.repro.paper only.

How the effects are exposed (and stated in the report):

* Gradient underflow.  Our small models' gradients sit well inside fp16's range (we measured
  under 0.2% below 2^-24), unlike the paper's detectors and speech models.  Each study therefore
  multiplies the loss by 2^-k (``precision.loss_multiplier``), as if it were averaged over a
  2^k times larger batch; SGD's learning rate is multiplied by 2^k (Adam's eps by 2^-k) so that
  fp32 training is bit-for-bit the same as without the multiplier (power-of-two factors are
  exact).  Without loss scaling the fp16 gradients then underflow, as in the paper's Fig. 3.
* Lost updates without master weights.  A separate MLP study uses plain SGD with a small
  learning rate, so that most updates are below 2^-11 of their weight and round away in fp16.
"""

from __future__ import annotations

import copy

from .paper import PAPER_ROWS

__all__ = ["MAIN_VARIANTS", "VARIANTS", "studies", "variant_config"]

_O2 = {"precision": {"policy": "O2", "tensor_core": "native"}}

#: key -> (label, config changes); "{static}" / "{gi}" are filled from the study
VARIANTS = {
    "fp32": ("fp32", {"precision": {"policy": "fp32"}}),
    "o3": ("fp16 weights, no master, no scaling (O3)",
           {"precision": {"policy": "O3", "tensor_core": "native"}}),
    "master_noscale": ("fp16 + fp32 master, no scaling", {**_O2, "scaler": {"type": "none"}}),
    "static": ("fp16 + master, static scale {static_txt}",
               {**_O2, "scaler": {"type": "static", "scale": "{static}"}}),
    "dynamic": ("fp16 + master, dynamic (GradScaler)",
                {**_O2, "scaler": {"type": "dynamic", "init_scale": 65536.0,
                                   "growth_interval": "{gi}"}}),
    "deepspeed": ("fp16 + master, DeepSpeed (hysteresis 2)",
                  {"precision": {"tensor_core": "native"},
                   "fp16": {"enabled": True, "initial_scale_power": 16,
                            "loss_scale_window": "{gi}", "hysteresis": 2}}),
    "lognormal": ("fp16 + master, LogNormal (OpenSeq2Seq)",
                  {**_O2, "scaler": {"type": "lognormal"}}),
    "o1": ("O1 (fp32 weights, fp16 ops), dynamic",
           {"precision": {"policy": "O1", "tensor_core": "native"},
            "scaler": {"type": "dynamic", "init_scale": 65536.0, "growth_interval": "{gi}"}}),
    "bf16": ("bf16 + master, no scaling",
             {"bf16": {"enabled": True}, "precision": {"tensor_core": "native"}}),
    "dfp16": ("DFP-16 (int16 GEMMs, shared exponents)", {"precision": {"policy": "dfp16"}}),
    "tc_ideal": ("TC ideal fp32 accumulation, dynamic",
                 {"precision": {"policy": "O2", "tensor_core": "ideal-fp32"},
                  "scaler": {"type": "dynamic", "init_scale": 65536.0, "growth_interval": "{gi}"}}),
    "tc_v100": ("TC V100 model, dynamic",
                {"precision": {"policy": "O2", "tensor_core": "v100"},
                 "scaler": {"type": "dynamic", "init_scale": 65536.0, "growth_interval": "{gi}"}}),
    "tc_fp16acc": ("TC fp16 accumulation, dynamic",
                   {"precision": {"policy": "O2", "tensor_core": "ideal-fp16"},
                    "scaler": {"type": "dynamic", "init_scale": 65536.0,
                               "growth_interval": "{gi}"}}),
    # the master-weights study
    "nomaster": ("fp16 weights updated directly (no master)",
                 {**_O2, "optimizer": {"master_weights": False}, "scaler": {"type": "none"}}),
    "nomaster_sr": ("no master, stochastic rounding of the update",
                    {**_O2, "optimizer": {"master_weights": False, "stochastic_rounding": True},
                     "scaler": {"type": "none"}}),
    "master": ("fp16 + fp32 master weights", {**_O2, "scaler": {"type": "none"}}),
    # the scaler study: the same overflows injected into every run
    "spk_dynamic": ("dynamic (GradScaler)",
                    {**_O2, "scaler": {"type": "dynamic", "init_scale": 65536.0,
                                       "growth_interval": "{gi}"},
                     "instrument": {"inject_overflow_steps": "{spikes}"}}),
    "spk_deepspeed": ("DeepSpeed, hysteresis 2",
                      {"precision": {"tensor_core": "native"},
                       "fp16": {"enabled": True, "initial_scale_power": 16,
                                "loss_scale_window": "{gi}", "hysteresis": 2},
                       "instrument": {"inject_overflow_steps": "{spikes}"}}),
    "spk_backoff": ("OpenSeq2Seq Backoff (2^24 ceiling)",
                    {**_O2, "scaler": {"type": "backoff", "growth_interval": "{gi}"},
                     "instrument": {"inject_overflow_steps": "{spikes}"}}),
    "spk_lognormal": ("OpenSeq2Seq LogMax (faithful: overflow feeds 2^16)",
                      {**_O2, "scaler": {"type": "lognormal"},
                       "instrument": {"inject_overflow_steps": "{spikes}"}}),
    "spk_lognormal16": ("LogMax with overflow value 16 (log2, weakness removed)",
                        {**_O2, "scaler": {"type": "lognormal", "overflow_value": 16.0},
                         "instrument": {"inject_overflow_steps": "{spikes}"}}),
}

MAIN_VARIANTS = ("fp32", "o3", "master_noscale", "static", "dynamic", "deepspeed", "lognormal",
                 "o1", "bf16", "dfp16", "tc_ideal", "tc_v100", "tc_fp16acc")


def _merge(base, extra):
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _fill(obj, values):
    if isinstance(obj, dict):
        return {k: _fill(v, values) for k, v in obj.items()}
    if isinstance(obj, str) and obj.startswith("{") and obj.endswith("}"):
        return values[obj[1:-1]]
    return obj


def variant_config(study, key):
    """(label, full raw config) of configuration ``key`` in ``study``."""
    label, extra = VARIANTS[key]
    values = {"static": float(2 ** study["static_log2"]), "gi": study["growth_interval"],
              "static_txt": f"2^{study['static_log2']}", "spikes": study.get("spikes", [])}
    cfg = _merge(study["base"], _fill(extra, values))
    cfg["name"] = f"{study['key']}-{key}"
    return label.format(**values), cfg


def _multiplied(base, k, optimizer):
    """Apply the loss multiplier 2^-k and the compensation that keeps fp32 bit-identical."""
    b = copy.deepcopy(base)
    b.setdefault("precision", {})["loss_multiplier"] = 2.0 ** -k
    if optimizer["type"] == "sgd":
        optimizer = {**optimizer, "lr": optimizer["lr"] * 2.0 ** k}
    else:
        optimizer = {**optimizer, "eps": optimizer.get("eps", 1e-8) * 2.0 ** -k}
    b["optimizer"] = optimizer
    return b


def studies(profile):
    """The studies of ``profile`` ("quick" or "full")."""
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    q = profile == "quick"
    out = []

    def add(key, title, description, base, *, k, static_log2, gi, variants, steps, eval_every,
            hist_every, extra_settings=()):
        base = _merge(base, {"budget": {"steps": steps, "eval_every": eval_every,
                                        "eval_batches": 8 if q else None},
                             "instrument": {"histogram_every": hist_every}})
        sgd = base["optimizer"]["type"] == "sgd"
        if k:
            base = _multiplied(base, k, base["optimizer"])
        settings = list(extra_settings)
        if k:
            comp = (f"learning rate x2^{k}" if sgd else f"Adam eps x2^-{k}")
            settings.append(f"loss multiplied by 2^-{k} (as if averaged over a 2^{k} times "
                            f"larger batch), {comp}: fp32 training is bit-identical to the "
                            "unmultiplied run, fp16 gradients underflow without loss scaling")
        budget = f"{steps} steps, evaluation every {eval_every}"
        if any(v not in ("fp32", "nomaster", "nomaster_sr", "master") for v in variants):
            budget += (f"; dynamic scalers start at 2^16 with a growth interval of {gi} steps "
                       "(shortened from 2000/1000 so that growth shows within the budget); "
                       f"static scale 2^{static_log2}")
        settings.append(budget)
        out.append({"key": key, "title": title, "description": description, "base": base,
                    "k": k, "static_log2": static_log2, "growth_interval": gi,
                    "variants": list(variants), "settings": settings})

    mlp_base = {"seed": 0, "model": {"type": "mlp", "hidden": [64, 64]},
                "data": {"name": "digits", "batch_size": 32},
                "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}}
    add("mlp", "MLP on handwritten digits",
        "scikit-learn's 1797 8x8 digits (75/25 split), MLP 64-64-64-10 with ReLU, SGD with "
        "momentum 0.9, batch 32, cross-entropy (fp32 in O2).", mlp_base,
        k=17, static_log2=12, gi=50, variants=MAIN_VARIANTS,
        steps=300 if q else 1500, eval_every=50 if q else 100, hist_every=50 if q else 100)

    master_base = {"seed": 0, "model": {"type": "mlp", "hidden": [64, 64]},
                   "data": {"name": "digits", "batch_size": 32},
                   "optimizer": {"type": "adam", "lr": 3e-5}}
    add("master", "Master weights: lost updates (MLP on digits, small learning rate)",
        "The MLP above trained with Adam at learning rate 3e-5 and no loss multiplier. Adam "
        "moves a weight by about lr = 3e-5 per step whatever the gradient's size, which is "
        "below 2^-11 of every weight larger than 2^11 * 3e-5 = 0.06 in magnitude (most of "
        "them: the initial weights are uniform in +-1/8 and +-1/sqrt(fan_in)), so an fp16 weight "
        "updated directly rounds back to itself (Micikevicius et al., Sec. 3.1).", master_base,
        k=0, static_log2=0, gi=50, variants=("fp32", "nomaster", "nomaster_sr", "master"),
        steps=600 if q else 3000, eval_every=100 if q else 250, hist_every=0,
        extra_settings=[("Adam, learning rate 3e-5, so that |update| < 2^-11 |w| for most "
                         "weights; no loss multiplier, no loss scaling (none is needed here)")])

    spikes = [60, 61, 150] if q else [300, 301, 800]
    add("scalers", "Loss scalers under injected overflows (MLP on digits)",
        "The MLP study's fp16 + master configuration with the same gradient overflows injected "
        f"into every run (one gradient element set to +Inf after backward at steps "
        f"{', '.join(map(str, spikes))}), to show each production rule's reaction "
        "(docs/loss-scaling.md): PyTorch backs off on every overflow, DeepSpeed's hysteresis "
        "absorbs the first of a run of overflows, and OpenSeq2Seq's LogMax, fed x = 2^16 by a "
        "single overflow, pins its scale at the minimum for thousands of steps (with this "
        "study's 2^-17 loss multiplier the gradients then underflow again).", mlp_base,
        k=17, static_log2=12, gi=50,
        variants=("spk_dynamic", "spk_deepspeed", "spk_backoff", "spk_lognormal",
                  "spk_lognormal16"),
        steps=300 if q else 1500, eval_every=50 if q else 100, hist_every=0,
        extra_settings=[f"overflows injected at steps {', '.join(map(str, spikes))}"])
    out[-1]["spikes"] = spikes

    cnn_base = {"seed": 0, "model": {"type": "cnn", "channels": [8, 16], "hidden": 32},
                "data": {"name": "digits", "batch_size": 32},
                "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9}}
    add("cnn", "LeNet-style CNN with batch-norm on handwritten digits",
        "The digits as 1x8x8 images; conv3x3(8)-BN-ReLU-pool, conv3x3(16)-BN-ReLU-pool, FC 32, "
        "FC 10; SGD (learning rate 0.02, momentum 0.9), batch 32; batch-norm kept in fp32 "
        "under O2.", cnn_base,
        k=17, static_log2=12, gi=25,
        variants=(("fp32", "o3", "master_noscale", "static", "dynamic", "bf16", "dfp16",
                   "tc_v100", "tc_fp16acc") if q else MAIN_VARIANTS),
        steps=160 if q else 600, eval_every=40 if q else 100, hist_every=40 if q else 100)

    lm_data = {"name": "python_text", "seq_len": 16 if q else 32, "batch_size": 16,
               "max_chars": 200_000}
    lstm_base = {"seed": 0, "model": {"type": "lstm", "embed": 16, "hidden": 48},
                 "data": lm_data, "optimizer": {"type": "adam", "lr": 3e-3}}
    add("lstm", "Character LSTM language model on Python's own documentation",
        "Text assembled from the standard library's LICENSE.txt, the Zen of Python and module "
        "docstrings (first 200,000 characters, 96 symbols); embedding 16, LSTM 48, Adam 3e-3, "
        f"batch 16, sequences of {lm_data['seq_len']} characters; metric: bits per character "
        "(lower is better).", lstm_base,
        k=13, static_log2=12, gi=10,
        variants=(("fp32", "o3", "master_noscale", "dynamic", "bf16") if q else MAIN_VARIANTS),
        steps=40 if q else 400, eval_every=20 if q else 100, hist_every=10 if q else 100)

    tf_base = {"seed": 0, "model": {"type": "transformer", "d_model": 32, "heads": 2,
                                    "layers": 1, "d_ff": 64},
               "data": lm_data, "optimizer": {"type": "adam", "lr": 3e-3}}
    add("transformer", "Tiny causal transformer language model (attention softmax)",
        "Same text; token and position embeddings (d=32), one pre-norm encoder layer with 2 "
        "heads and a causal mask, feed-forward 64, Adam 3e-3, batch 16, sequences of "
        f"{lm_data['seq_len']} characters. The attention softmax runs in fp16 under O2 and O3 "
        "(it is on the fp32 list only in O1).", tf_base,
        k=14, static_log2=12, gi=10,
        variants=(("fp32", "o3", "master_noscale", "static", "dynamic", "lognormal", "bf16",
                   "tc_v100") if q else MAIN_VARIANTS),
        steps=60 if q else 400, eval_every=20 if q else 100, hist_every=10 if q else 100)
    for s in out:
        s["paper"] = {v: PAPER_ROWS.get(v, "") for v in s["variants"]}
    return out
