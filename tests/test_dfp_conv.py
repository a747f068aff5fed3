"""softfloat.dfp.im2col and conv2d (NCHW, PyTorch weight layout) through the DFP GEMM."""

from __future__ import annotations

import numpy as np
import pytest

from softfloat import dfp


def _im2col_loops(x, kh, kw, stride, padding):
    n, c, h, w = x.shape
    (sh, sw), (ph, pw) = stride, padding
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    cols = np.zeros((c * kh * kw, n * oh * ow), dtype=x.dtype)
    for ci in range(c):
        for ki in range(kh):
            for kj in range(kw):
                for b in range(n):
                    for i in range(oh):
                        for j in range(ow):
                            y, z = i * sh + ki - ph, j * sw + kj - pw
                            if 0 <= y < h and 0 <= z < w:
                                row, col = (ci * kh + ki) * kw + kj, (b * oh + i) * ow + j
                                cols[row, col] = x[b, ci, y, z]
    return cols


def _conv_direct(x, w, stride, padding):
    """Direct float64 cross-correlation (exact for these integer-times-power-of-two values)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return out


@pytest.mark.parametrize("stride,padding", [((1, 1), (0, 0)), ((2, 1), (1, 2)), ((3, 2), (2, 0))])
def test_im2col_against_loops(stride, padding):
    x = np.random.default_rng(0).integers(-9, 9, (2, 3, 7, 6))
    cols = dfp.im2col(x, 3, 2, stride=stride, padding=padding)
    np.testing.assert_array_equal(cols, _im2col_loops(x, 3, 2, stride, padding))
    t = dfp.quantize(x.astype(np.float32), 12)
    tc = dfp.im2col(t, 3, 2, stride=stride, padding=padding)
    assert int(tc.exponent) == int(t.exponent) and tc.bits == 12
    np.testing.assert_array_equal(tc.mantissa, _im2col_loops(t.mantissa, 3, 2, stride, padding))


@pytest.mark.parametrize("weight_exponent", ["tensor", "channel"])
@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), ((1, 2), (0, 1))])
def test_conv2d_equals_direct_convolution_of_dequantized_values(weight_exponent, stride,
                                                                 padding):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    w = (rng.standard_normal((4, 3, 3, 3)) * np.exp2(rng.integers(-6, 3, (4, 1, 1, 1)))).astype(
        np.float32)
    y, st = dfp.conv2d(x, w, stride=stride, padding=padding, weight_exponent=weight_exponent,
                       return_stats=True)
    assert st["wrap_events"] == 0                      # no overflow: the comparison is exact
    xq = dfp.quantize(x).dequantize()
    wq = dfp.quantize(w.reshape(4, -1), axis=1 if weight_exponent == "channel" else None)
    wq = wq.dequantize().reshape(w.shape)
    s = stride if isinstance(stride, tuple) else (stride, stride)
    p = padding if isinstance(padding, tuple) else (padding, padding)
    ref = _conv_direct(xq, wq, s, p)
    assert y.shape == ref.shape and y.dtype == np.float32
    np.testing.assert_array_equal(y, ref.astype(np.float32))
    # and close to the float convolution itself
    np.testing.assert_allclose(y, _conv_direct(x.astype(np.float64), w.astype(np.float64), s, p),
                               rtol=1e-3, atol=1e-3)


def test_conv2d_with_dfp_inputs_stats_and_errors():
    rng = np.random.default_rng(2)
    x = dfp.quantize(rng.standard_normal((1, 2, 5, 5)), 16)
    w = dfp.quantize(rng.standard_normal((3, 2, 2, 2)), 16)
    y, st = dfp.conv2d(x, w, chain_len=2, overflow="saturate", return_stats=True)
    ref = _conv_direct(x.dequantize(), w.dequantize(), (1, 1), (0, 0))
    assert st["chains_per_output"] == 4 and st["saturation_events"] == 0
    # fp32 sum of four once-rounded chains: within a few fp32 ulps of the largest term
    np.testing.assert_allclose(y, ref, rtol=0, atol=2.0 ** -20 * np.abs(ref).max())
    ys = dfp.conv2d(x.dequantize(), w.dequantize(), rounding="stochastic", seed=5)
    assert np.array_equal(ys, dfp.conv2d(x.dequantize(), w.dequantize(), rounding="stochastic",
                                         seed=5))
    with pytest.raises(ValueError, match="channels"):
        dfp.conv2d(np.ones((1, 3, 4, 4)), np.ones((2, 2, 3, 3)))
    with pytest.raises(ValueError, match="does not fit"):
        dfp.conv2d(np.ones((1, 2, 2, 2)), np.ones((2, 2, 3, 3)))
    with pytest.raises(ValueError, match="weight_exponent"):
        dfp.conv2d(np.ones((1, 2, 4, 4)), np.ones((2, 2, 3, 3)), weight_exponent="row")
    with pytest.raises(ValueError, match="NCHW"):
        dfp.im2col(np.ones((2, 4, 4)), 2, 2)
    with pytest.raises(ValueError, match="stride must be in"):
        dfp.im2col(np.ones((1, 1, 4, 4)), 2, 2, stride=0)
    with pytest.raises(ValueError, match="NaN"):
        dfp.conv2d(np.full((1, 2, 4, 4), np.nan), np.ones((2, 2, 3, 3)))
