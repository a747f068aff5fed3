"""softfloat.tensorcore._prep (the operand preparation of the Tensor Core API) and the packers
of softfloat.tensorcore._tile: the grid filter never passes an element softfloat's encoder
refuses, and the filter plus the exact check decide exactly as an independent grid test
(sf.round(x) == x); the conversions are exact; the ideal models' row / column statistics equal
numpy's; the exponent codes of the packed operands; tf32 truncation -- over every float32
exponent field with boundary and random fractions, for formats with and without subnormals,
Inf and NaN."""

from __future__ import annotations

import numpy as np
import pytest

import softfloat as sf
from softfloat._intrinsics import LANES, ROWS
from softfloat.tensorcore import _prep as P
from softfloat.tensorcore import _tile as T

CUSTOM_NOSUB = sf.Format("e5m3ns", exp_bits=5, man_bits=3, subnormals=False)
FORMATS = ["fp16", "bf16", "e4m3fn", "e5m2", "fp32", CUSTOM_NOSUB]


def _patterns(rng):
    fr = [0, 1, 2, 0x1000, 0x1FFF, 0x2000, 0x3FFF, 0x4000, 0xFFFF, 0x10000, 0x7FFFFF,
          0x400000, 0x7FE000, 0x7FC000, 0x7F0000]
    out = []
    for e in range(256):
        f = np.concatenate([fr, rng.integers(0, 1 << 23, 12)]).astype(np.uint32)
        out.append((np.uint32(e) << np.uint32(23)) | f)
    p = np.concatenate(out)
    return np.concatenate([p, p | np.uint32(0x80000000)]).astype(np.uint32).view(np.float32)


def _expected_bad(x, fmt):
    """Off the grid by an independent test: a finite x is a value iff rounding keeps it."""
    with np.errstate(all="ignore"):
        r = sf.round(x, fmt, "rne")
    bad = np.where(np.isfinite(x), r != x, False)
    bad |= np.isinf(x) & (not fmt.has_inf)
    bad |= np.isnan(x) & (not fmt.has_nan)
    return bad


@pytest.mark.parametrize("fmt", FORMATS)
def test_filter_and_exact_check_decide_as_the_grid(fmt):
    fmt = sf.get_format(fmt)
    x = _patterns(np.random.default_rng(1))
    bad = _expected_bad(x, fmt)
    assert bad.any() or fmt.name == "fp32"
    assert (~bad).any()
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    gp = P.filter_params(fmt)
    out = np.empty(x.size)
    rej = P.convert(x, out, gp)
    assert np.array_equal(out.view(np.uint64), x64.view(np.uint64))      # exact conversion
    passed = np.array([P.fast_ok(v, gp) for v in x64])
    assert rej == np.count_nonzero(~passed)
    assert not (passed & bad).any()              # the filter never passes a bad element
    assert np.array_equal(passed, ~bad & np.isfinite(x))    # and passes every finite value
    # the exact check (softfloat's encoder) on every element, one at a time: with the filter
    # in front (as it runs), and without it (a filter that passes nothing but zeros)
    fp = fmt.kernel_params()
    nofilter = (np.inf, -1.0, np.uint64(0), np.int64(0))
    for g in (gp, nofilter):
        verdict = np.array([P.first_off_grid(x[t:t + 1], fp, g) == 0 for t in range(x.size)])
        assert np.array_equal(verdict, bad)
        # and on a whole array: the first bad element
        first = int(np.argmax(bad)) if bad.any() else -1
        assert P.first_off_grid(x, fp, g) == first


def test_checker_names_the_first_bad_element_in_the_operand_shape():
    x = np.ones((3, 4), np.float32)
    x[2, 1] = 2.0 ** -20                        # an fp16 value: the exact check finds nothing
    chk = P.Checker(x, sf.get_format("fp16"), "A")
    chk.settle(1)
    x[1, 3] = 1 + 2.0 ** -12                    # off the grid
    chk = P.Checker(x, sf.get_format("fp16"), "A")
    with pytest.raises(ValueError, match=r"A\[1, 3\] = 1.000244140625 is not a fp16 value"):
        chk.settle(1)
    P.Checker(x, sf.get_format("fp16"), "A").settle(0)     # nothing reported, nothing checked


@pytest.mark.parametrize("shape", [(300, 517), (5, 9)])
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3fn", CUSTOM_NOSUB])
def test_row_and_column_statistics(fmt, shape):
    """sum x^2 and the smallest exponent max(floor(log2|x|), emin) over the non-zero elements,
    per row (prep_rows) and per column (prep_cols: ROW_BLOCKS blocks of rows, fewer when B has
    fewer rows), against numpy; conversions exact; the rejects are the elements the filter does
    not pass; one thread and two give the same."""
    import numba
    fmt = sf.get_format(fmt)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 5, shape))
    x = np.asarray(sf.round(x, fmt), np.float32)
    x[::7, ::5] = 0.0
    x[min(5, shape[0] - 1)] = 0.0                   # a row without non-zero elements
    x64 = x.astype(np.float64)
    nz = np.where(x64 != 0, np.abs(x64), np.inf)

    def stats(axis):
        e = np.floor(np.log2(nz.min(axis=axis)))
        e = np.where(np.isfinite(e), np.maximum(e, fmt.emin), P.NO_EXP).astype(np.int64)
        return (x64 * x64).sum(axis=axis), e
    gp = P.filter_params(fmt)
    results = []
    old = numba.get_num_threads()
    try:
        for nt in sorted({1, old}):
            numba.set_num_threads(nt)
            m, k = x.shape
            oa, ob = np.empty((m, k)), np.empty((m, k))
            nra, exa, nrb, exb = np.empty(m), np.empty(m, np.int64), np.empty(k), \
                np.empty(k, np.int64)
            ra = P.prep_rows(x, oa, gp, fmt.emin, nra, exa)
            rb = P.prep_cols(x, ob, gp, fmt.emin, nrb, exb)
            results.append((oa, ob, nra, exa, nrb, exb, ra, rb))
    finally:
        numba.set_num_threads(old)
    for got in results:
        oa, ob, nra, exa, nrb, exb, ra, rb = got
        assert np.array_equal(oa, x64) and np.array_equal(ob, x64)
        for (nr, ex), axis in (((nra, exa), 1), ((nrb, exb), 0)):
            nw, ew = stats(axis)
            assert np.array_equal(ex, ew)
            assert np.allclose(nr, nw, rtol=1e-12, atol=0)
        assert ra == rb == 0                        # (every element is a finite value)
    for a, b in zip(results[0], results[-1]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("trans", [False, True])
def test_packers(trans):
    """pack_a / pack_b: values and exponent codes in the tile layout, zero padding, Inf/NaN
    flags per row / column, rejects; a transposed operand read in place gives the same."""
    fmt = sf.get_format("fp16")
    rng = np.random.default_rng(3)
    m, k, n, K = 6, 7, LANES + 3, 4
    a = np.asarray(sf.round(rng.standard_normal((m, k)) * np.exp2(rng.integers(-20, 5, (m, k))),
                            fmt), np.float32)
    b = np.asarray(sf.round(rng.standard_normal((k, n)), fmt), np.float32)
    a[1, 2] = 0.0
    a[4, 0] = np.inf
    b[3, n - 1] = np.nan
    kp = -(-k // K) * K
    nq, npan = -(-m // ROWS), -(-n // LANES)
    av = np.full((nq * ROWS, kp), 7.0)
    pea = np.zeros((nq, kp, ROWS * LANES), np.int16)
    bp = np.full((npan, kp, LANES), 7.0)
    peb = np.zeros((npan, kp, LANES), np.int16)
    rowbad, colbad = np.empty(m, np.uint8), np.empty(n, np.uint8)
    gp = P.filter_params(fmt)
    xa = np.ascontiguousarray(a.T) if trans else a
    xb = np.ascontiguousarray(b.T) if trans else b
    ra = T.pack_a(xa, trans, av, pea, gp, fmt.emin, rowbad)
    rb = T.pack_b(xb, trans, bp, peb, gp, fmt.emin, colbad)
    a64 = np.zeros((nq * ROWS, kp))
    a64[:m, :k] = a
    assert np.array_equal(av, a64, equal_nan=True)
    b64 = np.zeros((kp, npan * LANES))
    b64[:k, :n] = b
    assert np.array_equal(bp, b64.reshape(kp, npan, LANES).transpose(1, 0, 2), equal_nan=True)
    assert list(rowbad) == [0, 0, 0, 0, 1, 0] and list(np.nonzero(colbad)[0]) == [n - 1]
    assert ra == rb == 1                                    # the Inf, the NaN

    def code(v, bias):
        if v == 0 or not np.isfinite(v):
            return T.ZERO_E16
        return 16 * (max(int(np.floor(np.log2(abs(v)))), fmt.emin) + bias)
    for i in range(nq * ROWS):
        for t in range(kp):
            want = code(a64[i, t], 0)
            assert np.all(pea[i // ROWS, t, (i % ROWS) * LANES:(i % ROWS + 1) * LANES] == want)
    for j in range(npan * LANES):
        for t in range(kp):
            assert peb[j // LANES, t, j % LANES] == code(b64[t, j], T.BIAS)


def test_tf32_operand_truncates_and_keeps_nan():
    rng = np.random.default_rng(6)
    u = rng.integers(0, 1 << 32, 50000, dtype=np.uint64).astype(np.uint32)
    u[:4] = [0x7F800001, 0xFF800FFF, 0x7F800000, 0x3F7FFFFF]   # NaNs with low payloads, Inf
    f = u.view(np.float32)
    out = P._tf32(f, "A", None)
    with np.errstate(invalid="ignore"):
        expect = np.where(np.isnan(f), np.nan, (u & np.uint32(0xFFFFE000)).view(np.float32))
    assert np.array_equal(np.isnan(out), np.isnan(f))
    ok = ~np.isnan(f)
    assert np.array_equal(out[ok].view(np.uint32), expect[ok].view(np.uint32))
    assert out[3] == 1.0 - 2.0 ** -11      # FHMP21 tf32 B1: its square is 1 - 2^-10 + 2^-22
