"""``mpemu histogram RUN_DIR``: draw the gradient exponent histograms a training run recorded in
RUN_DIR/history.json (paper Figures 2b and 3) and summarise how many values a target format
(fp16 by default, any format the run recorded: every softfloat preset for runs made since
formats are recorded) would lose, unscaled and after a loss scale.

The loss scale shown is, by default, the run's final scale (``final.final_scale``: the scale
after the last step, whatever the scaler type; 1 without a scaler), or the scale of a chosen
step (``step``: the scale that step's backward pass used), or 2^K given directly.  The
histograms tabulate the powers of two 2^0 .. 2^32; a scale that is not a power of two (a static
scale of 1000, the LogNormal scaler) is shown as the nearest one, and the summary says so.

Every error names the file it is about.  Imports the standard library, numpy, softfloat and
models.* (matplotlib only through models.figures, lazily).
"""

from __future__ import annotations

import json
import math
import os

import softfloat as sf

from . import figures
from .histograms import LOG2_SCALES, ExponentHistogram

__all__ = ["histogram_command"]

_K_MAX = int(LOG2_SCALES[-1])


def _pct(v):
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.1f}%"


def _read_run(run_dir):
    path = os.path.join(run_dir, "history.json")
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"{run_dir}: no such directory; RUN_DIR must be a directory "
                                "written by 'mpemu train' (it holds history.json)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: RUN_DIR must be a directory written by "
                                "'mpemu train' (it holds history.json)")
    try:
        with open(path, encoding="utf-8") as fh:
            run = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    missing = [k for k in ("name", "final", "history", "histograms")
               if not isinstance(run, dict) or k not in run]
    if missing:
        raise ValueError(f"{path}: not a history.json written by 'mpemu train' (missing "
                         f"{', '.join(missing)})")
    return path, run


def _number(path, where, value):
    """A finite float from history.json (json_safe writes non-finite floats as strings)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{path}: {where} is {value!r}, not a positive finite loss scale; "
                         "choose one with --scale-log2")
    return v


def _scale(path, run, *, log2_scale, step):
    """(k, description) of the loss scale 2^k to show."""
    if log2_scale is not None:
        if isinstance(log2_scale, bool) or not isinstance(log2_scale, int) \
                or not 0 <= log2_scale <= _K_MAX:
            raise ValueError(f"--scale-log2 must be an integer in 0..{_K_MAX} (the loss scales "
                             f"2^0 .. 2^{_K_MAX} the histograms tabulate), got {log2_scale!r}")
        return log2_scale, f"2^{log2_scale} (--scale-log2)"
    if step is not None:
        steps = run["history"].get("step", [])
        if step not in steps:
            span = f"0..{steps[-1]}" if steps else "none"
            raise ValueError(f"{path}: step {step} is not in this run (steps {span})")
        scale = _number(path, f"the scale of step {step}",
                        run["history"]["scale"][steps.index(step)])
        what = f"step {step}'s scale"
    else:
        scale = _number(path, "final.final_scale", run["final"].get("final_scale"))
        what = "the run's final scale"
    exact = math.log2(scale)
    k = round(exact)
    if not 0 <= k <= _K_MAX:
        raise ValueError(f"{path}: {what} {scale:g} = 2^{exact:.4g} lies outside 2^0 .. "
                         f"2^{_K_MAX}, the scales the histograms tabulate; choose one with "
                         "--scale-log2")
    if scale != 2.0 ** k:
        return k, f"2^{k} ({what} {scale:g}, shown as the nearest power of two)"
    return k, f"2^{k} ({what})"


def histogram_command(run_dir, *, out_dir=None, log2_scale=None, fmt="fp16", step=None):
    """Draw the histograms recorded in RUN_DIR/history.json for target format ``fmt``; returns
    the lines to print.  See the module docstring for the scale shown."""
    path, run = _read_run(run_dir)
    hists = run["histograms"] or {}
    if not hists:
        raise ValueError(f"{path} holds no gradient histograms; train with "
                         "instrument.histogram_every > 0 (or instrument.histogram_steps)")
    target = sf.get_format(fmt)                       # ValueError lists the presets
    k, scale_txt = _scale(path, run, log2_scale=log2_scale, step=step)
    out_dir = out_dir or run_dir
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for kind, d in sorted(hists.items()):
        try:
            h = ExponentHistogram.from_dict(d)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: histograms.{kind} is malformed ({type(exc).__name__}: "
                             f"{exc})") from None
        if target.name not in h.formats:
            raise ValueError(f"{path}: the {kind} histogram was recorded for "
                             f"{', '.join(h.formats)} only, not {target.name}; choose one of "
                             "those with --format (runs made before the other formats were "
                             "recorded hold fp16 only)")
        suffix = "" if target.name == "fp16" else f"_{target.name}"
        png = os.path.join(out_dir, f"hist_{kind}{suffix}.png")
        what = kind.replace("_", " ").replace("grad", "gradient")
        figures.plot_exponent_histogram(h, png, log2_scale=k, what=what, fmt=target.name,
                                        title=f"{run['name']}: {what} exponents, "
                                              f"{target.name} ({h.mode})")
        f0, fk = h.fractions(0, target.name), h.fractions(k, target.name)
        lines.append(f"{kind}: {h.total} values in {h.samples} tensors; zero "
                     f"{_pct(f0['zero'])}; -> 0 in {target.name} unscaled "
                     f"{_pct(f0['underflow'])}; after x{scale_txt}: -> 0 "
                     f"{_pct(fk['underflow'])}, overflow {_pct(fk['overflow'])}; largest "
                     f"scale without overflow 2^{h.best_log2_scale(target.name)}"
                     f"{' or more' if h.best_log2_scale(target.name) == _K_MAX else ''}; "
                     f"figure {png}")
    return lines
