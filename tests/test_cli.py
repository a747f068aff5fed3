"""models.cli: train / resume / histogram on a tiny config, errors that name the key or file
(exit code 2), a tiny ``reproduce`` writing report.md, results.json and the figures, and
``python -m models``."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from models.repro import experiments
from models.repro import studies as studies_mod
from models.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True, scope="module")
def _one_numba_thread():
    """Small arrays gain nothing from threads (the CLI makes the same choice)."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    with threadpool_limits(1):
        yield
    numba.set_num_threads(old)


def _config(tmp_path, **extra):
    cfg = {"name": "tiny", "model": {"type": "mlp", "hidden": [8]},
           "data": {"batch_size": 16}, "opt_level": "O2",
           "precision": {"tensor_core": "native", "loss_multiplier": 2.0 ** -10},
           "scaler": {"type": "dynamic", "growth_interval": 2},
           "budget": {"steps": 4, "eval_every": 2, "eval_batches": 1},
           "checkpoint": {"every": 2}, "instrument": {"histogram_every": 2}, **extra}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    return path


def test_train_resume_histogram(tmp_path, capsys):
    cfg = _config(tmp_path)
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tiny: train loss" in out and str(run) in out
    assert {"config.json", "history.json", "checkpoint.ckpt"} <= set(os.listdir(run))
    hist = json.loads((run / "history.json").read_text())
    assert hist["final"]["steps"] == 4 and len(hist["history"]["loss"]) == 4
    assert main(["train", "--config", str(cfg), "--out", str(run), "--resume", "--steps", "6",
                 "--no-progress"]) == 0
    hist = json.loads((run / "history.json").read_text())
    assert hist["final"]["steps"] == 6 and hist["history"]["step"] == list(range(6))
    capsys.readouterr()
    assert main(["histogram", str(run), "--scale-log2", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "after x2^10" in lines[0]
    assert (run / "hist_weight_grad.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "hist_activation_grad.png").exists()


@pytest.mark.parametrize("change, fragment", [
    ({"optimizer": {"lr": -1.0}}, "optimizer.lr: must be > 0.0"),
    ({"scaler": {"type": "magic"}}, "scaler.type: 'magic' is not accepted"),
    ({"modle": {}}, "modle: unknown key (did you mean 'model'?)"),
])
def test_bad_config_exit_code_and_message(tmp_path, capsys, change, fragment):
    cfg = _config(tmp_path, **change)
    assert main(["train", "--config", str(cfg), "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "cfg.json" in err


def test_missing_files_exit_code(tmp_path, capsys):
    assert main(["train", "--config", str(tmp_path / "none.json")]) == 2
    assert "config file not found" in capsys.readouterr().err
    assert main(["histogram", str(tmp_path)]) == 2
    assert "history.json" in capsys.readouterr().err
    cfg = _config(tmp_path)
    assert main(["train", "--config", str(cfg), "--out", str(tmp_path / "fresh"), "--resume",
                 "--no-progress"]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    assert main(["reproduce", "--quick", "--only", "resnet", "--out", str(tmp_path)]) == 2
    assert "accepted: mlp, master" in capsys.readouterr().err


def _tiny_studies(profile):
    out = []
    for s in studies_mod.studies(profile):
        if s["key"] not in ("mlp", "master"):
            continue
        s = copy.deepcopy(s)
        s["base"]["budget"].update(steps=3, eval_every=3, eval_batches=1)
        s["base"]["instrument"]["histogram_every"] = 1 if s["key"] == "mlp" else 0
        if s["key"] == "mlp":
            s["variants"] = ["fp32", "master_noscale", "static_8", "dynamic", "bf16", "tc_v100",
                             "amp_master_noscale"]
        out.append(s)
    return out


def test_reproduce_writes_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(experiments, "studies", _tiny_studies)
    out = tmp_path / "demo"
    assert main(["reproduce", "--quick", "--out", str(out), "--no-progress"]) == 0
    assert f"report written to {out / 'report.md'}" in capsys.readouterr().out
    files = set(os.listdir(out))
    assert {"report.md", "results.json", "loss_mlp.png", "scale_mlp.png", "hist_mlp.png",
            "window_mlp.png", "layers_mlp.png", "loss_master.png"} <= files
    md = (out / "report.md").read_text()
    for fragment in ("## Natural scale at a glance", "## Findings",
                     "## MLP on handwritten digits", "| fp32 |",
                     "fp16 + master, static scale 2^8", "### The loss-scale window",
                     "![Loss curves", "Table 1 [T]", "loss x2^-17"):
        assert fragment in md, fragment
    res = json.loads((out / "results.json").read_text())
    assert "underflow_natural" in [f["claim"] for f in res["findings"]]
    assert res["seeds"] == [0, 1, 2]
    assert len(res["models"]) == 2 and len(res["models"][0]["configs"]) == 7
    static = res["models"][0]["configs"][2]
    assert static["key"] == "static_8" and static["stats"]["final_scale"]["mean"] == 256.0


def test_python_dash_m_help():
    proc = subprocess.run([sys.executable, "-m", "models", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0
    assert "reproduce" in proc.stdout and "histogram" in proc.stdout


# ---- mpemu --version (issue 18, item 10) ------------------------------------------------------

def _setup_cfg_version():
    import configparser

    cp = configparser.ConfigParser()
    cp.read(os.path.join(ROOT, "setup.cfg"), encoding="utf-8")
    return cp.get("metadata", "version")


def test_version_from_python_dash_m_and_the_console_script():
    want = f"mpemu {_setup_cfg_version()}"
    proc = subprocess.run([sys.executable, "-m", "models", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == want
    script = os.path.join(os.path.dirname(sys.executable), "mpemu")
    if os.path.exists(script):            # installed (make install): the console script too
        proc = subprocess.run([script, "--version"], capture_output=True, text=True,
                              timeout=120, check=True)
        assert proc.stdout.strip() == want


def test_version_falls_back_to_setup_cfg_in_a_source_tree(monkeypatch):
    from importlib import metadata

    from models.cli import package_version

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert package_version() == _setup_cfg_version()


# ---- run directories: refuse, --overwrite, --out a file (item 11) -----------------------------

def test_existing_run_needs_resume_or_overwrite(tmp_path, capsys):
    cfg = _config(tmp_path, budget={"steps": 2, "eval_every": 2, "eval_batches": 1})
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    (run / "hist_weight_grad.png").write_bytes(b"old figure")
    (run / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"run directory {run} already holds a run" in err
    assert "--resume" in err and "--overwrite" in err and "Traceback" not in err
    assert main(["train", "--config", str(cfg), "--out", str(run), "--resume", "--overwrite",
                 "--no-progress"]) == 2
    assert "give one or the other" in capsys.readouterr().err
    before = (run / "checkpoint.ckpt").stat().st_mtime_ns
    assert main(["train", "--config", str(cfg), "--out", str(run), "--overwrite",
                 "--no-progress"]) == 0
    assert sorted(os.listdir(run)) == ["checkpoint.ckpt", "config.json", "history.json",
                                       "notes.txt"]        # the old figure is gone, notes kept
    assert (run / "checkpoint.ckpt").stat().st_mtime_ns >= before


def test_overwrite_refuses_a_directory_that_is_not_a_run(tmp_path, capsys):
    cfg = _config(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    (other / "hist_x.png").write_bytes(b"not ours")
    assert main(["train", "--config", str(cfg), "--out", str(other), "--overwrite",
                 "--no-progress"]) == 2
    assert "does not look like a run directory" in capsys.readouterr().err
    assert sorted(os.listdir(other)) == ["hist_x.png", "thesis.tex"]


def test_overwrite_keeps_the_old_run_when_the_new_one_cannot_start(tmp_path, capsys):
    cfg = _config(tmp_path, budget={"steps": 1, "eval_every": 1, "eval_batches": 1})
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    before = sorted(os.listdir(run))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model": {"type": "mlp"},
                               "data": {"name": "mnist", "path": str(tmp_path / "none")}}))
    assert main(["train", "--config", str(bad), "--out", str(run), "--overwrite",
                 "--no-progress"]) == 2
    assert "data directory not found" in capsys.readouterr().err
    assert sorted(os.listdir(run)) == before


def test_out_naming_a_file_is_a_clear_error(tmp_path, capsys):
    cfg = _config(tmp_path)
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["train", "--config", str(cfg), "--out", str(f), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--out {f} is a file, not a directory" in err and "Traceback" not in err


# ---- a failed run exits non-zero (item 12) ----------------------------------------------------

@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("multiplier, fragment", [
    (1.0, "training stopped early (weights became non-finite at step 0); history.json and the "
          "checkpoint in"),
    # the loss multiplier 2^-10 keeps the fp16 weights finite, the loss still turns NaN
    (2.0 ** -10, "the run diverged: the training loss over its last tenth of steps is not "
                 "finite (nan)"),
])
def test_failed_runs_exit_with_code_3(tmp_path, capsys, multiplier, fragment):
    cfg = _config(tmp_path, opt_level="O3", scaler={"type": "none"}, optimizer={"lr": 1e8},
                  precision={"tensor_core": "native", "loss_multiplier": multiplier},
                  instrument={"histogram_every": 0})
    assert main(["train", "--config", str(cfg), "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 3
    assert fragment in capsys.readouterr().err


# ---- Ctrl-C: what was saved, how to resume; --resume --steps N (item 13) ----------------------

def _interrupt_at(monkeypatch, step):
    from models.trainer import Trainer

    real = Trainer.train_step

    def train_step(self):
        if self.step_no == step:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(Trainer, "train_step", train_step)


def test_ctrl_c_says_what_was_saved_and_resume_agrees(tmp_path, capsys, monkeypatch):
    cfg = _config(tmp_path, budget={"steps": 6, "eval_every": 3, "eval_batches": 1})
    run = tmp_path / "run"
    _interrupt_at(monkeypatch, 3)
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert (f"interrupted at step 3; the checkpoint of step 2 is in {run / 'checkpoint.ckpt'}"
            in err)
    assert f"continue with: mpemu train --config {cfg} --out {run} --resume" in err
    monkeypatch.undo()
    assert main(["train", "--config", str(cfg), "--out", str(run), "--resume", "--steps", "5",
                 "--no-progress"]) == 0
    hist = json.loads((run / "history.json").read_text())
    assert hist["config"]["budget"]["steps"] == hist["final"]["steps"] == 5
    assert hist["history"]["step"] == list(range(5))
    assert json.loads((run / "config.json").read_text())["budget"]["steps"] == 5
    capsys.readouterr()
    assert main(["train", "--config", str(cfg), "--out", str(run), "--resume", "--steps", "4",
                 "--no-progress"]) == 2
    assert "already at step 5" in capsys.readouterr().err


def test_ctrl_c_before_the_first_checkpoint_says_nothing_was_saved(tmp_path, capsys,
                                                                    monkeypatch):
    cfg = _config(tmp_path)
    _interrupt_at(monkeypatch, 1)
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "interrupted at step 1; nothing was saved (no checkpoint yet: the first was due at " \
           "step 2)" in err
    assert "--overwrite" in err and not (run / "checkpoint.ckpt").exists()


# ---- mpemu histogram (item 15) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def _hist_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hist")
    cfg = _config(tmp, budget={"steps": 3, "eval_every": 3, "eval_batches": 1})
    run = tmp / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    return run


def _with_final_scale(src, dst, scale):
    os.makedirs(dst, exist_ok=True)
    h = json.loads((src / "history.json").read_text())
    h["final"]["final_scale"] = scale
    (dst / "history.json").write_text(json.dumps(h))
    return h


def test_histogram_default_is_the_runs_final_scale(_hist_run, tmp_path, capsys):
    h = json.loads((_hist_run / "history.json").read_text())
    k = int(np.log2(h["final"]["final_scale"]))
    assert main(["histogram", str(_hist_run), "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(f"after x2^{k} (the run's final scale)" in line for line in lines)
    step_scale = int(np.log2(h["history"]["scale"][1]))
    assert main(["histogram", str(_hist_run), "--out", str(tmp_path), "--step", "1"]) == 0
    assert f"after x2^{step_scale} (step 1's scale)" in capsys.readouterr().out
    for scale, fragment in ((1.0, "after x2^0 (the run's final scale)"),       # no scaler
                            (32.0, "after x2^5 (the run's final scale)"),      # static 2^5
                            (1000.0, "after x2^10 (the run's final scale 1000, shown as the "
                                     "nearest power of two)")):               # LogNormal-like
        _with_final_scale(_hist_run, tmp_path / "fake", scale)
        assert main(["histogram", str(tmp_path / "fake")]) == 0
        assert fragment in capsys.readouterr().out
    _with_final_scale(_hist_run, tmp_path / "fake", 2.0 ** 40)
    assert main(["histogram", str(tmp_path / "fake")]) == 2
    assert "final scale 1.09951e+12 = 2^40 lies outside 2^0 .. 2^32" in capsys.readouterr().err


def test_histogram_format_and_scale_checks(_hist_run, tmp_path, capsys):
    assert main(["histogram", str(_hist_run), "--out", str(tmp_path), "--format", "bf16",
                 "--scale-log2", "3"]) == 0
    out = capsys.readouterr().out
    assert "-> 0 in bf16 unscaled" in out and "after x2^3 (--scale-log2)" in out
    assert (tmp_path / "hist_weight_grad_bf16.png").read_bytes()[:4] == b"\x89PNG"
    for fmt in ("e4m3fn", "e5m2", "tf32"):
        assert main(["histogram", str(_hist_run), "--out", str(tmp_path), "--format", fmt]) == 0
        assert f"-> 0 in {fmt} unscaled" in capsys.readouterr().out
    for k in ("33", "-1"):
        assert main(["histogram", str(_hist_run), "--scale-log2", k]) == 2
        assert "--scale-log2 must be an integer in 0..32" in capsys.readouterr().err
    assert main(["histogram", str(_hist_run), "--format", "fp12"]) == 2
    assert "unknown format 'fp12'" in capsys.readouterr().err
    assert main(["histogram", str(_hist_run), "--step", "99"]) == 2
    assert "history.json: step 99 is not in this run (steps 0..2)" in capsys.readouterr().err


def test_histogram_errors_name_the_file(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "history.json").write_text("{not json")
    assert main(["histogram", str(bad)]) == 2
    assert f"{bad / 'history.json'}: not valid JSON" in capsys.readouterr().err
    (bad / "history.json").write_text(json.dumps({"name": "x"}))
    assert main(["histogram", str(bad)]) == 2
    assert f"{bad / 'history.json'}: not a history.json written by 'mpemu train' (missing " \
           "final, history, histograms)" in capsys.readouterr().err
    (bad / "history.json").write_text(json.dumps({
        "name": "x", "final": {"final_scale": 1.0}, "history": {},
        "histograms": {"weight_grad": {"exp_min": 0}}}))
    assert main(["histogram", str(bad)]) == 2
    assert f"{bad / 'history.json'}: histograms.weight_grad is malformed" in \
        capsys.readouterr().err
    assert main(["histogram", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such directory" in capsys.readouterr().err
    old_layout = {"name": "w", "exp_min": -3, "counts": [1, 0, 2], "zeros": 1, "nonfinite": 0,
                  "samples": 2, "total": 4, "underflow_by_log2_scale": [0] * 33,
                  "overflow_by_log2_scale": [0] * 33}
    (bad / "history.json").write_text(json.dumps({
        "name": "x", "final": {"final_scale": 1.0}, "history": {},
        "histograms": {"weight_grad": old_layout}}))
    assert main(["histogram", str(bad), "--format", "bf16", "--out", str(tmp_path)]) == 2
    assert "weight_grad histogram was recorded for fp16 only, not bf16" in \
        capsys.readouterr().err
    assert main(["histogram", str(bad), "--out", str(tmp_path)]) == 0      # fp16 still draws


def test_histogram_help_names_history_json():
    proc = subprocess.run([sys.executable, "-m", "models", "histogram", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    text = " ".join(proc.stdout.split())
    assert "RUN_DIR/history.json" in text and "--format" in text and "final scale" in text
