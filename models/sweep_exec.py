"""The executor: any list of (run id, train config) pairs trained on Dask, one task per run.

Provides :func:`execute`, :func:`local_cluster`, :func:`load_record` (a run's status and final
numbers), :func:`load_result` (its whole history), :func:`check_run_dirs`, and re-exports the
atomic writers of models.atomic (:func:`write_atomic`, :func:`atomic_path`).

``execute(runs, out_dir)`` trains every run whose results are not complete yet, each as one
``dask.distributed`` task, on a :func:`local_cluster` of worker processes (the default), on the
cluster of ``scheduler="tcp://host:8786"`` or through a given ``client``.  A run trains exactly as
``mpemu train --config RUN/config.json --out RUN`` does (the same :class:`~models.trainer.Trainer`
calls, so the same bits), resuming from ``RUN/checkpoint.ckpt`` when an earlier attempt left
one.  OUT/runs/<run id>/ then holds what ``train --out`` writes (config.json, history.json,
checkpoint.ckpt) and ``result.json``, written last and atomically: a run is finished exactly when
its result.json is there with status "ok" or "diverged" (the trainer stopped it: non-finite
loss or weights, a loss scale stuck at its minimum).  A run whose task raised is recorded as
"failed" with its error and traceback, without stopping the others, and is retried by the next
``execute``.  A run directory whose config.json differs from the run's config is refused before
anything starts.

Threads: every worker of a local cluster runs one task at a time (threads_per_worker=1) and its
Numba and BLAS thread pools have 1 thread (``threads``): the variables are put into the worker
process's environment before it starts (Dask's ``distributed.nanny.pre-spawn-environ``), so they
hold when numpy and numba load there.  Workers of a local cluster ignore SIGINT: Ctrl-C in the
terminal reaches the whole process group, and only this process should act on it.

Ctrl-C (KeyboardInterrupt): the pending tasks are cancelled, a local cluster is closed (its
workers are stopped, their last checkpoints are intact), finished runs are left as they are, and
the KeyboardInterrupt goes on to the caller.  Dask cannot stop a task that is running, so the
executor writes a stop file into OUT which the runs under way look for before each step; a
worker that does not see OUT (an existing cluster without a shared file system) finishes its
run in the background, and what it writes is what a rerun would write (same config, same bits),
every file being replaced atomically.

Imports the standard library, dask.distributed, tqdm and models.*.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import traceback
import uuid

from distributed import WorkerPlugin
from tqdm.auto import tqdm

from .atomic import TMP_PREFIX, atomic_path, write_atomic
from .cli import _THREAD_VARS
from .config import dumps, resolve_config
from .jsonio import json_safe

__all__ = ["RESULT", "STATUSES", "atomic_path", "check_run_dirs", "execute", "load_record",
           "load_result", "local_cluster", "write_atomic"]

log = logging.getLogger("models.sweep")
RESULT = "result.json"
STATUSES = ("ok", "diverged", "failed", "pending")
_FINISHED = ("ok", "diverged")
_SAFE_PART = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-=,~")


def _write_json(path, obj):
    """JSON as the trainer writes history.json (json_safe, indent 1, no NaN tokens)."""
    write_atomic(path, json.dumps(json_safe(obj), indent=1, allow_nan=False))


class _IgnoreSigint(WorkerPlugin):
    """Ignore SIGINT in a worker process (Dask calls setup in the worker's main thread)."""

    name = "mpemu-ignore-sigint"

    def setup(self, worker):
        del worker
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def local_cluster(n_workers, *, threads=1):
    """A ``LocalCluster`` of ``n_workers`` processes on 127.0.0.1, one task at a time each, with
    ``threads`` Numba/BLAS threads per worker (see the module docstring); no dashboard."""
    import dask
    from distributed import LocalCluster

    if n_workers < 1 or threads < 1:
        raise ValueError(f"workers and threads must be >= 1, got {n_workers} and {threads}")
    env = {var: str(threads) for var in _THREAD_VARS}
    key = "distributed.nanny.pre-spawn-environ"
    saved = {var: os.environ.get(var) for var in env}
    # Dask lets this process's environment override the config, so both are set; the Nanny
    # applies them to os.environ before it spawns each worker (and again on a restart).  The
    # workers' own log is kept to CRITICAL: a failed task is recorded in its result.json.
    os.environ.update(env)
    try:
        with dask.config.set({key: {**dask.config.get(key, {}), **env}}):
            return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                host="127.0.0.1", dashboard_address=None,
                                silence_logs=logging.CRITICAL, plugins={_IgnoreSigint()})
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


class RunStopped(RuntimeError):
    """A run stopped between two steps because its sweep was interrupted (see execute)."""


def _train_run(run_id, config, run_dir, stop_file=None):
    """The task: one run, as ``mpemu train`` runs it (resumed from its checkpoint if any).

    Before each step it looks for ``stop_file`` (a stat, microseconds against milliseconds a
    step) and stops when it exists: Dask cannot stop a running task, so this is how Ctrl-C
    reaches the runs already under way, wherever a worker sees the output directory."""
    from .trainer import CHECKPOINT, Trainer

    trainer = Trainer(config, run_dir=run_dir, progress=False, label=run_id)
    if stop_file is not None:
        step = trainer.train_step

        def train_step():
            if os.path.exists(stop_file):
                raise RunStopped(f"{run_id}: stopped at step {trainer.step_no} (interrupted)")
            return step()

        trainer.train_step = train_step     # fit() calls self.train_step: only this run's
    resumed = trainer.resume() if os.path.isfile(os.path.join(run_dir, CHECKPOINT)) else None
    result = trainer.fit()
    result["resumed_from"] = resumed
    return result


def _unjson(final):
    """json_safe wrote non-finite floats as strings; read them back as floats."""
    return {k: float(v) if v in ("nan", "inf", "-inf") and k != "failure" else v
            for k, v in final.items()}


def _floats(values):
    return [float(v) if v in ("nan", "inf", "-inf") else v for v in values]


def load_result(run_dir):
    """The trainer's result of a run (its history.json: config, final numbers, history,
    histograms) with non-finite numbers back as floats, or None where there is none yet."""
    try:
        with open(os.path.join(run_dir, "history.json"), encoding="utf-8") as fh:
            res = json.load(fh)
        res["final"] = _unjson(res["final"])
        res["history"] = {k: _floats(v) for k, v in res["history"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return res


def load_record(run_dir):
    """The record of a run (its result.json, non-finite numbers back as floats), or None."""
    path = os.path.join(run_dir, RESULT)
    try:
        with open(path, encoding="utf-8") as fh:
            rec = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("status") not in STATUSES:
        return None
    if rec.get("final"):
        rec["final"] = _unjson(rec["final"])
    return rec


def _check_runs(runs):
    out, seen = [], {}
    for rid, cfg in runs:
        parts = rid.split("/") if isinstance(rid, str) else [""]
        if not all(parts) or any(p in (".", "..") or not set(p) <= _SAFE_PART for p in parts):
            raise ValueError(f"run id {rid!r}: use letters, digits and ._+-=,~ (\"/\" between "
                             "parts), no empty part, '.' or '..'")
        if rid.lower() in seen:
            raise ValueError(f"run id {rid!r} is given twice (ids are compared ignoring case)")
        seen[rid.lower()] = rid
        out.append((rid, resolve_config(cfg)))
    return out


def check_run_dirs(runs, out_dir):
    """Refuse (ValueError) when OUT/runs/<run id>/config.json differs from a run's resolved
    config: that directory holds another experiment's run."""
    for rid, cfg in runs:
        path = os.path.join(out_dir, "runs", rid, "config.json")
        try:
            with open(path, encoding="utf-8") as fh:
                old = json.load(fh)
        except FileNotFoundError:
            continue
        except ValueError:
            continue    # an interrupted write of a run that never checkpointed: rerun it
        new = json.loads(dumps(cfg))
        if old != new:
            keys = sorted(_diff(old, new))
            raise ValueError(f"{os.path.dirname(path)} holds run {rid!r} made with another "
                             f"config (differs in: {', '.join(keys)}); write to another output "
                             "directory, or remove that run directory to rerun it")


def _diff(a, b, prefix=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from _diff(a.get(k), b.get(k), f"{prefix}{k}.")
    elif a != b:
        yield prefix[:-1]


def _remove_stale_temps(run_dir):
    """Temporary files of atomic writes cut short (a worker killed while saving) go."""
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(run_dir):
            if name.startswith(TMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(run_dir, name))


def _default_workers():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        return os.cpu_count() or 1


def _connect(client, scheduler, workers, threads):
    """(client, things to close afterwards): the given client, one to ``scheduler`` (the
    cluster itself is never closed), or a new local cluster and its client."""
    if client is not None:
        return client, []
    from distributed import Client

    if scheduler:
        try:
            c = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"scheduler {scheduler!r}: cannot connect ({exc})") from None
        return c, [c]
    cluster = local_cluster(workers, threads=threads)
    try:
        c = Client(cluster)
    except BaseException:
        cluster.close()
        raise
    return c, [c, cluster]


def _record(fut, rid, cfg, run_dir):
    """Store a finished task's outcome in run_dir; returns the run's record."""
    try:
        result = fut.result()
    except Exception as exc:  # noqa: BLE001 (any error of the run is recorded, not raised)
        err = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        rec = {"id": rid, "status": "failed", "error": err, "traceback": tb, "metric": None,
               "final": None, "resumed_from": None, "config": cfg}
    else:
        final = result["final"]
        diverged = final["diverged"]
        rec = {"id": rid, "status": "diverged" if diverged else "ok",
               "error": (final["failure"] or "the training loss is not finite") if diverged
               else None, "traceback": None, "metric": result["metric"], "final": final,
               "resumed_from": result.pop("resumed_from"), "config": cfg}
        # what the trainer wrote on the worker, rewritten atomically here (and so also present
        # where the worker does not share this file system)
        _write_json(os.path.join(run_dir, "history.json"), result)
    _write_json(os.path.join(run_dir, RESULT), rec)
    return rec


def _say(bar, rec, progress):
    f = rec["final"]
    if f is None:
        line = f"{rec['id']}: failed: {rec['error']}"
    else:
        line = (f"{rec['id']}: {rec['status']}, eval {rec['metric']} {f['eval_metric']:.4g}, "
                f"eval loss {f['eval_loss']:.4g}, {f['wall_s']:.1f} s")
    if progress:
        bar.write(line)
    else:
        log.info(line)


def execute(runs, out_dir, *, client=None, scheduler=None, workers=None, threads=1,
            progress=True, on_record=None, desc="runs"):
    """Train every unfinished run of ``runs`` (pairs (run id, train config)) into
    OUT/runs/<run id>/; returns the records (the result.json contents), in the order of runs.

    client: a ``distributed.Client`` to use (left open); scheduler: the address of an existing
    cluster (its client is closed afterwards, the cluster never); neither: a local cluster of
    ``workers`` processes (default: the usable cores, at most one per run to do) with
    ``threads`` Numba/BLAS threads each, closed at the end.  on_record(record) is called here,
    in the caller's process, as each run finishes; progress: a tqdm bar over the runs (else one
    log line per run).  Raises ValueError before anything starts when an id is unsafe or
    repeated, a config is invalid, or a run directory holds another config.
    """
    if client is not None and scheduler:
        raise ValueError("give a client or a scheduler address, not both")
    if workers is not None and (client is not None or scheduler):
        raise ValueError("workers: only for the local cluster; an existing cluster runs the "
                         "runs on its own workers")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    runs = _check_runs(runs)
    runs_dir = os.path.join(os.fspath(out_dir), "runs")
    check_run_dirs(runs, out_dir)
    records = {}
    for rid, _ in runs:
        rec = load_record(os.path.join(runs_dir, rid))
        if rec is not None and rec["status"] in _FINISHED:
            records[rid] = rec
    todo = [(rid, cfg) for rid, cfg in runs if rid not in records]
    counts = {s: sum(r["status"] == s for r in records.values()) for s in STATUSES[:3]}
    bar = tqdm(total=len(runs), initial=len(records), desc=desc, unit="run", dynamic_ncols=True,
               disable=not progress, postfix=counts)
    to_close, pending, stop_file = [], {}, None
    try:
        if todo:
            n = min(workers or _default_workers(), len(todo))
            client, to_close = _connect(client, scheduler, n, threads)
            from distributed import as_completed

            token = uuid.uuid4().hex[:8]
            stop_file = os.path.abspath(os.path.join(out_dir, f".stop-{token}"))
            for rid, cfg in todo:
                run_dir = os.path.abspath(os.path.join(runs_dir, rid))
                _remove_stale_temps(run_dir)
                write_atomic(os.path.join(run_dir, "config.json"), dumps(cfg) + "\n")
                fut = client.submit(_train_run, rid, cfg, run_dir, stop_file,
                                    key=f"mpemu-{token}-{rid}", pure=False)
                pending[fut] = (rid, cfg, run_dir)
            for fut in as_completed(list(pending)):
                rid, cfg, run_dir = pending.pop(fut)
                rec = records[rid] = _record(fut, rid, cfg, run_dir)
                fut.release()
                counts[rec["status"]] += 1
                bar.set_postfix(counts, refresh=False)
                bar.update(1)
                _say(bar, rec, progress)
                if on_record is not None:
                    on_record(rec)
    except KeyboardInterrupt:
        if pending:
            write_atomic(stop_file, "interrupted\n")     # running tasks stop at their next step
            client.cancel(list(pending), force=True)
        raise
    finally:
        bar.close()
        for thing in to_close:
            thing.close()
        if stop_file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stop_file)
    return [records[rid] for rid, _ in runs]
