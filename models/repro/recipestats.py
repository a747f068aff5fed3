"""The FP8 and FP4 recipes study: per-run recipe statistics, its report section and its finding.

Provides :func:`add_recipe_stats` (called by models.repro.aggregate.assemble: adds to every
configuration of a recipe study the share of the bf16 baseline's improvement and the
saturation / flush-to-zero counts of its GEMM operands, from the trainer's ``history["fp8"]``
rows of autograd.recipes.fp8_stats), :func:`recipe_section` (the report's table) and
:func:`recipe_finding` (the rule: delayed scaling saturates at a sudden amax jump that current
scaling absorbs).

Imports numpy and models.repro.aggregate / report only.
"""

from __future__ import annotations

import math

import numpy as np

from .aggregate import progress_ratio, summary
from .report import fmt_num, fmt_pm, table

__all__ = ["add_recipe_stats", "recipe_finding", "recipe_section"]

BASELINE = "rc_bf16"
DELAYED = ("rc_delayed_max_16", "rc_delayed_max_1024", "rc_delayed_recent_16",
           "rc_delayed_recent_1024")
CURRENT = "rc_current"


def _run_counts(rows, jumps):
    """Totals of one run's fp8_stats rows: shares of all cast elements that saturated and that
    were flushed to zero, saturated elements at the jump steps and elsewhere, and the flushed
    share of the output gradients after the first jump."""
    tot = {"numel": 0, "saturated": 0, "flushed": 0, "sat_jump": 0, "sat_other": 0,
           "g_after": 0, "g_flushed_after": 0}
    first = min(jumps) if jumps else None
    for r in rows:
        tot["numel"] += r["numel"]
        tot["saturated"] += r["saturated"]
        tot["flushed"] += r["flushed"]
        tot["sat_jump" if r["step"] in jumps else "sat_other"] += r["saturated"]
        if first is not None and r["operand"] == "grad_output" and r["step"] > first:
            tot["g_after"] += r["numel"]
            tot["g_flushed_after"] += r["flushed"]
    n = max(tot["numel"], 1)
    return {"saturated_share": tot["saturated"] / n, "flushed_share": tot["flushed"] / n,
            "saturated_at_jump": tot["sat_jump"], "saturated_elsewhere": tot["sat_other"],
            "grad_flushed_after_jump": (tot["g_flushed_after"] / tot["g_after"]
                                        if tot["g_after"] else math.nan)}


def add_recipe_stats(spec, by_key, configs):
    """Add ``"recipe"`` (summaries over seeds) to each configuration of a recipe study (one whose
    configurations include the bf16 baseline ``rc_bf16``); other studies are left alone."""
    if BASELINE not in by_key:
        return
    jumps = list(spec.get("spikes") or [])
    ref = {r["seed"]: r for r in by_key[BASELINE]}
    for item in configs:
        runs = by_key.get(item["key"], [])
        prog = [progress_ratio(r["final"], ref[r["seed"]]["final"],
                               r["history"]["eval_loss"][0]) if r["seed"] in ref else None
                for r in runs]
        per = [_run_counts(r["history"].get("fp8", []), jumps) for r in runs]
        rec = {"progress_bf16": summary(prog), "jumps": jumps,
               "has_recipe": any("fp8" in r["history"] for r in runs)}
        for name in ("saturated_share", "flushed_share", "saturated_at_jump",
                     "saturated_elsewhere", "grad_flushed_after_jump"):
            rec[name] = summary([p[name] for p in per])
        item["recipe"] = rec


def recipe_section(m):
    """The recipe study's table (empty for other studies)."""
    cfgs = [c for c in m["configs"] if "recipe" in c]
    if not cfgs:
        return []
    jumps = cfgs[0]["recipe"]["jumps"]
    rows = []
    for c in cfgs:
        r = c["recipe"]
        has = r["has_recipe"]
        rows.append([c["label"], fmt_pm(r["progress_bf16"], pct=True),
                     fmt_pm(c["stats"]["eval_loss"]),
                     fmt_pm(r["saturated_share"], pct=True, digits=5) if has else "-",
                     fmt_pm(r["flushed_share"], pct=True, digits=5) if has else "-",
                     fmt_num(r["saturated_at_jump"]["mean"]) if has else "-",
                     fmt_num(r["saturated_elsewhere"]["mean"]) if has else "-",
                     fmt_pm(r["grad_flushed_after_jump"], pct=True, digits=5) if has else "-"])
    at = ", ".join(map(str, jumps)) or "none"
    return (["### FP8 / FP4 recipes: accuracy, saturation and flush to zero", "",
             f"Share of the bf16 baseline's held-out loss improvement ((L0 - L) / (L0 - "
             f"L_bf16), same seed) and the recipe GEMM operands' counts, summed over every "
             f"cast of every step, layer and operand (mean ± sd over {len(m['seeds'])} "
             f"seeds).  Saturated: elements whose scaled value exceeded the format's largest "
             f"(clamped); flushed: non-zero elements that became 0.  The output gradients "
             f"jump by 2^10 at step {at}.", ""]
            + table(["configuration", "share of bf16's improvement", "eval loss",
                     "saturated (of cast elements)", "flushed to zero (of cast elements)",
                     "saturated at the jump (mean count)", "saturated elsewhere (mean count)",
                     "output gradients flushed after the jump"], rows) + [""])


def recipe_finding(models):
    f = {"claim": "fp8_recipes",
         "title": "Delayed scaling saturates at a sudden amax jump; current scaling absorbs it",
         "paper": ("not a claim of the paper (it predates fp8 training); Transformer Engine's "
                   "recipes: delayed scaling takes the scale from the amax history of earlier "
                   "steps, current scaling from the tensor being cast"),
         "reproduced": None, "evidence": "natural", "numbers": {},
         "text": "the recipes study was not run.",
         "rule": ("Rule (every seed of every recipe study): shown when every delayed-scaling "
                  "run saturates at least one element at the jump step(s) while the current-"
                  "scaling run saturates none there.")}
    parts, checks = [], []
    for m in models:
        c = {x["key"]: x for x in m["configs"] if "recipe" in x}
        if CURRENT not in c or not any(k in c for k in DELAYED):
            continue
        cur = c[CURRENT]["recipe"]["saturated_at_jump"]["values"]
        checks.append(all(v == 0 for v in cur))
        nums = {CURRENT: cur}
        text = [f"current scaling saturates {_vals(cur)} element(s) at the jump"]
        for k in DELAYED:
            if k in c:
                v = c[k]["recipe"]["saturated_at_jump"]["values"]
                nums[k] = v
                checks.append(all(x is not None and x > 0 for x in v))
                after = c[k]["recipe"]["grad_flushed_after_jump"]
                text.append(f"{c[k]['label']}: {_vals(v)} at the jump, "
                            f"{fmt_pm(after, pct=True, digits=5)} of the output gradients "
                            "flushed to zero after it")
        f["numbers"][m["key"]] = nums
        parts.append(f"**{m['key']}** (per seed): " + "; ".join(text))
    if parts:
        f["reproduced"] = all(checks)
        f["text"] = ". ".join(parts) + "."
    return f


def _vals(values):
    return "/".join("-" if v is None or not np.isfinite(v) else f"{int(v)}" for v in values)
