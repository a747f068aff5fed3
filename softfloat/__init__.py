"""softfloat: bit-exact emulation of low-precision floating-point formats.

Values of an emulated format are carried in ordinary numpy float32 arrays (float64 when the format
does not fit in float32) whose every element lies exactly on the format's grid; ``to_bits`` and
``from_bits`` give the format's own bit patterns.  Every operation rounds exactly once.

This package imports only numpy and numba; it must never import autograd, scalers or models.
"""

import os as _os

# Numba's OpenMP workers spin while idle by default; between two kernels they then steal the
# 2 cores from OpenBLAS (and vice versa), which made fp16 training steps 10-20x slower here.
# Passive waiting must be chosen before the first parallel kernel starts; an explicit user
# setting is kept.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .arith import add, div, fma, max_sr_bits, mul, sqrt, sub
from .bits import (CLASS_NAMES, FloatClass, classify, exponent, from_bits, next_down, next_up,
                   to_bits, ulp)
from .flags import FLAG_NAMES, Flags
from .formats import FORMATS, Format, get_format, list_formats
from .interop import from_ml_dtypes, to_ml_dtypes
from .modes import DETERMINISTIC_MODES, Mode, parse_mode
from .rng import derive_seed
from .rounding import round  # noqa: A004

__all__ = [
    "Format", "get_format", "list_formats", "FORMATS",
    "Mode", "parse_mode", "DETERMINISTIC_MODES",
    "Flags", "FLAG_NAMES", "derive_seed",
    "round",
    "to_bits", "from_bits", "next_up", "next_down", "ulp", "exponent", "classify",
    "FloatClass", "CLASS_NAMES",
    "add", "sub", "mul", "div", "sqrt", "fma", "max_sr_bits",
    "to_ml_dtypes", "from_ml_dtypes",
]
