"""models.histograms / models.figures / models.repro.report: exponent histograms agree with an exact
fp16 cast, figures are written, results.json is strict JSON, the report renders every table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from models import figures
from models.histograms import ExponentHistogram, fp16_fate
from models.jsonio import json_safe
from models.repro.report import fmt_num, write_report, write_results_json


def _values(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * 2.0 ** rng.uniform(-45, 20, n)).astype(np.float32)
    # the exact thresholds and their neighbours
    edges = np.array([2.0 ** -25, 2.0 ** -24, 65504, 65519.99, 65520, 2.0 ** -149, 0.0, -0.0,
                      np.inf, np.nan], dtype=np.float32)
    edges = np.concatenate([edges, np.nextafter(edges[:5], np.float32(np.inf)),
                            np.nextafter(edges[:5], np.float32(0))])
    return np.concatenate([v, edges, -edges])


@pytest.mark.parametrize("k", [0, 1, 8, 15, 24])
def test_histogram_fractions_match_exact_fp16_cast(k):
    v = _values()
    h = ExponentHistogram()
    h.add(v[:7000])
    h.add(v[7000:])
    finite = v[np.isfinite(v) & (v != 0)]
    fate = fp16_fate(finite, 2.0 ** k)
    assert int(h.underflow["fp16"][k]) == fate["zero"]
    assert int(h.overflow["fp16"][k]) == fate["inf"]
    assert h.zeros == int(np.count_nonzero(v == 0))
    assert h.nonfinite == int(np.count_nonzero(~np.isfinite(v)))
    assert h.total == v.size


def test_histogram_bins_and_roundtrip():
    h = ExponentHistogram("w")
    h.add(np.array([0.75, 1.0, 1.5, 2.0 ** -149, -3.0, 0.0], dtype=np.float32))
    d = h.to_dict()
    counts = dict(zip(range(d["exp_min"], d["exp_min"] + len(d["counts"])), d["counts"]))
    assert counts[-1] == 1 and counts[0] == 2 and counts[1] == 1 and counts[-149] == 1
    back = ExponentHistogram.from_dict(json.loads(json.dumps(d)))
    assert np.array_equal(back.counts, h.counts) and back.total == h.total
    assert h.fractions(0)["zero"] == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="log2_scale"):
        h.fractions(40)
    # the largest scale without overflow: 3 * 2^k < 65520 for k <= 14
    assert h.best_log2_scale() == 14


def test_json_safe_and_fmt():
    data = {"a": [1.0, math.nan, math.inf, -math.inf], "b": np.float32(2.5), "c": np.int64(3),
            "d": np.array([1, 2]), "e": (True, np.bool_(False))}
    out = json.loads(json.dumps(json_safe(data), allow_nan=False))
    assert out == {"a": [1.0, "nan", "inf", "-inf"], "b": 2.5, "c": 3, "d": [1, 2],
                   "e": [True, False]}
    assert fmt_num(None) == "-" and fmt_num(math.nan) == "nan"
    assert fmt_num(65536.0) == "2^16" and fmt_num(0.5, pct=True) == "50.00%"
    assert fmt_num(1.23456) == "1.235"


def _fake_run(key, label, scale=1.0, skipped=(), metric="accuracy"):
    steps = list(range(20))
    loss = list(np.linspace(2.3, 0.5, 20))
    return {"key": key, "label": label, "metric": metric, "paper": "p",
            "config": {"scaler": {"type": "static" if scale != 1.0 else "none"}},
            "history": {"step": steps, "loss": loss, "scale": [scale] * 20,
                        "skipped": [i in skipped for i in steps], "eval_step": [0, 19],
                        "eval_loss": [2.3, 0.5], "eval_metric": [0.1, 0.9]},
            "final": {"steps": 20, "train_loss": 0.5, "eval_loss": 0.5, "eval_metric": 0.9,
                      "skipped_steps": len(skipped), "final_scale": scale,
                      "lost_update_fraction": 0.25, "grad_zero_fraction": 0.1,
                      "diverged": False, "failure": None, "wall_s": 1.0}}


def _fake_config(run, stats_values):
    from models.repro.aggregate import summary

    stats = {k: summary(v) for k, v in stats_values.items()}
    stats["diverged"] = 0
    return {"key": run["key"], "label": run["label"], "paper": "p", "amplified": False,
            "config": run["config"], "stats": stats,
            "seeds": [{"seed": 0, "final": run["final"], "history": run["history"]}]}


def test_figures_and_report(tmp_path):
    h = ExponentHistogram()
    h.add(_values())
    runs = [_fake_run("fp32", "fp32"), _fake_run("static_8", "static 2^8", 256.0, skipped=(3,))]
    runs[1]["history"]["loss"][5] = math.nan
    d = h.to_dict()
    bands = {"name": "fp16", "zero_max": 2.0 ** -25, "tiny": 2.0 ** -14, "overflow_min": 65520.0}
    win = {"log2_scale": [0, 1, 2], "to_zero": [0.1, 0.05, 0.0], "overflow": [0.0, 0.0, 0.1]}
    for name, path in (
            ("loss", figures.plot_loss_curves(runs, tmp_path / "loss.png", title="t")),
            ("scale", figures.plot_scale_trajectories(runs[1:], tmp_path / "scale.png", title="t")),
            ("hist", figures.plot_exponent_histogram(d, tmp_path / "h.png", title="t",
                                                     log2_scale=8)),
            ("bands", figures.plot_band_histograms(
                [{"what": "w", "exp_min": d["exp_min"], "counts": d["counts"], "zeros": 3,
                  "total": h.total, "text": "x"}], tmp_path / "b.png", title="t", bands=bands)),
            ("window", figures.plot_scale_window({"w": win}, tmp_path / "w.png", title="t",
                                                 runs=[(0, 0.5, 0), (2, 0.0, 4)], settled=1.5)),
            ("layers", figures.plot_layer_shares({"w": [("a", 0.1, 0.2), ("b", 0.0, 0.3)]},
                                                 tmp_path / "l.png", title="t")),
            ("ratio", figures.plot_update_ratios(-14, [1, 2, 3, 4], tmp_path / "r.png",
                                                 title="t", text="x")),
            ("curve", figures.plot_share_curves([256, 1024], {"s": ([0.1, 0.2], [0.0, 0.01])},
                                                tmp_path / "c.png", title="t", xlabel="x"))):
        with open(path, "rb") as fh:
            data = fh.read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
    vals = {"eval_loss": [0.5, 0.6], "eval_metric": [0.9, 0.8], "train_loss": [0.5, 0.5],
            "lost_update_fraction": [0.25, 0.25], "grad_zero_fraction": [0.1, 0.1],
            "skipped_steps": [0, 0], "final_scale": [1.0, 1.0], "progress": [1.0, 1.0],
            "settled_log2_scale": [None, None]}
    configs = [_fake_config(r, vals) for r in runs]
    results = {"title": "T", "profile": "quick", "command": "cmd", "wall_s": 12.0, "runs": 4,
               "seeds": [0, 1], "environment": {"cpus": 2, "python": "3", "numpy": "2"},
               "findings": [{"claim": "c", "title": "F", "paper": "P", "text": "X",
                             "rule": "R", "evidence": "natural", "reproduced": False}],
               "needs_device": [], "settings_notes": ["note"], "figures": {}, "mnist": {},
               "models": [{"key": "m", "title": "Model", "description": "D", "settings": ["s"],
                           "metric": "accuracy", "k": 0, "hist_every": 5, "seeds": [0, 1],
                           "configs": configs, "figures": {"loss": "loss.png"}}]}
    with open(write_report(str(tmp_path), results), encoding="utf-8") as fh:
        md = fh.read()
    assert "### F: **not shown** (natural-scale evidence)" in md and "| static 2^8 |" in md
    assert "![Loss curves, natural scale: Model](loss.png)" in md and "25.00% ± 0.00" in md
    assert "| 0.55 ± 0.071 | 85.00% ± 7.07 |" in md     # eval loss, accuracy: mean ± sample sd
    with open(write_results_json(str(tmp_path), results), encoding="utf-8") as fh:
        js = json.load(fh)
    assert js["models"][0]["configs"][1]["seeds"][0]["history"]["loss"][5] == "nan"


def test_smooth_keeps_gaps():
    s = figures.smooth([1.0, 3.0, math.nan, 5.0], 2)
    assert s[0] == 1.0 and s[1] == 2.0 and math.isnan(s[2]) and s[3] == 5.0
