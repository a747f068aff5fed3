"""The list of runs, how one run is executed, and where its results are kept.

Provides :func:`plan_runs` (every (run id, config) of a list of studies and seeds: the explicit
shape the executor takes), :func:`parse_run_id`, :class:`Runner` (a picklable task of
models.sweep_exec: trains one (run id, config) into its run directory with the repro observers,
resuming from its checkpoint, and returns the trainer's result with the repro measurements as
its "extra" part), :func:`check_plan` (OUT/plan.json: refuse an output directory whose runs
were planned with other configs), :func:`run_plan` (runs a plan through
:func:`models.sweep_exec.execute`: here, in this process, by default; on a local Dask cluster
with ``workers``; on an existing cluster with ``scheduler`` or ``client``) and :func:`load_run`
(one run's result, read back from OUT/runs/<run id>/).

A run's result is the trainer's (final numbers, history) plus what models.repro measures on top:
per-layer gradient statistics and the |update| / |w| histogram (models.repro.observe), the int32
chain statistics of a dfp16 run's GEMMs (models.repro.dfpstats) and, where the study asks for
it, the tokens-per-batch curve of the trained fp32 model (models.repro.natural).  The executor
stores the trainer's part as RUN/history.json and the measurements as RUN/extra.json, both
before RUN/result.json (which marks the run finished); the report is always built from these
stored files, so a reproduction run here, on any number of workers or resumed after an
interruption gives the same report.

Resume: the observers' state (the statistics so far and the DFP-16 GEMM operands kept so far)
is saved in every checkpoint (models.trainer saves an observer's state_dict), so a run resumed
from its checkpoint ends with the statistics of an uninterrupted run.  :func:`plan_runs` sets
``checkpoint.every`` so that each run saves about :data:`CHECKPOINTS_PER_RUN` checkpoints; that
setting changes no number of the run.

Imports numpy, softfloat.dfp (lazily), models.config, models.trainer, models.sweep_exec (and so
dask.distributed) and models.repro.*.
"""

from __future__ import annotations

import json
import logging
import os

import numpy as np

from ..config import dumps, resolve_config
from ..sweep_exec import (config_diff, execute, has_checkpoint, load_extra, load_result,
                          watch_stop_file, write_atomic)
from ..trainer import Trainer
from .dfpstats import chain_stats
from .gradstats import LayerStats, UpdateRatioStats
from .natural import tokens_curve
from .observe import GradObserver, capture_dfp_gemms
from .studies import variant_config

__all__ = ["CHECKPOINTS_PER_RUN", "PLAN_FILE", "RunObserver", "Runner", "RunsFailed",
           "check_plan", "load_run", "parse_run_id", "plan_runs", "run_plan"]

log = logging.getLogger("models.repro")

#: DFP-16 GEMMs kept per dfp16 run for the chain statistics (a sample: replaying is cheap, but
#: not free)
DFP_SAMPLE = 24
#: checkpoints a run saves (plus the one at its end): what an interruption can lose is a
#: quarter of one run
CHECKPOINTS_PER_RUN = 4
#: the stored plan of an output directory: {"runs": {run id: resolved config}}
PLAN_FILE = "plan.json"


def plan_runs(specs, seeds):
    """[(run_id, config)] for every study of ``specs``, every configuration and every seed, in
    the order the report reads them; run_id is "study/configuration/s<seed>".  Each config is
    the study's (models.repro.studies.variant_config) with checkpoint.every set to
    ceil(steps / CHECKPOINTS_PER_RUN)."""
    plan = []
    for s in specs:
        for v in s["variants"]:
            for seed in seeds:
                cfg = variant_config(s, v, seed)[1]
                steps = cfg["budget"]["steps"]
                cfg.setdefault("checkpoint", {})["every"] = -(-steps // CHECKPOINTS_PER_RUN)
                plan.append((f"{s['key']}/{v}/s{seed}", cfg))
    return plan


def parse_run_id(run_id):
    """(study key, configuration key, seed) of a run id made by :func:`plan_runs`."""
    parts = run_id.split("/")
    if len(parts) != 3 or not parts[2].startswith("s") or not parts[2][1:].isdigit():
        raise ValueError(f"run id must look like 'study/configuration/s<seed>', got {run_id!r}")
    return parts[0], parts[1], int(parts[2][1:])


class ObserverStateMissing(ValueError):
    """A checkpoint without the observers' state: resuming from it would lose statistics."""


def _dfp_state(t):
    return {"mantissa": t.mantissa, "exponent": t.exponent, "bits": t.bits, "axis": t.axis,
            "block": t.block, "saturated": t.saturated, "underflowed": t.underflowed}


def _dfp_tensor(d):
    from softfloat.dfp import DFPTensor

    return DFPTensor(d["mantissa"], d["exponent"], d["bits"], axis=d["axis"], block=d["block"],
                     saturated=d["saturated"], underflowed=d["underflowed"])


class RunObserver(GradObserver):
    """The GradObserver of one run, with the DFP-16 GEMM operands kept so far and a state that
    the trainer saves in its checkpoints (state_dict / load_state_dict)."""

    def __init__(self, fmt="fp16"):
        super().__init__(fmt)
        self.restored_pairs = []    # kept before the checkpoint this run resumed from
        self.live_pairs = []        # kept since (the list capture_dfp_gemms appends to)

    def pairs(self):
        return self.restored_pairs + list(self.live_pairs)

    def state_dict(self):
        return {"observed": self.to_dict(),
                "dfp_pairs": [[_dfp_state(a), _dfp_state(b)] for a, b in self.pairs()]}

    def load_state_dict(self, state):
        if state is None:
            raise ObserverStateMissing("the checkpoint holds no observer state")
        fmt = self.layers.fmt
        self.layers = LayerStats.from_dict(state["observed"]["layers"], fmt)
        self.updates_hist = UpdateRatioStats.from_dict(state["observed"]["update_ratio"])
        self.restored_pairs = [(_dfp_tensor(a), _dfp_tensor(b)) for a, b in state["dfp_pairs"]]
        self.live_pairs = []


class Runner:
    """``Runner(specs)(run_id, config, run_dir=None, stop_file=None)`` trains one configuration
    and returns the trainer's result with "resumed_from" and "extra" (the repro measurements:
    "observed", "dfp_chains" for dfp16 runs, "tokens_curve" where the study asks for it).

    With ``run_dir`` it is a task of models.sweep_exec.execute: the trainer writes its files
    and checkpoints there and resumes from the checkpoint it finds (one without the observers'
    state is not resumed from: the run starts afresh), and ``stop_file`` stops it between two
    steps.  Picklable: the executor sends it to Dask workers."""

    def __init__(self, specs, *, progress=False, position=1):
        self.specs = {s["key"]: s for s in specs}
        self.progress, self.position = progress, position

    def _trainer(self, run_id, config, run_dir, obs):
        return Trainer(config, run_dir=run_dir, progress=self.progress, label=run_id,
                       position=self.position, observer=obs)

    def __call__(self, run_id, config, run_dir=None, stop_file=None):
        study, variant, seed = parse_run_id(run_id)
        spec = self.specs[study]
        obs = RunObserver()
        tr = self._trainer(run_id, config, run_dir, obs)
        resumed = None
        if run_dir is not None and has_checkpoint(run_dir):
            try:
                resumed = tr.resume()
            except ObserverStateMissing:
                log.warning("%s: its checkpoint holds no observer state; the run starts afresh",
                            run_id)
                obs = RunObserver()
                tr = self._trainer(run_id, config, run_dir, obs)
        watch_stop_file(tr, run_id, stop_file)
        dfp = tr.cfg["precision"]["policy"] == "dfp16"
        extra = {}
        # Runs that overflow on purpose (static 2^24) multiply Inf by zero in host BLAS: the
        # step is skipped as the recipe says; numpy's "invalid value" warnings add nothing.
        with np.errstate(invalid="ignore", over="ignore"):
            if dfp:
                every = spec.get("hist_every") or max(1, tr.cfg["budget"]["steps"] // 4)
                left = DFP_SAMPLE - len(obs.restored_pairs)
                with capture_dfp_gemms(tr, every=every, limit=left) as pairs:
                    obs.live_pairs = pairs
                    r = tr.fit()
                extra["dfp_chains"] = chain_stats(obs.pairs())
            else:
                r = tr.fit()
        extra["observed"] = obs.to_dict()
        curve = spec.get("curve") or {}
        if curve.get("kind") == "tokens" and variant == curve["variant"] \
                and r["final"]["failure"] is None:
            extra["tokens_curve"] = tokens_curve(tr, curve["tokens"], seed=seed)
        r.update(resumed_from=resumed, extra=extra)
        return r


def _plan_dict(plan):
    return {rid: json.loads(dumps(resolve_config(cfg))) for rid, cfg in plan}


def check_plan(plan, out_dir):
    """Refuse (ValueError, naming the run and the differing keys) an ``out_dir`` whose stored
    plan (OUT/plan.json) holds one of ``plan``'s run ids with another config; otherwise store
    the union of both plans there.  Runs of either plan alone are no conflict: another
    ``--only`` or other seeds into the same directory reuse the runs they share."""
    path = os.path.join(out_dir, PLAN_FILE)
    new = _plan_dict(plan)
    old = {}
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as fh:
                old = json.load(fh)["runs"]
            if not isinstance(old, dict):
                raise TypeError("'runs' is not an object")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a readable reproduce plan ({exc}); write to another "
                             "output directory") from None
    for rid, cfg in new.items():
        if rid in old and old[rid] != cfg:
            raise ValueError(
                f"{out_dir} holds a reproduction whose run {rid!r} was planned with another "
                f"config (differs in: {', '.join(config_diff(old[rid], cfg))}): another "
                "profile or another version of the studies; write to another output "
                "directory (--out), or delete that one")
    os.makedirs(out_dir, exist_ok=True)
    write_atomic(path, json.dumps({"runs": {**old, **new}}, indent=1) + "\n")
    return path


def load_run(out_dir, run_id):
    """The result of a finished run, as the report reads it, from OUT/runs/<run id>/: the
    trainer's history.json (without its histograms, superseded by "observed"), the extras
    extra.json holds, and run_id, study, key and seed."""
    run_dir = os.path.join(out_dir, "runs", run_id)
    r, extra = load_result(run_dir), load_extra(run_dir)
    if r is None or extra is None:
        raise ValueError(f"{run_dir}: holds no complete reproduce run (history.json and "
                         "extra.json); remove that directory to rerun it")
    r.pop("histograms", None)
    r.update(extra)
    study, key, seed = parse_run_id(run_id)
    r.update(run_id=run_id, study=study, key=key, seed=seed)
    return r


class RunsFailed(RuntimeError):
    """Some runs of a plan raised; the others are stored, and a rerun retries these."""


def run_plan(plan, specs, out_dir, *, client=None, scheduler=None, workers=None, threads=1,
             progress=True):
    """Run every unfinished run of ``plan`` into OUT/runs/ and return {run_id: result}, read
    back from the stored files (:func:`load_run`).

    Without client, scheduler or workers the runs are trained here, one after the other, in
    this process; workers=N: on a local Dask cluster of N processes (``threads`` Numba/BLAS
    threads each); scheduler / client: on an
    existing cluster (models.sweep_exec.execute).  Finished runs are skipped, unfinished ones
    resume from their checkpoint; a finished run's checkpoint is deleted (its stored results
    are all the report needs, and checkpoints would be most of what OUT weighs).  Raises
    :class:`RunsFailed` (naming each failed run and its error) when a run raised; the others
    are kept for the next attempt."""
    inline = client is None and not scheduler and workers is None
    runner = Runner(specs, progress=progress and inline)
    records = execute(plan, out_dir, client=client, scheduler=scheduler, workers=workers,
                      threads=threads, progress=progress, desc="reproduce", task=runner,
                      inline=inline, keep_checkpoints=False)
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        lines = "; ".join(f"{r['id']}: {r['error']}" for r in failed)
        raise RunsFailed(f"{len(failed)} of {len(records)} runs failed ({lines}); their "
                         f"tracebacks are in {out_dir}/runs/<run id>/result.json; run the same "
                         "command again to retry them (finished runs are kept)")
    return {rid: load_run(out_dir, rid) for rid, _ in plan}
