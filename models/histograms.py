"""Exponent histograms of gradients, as in Figures 2b and 3 of Micikevicius et al. (2018).

Provides :class:`ExponentHistogram`, which accumulates, over any number of gradient arrays, the
count of values per binary exponent e = floor(log2|v|) (every float32 exponent, -149 .. 127), a
separate zero bin and a non-finite count -- the statistics of :func:`autograd.instrument.
tensor_stats`, which computes them -- plus the numbers the paper quotes, for every recorded
target format (by default every softfloat preset): how many values become zero when cast to the
format as they are (unscaled) and after multiplying by a loss scale 2^k, for every k in 0..32,
and how many overflow.  :func:`rounding_edges` derives where a format's rounding gives zero and
where it overflows, from the softfloat Format alone; :func:`fate` classifies values with
``softfloat.round`` itself (the tests check the edges against it).

The edges, for a magnitude x = |v| * 2^k > 0 (the cast multiplies by a power of two exactly,
then rounds once), with s = 2^(emin - m) the smallest subnormal, p = m + 1 bits, M the integer
significand of the largest finite value (max = M * 2^(emax - m)) and u = 2^(emax - m) the ulp of
the top binade:

* becomes 0, with subnormals: RNE x <= s/2 (the tie s/2 lies between 0, even, and s, whose last
  bit is 1, so it goes to 0); RNA x < s/2 (the tie goes away from zero, to s); RTZ x < s.
  fp16: s = 2^-24, so RNE gives 0 exactly for x <= 2^-25.
* becomes 0, flush-to-zero formats (tininess after rounding: a result whose p-bit rounding with
  unbounded exponent stays below 2^emin becomes 0): nearest modes x < 2^emin - 2^(emin - p - 1),
  the midpoint between 2^emin and the p-bit number below it (its tie goes up to 2^emin, even
  for RNE, away for RNA); RTZ x < 2^emin.
* overflows (IEEE overflow: the rounding with unbounded exponent exceeds max; the result is Inf,
  NaN in fn formats, or max in saturating ones): nearest modes x >= max + u/2 = (2M + 1) u/2,
  except that for RNE the tie itself goes to max when M is even (fn formats: e4m3fn has
  M = 14, max 448, so 464 rounds to 448 and only x > 464 overflows; fp16 has M = 2047, odd:
  x >= 65504 + 16 = 65520 overflows); RTZ x >= max + u, the next p-bit number above max.

Only the sign-symmetric modes rne, rna and rtz have such edges on |v|: rup and rdn round the two
signs differently, rto never gives 0 or overflows the same way, and sr is random.

Imports numpy, softfloat and autograd.instrument.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

import numpy as np

import softfloat as sf
from autograd.instrument import tensor_stats

__all__ = ["EDGE_MODES", "EXP_MAX", "EXP_MIN", "FP16", "LOG2_SCALES", "ExponentHistogram",
           "RoundingEdges", "fate", "fp16_fate", "rounding_edges"]

EXP_MIN, EXP_MAX = -149, 127   # float32: smallest subnormal 2^-149, largest exponent 127
LOG2_SCALES = np.arange(0, 33)  # the loss scales 2^0 .. 2^32 for which fractions are tabulated
EDGE_MODES = ("rne", "rna", "rtz")


@dataclass(frozen=True)
class RoundingEdges:
    """Where rounding a magnitude x > 0 to ``fmt`` in ``mode`` gives 0 and where it overflows
    (exact rationals; see the module docstring for the derivation)."""

    fmt: sf.Format
    mode: str
    zero: Fraction            # x < zero (or <= when zero_inclusive) becomes 0
    zero_inclusive: bool
    overflow: Fraction        # x > overflow (or >= when overflow_inclusive) overflows
    overflow_inclusive: bool

    def becomes_zero(self, x):
        """Elementwise: does |x| round to 0?  (x: float64 array)"""
        a = np.abs(np.asarray(x, dtype=np.float64))
        edge, inclusive = _float_edge(self.zero, self.zero_inclusive, below=True)
        return (a <= edge) if inclusive else (a < edge)

    def overflows(self, x):
        """Elementwise: does |x| overflow?  (x: float64 array)"""
        a = np.abs(np.asarray(x, dtype=np.float64))
        edge, inclusive = _float_edge(self.overflow, self.overflow_inclusive, below=False)
        return (a >= edge) if inclusive else (a > edge)

    @cached_property
    def _scaled(self):
        """The edges divided by 2^k for k in LOG2_SCALES, as float64 (value, inclusive) arrays."""
        lo = [_float_edge(self.zero / 2 ** int(k), self.zero_inclusive, below=True)
              for k in LOG2_SCALES]
        hi = [_float_edge(self.overflow / 2 ** int(k), self.overflow_inclusive, below=False)
              for k in LOG2_SCALES]
        return (np.array([v for v, _ in lo]), np.array([i for _, i in lo]),
                np.array([v for v, _ in hi]), np.array([i for _, i in hi]))

    def counts(self, sorted_abs):
        """(becomes 0, overflows) counts of the sorted float64 magnitudes ``sorted_abs`` times
        2^k, for every k in LOG2_SCALES (two binary searches per k)."""
        lo, lo_inc, hi, hi_inc = self._scaled
        under = np.where(lo_inc, np.searchsorted(sorted_abs, lo, side="right"),
                         np.searchsorted(sorted_abs, lo, side="left"))
        over = sorted_abs.size - np.where(hi_inc, np.searchsorted(sorted_abs, hi, side="left"),
                                          np.searchsorted(sorted_abs, hi, side="right"))
        return under.astype(np.int64), over.astype(np.int64)

    def describe(self):
        """The two edges as legend text: ("<= 2^-25", ">= 65520") for fp16 in RNE (powers of
        two written as such)."""
        z = ("<=" if self.zero_inclusive else "<") + " " + _num(self.zero)
        o = (">=" if self.overflow_inclusive else ">") + " " + _num(self.overflow)
        return z, o


def _num(q):
    """2^e for powers of two, else a short decimal."""
    if q > 0 and q.numerator & (q.numerator - 1) == 0 and q.denominator & (q.denominator - 1) \
            == 0:
        return f"2^{q.numerator.bit_length() - q.denominator.bit_length()}"
    return f"{float(q):.6g}"


def _float_edge(q, inclusive, *, below):
    """The edge as a float64 that classifies every float64 exactly like the rational q: when q
    is not a float64, "x <= q" and "x < q" both become "x <= floor64(q)" (below=True, zero
    edges), and "x >= q" and "x > q" both become "x >= ceil64(q)" (overflow edges)."""
    try:
        f = float(q)                       # correctly rounded
    except OverflowError:
        f = math.inf
    if math.isfinite(f) and Fraction(f) == q:
        return f, inclusive
    if below:
        if not math.isfinite(f):
            return sys.float_info.max, True
        return (math.nextafter(f, 0.0) if Fraction(f) > q else f), True
    if math.isfinite(f) and Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f, True


def rounding_edges(fmt="fp16", mode="rne"):
    """The :class:`RoundingEdges` of a softfloat format (a Format or a preset name) in a
    sign-symmetric mode (rne, rna, rtz); derived from the Format's fields alone (and cached:
    the records are immutable)."""
    return _rounding_edges(sf.get_format(fmt), sf.parse_mode(mode).short)


@lru_cache(maxsize=None)
def _rounding_edges(f, m):
    if m not in EDGE_MODES:
        raise ValueError(f"rounding_edges: mode {m!r} has no edges on |v|; accepted: "
                         f"{', '.join(EDGE_MODES)} (rup and rdn treat the two signs "
                         "differently, rto rounds every tiny value to the odd smallest one, "
                         "sr is random)")
    two = Fraction(2)
    if f.subnormals:
        s = two ** (f.emin - f.man_bits)                       # smallest subnormal
        zero, zero_inc = (s, False) if m == "rtz" else (s / 2, m == "rne")
    else:
        tiny = two ** f.emin
        zero = tiny if m == "rtz" else tiny - two ** (f.emin - f.precision - 1)
        zero_inc = False
    u = two ** (f.emax - f.man_bits)                          # ulp of the top binade
    big = Fraction(f.max) / u                                 # M, an integer
    if m == "rtz":
        over, over_inc = (big + 1) * u, True
    else:
        over = (2 * big + 1) * u / 2
        over_inc = m == "rna" or big.numerator % 2 == 1
    return RoundingEdges(f, m, zero, zero_inc, over, over_inc)


def fate(values, fmt="fp16", scale=1.0, mode="rne"):
    """Counts of what casting ``values * scale`` to ``fmt`` does (values non-zero and finite):
    dict with keys "zero", "subnormal", "normal", "overflow", computed with softfloat.round
    and its IEEE overflow flag (which also counts values a saturating format clamps to max)."""
    f = sf.get_format(fmt)
    v = np.asarray(values, dtype=np.float64).reshape(-1) * float(scale)
    flags = sf.Flags()
    r = np.abs(sf.round(v, f, mode, flags=flags).astype(np.float64))
    zero = int(np.count_nonzero(r == 0))
    over = int(flags.overflow)
    sub = int(np.count_nonzero((r > 0) & (r < f.tiny)))
    return {"zero": zero, "subnormal": sub, "normal": int(r.size) - zero - sub - over,
            "overflow": over}


def fp16_fate(values, scale=1.0):
    """:func:`fate` for fp16 and RNE, with the overflow count under its fp16 name "inf"."""
    out = fate(values, "fp16", scale)
    out["inf"] = out.pop("overflow")
    return out


def _landmarks(f):
    """log2 landmarks of a format: smallest subnormal, smallest normal, largest exponent."""
    return {"min_subnormal_exp": f.emin - (f.man_bits if f.subnormals else 0),
            "min_normal_exp": f.emin, "max_exp": f.emax}


_FP16_EDGES = rounding_edges("fp16", "rne")
#: fp16 landmarks as log2 exponents and its RNE edges, derived from the Format: normal range
#: [2^-14, 65504], subnormals down to 2^-24, 0 at or below 2^-25, Inf from 65520.
FP16 = {**_landmarks(sf.get_format("fp16")), "underflow_threshold": float(_FP16_EDGES.zero),
        "overflow_threshold": float(_FP16_EDGES.overflow)}


def _format_record(f):
    return {"exp_bits": f.exp_bits, "man_bits": f.man_bits, "subnormals": bool(f.subnormals),
            "inf_nan": f.inf_nan, "saturate": bool(f.saturate)}


class ExponentHistogram:
    """Accumulated exponent histogram of many arrays (see the module docstring).

    formats: the target formats whose zero/overflow counts are recorded (Format objects or
    preset names; default every softfloat preset); mode: their rounding (rne, rna or rtz).
    """

    def __init__(self, name="", *, formats=None, mode="rne"):
        self.name = name
        fmts = [sf.get_format(f) for f in (sf.FORMATS if formats is None else formats)]
        self.edges = {f.name: rounding_edges(f, mode) for f in fmts}
        self.mode = sf.parse_mode(mode).short
        self.counts = np.zeros(EXP_MAX - EXP_MIN + 1, dtype=np.int64)
        self.zeros = 0
        self.nonfinite = 0
        self.underflow = {n: np.zeros(LOG2_SCALES.size, dtype=np.int64) for n in self.edges}
        self.overflow = {n: np.zeros(LOG2_SCALES.size, dtype=np.int64) for n in self.edges}
        self.samples = 0  # arrays (tensors) added

    @property
    def formats(self):
        """Names of the recorded target formats."""
        return tuple(self.edges)

    @property
    def total(self):
        return int(self.counts.sum()) + self.zeros + self.nonfinite

    def add(self, array):
        """Add the values of one array (any float dtype; read as float32)."""
        a = np.asarray(array, dtype=np.float32).reshape(-1)
        st = tensor_stats(a, formats=(), exp_range=(EXP_MIN, EXP_MAX))
        self.counts += st.hist
        self.zeros += st.zeros
        self.nonfinite += st.nonfinite
        nz = a[np.isfinite(a) & (a != 0)]
        if nz.size:
            s = np.sort(np.abs(nz).astype(np.float64))
            for name, edges in self.edges.items():
                under, over = edges.counts(s)
                self.underflow[name] += under
                self.overflow[name] += over
        self.samples += 1

    def format_name(self, fmt):
        """The recorded name of ``fmt`` (a recorded name, a preset name or alias, a Format)."""
        name = fmt if isinstance(fmt, str) and fmt in self.edges else sf.get_format(fmt).name
        if name not in self.edges:
            raise ValueError(f"format {name!r} was not recorded in this histogram; recorded: "
                             f"{', '.join(self.edges)}")
        return name

    def fractions(self, log2_scale=0, fmt="fp16"):
        """Fractions of ALL values (zeros included, as in the paper's Fig. 3) that are zero
        already, that become zero in ``fmt`` after scaling by 2^log2_scale, and that overflow.
        The keys "underflow"/"overflow" also appear as "underflow_<fmt>"/"overflow_<fmt>"
        (``underflow_fp16``, ...)."""
        k = int(log2_scale)
        if not 0 <= k < LOG2_SCALES.size:
            raise ValueError(f"log2_scale must be in 0..{LOG2_SCALES[-1]}, got {log2_scale}")
        name = self.format_name(fmt)
        n = max(self.total, 1)
        nonzero = int(self.counts.sum())
        under, over = int(self.underflow[name][k]), int(self.overflow[name][k])
        out = {"zero": self.zeros / n, "nonzero": nonzero / n, "underflow": under / n,
               "underflow_of_nonzero": under / max(nonzero, 1), "overflow": over / n,
               "nonfinite": self.nonfinite / n}
        out[f"underflow_{name}"], out[f"overflow_{name}"] = out["underflow"], out["overflow"]
        return out

    def best_log2_scale(self, fmt="fp16"):
        """The largest k with no overflow (the paper: "as large as possible without overflow")."""
        ok = np.flatnonzero(self.overflow[self.format_name(fmt)] == 0)
        return int(ok[-1]) if ok.size else 0

    def to_dict(self):
        nz = np.flatnonzero(self.counts)
        lo, hi = (int(nz[0]), int(nz[-1]) + 1) if nz.size else (0, 0)
        return {"name": self.name, "exp_min": EXP_MIN + lo, "counts": self.counts[lo:hi].tolist(),
                "zeros": self.zeros, "nonfinite": self.nonfinite, "samples": self.samples,
                "total": self.total, "mode": self.mode,
                "formats": {n: {**_format_record(e.fmt),
                                "underflow_by_log2_scale": self.underflow[n].tolist(),
                                "overflow_by_log2_scale": self.overflow[n].tolist()}
                            for n, e in self.edges.items()}}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; also reads the older layout, which recorded fp16 only
        (keys underflow_by_log2_scale / overflow_by_log2_scale at the top level, RNE)."""
        if "formats" in d:
            recs = d["formats"]
            fmts = [sf.Format(n, r["exp_bits"], r["man_bits"], subnormals=r["subnormals"],
                              inf_nan=r["inf_nan"], saturate=r["saturate"])
                    for n, r in recs.items()]
        else:
            recs = {"fp16": d}
            fmts = ["fp16"]
        h = cls(d.get("name", ""), formats=fmts, mode=d.get("mode", "rne"))
        lo = d["exp_min"] - EXP_MIN
        h.counts[lo:lo + len(d["counts"])] = d["counts"]
        h.zeros, h.nonfinite, h.samples = int(d["zeros"]), int(d["nonfinite"]), int(d["samples"])
        for n, r in recs.items():
            h.underflow[n][:] = r["underflow_by_log2_scale"]
            h.overflow[n][:] = r["overflow_by_log2_scale"]
        return h
