"""The block formats of softfloat.mx as data: element format, scale format, default block.

Provides :class:`BlockFormat` (one frozen record per block format), ``BLOCK_FORMATS`` (the
presets, by name), :func:`get_block_format`, ``SCALE_RULES`` and the element parameters the
kernels take (:meth:`BlockFormat.elem_params`).

Element formats.  The FP elements are softfloat presets (e4m3fn, e5m2, e2m3, e3m2, e2m1) rounded
with saturation (OCP MX v1.0 section 6.3: an element whose scaled value exceeds the element max
is clamped to +-max).  MXINT8's element (OCP MX v1.0 section 5.3.4) is an 8-bit two's complement
integer with an implicit scale of 2^-6; we keep it symmetric, [-127, 127] * 2^-6 (the code 0x80,
-2.0, is never produced, as in microxcaling).  Its grid is that of a binary format with m = 6
fraction bits whose normal range is the single binade [1, 2): emin = emax = 0, quantum 2^-6 from
0 to 127/64 -- so the one rounding routine rounds it like any other element (emin - m = -6 is
the quantum; max 127 * 2^-6 = 1.984375).

Scale formats.  MX: E8M0 (OCP MX v1.0 section 5.4.1): 8 bits, the biased exponent only, bias
127, code c in 0..254 is 2^(c - 127) (2^-127 .. 2^127: every one a float32), 0xFF is NaN, no
zero, no sign.  NVFP4: E4M3 values, positive, stored as the e4m3fn code without its sign bit
(the UE4M3 code: 0x00..0x7E, 0x7F NaN).

``emax_elem`` is OCP's "exponent of the largest normal number of the element data type" =
floor(log2(element max)): e4m3 448 -> 8, e5m2 57344 -> 15, e2m3 7.5 -> 2, e3m2 28 -> 4,
e2m1 6 -> 2, int8 1.984375 -> 0.

Imports numpy and softfloat.formats only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..formats import Format, get_format

__all__ = ["BlockFormat", "BLOCK_FORMATS", "get_block_format", "SCALE_RULES", "MX_RULES",
           "E8M0_NAN", "UE4M3_NAN"]

#: The E8M0 NaN code (OCP MX v1.0 5.4.1) and the UE4M3 NaN code (e4m3fn's S.1111.111 less S).
E8M0_NAN = 0xFF
UE4M3_NAN = 0x7F

#: Scale rules of the MX formats (see softfloat/mx/__init__.py for the definitions and sources).
MX_RULES = ("floor", "ceil", "even", "rceil")
#: Every rule name: the MX rules and NVFP4's own.
SCALE_RULES = MX_RULES + ("nvfp4",)

#: Rule codes as the kernels see them.
RULE_CODES = {"floor": 0, "ceil": 1, "even": 2, "rceil": 3, "nvfp4": 4}


@dataclass(frozen=True)
class BlockFormat:
    """One block-scaled format.

    name : preset name ("mxfp8_e4m3", ..., "nvfp4")
    element : the element's softfloat Format, or None for MXINT8's integer element
    scale : "e8m0" (a power of two per block) or "ue4m3" (an E4M3 value per block, NVFP4)
    block : default block length
    """

    name: str
    element: Format | None
    scale: str
    block: int

    @property
    def is_int(self) -> bool:
        return self.element is None

    @property
    def man_bits(self) -> int:
        """Fraction bits of the element grid (MXINT8: 6, see the module docstring)."""
        return 6 if self.is_int else self.element.man_bits

    @property
    def emin(self) -> int:
        return 0 if self.is_int else self.element.emin

    @property
    def emax(self) -> int:
        return 0 if self.is_int else self.element.emax

    @property
    def max(self) -> float:
        """Largest element magnitude: 127 * 2^-6 = 1.984375 for MXINT8, else the format's."""
        return 127.0 / 64.0 if self.is_int else self.element.max

    @property
    def emax_elem(self) -> int:
        """floor(log2(max)): OCP's emax of the element data type."""
        return math.frexp(self.max)[1] - 1

    @property
    def bits(self) -> int:
        """Element code width: 8 (fp8, int8), 6 (fp6) or 4 (fp4)."""
        return 8 if self.is_int else self.element.bits

    @property
    def max_code(self) -> int:
        """Largest magnitude code (sign bit clear) of a finite element: the code of ``max``.
        ieee (e5m2): the exponent field all ones is Inf/NaN, so (2^e - 2) << m | (2^m - 1);
        fn (e4m3fn): the all-ones pattern is NaN, so 2^(e+m) - 2; none and int8: 2^(bits-1) - 1."""
        if self.is_int:
            return 127
        e, m = self.element.exp_bits, self.element.man_bits
        if self.element.inf_nan == "ieee":
            return (((1 << e) - 2) << m) | ((1 << m) - 1)
        if self.element.inf_nan == "fn":
            return (1 << (e + m)) - 2
        return (1 << (e + m)) - 1

    @property
    def max_frac(self) -> int:
        """The 52-bit fraction field of max as a float64 (max = 1.f * 2^emax_elem): the
        rceil rule compares a block maximum's fraction with it."""
        return int(np.float64(self.max).view(np.uint64)) & ((1 << 52) - 1)

    def elem_params(self, mode: int, rbits: int) -> np.ndarray:
        """The element constants the kernels take, as one int64 array (layout: see
        _kernels_quant.unpack_elem): the rounding parameters of round_value (m, emin, emax,
        subnormals, inf_nan code, saturate = 1, max as float64 bits), the code layout, the mode,
        the SR bits and the exponent field width."""
        infnan = 2 if self.is_int else self.element.inf_nan_code
        # exponent field width of the grid: MXINT8's grid is a format with ONE exponent bit
        # (code 0: the subnormals 0..63/64, code 1: [1, 2), no Inf/NaN), so bias 1, emin = emax
        # = 0 as above
        exp_bits = 1 if self.is_int else self.element.exp_bits
        return np.array([
            self.man_bits, self.emin, self.emax, 1, infnan, 1,
            int(np.float64(self.max).view(np.int64)),
            self.max_code, self.bits, int(self.is_int), mode, rbits, exp_bits,
        ], dtype=np.int64)

    def describe(self) -> str:
        el = "int8 (x 2^-6)" if self.is_int else self.element.name
        return (f"{self.name}: {el} elements (max {self.max:g}), {self.scale} scales, "
                f"block {self.block}")


def _presets():
    e8, u4 = "e8m0", "ue4m3"
    rows = [
        BlockFormat("mxfp8_e4m3", get_format("e4m3fn"), e8, 32),
        BlockFormat("mxfp8_e5m2", get_format("e5m2"), e8, 32),
        BlockFormat("mxfp6_e2m3", get_format("e2m3"), e8, 32),
        BlockFormat("mxfp6_e3m2", get_format("e3m2"), e8, 32),
        BlockFormat("mxfp4_e2m1", get_format("e2m1"), e8, 32),
        BlockFormat("mxint8", None, e8, 32),
        BlockFormat("nvfp4", get_format("e2m1"), u4, 16),
    ]
    return {f.name: f for f in rows}


BLOCK_FORMATS: dict[str, BlockFormat] = _presets()

_ALIASES = {
    "mxfp8": "mxfp8_e4m3", "mxfp8e4m3": "mxfp8_e4m3", "mxfp8e5m2": "mxfp8_e5m2",
    "mxfp6": "mxfp6_e2m3", "mxfp6e2m3": "mxfp6_e2m3", "mxfp6e3m2": "mxfp6_e3m2",
    "mxfp4": "mxfp4_e2m1", "mxfp4e2m1": "mxfp4_e2m1",
}


def get_block_format(fmt) -> BlockFormat:
    """The BlockFormat for a preset name (case-insensitive; "mxfp8" = mxfp8_e4m3, "mxfp6" =
    mxfp6_e2m3, "mxfp4" = mxfp4_e2m1) or a BlockFormat itself."""
    if isinstance(fmt, BlockFormat):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a block format name or a BlockFormat, got "
                        f"{type(fmt).__name__}")
    key = fmt.strip().lower().replace("-", "_")
    key = _ALIASES.get(key.replace("_", ""), key) if key not in BLOCK_FORMATS else key
    if key not in BLOCK_FORMATS:
        raise ValueError(f"unknown block format {fmt!r}; accepted: "
                         f"{', '.join(BLOCK_FORMATS)} (aliases mxfp8, mxfp6, mxfp4)")
    return BLOCK_FORMATS[key]
