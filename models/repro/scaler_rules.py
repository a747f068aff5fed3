"""The loss-scaler study's finding: each production rule's reaction to injected overflows.

Provides :func:`scaler_finding`.  Its checks read the per-step loss scale of every seed (the
rules are deterministic: a check holds only when it holds in every seed).

Imports numpy and models.repro.aggregate only.
"""

from __future__ import annotations

import math

import numpy as np

from .aggregate import summary

__all__ = ["fmt_scale", "scaler_finding"]


def fmt_scale(v):
    if v is None or not math.isfinite(v) or v <= 0:
        return str(v)
    e = math.log2(v)
    return f"2^{int(e)}" if e == int(e) else f"{v:g}"


def _at(hist, step):
    s = hist["scale"]
    return s[step] if step < len(s) else math.nan


def scaler_finding(models):
    f = {"claim": "scalers", "title": "Loss-scaler rules under injected overflows",
         "paper": ("not a claim of the paper (it used constant scales); the rules of PyTorch, "
                   "DeepSpeed and OpenSeq2Seq as specified in docs/loss-scaling.md"),
         "reproduced": None, "evidence": "natural", "text": "the scaler study was not run.",
         "numbers": {},
         "rule": ("Rule (every seed): shown when DeepSpeed keeps its scale through the first "
                  "overflow and backs off at the second while GradScaler backs off at the "
                  "first, and the faithful LogMax stays at its minimum (1) for the rest of the "
                  "run after one overflow (a non-finite scale also counts: when every gradient "
                  "underflows, amax = 0 gives log2 = -inf, which poisons the moments as in the "
                  "original, and every later step is skipped).")}
    m = next((m for m in models if m["key"] == "scalers"), None)
    if m is None or not m["configs"]:
        return f
    s0 = m["spikes"][0]
    ref = next((x for x in models if x["key"] == "mlp"), None)
    ref_runs = {}
    if ref is not None:
        ref_runs = {c["key"]: c for c in ref["configs"]}
    parts, checks = [], []
    c = {x["key"]: x for x in m["configs"]}
    for key, cfg in c.items():
        h0 = cfg["seeds"][0]["history"]
        sc = np.asarray(h0["scale"], dtype=np.float64)
        after = sc[s0:] if sc.size > s0 else sc[-1:]
        fin = after[np.isfinite(after)]
        lowest = float(fin.min()) if fin.size else math.nan
        st = cfg["stats"]
        prog = None
        if "fp32" in ref_runs:
            from .aggregate import progress_ratio

            ref_by_seed = {r["seed"]: r for r in ref_runs["fp32"]["seeds"]}
            prog = summary([progress_ratio(r["final"], ref_by_seed[r["seed"]]["final"],
                                           r["history"]["eval_loss"][0])
                            for r in cfg["seeds"] if r["seed"] in ref_by_seed])
        natural = [i for i, sk in enumerate(h0["skipped"]) if sk and i not in m["spikes"]]
        parts.append(f"{cfg['label']}: {st['skipped_steps']['mean']:.1f} skipped on average; "
                     f"seed 0: scale {fmt_scale(_at(h0, s0))} before the first injected "
                     f"overflow (step {s0}), {fmt_scale(_at(h0, s0 + 1))} after it, "
                     f"{fmt_scale(_at(h0, s0 + 2))} after the second, lowest "
                     f"{fmt_scale(lowest)}, final {fmt_scale(sc[-1])}"
                     + (f", natural (not injected) overflows at steps "
                        f"{', '.join(map(str, natural[:8]))}" if natural else "")
                     + (f"; {100 * prog['mean']:.1f}% ± {100 * prog['std']:.1f} of fp32's "
                        "improvement (MLP study's fp32)" if prog else ""))
        f["numbers"][key] = {"skipped": st["skipped_steps"]["mean"],
                             "natural_overflow_steps_seed0": natural,
                             "min_scale_after_overflow_seed0": lowest,
                             "final_scale_seed0": float(sc[-1]),
                             "progress": None if prog is None else prog["mean"]}
    if "spk_deepspeed" in c and "spk_dynamic" in c:
        for ds, dy in zip(c["spk_deepspeed"]["seeds"], c["spk_dynamic"]["seeds"]):
            ds, dy = ds["history"], dy["history"]
            checks.append(_at(ds, s0 + 1) == _at(ds, s0) and _at(ds, s0 + 2) < _at(ds, s0)
                          and _at(dy, s0 + 1) < _at(dy, s0))
    if "spk_lognormal" in c:
        for r in c["spk_lognormal"]["seeds"]:
            ln = np.asarray(r["history"]["scale"][s0 + 1:], dtype=float)
            ln = ln[np.isfinite(ln)]
            checks.append(ln.size > 0 and float(ln.max()) <= 1.0)
    if checks:
        f["reproduced"] = all(checks)
    f["text"] = "; ".join(parts) + "."
    return f
