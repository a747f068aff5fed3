"""mx.gemm against the exact reference (ideal: the exact sum rounded once; blocked: exact block
sums, fp32 accumulation in k order) on small shapes; known cases where the two models differ;
mx.hadamard's orthogonality and exactness; bad arguments."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import mx_reference as R
from softfloat import mx
from softfloat.mx._hadamard import hadamard_matrix, random_signs

FORMATS = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8",
           "nvfp4")
OUT = {"fp32": (23, -126, 127), "fp16": (10, -14, 15), "bf16": (7, -126, 127)}


def _data(rng, shape, spread=6):
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
            ).astype(np.float32)


def _exact(q, k_axis):
    """The scaled values (element * block scale * tensor scale) as Fractions, nested lists."""
    v = q.elements.astype(np.float64) * q.block_scales()       # exact in float64
    return [[Fraction(float(a)) for a in row] for row in v]


def check(qa, qb, model, c=None, out_format="fp32"):
    D = mx.gemm(qa, qb, model=model, c=c, out_format=out_format)
    kb = qa.block[-1] if len(qa.block) == 2 else qa.block[0]
    cv = None if c is None else [[Fraction(float(v)) for v in row] for row in
                                 np.broadcast_to(c, D.shape)]
    ref = R.gemm(_exact(qa, 1), _exact(qb, 0), cv, model, kb, OUT[out_format])
    want = np.array([[float(v) for v in row] for row in ref], dtype=np.float32)
    assert D.dtype == np.float32
    same = (D.view(np.uint32) == want.view(np.uint32)) | (np.isnan(D) & np.isnan(want))
    assert same.all(), (model, out_format, D, want)              # bit patterns (signed zeros)
    return D


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_models_against_the_reference(fmt):
    rng = np.random.default_rng(abs(hash(fmt)) % 2 ** 32)
    m, k, n = 4, 70, 5                                   # k: two full blocks and a partial one
    A = _data(rng, (m, k))
    B = _data(rng, (k, n))
    C = _data(rng, (m, n))
    variants = [({}, {})]
    if fmt == "nvfp4":
        variants += [({"tensor_scale": 0.0123}, {"tensor_scale": 3.7}),
                     ({"tensor_scale": 0.5}, {})]
    for ka, kb_ in variants:
        qa = mx.quantize(A, fmt, **ka)
        qb = mx.quantize(B, fmt, axis=0, **kb_)
        for model in ("ideal-fp32", "blocked"):
            check(qa, qb, model)
            check(qa, qb, model, c=C)


def test_out_formats_and_two_d_blocks():
    rng = np.random.default_rng(1)
    A = _data(rng, (20, 48))
    B = _data(rng, (48, 18))
    qa = mx.quantize(A, "nvfp4", tensor_scale=0.3)
    qb = mx.quantize(B, "nvfp4", block=(16, 16), tensor_scale=1.7)    # the weight layout
    for out in ("fp16", "bf16"):
        for model in ("ideal-fp32", "blocked"):
            check(qa, qb, model, out_format=out)
    qa = mx.quantize(A, "mxfp8_e5m2", block=(4, 16))
    qb = mx.quantize(B, "mxfp8_e4m3", axis=0, block=16)               # mixed MX elements
    check(qa, qb, "blocked", c=np.float32(0.5))
    check(qa, qb, "ideal-fp32")


def test_nvfp4_long_k_is_summed_in_exact_slabs():
    from softfloat.mx._gemm import NV_K_EXACT
    rng = np.random.default_rng(6)
    k = NV_K_EXACT + 40
    A = _data(rng, (2, k), spread=2)
    B = _data(rng, (k, 3), spread=2)
    A[0] = 0.0                                              # all-zero row: +0 outputs
    B[:, 0] = -np.abs(B[:, 0])
    qa = mx.quantize(A, "nvfp4", tensor_scale=0.01)
    qb = mx.quantize(B, "nvfp4", axis=0, tensor_scale=0.3)
    D = check(qa, qb, "ideal-fp32")
    assert D[0, 0] == 0.0 and not np.signbit(D[0, 0])


def test_tiny_blocks_off_the_short_grid_take_the_fp32_route():
    from softfloat.mx._gemm import _operands
    rng = np.random.default_rng(4)
    A = _data(rng, (3, 64))
    A[0, :32] *= np.float32(2.0 ** -125)                  # block scale 2^-127: elements 2^-136
    qa = mx.quantize(A, "mxfp8_e4m3")
    qb = mx.quantize(_data(rng, (64, 4)), "mxfp8_e4m3", axis=0)
    a32 = qa.dequantize()
    assert (np.abs(a32[0, :32]) < 2.0 ** -126).any()
    A32, B32, fmt = _operands(qa, qb, 32, 32)
    assert np.array_equal(A32, a32) and np.array_equal(B32, qb.dequantize())
    assert fmt.name == "fp32"
    qn = mx.quantize(_data(rng, (3, 64)), "mxfp8_e4m3")   # no value below 2^-126
    assert _operands(qn, qb, 32, 32)[2].name == "mx-operands-p4"
    check(qa, qb, "ideal-fp32")
    check(qa, qb, "blocked")


@pytest.mark.parametrize("fmt,kw,block", [
    ("nvfp4", {"tensor_scale": 0.01}, None),         # tensor scales of two 12-bit parts each
    ("nvfp4", {"tensor_scale": 0.5}, None),          # one part
    ("mxfp6_e2m3", {}, (8, 32)),                     # 2-D tiles
    ("mxint8", {}, None),
])
def test_ideal_operands_are_the_scaled_values_side_by_side(fmt, kw, block):
    """The ideal model's operands (one kernel pass per operand and tensor-scale part) against
    numpy's float64 arithmetic on the same parts: A' = [A t_a1, A t_a1, A t_a2, A t_a2] and
    B' = [B t_b1; B t_b2; B t_b1; B t_b2] (softfloat/mx/_gemm.py), bit for bit."""
    from softfloat.mx._gemm import _kblock, _operands, _split12
    rng = np.random.default_rng(7)
    bk = {} if block is None else {"block": block}
    qa = mx.quantize(_data(rng, (24, 96)), fmt, **bk, **kw)
    qb = mx.quantize(_data(rng, (96, 40)), fmt, **({"axis": 0} if block is None else bk),
                     **({"tensor_scale": 0.3} if kw else {}))
    ta = 1.0 if qa.tensor_scale is None else float(qa.tensor_scale)
    tb = 1.0 if qb.tensor_scale is None else float(qb.tensor_scale)
    A = qa.elements.astype(np.float64) * (qa.block_scales() / ta)   # block scales alone: exact
    B = qb.elements.astype(np.float64) * (qb.block_scales() / tb)
    pa, pb = _split12(qa.tensor_scale), _split12(qb.tensor_scale)
    want_a = np.concatenate([A * x for x in pa for _ in pb], axis=1).astype(np.float32)
    want_b = np.concatenate([B * y for _ in pa for y in pb], axis=0).astype(np.float32)
    A32, B32, _ = _operands(qa, qb, _kblock(qa, "qa"), _kblock(qb, "qb"))
    assert A32.view(np.uint32).tobytes() == want_a.view(np.uint32).tobytes()
    assert B32.view(np.uint32).tobytes() == want_b.view(np.uint32).tobytes()
    if kw.get("tensor_scale") == 0.01:
        assert len(pa) == 2 and A32.shape == (24, 4 * 96)


def test_nvfp4_nan_scale_takes_the_general_route():
    """A NaN block scale: the one-matmul NVFP4 route declines (its kernel counts the NaN) and
    the general route gives NaN in that row only, the exact value elsewhere."""
    from softfloat import get_format
    from softfloat.mx._gemm import _ideal_nvfp4
    x = np.ones((2, 32), np.float32)
    x[0, 5] = np.nan
    qa = mx.quantize(x, "nvfp4")
    qb = mx.quantize(np.ones((32, 2), np.float32), "nvfp4", axis=0)
    assert np.isnan(qa.scales[0, 0])
    assert _ideal_nvfp4(qa, qb, get_format("fp32")) is None
    D = mx.gemm(qa, qb)
    assert np.isnan(D[0]).all()
    finite_row = check(mx.quantize(x[1:], "nvfp4"), qb, "ideal-fp32")
    assert np.array_equal(D[1:], finite_row)


def test_ideal_refuses_a_scaled_operand_beyond_float32():
    x = np.full((1, 32), np.float32(3.4e38))          # ceil scale 2^120, element 256: 2^128
    qa = mx.quantize(x, "mxfp8_e4m3", scale_rule="ceil")
    qb = mx.quantize(np.ones((32, 1), np.float32), "mxfp8_e4m3", axis=0)
    assert np.isinf(qa.dequantize()).all()
    with pytest.raises(ValueError, match="leaves float32's range"):
        mx.gemm(qa, qb)


def _mx_row(values_and_exponents, k=96):
    """A 1 x k MXFP8 operand whose block b holds value v_b * 2^E_b in its first element (its
    block maximum, so the floor rule picks the scale 2^(E_b + floor(log2 v_b) - 8))."""
    row = np.zeros((1, k), np.float32)
    for b, (v, e) in enumerate(values_and_exponents):
        row[0, 32 * b] = np.float32(math.ldexp(v, e))
    return mx.quantize(row, "mxfp8_e4m3")


def test_the_models_differ_where_fp32_accumulation_loses_bits():
    qa = _mx_row([(1.0, 0), (1.0, -24), (1.0, -40)])
    qb = mx.quantize(np.ones((96, 1), np.float32), "mxfp8_e4m3", axis=0)
    ideal = mx.gemm(qa, qb)[0, 0]
    blocked = mx.gemm(qa, qb, model="blocked")[0, 0]
    # exact sum 1 + 2^-24 + 2^-40: above the tie 1 + 2^-24, rounds up once
    assert ideal == np.float32(1 + 2.0 ** -23)
    # blocked: fl32(1 + 2^-24) = 1 (tie to even), then 1 + 2^-40 = 1
    assert blocked == np.float32(1.0)
    check(qa, qb, "ideal-fp32")
    check(qa, qb, "blocked")


def test_exact_cancellation_gives_positive_zero_and_nan_scales_propagate():
    qa = _mx_row([(1.5, 10), (-1.5, 10)])
    qb = mx.quantize(np.ones((96, 1), np.float32), "mxfp8_e4m3", axis=0)
    for model in ("ideal-fp32", "blocked"):
        d = mx.gemm(qa, qb, model=model)[0, 0]
        assert d == 0.0 and not np.signbit(d)
    x = np.ones((1, 64), np.float32)
    x[0, 40] = np.nan
    qn = mx.quantize(x, "mxfp4_e2m1")
    qb = mx.quantize(np.ones((64, 2), np.float32), "mxfp4_e2m1", axis=0)
    for model in ("ideal-fp32", "blocked"):
        assert np.isnan(mx.gemm(qn, qb, model=model)).all()


@pytest.mark.parametrize("call,err,text", [
    (lambda a, b: mx.gemm(a, a), ValueError, "inner dimensions|blocked along k"),
    (lambda a, b: mx.gemm(a, mx.quantize(np.ones((64, 3), np.float32), "mxfp8")),
     ValueError, "blocked along k"),
    (lambda a, b: mx.gemm(a, mx.quantize(np.ones((64, 3), np.float32), "nvfp4", axis=0)),
     ValueError, "both be MX"),
    (lambda a, b: mx.gemm(a, b, model="tensorcore"), ValueError, "ideal-fp32, blocked"),
    (lambda a, b: mx.gemm(a, mx.quantize(np.ones((64, 3), np.float32), "mxfp8", axis=0,
                                         block=16), model="blocked"), ValueError, "equal"),
    (lambda a, b: mx.gemm(a, b, c=np.full((2, 3), 0.1)), ValueError, "float32 values"),
    (lambda a, b: mx.gemm(a, b, c=np.full((2, 3), 1e-3, np.float32), out_format="fp16"),
     ValueError, "out_format fp16"),
    (lambda a, b: mx.gemm(a, b, out_format="e4m3fn"), ValueError, "IEEE-style"),
    (lambda a, b: mx.gemm(a.elements, b), TypeError, "BlockTensor"),
    (lambda a, b: mx.gemm(a, b, c=np.ones((2, 3), np.int32)), TypeError, "float"),
])
def test_bad_arguments(call, err, text):
    a = mx.quantize(np.ones((2, 64), np.float32), "mxfp8")
    b = mx.quantize(np.ones((64, 3), np.float32), "mxfp8", axis=0)
    with pytest.raises(err, match=text):
        call(a, b)


# ----- hadamard ----------------------------------------------------------------------------------

def test_transform_matrix_is_orthogonal():
    for size in (4, 16, 64):
        for seed in (None, 0, 7):
            Rm = random_signs(size, seed)[:, None] * hadamard_matrix(size) / math.sqrt(size)
            assert np.array_equal(Rm @ Rm.T, np.eye(size))
    assert not np.array_equal(random_signs(16, 1), random_signs(16, 2))
    assert np.array_equal(random_signs(16, None), np.ones(16))


def test_gemm_products_are_preserved():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((5, 64)).astype(np.float32)
    hx = mx.hadamard(x, seed=3).astype(np.float64)
    hw = mx.hadamard(w, seed=3).astype(np.float64)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    # each transformed element is within half an fp32 ulp: |error| <= 2^-24 (|hx| |hw|)
    bound = 2.0 ** -23 * (np.abs(hx) @ np.abs(hw).T)
    assert np.all(np.abs(hx @ hw.T - ref) <= bound)
    assert not np.allclose(mx.hadamard(x, seed=4), mx.hadamard(x, seed=3))


def test_outputs_are_exact_sums_rounded_once():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((6, 16)) * np.exp2(rng.integers(-60, 60, (6, 16)))).astype(
        np.float32)                                        # wide spread: the exact fallback
    x[0] = rng.standard_normal(16).astype(np.float32)      # narrow: the float64 product
    x[1, :3] = [1.0, 2.0 ** -24, 2.0 ** -40]               # ties near 1
    for inverse in (False, True):
        y = mx.hadamard(x, seed=9, inverse=inverse)
        Rm = random_signs(16, 9)[:, None] * hadamard_matrix(16)
        if inverse:
            Rm = Rm.T
        for r in range(6):
            for j in range(16):
                s = sum(int(Rm[i, j]) * Fraction(float(x[r, i])) for i in range(16)) / 4
                assert float(R.fl32(s)) == float(y[r, j]), (r, j, inverse)


def test_inverse_undoes_the_transform_on_exact_data():
    x = np.arange(-64, 64, dtype=np.float32).reshape(2, 64)      # sums stay exact in fp32
    y = mx.hadamard(x, 16, seed=5, axis=1)
    assert np.array_equal(mx.hadamard(y, 16, seed=5, axis=1, inverse=True), x)
    z = mx.hadamard(x.T.copy(), 4, seed=5, axis=0)
    assert np.array_equal(mx.hadamard(z, 4, seed=5, axis=0, inverse=True), x.T)


@pytest.mark.parametrize("kwargs,err,text", [
    (dict(size=8), ValueError, "power of 4"),
    (dict(size=2), ValueError, "power of 4"),
    (dict(size=16.0), ValueError, "power of 4"),
    (dict(size=64), ValueError, "multiple"),
    (dict(axis=2), ValueError, "out of range"),
    (dict(x=np.ones((2, 32))), TypeError, "float32"),
])
def test_hadamard_bad_arguments(kwargs, err, text):
    kw = dict(kwargs)
    x = kw.pop("x", np.ones((2, 32), np.float32))
    with pytest.raises(err, match=text):
        mx.hadamard(x, **kw)
