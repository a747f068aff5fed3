"""models.repro's new computations: fp16 band thresholds against softfloat.round, band counts and
survival shares against a direct count, seed aggregation, per-layer statistics, the update-ratio
histogram, DFP-16 chain statistics and the run plan."""

from __future__ import annotations

import math

import numpy as np
import pytest

import softfloat as sf
from models.repro.aggregate import progress_ratio, settled_log2_scale, summary, within_spread
from models.repro.dfpstats import chain_stats, merge_chain_stats
from models.repro.gradstats import FormatBands, GradStats, LayerStats, UpdateRatioStats
from models.repro.runs import parse_run_id, plan_runs
from models.repro.studies import STATIC_WINDOW, studies, variant_config


def _fate(values, fmt):
    """Direct count: what sf.round (RNE) does to each value."""
    f = sf.get_format(fmt)
    r = np.abs(np.asarray(sf.round(np.asarray(values, np.float64), f, "rne"), np.float64))
    return {"zero": int(np.count_nonzero(r == 0)),
            "subnormal": int(np.count_nonzero((r > 0) & (r < f.tiny))),
            "normal": int(np.count_nonzero(np.isfinite(r) & (r >= f.tiny))),
            "overflow": int(np.count_nonzero(np.isinf(r)))}


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e5m2"])
def test_band_thresholds_match_softfloat_round(fmt):
    b, f = FormatBands(fmt), sf.get_format(fmt)
    up, down = (lambda v: np.nextafter(v, np.inf)), (lambda v: np.nextafter(v, 0.0))
    r = lambda v: float(sf.round(np.float64(v), f, "rne"))  # noqa: E731
    assert r(b.zero_max) == 0.0 and r(up(b.zero_max)) == f.smallest_subnormal
    assert r(down(b.normal_min)) == f.tiny - f.smallest_subnormal  # largest subnormal
    assert r(b.normal_min) == f.tiny
    assert r(down(b.overflow_min)) == f.max and math.isinf(r(b.overflow_min))
    assert b.below_min == f.smallest_subnormal
    for v, band in ((b.zero_max, "zero"), (up(b.zero_max), "subnormal"),
                    (b.normal_min, "normal"), (b.overflow_min, "overflow")):
        assert b.classify([v, -v])[band] == 2, (v, band)


def test_bands_reject_formats_without_ieee_subnormals():
    with pytest.raises(ValueError, match="IEEE-style"):
        FormatBands("e4m3fn")


def _sample(seed=0, n=4000):
    rng = np.random.default_rng(seed)
    mag = 2.0 ** rng.uniform(-45, 22, n)        # spans fp16's zero, subnormal, normal, inf
    v = mag * rng.choice([-1.0, 1.0], n)
    v[rng.random(n) < 0.1] = 0.0
    return v.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("k", STATIC_WINDOW)
def test_gradstats_bands_and_survival_against_a_direct_count(k):
    v = _sample()
    g = GradStats("fp16")
    g.add(v[:1500], step=0)
    g.add(v[1500:], step=1)
    nz = v[v != 0]
    direct = _fate(nz * 2.0 ** k, "fp16")
    sh = g.shares(k)
    assert (g.zero_k[k], g.sub_k[k], g.over_k[k]) == (direct["zero"], direct["subnormal"],
                                                       direct["overflow"])
    assert sh["survive"] == (direct["subnormal"] + direct["normal"]) / nz.size
    assert sh["zero"] == (v.size - nz.size) / v.size
    _, surv, over, zero = g.window()
    assert surv[k] == sh["survive"] and over[k] == direct["overflow"] / nz.size
    assert zero[k] == direct["zero"] / nz.size
    # the exponent histogram and the paper's axis, counted independently with math.frexp
    e = np.array([math.frexp(x)[1] - 1 for x in np.abs(nz)])
    exps, counts = np.unique(e, return_counts=True)
    d = g.to_dict()
    assert dict(zip(range(d["exp_min"], d["exp_min"] + len(d["counts"])), d["counts"])) == {
        **{int(x): 0 for x in range(d["exp_min"], d["exp_min"] + len(d["counts"]))},
        **{int(x): int(c) for x, c in zip(exps, counts)}}
    assert g.below == int(np.count_nonzero(np.abs(nz) < 2.0 ** -24))
    assert sorted(g.series) == [0, 1]
    assert sum(row[0] for row in g.series.values()) == nz.size


def test_gradstats_round_trip_merge_and_edges():
    a, b = GradStats(), GradStats()
    a.add(_sample(1), step=3)
    b.add(_sample(2), step=3)
    m = a.merge(b)
    again = GradStats.from_dict(m.to_dict())
    for name in ("counts", "zero_k", "sub_k", "over_k"):
        assert np.array_equal(getattr(again, name), getattr(m, name))
    assert again.series == {3: [x + y for x, y in zip(a.series[3], b.series[3])]}
    assert m.nonzero == a.nonzero + b.nonzero and m.total == a.total + b.total
    low, high = m.edges()
    # overflow from 65520 = 2^15.999..: values up to 2^22 in the sample overflow at 2^0 already
    assert high is None and low is None
    g = GradStats()
    g.add(np.array([2.0 ** -20, 3.0 * 2.0 ** -18, 1.0]))
    low, high = g.edges()
    assert high == 15 and low == 0   # 1.0 * 2^15 < 65520 <= 2^16; nothing underflows


def test_summary_and_spread():
    s = summary([1.0, 2.0, 4.0, None])
    assert s["mean"] == pytest.approx(7 / 3) and s["n"] == 3 and s["n_finite"] == 3
    assert s["std"] == pytest.approx(np.std([1.0, 2.0, 4.0], ddof=1))
    assert summary([5.0])["std"] == 0.0
    bad = summary([1.0, math.nan])
    assert bad["mean"] == 1.0 and bad["n_finite"] == 1 and bad["n"] == 2
    assert math.isnan(summary([math.nan])["mean"])
    assert within_spread(summary([1.0, 1.4]), summary([1.3, 1.5]))
    assert not within_spread(summary([1.0, 1.01]), summary([2.0, 2.01]))
    assert not within_spread(summary([math.nan]), summary([1.0]))


def test_progress_and_settled_scale():
    assert progress_ratio({"eval_loss": 1.5}, {"eval_loss": 1.0}, 2.0) == 0.5
    assert math.isnan(progress_ratio({"eval_loss": math.nan}, {"eval_loss": 1.0}, 2.0))
    assert settled_log2_scale({"scale": [1.0] * 4}) is None
    assert settled_log2_scale({"scale": [2.0 ** 16, 2.0 ** 16, 2.0 ** 10, 2.0 ** 12]}) == 11.0


def test_layer_stats_totals_and_round_trip():
    ls = LayerStats()
    ls.add("weight_grad", "fc1", np.array([0.0, 2.0 ** -30, 1.0]))
    ls.add("weight_grad", "fc2", np.array([2.0 ** -20]))
    ls.add("activation_grad", "fc1", np.array([2.0 ** -26]))
    assert ls.layers("weight_grad") == ["fc1", "fc2"]
    t = ls.total("weight_grad")
    assert (t.total, t.nonzero, t.zeros, int(t.zero_k[0])) == (4, 3, 1, 1)
    back = LayerStats.from_dict(ls.to_dict())
    assert back.total("activation_grad").shares(0)["to_zero"] == 1.0
    with pytest.raises(ValueError, match="kind must be"):
        ls.add("update", "fc1", np.ones(2))


def test_update_ratio_histogram():
    u = UpdateRatioStats()
    before = np.array([1.0, 2.0, 4.0, 0.0, 8.0, 1.0])
    after = before + np.array([2.0 ** -12, 0.0, 2.0 ** -5, 3.0, 2.0 ** -13, 2.0 ** -9])
    u.add(before, after, mask=np.array([1, 1, 1, 1, 1, 0], bool))
    sh = u.shares()
    # kept: w != 0 and masked: ratios 2^-12, 0 (unchanged), 2^-7, 2^-16; the w = 0 element and
    # the unmasked one are not counted
    assert sh["moved"] == 3 and sh["unchanged"] == 1
    assert sh["below_2^-11"] == pytest.approx(2 / 3) and sh["below_2^-12"] == pytest.approx(1 / 3)
    d = u.to_dict()
    hist = dict(zip(range(d["exp_min"], d["exp_min"] + len(d["counts"])), d["counts"]))
    assert hist[-12] == 1 and hist[-7] == 1 and hist[-16] == 1 and sum(d["counts"]) == 3
    assert UpdateRatioStats.from_dict(d).merge(u).moved == 6


def test_dfp_chain_stats_on_a_known_overflow():
    from softfloat import dfp

    # every value 1.0 -> mantissa 2^14 (E_s = 0 - 14), products 2^28: a chain overflows int32
    # exactly when it holds 8 products (8 * 2^28 = 2^31 > 2^31 - 1)
    a = dfp.quantize(np.ones((3, 16)), bits=16)
    b = dfp.quantize(np.ones((16, 2)), bits=16)
    assert int(a.mantissa.max()) == 2 ** 14
    st = merge_chain_stats([chain_stats([(a, b)], lengths=(2, 4, 8, 16, None))])
    assert st["2"]["overflowed_chains"] == 0 and st["4"]["overflowed_chains"] == 0
    assert st["2"]["chains"] == 3 * 2 * 8 and st["K"]["chains"] == 3 * 2
    assert st["8"]["overflow_share"] == 1.0 and st["K"]["overflow_share"] == 1.0
    assert st["4"]["headroom_bits"] == 1.0      # chain sum 4 * 2^28 = 2^30
    assert st["8"]["saturation_share"] == 1.0 and st["K"]["headroom_bits"] == 0.0


def test_plan_has_the_run_id_config_shape():
    specs = [s for s in studies("quick") if s["key"] in ("mlp", "master")]
    plan = plan_runs(specs, (0, 1, 2))
    ids = [rid for rid, _ in plan]
    assert len(ids) == len(set(ids)) == 3 * sum(len(s["variants"]) for s in specs)
    rid, cfg = plan[0]
    assert parse_run_id(rid) == ("mlp", "fp32", 0) and cfg["seed"] == 0
    assert {parse_run_id(r)[2] for r in ids} == {0, 1, 2}
    with pytest.raises(ValueError, match="study/configuration"):
        parse_run_id("mlp/fp32")
    mlp = specs[0]
    assert variant_config(mlp, "static_8", 1)[1]["scaler"]["scale"] == 256.0
    label, amp = variant_config(mlp, "amp_master_noscale")
    assert "device" in label and amp["precision"]["loss_multiplier"] == 2.0 ** -17
    assert amp["optimizer"]["lr"] == 0.05 * 2 ** 17
    assert variant_config(mlp, "master_noscale")[1]["precision"].get("loss_multiplier") is None
    with pytest.raises(ValueError, match="unknown configuration"):
        variant_config(mlp, "fp8")


def test_mnist_studies_only_in_the_full_profile_and_only_when_present(tmp_path, monkeypatch):
    from models.idx import write_idx
    from models.trainer import Trainer

    monkeypatch.setenv("MPEMU_MNIST_DIR", str(tmp_path))
    assert not any(s["key"].startswith("mnist") for s in studies("full"))   # no files yet
    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("t10k", 20)):
        write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz",
                  rng.integers(0, 10, n, dtype=np.uint8))
    full = {s["key"]: s for s in studies("full")}
    assert {"mnist_mlp", "mnist_cnn"} <= set(full)
    assert not any(s["key"].startswith("mnist") for s in studies("quick"))
    cfg = variant_config(full["mnist_cnn"], "master_noscale")[1]
    assert cfg["data"]["path"] == str(tmp_path)
    cfg["budget"].update(steps=2, eval_every=2)
    cfg["data"]["batch_size"] = 8
    r = Trainer(cfg, progress=False).fit()
    assert r["final"]["steps"] == 2 and r["final"]["failure"] is None


def test_observer_per_layer_totals_match_the_trainers_histograms():
    """The per-layer statistics recorded through the trainer's observer hook add up to the
    trainer's own all-layer histograms (a separate implementation) on the same steps."""
    from models.repro.observe import GradObserver
    from models.trainer import Trainer

    cfg = {"model": {"type": "mlp", "hidden": [16, 16]}, "data": {"batch_size": 16},
           "optimizer": {"lr": 0.05}, "budget": {"steps": 4, "eval_every": 4, "eval_batches": 1},
           "instrument": {"histogram_every": 2}}
    obs = GradObserver()
    tr = Trainer(cfg, progress=False, observer=obs)
    tr.fit()
    assert obs.layers.layers("weight_grad") == ["layers.0", "layers.1", "layers.2"]
    assert obs.layers.layers("activation_grad") == ["linear0", "linear1", "linear2"]
    for kind in ("weight_grad", "activation_grad"):
        mine, theirs = obs.layers.total(kind), tr.hists[kind]
        assert (mine.total, mine.zeros, mine.samples) == (theirs.total, theirs.zeros,
                                                          theirs.samples)
        assert sorted(mine.series) == [0, 2]
        assert sum(g.total for g in obs.layers.stats[kind].values()) == mine.total
    n_weights = sum(p.data.size for p in tr.params)
    assert obs.layers.total("weight_grad").total == 2 * n_weights
    u = obs.updates_hist
    assert u.moved + u.unchanged > 0 and u.moved <= 2 * n_weights
