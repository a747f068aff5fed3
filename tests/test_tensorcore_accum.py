"""The generic accumulation GEMM (softfloat.tensorcore.accum_gemm): every order, fused or not,
Kahan or not, in several accumulator formats and rounding modes, against an exact rational
reference that rounds each operation once; stochastic rounding's reproducibility and bias; the
"why accumulate in fp32" stagnation it is built to show; flags and argument errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import softfloat as sf
import tc_reference as R
from softfloat import tensorcore as tc

ACC = {"fp16": (10, -14, 15), "bf16": (7, -126, 127), "fp32": (23, -126, 127),
       "e5m2": (2, -14, 15)}


def _rnd(acc, mode):
    frac, emin, emax = ACC[acc]

    def rnd(x):
        return R.round_fraction(Fraction(x), frac, emin, emax, mode)
    return rnd


def ref_element(a, b, c, *, acc, mode, order, block, fused, kahan):
    """One output element, every operation an exact rational rounded once (no specials)."""
    rnd = _rnd(acc, mode)
    F = Fraction

    def seq(lo, hi, start, start_zero):
        accv, comp, first = start, 0.0, start_zero
        for t in range(lo, hi):
            p = F(a[t]) * F(b[t])
            if first:
                accv, first = rnd(p), False
                continue
            x = p if fused else F(rnd(p))
            y = rnd(x - F(comp)) if kahan else x
            tt = rnd(F(accv) + F(y))
            if kahan:
                comp = rnd(F(rnd(F(tt) - F(accv))) - F(y))
            accv = tt
        return accv

    k = len(a)
    if order == "sequential":
        return seq(0, k, c, False)
    if order == "blocked":
        accv, comp = c, 0.0
        for t in range(0, k, block):
            s = seq(t, min(k, t + block), 0.0, True)
            y = rnd(F(s) - F(comp)) if kahan else s
            nacc = rnd(F(accv) + F(y))
            if kahan:
                comp = rnd(F(rnd(F(nacc) - F(accv))) - F(y))
            accv = nacc
        return accv
    leaves = [seq(t, min(k, t + block), 0.0, True) for t in range(0, k, block)]
    while len(leaves) > 1:
        nxt = [rnd(F(leaves[2 * t]) + F(leaves[2 * t + 1])) for t in range(len(leaves) // 2)]
        if len(leaves) % 2:
            nxt.append(leaves[-1])
        leaves = nxt
    return rnd(F(c) + F(leaves[0]))


CONFIGS = [
    ("fp16", "rne", "sequential", None, True, False),
    ("fp16", "rne", "sequential", None, False, False),
    ("fp16", "rtz", "sequential", None, True, True),
    ("fp16", "rup", "blocked", 5, False, False),
    ("bf16", "rdn", "blocked", 4, True, True),
    ("bf16", "rna", "pairwise", None, True, False),
    ("fp32", "rne", "pairwise", 3, False, False),
    ("e5m2", "rne", "sequential", None, False, True),
    ("fp32", "rtz", "blocked", 8, False, True),
]


@pytest.mark.parametrize("acc,mode,order,block,fused,kahan", CONFIGS)
def test_against_rational_reference(acc, mode, order, block, fused, kahan):
    rng = np.random.default_rng(len(acc) * 7 + len(mode) + (block or 0))
    k = 23
    A = np.asarray(sf.round(rng.standard_normal((3, k)) * np.exp2(rng.integers(-6, 3, (3, k))),
                            "fp16"), np.float64)
    B = np.asarray(sf.round(rng.uniform(0.5, 2, (k, 2)), "fp16"), np.float64)
    scale = 1.0 if acc != "e5m2" else 4.0
    C = np.asarray(sf.round(rng.standard_normal((3, 2)) * scale, acc), np.float64)
    D = tc.accum_gemm(A, B, C, acc_format=acc, mode=mode, order=order, block=block,
                      fused=fused, kahan=kahan)
    for i in range(3):
        for j in range(2):
            r = ref_element(list(A[i]), list(B[:, j]), float(C[i, j]), acc=acc, mode=mode,
                            order=order, block=block or (1 if order == "pairwise" else k),
                            fused=fused, kahan=kahan)
            assert float(D[i, j]) == r, (i, j, float(D[i, j]), r)


def test_accumulator_through_gemm_and_dot():
    acc = tc.Accumulator("bf16", "rtz", "blocked", 4, fused=False)
    A = np.asarray(sf.round(np.linspace(-3, 3, 24).reshape(2, 12), "fp16"), np.float32)
    B = np.asarray(sf.round(np.linspace(0.5, 1.5, 36).reshape(12, 3), "fp16"), np.float32)
    D1 = tc.gemm(A, B, model=acc)
    D2 = tc.accum_gemm(A, B, accumulator=acc)
    assert np.array_equal(D1, D2)
    assert tc.dot(A[1], B[:, 2], model=acc) == D1[1, 2]
    assert "bf16 accumulator, rtz, blocked, block 4, unfused" == acc.describe()


def test_fp16_accumulation_stagnates_fp32_does_not():
    # 4096 products 1 * 2^-10 (true sum 4): fp16 RNE stops growing at 2 (its ulp 2^-9 there
    # makes every addend of 2^-10 a tie to even), fp32 is exact, Kahan and pairwise rescue fp16.
    k = 4096
    A = np.ones((1, k), np.float32)
    B = np.full((k, 1), 2.0 ** -10, np.float32)
    seq16 = tc.accum_gemm(A, B, acc_format="fp16")[0, 0]
    assert seq16 == 2.0
    assert tc.accum_gemm(A, B, acc_format="fp32")[0, 0] == 4.0
    assert tc.accum_gemm(A, B, acc_format="fp16", kahan=True)[0, 0] == 4.0
    assert tc.accum_gemm(A, B, acc_format="fp16", order="pairwise")[0, 0] == 4.0
    assert tc.gemm(A, B, model="ideal-fp16")[0, 0] == 4.0


def test_stochastic_rounding_reproducible_and_unbiased():
    # 6000 products 2^-10 (true sum 5.859375): above 2 every addend is below half an fp16 ulp
    # or a tie, so RNE stagnates at 2; SR's expected value follows the true sum.
    k = 6000
    A = np.ones((8, k), np.float32)
    B = np.full((k, 8), 2.0 ** -10, np.float32)
    D1 = tc.accum_gemm(A, B, acc_format="fp16", mode="sr", seed=42)
    D2 = tc.accum_gemm(A, B, acc_format="fp16", mode="sr", seed=42)
    D3 = tc.accum_gemm(A, B, acc_format="fp16", mode="sr", seed=43)
    assert np.array_equal(D1, D2)
    assert not np.array_equal(D1, D3)
    assert np.all(tc.accum_gemm(A, B, acc_format="fp16") == 2.0)
    assert len(np.unique(D1)) > 1              # every element has its own random bits
    assert abs(float(D1.mean()) - k / 1024) < 0.1
    with pytest.raises(ValueError, match="needs seed"):
        tc.accum_gemm(A, B, acc_format="fp16", mode="sr")
    with pytest.raises(ValueError, match="sr_bits must be in 1..28"):
        tc.accum_gemm(A, B, acc_format="fp32", mode="sr", seed=1, sr_bits=30)


def test_flags_and_specials():
    f = sf.Flags()
    A = np.full((2, 4), 256.0, np.float32)
    B = np.full((4, 3), 256.0, np.float32)
    D = tc.accum_gemm(A, B, acc_format="fp16", flags=f)
    assert np.all(np.isinf(D)) and f.overflow == 6 and f.elements == 6
    A[0, 0] = np.nan
    D = tc.accum_gemm(A, B, acc_format="fp32")
    assert np.all(np.isnan(D[0])) and np.all(D[1] == 4 * 65536.0)


def test_accumulator_validation():
    with pytest.raises(ValueError, match="needs block"):
        tc.Accumulator("fp16", order="blocked")
    with pytest.raises(ValueError, match="kahan"):
        tc.Accumulator("fp16", order="pairwise", kahan=True)
    with pytest.raises(ValueError, match="order must be one of"):
        tc.Accumulator("fp16", order="tree")
    with pytest.raises(ValueError, match="at most 50"):
        tc.Accumulator("fp64")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        tc.Accumulator("fp16", mode="nearest_odd")
    with pytest.raises(ValueError, match="block applies"):
        tc.Accumulator("fp16", block=4)
