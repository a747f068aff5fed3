"""softfloat.tensorcore against the independent exact-integer reference (tests/tc_reference.py)
for every preset, on random and adversarial inputs: near ties, huge exponent gaps, subnormals,
cancellations, carries, overflow and special values."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import softfloat as sf
import tc_reference as R
from softfloat import tensorcore as tc

# Spec section 3, typed in again from the spec (not read from softfloat): (K, F, out_frac, mode)
# with K/F None = infinity and out_frac None = the accumulator's fraction bits.
FP8 = ("e4m3fn", "e5m2")
SPEC = {}
for _i in ("fp16", "bf16", "tf32", "e4m3fn", "e5m2", "fp32"):
    SPEC[("ideal-fp32", _i, "fp32")] = (None, None, None, "rne")
    SPEC[("ideal-fp16", _i, "fp16")] = (None, None, None, "rne")
SPEC[("v100", "fp16", "fp32")] = (4, 23, None, "rtz")
SPEC[("v100", "fp16", "fp16")] = (4, 23, None, "rne")
SPEC[("t4", "fp16", "fp32")] = (8, 24, None, "rtz")
SPEC[("t4", "fp16", "fp16")] = (8, 24, None, "rne")
for _d in ("a100", "ada"):
    SPEC[(_d, "fp16", "fp32")] = (8, 24, None, "rtz")
    SPEC[(_d, "bf16", "fp32")] = (8, 24, None, "rtz")
    SPEC[(_d, "fp16", "fp16")] = (8, 24, None, "rne")
    SPEC[(_d, "tf32", "fp32")] = (4, 24, None, "rtz")
for _i in FP8:
    SPEC[("ada", _i, "fp32")] = (16, 13, 13, "rtz")
    SPEC[("ada", _i, "fp16")] = (16, 13, None, "rne")
    SPEC[("h100", _i, "fp32")] = (32, 13, 13, "rtz")
for _d in ("h100", "b200"):
    SPEC[(_d, "fp16", "fp32")] = (16, 25, None, "rtz")
    SPEC[(_d, "bf16", "fp32")] = (16, 25, None, "rtz")
    SPEC[(_d, "fp16", "fp16")] = (16, 25, None, "rne")
    SPEC[(_d, "tf32", "fp32")] = (8, 25, None, "rtz")

KEYS = sorted(SPEC)


def test_preset_table_matches_spec():
    assert set(tc.PRESETS) == set(SPEC)
    for key, (K, F, of, mode) in SPEC.items():
        m = tc.get_model(*key)
        acc_frac = R.FORMATS[key[2]][0]
        assert (m.block, m.frac_bits, m.out_frac, m.out_round) == \
            (K, F, acc_frac if of is None else of, sf.parse_mode(mode)), key


def _carrier_fmt(fin):
    return "fp32" if fin == "tf32" else fin


def _values(fmt, x):
    return np.asarray(sf.round(x, _carrier_fmt(fmt), "rne"), dtype=np.float64)


def _gen(kind, fin, facc, m, k, n, rng):
    """(A, B, C) float64 arrays of in_format / acc_format values for one adversarial kind."""
    frac, emin, emax = R.FORMATS[_carrier_fmt(fin)]
    afrac, aemin, aemax = R.FORMATS[facc]
    big = min(emax, 40)

    def rnd(shape, lo, hi):
        return rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi + 1, shape))

    if kind == "random":
        A, B = rnd((m, k), -6, 3), rnd((k, n), -6, 3)
        C = rng.standard_normal((m, n)) * 4
    elif kind == "gaps":
        # Huge exponent gaps: addends from the top and the bottom of the input range.
        A = rnd((m, k), emin - frac, big // 2)
        B = rnd((k, n), emin - frac, big // 2)
        C = rng.standard_normal((m, n)) * np.exp2(rng.integers(aemin, min(aemax, 30), (m, n)))
    elif kind == "subnormal":
        A = rng.integers(-(2 ** frac), 2 ** frac, (m, k)) * 2.0 ** (emin - frac)
        B = rnd((k, n), -3, 3)
        C = rng.integers(-(2 ** afrac), 2 ** afrac, (m, n)) * 2.0 ** (aemin - afrac)
    elif kind == "cancel":
        # Exact cancellation: the second half of k repeats the first with opposite sign.
        h = k // 2
        A = rnd((m, k), -4, 4)
        B = rnd((k, n), -4, 4)
        A[:, h:2 * h] = -A[:, :h]
        B[h:2 * h] = B[:h]
        C = np.where(rng.random((m, n)) < 0.5, 0.0, rng.standard_normal((m, n)))
    elif kind == "carry":
        # Largest significands, one sign: the fixed-point sum carries out of the top bit.
        top = 2.0 - 2.0 ** -frac
        A = np.full((m, k), top) * np.exp2(rng.integers(0, 2, (m, k)))
        B = np.full((k, n), top)
        C = np.full((m, n), (2.0 - 2.0 ** -afrac) * 2.0)
    elif kind == "ties":
        # Near ties: one big addend plus small ones at and around half an output ulp.
        A = np.zeros((m, k))
        B = np.zeros((k, n))
        A[:, 0] = 1.0
        B[0, :] = 1.0 + rng.integers(0, 4, n) * 2.0 ** -min(frac, 3)
        for t in range(1, k):
            A[:, t] = rng.choice([1.0, -1.0, 0.5, 0.75], m)
            B[t, :] = rng.choice([1.0, 3.0, -1.0, 0.0], n) * 2.0 ** (-afrac - rng.integers(
                1, 4, n))
        C = np.where(rng.random((m, n)) < 0.5, 0.0, 2.0 ** -afrac)
    elif kind == "overflow":
        A = rnd((m, k), big - 3, big)
        B = rnd((k, n), big - 3, big)
        C = rng.standard_normal((m, n)) * 2.0 ** (aemax - 1)
    elif kind == "special":
        A, B = rnd((m, k), -3, 3), rnd((k, n), -3, 3)
        C = rng.standard_normal((m, n))
        A[0, rng.integers(k)] = np.inf
        A[1 % m, rng.integers(k)] = np.nan
        B[rng.integers(k), 1 % n] = -np.inf
        B[rng.integers(k), 2 % n] = 0.0
        A[2 % m, :] = 0.0
        C[-1, -1] = np.inf
        C[-1, 0] = -np.inf
        C[1 % m, 0] = -np.inf
        C[0, -1] = np.nan
    else:
        raise ValueError(kind)
    Av, Bv = _values(fin, A), _values(fin, B)
    if fin in FP8 and kind == "special":
        # e4m3fn has no Inf; keep NaN only (its own special).
        Av = np.where(np.isinf(Av), np.nan, Av) if fin == "e4m3fn" else Av
        Bv = np.where(np.isinf(Bv), np.nan, Bv) if fin == "e4m3fn" else Bv
    Cv = np.asarray(sf.round(C, facc, "rne"), dtype=np.float64)
    return Av, Bv, Cv


def _same(x, y):
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)


def _check(key, A, B, C, k_label):
    dev, fin, facc = key
    K, F, of, mode = SPEC[key]
    D = tc.gemm(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32), model=dev,
                in_format=fin, acc_format=facc)
    bad = []
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            r = R.dot(list(A[i]), list(B[:, j]), float(C[i, j]), K=K, F=F, in_fmt=fin,
                      acc_fmt=facc, out_frac=of, mode=mode)
            if not _same(float(D[i, j]), r):
                bad.append((i, j, float(D[i, j]), r))
    assert not bad, f"{key} {k_label}: {len(bad)} mismatches, first {bad[:3]}"


KINDS = ("random", "gaps", "subnormal", "cancel", "carry", "ties", "overflow", "special")


@pytest.mark.parametrize("key", KEYS, ids=["-".join(k) for k in KEYS])
def test_against_reference(key):
    rng = np.random.default_rng(zlib.crc32("-".join(key).encode()))
    K = SPEC[key][0] or 8
    for kind in KINDS:
        # k not a multiple of K (a zero-padded last block), sizes small: the reference is slow.
        k = 2 * K + 3 if kind != "cancel" else 2 * K + 2
        A, B, C = _gen(kind, key[1], key[2], 3, k, 4, rng)
        _check(key, A, B, C, kind)


@pytest.mark.parametrize("fin", ["fp16", "bf16"])
def test_ideal_long_dot_against_reference(fin):
    """k = 300 with a wide exponent spread: exercises the certificate and the exact fallback."""
    rng = np.random.default_rng(7)
    frac, emin, emax = R.FORMATS[fin]
    A = _values(fin, rng.standard_normal((2, 300)) * np.exp2(rng.integers(emin - frac, 6,
                                                                         (2, 300))))
    B = _values(fin, rng.standard_normal((300, 3)) * np.exp2(rng.integers(-8, 6, (300, 3))))
    B[:, 2] = np.abs(B[:, 2])
    A[1, 150:] = -A[1, :150]
    B[150:, :] = B[:150, :]
    C = np.zeros((2, 3))
    _check(("ideal-fp32", fin, "fp32"), A, B, C, "long")
    _check(("ideal-fp16", fin, "fp16"), A, B, np.asarray(sf.round(C, "fp16"), np.float64),
           "long")
