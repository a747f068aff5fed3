"""A tiny end-to-end ``reproduce`` (small studies monkeypatched in, two seeds): report.md has the
natural-scale numbers first with the paper's beside them, the loss-scale window, per-layer
tables, seeds' mean and spread and the device labelled; results.json holds the numbers."""

from __future__ import annotations

import copy
import json
import os
import re

import pytest

from models.repro import experiments
from models.repro import studies as studies_mod
from models.repro.aggregate import summary
from models.repro.report import WINDOW_TOP, fmt_edge, fmt_pm


@pytest.fixture(autouse=True, scope="module")
def _one_numba_thread():
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    with threadpool_limits(1):
        yield
    numba.set_num_threads(old)


KEEP = {"mlp": ["fp32", "o3", "master_noscale", "static_3", "static_24", "dynamic", "dfp16",
                "amp_fp32", "amp_master_noscale", "amp_dynamic"],
        "master": ["fp32", "nomaster", "master"],
        "lstm": ["fp32", "master_noscale"],
        "deep": ["fp32", "master_noscale", "depth_2"]}


def _tiny_studies(profile):
    out = []
    for s in studies_mod.studies(profile):
        if s["key"] not in KEEP:
            continue
        s = copy.deepcopy(s)
        s["variants"] = KEEP[s["key"]]
        s["base"]["budget"].update(steps=4, eval_every=4, eval_batches=1)
        s["base"]["instrument"]["histogram_every"] = s["hist_every"] = 2
        if s["key"] == "lstm":
            s["base"]["data"].update(max_chars=12_000, seq_len=6, batch_size=4)
            s["curve"]["tokens"] = [24, 96]
        if s["key"] == "deep":
            s["base"]["model"]["hidden"] = [8] * 4
            s["curve"]["depths"] = [2, 4]
            s["curve"]["variants"] = ["depth_2", "fp32"]
        out.append(s)
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    mp = pytest.MonkeyPatch()
    mp.setattr(experiments, "studies", _tiny_studies)
    try:
        path = experiments.reproduce(str(out), quick=True, progress=False, seeds=(0, 1))
    finally:
        mp.undo()
    return out, open(path, encoding="utf-8").read(), json.loads((out / "results.json").read_text())


def test_report_order_and_labels(tiny_run):
    out, md, _ = tiny_run
    order = ["## Natural scale at a glance", "**paper**, Fig. 2b [T]", "**paper**, Fig. 3",
             "## Findings", "## Which findings need the amplification device",
             "## MLP on handwritten digits", "### Natural scale: the fp32 run's gradients",
             "Per layer (which layers'", "### The loss-scale window\n",
             "### Configurations at natural scale (mean ± sd over 2 seeds)",
             "### DFP-16 GEMMs: int32 chains by length",
             "### Amplification device (loss x2^-17): not a natural measurement"]
    pos = [md.find(s) for s in order]
    assert -1 not in pos and pos == sorted(pos), list(zip(order, pos))
    assert "as if averaged over" not in md
    assert "does NOT emulate batch size for weight gradients" in md
    assert "[device: loss x2^-17]" in md
    assert "### Measured: underflow against tokens per batch" in md
    assert "### Measured: underflow against depth" in md
    assert "Fig. 2a's mechanism" in md
    for fig in re.findall(r"\]\(([^)]+\.png)\)", md):
        assert (out / fig).read_bytes()[:4] == b"\x89PNG", fig
    for name in ("hist_mlp.png", "window_mlp.png", "layers_mlp.png", "loss_device_mlp.png",
                 "tokens_curve_lstm.png", "depth_curve_deep.png", "update_ratio_master.png",
                 "dfp_chains.png"):
        assert name in os.listdir(out), name


def test_results_hold_the_numbers(tiny_run):
    _, md, res = tiny_run
    assert res["seeds"] == [0, 1] and res["runs"] == 2 * sum(len(v) for v in KEEP.values())
    assert [f["claim"] for f in res["findings"]] == [
        "underflow_natural", "window", "master_weights", "alternatives", "dfp16_overflow",
        "scalers", "fp8_recipes", "underflow_device"]
    assert all(f["evidence"] in ("natural", "device") for f in res["findings"])
    mlp = next(m for m in res["models"] if m["key"] == "mlp")
    nat = mlp["natural"]["kinds"]["weight_grad"]
    assert len(nat["to_zero"]["values"]) == 2 and set(nat) >= {"zero", "below", "subnormal",
                                                              "survive", "window_low"}
    # the glance table prints these very numbers
    row = f"| MLP on handwritten digits | weight | {fmt_pm(nat['zero'], pct=True)} | " \
          f"{fmt_pm(nat['below'], pct=True, digits=5)} |"
    assert row in md
    w = mlp["natural"]["window"]["activation_grad"]
    assert w["log2_scale"] == list(range(25)) and len(w["survive"]) == 25
    layers = mlp["natural"]["layers"]["weight_grad"]
    assert [r["layer"] for r in layers] == ["layers.0", "layers.1", "layers.2"]
    cfg = {c["key"]: c for c in mlp["configs"]}
    assert cfg["amp_master_noscale"]["amplified"] and not cfg["dynamic"]["amplified"]
    assert [s["seed"] for s in cfg["fp32"]["seeds"]] == [0, 1]
    assert cfg["fp32"]["stats"]["progress"]["mean"] == 1.0
    assert cfg["static_24"]["stats"]["skipped_steps"]["mean"] > 0   # 2^24 overflows
    assert cfg["amp_fp32"]["stats"]["eval_loss"]["values"] == \
        cfg["fp32"]["stats"]["eval_loss"]["values"]               # the device leaves fp32 alone
    assert set(cfg["dfp16"]["dfp_chains"]) == {"2", "4", "8", "16", "32", "64", "128", "256",
                                               "K"}
    assert cfg["dfp16"]["dfp_chains"]["2"]["overflowed_chains"] == 0
    lstm = next(m for m in res["models"] if m["key"] == "lstm")
    assert lstm["tokens_curve"]["tokens"] == [24, 96]
    deep = next(m for m in res["models"] if m["key"] == "deep")
    assert deep["depth_curve"]["depths"] == [2, 4]
    master = next(m for m in res["models"] if m["key"] == "master")
    assert master["natural"]["update_ratio"]["below_2^-11"]["n"] == 2


def test_window_edges_say_where_a_seed_never_reaches_them():
    """A seed whose gradients never reach 99.9% survival (edge None) is named, not averaged
    away into the other seeds' mean or shown as "2^nan"."""
    assert fmt_edge(summary([7, 7, 12, 8, 9])) == "2^8.6"
    assert fmt_edge(summary([None, None, 11, 11, None])) == (
        f"2^11 (2 of 5 seeds; not reached by 2^{WINDOW_TOP} in the others)")
    assert fmt_edge(summary([None] * 5)) == f"not reached by 2^{WINDOW_TOP}"
