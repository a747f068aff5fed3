"""The main job: ``reproduce`` runs every study of models.repro.studies with several seeds, draws
the figures, judges the paper's claims against the numbers and writes report.md and
results.json.

The run list is explicit: :func:`models.repro.runs.plan_runs` gives every (run id, config),
every seed a run of its own; :func:`models.repro.runs.run_plan` trains them through the sweep
executor (models.sweep_exec): here, in this process, one after the other by default; with
``workers=N`` on a local Dask cluster of N worker processes; with ``scheduler=ADDRESS`` (or a
``client``) on an existing cluster.  Each run's results are stored as it finishes under
OUT/runs/<run id>/, so an interrupted reproduce run again into the same OUT skips the finished
runs and resumes the others from their last checkpoint; OUT/plan.json keeps the plan, and an OUT
planned with other configs (another profile, changed studies) is refused before anything runs.
The report is built from the stored results, whichever way they were computed.

A claim is "shown" only when the numbers say so, by the rules in models.repro.findings (stated
in the report with the numbers they were applied to, judged on means over seeds); otherwise the
report says plainly that it was not shown, and the numbers show why.

Imports numpy, tqdm and models.* (matplotlib only through models.figures, lazily).
"""

from __future__ import annotations

import logging
import os
import platform
import time

from .aggregate import assemble
from .figs import global_figures, study_figures
from .findings import findings, needs_device
from .report import write_report, write_results_json
from .runs import check_plan, plan_runs, run_plan
from .studies import mnist_dir, seeds_of, studies

__all__ = ["findings", "reproduce"]

log = logging.getLogger("models.repro")


def _environment():
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__,
            "machine": platform.machine(), "cpus": os.cpu_count()}


def _finished_before(plan, out_dir) -> int:
    """How many runs of the plan an earlier invocation finished (kept, not run again)."""
    from ..sweep_exec import load_record

    recs = (load_record(os.path.join(out_dir, "runs", rid)) for rid, _ in plan)
    return sum(1 for rec in recs if rec is not None and rec["status"] in ("ok", "diverged"))


def reproduce(out_dir, *, quick=True, only=None, progress=True, seeds=None, workers=None,
              scheduler=None, client=None, threads=1):
    """Run the studies and write report.md, results.json and the PNG figures into out_dir.
    ``seeds``: override the profile's seeds (3 quick, 5 full).  ``workers`` / ``scheduler`` /
    ``client``: where the runs train (see the module docstring; default: in this process);
    ``threads``: Numba/BLAS threads of each worker of a local cluster.
    Returns the path of report.md."""
    t0 = time.perf_counter()
    profile = "quick" if quick else "full"
    specs = studies(profile)
    if only:
        keys = [s["key"] for s in specs]
        bad = [o for o in only if o not in keys]
        if bad:
            raise ValueError(f"--only: unknown study {bad[0]!r}; accepted: {', '.join(keys)}")
        specs = [s for s in specs if s["key"] in only]
    seeds = tuple(seeds) if seeds is not None else seeds_of(profile)
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers is not None and (scheduler or client is not None):
        raise ValueError("workers sets the size of a local cluster; with a scheduler or a "
                         "client the existing cluster's workers run the reproduction")
    plan = plan_runs(specs, seeds)
    check_plan(plan, out_dir)
    reused = _finished_before(plan, out_dir)
    results = run_plan(plan, specs, out_dir, client=client, scheduler=scheduler,
                       workers=workers, threads=threads, progress=progress)
    t_runs = time.perf_counter() - t0
    models = assemble(specs, results, seeds)
    for m in models:
        study_figures(m, out_dir)
    extra_figures = global_figures(models, out_dir)
    found = findings(models)
    cmd = f"python -m models reproduce{' --quick' if quick else ''} --out {out_dir}"
    if only:
        cmd += f" --only {','.join(only)}"
    mn = mnist_dir()
    res = {"title": "Mixed Precision Training, reproduced at small scale",
           "profile": profile, "command": cmd, "seeds": list(seeds), "runs": len(plan),
           "wall_s": time.perf_counter() - t0, "train_s": t_runs, "reused_runs": reused,
           "environment": _environment(), "findings": found,
           "needs_device": needs_device(found), "figures": extra_figures, "models": models,
           "mnist": {"dir": mn, "used": any(m["key"].startswith("mnist") for m in models),
                     "looked_in": os.environ.get("MPEMU_MNIST_DIR") or "data/mnist"},
           "settings_notes": [
               (f"Every configuration runs with seeds {', '.join(map(str, seeds))} (initial "
                "weights, batch order and, for the digits, the train/test split); tables show "
                "the mean ± the sample standard deviation over the seeds, and the findings' "
                "rules are applied to the means."),
               ("fp16 runs use host-BLAS fp32 accumulation unless a Tensor Core model is named; "
                "losses are fp32 where the policy says so (O2, bf16)."),
               ("Final train loss: mean over the last 10% of steps; eval: the held-out split "
                "(25% of the data; the language models: the first batches of their held-out "
                "text, see each study's settings); \"share of fp32's "
                "improvement\": (L0 - L) / (L0 - L_fp32) on the held-out loss, against the fp32 "
                "run of the same seed.")]}
    write_results_json(out_dir, res)
    return write_report(out_dir, res)
