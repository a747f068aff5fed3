"""Stochastic rounding: exact agreement with the oracle given the random bits, frequencies at
1/4, 1/2 and 3/4 of the way between neighbours, unbiasedness, and reproducibility whatever the
thread count or chunking."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

import oracle
import softfloat as sf
from softfloat import _kernels_round as K
from softfloat.rng import random_bits, seed_key


def _same(a, b):
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.mark.parametrize("name", ["fp16", "bf16", "e4m3fn", "e5m2"])
@pytest.mark.parametrize("rbits", [1, 3, 24, 62])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sr_equals_oracle_given_the_random_bits(name, rbits, dtype):
    fmt = sf.get_format(name)
    rng = np.random.default_rng(rbits)
    with np.errstate(over="ignore"):                   # bf16's range exceeds float32's
        x = (rng.standard_normal(400) * np.exp2(rng.integers(fmt.emin - fmt.man_bits - 3,
                                                              fmt.emax + 2, 400))).astype(dtype)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fmt.max,
                                     fmt.tiny * 0.99, -fmt.tiny * 0.999], dtype)])
    fl = sf.Flags()
    got = sf.round(x, fmt, "sr", seed=1234, sr_bits=rbits, flags=fl)
    key = seed_key(1234)
    counts = dict.fromkeys(("inexact", "underflow", "overflow", "invalid"), 0)
    for i, xi in enumerate(x):
        r, f = oracle.round_float(xi, fmt, "sr", u=int(random_bits(key, i)), rbits=rbits)
        assert _same(got[i], r), (i, xi, got[i], r)
        for k in f:
            counts[k] += 1
    assert {k: getattr(fl, k) for k in counts} == counts


@pytest.mark.parametrize("name,frac", [("fp16", 0.25), ("fp16", 0.5), ("fp16", 0.75),
                                       ("bf16", 0.25), ("bf16", 0.75), ("e4m3fn", 0.5)])
def test_frequency_of_rounding_up(name, frac):
    """x = lo + frac * ulp rounds up with probability frac: 5-sigma binomial bound."""
    fmt = sf.get_format(name)
    n = 200_000
    for lo, dtype in ((1.0, np.float32), (-1.5, np.float64), (fmt.tiny / 2, np.float32)):
        ulp = float(sf.ulp(lo, fmt))
        x = np.full(n, lo + frac * ulp, dtype=dtype)
        r = sf.round(x, fmt, "sr", seed=int(frac * 100))
        hi = float(sf.next_up(lo, fmt))
        assert set(np.unique(r).tolist()) <= {lo, hi}
        p_up = np.mean(r == hi)
        sigma = math.sqrt(frac * (1 - frac) / n)
        assert abs(p_up - frac) < 5 * sigma, (lo, p_up, frac)


def test_unbiased_on_average():
    """E[sr(x)] = x: the mean error in ulps over 10^6 random float32 values is ~0."""
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 2, 1_000_000).astype(np.float32)
    fmt = sf.get_format("bf16")
    err = (sf.round(x, fmt, "sr", seed=5).astype(np.float64) - x) / float(fmt.eps)
    # each error is uniform-ish in (-1, 1) ulp with variance < 1/4: 5 sigma of the mean
    assert abs(err.mean()) < 5 * 0.5 / math.sqrt(x.size)
    rn = (sf.round(x, fmt, "rtz").astype(np.float64) - x) / float(fmt.eps)
    assert rn.mean() < -0.4                 # truncation is biased: the test can fail


def test_always_one_of_the_two_neighbours():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(50_000) * np.exp2(rng.integers(-30, 18, 50_000))).astype(np.float32)
    for name in ("fp16", "bf16", "e5m2"):
        r = sf.round(x, name, "sr", seed=9)
        down, up = sf.round(x, name, "rdn"), sf.round(x, name, "rup")
        assert np.all((r == down) | (r == up))
        exact = down == up
        assert np.array_equal(r[exact], down[exact])


def test_same_seed_same_bits_any_thread_count():
    x = np.random.default_rng(3).standard_normal(3 * K.CHUNK + 17).astype(np.float32)
    before = numba.get_num_threads()
    results = []
    try:
        for t in sorted({1, before}):
            numba.set_num_threads(t)
            results.append(sf.round(x, "fp16", "sr", seed=42))
            results.append(sf.round(x.astype(np.float64), "fp16", "sr", seed=42))
    finally:
        numba.set_num_threads(before)
    for r in results[1:]:
        assert np.array_equal(r.view(np.uint32), results[0].view(np.uint32))


def test_bits_depend_only_on_seed_and_index():
    """Any chunking: a prefix, a reshaped array and the generic kernel give the same bits."""
    x = np.random.default_rng(4).standard_normal(2 * K.CHUNK + 5).astype(np.float32)
    full = sf.round(x, "bf16", "sr", seed=7)
    assert np.array_equal(sf.round(x[:1000], "bf16", "sr", seed=7), full[:1000])
    assert np.array_equal(sf.round(x[:K.CHUNK + 3], "bf16", "sr", seed=7), full[:K.CHUNK + 3])
    y = x[:2 * K.CHUNK].reshape(64, -1)                # C order: flat index i
    assert np.array_equal(sf.round(y, "bf16", "sr", seed=7).reshape(-1), full[:2 * K.CHUNK])
    assert not np.array_equal(sf.round(x, "bf16", "sr", seed=8), full)


def test_seeds_and_derived_seeds():
    x = np.full(1000, 1 + 2 ** -9, np.float32)
    a = sf.round(x, "bf16", "sr", seed=sf.derive_seed(1, 0))
    b = sf.round(x, "bf16", "sr", seed=sf.derive_seed(1, 1))
    assert not np.array_equal(a, b)
    assert np.array_equal(a, sf.round(x, "bf16", "sr", seed=sf.derive_seed(1, 0)))
    with pytest.raises(ValueError):
        sf.round(x, "bf16", "sr")
    with pytest.raises(TypeError):
        sf.round(x, "bf16", "sr", seed=1.5)
    with pytest.raises(ValueError):
        sf.round(x, "bf16", "sr", seed=-1)
    with pytest.raises(ValueError):
        sf.round(x, "bf16", "sr", seed=1, sr_bits=63)


def test_few_random_bits_quantise_the_probability():
    """With r = 1 random bit, a value 1/4 of the way up never rounds up (floor(1/4 * 2) = 0)
    and 3/4 of the way rounds up half of the time."""
    fmt = sf.get_format("fp16")
    ulp = 2.0 ** -10
    r = sf.round(np.full(4000, 1 + ulp / 4, np.float32), fmt, "sr", seed=3, sr_bits=1)
    assert np.all(r == 1.0)
    r = sf.round(np.full(40000, 1 + 3 * ulp / 4, np.float32), fmt, "sr", seed=3, sr_bits=1)
    assert abs(np.mean(r > 1) - 0.5) < 0.02


def test_representable_values_are_exact():
    vals = sf.from_bits(np.arange(1 << 16, dtype=np.uint16), "fp16")
    fl = sf.Flags()
    r = sf.round(vals, "fp16", "sr", seed=1, flags=fl)
    nan = np.isnan(vals)
    assert np.array_equal(r.view(np.uint32)[~nan], vals.view(np.uint32)[~nan])
    assert fl.inexact == 0


def test_running_weyl_sum_gives_the_same_bits():
    """The rounding passes carry element j's Weyl term as a running sum (w += WEYL_STEP) rather
    than the product index * GOLDEN: the same 64-bit terms, modulo 2^64 across the wrap, and so
    the same random bits as random_bits(key, index), for small, large and wrapping indices."""
    from numba import njit

    from softfloat.rng import WEYL_STEP, mix, weyl

    @njit
    def running(key, start, n, out):
        w = weyl(start)
        for j in range(n):
            out[j] = mix(key, w)
            w += WEYL_STEP

    @njit
    def direct(key, start, n, out):
        for j in range(n):
            out[j] = random_bits(key, start + j)

    key = seed_key(2026)
    for start in (0, 1, 12345, 2**40 + 3, 2**62 - 100):
        a = np.empty(300, np.uint64)
        b = np.empty(300, np.uint64)
        running(key, start, 300, a)
        direct(key, start, 300, b)
        assert (a == b).all(), start
    # the product wraps modulo 2^64 (index * GOLDEN exceeds 2^64 from index 2 on) and the sum
    # does too: the terms agree with Python's exact arithmetic reduced modulo 2^64
    assert int(weyl(2**62 - 1)) == ((2**62 - 1) * 0x9E3779B97F4A7C15) % 2**64
