"""Independent slow reference for rounding and encoding, in exact rational arithmetic.

Provides
    round_fraction(q, fmt, mode, *, u=None, rbits=None) -> (float, set of flag names)
    value_to_bits(x, fmt) -> int          bits_to_value(bits, fmt) -> float
    successor(x, fmt), predecessor(x, fmt), ulp_of(x, fmt), exponent_of(x, fmt),
    class_of(x, fmt)                      reference answers for softfloat.bits' utilities
    params(fmt)                           the format's numbers, derived here from its widths

Nothing here shares code with the softfloat kernels: the only thing read from a softfloat
``Format`` is its fields (exp_bits, man_bits, subnormals, inf_nan, saturate); bias, emin, emax and
the largest finite value are re-derived below from the IEEE 754 layout.  Every computation is on
Python ints and ``fractions.Fraction``; floats appear only as inputs and as the final, exactly
representable result.  It is slow on purpose: readable first.

The semantics are the ones fixed in softfloat/_roundpack.py's docstring:

* the exact value is rounded ONCE to the format's grid: quantum 2^(max(e, emin) - m) with
  gradual underflow (e = floor(log2|q|)), quantum 2^(e - m) and a flush to zero of every tiny
  result without subnormals;
* tininess is detected AFTER rounding: a result is tiny when the value rounded to p = m + 1 bits
  with an unbounded exponent range (stochastic rounding: with the same random bits u) has a
  magnitude below 2^emin; underflow = tiny and inexact; a flushed result is always underflow and
  inexact;
* overflow: the value rounded to p bits with an unbounded exponent exceeds the largest finite
  value.  Saturating and "none" formats give +-max; otherwise RNE, RNA, SR, RUP (for positive)
  and RDN (for negative) give +-Inf (NaN in "fn" formats, which have no Inf); RTZ, RTO, RUP
  (negative) and RDN (positive) give +-max.  Flags overflow and inexact;
* NaN in gives NaN out with no flag, except "none" formats (no NaN): NaN out and flag invalid;
  Infinity in is exact for "ieee" formats and overflows (as above) in "fn"/"none" formats;
* zeros keep their sign; a nonzero value that rounds to zero keeps the sign of the value;
* stochastic rounding (SR) with r random bits: write |q| / quantum = n + f with 0 <= f < 1; the
  result is (n + 1) * quantum when floor(f * 2^r) + (u >> (64 - r)) >= 2^r, else n * quantum.

Must not import softfloat's kernels (softfloat._roundpack, softfloat._kernels_*, softfloat.rounding,
softfloat.bits); it imports only the standard library.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

__all__ = [
    "params", "round_fraction", "round_float", "value_to_bits", "bits_to_value",
    "successor", "predecessor", "ulp_of", "exponent_of", "class_of", "all_values",
    "MODES",
]

#: Mode names in the order of their stable codes (softfloat.modes.Mode): rne=0 ... sr=6, rhu=7.
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "sr", "rhu")


class FormatParams:
    """The numbers of a format, derived from its widths (IEEE 754 section 3.3 layout)."""

    def __init__(self, fmt):
        self.e_bits = int(fmt.exp_bits)
        self.m = int(fmt.man_bits)
        self.subnormals = bool(fmt.subnormals)
        self.style = fmt.inf_nan
        self.saturate = bool(fmt.saturate)
        self.bias = 2 ** (self.e_bits - 1) - 1
        self.emin = 1 - self.bias                      # biased exponent 1
        top = 2 ** self.e_bits - 1                     # the all-ones biased exponent
        # ieee keeps the all-ones exponent for Inf/NaN; fn and none use it for numbers.
        self.emax = (top - 1 if self.style == "ieee" else top) - self.bias
        # Largest significand: all ones (2^(m+1) - 1), except fn where all ones at emax is NaN.
        top_sig = 2 ** (self.m + 1) - (2 if self.style == "fn" else 1)
        self.max = Fraction(top_sig) * Fraction(2) ** (self.emax - self.m)
        self.tiny = Fraction(2) ** self.emin
        self.width = 1 + self.e_bits + self.m


@functools.lru_cache(maxsize=None)
def params(fmt) -> FormatParams:
    """The (cached) FormatParams of a format."""
    return FormatParams(fmt)


def _pow2(k: int) -> Fraction:
    return Fraction(2) ** k


def _floor_log2(a: Fraction) -> int:
    """floor(log2 a) for a > 0, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    # Now 2^(e-1) < a < 2^(e+1); settle which side of 2^e it lies.
    if a < _pow2(e):
        e -= 1
    return e


def _to_float(a: Fraction, negative: bool) -> float:
    """An exactly representable rational as a Python float, with the given sign."""
    f = float(a)
    if Fraction(f) != a:
        raise AssertionError(f"oracle bug: {a} is not a float64")
    return -f if negative else f


def _round_to_quantum(a: Fraction, quantum: Fraction, mode: str, negative: bool,
                      u: int | None, rbits: int | None) -> Fraction:
    """Round the magnitude a > 0 to an integer multiple of ``quantum`` (sign for directed modes)."""
    scaled = a / quantum
    n = scaled.numerator // scaled.denominator      # floor
    f = scaled - n                                  # 0 <= f < 1
    if f == 0:
        return n * quantum
    up: bool
    if mode == "rne":
        up = f > Fraction(1, 2) or (f == Fraction(1, 2) and n % 2 == 1)
    elif mode == "rna":
        up = f >= Fraction(1, 2)
    elif mode == "rtz":
        up = False
    elif mode == "rup":
        up = not negative
    elif mode == "rdn":
        up = negative
    elif mode == "rto":
        up = False
        n |= 1                                      # truncate, then force the last bit odd
    elif mode == "rhu":
        # ties toward +inf: a tie rounds the magnitude up for positives, down for negatives
        up = f > Fraction(1, 2) or (f == Fraction(1, 2) and not negative)
    elif mode == "sr":
        top = math.floor(f * 2 ** rbits)            # the r remainder bits below the last place
        up = top + (u >> (64 - rbits)) >= 2 ** rbits
    else:
        raise ValueError(f"oracle: unknown mode {mode!r}; accepted {MODES}")
    return (n + 1) * quantum if up else n * quantum


def _overflow(negative: bool, mode: str, p: FormatParams):
    if p.saturate or p.style == "none":
        return _to_float(p.max, negative), {"overflow", "inexact"}
    to_inf = mode in ("rne", "rna", "sr", "rhu") or (mode == "rup" and not negative) or \
        (mode == "rdn" and negative)
    if not to_inf:
        return _to_float(p.max, negative), {"overflow", "inexact"}
    if p.style == "ieee":
        return (-math.inf if negative else math.inf), {"overflow", "inexact"}
    return math.nan, {"overflow", "inexact"}


def round_fraction(q, fmt, mode, *, u=None, rbits=None):
    """Round q exactly once onto fmt's grid; returns (Python float, set of flag names).

    q : Fraction (or int), a Python float, or one of the strings "nan", "+inf", "-inf";
        a signed zero is passed as the float 0.0 / -0.0 (Fraction(0) means +0).
    mode : "rne", "rna", "rtz", "rup", "rdn", "rto", "sr" or "rhu" (or its integer code 0..7)
    u, rbits : for "sr": the 64 random bits of the element and how many of their top bits count.
    Flag names: "inexact", "underflow", "overflow", "invalid".
    """
    if isinstance(mode, int):
        mode = MODES[mode]
    mode = getattr(mode, "short", mode)
    if mode not in MODES:
        raise ValueError(f"oracle: unknown mode {mode!r}; accepted {MODES}")
    if mode == "sr" and (u is None or rbits is None):
        raise ValueError("oracle: mode 'sr' needs u (64 random bits) and rbits")
    p = params(fmt)
    if isinstance(q, str):
        q = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}[q]
    if isinstance(q, float):
        if math.isnan(q):
            return math.nan, ({"invalid"} if p.style == "none" else set())
        if math.isinf(q):
            if p.style == "ieee":
                return q, set()
            return _overflow(q < 0, mode, p)
        if q == 0:
            return q, set()                        # keeps the sign of the zero
        q = Fraction(q)
    q = Fraction(q)
    if q == 0:
        return 0.0, set()
    negative = q < 0
    a = -q if negative else q
    e = _floor_log2(a)
    # p-bit rounding with an unbounded exponent range: decides overflow and tininess.
    unbounded = _round_to_quantum(a, _pow2(e - p.m), mode, negative, u, rbits)
    if unbounded > p.max:
        return _overflow(negative, mode, p)
    tiny = unbounded < p.tiny
    if not p.subnormals:
        if tiny:
            return (-0.0 if negative else 0.0), {"underflow", "inexact"}
        result = unbounded
    else:
        result = _round_to_quantum(a, _pow2(max(e, p.emin) - p.m), mode, negative, u, rbits)
    flags = set()
    if result != a:
        flags.add("inexact")
        if tiny:
            flags.add("underflow")
    if result == 0:
        return (-0.0 if negative else 0.0), flags
    return _to_float(result, negative), flags


def round_float(x: float, fmt, mode, *, u=None, rbits=None):
    """round_fraction for a Python float (or numpy scalar) input, NaN/Inf/signed zero included."""
    return round_fraction(float(x), fmt, mode, u=u, rbits=rbits)


# ----- encodings -----------------------------------------------------------------------------

def bits_to_value(bits: int, fmt) -> float:
    """Decode one bit pattern (sign | biased exponent | fraction) into its value.

    Patterns with a zero exponent field and a nonzero fraction are subnormals; in a format
    without subnormals they read as a zero of their sign (denormals-are-zero).  Any NaN pattern
    decodes to NaN.
    """
    p = params(fmt)
    bits = int(bits)
    if not 0 <= bits < 2 ** p.width:
        raise ValueError(f"oracle: pattern {bits:#x} does not fit in {p.width} bits")
    negative = bits >> (p.width - 1) == 1
    efield = (bits >> p.m) % 2 ** p.e_bits
    mfield = bits % 2 ** p.m
    all_ones_e = 2 ** p.e_bits - 1
    if p.style == "ieee" and efield == all_ones_e:
        if mfield:
            return math.nan
        return -math.inf if negative else math.inf
    if p.style == "fn" and efield == all_ones_e and mfield == 2 ** p.m - 1:
        return math.nan
    if efield == 0:
        if not p.subnormals:
            return -0.0 if negative else 0.0
        value = mfield * _pow2(p.emin - p.m)                      # 0.f * 2^emin
    else:
        value = (2 ** p.m + mfield) * _pow2(efield - p.bias - p.m)  # 1.f * 2^(E - bias)
    if value == 0:
        return -0.0 if negative else 0.0
    return _to_float(value, negative)


def value_to_bits(x: float, fmt) -> int:
    """Encode a value of the format; NaN gives the canonical quiet NaN (ieee: sign 0, exponent
    all ones, top fraction bit set; fn: every bit but the sign set).  ValueError when x is not
    a value of the format (off the grid, out of range, or a special the format lacks)."""
    p = params(fmt)
    x = float(x)
    sign = 2 ** (p.width - 1)
    all_ones_e = 2 ** p.e_bits - 1
    if math.isnan(x):
        if p.style == "ieee":
            return all_ones_e * 2 ** p.m + 2 ** (p.m - 1)
        if p.style == "fn":
            return 2 ** (p.width - 1) - 1
        raise ValueError("oracle: the format has no NaN")
    s = sign if math.copysign(1.0, x) < 0 else 0
    if math.isinf(x):
        if p.style != "ieee":
            raise ValueError("oracle: the format has no infinity")
        return s + all_ones_e * 2 ** p.m
    if x == 0:
        return s
    a = abs(Fraction(x))
    if a > p.max:
        raise ValueError(f"oracle: {x!r} exceeds the largest finite value")
    e = _floor_log2(a)
    if e < p.emin:
        if not p.subnormals:
            raise ValueError(f"oracle: {x!r} is below the normal range of a flush-to-zero format")
        mfield = a / _pow2(p.emin - p.m)
        if mfield.denominator != 1:
            raise ValueError(f"oracle: {x!r} is not on the grid")
        return s + int(mfield)
    sig = a / _pow2(e - p.m)
    if sig.denominator != 1:
        raise ValueError(f"oracle: {x!r} is not on the grid")
    return s + (e + p.bias) * 2 ** p.m + (int(sig) - 2 ** p.m)


# ----- references for the utilities in softfloat.bits --------------------------------------

def all_values(fmt) -> list[Fraction]:
    """Every finite value of the format, as sorted exact rationals (small formats only)."""
    p = params(fmt)
    if p.width > 20:
        raise ValueError("oracle: all_values is for formats of at most 20 bits")
    vals = set()
    for b in range(2 ** (p.width - 1)):
        v = bits_to_value(b, fmt)
        if not math.isnan(v) and not math.isinf(v):
            vals.add(Fraction(v))
            vals.add(-Fraction(v))
    return sorted(vals)


def _check_member(x: float, fmt):
    if not math.isnan(x):
        value_to_bits(x, fmt)          # raises ValueError when x is not a value of the format


def successor(x: float, fmt) -> float:
    """nextUp: the least value of the format greater than x.  NaN -> NaN; +Inf -> +Inf; past
    the largest finite value: +Inf in ieee formats, NaN (no such value) in fn/none formats;
    the successor of a negative number that is zero is -0.0."""
    p = params(fmt)
    x = float(x)
    _check_member(x, fmt)
    if math.isnan(x) or x == math.inf:
        return x
    if x == -math.inf:
        return _to_float(p.max, True)
    a = Fraction(x)
    if a == p.max:
        return math.inf if p.style == "ieee" else math.nan
    if a >= 0:
        # positive side: add one quantum of the binade (smallest step upward from a).
        if a == 0:
            step_exp = p.emin - p.m if p.subnormals else None
            return _to_float(_pow2(step_exp) if step_exp is not None else p.tiny, False)
        e = _floor_log2(a)
        return _to_float(a + _pow2(max(e, p.emin) - p.m), False)
    # negative side: step toward zero; at a binade boundary 2^e the gap below is 2^(e-1-m).
    b = -a
    if not p.subnormals and b == p.tiny:
        return -0.0
    e = _floor_log2(b)
    gap_exp = (e - 1 if b == _pow2(e) else e)
    r = b - _pow2(max(gap_exp, p.emin) - p.m)
    return -0.0 if r == 0 else _to_float(r, True)


def predecessor(x: float, fmt) -> float:
    """nextDown(x) = -nextUp(-x)."""
    r = successor(-float(x), fmt)
    return -r


def exponent_of(x: float, fmt) -> float:
    """logB: floor(log2 |x|) for finite nonzero x (subnormals included); -inf for zeros,
    +inf for infinities, NaN for NaN (the C ``logb`` conventions)."""
    _check_member(float(x), fmt)
    x = float(x)
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return math.inf
    if x == 0:
        return -math.inf
    return float(_floor_log2(abs(Fraction(x))))


def ulp_of(x: float, fmt) -> float:
    """2^(max(logB(x), emin) - m) for finite x (zeros: 2^(emin - m)); +Inf for infinities, NaN
    for NaN."""
    p = params(fmt)
    _check_member(float(x), fmt)
    x = float(x)
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return math.inf
    e = p.emin if x == 0 else max(_floor_log2(abs(Fraction(x))), p.emin)
    return _to_float(_pow2(e - p.m), False)


#: Class names in the order of softfloat.bits' codes.
CLASS_NAMES = ("nan", "-inf", "-normal", "-subnormal", "-zero",
               "+zero", "+subnormal", "+normal", "+inf")


def class_of(x: float, fmt) -> str:
    """One of CLASS_NAMES."""
    p = params(fmt)
    x = float(x)
    _check_member(x, fmt)
    if math.isnan(x):
        return "nan"
    s = "-" if math.copysign(1.0, x) < 0 else "+"
    if math.isinf(x):
        return s + "inf"
    if x == 0:
        return s + "zero"
    return s + ("normal" if abs(Fraction(x)) >= p.tiny else "subnormal")
