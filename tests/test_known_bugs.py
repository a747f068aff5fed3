"""Bugs seen in other emulation libraries that must not happen here, one named test each."""

from __future__ import annotations

import math

import numpy as np
import pytest

import softfloat as sf


def bits(x, fmt):
    return int(sf.to_bits(x, fmt))


def test_fp16_rne_of_70000_is_inf_and_rtz_is_65504():
    fl = sf.Flags()
    assert sf.round(70000.0, "fp16", "rne", flags=fl) == np.inf
    assert fl.overflow == 1 and fl.inexact == 1
    assert sf.round(np.float32(70000), "fp16", "rne") == np.inf
    assert sf.round(70000.0, "fp16", "rtz") == 65504.0
    assert sf.round(-70000.0, "fp16", "rtz") == -65504.0
    assert sf.round(70000.0, "fp16", "rdn") == 65504.0
    assert sf.round(-70000.0, "fp16", "rup") == -65504.0


def test_fp16_rne_of_65520_is_inf():
    # 65520 = 65504 + 16 is exactly half an ulp (32) above max: the tie goes to the even
    # neighbour 65536 = 2^16, which overflows.
    for x in (65520.0, np.float32(65520.0)):
        assert sf.round(x, "fp16", "rne") == np.inf
        assert sf.round(-x, "fp16", "rne") == -np.inf
    assert sf.round(np.nextafter(65520.0, 0), "fp16", "rne") == 65504.0
    assert sf.round(65519.0, "fp16", "rne") == 65504.0


def test_negative_zero_stays_negative_zero():
    for fmt in ("fp16", "bf16", "e4m3fn", "e5m2", "tf32", "fp32"):
        for mode in ("rne", "rna", "rtz", "rup", "rdn", "rto"):
            for x in (-0.0, np.float32(-0.0), np.array([-0.0], np.float32)):
                r = sf.round(x, fmt, mode)
                assert np.all(r == 0) and np.all(np.signbit(r)), (fmt, mode)
        r = sf.round(np.float32(-0.0), fmt, "sr", seed=1)
        assert r == 0 and np.signbit(r)
    assert bits(-0.0, "fp16") == 0x8000 and bits(-0.0, "e4m3fn") == 0x80
    # a negative value that rounds to zero keeps its sign too
    assert np.signbit(sf.round(-1e-30, "fp16", "rne"))
    assert np.signbit(sf.round(-1e-30, "fp16", "rup"))


def test_fp16_rtz_of_nextafter_1024_toward_0_is_1023_5():
    # below 1024 the fp16 spacing is 2^(9-10) = 0.5, so truncation gives 1023.5, not 1024
    assert sf.round(np.nextafter(1024.0, 0.0), "fp16", "rtz") == 1023.5
    assert sf.round(np.nextafter(np.float32(1024), np.float32(0)), "fp16", "rtz") == 1023.5
    assert sf.round(-np.nextafter(1024.0, 0.0), "fp16", "rtz") == -1023.5


def test_e4m3fn_max_448_rne_464_is_448_rna_464_is_nan():
    e4 = sf.get_format("e4m3fn")
    assert e4.max == 448.0
    assert bits(448.0, e4) == 0x7E
    # 464 lies halfway between 448 (1.110 x 2^8, even) and 480 (the NaN pattern S.1111.111)
    assert sf.round(464.0, e4, "rne") == 448.0
    assert math.isnan(sf.round(464.0, e4, "rna"))
    assert sf.round(np.float32(464.0), e4, "rne") == 448.0
    assert math.isnan(sf.round(np.float32(464.0), e4, "rna"))
    assert sf.round(470.0, e4, "rtz") == 448.0
    sat = sf.Format("e4m3fn_sat", 4, 3, inf_nan="fn", saturate=True)
    assert sf.round(1e6, sat, "rne") == 448.0


def test_round_to_odd_leaves_representable_values_alone():
    for name in ("fp16", "bf16", "e4m3fn", "e5m2"):
        fmt = sf.get_format(name)
        vals = sf.from_bits(np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.bits_dtype),
                            fmt)
        fl = sf.Flags()
        for x in (vals, vals.astype(np.float64)):
            r = sf.round(x, fmt, "rto", flags=fl)
            nan = np.isnan(vals)
            assert np.array_equal(np.isnan(r), nan)
            assert np.array_equal(r[~nan].astype(np.float32).view(np.uint32),
                                  vals[~nan].view(np.uint32))
        assert fl.inexact == 0 and fl.underflow == 0 and fl.overflow == 0


def test_float64_just_above_a_bf16_tie_is_not_double_rounded():
    # 1 + 2^-8 + 2^-40: through float32 first it becomes the tie 1 + 2^-8, which RNE sends to
    # 1.0; rounded once it is above the tie and goes up to 1 + 2^-7.
    x = 1.0 + 2.0 ** -8 + 2.0 ** -40
    assert sf.round(x, "bf16", "rne") == 1.0 + 2.0 ** -7
    assert sf.round(np.array([x, -x]), "bf16", "rne").tolist() == [1 + 2 ** -7, -(1 + 2 ** -7)]
    assert sf.round(np.float32(x), "bf16", "rne") == 1.0        # the float32 input IS the tie
    y = 1.0 + 2.0 ** -11 + 2.0 ** -50                            # the same for fp16
    assert sf.round(y, "fp16", "rne") == 1.0 + 2.0 ** -10


@pytest.mark.parametrize("mode", ["rne", "rna", "rtz", "rup", "rdn", "rto"])
def test_nan_in_gives_nan_out(mode):
    for fmt in ("fp16", "bf16", "e4m3fn", "e5m2"):
        fl = sf.Flags()
        assert math.isnan(sf.round(np.nan, fmt, mode, flags=fl))
        assert fl.invalid == 0
    none = sf.Format("e3m4", 3, 4, inf_nan="none")
    fl = sf.Flags()
    assert math.isnan(sf.round(np.nan, none, mode, flags=fl)) and fl.invalid == 1
