"""``reproduce`` through the sweep executor (models.sweep_exec), on a tiny plan (two studies, four
configurations, two seeds, 8 steps):

* serially in this process and on a LocalCluster(n_workers=2, processes=True) on 127.0.0.1
  (through its scheduler's address), the stored per-run results, results.json and report.md are the same (timings and --out aside);
* what is stored per run and read back is what the Runner returns in memory (nothing lost in
  JSON: every float, the per-layer statistics, the DFP-16 chains, the tokens curve);
* an interrupted reproduce resumes: finished runs are skipped (their files untouched), the run
  cut off goes on from its checkpoint, observers' statistics and DFP-16 samples included, and
  the result is the uninterrupted one;
* a checkpoint without the observers' state is not resumed from (the run starts afresh);
* a run that raises is named (RunsFailed), recorded, and retried by the next attempt;
* an output directory planned with other configs is refused, naming the run; another --only
  into the same directory reuses the runs it shares;
* --workers < 1, --workers with --scheduler and an unreachable scheduler are clear errors.

Every cluster is closed in a ``finally``; a watchdog ends the session should anything hang.
"""

from __future__ import annotations

import copy
import faulthandler
import json
import math
import os
import shutil
import socket

import pytest

from models.cli import main
from models.repro import experiments
from models.repro import studies as studies_mod
from models.repro.runs import Runner, RunsFailed, load_run, plan_runs
from models.sweep_exec import load_record
from models.trainer import Trainer

WATCHDOG_S = 300
KEEP = {"mlp": ["fp32", "master_noscale", "dfp16"], "lstm": ["fp32"]}
SEEDS = (0, 1)
INTERRUPTED = "mlp/dfp16/s1"      # cut off at step 5; its last checkpoint is step 4's


def _tiny_studies(profile, steps=8):
    out = []
    for s in studies_mod.studies(profile):
        if s["key"] not in KEEP:
            continue
        s = copy.deepcopy(s)
        s["variants"] = KEEP[s["key"]]
        s["base"]["budget"].update(steps=steps, eval_every=steps, eval_batches=1)
        s["base"]["instrument"]["histogram_every"] = s["hist_every"] = 2
        if s["key"] == "lstm":
            s["base"]["data"].update(max_chars=12_000, seq_len=6, batch_size=4)
            s["curve"]["tokens"] = [24, 96]
        out.append(s)
    return out


@pytest.fixture(autouse=True)
def _watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module", autouse=True)
def _tiny():
    import numba
    from threadpoolctl import threadpool_limits

    mp = pytest.MonkeyPatch()
    mp.setattr(experiments, "studies", _tiny_studies)
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        numba.set_num_threads(old)
        mp.undo()


def _reproduce(out, **kw):
    return experiments.reproduce(str(out), quick=True, progress=False, seeds=SEEDS, **kw)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "out"
    _reproduce(out)
    return out


def _strip(obj, drop=("wall_s", "train_s", "command", "reused_runs")):
    if isinstance(obj, dict):
        return {k: _strip(v, drop) for k, v in obj.items() if k not in drop}
    if isinstance(obj, list):
        return [_strip(v, drop) for v in obj]
    return obj


def _results(out):
    return _strip(json.loads((out / "results.json").read_text()))


def _report(out):
    """report.md without its timing line (line 3) and the command lines that name --out."""
    lines = (out / "report.md").read_text().splitlines()
    return [ln for i, ln in enumerate(lines) if i != 2 and str(out) not in ln]


def _run_ids():
    return [rid for rid, _ in plan_runs(_tiny_studies("quick"), SEEDS)]


def _same(a, b):
    """Deep equality with NaN equal to NaN (bit-level for floats: repr)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def test_serial_and_two_workers_give_the_same_report(serial, client, tmp_path):
    from distributed import get_task_stream

    par = tmp_path / "par"
    with get_task_stream(client) as stream:
        _reproduce(par, scheduler=client.scheduler.address)     # as --scheduler ADDRESS does
    tasks = [t for t in stream.data if t["key"].startswith("mpemu-")]
    assert len(tasks) == len(_run_ids()) and len({t["worker"] for t in tasks}) == 2
    assert _results(par) == _results(serial)
    assert _report(par) == _report(serial)
    assert len(_report(serial)) > 100
    for rid in _run_ids():
        a, b = serial / "runs" / rid, par / "runs" / rid
        assert (a / "extra.json").read_bytes() == (b / "extra.json").read_bytes(), rid
        ha, hb = (json.loads((d / "history.json").read_text()) for d in (a, b))
        assert _strip(ha) == _strip(hb), rid
        assert load_record(b)["status"] == "ok"
        assert sorted(os.listdir(b)) == ["config.json", "extra.json", "history.json",
                                         "result.json"], rid     # checkpoint gone once done


def test_stored_results_are_what_the_runner_returns(serial):
    specs = _tiny_studies("quick")
    plan = dict(plan_runs(specs, SEEDS))
    for rid in ("mlp/dfp16/s0", "lstm/fp32/s1"):
        mine = Runner(specs)(rid, plan[rid])
        mine.update(mine.pop("extra"))
        stored = load_run(str(serial), rid)
        for r in (mine, stored):
            r["final"].pop("wall_s")
            for key in ("histograms", "resumed_from", "run_id", "study", "key", "seed"):
                r.pop(key, None)
        assert {"observed", "history", "final"} <= set(stored)
        assert ("dfp_chains" in stored) == rid.startswith("mlp/dfp16")
        assert ("tokens_curve" in stored) == rid.startswith("lstm")
        assert _same(mine, stored), rid


def test_interrupted_reproduce_resumes_to_the_same_report(serial, tmp_path, monkeypatch):
    out = tmp_path / "cut"
    real = Trainer.train_step

    def cut_off(self):
        if self.label == INTERRUPTED and self.step_no == 5:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(Trainer, "train_step", cut_off)
    with pytest.raises(KeyboardInterrupt):
        _reproduce(out)
    monkeypatch.setattr(Trainer, "train_step", real)
    ids = _run_ids()
    done = ids[:ids.index(INTERRUPTED)]
    assert done and all(load_record(out / "runs" / r)["status"] == "ok" for r in done)
    assert sorted(os.listdir(out / "runs" / INTERRUPTED)) == ["checkpoint.ckpt", "config.json"]
    assert not (out / "runs" / "lstm").exists() and not (out / "report.md").exists()
    stamps = {r: (out / "runs" / r / "result.json").stat().st_mtime_ns for r in done}
    _reproduce(out)
    assert load_record(out / "runs" / INTERRUPTED)["resumed_from"] == 4
    assert all((out / "runs" / r / "result.json").stat().st_mtime_ns == t
               for r, t in stamps.items())                  # finished: skipped
    assert _results(out) == _results(serial)
    assert _report(out) == _report(serial)
    assert (out / "runs" / INTERRUPTED / "extra.json").read_bytes() == \
        (serial / "runs" / INTERRUPTED / "extra.json").read_bytes()


def test_a_checkpoint_without_observer_state_is_not_resumed_from(serial, tmp_path, caplog):
    """A checkpoint written without the repro observers (mpemu train) would resume a run whose
    statistics lack the steps before it: the run starts afresh instead."""
    out = tmp_path / "plain"
    shutil.copytree(serial, out)
    rid = "mlp/master_noscale/s1"
    run_dir = out / "runs" / rid
    shutil.rmtree(run_dir)
    t = Trainer(dict(plan_runs(_tiny_studies("quick"), SEEDS))[rid], run_dir=str(run_dir),
                progress=False)
    real = t.train_step

    def cut_off():
        if t.step_no == 5:
            raise KeyboardInterrupt
        return real()

    t.train_step = cut_off
    with pytest.raises(KeyboardInterrupt):
        t.fit()
    assert t.saved_step == 4
    _reproduce(out)
    assert "holds no observer state; the run starts afresh" in caplog.text
    assert load_record(run_dir)["resumed_from"] is None
    assert (run_dir / "extra.json").read_bytes() == \
        (serial / "runs" / rid / "extra.json").read_bytes()
    assert _results(out) == _results(serial)


def test_a_failed_run_is_named_and_retried(serial, tmp_path, monkeypatch):
    out = tmp_path / "f"
    shutil.copytree(serial, out)
    bad = "mlp/master_noscale/s0"
    shutil.rmtree(out / "runs" / bad)
    real = Trainer.train_step

    def boom(self):
        if self.label == bad:
            raise RuntimeError("boom")
        return real(self)

    monkeypatch.setattr(Trainer, "train_step", boom)
    with pytest.raises(RunsFailed, match=r"1 of 8 runs failed \(mlp/master_noscale/s0: "
                                         r"RuntimeError: boom\).*run the same command again"):
        _reproduce(out)
    assert "Traceback" in load_record(out / "runs" / bad)["traceback"]
    monkeypatch.setattr(Trainer, "train_step", real)
    _reproduce(out)
    assert load_record(out / "runs" / bad)["status"] == "ok"
    assert _results(out) == _results(serial)
    # the report says that the timing covers only the last invocation
    assert json.loads((out / "results.json").read_text())["reused_runs"] == 7
    assert json.loads((serial / "results.json").read_text())["reused_runs"] == 0
    assert "reused 7 runs finished by an earlier one" in (out / "report.md").read_text()


def test_conflicting_plan_is_refused_and_another_only_reuses_runs(serial, tmp_path,
                                                                  monkeypatch):
    out = tmp_path / "o"
    shutil.copytree(serial, out)
    stamps = {r: (out / "runs" / r / "result.json").stat().st_mtime_ns for r in _run_ids()}
    experiments.reproduce(str(out), quick=True, progress=False, seeds=(1,), only=["mlp"])
    assert json.loads((out / "results.json").read_text())["runs"] == 3
    assert all((out / "runs" / r / "result.json").stat().st_mtime_ns == t
               for r, t in stamps.items())                  # reused, not rerun
    monkeypatch.setattr(experiments, "studies", lambda p: _tiny_studies(p, steps=12))
    with pytest.raises(ValueError, match=r"holds a reproduction whose run 'mlp/fp32/s0' was "
                                         r"planned with another config \(differs in: "
                                         r"budget.eval_every, budget.steps, checkpoint.every\)"):
        _reproduce(out)
    assert all((out / "runs" / r / "result.json").stat().st_mtime_ns == t
               for r, t in stamps.items())


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"],
     "--workers sets the size of the local cluster"),
    (["--scheduler", "tcp://127.0.0.1"], "not an address of the form tcp://host:port"),
    (["--scheduler", "tcp://127.0.0.1:{port}"], "cannot connect to 127.0.0.1:{port}"),
])
def test_cli_errors(args, message, tmp_path, capsys):
    port = _closed_port()
    args = [a.format(port=port) for a in args]
    code = main(["reproduce", "--quick", "--only", "mlp", "--out", str(tmp_path / "x"),
                 "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message.format(port=port) in err
    assert len(err.strip().splitlines()) == 1
