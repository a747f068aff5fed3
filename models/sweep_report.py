"""A sweep's results: ``results.csv`` (one row per run) and ``summary.md`` with its figures.

Provides :func:`csv_text` / :data:`COLUMNS` and :func:`write_summary`.

results.csv: the run id, every grid key (its full dotted name), then the run's numbers and
status.  Floats are written with ``repr`` (the shortest text that reads back to the same double,
"nan"/"inf" included), so nothing is lost; an empty cell is a number the run does not have (a
failed or pending run, or lost updates where no step was applied).

summary.md: the grid's settings (every grid key except ``seed``) with each number as the mean and
sample standard deviation (n - 1 in the denominator) over the seeds of the setting, taken over
the runs where the number is finite; the figures metric.png (final metric per setting, error
bars over seeds) and loss.png (training loss and held-out metric: mean and a band of one
standard deviation); and the runs that diverged or failed, with their errors.

Imports the standard library, numpy and models.* (matplotlib only through models.figures).
"""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np

from . import figures
from .sweep_exec import atomic_path, load_result, write_atomic
from .sweep_spec import short_names

__all__ = ["COLUMNS", "csv_text", "write_summary"]

#: column -> key of the trainer's final numbers
COLUMNS = {"train_loss": "train_loss", "eval_loss": "eval_loss", "eval_metric": "eval_metric",
           "skipped_steps": "skipped_steps", "final_scale": "final_scale",
           "lost_updates": "lost_update_fraction", "zero_gradients": "grad_zero_fraction",
           "steps": "steps", "wall_s": "wall_s"}


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (int, str)):
        return str(v)
    return json.dumps(v, separators=(",", ":"))


def csv_text(keys, runs, records):
    """results.csv for runs (objects with .id and .values) and their records (dicts by id;
    a run without a record is "pending")."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run_id", *keys, "metric", *COLUMNS, "status", "error"])
    for run in runs:
        rec = records.get(run.id) or {"status": "pending", "final": None, "metric": None,
                                      "error": None}
        final = rec["final"] or {}
        w.writerow([run.id, *(_cell(run.values[k]) for k in keys), _cell(rec["metric"]),
                    *(_cell(final.get(src)) for src in COLUMNS.values()),
                    rec["status"], _cell(rec["error"])])
    return buf.getvalue()


def _stat(values, pct=False, digits=4):
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return "n/a"
    scale, unit = (100.0, "%") if pct else (1.0, "")
    mean = float(v.mean()) * scale
    text = f"{mean:.{digits}g}{unit}"
    if v.size > 1:
        text += f" ± {float(v.std(ddof=1)) * scale:.{digits - 2 if pct else digits}g}{unit}"
    if v.size < len(values):
        text += f" (n={v.size})"
    return text


def _groups(spec):
    """(keys, [(label, [run, ...])]): one group per setting (every grid key but seed)."""
    keys = [k for k in spec.keys if k != "seed"]
    names = short_names(keys)
    groups = {}
    for run in spec.runs:
        label = ", ".join(f"{n}={_cell(run.values[k])}" for n, k in zip(names, keys))
        groups.setdefault(label or "all runs", []).append(run)
    return keys, list(groups.items())


def write_summary(spec, records, out_dir, *, command=None):
    """Write summary.md, metric.png and loss.png into out_dir; returns the summary's path."""
    keys, groups = _groups(spec)
    done = [records[r.id] for r in spec.runs if r.id in records]
    metrics = {r["metric"] for r in done if r["metric"]}
    metric = metrics.pop() if len(metrics) == 1 else "metric"
    counts = {s: sum(r["status"] == s for r in done) for s in ("ok", "diverged", "failed")}
    counts["not run"] = len(spec.runs) - len(done)
    lines = [f"# Sweep `{spec.name}`", ""]
    if command:
        lines += [f"`{command}`", ""]
    lines += [f"{len(spec.runs)} runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()
                                                      if n or s == "ok") + ".", "",
              "Each number is the mean ± sample standard deviation (n - 1) over the seeds of "
              "the setting, taken over the runs where it is finite (n=k where fewer than all). "
              "Final train loss: mean over the last 10% of steps; eval: the held-out split.", ""]
    head = short_names(keys) + [
        "runs", f"eval {metric}", "eval loss", "train loss", "skipped steps", "final scale",
        "lost updates", "zero gradients"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    fig_metric, fig_loss = [], []
    for label, runs in groups:
        recs = [records[r.id] for r in runs if r.id in records]
        fin = [r["final"] for r in recs if r["final"]]
        status = {s: sum(r["status"] == s for r in recs) for s in ("ok", "diverged", "failed")}
        status["not run"] = len(runs) - len(recs)
        cells = [_cell(runs[0].values[k]) for k in keys]
        cells.append(", ".join(f"{n} {s}" for s, n in status.items() if n) or "0")
        cells += [_stat([f["eval_metric"] for f in fin]), _stat([f["eval_loss"] for f in fin]),
                  _stat([f["train_loss"] for f in fin]),
                  _stat([f["skipped_steps"] for f in fin], digits=3),
                  _stat([f["final_scale"] for f in fin], digits=3),
                  _stat([f["lost_update_fraction"] for f in fin], pct=True, digits=3),
                  _stat([f["grad_zero_fraction"] for f in fin], pct=True, digits=3)]
        lines.append("| " + " | ".join(cells) + " |")
        fig_metric.append((label, [f["eval_metric"] for f in fin]))
        results = [load_result(os.path.join(out_dir, "runs", r.id)) for r in runs
                   if r.id in records and records[r.id]["final"]]
        fig_loss.append((label, [r["history"] for r in results if r]))
    lines.append("")
    if any(v for _, v in fig_metric):
        title = f"sweep {spec.name}"
        with atomic_path(os.path.join(out_dir, "metric.png")) as tmp:
            figures.plot_metric_by_setting(fig_metric, tmp, title=title, metric_name=metric)
        with atomic_path(os.path.join(out_dir, "loss.png")) as tmp:
            figures.plot_loss_bands(fig_loss, tmp, title=title, metric_name=metric)
        lines += [f"![final held-out {metric} per setting](metric.png)", "",
                  "![training loss and held-out metric, mean and band over seeds](loss.png)",
                  ""]
    bad = [records[r.id] for r in spec.runs
           if r.id in records and records[r.id]["status"] != "ok"]
    if bad:
        lines += ["## Runs that did not end normally", ""]
        lines += [f"- `{r['id']}`: {r['status']}: {r['error']}" for r in bad]
        lines.append("")
    return write_atomic(os.path.join(out_dir, "summary.md"), "\n".join(lines))
