"""mx.quantize of dask arrays: lazy, and bit-identical to the numpy call on the whole array for
any chunking (uneven chunks, chunks along any axis, 2-D blocks), stochastic rounding included."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from softfloat import mx


def _same(lazy, eager):
    got = lazy.compute()
    assert not got.lazy and lazy.lazy
    for name in ("elements", "element_bits", "scales", "scale_bits"):
        a, b = getattr(got, name), getattr(eager, name)
        assert a.shape == b.shape, name
        assert np.array_equal(a.view(np.uint32) if a.dtype == np.float32 else a,
                              b.view(np.uint32) if b.dtype == np.float32 else b), name
    assert (got.saturated, got.flushed) == (eager.saturated, eager.flushed)
    assert int(lazy.saturated.compute()) == eager.saturated
    d = lazy.dequantize().compute()
    assert np.array_equal(d.view(np.uint32), eager.dequantize().view(np.uint32))
    assert np.array_equal(lazy.pack(), eager.pack())


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 12, shape)
    return x.astype(np.float32)


CHUNKINGS = [(7, 50), (25, 13), ((5, 20, 3, 12), (64, 16, 20))]


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("fmt,kw", [
    ("mxfp8_e4m3", {}),
    ("mxfp4_e2m1", {"mode": "sr", "seed": 3, "scale_rule": "rceil"}),
    ("mxint8", {"axis": 0}),
    ("nvfp4", {"tensor_scale": 0.01, "mode": "sr", "seed": 5}),
    ("nvfp4", {"block": (16, 16)}),
])
def test_lazy_equals_numpy(chunks, fmt, kw):
    x = _data((40, 100))
    eager = mx.quantize(x, fmt, **kw)
    lazy = mx.quantize(da.from_array(x, chunks=chunks), fmt, **kw)
    assert lazy.lazy and lazy.scales.shape == eager.scales.shape
    _same(lazy, eager)


def test_three_dimensional_and_index_offset():
    x = _data((6, 10, 33), seed=1)
    for kw in ({"mode": "sr", "seed": 9, "index_offset": 1000}, {"block": (8, 8)}):
        eager = mx.quantize(x, "mxfp6_e3m2", **kw)
        _same(mx.quantize(da.from_array(x, chunks=(4, 3, 11)), "mxfp6_e3m2", **kw), eager)


def test_errors_are_those_of_the_numpy_call():
    x = da.from_array(_data((8, 32)), chunks=4)
    with pytest.raises(ValueError, match="seed is only used by mode 'sr'"):
        mx.quantize(x, "mxfp8_e4m3", seed=1)
    with pytest.raises(ValueError, match="scale_rule"):
        mx.quantize(x, "mxfp8_e4m3", scale_rule="round")
    with pytest.raises(ValueError, match="float32"):
        mx.quantize(x.astype(np.float64), "nvfp4")
    with pytest.raises(TypeError, match="dtype int64"):
        mx.quantize(da.from_array(np.arange(32)), "mxfp8_e4m3")
    q = mx.quantize(x, "mxfp8_e4m3")
    with pytest.raises(TypeError, match="lazy BlockTensor"):
        mx.gemm(q, mx.quantize(_data((32, 4)), "mxfp8_e4m3", axis=0))
