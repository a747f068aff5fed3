"""to_bits / from_bits and the IEEE utilities (next_up, next_down, ulp, exponent, classify),
against the oracle: exhaustively for the 8-bit formats and fp16, on samples for wider ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

import oracle
import softfloat as sf

SMALL = [sf.get_format(n) for n in ("e4m3fn", "e5m2", "fp16")] + [
    sf.Format("e4m3_ftz", 4, 3, inf_nan="fn", subnormals=False),
    sf.Format("e3m4_none", 3, 4, inf_nan="none"),
    sf.Format("e5m2_ftz_sat", 5, 2, subnormals=False, saturate=True),
    sf.Format("e2m1", 2, 1, inf_nan="none"),
]


def all_values(fmt):
    """Every value of the format as its carrier (NaN once), from the patterns."""
    vals = sf.from_bits(np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.bits_dtype), fmt)
    return vals


def same_array(got, want):
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    nan = np.isnan(want)
    return (np.array_equal(np.isnan(got), nan)
            and np.array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64)))


# ----- encodings ------------------------------------------------------------------------------

def test_nans_keep_sign_and_payload():
    assert int(sf.to_bits(np.nan, "fp16")) == 0x7E00
    assert int(sf.to_bits(-np.nan, "fp16")) == 0xFE00
    assert int(sf.to_bits(np.nan, "bf16")) == 0x7FC0
    assert int(sf.to_bits(np.float32(np.nan), "fp32")) == 0x7FC00000
    assert int(sf.to_bits(np.nan, "e4m3fn")) == 0x7F
    assert int(sf.to_bits(-np.nan, "e4m3fn")) == 0xFF
    assert int(sf.to_bits(np.nan, "e5m2")) == 0x7E
    assert int(sf.to_bits(np.nan, "tf32")) == 0x3FE00
    assert int(sf.to_bits(-np.nan, "e8m0")) == 0xFF               # unsigned: one NaN
    # a float32 NaN with a payload: fp16 keeps the top 10 of its 23 fraction bits
    x = np.array([0x7FC12345, 0xFF812345, 0x7F800001], np.uint32).view(np.float32)
    assert sf.to_bits(x, "fp16").tolist() == [0x7E09, 0xFC09, 0x7E00]
    assert sf.to_bits(x, "fp32").tolist() == x.view(np.uint32).tolist()
    for name in ("fp16", "bf16", "e4m3fn", "e5m2", "tf32", "fp32", "e8m0", "ue4m3"):
        fmt = sf.get_format(name)
        for v in (np.nan, -np.nan, float(x[0]), float(x[1])):
            assert int(sf.to_bits(v, fmt)) == oracle.value_to_bits(v, fmt), (name, v)
    # from_bits keeps them, signalling ones included: 0x7C01 is fp16's signalling NaN 1
    got = sf.from_bits(np.array([0x7C01, 0xFE00, 0x7E09], np.uint16), "fp16")
    assert got.view(np.uint32).tolist() == [0x7F802000, 0xFFC00000, 0x7FC12000]
    assert sf.to_bits(got, "fp16").tolist() == [0x7C01, 0xFE00, 0x7E09]


def test_dtypes_and_shapes():
    assert sf.to_bits([1.0], "e4m3fn").dtype == np.uint8
    assert sf.to_bits([1.0], "fp16").dtype == np.uint16
    assert sf.to_bits([1.0], "tf32").dtype == np.uint32
    assert sf.to_bits([1.0], "fp64").dtype == np.uint64
    assert sf.to_bits(np.ones((2, 3), np.float32), "bf16").shape == (2, 3)
    assert isinstance(sf.to_bits(1.0, "fp16"), np.uint16)
    assert int(sf.to_bits(1.0, "fp16")) == 0x3C00
    assert sf.to_bits(np.zeros(0), "fp16").shape == (0,)
    assert sf.from_bits(np.zeros((0, 2), np.uint16), "fp16").shape == (0, 2)
    assert sf.from_bits(0x3C00, "fp16") == 1.0 and sf.from_bits(0x3C00, "fp16").shape == ()
    assert sf.from_bits([0x3F80, 0xBF80], "bf16").tolist() == [1.0, -1.0]
    assert sf.from_bits(np.array([0x3C00], dtype=np.int64), "fp16").tolist() == [1.0]
    assert sf.from_bits(np.array([0x3C00], dtype=">u2"), "fp16").tolist() == [1.0]
    assert sf.from_bits(np.array([0, 0x3C00, 0], np.uint16)[1::2], "fp16").tolist() == [1.0]
    assert sf.from_bits([0x3FF0000000000000], "fp64").dtype == np.float64


@pytest.mark.parametrize("name", ["tf32", "fp32", "bf16", "fp64"])
def test_round_trip_random_values(name):
    fmt = sf.get_format(name)
    rng = np.random.default_rng(0)
    x = sf.round(rng.standard_normal(2000) * np.exp2(rng.integers(-140, 120, 2000)), fmt)
    b = sf.to_bits(x, fmt)
    back = sf.from_bits(b, fmt)
    assert back.dtype == x.dtype and same_array(back, x)
    for xi, bi in list(zip(x, b))[:300]:
        assert int(bi) == oracle.value_to_bits(float(xi), fmt)
        assert same_array([oracle.bits_to_value(int(bi), fmt)], [xi])


def test_fp32_bits_are_float32_bits():
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    assert np.array_equal(sf.to_bits(x, "fp32"), x.view(np.uint32))
    assert np.array_equal(sf.from_bits(x.view(np.uint32), "fp32").view(np.uint32),
                          x.view(np.uint32))


def test_to_bits_refuses_values_off_the_grid():
    with pytest.raises(ValueError) as exc:
        sf.to_bits([1.0, 2.0, 1.0 + 2 ** -11], "fp16")
    assert "element 2" in str(exc.value) and "1.00048828125" in str(exc.value)
    with pytest.raises(ValueError) as exc:
        sf.to_bits(np.array([[1.0, 70000.0]]), "fp16")
    assert "(0, 1)" in str(exc.value)
    with pytest.raises(ValueError, match="infinity"):
        sf.to_bits([np.inf], "e4m3fn")
    with pytest.raises(ValueError, match="NaN"):
        sf.to_bits([np.nan], sf.Format("e3m4", 3, 4, inf_nan="none"))
    with pytest.raises(ValueError):
        sf.to_bits([480.0], "e4m3fn")                  # would be the NaN pattern
    with pytest.raises(ValueError):
        sf.to_bits([2.0 ** -15], sf.Format("fp16_ftz", 5, 10, subnormals=False))
    with pytest.raises(ValueError):
        sf.to_bits([2.0 ** -25], "fp16")
    with pytest.raises(TypeError):
        sf.to_bits(np.array([1 + 1j]), "fp16")
    assert sf.to_bits(np.array([1, -2], np.int32), "fp16").tolist() == [0x3C00, 0xC000]


def test_from_bits_refuses_wide_or_bad_patterns():
    with pytest.raises(ValueError) as exc:
        sf.from_bits([0x3C00, 0x10000], "fp16")
    assert "element 1" in str(exc.value) and "0xffff" in str(exc.value)
    with pytest.raises(ValueError):
        sf.from_bits(np.array([256], np.uint16), "e4m3fn")
    with pytest.raises(ValueError):
        sf.from_bits(np.array([-1], np.int16), "fp16")
    with pytest.raises(ValueError):
        sf.from_bits(1 << 19, "tf32")
    with pytest.raises(ValueError):
        sf.from_bits([1 << 70], "fp16")
    with pytest.raises(TypeError):
        sf.from_bits(np.array([1.0]), "fp16")
    with pytest.raises(TypeError):
        sf.from_bits(True, "fp16")
    with pytest.raises(TypeError):
        sf.from_bits("0x3c00", "fp16")
    with pytest.raises(ValueError):
        sf.from_bits([1], "fp99")


def test_flush_to_zero_reads_subnormal_patterns_as_zero():
    ftz = sf.Format("fp16_ftz", 5, 10, subnormals=False)
    v = sf.from_bits(np.array([0x0001, 0x83FF, 0x0400], np.uint16), ftz)
    assert v[0] == 0 and not np.signbit(v[0]) and v[1] == 0 and np.signbit(v[1])
    assert v[2] == 2.0 ** -14


# ----- the utilities, exhaustively on small formats -----------------------------------------

@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_utilities_match_oracle_on_every_value(fmt):
    vals = all_values(fmt)
    specials = [v for v in (np.inf, -np.inf) if fmt.has_inf]
    x = np.concatenate([vals, np.array(specials + [np.nan], vals.dtype)])
    xs = [float(v) for v in x]
    assert same_array(sf.next_up(x, fmt), [oracle.successor(v, fmt) for v in xs])
    assert same_array(sf.next_down(x, fmt), [oracle.predecessor(v, fmt) for v in xs])
    assert same_array(sf.ulp(x, fmt), [oracle.ulp_of(v, fmt) for v in xs])
    assert same_array(sf.exponent(x, fmt), [oracle.exponent_of(v, fmt) for v in xs])
    codes = sf.classify(x, fmt)
    assert codes.dtype == np.int8
    assert [sf.CLASS_NAMES[c] for c in codes] == [oracle.class_of(v, fmt) for v in xs]


@pytest.mark.parametrize("name", ["bf16", "tf32", "fp32"])
def test_utilities_match_oracle_on_samples(name):
    fmt = sf.get_format(name)
    rng = np.random.default_rng(2)
    x = sf.round(rng.standard_normal(300) * np.exp2(rng.integers(-140, 128, 300)), fmt)
    x = np.concatenate([x, np.array([0.0, -0.0, fmt.max, -fmt.max, fmt.tiny,
                                     fmt.smallest_subnormal, -fmt.smallest_subnormal,
                                     np.inf, -np.inf, np.nan], x.dtype)])
    xs = [float(v) for v in x]
    assert same_array(sf.next_up(x, fmt), [oracle.successor(v, fmt) for v in xs])
    assert same_array(sf.next_down(x, fmt), [oracle.predecessor(v, fmt) for v in xs])
    assert same_array(sf.ulp(x, fmt), [oracle.ulp_of(v, fmt) for v in xs])
    assert same_array(sf.exponent(x, fmt), [oracle.exponent_of(v, fmt) for v in xs])
    assert [sf.CLASS_NAMES[c] for c in sf.classify(x, fmt)] == [oracle.class_of(v, fmt)
                                                                 for v in xs]


def test_fp16_utilities_agree_with_numpy():
    vals = all_values(sf.get_format("fp16"))
    fin = np.isfinite(vals)
    h = vals[fin].astype(np.float16)
    with np.errstate(over="ignore"):
        up = np.nextafter(h, np.float16(np.inf)).astype(np.float32)
    got = sf.next_up(vals[fin], "fp16")
    # numpy: nextafter(-0, +inf) and nextafter(+0, +inf) are both +2^-24; nextafter(-2^-24) = -0
    assert same_array(got, up)
    # np.spacing(|x|) is the gap to the next larger magnitude: the quantum, except at max (inf)
    below = np.abs(h) < 65504
    assert same_array(sf.ulp(vals[fin][below], "fp16"),
                      np.spacing(np.abs(h[below])).astype(np.float32))


def test_documented_edge_values():
    assert sf.next_up(-0.0, "fp16") == 2.0 ** -24
    assert np.signbit(sf.next_up(-(2.0 ** -24), "fp16"))
    assert sf.next_up(65504.0, "fp16") == np.inf
    assert math.isnan(sf.next_up(448.0, "e4m3fn"))
    assert sf.next_down(-np.inf, "fp16") == -np.inf and sf.next_up(-np.inf, "fp16") == -65504
    assert sf.next_up(0.0, sf.Format("ftz", 5, 10, subnormals=False)) == 2.0 ** -14
    assert sf.ulp(1.0, "fp16") == 2.0 ** -10 and sf.ulp(0.0, "fp16") == 2.0 ** -24
    assert sf.ulp(65504.0, "fp16") == 32.0 and sf.ulp(-3.0, "bf16") == 2.0 ** -6
    assert sf.exponent(2.0 ** -24, "fp16") == -24 and sf.exponent(-0.0, "fp16") == -np.inf
    assert sf.exponent(3.0, "fp16") == 1 and sf.exponent(np.inf, "fp16") == np.inf
    assert sf.classify(2.0 ** -20, "fp16") == sf.FloatClass.POS_SUBNORMAL
    assert sf.classify(-0.0, "fp16") == sf.FloatClass.NEG_ZERO
    assert sf.classify(np.nan, "e4m3fn") == sf.FloatClass.NAN
    assert sf.CLASS_NAMES[sf.FloatClass.NEG_INF] == "-inf"


def test_utilities_refuse_values_off_the_grid():
    for fn in (sf.next_up, sf.next_down, sf.ulp, sf.exponent, sf.classify):
        with pytest.raises(ValueError, match="element 1"):
            fn([1.0, 1.1], "fp16")
        with pytest.raises(ValueError):
            fn([np.inf], "e4m3fn")
        with pytest.raises(TypeError):
            fn(np.array([1 + 0j]), "fp16")
