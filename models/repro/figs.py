"""The reproduction's figures, drawn from the study summaries of models.repro.aggregate.

Provides :func:`study_figures` (per study: loss curves of the natural and of the device
configurations, loss-scale trajectories, the fp32 run's exponent histograms with fp16's bands,
the loss-scale window, per-layer shares, the depth / tokens-per-batch curves) and
:func:`global_figures` (the update-ratio histogram of the master-weights study and the DFP-16
chain-length overflow curve).  Every function returns {figure key: file name} and stores the
same in the study dict's "figures".

Imports models.figures (matplotlib lazily, there) and models.repro.*.
"""

from __future__ import annotations

import math
import os

from .. import figures
from .gradstats import FormatBands
from .studies import STATIC_WINDOW

__all__ = ["global_figures", "study_figures"]

KIND_LABEL = {"weight_grad": "weight gradients", "activation_grad": "activation gradients"}


def _bands():
    b = FormatBands("fp16")
    return {"name": b.format.name, "zero_max": b.zero_max, "tiny": float(b.format.tiny),
            "overflow_min": b.overflow_min}


def _seed0(cfgs):
    return [{"label": c["label"], "history": c["seeds"][0]["history"]} for c in cfgs]


def _name(out_dir, stem, key):
    return os.path.join(out_dir, f"{stem}_{key}.png")


def study_figures(m, out_dir):
    key, title, figs = m["key"], m["title"], m["figures"]
    nat = [c for c in m["configs"] if not c["amplified"] and not c["key"].startswith("depth_")]
    dev = [c for c in m["configs"] if c["amplified"]]
    for stem, cfgs, sub in (("loss", nat, ""), ("loss_device", dev, " [amplification device]")):
        if cfgs:
            figs[stem] = os.path.basename(figures.plot_loss_curves(
                _seed0(cfgs), _name(out_dir, stem, key), title=f"{title}{sub} (seed 0)",
                metric_name=m["metric"]))
    scaled = [c for c in nat if any(s is not None and s != 1.0
                                    for s in c["seeds"][0]["history"]["scale"])]
    if scaled:
        figs["scale"] = os.path.basename(figures.plot_scale_trajectories(
            _seed0(scaled), _name(out_dir, "scale", key), title=f"{title} (seed 0)"))
    nat_stats = m.get("natural")
    if nat_stats:
        _natural_figures(m, nat_stats, out_dir)
    if m.get("tokens_curve"):
        c = m["tokens_curve"]
        series = {f"{KIND_LABEL[k]}: {lab}": ([r[s]["mean"] for r in c[k]],
                                              [r[s]["std"] for r in c[k]])
                  for k in ("activation_grad", "weight_grad")
                  for s, lab in (("below", "below 2^-24"), ("to_zero", "become 0 in fp16"))}
        figs["tokens_curve"] = os.path.basename(figures.plot_share_curves(
            c["tokens"], series, _name(out_dir, "tokens_curve", key),
            title=f"{title}: trained fp32 model, gradients against tokens per batch",
            xlabel="tokens per batch (sequences x characters)"))
    if m.get("depth_curve"):
        c = m["depth_curve"]
        series = {f"{KIND_LABEL[k]}: {lab}": ([r[s]["mean"] for r in c[k]],
                                              [r[s]["std"] for r in c[k]])
                  for k in ("activation_grad", "weight_grad")
                  for s, lab in (("below", "below 2^-24"), ("to_zero", "become 0 in fp16"))}
        figs["depth_curve"] = os.path.basename(figures.plot_share_curves(
            c["depths"], series, _name(out_dir, "depth_curve", key), logx=False,
            title=f"{title}: fp32 gradients against depth", xlabel="hidden layers"))
    return figs


def _natural_figures(m, nat, out_dir):
    key, title, figs = m["key"], m["title"], m["figures"]
    from .gradstats import LayerStats

    merged = LayerStats.from_dict(nat["merged"])
    panels = []
    for kind in ("weight_grad", "activation_grad"):
        g = merged.total(kind)
        if g is None:
            continue
        sh = g.shares(0)
        d = g.to_dict()
        panels.append({"what": f"{KIND_LABEL[kind]} (fp32 run, all layers, {len(m['seeds'])} "
                               "seeds)", "exp_min": d["exp_min"], "counts": d["counts"],
                       "zeros": g.zeros, "total": g.total,
                       "text": (f"values: {g.total:,} from {g.samples} tensors\n"
                                f"exactly zero: {100 * sh['zero']:.1f}% of all\n"
                                f"of the non-zero: below 2^-24 {100 * sh['below']:.2f}%\n"
                                f"become 0 in fp16 {100 * sh['to_zero']:.2f}%\n"
                                f"become subnormal {100 * sh['subnormal']:.1f}%")})
    if panels:
        figs["hist"] = os.path.basename(figures.plot_band_histograms(
            panels, _name(out_dir, "hist", key), bands=_bands(),
            title=f"{title}: gradient exponents at natural scale"))
    if nat.get("window"):
        cfgs = {c["key"]: c for c in m["configs"]}
        runs = []
        for k in STATIC_WINDOW:
            c = cfgs.get("master_noscale" if k == 0 else f"static_{k}")
            if c:
                runs.append((k, c["stats"]["progress"]["mean"],
                             c["stats"]["skipped_steps"]["mean"]))
        dyn = cfgs.get("dynamic", {}).get("stats", {}).get("settled_log2_scale")
        figs["window"] = os.path.basename(figures.plot_scale_window(
            {KIND_LABEL[k]: w for k, w in nat["window"].items()},
            _name(out_dir, "window", key), title=f"{title}: the loss-scale window", runs=runs,
            settled=None if dyn is None else dyn["mean"]))
    rows = {KIND_LABEL[k]: [(r["layer"], r["to_zero"]["mean"], r["subnormal"]["mean"])
                            for r in rs] for k, rs in nat.get("layers", {}).items() if rs}
    if rows:
        figs["layers"] = os.path.basename(figures.plot_layer_shares(
            rows, _name(out_dir, "layers", key), title=f"{title}: per layer, fp32 run"))


def global_figures(models, out_dir):
    """The update-ratio histogram (master study) and the DFP-16 chain-length curve."""
    out = {}
    m = next((m for m in models if m["key"] == "master"), None)
    ur = (m or {}).get("natural", {}).get("update_ratio")
    if ur:
        lost = next((c["stats"]["lost_update_fraction"] for c in m["configs"]
                     if c["key"] == "nomaster"), None)
        text = (f"fp32 run, {len(m['seeds'])} seeds\nbelow 2^-11: "
                f"{100 * ur['below_2^-11']['mean']:.1f}%\nbelow 2^-12: "
                f"{100 * ur['below_2^-12']['mean']:.1f}%")
        if lost is not None and math.isfinite(lost["mean"]):
            text += f"\nmeasured lost without master: {100 * lost['mean']:.1f}%"
        out["update_ratio"] = os.path.basename(figures.plot_update_ratios(
            ur["merged"]["exp_min"], ur["merged"]["counts"],
            os.path.join(out_dir, "update_ratio_master.png"), text=text,
            title="Fig. 2a's mechanism: |update| / |w| in the master-weights study"))
    series, lengths = {}, None
    for mm in models:
        c = next((c for c in mm["configs"] if c["key"] == "dfp16" and "dfp_chains" in c), None)
        if c is None:
            continue
        ch = c["dfp_chains"]
        lengths = list(ch)
        series[mm["key"]] = ([ch[k]["overflow_share"] or 0.0 for k in lengths],
                             [0.0] * len(lengths))
    if series:
        xs = list(range(len(lengths)))
        path = figures.plot_share_curves(
            xs, series, os.path.join(out_dir, "dfp_chains.png"), logx=False,
            title="DFP-16 GEMMs: int32 chains that overflow, by chain length",
            xlabel="products per int32 chain (K: the whole reduction, no flush to fp32)",
            ylabel="% of (output, chain) pairs", xticklabels=lengths)
        out["dfp_chains"] = os.path.basename(path)
    return out
