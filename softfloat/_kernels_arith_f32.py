"""Vectorised arithmetic kernels: add, sub, mul, div, sqrt, fma of float32 operand arrays into a
format carried in float32 (fp16, bf16, tf32, fp32, the fp8 formats, custom formats).  Same
results, bit for bit, and same flag counts as the scalar ops of softfloat._arith (which end in
round_value); tests/test_arith_fast.py compares them on every data class, mode and format.

Work is split into the fixed chunks of softfloat._kernels_round (CHUNK elements, one row of flag
counts each; stochastic rounding draws the bits of element i from (key, base + i)), processed
in a ``prange`` loop, or on the calling thread for arrays of at most rounding.SERIAL_MAX
elements; results never depend on the choice or on the thread count.  Each operation has its
own entry (``run`` picks it), so that Numba compiles an operation's loops at its first use.
Each chunk goes through:

Route A (deterministic modes, p <= 22: fp16, bf16, tf32, the fp8 formats).  One branch-free loop
computes RO24 of every exact result in float32 arithmetic (softfloat._arith_f32.lean32: twice
the SIMD lanes of float64) into a buffer, with a uint8 mark per element; the buffer is then
rounded by sf.round's own float32 kernel (softfloat._kernels_round_f32), which rounds RO24(x)
exactly as round_value rounds x (Boldo & Melquiond, p + 2 <= 24).  Marked elements carry +0 in
the buffer (rounded to +0, no flags) and are overwritten afterwards.
Route B (stochastic rounding, and p >= 23).  The same with RO53 in float64 (value64, exact for
every float32 operand) into a float64 buffer, rounded by ``_round_chunk64``: vectorised in the
normal range (normal64), round_value element by element elsewhere -- a stand-in for sf.round's
rounding of float64 input, which is element by element today.
Marked elements: NaN results (quiet NaN; INVALID in "none" formats), invalid operations and
x / 0 are written by one more branch-free loop (``_specials``), and what is left -- overflow of a
float32 intermediate, error terms float32 cannot hold (route A only) -- goes to the scalar op,
element by element.  kind_counts() reports how many of each.

The two calls into sf.round's kernels (``KF._chunk`` in _op_chunk, and _round_chunk64) are the
only places that know how sf.round rounds a chunk of float32 / float64 patterns.

Imports numpy, numba, softfloat's kernel modules and rounding.SERIAL_MAX only.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, prange

from . import _kernels_round_f32 as KF
from ._arith import (ADD, DIV, FMA, MUL, MUL_EXACT, SQRT, SUB, _divbyzero_result, add_scalar,
                     div_scalar, fma_scalar, mul_exact_scalar, sqrt_scalar, sub_scalar)
from ._arith_f32 import (DIV_BY_ZERO, INVALID_OP, NAN, OK, SCALAR, lean32, normal64,
                         normal64_consts, value64)
from ._kernels_round import CHUNK, add_flag_counts
from ._primitives import F32_QNAN, F32_SIGN, U64_0
from ._roundpack import RDN, SR, round_value
from .rng import random_bits
from .rounding import SERIAL_MAX

_SENT = np.uint32(0xFFFFFFFF)
_U32_0 = np.uint32(0)
#: kind_counts' extra column (see there).
ELEMENTWISE = 5


# error_model="numpy": float division by zero gives IEEE's Inf/NaN instead of raising, so the
# loops stay branch-free (the kinds deal with those elements).

# ----- route A: RO24 in float32, rounded by sf.round's float32 chunk kernel ---------------------
@njit(cache=True, error_model="numpy")
def _lean_a(op, xs, ys, zs, buf, marks, rdn):
    """buf[j] = RO24 pattern of element j's exact result (+0 where marked), marks[j] = its kind;
    returns whether any element is marked (a boolean: a 64-bit counter would halve the SIMD
    width of the loop)."""
    anymark = False
    for j in range(buf.size):
        v, kind = lean32(op, xs[j], ys[j], zs[j], rdn)
        ok = kind == OK
        buf[j] = v if ok else _U32_0
        marks[j] = kind
        anymark |= not ok
    return anymark


# ----- route B: RO53 in float64 ------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _lean_b(op, xs, ys, zs, vbuf, marks, rdn):
    """vbuf[j] = RO53 of element j's exact result (+0 where marked), marks[j] = its kind
    (never SCALAR: value64 is exact for every float32 operand); returns whether any element is
    marked."""
    anymark = False
    for j in range(vbuf.size):
        v, kind = value64(op, np.float64(xs[j]), np.float64(ys[j]), np.float64(zs[j]), rdn)
        ok = kind == OK
        vbuf[j] = v if ok else 0.0
        marks[j] = kind
        anymark |= not ok
    return anymark


@njit(cache=True)
def _normal_pass64(is_sr, vbuf, os, C, key, base):
    """os[j] = round_value(vbuf[j]) where normal64 applies, else _SENT; returns (count of
    _SENT, inexact count)."""
    nleft = 0
    ninexact = 0
    for j in range(vbuf.size):
        u = random_bits(key, base + j) if is_sr else U64_0
        pat, inexact, in_range = normal64(vbuf[j], C, is_sr, u)
        os[j] = pat if in_range else _SENT
        nleft += not in_range
        ninexact += in_range & inexact
    return nleft, ninexact


@njit(cache=True)
def _round_chunk64(vbuf, os, base, c, fp, mode, rbits, key, want_flags, counts):
    """os = carrier patterns of round_value(vbuf[j]) for the float64 values vbuf (with the random
    bits of element base + j), flags counted in row c: the rounding of float64 values that
    sf.round does element by element today, vectorised in the normal range (normal64) and
    round_value for the rest.  (When sf.round gets a vectorised float64 path, this becomes a
    call to it, as route A calls its float32 kernel.)"""
    C = normal64_consts(fp, mode, rbits)
    if mode == SR:
        nleft, ninexact = _normal_pass64(True, vbuf, os, C, key, base)
    else:
        nleft, ninexact = _normal_pass64(False, vbuf, os, C, key, base)
    if want_flags:
        counts[c, 0] += ninexact
    if nleft:
        for j in range(vbuf.size):
            if os[j] == _SENT:
                u = random_bits(key, base + j) if mode == SR else U64_0
                r, fl = round_value(vbuf[j], 0, fp, mode, u, rbits)
                os[j] = np.float32(r).view(np.uint32)
                if want_flags:
                    add_flag_counts(counts, c, fl)


# ----- marked elements -------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _specials(xs, ys, os, marks, nan_invalid, dbzp, dbzn, want_flags, counts, c):
    """Writes the marked NAN, INVALID_OP and DIV_BY_ZERO elements (softfloat._arith's
    _nan_result and _divbyzero_result, whose patterns dbzp/dbzn are passed in; the sign of
    x / 0 is the xor of the operands' signs) and counts their flags; SCALAR elements get the
    marker _SENT.  Returns the number of SCALAR elements."""
    nscalar = 0
    n_inv = 0
    n_dbz = 0
    for j in range(os.size):
        k = marks[j]
        neg = ((np.float32(xs[j]).view(np.uint32) ^ np.float32(ys[j]).view(np.uint32))
               & F32_SIGN) != _U32_0
        out = os[j]
        out = F32_QNAN if ((k == NAN) | (k == INVALID_OP)) else out
        out = (dbzn if neg else dbzp) if k == DIV_BY_ZERO else out
        out = _SENT if k == SCALAR else out
        os[j] = out
        nscalar += k == SCALAR
        n_inv += (k == INVALID_OP) | ((k == NAN) & nan_invalid)
        n_dbz += k == DIV_BY_ZERO
    if want_flags:
        counts[c, 3] += n_inv
        counts[c, 4] += n_dbz
    return nscalar


@njit(cache=True)
def _scalar_op(op, x, y, z, fp, mode, u, rbits):
    """The scalar op of softfloat._arith for op (float32 values: MUL's product is exact)."""
    if op == ADD:
        return add_scalar(x, y, fp, mode, u, rbits)
    if op == SUB:
        return sub_scalar(x, y, fp, mode, u, rbits)
    if op == MUL:
        return mul_exact_scalar(x, y, fp, mode, u, rbits)
    if op == DIV:
        return div_scalar(x, y, fp, mode, u, rbits)
    if op == SQRT:
        return sqrt_scalar(x, fp, mode, u, rbits)
    return fma_scalar(x, y, z, fp, mode, u, rbits)


@njit(cache=True)
def _scalar_fill(op, xs, ys, zs, os, marks, fp, mode, rbits, key, base, want_flags, counts, c):
    """The scalar op for every SCALAR element (same random bits as the vectorised loops)."""
    for j in range(os.size):
        if marks[j] != SCALAR:
            continue
        u = random_bits(key, base + j) if mode == SR else U64_0
        r, fl = _scalar_op(op, np.float64(xs[j]), np.float64(ys[j]), np.float64(zs[j]), fp,
                           mode, u, rbits)
        os[j] = np.float32(r).view(np.uint32)
        if want_flags:
            add_flag_counts(counts, c, fl)


@njit(cache=True, error_model="numpy")
def _op_chunk(op, xs, ys, zs, os, fp, mode, rbits, P, key, base, want_flags, counts, c):
    """One chunk of one operation (op a compile-time constant: each op has its own loops)."""
    n = os.size
    marks = np.empty(n, np.uint8)
    rdn = mode == RDN
    if mode != SR and fp.man_bits <= 21:
        buf = np.empty(n, np.uint32)
        nmark = 1 if _lean_a(op, xs, ys, zs, buf, marks, rdn) else 0
        # The one call into sf.round's float32 rounding (P: its fast_params for fp and mode).
        KF._chunk(buf, os, base, c, P, fp, key, want_flags, counts)
    else:
        vbuf = np.empty(n, np.float64)
        nmark = 1 if _lean_b(op, xs, ys, zs, vbuf, marks, rdn) else 0
        _round_chunk64(vbuf, os, base, c, fp, mode, rbits, key, want_flags, counts)
    if nmark:
        dbzp = np.float32(_divbyzero_result(False, fp)[0]).view(np.uint32)
        dbzn = np.float32(_divbyzero_result(True, fp)[0]).view(np.uint32)
        if _specials(xs, ys, os, marks, fp.inf_nan == 2, dbzp, dbzn, want_flags, counts, c):
            _scalar_fill(op, xs, ys, zs, os, marks, fp, mode, rbits, key, base, want_flags,
                         counts, c)


@njit(cache=True)
def _slices(a, sa, b, sb, cc, sc, ob, c):
    """Chunk c's operand and output slices (a step-0 operand is expanded) and its first index."""
    lo = c * CHUNK
    hi = min(ob.size, lo + CHUNK)
    xs = a[lo:hi] if sa == 1 else np.full(hi - lo, a[0])
    ys = b[lo:hi] if sb == 1 else np.full(hi - lo, b[0])
    zs = cc[lo:hi] if sc == 1 else np.full(hi - lo, cc[0])
    return xs, ys, zs, ob[lo:hi], lo


@njit(parallel=True, cache=True)
def _drive_parallel(op, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                    counts):
    """ob = patterns of round(a (op) b [, cc]) (float32 a, b, cc with steps sa, sb, sc in {0, 1};
    ob the output's uint32 view, made by the caller: views made inside a parallel function can
    lose their writes), counts[chunk, flag] the flag counts when want_flags; chunks in prange."""
    for c in prange((ob.size + CHUNK - 1) // CHUNK):
        ci = np.int64(c)
        xs, ys, zs, os, lo = _slices(a, sa, b, sb, cc, sc, ob, ci)
        _op_chunk(op, xs, ys, zs, os, fp, mode, rbits, P, key, base + lo, want_flags, counts,
                  ci)


@njit(cache=True)
def _drive_serial(op, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                  counts):
    """_drive_parallel on the calling thread (the same chunks: the same bits and counts)."""
    for c in range((ob.size + CHUNK - 1) // CHUNK):
        ci = np.int64(c)
        xs, ys, zs, os, lo = _slices(a, sa, b, sb, cc, sc, ob, ci)
        _op_chunk(op, xs, ys, zs, os, fp, mode, rbits, P, key, base + lo, want_flags, counts,
                  ci)


# One entry per operation, each passing its op code as a constant (spelled out: through *args
# Numba would type it as a plain int64, and every loop would test the op per element): Numba
# then compiles an operation's loops when it is first used, with the op's branches folded.
@njit(cache=True)
def _add(serial, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags, counts):
    if serial:
        _drive_serial(ADD, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                      counts)
    else:
        _drive_parallel(ADD, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P,
                        want_flags, counts)


@njit(cache=True)
def _sub(serial, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags, counts):
    if serial:
        _drive_serial(SUB, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                      counts)
    else:
        _drive_parallel(SUB, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P,
                        want_flags, counts)


@njit(cache=True)
def _mul(serial, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags, counts):
    if serial:
        _drive_serial(MUL, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                      counts)
    else:
        _drive_parallel(MUL, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P,
                        want_flags, counts)


@njit(cache=True)
def _div(serial, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags, counts):
    if serial:
        _drive_serial(DIV, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                      counts)
    else:
        _drive_parallel(DIV, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P,
                        want_flags, counts)


@njit(cache=True)
def _sqrt(serial, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags, counts):
    if serial:
        _drive_serial(SQRT, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                      counts)
    else:
        _drive_parallel(SQRT, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P,
                        want_flags, counts)


@njit(cache=True)
def _fma(serial, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags, counts):
    if serial:
        _drive_serial(FMA, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P, want_flags,
                      counts)
    else:
        _drive_parallel(FMA, a, sa, b, sb, cc, sc, ob, fp, mode, key, base, rbits, P,
                        want_flags, counts)


_ENTRY = {ADD: _add, SUB: _sub, MUL: _mul, MUL_EXACT: _mul, DIV: _div, SQRT: _sqrt, FMA: _fma}


# ----- Python entry ------------------------------------------------------------------------------
_NO_PARAMS = np.zeros(32, dtype=np.int64)


@functools.lru_cache(maxsize=256)
def _round_params(fmt, mode: int) -> np.ndarray:
    """sf.round's float32 parameters for route A (deterministic modes, m <= 21), cached."""
    if mode == SR or fmt.man_bits > 21:
        return _NO_PARAMS
    return KF.fast_params(fmt, mode, 1)


def run(op, a, sa, b, sb, c, sc, out, fmt, mode, key, base, rbits, want_flags, counts):
    """out = round(a (op) b [, c]) for float32 operand arrays and a float32 carrier ``out``
    (steps sa, sb, sc in {0, 1}); op one of softfloat._arith's codes (MUL_EXACT is MUL here:
    float32 products are exact).  Same results and flag counts as the scalar ops."""
    _ENTRY[op](out.size <= SERIAL_MAX, a, sa, b, sb, c, sc, out.view(np.uint32),
               fmt.kernel_params(), int(mode), key, base, rbits, _round_params(fmt, int(mode)),
               want_flags, counts)


@njit(cache=True, error_model="numpy")
def _kinds(op, route_a, a, b, c, fp, mode, counts):
    """counts[kind] += 1 for every element as the chunk loops classify it; counts[ELEMENTWISE]
    for route B's OK elements outside the normal range (round_value element by element)."""
    C = normal64_consts(fp, mode, 1)
    rdn = mode == RDN
    for j in range(a.size):
        if route_a:
            v, kind = lean32(op, a[j], b[j], c[j], rdn)
            counts[kind] += 1
        else:
            vv, kind = value64(op, np.float64(a[j]), np.float64(b[j]), np.float64(c[j]), rdn)
            counts[kind] += 1
            if kind == OK and not normal64(vv, C, False, U64_0)[2]:
                counts[ELEMENTWISE] += 1


_OPNAMES = {"add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "sqrt": SQRT, "fma": FMA}


def kind_counts(op, a, b, c, fmt, mode) -> np.ndarray:
    """How the vectorised passes treat the elements of op(a, b[, c]) (float32 arrays of one
    shape) in fmt and mode: counts indexed by the kinds OK, SCALAR (left to the scalar op),
    NAN, INVALID_OP, DIV_BY_ZERO (see softfloat._arith_f32), and ELEMENTWISE: how many of the OK
    ones route B rounds with round_value element by element (outside the normal range).  For
    the bench and the tests; in route A, sf.round's float32 kernel decides which of the OK
    elements it hands to round_value."""
    from ._validate import check_format, check_mode
    fmt = check_format(fmt)
    mode = int(check_mode(mode))
    counts = np.zeros(6, dtype=np.int64)
    a, b, c = (np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in (a, b, c))
    route_a = mode != SR and fmt.man_bits <= 21
    _kinds(_OPNAMES[op], route_a, a, b, c, fmt.kernel_params(), mode, counts)
    return counts
