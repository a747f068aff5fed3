"""softfloat._intrinsics: the 32-bit intrinsics behave as uint32 arithmetic (wrapping, unsigned
comparisons, selects, truncation), checked against numpy's own uint32 operations."""

from __future__ import annotations

import numpy as np
from numba import njit

from softfloat._intrinsics import (add32, and32, ge32, gt32, lo32, lt32, ne32, or32, sel32,
                                   shl32, shr32, xor32)


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
