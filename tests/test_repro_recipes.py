"""The FP8 and FP4 recipes study of ``mpemu reproduce`` (issue #15 item 4): its configurations,
the injected amax jump, the per-run recipe statistics, the report table and the finding's rule.
"""

from __future__ import annotations

import copy

import pytest

from models.repro.aggregate import assemble
from models.repro.recipestats import recipe_finding, recipe_section
from models.repro.runs import Runner, parse_run_id, plan_runs
from models.repro.studies import RECIPE_VARIANTS, studies, variant_config
from models.trainer import Trainer


def test_the_study_is_in_both_profiles_with_every_recipe():
    for profile, keys in (("quick", {"recipes", "recipes_tf"}),
                          ("full", {"recipes", "recipes_tf"})):
        found = {s["key"]: s for s in studies(profile) if s["key"].startswith("recipes")}
        assert set(found) == keys
        for s in found.values():
            assert tuple(s["variants"]) == RECIPE_VARIANTS and s["spikes"]
    quick = next(s for s in studies("quick") if s["key"] == "recipes")
    policies = [variant_config(quick, k)[1]["precision"] for k in RECIPE_VARIANTS]
    assert [p["policy"] for p in policies] == (["bf16"] + ["fp8_delayed"] * 4
                                               + ["fp8_current", "mxfp8"] + ["nvfp4"] * 3)
    assert {(p["recipe"]["amax_history_len"], p["recipe"]["amax_compute_algo"])
            for p in policies if p["policy"] == "fp8_delayed"} == {
        (16, "max"), (1024, "max"), (16, "most_recent"), (1024, "most_recent")}
    assert policies[-2]["recipe"] == {"disable_stochastic_rounding": True}
    assert policies[-1]["recipe"] == {"disable_rht": True}
    assert variant_config(quick, "rc_current")[1]["instrument"]["inject_amax_jump_steps"] == \
        quick["spikes"]


def test_the_amax_jump_leaves_fp32_training_bit_identical():
    base = {"model": {"type": "mlp", "hidden": [16]}, "data": {"batch_size": 16},
            "precision": {"policy": "fp32"}, "budget": {"steps": 4, "eval_every": 4,
                                                      "eval_batches": 1},
            "instrument": {"histogram_every": 0, "lost_updates": False}}
    a = Trainer(base, progress=False)
    a.fit()
    jumped = copy.deepcopy(base)
    jumped["instrument"]["inject_amax_jump_steps"] = [1, 2]
    b = Trainer(jumped, progress=False)
    b.fit()
    assert a.history["loss"] == b.history["loss"]
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert pa.data.tobytes() == pb.data.tobytes()


def test_study_statistics_table_and_finding():
    spec = copy.deepcopy(next(s for s in studies("quick") if s["key"] == "recipes"))
    spec["variants"] = ["rc_bf16", "rc_delayed_recent_16", "rc_current", "rc_nvfp4"]
    spec["base"]["budget"].update(steps=8, eval_every=8, eval_batches=1)
    spec["spikes"] = [4]
    runner, results = Runner([spec]), {}
    for rid, cfg in plan_runs([spec], (0,)):      # in this process, as an executor would
        r = runner(rid, cfg)
        r.update(r.pop("extra", None) or {})
        study, key, seed = parse_run_id(rid)
        results[rid] = {**r, "run_id": rid, "study": study, "key": key, "seed": seed}
    models = assemble([spec], results, (0,))
    c = {x["key"]: x for x in models[0]["configs"]}
    assert c["rc_bf16"]["recipe"]["progress_bf16"]["mean"] == pytest.approx(1.0)
    assert not c["rc_bf16"]["recipe"]["has_recipe"]
    assert c["rc_delayed_recent_16"]["recipe"]["saturated_at_jump"]["values"][0] > 0
    assert c["rc_current"]["recipe"]["saturated_at_jump"]["values"] == [0.0]
    assert c["rc_current"]["recipe"]["saturated_share"]["values"] == [0.0]
    f = recipe_finding(models)
    assert f["reproduced"] is True and "recipes" in f["numbers"]
    lines = "\n".join(recipe_section(models[0]))
    assert "share of bf16's improvement" in lines and "NVFP4" in lines
    # the rule can fail: a current-scaling run that saturated at the jump is not "shown"
    bad = copy.deepcopy(models)
    bad[0]["configs"][2]["recipe"]["saturated_at_jump"]["values"] = [3.0]
    assert recipe_finding(bad)["reproduced"] is False
    assert recipe_finding([])["reproduced"] is None
