"""models.cli: train / resume / histogram on a tiny config, errors that name the key or file
(exit code 2), a tiny ``reproduce`` writing report.md, results.json and the figures, and
``python -m models``."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

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
