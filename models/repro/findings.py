"""The paper's claims judged on the studies' numbers.

Provides :func:`findings` (a list of finding dicts: claim, title, paper, reproduced (True /
False / None = not tested), evidence ("natural", "device", "natural+device" or "none"), text,
rule, numbers) and the formatting helpers :func:`pct` and :func:`pm`.

Every rule is applied to means over seeds and stated in the finding's text with the numbers it
was applied to; where a difference the rule relies on lies within the seeds' spread
(|difference of means| <= sum of the standard deviations) the text says so.  Natural-scale
evidence comes first: a finding that holds only under the amplification device (models.repro.
studies, ``amp_*`` configurations) says so and is listed in ``needs_device``.

Imports models.repro.aggregate and models.repro.paper only.
"""

from __future__ import annotations

import math

from .aggregate import within_spread
from .paper import DAS_CLAIM, PAPER_CLAIMS
from .recipestats import recipe_finding

__all__ = ["findings", "needs_device", "pct", "pm"]

SCALED = ("dynamic", "deepspeed", "lognormal") + tuple(f"static_{k}" for k in (3, 8, 15))


def pct(v, digits=1):
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.{digits}f}%"


def pm(s, percent=True, digits=1):
    """"mean ± sd" of a summary dict (percent: both as percentages)."""
    if s is None or not math.isfinite(s["mean"]):
        return "n/a"
    if percent:
        return f"{100 * s['mean']:.{digits}f}% ± {100 * s['std']:.{digits}f}"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"


def _new(claim, title, paper, rule, *, text, evidence="natural"):
    """A finding not tested yet (``text`` says why), to be filled by its judge."""
    return {"claim": claim, "title": title, "paper": paper, "reproduced": None,
            "evidence": evidence, "text": text, "numbers": {}, "rule": rule}


def _cfgs(study):
    return {c["key"]: c for c in study["configs"]}


def _spread_note(a, b, what):
    return f" ({what}: within the seed spread)" if within_spread(a, b) else ""


def _underflow_natural(models):
    f = _new("underflow_natural", "Gradients underflow in fp16 at natural scale",
             PAPER_CLAIMS["underflow"],
             ("Rule (per study, on means over seeds): shown when more than 1% of the non-zero "
              "weight or activation gradients of the fp32 run become zero in fp16, the "
              "unscaled fp16 + master run makes less than 90% of fp32's held-out loss "
              "improvement and the best scaled run (dynamic, DeepSpeed, LogNormal or a static "
              "scale 2^3..2^15) at least 5 points more, outside the seed spread; shown "
              "overall when shown in at least one study (the paper: many networks need no "
              "scaling, some do)."),
             text="no study had both an fp32 run and an unscaled fp16 run.")
    parts, shown = [], []
    for m in models:
        c, nat = _cfgs(m), m.get("natural", {}).get("kinds", {})
        if "master_noscale" not in c or "weight_grad" not in nat:
            continue
        wg, ag = nat["weight_grad"], nat.get("activation_grad", {})
        ns = c["master_noscale"]["stats"]["progress"]
        scaled = {k: c[k]["stats"]["progress"] for k in SCALED if k in c}
        best_key = max(scaled, key=lambda k: scaled[k]["mean"]
                       if math.isfinite(scaled[k]["mean"]) else -1e9, default=None)
        best = scaled.get(best_key)
        under = max(wg["to_zero"]["mean"], ag.get("to_zero", {"mean": 0.0})["mean"])
        ok = (under > 0.01 and ns["mean"] < 0.9 and best is not None
              and best["mean"] >= ns["mean"] + 0.05 and not within_spread(best, ns))
        if ok:
            shown.append(m["key"])
        f["numbers"][m["key"]] = {"weight_to_zero": wg["to_zero"]["mean"],
                                  "activation_to_zero": ag.get("to_zero", {}).get("mean"),
                                  "progress_noscale": ns["mean"],
                                  "progress_best_scaled": None if best is None else best["mean"],
                                  "shown": ok}
        where = []
        for kind, rows in m["natural"].get("layers", {}).items():
            if rows:
                i = max(range(len(rows)), key=lambda j: rows[j]["to_zero"]["mean"])
                pos = "first" if i == 0 else ("last" if i == len(rows) - 1 else "a middle")
                where.append(f"{kind.split('_')[0]} gradients of {rows[i]['layer']} ({pos} "
                             f"layer) {pm(rows[i]['to_zero'], digits=2)}")
        parts.append(
            f"**{m['title']}**: {pm(wg['to_zero'], digits=2)} of the non-zero weight gradients "
            f"and {pm(ag.get('to_zero'), digits=2)} of the activation gradients become zero in "
            f"fp16 ({pm(wg['below'], digits=2)} / {pm(ag.get('below'), digits=2)} below 2^-24"
            + (f"; most in one layer: {', '.join(where)}" if where else "") + "); "
            f"unscaled fp16 made {pm(ns)} of fp32's improvement"
            + (f", the best scaled run ({c[best_key]['label']}) {pm(best)}"
               + _spread_note(best, ns, "difference") if best else "")
            + f" -> {'shown' if ok else 'not shown'}.")
    if parts:
        f["reproduced"] = bool(shown)
        f["text"] = " ".join(parts)
    return f


def _underflow_device(models):
    f = _new("underflow_device", "Loss scaling cures underflow made by the amplification device",
             PAPER_CLAIMS["underflow"],
             ("Rule (per study, on means): shown when the device's unscaled fp16 run makes "
              "less than 90% of fp32's improvement and its best scaled run at least 5 points "
              "more, outside the seed spread; shown overall in at least half of the studies "
              "that ran the device."),
             text="no study ran the amplification device.", evidence="device")
    parts, verdicts = [], []
    for m in models:
        c = _cfgs(m)
        if "amp_master_noscale" not in c:
            continue
        ns = c["amp_master_noscale"]["stats"]["progress"]
        scaled = [c[k]["stats"]["progress"] for k in ("amp_static", "amp_dynamic") if k in c]
        best = max(scaled, key=lambda s: s["mean"] if math.isfinite(s["mean"]) else -1e9,
                   default=None)
        ok = (ns["mean"] < 0.9 and best is not None and best["mean"] >= ns["mean"] + 0.05
              and not within_spread(best, ns))
        verdicts.append(ok)
        same = c.get("amp_fp32")
        ident = None
        if same is not None and "fp32" in c:
            ident = (same["stats"]["eval_loss"]["values"]
                     == c["fp32"]["stats"]["eval_loss"]["values"])
        f["numbers"][m["key"]] = {"progress_noscale": ns["mean"],
                                  "progress_best_scaled": None if best is None else best["mean"],
                                  "fp32_bit_identical": ident, "shown": ok}
        parts.append(f"**{m['title']}** (loss x2^-{m['k']}): unscaled {pm(ns)} of fp32's "
                     f"improvement, best scaled {pm(best)} -> {'shown' if ok else 'not shown'}"
                     + ("" if ident is None else
                        ("; fp32 under the device is bit-identical to natural fp32 (same eval "
                         "loss in every seed)" if ident else
                         "; WARNING: fp32 under the device differs from natural fp32")) + ".")
    if parts:
        f["reproduced"] = bool(verdicts) and sum(verdicts) * 2 >= len(verdicts)
        f["text"] = " ".join(parts)
    return f


def _matches(p, ref):
    """A run matches fp32: more than 90% of its improvement, or within the seed spread."""
    return p["mean"] > 0.9 or within_spread(p, ref)


def _window(models):
    f = _new("window", "The loss-scale window between underflow and overflow",
             PAPER_CLAIMS["window"],
             ("Rule (on means): shown when, in every study with window runs, some static "
              "scale at or below the measured overflow edge (the largest scale at which no "
              "non-zero fp32 gradient overflows fp16) matches fp32 (more than 90% of its "
              "improvement, or within the seed spread) and every static scale above the "
              "edge skips steps.  Reported beside it, as in the paper's Fig. 3: the "
              "smallest static scale that matches fp32 (\"a scale of 8 is enough\") and "
              "the smallest scale at which 99.9% of the non-zero values survive (\"32K "
              "recovers all but 0.1%\")."),
             text="no study ran the static-scale window.")
    parts, ok_all = [], []
    for m in models:
        c, nat = _cfgs(m), m.get("natural", {}).get("kinds", {})
        runs = {k: c[k] for k in c if k == "master_noscale" or k.startswith("static_")}
        if len(runs) < 2 or "weight_grad" not in nat or "fp32" not in c:
            continue
        ref = c["fp32"]["stats"]["progress"]
        lows = [nat[k]["window_low"]["mean"] for k in nat]
        highs = [nat[k]["window_high"]["mean"] for k in nat]
        low = max((v for v in lows if math.isfinite(v)), default=math.nan)
        # seeds whose gradients of some kind never reach 99.9% survival up to the window's top
        sets = sum(len(nat[k]["window_low"]["values"]) for k in nat)
        unreached = sets - sum(nat[k]["window_low"]["n_finite"] for k in nat)
        high = min((v for v in highs if math.isfinite(v)), default=math.nan)
        row, matching, ok = [], [], True
        for key, cfg in sorted(runs.items(), key=lambda kv: _log2_of(kv[0])):
            k = _log2_of(key)
            p, sk = cfg["stats"]["progress"], cfg["stats"]["skipped_steps"]["mean"]
            if (not math.isfinite(high) or k <= high) and _matches(p, ref):
                matching.append(k)
            if math.isfinite(high) and k > high and not sk > 0:
                ok = False
            row.append(f"2^{k}: {pm(p)}" + (f", {sk:.0f} skipped" if sk else ""))
        ok = ok and bool(matching)
        dyn = c.get("dynamic", {}).get("stats", {}).get("settled_log2_scale")
        ok_all.append(ok)
        f["numbers"][m["key"]] = {"survive_999_log2": low, "overflow_edge_log2": high,
                                  "smallest_matching_static_log2": min(matching, default=None),
                                  "dynamic_settled_log2": None if dyn is None else dyn["mean"],
                                  "shown": ok}
        parts.append(f"**{m['title']}**: 99.9% of the non-zero gradients survive from 2^{low:.1f}"
                     + (f" (where reached: {unreached} of the {sets} per-seed sets of weight "
                        "or activation gradients never reach 99.9% within the measured scales; "
                        "see the study's section)" if unreached else "")
                     + f", no overflow up to 2^{high:.1f} (means over seeds); the smallest static "
                     f"scale that matches fp32 is "
                     + (f"2^{min(matching)}" if matching else "none") + "; static runs (share of "
                     "fp32's improvement): " + "; ".join(row)
                     + (f"; GradScaler settles at 2^{dyn['mean']:.1f} ± {dyn['std']:.1f}"
                        if dyn and math.isfinite(dyn["mean"]) else "") + ".")
    if parts:
        f["reproduced"] = all(ok_all)
        f["text"] = " ".join(parts)
    return f


def _log2_of(key):
    return 0 if key == "master_noscale" else int(key.split("_")[1])


def _master(models):
    f = _new("master_weights", "Updates are lost without fp32 master weights",
             PAPER_CLAIMS["master_weights"],
             ("Rule (on means): shown when more than 30% of updates are lost without "
              "masters, the no-master run makes less than 75% of fp32's improvement and the "
              "master run more than 90%."),
             text="the master-weights study was not run.")
    m = next((m for m in models if m["key"] == "master"), None)
    c = _cfgs(m) if m else {}
    if not {"fp32", "nomaster", "master"} <= set(c):
        return f
    s = {k: c[k]["stats"] for k in c}
    lost_nm, lost_ms = s["nomaster"]["lost_update_fraction"], s["master"]["lost_update_fraction"]
    p_nm, p_ms = s["nomaster"]["progress"], s["master"]["progress"]
    ur = m.get("natural", {}).get("update_ratio", {})
    shown = lost_nm["mean"] > 0.3 and p_nm["mean"] < 0.75 and p_ms["mean"] > 0.9
    opt = c["fp32"]["config"]["optimizer"]
    text = (f"with {opt['type']} at learning rate {opt['lr']:g} (natural scale), "
            f"{pm(ur.get('below_2^-11'))} of the fp32 run's updates are smaller than 2^-11 of "
            f"their weight ({pm(ur.get('below_2^-12'))} smaller than 2^-12, lost whatever the "
            f"weight's significand); measured: {pm(lost_nm)} of the non-zero updates left the "
            f"fp16 weight unchanged when applied directly, {pm(lost_ms)} for the fp32 master. "
            f"The no-master run made {pm(p_nm)} of fp32's held-out loss improvement, the master "
            f"run {pm(p_ms)}; accuracy: fp32 {pm(s['fp32']['eval_metric'])}, master "
            f"{pm(s['master']['eval_metric'])}, no master {pm(s['nomaster']['eval_metric'])}"
            + _spread_note(p_ms, s["fp32"]["progress"], "master vs fp32") + ".")
    if "nomaster_sr" in s:
        text += (f" Stochastic rounding of the 16-bit update (no master) made "
                 f"{pm(s['nomaster_sr']['progress'])} of fp32's improvement.")
    f.update(reproduced=shown, text=text,
             numbers={"lost_nomaster": lost_nm["mean"], "lost_master": lost_ms["mean"],
                      "progress_nomaster": p_nm["mean"], "progress_master": p_ms["mean"],
                      "update_below_2^-11": (ur.get("below_2^-11") or {}).get("mean")})
    return f


def _alternatives(models):
    f = _new("alternatives", "bf16, DFP-16 and fp32-accumulating Tensor Cores match fp32; fp16 "
             "accumulation may not",
             "Table 1 [T]: fp16 with fp32 accumulation matches fp32; " + DAS_CLAIM,
             "Rule (on means): shown when every bf16, DFP-16 and fp32-accumulation run reaches "
             "more than 90% of fp32's held-out loss improvement.",
             text="no alternative formats were run.")
    rows, ok = [], []
    for m in models:
        c = _cfgs(m)
        for k in ("bf16", "dfp16", "tc_ideal", "tc_v100", "tc_fp16acc"):
            if k in c and "fp32" in c:
                p = c[k]["stats"]["progress"]
                f["numbers"][f"{m['key']}/{k}"] = p["mean"]
                rows.append(f"{m['key']} {c[k]['label']}: {pm(p)}"
                            + _spread_note(p, c["fp32"]["stats"]["progress"], "vs fp32"))
                if k != "tc_fp16acc":
                    ok.append(math.isfinite(p["mean"]) and p["mean"] > 0.9)
    if rows:
        f["reproduced"] = all(ok) if ok else None
        f["text"] = "share of fp32's held-out loss improvement (natural scale): " + "; ".join(
            rows) + "."
    return f


def _dfp(models):
    f = _new("dfp16_overflow", "DFP-16: int32 chains must be bounded", DAS_CLAIM,
             "Rule: shown when, on the GEMMs of the DFP-16 runs, a single int32 chain over the "
             "whole reduction (no flush to fp32) overflows in at least one study, while the "
             "policy's chains of 2 products (proved overflow-free) never do.",
             text="no DFP-16 run was made.")
    parts, any_over, safe = [], False, True
    for m in models:
        c = _cfgs(m).get("dfp16")
        if not c or "dfp_chains" not in c:
            continue
        ch = c["dfp_chains"]
        first = next((k for k in ch if ch[k]["overflowed_chains"]), None)
        full = ch.get("K", {})
        any_over |= bool(full.get("overflowed_chains"))
        safe &= not ch.get("2", {}).get("overflowed_chains", 0)
        f["numbers"][m["key"]] = {"overflow_share_unbounded": full.get("overflow_share"),
                                  "first_overflowing_chain_len": first,
                                  "max_k": full.get("max_k")}
        parts.append(f"**{m['key']}**: {full.get('gemms', 0)} GEMMs sampled (k up to "
                     f"{full.get('max_k')}); without the flush {pct(full.get('overflow_share'), 3)}"
                     f" of the output chains overflow int32; the shortest overflowing chain "
                     f"length is {first or 'none'}")
    if parts:
        f["reproduced"] = any_over and safe
        f["text"] = "; ".join(parts) + "."
    return f


def _scalers(models):
    from .scaler_rules import scaler_finding

    return scaler_finding(models)


def findings(models):
    """The claims judged on the study summaries of models.repro.aggregate.assemble."""
    return [_underflow_natural(models), _window(models), _master(models),
            _alternatives(models), _dfp(models), _scalers(models), recipe_finding(models),
            _underflow_device(models)]


def needs_device(found):
    """Plain statements of what needs the amplification device: one per study in which loss
    scaling is shown to cure underflow only under the device (at natural scale the study's
    unscaled fp16 run already matches fp32, or nothing underflows)."""
    dev = next((f for f in found if f["claim"] == "underflow_device"), None)
    nat = next((f for f in found if f["claim"] == "underflow_natural"), None)
    if dev is None:
        return []
    natn = nat["numbers"] if nat else {}
    out = []
    for key, d in dev["numbers"].items():
        if not d.get("shown") or natn.get(key, {}).get("shown"):
            continue
        n = natn.get(key, {})
        out.append(f"{key}: the cure of underflow by loss scaling needs the device; at natural "
                   f"scale {pct(n.get('weight_to_zero'), 2)} of the weight and "
                   f"{pct(n.get('activation_to_zero'), 2)} of the activation gradients become "
                   f"zero in fp16 and unscaled fp16 makes {pct(n.get('progress_noscale'))} of "
                   "fp32's improvement")
    return out
