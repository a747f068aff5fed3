"""What a cast to a 16-bit format does to gradients: exponent histograms with the format's bands,
per layer, at every loss scale 2^0 .. 2^32 (the raw material of Figures 2b and 3).

Provides :class:`FormatBands` (the exact magnitude thresholds at which round-to-nearest-even
sends a value to zero, to a subnormal, to a normal number or to infinity, derived from a
``softfloat.Format``), :class:`GradStats` (accumulated histogram of floor(log2|v|) plus the
count of values in each band after scaling by 2^k, for every k), :class:`LayerStats` (one
GradStats per (kind, layer)) and :class:`UpdateRatioStats` (the histogram of |update| / |w|, the
mechanism of Fig. 2a).

The thresholds, for an IEEE-style format with subnormals (smallest subnormal s, smallest normal
t = ``tiny``, largest finite M with ulp 2^(emax - man_bits) at the top), under RNE:

* zero:      |v| <= s/2.  The midpoint of 0 and s is s/2; the tie goes to the even neighbour, 0.
* subnormal: s/2 < |v| < t - s/2.  t - s/2 is the midpoint of the largest subnormal t - s (odd
  last bit) and t (even), so the tie goes up to t, a normal number.
* normal:    t - s/2 <= |v| < M + 2^(emax - man_bits - 1).
* overflow:  |v| >= M + 2^(emax - man_bits - 1), the midpoint of M (odd last bit) and
  2^(emax + 1) (even), which is not representable: the tie rounds to infinity.

For fp16: s = 2^-24, t = 2^-14, M = 65504, so zero below or at 2^-25, overflow from 65520.
A loss scale 2^k multiplies exactly (a power of two), so a value lands in a band after scaling
iff |v| lies in the band's interval divided by 2^k.  Tests check every threshold against
``softfloat.round``.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

import softfloat as sf

__all__ = ["EXP_HI", "EXP_LO", "LOG2_SCALES", "FormatBands", "GradStats", "LayerStats",
           "UpdateRatioStats", "band_counts"]

#: exponent bins floor(log2|v|): -160..130 holds every float32 value (2^-149 .. 2^128) with a
#: margin for values divided by a loss scale; anything outside goes to the end bins
EXP_LO, EXP_HI = -160, 130
#: loss scales 2^k tabulated for the survival / overflow shares
LOG2_SCALES = np.arange(0, 33)


class FormatBands:
    """Exact RNE band thresholds of ``fmt`` (a softfloat Format or its name); see the module
    docstring for their derivation."""

    def __init__(self, fmt="fp16"):
        f = sf.get_format(fmt) if isinstance(fmt, str) else fmt
        if not f.subnormals or f.saturate or f.inf_nan != "ieee":
            raise ValueError(f"FormatBands needs an IEEE-style format with subnormals and "
                             f"infinities (fp16, bf16, e5m2, ...), got {f.name!r}")
        self.format = f
        s = float(f.smallest_subnormal)
        self.zero_max = s / 2.0
        self.normal_min = float(f.tiny) - s / 2.0
        self.overflow_min = float(f.max) + 2.0 ** (f.emax - f.man_bits - 1)
        #: the paper's axis: "exponent below -24" for fp16 means |v| < s
        self.below_min = s

    def classify(self, values, log2_scale=0):
        """Counts {"zero", "subnormal", "normal", "overflow"} of the non-zero finite values of
        ``values`` multiplied by 2^log2_scale and cast to the format."""
        a = np.abs(np.asarray(values, dtype=np.float64).reshape(-1))
        a = np.sort(a[np.isfinite(a) & (a != 0)])
        return band_counts(a, self, np.asarray([log2_scale]))[0]


def band_counts(sorted_abs, bands, log2_scales):
    """Band counts of sorted non-zero magnitudes at each scale 2^k: one dict per k."""
    a = sorted_abs
    out = []
    for k in log2_scales:
        inv = 2.0 ** -float(k)
        zero = int(np.searchsorted(a, bands.zero_max * inv, side="right"))
        below_normal = int(np.searchsorted(a, bands.normal_min * inv, side="left"))
        over = int(a.size - np.searchsorted(a, bands.overflow_min * inv, side="left"))
        out.append({"zero": zero, "subnormal": below_normal - zero,
                    "normal": int(a.size) - below_normal - over, "overflow": over})
    return out


class GradStats:
    """Accumulated statistics of many gradient arrays (see the module docstring).

    ``counts[i]`` holds the non-zero finite values with floor(log2|v|) == EXP_LO + i;
    ``zero_k[k]``, ``sub_k[k]``, ``over_k[k]``: of those, how many become zero / subnormal /
    infinite when cast to the format after multiplying by 2^k; ``series``: per added array, the
    step and its (non-zero, to-zero at 2^0, below the smallest subnormal) counts, so the shares
    can be followed over training.
    """

    def __init__(self, fmt="fp16"):
        self.bands = FormatBands(fmt)
        self.counts = np.zeros(EXP_HI - EXP_LO + 1, dtype=np.int64)
        self.zeros = 0
        self.nonfinite = 0
        self.below = 0
        self.zero_k = np.zeros(LOG2_SCALES.size, dtype=np.int64)
        self.sub_k = np.zeros(LOG2_SCALES.size, dtype=np.int64)
        self.over_k = np.zeros(LOG2_SCALES.size, dtype=np.int64)
        self.series = {}      # step -> [nonzero, to_zero, below]
        self.samples = 0

    @property
    def nonzero(self):
        return int(self.counts.sum())

    @property
    def total(self):
        return self.nonzero + self.zeros + self.nonfinite

    def add(self, array, step=None):
        """Add one array's values (any float dtype; float64 so that a division by the loss
        scale stays exact)."""
        v = np.asarray(array, dtype=np.float64).reshape(-1)
        finite = np.isfinite(v)
        self.nonfinite += int(v.size - np.count_nonzero(finite))
        a = np.abs(v[finite])
        nz = np.sort(a[a != 0])
        self.zeros += int(a.size - nz.size)
        self.samples += 1
        if nz.size:
            # frexp: nz = m * 2^e with m in [0.5, 1), so floor(log2 nz) = e - 1 exactly
            e = np.frexp(nz)[1].astype(np.int64) - 1
            self.counts += np.bincount(np.clip(e - EXP_LO, 0, self.counts.size - 1),
                                       minlength=self.counts.size)
            for k, c in enumerate(band_counts(nz, self.bands, LOG2_SCALES)):
                self.zero_k[k] += c["zero"]
                self.sub_k[k] += c["subnormal"]
                self.over_k[k] += c["overflow"]
            self.below += int(np.searchsorted(nz, self.bands.below_min, side="left"))
        if step is not None:
            row = self.series.setdefault(int(step), [0, 0, 0])
            row[0] += int(nz.size)
            row[1] += int(np.searchsorted(nz, self.bands.zero_max, side="right")) if nz.size else 0
            row[2] += int(np.searchsorted(nz, self.bands.below_min, side="left")) if nz.size else 0

    def merge(self, other):
        """A new GradStats holding both (same format)."""
        if other.bands.format.name != self.bands.format.name:
            raise ValueError("GradStats.merge: formats differ")
        out = GradStats(self.bands.format)
        for name in ("counts", "zero_k", "sub_k", "over_k"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        for name in ("zeros", "nonfinite", "below", "samples"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        for src in (self.series, other.series):
            for step, row in src.items():
                acc = out.series.setdefault(step, [0, 0, 0])
                for i in range(3):
                    acc[i] += row[i]
        return out

    def shares(self, log2_scale=0):
        """The report's numbers at scale 2^log2_scale.  "zero": exactly zero in fp32 (share of
        all values, as the paper's Fig. 3); the rest are shares of the non-zero finite values:
        "to_zero" (become 0 in the format), "subnormal", "overflow", "survive" (stay non-zero
        and finite), "below" (|v| below the smallest subnormal, the paper's Fig. 2b axis;
        unscaled only) and "to_zero_of_all" (becoming zero, as a share of all values)."""
        k = int(log2_scale)
        if not 0 <= k < LOG2_SCALES.size:
            raise ValueError(f"log2_scale must be in 0..{LOG2_SCALES[-1]}, got {log2_scale}")
        nz = self.nonzero
        d = max(nz, 1)
        return {"zero": self.zeros / max(self.total, 1), "to_zero": int(self.zero_k[k]) / d,
                "subnormal": int(self.sub_k[k]) / d, "overflow": int(self.over_k[k]) / d,
                "survive": (nz - int(self.zero_k[k]) - int(self.over_k[k])) / d,
                "below": self.below / d if k == 0 else None,
                "to_zero_of_all": int(self.zero_k[k]) / max(self.total, 1)}

    def window(self, top=24):
        """(log2 scales 0..top, survival shares, overflow shares, underflow shares), the loss-scale
        window of Fig. 3: what share of fp32's non-zero values survive the cast at each scale."""
        ks = np.arange(0, top + 1)
        nz = self.nonzero
        d = max(nz, 1)
        over, zero = self.over_k[:top + 1], self.zero_k[:top + 1]
        return ks, (nz - zero - over) / d, over / d, zero / d

    def edges(self, keep=0.999):
        """The window's edges: the smallest k at which at least ``keep`` of the non-zero values
        survive, and the largest k with no overflow (None when there is none)."""
        ks, surv, over, _ = self.window(top=int(LOG2_SCALES[-1]))
        low = next((int(k) for k, s in zip(ks, surv) if s >= keep), None)
        ok = np.flatnonzero(self.over_k == 0)
        return low, (int(ok[-1]) if ok.size else None)

    def to_dict(self):
        nz = np.flatnonzero(self.counts)
        lo, hi = (int(nz[0]), int(nz[-1]) + 1) if nz.size else (0, 0)
        return {"format": self.bands.format.name, "exp_min": EXP_LO + lo,
                "counts": self.counts[lo:hi].tolist(), "zeros": self.zeros,
                "nonfinite": self.nonfinite, "below": self.below, "samples": self.samples,
                "to_zero_by_log2_scale": self.zero_k.tolist(),
                "subnormal_by_log2_scale": self.sub_k.tolist(),
                "overflow_by_log2_scale": self.over_k.tolist(),
                "series": [[s] + r for s, r in sorted(self.series.items())]}

    @classmethod
    def from_dict(cls, d):
        g = cls(d["format"])
        lo = d["exp_min"] - EXP_LO
        g.counts[lo:lo + len(d["counts"])] = d["counts"]
        g.zeros, g.nonfinite = int(d["zeros"]), int(d["nonfinite"])
        g.below, g.samples = int(d["below"]), int(d["samples"])
        g.zero_k[:] = d["to_zero_by_log2_scale"]
        g.sub_k[:] = d["subnormal_by_log2_scale"]
        g.over_k[:] = d["overflow_by_log2_scale"]
        g.series = {int(r[0]): list(r[1:]) for r in d["series"]}
        return g


class LayerStats:
    """One :class:`GradStats` per (kind, layer); kinds "weight_grad" and "activation_grad".
    Layers keep the order in which they were first seen (the model's order)."""

    KINDS = ("weight_grad", "activation_grad")

    def __init__(self, fmt="fp16"):
        self.fmt = fmt
        self.stats = {k: {} for k in self.KINDS}

    def add(self, kind, layer, array, step=None):
        if kind not in self.stats:
            raise ValueError(f"kind must be one of {self.KINDS}, got {kind!r}")
        g = self.stats[kind].get(layer)
        if g is None:
            g = self.stats[kind][layer] = GradStats(self.fmt)
        g.add(array, step)

    def layers(self, kind):
        return list(self.stats[kind])

    def total(self, kind):
        """All layers of ``kind`` merged (None when nothing was recorded)."""
        out = None
        for g in self.stats[kind].values():
            out = g if out is None else out.merge(g)
        return out

    def merge(self, other):
        out = LayerStats(self.fmt)
        for kind in self.KINDS:
            for src in (self.stats[kind], other.stats[kind]):
                for layer, g in src.items():
                    have = out.stats[kind].get(layer)
                    out.stats[kind][layer] = g if have is None else have.merge(g)
        return out

    def to_dict(self):
        return {kind: [[layer, g.to_dict()] for layer, g in d.items()]
                for kind, d in self.stats.items()}

    @classmethod
    def from_dict(cls, d, fmt="fp16"):
        out = cls(fmt)
        for kind, rows in d.items():
            out.stats[kind] = {layer: GradStats.from_dict(g) for layer, g in rows}
        return out


class UpdateRatioStats:
    """Histogram of floor(log2(|update| / |w|)) over the elements with a non-zero gradient and
    a non-zero weight, and the count below 2^-11 (the paper's threshold: an fp16 weight has 10
    fraction bits, so an update below 2^-11 of it is less than half an ulp and rounds away; the
    exact limit, half an ulp of w over |w|, lies in (2^-12, 2^-11] depending on w's
    significand) and below 2^-12 (lost whatever the significand)."""

    LO, HI = -80, 20
    THRESHOLD_LOG2 = -11

    def __init__(self):
        self.counts = np.zeros(self.HI - self.LO + 1, dtype=np.int64)
        self.unchanged = 0     # elements whose weight did not move at all (zero update)
        self.below_11 = 0
        self.below_12 = 0

    @property
    def moved(self):
        return int(self.counts.sum())

    def add(self, before, after, mask=None):
        """Add one parameter's update: weights before and after the step (any float arrays);
        mask: elements to count (the non-zero gradients), all when None."""
        b = np.asarray(before, dtype=np.float64).reshape(-1)
        a = np.asarray(after, dtype=np.float64).reshape(-1)
        keep = b != 0
        if mask is not None:
            keep &= np.asarray(mask, dtype=bool).reshape(-1)
        d = np.abs(a[keep] - b[keep])
        w = np.abs(b[keep])
        self.unchanged += int(np.count_nonzero(d == 0))
        r = d[d != 0] / w[d != 0]
        if r.size:
            e = np.frexp(r)[1].astype(np.int64) - 1
            self.counts += np.bincount(np.clip(e - self.LO, 0, self.counts.size - 1),
                                       minlength=self.counts.size)
            self.below_11 += int(np.count_nonzero(r < 2.0 ** -11))
            self.below_12 += int(np.count_nonzero(r < 2.0 ** -12))

    def merge(self, other):
        out = UpdateRatioStats()
        out.counts = self.counts + other.counts
        for name in ("unchanged", "below_11", "below_12"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out

    def shares(self):
        d = max(self.moved, 1)
        return {"moved": self.moved, "unchanged": self.unchanged,
                "below_2^-11": self.below_11 / d, "below_2^-12": self.below_12 / d}

    def to_dict(self):
        nz = np.flatnonzero(self.counts)
        lo, hi = (int(nz[0]), int(nz[-1]) + 1) if nz.size else (0, 0)
        return {"exp_min": self.LO + lo, "counts": self.counts[lo:hi].tolist(),
                "unchanged": self.unchanged, "below_2^-11": self.below_11,
                "below_2^-12": self.below_12}

    @classmethod
    def from_dict(cls, d):
        u = cls()
        lo = d["exp_min"] - cls.LO
        u.counts[lo:lo + len(d["counts"])] = d["counts"]
        u.unchanged, u.below_11, u.below_12 = (int(d["unchanged"]), int(d["below_2^-11"]),
                                               int(d["below_2^-12"]))
        return u
