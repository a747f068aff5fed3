"""The SIMD kernel of the hardware models (softfloat/tensorcore/_tile.py) against the
independent exact reference (tests/tc_reference.py), bit for bit: block sizes with the 4-way
unrolled path (K = 4, 8, 16, 32) and the generic one (K = 3, 5, whole-k blocks), fp32 / fp16 /
e8m13 outputs, RZ and RNE, the per-block subnormal test (fp16 outputs) and the lazy mode that
skips it (fp32 / e8m13 outputs, tiles abandoned and recomputed), tile edges (m not a multiple of 4 rows, n not a multiple of 8 lanes,
k not a multiple of K, k < K), and the inputs that leave the fast paths: subnormal outputs
(the general rounding), overflow (the NaN-marked recompute), Inf/NaN inputs, huge exponent
gaps, cancellations, carries and near ties."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import tc_reference as R
import test_tensorcore_reference as TR
from softfloat import tensorcore as tc

KINDS = TR.KINDS


def _bits(x):
    x = float(x)
    return "nan" if math.isnan(x) else np.float64(x).view(np.int64)


def _check(model, A, B, C, label):
    fin, facc = model.in_format.name, model.acc_format.name
    D = tc.gemm(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32), model=model)
    mode = model.out_round.short
    bad = []
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            r = R.dot(list(A[i]), list(B[:, j]), float(C[i, j]), K=model.block, F=model.frac_bits,
                      in_fmt=fin, acc_fmt=facc, out_frac=model.out_frac, mode=mode)
            if _bits(D[i, j]) != _bits(r):
                bad.append((i, j, float(D[i, j]), r))
    assert not bad, f"{model.describe()} {label}: {len(bad)} mismatches, first {bad[:3]}"


# (K, F, in, acc, rounding, out_frac): every specialised K, two generic ones, both outputs.
CASES = [
    (4, 23, "fp16", "fp32", "rz", None),
    (4, 24, "tf32", "fp32", "rz", None),
    (4, 23, "fp16", "fp16", "rne", None),
    (8, 24, "bf16", "fp32", "rz", None),
    (8, 24, "fp16", "fp16", "rne", None),
    (16, 25, "fp16", "fp32", "rz", None),
    (16, 13, "e5m2", "fp16", "rne", None),
    (16, 13, "e4m3fn", "fp32", "rz", 13),
    (32, 13, "e4m3fn", "fp32", "rz", 13),
    (32, 25, "bf16", "fp32", "rne", None),
    (3, 23, "fp16", "fp32", "rz", None),
    (5, 24, "bf16", "fp16", "rne", None),
    (5, 13, "e5m2", "fp32", "rne", 13),
]


@pytest.mark.parametrize("K,F,fin,facc,rnd,of", CASES,
                         ids=[f"K{c[0]}-F{c[1]}-{c[2]}-{c[3]}-{c[4]}" for c in CASES])
def test_kernel_against_reference(K, F, fin, facc, rnd, of):
    model = tc.TCModel("custom", K, F, rnd, fin, facc, of)
    rng = np.random.default_rng(zlib.crc32(f"{K}{F}{fin}{facc}{rnd}{of}".encode()))
    for kind in KINDS:
        # 5 x 9: a short row tile (5 = 4 + 1) and a short lane panel (9 = 8 + 1).
        k = 2 * K + 3 if kind != "cancel" else 2 * K + 2
        A, B, C = TR._gen(kind, fin, facc, 5, k, 9, rng)
        _check(model, A, B, C, kind)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 3, 1), (3, 2, 5), (2, 7, 8), (6, 13, 17)])
@pytest.mark.parametrize("K", [4, 8, 3])
def test_shapes(m, k, n, K):
    """k < K, k not a multiple of K, 1 x 1, odd m and n, n a whole panel."""
    model = tc.TCModel("custom", K, 24, "rz", "fp16", "fp32")
    rng = np.random.default_rng(m * 1000 + k * 10 + n + K)
    for kind in ("random", "gaps", "subnormal"):
        A, B, C = TR._gen(kind, "fp16", "fp32", m, k, n, rng)
        _check(model, A, B, C, f"{kind} {m}x{k}x{n}")


def test_whole_k_block():
    """block None with F finite: one block of all k products (generic path, K = k = 11)."""
    model = tc.TCModel("custom", None, 24, "rne", "fp16", "fp16")
    rng = np.random.default_rng(5)
    for kind in ("random", "gaps", "ties", "overflow"):
        A, B, C = TR._gen(kind, "fp16", "fp16", 3, 11, 10, rng)
        D = tc.gemm(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                    model=model)
        for i in range(3):
            for j in range(10):
                r = R.dot(list(A[i]), list(B[:, j]), float(C[i, j]), K=11, F=24, in_fmt="fp16",
                          acc_fmt="fp16", mode="rne")
                assert _bits(D[i, j]) == _bits(r), (kind, i, j, float(D[i, j]), r)


@pytest.mark.parametrize("key", [("v100", "fp16", "fp32"), ("h100", "fp16", "fp16"),
                                 ("a100", "bf16", "fp32"), ("ada", "e4m3fn", "fp32")])
def test_overflow_and_underflow_in_a_larger_tile(key):
    """Some elements overflow where the formats allow it (sticky Inf, then recomputed by the
    scalar path), some end subnormal, some cancel to zero, in a 13 x 21 problem with k = 40:
    the fast paths and the fall-backs side by side in the same vectors."""
    model = tc.get_model(*key)
    fin, facc = key[1], key[2]
    frac, emin, emax = R.FORMATS[TR._carrier_fmt(fin)]
    afrac, aemin, aemax = R.FORMATS[facc]
    rng = np.random.default_rng(11)
    m, k, n = 13, 40, 21
    A = rng.standard_normal((m, k)) * np.exp2(rng.integers(-3, 3, (m, k)))
    B = rng.standard_normal((k, n)) * np.exp2(rng.integers(-3, 3, (k, n)))
    C = rng.standard_normal((m, n))
    big = min(emax, (aemax + 2) // 2)
    A[2, 10:14] = 2.0 ** big            # row 2: products near / above the accumulator's top
    B[10:14, 3] = 2.0 ** big
    B[10:14, 4] = -(2.0 ** big)
    A[5] *= 2.0 ** max(emin, (aemin - 12) // 2)     # row 5: tiny products, subnormal sums
    B[:, 7] *= 2.0 ** max(emin, (aemin - 12) // 2)
    A[11] = 0.0                         # row 11: no products, subnormal c passes through
    C[11] = rng.integers(-(2 ** afrac), 2 ** afrac, n) * 2.0 ** (aemin - afrac)
    A[8, k // 2:] = -A[8, :k // 2]      # row 8: exact cancellation
    B[k // 2:] = B[:k // 2]
    C[8] = 0.0
    A, B = TR._values(fin, A), TR._values(fin, B)
    C = np.asarray(TR.sf.round(C, facc, "rne"), np.float64)
    D = tc.gemm(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32), model=model)
    K, F, of, mode = TR.SPEC[key]
    for i in range(m):
        for j in range(n):
            r = R.dot(list(A[i]), list(B[:, j]), float(C[i, j]), K=K, F=F, in_fmt=fin,
                      acc_fmt=facc, out_frac=of, mode=mode)
            assert _bits(D[i, j]) == _bits(r), (i, j, float(D[i, j]), r)


@pytest.mark.parametrize("K,F,fin,rnd,of", [(4, 24, "tf32", "rz", None),
                                            (4, 23, "fp16", "rz", None),
                                            (8, 24, "bf16", "rne", None),
                                            (16, 13, "e4m3fn", "rz", 13)])
def test_lazy_mode_fallbacks(K, F, fin, rnd, of):
    """fp32 accumulators (the lazy mode of _tile._tile: no per-block subnormal test):
    tiles whose products are tiny enough for subnormal outputs (abandoned and recomputed with
    the test), tiles next to them that are not, all-zero blocks that pass a subnormal c
    through unchanged, zero rows past m inside a 4-row tile, exponent codes at both ends of
    the input range."""
    model = tc.TCModel("custom", K, F, rnd, fin, "fp32", of)
    frac, emin, emax = R.FORMATS[TR._carrier_fmt(fin)]
    afrac, aemin, _ = R.FORMATS["fp32"]
    rng = np.random.default_rng(K * 100 + F)
    m, k, n = 10, 3 * K + 1, 19
    A = rng.standard_normal((m, k)) * np.exp2(rng.integers(-3, 3, (m, k)))
    B = rng.standard_normal((k, n)) * np.exp2(rng.integers(-3, 3, (k, n)))
    C = rng.standard_normal((m, n))
    lo = max(emin, -70)
    A[0] *= 2.0 ** lo                   # rows 0-1: tiny products (subnormal sums where emin
    A[1, :K] *= 2.0 ** lo               # allows), in one block only for row 1
    B[:, :3] *= 2.0 ** lo
    C[0:2] = rng.integers(-(2 ** afrac), 2 ** afrac, (2, n)) * 2.0 ** (aemin - afrac)
    A[4] = 0.0                          # row 4: all blocks zero, subnormal c passes through
    C[4] = rng.integers(-(2 ** afrac), 2 ** afrac, n) * 2.0 ** (aemin - afrac)
    A[5, :K] = 0.0                      # row 5: one zero block before real ones
    C[5] = 0.0
    A[6, 0] = 2.0 ** emin               # rows 6-7: extreme exponents
    A[7, 1] = (2.0 - 2.0 ** -frac) * 2.0 ** min(emax, 40)
    B[0, 5] = 2.0 ** (emin - frac) if fin != "e4m3fn" else 2.0 ** -9
    A, B = TR._values(fin, A), TR._values(fin, B)
    C = np.asarray(TR.sf.round(C, "fp32", "rne"), np.float64)
    _check(model, A, B, C, "lazy")
