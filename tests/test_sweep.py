"""models.sweep on a real Dask cluster: LocalCluster(n_workers=2, processes=True) on 127.0.0.1.

* the rows (and histories and checkpoints) of a small grid are bit-identical to ``mpemu train``
  of each run's config alone;
* the workers really run with one Numba and one BLAS thread and ignore SIGINT;
* an interrupted sweep (a run stopped after a checkpoint, a run never started, a failed run)
  resumes and ends with the same results.csv, wall times aside;
* Ctrl-C on ``python -m models sweep`` (its own local cluster) exits 130, stops the workers and
  leaves finished runs intact; the rerun completes it;
* ``--scheduler`` against the test's cluster (left running), with a diverged and a failed run
  recorded without stopping the others (exit code 1);
* a spec that conflicts with the output directory is refused before anything runs.

Every cluster and subprocess is closed in a ``finally``; a watchdog ends the session with a
traceback should anything hang (CI must not wait forever).
"""

from __future__ import annotations

import csv
import faulthandler
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from models.checkpoint import arrays_equal, load_checkpoint
from models.idx import write_idx
from models.cli import main
from models.sweep import SpecError, run
from models.sweep_exec import load_record, load_result
from models.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WATCHDOG_S = 300        # per test; the whole file takes well under a minute

BASE = {"model": {"type": "mlp", "hidden": [8]}, "data": {"batch_size": 16},
        "precision": {"policy": "O2", "tensor_core": "native", "loss_multiplier": 2.0 ** -10},
        "scaler": {"init_scale": 2.0 ** 28, "growth_interval": 2},
        "optimizer": {"lr": 0.1, "momentum": 0.9},
        "budget": {"steps": 6, "eval_every": 3, "eval_batches": 1},
        "checkpoint": {"every": 2}, "instrument": {"histogram_every": 3}}
SPEC = {"name": "tiny", "base": BASE,
        "grid": {"precision.policy": ["O2", "bf16"], "scaler.type": ["none", "dynamic"],
                 "seed": [0, 1]}}


@pytest.fixture(autouse=True)
def _watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def swept(client, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    res = run(SPEC, out, client, progress=False)
    return out, res


@pytest.fixture
def one_thread():
    """`mpemu train` alone runs with 1 Numba and 1 BLAS thread (the CLI's default)."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        numba.set_num_threads(old)


def _rows(path, drop=("wall_s",)):
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(fh)]


def _history(path):
    with open(path, encoding="utf-8") as fh:
        h = json.load(fh)
    h["final"].pop("wall_s")
    return h


def _bits(x):
    return "nan" if isinstance(x, float) and math.isnan(x) else repr(x)


def test_workers_one_thread_each_and_ignore_sigint(client):
    def probe():
        import signal as sig

        import numba
        from threadpoolctl import threadpool_info

        return (os.environ["NUMBA_NUM_THREADS"], numba.config.NUMBA_NUM_THREADS,
                numba.get_num_threads(), sorted({p["num_threads"] for p in threadpool_info()}),
                sig.getsignal(sig.SIGINT) == sig.SIG_IGN)

    info = client.run(probe)
    assert len(info) == 2
    for got in info.values():
        assert got == ("1", 1, 1, [1], True), got
    assert all(w["nthreads"] == 1 for w in client.scheduler_info()["workers"].values())


def test_rows_are_bit_identical_to_train_alone(swept, tmp_path, one_thread, capsys):
    out, res = swept
    assert res["counts"] == {"ok": 8, "diverged": 0, "failed": 0}
    rows = _rows(out / "results.csv", drop=())
    assert [r["run_id"] for r in rows] == [r.id for r in res["spec"].runs]
    assert rows[5]["run_id"] == "policy=bf16,scaler=none,seed=1"
    assert (rows[5]["precision.policy"], rows[5]["scaler.type"], rows[5]["seed"]) == \
        ("bf16", "none", "1")
    assert any(r["skipped_steps"] != "0" for r in rows)    # dynamic O2 overflows at 2^28
    for row in rows:
        rid = row["run_id"]
        ref = tmp_path / rid
        assert main(["train", "--config", str(out / "runs" / rid / "config.json"),
                     "--out", str(ref), "--no-progress"]) == 0
        mine = _history(out / "runs" / rid / "history.json")
        theirs = _history(ref / "history.json")
        assert mine == theirs, rid
        f = theirs["final"]
        for col, key in (("train_loss", "train_loss"), ("eval_loss", "eval_loss"),
                         ("eval_metric", "eval_metric"), ("final_scale", "final_scale"),
                         ("lost_updates", "lost_update_fraction"),
                         ("zero_gradients", "grad_zero_fraction")):
            value = f[key]
            assert row[col] == _bits(value if not isinstance(value, str) else float(value)), \
                (rid, col)
        assert row["skipped_steps"] == str(f["skipped_steps"]) and row["status"] == "ok"
        a = load_checkpoint(out / "runs" / rid / "checkpoint.ckpt")
        b = load_checkpoint(ref / "checkpoint.ckpt")
        a.pop("wall_s"), b.pop("wall_s")
        assert arrays_equal(a, b), rid
    capsys.readouterr()
    summary = (out / "summary.md").read_text()
    assert "| policy | scaler | runs | eval accuracy |" in summary
    assert "| O2 | dynamic | 2 ok |" in summary and " ± " in summary
    for png in ("metric.png", "loss.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    umask = os.umask(0o022)
    os.umask(umask)
    for name in ("results.csv", "summary.md", "sweep.json", f"runs/{rows[0]['run_id']}/result.json"):
        assert (out / name).stat().st_mode & 0o777 == 0o666 & ~umask, name   # not mkstemp's 0600


def test_interrupted_sweep_resumes_to_the_same_results(swept, client, tmp_path, monkeypatch):
    out, res = swept
    part = tmp_path / "part"
    shutil.copytree(out, part)
    runs = part / "runs"
    ids = [r.id for r in res["spec"].runs]
    stopped, never, failed, kept = ids[1], ids[2], ids[6], ids[7]
    # `stopped` was interrupted at step 3, after its step-2 checkpoint (Ctrl-C in the trainer)
    shutil.rmtree(runs / stopped)
    t = Trainer(res["spec"].runs[1].config, run_dir=str(runs / stopped), progress=False)
    real = t.train_step

    def interrupted():
        if t.step_no == 3:
            raise KeyboardInterrupt
        return real()

    monkeypatch.setattr(t, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        t.fit()
    assert sorted(os.listdir(runs / stopped)) == ["checkpoint.ckpt", "config.json"]
    shutil.rmtree(runs / never)                       # never started
    rec = json.loads((runs / failed / "result.json").read_text())
    rec.update(status="failed", error="RuntimeError: boom", final=None)
    (runs / failed / "result.json").write_text(json.dumps(rec))   # failed: retried
    before = (runs / kept / "result.json").stat().st_mtime_ns
    res2 = run(SPEC, part, client, progress=False)
    assert res2["counts"]["ok"] == 8
    assert _rows(part / "results.csv") == _rows(out / "results.csv")
    assert load_record(runs / stopped)["resumed_from"] == 2
    assert load_record(runs / never)["resumed_from"] is None
    assert (runs / kept / "result.json").stat().st_mtime_ns == before   # finished: skipped
    assert _history(runs / stopped / "history.json") == _history(out / "runs" / stopped /
                                                                   "history.json")


def test_changed_spec_is_refused_and_added_values_run(swept, client, tmp_path):
    out, _ = swept
    other = tmp_path / "o"
    shutil.copytree(out, other)
    with pytest.raises(SpecError, match=r"over the grid keys precision.policy, scaler.type, "
                                        r"seed; this spec's are precision.policy, seed"):
        run({**SPEC, "grid": {"precision.policy": ["O2"], "seed": [0]}}, other, client)
    changed = {**SPEC, "base": {**BASE, "optimizer": {"lr": 0.2, "momentum": 0.9}}}
    with pytest.raises(ValueError, match=r"holds run 'policy=O2,scaler=none,seed=0' made with "
                                         r"another config \(differs in: optimizer.lr\)"):
        run(changed, other, client)
    with pytest.raises(ValueError, match="differs in: budget.steps"):
        run({**SPEC, "steps": 7}, other, client)
    more = {**SPEC, "grid": {**SPEC["grid"], "seed": [0, 1, 2], "precision.policy": ["O2"]}}
    res = run(more, other, client, progress=False)
    rows, old = _rows(other / "results.csv"), _rows(out / "results.csv")
    assert res["counts"]["ok"] == 6 and [r["seed"] for r in rows] == list("012012")
    assert [rows[i] for i in (0, 1, 3, 4)] == old[:4]      # kept, not rerun
    (tmp_path / "stray" / "runs").mkdir(parents=True)
    with pytest.raises(SpecError, match="holds runs but no sweep.json: not a sweep directory"):
        run(SPEC, tmp_path / "stray", client)


def _fake_mnist(directory):
    """A tiny MNIST in IDX files (80 train, 20 test images of random pixels)."""
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True)
    for split, n in (("train", 80), ("t10k", 20)):
        write_idx(directory / f"{split}-images-idx3-ubyte.gz",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(directory / f"{split}-labels-idx1-ubyte.gz",
                  rng.integers(0, 10, n, dtype=np.uint8))


def test_scheduler_failed_and_diverged_runs(client, tmp_path, capsys):
    good, missing = tmp_path / "good", tmp_path / "missing"
    _fake_mnist(good)
    spec = {"name": "faults", "base": {**BASE, "data": {"name": "mnist", "batch_size": 16}},
            "grid": {"data.path": [str(good), str(missing)], "optimizer.lr": [0.1, 1e30]},
            "steps": 3}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    code = main(["sweep", "--spec", str(path), "--out", str(out), "--no-progress",
                 "--scheduler", client.scheduler.address])
    assert code == 1
    assert "4 runs (1 ok, 1 diverged, 2 failed" in capsys.readouterr().out
    rows = {(r["data.path"], float(r["optimizer.lr"])): r for r in _rows(out / "results.csv")}
    assert rows[str(good), 0.1]["status"] == "ok"
    bad = rows[str(good), 1e30]
    assert bad["status"] == "diverged" and bad["error"].startswith("weights became non-finite")
    for lr in (0.1, 1e30):
        row = rows[str(missing), lr]
        assert row["status"] == "failed" and row["eval_loss"] == ""
        assert row["error"].startswith("FileNotFoundError: data directory not found")
        assert "Traceback" in load_record(out / "runs" / row["run_id"])["traceback"]
        assert f"- `{row['run_id']}`: failed: FileNotFoundError" in \
            (out / "summary.md").read_text()
    eval_loss = load_result(out / "runs" / bad["run_id"])["history"]["eval_loss"]
    assert math.isnan(eval_loss[-1])        # "nan" in history.json, a float again
    # the existing cluster was used, and is still there
    assert len(client.scheduler_info()["workers"]) == 2
    assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3


def test_ctrl_c_stops_cleanly_and_the_rerun_completes(client, tmp_path):
    spec = {"name": "long", "base": {**BASE, "budget": {"steps": 150, "eval_every": 50,
                                                        "eval_batches": 1},
                                     "checkpoint": {"every": 5}},
            "grid": {"seed": [0, 1, 2]}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": ROOT}
    # A shell starts background jobs with SIGINT ignored, and Python keeps an inherited
    # SIG_IGN, so a suite run with "&" would hand the sweep an ignored Ctrl-C: the child
    # restores Python's default handler first, as a terminal's foreground job has it.
    argv = ["models", "sweep", "--spec", str(path), "--out", str(out), "--workers", "2",
            "--no-progress"]
    boot = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
            f" sys.argv = {argv!r}; runpy.run_module('models', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", boot],
                            cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    kids = []
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("runs/*/checkpoint.ckpt")):    # training has begun
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.02)
        kids = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGINT)      # what Ctrl-C in a terminal does
        log = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, log
    assert "interrupted" in log
    gone, alive = psutil.wait_procs(kids, timeout=30)
    assert not alive, alive
    rows = _rows(out / "results.csv")
    assert "pending" in {r["status"] for r in rows}, rows   # interrupted before the end
    assert not list(out.glob(".stop-*")) and not list(out.glob("runs/*/.tmp-*"))
    done_before = {r["run_id"] for r in rows if r["status"] == "ok"}
    res = run(spec, out, client, progress=False)
    assert res["counts"]["ok"] == 3
    ref = run(spec, tmp_path / "ref", client, progress=False)
    assert _rows(out / "results.csv") == _rows(tmp_path / "ref" / "results.csv")
    # the run whose checkpoint was seen went on from it (or from its last step: the workers
    # run until the local cluster has stopped them)
    assert any(r["resumed_from"] for r in res["records"] if r["id"] not in done_before)
    assert ref["counts"]["ok"] == 3
