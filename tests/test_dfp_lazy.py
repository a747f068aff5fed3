"""dfp.quantize of dask arrays: lazy integers identical to the numpy call for any chunking,
stochastic rounding included (softfloat/dfp/_lazy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from softfloat import dfp

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

CHUNKINGS = [(7, 29), (5, 10), (1, 9)]        # whole rows, 2-D tiles, pieces of rows


@pytest.fixture(autouse=True)
def _synchronous():
    # one thread, no task-scheduling overhead: these are small arrays of many chunks
    with dask.config.set(scheduler="synchronous"):
        yield
LAYOUTS = [(None, None), (1, None), (0, None), (1, 8), (0, 5)]


def _data():
    rng = np.random.default_rng(3)
    x = np.clip(rng.standard_normal((19, 29)) * np.exp2(rng.integers(-25, 3, (19, 29))), -1.9, 1.9)
    x[4, :6] = [0.0, -0.0, 1e-30, -1e-30, 1.5, -1.5]
    # the tensor's maximum: at P = 12 (E = -9) it is the tie 2047.5, which RNE and RHU round to
    # 2^11: saturated
    x[9, 9] = 2047.5 * 2.0 ** -9
    return x.astype(np.float32)


def _same(t, ref):
    c = t.compute()
    assert not c.lazy and c.mantissa.dtype == np.int16
    assert np.array_equal(c.mantissa, ref.mantissa)
    assert np.array_equal(c.exponent, ref.exponent) and c.exponent.dtype == np.int32
    assert (c.saturated, c.underflowed) == (ref.saturated, ref.underflowed)
    assert (c.axis, c.block, c.bits) == (ref.axis, ref.block, ref.bits)


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("axis,block", LAYOUTS)
def test_equals_the_numpy_call(chunks, axis, block):
    x = _data()
    dx = da.from_array(x, chunks=chunks)
    for mode, seed in (("rne", None), ("sr", 17)) + ((("rhu", None),) if axis is None else ()):
        ref = dfp.quantize(x, 12, mode, axis=axis, block=block, seed=seed)
        t = dfp.quantize(dx, 12, mode, axis=axis, block=block, seed=seed)
        assert t.lazy and hasattr(t.mantissa, "compute")
        _same(t, ref)
        # the pieces are views of one intermediate: computed on their own they agree too
        assert np.array_equal(t.mantissa.compute(), ref.mantissa)
        assert int(t.saturated.compute()) == ref.saturated
        assert int(t.underflowed.compute()) == ref.underflowed
        d = t.dequantize(np.float32)
        assert hasattr(d, "compute") and np.array_equal(d.compute(), ref.dequantize(np.float32))
    if axis is None:
        assert ref.saturated > 0 and ref.underflowed > 0           # the counts are exercised


def test_stochastic_bits_use_the_global_index():
    """The SR bits of an element are those of its global flat index: quantizing a piece alone
    (its own flat index) gives other bits; the dask result does not depend on the chunking."""
    x = _data()
    outs = [dfp.quantize(da.from_array(x, chunks=c), 16, "sr", seed=5).compute().mantissa
            for c in CHUNKINGS]
    assert all(np.array_equal(o, outs[0]) for o in outs)
    whole = dfp.quantize(x, 16, "sr", seed=5)
    assert np.array_equal(outs[0], whole.mantissa)


def test_float16_and_float64_chunks_and_rechunking():
    x = _data()
    for arr in (x.astype(np.float16), x.astype(np.float64)):
        ref = dfp.quantize(arr, 16, axis=1, block=8)
        # chunk boundaries (every 10 columns) are not on blocks of 8: x is rechunked
        t = dfp.quantize(da.from_array(arr, chunks=(10, 10)), 16, axis=1, block=8)
        assert all(c % 8 == 0 for c in t.mantissa.chunks[1][:-1])
        _same(t, ref)


def test_errors():
    x = _data()
    x[3, 3] = np.nan
    x[5, 5] = np.inf
    with pytest.raises(ValueError, match=r"acts contains 1 NaN and 1 infinite"):
        dfp.quantize(da.from_array(x, chunks=(10, 10)), name="acts")     # eager: at call time
    with pytest.raises(TypeError, match="dask array of dtype int64 is not accepted"):
        dfp.quantize(da.from_array(np.ones((3, 3), np.int64), chunks=2))
    with pytest.raises(ValueError, match="only used by mode 'sr'"):
        dfp.quantize(da.from_array(_data(), chunks=5), seed=1)
    t = dfp.quantize(da.from_array(_data(), chunks=(10, 10)))
    with pytest.raises(TypeError, match="lazy DFPTensor.*compute"):
        dfp.gemm(t, dfp.quantize(np.ones((29, 2))))
    assert "lazy" in repr(t)
    assert t.compute().compute() is not None
