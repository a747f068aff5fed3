"""models.config / models.schema: defaults, the three precision spellings (own block, apex
opt_level, DeepSpeed fp16/bf16 blocks), and errors that name the key and the accepted values;
models.checkpoint: atomic writes and a loader that refuses code."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

from models import checkpoint as ckpt
from models.config import ConfigError, load_config, resolve_config

MLP = {"model": {"type": "mlp"}}


def test_defaults_are_complete():
    cfg = resolve_config(MLP)
    assert cfg["precision"]["policy"] == "fp32"
    assert cfg["scaler"]["type"] == "none"
    assert cfg["model"]["hidden"] == [64, 64]
    assert cfg["optimizer"]["type"] == "sgd" and cfg["budget"]["steps"] == 200
    # resolving is idempotent
    assert resolve_config(cfg) == cfg


def test_apex_opt_levels():
    assert resolve_config({**MLP, "opt_level": "O2"})["scaler"]["type"] == "apex"
    assert resolve_config({**MLP, "opt_level": "O1"})["precision"]["policy"] == "O1"
    o3 = resolve_config({**MLP, "opt_level": "O3"})
    assert (o3["precision"]["policy"], o3["scaler"]["type"]) == ("O3", "none")
    explicit = resolve_config({**MLP, "opt_level": "O2", "scaler": {"type": "static", "scale": 8}})
    assert explicit["scaler"]["type"] == "static" and explicit["scaler"]["scale"] == 8.0


def test_deepspeed_blocks():
    cfg = resolve_config({**MLP, "fp16": {"enabled": True, "initial_scale_power": 12,
                                          "loss_scale_window": 100, "hysteresis": 3}})
    assert cfg["precision"]["policy"] == "O2"
    s = cfg["scaler"]
    assert (s["type"], s["init_scale"], s["growth_interval"], s["hysteresis"]) == \
        ("deepspeed", 4096.0, 100, 3)
    static = resolve_config({**MLP, "fp16": {"enabled": True, "loss_scale": 128}})["scaler"]
    assert (static["type"], static["scale"]) == ("static", 128.0)
    bf = resolve_config({**MLP, "bf16": {"enabled": True}})
    assert (bf["precision"]["policy"], bf["scaler"]["type"]) == ("bf16", "none")


@pytest.mark.parametrize("raw, fragment", [
    ({}, "model: required"),
    ({"model": {"type": "resnet"}}, "model.type: 'resnet' is not accepted; accepted values: 'mlp'"),
    ({"model": {"type": "mlp", "hiden": [3]}}, "model.hiden: unknown key (did you mean 'hidden'?)"),
    ({**MLP, "optimizer": {"lr": -1}}, "optimizer.lr: must be > 0.0"),
    ({**MLP, "optimizer": {"lr": "0.1"}}, "optimizer.lr: must be a number, got string"),
    ({**MLP, "optimizer": {"type": "rmsprop"}}, "optimizer.type: 'rmsprop' is not accepted"),
    ({**MLP, "optimizer": {"betas": [0.9]}}, "optimizer.betas: must have exactly 2"),
    ({**MLP, "budget": {"steps": 0}}, "budget.steps: must be >= 1"),
    ({**MLP, "budget": {"steps": True}}, "budget.steps: must be an integer, got boolean"),
    ({**MLP, "scaler": {"type": "dynamic", "growth_factor": 1.0}}, "scaler.growth_factor"),
    ({**MLP, "fp16": {"enabled": True, "hysterisis": 2}}, "fp16.hysterisis: unknown key"),
    ({**MLP, "opt_level": "O4"}, "opt_level: 'O4' is not accepted"),
    ({**MLP, "opt_level": "O2", "bf16": {"enabled": True}}, "precision: conflicting choices"),
    ({**MLP, "fp16": {"enabled": True}, "precision": {"policy": "O3"}}, "conflicting"),
    ({**MLP, "data": {"name": "python_text"}}, "data.name: 'python_text' does not fit"),
    ({"model": {"type": "lstm"}}, "data.name: 'digits' does not fit model.type 'lstm'"),
    ({**MLP, "data": {"name": "mnist"}}, "data.path: required"),
    ({"model": {"type": "transformer", "d_model": 30, "heads": 4},
      "data": {"name": "python_text"}}, "model.heads: 4 must divide"),
    ({**MLP, "precision": {"policy": "O0", "tensor_core": "v100"}}, "precision.tensor_core"),
    ({**MLP, "optimizer": {"master_weights": False}}, "optimizer.master_weights"),
    ({**MLP, "typo_section": {}}, "typo_section: unknown key; accepted keys in config"),
    ({**MLP, "data": []}, "data: must be an object"),
    ([], "config must be a JSON object"),
])
def test_bad_configs_name_the_key(raw, fragment):
    with pytest.raises(ConfigError) as info:
        resolve_config(raw)
    assert fragment in str(info.value)


def test_load_config_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config(tmp_path / "none.json")
    p = tmp_path / "bad.json"
    p.write_text("{ not json")
    with pytest.raises(ConfigError, match="bad.json: not valid JSON"):
        load_config(p)
    p.write_text(json.dumps({**MLP, "optimizer": {"lr": 0}}))
    with pytest.raises(ConfigError, match=r"bad.json: optimizer.lr"):
        load_config(p)
    p.write_text(json.dumps({**MLP, "seed": 5}))
    assert load_config(p)["seed"] == 5


def _state():
    rng = np.random.default_rng(7)
    return {"step": 12, "w": [rng.normal(size=(3, 4)).astype(np.float32),
                              np.array([np.nan, -0.0, 65504], dtype=np.float16)],
            "rng": rng.bit_generator.state, "scale": 32768.0, "none": None, "t": (1, "x")}


def test_checkpoint_roundtrip_is_bitwise(tmp_path):
    s = _state()
    path = ckpt.save_checkpoint(tmp_path / "sub" / "c.ckpt", s)
    back = ckpt.load_checkpoint(path)
    assert ckpt.arrays_equal(s, back)
    assert not ckpt.arrays_equal(s, {**back, "scale": 16384.0})
    assert os.listdir(tmp_path / "sub") == ["c.ckpt"]


def test_interrupted_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.ckpt"
    ckpt.save_checkpoint(path, _state())
    before = path.read_bytes()

    def interrupted(obj, fh, protocol=None):
        fh.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.pickle, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(path, {"step": 13})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.ckpt"]  # the temporary file was removed


def test_checkpoint_loader_refuses_code_and_garbage(tmp_path):
    evil = tmp_path / "evil.ckpt"
    evil.write_bytes(pickle.dumps({"magic": "mpemu-checkpoint", "version": 1,
                                   "state": {"f": os.getcwd}}))
    with pytest.raises(ckpt.CheckpointError, match="not an allowed type"):
        ckpt.load_checkpoint(evil)
    trunc = tmp_path / "trunc.ckpt"
    ckpt.save_checkpoint(trunc, _state())
    trunc.write_bytes(trunc.read_bytes()[:40])
    with pytest.raises(ckpt.CheckpointError, match="trunc.ckpt: not a readable checkpoint"):
        ckpt.load_checkpoint(trunc)
    other = tmp_path / "other.ckpt"
    other.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ckpt.CheckpointError, match="not an mpemu checkpoint"):
        ckpt.load_checkpoint(other)
    with pytest.raises(FileNotFoundError):
        ckpt.load_checkpoint(tmp_path / "missing.ckpt")


# ---- Tensor Core models and formats, data.path, duplicate keys (issue 18, item 14) ------------

def _tc_cases():
    from softfloat import tensorcore as tc

    from models.config import TENSOR_CORES

    out = []
    for policy, fmt in (("O1", "fp16"), ("O2", "fp16"), ("O3", "fp16"), ("bf16", "bf16")):
        for model in TENSOR_CORES:
            if model in ("default", "native"):
                continue
            acc = "fp16" if model == "ideal-fp16" else "fp32"
            out.append((policy, model, (fmt, acc) in tc.list_models()[model]))
    return out


@pytest.mark.parametrize("policy, model, takes", _tc_cases())
def test_tensor_core_model_must_take_the_policy_format(policy, model, takes):
    raw = {**MLP, "precision": {"policy": policy, "tensor_core": model}}
    if takes:
        assert resolve_config(raw)["precision"]["tensor_core"] == model
        return
    with pytest.raises(ConfigError) as info:
        resolve_config(raw)
    msg = str(info.value)
    assert msg.startswith(f"precision.tensor_core: Tensor Core model {model!r} cannot take the "
                          f"{'bf16' if policy == 'bf16' else 'fp16'} inputs")
    assert "models that take bf16 -> fp32: ideal-fp32, a100, ada, h100, b200" in msg or \
        policy != "bf16"


def test_bf16_with_v100_is_rejected_like_other_config_errors(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({**MLP, "bf16": {"enabled": True},
                             "precision": {"tensor_core": "v100"}}))
    with pytest.raises(ConfigError, match=r"c.json: precision.tensor_core: Tensor Core model "
                                          r"'v100' cannot take the bf16 inputs"):
        load_config(p)


@pytest.mark.parametrize("name", ["digits", "blobs"])
def test_data_path_for_a_builtin_dataset_is_an_error(name):
    with pytest.raises(ConfigError, match=rf"data.path: given for data.name '{name}', which is "
                                          r"built in"):
        resolve_config({**MLP, "data": {"name": name, "path": "data/mnist"}})
    assert resolve_config({**MLP, "data": {"name": "mnist", "path": "x"}})["data"]["path"] == "x"


@pytest.mark.parametrize("text, key", [
    ('{"model": {"type": "mlp"}, "seed": 1, "seed": 2}', "seed"),
    ('{"model": {"type": "mlp"}, "optimizer": {"lr": 0.1, "type": "sgd", "lr": 0.2}}', "lr"),
])
def test_duplicate_json_keys_are_an_error(tmp_path, text, key):
    p = tmp_path / "dup.json"
    p.write_text(text)
    with pytest.raises(ConfigError, match=rf"dup.json: duplicate key '{key}' in one JSON object"):
        load_config(p)


# ---- DeepSpeed's fp16 block: one translation (scalers.config), two users --------------------

@pytest.mark.parametrize("block", [
    {"enabled": True},
    {"enabled": True, "loss_scale": 128},
    {"enabled": True, "initial_scale_power": 12, "loss_scale_window": 7, "hysteresis": 3,
     "consecutive_hysteresis": True, "min_loss_scale": 2},
])
def test_fp16_block_gives_the_scaler_from_deepspeed_config_gives(block):
    from models.build import make_scaler
    from scalers import from_deepspeed_config

    ours = make_scaler(resolve_config({**MLP, "fp16": block}))
    theirs = from_deepspeed_config({"fp16": block})
    assert type(ours) is type(theirs)
    assert ours.state_dict() == theirs.state_dict()


@pytest.mark.parametrize("block, fragment", [
    ({"enabled": True, "hysteresis": 0}, "fp16.hysteresis: must be an integer >= 1"),
    ({"enabled": True, "initial_scale_power": 0, "min_loss_scale": 4},
     "fp16.initial_scale_power: 0 gives 2^0 = 1.0, below fp16.min_loss_scale 4.0"),
])
def test_fp16_block_errors_come_from_scalers_config(block, fragment):
    from scalers.config import fp16_scaler_args

    with pytest.raises(ConfigError, match=fragment.replace("^", r"\^")):
        resolve_config({**MLP, "fp16": block})
    with pytest.raises(ValueError, match=fragment.replace("^", r"\^")):
        fp16_scaler_args(block)

