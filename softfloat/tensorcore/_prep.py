"""Operand preparation of the Tensor Core API: argument checks, the grid check, conversion to
float64 and the ideal models' row / column statistics.

Provides
    operands(A, B, C, in_fmt, acc_fmt, round_inputs, k_order, vector) -> Operands
        A and B as float32/float64 carrier arrays broadcast to one batch shape (..., m, k) and
        (..., k, n) (after rounding, tf32 truncation and the k permutation), C as float64
        broadcast to (..., m, n) and checked (or None), and the checkers of A and B
    Checker.settle(rejects)   the exact grid check of an operand whose kernels reported
                              elements the fast filter did not pass (raises for an off-grid one)
    pair_with_stats(a, b, ca, cb) -> (a64, b64, (sum a^2 and min exponent per row of A, the same
                              per column of B, B's narrowest carrier)) for the ideal models
    as_float64(x, checker)    a checked float64 C-contiguous copy (custom models, accum_gemm)
    scratch(name, shape, dtype)   per-thread reusable scratch arrays
    gemm_work(A, B)           the multiply-adds of a call, for the thread rule
    fast_ok, filter_params    the grid filter of the kernels (also _tile's packers)

The grid check.  Whether a value lies on a format's grid is decided by ONE routine, softfloat's
encoder (softfloat._kernels_bits.encode: status OK or not), which the exact check
``first_off_grid`` runs element by element.  The kernels that convert operands (here and
_tile.pack_a / pack_b) apply a vectorised filter on the way, ``fast_ok``, which passes exactly
the finite values of the format: |x| <= max and |x| / q an integer for the quantum
q = 2^(max(e, emin) - m) of x's binade (e = floor(log2|x|): 2^e is x's float64 bits with sign
and fraction cleared; 1/q and the scaling by it are exact powers of two), and, without
subnormals, |x| >= 2^emin or x = 0 (|x| <= max also keeps an fn format's NaN pattern out).  It
passes nothing the encoder refuses (tests/test_tensorcore_prep.py checks both directions on
every exponent).  Inf and NaN, which it does not pass, and off-grid values are counted, and
when the count is not zero the caller runs the exact check on that operand once: an off-grid
element raises ValueError naming its index and value, and an Inf or NaN the format has was
fine.  Every TCModel format has a float32 carrier (m <= 23, emin >= -126): its values are
normal float64 numbers, which the filter assumes.

tf32 operands are float32 words whose 13 low mantissa bits the hardware ignores (cleared,
spec section 3): any float32 is accepted; a float64 carrier must hold float32 values.

Scratch arrays.  A call needs float64 copies and packed forms of its operands, private to the
call; fresh arrays of a few MiB cost a page fault per 4 KiB page on first touch (about as much as
the conversion itself), so ``scratch`` keeps them between calls, one set per Python thread
(threading.local), keyed by a name; arrays above MAX_CACHED elements are not kept.  Nothing that
escapes a public call lives in one.

Imports numpy, numba and softfloat only.
"""

from __future__ import annotations

import math
import threading
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .._kernels_bits import OK, encode
from .._primitives import (F64_ABS, F64_EXP_ALL_ONES, F64_EXP_FIELD, F64_FRAC_BITS,
                          U64_MINUS_1)
from .._validate import as_float_array
from ..formats import Format, get_format
from ..modes import Mode, parse_mode
from ..rounding import round as sf_round

TF32 = get_format("tf32")
_TF32_KEEP = np.uint32(0xFFFFE000)   # sign, 8 exponent bits and the 10 top fraction bits
#: Exponent recorded for a row without non-zero elements: 2^(NO_EXP + ...) exceeds every
#: bound of the certificates, so its (all-zero) products are certified exact.
NO_EXP = 4000
_NONE = U64_MINUS_1                  # "no non-zero element" in the smallest-magnitude minimum
#: Elements per parallel chunk of convert; blocks of rows of B in prep_cols (each with its own
#: partial column statistics: a fixed number, so that the sums do not depend on the threads).
CHUNK = 1 << 14
ROW_BLOCKS = 8
#: Largest scratch array kept between calls, in elements (32 MiB of float64), and the smallest
#: (below it a fresh np.empty costs less than the lookup: ~0.3 us, no page to fault in).
MAX_CACHED = 1 << 22
MIN_CACHED = 1 << 14
_HINT = " (pass round_inputs='rne' or another mode to round inputs first)"


# ---- the grid filter and the exact check ------------------------------------------------------
def filter_params(fmt: Format):
    """(2^emin, max, (2046 + m) << 52 modulo 2^64, subnormals) of fast_ok, for a format with a
    float32 carrier (from the format's FormatParams record, made once per Format; memoised by
    its value)."""
    fp = fmt.kernel_params()
    gp = _GP.get(fp)
    if gp is None:
        gp = _GP[fp] = (2.0 ** fp.emin, fp.maxval,
                        np.uint64(((2046 + fp.man_bits) << 52) % (1 << 64)),
                        np.int64(fp.subnormals))
    return gp


_GP: dict = {}


@njit(cache=True, error_model="numpy", inline="always")
def fast_ok(x, gp):
    """True when the float64 x is a finite value of the format (module docstring); branch-free,
    so that the loops calling it vectorise.  y = |x| 2^m / max(2^e, 2^emin) with the inverse
    power from the bits: (2046 + m) << 52 minus the bits of 2^k (modulo 2^64: the wrap-around
    of the first term cancels) is the bit pattern of 2^(m - k) (biased exponents add up to
    2046 + m), a normal power for every k of a value <= max; for larger or non-finite x the
    result does not matter (|x| <= max fails)."""
    pemin, maxval, invm, subn = gp
    a = abs(x)
    qb = max(np.uint64(np.float64(a).view(np.uint64) & F64_EXP_FIELD).view(np.float64), pemin)
    y = a * np.uint64(invm - np.float64(qb).view(np.uint64)).view(np.float64)
    return (np.trunc(y) == y) & (a <= maxval) & ((a >= pemin) | (subn != 0) | (a == 0.0))


@njit(cache=True, error_model="numpy")
def _rejects(xs, gp):
    """The number of elements of the 1-d xs the filter does not pass (vectorised)."""
    cnt = 0
    for t in range(xs.shape[0]):
        cnt += not fast_ok(np.float64(xs[t]), gp)
    return cnt


@njit(cache=True, error_model="numpy")
def first_off_grid(x, fp, gp):
    """The flat index of the first element of the 1-d x that softfloat's encoder refuses for
    the format fp (off the grid, or a special value the format lacks), or -1.  The encoder sees
    only the elements the filter (parameters gp) does not pass: it passes none it would
    refuse.  Blocks of 256 elements are first counted by the (vectorised) filter."""
    n = x.shape[0]
    for b0 in range(0, n, 256):
        b1 = min(n, b0 + 256)
        if _rejects(x[b0:b1], gp):
            for t in range(b0, b1):
                v = np.float64(x[t])
                if not fast_ok(v, gp) and encode(v, fp)[1] != OK:
                    return t
    return -1


def _where(shape, flat_index, name):
    if len(shape) == 0:
        return name
    idx = np.unravel_index(int(flat_index), shape)
    return f"{name}[{', '.join(str(int(t)) for t in idx)}]"


class Checker:
    """The exact check of one operand (its array as given, its format and name), run at most
    once per call, when a kernel reports elements the filter did not pass."""

    def __init__(self, x, fmt: Format, name: str, hint: str = _HINT):
        self.x, self.fmt, self.name, self.hint = x, fmt, name, hint
        self.gp = filter_params(fmt)
        self.done = False

    def settle(self, rejects) -> None:
        if not rejects or self.done:
            return
        self.done = True
        flat = np.ascontiguousarray(self.x).reshape(-1)
        t = int(first_off_grid(flat, self.fmt.kernel_params(), self.gp))
        if t >= 0:
            raise ValueError(f"{_where(np.shape(self.x), t, self.name)} = {float(flat[t])!r} "
                             f"is not a {self.fmt.name} value (off its grid or out of its "
                             f"range){self.hint}")


# ---- conversion kernels -----------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _convert(xs, os, gp):
    """One chunk of convert.  (Loops over whole slices, whose indices start at 0: with bounds
    computed inside a prange body LLVM did not vectorise them, 4x slower.)"""
    cnt = 0
    for t in range(xs.shape[0]):
        v = np.float64(xs[t])
        os[t] = v
        cnt += not fast_ok(v, gp)
    return cnt


@njit(cache=True, error_model="numpy")
def convert(x, out, gp):
    """out = float64(x) for a 1-d x; returns the number of elements fast_ok did not pass.  (One
    thread: C and the custom models' operands, O(size) against their O(m n k) GEMMs.)"""
    n = x.shape[0]
    rej = 0
    for c in range((n + CHUNK - 1) // CHUNK):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        rej += _convert(x[lo:hi], out[lo:hi], gp)
    return rej


@njit(cache=True, error_model="numpy", inline="always")
def _exponent(mn, emin):
    """max(floor(log2 |x|), emin) for the smallest non-zero magnitude of a row or column, given
    as its bit pattern mn (for non-negative float64s the order of the patterns is the order of
    the values, and floor(log2) is monotone: this is the smallest exponent of its elements);
    NO_EXP when there is none (mn = _NONE).  Inf/NaN elements give 1024 at most, which does not
    matter: their sum x^2 is Inf or NaN and fails every certificate."""
    if mn == _NONE:
        return np.int64(NO_EXP)
    return max(np.int64((mn >> F64_FRAC_BITS) & F64_EXP_ALL_ONES) - 1023, emin)


@njit(cache=True, error_model="numpy", inline="always")
def _nz(v):
    """The bit pattern of |v| for the smallest-magnitude statistic, _NONE for a zero: an
    integer minimum, which LLVM vectorises (a float minimum it does not, NaN rules)."""
    b = np.float64(v).view(np.uint64) & F64_ABS
    return b if b != 0 else _NONE


@njit(parallel=True, cache=True, error_model="numpy")
def prep_rows(x, out, gp, emin, nrm, mexp):
    """One pass over A (m x k): out = float64(A) (out may be x itself); per row sum a^2 (nrm;
    BLAS ddot, any order) and the smallest exponent (mexp).  Returns the filter's rejects."""
    m, k = x.shape
    rej = 0
    for i in prange(m):
        cnt, mn = _row(x[i], out[i], gp)
        mexp[i] = _exponent(mn, emin)
        nrm[i] = _sumsq(out[i])
        rej += cnt
    return rej


@njit(cache=True, error_model="numpy")
def _sumsq(o):
    """sum o^2 (BLAS ddot, any order; 0 for an empty row).  (A call: np.dot written in the
    prange body itself ran 4x slower.)"""
    return np.dot(o, o) if o.shape[0] else 0.0


@njit(cache=True, error_model="numpy")
def _row(xr, o, gp):
    """One row of prep_rows: (rejects, the smallest non-zero magnitude's pattern)."""
    cnt = 0
    mn = _NONE
    for j in range(xr.shape[0]):
        v = np.float64(xr[j])
        o[j] = v
        cnt += not fast_ok(v, gp)
        mn = min(mn, _nz(v))
    return cnt, mn


@njit(cache=True, error_model="numpy")
def _col_rows(x, out, r0, r1, gp, nr, mn):
    """Rows r0 .. r1-1 of B, whole rows (contiguous): conversion, rejects, and their part of
    the column statistics, accumulated into nr (sum b^2) and mn (smallest non-zero magnitude's
    pattern) per column."""
    cnt = 0
    for i in range(r0, r1):
        xr = x[i]
        orow = out[i]
        for j in range(xr.shape[0]):
            v = np.float64(xr[j])
            orow[j] = v
            cnt += not fast_ok(v, gp)
            nr[j] += v * v
            mn[j] = min(mn[j], _nz(v))
    return cnt


@njit(parallel=True, cache=True, error_model="numpy")
def prep_cols(x, out, gp, emin, nrm, mexp):
    """One pass over B (k x n): out = float64(B); per column sum b^2 and the smallest exponent.
    Returns the filter's rejects.  B is read in whole rows (contiguous, like prep_rows), in
    ROW_BLOCKS blocks of rows with partial column statistics each, combined at the end: a
    fixed split, so the sums are the same whatever the number of threads."""
    k, n = x.shape
    nb = max(1, min(ROW_BLOCKS, k))
    nr = np.zeros((nb, n))
    mn = np.full((nb, n), _NONE, np.uint64)
    rej = 0
    for b in prange(nb):
        rej += _col_rows(x, out, b * k // nb, (b + 1) * k // nb, gp, nr[b], mn[b])
    for j in range(n):
        s = 0.0
        m = _NONE
        for b in range(nb):
            s += nr[b, j]
            m = min(m, mn[b, j])
        nrm[j] = s
        mexp[j] = _exponent(m, emin)
    return rej


# ---- scratch arrays -------------------------------------------------------------------------
_tls = threading.local()


def scratch(name: str, shape: tuple, dtype=np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array of the given shape, reused between calls on this
    thread (see the module docstring)."""
    size = math.prod(shape)
    if not MIN_CACHED <= size <= MAX_CACHED:
        return np.empty(shape, dtype)
    bufs = getattr(_tls, "bufs", None)
    if bufs is None:
        bufs = _tls.bufs = {}
    dt = np.dtype(dtype)
    buf = bufs.get((name, dt))
    if buf is None or buf.size < size:
        buf = bufs[(name, dt)] = np.empty(max(size, 1024), dt)
    return buf[:size].reshape(shape)


# ---- the operands of a call -----------------------------------------------------------------
class Operands(NamedTuple):
    a: np.ndarray            # (..., m, k) float32/float64 carriers (broadcast views)
    b: np.ndarray            # (..., k, n)
    c: np.ndarray | None     # (..., m, n) float64, checked, or None (zeros)
    ca: Checker
    cb: Checker
    shape: tuple             # the output's shape (..., m, n)


def gemm_work(A, B) -> int:
    """The multiply-adds of a (batched) GEMM from its operands' shapes (before any checking;
    the operand sizes for shapes that are not matrices): the thread decision."""
    sa, sb = np.shape(A), np.shape(B)
    if len(sa) >= 2 and len(sb) >= 2:
        return max(math.prod(sa[:-2]), math.prod(sb[:-2])) * sa[-2] * sa[-1] * sb[-1]
    return math.prod(sa) + math.prod(sb)


def _round_mode(round_inputs):
    if round_inputs is None:
        return None
    mode = parse_mode(round_inputs)
    if mode == Mode.SR:
        raise ValueError("round_inputs='sr' is not accepted (it needs a seed); round the inputs "
                         "with softfloat.round(x, fmt, 'sr', seed=...) first")
    return mode


def _tf32(arr, name, mode):
    """The tf32 values the hardware reads from an operand (float32; see the module docstring)."""
    if mode is not None:
        arr = np.asarray(sf_round(arr, TF32, mode))
    if arr.dtype != np.float32:
        f32 = arr.astype(np.float32)
        same = (f32.astype(np.float64) == arr) | np.isnan(arr)
        if not same.all():
            flat = int(np.argmin(same.reshape(-1)))
            raise ValueError(f"{_where(arr.shape, flat, name)} = {float(arr.reshape(-1)[flat])!r} "
                             "is not a float32 value: tf32 operands are float32 words (pass "
                             "round_inputs='rne' or another mode to round them to tf32 first)")
        arr = f32
    # The hardware reads the fp32 register and ignores the 13 low mantissa bits; a NaN stays
    # NaN (clearing the bits of a payload that lies there would make it Inf).
    t = (np.ascontiguousarray(arr).view(np.uint32) & _TF32_KEEP).view(np.float32)
    return np.where(np.isnan(arr), np.float32(np.nan), t)


def _operand(x, fmt, name, mode, keep_layout):
    """One operand as a float carrier array of fmt's values (rounded with mode if given; the
    grid check itself runs in the kernels), and its Checker."""
    if keep_layout and isinstance(x, np.ndarray) and x.ndim >= 2 \
            and x.dtype in (np.float32, np.float64) and x.dtype.isnative:
        arr = x                             # (a transposed view is read in place)
    else:
        arr = as_float_array(x, name)
    tf32 = fmt.name == "tf32" and fmt == TF32
    if tf32:
        arr = _tf32(arr, name, mode)
    elif mode is not None:
        arr = np.asarray(sf_round(arr, fmt, mode))
    return arr, Checker(arr, fmt, name)


def _check_k_order(k_order, k):
    perm = np.asarray(k_order)
    if perm.ndim != 1 or perm.dtype.kind not in "iu" or perm.size != k or \
            not np.array_equal(np.sort(perm), np.arange(k)):
        raise ValueError(f"k_order must be a permutation of range({k}) (1-d integers)")
    return perm


def operands(A, B, C, in_fmt: Format, acc_fmt: Format, round_inputs, k_order,
             vector: bool = False) -> Operands:
    """The checked operands of gemm (A (..., m, k), B (..., k, n), batch dimensions broadcast
    as numpy.matmul does; C None, a scalar or an array broadcastable to (..., m, n)), or of dot
    (vector=True: 1-d a and b of equal length and a scalar c, as 1 x k, k x 1 and 1 x 1; error
    messages then name a[k], b[k] and c).  See the module docstring."""
    mode = _round_mode(round_inputs)
    na, nb, nc = ("a", "b", "c") if vector else ("A", "B", "C")
    a, ca = _operand(A, in_fmt, na, mode, not vector)
    b, cb = _operand(B, in_fmt, nb, mode, not vector)
    if vector:
        if a.ndim != 1 or b.ndim != 1:
            raise ValueError(f"dot needs 1-d a and b, got {a.ndim}-d and {b.ndim}-d")
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"length mismatch: a has {a.shape[0]} elements, b has "
                             f"{b.shape[0]}")
        if np.ndim(C) != 0:
            raise ValueError(f"dot's c must be a scalar, got shape {np.shape(C)}")
        a, b = a.reshape(1, -1), b.reshape(-1, 1)
    elif a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"A and B must be 2-d (m x k and k x n, with optional leading batch "
                         f"dimensions), got {a.ndim}-d and {b.ndim}-d")
    elif a.shape[-1] != b.shape[-2]:
        raise ValueError(f"shape mismatch: A is {' x '.join(map(str, a.shape))} and B is "
                         f"{' x '.join(map(str, b.shape))}; A's columns must equal B's rows")
    try:
        batch = () if a.ndim == b.ndim == 2 else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch dimensions of A {a.shape[:-2]} and B {b.shape[:-2]} do "
                         "not broadcast") from None
    if k_order is not None:
        perm = _check_k_order(k_order, a.shape[-1])
        a, b = a[..., perm], b[..., perm, :]
    shape = batch + (a.shape[-2], b.shape[-1])
    if batch:
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
    c = None
    if C is not None:
        c0 = as_float_array(C, nc)
        if c0.shape != shape and (c0.ndim > len(shape) or any(
                d not in (1, e) for d, e in zip(c0.shape[::-1], shape[::-1]))):
            out = ", ".join(map(str, shape))
            raise ValueError(f"C of shape {c0.shape} does not broadcast to the output shape "
                             f"({out})")
        chk = Checker(c0.reshape(()) if vector else c0, acc_fmt, nc,
                      f" (it holds an accumulator value, format {acc_fmt.name})")
        c = np.empty(c0.shape)
        if c.size:
            chk.settle(convert(c0.reshape(-1), c.reshape(-1), chk.gp))
        if c0.shape != shape:
            full = np.empty(shape)
            full[...] = c                   # (faster than np.broadcast_to for small shapes)
            c = full
    return Operands(a, b, c, ca, cb, shape)


def as_float64(x: np.ndarray, checker: Checker) -> np.ndarray:
    """x (a 2-d operand) as a checked C-contiguous float64 array."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.size)
    if flat.size:
        checker.settle(convert(flat, out, checker.gp))
    return out.reshape(x.shape)


def layout(x):
    """(array to read, transposed): an F-contiguous 2-d operand is read through its transpose."""
    if x.flags.c_contiguous:
        return x, False
    if x.flags.f_contiguous:
        return x.T, True
    return np.ascontiguousarray(x), False


def pair_with_stats(a, b, ca: Checker, cb: Checker, emin: int):
    """A (m x k) and B (k x n) as float64, checked, with the ideal models' statistics:
    (a64, b64, (sum a^2 per row, smallest exponent per row, the same per column of B, B's
    values in their narrowest carrier)).  An F-contiguous operand (a transposed view) is read
    in place: its transpose is C-contiguous and A's rows (B's columns) are its columns (rows),
    so the other kernel gives the same statistics and a float64 copy in the transposed layout,
    returned as its transpose (an F-ordered view that numpy's matmul takes as it is).
    Conversions go to per-thread scratch arrays, valid until the next call."""
    m, k = a.shape
    n = b.shape[1]
    xa, ta = layout(a)
    xb, tb = layout(b)
    nra, exa, nrb, exb = np.empty(m), np.empty(m, np.int64), np.empty(n), np.empty(n, np.int64)
    oa = scratch("a64", xa.shape)
    ob = scratch("b64", xb.shape)
    if k:
        ca.settle((prep_cols if ta else prep_rows)(xa, oa, ca.gp, emin, nra, exa))
        cb.settle((prep_rows if tb else prep_cols)(xb, ob, cb.gp, emin, nrb, exb))
    else:
        nra[:], exa[:], nrb[:], exb[:] = 0.0, NO_EXP, 0.0, NO_EXP
    return oa.T if ta else oa, ob.T if tb else ob, (nra, exa, nrb, exb, b)
