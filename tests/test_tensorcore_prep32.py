"""softfloat.tensorcore._prep32 (the float32 bit-pattern preparation of the ideal models)
against the float64 kernel it replaces (_prep.prep_pair_serial) and against an independent
grid test (sf.round(x) == x): per element "off the grid", per row / column the smallest
exponent and sum x^2, and the float64 conversion, over every float32 exponent field with
boundary and random fractions, for formats with and without subnormals, Inf and NaN."""

from __future__ import annotations

import numpy as np
import pytest

import softfloat as sf
from softfloat.tensorcore import _prep as P64
from softfloat.tensorcore import _prep32 as P32

CUSTOM_NOSUB = sf.Format("e5m3ns", exp_bits=5, man_bits=3, subnormals=False)


def _patterns(rng):
    fr = [0, 1, 2, 0x1000, 0x1FFF, 0x2000, 0x3FFF, 0x4000, 0xFFFF, 0x10000, 0x7FFFFF,
          0x400000, 0x7FE000, 0x7FC000, 0x7F0000]
    out = []
    for e in range(256):
        f = np.concatenate([fr, rng.integers(0, 1 << 23, 12)]).astype(np.uint32)
        out.append((np.uint32(e) << np.uint32(23)) | f)
    p = np.concatenate(out)
    return np.concatenate([p, p | np.uint32(0x80000000)]).astype(np.uint32)


def _run(kernel_pair, x, fmt):
    """(bad per element, exp per element, norm per element) with each element its own row of
    A (and its own column of B)."""
    n = x.size
    a = np.ascontiguousarray(x.reshape(n, 1))
    b = np.ascontiguousarray(x.reshape(1, n))
    oa, ob = np.empty((n, 1)), np.empty((1, n))
    st = [np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64),
          np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64)]
    kernel_pair(a, b, oa, ob, fmt, st)
    return oa.ravel(), ob.ravel(), st


def _pair32(a, b, oa, ob, fmt, st):
    P32.prep_pair_serial32(a.view(np.uint32), oa, b.view(np.uint32), ob, P32.params32(fmt),
                           *st)


def _pair64(a, b, oa, ob, fmt, st):
    fp = fmt.kernel_params()
    m, emin, subn = fp.man_bits, fp.emin, fp.subnormals
    P64.prep_pair_serial(a, oa, b, ob, m, emin, float(fmt.max), subn, fmt.has_inf,
                         fmt.has_nan, *st)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3fn", "e5m2", "fp32", CUSTOM_NOSUB])
def test_prep32_matches_float64_kernel_and_round_trip(fmt):
    fmt = sf.get_format(fmt)
    x = _patterns(np.random.default_rng(1)).view(np.float32)
    assert x.dtype == np.float32
    oa32, ob32, st32 = _run(_pair32, x, fmt)
    oa64, ob64, st64 = _run(_pair64, x, fmt)
    # conversion
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    assert np.array_equal(oa32.view(np.uint64), x64.view(np.uint64))
    assert np.array_equal(ob32.view(np.uint64), oa32.view(np.uint64))
    # off-grid flags, rows (A) and columns (B), vs the float64 kernel and vs sf.round(x) == x
    bad32 = st32[0] != 0
    assert np.array_equal(bad32, st64[0] != 0)
    assert np.array_equal(st32[3] != 0, bad32)
    with np.errstate(all="ignore"):
        r = sf.round(x, fmt, "rne")
    finite = np.isfinite(x)
    expect = np.where(finite, r != x, False)
    expect |= np.isinf(x) & (not fmt.has_inf)
    expect |= np.isnan(x) & (not fmt.has_nan)
    assert np.array_equal(bad32, expect)
    assert (~bad32).any() and (bad32.any() or fmt.name == "fp32")   # fp32: all on the grid
    # statistics of the finite elements on the grid (off-grid ones raise before they are used;
    # an Inf/NaN makes sum x^2 Inf/NaN, which fails every certificate whatever its exponent)
    ok = ~bad32 & finite
    for i32, i64 in ((1, 1), (2, 2), (4, 4), (5, 5)):
        a, b = st32[i32][ok], st64[i64][ok]
        if st32[i32].dtype == np.float64:
            assert np.array_equal(np.isnan(a), np.isnan(b))
            assert np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])
        else:
            assert np.array_equal(a, b)


def test_prep32_parallel_equals_serial():
    rng = np.random.default_rng(2)
    x = np.asarray(sf.round(rng.standard_normal((300, 517)) * np.exp2(rng.integers(-20, 8,
                                                                                 (300, 517))),
                            "fp16"), np.float32)
    x[::7, ::5] = 0.0
    P = P32.params32(sf.get_format("fp16"))
    m, k = x.shape
    u = x.view(np.uint32)
    ser = [np.empty(m, np.int64), np.empty(m), np.empty(m, np.int64),
           np.empty(k, np.int64), np.empty(k), np.empty(k, np.int64)]
    oa, ob = np.empty((m, k)), np.empty((m, k))
    P32.prep_pair_serial32(u, oa, u, ob, P, *ser)
    par = [np.empty(m, np.int64), np.empty(m), np.empty(m, np.int64)]
    parc = [np.empty(k, np.int64), np.empty(k), np.empty(k, np.int64)]
    oa2, ob2 = np.empty((m, k)), np.empty((m, k))
    P32.prep_rows32(u, oa2, P, *par)
    P32.prep_cols32(u, ob2, P, *parc)
    assert np.array_equal(oa, oa2) and np.array_equal(ob, ob2)
    for s, p in zip(ser, par + parc):
        assert np.array_equal(s, p)
    assert not ser[0].any() and ser[2].min() >= -24


def test_params32_refuses_formats_it_cannot_handle():
    with pytest.raises(ValueError, match="float32 preparation"):
        P32.params32(sf.get_format("fp64"))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3fn", "e5m2", CUSTOM_NOSUB])
def test_convert_checked32_finds_the_same_first_bad_element(fmt):
    """The 1-d checked conversion (hardware models' operands): same float64 copy and same
    first off-grid index as the float64 kernel, serial and parallel, on arrays that are all
    on the grid and on arrays with one or several bad elements placed across chunks."""
    fmt = sf.get_format(fmt)
    rng = np.random.default_rng(4)
    good = np.asarray(sf.round(rng.standard_normal(3 * P32.CHUNK + 11)
                               * np.exp2(rng.integers(-30, 12, 3 * P32.CHUNK + 11)), fmt),
                      np.float32)
    pats = _patterns(rng).view(np.float32)
    fp = fmt.kernel_params()
    m, emin, subn = fp.man_bits, fp.emin, fp.subnormals
    cases = [good]
    for where in (0, P32.CHUNK + 5, good.size - 3):
        x = good.copy()
        x[where:where + 3] = pats[rng.integers(0, pats.size, 3)]
        cases.append(x)
    for x in cases:
        o64 = np.empty(x.size)
        ref = P64.convert_checked(x, o64, m, emin, float(fmt.max), subn, fmt.has_inf,
                                  fmt.has_nan, False)
        for kern in (P32.convert_checked32, P32.convert_checked32_serial):
            o32 = np.empty(x.size)
            got = kern(x.view(np.uint32), o32, P32.params32(fmt))
            assert got == ref
            assert np.array_equal(o32.view(np.uint64), o64.view(np.uint64))


def test_tf32_operand_truncates_and_keeps_nan():
    rng = np.random.default_rng(6)
    u = rng.integers(0, 1 << 32, 50000, dtype=np.uint64).astype(np.uint32)
    u[:4] = [0x7F800001, 0xFF800FFF, 0x7F800000, 0x3F7FFFFF]   # NaNs with low payloads, Inf
    out = np.empty(u.size)
    P32.tf32_operand(u, out)
    f = u.view(np.float32)
    with np.errstate(invalid="ignore"):
        expect = np.where(np.isnan(f), np.nan,
                          (u & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64))
    assert np.array_equal(np.isnan(out), np.isnan(f))
    ok = ~np.isnan(f)
    assert np.array_equal(out[ok].view(np.uint64), expect[ok].view(np.uint64))
    assert out[3] == 1.0 - 2.0 ** -11      # FHMP21 tf32 B1: its square is 1 - 2^-10 + 2^-22
