"""Correctly rounded arithmetic in an emulated format: add, sub, mul, div, sqrt, fma.

Every operation computes the EXACT result of its operands' values (float16/32/64 arrays, Python
floats or lists; numpy broadcasting between operands) and rounds it ONCE onto the grid of ``fmt``
in the requested mode -- a float64 operand is never rounded through float32 first, and operands
need not lie on the format's grid.  The result is the format's carrier array (float32 when the
format fits, else float64).  Integer operands (exact up to 2^53: beyond, a ValueError names the
limit) and ml_dtypes arrays are accepted too; dask operands give a lazy dask result, chunk by
chunk, with the bits of the numpy call (softfloat._lazy).  How the single rounding is
guaranteed, the special-value rules (signs of zero, x / 0, invalid operations) and the
stochastic-rounding bit limit are documented in :mod:`softfloat._arith`; the rounding itself in
:mod:`softfloat._roundpack`.

Imports numpy and the softfloat kernels only.
"""

from __future__ import annotations

import math

import numpy as np

from . import _kernels_arith as K
from ._driver import flag_table
from ._lazy import is_dask_array, map_elementwise
from ._validate import (
    F32,
    F64,
    as_float_array,
    check_flags,
    check_format,
    check_index_offset,
    check_mode,
    check_sr,
    finish,
)

__all__ = ["MAX_PRECISION", "add", "div", "fma", "max_sr_bits", "mul", "sqrt", "sub"]

#: The exact result is handed to the rounding as a float64 rounded to odd (53 bits), which
#: rounds correctly to p bits when p + 2 <= 53 (Boldo & Melquiond), i.e. p <= 51.
MAX_PRECISION = 51


def max_sr_bits(fmt) -> int:
    """Largest sr_bits accepted by the arithmetic for ``fmt``: p + r + 2 <= 53, i.e. r <= 51 - p
    (fp32 27, tf32/fp16 40, bf16 43, e4m3fn 47, e5m2 48).  The first p + r bits of the exact
    result, which stochastic rounding looks at, are then those of its 53-bit round-to-odd proxy."""
    return MAX_PRECISION - check_format(fmt).precision


def _prepare(fmt, mode, seed, sr_bits, flags, opname, index_offset):
    fmt = check_format(fmt)
    if fmt.precision > MAX_PRECISION:
        raise ValueError(
            f"{opname}: format {fmt.name} has {fmt.precision} significand bits; the arithmetic "
            f"supports formats with at most {MAX_PRECISION} (exact results are rounded through a "
            "53-bit round-to-odd intermediate, which needs p + 2 <= 53)")
    mode = check_mode(mode)
    key, rbits = check_sr(mode, seed, sr_bits, max_bits=max_sr_bits(fmt))
    check_flags(flags)
    return fmt, mode, key, check_index_offset(index_offset), rbits


def _exact_zeros(out, fmt, counts):
    """The exact zero results (IEEE's signed zeros of _arith) in an unsigned format (-0 -> +0)
    or a format without zero (NaN, flag invalid): _roundpack's rules for a zero, which the
    arithmetic kernels return without calling round_value."""
    if fmt.signed and fmt.zero:
        return
    z = out == 0
    if z.any():
        out[z] = 0.0 if fmt.zero else np.nan
        if not fmt.zero:
            counts[0, 3] += int(np.count_nonzero(z))


def _lazy(fn, operands, fmt, mode, seed, sr_bits, flags, index_offset):
    """fn over dask operands, chunk by chunk (softfloat._lazy), or None when none is dask."""
    if not any(is_dask_array(v) for v in operands):
        return None
    name = fn.__name__
    if flags is not None:
        raise ValueError(f"{name}: flags= is not supported with dask arrays (counting would "
                         "compute them); pass computed arrays for flag counts")
    fmt = check_format(fmt)
    offset = check_index_offset(index_offset)
    return map_elementwise(
        lambda *ops, index_offset: fn(*ops, fmt, mode, seed=seed, sr_bits=sr_bits,
                                      index_offset=index_offset),
        list(operands), dtype=fmt.carrier_dtype, index_offset=offset, name=name)


def _operands(names, values):
    """Validate, broadcast; returns (shape, [(flat array, step)])."""
    v0 = values[0]
    if type(v0) is np.ndarray and (v0.dtype == F32 or v0.dtype == F64) and \
            v0.flags.c_contiguous and all(type(v) is np.ndarray and v.dtype == v0.dtype
                                          and v.shape == v0.shape and v.flags.c_contiguous
                                          for v in values[1:]):
        # the common case, what the general path below gives it: contiguous native float
        # arrays of one shape and dtype, as views (a small call's validation cost 5 us of 22)
        return v0.shape, [(v.reshape(-1), 1) for v in values]
    arrs = [as_float_array(v, name) for name, v in zip(names, values)]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrs))
    except ValueError:
        shapes = " and ".join(f"{n} {a.shape}" for n, a in zip(names, arrs))
        raise ValueError(f"operands could not be broadcast together: {shapes}; shapes must be "
                         "equal or broadcastable by numpy's rules") from None
    if any(a.dtype != np.float32 for a in arrs):
        # Mixed dtypes: widen all to float64 (exact) so each kernel compiles for two dtypes only.
        arrs = [a.astype(np.float64, copy=False) for a in arrs]
    ops = []
    for a in arrs:
        if a.shape == shape:
            ops.append((a.reshape(-1), 1))                # already contiguous: a view
        elif a.size == 1:
            ops.append((a.reshape(-1), 0))                # one element broadcast: step 0
        else:
            ops.append((np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1), 1))
    return shape, ops


def _run_binary(opname, op, a, b, fmt, mode, seed, sr_bits, flags, index_offset):
    fmt, mode, key, base, rbits = _prepare(fmt, mode, seed, sr_bits, flags, opname,
                                           index_offset)
    shape, ((fa, sa), (fb, sb)) = _operands(("a", "b"), (a, b))
    if op == K.MUL and fa.dtype == np.float32 and fb.dtype == np.float32:
        op = K.MUL_EXACT              # float32 x float32 is exact in float64: the fast path
    return _execute(op, shape, (fa, sa, fb, sb, fb, sb), fmt, mode, key, base, rbits, flags)


def _execute(op, shape, operands, fmt, mode, key, base, rbits, flags):
    """The kernels' run over the flat operands (a, sa, b, sb, c, sc), the zero rules of the
    formats without -0 or 0, the flag counts, and the result in ``shape``."""
    n = math.prod(shape)
    out = np.empty(n, dtype=fmt.carrier_dtype)
    counts = flag_table(n)
    K.run(op, *operands, out, fmt, mode, key, base, rbits, flags is not None, counts)
    _exact_zeros(out, fmt, counts)
    if flags is not None:
        flags._add_counts(counts, n)
    return finish(out, shape)


_DOC = """Round ``{expr}`` once onto ``fmt`` (exact result of the operands' values).

    Parameters
    ----------
    {params} : array_like (float16/32/64, integer or ml_dtypes arrays, Python floats, ints or
        lists), broadcast together by numpy's rules; dask arrays of one shape give a dask array
    fmt : Format or str (e.g. "fp16", "bf16", "fp32", "e4m3fn", "e5m2"; precision <= 51 bits)
    mode : "rne" (default), "rna", "rtz", "rup", "rdn", "rto" or "sr" (or a softfloat.Mode)
    seed : int, required for mode "sr": the random bits of output element i (flat C order)
        depend only on (seed, i)
    sr_bits : int, random bits per stochastic rounding (default 24, at most max_sr_bits(fmt))
    flags : softfloat.Flags, optional; accumulates the counts of raised IEEE flags
    index_offset : int, global flat index of the first output element (default 0): output
        element i draws the random bits of index index_offset + i, so that computing the pieces
        of a larger result with their offsets gives the bits of the whole computation

    Returns
    -------
    ndarray of fmt.carrier_dtype with the broadcast shape (a numpy scalar for scalar operands)
    """


def _binary(name, op):
    """The public function ``name`` (add, sub, mul, div) of the operation code op."""
    def fn(a, b, fmt, mode="rne", *, seed=None, sr_bits=None, flags=None, index_offset=0):
        lazy = _lazy(fn, (a, b), fmt, mode, seed, sr_bits, flags, index_offset)
        if lazy is not None:
            return lazy
        return _run_binary(name, op, a, b, fmt, mode, seed, sr_bits, flags, index_offset)
    fn.__name__ = fn.__qualname__ = name         # pickled by reference (dask), named in errors
    return fn


add = _binary("add", K.ADD)
sub = _binary("sub", K.SUB)
mul = _binary("mul", K.MUL)
div = _binary("div", K.DIV)


def sqrt(a, fmt, mode="rne", *, seed=None, sr_bits=None, flags=None, index_offset=0):
    lazy = _lazy(sqrt, (a,), fmt, mode, seed, sr_bits, flags, index_offset)
    if lazy is not None:
        return lazy
    fmt, mode, key, base, rbits = _prepare(fmt, mode, seed, sr_bits, flags, "sqrt",
                                           index_offset)
    shape, ((fa, _),) = _operands(("a",), (a,))
    return _execute(K.SQRT, shape, (fa, 1, fa, 1, fa, 1), fmt, mode, key, base, rbits, flags)


def fma(a, b, c, fmt, mode="rne", *, seed=None, sr_bits=None, flags=None, index_offset=0):
    lazy = _lazy(fma, (a, b, c), fmt, mode, seed, sr_bits, flags, index_offset)
    if lazy is not None:
        return lazy
    fmt, mode, key, base, rbits = _prepare(fmt, mode, seed, sr_bits, flags, "fma",
                                           index_offset)
    a = as_float_array(a, "a")
    b = as_float_array(b, "b")
    # float32 x float32 is exact in float64 (even if c's dtype widens a and b below).
    op = K.FMA_EXACT if (a.dtype == np.float32 and b.dtype == np.float32) else K.FMA
    shape, ((fa, sa), (fb, sb), (fc, sc)) = _operands(("a", "b", "c"), (a, b, c))
    return _execute(op, shape, (fa, sa, fb, sb, fc, sc), fmt, mode, key, base, rbits, flags)


for _f, _expr, _params in ((add, "a + b", "a, b"), (sub, "a - b", "a, b"),
                           (mul, "a * b", "a, b"), (div, "a / b", "a, b"),
                           (sqrt, "sqrt(a)", "a"), (fma, "a * b + c", "a, b, c")):
    _f.__doc__ = _DOC.format(expr=_expr, params=_params)
del _f, _expr, _params
