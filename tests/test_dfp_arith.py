"""The seed's DFP arithmetic (mul, add, add_to_fp32, down_convert) against dfp_reference."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dfp_reference as R
from softfloat import dfp
from softfloat.dfp._quantize import lzc32
from softfloat.dfp._tensor import exponent_shape, normalize_layout


def _rand_dfp(rng, shape, bits, axis=None, block=None, lo=-20, hi=20):
    lim = 2 ** (bits - 1) - 1
    m = rng.integers(-lim, lim + 1, shape)
    m[rng.random(shape) < 0.15] = 0
    ax, bl = normalize_layout(len(shape), axis, block)
    e = rng.integers(lo, hi, exponent_shape(shape, ax, bl))
    return dfp.DFPTensor(m, e, bits, axis=axis, block=block)


def _blocks(t):
    out = []
    for idx in np.ndindex(t.shape):
        out.append(R.block_of(idx, t.axis, t.block))
    return out


@pytest.mark.parametrize("la,lb", [((None, None), (None, None)), ((1, 3), (1, 3)),
                                   ((None, None), (0, None)), ((1, None), (None, None))])
def test_mul(la, lb):
    rng = np.random.default_rng(1)
    a = _rand_dfp(rng, (4, 7), 16, *la)
    b = _rand_dfp(rng, (4, 7), 16, *lb)
    p = dfp.mul(a, b)
    assert p.bits == 32 and p.mantissa.dtype == np.int32
    ea, eb, ep = a.expanded_exponent(), b.expanded_exponent(), p.expanded_exponent()
    for idx in np.ndindex(a.shape):
        assert int(p.mantissa[idx]) == int(a.mantissa[idx]) * int(b.mantissa[idx])
        assert ep[idx] == ea[idx] + eb[idx]
    assert p.layout == (la if la != (None, None) else lb)
    # extremes: (2^15 - 1)^2 fits
    big = dfp.DFPTensor(np.array([32767, -32767]), 3)
    assert dfp.mul(big, big).mantissa.tolist() == [32767 ** 2] * 2
    with pytest.raises(ValueError, match="at most 32"):
        dfp.mul(dfp.mul(big, big), big)
    with pytest.raises(ValueError, match="layouts differ"):
        dfp.mul(_rand_dfp(rng, (4, 7), 8, 1, None), _rand_dfp(rng, (4, 7), 8, 0, None))
    with pytest.raises(ValueError, match="shapes differ"):
        dfp.mul(big, dfp.DFPTensor(np.array([1, 2, 3]), 0))
    with pytest.raises(TypeError, match="DFPTensor"):
        dfp.mul(big, np.ones(2))


@pytest.mark.parametrize("layout", [(None, None), (1, 2), (0, None)])
def test_add_against_reference(layout):
    rng = np.random.default_rng(2)
    for trial in range(20):
        a = _rand_dfp(rng, (3, 5), 16, *layout, lo=-40, hi=40)
        b = _rand_dfp(rng, (3, 5), 16, *layout, lo=-40, hi=40)
        if trial % 5 == 0:                                # an all-zero operand somewhere
            a = dfp.DFPTensor(np.zeros((3, 5), int), a.exponent, 16, axis=a.axis, block=a.block)
        s = dfp.add(a, b)
        za = {k for k in _blocks(a)}
        zero_a = {k: True for k in za}
        zero_b = dict(zero_a)
        for idx, k in zip(np.ndindex(a.shape), _blocks(a)):
            zero_a[k] &= a.mantissa[idx] == 0
            zero_b[k] &= b.mantissa[idx] == 0
        ea, eb, es = a.expanded_exponent(), b.expanded_exponent(), s.expanded_exponent()
        for idx, k in zip(np.ndindex(a.shape), _blocks(a)):
            i, e = R.add(int(a.mantissa[idx]), int(ea[idx]), int(b.mantissa[idx]), int(eb[idx]),
                         zero_a[k], zero_b[k])
            assert (int(s.mantissa[idx]), int(es[idx])) == (i, e)


def test_add_alignment_is_a_floor_shift():
    a = dfp.DFPTensor(np.array([5, -5, 1, -1]), 2)       # 20, -20, 4, -4
    b = dfp.DFPTensor(np.array([3, 3, -3, -3]), 0)       # 3, 3, -3, -3
    s = dfp.add(a, b)
    # b >> 2: 3 -> 0, -3 -> -1 (toward -inf)
    assert int(s.exponent) == 2 and s.mantissa.tolist() == [5, -5, 0, -2]
    far = dfp.add(a, dfp.DFPTensor(np.array([-7, 7, 0, 1]), -200))   # shift >= 63
    assert far.mantissa.tolist() == [4, -5, 1, -1]
    z = dfp.add(dfp.DFPTensor(np.zeros(4, int), 0), dfp.DFPTensor(np.array([1, 2, 3, 4]), -9))
    assert int(z.exponent) == -9 and z.mantissa.tolist() == [1, 2, 3, 4]   # zero is exact


def test_add_to_fp32_against_reference():
    rng = np.random.default_rng(3)
    n = 3000
    ia = rng.integers(-2 ** 31, 2 ** 31, n)
    ib = rng.integers(-2 ** 31, 2 ** 31, n)
    ib[::7] = -ia[::7]                                   # exact cancellations
    ib[1::11] = 0
    ia[2::13] = rng.integers(-3, 4, ia[2::13].size)
    ea = rng.integers(-200, 100, n)
    eb = ea + rng.integers(-90, 90, n)
    eb[3::5] = ea[3::5] + rng.integers(28, 36, eb[3::5].size)   # around the exact/proxy switch
    ea[4::17] = -185                                           # fp32 subnormal results
    eb[4::17] = -186
    ea[5::19] = 100                                            # overflow to Inf
    ia[6::23] = 2 ** 24 + 1                                    # ties and near ties
    ib[6::23] = 1
    eb[6::23] = ea[6::23] - rng.integers(0, 3, ea[6::23].size)
    ia[7::29] = -2 ** 31
    # blocks of one element: every element has its own exponent
    a = dfp.DFPTensor(ia, ea, 32, axis=0, block=1)
    b = dfp.DFPTensor(ib, eb, 32, axis=0, block=1)
    out = dfp.add_to_fp32(a, b)
    for f in range(n):
        exact = Fraction(int(ia[f])) * R.pow2(int(ea[f])) + Fraction(int(ib[f])) * R.pow2(
            int(eb[f]))
        want = R.round_f32(exact)
        got = float(out[f])
        assert got == want and math.copysign(1, got) == math.copysign(1, want), (f, exact)


def test_add_to_fp32_layouts():
    rng = np.random.default_rng(4)
    a = dfp.mul(_rand_dfp(rng, (5, 6), 16, 1, 4), _rand_dfp(rng, (5, 6), 16, 1, 4))
    b = dfp.mul(_rand_dfp(rng, (5, 6), 16), _rand_dfp(rng, (5, 6), 16))
    s = dfp.add_to_fp32(a, b)
    va, vb = a.expanded_exponent(), b.expanded_exponent()
    for idx in np.ndindex(s.shape):
        exact = (Fraction(int(a.mantissa[idx])) * R.pow2(int(va[idx]))
                 + Fraction(int(b.mantissa[idx])) * R.pow2(int(vb[idx])))
        assert float(s[idx]) == R.round_f32(exact)
    assert s.dtype == np.float32


BOUNDARY = [32767, 32768, 2 ** 31 - 1, -2 ** 31, 0, 1, -32767, -32768, 65535, 2 ** 30]


@pytest.mark.parametrize("rounding", ["nearest", "stochastic", "biased", "floor"])
@pytest.mark.parametrize("bits", [8, 12, 16])
def test_down_convert_against_reference(rounding, bits):
    rng = np.random.default_rng(bits)
    seed = 11 if rounding == "stochastic" else None
    # one block per boundary value (block of 3: the value and two random small neighbours)
    m = np.zeros((len(BOUNDARY), 3), dtype=np.int64)
    m[:, 0] = BOUNDARY
    m[:, 1:] = rng.integers(-2 ** 20, 2 ** 20, (len(BOUNDARY), 2)) >> rng.integers(0, 20, (
        len(BOUNDARY), 2))
    m[4, 1:] = 0                                          # an all-zero block
    t = dfp.DFPTensor(m, rng.integers(-30, 30, (len(BOUNDARY), 1)), 32, axis=1)
    d = dfp.down_convert(t, bits, rounding, seed=seed)
    ref_m, ref_e, sat = R.down_convert(m, t.expanded_exponent(), _blocks(t), bits, rounding,
                                       seed)
    np.testing.assert_array_equal(d.mantissa.astype(np.int64), ref_m)
    np.testing.assert_array_equal(d.expanded_exponent(), ref_e)
    assert d.saturated == sat and d.bits == bits and d.layout == (1, None)
    # per tensor too
    flat = dfp.DFPTensor(m.reshape(-1)[:9], 5, 32)
    d = dfp.down_convert(flat, bits, rounding, seed=seed)
    ref_m, ref_e, sat = R.down_convert(m.reshape(-1)[:9], np.full(9, 5), [()] * 9, bits,
                                       rounding, seed)
    np.testing.assert_array_equal(d.mantissa.astype(np.int64), ref_m)
    assert int(d.exponent) == ref_e[0] and d.saturated == sat


def test_down_convert_lzc_boundaries_p16():
    def one(v, rounding="nearest"):
        d = dfp.down_convert(dfp.DFPTensor(np.array([v]), 0, 32), 16, rounding)
        return int(d.exponent), int(d.mantissa[0]), d.saturated
    # R_s = max(0, (33 - P) - LZC32(max|I|)) = max(0, bit_length - 15)
    assert one(32767) == (0, 32767, 0)                   # already fits: untouched
    assert one(32768) == (1, 16384, 0)
    assert one(2 ** 31 - 1) == (16, 32767, 1)            # rounds to 32768: saturated, counted
    assert one(2 ** 31 - 1, "floor") == (16, 32767, 0)
    assert one(-2 ** 31) == (17, -16384, 0)
    assert one(0) == (0, 0, 0)
    assert lzc32(np.array([0, 1, 32767, 32768, 2 ** 31 - 1, -2 ** 31])).tolist() == [
        32, 31, 17, 16, 1, 0]


def test_down_convert_requires_seed_for_stochastic():
    t = dfp.DFPTensor(np.array([70000]), 0, 32)
    with pytest.raises(ValueError, match="seed"):
        dfp.down_convert(t, 16, "stochastic")
    with pytest.raises(TypeError, match="DFPTensor"):
        dfp.down_convert(np.array([1]), 16)
