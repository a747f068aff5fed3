"""Writing the reproduction's outputs: ``report.md`` and ``results.json``.

Provides :func:`write_results_json` (every number, JSON-safe: non-finite floats become the strings
"nan", "inf", "-inf"), :func:`write_report` (Markdown: findings first, then one table per model
with the paper's numbers beside ours, the figures, the histogram table and the settings used) and
:func:`fmt_num`.  The structure of ``results`` is produced by models.repro.experiments.

Imports the standard library, models.jsonio and models.repro.paper only (figures are made
elsewhere).
"""

from __future__ import annotations

import json
import math
import os

from ..jsonio import json_safe
from .paper import CITATION, PAPER_TABLES

__all__ = ["fmt_num", "json_safe", "write_report", "write_results_json"]


def write_results_json(out_dir, results):
    path = os.path.join(out_dir, "results.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(json_safe(results), fh, indent=1, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def fmt_num(v, digits=4, pct=False):
    """Table formatting: None -> "-", non-finite -> "nan"/"inf", percentages with a % sign."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    v = float(v)
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if pct:
        return f"{100 * v:.{max(digits - 2, 1)}f}%"
    if v > 0 and math.log2(v) == int(math.log2(v)) and abs(math.log2(v)) >= 8:
        return f"2^{int(math.log2(v))}"  # loss scales are powers of two
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.3g}"
    return f"{v:.{digits}g}"


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def _model_section(m):
    lines = [f"## {m['title']}", "", m["description"], ""]
    if m.get("settings"):
        lines += ["Settings (chosen to expose the paper's effects):", ""]
        lines += [f"- {s}" for s in m["settings"]] + [""]
    metric = m["metric"]
    header = ["configuration", "final train loss", "eval loss", f"eval {metric}",
              "skipped steps", "final scale", "updates lost", "grads zero", "time (s)",
              "paper (same recipe)"]
    rows = []
    for r in m["runs"]:
        f = r["final"]
        mark = " (diverged)" if f.get("diverged") else ""
        rows.append([f"{r['label']}{mark}", fmt_num(f["train_loss"]), fmt_num(f["eval_loss"]),
                     fmt_num(f["eval_metric"], pct=metric == "accuracy"),
                     f["skipped_steps"], fmt_num(f["final_scale"]),
                     fmt_num(f.get("lost_update_fraction"), pct=True),
                     fmt_num(f.get("grad_zero_fraction"), pct=True), f"{f['wall_s']:.1f}",
                     r.get("paper", "")])
    lines += _table(header, rows) + [""]
    lines += [("\"updates lost\": share of weight elements with a non-zero gradient whose "
               "stored weight (the fp32 master where there is one) did not change in an applied "
               "step; \"grads zero\": share of weight-gradient elements that were exactly zero "
               "after the backward pass (before unscaling), averaged over all steps."), ""]
    for caption, key in (("Loss curves", "loss"), ("Loss-scale trajectories", "scale"),
                         ("Activation-gradient exponents (fp32 run)", "hist_act"),
                         ("Weight-gradient exponents (fp32 run)", "hist_weight")):
        if m.get("figures", {}).get(key):
            lines += [f"![{caption}: {m['title']}]({m['figures'][key]})", ""]
    return lines


def _hist_section(models):
    rows = []
    for m in models:
        for kind, h in sorted(m.get("histograms", {}).items()):
            f0, fs = h["fractions_unscaled"], h["fractions_scaled"]
            rows.append([m["title"], kind.replace("_", " "), f"{h['total']:,}",
                         fmt_num(f0["zero"], pct=True), fmt_num(f0["underflow_fp16"], pct=True),
                         fmt_num(f0["underflow_of_nonzero"], pct=True),
                         f"2^{h['log2_scale']}", fmt_num(fs["underflow_fp16"], pct=True),
                         fmt_num(fs["overflow_fp16"], pct=True),
                         (">= " if h["best_log2_scale"] >= 32 else "")
                         + f"2^{h['best_log2_scale']}"])
    if not rows:
        return []
    header = ["model", "values", "count", "exactly zero", "-> 0 in fp16 (of all)",
              "-> 0 in fp16 (of non-zero)", "scale", "-> 0 after scaling", "overflow after",
              "largest safe scale"]
    intro = ("Gradients of the fp32 run, sampled during training. \"-> 0 in fp16\": the value "
             "is non-zero in fp32 but rounds to zero when cast to fp16 (|v| <= 2^-25); after "
             "scaling: the same for v * scale. Paper: about 5% of weight-gradient values below "
             "2^-24 (Fig. 2b [T]); SSD activation gradients 67% zero, 31% more become zero in "
             "fp16, a scale of 8 suffices and 32K recovers all but 0.1% (Fig. 3 [S][G]).")
    return (["## Gradient exponent histograms (our Figures 2b and 3)", "", intro, ""]
            + _table(header, rows) + [""])


def write_report(out_dir, results):
    """Write ``report.md`` into ``out_dir``; returns its path."""
    r = results
    env = r["environment"]
    head = (f"Profile **{r['profile']}**, produced by `{r['command']}` in {r['wall_s']:.0f} s "
            f"on {env['cpus']} CPU core(s) (Python {env['python']}, numpy {env['numpy']}). "
            "Every number below is also in `results.json`.")
    papers = (f"Papers: {CITATION}. Tags: [T] paper text, [S] secondary summaries, "
              "[G] NVIDIA's mixed precision guide.")
    lines = [f"# {r['title']}", "", head, "", papers, "", "## Findings", ""]
    for f in r["findings"]:
        verdict = {True: "**shown**", False: "**not shown**", None: "**not tested**"}[
            f["reproduced"]]
        lines += [f"### {f['title']}: {verdict}", "", f"Paper: {f['paper']}", "",
                  f"Ours: {f['text']}", ""]
    if r.get("settings_notes"):
        lines += ["## Settings common to all runs", ""]
        lines += [f"- {s}" for s in r["settings_notes"]] + [""]
    for m in r["models"]:
        lines += _model_section(m)
    lines += _hist_section(r["models"])
    lines += ["## The paper's own tables (for reference)", ""]
    for caption, rows in PAPER_TABLES.items():
        lines += [f"**{caption}**", ""] + _table(["network", "fp32", "mixed precision"], rows)
        lines += [""]
    repro = (f"`{r['command']}` (deterministic: the same seed gives the same bits; every "
             "configuration is in results.json under `models[].runs[].config`, runnable with "
             "`mpemu train --config FILE`).")
    lines += ["## Reproducing", "", repro, ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    return path
