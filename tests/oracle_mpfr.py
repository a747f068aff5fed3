"""Second, independent reference for the arithmetic: MPFR through gmpy2.

Provides
    mpfr_op(op, args, fmt, mode) -> (Python float, set of flag names)
        op in {"add", "sub", "mul", "div", "sqrt", "fma"}, args the operand values (Python floats,
        i.e. exact float64 values), mode one of "rne", "rna", "rtz", "rup", "rdn", "rto", "rhu".

How MPFR is used (a context per call; nothing here shares code with softfloat's kernels or with
tests/oracle.py):

* rne / rtz / rup / rdn are MPFR's own RNDN / RNDZ / RNDU / RNDD.  The format's result comes
  from a context with precision p = m + 1, emin = (format emin) - m + 1 and subnormalize=True:
  MPFR writes x = 0.1b...b * 2^EXP, so the smallest subnormal 2^(emin - m) has EXP = emin - m + 1,
  and mpfr_subnormalize re-rounds (without double rounding) every result below 2^emin to the
  fixed quantum 2^(emin - m), which is IEEE gradual underflow.  The same operation in a context
  with an unbounded exponent range gives the p-bit rounding used for overflow and for tininess
  (after rounding), as IEEE 754 and softfloat define them.
* rna, rhu and rto are not MPFR rounding modes: MPFR computes RO_k(x) for k = p + 8 (RNDZ at k
  bits, then the last bit set when MPFR's inexact flag says bits were lost), and that dyadic
  number is rounded to the format's quantum by integer arithmetic here (rna: up when the fraction
  is >= 1/2; rhu: up when it is > 1/2, or = 1/2 and the result is positive; rto: truncate, then
  force the last bit odd when anything was lost).  Rounding RO_k(x) with
  k >= p + 2 to p bits is the same as rounding x (Boldo & Melquiond).
* Specials come from MPFR's IEEE semantics: a NaN result with a NaN operand is a quiet NaN; a NaN
  result of non-NaN operands (inf - inf, 0 * inf, 0/0, inf/inf, sqrt(-x)) flags invalid; an
  infinite result flags divbyzero when MPFR's divide-by-zero flag says so; exact zeros take the
  sign MPFR gives in the matching direction (RNDN for rne, rna, rhu, rto).
* On top of MPFR, written out below: overflow per mode (saturating and "none" formats give +-max;
  RNE, RNA, RHU, RUP for positive, RDN for negative give Inf, or NaN for fn formats; the other cases
  give +-max); formats without subnormals flush every tiny result to a zero of its sign
  (underflow and inexact); infinite operands in fn/none formats overflow like a converted Inf;
  x / 0 in formats without Inf gives NaN (fn) or +-max (saturating, "none") flagging divbyzero
  only; a NaN result in a "none" format flags invalid.

Imports gmpy2, fractions and math only.
"""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2

__all__ = ["MODES", "OPS", "mpfr_op"]

OPS = ("add", "sub", "mul", "div", "sqrt", "fma")
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "rhu")

_NATIVE = {"rne": gmpy2.RoundToNearest, "rtz": gmpy2.RoundToZero, "rup": gmpy2.RoundUp,
           "rdn": gmpy2.RoundDown}
_EMIN, _EMAX = gmpy2.get_emin_min(), gmpy2.get_emax_max()


class _Fmt:
    """The format's numbers, derived here from its field widths."""

    def __init__(self, fmt):
        self.m = int(fmt.man_bits)
        self.p = self.m + 1
        e = int(fmt.exp_bits)
        self.style = fmt.inf_nan
        self.sat = bool(fmt.saturate)
        self.subnormals = bool(fmt.subnormals)
        bias = 2 ** (e - 1) - 1
        self.emin = 1 - bias
        self.emax = (2 ** e - (2 if self.style == "ieee" else 1)) - bias
        top = 2 ** self.p - (2 if self.style == "fn" else 1)
        self.max = Fraction(top) * Fraction(2) ** (self.emax - self.m)


def _apply(ctx, op, xs):
    fn = {"add": ctx.add, "sub": ctx.sub, "mul": ctx.mul, "div": ctx.div, "sqrt": ctx.sqrt,
          "fma": ctx.fma}[op]
    return fn(*xs)


def _ctx(prec, rnd, emin=_EMIN, subnormalize=False):
    return gmpy2.context(precision=prec, emin=emin, emax=_EMAX, round=rnd,
                         subnormalize=subnormalize)


def _frac(x) -> Fraction:
    n, d = x.as_integer_ratio()
    return Fraction(int(n), int(d))


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if a < Fraction(2) ** e else e


def _round_manual(a: Fraction, quantum: Fraction, mode: str, neg: bool) -> Fraction:
    """rna / rhu / rto of a magnitude a > 0 (of sign neg) to a multiple of quantum."""
    s = a / quantum
    n = s.numerator // s.denominator
    f = s - n
    if f == 0:
        return n * quantum
    if mode == "rna":
        return (n + 1) * quantum if f >= Fraction(1, 2) else n * quantum
    if mode == "rhu":                                          # ties toward +inf
        up = f > Fraction(1, 2) or (f == Fraction(1, 2) and not neg)
        return (n + 1) * quantum if up else n * quantum
    return (n | 1) * quantum                                   # rto


def _ro(op, xs, k):
    """RO_k of the exact result, as a Fraction (MPFR: RNDZ at k bits + inexact flag)."""
    ctx = _ctx(k, gmpy2.RoundToZero)
    z = _frac(_apply(ctx, op, xs))
    if not ctx.inexact:
        return z
    a = abs(z)
    quantum = Fraction(2) ** (_floor_log2(a) - k + 1)
    n = a / quantum
    assert n.denominator == 1
    r = (n.numerator | 1) * quantum
    return -r if z < 0 else r


def _to_float(a: Fraction, neg: bool) -> float:
    f = float(a)
    assert Fraction(f) == a, "oracle: result not a float64"
    return -f if neg else f


def _overflow(neg, mode, F):
    fl = {"overflow", "inexact"}
    if F.sat or F.style == "none":
        return _to_float(F.max, neg), fl
    to_inf = mode in ("rne", "rna", "rhu") or (mode == "rup" and not neg) or (mode == "rdn" and neg)
    if not to_inf:
        return _to_float(F.max, neg), fl
    if F.style == "ieee":
        return (-math.inf if neg else math.inf), fl
    return math.nan, fl


def _round_p(op, xs, F, mode):
    """(unbounded p-bit rounding, format rounding) of the exact nonzero result, as Fractions."""
    if mode in _NATIVE:
        t = _frac(_apply(_ctx(F.p, _NATIVE[mode]), op, xs))
        sub = _ctx(F.p, _NATIVE[mode], emin=F.emin - F.m + 1, subnormalize=True)
        r = _frac(_apply(sub, op, xs))
        return t, r
    x = _ro(op, xs, F.p + 8)
    a, neg = abs(x), x < 0
    e = _floor_log2(a)
    t = _round_manual(a, Fraction(2) ** (e - F.m), mode, neg)
    r = _round_manual(a, Fraction(2) ** (max(e, F.emin) - F.m), mode, neg)
    return (-t, -r) if neg else (t, r)


def _is_exact(op, xs, r: Fraction) -> bool:
    """Whether the exact result equals r, checked with exact MPFR arithmetic (4400 bits hold
    any sum, product or fma of float64 values exactly: the bits of a*b + c span at most
    2^1024 * 2^1024 down to 2^-2148, about 4200 positions)."""
    big = _ctx(4400, gmpy2.RoundToNearest)
    with big:
        R = gmpy2.mpfr(gmpy2.mpq(r.numerator, r.denominator))      # dyadic: exact
    if op == "div":
        return big.mul(R, xs[1]) == xs[0]                         # xs[1] != 0 here
    if op == "sqrt":
        return big.mul(R, R) == xs[0]
    return _apply(big, op, xs) == R


def mpfr_op(op, args, fmt, mode):
    """Round op(*args) once onto fmt in mode; returns (float, set of flag names)."""
    if op not in OPS:
        raise ValueError(f"oracle: unknown op {op!r}; accepted {OPS}")
    if mode not in MODES:
        raise ValueError(f"oracle: unknown mode {mode!r}; accepted {MODES}")
    F = _Fmt(fmt)
    with gmpy2.context(precision=53, emin=_EMIN, emax=_EMAX):
        xs = [gmpy2.mpfr(float(v)) for v in args]
    # Classify the exact result with MPFR's IEEE semantics (p bits, unbounded exponent).
    probe = _ctx(F.p, _NATIVE.get(mode, gmpy2.RoundToNearest))
    r0 = _apply(probe, op, xs)
    if gmpy2.is_nan(r0):
        invalid = not any(gmpy2.is_nan(x) for x in xs)
        flags = {"invalid"} if invalid or F.style == "none" else set()
        return math.nan, flags
    if gmpy2.is_infinite(r0):
        neg = r0 < 0
        if probe.divzero:
            if F.style == "ieee" and not F.sat:
                return (-math.inf if neg else math.inf), {"divbyzero"}
            if F.style == "fn" and not F.sat:
                return math.nan, {"divbyzero"}
            return _to_float(F.max, neg), {"divbyzero"}
        if F.style == "ieee":
            return (-math.inf if neg else math.inf), set()
        return _overflow(neg, mode, F)
    if r0 == 0:
        return float(r0), set()                                   # exact zero, MPFR's sign
    t, r = _round_p(op, xs, F, mode)
    neg = t < 0
    if abs(t) > F.max:
        return _overflow(neg, mode, F)
    tiny = abs(t) < Fraction(2) ** F.emin
    if not F.subnormals:
        if tiny:
            return (-0.0 if neg else 0.0), {"underflow", "inexact"}
        r = t
    flags = set()
    if not _is_exact(op, xs, r):
        flags.add("inexact")
        if tiny:
            flags.add("underflow")
    if r == 0:
        return (-0.0 if neg else 0.0), flags
    return _to_float(abs(r), neg), flags
