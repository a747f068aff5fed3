"""What ``reproduce`` runs: the studies, their configurations and the settings of each profile.

Provides :data:`VARIANTS` (configuration key -> label and the config changes that make it),
:func:`studies` (the studies of a profile, "quick" or "full"), :func:`variant_config` (the full
config of one configuration and seed), :func:`seeds_of` and :func:`mnist_dir`.  Pure data and
dict building: imports models.repro.paper and the standard library only.

The order of evidence, as the report shows it:

* Natural scale first.  Every configuration key without the ``amp_`` prefix trains the model as
  it is: no loss multiplier, gradients as training produces them.  The fp32 run's gradients are
  measured (models.repro.gradstats), and fp16 without loss scaling, with static scales
  2^0, 2^3, 2^8, 2^15, 2^24 and with the dynamic scalers is compared with fp32.
* Natural mechanisms that do underflow: depth (a 16-layer MLP with PyTorch's default
  initialisation, whose gradients shrink by about 1/sqrt(6) per ReLU layer, so the first
  layers' gradients fall below 2^-24) and tokens per batch (a mean loss over N tokens gives
  activation gradients of size 1/N: the tiny transformer at 64 x 64 tokens per batch, and
  the share below 2^-24 measured against N on the trained language models).
* The amplification device, labelled as such (``amp_*`` keys): the loss is multiplied by 2^-k
  and the learning rate by 2^k (Adam: eps by 2^-k), which leaves fp32 training bit-identical
  (power-of-two factors are exact).  It shrinks EVERY gradient by 2^-k.  What it emulates:
  smaller per-element activation gradients, as a larger token count per batch produces them.
  What it does not: weight gradients are means over the batch and do not shrink with batch
  size, so the weight-gradient underflow it produces is manufactured by the device.
* Lost updates without master weights: a separate MLP study trains with Adam at learning
  rate 3e-5 (no multiplier), so most updates are below 2^-11 of their weight.
"""

from __future__ import annotations

import copy
import os

from .paper import PAPER_ROWS

__all__ = ["STATIC_WINDOW", "VARIANTS", "mnist_dir", "seeds_of", "studies", "variant_config"]

_O2 = {"precision": {"policy": "O2", "tensor_core": "native"}}
_DYN = {"type": "dynamic", "init_scale": 65536.0, "growth_interval": "{gi}"}
#: the static loss scales of the window runs (2^0 is the unscaled fp16 + master run)
STATIC_WINDOW = (0, 3, 8, 15, 24)

#: key -> (label, config changes); "{gi}" etc. are filled from the study
VARIANTS = {
    "fp32": ("fp32", {"precision": {"policy": "fp32"}}),
    "o3": ("fp16 weights, no master, no scaling (O3)",
           {"precision": {"policy": "O3", "tensor_core": "native"}}),
    "master_noscale": ("fp16 + fp32 master, no scaling (static 2^0)",
                       {**_O2, "scaler": {"type": "none"}}),
    "dynamic": ("fp16 + master, dynamic (GradScaler)", {**_O2, "scaler": _DYN}),
    "deepspeed": ("fp16 + master, DeepSpeed (hysteresis 2)",
                  {"precision": {"tensor_core": "native"},
                   "fp16": {"enabled": True, "initial_scale_power": 16,
                            "loss_scale_window": "{gi}", "hysteresis": 2}}),
    "lognormal": ("fp16 + master, LogNormal (OpenSeq2Seq)",
                  {**_O2, "scaler": {"type": "lognormal"}}),
    "o1": ("O1 (fp32 weights, fp16 ops), dynamic",
           {"precision": {"policy": "O1", "tensor_core": "native"}, "scaler": _DYN}),
    "bf16": ("bf16 + master, no scaling",
             {"bf16": {"enabled": True}, "precision": {"tensor_core": "native"}}),
    "dfp16": ("DFP-16 (int16 GEMMs, shared exponents)", {"precision": {"policy": "dfp16"}}),
    "tc_ideal": ("TC ideal fp32 accumulation, dynamic",
                 {"precision": {"policy": "O2", "tensor_core": "ideal-fp32"}, "scaler": _DYN}),
    "tc_v100": ("TC V100 model, dynamic",
                {"precision": {"policy": "O2", "tensor_core": "v100"}, "scaler": _DYN}),
    "tc_fp16acc": ("TC fp16 accumulation, dynamic",
                   {"precision": {"policy": "O2", "tensor_core": "ideal-fp16"}, "scaler": _DYN}),
    # the master-weights study
    "nomaster": ("fp16 weights updated directly (no master)",
                 {**_O2, "optimizer": {"master_weights": False}, "scaler": {"type": "none"}}),
    "nomaster_sr": ("no master, stochastic rounding of the update",
                    {**_O2, "optimizer": {"master_weights": False, "stochastic_rounding": True},
                     "scaler": {"type": "none"}}),
    "master": ("fp16 + fp32 master weights", {**_O2, "scaler": {"type": "none"}}),
    # the scaler study: the same overflows injected into every run
    # (they start at 2^10, below the natural overflow edge of the MLP's gradients, about 2^17,
    # so that the injected overflows are the only ones the rules react to)
    "spk_dynamic": ("dynamic (GradScaler)",
                    {**_O2, "scaler": {**_DYN, "init_scale": 1024.0},
                     "instrument": {"inject_overflow_steps": "{spikes}"}}),
    "spk_deepspeed": ("DeepSpeed, hysteresis 2",
                      {"precision": {"tensor_core": "native"},
                       "fp16": {"enabled": True, "initial_scale_power": 10,
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
for _k in STATIC_WINDOW[1:]:
    VARIANTS[f"static_{_k}"] = (f"fp16 + master, static scale 2^{_k}",
                                {**_O2, "scaler": {"type": "static", "scale": 2.0 ** _k}})
#: the amplification device: "amp_<key>" is <key> with the loss multiplied by 2^-k
AMP_BASE = ("fp32", "master_noscale", "static", "dynamic")
VARIANTS["static"] = ("fp16 + master, static scale {static_txt}",
                      {**_O2, "scaler": {"type": "static", "scale": "{static}"}})

WINDOW_VARIANTS = ("master_noscale",) + tuple(f"static_{k}" for k in STATIC_WINDOW[1:])
NATURAL_MAIN = (("fp32", "o3") + WINDOW_VARIANTS
                + ("dynamic", "deepspeed", "lognormal", "o1", "bf16", "dfp16", "tc_ideal",
                   "tc_v100", "tc_fp16acc"))


def seeds_of(profile):
    """Seeds per configuration: 3 in the quick profile, 5 in the full one."""
    return (0, 1, 2) if profile == "quick" else (0, 1, 2, 3, 4)


def mnist_dir():
    """Where the full profile looks for the four MNIST IDX files: $MPEMU_MNIST_DIR, else
    data/mnist under the current directory.  Returns the directory if all four are there."""
    from ..idx import MNIST_FILES

    d = os.environ.get("MPEMU_MNIST_DIR") or os.path.join("data", "mnist")
    if not os.path.isdir(d):
        return None
    names = set(os.listdir(d))
    ok = all(any(n in names or n + ".gz" in names for n in alts)
             for alts in MNIST_FILES.values())
    return d if ok else None


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


def _multiplied(cfg, k):
    """The amplification device: loss x 2^-k and the compensation that keeps fp32
    bit-identical (SGD: learning rate x 2^k; Adam: eps x 2^-k)."""
    b = copy.deepcopy(cfg)
    b.setdefault("precision", {})["loss_multiplier"] = 2.0 ** -k
    opt = b["optimizer"]
    if opt["type"] == "sgd":
        opt["lr"] = opt["lr"] * 2.0 ** k
    else:
        opt["eps"] = opt.get("eps", 1e-8) * 2.0 ** -k
    return b


def variant_config(study, key, seed=0):
    """(label, full raw config) of configuration ``key`` of ``study`` with ``seed``."""
    own = study.get("own_variants", {})
    amp = key.startswith("amp_")
    base_key = key[4:] if amp else key
    if base_key in own:
        label, extra = own[base_key]
    elif base_key in VARIANTS:
        label, extra = VARIANTS[base_key]
    else:
        raise ValueError(f"unknown configuration {key!r} in study {study['key']!r}; accepted: "
                         f"{', '.join(sorted(set(VARIANTS) | set(own)))} (and amp_<key>)")
    values = {"static": float(2 ** study["static_log2"]), "gi": study["growth_interval"],
              "static_txt": f"2^{study['static_log2']}", "spikes": study.get("spikes", [])}
    cfg = _merge(study["base"], _fill(extra, values))
    label = label.format(**values)
    if amp:
        if not study.get("k"):
            raise ValueError(f"study {study['key']!r} has no amplification device (k = 0)")
        cfg = _multiplied(cfg, study["k"])
        label = f"{label} [device: loss x2^-{study['k']}]"
    cfg["seed"] = int(seed)
    cfg["name"] = f"{study['key']}-{key}-s{seed}"
    return label, cfg


def _amp_note(k, sgd):
    comp = f"learning rate x2^{k}" if sgd else f"Adam eps x2^-{k}"
    return (f"Amplification device (configurations marked [device]): loss multiplied by 2^-{k}, "
            f"{comp}, so fp32 training is bit-identical to the natural run.  It shrinks every "
            "gradient by 2^-" f"{k}: it emulates smaller per-element activation gradients (as "
            "more tokens per batch give them); it does NOT emulate batch size for weight "
            "gradients, which are means over the batch and do not shrink with it, so the "
            "weight-gradient underflow it shows is manufactured by the device.")


def _add(out, q, key, title, description, base, *, variants, steps, eval_every, hist_every,
         gi=50, k=0, static_log2=12, amp=(), curve=None, own_variants=None, settings=(),
         eval_batches=8, full_eval_batches=None):
    if q:
        eval_every = steps  # the quick profile evaluates before and after training only
    base = _merge(base, {"budget": {"steps": steps, "eval_every": eval_every,
                                    "eval_batches": eval_batches if q else full_eval_batches},
                         "instrument": {"histogram_every": hist_every}})
    sgd = base["optimizer"]["type"] == "sgd"
    notes = list(settings)
    ev = eval_batches if q else full_eval_batches
    notes.append(f"{steps} steps, evaluation every {eval_every}"
                 + (f" on the first {ev} held-out batches" if ev else " on the held-out split")
                 + (f", gradients sampled every {hist_every} steps" if hist_every else ""))
    if key == "scalers":
        notes.append(f"GradScaler and DeepSpeed start at 2^10 (below this MLP's natural "
                     f"overflow edge, about 2^17), growth interval {gi} steps; Backoff and "
                     "LogMax start where their rules say (2^24 and 1)")
    elif any(v in ("dynamic", "deepspeed", "o1") or v.startswith("tc_") for v in variants):
        notes.append(f"dynamic scalers start at 2^16 with a growth interval of {gi} steps "
                     "(shortened from 2000/1000 so that growth shows within the budget)")
    if amp:
        notes.append(_amp_note(k, sgd))
    variants = list(variants) + [f"amp_{v}" for v in amp]
    out.append({"key": key, "title": title, "description": description, "base": base, "k": k,
                "static_log2": static_log2, "growth_interval": gi, "variants": variants,
                "settings": notes, "curve": curve, "own_variants": own_variants or {},
                "hist_every": hist_every,
                "paper": {v: PAPER_ROWS.get(v[4:] if v.startswith("amp_") else v, "")
                          for v in variants}})


def studies(profile):
    """The studies of ``profile`` ("quick" or "full").  The full profile adds MNIST studies when
    :func:`mnist_dir` finds the IDX files."""
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    q = profile == "quick"
    out = []
    win = WINDOW_VARIANTS

    mlp_base = {"model": {"type": "mlp", "hidden": [64, 64]},
                "data": {"name": "digits", "batch_size": 32},
                "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}}
    _add(out, q, "mlp", "MLP on handwritten digits",
         "scikit-learn's 1797 8x8 digits (75/25 split), MLP 64-64-64-10 with ReLU, SGD with "
         "momentum 0.9, learning rate 0.05, batch 32, cross-entropy (fp32 in O2).", mlp_base,
         variants=NATURAL_MAIN, steps=150 if q else 600, eval_every=50 if q else 200,
         hist_every=25 if q else 100, k=17, amp=AMP_BASE)

    master_base = {"model": {"type": "mlp", "hidden": [64, 64]},
                   "data": {"name": "digits", "batch_size": 32},
                   "optimizer": {"type": "adam", "lr": 3e-5}}
    _add(out, q, "master", "Master weights: lost updates (MLP on digits, small learning rate)",
         "The MLP above trained with Adam at learning rate 3e-5, at natural scale.  Adam moves a "
         "weight by about lr = 3e-5 per step whatever the gradient's size, which is below 2^-11 "
         "of every weight larger than 2^11 * 3e-5 = 0.06 in magnitude (most of them: the "
         "initial weights are uniform in +-1/8 and +-1/sqrt(fan_in)), so an fp16 weight updated "
         "directly rounds back to itself (Micikevicius et al., Sec. 3.1).", master_base,
         variants=("fp32", "nomaster", "nomaster_sr", "master"), steps=300 if q else 1500,
         eval_every=100 if q else 500, hist_every=50 if q else 150,
         settings=["Adam, learning rate 3e-5, so that |update| < 2^-11 |w| for most weights; "
                   "no loss multiplier, no loss scaling (none is needed here)"])

    spikes = [60, 61, 150] if q else [200, 201, 450]
    _add(out, q, "scalers", "Loss scalers under injected overflows (MLP on digits)",
         "The MLP study's fp16 + master configuration, at natural scale, with the same gradient "
         "overflows injected into every run (one gradient element set to +Inf after backward "
         f"at steps {', '.join(map(str, spikes))}), to show each production rule's reaction "
         "(docs/loss-scaling.md): PyTorch backs off on every overflow, DeepSpeed's hysteresis "
         "absorbs the first of a run of overflows, and OpenSeq2Seq's LogMax, fed x = 2^16 by a "
         "single overflow, pins its scale at the minimum for thousands of steps.  The same "
         "MLP's natural-scale gradients, per-layer table and loss-scale window are in the MLP "
         "study's section.", mlp_base,
         variants=("spk_dynamic", "spk_deepspeed", "spk_backoff", "spk_lognormal",
                   "spk_lognormal16"), steps=200 if q else 600, eval_every=200,
         hist_every=0, settings=[f"overflows injected at steps {', '.join(map(str, spikes))}"])
    out[-1]["spikes"] = spikes

    cnn_base = {"model": {"type": "cnn", "channels": [8, 16], "hidden": 32},
                "data": {"name": "digits", "batch_size": 32},
                "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9}}
    _add(out, q, "cnn", "LeNet-style CNN with batch-norm on handwritten digits",
         "The digits as 1x8x8 images; conv3x3(8)-BN-ReLU-pool, conv3x3(16)-BN-ReLU-pool, FC 32, "
         "FC 10; SGD (learning rate 0.02, momentum 0.9), batch 32; batch-norm kept in fp32 "
         "under O2.", cnn_base,
         variants=(("fp32", "o3") + win + ("dynamic", "bf16", "dfp16", "tc_v100", "tc_fp16acc")
                   if q else NATURAL_MAIN),
         steps=80 if q else 300, eval_every=40 if q else 100, hist_every=20 if q else 50,
         gi=20, k=17, amp=AMP_BASE)

    lm_data = {"name": "python_text", "seq_len": 16 if q else 32, "batch_size": 16,
               "max_chars": 200_000}
    tokens = [256, 1024, 4096, 16384] if q else [256, 1024, 4096, 16384, 65536]
    lm_note = (f"Tokens-per-batch curve: the trained fp32 model's gradients measured (one fp32 "
               f"forward and backward, no update) on batches of {', '.join(map(str, tokens))} "
               f"tokens, sequences of {lm_data['seq_len']} characters.")
    lstm_base = {"model": {"type": "lstm", "embed": 16, "hidden": 48}, "data": lm_data,
                 "optimizer": {"type": "adam", "lr": 3e-3}}
    lm_variants = (("fp32",) if q else ("fp32", "o3")) + win + ("dynamic", "bf16", "dfp16")
    _add(out, q, "lstm", "Character LSTM language model on Python's own documentation",
         "Text assembled from the standard library's LICENSE.txt, the Zen of Python and module "
         "docstrings (first 200,000 characters, 96 symbols); embedding 16, LSTM 48, Adam 3e-3, "
         f"batch 16, sequences of {lm_data['seq_len']} characters "
         f"({16 * lm_data['seq_len']} tokens per batch); metric: bits per character (lower is "
         "better).", lstm_base,
         variants=lm_variants if q else lm_variants + ("deepspeed", "tc_v100"),
         steps=24 if q else 80, eval_every=12 if q else 40, hist_every=8 if q else 16,
         gi=8, k=13, eval_batches=2, full_eval_batches=8,
         amp=("fp32", "master_noscale", "dynamic"),
         curve={"kind": "tokens", "variant": "fp32", "tokens": tokens}, settings=[lm_note])

    tf_base = {"model": {"type": "transformer", "d_model": 32, "heads": 2, "layers": 1,
                         "d_ff": 64}, "data": lm_data, "optimizer": {"type": "adam", "lr": 3e-3}}
    _add(out, q, "transformer", "Tiny causal transformer language model (attention softmax)",
         "Same text; token and position embeddings (d=32), one pre-norm encoder layer with 2 "
         "heads and a causal mask, feed-forward 64, Adam 3e-3, batch 16, sequences of "
         f"{lm_data['seq_len']} characters. The attention softmax runs in fp16 under O2 and O3 "
         "(it is on the fp32 list only in O1).", tf_base,
         variants=(lm_variants + ("lognormal", "tc_v100") if q
                   else lm_variants + ("deepspeed", "lognormal", "tc_ideal", "tc_v100")),
         steps=40 if q else 120, eval_every=20 if q else 60, hist_every=10 if q else 20,
         gi=10, k=14, eval_batches=2, full_eval_batches=8,
         amp=("fp32", "master_noscale", "dynamic"),
         curve={"kind": "tokens", "variant": "fp32", "tokens": tokens}, settings=[lm_note])

    tok_seq = 64 if q else 128
    tok_data = {"name": "python_text", "seq_len": tok_seq, "batch_size": 64,
                "max_chars": 200_000}
    _add(out, q, "tokens", f"Tokens per batch: the tiny transformer at 64 x {tok_seq} tokens",
         f"The transformer above with a realistic token count per batch: 64 sequences of "
         f"{tok_seq} characters = {64 * tok_seq} tokens, no multiplier.  A mean loss over N "
         "tokens gives every logit a gradient (p - y) / N, so the activation gradients shrink "
         "as 1/N while the weight gradients (sums over the tokens of activation x gradient) do "
         "not.", _merge(tf_base, {"data": tok_data}),
         variants=("fp32", "master_noscale", "dynamic"), steps=20 if q else 40,
         eval_every=20 if q else 20, hist_every=5 if q else 10, gi=5, eval_batches=2,
         full_eval_batches=4,
         curve={"kind": "tokens", "variant": "fp32", "tokens": tokens})

    depths = (2, 4, 8, 12)
    own = {f"depth_{d}": (f"fp32, {d} hidden layers", {"precision": {"policy": "fp32"},
                                                       "model": {"hidden": [64] * d}})
           for d in depths}
    deep_base = {"model": {"type": "mlp", "hidden": [64] * 16},
                 "data": {"name": "digits", "batch_size": 32},
                 "optimizer": {"type": "adam", "lr": 3e-3}}
    _add(out, q, "deep", "Depth: a 16-layer MLP on handwritten digits",
         "MLP with 16 hidden layers of 64 ReLU units on the digits, PyTorch's default "
         "initialisation (uniform in +-1/sqrt(fan_in)), Adam 3e-3, batch 32, no multiplier.  "
         "Each ReLU layer multiplies the backward signal by about sqrt(fan_in * Var(w) / 2) = "
         "1/sqrt(6), so the first layers' gradients are 2^-18 or so smaller than the last "
         "layer's; Adam normalises the step size, so fp32 still trains.  Depth curve: fp32 runs "
         f"with {', '.join(map(str, depths))} and 16 hidden layers.", deep_base,
         variants=((("fp32",) if q else ("fp32", "o3")) + win + ("dynamic", "bf16", "dfp16")
                   + tuple(own)), steps=150 if q else 500, eval_every=50 if q else 100,
         hist_every=25 if q else 50, gi=25, own_variants=own,
         curve={"kind": "depth", "variants": list(own) + ["fp32"],
                "depths": list(depths) + [16]})

    d = None if q else mnist_dir()
    if d:
        for base, key, title in ((mlp_base, "mnist_mlp", "MLP on MNIST"),
                                 (cnn_base, "mnist_cnn", "LeNet-style CNN on MNIST")):
            b = _merge(base, {"data": {"name": "mnist", "path": d, "max_train": 20000}})
            _add(out, q, key, title,
                 f"The {key[6:].upper()} study on MNIST read through the IDX loader from {d} "
                 "(first 20,000 training images, the 10,000 test images).", b,
                 variants=("fp32", "o3") + win + ("dynamic", "bf16", "dfp16", "tc_v100"),
                 steps=600, eval_every=200, hist_every=50, gi=50, k=17, amp=AMP_BASE)
    return out
