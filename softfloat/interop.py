"""Interoperation with ml_dtypes, without importing it.

Provides
    to_ml_dtypes(x, fmt)    values of ``fmt`` -> the ml_dtypes array of the same format, bit for bit
    from_ml_dtypes(a)       an ml_dtypes array -> softfloat's carrier array of its format
    ml_dtypes_format(dtype) the softfloat Format of an ml_dtypes dtype (or of its name)
    ML_DTYPES               ml_dtypes name -> Format, for the formats both libraries have

Both directions go through the bit patterns (``to_bits`` / ``from_bits``), not through ml_dtypes'
float32 casts, so every pattern -- NaNs with their signs and payloads included -- comes back as it
went.  softfloat imports only numpy and numba: these functions find ml_dtypes' dtypes by name in
numpy's registry, which holds them once the caller has imported ml_dtypes (``import ml_dtypes``);
without that they raise a ValueError saying so.  ml_dtypes arrays are also accepted as inputs
everywhere softfloat takes an array (see softfloat._validate).

The fnuz formats of ml_dtypes (float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz: no negative
zero, NaN at the negative-zero pattern, a bias of 2^(e-1)) have no softfloat Format: their values
are accepted as inputs (through ml_dtypes' exact float32 cast), and to_ml_dtypes refuses them.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from .bits import from_bits, to_bits
from .formats import FORMATS, Format, get_format

__all__ = ["ML_DTYPES", "ml_dtypes_format", "to_ml_dtypes", "from_ml_dtypes", "is_ml_dtype"]


def _preset_or(name: str, fmt: Format) -> Format:
    """The preset of that name when it has the same fields (the MX element formats are presets
    on branches that define them), else ``fmt``."""
    return FORMATS[name] if FORMATS.get(name) == fmt else fmt


#: ml_dtypes dtype name -> the softfloat Format with the same values and bit patterns.
#: OCP FP8 (E4M3FN, E5M2), OCP MX (E8M0, FP6 E2M3/E3M2, FP4 E2M1: no Inf, no NaN), bfloat16, and
#: the IEEE-style float8_e4m3 / float8_e3m4 (with Inf and NaN).  numpy's float16 is fp16.
ML_DTYPES: dict[str, Format] = {
    "bfloat16": FORMATS["bf16"],
    "float8_e4m3fn": FORMATS["e4m3fn"],
    "float8_e5m2": FORMATS["e5m2"],
    "float8_e8m0fnu": FORMATS["e8m0"],
    "float4_e2m1fn": _preset_or("e2m1", Format("e2m1", 2, 1, inf_nan="none")),
    "float6_e2m3fn": _preset_or("e2m3", Format("e2m3", 2, 3, inf_nan="none")),
    "float6_e3m2fn": _preset_or("e3m2", Format("e3m2", 3, 2, inf_nan="none")),
    "float8_e4m3": Format("e4m3_ieee", 4, 3),
    "float8_e3m4": Format("e3m4_ieee", 3, 4),
}


def is_ml_dtype(dtype) -> bool:
    """True for the dtypes ml_dtypes defines (its floats, whose numpy kind may be 'V' or 'f',
    and its int2/int4 types)."""
    return getattr(np.dtype(dtype).type, "__module__", "") == "ml_dtypes"


def ml_dtypes_format(dtype) -> Format:
    """The Format of an ml_dtypes dtype (a dtype, a scalar type or its name, e.g.
    "float8_e4m3fn"); ValueError for dtypes without one."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in ML_DTYPES:
        raise ValueError(f"ml_dtypes dtype {name!r} has no softfloat format; accepted: "
                         f"{', '.join(ML_DTYPES)}")
    return ML_DTYPES[name]


def _ml_dtype_of(fmt: Format) -> np.dtype:
    for name, f in ML_DTYPES.items():
        if f == fmt:
            try:
                return np.dtype(name)
            except TypeError:
                raise ValueError(
                    f"to_ml_dtypes: numpy does not know the dtype {name!r}: import ml_dtypes "
                    "first (softfloat itself imports only numpy and numba)") from None
    names = ", ".join(f"{f.name} ({n})" for n, f in ML_DTYPES.items())
    raise ValueError(f"to_ml_dtypes: {fmt.name} has no ml_dtypes counterpart; accepted: {names}")


def to_ml_dtypes(x, fmt) -> np.ndarray:
    """The ml_dtypes array holding the values x of ``fmt`` (each exactly a value of the format:
    round first with softfloat.round), with x's shape; its bit patterns are ``to_bits(x, fmt)``.
    """
    fmt = get_format(fmt)
    dtype = _ml_dtype_of(fmt)
    bits = np.asarray(to_bits(x, fmt))
    return bits.astype(np.dtype(f"u{dtype.itemsize}"), copy=False).view(dtype)


def from_ml_dtypes(a) -> np.ndarray:
    """softfloat's carrier array (float32) of the ml_dtypes array ``a``, from its bit patterns:
    the same values, NaN signs and payloads included; ``ml_dtypes_format(a.dtype)`` is its
    format."""
    a = np.asarray(a)
    if not is_ml_dtype(a.dtype):
        raise TypeError(f"from_ml_dtypes: dtype {a.dtype} is not an ml_dtypes type")
    fmt = ml_dtypes_format(a.dtype)
    bits = np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))
    # sub-byte formats keep their pattern in the low bits of each byte
    if fmt.bits < 8 * a.dtype.itemsize:
        bits = bits & np.asarray((1 << fmt.bits) - 1, dtype=bits.dtype)
    return from_bits(bits, fmt)
