"""The vectorised passes of the arithmetic (float32 operands, float32 carriers) against the scalar
ops, which end in round_value: bit for bit (NaN as "is NaN", zeros with their sign) and flag count
for flag count, on each data class of issue #13, in every mode, for every preset format with a
float32 carrier and four custom ones (flush-to-zero, saturating, inf_nan="none", and an 8-bit
exponent without subnormals).  The float32 arithmetic's guards (where its error terms stop being
provably exact) get operands placed on both sides of each threshold.

The scalar reference is tests/test_arith.run_scalar (softfloat._arith's *_scalar per element,
random bits of element i from (seed, i)), so the stochastic-rounding comparison is exact too.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from test_arith import run_scalar, same

import softfloat as sf
from softfloat import _kernels_arith_f32 as KV
from softfloat import _kernels_round_vec as RV
from softfloat._arith import ADD, MUL
from softfloat._driver import CHUNK, SERIAL_MAX

PRESETS = [f for f in sf.FORMATS.values() if f.carrier_dtype == np.float32]
CUSTOM = [sf.Format("fp16_ftz", 5, 10, subnormals=False),
          sf.Format("e4m3_sat", 4, 3, inf_nan="fn", saturate=True),
          sf.Format("e3m2_none", 3, 2, inf_nan="none"),
          sf.Format("e8m4_ftz", 8, 4, subnormals=False)]
FORMATS = PRESETS + CUSTOM
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "rhu", "sr")
OPS = ("add", "sub", "mul", "div", "sqrt", "fma")
CLASSES = ("normal", "gradient", "subnormal", "overflow", "specials")
FLAGS = ("inexact", "underflow", "overflow", "invalid", "divbyzero")
N = 1500


def data_class(name, fmt, n, rng):
    """float32 operands of one of issue #13's data classes, scaled to the format: N(0,1);
    gradient-like N(0,1) 2^U[-30, 8) (far below the normal range of fp16 and the fp8 formats);
    all below 2^emin (subnormal or flushed results); overflow-heavy N(0,1) 2^U[0, emax + 6) (for
    fp16: up to 2^21); N(0,1) with 1% NaN/Inf and 1% signed zeros sprinkled."""
    x = rng.standard_normal(n)
    if name == "gradient":
        x = x * np.exp2(rng.uniform(-30, 8, n))
    elif name == "subnormal":
        x = x * np.exp2(rng.uniform(fmt.emin - fmt.man_bits - 3, fmt.emin, n))
    elif name == "overflow":
        x = x * np.exp2(rng.uniform(0, min(fmt.emax + 6, 127), n))
    x = x.astype(np.float32)
    if name == "specials":
        k = rng.choice(n, n // 50, replace=False)
        x[k] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32), k.size)
    return x


def operands(name, fmt, rng, on_grid):
    arrs = [data_class(name, fmt, N, rng) for _ in range(3)]
    if on_grid:
        # Values of the format, as in training; rounding may make NaNs of Inf (fn formats).
        arrs = [sf.round(a, fmt) for a in arrs]
    return arrs


def check_against_scalar(op, args, fmt, mode, seed=11, rbits=None):
    """The API on float32 operands (the vectorised passes) vs the scalar ops, results and flag
    counts; returns the number of elements compared."""
    if op == "sqrt":
        args = args[:1]
    elif op != "fma":
        args = args[:2]
    kw = {"seed": seed, "sr_bits": rbits} if mode == "sr" else {}
    flags = sf.Flags()
    got = getattr(sf, op)(*args, fmt, mode, flags=flags, **kw)
    assert got.dtype == np.float32
    cases = np.stack([a.astype(np.float64) for a in args], axis=1)
    want, fls = run_scalar(op, cases, fmt, mode, seed=seed, rbits=rbits or 24)
    bad = ~same(got, want)
    assert not bad.any(), (op, fmt.name, mode, cases[bad][:4], got[bad][:4], want[bad][:4])
    for k, name in enumerate(FLAGS):
        assert getattr(flags, name) == int(np.count_nonzero(fls & (1 << k))), (op, mode, name)
    # the same call without flags: the same bit patterns, NaNs' included (without flags NaN
    # results and, in the ieee formats, x / 0 are the rounding's of their special values; with
    # flags they are marked and the settling pass writes them and counts their flags)
    plain = getattr(sf, op)(*args, fmt, mode, **kw)
    diff = plain.view(np.uint32) != got.view(np.uint32)
    assert not diff.any(), (op, fmt.name, mode, "without flags", cases[diff][:4],
                            plain[diff][:4].view(np.uint32), got[diff][:4].view(np.uint32))
    return got.size


# (unsigned and zero-less formats, e8m0 and ue4m3, do not take the float32 passes: softfloat.arith
# sends them to round_value.)
@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.signed and f.zero],
                         ids=lambda f: f.name)
@pytest.mark.parametrize("cls", CLASSES)
def test_vectorised_passes_match_scalar_ops(cls, fmt):
    rng = np.random.default_rng(abs(hash((cls, fmt.name))) % 2**32)
    for on_grid in (True, False):
        args = operands(cls, fmt, rng, on_grid)
        if cls != "specials":
            args[0] = np.where(rng.random(N) < 0.5, np.abs(args[0]), args[0])  # sqrt's domain
        for op in OPS:
            for mode in MODES:
                check_against_scalar(op, args, fmt, mode)


def _pow2(k):
    return np.float32(2.0 ** k)


def guard_cases(rng):
    """Operand triples around the float32 arithmetic's thresholds: products and quotients near
    2^-100 (the limit of provably exact fma errors), sums near 2^127 and FLT_MAX (TwoSum's
    overflow margin, float32 overflow), quotients and roots with float32-subnormal operands or
    results, negative divisors, exact zeros and ties of every width."""
    n = 600
    e = rng.integers(-75, 75, n)
    sig = rng.integers(1 << 23, 1 << 24, (3, n)) / float(1 << 23)
    sign = rng.choice([-1.0, 1.0], (3, n))
    a = (sign[0] * sig[0] * np.exp2(e)).astype(np.float32)
    b = (sign[1] * sig[1] * np.exp2(-100 - e + rng.integers(-3, 4, n))).astype(np.float32)
    c = (sign[2] * sig[2] * np.exp2(rng.integers(-110, -90, n))).astype(np.float32)
    big = (sign[0] * sig[0] * np.exp2(rng.integers(125, 128, n))).astype(np.float32)
    big2 = (sign[1] * sig[1] * np.exp2(rng.integers(125, 128, n))).astype(np.float32)
    sub = (sign[2] * rng.integers(1, 1 << 23, n) * 2.0 ** -149).astype(np.float32)
    near = (sig[1] * np.exp2(rng.integers(-103, -97, n))).astype(np.float32)
    rows = [
        (a, b, c),                             # products near 2^-100, fma with a tiny addend
        (c, a, b),                             # quotients of tiny by anything
        (near, np.ones(n, np.float32), c),     # |a| around 2^-100 (div/sqrt guards)
        (big, big2, big),                      # sums and products beyond FLT_MAX
        (sub, a, sub),                         # float32 subnormal operands
        (a, sub, -a),                          # subnormal divisors: huge quotients
        (np.float32(1.0) + _pow2(-11) * sign[0], _pow2(-30) * sign[1] * sig[1],
         _pow2(-12) * sign[2]),                # ties and near-ties of fp16 after the sum
    ]
    A, B, C = (np.concatenate([r[i] for r in rows]).astype(np.float32) for i in range(3))
    return [A, B, C]


@pytest.mark.parametrize("fmt", [sf.get_format(f) for f in ("fp16", "bf16", "e5m2", "fp32")]
                         + CUSTOM[:1] + CUSTOM[3:], ids=lambda f: f.name)
def test_guard_thresholds_match_scalar_ops(fmt):
    args = guard_cases(np.random.default_rng(5))
    for op in OPS:
        for mode in MODES:
            check_against_scalar(op, args, fmt, mode)
            sq = [np.abs(args[0])] + args[1:]
            check_against_scalar("sqrt", sq, fmt, mode)


@pytest.mark.parametrize("mode", ["rne", "sr"])
def test_broadcast_operands_and_serial_parallel_drivers(mode):
    """Step-0 (scalar) operands and both drivers (arrays above and below SERIAL_MAX)."""
    rng = np.random.default_rng(3)
    fmt = sf.get_format("fp16")
    for n in (1000, SERIAL_MAX + 5000):
        x = sf.round(rng.standard_normal(n).astype(np.float32), fmt)
        y = np.float32(0.3)
        for op in ("add", "mul", "div"):
            kw = {"seed": 4} if mode == "sr" else {}
            got = getattr(sf, op)(x, y, fmt, mode, **kw)
            want = getattr(sf, op)(x.astype(np.float64), np.float64(y), fmt, mode, **kw)
            assert same(got, want).all(), (op, n)
        got = sf.fma(y, x, y, fmt, mode, **kw)
        want = sf.fma(np.float64(y), x.astype(np.float64), np.float64(y), fmt, mode, **kw)
        assert same(got, want).all()


# Offsets of one marked element in a chunk: the first, both sides of 512 and of 2560, one further
# on, the last (a loop that reads a chunk in pieces must not lose a lone mark at any of them).
_LONE = (0, 511, 512, 2559, 2560, 7175, CHUNK - 1)


@pytest.mark.parametrize("special", ["nan", "invalid", "divbyzero", "f32-overflow", "tiny"])
def test_a_lone_marked_element_anywhere_in_a_chunk(special):
    """One marked element in an otherwise clean chunk: a NaN operand, an invalid operation,
    x / 0, float32 overflow (left to the scalar op) or a product below 2^-100 at each offset of
    _LONE (one per chunk, a chunk without any, one chunk with two), for every operation in a
    deterministic mode (route A), stochastic rounding (route B) and a directed mode with flags.
    Each call follows one on data marked throughout, so that stale kinds in reused buffers would
    show."""
    fmt = sf.get_format("fp16")
    rng = np.random.default_rng(21)
    n = (len(_LONE) + 2) * CHUNK
    base = [sf.round(rng.standard_normal(n).astype(np.float32), fmt) for _ in range(3)]
    x, y = {"nan": (np.nan, 1.5), "invalid": (np.inf, 0.0), "divbyzero": (3.0, 0.0),
            "f32-overflow": (2.0 ** 100, 2.0 ** 100), "tiny": (2.0 ** -70, 2.0 ** -70)}[special]
    where = [i * CHUNK + off for i, off in enumerate(_LONE)]
    where += [(len(_LONE) + 1) * CHUNK + off for off in (517, CHUNK - 2)]
    noisy = [np.where(rng.random(n) < 0.3, np.float32(np.inf), a) for a in base]
    for op in OPS:
        args = [a.copy() for a in base]
        if op == "sqrt":
            args[0] = np.abs(args[0])
        for k in where:
            args[0][k] = x if op != "sqrt" else -x
            args[1][k] = y
            args[2][k] = y
        for mode in ("rne", "sr", "rdn"):
            getattr(sf, op)(*noisy[:1 if op == "sqrt" else 3 if op == "fma" else 2], fmt, mode,
                            **({"seed": 2} if mode == "sr" else {}))
            check_against_scalar(op, args, fmt, mode)


def test_exact_zero_results_beside_marked_elements():
    """Exact zero results are rounded from their signed-zero proxies beside special elements
    (until 2026-11-29 these shared the proxy +0 and every +0 proxy was classified again):
    exact zero results (x - x, x * 0, 0 / y, sqrt(0), 0 * y + 0; a third of the elements, both
    signs of zero) sit beside NaN operands placed at both ends of 64-element blocks and
    sprinkled at 1%; one chunk has zeros and no special element.  Every operation,
    four modes, with and without flags against the scalar ops (check_against_scalar)."""
    fmt = sf.get_format("fp16")
    rng = np.random.default_rng(33)
    n = 2 * CHUNK + 100
    for op in OPS:
        a, b, c = (sf.round(rng.standard_normal(n).astype(np.float32), fmt) for _ in range(3))
        z = rng.random(n) < 1 / 3
        sz = np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0))
        if op == "add":
            b = np.where(z, -a, b)
        elif op == "sub":
            b = np.where(z, a, b)
        elif op in ("mul", "fma"):
            a = np.where(z, sz, a)
            c = np.where(z, sz, c)
        elif op == "div":
            a = np.where(z, sz, a)
        else:
            a = np.where(z, sz, np.abs(a))
        marks = [63, 64, 127, 128, 4095, CHUNK - 1]
        marks += list(np.flatnonzero(rng.random(n) < 0.01))
        marks = [k for k in marks if k < CHUNK or k >= 2 * CHUNK]   # chunk 1: zeros, no mark
        a[marks] = np.float32(np.nan)
        for mode in ("rne", "rdn", "rtz", "sr"):
            assert check_against_scalar(op, [a, b, c], fmt, mode) == n


#: Operand pairs (x, y; z = y for fma) whose elements are special or give a zero proxy for some of
#: the operations: NaN operands, invalid operations, x / 0, exact zero results, float32 overflow
#: and products below 2^-100 (left to the scalar op).
_MARKS = ((np.nan, 1.5), (1.5, np.nan), (np.inf, 0.0), (np.inf, -np.inf), (3.0, 0.0),
          (-3.0, 0.0), (0.0, 0.0), (1.5, -1.5), (0.0, 2.5), (2.0 ** -70, 2.0 ** -70),
          (2.0 ** 127 * 1.5, 2.0 ** 127 * 1.5), (-1.0, 1.0))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e3m2_none"])
def test_sparse_and_dense_marks(fmt):
    """_marked settles the marked proxies of a chunk branch-free (_settle) where there is one
    in _DENSE elements or more, and one element at a time where they are fewer (every special
    element is marked with flags, which check_against_scalar counts first; without them the
    quiet NaNs and, in fp16 and bf16, x / 0 pass through the rounding): one-chunk arrays
    holding 1, 2, n / _DENSE +- 1, n / 4 and n elements of every kind (_MARKS, at random
    places), every operation, four modes, with and without flags, against the scalar ops."""
    fmt = next(f for f in FORMATS if f.name == fmt)
    n = 64 * KV._DENSE
    rng = np.random.default_rng(77)
    base = [sf.round(rng.standard_normal(n).astype(np.float32), fmt) for _ in range(3)]
    for cnt in (1, 2, n // KV._DENSE - 1, n // KV._DENSE + 1, n // 4, n):
        where = rng.choice(n, cnt, replace=False)
        pick = rng.integers(0, len(_MARKS), cnt)
        for op in OPS:
            args = [a.copy() for a in base]
            for k, i in zip(where, pick):
                args[0][k], args[1][k] = _MARKS[i]
                args[2][k] = args[1][k]
            if op == "sqrt":
                args[0] = np.where(rng.random(n) < 0.7, np.abs(args[0]), args[0])
            for mode in ("rne", "rdn", "rtz", "sr"):
                assert check_against_scalar(op, args, fmt, mode) == n


@njit
def _late_add_a(k, xs, ys, zs, os, base, counts):
    KV._late(ADD, k, xs, ys, zs, os, base, counts, 0)


@njit
def _late_mul_b(k, xs, ys, zs, os, base, counts):
    KV._late(MUL, k, xs, ys, zs, os, base, counts, 0)


@pytest.mark.parametrize("op,route,mode", [("add", True, "rne"), ("mul", False, "sr")])
def test_late_elements_get_the_scalar_op(op, route, mode):
    """What the rounding's passes 1 to 2 leave marked (the marker pattern in os; passes 3 and
    4 serve it in sf.round, and no arithmetic data is known to reach it) gets the scalar op's
    result and flags, with the random bits of its global index; every other element of os is
    left alone.  _late is called directly, with the record a call would build."""
    fmt = sf.get_format("fp16")
    rng = np.random.default_rng(9)
    n, base = 300, 1000
    xs, ys = (sf.round(rng.standard_normal(n).astype(np.float32) * np.float32(2.0 ** -10), fmt)
              for _ in range(2))
    cls = KV._RECORDS[KV._OPNAMES[op], route]
    imode = int(sf.parse_mode(mode))
    static = RV.vec_static(cls, fmt, imode, 24, np.uint32 if route else np.uint64)[0]
    key = sf.rng.seed_key(4)
    k = cls(*[static[f] for f in cls.static_fields], np.uint64(key), np.int64(base), True)
    os = rng.integers(0, 2 ** 31, n, dtype=np.int64).astype(np.uint32)
    before = os.copy()
    pos = np.sort(rng.choice(n, 40, replace=False))
    os[pos] = np.uint32(0xFFFFFFFF)
    counts = np.zeros((1, 5), np.int64)
    (_late_add_a if op == "add" else _late_mul_b)(k, xs, ys, ys, os, base, counts)
    got = os.view(np.float32)
    # the scalar ops over elements 0 .. base + n - 1 (their random bits are by global index)
    pad = np.zeros((base, 2))
    cases = np.concatenate([pad, np.stack([xs, ys], axis=1).astype(np.float64)])
    want, fls = run_scalar(op, cases, fmt, mode, seed=4, rbits=24)
    want, fls = want[base:][pos], fls[base:][pos]
    assert same(got[pos], want).all()
    keep = np.setdiff1d(np.arange(n), pos)
    assert np.array_equal(os[keep], before[keep])
    for j, name in enumerate(FLAGS):
        assert counts[0, j] == np.count_nonzero(fls & (1 << j)), name


def test_kinds_are_rare_on_training_data():
    """What the vectorised passes leave to the scalar ops is rare: none of the elements of the
    five data classes on the fp16 grid (exact zeros, NaN/Inf, x / 0 and invalid operations are
    all handled vectorised); and the count can fail (tiny float32 products below 2^-100 are
    left to the scalar op)."""
    rng = np.random.default_rng(8)
    fmt = sf.get_format("fp16")
    for cls in CLASSES:
        a, b, c = operands(cls, fmt, rng, True)
        for op in OPS:
            counts = KV.kind_counts(op, a, b, c, fmt, "rne")
            assert counts[KV.SCALAR] == 0, (cls, op, counts)
    tiny = np.full(10, 2.0 ** -60, np.float32)
    assert KV.kind_counts("mul", tiny, tiny, tiny, fmt, "rne")[KV.SCALAR] == 10
