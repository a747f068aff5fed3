"""softfloat.dfp.quantize and DFPTensor against the slow reference (tests/dfp_reference.py)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dfp_reference as R
from softfloat import dfp

LAYOUTS = [(None, None), (0, None), (1, None), (1, 5), (0, 3), (1, 1)]


def _data(rng, shape, dtype):
    """Signed values spread over many binades, some zeros and exact ties."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))
    x[rng.random(shape) < 0.1] = 0.0
    return x.astype(dtype)


def _check(x, bits, rounding, axis, block, scale_rule="floor", seed=None):
    t = dfp.quantize(x, bits, rounding, axis=axis, block=block, scale_rule=scale_rule,
                     seed=seed)
    m, es, sat, und = R.quantize(x, bits, rounding, axis, block, scale_rule, seed)
    np.testing.assert_array_equal(t.mantissa.astype(np.int64), m)
    ax = None if axis is None and block is None else (x.ndim - 1 if axis is None else axis)
    np.testing.assert_array_equal(t.exponent, R.exponent_array(es, x.shape, ax, block))
    assert (t.saturated, t.underflowed) == (sat, und)
    assert t.mantissa.dtype == np.int16 and t.exponent.dtype == np.int32
    return t


# DFP's four roundings at every width; softfloat's other modes (implemented by the same
# integer rounding) at one width.
MODE_BITS = ([(r, b) for r in ("nearest", "stochastic", "biased", "floor") for b in (8, 11, 16)]
             + [(m, 16) for m in ("rna", "rtz", "rup", "rto")])


@pytest.mark.parametrize("rounding,bits", MODE_BITS)
@pytest.mark.parametrize("axis,block", LAYOUTS)
def test_against_reference(rounding, bits, axis, block):
    rng = np.random.default_rng([bits, len(rounding), 0 if axis is None else axis + 1])
    for dtype in (np.float32, np.float64):
        x = _data(rng, (6, 13), dtype)
        seed = 1234 if rounding == "stochastic" else None
        _check(x, bits, rounding, axis, block, seed=seed)
        _check(x, bits, rounding, axis, block, scale_rule="ceil", seed=seed)


@pytest.mark.parametrize("rounding", ["nearest", "stochastic", "biased", "floor"])
def test_extreme_float64_and_float32_values(rounding):
    seed = 7 if rounding == "stochastic" else None
    x64 = np.array([5e-324, -2.2250738585072014e-308, 1e-310, 3.0, 0.0, 1e300, -1.7e308])
    x32 = np.array([1e-45, -1.17549435e-38, 3.4028235e38, -1.0, 2.5e-40], dtype=np.float32)
    for x in (x64, x32, x64[:3], x32[[0, 4]]):
        for axis, block in [(None, None), (0, 2)]:
            _check(x, 16, rounding, axis, block, seed=seed)
            _check(x, 8, rounding, axis, block, scale_rule="ceil", seed=seed)


@pytest.mark.parametrize("bits", [8, 16])
def test_boundaries(bits):
    lim = 2 ** (bits - 1) - 1
    scale = 2.0 ** -3
    # The largest integer is reached exactly, nothing saturates.
    t = dfp.quantize(np.array([lim, 1.0, -lim]) * scale, bits)
    assert int(t.exponent) == -3 and t.mantissa.tolist() == [lim, 1, -lim] and t.saturated == 0
    # lim + 1/2 is a tie whose even neighbour is 2^(P-1): it rounds up, saturates, is counted.
    x = np.array([lim + 0.5, -(lim + 0.5), 3.0]) * scale
    t = dfp.quantize(x, bits)
    assert t.mantissa.tolist() == [lim, -lim, 3] and t.saturated == 2
    # biased rounds the negative tie up (toward +inf): -lim, no saturation there.
    t = dfp.quantize(x, bits, "biased")
    assert t.mantissa.tolist() == [lim, -lim, 3] and t.saturated == 1
    # floor: lim + 0.5 -> lim; -(lim + 0.5) -> -(lim + 1) saturates.
    t = dfp.quantize(x, bits, "floor")
    assert t.mantissa.tolist() == [lim, -lim, 3] and t.saturated == 1
    # The ceil scale rule never saturates: it takes one more exponent step instead.
    t = dfp.quantize(x, bits, scale_rule="ceil")
    assert t.saturated == 0 and int(t.exponent) == -2
    assert t.mantissa.tolist() == [(lim + 1) // 2, -((lim + 1) // 2), 2]
    # ... and equals the floor rule whenever amax / 2^E_floor <= lim.
    y = np.array([lim, -2.0]) * scale
    assert int(dfp.quantize(y, bits, scale_rule="ceil").exponent) == -3
    # Shared exponent rule E_s = floor(log2 amax) - (P - 2): max|i| in [2^(P-2), 2^(P-1)).
    rng = np.random.default_rng(bits)
    z = rng.standard_normal((40, 30)) * 1e-5
    t = dfp.quantize(z, bits, axis=1)
    top = np.abs(t.mantissa).max(axis=1)
    assert top.min() >= 2 ** (bits - 2) and top.max() <= lim


def test_all_zero_tensor_and_blocks():
    t = dfp.quantize(np.zeros((3, 4), np.float32))
    assert int(t.exponent) == 0 and not t.mantissa.any() and t.saturated == t.underflowed == 0
    assert np.array_equal(t.dequantize(), np.zeros((3, 4)))
    x = np.zeros((2, 8))
    x[1, 5] = 0.75
    t = dfp.quantize(x, 16, axis=1, block=4)
    assert t.exponent.tolist() == [[0, 0], [0, -15]]
    assert t.mantissa[1, 5] == 0.75 * 2 ** 15
    e = dfp.quantize(np.zeros(0))
    assert e.mantissa.shape == (0,) and int(e.exponent) == 0


def test_outlier_next_to_tiny_values_underflows():
    x = np.array([1.0e4, 0.3, 1.0e-3, -2.0e-4, -0.75, 0.0])
    t = _check(x, 16, "nearest", None, None)
    # E_s = floor(log2 1e4) - 14 = 13 - 14 = -1: the grid step is 1/2.
    assert int(t.exponent) == -1
    assert t.mantissa.tolist() == [20000, 1, 0, 0, -2, 0]
    assert t.underflowed == 2                          # 1e-3 and -2e-4 became 0 (0.0 not counted)
    # In blocks of 2 the tiny pair has its own exponent and keeps 15 bits.
    tb = _check(x, 16, "nearest", 0, 2)
    assert tb.underflowed == 0 and tb.exponent.tolist() == [-1, -24, -15]
    np.testing.assert_allclose(tb.dequantize()[2:], x[2:], rtol=2.0 ** -11)  # 1e-3 / 2e-4 < 2^3


def test_dequantize_is_exact():
    rng = np.random.default_rng(5)
    x = _data(rng, (7, 9), np.float32)
    t = dfp.quantize(x, 12, axis=0, block=2)
    v = t.dequantize()
    e = t.expanded_exponent()
    for idx in np.ndindex(x.shape):
        assert R.Fraction(v[idx]) == int(t.mantissa[idx]) * R.pow2(int(e[idx]))
    assert t.dequantize(np.float32).dtype == np.float32


def test_stochastic_rounding():
    x = np.full(50_000, 0.3) * np.array([1.0, -1.0] * 25_000)
    x[0] = 1.0                                          # E_s = -14: 0.3 * 2^14 = 4915.2
    with pytest.raises(ValueError, match="needs seed"):
        dfp.quantize(x, rounding="stochastic")
    t1 = dfp.quantize(x, rounding="stochastic", seed=99)
    t2 = dfp.quantize(x, rounding="stochastic", seed=99)
    assert np.array_equal(t1.mantissa, t2.mantissa)
    assert not np.array_equal(t1.mantissa, dfp.quantize(x, rounding="stochastic",
                                                        seed=100).mantissa)
    m = np.abs(t1.mantissa[1:].astype(np.int64))
    assert set(np.unique(m).tolist()) == {4915, 4916}
    # P(up) = 0.2: the mean is within 6 standard deviations of 4915.2.
    sd = np.sqrt(0.2 * 0.8 / m.size)
    assert abs(m.mean() - 4915.2) < 6 * sd
    # Thread count does not change a single bit.
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        t3 = dfp.quantize(x, rounding="stochastic", seed=99)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(t1.mantissa, t3.mantissa)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_inf_is_an_error(bad):
    x = np.ones((3, 3), np.float32)
    x[1, 2] = bad
    with pytest.raises(ValueError, match=r"activations contains \d NaN and \d infinite"):
        dfp.quantize(x, name="activations")


def test_argument_errors():
    x = np.ones(4)
    with pytest.raises(ValueError, match="bits must be in 8..16"):
        dfp.quantize(x, 17)
    with pytest.raises(ValueError, match="bits must be in 8..16"):
        dfp.quantize(x, 7)
    with pytest.raises(TypeError, match="bits must be an int"):
        dfp.quantize(x, 16.0)
    with pytest.raises(ValueError, match="unknown rounding mode 'upward_ish'; accepted: .*rne "
                                         r"\(alias nearest\), sr \(stochastic\), rhu \(biased"):
        dfp.quantize(x, 16, "upward_ish")
    with pytest.raises(ValueError, match="scale_rule"):
        dfp.quantize(x, scale_rule="round")
    with pytest.raises(ValueError, match="deterministic rounding mode 'rne'.*only used by mode "
                                         "'sr'"):
        dfp.quantize(x, seed=3)
    with pytest.raises(ValueError, match="block must be in"):
        dfp.quantize(x, block=0)
    with pytest.raises(ValueError, match="axis must be in"):
        dfp.quantize(np.ones((2, 2)), axis=2)
    with pytest.raises(TypeError, match="dtype complex128 is not accepted"):
        dfp.quantize(np.ones(3, dtype=np.complex128))
    # a block without an axis is along the last axis
    t = dfp.quantize(np.ones((2, 6)), block=4)
    assert (t.axis, t.block, t.exponent.shape) == (1, 4, (2, 2))


def test_dfptensor_validation():
    with pytest.raises(ValueError, match="out of range for bits=8"):
        dfp.DFPTensor(np.array([128]), 0, 8)
    with pytest.raises(ValueError, match="out of range"):
        dfp.DFPTensor(np.array([-32768]), 0, 16)     # symmetric: -2^15 is not a DFP-16 value
    with pytest.raises(ValueError, match="exponent shape"):
        dfp.DFPTensor(np.zeros((2, 3), np.int16), np.zeros((2, 3)).astype(int), axis=1)
    with pytest.raises(TypeError, match="integer array"):
        dfp.DFPTensor(np.zeros(3), 0)
    t = dfp.DFPTensor(np.arange(6).reshape(2, 3), np.array([[1], [2]]), 16, axis=1)
    assert t.dequantize().tolist() == [[0, 2, 4], [12, 16, 20]]
    assert "axis=1" in repr(t)
