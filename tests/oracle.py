"""Independent slow reference for rounding and encoding, in exact rational arithmetic.

Provides
    round_fraction(q, fmt, mode, *, u=None, rbits=None) -> (float, set of flag names)
    value_to_bits(x, fmt) -> int          bits_to_value(bits, fmt) -> float
    successor(x, fmt), predecessor(x, fmt), ulp_of(x, fmt), exponent_of(x, fmt),
    class_of(x, fmt)                      reference answers for softfloat.bits' utilities
    params(fmt)                           the format's numbers, derived here from its widths

Nothing here shares code with the softfloat kernels: the only thing read from a softfloat
``Format`` is its fields (exp_bits, man_bits, subnormals, inf_nan, saturate, signed, zero); bias,
emin, emax and the largest finite value are re-derived below from the IEEE 754 layout.  Every computation is on
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
  the NaN keeps its sign in signed formats (the payload rule is ``round_nan_bits``);
* Infinity in is exact: kept by "ieee" formats; +-max with flag invalid in saturating and "none"
  formats; NaN (the Inf's sign) with flag invalid in "fn" formats;
* unsigned formats: a negative nonzero input (-Inf too) gives NaN and invalid, -0 gives +0;
* formats without zero: a zero input gives NaN and invalid; a result below 2^emin gives 2^emin
  (underflow and inexact when tiny after rounding, else inexact);
* zeros keep their sign; a nonzero value that rounds to zero keeps the sign of the value;
* stochastic rounding (SR) with r random bits: write |q| / quantum = n + f with 0 <= f < 1; the
  result is (n + 1) * quantum when floor(f * 2^r) + (u >> (64 - r)) >= 2^r, else n * quantum.

Must not import softfloat's kernels (softfloat._roundpack, softfloat._kernels_*, softfloat.rounding,
softfloat.bits); it imports only the standard library.
"""

from __future__ import annotations

import functools
import math
import struct
from fractions import Fraction

__all__ = [
    "params", "round_fraction", "round_float", "value_to_bits", "bits_to_value",
    "successor", "predecessor", "ulp_of", "exponent_of", "class_of", "all_values",
    "round_nan_bits", "MODES",
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
        self.signed = bool(getattr(fmt, "signed", True))
        self.zero = bool(getattr(fmt, "zero", True))
        self.bias = 2 ** (self.e_bits - 1) - 1
        # The smallest normal is at biased exponent 1 -- or 0 when that field is not zero's.
        self.emin = (1 if self.zero else 0) - self.bias
        top = 2 ** self.e_bits - 1                     # the all-ones biased exponent
        # Patterns of the all-ones exponent: ieee keeps them all for Inf/NaN; fn keeps only
        # the all-ones fraction for NaN (so with no fraction bits, the whole binade); none
        # keeps none.
        top_is_special = self.style == "ieee" or (self.style == "fn" and self.m == 0)
        self.emax = (top - 1 if top_is_special else top) - self.bias
        # Largest significand: all ones (2^(m+1) - 1), except fn where all ones at emax is NaN.
        top_sig = 2 ** (self.m + 1) - (2 if self.style == "fn" and self.m > 0 else 1)
        self.max = Fraction(top_sig) * Fraction(2) ** (self.emax - self.m)
        self.tiny = Fraction(2) ** self.emin
        self.width = (1 if self.signed else 0) + self.e_bits + self.m


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
    return math.copysign(math.nan, -1.0 if negative else 1.0), {"overflow", "inexact"}


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
            nan = math.copysign(math.nan, q) if p.signed else math.nan
            return nan, ({"invalid"} if p.style == "none" else set())
        if math.isinf(q):
            if q < 0 and not p.signed:
                return math.nan, {"invalid"}
            if p.style == "ieee" and not p.saturate:
                return q, set()
            if p.saturate or p.style == "none":
                return _to_float(p.max, q < 0), {"invalid"}
            return math.copysign(math.nan, q), {"invalid"}
        if q == 0:
            if not p.zero:
                return math.nan, {"invalid"}
            return (q if p.signed else 0.0), set()   # keeps the sign of the zero
        q = Fraction(q)
    q = Fraction(q)
    if q == 0:
        return (0.0, set()) if p.zero else (math.nan, {"invalid"})
    if q < 0 and not p.signed:
        return math.nan, {"invalid"}
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
            bottom = 0.0 if p.zero else _to_float(p.tiny, False)   # nothing below 2^emin
            return (-bottom if negative else bottom), {"underflow", "inexact"}
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


def _f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _f64_from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def round_nan_bits(x: float, fmt) -> int:
    """The float64 pattern of the quiet NaN that the NaN x (a Python float, its payload in its
    52 fraction bits) becomes when rounded to fmt: the sign kept when the format has one; in
    ieee formats the top m fraction bits kept (the quiet bit forced on); otherwise the fraction
    is the quiet bit alone."""
    p = params(fmt)
    b = _f64_bits(float(x))
    sign = b >> 63 if p.signed else 0
    frac = b % 2 ** 52
    if p.style == "ieee":
        frac = frac // 2 ** (52 - p.m) * 2 ** (52 - p.m)    # truncated to the top m bits
    else:
        frac = 0
    frac |= 2 ** 51                                         # quiet
    return sign * 2 ** 63 + 0x7FF * 2 ** 52 + frac


# ----- encodings -----------------------------------------------------------------------------

def bits_to_value(bits: int, fmt) -> float:
    """Decode one bit pattern ([sign |] biased exponent | fraction) into its value.

    Patterns with a zero exponent field and a nonzero fraction are subnormals; in a format
    without subnormals they read as a zero of their sign (denormals-are-zero); in a format
    without zero the zero field is the normal binade 2^-bias.  A NaN pattern decodes to a NaN
    with its sign and, in ieee formats, its fraction as the top bits of the float's fraction.
    """
    p = params(fmt)
    bits = int(bits)
    if not 0 <= bits < 2 ** p.width:
        raise ValueError(f"oracle: pattern {bits:#x} does not fit in {p.width} bits")
    negative = p.signed and bits >> (p.width - 1) == 1
    efield = (bits >> p.m) % 2 ** p.e_bits
    mfield = bits % 2 ** p.m
    all_ones_e = 2 ** p.e_bits - 1
    sign64 = 2 ** 63 if negative else 0
    if p.style == "ieee" and efield == all_ones_e:
        if mfield:
            return _f64_from_bits(sign64 + 0x7FF * 2 ** 52 + mfield * 2 ** (52 - p.m))
        return -math.inf if negative else math.inf
    if p.style == "fn" and efield == all_ones_e and mfield == 2 ** p.m - 1:
        return math.copysign(math.nan, -1.0 if negative else 1.0)
    if efield == 0 and p.zero:
        if not p.subnormals:
            return -0.0 if negative else 0.0
        value = mfield * _pow2(p.emin - p.m)                      # 0.f * 2^emin
    else:
        # 1.f * 2^(E - bias)
        value = (2 ** p.m + mfield) * _pow2(efield - p.bias - p.m)
    if value == 0:
        return -0.0 if negative else 0.0
    return _to_float(value, negative)


def value_to_bits(x: float, fmt) -> int:
    """Encode a value of the format.  A NaN keeps its sign (signed formats) and, in ieee formats,
    the top m bits of its float64 fraction (the quiet bit set when those are all zero); fn
    formats have one NaN per sign (every exponent and fraction bit set).  ValueError when x is
    not a value of the format (off the grid, out of range, negative in an unsigned format, zero
    in a format without zero, or a special the format lacks)."""
    p = params(fmt)
    x = float(x)
    sign = 2 ** (p.width - 1) if p.signed else 0
    all_ones_e = 2 ** p.e_bits - 1
    if math.isnan(x):
        s = sign if math.copysign(1.0, x) < 0 else 0
        if p.style == "ieee":
            top = _f64_bits(x) % 2 ** 52 // 2 ** (52 - p.m)
            return s + all_ones_e * 2 ** p.m + (top if top else 2 ** (p.m - 1))
        if p.style == "fn":
            return s + 2 ** (p.e_bits + p.m) - 1
        raise ValueError("oracle: the format has no NaN")
    negative = math.copysign(1.0, x) < 0
    if negative and not p.signed and x != 0:
        raise ValueError("oracle: an unsigned format has no negative values")
    s = sign if negative else 0
    if math.isinf(x):
        if p.style != "ieee":
            raise ValueError("oracle: the format has no infinity")
        return s + all_ones_e * 2 ** p.m
    if x == 0:
        if not p.zero:
            raise ValueError("oracle: the format has no zero")
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
    for b in range(2 ** p.width):
        v = bits_to_value(b, fmt)
        if not math.isnan(v) and not math.isinf(v):
            vals.add(Fraction(v))
    return sorted(vals)


def _check_member(x: float, fmt):
    if not math.isnan(x):
        value_to_bits(x, fmt)          # raises ValueError when x is not a value of the format


def _smallest(p) -> Fraction:
    """The smallest positive value: 2^(emin - m) with subnormals, else 2^emin."""
    return _pow2(p.emin - p.m) if p.subnormals else p.tiny


def _below(b: Fraction, p):
    """The largest magnitude of the format below the positive value b, or None when b is the
    smallest positive value (zero, when the format has one, lies below it)."""
    if b == _smallest(p):
        return None
    e = _floor_log2(b)
    # at a binade boundary 2^e the gap below is that of the binade below, 2^(e-1-m)
    gap_exp = (e - 1 if b == _pow2(e) else e)
    return b - _pow2(max(gap_exp, p.emin) - p.m)


def successor(x: float, fmt) -> float:
    """nextUp: the least value of the format greater than x.  NaN -> NaN; +Inf -> +Inf; past
    the largest finite value: +Inf in ieee formats, NaN (no such value) in fn/none formats;
    the successor of a negative number that is zero is -0.0 (+2^emin without zero)."""
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
    if a == 0:
        return _to_float(_smallest(p), False)
    if a > 0:
        # positive side: add one quantum of the binade (smallest step upward from a).
        e = _floor_log2(a)
        return _to_float(a + _pow2(max(e, p.emin) - p.m), False)
    r = _below(-a, p)        # negative side: one step toward zero
    if r is None:
        return -0.0 if p.zero else _to_float(p.tiny, False)
    return _to_float(r, True)


def predecessor(x: float, fmt) -> float:
    """nextDown: the greatest value below x; -nextUp(-x) in signed formats.  In unsigned
    formats: NaN (no such value) below the smallest value (below 0 when there is a zero),
    +Inf -> max in ieee formats."""
    p = params(fmt)
    if p.signed:
        return -successor(-float(x), fmt)
    x = float(x)
    _check_member(x, fmt)
    if math.isnan(x):
        return x
    if x == math.inf:
        return _to_float(p.max, False)
    if x == 0:
        return math.nan
    r = _below(Fraction(x), p)
    if r is None:
        return 0.0 if p.zero else math.nan
    return _to_float(r, False)


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
    # an unsigned format's zero has no sign: -0.0 is that zero
    s = "-" if math.copysign(1.0, x) < 0 and p.signed else "+"
    if math.isinf(x):
        return s + "inf"
    if x == 0:
        return s + "zero"
    return s + ("normal" if abs(Fraction(x)) >= p.tiny else "subnormal")
