"""softfloat: bit-exact emulation of low-precision floating-point formats.

Values of an emulated format are carried in ordinary numpy float32 arrays (float64 when the format
does not fit in float32) whose every element lies exactly on the format's grid; ``to_bits`` and
``from_bits`` give the format's own bit patterns.  Every operation rounds exactly once.

This package imports only numpy and numba; it must never import autograd, scalers or models.
"""

from .flags import FLAG_NAMES, Flags
from .formats import FORMATS, Format, get_format, list_formats
from .modes import DETERMINISTIC_MODES, Mode, parse_mode
from .rng import derive_seed
from .rounding import round  # noqa: A004

__all__ = [
    "Format", "get_format", "list_formats", "FORMATS",
    "Mode", "parse_mode", "DETERMINISTIC_MODES",
    "Flags", "FLAG_NAMES", "derive_seed",
    "round",
]
