"""Vectorised arithmetic kernels: add, sub, mul, div, sqrt, fma of float32 operand arrays into a
format carried in float32 (fp16, bf16, tf32, fp32, the fp8 formats, custom formats).  Same
results, bit for bit, and same flag counts as the scalar ops of softfloat._arith (which end in
round_value); tests/test_arith_fast.py compares them on every data class, mode and format.

The kernels run on the one chunked driver (softfloat._driver: fixed chunks, one row of flag
counts each, stochastic-rounding bits of element i from (key, base + i), one thread for small
arrays); results never depend on the thread count.  Each (operation, route) pair has its own
record class (ArithAddA, ArithAddB ... ArithFmaB) and chunk function, whose operation code and
route are compile-time constants, so that Numba compiles one pair's loops at its first use with
the other branches folded away.  Each chunk goes through two steps:

1. A branch-free loop computes a proxy of every exact result that rounds like it (Boldo &
   Melquiond's round-to-odd argument, softfloat._arith_f32) into a buffer, and whether any
   element of the chunk is marked:
   route A (deterministic modes, m <= 21: fp16, bf16, tf32, the fp8 formats): RO24, the float32
   pattern of the result rounded to odd at 24 bits, in float32 arithmetic (lean32: twice the SIMD
   lanes of float64), which rounds like x to p <= 22 bits;
   route B (stochastic rounding, and m >= 22): RO53 in float64 (value64, exact for every float32
   operand), whose first p + r bits are x's (the API enforces p + r + 2 <= 53).
2. sf.round's own vectorised kernel (softfloat._kernels_round_vec, 32-bit lanes for route A,
   64-bit lanes for route B) rounds the buffer: the arithmetic has no rounding code of its own.

The special elements go through the rounding too, as their special value (softfloat._arith_f32):
a NaN result (a NaN operand, an invalid operation) as the quiet NaN, which the rounding keeps in
every format as the scalar ops do; x / 0 (13% of sf.div's elements on gradient-like fp16 data,
whose flushed divisors are zeros) as the infinity of its sign, which the rounding keeps in the
ieee formats without saturation.  That settles them when flags are not counted.  The others are
marked: the proxy is the marker, the NaN pattern with every payload bit set in its lane width (no
other proxy takes it): every special element when flags are counted (an invalid operation's
INVALID and x / 0's DIVBYZERO are not the rounding's) and in a division into the other formats
(x / 0 there is not the rounding of an infinity), and on route A what float32 cannot settle
(overflow of an intermediate, error terms float32 cannot hold: rare on every data class); the
first two kinds are turned into the marker by ``_remark`` before the rounding.  In a
chunk that holds a marked element, ``_marked`` finds them (64 elements at a time), writes the
results of the first two kinds with their flags, and gives the rest, the SCALAR kind, to the
scalar op, which ends in round_value.

Until 2026-11-29 every special element was marked, by the proxy +0, which exact zero results
share, so that those were settled as well (a zero divisor's or factor's result, an Inf
divisor's).  Measured on Zen 4 (fp16, 4M elements, one thread, fresh processes, before ->
after): sf.div on gradient-like data 6.7-8.0 -> 4.6 ms, all-subnormal 5.8-6.1 -> 4.5-4.6,
overflow-heavy 6.3-6.4 -> 4.5, N(0,1) 3.8-3.9 -> 4.0; sf.add overflow-heavy 4.3-4.4 ->
3.9-4.0; the AVX2 code path: sf.div 8.2-8.3 -> 5.3, 6.6 -> 4.7-4.8 and 8.1-8.2 -> 5.3-5.4 on
those three.  The cost: N(0,1) data with 1% NaN/Inf, whose quiet NaNs now send every block of
the rounding to its later pass, took 4.5 -> 4.85-4.9 ms for sf.add and sf.mul on the AVX2 code
path (AVX-512: 4.1-4.3 -> 4.1-4.2).

Imports numpy, numba and softfloat's kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _kernels_round_vec as RV
from ._kernels_round_vec import out_of
from ._arith import ADD, DIV, FMA, MUL, SQRT, SUB, _divbyzero_result, scalar_op
from ._arith_f32 import (DIV_BY_ZERO, INVALID_OP, MARK32, NAN, OK, SCALAR, kind_of, lean32,
                         value64)
from ._driver import INNER, add_flag_counts, launch, record
from ._intrinsics import eq32, eq_mask64, popcount64, sel32
from ._lanes import vand, vcount, veq, vgt, vmerge
from ._primitives import F32_QNAN, F32_SIGN, U64_0, bit_length
from ._roundpack import DIVBYZERO, INVALID, RDN, SR, format_params_of
from .rng import random_bits

__all__ = ["run", "kind_counts", "OK", "SCALAR", "NAN", "INVALID_OP", "DIV_BY_ZERO"]

_U32_0 = np.uint32(0)
#: the rows of INVALID and DIVBYZERO in a chunk's flag counts (bit k of the flags is row k)
_INVALID_ROW = INVALID.bit_length() - 1
_DIVBYZERO_ROW = DIVBYZERO.bit_length() - 1


# error_model="numpy": float division by zero gives IEEE's Inf/NaN instead of raising, so the
# loops stay branch-free (the kinds deal with those elements).

# ----- the proxies --------------------------------------------------------------------------------
# The proxy loops write no per-element kind: a special element carries its special value or the
# marker (module docstring), and a chunk that holds a marker is settled afterwards (_marked).  A
# uint8 kind array written by these loops cost 35% of their time (fp16 values of N(0,1), one
# thread, AVX-512: sf.mul's loop 0.49 ns per element with it, 0.32 without; sf.add's 0.43 and
# 0.32).


@njit(cache=True, error_model="numpy")
def _lean_a(op, xs, ys, zs, buf, rdn):
    """buf[j] = RO24 pattern of element j's exact result, its special value, or MARK32 (route
    A's SCALAR kind, lean32's).  Returns whether any element is special (a boolean: a 64-bit
    counter would halve the SIMD width of the loop)."""
    anymark = False
    for j in range(buf.size):
        v, ok = lean32(op, xs[j], ys[j], zs[j], rdn)
        buf[j] = v
        anymark |= not ok
    return anymark


@njit(cache=True, error_model="numpy")
def _lean_b(op, xs, ys, zs, vbuf, rdn):
    """vbuf[j] = float64 pattern of RO53 of element j's exact result or its special value
    (value64 is exact for every float32 operand: no SCALAR kind); returns whether any element
    is special."""
    anymark = False
    for j in range(vbuf.size):
        v, ok = value64(op, np.float64(xs[j]), np.float64(ys[j]), np.float64(zs[j]), rdn)
        vbuf[j] = np.float64(v).view(np.uint64)
        anymark |= not ok
    return anymark


@njit(cache=True, error_model="numpy")
def _remark(op, xs, ys, buf, k):
    """Where every special element is to be marked (with flags; a division into a format whose
    x / 0 is not the rounding of an infinity): the special values in buf, of either lane width,
    become the marker (the lane's NaN with every payload bit set, k.abs_): every NaN (no OK
    proxy is one) and, in a division, an infinity of a finite dividend and a zero divisor.  A
    pass of its own over the chunks that hold a special element, in place of a second variant
    of the proxy loops (each cost the first call of an operation 1.5-1.7 s of compile time)."""
    for j in range(buf.size):
        p = buf[j]
        a = vand(p, k.abs_)
        special = vgt(a, k.inf)
        if op == DIV:
            special |= veq(a, k.inf) & (ys[j] == np.float32(0)) & np.isfinite(xs[j])
        buf[j] = vmerge(special, k.abs_, p, k.ones, k.lane0)


# ----- the rounding of the proxies: sf.round's vectorised kernel -------------------------------
# The record is rebuilt as the conversion's own RoundVec (same fields, same order), so that these
# functions are compiled once per lane width and shared by the six operations.

@njit(cache=True, **INNER)
def _round_a(kv, buf, os, base, c, counts):
    """Route A: the RO24 patterns buf rounded into os (deterministic modes only), passes 1
    to 2; returns whether they left elements marked (see _late)."""
    if kv.want_flags:
        return RV._any_left(RV._chunk_passes(kv, buf, os, base, counts, c, False, True))
    return RV._any_left(RV._chunk_passes(kv, buf, os, base, counts, c, False, False))


@njit(cache=True, **INNER)
def _round_b(kv, vbuf, os, base, c, counts):
    """Route B: the RO53 float64 patterns vbuf rounded into the float32 carrier patterns os,
    passes 1 to 2; returns whether they left elements marked (see _late)."""
    if kv.is_sr:
        if kv.want_flags:
            return RV._any_left(RV._chunk_passes(kv, vbuf, os, base, counts, c, True, True))
        return RV._any_left(RV._chunk_passes(kv, vbuf, os, base, counts, c, True, False))
    if kv.want_flags:
        return RV._any_left(RV._chunk_passes(kv, vbuf, os, base, counts, c, False, True))
    return RV._any_left(RV._chunk_passes(kv, vbuf, os, base, counts, c, False, False))


@njit(cache=True, error_model="numpy", inline="always")
def _scalar_at(op, xs, ys, zs, os, j, fp, mode, rbits, key, base, want_flags, counts, c):
    """os[j] = the scalar op's result for element j (softfloat._arith, ending in round_value;
    the random bits of its global index base + j, as the vectorised loops draw them), its
    flags counted in row c."""
    u = random_bits(key, base + j) if mode == SR else U64_0
    r, fl = scalar_op(op, np.float64(xs[j]), np.float64(ys[j]), np.float64(zs[j]), fp, mode, u,
                      rbits)
    os[j] = np.float32(r).view(np.uint32)
    if want_flags:
        add_flag_counts(counts, c, fl)


@njit(cache=True, error_model="numpy")
def _late(op, k, xs, ys, zs, os, base, counts, c):
    """The elements the rounding's passes 1 to 2 left marked (os holds the marker there; they
    counted no flag for them): the scalar op (softfloat._arith, ending in round_value, with the
    same random bits), in place of sf.round's passes 3 and 4, which the arithmetic does not
    compile (their cost: 9.7 s of the first sf.round's compile time, Zen 3).  Those passes serve
    float32 subnormals into e8m0 and stochastic rounding with 32 or more random bits far below
    a grid in 32-bit lanes: route A is deterministic and route B has 64-bit lanes, so this is
    not expected to run at all; it is here so that no element could stay unrounded."""
    fp = format_params_of(k)
    mark = RV.out_mark(os)
    for j in range(os.size):
        if os[j] == mark:
            _scalar_at(op, xs, ys, zs, os, j, fp, k.mode, k.rbits, k.key, base, k.want_flags,
                       counts, c)


# ----- marked elements -------------------------------------------------------------------------
# A chunk that holds a marked element goes through _marked, which scans it for the marker 64
# elements at a time and settles those elements: all at once by _settle (branch-free, every
# element of the chunk) where they are dense, else one at a time.  Settling writes the results
# whose float32 arithmetic decides them outright (NaN operands, invalid operations, x / 0) with
# their flags and leaves the rest (route A's SCALAR kind) to the scalar op: it costs about 15 ns
# an element, and x / 0 alone is 13% of the elements of sf.div on gradient-like fp16 data, whose
# flushed divisors are zeros (1M elements, one thread, AVX-512: 1.4 ms with the branch-free
# pass, 4.4 ms with the scalar op for all).

@njit(cache=True, error_model="numpy", inline="always")
def _special_kind(op, x, y, z):
    """(nan, nan_op, dbz) of a marked element (float32 operands): its exact result is a NaN, an
    operand is a NaN, it is x / 0 with x finite and nonzero (DIV_BY_ZERO).  A NaN result is
    exactly the kinds NAN and INVALID_OP of lean32 and value64 (their IEEE operations give a
    NaN just when these do).  Division and square root decide by comparisons."""
    nan_op = np.isnan(x) | np.isnan(y)
    if op == ADD or op == SUB:
        # Inf - Inf by comparisons: with the float32 sum in it, LLVM left _settle's loop scalar
        # on the AVX2 code path (0.95 ns an element; 0.15 with AVX-512)
        yy = -y if op == SUB else y
        return nan_op | (np.isinf(x) & (x == -yy)), nan_op, False
    elif op == MUL:
        r = x * y
    elif op == DIV:
        # 0 / 0 and Inf / Inf, by comparisons (a division here cost sf.div 5-15% on data with
        # marks)
        nan = nan_op | ((x == np.float32(0)) & (y == np.float32(0))) | (np.isinf(x) & np.isinf(y))
        return nan, nan_op, (y == np.float32(0)) & np.isfinite(x) & (x != np.float32(0))
    elif op == SQRT:
        # below -0 (-Inf included) or a NaN
        return np.isnan(x) | (x < np.float32(0)), np.isnan(x), False
    else:
        r64 = np.float64(x) * np.float64(y) + np.float64(z)
        r = np.float32(np.nan) if np.isnan(r64) else np.float32(0)
        nan_op = nan_op | np.isnan(z)
    return np.isnan(r), nan_op, False


@njit(cache=True, inline="always")
def _signs_differ(x, y):
    """Whether the float32 values x and y have different sign bits (x / y's sign, zeros
    included)."""
    return ((np.float32(x).view(np.uint32) ^ np.float32(y).view(np.uint32)) & F32_SIGN) != _U32_0


@njit(cache=True, error_model="numpy")
def _settle(op, xs, ys, zs, buf, os, mark, ones, nil, nan_invalid, dbzp, dbzn, want_flags,
            counts, c):
    """In a marked chunk (see _marked): every element whose proxy in buf is the marker gets its
    result if a NaN (the quiet NaN F32_QNAN, flag INVALID unless an operand is a NaN in a format
    that has one: softfloat._arith's _nan_result) or x / 0 (_divbyzero_result's dbzp or dbzn,
    by the xor of the operands' signs; flag DIVBYZERO).  Those proxies are then set to ``nil``
    (the buffer is not read again but by _marked), so that the marker remains only on the
    elements for the scalar op; returns whether there are any.  Branch-free; 32-bit counters.
    mark, ones, nil: the marker, all bits set and 0 in buf's lane type, from the kernel record
    (run-time values: the stores are vmerges with masks the compiler cannot see; with selects
    LLVM made both into masked stores, vpmaskmovd, slow on AMD Zen 3 (a loop storing that way
    took 0.76 ms per 1M elements against 0.25 with a plain store; sf.add on 1% NaN-Inf fp16
    data, one thread, took 3.6 ms against 1.8 on N(0,1) data))."""
    anyscalar = False
    n_inv = _U32_0
    n_dbz = _U32_0
    ones32 = out_of(ones, os)
    nil32 = out_of(nil, os)
    for j in range(buf.size):
        p = buf[j]
        m = p == mark
        x = xs[j]
        y = ys[j]
        nan, nan_op, dbz = _special_kind(op, x, y, zs[j])
        neg = _signs_differ(x, y)
        # (nan and dbz exclude each other)
        os[j] = vmerge(m & (nan | dbz), sel32(nan, F32_QNAN, sel32(neg, dbzn, dbzp)), os[j],
                       ones32, nil32)
        settled = nan | dbz
        buf[j] = vmerge(m & settled, nil, p, ones, nil)
        anyscalar |= m & (not settled)
        n_inv = vcount(n_inv, m & nan & ((not nan_op) | nan_invalid))
        n_dbz = vcount(n_dbz, m & dbz)
    if want_flags:
        counts[c, _INVALID_ROW] += np.int64(n_inv)
        counts[c, _DIVBYZERO_ROW] += np.int64(n_dbz)
    return anyscalar


#: Elements per block of the scan for marked proxies: one bit mask per block (eq_mask64).
_SCAN = 64


@njit(cache=True, error_model="numpy")
def _mark_mask(blk, mark):
    """Bit j set where blk[j] (j < 64) is the marker (a chunk's last, short block)."""
    m = U64_0
    for j in range(blk.size):
        m |= np.uint64(blk[j] == mark) << np.uint64(j)
    return m


@njit(cache=True, error_model="numpy")
def _mark_masks(buf, mark, masks):
    """masks[b] = the bit mask of the marked proxies of block b of buf (_SCAN elements; the last
    may be short); returns how many there are in all."""
    n = buf.size
    nfull = n // _SCAN
    total = U64_0
    for b in range(nfull):
        m = eq_mask64(buf, b * _SCAN, mark)
        masks[b] = m
        total += popcount64(m)
    if nfull < masks.size:
        m = _mark_mask(buf[nfull * _SCAN:], mark)
        masks[nfull] = m
        total += popcount64(m)
    return total


@njit(cache=True, inline="always")
def _divbyzero_pattern(neg, fp):
    """The float32 pattern of softfloat._arith's x / 0 result of sign neg."""
    return np.float32(_divbyzero_result(neg, fp)[0]).view(np.uint32)


#: A marked chunk with at least one marked proxy in _DENSE elements is settled by _settle
#: (branch-free, every element); below it each marked element is settled on its own.  Zen 3, one
#: thread, 256K fp16 elements: _settle costs about 1 ns an element, the settling of one element
#: on its own about 20 ns (a few branches, mispredicted at random).  (Deciding per 64-element
#: block instead made sf.div on gradient-like data 36% slower: a call of _settle per block.)
_DENSE = 16


@njit(cache=True, error_model="numpy")
def _marked(op, xs, ys, zs, buf, os, fp, mode, rbits, key, base, want_flags, counts, c, mark,
            ones, nil):
    """Every element of a chunk whose proxy in buf is the marker is settled: where they are
    dense (one in _DENSE elements or more) by _settle, all at once, branch-free; otherwise
    each on its own, by the same rules (_special_kind: a NaN result, x / 0), found from one
    bit mask per 64 elements (_SCAN; one pass makes them all and counts their bits).  What
    remains, route A's SCALAR kind, goes to the scalar op (softfloat._arith, ending in
    round_value; same random bits as the vectorised loops), whose result and flags replace the
    rounding's.  The rounding rounded the marker too, a NaN: its result is overwritten here,
    and its one flag, INVALID in an inf_nan="none" format (counted only with flags), is taken
    back.  (_settle over every element of a marked chunk was the only way before; on N(0,1)
    data with 1% NaN/Inf sprinkled every chunk holds a mark, 1.3% of sf.add's elements: Zen 3,
    one thread, 256K fp16 elements, in one process, sf.add 2.30 -> 2.07 ns an element, 1.29
    without the NaN/Inf; sf.div 2.84 -> 2.46.)"""
    nan_invalid = fp.inf_nan == 2
    dbzp = _divbyzero_pattern(False, fp)
    dbzn = _divbyzero_pattern(True, fp)
    masks = np.empty((buf.size + _SCAN - 1) // _SCAN, np.uint64)
    total = np.int64(_mark_masks(buf, mark, masks))
    if want_flags and nan_invalid:
        counts[c, _INVALID_ROW] -= total
    each = total * _DENSE < buf.size
    if not each:
        if not _settle(op, xs, ys, zs, buf, os, mark, ones, nil, nan_invalid, dbzp, dbzn,
                       want_flags, counts, c):
            return
        _mark_masks(buf, mark, masks)             # what _settle left: the SCALAR kind
    n_inv = 0
    n_dbz = 0
    for b in range(masks.size):
        m = masks[b]
        while m != U64_0:
            low = m & (~m + np.uint64(1))
            m ^= low
            j = b * _SCAN + bit_length(low) - 1        # exact for any power of two
            x = xs[j]
            y = ys[j]
            if each:
                nan, nan_op, dbz = _special_kind(op, x, y, zs[j])
                if nan:
                    os[j] = F32_QNAN
                    n_inv += (not nan_op) | nan_invalid
                    continue
                if dbz:
                    os[j] = dbzn if _signs_differ(x, y) else dbzp
                    n_dbz += 1
                    continue
            _scalar_at(op, xs, ys, zs, os, j, fp, mode, rbits, key, base, want_flags, counts, c)
    if want_flags:
        counts[c, _INVALID_ROW] += n_inv
        counts[c, _DIVBYZERO_ROW] += n_dbz


@njit(cache=True, error_model="numpy", inline="always")
def _settle_marked(op, k, xs, ys, zs, buf, os, base, counts, c):
    """A chunk holding a marked element, after its rounding: _marked (buf: the proxies, of
    either route, in the lane type of the record k; the marker is its NaN with every payload
    bit set, k.abs_, as _remark writes it)."""
    _marked(op, xs, ys, zs, buf, os, format_params_of(k), k.mode, k.rbits, k.key, base,
            k.want_flags, counts, c, k.abs_, k.ones, k.lane0)


@njit(cache=True, error_model="numpy", inline="always")
def _op_chunk(op, route_a, k, lo, hi, c, a, sa, b, sb, cc, sc, ob, counts):
    """Elements [lo, hi) of one operation; op and route_a are constants (each (operation,
    route) pair has its own loops, the other branches pruned); a step-0 operand is expanded."""
    n = hi - lo
    xs = a[lo:hi] if sa == 1 else np.full(n, a[0])
    ys = b[lo:hi] if sb == 1 else np.full(n, b[0])
    zs = cc[lo:hi] if sc == 1 else np.full(n, cc[0])
    os = ob[lo:hi]
    base = k.base + lo
    # steps 1 and 2 (route_a is a literal: Numba prunes the other branch before typing, so buf
    # has one type, uint32 patterns on route A and uint64 float64 values on route B)
    # every special element is marked when flags are counted, and in a division into a format
    # whose x / 0 is not the rounding of an infinity (not ieee, or saturating)
    mark = k.want_flags | ((op == DIV) & ((k.inf_nan != 0) | (k.saturate != 0)))
    rdn = k.mode == RDN
    if route_a:
        buf = np.empty(n, np.uint32)
        anymark = _lean_a(op, xs, ys, zs, buf, rdn)
    else:
        # value64 is exact for every float32 operand (no SCALAR kind): _settle settles every
        # marked element here
        buf = np.empty(n, np.uint64)
        anymark = _lean_b(op, xs, ys, zs, buf, rdn)
    kv = RV.RoundVec(*k)
    if anymark and mark:
        _remark(op, xs, ys, buf, kv)
    if route_a:
        late = _round_a(kv, buf, os, base, c, counts)
    else:
        late = _round_b(kv, buf, os, base, c, counts)
    if late:
        _late(op, k, xs, ys, zs, os, base, counts, c)
    if anymark:
        _settle_marked(op, k, xs, ys, zs, buf, os, base, counts, c)


# One record class per (operation, route), each with its own chunk function: a closure whose
# constants op and route_a reach _op_chunk (inlined into it: Numba IR inlining, no compiled
# unit of its own) as literals, so that Numba compiles one set of loops per pair with the other
# branches pruned.  The closures hold plain ints and booleans only: Numba keys a cached closure
# by the pickled values of its cells, which are the same in every process for these (a
# dispatcher in a cell would not be).  One compiled unit between the driver and the loops
# (_lean_a / _lean_b, _round_a / _round_b, _settle, _marked): Numba links a called
# function's whole module into its caller and optimises and generates code for it again, so
# every level of wrappers there cost as much compile time as the rounding passes below it.

def _arith_record(name, op, route_a):
    def chunk(k, lo, hi, c, a, sa, b, sb, cc, sc, ob, counts):
        _op_chunk(op, route_a, k, lo, hi, c, a, sa, b, sb, cc, sc, ob, counts)
    chunk.__name__ = chunk.__qualname__ = f"_{name}_chunk"
    return record(name, RV.RoundVec.static_fields,
                  njit(cache=True, error_model="numpy", **INNER)(chunk), __name__,
                  dynamic=zip(("key", "base", "want_flags"), RV.RoundVec.dynamic_types))


# The record class of each (operation, route): ArithAddA, ArithAddB, ... ArithFmaB, each bound
# to its module-level name here (Numba's cache refers to a record class by module and name).
_RECORDS = {}
for _name, _op in (("ArithAdd", ADD), ("ArithSub", SUB), ("ArithMul", MUL), ("ArithDiv", DIV),
                   ("ArithSqrt", SQRT), ("ArithFma", FMA)):
    for _route, _suffix in ((True, "A"), (False, "B")):
        _RECORDS[_op, _route] = globals()[_name + _suffix] = _arith_record(_name + _suffix, _op,
                                                                           _route)


# ----- Python entry ------------------------------------------------------------------------------
def route_a(fmt, mode) -> bool:
    """Whether the RO24 float32 proxy serves (deterministic modes, p <= 22)."""
    return int(mode) != SR and fmt.man_bits <= 21


def run(op, a, sa, b, sb, c, sc, out, fmt, mode, key, base, rbits, want_flags, counts):
    """out = round(a (op) b [, c]) for float32 operand arrays and a float32 carrier ``out``
    (steps sa, sb, sc in {0, 1}); op one of ADD, SUB, MUL, DIV, SQRT, FMA (float32 products are
    exact).  Same results and flag counts as the scalar ops."""
    ra = route_a(fmt, mode)
    launch(RV.vec_static(_RECORDS[op, ra], fmt, int(mode), int(rbits),
                         np.uint32 if ra else np.uint64),
           (np.uint64(key), int(base), bool(want_flags)),
           out.size, a, sa, b, sb, c, sc, out.view(np.uint32), counts)


@njit(cache=True, error_model="numpy")
def _kinds(op, route_a, a, b, c, mode, counts):
    """counts[kind] += 1 for every element as the proxy functions classify it."""
    rdn = mode == RDN
    for j in range(a.size):
        if route_a:
            v, ok = lean32(op, a[j], b[j], c[j], rdn)
            kind = kind_of(op, ok, eq32(v, F32_QNAN), eq32(v, MARK32), a[j], b[j], c[j])
        else:
            w, ok = value64(op, np.float64(a[j]), np.float64(b[j]), np.float64(c[j]), rdn)
            kind = kind_of(op, ok, np.isnan(w), False, a[j], b[j], c[j])
        counts[kind] += 1


_OPNAMES = {"add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "sqrt": SQRT, "fma": FMA}


def kind_counts(op, a, b, c, fmt, mode) -> np.ndarray:
    """How the vectorised passes treat the elements of op(a, b[, c]) (float32 arrays of one
    shape) in fmt and mode: counts indexed by the kinds OK, SCALAR (left to the scalar op),
    NAN, INVALID_OP, DIV_BY_ZERO (see softfloat._arith_f32).  For the bench and the tests; the
    OK elements are rounded by sf.round's vectorised kernel, whose round_value share is its own
    (none outside stochastic rounding far below a format's grid)."""
    from ._validate import check_format, check_mode
    fmt = check_format(fmt)
    mode = int(check_mode(mode))
    counts = np.zeros(5, dtype=np.int64)
    a, b, c = (np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in (a, b, c))
    _kinds(_OPNAMES[op], route_a(fmt, mode), a, b, c, mode, counts)
    return counts
