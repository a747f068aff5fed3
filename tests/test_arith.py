"""Correct rounding of sf.add/sub/mul/div/sqrt/fma against two independent oracles.

For fp16, bf16, fp32, e4m3fn and e5m2, every op and every deterministic mode: TestFloat-style
operands (special exponents x walking-one/walking-zero significands), constructed ties and
near-ties, random grid values and off-grid float64 operands are rounded by the kernels and by
  * the exact-rational oracle (tests/oracle.py's round_fraction, via tests/oracle_extra.py), and
  * MPFR through gmpy2 (tests/oracle_mpfr.py),
comparing results bit for bit (NaN as "is NaN", zeros with their sign) and the IEEE flags of
every element (from the scalar kernels, which the array API must match exactly, counts included).
The bulk checks below then run whole cross products through cheaper references.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from numba import njit
from oracle_extra import grid_specials, make_cases, rational_op
from oracle_mpfr import mpfr_op

import softfloat as sf
from softfloat._arith import (
    add_scalar,
    div_scalar,
    fma_scalar,
    mul_scalar,
    sqrt_scalar,
    sub_scalar,
)
from softfloat.rng import random_bits, seed_key

FMTS = ("fp16", "bf16", "fp32", "e4m3fn", "e5m2")
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "rhu")
OPS = ("add", "sub", "mul", "div", "sqrt", "fma")
OPCODE = {op: i for i, op in enumerate(OPS)}
FLAG_BITS = {"inexact": 1, "underflow": 2, "overflow": 4, "invalid": 8, "divbyzero": 16}
API = {"add": sf.add, "sub": sf.sub, "mul": sf.mul, "div": sf.div, "sqrt": sf.sqrt,
       "fma": sf.fma}


@njit(cache=True)
def scalar_harness(op, A, B, C, fp, mode, key, rbits):
    """Per-element results and flag words of the scalar kernels (u of element i: SR only)."""
    n = A.size
    res = np.empty(n)
    fls = np.empty(n, np.int64)
    for i in range(n):
        u = random_bits(key, i) if mode == 6 else np.uint64(0)
        if op == 0:
            r, f = add_scalar(A[i], B[i], fp, mode, u, rbits)
        elif op == 1:
            r, f = sub_scalar(A[i], B[i], fp, mode, u, rbits)
        elif op == 2:
            r, f = mul_scalar(A[i], B[i], fp, mode, u, rbits)
        elif op == 3:
            r, f = div_scalar(A[i], B[i], fp, mode, u, rbits)
        elif op == 4:
            r, f = sqrt_scalar(A[i], fp, mode, u, rbits)
        else:
            r, f = fma_scalar(A[i], B[i], C[i], fp, mode, u, rbits)
        res[i] = r
        fls[i] = f
    return res, fls


def run_scalar(op, cases, fmt, mode, seed=0, rbits=1):
    cols = [np.ascontiguousarray(cases[:, j], dtype=np.float64) for j in range(cases.shape[1])]
    while len(cols) < 3:
        cols.append(cols[0])
    key = seed_key(seed)
    return scalar_harness(OPCODE[op], *cols, fmt.kernel_params(), int(sf.parse_mode(mode)), key,
                          rbits)


def run_api(op, cases, fmt, mode, dtype=np.float64, **kw):
    args = [cases[:, j].astype(dtype) for j in range(cases.shape[1])]
    return API[op](*args, fmt, mode, **kw)


def same(x, y) -> np.ndarray:
    """Elementwise: both NaN, or equal with the same sign (so +0 != -0)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    return both_nan | ((x == y) & (np.signbit(x) == np.signbit(y)))


def flag_word(names) -> int:
    return sum(FLAG_BITS[n] for n in names)


def stable_seed(*parts) -> int:
    return zlib.crc32("/".join(parts).encode())


def f32_rows(cases):
    """Rows whose operands are all exactly float32 values (NaN included)."""
    c32 = cases.astype(np.float32).astype(np.float64)
    return np.all(same(c32, cases), axis=1)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("op", OPS)
def test_against_both_oracles(op, fmt):
    F = sf.get_format(fmt)
    cases = make_cases(op, F, np.random.default_rng(stable_seed(op, fmt)))
    rows32 = f32_rows(cases)
    failures = []
    for mode in MODES:
        flags = sf.Flags()
        got = run_api(op, cases, F, mode, flags=flags)
        res, fls = run_scalar(op, cases, F, mode)
        assert same(got, res).all(), f"{op} {fmt} {mode}: array API differs from scalar kernel"
        for k, name in enumerate(("inexact", "underflow", "overflow", "invalid", "divbyzero")):
            assert getattr(flags, name) == int(np.count_nonzero(fls & (1 << k))), (op, mode, name)
        # float32 operands take other code paths (exact product, fast add/mul/sub pass, the
        # TwoSum form of fma): they must give the same results.
        got32 = run_api(op, cases[rows32], F, mode, dtype=np.float32)
        assert same(got32, got[rows32]).all(), f"{op} {fmt} {mode}: float32 path differs"
        for i, row in enumerate(cases):
            args = [float(x) for x in row]
            for oracle in (rational_op, mpfr_op):
                want, wflags = oracle(op, args, F, mode)
                if not same(want, res[i]) or flag_word(wflags) != fls[i]:
                    failures.append((oracle.__name__, mode, args, want, sorted(wflags),
                                     float(res[i]), int(fls[i])))
    assert not failures, f"{len(failures)} mismatches, first: {failures[:5]}"


# ----- bulk checks over whole cross products ----------------------------------------------------

def cross(fmt, k, limit=None, seed=0):
    """All k-tuples of the format's special values, or ``limit`` of them drawn at random."""
    S = np.array(grid_specials(sf.get_format(fmt)))
    if limit is not None and len(S) ** k > limit:
        return S[np.random.default_rng(seed).integers(0, len(S), (limit, k))]
    grids = np.meshgrid(*([S] * k), indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


@pytest.mark.parametrize("fmt,np_type", [("fp16", np.float16), ("fp32", np.float32)])
def test_rne_matches_numpy_on_all_special_pairs(fmt, np_type):
    """numpy's float16 ops (float32 arithmetic, then RNE to half: innocuous double rounding as
    24 >= 2*11 + 2) and float32 ops are correctly rounded RNE: compare every special pair."""
    pairs = cross(fmt, 2)
    a = pairs[:, 0].astype(np_type)
    b = pairs[:, 1].astype(np_type)
    with np.errstate(all="ignore"):
        ref = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}
        ref_sqrt = np.sqrt(a)
    for op, want in ref.items():
        for dtype in (np.float32, np.float64):
            got = API[op](a.astype(dtype), b.astype(dtype), fmt)
            bad = ~same(got, want)
            assert not bad.any(), (op, dtype, pairs[bad][:5], got[bad][:5], want[bad][:5])
    got = sf.sqrt(a.astype(np.float64), fmt)
    assert same(got, ref_sqrt).all()


def exact_float64(op, a, b):
    """(float64 result, mask where it is the exact nonzero result) for add/sub/mul of grid
    values: products of p <= 24-bit values are exact; sums where TwoSum's error is zero."""
    with np.errstate(all="ignore"):
        if op == "mul":
            v = a * b
            return v, np.isfinite(v)
        y = b if op == "add" else -b
        s = a + y
        bb = s - a
        err = (a - (s - bb)) + (y - bb)
        return s, np.isfinite(s) & (err == 0) & (s != 0)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("mode", MODES)
def test_exact_float64_results_round_like_conversion(fmt, mode):
    """Where the exact sum/product of two special values is a float64, the op must equal
    sf.round of that float64, flag counts included, through both the float32 fast path and the
    float64 path; and fma(a, b, 0) equals mul (nonzero products), fma(a, 1, c) equals add."""
    pairs = cross(fmt, 2, limit=60000, seed=1)
    a, b = pairs[:, 0], pairs[:, 1]
    for op in ("add", "sub", "mul"):
        v, ok = exact_float64(op, a, b)
        for dtype in (np.float32, np.float64):
            fl_op, fl_rd = sf.Flags(), sf.Flags()
            got = API[op](a[ok].astype(dtype), b[ok].astype(dtype), fmt, mode, flags=fl_op)
            want = sf.round(v[ok], fmt, mode, flags=fl_rd)
            bad = ~same(got, want)
            assert not bad.any(), (op, dtype, pairs[ok][bad][:5], got[bad][:5], want[bad][:5])
            assert fl_op.as_dict() == fl_rd.as_dict(), (op, dtype, fl_op, fl_rd)
    with np.errstate(all="ignore"):
        nz = np.isfinite(a * b) & (a * b != 0)
    for dtype in (np.float32, np.float64):
        x, y = a.astype(dtype), b.astype(dtype)
        assert same(sf.fma(x, y, dtype(0.0), fmt, mode)[nz], sf.mul(x, y, fmt, mode)[nz]).all()
        assert same(sf.fma(x, dtype(1.0), y, fmt, mode), sf.add(x, y, fmt, mode)).all()


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("mode", MODES)
def test_fma_integer_path_matches_twosum_path(fmt, mode):
    """For float32 a, b the kernel computes fma as add(exact a*b, c) (TwoSum); with float64
    operands it uses the 128-bit integer path.  Both must agree on special triples (all
    specials, including the huge/tiny exponent gaps where the integer path jams)."""
    tri = cross(fmt, 3, limit=40000, seed=2)
    c64 = tri.astype(np.float64)
    f1, f2 = sf.Flags(), sf.Flags()
    r64 = sf.fma(c64[:, 0], c64[:, 1], c64[:, 2], fmt, mode, flags=f1)
    r32 = sf.fma(tri[:, 0].astype(np.float32), tri[:, 1].astype(np.float32),
                 c64[:, 2], fmt, mode, flags=f2)
    assert same(r64, r32).all()
    assert f1.as_dict() == f2.as_dict()
