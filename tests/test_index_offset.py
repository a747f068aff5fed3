"""index_offset: rounding the pieces of an array with their global offsets gives, bit for bit,
the result of rounding the whole array at once, stochastic rounding included (the random bits
of element i depend only on (seed, i)); without the offsets the pieces would draw other bits."""

from __future__ import annotations

import numpy as np
import pytest

import softfloat as sf

RNG = np.random.default_rng(20261125)
# Gradient-like data: N(0,1) * 2^U[-30, 8), so fp16 sees normals, subnormals and zeros.
X32 = (RNG.standard_normal(50_000) * np.exp2(RNG.integers(-30, 8, 50_000))).astype(np.float32)
X64 = X32.astype(np.float64) * (1 + 2.0 ** -40)          # float64 values off the float32 grid
CUTS = (0, 1, 4, 16384, 16390, 33333, 50_000)             # chunk boundaries, CHUNK = 16384


def _pieces(fn, x):
    return np.concatenate([fn(x[lo:hi], lo) for lo, hi in zip(CUTS[:-1], CUTS[1:])])


# (fp32 from float32 input is exact: no random bit is used, so that pair is left out.)
@pytest.mark.parametrize("fmt, x", [(f, x) for f in ("fp16", "bf16", "e4m3fn", "fp32")
                                    for x in (X32, X64) if not (f == "fp32" and x is X32)])
def test_round_in_pieces_equals_round_whole(fmt, x):
    whole = sf.round(x, fmt, "sr", seed=5)
    parts = _pieces(lambda p, o: sf.round(p, fmt, "sr", seed=5, index_offset=o), x)
    assert np.array_equal(whole.view(np.uint8), parts.view(np.uint8))
    # The check can fail: the same pieces without their offsets draw other bits.
    naive = _pieces(lambda p, o: sf.round(p, fmt, "sr", seed=5), x)
    assert not np.array_equal(whole, naive)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt", "fma"])
def test_arithmetic_in_pieces_equals_whole(op):
    y = np.abs(X32[::-1]).copy() + np.float32(2.0 ** -20)
    fn = getattr(sf, op)
    if op == "sqrt":
        args = (np.abs(X32),)
    elif op == "fma":
        args = (X32, y, X32[::-1].copy())
    else:
        args = (X32, y)
    whole = fn(*args, "fp16", "sr", seed=9)
    parts = _pieces(lambda _p, o: fn(*(a[o:o + _p.size] for a in args), "fp16", "sr", seed=9,
                                     index_offset=o), X32)
    assert np.array_equal(whole.view(np.uint32), parts.view(np.uint32))


def test_offset_is_ignored_by_deterministic_modes():
    assert np.array_equal(sf.round(X32, "fp16", "rne", index_offset=123).view(np.uint32),
                          sf.round(X32, "fp16", "rne").view(np.uint32))


@pytest.mark.parametrize("bad, err", [(-1, ValueError), (2 ** 63, ValueError), (1.5, TypeError),
                                      (True, TypeError), ("3", TypeError)])
def test_bad_offset_is_refused(bad, err):
    with pytest.raises(err, match="index_offset"):
        sf.round(X32[:4], "fp16", "sr", seed=1, index_offset=bad)
    with pytest.raises(err, match="index_offset"):
        sf.add(X32[:4], X32[:4], "fp16", "sr", seed=1, index_offset=bad)
