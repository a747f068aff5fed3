"""The ideal models' fast path (softfloat/tensorcore/_certify.py: exactness certificate,
error-bound bracket, compensated Dot2 fallback, exact fallback) bit for bit against the
independent exact reference (tests/tc_reference.py: Fractions, one rounding), on random data,
constructed near ties, cancellation, exponent gaps, subnormals, overflow, special values, signed
zeros, the MLP shapes of the O2 training loop, 1 x 1 and k = 1."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import softfloat as sf
import tc_reference as R
from softfloat import tensorcore as tc
from softfloat.tensorcore import _certify as FI
from softfloat.tensorcore import _superacc as X

INPUTS = ("fp16", "bf16", "tf32", "e4m3fn", "e5m2", "fp32")
MODELS = (("ideal-fp32", "fp32"), ("ideal-fp16", "fp16"))


def _fmt(fin):
    return "fp32" if fin == "tf32" else fin


def _vals(x, fmt):
    return np.asarray(sf.round(np.asarray(x, np.float64), _fmt(fmt), "rne"), np.float32)


def _ref(a, b, c, fin, facc):
    """D by the Fraction reference, element by element (float32)."""
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n), np.float32)
    for i in range(m):
        ai = [float(v) for v in a[i]]
        for j in range(n):
            cij = 0.0 if c is None else float(c[i, j])
            out[i, j] = R.dot(ai, [float(v) for v in b[:, j]], cij, K=None, F=None,
                              in_fmt=fin, acc_fmt=facc, mode="rne")
    return out


def _same(d, r):
    d = np.asarray(d, np.float32)
    r = np.asarray(r, np.float32)
    nan = np.isnan(d) & np.isnan(r)
    eq = (d.view(np.uint32) == r.view(np.uint32)) | nan
    if not eq.all():
        idx = np.argwhere(~eq)[:5]
        raise AssertionError("mismatch at " + ", ".join(
            f"{tuple(t)}: got {d[tuple(t)]!r} ({d.view(np.uint32)[tuple(t)]:#x}), want "
            f"{r[tuple(t)]!r} ({r.view(np.uint32)[tuple(t)]:#x})" for t in idx))


def _check(a, b, c, fin, model, facc):
    d = tc.gemm(a, b, c, model=model, in_format=fin, acc_format=facc)
    _same(d, _ref(a, b, c, fin, facc))
    return d


@pytest.mark.parametrize("fin", INPUTS)
@pytest.mark.parametrize("model,facc", MODELS)
def test_random(fin, model, facc):
    rng = np.random.default_rng(hash((fin, model)) & 0xFFFF)
    scale = 4.0 if fin in ("e4m3fn", "e5m2") else 1.0
    a = _vals(rng.standard_normal((5, 37)) * scale, fin)
    b = _vals(rng.standard_normal((37, 4)) * scale, fin)
    c = _vals(rng.standard_normal((5, 4)), facc)
    _check(a, b, None, fin, model, facc)
    _check(a, b, c, fin, model, facc)
    _check(a[:1, :1], b[:1, :1], None, fin, model, facc)            # 1 x 1, k = 1
    _check(a[:, :1], b[:1, :], c, fin, model, facc)                 # k = 1 with C


@pytest.mark.parametrize("model,facc", MODELS)
def test_near_ties(model, facc):
    """Exact midpoints between accumulator neighbours, and midpoint +- one product quantum
    (2^-48 = 2^-24 * 2^-24 for fp16 inputs), with and without a large cancelling pair (which
    defeats certificates 1 and 2 and sends the element to Dot2 / the exact kernel)."""
    frac = 23 if facc == "fp32" else 10
    rows_a, rows_b = [], []
    for lead in (1.0, 1.5, -1.25, 1.0 - 2.0 ** -11):
        e = math.floor(math.log2(abs(lead)))
        half = math.copysign(2.0 ** (e - frac - 1), lead)       # half an ulp of lead
        h = 2.0 ** ((e - frac - 1) // 2)
        for eps in (0.0, 1.0, -1.0):
            for big in (0.0, 2.0 ** 7, 2.0 ** 15):
                a = [lead, big, -big, math.copysign(h, half), eps * 2.0 ** -24]
                b = [1.0, big, big, abs(half) / h, 2.0 ** -24]
                rows_a.append(a)
                rows_b.append(b)
    A = _vals(np.array(rows_a), "fp16")
    B = _vals(np.array(rows_b).T, "fp16")
    assert np.array_equal(A.astype(np.float64), np.array(rows_a))
    assert np.array_equal(B.astype(np.float64), np.array(rows_b).T)
    # Every row against every column: the diagonal holds the constructed ties.
    d = _check(A, B, None, "fp16", model, facc)
    _check(A, B, np.zeros(d.shape, np.float32), "fp16", model, facc)


@pytest.mark.parametrize("fin,big", (("fp16", 2.0 ** 14), ("bf16", 2.0 ** 60)))
@pytest.mark.parametrize("model,facc", MODELS)
def test_ties_in_a_matrix(model, facc, fin, big):
    """Many midpoint cases at once (several per row and column, so that the fallbacks see
    lists of elements): x = 1 + 2^-(f+1) + d, d in {0, +-2^-24}, behind cancelling pairs of
    big^2 (for bf16 beyond float64's 53 bits: non-zero TwoSum errors in Dot2)."""
    frac = 23 if facc == "fp32" else 10
    rng = np.random.default_rng(7)
    m, n = 6, 5
    k = 8
    A = np.zeros((m, k))
    B = np.zeros((k, n))
    for i in range(m):
        A[i, :4] = [1.0, big, -big, 2.0 ** -(frac + 1) if frac == 10 else 2.0 ** -24]
        A[i, 4] = rng.choice([0.0, 2.0 ** -24, -(2.0 ** -24)])
    B[0] = 1.0
    B[1] = big * 2.0 ** rng.integers(-3, 1, n)
    B[2] = B[1]
    B[3] = 1.0 if frac == 10 else 1.0
    B[4] = rng.choice([1.0, -1.0, 0.5], n)
    A = _vals(A, fin)
    B = _vals(B, fin)
    _check(A, B, None, fin, model, facc)
    C = _vals(rng.choice([0.0, 2.0 ** -30, -1.0], (m, n)), facc)
    _check(A, B, C, fin, model, facc)


@pytest.mark.parametrize("fin", ("fp16", "bf16", "fp32"))
@pytest.mark.parametrize("model,facc", MODELS)
def test_cancellation_and_gaps(fin, model, facc):
    rng = np.random.default_rng(11)
    hi = {"fp16": 2.0 ** 15, "bf16": 2.0 ** 100, "fp32": 2.0 ** 100}[fin]
    lo = {"fp16": 2.0 ** -24, "bf16": 2.0 ** -120, "fp32": 2.0 ** -140}[fin]
    m, k, n = 4, 24, 3
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    # Cancelling giant pairs, tiny terms, a few mid-size terms.
    a[:, 0] = hi
    a[:, 1] = -hi
    b[0] = b[1] = rng.choice([1.0, 0.75, 1.5], n)
    a[:, 2:6] = lo * rng.integers(1, 8, (m, 4))
    b[2:6] = rng.choice([1.0, -1.0, 3.0], (4, n))
    A = _vals(a, fin)
    B = _vals(b, fin)
    _check(A, B, None, fin, model, facc)
    C = _vals(rng.standard_normal((m, n)) * 1e-3, facc)
    _check(A, B, C, fin, model, facc)


@pytest.mark.parametrize("model,facc", MODELS)
def test_subnormal_inputs_and_results(model, facc):
    rng = np.random.default_rng(3)
    # fp16 subnormal inputs; products down to 2^-48 (fp32 normal, fp16 zero/subnormal results).
    a = _vals(rng.integers(-1023, 1024, (4, 9)) * 2.0 ** -24, "fp16")
    b = _vals(rng.integers(-1023, 1024, (9, 3)) * 2.0 ** -24, "fp16")
    _check(a, b, None, "fp16", model, facc)
    # bf16 tiny products: fp32 subnormal results (2^-140) and negative ones that round to -0.
    a = _vals(rng.choice([2.0 ** -70, -(2.0 ** -71), 3 * 2.0 ** -80], (3, 6)), "bf16")
    b = _vals(rng.choice([2.0 ** -70, 2.0 ** -75, -(2.0 ** -90)], (6, 4)), "bf16")
    _check(a, b, None, "bf16", model, facc)
    c = _vals(rng.choice([0.0, 2.0 ** -149 if facc == "fp32" else 2.0 ** -24], (3, 4)), facc)
    _check(a, b, c, "bf16", model, facc)


@pytest.mark.parametrize("model,facc", MODELS)
def test_overflow(model, facc):
    big = 2.0 ** 127
    a = _vals([[big, 2.0 ** 10, 0.0], [big, -big, 1.0], [2.0 ** 100, 2.0 ** 100, 1.0]], "bf16")
    b = _vals([[2.0 ** 10, 1.0, 1.0], [big, big, 1.0], [1.0, 1.0, 1.0]], "bf16")
    _check(a, b, None, "bf16", model, facc)
    a = _vals([[60000.0, 60000.0], [60000.0, -60000.0]], "fp16")
    b = _vals([[60000.0, 2.0], [60000.0, 1.0]], "fp16")
    _check(a, b, None, "fp16", model, facc)


@pytest.mark.parametrize("model,facc", MODELS)
def test_special_values(model, facc):
    inf, nan = np.inf, np.nan
    a = np.array([[1.0, 2.0, 3.0], [inf, 1.0, 0.0], [0.0, 1.0, 2.0], [nan, 0.0, 0.0],
                  [-inf, 1.0, 1.0]], np.float32)
    b = np.array([[1.0, 0.0, inf, 2.0], [1.0, 1.0, 1.0, -inf], [1.0, 1.0, 1.0, 1.0]],
                 np.float32)
    _check(a, b, None, "fp16", model, facc)
    c = np.array([[inf, -inf, nan, 0.0]] * 5, np.float32)
    _check(a, b, c, "fp16", model, facc)


@pytest.mark.parametrize("model,facc", MODELS)
def test_zeros_and_signed_zeros(model, facc):
    a = np.array([[-0.0, 0.0, 1.0], [1.0, -1.0, 0.0], [-0.0, -0.0, -0.0]], np.float32)
    b = np.array([[1.0, -0.0], [1.0, 2.0], [0.0, -0.0]], np.float32)
    for c in (None, np.full((3, 2), -0.0, np.float32), np.full((3, 2), 0.0, np.float32)):
        d = _check(a, b, c, "fp16", model, facc)
        assert not np.signbit(d[d == 0]).any()     # exact zeros are +0 (spec 8.6)
    # A tiny negative result that rounds to zero keeps its sign.
    a = _vals([[-(2.0 ** -24)]], "fp16")
    b = _vals([[2.0 ** -24]], "fp16")
    d = _check(a, b, None, "fp16", model, facc)
    if facc == "fp16":
        assert np.signbit(d[0, 0]) and d[0, 0] == 0.0


def _mlp_data(rng):
    def h(x):
        return _vals(x, "fp16")
    x = h(rng.standard_normal((128, 784)))
    w1 = h(rng.uniform(-1 / 28, 1 / 28, (784, 256)))
    w2 = h(rng.uniform(-1 / 16, 1 / 16, (256, 128)))
    w3 = h(rng.uniform(-1 / 11, 1 / 11, (128, 10)))
    a1 = h(np.maximum(rng.standard_normal((128, 256)), 0))
    a2 = h(np.maximum(rng.standard_normal((128, 128)), 0))
    g3 = h(rng.standard_normal((128, 10)) * 1e-3)
    g2 = h(rng.standard_normal((128, 128)) * 1e-3 * (rng.random((128, 128)) > 0.5))
    g1 = h(rng.standard_normal((128, 256)) * 1e-3 * (rng.random((128, 256)) > 0.5))

    def bias(n):
        return np.broadcast_to(_vals(rng.standard_normal(n) * 0.01, "fp32"), (128, n))
    return [(x, w1, bias(256)), (a1, w2, bias(128)), (a2, w3, bias(10)),
            (g3, np.ascontiguousarray(w3.T), None), (g2, np.ascontiguousarray(w2.T), None),
            (g1, np.ascontiguousarray(w1.T), None), (np.ascontiguousarray(a2.T), g3, None),
            (np.ascontiguousarray(a1.T), g2, None), (np.ascontiguousarray(x.T), g1, None)]


def _exact_ref(a, b, c, facc):
    """The superaccumulator (one block of k, one rounding): exact, and a code path the fast
    path does not share."""
    model = tc.get_model("ideal-fp32" if facc == "fp32" else "ideal-fp16", "fp16")
    m, k = a.shape
    n = b.shape[1]
    cz = np.zeros((m, n)) if c is None else np.asarray(c, np.float64)
    out = np.empty((m, n))
    X.exact_gemm(a.astype(np.float64), b.astype(np.float64), np.ascontiguousarray(cz), out,
                 max(k, 1), model.out_frac, model.acc_format.emin, model.acc_format.emax, True)
    return out.astype(np.float32)


@pytest.mark.parametrize("model,facc", MODELS)
def test_mlp_shapes(model, facc):
    rng = np.random.default_rng(5)
    for a, b, c in _mlp_data(rng):
        cc = None if c is None else (c if facc == "fp32" else _vals(c, "fp16"))
        d = tc.gemm(a, b, cc, model=model, in_format="fp16", acc_format=facc)
        _same(d, _exact_ref(a, b, cc, facc))
        # A few elements against the Fraction reference too.
        for i, j in ((0, 0), (a.shape[0] - 1, b.shape[1] - 1), (a.shape[0] // 2, 3)):
            cij = 0.0 if cc is None else float(cc[i, j])
            r = R.dot([float(v) for v in a[i]], [float(v) for v in b[:, j]], cij, K=None,
                      F=None, in_fmt="fp16", acc_fmt=facc, mode="rne")
            _same(d[i:i + 1, j:j + 1], np.array([[r]], np.float32))


def _paths(a, b, c, fin, facc):
    """(uncertified by certificates 1-2, computed by the exact kernel) for one problem."""
    model = tc.get_model("ideal-fp32" if facc == "fp32" else "ideal-fp16", fin)
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    m, k = a.shape
    n = b.shape[1]
    s0 = a64 @ b64
    f, emin, emax = model.out_frac, model.acc_format.emin, model.acc_format.emax
    mode = 0 if facc == "fp32" else 1
    out = np.empty((m, n), np.float32)
    bad = np.empty((m, n), np.uint8)
    left = np.empty(m, np.int64)
    man = model.in_format.man_bits

    def stats(x, axis):
        nz = np.where(x != 0, np.abs(x), np.inf)
        e = np.floor(np.log2(nz.min(axis=axis)))
        e = np.where(np.isfinite(e), np.maximum(e, model.in_format.emin), 4000)
        return (x * x).sum(axis=axis), e.astype(np.int64)
    an, ae = stats(a64, 1)
    bn, be = stats(b64, 0)
    cv = s0 if c is None else c.astype(np.float64)
    g = FI.bracket_factor(k)
    args = (2.0 ** -f, 2.0 ** (emin - f), 2.0 ** (emax + 1), True)
    nbad = FI.certify(s0, cv, c is not None, an, ae, bn, be, 53 - 2 * man, g, out, bad, left,
                      mode, *args)
    nexact = 0
    if nbad:
        nexact = FI.dot2_fix(a64, b64, bad, left, nbad, cv, c is not None, out, mode, *args,
                             f, emin, emax)
    _same(out, _ref(a, b, c, fin, facc))
    return nbad, nexact


def _dot2_data(kind, m, k, n, rng):
    """Operands for the certificate-3 test: N(0,1) fp16; fp16 over a wide exponent range with
    cancelling pairs; bf16 with cancelling pairs beyond float64's 53 bits (non-zero TwoSum
    errors in every chain)."""
    if kind == "normal":
        return (_vals(rng.standard_normal((m, k)), "fp16"),
                _vals(rng.standard_normal((k, n)), "fp16"), "fp16")
    fin, big = ("fp16", 2.0 ** 10) if kind == "wide" else ("bf16", 2.0 ** 60)
    a = rng.standard_normal((m, k)) * np.exp2(rng.integers(-20, 8, (m, k)))
    b = rng.standard_normal((k, n)) * np.exp2(rng.integers(-20, 8, (k, n)))
    if k >= 3:
        a[:, 1], a[:, 2] = big, -big
        b[1], b[2] = big * rng.choice([1.0, 0.5], n), b[1]
    return _vals(a, fin), _vals(b, fin), fin


def _midpoints(a, b, c, f, emin, emax):
    """How many elements' exact values c + sum a b (Fractions) lie halfway between two
    neighbours of the accumulator (f fraction bits, emin, emax)."""
    m, n = a.shape[0], b.shape[1]
    cnt = 0
    for i in range(m):
        ai = [Fraction(float(v)) for v in a[i]]
        for j in range(n):
            x = sum((u * Fraction(float(v)) for u, v in zip(ai, b[:, j])),
                    Fraction(0) if c is None else Fraction(float(c[i, j])))
            if x != 0 and R.round_fraction(x, f + 1, emin, emax, "rtz") == x and \
                    R.round_fraction(x, f, emin, emax, "rtz") != x:
                cnt += 1
    return cnt


@pytest.mark.parametrize("kind", ("normal", "wide", "beyond53"))
@pytest.mark.parametrize("m,k,n", ((9, 1024, 7), (6, 13, 5), (4, 30, 5), (5, 3, 6)))
def test_certificate_3_on_every_element(kind, m, k, n):
    """dot2_fix with every element marked: the compensated sum (vector chains over k, the
    chains and the last k mod LANES products joined by a scalar chain from c) settles the
    elements, and its results equal the superaccumulator's, for float32 and float64 carriers
    of A and B, with and without C, into fp32 and fp16 accumulators; k = 1024, 13, 30 and 3
    leave every remainder of k mod 4 (AVX2's LANES) to the scalar chain, and 0, 5, 6 and 3 of
    k mod 8 (AVX-512's)."""
    rng = np.random.default_rng(hash((kind, m, k, n)) & 0xFFFF)
    a, b, fin = _dot2_data(kind, m, k, n, rng)
    for facc in ("fp32", "fp16"):
        model = tc.get_model("ideal-fp32" if facc == "fp32" else "ideal-fp16", fin)
        f, emin, emax = model.out_frac, model.acc_format.emin, model.acc_format.emax
        mode = 0 if facc == "fp32" else 1
        args = (2.0 ** -f, 2.0 ** (emin - f), 2.0 ** (emax + 1), True, f, emin, emax)
        for c in (None, _vals(rng.standard_normal((m, n)) * 8.0, facc)):
            want = _exact_ref(a, b, c, facc)
            ties = _midpoints(a, b, c, f, emin, emax)
            cv = np.zeros((m, n)) if c is None else c.astype(np.float64)
            for ca, cb in ((np.float32, np.float32), (np.float64, np.float32),
                           (np.float32, np.float64)):
                out = np.full((m, n), np.nan, np.float32)
                bad = np.ones((m, n), np.uint8)
                left = np.full(m, n, np.int64)
                nexact = FI.dot2_fix(a.astype(ca), b.astype(cb), bad, left, m * n, cv,
                                     c is not None, out, mode, *args)
                _same(out, want)
                # Only an exact midpoint (with a non-zero TwoSum error) is left to the exact
                # kernel; the N(0,1) and wide fp16 data hold none.
                assert nexact <= ties and (kind == "beyond53" or nexact == 0)


def test_every_path_is_taken():
    """The constructed cases reach each stage: certificates 1-2 alone, Dot2, the exact kernel."""
    rng = np.random.default_rng(1)
    a = _vals(rng.standard_normal((4, 16)), "fp16")
    b = _vals(rng.standard_normal((16, 3)), "fp16")
    assert _paths(a, b, None, "fp16", "fp32") == (0, 0)
    # Midpoint 1 + 2^-24 plus a tiny offset behind a cancelling pair of 2^120 (beyond float64's
    # reach, so TwoSum errors are non-zero): Dot2 settles it.
    a = _vals([[1.0, 2.0 ** 60, -(2.0 ** 60), 2.0 ** -12, 2.0 ** -12]], "bf16")
    b = _vals([[1.0], [2.0 ** 60], [2.0 ** 60], [2.0 ** -12], [2.0 ** -36]], "bf16")
    nbad, nexact = _paths(a, b, None, "bf16", "fp32")
    assert nbad == 1 and nexact == 0
    # The exact midpoint itself: only the exact kernel can round it.
    b = _vals([[1.0], [2.0 ** 60], [2.0 ** 60], [2.0 ** -12], [0.0]], "bf16")
    nbad, nexact = _paths(a, b, None, "bf16", "fp32")
    assert nbad == 1 and nexact == 1
    d = tc.gemm(a, b, model="ideal-fp32", in_format="bf16")
    assert d[0, 0] == 1.0                       # tie to even
    # Inf in a row: straight to the exact kernel.
    a2 = np.array([[np.inf, 1.0]], np.float32)
    b2 = np.array([[1.0], [2.0]], np.float32)
    assert _paths(a2, b2, None, "fp16", "fp32") == (1, 1)


def test_scratch_reuse_does_not_leak():
    """Back-to-back calls of different shapes (the per-thread scratch arrays are reused)."""
    rng = np.random.default_rng(2)
    shapes = [(3, 5, 4), (7, 2, 9), (3, 5, 4), (1, 1, 1)]
    prev = []
    for m, k, n in shapes:
        a = _vals(rng.standard_normal((m, k)), "fp16")
        b = _vals(rng.standard_normal((k, n)), "fp16")
        c = _vals(rng.standard_normal((m, n)), "fp32")
        d = tc.gemm(a, b, c, model="ideal-fp32")
        prev.append((d, d.copy()))
        _same(d, _ref(a, b, c, "fp16", "fp32"))
    for d, keep in prev:
        _same(d, keep)


def test_fraction_reference_sanity():
    # The reference itself: 1 + 2^-24 rounds to 1 (tie to even) in fp32.
    r = R.round_fraction(Fraction(1) + Fraction(1, 2 ** 24), 23, -126, 127, "rne")
    assert r == 1.0


def test_fallback_reads_b_in_either_carrier_and_after_k_order():
    """The Dot2 and exact fallbacks read B's values in its own carrier (float32 or float64),
    also the permuted B when k_order reorders k: the same bits, equal to the reference, every
    time."""
    # Columns 0 and 1 need Dot2 and the exact kernel (see test_every_path_is_taken); column 2
    # is plain; k padded with a few ordinary terms so that k_order really moves things.
    a = _vals([[1.0, 2.0 ** 60, -(2.0 ** 60), 2.0 ** -12, 2.0 ** -12, 0.5, -0.5]], "bf16")
    b = _vals([[1.0, 1.0, 0.25], [2.0 ** 60, 2.0 ** 60, 1.0], [2.0 ** 60, 2.0 ** 60, 2.0],
               [2.0 ** -12, 2.0 ** -12, 3.0], [2.0 ** -36, 0.0, 4.0], [3.0, 3.0, 5.0],
               [3.0, 3.0, 6.0]], "bf16")
    want = _ref(a, b, None, "bf16", "fp32")
    seen = {}
    orig = FI.dot2_fix

    def spy(av, bv, *rest):
        seen["dtype"] = bv.dtype
        return orig(av, bv, *rest)

    FI.dot2_fix = spy
    try:
        for carrier in (np.float32, np.float64):
            seen.clear()
            d = tc.gemm(a.astype(carrier), b.astype(carrier), model="ideal-fp32",
                        in_format="bf16")
            assert seen["dtype"] == carrier
            _same(d, want)
            perm = np.array([6, 0, 5, 1, 4, 2, 3])
            seen.clear()
            d = tc.gemm(a.astype(carrier), b.astype(carrier), model="ideal-fp32",
                        in_format="bf16", k_order=perm)
            assert seen["dtype"] == carrier        # the permuted B, in its own carrier
            _same(d, _ref(a[:, perm], b[perm, :], None, "bf16", "fp32"))
    finally:
        FI.dot2_fix = orig


@pytest.mark.parametrize("shape", [(5, 7, 3), (300, 900, 400)])     # serial and parallel prep
def test_transposed_operands_are_read_in_place_with_the_same_bits(shape):
    """F-contiguous float32 operands (transposed views) take the in-place preparation: the
    same bits as their C-contiguous copies for every layout pair, the fallback included."""
    m, k, n = shape
    rng = np.random.default_rng(7)
    a = _vals(rng.standard_normal((m, k)) * np.exp2(rng.integers(-12, 6, (m, k))), "fp16")
    b = _vals(rng.standard_normal((k, n)) * np.exp2(rng.integers(-12, 6, (k, n))), "fp16")
    # D[0, 0] = 1 + 2^-24 exactly, the midpoint of two fp32 neighbours; the subnormal 2^-24 in
    # row 0 and the 2^14 in column 0 (met by a zero) defeat the exactness certificate, and the
    # bracket holds the midpoint: the fallback.
    a[0, :] = 0.0
    a[0, :3] = [1.0, 2.0 ** -12, 2.0 ** -24]
    b[:4, 0] = [1.0, 2.0 ** -12, 0.0, 2.0 ** 14]
    calls = []
    orig = FI.dot2_fix

    def spy(*args):
        calls.append(1)
        return orig(*args)

    FI.dot2_fix = spy
    try:
        want = tc.gemm(a, b, model="ideal-fp32")
        assert want[0, 0] == 1.0 and calls                  # tie to even, via the fallback
        at = np.asfortranarray(a)
        bt = np.asfortranarray(b)
        assert at.flags.f_contiguous and not at.flags.c_contiguous
        for x, y in ((at, b), (a, bt), (at, bt)):
            calls.clear()
            _same(tc.gemm(x, y, model="ideal-fp32"), want)
            assert calls
            _same(tc.gemm(x, y, model="ideal-fp16", acc_format="fp16"),
                  tc.gemm(a, b, model="ideal-fp16", acc_format="fp16"))
    finally:
        FI.dot2_fix = orig
    if m * n <= 64:
        _same(want, _ref(a, b, None, "fp16", "fp32"))


def test_transposed_operand_off_the_grid_is_named():
    a = np.asfortranarray(_vals(np.ones((4, 6)), "fp16"))
    b = np.asfortranarray(_vals(np.ones((6, 5)), "fp16"))
    a[2, 3] = 1.0 + 2.0 ** -20
    with pytest.raises(ValueError, match=r"A\[2, 3\] = 1\.00000095"):
        tc.gemm(a, b, model="ideal-fp32")
    a[2, 3] = 1.0
    b[4, 1] = 2.0 ** -30
    with pytest.raises(ValueError, match=r"B\[4, 1\]"):
        tc.gemm(a, b, model="ideal-fp32")
