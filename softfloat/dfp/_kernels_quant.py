"""Numba kernels for DFP quantization, rounding right shifts and exact conversions to fp32.

Takes only arrays and integers (see softfloat/dfp/__init__.py for the semantics).  Work on flat
arrays runs on softfloat's one chunk driver (softfloat/_driver.py: ``record`` + ``launch``, fixed
chunks of CHUNK elements, on the calling thread up to SERIAL_MAX elements, in a ``prange`` loop
above); each chunk writes its own row of counts, so results and counts do not depend on the
thread count, and stochastic rounding draws the bits of element i from
``random_bits(key, base + i)`` (or ``random_bits(key, gidx[i])`` when a map of global indices is
given: a piece of a larger array).  The block maxima (block_absmax_kernel) work in tasks of
whole blocks instead, see there.

Quantization walks the tensor seen as (outer, L, inner) with the shared axis in the middle, in
RUNS of consecutive elements that share one exponent (inner == 1: a block along the axis) or one
row of exponents (inner > 1), so the per-element loops are plain contiguous loops that vectorise.
Two exact evaluators:

* float32 inputs (rbits <= 53): y = x * 2^-E in float64 is EXACT (a 24-bit significand scaled by
  a power of two that keeps it between 2^-272 and 2^15: no overflow, no subnormal), q = floor(y)
  is exact, and f = y - q is exact except when -2^-29 < y < 0 (then q = -1 and the exact f =
  1 + y lies in (1 - 2^-29, 1), its float64 rounding in [1 - 2^-29, 1]).  The deterministic
  modes only compare f with 1/2 and 0, which that rounding never changes.  Stochastic rounding
  needs floor(f * 2^r) exactly: it is computed as D = floor(y * 2^r) - q * 2^r, a difference of
  two exact float64 integers whose exact value is an integer in [0, 2^r), r <= 53, hence
  representable, hence computed exactly.
* otherwise (float64 inputs, rbits > 53): x = sig * 2^e taken apart from its float64 bits and
  rounded by the integer shift_round (softfloat/dfp/_intround.py), exact for every input.
Both end in the same decision table (_intround.decide / sr_up); tests/test_dfp_modes.py checks
that float32 inputs give the same bits through either.

Imports numpy, numba and softfloat (_driver, rng, _primitives, dfp._intround) only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._driver import CHUNK, INNER, record
from .._primitives import (F32_ABS, F64_ABS, F64_BIAS, F64_EXP_ALL_ONES, F64_FRAC,
                           F64_FRAC_BITS, F64_HIDDEN, F64_SIGN_SHIFT, U64_0, U64_1,
                           bit_length64, pow2)
from ..rng import random_bits
from ._intround import SR, decide, mode_bits, sar, shift_round, sr_up

#: The largest sr_bits the float32 evaluator handles exactly (D < 2^r must be a float64 integer).
FLOAT_SR_MAX_BITS = 53


@njit(cache=True)
def float_parts(v):
    """(sig, e) with v = sig * 2^e exactly, sig a signed int64 (|sig| < 2^53); v finite."""
    b = np.float64(v).view(np.uint64)
    neg = np.int64(b >> F64_SIGN_SHIFT)              # 1 for negative, else 0
    E = np.int64((b >> F64_FRAC_BITS) & F64_EXP_ALL_ONES)
    frac = b & F64_FRAC
    if E == 0:
        sig = np.int64(frac)
        e = np.int64(-1074)
    else:
        sig = np.int64(frac | F64_HIDDEN)
        e = E - 1075
    # branch-free conditional negation (the sign is random data): (sig ^ -neg) + neg
    return (sig ^ -neg) + neg, e


# ----- per-element roundings ----------------------------------------------------------------
@njit(cache=True)
def _round_y(y, mb):
    """Deterministic rounding of the exact float64 y = x / 2^E (float32 x; see module doc)."""
    q = np.floor(y)
    f = y - q
    qi = np.int64(q)
    return qi + decide(mb, qi, np.int64(f > 0.5), np.int64(f == 0.5), np.int64(f != 0.0))


@njit(cache=True)
def _round_y_sr(y, R, u, rbits):
    """Stochastic rounding of the exact y; R = 2.0^rbits (rbits <= 53, see module doc)."""
    q = np.floor(y)
    d = np.floor(y * R) - q * R                      # floor(f * 2^r), exact
    return np.int64(q) + sr_up(np.int64(d), u, rbits)


@njit(cache=True)
def _round_int(v, E, mode, u, rbits):
    """Any float64 v rounded to an integer at exponent E: round(v / 2^E), exact."""
    sig, e = float_parts(v)
    s = E - e
    if s <= 0:
        # |v| < 2^(E + P - 1) and |sig| >= 1 bound the left shift by P - 2: exact.
        return sig << (-s)
    return shift_round(sig, s, mode, u, rbits)


@njit(cache=True)
def _clip(i, v, pmax):
    """(clipped integer, saturated 0/1, underflowed 0/1): underflow = a nonzero v became 0."""
    c = min(max(i, -pmax), pmax)
    return c, np.int64(c != i), np.int64(c == 0) & np.int64(v != 0.0)


# ----- runs: consecutive elements sharing one exponent (vec=False) or one row of them ---------
# A run is x[f0:f0 + n]; its scales are sc[k0] (vec False) or sc[k0:k0 + n] (vec True).  The
# arrays are indexed with uint64 offsets rather than sliced: an unsigned index needs no
# negative-index wraparound (which would turn the loads into gathers), and a run of a few dozen
# elements (blocks of 32) costs less without the reference counting of slice views.

#: The three evaluators (the ``kind`` of a chunk function, see _walk):
#: FLOAT: float32 x, deterministic modes; FLOAT_SR: float32 x, stochastic rounding (rbits <=
#: FLOAT_SR_MAX_BITS); INT: any float x through the integer path, exponents es.
FLOAT, FLOAT_SR, INT = 0, 1, 2


@njit(cache=True, inline="always")
def _run(k, x, f0, n, es, sc, k0, vec, mb, gidx, out, kind):
    """Round the run x[f0:f0 + n] into out with the evaluator ``kind``; returns (saturated,
    underflowed).  kind and vec are constants of the call site (_walk), so each combination
    compiles to one plain loop with the others' branches folded away, and the run's one scale
    or exponent is read once.  Element i's random bits (FLOAT_SR, or INT in mode SR):
    random_bits(key, base + i) or, with a map, random_bits(key, gidx[i]); mb: the decision
    bits of a deterministic mode."""
    pmax = k.pmax
    R = pow2(k.rbits) if kind == FLOAT_SR else 1.0
    s = sc[k0]
    e0 = es[k0]
    sat = 0
    und = 0
    for j in range(n):
        i = np.uint64(f0 + j)
        v = np.float64(x[i])
        g = k.base + f0 + j if gidx is None else gidx[i]
        if kind == INT:
            u = random_bits(k.key, g) if k.mode == SR else U64_0
            r = _round_int(v, es[np.uint64(k0 + j)] if vec else e0, k.mode, u, k.rbits)
            y = v
        else:
            y = v * (sc[np.uint64(k0 + j)] if vec else s)
            if kind == FLOAT_SR:
                r = _round_y_sr(y, R, random_bits(k.key, g), k.rbits)
            else:
                r = _round_y(y, mb)
        c, a, b = _clip(r, y, pmax)
        out[i] = c
        sat += a
        und += b
    return sat, und


# ----- walking a chunk run by run --------------------------------------------------------------
@njit(cache=True)
def _run_start(lo, inner, L, N):
    """The walk's state at element lo: [f, o, col, t, b, cb] = element, slice, column along the
    shared axis, position along the inner axes, block, column inside the block."""
    o = lo // (L * inner)
    r = lo - o * L * inner
    col = r // inner
    t = r - col * inner
    b = col // N
    st = np.empty(6, dtype=np.int64)
    st[0] = lo
    st[1] = o
    st[2] = col
    st[3] = t
    st[4] = b
    st[5] = col - b * N
    return st


@njit(cache=True)
def _next_run(st, hi, inner, L, N, nb):
    """(f, n, k): the next run x[f:f + n] (n = 0: the chunk is done) and the exponent index k of
    its first element; steps the state without divisions (they cost more than a run of a few
    dozen elements).  Runs end at the end of a block (inner == 1) or of a row of the inner
    axes (inner > 1), or at hi."""
    f, o, col, t, b, cb = st[0], st[1], st[2], st[3], st[4], st[5]
    if f >= hi:
        return f, 0, 0
    k = (o * nb + b) * inner + t
    if inner > 1:
        end = min(f + inner - t, hi)
        step = 1                                     # one column per row of the inner axes
    else:
        end = min(f + min(N - cb, L - col), hi)
        step = end - f
    col += step
    cb += step
    if col == L:
        col = 0
        cb = 0
        b = 0
        o += 1
    elif cb == N:
        cb = 0
        b += 1
    st[0] = end
    st[1] = o
    st[2] = col
    st[3] = 0
    st[4] = b
    st[5] = cb
    return f, end - f, k


# ----- the quantization kernels on softfloat's chunk driver --------------------------------------
# Three evaluators, each with its own record class and chunk function (_walk with its kind),
# so that Numba compiles (on first use) only the one a call needs: a training step in RNE never
# builds the stochastic or the integer path.  The record: the layout (inner, L, N, nb: x is the
# flat C order of an (outer, L, inner) tensor with blocks of N along L, nb blocks), mode, key,
# base, rbits, pmax; the arguments: x, es, sc (the (outer, nb, inner) exponents and scales
# 2^-E, flattened), gidx (None or the map of global indices), out and counts (one row per
# chunk: saturated, underflowed).
@njit(cache=True, inline="always")
def _walk(k, lo, hi, c, x, es, sc, gidx, out, counts, kind):
    """Elements [lo, hi) run by run with the evaluator kind; counts[c] = (saturated,
    underflowed).  The runs are inlined here (two loops: vec True and False), which matters for
    runs as short as a block of 32."""
    mb = mode_bits(k.mode)
    st = _run_start(lo, k.inner, k.L, k.N)
    sat = 0
    und = 0
    while True:
        f, n, kk = _next_run(st, hi, k.inner, k.L, k.N, k.nb)
        if n == 0:
            break
        if k.inner > 1:
            a, u = _run(k, x, f, n, es, sc, kk, True, mb, gidx, out, kind)
        else:
            a, u = _run(k, x, f, n, es, sc, kk, False, mb, gidx, out, kind)
        sat += a
        und += u
    counts[c, 0] = sat
    counts[c, 1] = und


@njit(cache=True, **INNER)
def _chunk_float(k, lo, hi, c, x, es, sc, gidx, out, counts):
    _walk(k, lo, hi, c, x, es, sc, gidx, out, counts, FLOAT)


@njit(cache=True, **INNER)
def _chunk_float_sr(k, lo, hi, c, x, es, sc, gidx, out, counts):
    _walk(k, lo, hi, c, x, es, sc, gidx, out, counts, FLOAT_SR)


@njit(cache=True, **INNER)
def _chunk_int(k, lo, hi, c, x, es, sc, gidx, out, counts):
    _walk(k, lo, hi, c, x, es, sc, gidx, out, counts, INT)


# every field per call: the records' static parts are their tags alone (made once, below)
_QUANT_FIELDS = (("inner", np.int64), ("L", np.int64), ("N", np.int64), ("nb", np.int64),
                 ("mode", np.int64), ("key", np.uint64), ("base", np.int64), ("rbits", np.int64),
                 ("pmax", np.int64))
QuantFloat = record("QuantFloat", (), _chunk_float, __name__, dynamic=_QUANT_FIELDS)
QuantFloatSR = record("QuantFloatSR", (), _chunk_float_sr, __name__, dynamic=_QUANT_FIELDS)
QuantInt = record("QuantInt", (), _chunk_int, __name__, dynamic=_QUANT_FIELDS)

#: the record class of each evaluator
EVALUATORS = {"float": QuantFloat, "float_sr": QuantFloatSR, "int": QuantInt}
#: their static parts (softfloat._driver.launch's first argument)
EVALUATOR_STATIC = {kind: cls.params() for kind, cls in EVALUATORS.items()}


# ----- down-conversion shifts ------------------------------------------------------------------
@njit(cache=True, **INNER)
def _shift_chunk(k, lo, hi, c, x, shifts, out, counts):
    """out[f] = round(x[f] / 2^shifts[f]) clipped to [-pmax, pmax]; counts[c, 0] = saturated."""
    pmax, mode, key, rbits = k.pmax, k.mode, k.key, k.rbits
    sat = 0
    xs = x[lo:hi]
    ss = shifts[lo:hi]
    os_ = out[lo:hi]
    for j in range(hi - lo):
        u = random_bits(key, lo + j) if mode == SR else U64_0
        i = shift_round(np.int64(xs[j]), ss[j], mode, u, rbits)
        v = min(max(i, -pmax), pmax)
        sat += np.int64(v != i)
        os_[j] = v
    counts[c, 0] = sat


#: launch(SHIFT, (pmax, mode, key, rbits), n, x, shifts, out, counts)
Shift = record("Shift", (), _shift_chunk, __name__,
               dynamic=(("pmax", np.int64), ("mode", np.int64), ("key", np.uint64),
                        ("rbits", np.int64)))
SHIFT = Shift.params()


# ----- max |x| of a whole tensor, from the bit patterns ----------------------------------------
@njit(cache=True)
def _absmax_run(xb, lo, hi, absmask):
    """max of (pattern & absmask) over xb[lo:hi]: for IEEE patterns the magnitude bits order
    like |x| (Inf above every finite value, NaN above Inf), and an integer max vectorises."""
    m = xb[lo] & absmask
    xs = xb[lo:hi]
    for j in range(hi - lo):
        m = max(m, xs[j] & absmask)
    return m


@njit(cache=True, **INNER)
def _absmax_chunk(k, lo, hi, c, xb, part):
    part[c] = _absmax_run(xb, lo, hi, k.absmask)


#: launch(Absmax(absmask), n, xb, part): part[c] = max magnitude pattern of chunk c (xb: the
#: uint32/uint64 patterns, nonempty; part: one entry per chunk)
Absmax = record("Absmax", ("absmask",), _absmax_chunk, __name__)
#: Absmax's static parts for float32 and float64 patterns, by magnitude mask
ABSMAX = {int(F32_ABS): Absmax.params(F32_ABS), int(F64_ABS): Absmax.params(F64_ABS)}


@njit(cache=True)
def _block_absmax_one(xb, ob, L, inner, N, nb, absmask, out):
    """out[ob * inner:(ob + 1) * inner] = max magnitude patterns of block ob = o * nb + b."""
    o = ob // nb
    c0 = (ob - o * nb) * N
    rows = min(c0 + N, L) - c0
    start = (o * L + c0) * inner
    if inner == 1:
        out[ob] = _absmax_run(xb, start, start + rows, absmask)
        return
    acc = out[ob * inner:(ob + 1) * inner]
    first = xb[start:start + inner]
    for t in range(inner):
        acc[t] = first[t] & absmask
    for c in range(1, rows):
        row = xb[start + c * inner:start + (c + 1) * inner]
        for t in range(inner):
            acc[t] = max(acc[t], row[t] & absmask)


# Not on the chunk driver: the unit of work is a whole block, whose elements are strided when
# inner > 1 (a range of the flat index would cut blocks, and two tasks would then share an
# output), and the number of blocks per task follows the block size (G blocks of about CHUNK
# elements in all), where the driver's chunks are fixed ranges of the flat index.
@njit(parallel=True, cache=True)
def block_absmax_kernel(xb, L, inner, N, nb, absmask, out):
    """Max magnitude pattern of every block of an (outer, L, inner) tensor (blocks of N along
    L): out (outer * nb * inner) in C order of (outer, nb, inner).  Tasks of about CHUNK
    elements (G whole blocks), each writing its own part of out.  Needs L >= 1."""
    nob = out.size // inner
    G = max(1, CHUNK // (N * inner))
    for task in prange((nob + G - 1) // G):
        g0 = np.int64(task) * G
        for ob in range(g0, min(g0 + G, nob)):
            _block_absmax_one(xb, ob, L, inner, N, nb, absmask, out)


@njit(cache=True)
def block_absmax_serial(xb, L, inner, N, nb, absmask, out):
    for ob in range(out.size // inner):
        _block_absmax_one(xb, np.int64(ob), L, inner, N, nb, absmask, out)


# ----- exact conversions to fp32 -----------------------------------------------------------------
@njit(cache=True)
def int_times_pow2_to_f32(n, e):
    """fp32(n * 2^e) with ONE round-to-nearest-even, for an int64 n and any int e.

    |n| < 2^53: float64(n) is exact.  Otherwise n is first rounded to odd at 53 bits (truncate the
    magnitude, OR the sticky bit into the last place): a round-to-odd value with p + 2 = 26 or more
    bits rounds to the same fp32 as the exact value (Boldo & Melquiond), whatever the final
    precision (subnormal fp32 has fewer bits, which only widens the margin).  Then with
    1 <= |v| < 2^53 the scaling v * 2^e is exact in float64 for -1022 <= e <= 1023 (the product is
    a normal float64, or overflows to Inf, which fp32 would give too).  For e < -1022 the value is
    below 2^53 * 2^-1023 = 2^-970, far under half the smallest fp32 subnormal (2^-150): the RNE
    result is a zero with the sign of n.  The final float64 -> float32 conversion (cvtsd2ss, no
    fastmath) is the one IEEE RNE rounding.
    """
    if n == 0:
        return np.float32(0.0)
    neg = n < 0
    mag = np.uint64(-n) if neg else np.uint64(n)     # -(-2^63) wraps to -2^63 = 2^63 as uint64
    if mag >= np.uint64(1 << 53):
        k = bit_length64(mag) - 53                     # 1..11 bits to drop
        low = mag & ((U64_1 << np.uint64(k)) - U64_1)
        mag = (mag >> np.uint64(k)) | (U64_1 if low != U64_0 else U64_0)
        e = e + k
    if e < -1022:
        return np.float32(-0.0) if neg else np.float32(0.0)
    if e > F64_BIAS:
        e = F64_BIAS                                   # |v| >= 1: +-Inf in fp32 either way
    v = np.float64(mag) * pow2(e)                      # exact (or Inf)
    return np.float32(-v if neg else v)


@njit(cache=True, **INNER)
def _sum_to_f32_chunk(k, f0, f1, c, ia, ea, ib, eb, out):
    """out[f] = fp32(ia[f] * 2^ea[f] + ib[f] * 2^eb[f]) with one RNE rounding (|ints| <= 2^31).

    Let hi be the operand with the larger exponent, d the exponent difference (units 2^elo).
    d <= 31: the sum (hi << d) + lo is an exact int64 (|.| <= 2^62 + 2^31 < 2^63).
    d >= 32: count in units 2^(ehi - 30): hi is hi * 2^30 units and lo is lo / 2^(d - 30) units
    with |lo / 2^(d - 30)| <= 2^31 / 4 = 2^29, so the exact sum S has |S| >= 2^30 - 2^29 = 2^29
    units.  T = (hi << 30) + floor(lo / 2^(d - 30)) is an integer with T <= S < T + 1, S = T
    exactly when no bit of lo was dropped.  The fp32 quantum at |S| >= 2^29 units is at least
    2^(29 - 23) = 2^6 units (larger still for subnormal fp32 results), so every RNE decision
    point (representable values and midpoints) is an integer number of units, and the proxy
    T + 1/2 (when bits were dropped; exactly T otherwise) rounds like S.  In half-units the
    proxy is the integer 2T + sticky, |2T + 1| <= 2^62 + 2^30 + 1 < 2^63.
    """
    for f in range(f0, f1):                         # (lo, hi name the operands below)
        a = np.int64(ia[f])
        b = np.int64(ib[f])
        xa = np.int64(ea[f])
        xb = np.int64(eb[f])
        if a == 0:
            out[f] = int_times_pow2_to_f32(b, xb)
            continue
        if b == 0:
            out[f] = int_times_pow2_to_f32(a, xa)
            continue
        if xa >= xb:
            hi, ehi, lo, elo = a, xa, b, xb
        else:
            hi, ehi, lo, elo = b, xb, a, xa
        d = ehi - elo
        if d <= 31:
            out[f] = int_times_pow2_to_f32((hi << d) + lo, elo)
        else:
            sh = d - 30
            fl = sar(lo, sh)
            if sh >= 62:
                sticky = 1                   # lo != 0 lies wholly below the unit
            else:
                sticky = 1 if (lo - (fl << sh)) != 0 else 0
            out[f] = int_times_pow2_to_f32(2 * ((hi << 30) + fl) + sticky, ehi - 31)


#: launch(SumToF32(0), n, ia, ea, ib, eb, out): out[f] = fp32(ia[f] * 2^ea[f] + ib[f] * 2^eb[f])
#: (the record has no parameter: ``unused`` only gives it a field)
SumToF32 = record("SumToF32", (), _sum_to_f32_chunk, __name__)
SUM_TO_F32 = SumToF32.params()
