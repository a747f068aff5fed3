"""Argument checking of the Tensor Core API: operands on their formats' grids, shapes, C.

Provides ``prepare(A, B, C, in_format, acc_format, round_inputs)`` returning float64 copies of
the operands (exact: every format here fits a float64), after the checks the public functions
promise: 2-d A (m x k) and B (k x n), C None, a scalar or an array broadcastable to (m, n);
every element of A and B a value of in_format (else ValueError naming the element and value),
unless ``round_inputs`` names a rounding mode to apply first; every element of C a value of
acc_format.  tf32 operands are float32 words whose 13 low mantissa bits are ignored (cleared),
as the hardware does (spec section 3): a float32 off the tf32 grid is accepted for tf32.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from .._validate import as_float_array
from ..formats import Format, get_format
from ..modes import Mode, parse_mode
from ..rounding import round as sf_round
from . import _prep as P
from . import _prep32 as P32K
from ._workspace import scratch

_TF32_KEEP = np.uint32(0xFFFFE000)   # sign, 8 exponent bits and the 10 top fraction bits
TF32 = get_format("tf32")
#: Below this many elements (m k + k n for the operand pair) the conversions and checks run on
#: the calling thread (one call, no thread launch); above it on Numba's threads.
PREP_PARALLEL_MIN = 1 << 19


def _where(shape, flat_index, name):
    if len(shape) == 0:
        return name
    idx = np.unravel_index(int(flat_index), shape)
    return f"{name}[{', '.join(str(int(t)) for t in idx)}]"


def to_float64_checked(x: np.ndarray, fmt: Format, out=None):
    """(float64 copy of x, flat index of its first element that is not a value of fmt or -1);
    out: a C-contiguous float64 array of x's shape to write the copy to (default: a new one)."""
    x = np.asarray(x)
    if out is None:
        out = np.empty(x.shape, np.float64)
    if x.size == 0:
        return out, -1
    flat = np.ascontiguousarray(x).reshape(-1)
    if flat.dtype == np.float32 and fmt.man_bits <= 23 and fmt.emin >= -126:
        # float32 carriers: the check on the bit patterns in 32-bit lanes (_prep32)
        kern = P32K.convert_checked32 if x.size >= PREP_PARALLEL_MIN \
            else P32K.convert_checked32_serial
        bad = kern(flat.view(np.uint32), out.reshape(-1), _params32(fmt))
        return out, int(bad)
    kern = P.convert_checked if x.size >= PREP_PARALLEL_MIN else P.convert_checked_serial
    bad = kern(flat, out.reshape(-1), *_grid_params(fmt), fmt.emin - fmt.man_bits < -1022)
    return out, int(bad)


_GRID = {}
_P32 = {}


def _params32(fmt: Format) -> np.ndarray:
    hit = _P32.get(id(fmt))
    if hit is None or hit[0] is not fmt:
        hit = _P32[id(fmt)] = (fmt, P32K.params32(fmt))
    return hit[1]


def _grid_params(fmt: Format):
    hit = _GRID.get(id(fmt))
    if hit is None or hit[0] is not fmt:
        fp = fmt.kernel_params()
        hit = _GRID[id(fmt)] = (fmt, (fp.man_bits, fp.emin, fp.maxval, fp.subnormals,
                                      fmt.has_inf, fmt.has_nan))
    return hit[1]


def check_on_grid(x: np.ndarray, fmt: Format, name: str, hint: str = "",
                  out=None) -> np.ndarray:
    """x as float64 after checking that every element is a value of fmt (ValueError naming
    the first one that is not); out as in to_float64_checked."""
    out, flat = to_float64_checked(x, fmt, out)
    if flat >= 0:
        raise _off_grid_error(x, fmt, name, hint)
    return out


def _round_mode(round_inputs):
    if round_inputs is None:
        return None
    mode = parse_mode(round_inputs)
    if mode == Mode.SR:
        raise ValueError("round_inputs='sr' is not accepted (it needs a seed); round the inputs "
                         "with softfloat.round(x, fmt, 'sr', seed=...) first")
    return mode


def input_operand(x, fmt: Format, name: str, mode) -> np.ndarray:
    """One operand as float64 values of fmt (after rounding with ``mode`` if given)."""
    arr = as_float_array(x, name)
    if fmt == TF32:
        if mode is not None:
            arr = np.asarray(sf_round(arr, fmt, mode))
        if arr.dtype == np.float32:
            # Every float32 word is a tf32 register: no check, one pass.
            flat = np.ascontiguousarray(arr).reshape(-1)
            out = np.empty(flat.size)
            if flat.size:
                P32K.tf32_operand(flat.view(np.uint32), out)
            return out.reshape(arr.shape)
        f32 = arr.astype(np.float32)
        same = (f32.astype(np.float64) == arr) | np.isnan(arr)
        if not same.all():
            flat = int(np.argmin(same.reshape(-1)))
            raise ValueError(f"{_where(arr.shape, flat, name)} = {float(arr.reshape(-1)[flat])!r} "
                             "is not a float32 value: tf32 operands are float32 words (pass "
                             "round_inputs='rne' or another mode to round them to tf32 first)")
        # The hardware reads the fp32 register and ignores the 13 low mantissa bits.
        t = (np.ascontiguousarray(f32).view(np.uint32) & _TF32_KEEP).view(np.float32)
        t = np.where(np.isnan(f32), np.float32(np.nan), t)
        return t.astype(np.float64)
    if mode is not None:
        return np.asarray(sf_round(arr, fmt, mode), dtype=np.float64)
    return check_on_grid(arr, fmt, name, _HINT)


def _off_grid_error(x, fmt, name, hint):
    _out, flat = to_float64_checked(x, fmt)
    v = np.asarray(x).reshape(-1)[flat]
    return ValueError(f"{_where(np.shape(x), flat, name)} = {float(v)!r} is not a {fmt.name} "
                      f"value (off its grid or out of its range){hint}")


_HINT = " (pass round_inputs='rne' or another mode to round inputs first)"


def _stat_arrays(m, n):
    """Off-grid flag, sum of squares and smallest exponent per row of A (m) and per column of
    B (n): the outputs of the preparation kernels."""
    return (np.empty(m, np.int64), np.empty(m), np.empty(m, np.int64), np.empty(n, np.int64),
            np.empty(n), np.empty(n, np.int64))


def _pair_with_stats(a, b, fmt, na, nb):
    """A and B (2-d) as float64, checked, with the row statistics of A and the column
    statistics of B for the ideal models' certificates: (a, b, (sum a^2 per row, min exponent
    per row, sum b^2 per column, min exponent per column, B's source)).  B's source holds the
    same values as the float64 b in the narrowest carrier at hand (the float32 input itself
    when B came as float32): the fallback of the ideal path streams it at half the bytes.
    Conversions go to per-thread scratch arrays (softfloat.tensorcore._workspace), valid
    until the next call."""
    m, k = a.shape
    n = b.shape[1]
    if a.dtype == np.float32 and b.dtype == np.float32 and fmt.man_bits <= 23 \
            and fmt.emin >= -126:
        return _pair_with_stats32(a, b, fmt, na, nb)
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    # A float64 operand is converted in place (same values); a read-only one is copied first
    # (the kernels write their output, and are compiled for writeable arrays only).
    if a.dtype == np.float64 and not a.flags.writeable:
        a = a.copy()
    if b.dtype == np.float64 and not b.flags.writeable:
        b = b.copy()
    oa = a if a.dtype == np.float64 else scratch("a64", a.shape)
    ob = b if b.dtype == np.float64 else scratch("b64", b.shape)
    bada, nra, exa, badb, nrb, exb = _stat_arrays(m, n)
    gp = _grid_params(fmt)
    if m * k + k * n < PREP_PARALLEL_MIN:
        nbad = P.prep_pair_serial(a, oa, b, ob, *gp, bada, nra, exa, badb, nrb, exb)
    else:
        P.prep_rows(a, oa, *gp, bada, nra, exa)
        P.prep_cols(b, ob, *gp, badb, nrb, exb)
        nbad = bada.sum() + badb.sum()
    if nbad:
        if bada.any():
            raise _off_grid_error(a, fmt, na, _HINT)
        raise _off_grid_error(b, fmt, nb, _HINT)
    return oa, ob, (nra, exa, nrb, exb, ob)


def _pair_with_stats32(a, b, fmt, na, nb):
    """_pair_with_stats for float32 carriers: the same pass on the bit patterns in 32-bit
    lanes (_prep32).  A C- or F-contiguous operand is read in place: the transpose of an
    F-contiguous one (the transposed views of a backward pass) is C-contiguous, and A's rows
    (B's columns) are its columns (rows), so the other kernel gives the same statistics and a
    float64 copy in the transposed layout, returned as its transpose (an F-ordered view that
    numpy's matmul takes as it is).  B's source is B itself."""
    m, k = a.shape
    n = b.shape[1]
    a = a if a.flags.f_contiguous and not a.flags.c_contiguous else np.ascontiguousarray(a)
    b = b if b.flags.f_contiguous and not b.flags.c_contiguous else np.ascontiguousarray(b)
    ta = not a.flags.c_contiguous
    tb = not b.flags.c_contiguous
    oa = scratch("a64", (k, m) if ta else (m, k))
    ob = scratch("b64", (n, k) if tb else (k, n))
    bada, nra, exa, badb, nrb, exb = _stat_arrays(m, n)
    P32 = _params32(fmt)
    va = (a.T if ta else a).view(np.uint32)
    vb = (b.T if tb else b).view(np.uint32)
    serial = m * k + k * n < PREP_PARALLEL_MIN
    if serial and not ta and not tb:
        anybad = P32K.prep_pair_serial32(va, oa, vb, ob, P32, bada, nra, exa, badb, nrb, exb)
    else:
        rows = P32K.prep_rows32_serial if serial else P32K.prep_rows32
        cols = P32K.prep_cols32_serial if serial else P32K.prep_cols32
        (cols if ta else rows)(va, oa, P32, bada, nra, exa)
        (rows if tb else cols)(vb, ob, P32, badb, nrb, exb)
        anybad = bada.any() or badb.any()
    if anybad:
        if bada.any():
            raise _off_grid_error(a, fmt, na, _HINT)
        raise _off_grid_error(b, fmt, nb, _HINT)
    return oa.T if ta else oa, ob.T if tb else ob, (nra, exa, nrb, exb, b)


def _keep_layout(x, name):
    """as_float_array, except that a 2-d float32 array that is F-contiguous (a transposed
    view) is returned as it is: the ideal models' preparation reads it in place."""
    if isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype == np.float32 \
            and x.dtype.isnative and x.flags.f_contiguous and not x.flags.c_contiguous:
        return x
    return as_float_array(x, name)


def prepare(A, B, C, in_fmt: Format, acc_fmt: Format, round_inputs, vector: bool = False,
            stats: bool = False):
    """(A, B, C) as float64 arrays of shapes (m, k), (k, n), (m, n) (C None stays None: zeros);
    see the module docstring.

    vector=True is dot's form: 1-d a and b of equal length and a scalar c, returned as 1 x k,
    k x 1 and 1 x 1 arrays (error messages then name a[k], b[k] and c).
    stats=True (the ideal models) also returns, as a 4th item, the row statistics of A, the
    column statistics of B (softfloat.tensorcore._prep.prep_rows / prep_cols) and B's values
    in their narrowest carrier (_pair_with_stats); in the common case (no rounding of the
    inputs, not tf32) one pass over each operand converts it, checks it and computes them.
    """
    mode = _round_mode(round_inputs)
    na, nb, nc = ("a", "b", "c") if vector else ("A", "B", "C")
    conv = _keep_layout if stats and not vector else as_float_array
    a0 = conv(A, na)
    b0 = conv(B, nb)
    if vector:
        if a0.ndim != 1 or b0.ndim != 1:
            raise ValueError(f"dot needs 1-d a and b, got {a0.ndim}-d and {b0.ndim}-d")
        if a0.shape[0] != b0.shape[0]:
            raise ValueError(f"length mismatch: a has {a0.shape[0]} elements, b has "
                             f"{b0.shape[0]}")
        if np.ndim(C) != 0:
            raise ValueError(f"dot's c must be a scalar, got shape {np.shape(C)}")
    elif a0.ndim != 2 or b0.ndim != 2:
        raise ValueError(f"A and B must be 2-d (m x k and k x n), got {a0.ndim}-d and "
                         f"{b0.ndim}-d")
    elif a0.shape[1] != b0.shape[0]:
        raise ValueError(f"shape mismatch: A is {a0.shape[0]} x {a0.shape[1]} and B is "
                         f"{b0.shape[0]} x {b0.shape[1]}; A's columns must equal B's rows")
    fused = stats and mode is None and in_fmt != TF32 and not vector
    if fused:
        a, b, st = _pair_with_stats(a0, b0, in_fmt, na, nb)
    else:
        a = input_operand(a0, in_fmt, na, mode)
        b = input_operand(b0, in_fmt, nb, mode)
    if vector:
        a = a.reshape(1, -1)
        b = b.reshape(-1, 1)
        C = np.reshape(as_float_array(C, "c"), (1, 1))
    if stats and not fused:
        a, b, st = _pair_with_stats(a, b, in_fmt, na, nb)
    m, n = a.shape[0], b.shape[1]
    if C is None:
        c = None
    else:
        c0 = as_float_array(C, nc)
        try:
            c = np.broadcast_to(c0, (m, n))
        except ValueError:
            raise ValueError(f"C of shape {c0.shape} does not broadcast to the output shape "
                             f"({m}, {n})") from None
        cc = np.ascontiguousarray(c)
        if vector:
            cc = cc.reshape(())
        # The ideal models read C inside the call only: a per-thread scratch copy will do.
        c = check_on_grid(cc, acc_fmt, nc,
                          f" (it holds an accumulator value, format {acc_fmt.name})",
                          scratch("c64", cc.shape) if stats and not vector else None)
        c = c.reshape(m, n)
    if stats:
        return a, b, c, st
    return np.ascontiguousarray(a), np.ascontiguousarray(b), c


def permute_k(a, b, k_order):
    """Reorder the k axis of A (columns) and B (rows) by a permutation of range(k)."""
    if k_order is None:
        return a, b
    k = a.shape[1]
    perm = np.asarray(k_order)
    if perm.ndim != 1 or perm.dtype.kind not in "iu" or perm.size != k or \
            not np.array_equal(np.sort(perm), np.arange(k)):
        raise ValueError(f"k_order must be a permutation of range({k}) (1-d integers)")
    return np.ascontiguousarray(a[:, perm]), np.ascontiguousarray(b[perm, :])
