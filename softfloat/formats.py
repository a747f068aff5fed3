"""Floating-point formats as data.

Provides the frozen :class:`Format` record, from which every derived quantity (bias, emin, emax,
largest finite value, smallest normal and subnormal, machine epsilon, bit width, carrier dtype) is
computed, and the named presets looked up by :func:`get_format` under their common aliases.

No per-format hand-typed tables: a preset is just ``Format(...)`` with its field widths, and the
numbers users know (65504, 448, 2^-24, ...) fall out of the derivations below, which the tests
check against independent sources (numpy float16, ml_dtypes).

This module imports only the standard library and numpy; it must not import numba kernels,
autograd, scalers or models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

__all__ = ["Format", "FormatParams", "get_format", "list_formats", "FORMATS", "INF_NAN_STYLES"]

#: Inf/NaN styles and their integer codes (kernels receive the code).
#:   "ieee": exponent all-ones is reserved: mantissa 0 -> +-Inf, otherwise NaN (fp16, bf16, e5m2).
#:   "fn":   no infinities; exponent all-ones holds finite values except the single all-ones
#:           mantissa, which is NaN (OCP E4M3FN: S.1111.111).
#:   "none": every pattern is a finite number: no Inf, no NaN (overflow always saturates).
INF_NAN_STYLES = {"ieee": 0, "fn": 1, "none": 2}


class FormatParams(NamedTuple):
    """What a kernel needs to know of a format, made once per Format by
    :meth:`Format.kernel_params` and passed to every kernel as one argument (Numba accepts a
    NamedTuple and reads its fields by name; the values are not compile-time constants, so one
    compilation serves every format).  Fields are plain ints and one float:

    ``man_bits`` m, ``exp_bits`` e, ``bias`` 2^(e-1) - 1, ``emin`` (1 - bias, or -bias in a
    format without zero), ``emax`` (see Format), ``subnormals`` 1 = gradual underflow / 0 = none
    (flush to zero), ``inf_nan`` the code of INF_NAN_STYLES (0 ieee, 1 fn, 2 none), ``saturate``
    1 = overflow gives +-max, ``signed`` 1 = a sign bit / 0 = unsigned (no negative values),
    ``zero`` 1 = the zero exponent field holds zero (and subnormals) / 0 = it is the normal
    binade 2^-bias and the format has no zero, ``width`` the encoding's bit count, ``maxval``
    the largest finite value as a float64.
    """

    man_bits: int
    exp_bits: int
    bias: int
    emin: int
    emax: int
    subnormals: int
    inf_nan: int
    saturate: int
    signed: int
    zero: int
    width: int
    maxval: float


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: an optional sign bit, ``exp_bits`` exponent bits,
    ``man_bits`` stored fraction bits (precision p = man_bits + 1 with the implicit leading bit).

    Parameters
    ----------
    name : str
        Display name (any string; presets use the canonical short names).
    exp_bits : int
        Exponent field width, 2..11.
    man_bits : int
        Stored fraction width, 0..52 (0: exponent-only formats such as e8m0; an "ieee" format
        needs at least 1, to tell Inf from NaN).
    subnormals : bool
        True: gradual underflow (subnormals exist). False: flush-to-zero, the grid has no values
        strictly between 0 and the smallest normal 2^emin; see :mod:`softfloat.rounding` for how
        tininess is detected.
    inf_nan : {"ieee", "fn", "none"}
        Encoding of the specials (see ``INF_NAN_STYLES``).
    saturate : bool
        True: a result that overflows becomes the largest finite value (with its sign) in every
        rounding mode, instead of Inf (ieee) or NaN (fn), and an infinite input becomes it too.
    signed : bool
        False: no sign bit (``bits`` = exp_bits + man_bits): the format holds no negative value
        (e8m0, ue4m3).  Rounding a negative number gives NaN (see softfloat._roundpack).
    zero : bool
        False: the zero exponent field is an ordinary normal binade 2^(0 - bias), so emin = -bias
        and the format has no zero (and no subnormals: ``subnormals`` must be False).  OCP's
        E8M0 scale format is such a format.
    """

    name: str
    exp_bits: int
    man_bits: int
    subnormals: bool = True
    inf_nan: str = "ieee"
    saturate: bool = False
    signed: bool = True
    zero: bool = True
    # Derived fields, filled in __post_init__ (not part of the constructor or of equality).
    bias: int = field(init=False, compare=False)
    emin: int = field(init=False, compare=False)
    emax: int = field(init=False, compare=False)
    _params: FormatParams = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        e, m = self.exp_bits, self.man_bits
        for attr, val in (("exp_bits", e), ("man_bits", m)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
                raise TypeError(f"Format {attr} must be an int, got {type(val).__name__}")
        if not 2 <= e <= 11:
            raise ValueError(f"Format exp_bits must be in 2..11, got {e}")
        if not 0 <= m <= 52:
            raise ValueError(f"Format man_bits must be in 0..52, got {m}")
        if self.inf_nan not in INF_NAN_STYLES:
            raise ValueError(
                f"Format inf_nan must be one of {sorted(INF_NAN_STYLES)}, got {self.inf_nan!r}")
        for attr in ("subnormals", "saturate", "signed", "zero"):
            if not isinstance(getattr(self, attr), (bool, np.bool_)):
                raise TypeError(f"Format {attr} must be a bool, got "
                                f"{type(getattr(self, attr)).__name__}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Format name must be a non-empty string")
        if self.inf_nan == "ieee" and m == 0:
            raise ValueError("an ieee-style format needs man_bits >= 1: its all-ones exponent "
                             "tells Inf (fraction 0) from NaN (fraction != 0); use inf_nan='fn' "
                             "or 'none' for an exponent-only format")
        if not self.zero and self.subnormals:
            raise ValueError("a format without zero (zero=False) has no subnormals either: its "
                             "zero exponent field is a normal binade; pass subnormals=False")
        # bias = 2^(e-1) - 1: fp16 (e=5) -> 15, bf16/fp32/e8m0 (e=8) -> 127, e4m3 (e=4) -> 7.
        bias = (1 << (e - 1)) - 1
        # The biased exponent 0 encodes zero/subnormals, so the smallest normal exponent is
        # 1 - bias: fp16 -> -14, fp32/bf16 -> -126, e4m3 -> -6, e5m2 -> -14.  Without zero the
        # field 0 is itself a normal binade: emin = 0 - bias (e8m0 -> -127).
        emin = (1 if self.zero else 0) - bias
        # ieee reserves the all-ones biased exponent (2^e - 1) for Inf/NaN, so the largest
        # normal biased exponent is 2^e - 2: fp16 -> 30 - 15 = 15.  fn and none use the
        # all-ones exponent for finite numbers: e4m3fn -> 15 - 7 = 8; but an fn format without
        # fraction bits (e8m0) has a single pattern there, the NaN: e8m0 -> 254 - 127 = 127.
        top = (1 << e) - 1
        if self.inf_nan == "ieee" or (self.inf_nan == "fn" and m == 0):
            emax = top - 1 - bias
        else:
            emax = top - bias
        object.__setattr__(self, "bias", bias)
        object.__setattr__(self, "emin", emin)
        object.__setattr__(self, "emax", emax)
        # Carrier check: every value of the format must be exactly representable in float64,
        # including the smallest subnormal 2^(emin - m).
        if emax > 1023 or emin - m < -1074:
            raise ValueError(
                f"Format {self.name}: range exceeds float64 (emax={emax}, smallest exponent "
                f"{emin - m}); formats must fit in a float64 carrier")
        object.__setattr__(self, "_params", FormatParams(
            man_bits=int(m), exp_bits=int(e), bias=int(bias), emin=int(emin), emax=int(emax),
            subnormals=int(bool(self.subnormals)), inf_nan=INF_NAN_STYLES[self.inf_nan],
            saturate=int(bool(self.saturate)), signed=int(bool(self.signed)),
            zero=int(bool(self.zero)), width=int(self.bits), maxval=self.max))
        # (once: every rounding and operation asks for it, a few times a small call)
        fits = emax <= 127 and emin - m >= -149 and m <= 23
        object.__setattr__(self, "_carrier", np.dtype(np.float32 if fits else np.float64))

    # ----- derived quantities -----------------------------------------------------------
    @property
    def precision(self) -> int:
        """p = man_bits + 1 significand bits (fp16: 11, bf16: 8, fp32: 24)."""
        return self.man_bits + 1

    @property
    def bits(self) -> int:
        """Total encoding width (sign) + exp_bits + man_bits (fp16: 16, tf32: 19, e4m3fn: 8,
        the unsigned e8m0: 8, ue4m3: 7)."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def max(self) -> float:
        """Largest finite value: the largest significand times 2^(emax - m).

        ieee / none: all-ones fraction, (2 - 2^-m) * 2^emax, e.g. fp16 (2 - 2^-10) * 2^15 = 65504,
        bf16 (2 - 2^-7) * 2^127 ~ 3.3895e38.
        fn: the all-ones fraction at the all-ones exponent is NaN, so the largest fraction there
        is all-ones minus one: (2 - 2^(1-m)) * 2^emax, e.g. e4m3fn (2 - 2^-2) * 2^8 = 448; with
        m = 0 that binade is NaN only and emax is one lower (above): e8m0 1 * 2^127.
        """
        m = self.man_bits
        top_sig = (1 << (m + 1)) - (2 if self.inf_nan == "fn" and m > 0 else 1)
        return float(np.ldexp(float(top_sig), self.emax - m))

    @property
    def tiny(self) -> float:
        """Smallest positive normal 2^emin (fp16: 2^-14 ~ 6.1035e-05)."""
        return float(np.ldexp(1.0, self.emin))

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value: 2^(emin - m) with subnormals (fp16: 2^(-14-10) = 2^-24),
        else the smallest normal 2^emin (e8m0: 2^-127, its smallest value: it has no zero)."""
        return float(np.ldexp(1.0, self.emin - self.man_bits)) if self.subnormals else self.tiny

    @property
    def eps(self) -> float:
        """Machine epsilon 2^-m, the gap from 1 to the next value (fp16 2^-10, bf16 2^-7)."""
        return float(np.ldexp(1.0, -self.man_bits))

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-p = eps / 2, the relative error bound of round-to-nearest."""
        return self.eps / 2

    @property
    def has_inf(self) -> bool:
        return self.inf_nan == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.inf_nan != "none"

    @property
    def inf_nan_code(self) -> int:
        return INF_NAN_STYLES[self.inf_nan]

    @property
    def carrier_dtype(self) -> np.dtype:
        """float32 when every value (and +-Inf/NaN) is exactly a float32: emax <= 127,
        smallest subnormal >= 2^-149 and p <= 24; otherwise float64 (computed at creation)."""
        return self._carrier

    @property
    def bits_dtype(self) -> np.dtype:
        """Unsigned integer type holding one encoding: uint8 / uint16 / uint32 / uint64."""
        for t in (np.uint8, np.uint16, np.uint32, np.uint64):
            if self.bits <= np.dtype(t).itemsize * 8:
                return np.dtype(t)
        raise AssertionError("unreachable: bits <= 64 by construction")

    def kernel_params(self) -> FormatParams:
        """The :class:`FormatParams` record every kernel takes (computed once per Format)."""
        return self._params

    def describe(self) -> str:
        """One-line human summary, e.g. for notebooks."""
        sign = "1+" if self.signed else "unsigned "
        return (f"{self.name}: {sign}{self.exp_bits}+{self.man_bits} bits, bias {self.bias}, "
                f"emin {self.emin}, emax {self.emax}, max {self.max:.6g}, "
                f"tiny {self.tiny:.6g}, smallest {self.smallest_subnormal:.6g}, "
                f"eps {self.eps:.6g}, inf_nan={self.inf_nan}, subnormals={self.subnormals}, "
                f"saturate={self.saturate}, signed={self.signed}, zero={self.zero}")

    def __repr__(self):
        extra = "".join(f", {k}={getattr(self, k)}" for k in ("signed", "zero")
                        if not getattr(self, k))
        return (f"Format(name={self.name!r}, exp_bits={self.exp_bits}, "
                f"man_bits={self.man_bits}, subnormals={self.subnormals}, "
                f"inf_nan={self.inf_nan!r}, saturate={self.saturate}{extra})")


# ----- presets ---------------------------------------------------------------------------
# Widths from the standards: IEEE 754 binary16/binary32; bfloat16 (fp32's exponent, 7 fraction
# bits); NVIDIA TF32 (fp32's exponent, fp16's 10 fraction bits, 19 bits used); OCP 8-bit
# formats E4M3FN (no Inf, one NaN pattern) and E5M2 (IEEE-style); the OCP MX v1.0 sub-byte
# element formats (section 5.3.3), every pattern finite (no Inf, no NaN: inf_nan="none"):
#   e2m1 (FP4): bias 1, emax = 3 - 1 = 2, max (2 - 2^-1) * 2^2 = 6, smallest 2^(0-1) = 0.5;
#   e2m3 (FP6): bias 1, emax 2, max (2 - 2^-3) * 2^2 = 7.5, smallest 2^(0-3) = 0.125;
#   e3m2 (FP6): bias 3, emax = 7 - 3 = 4, max (2 - 2^-2) * 2^4 = 28, smallest 2^(-2-2) = 0.0625.
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("fp16", 5, 10),
        Format("bf16", 8, 7),
        Format("fp32", 8, 23),
        Format("tf32", 8, 10),
        Format("e4m3fn", 4, 3, inf_nan="fn"),
        Format("e5m2", 5, 2),
        Format("fp64", 11, 52),
        Format("e2m1", 2, 1, inf_nan="none"),
        Format("e2m3", 2, 3, inf_nan="none"),
        Format("e3m2", 3, 2, inf_nan="none"),
        # OCP MX v1.0 section 5.4.1: E8M0, the shared scale of MX blocks: unsigned, exponent
        # only (bias 127), 0xFF = NaN, no zero and no Inf: values 2^-127 .. 2^127.
        Format("e8m0", 8, 0, subnormals=False, inf_nan="fn", signed=False, zero=False),
        # NVFP4's block scale: E4M3FN without its sign bit (7 bits, values 0 .. 448, 0x7F NaN).
        Format("ue4m3", 4, 3, inf_nan="fn", signed=False),
    )
}

_ALIASES = {
    "fp16": ("binary16", "half", "float16", "f16"),
    "bf16": ("bfloat16",),
    "fp32": ("binary32", "single", "float32", "f32"),
    "tf32": ("tensorfloat32", "tensorfloat-32"),
    "e4m3fn": ("e4m3", "fp8_e4m3", "fp8_e4m3fn", "float8_e4m3fn"),
    "e5m2": ("fp8_e5m2", "float8_e5m2"),
    "fp64": ("binary64", "double", "float64", "f64"),
    "e2m1": ("fp4", "fp4_e2m1", "e2m1fn", "float4_e2m1fn"),
    "e2m3": ("fp6_e2m3", "e2m3fn", "float6_e2m3fn"),
    "e3m2": ("fp6_e3m2", "e3m2fn", "float6_e3m2fn"),
    "e8m0": ("e8m0fnu", "float8_e8m0fnu", "ue8m0", "fp8_e8m0"),
    "ue4m3": ("e4m3_unsigned", "ufp8_e4m3"),
}
_LOOKUP = {name: name for name in FORMATS}
for _canon, _names in _ALIASES.items():
    for _a in _names:
        _LOOKUP[_a] = _canon


def list_formats() -> dict[str, tuple[str, ...]]:
    """Canonical preset names mapped to their accepted aliases."""
    return {name: _ALIASES.get(name, ()) for name in FORMATS}


def get_format(fmt) -> Format:
    """Return the :class:`Format` for a preset name or alias (case-insensitive), or ``fmt``
    itself when it already is a Format.  Unknown names raise ValueError listing the names."""
    if isinstance(fmt, Format):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a Format or a name, got {type(fmt).__name__}")
    key = fmt.strip().lower().replace("-", "_") if fmt.strip().lower() not in _LOOKUP else \
        fmt.strip().lower()
    if key in _LOOKUP:
        return FORMATS[_LOOKUP[key]]
    accepted = ", ".join(f"{n} ({'/'.join(a)})" if a else n for n, a in list_formats().items())
    raise ValueError(f"unknown format {fmt!r}; accepted: {accepted}, or a softfloat.Format")
