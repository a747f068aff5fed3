"""The floor row of bench/bench_autograd.py: its tc.gemm stand-in is the plain float64 product
cast to float32 (plus c), and the patch is undone after the epoch, even when the epoch fails."""

from __future__ import annotations

import numpy as np
import pytest

from bench import bench_autograd as BA
from softfloat import tensorcore as tc


def test_bare_dgemm_is_the_float64_product():
    rng = np.random.default_rng(0)
    for m, k, n in ((3, 5, 4), (7, 2, 9), (3, 5, 4)):        # buffers reused across shapes
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
        got = BA._bare_dgemm(a, b, c, model="ideal-fp32")
        assert got.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        want0 = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        assert np.array_equal(BA._bare_dgemm(a, b).view(np.uint32), want0.view(np.uint32))


def test_floor_epoch_patches_and_restores_gemm():
    real = tc.gemm
    seen = []

    def epoch():
        seen.append(tc.gemm)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        BA._floor_epoch(epoch)()
    assert seen == [BA._bare_dgemm]
    assert tc.gemm is real
