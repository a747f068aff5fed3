"""From runs to study summaries: seeds aggregated, natural-scale statistics, curves.

Provides :func:`summary` (mean, sample standard deviation and count of a list of per-seed
numbers, non-finite values counted apart), :func:`within_spread` (is a difference of means
inside the seeds' spread), :func:`progress_ratio`, :func:`settled_log2_scale` and
:func:`assemble`, which turns the results of models.repro.runs into one dict per study: every
configuration with its per-seed results and the summaries the report prints, the fp32 run's
gradient statistics (natural scale: totals, per layer, the loss-scale window), the update-ratio
histogram, DFP-16 chain statistics and the depth / tokens-per-batch curves.

Imports numpy and models.repro.* only.
"""

from __future__ import annotations

import math

import numpy as np

from .dfpstats import merge_chain_stats
from .gradstats import GradStats, LayerStats, UpdateRatioStats
from .studies import variant_config

__all__ = ["assemble", "progress_ratio", "settled_log2_scale", "summary", "within_spread"]

#: the run-level numbers summarised over seeds
FINAL_KEYS = ("eval_loss", "eval_metric", "train_loss", "lost_update_fraction",
              "grad_zero_fraction", "skipped_steps", "final_scale")
#: the history lists kept per seed (the loss-curve and scale figures need them)
HISTORY_KEYS = ("step", "loss", "scale", "skipped", "eval_step", "eval_loss", "eval_metric")


def summary(values):
    """{"mean", "std", "n", "n_finite", "values"}: mean and sample standard deviation (ddof 1;
    0 for one value) of the finite values; None values are ignored; mean/std are nan when no
    value is finite."""
    vals = [None if v is None else float(v) for v in values]
    fin = np.asarray([v for v in vals if v is not None and math.isfinite(v)], dtype=np.float64)
    n = sum(v is not None for v in vals)
    mean = float(fin.mean()) if fin.size else math.nan
    std = float(fin.std(ddof=1)) if fin.size > 1 else (0.0 if fin.size else math.nan)
    return {"mean": mean, "std": std, "n": n, "n_finite": int(fin.size), "values": vals}


def within_spread(a, b):
    """True when |mean(a) - mean(b)| <= std(a) + std(b): the difference is inside the seeds'
    spread (a and b are :func:`summary` dicts); False for non-finite means."""
    if not (math.isfinite(a["mean"]) and math.isfinite(b["mean"])):
        return False
    return abs(a["mean"] - b["mean"]) <= a["std"] + b["std"]


def progress_ratio(final, ref_final, initial_loss):
    """How much of the reference run's held-out loss improvement a run achieved:
    (L0 - L) / (L0 - L_ref), L0 the loss before training; nan if undefined."""
    gain_ref = initial_loss - ref_final["eval_loss"]
    value = final["eval_loss"]
    if not (math.isfinite(value) and math.isfinite(gain_ref)) or gain_ref <= 1e-9:
        return math.nan
    return (initial_loss - value) / gain_ref


def settled_log2_scale(history):
    """Median log2 of the loss scale over the second half of a run (where a dynamic scaler
    settles); None when the run has no scaler (scale 1 throughout)."""
    s = np.asarray(history["scale"], dtype=np.float64)
    if s.size == 0 or np.all(s == 1.0):
        return None
    tail = s[s.size // 2:]
    tail = tail[np.isfinite(tail) & (tail > 0)]
    return float(np.median(np.log2(tail))) if tail.size else None


def _slim(r):
    return {"seed": r["seed"], "final": r["final"],
            "history": {k: r["history"][k] for k in HISTORY_KEYS}}


def _natural(fp32_runs):
    """Gradient statistics of the fp32 runs (one per seed): merged stats and per-seed shares."""
    per_seed = [LayerStats.from_dict(r["observed"]["layers"]) for r in fp32_runs]
    merged = per_seed[0]
    for s in per_seed[1:]:
        merged = merged.merge(s)
    out = {"kinds": {}, "layers": {}, "window": {}, "merged": merged.to_dict()}
    for kind in LayerStats.KINDS:
        totals = [s.total(kind) for s in per_seed]
        if any(t is None for t in totals):
            continue
        shares = [t.shares(0) for t in totals]
        out["kinds"][kind] = {name: summary([sh[name] for sh in shares])
                              for name in ("zero", "to_zero", "subnormal", "below", "survive",
                                           "to_zero_of_all")}
        edges = [t.edges() for t in totals]
        out["kinds"][kind]["window_low"] = summary([e[0] for e in edges])
        out["kinds"][kind]["window_high"] = summary([e[1] for e in edges])
        steps = sorted(merged.total(kind).series.items())
        out["kinds"][kind]["over_training"] = {
            "step": [st for st, _ in steps],
            "to_zero": [r[1] / r[0] if r[0] else None for _, r in steps],
            "below": [r[2] / r[0] if r[0] else None for _, r in steps]}
        ks, surv, over, zero = merged.total(kind).window()
        out["window"][kind] = {"log2_scale": ks.tolist(), "survive": surv.tolist(),
                               "overflow": over.tolist(), "to_zero": zero.tolist()}
        rows = []
        for layer in merged.layers(kind):
            sh = [s.stats[kind][layer].shares(0) for s in per_seed if layer in s.stats[kind]]
            rows.append({"layer": layer,
                         "values": int(merged.stats[kind][layer].total),
                         **{name: summary([x[name] for x in sh])
                            for name in ("zero", "to_zero", "subnormal", "below")}})
        out["layers"][kind] = rows
    ups = [UpdateRatioStats.from_dict(r["observed"]["update_ratio"]) for r in fp32_runs]
    if ups and any(u.moved for u in ups):
        m = ups[0]
        for u in ups[1:]:
            m = m.merge(u)
        out["update_ratio"] = {"merged": m.to_dict(),
                               **{name: summary([u.shares()[name] for u in ups])
                                  for name in ("below_2^-11", "below_2^-12")}}
    return out


def _tokens_curve(fp32_runs):
    curves = [r["tokens_curve"] for r in fp32_runs if "tokens_curve" in r]
    if not curves:
        return None
    out = {"tokens": curves[0]["tokens"], "seq_len": curves[0]["seq_len"]}
    for kind in ("activation_grad", "weight_grad"):
        rows = []
        for i in range(len(out["tokens"])):
            sh = [GradStats.from_dict(c[kind][i]).shares(0) for c in curves]
            rows.append({name: summary([x[name] for x in sh])
                         for name in ("to_zero", "subnormal", "below")})
        out[kind] = rows
    return out


def _depth_curve(spec, by_key):
    c = spec["curve"]
    out = {"depths": c["depths"], "activation_grad": [], "weight_grad": []}
    for key in c["variants"]:
        stats = [LayerStats.from_dict(r["observed"]["layers"]) for r in by_key.get(key, [])]
        for kind in ("activation_grad", "weight_grad"):
            sh = [s.total(kind).shares(0) for s in stats if s.total(kind) is not None]
            out[kind].append({name: summary([x[name] for x in sh])
                              for name in ("to_zero", "subnormal", "below")})
    return out


def assemble(specs, results, seeds):
    """One summary dict per study of ``specs`` from ``results`` ({run_id: result})."""
    out = []
    for spec in specs:
        by_key = {v: [results[f"{spec['key']}/{v}/s{s}"] for s in seeds
                      if f"{spec['key']}/{v}/s{s}" in results] for v in spec["variants"]}
        by_key = {k: v for k, v in by_key.items() if v}
        if not by_key:
            continue
        ref = {r["seed"]: r for r in by_key.get("fp32", [])}
        configs = []
        for key, runs in by_key.items():
            stats = {name: summary([r["final"][name] for r in runs]) for name in FINAL_KEYS}
            prog = [progress_ratio(r["final"], ref[r["seed"]]["final"],
                                   r["history"]["eval_loss"][0])
                    if r["seed"] in ref else None for r in runs]
            stats["progress"] = summary(prog)
            stats["settled_log2_scale"] = summary([settled_log2_scale(r["history"])
                                                   for r in runs])
            stats["diverged"] = sum(bool(r["final"]["diverged"]) for r in runs)
            label, cfg = variant_config(spec, key, runs[0]["seed"])
            item = {"key": key, "label": label, "paper": spec["paper"].get(key, ""),
                    "amplified": key.startswith("amp_"), "config": cfg,
                    "stats": stats, "seeds": [_slim(r) for r in runs]}
            chains = [r["dfp_chains"] for r in runs if "dfp_chains" in r]
            if chains:
                item["dfp_chains"] = merge_chain_stats(chains)
            configs.append(item)
        study = {k: spec.get(k) for k in ("key", "title", "description", "settings", "k",
                                          "static_log2", "hist_every")}
        study.update(metric=next(iter(by_key.values()))[0]["metric"], configs=configs,
                     spikes=spec.get("spikes", []), seeds=list(seeds), figures={})
        if "fp32" in by_key:
            study["natural"] = _natural(by_key["fp32"])
            study["tokens_curve"] = _tokens_curve(by_key["fp32"])
        if (spec.get("curve") or {}).get("kind") == "depth":
            study["depth_curve"] = _depth_curve(spec, by_key)
        out.append(study)
    return out
