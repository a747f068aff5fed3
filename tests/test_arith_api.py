"""sf.add/sub/mul/div/sqrt/fma: API behaviour, IEEE special cases, float64 operands, and the
oracle comparison for formats with unusual options (flush-to-zero, saturation, no Inf/NaN, an
11-bit exponent that lets float64 operands overflow the float64 sum)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from oracle_extra import make_cases, rational_op
from oracle_mpfr import mpfr_op
from test_arith import API, MODES, OPS, run_api, run_scalar, same, stable_seed

import softfloat as sf

FTZ = sf.Format("fp16_ftz", 5, 10, subnormals=False)
SAT = sf.Format("e4m3_sat", 4, 3, inf_nan="fn", saturate=True)
NONE = sf.Format("e3m2_none", 3, 2, inf_nan="none")
WIDE = sf.Format("e11m20", 11, 20)
FLAG_BITS = {"inexact": 1, "underflow": 2, "overflow": 4, "invalid": 8, "divbyzero": 16}


@pytest.mark.parametrize("fmt", [FTZ, SAT, NONE, WIDE], ids=lambda f: f.name)
@pytest.mark.parametrize("op", OPS)
def test_unusual_formats_against_both_oracles(op, fmt):
    rng = np.random.default_rng(stable_seed("unusual", op, fmt.name))
    cases = make_cases(op, fmt, rng, n_special=150, n_tie=60, n_random=50, n_off=40)
    if fmt is WIDE and op in ("add", "sub", "fma"):
        # float64 operands near 2^1024: their float64 sum overflows (the scaled path).
        big = np.array([[1.7e308, 1.7e308], [1.7976931348623157e308, 5e-324],
                        [-1.7976931348623157e308, -1e-300], [1.5e308, -1.7e308]])
        extra = big if op != "fma" else np.c_[big[:, :1], np.ones(4), big[:, 1:]]
        cases = np.concatenate([cases, extra if op != "sub" else extra * [1, -1]])
    failures = []
    for mode in MODES:
        got = run_api(op, cases, fmt, mode)
        res, fls = run_scalar(op, cases, fmt, mode)
        assert same(got, res).all()
        for i, row in enumerate(cases):
            args = [float(x) for x in row]
            for oracle in (rational_op, mpfr_op):
                want, wflags = oracle(op, args, fmt, mode)
                word = sum(FLAG_BITS[n] for n in wflags)
                if not same(want, res[i]) or word != fls[i]:
                    failures.append((oracle.__name__, mode, args, want, sorted(wflags),
                                     float(res[i]), int(fls[i])))
    assert not failures, f"{len(failures)} mismatches, first: {failures[:5]}"


# ----- IEEE special cases, written out ----------------------------------------------------------

def check(fn, args, fmt, want, flags, mode="rne"):
    f = sf.Flags()
    got = fn(*args, fmt, mode, flags=f)
    assert same(got, want), (fn.__name__, args, fmt, mode, got, want)
    raised = {n for n in FLAG_BITS if getattr(f, n)}
    assert raised == set(flags), (fn.__name__, args, raised, flags)


def test_invalid_operations_give_nan_and_invalid():
    inf, nan = math.inf, math.nan
    check(sf.add, (inf, -inf), "fp16", nan, {"invalid"})
    check(sf.sub, (inf, inf), "fp16", nan, {"invalid"})
    check(sf.mul, (0.0, -inf), "bf16", nan, {"invalid"})
    check(sf.div, (0.0, -0.0), "fp32", nan, {"invalid"})
    check(sf.div, (inf, -inf), "e5m2", nan, {"invalid"})
    check(sf.sqrt, (-1e-30,), "fp16", nan, {"invalid"})
    check(sf.sqrt, (-inf,), "fp16", nan, {"invalid"})
    check(sf.fma, (0.0, inf, 1.0), "fp16", nan, {"invalid"})
    check(sf.fma, (2.0, inf, -inf), "fp16", nan, {"invalid"})
    # A quiet NaN operand propagates without a flag, also fma(0, inf, NaN) (IEEE leaves that
    # one to the implementation; we raise nothing).
    check(sf.add, (nan, 1.0), "fp16", nan, set())
    check(sf.fma, (0.0, inf, nan), "fp16", nan, set())
    # Formats without NaN still return a NaN carrier, and raise invalid.
    check(sf.add, (nan, 1.0), NONE, nan, {"invalid"})


def test_division_by_zero_per_inf_nan_style():
    check(sf.div, (1.0, 0.0), "fp16", math.inf, {"divbyzero"})
    check(sf.div, (1.0, -0.0), "fp16", -math.inf, {"divbyzero"})
    check(sf.div, (-3.0, 0.0), "bf16", -math.inf, {"divbyzero"}, mode="rtz")
    check(sf.div, (1.0, 0.0), "e4m3fn", math.nan, {"divbyzero"})     # fn: no Inf -> NaN
    check(sf.div, (-1.0, 0.0), SAT, -448.0, {"divbyzero"})            # saturating: +-max
    check(sf.div, (1.0, 0.0), NONE, NONE.max, {"divbyzero"})          # no Inf/NaN: +-max
    check(sf.div, (1.0, math.inf), "fp16", 0.0, set())
    check(sf.div, (-1.0, math.inf), "fp16", -0.0, set())


def test_signs_of_exact_zeros():
    for mode in ("rne", "rna", "rtz", "rup", "rto"):
        check(sf.add, (1.5, -1.5), "fp16", 0.0, set(), mode)
        check(sf.sub, (2.0, 2.0), "bf16", 0.0, set(), mode)
        check(sf.fma, (2.0, 3.0, -6.0), "fp32", 0.0, set(), mode)
        check(sf.add, (-0.0, 0.0), "fp16", 0.0, set(), mode)
    check(sf.add, (1.5, -1.5), "fp16", -0.0, set(), "rdn")
    check(sf.fma, (2.0, 3.0, -6.0), "fp32", -0.0, set(), "rdn")
    check(sf.add, (-0.0, 0.0), "fp16", -0.0, set(), "rdn")
    check(sf.add, (-0.0, -0.0), "fp16", -0.0, set(), "rne")
    check(sf.sub, (-0.0, 0.0), "fp16", -0.0, set(), "rne")
    check(sf.mul, (-0.0, 5.0), "fp16", -0.0, set())
    check(sf.div, (0.0, -5.0), "fp16", -0.0, set())
    check(sf.sqrt, (-0.0,), "fp16", -0.0, set())
    check(sf.fma, (-0.0, 1.0, 0.0), "fp16", 0.0, set())
    check(sf.fma, (-0.0, 1.0, -0.0), "fp16", -0.0, set())
    # A nonzero result that rounds to zero keeps its sign (underflow, inexact).
    check(sf.mul, (-1e-5, 1e-5), "fp16", -0.0, {"underflow", "inexact"})


def test_infinities_and_overflow():
    check(sf.add, (math.inf, 1.0), "fp16", math.inf, set())
    check(sf.add, (65504.0, 8.0), "fp16", 65504.0, {"inexact"})              # below the tie
    check(sf.add, (65504.0, 16.0), "fp16", math.inf, {"overflow", "inexact"})  # tie to even
    check(sf.add, (65504.0, 8.0), "fp16", math.inf, {"overflow", "inexact"}, "rup")
    check(sf.add, (65504.0, 16.0), "fp16", 65504.0, {"inexact"}, "rtz")          # no overflow
    check(sf.mul, (300.0, 2.0), "e4m3fn", math.nan, {"overflow", "inexact"})
    check(sf.mul, (300.0, 2.0), "e4m3fn", 448.0, {"overflow", "inexact"}, "rtz")
    check(sf.mul, (300.0, 2.0), SAT, 448.0, {"overflow", "inexact"})
    # An exact infinite result in a format without Inf is NaN and invalid, in every mode, as a
    # converted Inf (OCP FP8 conversion rules); a saturating format gives +-max.
    for mode in ("rne", "rtz", "rup", "rdn"):
        check(sf.add, (math.inf, 1.0), "e4m3fn", math.nan, {"invalid"}, mode)
        check(sf.add, (-math.inf, 1.0), SAT, -448.0, {"invalid"}, mode)


def test_float64_operands_are_not_rounded_through_float32():
    # 2^-11 + 2^-40 is 2^-11 in float32; 1 + 2^-11 would then be a tie rounding to 1.0.
    assert sf.add(1.0, 2.0 ** -11 + 2.0 ** -40, "fp16") == 1.0 + 2.0 ** -10
    assert sf.add(1.0, 2.0 ** -11 - 2.0 ** -40, "fp16") == 1.0
    # The float64 sum 1 + 2^-11 is exact in float64 but 2^-80 below it decides (TwoSum).
    assert sf.add(1.0 + 2.0 ** -11, -(2.0 ** -80), "fp16", "rne") == 1.0
    assert sf.add(1.0 + 2.0 ** -11, 2.0 ** -80, "fp16", "rtz") == 1.0
    assert sf.add(1.0 + 2.0 ** -11, 2.0 ** -80, "fp16", "rne") == 1.0 + 2.0 ** -10
    # fl(3 * b) is exactly a tie T of fp16 while the exact 3 * b is not: the product's error
    # term decides (a kernel rounding fl(3 * b) would round the tie to even).
    for k in range(1, 1024, 2):
        T = 1.0 + k * 2.0 ** -11
        b = T / 3.0
        if 3.0 * b == T and 3 * Fraction(b) != Fraction(T):
            break
    above = 3 * Fraction(b) > Fraction(T)
    want = T + 2.0 ** -11 if above else T - 2.0 ** -11
    assert sf.mul(3.0, b, "fp16") == want
    assert sf.sqrt(np.float64(1.0 + 2.0 ** -52), "fp16", "rup") == 1.0 + 2.0 ** -10


# ----- API ---------------------------------------------------------------------------------------

def test_broadcasting_dtypes_and_scalars():
    a = np.arange(3, dtype=np.float32)[:, None] + 0.25
    b = np.linspace(-1, 1, 4)[None, :]
    got = sf.mul(a, b, "bf16", "rtz")
    assert got.shape == (3, 4) and got.dtype == np.float32
    want = np.array([[sf.mul(float(x), float(y), "bf16", "rtz") for y in b[0]] for x in a[:, 0]])
    assert same(got, want).all()
    r = sf.add(1.0, 2.0, "fp16")
    assert isinstance(r, np.float32) and r == 3.0
    assert sf.fma([1.0, 2.0], 3.0, [[0.5], [1.5]], "fp16").shape == (2, 2)
    assert sf.sqrt(np.float16([4.0, 2.0]), "fp16").dtype == np.float32
    assert sf.add(np.ones((0, 3), np.float32), 1.0, "fp16").shape == (0, 3)
    x = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]              # non-contiguous
    assert same(sf.sub(x, 1.0, "fp16"), sf.sub(np.ascontiguousarray(x), 1.0, "fp16")).all()
    assert sf.add(1.0, 2.0, "tf32") == 3.0


def test_scalar_broadcast_fast_path_matches_general_path():
    rng = np.random.default_rng(5)
    x = sf.round(rng.standard_normal(40000).astype(np.float32), "fp16")
    s = np.float32(0.3330078125)
    for op in ("add", "sub", "mul"):
        for mode in ("rne", "rup", "rto"):
            one = API[op](x, s, "fp16", mode)
            full = API[op](x, np.full_like(x, s), "fp16", mode)
            gen = API[op](x.astype(np.float64), np.float64(s), "fp16", mode)
            assert same(one, full).all() and same(one, gen).all()
            assert same(API[op](s, x, "fp16", mode), API[op](np.full_like(x, s), x, "fp16",
                                                             mode)).all()


def test_bad_arguments():
    # integer arrays are operands (exact up to 2^53); beyond, a ValueError names the limit
    assert sf.add(np.arange(3), 1.0, "fp16").tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="2\\*\\*53"):
        sf.add(np.array([2 ** 60 + 1]), 1.0, "fp16")
    with pytest.raises(TypeError, match="complex"):
        sf.add(np.arange(3) + 1j, 1.0, "fp16")
    with pytest.raises(TypeError, match="bool"):
        sf.mul(True, 1.0, "fp16")
    with pytest.raises(ValueError, match="broadcast"):
        sf.add(np.zeros(3), np.zeros(4), "fp16")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        sf.div(1.0, 3.0, "fp16", "nearest_odd")
    with pytest.raises(ValueError, match="unknown format"):
        sf.sqrt(2.0, "fp17")
    with pytest.raises(ValueError, match="at most 51"):
        sf.add(1.0, 2.0, "fp64")
    with pytest.raises(ValueError, match="seed"):
        sf.add(1.0, 2.0, "fp16", "sr")
    with pytest.raises(ValueError, match="sr_bits"):
        sf.fma(1.0, 2.0, 3.0, "fp16", "rne", sr_bits=8)
    with pytest.raises(TypeError, match="Flags"):
        sf.mul(1.0, 2.0, "fp16", flags={})
    with pytest.raises(TypeError, match="complex"):
        sf.sub(1j, 1.0, "fp16")
