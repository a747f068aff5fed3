"""Format derivations and presets, checked against numpy / ml_dtypes and the oracle's own
derivation from the IEEE layout; bad parameters and names."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import oracle
import softfloat as sf


def test_fp16_matches_numpy_finfo():
    f = sf.get_format("fp16")
    fi = np.finfo(np.float16)
    assert (f.bias, f.emin, f.emax, f.precision, f.bits) == (15, -14, 15, 11, 16)
    assert f.max == 65504.0 == float(fi.max)
    assert f.tiny == 2.0 ** -14 == float(fi.smallest_normal)
    assert f.smallest_subnormal == 2.0 ** -24 == float(fi.smallest_subnormal)
    assert f.eps == 2.0 ** -10 == float(fi.eps)
    assert f.unit_roundoff == 2.0 ** -11
    assert f.carrier_dtype == np.float32 and f.bits_dtype == np.uint16


@pytest.mark.parametrize("name,ml", [("bf16", ml_dtypes.bfloat16),
                                     ("e4m3fn", ml_dtypes.float8_e4m3fn),
                                     ("e5m2", ml_dtypes.float8_e5m2)])
def test_formats_match_ml_dtypes_finfo(name, ml):
    f = sf.get_format(name)
    fi = ml_dtypes.finfo(ml)
    assert f.max == float(fi.max)
    assert f.tiny == float(fi.smallest_normal)
    assert f.smallest_subnormal == float(fi.smallest_subnormal)
    assert f.eps == float(fi.eps)
    assert f.bits == fi.bits


def test_known_constants():
    bf16, e4, e5, tf32, fp32 = (sf.get_format(n) for n in ("bf16", "e4m3fn", "e5m2", "tf32",
                                                            "fp32"))
    assert (bf16.emin, bf16.emax, bf16.precision) == (-126, 127, 8)
    assert bf16.max == (2 - 2 ** -7) * 2.0 ** 127
    assert bf16.smallest_subnormal == 2.0 ** -133
    assert e4.max == 448.0 and e4.emax == 8 and e4.bias == 7 and e4.smallest_subnormal == 2 ** -9
    assert e5.max == 57344.0 and e5.emax == 15 and e5.smallest_subnormal == 2.0 ** -16
    assert tf32.bits == 19 and tf32.precision == 11 and tf32.emin == -126
    assert tf32.max == (2 - 2 ** -10) * 2.0 ** 127 and tf32.bits_dtype == np.uint32
    assert fp32.max == float(np.finfo(np.float32).max)
    assert sf.get_format("fp64").carrier_dtype == np.float64


@pytest.mark.parametrize("name", sorted(sf.FORMATS))
def test_derivations_agree_with_the_oracle(name):
    f = sf.get_format(name)
    p = oracle.params(f)
    assert (f.bias, f.emin, f.emax) == (p.bias, p.emin, p.emax)
    assert f.max == float(p.max)
    assert f.tiny == float(p.tiny)
    assert f.bits == p.width


def test_aliases_and_case():
    assert sf.get_format("Half") is sf.get_format("fp16")
    assert sf.get_format("bfloat16").name == "bf16"
    assert sf.get_format("float8_e4m3fn").name == "e4m3fn"
    assert sf.get_format("FP8-E5M2").name == "e5m2"
    f = sf.get_format("fp16")
    assert sf.get_format(f) is f


def test_unknown_format_lists_accepted_names():
    with pytest.raises(ValueError) as exc:
        sf.get_format("fp12")
    msg = str(exc.value)
    assert "fp12" in msg and "fp16" in msg and "bf16" in msg and "e4m3fn" in msg
    with pytest.raises(TypeError):
        sf.get_format(16)


@pytest.mark.parametrize("kwargs,err", [
    (dict(exp_bits=1, man_bits=3), ValueError),
    (dict(exp_bits=12, man_bits=3), ValueError),
    (dict(exp_bits=5, man_bits=0), ValueError),
    (dict(exp_bits=5, man_bits=53), ValueError),
    (dict(exp_bits=5, man_bits=2, inf_nan="both"), ValueError),
    (dict(exp_bits=5.0, man_bits=2), TypeError),
    (dict(exp_bits=5, man_bits=2, subnormals="yes"), TypeError),
    (dict(exp_bits=11, man_bits=52, inf_nan="fn"), ValueError),     # emax 1024 > float64's
])
def test_invalid_format_parameters(kwargs, err):
    with pytest.raises(err):
        sf.Format("bad", **kwargs)


def test_variants_derive_their_numbers():
    ftz = sf.Format("fp16_ftz", 5, 10, subnormals=False)
    assert ftz.smallest_subnormal == ftz.tiny == 2.0 ** -14
    e3m4 = sf.Format("e3m4", 3, 4, inf_nan="none")
    # none: the all-ones exponent holds numbers: emax = 7 - 3 = 4, max = (2 - 2^-4) * 16 = 31
    assert e3m4.emax == 4 and e3m4.max == 31.0
    assert e3m4.max == float(oracle.params(e3m4).max)
    sat = sf.Format("fp16_sat", 5, 10, saturate=True)
    assert sat.max == 65504.0 and sat == sf.Format("fp16_sat", 5, 10, saturate=True)
    assert math.isclose(sf.get_format("fp16").unit_roundoff, 2 ** -11)
