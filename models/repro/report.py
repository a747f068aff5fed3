"""Writing the reproduction's outputs: ``report.md`` and ``results.json``.

Provides :func:`write_results_json` (every number, JSON-safe: non-finite floats become the strings
"nan", "inf", "-inf"), :func:`write_report` (Markdown: the natural-scale numbers first, the
findings with the kind of evidence behind each, then one section per study; see
models.repro.report_study) and the table helpers :func:`fmt_num`, :func:`fmt_pm`, :func:`table`.
The structure of ``results`` is produced by models.repro.experiments.

Imports the standard library, models.jsonio and models.repro.paper only (figures are made
elsewhere).
"""

from __future__ import annotations

import json
import math
import os

from ..atomic import write_atomic
from ..jsonio import json_safe
from .gradstats import LOG2_SCALES
from .paper import CITATION, PAPER_NATURAL, PAPER_TABLES

#: The largest loss scale (log2) of the window measurement: an edge not reached up to it is None.
WINDOW_TOP = int(LOG2_SCALES[-1])

__all__ = ["fmt_num", "fmt_pm", "json_safe", "table", "write_report", "write_results_json"]


def write_results_json(out_dir, results):
    return write_atomic(os.path.join(out_dir, "results.json"),
                        json.dumps(json_safe(results), indent=1, allow_nan=False) + "\n")


def fmt_edge(s, digits=4):
    """A loss-scale window edge over the seeds (a :func:`aggregate.summary` of log2 scales, None
    where a seed's gradients never reach it up to 2^WINDOW_TOP): "2^mean", saying in how many
    seeds it was not reached (a mean over the other seeds would hide them)."""
    n, nf = len(s["values"]), s["n_finite"]
    if nf == 0:
        return f"not reached by 2^{WINDOW_TOP}"
    text = f"2^{fmt_num(s['mean'], digits)}"
    if nf < n:
        text += f" ({nf} of {n} seeds; not reached by 2^{WINDOW_TOP} in the others)"
    return text


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
        d = max(digits - 2, 1)
        if 0 < abs(100 * v) < 10.0 ** -d:   # too small for the fixed decimals: two digits
            return f"{100 * v:.2g}%"
        return f"{100 * v:.{d}f}%"
    if v > 0 and math.log2(v) == int(math.log2(v)) and abs(math.log2(v)) >= 8:
        return f"2^{int(math.log2(v))}"  # loss scales are powers of two
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.3g}"
    return f"{v:.{digits}g}"


def fmt_pm(s, pct=False, digits=4):
    """"mean ± sd" of a models.repro.aggregate.summary dict; notes seeds that were not finite."""
    if s is None:
        return "-"
    if not math.isfinite(s["mean"]):
        return "nan" if s["n"] else "-"
    if pct:
        d = max(digits - 2, 1)
        m, sd = 100 * s["mean"], 100 * s["std"]
        if 0 < abs(m) < 10.0 ** -d:     # too small for the fixed decimals: two digits
            text = f"{m:.2g}% ± {sd:.2g}"
        else:
            text = f"{m:.{d}f}% ± {sd:.{d}f}"
    else:
        text = f"{fmt_num(s['mean'], digits)} ± {fmt_num(s['std'], 2)}"
    if s["n_finite"] < s["n"]:
        text += f" ({s['n'] - s['n_finite']} of {s['n']} seeds non-finite)"
    return text


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def _paper_rows():
    """The paper's natural-scale numbers in the columns of the glance table."""
    w, a = PAPER_NATURAL["weight_grad"], PAPER_NATURAL["activation_grad"]
    return [["**paper**, Fig. 2b [T] (Mandarin speech model)", "weight", "-",
             f"about {100 * w['below'][0]:.0f}%", "-", "-", "-", w["below"][1]],
            ["**paper**, Fig. 3 [S][G] (Multibox SSD)", "activation",
             f"{100 * a['zero'][0]:.1f}%", "-", f"{100 * a['to_zero_of_all'][0]:.0f}% (see "
             "note)", "-", "8 is enough; 32K recovers all but 0.1%", a["to_zero_of_all"][1]]]


def _glance(models):
    """One row per study and gradient kind: the fp32 run's natural-scale shares, below the
    paper's own numbers."""
    rows = _paper_rows()
    for m in models:
        kinds = m.get("natural", {}).get("kinds", {})
        for kind, label in (("weight_grad", "weight"), ("activation_grad", "activation")):
            k = kinds.get(kind)
            if not k:
                continue
            rows.append([m["title"], label, fmt_pm(k["zero"], pct=True),
                         fmt_pm(k["below"], pct=True, digits=5),
                         fmt_pm(k["to_zero"], pct=True, digits=5),
                         fmt_pm(k["subnormal"], pct=True),
                         f"{fmt_edge(k['window_low'], 3)} .. {fmt_edge(k['window_high'], 3)}",
                         ""])
    if len(rows) == 2:
        return []
    head = ["study", "gradients", "exactly zero (of all)", "below 2^-24 (of non-zero)",
            "become 0 in fp16 (of non-zero)", "become fp16 subnormal (of non-zero)",
            "loss-scale window (99.9% survive .. no overflow)", "source"]
    intro = ("The fp32 run of every study, without any multiplier: gradients as training "
             "produced them, sampled during training, all layers, mean ± standard deviation over "
             "the seeds. \"below 2^-24\" is the paper's Fig. 2b axis (exponent below -24); "
             "\"become 0\" counts the values an fp16 round-to-nearest-even cast sends to zero "
             "(|v| <= 2^-25); the window runs from the smallest loss scale at which 99.9% of the "
             "non-zero values survive the cast to the largest scale with no overflow. The "
             "paper's rows come first; its 31% is quoted from NVIDIA's guide, which does not "
             "say of which values it is a share.")
    return (["## Natural scale at a glance", "", intro, ""] + table(head, rows) + [""])


def _findings(r):
    lines = ["## Findings", ""]
    ev = {"natural": "natural-scale evidence", "device": "amplification device only",
          "natural+device": "natural scale and device", "none": "no evidence"}
    for f in r["findings"]:
        verdict = {True: "**shown**", False: "**not shown**", None: "**not tested**"}[
            f["reproduced"]]
        lines += [f"### {f['title']}: {verdict} ({ev[f['evidence']]})", "",
                  f"Paper: {f['paper']}", "", f"Ours: {f['text']}", "", f"{f['rule']}", ""]
    need = r.get("needs_device") or []
    lines += ["## Which findings need the amplification device", ""]
    if need:
        lines += [f"- {t}." for t in need]
    else:
        lines += ["No study needs the device to show the cure of underflow."]
    dev = next((f for f in r["findings"] if f["claim"] == "underflow_device"), None)
    nat = next((f for f in r["findings"] if f["claim"] == "underflow_natural"), None)
    if dev and nat:
        where_nat = [k for k, v in nat["numbers"].items() if v.get("shown")]
        where_dev = [k for k, v in dev["numbers"].items() if v.get("shown")]
        only_dev = [k for k in where_dev if k not in where_nat]
        lines += ["", f"Underflow that hurts training without loss scaling is shown at natural "
                      f"scale in: {', '.join(where_nat) or 'no study'}; it appears only with the "
                      f"device (loss x2^-k) in: {', '.join(only_dev) or 'no study'}.  Every "
                      "other finding (master weights, the loss-scale window, bf16 / DFP-16 / "
                      "Tensor Cores, the scaler rules, DFP-16 chains) uses natural-scale runs "
                      "only."]
    return lines + [""]


def write_report(out_dir, results):
    """Write ``report.md`` into ``out_dir``; returns its path."""
    from .report_study import dfp_section, mnist_section, study_section

    r = results
    env = r["environment"]
    reused = r.get("reused_runs", 0)
    took = f"in {r['wall_s']:.0f} s" if not reused else (
        f"in {r['wall_s']:.0f} s for the last invocation, which reused {reused} runs finished "
        "by an earlier one (the time of the whole reproduction is the sum)")
    head = (f"Profile **{r['profile']}**, produced by `{r['command']}` {took} "
            f"({r['runs']} training runs: every configuration with seeds "
            f"{', '.join(map(str, r['seeds']))}) on {env['cpus']} CPU core(s) (Python "
            f"{env['python']}, numpy {env['numpy']}). Every number below is also in "
            "`results.json`.")
    papers = (f"Papers: {CITATION}. Tags: [T] paper text, [S] secondary summaries, "
              "[G] NVIDIA's mixed precision guide.")
    lines = [f"# {r['title']}", "", head, "", papers, ""]
    lines += _glance(r["models"])
    lines += _findings(r)
    if r.get("settings_notes"):
        lines += ["## Settings common to all runs", ""]
        lines += [f"- {s}" for s in r["settings_notes"]] + [""]
    for m in r["models"]:
        lines += study_section(m, r.get("figures", {}))
    lines += dfp_section(r)
    lines += mnist_section(r)
    lines += ["## The paper's own tables (for reference)", ""]
    for caption, rows in PAPER_TABLES.items():
        lines += [f"**{caption}**", ""] + table(["network", "fp32", "mixed precision"], rows)
        lines += [""]
    repro = (f"`{r['command']}` (deterministic: the same seed gives the same bits; every "
             "configuration is in results.json under `models[].configs[].config` (seed 0; the "
             "other seeds differ only in `seed`), runnable with `mpemu train --config FILE`).")
    lines += ["## Reproducing", "", repro, ""]
    return write_atomic(os.path.join(out_dir, "report.md"), "\n".join(lines))
