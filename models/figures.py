"""PNG figures for the reproduction report: loss curves, loss-scale trajectories and the
paper-style exponent histograms of gradients (our versions of Figures 2b and 3).

Provides :func:`plot_loss_curves`, :func:`plot_scale_trajectories` and
:func:`plot_exponent_histogram`; for the natural-scale sections of the reproduction
:func:`plot_band_histograms` (histograms with a format's bands, given as magnitudes),
:func:`plot_scale_window` (survival and overflow shares against the loss scale),
:func:`plot_layer_shares` (per-layer underflow shares), :func:`plot_update_ratios` (the
|update| / |w| histogram of Fig. 2a's mechanism) and :func:`plot_share_curves` (measured shares
against tokens per batch, depth or chain length).  matplotlib is imported lazily, inside the
functions, with the Agg backend (no display needed).  Every figure has an opaque white
background, black text and a palette of mid-luminance colours with distinct line styles, so it
reads the same in light and dark viewers and in greyscale.

For experiment grids (models.sweep): :func:`plot_metric_by_setting` and :func:`plot_loss_bands`
(the mean and spread over seeds of each setting).

Imports numpy and models.histograms at module level; matplotlib only inside functions.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .histograms import EXP_MIN, ExponentHistogram

__all__ = ["plot_band_histograms", "plot_exponent_histogram", "plot_layer_shares",
           "plot_loss_bands", "plot_loss_curves", "plot_metric_by_setting",
           "plot_scale_trajectories", "plot_scale_window", "plot_share_curves",
           "plot_update_ratios", "smooth"]

# Okabe-Ito (colour-blind safe) plus darker extras; all readable on white.
_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#8C564B", "#7F7F7F", "#BCBD22", "#9467BD", "#17BECF", "#E41A1C", "#4D4D4D")
_STYLES = ("-", "--", "-.", ":")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _rc():
    return {"figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
            "text.color": "black", "axes.labelcolor": "black", "axes.edgecolor": "black",
            "xtick.color": "black", "ytick.color": "black", "axes.grid": True,
            "grid.color": "#CCCCCC", "grid.linewidth": 0.6, "font.size": 9,
            "legend.fontsize": 7, "legend.framealpha": 0.9, "legend.facecolor": "white"}


def _style(i):
    return {"color": _COLORS[i % len(_COLORS)], "linestyle": _STYLES[(i // 7) % len(_STYLES)]}


def smooth(values, window):
    """Trailing moving average that keeps NaN/Inf where the raw value is not finite."""
    v = np.asarray(values, dtype=np.float64)
    if window <= 1 or v.size == 0:
        return v
    finite = np.isfinite(v)
    filled = np.where(finite, v, 0.0)
    c = np.cumsum(np.insert(filled, 0, 0.0))
    n = np.cumsum(np.insert(finite.astype(np.float64), 0, 0.0))
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(idx - window, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (c[idx] - c[lo]) / (n[idx] - n[lo])
    out[~finite] = np.nan
    return out


def _save(fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


def plot_loss_curves(runs, path, *, title, metric_name="accuracy"):
    """Training loss (moving average) and the evaluation metric of each run, one line each.

    runs: list of dicts with "label", "history" {"step", "loss", "eval_step", "eval_metric"}.
    Losses are clipped at 1.5x the largest initial loss (log axis when they span more than a
    factor 3); a run whose loss became
    non-finite is marked with an x where it happened.
    """
    plt = _pyplot()
    import matplotlib as mpl

    with mpl.rc_context(_rc()):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
        starts = [r["history"]["loss"][0] for r in runs if r["history"]["loss"]]
        finite_starts = [v for v in starts if math.isfinite(v)]
        top = 1.5 * max(finite_starts) if finite_starts else 10.0
        handles, lo, hi = [], math.inf, 0.0
        for i, run in enumerate(runs):
            h = run["history"]
            steps = np.asarray(h["step"])
            loss = np.asarray(h["loss"], dtype=np.float64)
            window = max(1, len(steps) // 25)
            curve = np.minimum(smooth(loss, window), top)
            ok = curve[np.isfinite(curve) & (curve > 0)]
            if ok.size:
                lo, hi = min(lo, float(ok.min())), max(hi, float(ok.max()))
            (line,) = ax1.plot(steps, curve, label=run["label"], lw=1.3, **_style(i))
            handles.append(line)
            bad = np.flatnonzero(~np.isfinite(loss))
            if bad.size:  # diverged: mark where the loss first became non-finite
                ax1.plot([steps[bad[0]]], [top], marker="x", ms=8, mew=2,
                         color=_style(i)["color"])
            if h.get("eval_step"):
                ev = np.asarray(h["eval_metric"], dtype=np.float64)
                ax2.plot(h["eval_step"], ev, marker="o", ms=3, lw=1.2, **_style(i))
        log_y = hi > 3 * lo  # a log axis only where the losses span a wide range
        if log_y:
            ax1.set_yscale("log")
        ax1.set_xlabel("step")
        ax1.set_ylabel("training loss (moving average" + (", log scale)" if log_y else ")"))
        ax1.set_title("training loss (x: became non-finite)")
        ax2.set_xlabel("step")
        ax2.set_ylabel(metric_name)
        ax2.set_title(f"held-out {metric_name}")
        fig.suptitle(title)
        fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7,
                   bbox_to_anchor=(0.5, -0.02))
        fig.tight_layout(rect=(0, 0.03 + 0.032 * ((len(runs) + 2) // 3), 1, 1))
        return _save(fig, path)


def plot_scale_trajectories(runs, path, *, title):
    """log2 of the loss scale per step for each run that has a scaler; skipped steps marked."""
    plt = _pyplot()
    import matplotlib as mpl

    with mpl.rc_context(_rc()):
        fig, ax = plt.subplots(figsize=(8, 4.2))
        for i, run in enumerate(runs):
            h = run["history"]
            steps = np.asarray(h["step"])
            scale = np.asarray(h["scale"], dtype=np.float64)
            with np.errstate(divide="ignore"):
                ls = np.log2(scale)
            style = _style(i)
            ax.step(steps, ls, where="post", lw=1.4, label=run["label"], **style)
            skipped = np.asarray(h["skipped"], dtype=bool)
            if skipped.any():
                ax.plot(steps[skipped], ls[skipped], "v", ms=4, color=style["color"],
                        label=f"{run['label']}: skipped step ({int(skipped.sum())})")
        ax.set_xlabel("step")
        ax.set_ylabel("log2(loss scale)")
        ax.set_title(f"{title}: loss-scale trajectories")
        ax.legend(loc="best", ncol=2)
        fig.tight_layout()
        return _save(fig, path)


def _hist_bands(edges, lo, hi):
    """(x0, x1, colour, alpha, label) of the bands on a log2 axis [lo, hi] for one format and
    mode: rounds to 0, subnormal range, normal range, overflows; clipped to the axis, and
    dropped (with their legend entries) where nothing of them is on it."""
    f = edges.fmt
    name, mode = f.name, edges.mode
    z_txt, o_txt = edges.describe()
    z, o = math.log2(edges.zero), math.log2(edges.overflow)
    tie = {"rne": f"; the tie {_pow2(edges.zero)} goes to the even neighbour, "
                  f"{'0' if edges.zero_inclusive else 'not 0'}",
           "rna": "; the tie goes away from 0", "rtz": ""}[mode]
    bands = [(lo, z, "#E41A1C", 0.14, f"rounds to 0 in {name} ({mode}): |v| {z_txt}{tie}")]
    if f.subnormals:
        bands.append((z, f.emin, "#E69F00", 0.18,
                      f"{name} subnormals [2^{f.emin - f.man_bits}, 2^{f.emin})"))
    bands += [(f.emin if f.subnormals else z, o, "#009E73", 0.12,
               f"{name} normal range [2^{f.emin}, {f.max:g}]"),
              (o, hi, "#7F7F7F", 0.22, f"overflows in {name} ({mode}): |v| {o_txt}")]
    return [(max(a, lo), min(b, hi), c, al, lab) for a, b, c, al, lab in bands
            if min(b, hi) > max(a, lo)]


def _pow2(q):
    """2^e when q is a power of two, else its value."""
    e = math.log2(q)
    return f"2^{int(e)}" if e == int(e) else f"{float(q):.6g}"


def plot_exponent_histogram(hist, path, *, title, log2_scale=0, what="gradient", fmt="fp16"):
    """The paper-style histogram: share of values per log2 bin (the bar at e covers
    [2^e, 2^(e+1)) on a continuous log2 axis), a separate bar of exact zeros, and for the target
    format ``fmt`` (recorded in ``hist``; rounding ``hist.mode``) the bands where values round to
    0, to subnormals, to normals and overflow, from models.histograms.rounding_edges: the "rounds
    to 0" band ends exactly at the format's edge (fp16 RNE: 2^-25, the tie included).  Lines mark
    where the edges move after a loss scale 2^log2_scale.  Bands and lines that fall off the axis
    are not drawn and not in the legend; the legend and the numbers sit beside the axes."""
    from .histograms import rounding_edges

    if isinstance(hist, dict):
        hist = ExponentHistogram.from_dict(hist)
    name = hist.format_name(fmt)
    edges = rounding_edges(hist.edges[name].fmt, hist.mode)
    plt = _pyplot()
    import matplotlib as mpl

    total = max(hist.total, 1)
    nz = np.flatnonzero(hist.counts)
    exps = np.arange(hist.counts.size) + EXP_MIN
    d_lo = int(exps[nz[0]]) if nz.size else -30
    d_hi = int(exps[nz[-1]]) + 1 if nz.size else 1
    lo, hi = min(d_lo, -30), max(d_hi, 1)
    # the format's edges join the axis when they are near the data (within 20 binades)
    for x in (math.log2(edges.zero), math.log2(edges.overflow)):
        if lo - 20 <= x < lo:
            lo = math.floor(x) - 1
        if hi < x <= hi + 20:
            hi = math.ceil(x) + 1
    shown = (exps >= d_lo) & (exps < d_hi)
    frac = hist.fractions(0, name)
    scaled = hist.fractions(log2_scale, name)
    with mpl.rc_context(_rc()):
        fig, ax = plt.subplots(figsize=(9, 4.4))
        for x0, x1, colour, alpha, label in _hist_bands(edges, lo, hi + 0.5):
            ax.axvspan(x0, x1, color=colour, alpha=alpha, lw=0, label=label)
        ax.bar(exps[shown], 100.0 * hist.counts[shown] / total, width=0.9, align="edge",
               color="#0072B2", label=f"{what} values")
        x_zero = lo - 4
        ax.bar([x_zero], [100.0 * hist.zeros / total], width=0.9, align="edge",
               color="#4D4D4D", label="exactly zero (left bar)")
        ax.axvline(lo - 1.5, color="black", lw=0.8)
        if log2_scale:
            z_op = "<=" if edges.zero_inclusive else "<"
            o_op = ">=" if edges.overflow_inclusive else ">"
            for edge, style, op, verb in ((edges.zero, "--", z_op, "rounds to 0"),
                                          (edges.overflow, ":", o_op, "overflows")):
                x = math.log2(edge) - log2_scale
                if lo <= x <= hi:      # a line off the axis is neither drawn nor in the legend
                    ax.axvline(x, color="#CC79A7", lw=2, ls=style,
                               label=f"{verb} after x2^{log2_scale}: |v| {op} "
                                     f"{_pow2(edge / 2 ** log2_scale)}")
        ax.set_yscale("log")
        step = 5 if hi - lo <= 80 else 20
        ticks = list(range(math.ceil(lo / step) * step, math.floor(hi) + 1, step))
        ax.set_xticks([x_zero + 0.45] + ticks)
        ax.set_xticklabels(["zeros"] + [str(t) for t in ticks])
        ax.set_xlim(x_zero - 0.5, hi + 0.5)
        ax.set_xlabel("log2|v| (the bar at e holds 2^e <= |v| < 2^(e+1)); left bar: exact zeros")
        ax.set_ylabel("% of all values (log scale)")
        ax.set_title(title)
        text = (f"values: {hist.total:,} from {hist.samples} tensors\n"
                f"exactly zero: {100 * frac['zero']:.1f}%\n"
                f"become 0 in {name}, unscaled: {100 * frac['underflow']:.2f}%\n"
                f"become 0 after x2^{log2_scale}: {100 * scaled['underflow']:.2f}%\n"
                f"overflow after x2^{log2_scale}: {100 * scaled['overflow']:.3f}%")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, borderaxespad=0)
        ax.text(1.01, 0.0, text, transform=ax.transAxes, ha="left", va="bottom", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "#7F7F7F", "alpha": 0.95})
        return _save(fig, path)


def _band_stack(curves):
    """Equal-length rows from curves of different lengths (a run stopped early), NaN-padded."""
    n = max(len(c) for c in curves)
    out = np.full((len(curves), n), np.nan)
    for i, c in enumerate(curves):
        out[i, :len(c)] = c
    return out


def _mean_std(rows):
    """Mean and sample standard deviation (ddof=1; 0 where one value) of the finite values of
    each column; NaN where a column has none."""
    rows = np.where(np.isfinite(rows), rows, np.nan)
    n = np.sum(np.isfinite(rows), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(rows, axis=0) / n
        var = np.nansum((rows - mean) ** 2, axis=0) / np.maximum(n - 1, 1)
    mean[n == 0] = np.nan
    return mean, np.sqrt(var)


def plot_metric_by_setting(settings, path, *, title, metric_name="accuracy"):
    """The final metric of each setting of a grid: mean with error bars of one sample standard
    deviation over its seeds, and every seed's value as a dot.

    settings: list of (label, values) with values the final metric of each seed (NaN for a run
    that diverged: left out of mean and bars, counted in the label).
    """
    plt = _pyplot()
    import matplotlib as mpl

    with mpl.rc_context(_rc()):
        fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(settings) + 2), 4.2))
        for i, (_, values) in enumerate(settings):
            v = np.asarray(values, dtype=np.float64)
            ok = v[np.isfinite(v)]
            color = _style(i)["color"]
            if ok.size:
                mean, std = _mean_std(ok[:, None])
                ax.errorbar([i], mean, yerr=std, fmt="s", ms=7, capsize=6, lw=1.6, color=color)
                jitter = (np.arange(ok.size) - (ok.size - 1) / 2) * 0.06
                ax.plot(i + 0.18 + jitter, ok, "o", ms=4, color=color, alpha=0.7)
        labels = []
        for label, values in settings:
            v = np.asarray(values, dtype=np.float64)
            bad = int(np.count_nonzero(~np.isfinite(v)))
            labels.append(label.replace(", ", "\n") + (f"\n({bad} non-finite)" if bad else ""))
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_xlim(-0.6, len(settings) - 0.4)
        ax.set_ylabel(f"final held-out {metric_name}")
        ax.set_title(f"{title}\nmean and one standard deviation over seeds (squares, bars); "
                     "each seed (dots)", fontsize=9)
        fig.tight_layout()
        return _save(fig, path)


def plot_loss_bands(settings, path, *, title, metric_name="accuracy"):
    """Training loss (moving average) and held-out metric of each setting of a grid: the mean
    over its seeds as a line and a band of one sample standard deviation around it.

    settings: list of (label, histories) with the history dicts of the setting's seeds
    ({"step", "loss", "eval_step", "eval_metric"}).  Non-finite values are left out of the mean
    (a run that stopped early simply ends); the moving average is plot_loss_curves's.  Where
    mean - std is not positive the band starts at the lowest seed instead (losses are positive,
    and the axis may be logarithmic).
    """
    plt = _pyplot()
    import matplotlib as mpl

    with mpl.rc_context(_rc()):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
        handles, lo, hi = [], math.inf, 0.0
        for i, (label, hists) in enumerate(settings):
            hists = [h for h in hists if h["loss"]]
            if not hists:
                continue
            style = _style(i)
            longest = max(hists, key=lambda h: len(h["step"]))
            window = max(1, len(longest["step"]) // 25)
            loss = _band_stack([smooth(h["loss"], window) for h in hists])
            mean, std = _mean_std(loss)
            steps = np.asarray(longest["step"])
            ok = mean[np.isfinite(mean) & (mean > 0)]
            if ok.size:
                lo, hi = min(lo, float(ok.min())), max(hi, float(ok.max()))
            (line,) = ax1.plot(steps, mean, lw=1.3, label=f"{label} ({len(hists)} seeds)",
                               **style)
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN columns
                low = np.where(mean - std > 0, mean - std, np.nanmin(loss, axis=0))
            ax1.fill_between(steps, low, mean + std, color=style["color"], alpha=0.18, lw=0)
            handles.append(line)
            longest = max(hists, key=lambda h: len(h["eval_step"]))
            ev = _band_stack([np.asarray(h["eval_metric"], dtype=np.float64) for h in hists])
            mean, std = _mean_std(ev)
            ax2.plot(longest["eval_step"], mean, marker="o", ms=3, lw=1.2, **style)
            ax2.fill_between(longest["eval_step"], mean - std, mean + std,
                             color=style["color"], alpha=0.18, lw=0)
        if hi > 3 * lo:
            ax1.set_yscale("log")
        ax1.set_xlabel("step")
        ax1.set_ylabel("training loss (moving average" + (", log scale)" if hi > 3 * lo else ")"))
        ax1.set_title("training loss: mean over seeds, band ±1 standard deviation")
        ax2.set_xlabel("step")
        ax2.set_ylabel(metric_name)
        ax2.set_title(f"held-out {metric_name}: mean, band ±1 standard deviation")
        fig.suptitle(title)
        fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=7,
                   bbox_to_anchor=(0.5, -0.02))
        fig.tight_layout(rect=(0, 0.03 + 0.035 * ((len(handles) + 1) // 2), 1, 1))
        return _save(fig, path)


# ----- the reproduction's natural-scale figures (models.repro) ------------------------------------
def plot_band_histograms(panels, path, *, title, bands):
    """Paper-style exponent histograms with a format's bands, one panel per gradient kind.

    panels: list of dicts {"what", "exp_min", "counts", "zeros", "total", "text"} (counts per
    floor(log2|v|) bin from exp_min; "text" a caption box).  bands: {"name", "zero_max",
    "tiny", "overflow_min"} magnitudes (models.repro.gradstats.FormatBands): the shaded regions
    are the binades whose values round to zero (or the smallest subnormal), to a subnormal, to a
    normal number.
    """
    plt = _pyplot()
    import matplotlib as mpl

    z = math.log2(bands["zero_max"])          # e.g. -25 for fp16
    sub = math.log2(bands["tiny"])            # the smallest normal: -14
    top = math.log2(bands["overflow_min"])
    with mpl.rc_context(_rc()):
        fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.4 * len(panels)), squeeze=False)
        for ax, p in zip(axes[:, 0], panels):
            counts = np.asarray(p["counts"], dtype=np.float64)
            exps = np.arange(counts.size) + p["exp_min"]
            total = max(p["total"], 1)
            lo = min(int(exps[0]) if exps.size else -30, int(z) - 5)
            hi = max(int(exps[-1]) if exps.size else 0, 2)
            x_zero = lo - 3
            ax.axvspan(lo - 0.5, z + 0.5, color="#E41A1C", alpha=0.12,
                       label=f"|v| < 2^{int(z) + 1}: 0 or the smallest subnormal in "
                             f"{bands['name']} (0 at or below 2^{int(z)})")
            ax.axvspan(z + 0.5, sub - 0.5, color="#E69F00", alpha=0.18,
                       label=f"{bands['name']} subnormal [2^{int(z) + 1}, 2^{int(sub)})")
            ax.axvspan(sub - 0.5, min(top, hi + 1) - 0.5, color="#009E73", alpha=0.12,
                       label=f"{bands['name']} normal")
            if exps.size:
                ax.bar(exps, 100.0 * counts / total, width=0.85, color="#0072B2",
                       label=f"{p['what']} values")
            ax.bar([x_zero], [100.0 * p["zeros"] / total], width=0.85, color="#4D4D4D",
                   label="exactly zero")
            ax.set_yscale("log")
            ax.set_xlim(x_zero - 1, hi + 1)
            ticks = [x_zero] + list(range(lo - lo % 5 + 5 if lo % 5 else lo, hi + 1, 5))
            ax.set_xticks(ticks)
            ax.set_xticklabels(["0"] + [str(t) for t in ticks[1:]])
            ax.set_ylabel("% of all values (log)")
            ax.set_title(p["what"])
            ax.text(0.99, 0.97, p.get("text", ""), transform=ax.transAxes, ha="right",
                    va="top", fontsize=8,
                    bbox={"facecolor": "white", "edgecolor": "#7F7F7F", "alpha": 0.95})
            ax.legend(loc="upper left", fontsize=7)
        axes[-1, 0].set_xlabel("log2(|value|) (bin e holds 2^e <= |v| < 2^(e+1)); left bar: "
                               "exactly zero")
        fig.suptitle(title)
        fig.tight_layout()
        return _save(fig, path)


def plot_scale_window(windows, path, *, title, runs=(), settled=None):
    """The loss-scale window.  Top: for each gradient kind, the share of fp32's non-zero values
    that an fp16 cast after scaling by 2^k sends to zero (solid) or to infinity (dashed),
    against k, on a log axis, with the paper's 0.1% line; bottom: the static-scale runs' share
    of fp32's improvement.  A dotted line marks where a dynamic scaler settled.

    windows: {label: {"log2_scale", "to_zero", "overflow"}}; runs: [(k, progress, skipped)].
    """
    plt = _pyplot()
    import matplotlib as mpl

    floor = 1e-4   # shares below 10^-4 % are drawn on the axis floor (log axis)
    with mpl.rc_context(_rc()):
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8.5, 6.2), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
        for i, (label, w) in enumerate(windows.items()):
            color = _COLORS[i % len(_COLORS)]
            ks = w["log2_scale"]
            ax.plot(ks, np.maximum(100 * np.asarray(w["to_zero"]), floor), "-", color=color,
                    lw=1.6, marker="o", ms=3, label=f"{label}: become 0 (underflow)")
            ax.plot(ks, np.maximum(100 * np.asarray(w["overflow"]), floor), "--", color=color,
                    lw=1.4, marker="^", ms=3, label=f"{label}: become inf (overflow)")
        ax.axhline(0.1, color="#7F7F7F", lw=1, ls="-.", label="0.1% (paper: 32K recovers all "
                                                              "but 0.1%)")
        ax.set_yscale("log")
        ax.set_ylim(floor * 0.7, 150)
        ax.set_ylabel("% of fp32's non-zero values lost")
        ax.set_title(title)
        if runs:
            ks = [r[0] for r in runs]
            prog = [100 * r[1] if r[1] is not None and math.isfinite(r[1]) else np.nan
                    for r in runs]
            ax2.plot(ks, prog, "s-", color="#000000", ms=6, mfc="none", mew=1.5, lw=0.8,
                     label="static-scale run")
            for k, _, sk in runs:
                if sk:
                    ax2.annotate(f"{sk:.0f} skipped", (k, 5), fontsize=7, ha="center")
            ax2.legend(loc="lower left", fontsize=7)
        for a in (ax, ax2):
            if settled is not None and math.isfinite(settled):
                a.axvline(settled, color="#CC79A7", lw=2, ls=":",
                          label=f"GradScaler settles at 2^{settled:.1f}" if a is ax else None)
        ax.legend(loc="upper left", fontsize=7)
        ax2.set_ylim(-5, 115)
        ax2.set_ylabel("% of fp32's\nimprovement")
        ax2.set_xlabel("log2(loss scale)")
        fig.tight_layout()
        return _save(fig, path)


def plot_layer_shares(rows, path, *, title, fmt_name="fp16"):
    """Per-layer shares of non-zero gradients that become zero / subnormal in the format.

    rows: {kind label: [(layer, to_zero, subnormal)]} (shares as fractions, means over seeds).
    """
    plt = _pyplot()
    import matplotlib as mpl

    with mpl.rc_context(_rc()):
        fig, axes = plt.subplots(1, len(rows), figsize=(5.5 * len(rows), 4.2), squeeze=False)
        for ax, (kind, rs) in zip(axes[0], rows.items()):
            names = [r[0] for r in rs]
            x = np.arange(len(rs))
            ax.bar(x - 0.2, [100 * r[1] for r in rs], width=0.4, color="#D55E00",
                   label=f"become 0 in {fmt_name}")
            ax.bar(x + 0.2, [100 * r[2] for r in rs], width=0.4, color="#E69F00",
                   label=f"become {fmt_name} subnormal")
            ax.set_xticks(x)
            ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
            ax.set_ylabel("% of the layer's non-zero values")
            ax.set_title(kind)
            ax.legend(fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
        return _save(fig, path)


def plot_update_ratios(exp_min, counts, path, *, title, threshold_log2=-11, text=""):
    """Histogram of floor(log2(|update| / |w|)) with the fp16 threshold 2^threshold_log2."""
    plt = _pyplot()
    import matplotlib as mpl

    counts = np.asarray(counts, dtype=np.float64)
    exps = np.arange(counts.size) + exp_min
    with mpl.rc_context(_rc()):
        fig, ax = plt.subplots(figsize=(8.5, 4.0))
        total = max(counts.sum(), 1.0)
        below = exps < threshold_log2
        ax.bar(exps[below], 100 * counts[below] / total, width=0.85, color="#D55E00",
               label=f"|update| < 2^{threshold_log2} |w|: lost if added to an fp16 weight")
        ax.bar(exps[~below], 100 * counts[~below] / total, width=0.85, color="#0072B2",
               label="larger updates")
        # bin e is drawn at x = e and holds [2^e, 2^(e+1)): the threshold 2^t lies between the
        # bars of e = t - 1 and e = t
        ax.axvline(threshold_log2 - 0.5, color="#000000", ls="--", lw=1.2)
        ax.set_xlabel("log2(|update| / |w|) (bin e holds 2^e <= ratio < 2^(e+1))")
        ax.set_ylabel("% of updates")
        ax.set_title(title)
        if text:
            ax.text(0.99, 0.97, text, transform=ax.transAxes, ha="right", va="top", fontsize=8,
                    bbox={"facecolor": "white", "edgecolor": "#7F7F7F", "alpha": 0.95})
        ax.legend(loc="upper left", fontsize=7)
        fig.tight_layout()
        return _save(fig, path)


def plot_share_curves(x, series, path, *, title, xlabel, logx=True, ylabel=None,
                      xticklabels=None):
    """Measured shares against x, one line per series with +-1 standard deviation bars.

    series: {label: (means, stds)} (fractions); xticklabels: tick texts (default: x)."""
    plt = _pyplot()
    import matplotlib as mpl

    with mpl.rc_context(_rc()):
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
        for i, (label, (mean, std)) in enumerate(series.items()):
            ax.errorbar(x, 100 * np.asarray(mean, dtype=np.float64),
                        yerr=100 * np.asarray(std, dtype=np.float64), marker="o", ms=4,
                        capsize=3, lw=1.4, label=label, **_style(i))
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xticks(list(x))
        ax.set_xticklabels(xticklabels or [str(v) for v in x])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel or "% of non-zero values")
        ax.set_title(title)
        ax.legend(fontsize=7)
        fig.tight_layout()
        return _save(fig, path)
