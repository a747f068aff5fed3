"""softfloat.dfp.gemm (VNNI int32 chains, overflow management) against tests/dfp_reference.py."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dfp_reference as R
from softfloat import dfp

I32_MAX = 2 ** 31 - 1


def _operand(rng, shape, bits, layout, big=False, lo=-12, hi=4):
    """A random DFP operand; ``big``: many values near 2^(P-1) so that int32 chains overflow."""
    lim = 2 ** (bits - 1) - 1
    if big:
        m = rng.choice([lim, lim - 1, -lim, lim // 2, -(lim // 3), 0], size=shape)
    else:
        m = rng.integers(-lim, lim + 1, shape) >> rng.integers(0, bits - 1, shape)
    axis, block = layout
    if axis is None:
        e = rng.integers(lo, hi)
    else:
        n = shape[axis]
        nb = max(-(-n // block), 1) if block else 1
        eshape = list(shape)
        eshape[axis] = nb
        e = rng.integers(lo, hi, eshape)
    return dfp.DFPTensor(m, e, bits, axis=axis, block=block)


def _efn(t, red_axis):
    ee = t.expanded_exponent()
    if red_axis == 1:
        return lambda i, k: int(ee[i, k])
    return lambda k, j: int(ee[k, j])


def _compare(A, B, **kw):
    D, st = dfp.gemm(A, B, return_stats=True, **kw)
    shift = kw.get("input_shift", 0)
    sa, sb = shift if isinstance(shift, tuple) else (shift, shift)
    ref, rst = R.gemm(A.mantissa, _efn(A, 1), B.mantissa, _efn(B, 0), block_a=A.block,
                      block_b=B.block, chain_len=kw.get("chain_len"),
                      overflow=kw.get("overflow", "wrap"), shift_a=sa, shift_b=sb)
    assert D.dtype == np.float32 and D.shape == ref.shape
    np.testing.assert_array_equal(D.view(np.uint32), ref.view(np.uint32))
    ev = st["wrap_events"] + st["saturation_events"]
    assert ev == rst["events"]
    if kw.get("overflow", "wrap") == "wrap":
        assert st["saturation_events"] == 0
    else:
        assert st["wrap_events"] == 0
    assert st["overflowed_chains"] == rst["bad"]
    assert st["inexact_conversions"] == rst["inexact"]
    assert st["max_abs_chain_sum"] == rst["maxabs"]
    assert st["chains_per_output"] == rst["chains"]
    assert st["flushes"] == A.shape[0] * B.shape[1] * rst["chains"]
    return D, st


CASES = [
    # (m, k, n), bits, layout A, layout B, chain_len, input_shift
    ((3, 9, 5), 16, (None, None), (None, None), None, 0),
    ((4, 13, 7), 16, (1, None), (0, None), 3, 0),
    ((5, 12, 6), 12, (1, 4), (0, 6), None, 0),
    ((5, 12, 6), 16, (1, 4), (None, None), 5, (1, 2)),
    ((2, 17, 9), 8, (None, None), (0, 5), 2, 0),
    ((3, 1, 4), 16, (None, None), (None, None), None, 0),
    ((6, 20, 3), 16, (1, 7), (0, 3), 1, 3),
    # pieces of 4, 2, 2, 4 products: one-pair chains (the fused path) between longer ones
    ((5, 12, 9), 16, (1, 4), (0, 6), None, 0),
]


@pytest.mark.parametrize("overflow", ["wrap", "saturate"])
@pytest.mark.parametrize("case", CASES)
def test_against_reference(case, overflow):
    (m, k, n), bits, la, lb, chain_len, shift = case
    rng = np.random.default_rng([m, k, n, bits])
    for big in (False, True):
        A = _operand(rng, (m, k), bits, la, big)
        B = _operand(rng, (k, n), bits, lb, big)
        _compare(A, B, chain_len=chain_len, overflow=overflow, input_shift=shift)


@pytest.mark.parametrize("overflow", ["wrap", "saturate"])
def test_many_overflowing_lanes_and_tiles(overflow):
    # n > 256 (two column tiles), m > 16 (two row tiles), rows with more than 8 overflowing
    # lanes (the vectorised row replay) and rows with a few (the per-lane replay).
    rng = np.random.default_rng(8)
    A = _operand(rng, (18, 10), 16, (None, None), big=True, lo=-20, hi=-19)
    B = _operand(rng, (10, 260), 16, (0, None), big=True)
    Bm = B.mantissa.copy()
    Bm[:, ::3] //= 64                                 # a third of the lanes stay in range
    B = dfp.DFPTensor(Bm, B.exponent, 16, axis=0)
    _, st = _compare(A, B, overflow=overflow)
    assert st["overflowed_chains"] > 100


def test_constructed_overflow_wrap_vs_saturate():
    lim = 32767
    p = 2 * lim * lim                                  # one VNNI step: 2147352578 < 2^31 - 1
    A = dfp.DFPTensor(np.full((1, 4), lim), -20)
    B = dfp.DFPTensor(np.full((4, 1), lim), -10)
    scale = 2.0 ** -30
    # Step 2 makes the exact lane 2p = 4294705156 > 2^31 - 1.
    Dw, sw = dfp.gemm(A, B, overflow="wrap", return_stats=True)
    assert float(Dw[0, 0]) == (2 * p - 2 ** 32) * scale          # wrapped: -262140
    assert sw["wrap_events"] == 1 and sw["saturation_events"] == 0
    assert sw["overflowed_chains"] == 1
    Ds, ss = dfp.gemm(A, B, overflow="saturate", return_stats=True)
    assert float(Ds[0, 0]) == np.float32(I32_MAX) * scale       # 2^31 after fp32 rounding
    assert ss["saturation_events"] == 1 and ss["wrap_events"] == 0
    # chain_len = 2 (one VNNI step per chain): exact int32 partial sums, no event.
    Dc, sc = dfp.gemm(A, B, chain_len=2, return_stats=True)
    assert sc["wrap_events"] == 0 and sc["flushes"] == 2
    assert float(Dc[0, 0]) == float(np.float32(np.float64(2 * p) * scale))
    # A lane that leaves the range and comes back: wrap ends exact but counts two events,
    # saturate clamps and ends wrong, which is the documented difference.
    A2 = dfp.DFPTensor(np.array([[lim, lim, lim, lim, -lim, -lim]]), 0)
    B2 = dfp.DFPTensor(np.full((6, 1), lim), 0)
    Dw, sw = dfp.gemm(A2, B2, return_stats=True)
    assert float(Dw[0, 0]) == float(np.float32(2 * lim * lim)) and sw["wrap_events"] == 2
    Ds, ss = dfp.gemm(A2, B2, overflow="saturate", return_stats=True)
    assert float(Ds[0, 0]) == float(np.float32(I32_MAX - p)) and ss["saturation_events"] == 1


def test_input_shift_removes_the_overflow():
    lim = 32767
    A = dfp.DFPTensor(np.full((1, 8), lim), 0)
    B = dfp.DFPTensor(np.full((8, 1), lim), 0)
    _, st = dfp.gemm(A, B, return_stats=True)
    assert st["wrap_events"] > 0
    D, st = dfp.gemm(A, B, input_shift=2, return_stats=True)
    assert st["wrap_events"] == 0
    assert float(D[0, 0]) == float(np.float32(8 * (lim >> 2) ** 2 * 16))


@pytest.mark.parametrize("la,lb", [((None, None), (None, None)), ((1, None), (0, None)),
                                   ((1, 8), (0, 8))])
def test_no_overflow_equals_exact_dot_products(la, lb):
    rng = np.random.default_rng(9)
    m, k, n = 40, 64, 300
    A = _operand(rng, (m, k), 12, la)                   # |sum| <= 64 * 2^22 < 2^31
    B = _operand(rng, (k, n), 12, lb)
    D, st = dfp.gemm(A, B, return_stats=True)
    assert st["wrap_events"] == 0
    am, bm = A.mantissa.astype(np.int64), B.mantissa.astype(np.int64)
    if la[1] is None and lb[1] is None:
        exact = (am @ bm).astype(np.float64) * np.exp2(A.exponent.astype(np.float64)
                                                       + B.exponent.astype(np.float64))
        assert st["chains_per_output"] == 1
        np.testing.assert_array_equal(D, exact.astype(np.float32))
    else:
        # one chain per block of 8: fp32 sum of exactly converted block dot products
        acc = np.zeros((m, n), np.float32)
        for c in range(k // 8):
            s = am[:, 8 * c:8 * c + 8] @ bm[8 * c:8 * c + 8]
            e = A.exponent[:, c:c + 1].astype(np.float64) + B.exponent[c:c + 1].astype(np.float64)
            acc = acc + (s * np.exp2(e)).astype(np.float32)
        assert st["chains_per_output"] == k // 8
        np.testing.assert_array_equal(D, acc)


def test_block_boundaries_flush():
    chains = dfp.plan_chains(12, block_a=4, block_b=6)
    assert [c[:2] for c in chains] == [(0, 4), (4, 6), (6, 8), (8, 12)]
    assert [c[2:] for c in chains] == [(0, 0), (1, 0), (1, 1), (2, 1)]
    chains = dfp.plan_chains(10, chain_len=3)
    assert [c[:2] for c in chains] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert dfp.plan_chains(10, block_a=4, chain_len=3)[:3] == [(0, 3, 0, 0), (3, 4, 0, 0),
                                                                (4, 7, 1, 0)]
    # Two blocks of A with very different exponents: a chain across them would be wrong.
    A = dfp.DFPTensor(np.array([[1000, 1000, 3, 3]]), np.array([[0, -40]]), axis=1, block=2)
    B = dfp.DFPTensor(np.array([[1], [1], [1], [1]]), 0)
    D, st = dfp.gemm(A, B, return_stats=True)
    assert st["chains_per_output"] == 2
    assert float(D[0, 0]) == float(np.float32(2000 + 6 * 2.0 ** -40))


@pytest.mark.parametrize("chain_len", [None, 1, 3, 6, 7, 8, 9])
def test_unchecked_wrap_path_is_bit_identical(chain_len):
    # Without return_stats, overflow="wrap" skips the per-step overflow test (the wrapped sum is
    # the exact sum modulo 2^32 whatever happens on the way); the result must not change.
    rng = np.random.default_rng(11)
    for (m, k, n) in [(17, 29, 259), (3, 1, 5), (20, 16, 40)]:
        A = _operand(rng, (m, k), 16, (1, None), big=True)
        B = _operand(rng, (k, n), 16, (None, None), big=True)
        D, st = dfp.gemm(A, B, chain_len=chain_len, return_stats=True)
        D2 = dfp.gemm(A, B, chain_len=chain_len)
        assert np.array_equal(D.view(np.uint32), D2.view(np.uint32))
        if k > 2:
            assert st["wrap_events"] > 0 or chain_len in (1, 3)


def test_fp32_range_and_zero_sizes():
    big = dfp.DFPTensor(np.array([[1, -1]]), 200)
    one = dfp.DFPTensor(np.array([[1], [1]]), 0)
    D = dfp.gemm(big, dfp.DFPTensor(np.array([[1], [0]]), 0))
    assert np.isinf(D[0, 0]) and D[0, 0] > 0            # fp32 overflow of the scaled chain sum
    # fp32 subnormals, one rounding per chain: 3 * 2^-150 is a tie between 1 and 2 quanta of
    # 2^-149 (-> 2, even); -2^-150 a tie between 0 and -1 (-> -0).  One chain: 2^-149 exactly.
    tiny = dfp.DFPTensor(np.array([[3, -1]]), -150)
    assert float(dfp.gemm(tiny, one, chain_len=1)[0, 0]) == 2.0 ** -148
    assert float(dfp.gemm(tiny, one)[0, 0]) == 2.0 ** -149
    # +Inf + -Inf in the fp32 accumulator is NaN; the single chain is exactly 0.
    assert np.isnan(dfp.gemm(big, one, chain_len=1)[0, 0]) and dfp.gemm(big, one)[0, 0] == 0
    e = dfp.gemm(dfp.DFPTensor(np.zeros((0, 3), int), 0), dfp.DFPTensor(np.zeros((3, 2), int), 0))
    assert e.shape == (0, 2)
    z, st = dfp.gemm(dfp.DFPTensor(np.zeros((2, 0), int), 0),
                     dfp.DFPTensor(np.zeros((0, 3), int), 0), return_stats=True)
    assert z.shape == (2, 3) and not z.any() and st["flushes"] == 0


def test_thread_count_does_not_matter():
    rng = np.random.default_rng(10)
    A = _operand(rng, (40, 50), 16, (1, None), big=True)
    B = _operand(rng, (50, 300), 16, (None, None), big=True)
    D1, s1 = dfp.gemm(A, B, overflow="saturate", chain_len=7, return_stats=True)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        D2, s2 = dfp.gemm(A, B, overflow="saturate", chain_len=7, return_stats=True)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(D1.view(np.uint32), D2.view(np.uint32)) and s1 == s2


def test_argument_errors():
    A = dfp.DFPTensor(np.ones((2, 3), int), 0)
    B = dfp.DFPTensor(np.ones((3, 4), int), 0)
    with pytest.raises(TypeError, match="dfp.quantize"):
        dfp.gemm(np.ones((2, 3)), B)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        dfp.gemm(dfp.DFPTensor(np.ones(3, int), 0), B)
    with pytest.raises(ValueError, match=r"axis 1, which is not the reduction axis.*axis=2"):
        dfp.gemm(dfp.DFPTensor(np.ones((2, 2, 3), int), np.zeros((2, 1, 3), int), axis=1), B)
    with pytest.raises(ValueError, match="shape mismatch|broadcast"):
        dfp.gemm(dfp.DFPTensor(np.ones((2, 2, 3), int), 0),
                 dfp.DFPTensor(np.ones((3, 3, 4), int), 0))
    with pytest.raises(ValueError, match="P <= 16"):
        dfp.gemm(dfp.DFPTensor(np.ones((2, 3), int), 0, 32), B)
    with pytest.raises(ValueError, match="not the reduction axis"):
        dfp.gemm(dfp.DFPTensor(np.ones((2, 3), int), np.zeros((1, 3), int), axis=0), B)
    with pytest.raises(ValueError, match="not the reduction axis"):
        dfp.gemm(A, dfp.DFPTensor(np.ones((3, 4), int), np.zeros((3, 1), int), axis=1))
    with pytest.raises(ValueError, match="inner dimensions"):
        dfp.gemm(A, A)
    with pytest.raises(ValueError, match="overflow must be one of"):
        dfp.gemm(A, B, overflow="clip")
    with pytest.raises(ValueError, match="chain_len must be in"):
        dfp.gemm(A, B, chain_len=0)
    with pytest.raises(ValueError, match="input_shift must be in 0..15"):
        dfp.gemm(A, B, input_shift=16)
    with pytest.raises(TypeError, match="return_stats must be a bool"):
        dfp.gemm(A, B, return_stats=1)
    with pytest.raises(TypeError):
        dfp.gemm(A, B, 4)                               # keyword-only


#: (axis, block) of a batched A (..., m, k) and B (..., k, n), by name
BATCH_LAYOUTS = {"tensor": ((None, None), (None, None)), "row/col": ((3, None), (1, None)),
                 "blocks": ((3, 4), (1, 6)), "tensor/blocks": ((None, None), (1, 6))}


@pytest.mark.parametrize("layouts", BATCH_LAYOUTS)
def test_batched_against_a_loop(layouts):
    """Leading dimensions broadcast like numpy.matmul; each matrix is the 2-D GEMM of its
    slices (exponents of its rows / columns / blocks; a per-tensor exponent is shared)."""
    (axa, bla), (axb, blb) = BATCH_LAYOUTS[layouts]
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 1, 5, 12)).astype(np.float32)
    b = (rng.standard_normal((4, 12, 7)) * 2.0 ** rng.integers(-9, 9, (4, 12, 7)))
    A = dfp.quantize(a, axis=axa, block=bla)
    B = dfp.quantize(b, axis=axb, block=blb)
    for kw in ({"chain_len": 3}, {"chain_len": 2, "overflow": "saturate"}, {}):
        D, st = dfp.gemm(A, B, return_stats=True, **kw)
        assert D.shape == (3, 4, 5, 7) and D.dtype == np.float32
        tot = {k: 0 for k in st}
        for i in range(3):
            for j in range(4):
                Ai = dfp.DFPTensor(A.mantissa[i, 0], A.exponent if A.axis is None
                                   else A.exponent[i, 0], axis=None if A.axis is None else 1,
                                   block=A.block)
                Bj = dfp.DFPTensor(B.mantissa[j], B.exponent if B.axis is None
                                   else B.exponent[j], axis=None if B.axis is None else 0,
                                   block=B.block)
                r, s = dfp.gemm(Ai, Bj, return_stats=True, **kw)
                assert np.array_equal(D[i, j].view(np.uint32), r.view(np.uint32))
                for k in tot:
                    tot[k] = max(tot[k], s[k]) if k in ("max_abs_chain_sum",
                                                        "chains_per_output") else tot[k] + s[k]
        assert st == tot
    # a 2-D operand broadcasts against a batch
    D = dfp.gemm(dfp.quantize(a[0, 0]), B)
    assert D.shape == (4, 5, 7)
    assert np.array_equal(D[2], dfp.gemm(dfp.quantize(a[0, 0]),
                                         dfp.DFPTensor(B.mantissa[2], B.exponent if B.axis is None
                                                       else B.exponent[2],
                                                       axis=None if B.axis is None else 0,
                                                       block=B.block)))
