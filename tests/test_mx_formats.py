"""The OCP MX sub-byte element formats e2m1 (fp4), e2m3 and e3m2 (fp6) as softfloat presets,
against ml_dtypes (float4_e2m1fn, float6_e2m3fn, float6_e3m2fn) and the exact oracle.

* every bit pattern: from_bits equals ml_dtypes' decoding, to_bits(from_bits(c)) == c;
* every float32 input of the binades that can reach the grid (both signs, exhaustively) and the
  first, last and 4097-strided patterns of every other binade: sf.round equals ml_dtypes'
  conversion bit for bit;
* where they differ -- NaN input: the formats have no NaN; softfloat returns a NaN carrier and
  raises INVALID (its documented convention), ml_dtypes returns -0.0 -- the exact oracle
  (tests/oracle.py) sides with softfloat.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import oracle
import softfloat as sf

CASES = [("e2m1", ml_dtypes.float4_e2m1fn, 6.0, 0.5),
         ("e2m3", ml_dtypes.float6_e2m3fn, 7.5, 0.125),
         ("e3m2", ml_dtypes.float6_e3m2fn, 28.0, 0.0625)]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,ml,mx,smallest", CASES, ids=IDS)
def test_derived_numbers_and_aliases(name, ml, mx, smallest):
    f = sf.get_format(name)
    fi = ml_dtypes.finfo(ml)
    assert f.max == mx == float(fi.max)
    assert f.smallest_subnormal == smallest == float(fi.smallest_subnormal)
    assert f.tiny == float(fi.smallest_normal)
    assert f.bits == fi.bits and not f.has_nan and not f.has_inf
    assert sf.get_format(ml.__name__) is f
    assert sf.get_format(name.upper()) is f


def test_fp_aliases():
    assert sf.get_format("fp4").name == "e2m1"
    assert sf.get_format("fp6_e2m3").name == "e2m3"
    assert sf.get_format("fp6_e3m2").name == "e3m2"


@pytest.mark.parametrize("name,ml,mx,smallest", CASES, ids=IDS)
def test_every_bit_pattern(name, ml, mx, smallest):
    f = sf.get_format(name)
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    got = sf.from_bits(codes, f)
    want = codes.view(ml).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(sf.to_bits(got, f), codes)
    for c, v in zip(codes, got):
        assert oracle.bits_to_value(int(c), f) == float(v)


def _binade(e: int, sign: int, offsets=None) -> np.ndarray:
    """The float32 patterns of the binade [2^e, 2^(e+1)) (e >= -126), or of the subnormals
    and zero (e = -127), with the given sign bit: all of them, or those at ``offsets``."""
    field = 0 if e == -127 else e + 127
    base = np.uint32((sign << 31) | (field << 23))
    if offsets is None:
        offsets = np.arange(1 << 23, dtype=np.uint32)
    return (base + offsets).view(np.float32)


def _compare(x, f, ml):
    got = sf.round(x, f)
    want = x.astype(ml).astype(np.float32)
    bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
    assert bad.size == 0, (f"{f.name}: {bad.size} differences, e.g. x={x[bad[:3]]!r}: softfloat "
                           f"{got[bad[:3]]!r}, ml_dtypes {want[bad[:3]]!r}")


@pytest.mark.parametrize("name,ml,mx,smallest", CASES, ids=IDS)
def test_round_equals_ml_dtypes_on_every_float32_near_the_grid(name, ml, mx, smallest):
    f = sf.get_format(name)
    # From half the smallest subnormal's binade (below it everything rounds to +-0) to twice
    # the largest binade (above it everything saturates): every pattern, both signs.
    lo = f.emin - f.man_bits - 2
    hi = f.emax + 2
    for sign in (0, 1):
        for e in range(lo, hi + 1):
            _compare(_binade(e, sign), f, ml)


@pytest.mark.parametrize("name,ml,mx,smallest", CASES, ids=IDS)
def test_round_equals_ml_dtypes_far_from_the_grid(name, ml, mx, smallest):
    f = sf.get_format(name)
    lo = f.emin - f.man_bits - 2
    hi = f.emax + 2
    top = 1 << 23
    offsets = np.concatenate([np.arange(64), np.arange(0, top, 4097),
                              np.arange(top - 64, top)]).astype(np.uint32)
    parts = [_binade(e, sign, offsets) for sign in (0, 1)
             for e in [*range(-127, lo), *range(hi + 1, 128)]]
    x = np.concatenate(parts)
    _compare(x, f, ml)
    # infinities saturate in both
    _compare(np.array([np.inf, -np.inf], dtype=np.float32), f, ml)


@pytest.mark.parametrize("name,ml,mx,smallest", CASES, ids=IDS)
def test_nan_is_where_they_differ_and_the_oracle_sides_with_softfloat(name, ml, mx, smallest):
    f = sf.get_format(name)
    nan = np.array([np.nan], dtype=np.float32)
    theirs = nan.astype(ml).astype(np.float32)[0]
    assert theirs == 0.0 and np.signbit(theirs)          # ml_dtypes: NaN -> -0.0
    fl = sf.Flags()
    ours = sf.round(nan, f, flags=fl)[0]
    assert np.isnan(ours) and fl.invalid == 1            # softfloat: NaN carrier + INVALID
    want, flags = oracle.round_float(float("nan"), f, "rne")
    assert np.isnan(want) and "invalid" in flags         # the oracle: no value of the format
    with pytest.raises(ValueError):
        sf.to_bits(np.array([ours]), f)                  # and it cannot be encoded


def test_scale_codes_are_softfloats_e8m0_and_ue4m3():
    """The kernels' scale codes mean what softfloat's e8m0 and ue4m3 presets say: every code
    decodes alike, and a quantized tensor's scales are its scale codes decoded by the presets
    (independently of mx's own decoding)."""
    from softfloat import mx
    from softfloat.mx._tensor import scale_values

    codes = np.arange(256, dtype=np.uint8)
    want = np.asarray(sf.from_bits(codes, "e8m0"), dtype=np.float64)
    assert np.array_equal(want[:255], 2.0 ** (np.arange(255) - 127.0)) and np.isnan(want[255])
    got = scale_values(mx.get_block_format("mxfp8_e4m3"), codes).astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
    u = np.arange(128, dtype=np.uint8)
    e4m3 = np.asarray(sf.from_bits(u, "e4m3fn"), dtype=np.float64)   # the sign bit left off
    ue = np.asarray(sf.from_bits(u, "ue4m3"), dtype=np.float64)
    assert np.array_equal(ue, e4m3, equal_nan=True)
    got = scale_values(mx.get_block_format("nvfp4"), u).astype(np.float64)
    assert np.array_equal(got, ue, equal_nan=True)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((8, 64)) * 2.0 ** rng.integers(-40, 40, (8, 64))).astype(np.float32)
    for fmt, preset, kw in (("mxfp4_e2m1", "e8m0", {}),
                            ("nvfp4", "ue4m3", {"tensor_scale": 2.0 ** -20})):
        q = mx.quantize(x, fmt, **kw)
        dec = np.asarray(sf.from_bits(q.scale_bits, preset), dtype=np.float32)
        assert np.array_equal(q.scales.view(np.uint32), dec.view(np.uint32))
