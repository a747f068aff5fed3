"""models.trainer: a tiny-budget end-to-end run of every configuration of the study, bit-identical
resume from a checkpoint, Ctrl-C leaving the last checkpoint intact, and the measurements the
report relies on (the fp32-neutral loss multiplier, lost updates, gradient underflow)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

import autograd
from models import checkpoint as ckpt
from models.config import load_config
from models.idx import write_idx
from models.repro.studies import studies, variant_config
from models.trainer import CHECKPOINT, Trainer

QUICK = {s["key"]: s for s in studies("quick")}
FULL = {s["key"]: s for s in studies("full")}
CONFIGS = Path(__file__).resolve().parents[1] / "models" / "configs"


@pytest.fixture(autouse=True, scope="module")
def _one_numba_thread():
    """These small arrays gain nothing from threads; on a busy machine thread start-up
    dominates (the CLI makes the same choice)."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    with threadpool_limits(1):
        yield
    numba.set_num_threads(old)


def _tiny(cfg, steps=2):
    cfg = copy.deepcopy(cfg)
    cfg["budget"].update(steps=steps, eval_every=steps, eval_batches=1)
    cfg["instrument"] = {"histogram_every": 1, "histogram_steps": [], "lost_updates": True}
    if cfg["data"]["name"] == "python_text":
        cfg["data"].update(max_chars=12_000, seq_len=6, batch_size=4)
    else:
        cfg["data"]["batch_size"] = 8
    return cfg


def _cases():
    out = [(key, v) for key in ("mlp", "master", "scalers") for v in FULL[key]["variants"]]
    out += [("cnn", v) for v in ("fp32", "o3", "master_noscale", "static", "dynamic",
                                 "deepspeed", "lognormal", "o1", "bf16", "dfp16", "tc_v100")]
    out += [(k, v) for k in ("lstm", "transformer")
            for v in ("fp32", "o3", "master_noscale", "dynamic", "bf16", "dfp16", "tc_v100")]
    return out


@pytest.mark.parametrize("study, variant", _cases())
def test_every_configuration_runs(study, variant):
    label, cfg = variant_config(FULL[study], variant)
    r = Trainer(_tiny(cfg), progress=False, label=label).fit()
    f = r["final"]
    assert f["steps"] == 2 and f["failure"] is None
    assert len(r["history"]["loss"]) == 2 and np.isfinite(r["history"]["loss"]).all()
    assert r["history"]["eval_step"] == [0, 2]
    assert set(r["histograms"]) == {"weight_grad", "activation_grad"}
    assert r["histograms"]["weight_grad"]["samples"] > 0
    scaler = cfg.get("scaler", {}).get("type")
    if scaler == "static":
        assert f["final_scale"] == cfg["scaler"]["scale"]
    if variant in ("dynamic", "deepspeed", "o1") or variant.startswith("tc_"):
        assert r["history"]["scale"][0] == 65536.0
    if variant in ("spk_dynamic", "spk_deepspeed"):
        assert r["history"]["scale"][0] == 1024.0
    if variant in ("lognormal", "spk_lognormal"):
        assert r["history"]["scale"][0] == 1.0


@pytest.mark.parametrize("scaler, scales", [
    ({"type": "dynamic", "growth_interval": 100}, [2.0 ** 10, 2.0 ** 9, 2.0 ** 8, 2.0 ** 8]),
    ({"type": "deepspeed", "hysteresis": 2, "growth_interval": 100},
     [2.0 ** 10, 2.0 ** 10, 2.0 ** 9, 2.0 ** 9]),
    ({"type": "static", "scale": 2.0 ** 10}, [2.0 ** 10] * 4),
])
def test_injected_overflows_are_skipped(scaler, scales):
    cfg = {"model": {"type": "mlp", "hidden": [8]}, "data": {"batch_size": 8},
           "precision": {"policy": "O2", "tensor_core": "native"},
           "scaler": {**scaler, "init_scale": 1024.0},
           "instrument": {"inject_overflow_steps": [0, 1]},
           "budget": {"steps": 4, "eval_every": 4, "eval_batches": 1}}
    t = Trainer(cfg, progress=False)
    before = [p.data.copy() for p in t.params]
    t.train_step()
    assert all(np.array_equal(b, p.data) for b, p in zip(before, t.params))  # skipped
    for _ in range(3):
        t.train_step()
    assert t.history["skipped"] == [True, True, False, False]
    assert t.history["scale"] == scales


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the Backoff scaler starts
def test_gru_and_blobs_and_adamw():  # at 2^24: its first steps overflow (inf - inf) and skip
    cfg = {"model": {"type": "gru", "hidden": 8, "embed": 4},
           "data": {"name": "synthetic_text", "max_chars": 3000, "seq_len": 5, "batch_size": 3},
           "optimizer": {"type": "adamw", "lr": 1e-2, "weight_decay": 0.01},
           "opt_level": "O2", "scaler": {"type": "backoff", "growth_interval": 2},
           "budget": {"steps": 3, "eval_every": 3, "eval_batches": 1}}
    r = Trainer(cfg, progress=False).fit()
    assert r["final"]["steps"] == 3 and r["metric"] == "bits per char"
    cnn = {"model": {"type": "cnn", "channels": [2], "hidden": 4},
           "data": {"name": "blobs", "dim": 16, "n": 64, "batch_size": 8},
           "bf16": {"enabled": True}, "budget": {"steps": 2, "eval_every": 2}}
    assert Trainer(cnn, progress=False).fit()["final"]["steps"] == 2


def _resume_case(cfg, tmp_path, total=6, cut=3):
    a = Trainer(cfg, progress=False)
    for _ in range(total):
        a.train_step()
    b = Trainer(cfg, run_dir=str(tmp_path), progress=False)
    for _ in range(cut):
        b.train_step()
    b.save()
    c = Trainer(cfg, run_dir=str(tmp_path), progress=False)
    assert c.resume() == cut
    for _ in range(total - cut):
        c.train_step()
    sa, sc = a.state_dict(), c.state_dict()
    sa.pop("wall_s"), sc.pop("wall_s")
    return sa, sc


@pytest.mark.parametrize("name, cfg", [
    ("O2 Adam dynamic", {"model": {"type": "mlp", "hidden": [16]},
                         "optimizer": {"type": "adam", "lr": 1e-2},
                         "precision": {"policy": "O2", "tensor_core": "native"},
                         "scaler": {"type": "dynamic", "growth_interval": 2}}),
    ("no master, stochastic rounding, lognormal",
     {"model": {"type": "mlp", "hidden": [16]}, "precision": {"policy": "O2",
                                                              "tensor_core": "native"},
      "optimizer": {"master_weights": False, "stochastic_rounding": True, "momentum": 0.9},
      "scaler": {"type": "lognormal"}}),
    ("CNN batch-norm fp32 groups, DeepSpeed", {
        "model": {"type": "cnn", "channels": [4], "hidden": 8},
        "fp16": {"enabled": True, "loss_scale_window": 2},
        "precision": {"tensor_core": "native"}}),
    ("transformer SR policy", {
        "model": {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 8},
        "data": {"name": "synthetic_text", "max_chars": 3000, "seq_len": 5, "batch_size": 3},
        "precision": {"policy": "O2", "tensor_core": "native"},
        "optimizer": {"type": "adam", "lr": 1e-2}, "scaler": {"type": "static", "scale": 8}}),
])
def test_resume_is_bit_identical(tmp_path, name, cfg):
    cfg = {**cfg, "data": {"batch_size": 8, **cfg.get("data", {})},
           "instrument": {"histogram_every": 2}}
    sa, sc = _resume_case(cfg, tmp_path)
    assert ckpt.arrays_equal(sa, sc), name
    assert sa["step"] == 6 and len(sa["history"]["loss"]) == 6


def test_resume_through_fit_and_config_guard(tmp_path):
    cfg = {"model": {"type": "mlp", "hidden": [8]}, "checkpoint": {"every": 2},
           "precision": {"policy": "O2", "tensor_core": "native"},
           "scaler": {"type": "dynamic", "growth_interval": 3},
           "budget": {"steps": 4, "eval_every": 2, "eval_batches": 1}}
    whole = Trainer({**cfg, "budget": {**cfg["budget"], "steps": 7}}, progress=False).fit()
    Trainer(cfg, run_dir=str(tmp_path), progress=False).fit()
    more = Trainer({**cfg, "budget": {**cfg["budget"], "steps": 7}}, run_dir=str(tmp_path),
                   progress=False)
    more.resume()
    r = more.fit()
    assert r["history"]["loss"] == whole["history"]["loss"]
    assert r["history"]["scale"] == whole["history"]["scale"]
    assert r["final"]["eval_loss"] == whole["final"]["eval_loss"]
    other = Trainer({**cfg, "seed": 1}, run_dir=str(tmp_path), progress=False)
    with pytest.raises(ValueError, match="differs in: seed"):
        other.resume()


def test_ctrl_c_leaves_last_checkpoint(tmp_path, monkeypatch):
    cfg = {"model": {"type": "mlp", "hidden": [8]}, "checkpoint": {"every": 2},
           "budget": {"steps": 10, "eval_every": 10, "eval_batches": 1}}
    t = Trainer(cfg, run_dir=str(tmp_path), progress=False)
    real = t.train_step

    def interrupted():
        if t.step_no == 5:
            raise KeyboardInterrupt
        return real()

    monkeypatch.setattr(t, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        t.fit()
    state = ckpt.load_checkpoint(tmp_path / CHECKPOINT)
    assert state["step"] == 4
    assert t.interrupt_message() == (f"interrupted at step 5; the checkpoint of step 4 is in "
                                     f"{tmp_path / CHECKPOINT} (resume continues from step 4)")
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT, "config.json"]


def test_loss_multiplier_leaves_fp32_bit_identical():
    base = {"model": {"type": "mlp", "hidden": [16]}, "optimizer": {"lr": 0.05, "momentum": 0.9},
            "budget": {"steps": 5, "eval_every": 5, "eval_batches": 1}}
    plain = Trainer(base, progress=False)
    scaled = Trainer({**base, "precision": {"loss_multiplier": 2.0 ** -17},
                      "optimizer": {"lr": 0.05 * 2 ** 17, "momentum": 0.9}}, progress=False)
    for _ in range(5):
        plain.train_step()
        scaled.train_step()
    assert ckpt.arrays_equal(plain.model.state_dict(), scaled.model.state_dict())


def test_lost_updates_and_underflow_are_measured():
    master = QUICK["master"]
    runs = {}
    for v in ("nomaster", "master"):
        cfg = _tiny(variant_config(master, v)[1], steps=4)
        runs[v] = Trainer(cfg, progress=False).fit()["final"]
    assert runs["nomaster"]["lost_update_fraction"] > 0.3
    assert runs["master"]["lost_update_fraction"] < 0.05
    mlp = QUICK["mlp"]
    zero = {}
    # the amplification device (loss x2^-17) makes the unscaled fp16 gradients underflow
    for v in ("amp_fp32", "amp_master_noscale", "amp_static"):
        cfg = _tiny(variant_config(mlp, v)[1], steps=2)
        zero[v] = Trainer(cfg, progress=False).fit()["final"]["grad_zero_fraction"]
    assert zero["amp_master_noscale"] > zero["amp_fp32"] + 0.1
    assert abs(zero["amp_static"] - zero["amp_fp32"]) < 0.1


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.json")))
def test_example_configs_train(name, tmp_path):
    cfg = load_config(CONFIGS / name)
    if cfg["data"]["name"] == "mnist":
        rng = np.random.default_rng(0)
        for split, n in (("train", 40), ("t10k", 20)):
            write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz",
                      rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
            write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz",
                      rng.integers(0, 10, n, dtype=np.uint8))
        cfg["data"].update(path=str(tmp_path), batch_size=8)
    r = Trainer(_tiny(cfg, steps=1), progress=False).fit()
    assert r["final"]["steps"] == 1 and r["final"]["failure"] is None


def test_resume_from_a_checkpoint_of_the_older_rng_layout():
    """Checkpoints written before autograd.get_rng_state kept the generator's state under
    "engine_rng" and the SR call count under "sr_calls": they still resume bit-identically
    (the engine's random state is global: a runs to the end before b resumes)."""
    cfg = {"model": {"type": "mlp", "hidden": [16]},
           "precision": {"policy": "O2", "tensor_core": "native"},
           "optimizer": {"master_weights": False, "stochastic_rounding": True},
           "data": {"batch_size": 8}}
    a = Trainer(cfg, progress=False)
    for _ in range(3):
        a.train_step()
    old = copy.deepcopy(a.state_dict())     # (a's lists go on growing)
    rng = old.pop("engine_rng")
    old["engine_rng"], old["sr_calls"] = rng["generator"], rng["sr_calls"]
    for _ in range(3):
        a.train_step()
    sa = a.state_dict()
    b = Trainer(cfg, progress=False)
    b.load_state_dict(old)
    assert autograd.get_rng_state() == rng
    for _ in range(3):
        b.train_step()
    sb = b.state_dict()
    sa.pop("wall_s"), sb.pop("wall_s")
    assert ckpt.arrays_equal(sa, sb)
