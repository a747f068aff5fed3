"""models.sweep_spec: grid expansion, run ids, and one clear line (exit code 2) per bad spec.

No cluster is started here: every check happens before anything runs."""

from __future__ import annotations

import json
import os

import pytest

from models.cli import main
from models.sweep_exec import _check_runs
from models.sweep_spec import (SpecError, config_keys, load_spec, resolve_spec, run_ids,
                               short_names)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BASE = {"model": {"type": "mlp", "hidden": [8]}, "data": {"batch_size": 16},
        "precision": {"policy": "O2", "tensor_core": "native"}, "optimizer": {"lr": 0.1},
        "budget": {"steps": 4, "eval_every": 2, "eval_batches": 1}}


def _spec(**kw):
    return {"name": "t", "base": BASE, "grid": {"precision.policy": ["O2", "bf16"]}, **kw}


def test_grid_expands_in_order_with_readable_ids():
    spec = resolve_spec(_spec(grid={"precision.policy": ["O2", "bf16"],
                                    "scaler.type": ["none", "dynamic"], "seed": [0, 1]},
                              steps=3))
    assert len(spec.runs) == 8 and spec.keys == ["precision.policy", "scaler.type", "seed"]
    assert [r.id for r in spec.runs[:3]] == [
        "policy=O2,scaler=none,seed=0", "policy=O2,scaler=none,seed=1",
        "policy=O2,scaler=dynamic,seed=0"]
    last = spec.runs[-1]
    assert last.values == {"precision.policy": "bf16", "scaler.type": "dynamic", "seed": 1}
    c = last.config
    assert (c["precision"]["policy"], c["scaler"]["type"], c["seed"]) == ("bf16", "dynamic", 1)
    assert c["budget"]["steps"] == 3 and c["budget"]["eval_every"] == 2   # steps overrides
    assert c["name"] == last.id and c["optimizer"]["lr"] == 0.1          # base kept


def test_repeat_numbers_seeds_from_the_base_seed(tmp_path):
    (tmp_path / "base.json").write_text(json.dumps({**BASE, "seed": 5}))
    spec = resolve_spec(_spec(base={"config": "base.json"}, repeat=3), root=str(tmp_path))
    assert spec.keys == ["precision.policy", "seed"]
    assert [r.config["seed"] for r in spec.runs] == [5, 6, 7, 5, 6, 7]
    assert spec.runs[4].id == "policy=bf16,seed=6"


def test_ids_are_safe_and_unique():
    keys = ["scaler.type", "model.type", "data.path"]
    assert short_names(keys) == ["scaler", "model", "path"]
    assert short_names(["optimizer.lr", "scaler.lr"]) == ["optimizer.lr", "scaler.lr"]
    combos = [{"scaler.type": "none", "model.type": "mlp", "data.path": p}
              for p in ("a/b", "a_b", "A_B", "x" * 300)]
    ids = run_ids(keys, combos)
    # "a/b" and "a_b" both become "a_b", and "A_B" equals them ignoring case: hashes added
    assert ids[0].startswith("scaler=none,model=mlp,path=a_b~")
    assert ids[1].startswith("scaler=none,model=mlp,path=a_b~") and ids[1] != ids[0]
    assert ids[2].startswith("scaler=none,model=mlp,path=A_B~")
    assert len(ids[3]) == 200 and ids[3].startswith("scaler=none,model=mlp,path=xxx")
    assert len({i.lower() for i in ids}) == 4
    assert all(set(i) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                             "._+-=,~") for i in ids)
    assert run_ids(["model.hidden", "optimizer.lr"],
                   [{"model.hidden": [16, 8], "optimizer.lr": 1e-3}]) == ["hidden=16-8,lr=0.001"]


def test_every_config_key_can_be_a_grid_key():
    keys = config_keys()
    assert {"precision.policy", "scaler.type", "seed", "optimizer.lr", "model.hidden",
            "model.type", "budget.steps", "fp16.enabled"} <= set(keys)
    assert "name" not in keys and keys["model.hidden"] is None   # list for mlp, int for cnn


def test_executor_refuses_unsafe_or_repeated_ids():
    cfg = {**BASE, "name": "x"}
    for bad in ("../x", "a b", "a//b", "", "./x"):
        with pytest.raises(ValueError, match="run id"):
            _check_runs([(bad, cfg)])
    with pytest.raises(ValueError, match="given twice"):
        _check_runs([("a", cfg), ("A", cfg)])
    assert _check_runs([("mlp/fp32", cfg)])[0][0] == "mlp/fp32"   # reproduce's study/variant


BAD = [
    ({"gird": {}}, "gird: unknown key (did you mean 'grid'?); accepted keys in config: base, "
                   "grid, name, repeat, steps"),
    ({"grid": {"precision.polcy": ["O2"]}},
     "grid.precision.polcy: unknown key (did you mean 'precision.policy'?)"),
    ({"grid": {"policy": ["O2"]}}, "grid.policy: unknown key (did you mean 'precision.policy'?)"),
    ({"grid": {}}, "grid: must be a non-empty object"),
    ({"grid": {"seed": []}}, "grid.seed: empty list; a grid key needs at least one value"),
    ({"grid": {"seed": 3}}, "grid.seed: must be a list of values, got integer 3"),
    ({"grid": {"seed": [0, "a"]}}, "grid.seed[1]: must be an integer, got string 'a'"),
    ({"grid": {"precision.policy": ["O2", "O7"]}},
     "grid.precision.policy[1]: 'O7' is not accepted; accepted values: 'fp32'"),
    ({"grid": {"seed": [1, 1]}}, "grid.seed[1]: 1 is listed twice"),
    ({"grid": {"scaler": [{"type": "none"}]}}, "grid.scaler: names a section; a grid key names "
                                               "one value, e.g. scaler.type"),
    ({"grid": {"name": ["a"]}}, "grid.name: the sweep names every run by its id"),
    ({"grid": {"precision.policy": ["O2", "fp32"], "precision.tensor_core": ["v100"]}},
     "grid: run 'policy=fp32,tensor_core=v100' is not a valid train config: "
     "precision.tensor_core: 'v100' needs a policy with fp16/bf16 Tensor Core ops"),
    ({"grid": {"model.hidden": [[8], 16]}},
     "grid: run 'hidden=16' is not a valid train config: model.hidden: must be a list of "
     "integers, got integer 16"),
    ({"repeat": 2, "grid": {"seed": [0, 1]}}, "repeat: cannot be combined with a 'seed' grid key"),
    ({"repeat": 0}, "repeat: must be >= 1, got 0"),
    ({"steps": "10"}, "steps: must be an integer, got string '10'"),
    ({"steps": 5, "grid": {"budget.steps": [1, 2]}}, "steps: cannot be combined with a "
                                                     "'budget.steps' grid key"),
    ({"base": None}, "base: required"),
    ({"base": {"config": "nowhere.json"}}, "base.config: file not found: "),
    ({"base": {"config": "b.json", "seed": 1}}, 'base: {"config": "path.json"} takes exactly '
                                                "one key"),
]


@pytest.mark.parametrize("change, fragment", BAD, ids=[b[1][:40] for b in BAD])
def test_bad_spec_one_clear_line_exit_2(tmp_path, capsys, change, fragment):
    spec = {k: v for k, v in {**_spec(), **change}.items() if v is not None}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["sweep", "--spec", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mpemu sweep: error: "), err
    assert fragment in err, err
    assert not (tmp_path / "o").exists()        # nothing started


def test_spec_file_errors(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text("{not json")
    assert main(["sweep", "--spec", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "spec.json: not valid JSON" in capsys.readouterr().err
    out = str(tmp_path / "o")
    assert main(["sweep", "--spec", str(tmp_path / "none.json"), "--out", out]) == 2
    assert "spec file not found" in capsys.readouterr().err
    path.write_text(json.dumps(_spec()))
    assert main(["sweep", "--spec", str(path), "--out", out, "--workers", "0"]) == 2
    assert "--workers must be >= 1, got 0" in capsys.readouterr().err
    assert main(["sweep", "--spec", str(path), "--out", out, "--workers", "2",
                 "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--workers sets the size of the local cluster" in capsys.readouterr().err


def test_resolve_spec_errors_are_spec_errors():
    with pytest.raises(SpecError, match="spec must be a JSON object"):
        resolve_spec([1])


def test_the_readme_example_spec_is_valid():
    spec = load_spec(os.path.join(ROOT, "examples", "sweep_mlp_policies.json"))
    assert len(spec.runs) == 12 and spec.keys == ["precision.policy", "scaler.type", "seed"]
    assert {r.config["budget"]["steps"] for r in spec.runs} == {300}
