"""Exponent histograms of gradients, as in Figures 2b and 3 of Micikevicius et al. (2018).

Provides :class:`ExponentHistogram`, which accumulates, over any number of gradient arrays, the
count of values per binary exponent e = floor(log2|v|) (every float32 exponent, -149 .. 127), a
separate zero bin and a non-finite count, plus the numbers the paper quotes: the fraction of
values that become zero when cast to fp16 as they are (unscaled) and after multiplying by a loss
scale 2^k, for every k in 0..32, and the fraction that overflows.  :func:`fp16_fate` classifies
values exactly (zero / subnormal / normal / inf after an fp16 RNE cast) with ``softfloat.round``.

The underflow/overflow thresholds for a scale 2^k, derived from fp16's grid under
round-to-nearest-even (the cast multiplies by a power of two exactly, then rounds once):

* the smallest subnormal is 2^-24; a magnitude at or below half of it, 2^-25, rounds to 0 (the tie
  at exactly 2^-25 goes to the even neighbour, 0): v underflows  iff  |v| * 2^k <= 2^-25;
* the largest finite value is (2 - 2^-10) * 2^15 = 65504 with an ulp of 2^5 = 32; magnitudes at
  or above 65504 + 16 = 65520 round to Inf (the tie at 65520 goes to the even neighbour 2^16,
  which overflows): v overflows  iff  |v| * 2^k >= 65520.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

import softfloat as sf

__all__ = ["EXP_MAX", "EXP_MIN", "FP16", "ExponentHistogram", "fp16_fate"]

EXP_MIN, EXP_MAX = -149, 127   # float32: smallest subnormal 2^-149, largest exponent 127
LOG2_SCALES = np.arange(0, 33)  # the loss scales 2^0 .. 2^32 for which fractions are tabulated
#: fp16 landmarks as log2 exponents: normal range [2^-14, 65504], subnormals down to 2^-24
FP16 = {"min_subnormal_exp": -24, "min_normal_exp": -14, "max_exp": 15,
        "underflow_threshold": 2.0 ** -25, "overflow_threshold": 65520.0}


def fp16_fate(values, scale=1.0):
    """Counts of what an fp16 RNE cast does to ``values * scale`` (values non-zero and finite):
    dict with keys "zero", "subnormal", "normal", "inf", computed with softfloat.round."""
    v = np.asarray(values, dtype=np.float64).reshape(-1) * float(scale)
    r = np.abs(sf.round(v, "fp16", "rne").astype(np.float64))
    zero = int(np.count_nonzero(r == 0))
    inf = int(np.count_nonzero(np.isinf(r)))
    sub = int(np.count_nonzero((r > 0) & (r < 2.0 ** -14)))
    return {"zero": zero, "subnormal": sub, "normal": int(r.size) - zero - inf - sub, "inf": inf}


class ExponentHistogram:
    """Accumulated exponent histogram of many arrays (see the module docstring)."""

    def __init__(self, name=""):
        self.name = name
        self.counts = np.zeros(EXP_MAX - EXP_MIN + 1, dtype=np.int64)
        self.zeros = 0
        self.nonfinite = 0
        self.underflow = np.zeros(LOG2_SCALES.size, dtype=np.int64)
        self.overflow = np.zeros(LOG2_SCALES.size, dtype=np.int64)
        self.samples = 0  # arrays (tensors) added

    @property
    def total(self):
        return int(self.counts.sum()) + self.zeros + self.nonfinite

    def add(self, array):
        """Add the values of one array (any float dtype; read as float32)."""
        a = np.asarray(array, dtype=np.float32).reshape(-1)
        finite = np.isfinite(a)
        self.nonfinite += int(a.size - np.count_nonzero(finite))
        a = np.abs(a[finite])
        nz = a[a != 0]
        self.zeros += int(a.size - nz.size)
        if nz.size:
            _, e = np.frexp(nz)  # nz = m * 2^e with m in [0.5, 1): floor(log2 nz) = e - 1
            self.counts += np.bincount(e.astype(np.int64) - 1 - EXP_MIN,
                                       minlength=self.counts.size)
            s = np.sort(nz.astype(np.float64))
            thresholds_lo = FP16["underflow_threshold"] * 2.0 ** -LOG2_SCALES
            thresholds_hi = FP16["overflow_threshold"] * 2.0 ** -LOG2_SCALES
            self.underflow += np.searchsorted(s, thresholds_lo, side="right")
            self.overflow += s.size - np.searchsorted(s, thresholds_hi, side="left")
        self.samples += 1

    def fractions(self, log2_scale=0):
        """Fractions of ALL values (zeros included, as in the paper's Fig. 3) that are zero
        already, that become zero in fp16 after scaling by 2^log2_scale, and that overflow."""
        k = int(log2_scale)
        if not 0 <= k < LOG2_SCALES.size:
            raise ValueError(f"log2_scale must be in 0..{LOG2_SCALES[-1]}, got {log2_scale}")
        n = max(self.total, 1)
        nonzero = int(self.counts.sum())
        return {"zero": self.zeros / n, "nonzero": nonzero / n,
                "underflow_fp16": int(self.underflow[k]) / n,
                "underflow_of_nonzero": int(self.underflow[k]) / max(nonzero, 1),
                "overflow_fp16": int(self.overflow[k]) / n, "nonfinite": self.nonfinite / n}

    def best_log2_scale(self):
        """The largest k with no overflow (the paper: "as large as possible without overflow")."""
        ok = np.flatnonzero(self.overflow == 0)
        return int(ok[-1]) if ok.size else 0

    def to_dict(self):
        nz = np.flatnonzero(self.counts)
        lo, hi = (int(nz[0]), int(nz[-1]) + 1) if nz.size else (0, 0)
        return {"name": self.name, "exp_min": EXP_MIN + lo, "counts": self.counts[lo:hi].tolist(),
                "zeros": self.zeros, "nonfinite": self.nonfinite, "samples": self.samples,
                "total": self.total, "underflow_by_log2_scale": self.underflow.tolist(),
                "overflow_by_log2_scale": self.overflow.tolist()}

    @classmethod
    def from_dict(cls, d):
        h = cls(d.get("name", ""))
        lo = d["exp_min"] - EXP_MIN
        h.counts[lo:lo + len(d["counts"])] = d["counts"]
        h.zeros, h.nonfinite, h.samples = int(d["zeros"]), int(d["nonfinite"]), int(d["samples"])
        h.underflow[:] = d["underflow_by_log2_scale"]
        h.overflow[:] = d["overflow_by_log2_scale"]
        return h
