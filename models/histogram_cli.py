"""``mpemu histogram RUN_DIR``: draw the gradient exponent histograms a training run recorded
(paper Figures 2b and 3) and summarise how many values fp16 would lose, unscaled and scaled.

Imports the standard library, numpy and models.* (matplotlib only through models.figures, lazily).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from . import figures
from .histograms import ExponentHistogram

__all__ = ["histogram_command"]


def _pct(v):
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.1f}%"


def histogram_command(run_dir, *, out_dir=None, log2_scale=None):
    """Draw the histograms recorded in RUN_DIR/history.json; returns lines to print."""
    path = os.path.join(run_dir, "history.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: RUN_DIR must be a directory written by "
                                "'mpemu train' (it holds history.json)")
    with open(path, encoding="utf-8") as fh:
        run = json.load(fh)
    hists = run.get("histograms") or {}
    if not hists:
        raise ValueError(f"{path} holds no gradient histograms; train with "
                         "instrument.histogram_every > 0 (or instrument.histogram_steps)")
    out_dir = out_dir or run_dir
    os.makedirs(out_dir, exist_ok=True)
    scaler = run["config"]["scaler"]
    lines = []
    for kind, d in sorted(hists.items()):
        h = ExponentHistogram.from_dict(d)
        if log2_scale is not None:
            k = log2_scale
        elif scaler["type"] == "static":
            k = round(math.log2(scaler["scale"]))
        else:
            k = h.best_log2_scale()
        k = int(np.clip(k, 0, 32))
        png = os.path.join(out_dir, f"hist_{kind}.png")
        what = kind.replace("_", " ").replace("grad", "gradient")
        figures.plot_exponent_histogram(h, png, log2_scale=k, what=what,
                                        title=f"{run['name']}: {what} exponents")
        f0, fk = h.fractions(0), h.fractions(k)
        lines.append(f"{kind}: {h.total} values in {h.samples} tensors; zero "
                     f"{_pct(f0['zero'])}; -> 0 in fp16 unscaled {_pct(f0['underflow_fp16'])}; "
                     f"after x2^{k}: -> 0 {_pct(fk['underflow_fp16'])}, overflow "
                     f"{_pct(fk['overflow_fp16'])}; largest scale without overflow "
                     f"2^{h.best_log2_scale()}; figure {png}")
    return lines
