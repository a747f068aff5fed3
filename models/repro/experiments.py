"""The main job: ``reproduce`` runs every study of models.repro.studies with several seeds, draws
the figures, judges the paper's claims against the numbers and writes report.md and
results.json.

The run list is explicit: :func:`models.repro.runs.plan_runs` gives every (run id, config),
executed here in order by :func:`models.repro.runs.execute`; an experiment executor (a Dask
sweep) can take the same list and the same :class:`models.repro.runs.Runner`.

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
from .runs import Runner, execute, plan_runs
from .studies import mnist_dir, seeds_of, studies

__all__ = ["findings", "reproduce"]

log = logging.getLogger("models.repro")


def _environment():
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__,
            "machine": platform.machine(), "cpus": os.cpu_count()}


def reproduce(out_dir, *, quick=True, only=None, progress=True, seeds=None):
    """Run the studies and write report.md, results.json and the PNG figures into out_dir.
    ``seeds``: override the profile's seeds (3 quick, 5 full).  Returns the path of
    report.md."""
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
    os.makedirs(out_dir, exist_ok=True)
    plan = plan_runs(specs, seeds)
    write = None
    if progress:
        from tqdm.auto import tqdm

        write = tqdm.write  # above the bars, not through them
    results = execute(plan, Runner(specs, progress=progress), progress=progress, write=write)
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
           "wall_s": time.perf_counter() - t0, "train_s": t_runs,
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
