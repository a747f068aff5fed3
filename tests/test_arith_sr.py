"""Stochastic rounding in the arithmetic: bit-exact against the rational oracle given the same
random bits, reproducible by seed, independent of the thread count, right frequencies, and the
sr_bits limit p + r + 2 <= 53."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from oracle_extra import make_cases, rational_op
from test_arith import OPS, run_api, run_scalar, same, stable_seed

import softfloat as sf
from softfloat.rng import random_bits, seed_key

FLAG_BITS = {"inexact": 1, "underflow": 2, "overflow": 4, "invalid": 8, "divbyzero": 16}


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32", "e5m2"])
@pytest.mark.parametrize("op", OPS)
def test_sr_matches_rational_oracle(op, fmt):
    """Element i uses the 64 bits random_bits(seed_key(seed), i); the oracle gets the same u."""
    F = sf.get_format(fmt)
    rng = np.random.default_rng(stable_seed("sr", op, fmt))
    cases = make_cases(op, F, rng, n_special=120, n_tie=60, n_random=60, n_off=60)
    seed = 2024
    key = seed_key(seed)
    for rbits in (sf.arith.max_sr_bits(F), 24, 3):
        got = run_api(op, cases, F, "sr", seed=seed, sr_bits=rbits)
        res, fls = run_scalar(op, cases, F, "sr", seed=seed, rbits=rbits)
        assert same(got, res).all()
        rows32 = np.all(same(cases.astype(np.float32), cases), axis=1)
        idx = np.flatnonzero(rows32)
        got32 = run_api(op, cases[idx], F, "sr", dtype=np.float32, seed=seed, sr_bits=rbits)
        # The float32 call numbers its elements 0..len(idx)-1: compare with the oracle directly.
        failures = []
        for j, i in enumerate(idx):
            u = int(random_bits(key, j))
            want, _ = rational_op(op, [float(x) for x in cases[i]], F, "sr", u=u, rbits=rbits)
            if not same(want, got32[j]):
                failures.append(("f32", rbits, cases[i].tolist(), want, float(got32[j])))
        for i, row in enumerate(cases):
            u = int(random_bits(key, i))
            want, wfl = rational_op(op, [float(x) for x in row], F, "sr", u=u, rbits=rbits)
            if not same(want, res[i]) or sum(FLAG_BITS[n] for n in wfl) != fls[i]:
                failures.append((rbits, row.tolist(), want, sorted(wfl), float(res[i]),
                                 int(fls[i])))
        assert not failures, f"{len(failures)} mismatches, first: {failures[:5]}"


def _big_inputs(n=100_000):
    rng = np.random.default_rng(11)
    x = sf.round(rng.standard_normal(n).astype(np.float32), "fp16")
    y = sf.round(rng.standard_normal(n).astype(np.float32), "fp16")
    return x, y


CALLS = {
    "add32": lambda x, y, **k: sf.add(x, y, "bf16", "sr", **k),
    "mul32": lambda x, y, **k: sf.mul(x, y, "fp16", "sr", **k),
    "sub64": lambda x, y, **k: sf.sub(x.astype(np.float64), y, "e5m2", "sr", **k),
    "div": lambda x, y, **k: sf.div(x, y, "bf16", "sr", **k),
    "sqrt": lambda x, y, **k: sf.sqrt(np.abs(x), "e4m3fn", "sr", **k),
    "fma32": lambda x, y, **k: sf.fma(x, y, x, "bf16", "sr", **k),
    "fma64": lambda x, y, **k: sf.fma(x.astype(np.float64), y, 0.1, "fp16", "sr", **k),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_sr_reproducible_and_thread_independent(name):
    x, y = _big_inputs()
    call = CALLS[name]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        f1 = sf.Flags()
        r1 = call(x, y, seed=7, flags=f1)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        f2 = sf.Flags()
        r2 = call(x, y, seed=7, flags=f2)
    finally:
        numba.set_num_threads(before)
    assert same(r1, r2).all() and f1.as_dict() == f2.as_dict()
    r3 = call(x, y, seed=8)
    assert not same(r1, r3).all()                      # another seed, other roundings


@pytest.mark.parametrize("case", ["add_quarter", "mul_f64", "div_third", "fma_f32"])
def test_sr_frequencies(case):
    """P(round up) = (distance to the lower neighbour) / ulp, quantised to 2^-r."""
    n = 200_000
    one = np.ones(n, np.float32)
    if case == "add_quarter":          # 1 + 2^-12 in fp16: a quarter ulp above 1
        r = sf.add(one, np.float32(2.0 ** -12), "fp16", "sr", seed=1)
        lo, hi, p = 1.0, 1.0 + 2.0 ** -10, 0.25
    elif case == "mul_f64":            # 1 * (1 + 0.3 ulp) with float64 operands in bf16
        b = 1.0 + 0.3 * 2.0 ** -7
        r = sf.mul(one.astype(np.float64), b, "bf16", "sr", seed=2)
        lo, hi = 1.0, 1.0 + 2.0 ** -7
        p = np.floor(0.3 * 2 ** 24) / 2 ** 24
    elif case == "div_third":          # 1/3 in fp16: 0.33325... + f ulp
        r = sf.div(one, np.float32(3.0), "fp16", "sr", seed=3)
        lo = 0.333251953125
        hi = lo + 2.0 ** -12
        p = np.floor((1 / 3 - lo) / 2.0 ** -12 * 2 ** 24) / 2 ** 24
    else:                              # fma(3, 1/3 in float32, 2^-20) in fp16, fast fma path
        t = np.float32(1 / 3)
        r = sf.fma(np.full(n, 3.0, np.float32), t, np.float32(2.0 ** -20), "fp16", "sr", seed=4)
        exact = 3.0 * float(t) + 2.0 ** -20
        lo, hi = 1.0, 1.0 + 2.0 ** -10
        p = np.floor((exact - 1.0) / 2.0 ** -10 * 2 ** 24) / 2 ** 24
    assert set(np.unique(r).tolist()) <= {lo, hi}
    k = int(np.count_nonzero(r == hi))
    sigma = np.sqrt(n * p * (1 - p))
    assert abs(k - n * p) < 5 * sigma, (case, k, n * p)


def test_sr_bits_limit():
    assert sf.max_sr_bits("fp32") == 27 and sf.max_sr_bits("fp16") == 40
    assert sf.max_sr_bits("bf16") == 43
    sf.add(1.0, 2.0 ** -30, "fp32", "sr", seed=1, sr_bits=27)
    with pytest.raises(ValueError, match="sr_bits must be in 1..27"):
        sf.add(1.0, 2.0 ** -30, "fp32", "sr", seed=1, sr_bits=28)
    with pytest.raises(ValueError, match="sr_bits must be in 1..40"):
        sf.sqrt(2.0, "fp16", "sr", seed=1, sr_bits=41)
