"""models.histograms: the zero and overflow edges derived from a Format agree with softfloat.round
on and around the edges, for every preset, custom formats of every kind and the modes that have
edges; the recorded counts agree with an exact cast for every recorded format; older histogram
dicts (fp16 only) still load."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import softfloat as sf
from models.histograms import (
    FP16,
    LOG2_SCALES,
    ExponentHistogram,
    fate,
    rounding_edges,
)

CUSTOM = [sf.Format("ftz16", 5, 10, subnormals=False),
          sf.Format("e4m3sat", 4, 3, inf_nan="fn", saturate=True),
          sf.Format("e5m2sat", 5, 2, saturate=True),
          sf.Format("e3m2none", 3, 2, inf_nan="none"),
          sf.Format("e2m1", 2, 1, inf_nan="none"),
          sf.Format("ftz_e4m3fn", 4, 3, inf_nan="fn", subnormals=False),
          sf.Format("e5m52", 5, 52)]
# Formats with a sign and a zero: the histogram's "becomes 0" and overflow bands are theirs
# (the unsigned / zero-less scale formats e8m0 and ue4m3 are left out).
PRESETS = [f for f in sf.FORMATS.values() if f.signed and f.zero]
FORMATS = PRESETS + CUSTOM


def _around(x):
    """x and its float64 neighbours, two on each side."""
    lo = np.nextafter(x, 0.0)
    hi = np.nextafter(x, np.inf)
    return np.array([np.nextafter(lo, 0.0), lo, x, hi, np.nextafter(hi, np.inf)])


@pytest.mark.parametrize("mode", ["rne", "rna", "rtz"])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_edges_agree_with_softfloat_round(fmt, mode):
    e = rounding_edges(fmt, mode)
    # Probe the edges themselves (where float64 holds them), their float64 neighbours, and
    # the whole neighbourhood out to four times away, with both signs.
    probes = []
    for q in (e.zero, e.overflow):
        f = float(q) if q < 2 ** 1000 else np.finfo(np.float64).max
        f = max(f, 5e-324)                       # fp64's zero edge 2^-1075 is below float64
        with np.errstate(over="ignore"):
            probes += [_around(f), np.geomspace(max(f / 4, 5e-324), min(f * 4, 1e308), 257)]
    x = np.concatenate(probes)
    x = x[np.isfinite(x)]
    x = np.concatenate([x, -x])
    flags = sf.Flags()
    r = np.empty_like(x)
    for i, v in enumerate(x):        # one at a time: the overflow flag per element
        flags.reset()
        r[i] = sf.round(np.array([v]), fmt, mode, flags=flags)[0]
        assert e.overflows(np.array([v]))[0] == (flags.overflow == 1), (v, r[i])
    assert np.array_equal(e.becomes_zero(x), r == 0)


def test_fp16_edges_and_tie_rules():
    e = rounding_edges("fp16", "rne")
    assert (e.zero, e.zero_inclusive) == (2.0 ** -25, True)        # the tie goes to 0 (even)
    assert (e.overflow, e.overflow_inclusive) == (65520, True)     # 65504 is odd: tie goes up
    assert e.describe() == ("<= 2^-25", ">= 65520")
    assert rounding_edges("fp16", "rna").zero_inclusive is False   # the tie goes away from 0
    assert rounding_edges("fp16", "rtz").zero == 2.0 ** -24
    fn = rounding_edges("e4m3fn", "rne")                          # max 448 = 14 * 32, even
    assert (fn.overflow, fn.overflow_inclusive) == (464, False)
    assert FP16["underflow_threshold"] == 2.0 ** -25 and FP16["overflow_threshold"] == 65520
    assert (FP16["min_subnormal_exp"], FP16["min_normal_exp"], FP16["max_exp"]) == (-24, -14, 15)
    for mode in ("rup", "rdn", "rto", "sr"):
        with pytest.raises(ValueError, match="accepted: rne, rna, rtz"):
            rounding_edges("fp16", mode)


def _values(n=6000, seed=1):
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * 2.0 ** rng.uniform(-150, 126, n)).astype(np.float32)
    # every preset's edges (scaled by a few 2^-k) and their float32 neighbours
    edges = []
    for f in PRESETS:
        e = rounding_edges(f, "rne")
        for q in (e.zero, e.overflow):
            for k in (0, 3, 16):
                x = float(q) * 2.0 ** -k if q < 2 ** 200 else math.inf
                if 2.0 ** -149 <= x < 3e38:
                    edges += [x, np.nextafter(np.float32(x), np.float32(0)),
                              np.nextafter(np.float32(x), np.float32(np.inf))]
    e32 = np.array(edges, dtype=np.float32)
    return np.concatenate([v, e32, -e32, [0.0, -0.0, np.inf, np.nan]]).astype(np.float32)


@pytest.mark.parametrize("mode", ["rne", "rtz"])
def test_recorded_counts_match_an_exact_cast_for_every_format(mode):
    v = _values()
    h = ExponentHistogram("g", formats=[f.name for f in PRESETS] + CUSTOM[:3],
                          mode=mode)
    h.add(v[:2000])
    h.add(v[2000:])
    finite = v[np.isfinite(v) & (v != 0)].astype(np.float64)
    for name in h.formats:
        for k in (0, 1, 7, 16, 32):
            want = fate(finite, h.edges[name].fmt, 2.0 ** k, mode)
            got = (int(h.underflow[name][k]), int(h.overflow[name][k]))
            assert got == (want["zero"], want["overflow"]), (name, k)
    assert h.total == v.size and h.nonfinite == 2
    assert h.zeros == int(np.count_nonzero(v == 0)) >= 2
    back = ExponentHistogram.from_dict(json.loads(json.dumps(h.to_dict())))
    assert back.formats == h.formats and back.mode == mode
    for name in h.formats:
        assert np.array_equal(back.underflow[name], h.underflow[name])
        assert np.array_equal(back.overflow[name], h.overflow[name])
        assert back.best_log2_scale(name) == h.best_log2_scale(name)


def test_fractions_name_the_format_and_refuse_unrecorded_ones():
    h = ExponentHistogram(formats=("fp16", "bf16"))
    h.add(np.array([2.0 ** -30, 1.0, 0.0], dtype=np.float32))
    f = h.fractions(0, "bf16")
    assert f["underflow"] == f["underflow_bf16"] == 0.0
    assert h.fractions(0)["underflow_fp16"] == pytest.approx(1 / 3)
    # 2^-30 * 2^5 = 2^-25, the tie, still rounds to 0 (even); 2^-30 * 2^6 = 2^-24 does not
    assert h.fractions(5)["underflow_fp16"] == pytest.approx(1 / 3)
    assert h.fractions(6)["underflow_fp16"] == 0.0
    with pytest.raises(ValueError, match="'e5m2' was not recorded.*recorded: fp16, bf16"):
        h.fractions(0, "e5m2")


def test_older_fp16_only_dicts_still_load():
    old = {"name": "w", "exp_min": -3, "counts": [1, 0, 2], "zeros": 1, "nonfinite": 0,
           "samples": 2, "total": 4, "underflow_by_log2_scale": [0] * 33,
           "overflow_by_log2_scale": [0] * 30 + [1, 2, 3]}
    h = ExponentHistogram.from_dict(old)
    assert h.formats == ("fp16",) and h.mode == "rne" and h.total == 4
    assert h.best_log2_scale() == 29 and h.fractions(32)["overflow_fp16"] == 3 / 4
    assert math.isclose(h.fractions(0)["zero"], 1 / 4)
    assert len(LOG2_SCALES) == 33


def _figure(monkeypatch, hist, **kw):
    """Draw the histogram figure and return the matplotlib Figure instead of closing it."""
    from models import figures

    kept = {}

    def keep(fig, path):
        kept["fig"] = fig
        return str(path)

    monkeypatch.setattr(figures, "_save", keep)
    figures.plot_exponent_histogram(hist, "unused.png", title="t", **kw)
    fig = kept["fig"]
    fig.canvas.draw()
    return fig


@pytest.mark.parametrize("fmt, k", [("fp16", 8), ("fp16", 30), ("e4m3fn", 0), ("e5m2", 4),
                                    ("bf16", 8)])
def test_histogram_figure_ticks_legend_and_zero_band(monkeypatch, fmt, k):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    v = (rng.standard_normal(5000) * 2.0 ** rng.normal(-20, 6, 5000)).astype(np.float32)
    v[:500] = 0
    h = ExponentHistogram("g")
    h.add(v)
    fig = _figure(monkeypatch, h, fmt=fmt, log2_scale=k)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "zeros" and len(set(labels)) == len(labels)      # no doubled "0"
    # the legend and the numbers sit beside the axes, not over the data
    box = ax.get_window_extent()
    legend = ax.get_legend()
    assert legend.get_window_extent().x0 >= box.x1
    assert all(t.get_window_extent().x0 >= box.x1 for t in ax.texts)
    # every reference line in the legend is on the axis; those off it are not in the legend
    lo, hi = ax.get_xlim()
    entries = [t.get_text() for t in legend.get_texts()]
    e = rounding_edges(fmt, "rne")
    for edge, verb in ((e.zero, "rounds to 0 after"), (e.overflow, "overflows after")):
        on_axis = lo <= math.log2(edge) - k <= hi
        assert any(t.startswith(verb) for t in entries) == (on_axis and k > 0), verb
    # the "rounds to 0" band ends exactly at the edge, whose value rounds as the label says
    band = [p for p in ax.patches if p.get_label().startswith(f"rounds to 0 in {fmt}")]
    if math.log2(e.zero) <= lo:
        assert not band and not any(t.startswith(f"rounds to 0 in {fmt}") for t in entries)
    else:
        (poly,) = band
        right = poly.get_bbox().x1           # axvspan: a Rectangle (a Polygon before 3.9)
        assert right == math.log2(e.zero)
        x = 2.0 ** right
        assert (sf.round(x, fmt) == 0) == ("<=" in poly.get_label())
        assert sf.round(np.nextafter(x, 0.0), fmt) == 0
        assert sf.round(np.nextafter(x, np.inf), fmt) != 0
    plt.close(fig)
