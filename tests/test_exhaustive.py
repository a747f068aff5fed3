"""Exhaustive conversion checks.

* Every one of the 2^32 float32 inputs rounded to fp16 and to bf16 (the bf16 test is in
  tests/test_exhaustive_bf16.py) in the six deterministic modes by ``softfloat.round`` equals an independent checker written here (float64 arithmetic:
  scaling by exact powers of two, floor, comparisons; no bit manipulation, unlike the integer
  round-pack of the kernels), including the per-chunk IEEE flag counts.  The checker itself is
  cross-checked against tests/oracle.py (exact rationals) on a sample.  RNE also equals numpy's
  float16 and ml_dtypes' bfloat16 casts.  The same call without flags= (which takes the
  kernel's other passes) gives the same patterns in every mode, stochastic rounding included.
* Every bit pattern of fp16, bf16, e4m3fn, e5m2 (and every 8-bit pattern of some variants)
  decodes like the oracle and round-trips through from_bits -> to_bits (NaNs with sign and payload).
* Every fp8 pattern decodes like ml_dtypes.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from numba import literal_unroll, literally, njit

import oracle
import softfloat as sf

RNE, RNA, RTZ, RUP, RDN, RTO = range(6)
MODE_NAMES = ("rne", "rna", "rtz", "rup", "rdn", "rto")
INEXACT, UNDERFLOW, OVERFLOW, INVALID = 1, 2, 4, 8
FLAG_NAMES = ("inexact", "underflow", "overflow", "invalid")

# Exact powers of two 2^k for k in [-1100, 1100) as float64 (0.0 / inf outside float64's range:
# never used there), computed by Python's exact float power.
_P2_OFF = 1100
_P2 = np.array([math.ldexp(1.0, k) if -1074 <= k <= 1023 else (0.0 if k < 0 else math.inf)
                for k in range(-_P2_OFF, _P2_OFF)])


@njit(cache=True)
def _round_q(a, qe, mode, neg, p2):
    """|value| a > 0 rounded to a multiple of 2^qe, in float64 arithmetic (all exact)."""
    s = a * p2[_P2_OFF - qe]             # a / 2^qe: fewer than 53 bits, exact
    n = np.floor(s)
    f = s - n                            # exact: s and n share the binade's quantum
    if f == 0.0:
        return a
    odd = n - 2.0 * np.floor(n * 0.5) == 1.0     # n is an integer below 2^53: exact
    up = 0.0
    if mode == RNE:
        if f > 0.5 or (f == 0.5 and odd):
            up = 1.0
    elif mode == RNA:
        if f >= 0.5:
            up = 1.0
    elif mode == RUP:
        if not neg:
            up = 1.0
    elif mode == RDN:
        if neg:
            up = 1.0
    elif mode == RTO:
        if not odd:
            up = 1.0                     # truncated to even: the odd neighbour is n + 1
    return (n + up) * p2[_P2_OFF + qe]


@njit(cache=True)
def expected(x, mode, m, emin, maxval, subn, infnan, sat, p2):
    """(result float64, flags) of rounding the float x; semantics of _roundpack's docstring."""
    if x != x:
        return np.nan, (INVALID if infnan == 2 else 0)
    neg = math.copysign(1.0, x) < 0.0
    a = abs(x)
    if a == 0.0:
        return x, 0
    if a == math.inf:
        # exact, not an overflow: kept (ieee), +-max (saturating, "none"), NaN (fn)
        if infnan == 0 and sat == 0:
            return x, 0
        if sat != 0 or infnan == 2:
            return (-maxval if neg else maxval), INVALID
        return np.nan, INVALID
    e = math.frexp(a)[1] - 1             # floor(log2 a)
    ru = _round_q(a, e - m, mode, neg, p2)
    ovf = ru > maxval
    if ovf:
        if sat != 0 or infnan == 2:
            r = maxval
        elif mode == RNE or mode == RNA or (mode == RUP and not neg) or (mode == RDN and neg):
            r = math.inf if infnan == 0 else np.nan
        else:
            r = maxval
        return (-r if neg else r), OVERFLOW | INEXACT
    tiny = ru < p2[_P2_OFF + emin]
    if subn == 0:
        if tiny:
            return (-0.0 if neg else 0.0), UNDERFLOW | INEXACT
        r = ru
    else:
        r = _round_q(a, max(e, emin) - m, mode, neg, p2)
    fl = 0
    if r != a:
        fl = INEXACT | (UNDERFLOW if tiny else 0)
    return (-r if neg else r), fl


# The checkers run on all cores through threads calling nogil Numba functions on slices of
# the block (cheaper to compile than parallel=True, which this test file does not need).
_THREADS = os.cpu_count() or 2
_POOL = ThreadPoolExecutor(max_workers=_THREADS)


def _ranges(n):
    step = -(-n // (4 * _THREADS))
    return [(lo, min(n, lo + step)) for lo in range(0, n, step)]


@njit(nogil=True, cache=True)
def _check_range(x, got, lo, hi, m, emin, maxval, subn, infnan, sat, p2):
    bad = np.zeros(6, np.int64)
    first = np.full(6, -1, np.int64)
    fl = np.zeros((6, 4), np.int64)
    for i in range(lo, hi):
        xi = np.float64(x[i])
        for k in range(6):
            r, f = expected(xi, k, m, emin, maxval, subn, infnan, sat, p2)
            g = np.float64(got[k, i])
            same = (r != r and g != g) or (
                r == g and math.copysign(1.0, r) == math.copysign(1.0, g))
            if not same:
                bad[k] += 1
                if first[k] < 0:
                    first[k] = i
            for j in range(4):
                if f & (1 << j):
                    fl[k, j] += 1
    return bad, first, fl


def check_chunk(x, got, m, emin, maxval, subn, infnan, sat, p2):
    """Compare got[k] (float32 results of mode k = 0..5) with the checker for every x.

    Returns (mismatches per mode, first mismatching index per mode or -1, flag counts [mode, 4]).
    """
    parts = [f.result() for f in [_POOL.submit(_check_range, x, got, lo, hi, m, emin, maxval,
                                               subn, infnan, sat, p2)
                                  for lo, hi in _ranges(x.size)]]
    bad = sum(p[0] for p in parts)
    fl = sum(p[2] for p in parts)
    first = np.full(6, -1, np.int64)
    for p in reversed(parts):                      # keep the earliest mismatch per mode
        first = np.where(p[1] >= 0, p[1], first)
    return bad, first, fl


@njit(cache=True, inline="always")
def _round_up(k, f, odd, pos, neg):
    """Mode k's round-up decision for a scaled magnitude with fraction f in [0, 1) and an odd
    (odd) or even floor; pos / neg: the input's sign."""
    if k == 0:                                   # RNE
        return (f > 0.5) | ((f == 0.5) & odd)
    if k == 1:                                   # RNA
        return f >= 0.5
    if k == 2:                                   # RTZ
        return f < 0.0
    if k == 3:                                   # RUP
        return (f > 0.0) & pos
    if k == 4:                                   # RDN
        return (f > 0.0) & neg
    return (f > 0.0) & (not odd)                 # RTO: truncated to even -> the odd neighbour


@njit(nogil=True, cache=True)
def _mode_block(x, g, ovr, k, inv_qu, pu, inv_qg, pg, neg, maxval, tiny, subn):
    """(mismatches, inexact, underflow, overflow) of mode k (a literal: one compiled loop per
    mode) over x, whose results are the uint32 patterns g: the magnitude rounded on the
    unbounded quantum pu (for overflow and tininess) and on the grid's quantum pg (the result).
    Counters are uint32 (x has fewer than 2^32 elements).  k is made a literal
    (numba.literally), so that each mode's loop is compiled with its decision alone, which LLVM
    vectorises: the six modes in one loop, int64 counters, stayed scalar (33-38 ms per 2^22
    inputs on one Zen 4 core), and so did one loop per mode with k a run-time value; 20-23 ms
    now (2026-11-29)."""
    literally(k)
    sgn = -1.0 if neg else 1.0
    pos = not neg
    s0 = s1 = s2 = s3 = np.uint32(0)
    for i in range(x.size):
        a = abs(np.float64(x[i]))
        su = a * inv_qu
        nu = np.floor(su)
        fu = su - nu                             # exact: su and nu share the binade's quantum
        oddu = nu - 2.0 * np.floor(nu * 0.5) == 1.0
        sg = a * inv_qg
        ng = np.floor(sg)
        fg = sg - ng
        oddg = ng - 2.0 * np.floor(ng * 0.5) == 1.0
        ru = (nu + np.float64(_round_up(k, fu, oddu, pos, neg))) * pu
        rg = (ng + np.float64(_round_up(k, fg, oddg, pos, neg))) * pg
        ovf = ru > maxval
        is_tiny = ru < tiny
        r = rg if subn else (0.0 if is_tiny else ru)
        inexact = r != a
        want = ovr if ovf else np.float32(sgn * r).view(np.uint32)
        s0 += np.uint32(g[i] != want)
        s1 += np.uint32(ovf | inexact)
        s2 += np.uint32((not ovf) & inexact & is_tiny)
        s3 += np.uint32(ovf)
    return s0, s1, s2, s3


@njit(nogil=True, cache=True)
def _binade_block(x, g0, g1, g2, g3, g4, g5, o0, o1, o2, o3, o4, o5, lo, hi,
                  inv_qu, pu, inv_qg, pg, neg, maxval, tiny, subn):
    """Mismatch and flag counts [mode, 4] of x[lo:hi] (see _mode_block), modes rne, rna, rtz,
    rup, rdn, rto from g0..g5 and their overflow results o0..o5.  (Running the six loops piece
    by piece over cache-resident parts of x measured no faster: the loops are compute-bound,
    about 1 ns per element and mode on one Zen 4 core.)"""
    t = np.zeros((6, 4), np.int64)
    xs = x[lo:hi]
    gs = (g0, g1, g2, g3, g4, g5)
    ovs = (o0, o1, o2, o3, o4, o5)
    for k in literal_unroll((0, 1, 2, 3, 4, 5)):          # k a literal in each copy
        c = _mode_block(xs, gs[k][lo:hi], ovs[k], k, inv_qu, pu, inv_qg, pg, neg, maxval,
                        tiny, subn)
        for j in range(4):
            t[k, j] += np.int64(c[j])
    return t


def check_binade(x, g0, g1, g2, g3, g4, g5, e, neg, ovres, m, emin, maxval, subn, p2):
    """The same checks as check_chunk, faster, for x all in one binade [2^e, 2^(e+1)) with one
    sign (every aligned block of 2^22 float32 patterns with exponent field 1..254 is such): the
    quanta are then constants and the six modes are written out: the loop vectorises.
    g0..g5: the uint32 patterns of the results in modes rne, rna, rtz, rup, rdn, rto;
    ovres[k]: the float32 pattern of mode k's overflow result for this sign.  Returns
    (mismatches per mode, flag counts [mode, 3]: inexact, underflow, overflow); locate a
    mismatch with check_chunk."""
    qu = e - m                                    # p-bit quantum, unbounded exponent
    qg = max(e, emin) - m if subn else qu         # the grid's quantum
    args = (x, g0, g1, g2, g3, g4, g5, *(np.uint32(o) for o in ovres))
    quanta = (p2[_P2_OFF - qu], p2[_P2_OFF + qu], p2[_P2_OFF - qg], p2[_P2_OFF + qg])
    tot = sum(f.result() for f in [
        _POOL.submit(_binade_block, *args, lo, hi, *quanta, neg, maxval, p2[_P2_OFF + emin],
                     subn)
        for lo, hi in _ranges(x.size)])
    return tot[:, 0].copy(), tot[:, 1:].copy()


def _kargs(fmt):
    return (fmt.man_bits, fmt.emin, float(fmt.max), int(fmt.subnormals), fmt.inf_nan_code,
            int(fmt.saturate))


# ----- the checker against the exact oracle --------------------------------------------------

def _sample_inputs(fmt, n=3000, seed=0):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    x = list(bits.view(np.float32))
    # the binades around the subnormal boundary, overflow, and the exact halfway points
    t, mx = fmt.tiny, fmt.max
    for v in (t, mx, fmt.smallest_subnormal):
        for k in range(-3, 4):
            x.append(np.float32(v) + np.float32(k) * np.float32(fmt.smallest_subnormal) / 4)
    x += [np.float32(mx * (1 + 2.0 ** -(fmt.man_bits + 1))), np.float32(t * (1 - 2.0 ** -12)),
          np.float32(0.0), np.float32(-0.0), np.float32(np.inf), np.float32(-np.inf)]
    x = np.array(x, dtype=np.float32)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("fname", ["fp16", "bf16", "e4m3fn", "e5m2"])
def test_checker_agrees_with_oracle(fname):
    base = sf.get_format(fname)
    for fmt in (base, sf.Format(fname + "_ftz", base.exp_bits, base.man_bits, subnormals=False,
                                inf_nan=base.inf_nan),
                sf.Format(fname + "_sat", base.exp_bits, base.man_bits, saturate=True,
                          inf_nan=base.inf_nan)):
        x = _sample_inputs(fmt)
        for k, mode in enumerate(MODE_NAMES):
            for xi in x:
                r, f = expected(float(xi), k, *_kargs(fmt), _P2)
                ro, fo = oracle.round_float(float(xi), fmt, mode)
                assert (math.isnan(r) and math.isnan(ro)) or (
                    r == ro and math.copysign(1, r) == math.copysign(1, ro)), (fmt, mode, xi)
                assert {FLAG_NAMES[j] for j in range(4) if f >> j & 1} == fo, (fmt, mode, xi)


def test_checker_finds_a_wrong_result():
    # The comparison must be able to fail: corrupt one result and one sign of zero.
    x = np.array([1.0 + 2.0 ** -11, 0.0, 70000.0], dtype=np.float32)
    fmt = sf.get_format("fp16")
    got = np.stack([sf.round(x, fmt, mode) for mode in MODE_NAMES])
    bad, first, _ = check_chunk(x, got, *_kargs(fmt), _P2)
    assert bad.sum() == 0
    got[0, 0] = np.float32(1.0 + 2.0 ** -10)
    got[2, 1] = np.float32(-0.0)
    bad, first, _ = check_chunk(x, got, *_kargs(fmt), _P2)
    assert list(bad) == [1, 0, 1, 0, 0, 0] and first[0] == 0 and first[2] == 1


# ----- all 2^32 float32 inputs ----------------------------------------------------------------

def test_bit_comparisons_find_differences():
    """The comparisons of the 2^32 checks (mismatches, _same_bits) see a sign of zero, a NaN
    of another sign, a NaN against a number (NaN for NaN only where asked), and fail."""
    a = np.array([1.0, -0.0, np.nan, 2.0, 3.0], np.float32)
    b = a.copy()
    assert mismatches(a, b) == 0 and mismatches(a, b, nan_same=True) == 0
    _same_bits(a, b, "fp16", "rne", 0)
    b[1] = 0.0
    b[2] = -np.nan
    b[3] = np.nan
    assert mismatches(a, b) == 3                        # +0, the NaN's sign, NaN for 2.0
    assert mismatches(a, b, nan_same=True) == 2         # the NaN's sign does not count
    with pytest.raises(AssertionError):
        _same_bits(a, b, "fp16", "rne", 0)


def _reference_rne(fname, x):
    if fname == "fp16":
        with np.errstate(all="ignore"):
            return x.astype(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore"):               # NaN inputs
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def _reference_rne_threads(fname, x):
    """_reference_rne over parts of x on the thread pool (numpy's casts release the GIL: the
    slow float16 cast of underflowing inputs takes half the time on two cores)."""
    parts = [_POOL.submit(_reference_rne, fname, x[lo:hi]) for lo, hi in _ranges(x.size)]
    return np.concatenate([f.result() for f in parts])


def _numpy_stride(fname, exp_field):
    """numpy's float32 -> float16 cast takes ~80 ns per element whenever the result underflows
    or overflows (about 7 core-minutes over all 2^32 inputs), so it is compared on every input
    from 2^-26 (results round to 0 / 2^-24) up to 2^17 and for zeros, float32 subnormals, Inf
    and NaN, and on every 256th pattern in the far binades, whose results are all +-0 or +-Inf.
    ml_dtypes' bfloat16 cast is fast: every input."""
    if fname == "fp16" and 0 < exp_field < 255 and not 101 <= exp_field <= 143:
        return 256
    return 1


def _overflow_patterns(fmt, neg):
    """float32 patterns of the overflow result per mode, from the oracle (a huge value)."""
    huge = Fraction(2) ** (fmt.emax + 8) * (-1 if neg else 1)
    return np.array([np.float32(oracle.round_fraction(huge, fmt, mode)[0]).view(np.uint32)
                     for mode in MODE_NAMES], dtype=np.uint32)


def _check_block(x, got, fmt, ovres):
    """check_binade for a block x of one sign and one float32 binade; got: six result arrays."""
    first = int(x[:1].view(np.uint32)[0])
    neg = first >> 31 == 1
    return check_binade(x, *(g.view(np.uint32) for g in got), ((first >> 23) & 0xFF) - 127,
                        neg, ovres[neg], fmt.man_bits, fmt.emin, float(fmt.max),
                        bool(fmt.subnormals), _P2)


@njit(nogil=True, cache=True)
def _count_diff(a, b, lo, hi, nan_same):
    """How many i in [lo, hi) have different uint32 patterns a[i], b[i] (float32 bits); with
    nan_same, two NaNs count as equal and a NaN against a non-NaN as different.  One loop per
    case and a uint32 counter (hi - lo < 2^32): LLVM vectorises them (an int64 counter and the
    case tested inside the loop kept it scalar, 5.5 ms per 2^22 elements against 0.7, one
    Zen 4 core)."""
    x = a[lo:hi]
    y = b[lo:hi]
    n = np.uint32(0)
    if nan_same:
        for i in range(x.size):
            xi = x[i]
            yi = y[i]
            xn = (xi & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
            yn = (yi & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
            n += np.uint32((xn != yn) | ((not xn) & (xi != yi)))
    else:
        for i in range(x.size):
            n += np.uint32(x[i] != y[i])
    return np.int64(n)


def mismatches(a, b, nan_same=False):
    """The number of elements where the float32 arrays a and b (1-d, contiguous) differ in
    their bit patterns (with nan_same: NaN for NaN, bits elsewhere); on the thread pool, in
    place of numpy's whole-array temporaries (which took 3 ms a comparison, and 31 ms for the
    NaN-aware one, of the 2^32 checks' ~200 ms per block of 2^22 inputs; now 0.5 ms, two Zen 4
    cores)."""
    a = a.view(np.uint32)
    b = b.view(np.uint32)
    assert a.size == b.size and a.size < (1 << 32)       # _count_diff's uint32 counter
    return sum(f.result() for f in [_POOL.submit(_count_diff, a, b, lo, hi, nan_same)
                                    for lo, hi in _ranges(a.size)])


def _same_bits(a, b, fname, mode, start):
    """a and b hold the same float32 patterns."""
    if mismatches(a, b):
        bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
        raise AssertionError((fname, mode, hex(start), bad[:5], a[bad[:5]], b[bad[:5]]))


def check_all_float32(fname, starts, chunk=1 << 22):
    """Round every float32 pattern in [s, s + chunk) for s in starts, in the six modes, and
    compare results, flag counts and (rne) the numpy / ml_dtypes casts."""
    fmt = sf.get_format(fname)
    kargs = _kargs(fmt)
    ovres = {neg: _overflow_patterns(fmt, neg) for neg in (False, True)}
    base = np.arange(chunk, dtype=np.uint32)
    xbits = np.empty_like(base)
    counts = np.zeros((6, 4), dtype=np.int64)
    for start in starts:
        np.add(base, np.uint32(start), out=xbits)
        x = xbits.view(np.float32)
        got = []
        for k, mode in enumerate(MODE_NAMES):
            fl = sf.Flags()
            got.append(sf.round(x, fmt, mode, flags=fl))
            counts[k] = [fl.inexact, fl.underflow, fl.overflow, fl.invalid]
            # without flags the kernel takes other passes (pass 1x of _kernels_round_vec):
            # the same patterns on every input
            _same_bits(sf.round(x, fmt, mode), got[k], fname, mode, start)
        # stochastic rounding, with and without flags (same seed, same random bits)
        _same_bits(sf.round(x, fmt, "sr", seed=9, sr_bits=13),
                   sf.round(x, fmt, "sr", seed=9, sr_bits=13, flags=sf.Flags()), fname, "sr",
                   start)
        exp_field = (start >> 23) & 0xFF
        if 0 < exp_field < 255:
            bad, flags = _check_block(x, got, fmt, ovres)
            flags = np.concatenate([flags, np.zeros((6, 1), np.int64)], axis=1)
        else:
            bad = np.zeros(6, np.int64)
        if exp_field in (0, 255) or bad.any():
            got = np.stack(got)
            bad, first, flags = check_chunk(x, got, *kargs, _P2)
        if bad.any():
            k = int(np.argmax(bad > 0))
            i = int(first[k])
            raise AssertionError(
                f"{fname} {MODE_NAMES[k]}: {int(bad[k])} wrong results in block {start:#x}; "
                f"first x = {x[i]!r} (bits {xbits[i]:#010x}) gave {got[k][i]!r}, "
                f"expected {expected(float(x[i]), k, *kargs, _P2)[0]!r}")
        assert np.array_equal(counts, flags), (fname, hex(start), counts, flags)
        # RNE equals numpy float16 / ml_dtypes bfloat16 (bit patterns; NaN as "is NaN").
        step = _numpy_stride(fname, exp_field)
        ref = _reference_rne_threads(fname, x[::step])
        g = np.ascontiguousarray(got[0][::step])
        assert mismatches(g, ref, nan_same=True) == 0, hex(start)


def test_block_check_covers_every_kind_of_binade():
    """check_binade (used for 2^32 inputs) agrees with check_chunk on whole blocks."""
    for fname in ("fp16", "bf16"):
        fmt = sf.get_format(fname)
        ovres = {neg: _overflow_patterns(fmt, neg) for neg in (False, True)}
        for e in (fmt.emin - 12, fmt.emin - 1, fmt.emin, 0, fmt.emax, fmt.emax + 1):
            if not 1 <= e + 127 <= 254:
                continue                               # not a float32 normal binade
            for neg in (False, True):
                start = ((e + 127) << 23) | (1 << 31 if neg else 0)
                x = (np.arange(start, start + (1 << 23), 97, dtype=np.uint64)
                     .astype(np.uint32).view(np.float32))
                got = np.stack([sf.round(x, fmt, mode) for mode in MODE_NAMES])
                b1, f1 = _check_block(x, got, fmt, ovres)
                b2, _, f2 = check_chunk(x, got, *_kargs(fmt), _P2)
                assert b1.sum() == 0 and b2.sum() == 0
                assert np.array_equal(f1, f2[:, :3]), (fname, e, neg)
                got[3, 5] = np.float32(0.5)            # a wrong value must be seen
                assert list(_check_block(x, got, fmt, ovres)[0]) == [0, 0, 0, 1, 0, 0]


def every_float32(fname):
    t0 = time.perf_counter()
    check_all_float32(fname, range(0, 1 << 32, 1 << 22))
    print(f"\n{fname}: 2^32 inputs x 6 modes checked in {time.perf_counter() - t0:.1f} s")


# bf16's 2^32 check is in tests/test_exhaustive_bf16.py: a file of its own, so that the test
# processes (pytest-xdist, one file per process) run the two checks side by side.
@pytest.mark.slow
def test_every_float32_rounds_correctly_fp16():
    every_float32("fp16")


# ----- every bit pattern of the small formats -------------------------------------------------

SMALL = ["fp16", "bf16", "e4m3fn", "e5m2"]


def _variants():
    out = [sf.get_format(n) for n in SMALL]
    out += [sf.Format("e4m3_ftz", 4, 3, subnormals=False, inf_nan="fn"),
            sf.Format("e3m4_none", 3, 4, inf_nan="none"),
            sf.Format("e5m2_ftz", 5, 2, subnormals=False)]
    return out


@pytest.mark.parametrize("fmt", _variants(), ids=lambda f: f.name)
def test_every_pattern_decodes_like_the_oracle_and_round_trips(fmt):
    bits = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.bits_dtype)
    vals = sf.from_bits(bits, fmt)
    assert vals.dtype == fmt.carrier_dtype
    ref = np.array([oracle.bits_to_value(int(b), fmt) for b in bits])
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(vals), nan)
    assert np.array_equal(vals[~nan].astype(np.float64).view(np.uint64),
                          ref[~nan].view(np.uint64))
    back = sf.to_bits(vals, fmt)
    assert back.dtype == fmt.bits_dtype
    if nan.any():
        # NaN patterns keep their sign and payload: each comes back as it was
        assert np.array_equal(back[nan], bits[nan])
    if fmt.subnormals:
        assert np.array_equal(back[~nan], bits[~nan])
    else:
        # denormals-are-zero: a subnormal pattern reads as a zero of its sign
        sub = ((bits.astype(np.uint64) >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)) == 0
        sign = bits.astype(np.uint64) & (1 << (fmt.bits - 1))
        assert np.array_equal(back[sub], sign[sub].astype(fmt.bits_dtype))
        assert np.array_equal(back[~nan & ~sub], bits[~nan & ~sub])
    # every non-NaN value encodes like the oracle
    assert all(int(b) == oracle.value_to_bits(float(v), fmt)
               for b, v in zip(back[~nan], vals[~nan]))


@pytest.mark.parametrize("fname,mlname", [("e4m3fn", "float8_e4m3fn"), ("e5m2", "float8_e5m2"),
                                          ("bf16", "bfloat16"), ("fp16", None)])
def test_every_pattern_decodes_like_ml_dtypes(fname, mlname):
    fmt = sf.get_format(fname)
    bits = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.bits_dtype)
    if mlname is None:
        ref = bits.view(np.float16).astype(np.float32)
    else:
        ref = bits.view(getattr(ml_dtypes, mlname)).astype(np.float32)
    got = sf.from_bits(bits, fmt)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])
