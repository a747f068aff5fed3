"""``mpemu sweep``: experiment grids (policies x scalers x settings x seeds) on Dask.

Provides :func:`run` (``models.sweep.run(spec, out, client=None, ...)``) and
:func:`sweep_command` (the CLI's), and re-exports :func:`~models.sweep_exec.execute`,
:func:`~models.sweep_exec.local_cluster`, :func:`~models.sweep_spec.load_spec`,
:func:`~models.sweep_spec.resolve_spec` and :class:`~models.sweep_spec.SpecError`.

``run`` validates the spec (models.sweep_spec: every run's config before anything starts), stores
it as OUT/sweep.json, trains the runs through the executor (models.sweep_exec: a local Dask
cluster by default, an existing one by address or client; one task per run, each bit-identical
to ``mpemu train`` of its config), keeps OUT/results.csv up to date as runs finish and ends
with OUT/summary.md and its figures (models.sweep_report).

Resume: running the same spec into the same OUT skips the finished runs and resumes the others
from their last checkpoint.  A spec may add or drop grid values between two runs into one OUT,
but it must keep the grid keys, and a run already in OUT must keep its config; anything else is
refused before anything starts (:class:`SpecError`, naming what changed).

Imports the standard library and models.* (dask inside the executor's functions).
"""

from __future__ import annotations

import json
import logging
import os

from .sweep_exec import (STATUSES, check_run_dirs, execute, load_record, local_cluster,
                         write_atomic)
from .sweep_report import csv_text, write_summary
from .sweep_spec import Spec, SpecError, load_spec, resolve_spec

__all__ = ["SPEC_FILE", "SpecError", "execute", "load_spec", "local_cluster", "resolve_spec",
           "run", "sweep_command"]

SPEC_FILE = "sweep.json"


def _spec(spec):
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, dict):
        return resolve_spec(spec)
    return load_spec(spec)


def _check_out(spec, out):
    """Refuse an OUT that holds another experiment (see the module docstring)."""
    path = os.path.join(out, SPEC_FILE)
    if not os.path.exists(path):
        stray = [n for n in ("runs", "results.csv") if os.path.exists(os.path.join(out, n))]
        if stray:
            raise SpecError(f"{out}: holds {' and '.join(stray)} but no {SPEC_FILE}: not a sweep "
                            "directory; write to another output directory")
        return
    try:
        with open(path, encoding="utf-8") as fh:
            old = json.load(fh)
        old_keys = list(old["keys"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecError(f"{path}: not a readable sweep record ({exc}); write to another output "
                        "directory") from None
    if old_keys != spec.keys:
        raise SpecError(f"{out} holds sweep {old.get('name')!r} over the grid keys "
                        f"{', '.join(old_keys)}; this spec's are {', '.join(spec.keys)}. A spec "
                        "run again into the same directory must keep its grid keys (it may add "
                        "or drop values); write to another output directory")
    check_run_dirs([(r.id, r.config) for r in spec.runs], out)


def _finished(spec, out):
    recs = {r.id: load_record(os.path.join(out, "runs", r.id)) for r in spec.runs}
    return {k: v for k, v in recs.items() if v is not None and v["status"] in STATUSES[:2]}


def run(spec, out, client=None, *, scheduler=None, workers=None, threads=1, progress=True,
        command=None):
    """Run the sweep ``spec`` (a spec file path, a dict or a Spec) into directory ``out``.

    client / scheduler / workers / threads: where the runs go (models.sweep_exec.execute);
    command: the command line to show in summary.md.  Returns a dict with the Spec, the records
    (result.json contents, in run order), the status counts and the paths of results.csv and
    summary.md.  Ctrl-C: results.csv is brought up to date and the KeyboardInterrupt goes on.
    """
    spec = _spec(spec)
    out = os.fspath(out)
    _check_out(spec, out)
    os.makedirs(out, exist_ok=True)
    write_atomic(os.path.join(out, SPEC_FILE), json.dumps(spec.to_dict(), indent=1) + "\n")
    csv_path = os.path.join(out, "results.csv")
    records = _finished(spec, out)

    def on_record(rec):
        records[rec["id"]] = rec
        write_atomic(csv_path, csv_text(spec.keys, spec.runs, records))

    write_atomic(csv_path, csv_text(spec.keys, spec.runs, records))
    try:
        recs = execute([(r.id, r.config) for r in spec.runs], out, client=client,
                       scheduler=scheduler, workers=workers, threads=threads,
                       progress=progress, on_record=on_record, desc=f"sweep {spec.name}")
    except KeyboardInterrupt:
        write_atomic(csv_path, csv_text(spec.keys, spec.runs, records))
        raise
    records = {r["id"]: r for r in recs}
    write_atomic(csv_path, csv_text(spec.keys, spec.runs, records))
    summary = write_summary(spec, records, out, command=command)
    counts = {s: sum(r["status"] == s for r in recs) for s in STATUSES[:3]}
    return {"spec": spec, "records": recs, "counts": counts, "results": csv_path,
            "summary": summary}


def sweep_command(args):
    """The CLI's ``mpemu sweep``: returns the exit code (1 when a run failed, else 0)."""
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.workers is not None and args.scheduler:
        raise ValueError("--workers sets the size of the local cluster; with --scheduler the "
                         "existing cluster's workers run the sweep")
    if not args.verbose:    # the scheduler and nannies of a local cluster log here at INFO
        logging.getLogger("distributed").setLevel(logging.ERROR)
    cmd = f"mpemu sweep --spec {args.spec} --out {args.out}"
    res = run(args.spec, args.out, scheduler=args.scheduler, workers=args.workers,
              threads=args.threads or 1, progress=not args.no_progress, command=cmd)
    c = res["counts"]
    wall = sum(r["final"]["wall_s"] for r in res["records"] if r["final"])
    print(f"sweep {res['spec'].name}: {len(res['records'])} runs ({c['ok']} ok, "
          f"{c['diverged']} diverged, {c['failed']} failed; {wall:.1f} s of training); "
          f"{res['results']}, {res['summary']}")
    return 1 if c["failed"] else 0
