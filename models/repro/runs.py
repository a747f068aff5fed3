"""The list of runs and how one run is executed.

Provides :func:`plan_runs` (every (run id, config) of a list of studies and seeds: the explicit
shape an executor takes), :func:`parse_run_id`, :class:`Runner` (a picklable callable that runs
one (run id, config) and returns its slimmed result) and :func:`execute` (runs a plan in order,
in this process; a parallel executor can take the same plan and Runner instead).

A run's result is the trainer's (final numbers, history) plus what models.repro measures on top:
per-layer gradient statistics and the |update| / |w| histogram (models.repro.observe), the int32
chain statistics of a dfp16 run's GEMMs (models.repro.dfpstats) and, where the study asks for
it, the tokens-per-batch curve of the trained fp32 model (models.repro.natural).

Imports numpy, tqdm, models.trainer and models.repro.*.
"""

from __future__ import annotations

import logging

import numpy as np

from ..trainer import Trainer
from .dfpstats import chain_stats
from .natural import tokens_curve
from .observe import GradObserver, capture_dfp_gemms
from .studies import variant_config

__all__ = ["Runner", "execute", "parse_run_id", "plan_runs"]

log = logging.getLogger("models.repro")

#: DFP-16 GEMMs kept per dfp16 run for the chain statistics (a sample: replaying is cheap, but
#: not free)
DFP_SAMPLE = 24


def plan_runs(specs, seeds):
    """[(run_id, config)] for every study of ``specs``, every configuration and every seed, in
    the order the report reads them; run_id is "study/configuration/s<seed>"."""
    return [(f"{s['key']}/{v}/s{seed}", variant_config(s, v, seed)[1])
            for s in specs for v in s["variants"] for seed in seeds]


def parse_run_id(run_id):
    """(study key, configuration key, seed) of a run id made by :func:`plan_runs`."""
    parts = run_id.split("/")
    if len(parts) != 3 or not parts[2].startswith("s") or not parts[2][1:].isdigit():
        raise ValueError(f"run id must look like 'study/configuration/s<seed>', got {run_id!r}")
    return parts[0], parts[1], int(parts[2][1:])


class Runner:
    """``Runner(specs)(run_id, config)`` trains one configuration and returns its result."""

    def __init__(self, specs, *, progress=False, position=1):
        self.specs = {s["key"]: s for s in specs}
        self.progress, self.position = progress, position

    def __call__(self, run_id, config):
        study, variant, seed = parse_run_id(run_id)
        spec = self.specs[study]
        obs = GradObserver()
        tr = Trainer(config, progress=self.progress, label=run_id, position=self.position,
                     observer=obs)
        dfp = tr.cfg["precision"]["policy"] == "dfp16"
        # Runs that overflow on purpose (static 2^24) multiply Inf by zero in host BLAS: the
        # step is skipped as the recipe says; numpy's "invalid value" warnings add nothing.
        with np.errstate(invalid="ignore", over="ignore"):
            if dfp:
                every = spec.get("hist_every") or max(1, tr.cfg["budget"]["steps"] // 4)
                with capture_dfp_gemms(tr, every=every, limit=DFP_SAMPLE) as pairs:
                    r = tr.fit()
                r["dfp_chains"] = chain_stats(pairs)
            else:
                r = tr.fit()
        r["observed"] = obs.to_dict()
        curve = spec.get("curve") or {}
        if curve.get("kind") == "tokens" and variant == curve["variant"] \
                and r["final"]["failure"] is None:
            r["tokens_curve"] = tokens_curve(tr, curve["tokens"], seed=seed)
        r.pop("histograms", None)     # superseded by r["observed"] (per layer, exact bands)
        r.update(run_id=run_id, study=study, key=variant, seed=seed)
        return r


def execute(plan, runner, *, progress=True, write=None):
    """Run every (run_id, config) of ``plan`` with ``runner``, in order; returns {run_id:
    result}.  ``write`` (optional) receives a one-line summary of each finished run."""
    from tqdm.auto import tqdm

    results = {}
    bar = tqdm(total=len(plan), desc="reproduce", position=0, disable=not progress,
               dynamic_ncols=True, unit="run")
    try:
        for run_id, config in plan:
            bar.set_postfix_str(run_id)
            r = runner(run_id, config)
            results[run_id] = r
            f = r["final"]
            line = (f"{run_id}: eval loss {f['eval_loss']:.4f}, {r['metric']} "
                    f"{f['eval_metric']:.4f}, {f['skipped_steps']} skipped, {f['wall_s']:.1f} s")
            if write is not None:
                write(line)
            else:
                log.info(line)
            bar.update(1)
    finally:
        bar.close()
    return results
