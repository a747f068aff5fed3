"""The per-study sections of report.md, in the order of evidence: natural-scale gradient
statistics (totals, per layer, the paper's numbers beside), the loss-scale window, the
configurations at natural scale (mean ± sd over seeds), the depth / tokens-per-batch curves,
and last, labelled as such, the amplification device.

Provides :func:`study_section`, :func:`dfp_section` and :func:`mnist_section`.
Imports models.repro.report and models.repro.paper only.
"""

from __future__ import annotations

import math

from .aggregate import within_spread
from .paper import PAPER_NATURAL
from .recipestats import recipe_section
from .report import fmt_edge, fmt_num, fmt_pm, table

__all__ = ["dfp_section", "mnist_section", "study_section"]

KIND = {"weight_grad": "weight gradients", "activation_grad": "activation gradients"}


def _fig(m, key, caption):
    f = m.get("figures", {}).get(key)
    return [f"![{caption}: {m['title']}]({f})", ""] if f else []


def _natural(m):
    nat = m.get("natural")
    if not nat:
        return []
    n = len(m["seeds"])
    lines = ["### Natural scale: the fp32 run's gradients", "",
             f"No multiplier, no loss scale: the gradients of the fp32 run as training produced "
             f"them, sampled every {m.get('hist_every', '?')} steps, mean ± sd over {n} seeds.", ""]
    rows = []
    for kind, k in nat["kinds"].items():
        paper = "; ".join(t for _, t in PAPER_NATURAL[kind].values())
        rows.append([KIND[kind], fmt_pm(k["zero"], pct=True),
                     fmt_pm(k["below"], pct=True, digits=5),
                     fmt_pm(k["to_zero"], pct=True, digits=5), fmt_pm(k["subnormal"], pct=True),
                     fmt_pm(k["to_zero_of_all"], pct=True, digits=5),
                     fmt_pm(k["survive"], pct=True, digits=5), paper])
    lines += table(["gradients", "exactly zero (of all)", "below 2^-24", "become 0 in fp16",
                    "become subnormal", "become 0 (of all values)", "survive unscaled",
                    "paper"], rows) + [""]
    lines += ["Shares of the non-zero values unless marked \"of all\"."] + [""]
    lines += _natural_verdict(m)
    trend = []
    for kind, k in nat["kinds"].items():
        t = k.get("over_training")
        if t and len(t["step"]) > 1 and t["below"][0] is not None:
            trend.append(f"{KIND[kind]} below 2^-24: {fmt_num(t['below'][0], pct=True, digits=5)}"
                         f" at step {t['step'][0]}, {fmt_num(t['below'][-1], pct=True, digits=5)}"
                         f" at step {t['step'][-1]}")
    if trend:
        lines += ["Over training (seeds pooled; every sampled step is in results.json): "
                  + "; ".join(trend) + ".", ""]
    lines += _fig(m, "hist", "Gradient exponents, natural scale")
    layer_rows = []
    for kind, rs in nat.get("layers", {}).items():
        for i, r in enumerate(rs):
            pos = "first" if i == 0 else ("last" if i == len(rs) - 1 else "middle")
            layer_rows.append([KIND[kind], r["layer"], pos, f"{r['values']:,}",
                               fmt_pm(r["zero"], pct=True), fmt_pm(r["below"], pct=True, digits=5),
                               fmt_pm(r["to_zero"], pct=True, digits=5),
                               fmt_pm(r["subnormal"], pct=True)])
    if layer_rows:
        lines += ["Per layer (which layers' gradients fall below fp16's reach; layers in the "
                  "model's order, \"first\" nearest the input; activation gradients are those "
                  "of each tapped layer output):", ""]
        lines += table(["gradients", "layer", "position", "values (all seeds)",
                        "exactly zero (of all)", "below 2^-24", "become 0 in fp16",
                        "become subnormal"], layer_rows) + [""]
        lines += _fig(m, "layers", "Per-layer shares")
    ur = nat.get("update_ratio")
    if ur and m["key"] == "master":
        lines += [f"Fig. 2a's mechanism: {fmt_pm(ur['below_2^-11'], pct=True)} of the fp32 "
                  f"run's updates (elements with a non-zero gradient) are smaller than 2^-11 of "
                  f"their weight and {fmt_pm(ur['below_2^-12'], pct=True)} smaller than 2^-12; "
                  "an update below half an ulp of the weight (between 2^-12 and 2^-11 of it, "
                  "depending on its significand) is lost when added to an fp16 weight. The "
                  "measured lost share is in the table below (\"updates lost\").", ""]
    return lines


def _natural_verdict(m):
    """One plain sentence: does underflow hurt training here at natural scale?"""
    c = {x["key"]: x for x in m["configs"]}
    kinds = m["natural"]["kinds"]
    if "master_noscale" not in c or "fp32" not in c or "weight_grad" not in kinds:
        return []
    ns = c["master_noscale"]["stats"]["progress"]
    fp = c["fp32"]["stats"]["progress"]
    w = kinds["weight_grad"]["to_zero"]["mean"]
    a = kinds.get("activation_grad", {}).get("to_zero", {"mean": 0.0})["mean"]
    hurts = ns["mean"] < 0.9 and not within_spread(ns, fp)
    small = max(w, a) < 0.01
    text = (f"At natural scale in this study {fmt_num(w, pct=True, digits=5)} of the non-zero "
            f"weight gradients and {fmt_num(a, pct=True, digits=5)} of the activation gradients "
            f"become zero in fp16, and fp16 without loss scaling makes "
            f"{fmt_pm(ns, pct=True)} of fp32's improvement: ")
    if hurts:
        text += "underflow costs training here, without any multiplier."
    elif small:
        text += ("the effect is small at this size (almost nothing underflows), and fp16 "
                 "without scaling trains as fp32 does.")
    else:
        text += ("some gradients underflow, but fp16 without scaling still trains as fp32 does "
                 "(within the seed spread or above 90%).")
    return [text, ""]


def _window(m):
    nat = m.get("natural", {})
    c = {x["key"]: x for x in m["configs"]}
    static = [c[k] for k in ["master_noscale"] + [f"static_{k}" for k in (3, 8, 15, 24)]
              if k in c]
    if not nat.get("window") and not static:
        return []
    lines = ["### The loss-scale window", ""]
    if nat.get("window"):
        parts = []
        for kind, k in nat["kinds"].items():
            parts.append(f"{KIND[kind]}: 99.9% survive from {fmt_edge(k['window_low'])}"
                         f", no overflow up to {fmt_edge(k['window_high'])}")
        lines += ["Share of the fp32 run's non-zero gradients that survive an fp16 cast after "
                  "multiplying by 2^k (neither zero nor infinite), and the share that overflows "
                  "(paper, Fig. 3 [S][G]: a scale of 8 suffices for SSD, 32K recovers all but "
                  "0.1% without overflow). " + "; ".join(parts) + ".", ""]
        lines += _fig(m, "window", "Loss-scale window")
    if static:
        rows = [[x["label"], fmt_pm(x["stats"]["progress"], pct=True),
                 fmt_pm(x["stats"]["eval_metric"], pct=m["metric"] == "accuracy"),
                 fmt_num(x["stats"]["skipped_steps"]["mean"]), x["paper"]] for x in static]
        dyn = c.get("dynamic", {}).get("stats", {}).get("settled_log2_scale")
        lines += table(["static scale", "share of fp32's improvement", f"eval {m['metric']}",
                        "skipped steps (mean)", "paper"], rows) + [""]
        if dyn and math.isfinite(dyn["mean"]):
            lines += [f"GradScaler (started at 2^16) settles at 2^{dyn['mean']:.1f} ± "
                      f"{dyn['std']:.1f} (median log2 scale over the second half of the run).",
                      ""]
    return lines


def _config_rows(m, cfgs):
    rows = []
    acc = m["metric"] == "accuracy"
    for x in cfgs:
        s = x["stats"]
        mark = f" (diverged in {s['diverged']} seeds)" if s["diverged"] else ""
        rows.append([x["label"] + mark, fmt_pm(s["eval_loss"]),
                     fmt_pm(s["eval_metric"], pct=acc), fmt_pm(s["progress"], pct=True),
                     fmt_num(s["skipped_steps"]["mean"]), fmt_num(s["final_scale"]["mean"]),
                     fmt_pm(s["lost_update_fraction"], pct=True),
                     fmt_pm(s["grad_zero_fraction"], pct=True), x["paper"]])
    return rows


def _spread_notes(cfgs):
    ref = next((x for x in cfgs if x["key"] == "fp32"), None)
    if ref is None:
        return []
    same = [x["key"] for x in cfgs if x is not ref
            and within_spread(x["stats"]["progress"], ref["stats"]["progress"])]
    return [f"Within the seed spread of fp32 (|difference of mean improvement| <= sum of the "
            f"standard deviations): {', '.join(same) or 'none'}.", ""]


HEADER = ["configuration", "eval loss", "eval {metric}", "share of fp32's improvement",
          "skipped steps", "final scale", "updates lost", "grads zero", "paper (same recipe)"]


def _configs(m):
    cfgs = [x for x in m["configs"] if not x["amplified"] and not x["key"].startswith("depth_")]
    if not cfgs:
        return []
    head = [h.format(metric=m["metric"]) for h in HEADER]
    lines = [f"### Configurations at natural scale (mean ± sd over {len(m['seeds'])} seeds)",
             ""] + table(head, _config_rows(m, cfgs)) + [""]
    lines += _spread_notes(cfgs)
    lines += [("\"updates lost\": share of weight elements with a non-zero gradient whose "
               "stored weight (the fp32 master where there is one) did not change in an applied "
               "step; \"grads zero\": share of weight-gradient elements exactly zero after the "
               "backward pass, averaged over all steps; final scale: mean over seeds."), ""]
    lines += _fig(m, "loss", "Loss curves, natural scale") + _fig(m, "scale", "Loss scales")
    return lines


def _curves(m):
    lines = []
    for key, what, xs_key, xlab in (("tokens_curve", "tokens per batch", "tokens", "tokens"),
                                    ("depth_curve", "depth", "depths", "hidden layers")):
        c = m.get(key)
        if not c:
            continue
        rows = []
        for i, x in enumerate(c[xs_key]):
            a, w = c["activation_grad"][i], c["weight_grad"][i]
            rows.append([x, fmt_pm(a["below"], pct=True, digits=5),
                         fmt_pm(a["to_zero"], pct=True, digits=5),
                         fmt_pm(a["subnormal"], pct=True), fmt_pm(w["below"], pct=True, digits=5),
                         fmt_pm(w["to_zero"], pct=True, digits=5)])
        lines += [f"### Measured: underflow against {what}", ""]
        if key == "tokens_curve":
            lines += [f"The trained fp32 model of each seed, one forward and backward (no "
                      f"update) on batches of N tokens (sequences of {c['seq_len']}).", ""]
        lines += table([xlab, "activation grads below 2^-24", "activation grads -> 0 in fp16",
                        "activation grads subnormal", "weight grads below 2^-24",
                        "weight grads -> 0 in fp16"], rows) + [""]
        if key == "depth_curve":
            lines += _depth_runs(m)
        lines += _fig(m, key, f"Underflow against {what}")
    return lines


def _depth_runs(m):
    """The fp32 runs of the depth curve: how well each depth trains in the same budget."""
    c = {x["key"]: x for x in m["configs"]}
    keys = [k for k in c if k.startswith("depth_")] + (["fp32"] if "fp32" in c else [])
    acc = m["metric"] == "accuracy"
    rows = [[c[k]["label"] if k != "fp32" else "fp32, 16 hidden layers (the study's fp32 run)",
             fmt_pm(c[k]["stats"]["eval_loss"]),
             fmt_pm(c[k]["stats"]["eval_metric"], pct=acc)] for k in keys]
    return (["The fp32 runs behind the curve (same budget):", ""]
            + table(["configuration", "eval loss", f"eval {m['metric']}"], rows) + [""])


def _device(m):
    cfgs = [x for x in m["configs"] if x["amplified"]]
    if not cfgs:
        return []
    note = next((s for s in m["settings"] if s.startswith("Amplification device")), "")
    head = [h.format(metric=m["metric"]) for h in HEADER]
    lines = [f"### Amplification device (loss x2^-{m['k']}): not a natural measurement", "",
             note, ""] + table(head, _config_rows(m, cfgs)) + [""]
    return lines + _fig(m, "loss_device", "Loss curves under the amplification device")


def _dfp_table(m):
    c = next((x for x in m["configs"] if x["key"] == "dfp16" and "dfp_chains" in x), None)
    if c is None:
        return []
    rows = [[k, f"{d['chains']:,}", fmt_num(d["overflow_share"], pct=True, digits=5),
             fmt_num(d["saturation_share"], pct=True, digits=5),
             f"{d['saturation_events']:,}", fmt_num(d["headroom_bits"], 3)]
            for k, d in c["dfp_chains"].items()]
    ch = next(iter(c["dfp_chains"].values()))
    return ([f"### DFP-16 GEMMs: int32 chains by length ({ch['gemms']} GEMMs sampled from the "
             f"training steps of the DFP-16 runs, all seeds; k up to {ch['max_k']})", ""]
            + table(["products per chain", "chains", "overflow int32 (wrap)",
                     "hit saturation (saturating form)", "saturation events",
                     "headroom of the largest sum (bits)"], rows) + [""])


def study_section(m, global_figs):
    lines = [f"## {m['title']}", "", m["description"], ""]
    if m.get("settings"):
        lines += ["Settings:", ""] + [f"- {s}" for s in m["settings"]
                                      if not s.startswith("Amplification device")] + [""]
    lines += _natural(m)
    if m["key"] == "master" and global_figs.get("update_ratio"):
        lines += [f"![Fig. 2a's mechanism: |update| / |w|]({global_figs['update_ratio']})", ""]
    lines += _window(m) + _configs(m) + recipe_section(m) + _curves(m) + _dfp_table(m)
    lines += _device(m)
    return lines


def dfp_section(r):
    figs = r.get("figures", {})
    if not figs.get("dfp_chains"):
        return []
    f = next((x for x in r["findings"] if x["claim"] == "dfp16_overflow"), None)
    lines = ["## DFP-16 (Das et al.): why the int32 chains are bounded", "",
             ("DFP-16 integers satisfy |i| <= 2^15 - 1, so one product is at most 2^30 - 2^16 + 1 "
              "and the pair of one VNNI instruction at most 2^31 - 2^17 + 2 < 2^31 - 1: a chain "
              "of 2 products cannot overflow int32, and the dfp16 policy flushes every such "
              "pair to fp32.  Each further pair can add up to 2^31 again.  The tables in the "
              "study sections replay the DFP-16 GEMMs sampled from training at longer chains: "
              "how often a chain would overflow with wrapping lanes (VPDPWSSD) and how often the "
              "saturating form (VPDPWSSDS) would have clamped. The paper's own chain length is "
              "not quoted here (the team's notes record only that the paper bounds the chains "
              "and converts partial sums to FP32)."), ""]
    if f:
        lines += [f"Measured: {f['text']}", ""]
    return lines + [f"![DFP-16 chain overflow by chain length]({figs['dfp_chains']})", ""]


def mnist_section(r):
    mn = r.get("mnist") or {}
    if r["profile"] == "quick":
        text = ("The quick profile uses built-in data only. The full profile adds the MLP and "
                "CNN studies on MNIST when the four IDX files are in $MPEMU_MNIST_DIR or "
                "data/mnist.")
    elif mn.get("used"):
        text = f"MNIST studies ran on the IDX files in {mn['dir']}."
    else:
        text = (f"MNIST files were not found (looked in {mn.get('looked_in')}): the MNIST "
                "studies were not run. Put train-images-idx3-ubyte(.gz), "
                "train-labels-idx1-ubyte(.gz), t10k-images-idx3-ubyte(.gz) and "
                "t10k-labels-idx1-ubyte(.gz) there to add them.")
    return ["## Real data (MNIST)", "", text, ""]
