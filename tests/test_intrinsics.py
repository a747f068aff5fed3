"""softfloat._intrinsics: the 32-bit intrinsics behave as uint32 arithmetic (wrapping, unsigned
comparisons, selects, truncation), checked against numpy's own uint32 operations; fma rounds
once, checked against exact rational arithmetic."""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest
from numba import njit

from softfloat._intrinsics import (LANES, ROWS, absmax16, add32, and32, fma, ge32, gt32, lo32, lt32, ne32, or32,
                                   sel32, shl32, shr32, sload, srow0, srow1, srow2, srow3,
                                   vacc_add, vacc_float, vand_bits, vbits_rsub, vload,
                                   vload_wide,
                                   vmax, vrint, vstore, vterm, vtrunc, xor32)
from softfloat._intrinsics import eq_mask64, popcount64

_EXP = np.int64(0x7FF0000000000000)        # the float64 exponent field


@njit(cache=False)
def _apply(a, b, s, w, out, cmp):
    for i in range(a.size):
        out[0, i] = add32(a[i], b[i])
        out[1, i] = and32(a[i], b[i])
        out[2, i] = or32(a[i], b[i])
        out[3, i] = xor32(a[i], b[i])
        out[4, i] = shr32(a[i], s[i])
        out[5, i] = shl32(a[i], s[i])
        out[6, i] = sel32(lt32(a[i], b[i]), a[i], b[i])
        out[7, i] = lo32(w[i])
        cmp[0, i] = lt32(a[i], b[i])
        cmp[1, i] = ge32(a[i], b[i])
        cmp[2, i] = gt32(a[i], b[i])
        cmp[3, i] = ne32(a[i], b[i])


def test_int32_intrinsics_match_uint32_arithmetic():
    rng = np.random.default_rng(3)
    n = 4096
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    a[:4] = [0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF]
    b[:4] = [0xFFFFFFFF, 1, 0x80000000, 0x80000000]
    s = rng.integers(0, 32, n).astype(np.uint32)
    w = rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    out = np.empty((8, n), np.uint32)
    cmp = np.empty((4, n), np.bool_)
    _apply(a, b, s, w, out, cmp)
    with np.errstate(over="ignore"):
        assert np.array_equal(out[0], a + b)            # wraps modulo 2^32
    assert np.array_equal(out[1], a & b)
    assert np.array_equal(out[2], a | b)
    assert np.array_equal(out[3], a ^ b)
    assert np.array_equal(out[4], a >> s)
    assert np.array_equal(out[5], (a.astype(np.uint64) << s) & np.uint64(0xFFFFFFFF))
    assert np.array_equal(out[6], np.minimum(a, b))
    assert np.array_equal(out[7], (w & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    assert np.array_equal(cmp[0], a < b) and np.array_equal(cmp[1], a >= b)
    assert np.array_equal(cmp[2], a > b) and np.array_equal(cmp[3], a != b)


@njit(cache=False)
def _vectors(x, y, codes, out, acc, rows):
    a = vload(x, 0)
    b = vload(y, 0)
    vstore(out, 0, vtrunc(a))
    vstore(out, LANES, vrint(a))
    vstore(out, 2 * LANES, vmax(a, b))
    vstore(out, 3 * LANES, vand_bits(a, _EXP))
    vstore(out, 4 * LANES, vbits_rsub(np.int64(2046 << 52), vand_bits(b, _EXP)))
    vstore(acc, 0, vacc_float(vacc_add(vterm(a), vterm(b))))
    for r in range(4):
        vstore(rows, r * LANES, _row(codes, r))


@njit(cache=False)
def _row(codes, r):
    s = sload(codes, 0)
    if r == 0:
        return srow0(s)
    if r == 1:
        return srow1(s)
    if r == 2:
        return srow2(s)
    return srow3(s)


def test_vector_intrinsics_are_the_lane_operations():
    """The tile kernel's vector intrinsics (softfloat._intrinsics, shapes of this machine's
    instruction set) against numpy, lane by lane: truncation and round-to-even, maximum, the
    exponent-field mask, the inverse power from the bits, the exact
    integer accumulators (int64 or float64 lanes: a sum of negative zeros reads +0), and the
    int16 codes of a tile row as powers of two."""
    rng = np.random.default_rng(5)
    x = np.round(rng.standard_normal(LANES) * 2 ** 20, 1)
    x[0], x[1] = -0.3, 2.5                      # truncates to -0; a tie to even
    y = rng.standard_normal(LANES) * 2.0 ** rng.integers(-40, 40, LANES)
    y[0] = -0.7
    codes = (16 * rng.integers(1023 - 200, 1023 + 200, ROWS * LANES)).astype(np.int16)
    out, acc, rows = np.empty(5 * LANES), np.empty(LANES), np.empty(ROWS * LANES)
    _vectors(x, y, codes, out, acc, rows)
    o = out.reshape(5, LANES)
    assert np.array_equal(o[0], np.trunc(x)) and np.signbit(o[0][0])
    assert np.array_equal(o[1], np.rint(x)) and o[1][1] == 2.0
    assert np.array_equal(o[2], np.maximum(x, y))
    assert np.array_equal(o[3], np.exp2(np.floor(np.log2(np.abs(x)))))
    assert np.array_equal(o[4], np.exp2(-np.floor(np.log2(np.abs(y)))))
    want = np.trunc(x) + np.trunc(y) + 0.0
    assert np.array_equal(acc.view(np.int64), want.view(np.int64))    # lane 0: +0, not -0
    assert acc[0] == 0 and not np.signbit(acc[0])
    assert np.array_equal(rows, np.exp2(codes.astype(np.int64) // 16 - 1023.0))


@njit(cache=False)
def _wide(x, off, out):
    vstore(out, 0, vload_wide(x, off))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vload_wide_reads_lanes_exactly_as_float64(dtype):
    """vload_wide: LANES elements from a flat offset, float32 widened exactly (subnormals,
    signed zeros, infinities, NaN), float64 as they are."""
    vals = np.array([2.0 ** -149, -0.0, np.inf, -np.inf, np.nan, 1.0 + 2.0 ** -23,
                     -(2.0 ** 127) * 1.5, 3.0, 2.0 ** -126, -7.25, 0.1], dtype)
    out = np.empty(LANES)
    for off in (0, 3):
        _wide(vals, off, out)
        want = vals[off:off + LANES].astype(np.float64)
        assert np.array_equal(out.view(np.int64), want.view(np.int64))


@njit(cache=False)
def _fma_all(a, b, c, out):
    for i in range(a.size):
        out[i] = fma(a[i], b[i], c[i])


def _fma_exact(a, b, c, dtype):
    """a*b + c computed exactly with Fractions and rounded once (RNE) to dtype."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    # float64 of a Fraction rounds correctly (RNE); for float32 round the exact value directly
    if dtype == np.float64:
        return np.float64(exact.numerator / exact.denominator) if exact else np.float64(0.0)
    lo = np.float32(float(exact))                    # float64 first can double-round: correct it
    cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    dist = [abs(Fraction(float(x)) - exact) for x in cands]
    best = min(dist)
    ties = [x for x, d in zip(cands, dist) if d == best]
    even = [x for x in ties if int(x.view(np.uint32)) % 2 == 0]
    return (even or ties)[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_rounds_once(dtype):
    """fma(a, b, c) is a*b + c rounded once: products with many significant bits plus an
    addend that cancels most of them, where a separate multiply and add would differ."""
    rng = np.random.default_rng(11)
    n = 2000
    a = (1 + rng.random(n)).astype(dtype)
    b = (1 + rng.random(n)).astype(dtype)
    c = -(a * b)                                     # the rounded product: fma gives the error
    c[::3] = rng.standard_normal(n)[::3].astype(dtype)
    out = np.empty(n, dtype)
    _fma_all(a, b, c, out)
    want = np.array([_fma_exact(x, y, z, dtype) for x, y, z in zip(a, b, c)], dtype)
    assert np.array_equal(out.view(np.uint32 if dtype == np.float32 else np.uint64),
                          want.view(np.uint32 if dtype == np.float32 else np.uint64))
    # the two-rounding result differs on many of them: the check can fail
    assert np.count_nonzero(out != a * b + c) > n // 4


@njit(cache=False)
def _absmax_all(pats, out):
    for b in range(out.size):
        out[b] = absmax16(pats, b * 16)


def test_absmax16_is_the_largest_magnitude_pattern():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(16 * 64) * 2.0 ** rng.integers(-140, 120, 16 * 64)).astype(np.float32)
    x[:16] = -0.0
    x[16:32] = np.float32(np.inf) * np.sign(x[16:32])
    x[40] = np.nan
    x[16 * 9 + 3] = -np.float32(3.4e38)              # the largest magnitude is negative
    pats = x.view(np.uint32)
    out = np.empty(64, np.uint32)
    _absmax_all(pats, out)
    want = (pats & np.uint32(0x7FFFFFFF)).reshape(64, 16).max(axis=1)
    assert np.array_equal(out, want)
    assert out[0] == 0 and out[1] == 0x7F800000 and out[2] > 0x7F800000


@njit
def _masks(arr, starts, value, out, cnt):
    for i in range(starts.size):
        out[i] = eq_mask64(arr, starts[i], value)
        cnt[i] = popcount64(out[i])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("value", [0, 1, "top"])
def test_eq_mask64_and_popcount64(dtype, value):
    """Bit j of eq_mask64(arr, s, v) is arr[s + j] == v, at every offset (unaligned loads too),
    for none, some and all of the 64 elements equal to v (0, 1, the top bit alone); popcount64
    counts its bits."""
    top = dtype(1) << dtype(np.dtype(dtype).itemsize * 8 - 1)
    v = top if value == "top" else dtype(value)
    rng = np.random.default_rng(6)
    arr = rng.integers(2, 2 ** 31, 64 * 8, dtype=np.int64).astype(dtype)
    arr[rng.random(arr.size) < 0.1] = v
    arr[rng.random(arr.size) < 0.1] = dtype(0) if v != 0 else dtype(1)
    arr[64:128] = v
    arr[128:192] = top if v != top else dtype(0)
    starts = np.arange(arr.size - 63)
    out = np.empty(starts.size, np.uint64)
    cnt = np.empty(starts.size, np.uint64)
    _masks(arr, starts, v, out, cnt)
    z = arr == v
    want = [sum(1 << j for j in range(64) if z[s + j]) for s in starts]
    assert [int(m) for m in out] == want
    assert [int(m) for m in cnt] == [bin(w).count("1") for w in want]
    assert want[64] == (1 << 64) - 1 and want[128] == 0


_CACHE_MODULE = '''
from numba import njit
from softfloat._intrinsics import sadd, sany_ult, sload, smax


@njit(cache=True)
def code(a, o):
    return sadd(sload(a, o), sload(a, o))


@njit(cache=True)
def first(a, o, c):
    return sany_ult(code(a, o), c)


@njit(cache=True)
def top(a, o, c):
    s = code(a, o)
    for _ in range(2):
        s = smax(s, sload(a, o))
    return sany_ult(s, c)
'''


def test_vector_types_survive_the_cache_across_processes(tmp_path):
    """A process that compiles a kernel whose cached callee returns a tile vector must get this
    module's vector type back from the cache.  The first process compiles and caches ``code``
    (through ``first``);
    the second loads it and compiles ``top`` around it.  With the vector types' class made
    inside a function (as before), the second process failed: "Cannot unify I16x32 and I16x32"
    (seen in `mpemu reproduce` with two Dask workers sharing a cache)."""
    import os
    import pickle
    import subprocess

    from softfloat._intrinsics import ACCV, F64V, I16V
    for t in (F64V, ACCV, I16V):
        assert pickle.loads(pickle.dumps(t)) == t          # pickled by reference
    (tmp_path / "tilecache_mod.py").write_text(_CACHE_MODULE)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.getcwd()]))
    setup = ("import numpy as np, tilecache_mod as m; "
             "from softfloat._intrinsics import ROWS, LANES; "
             "a = np.arange(4 * ROWS * LANES, dtype=np.int16); ")
    for call in ("print(int(m.first(a, 0, 5)))", "print(int(m.top(a, 0, 5)))"):
        r = subprocess.run([sys.executable, "-c", setup + call], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "1"                          # lane 0 holds 0 + 0 < 5
