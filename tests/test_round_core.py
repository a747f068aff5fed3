"""The softfloat core's conversion rules and inputs (issues #13, #14 item 1, #18 items 1-3, 5).

* Inf into formats without Inf: NaN in every mode ("fn"), +-max when saturating or "none";
  NaN keeps its sign; a seed with a deterministic mode is a ValueError;
* the unsigned / zero-less formats e8m0 and ue4m3 (and custom ones) against the Fraction oracle
  and, bit for bit, against ml_dtypes;
* integer inputs (int64 beyond 2^53 rounded once), ml_dtypes inputs, to_ml_dtypes /
  from_ml_dtypes on every pattern;
* the vectorised rounding kernel against round_value element by element, float32 and float64
  inputs, on the five data classes of issue #13, in every mode.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import oracle
import softfloat as sf
from softfloat import _kernels_round as K
from softfloat import _kernels_round_vec as KV

MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "rhu")
FLAGS = ("inexact", "underflow", "overflow", "invalid")

SAT = sf.Format("e5m2_sat", 5, 2, saturate=True)
CUSTOM = [
    sf.Format("e4m3fn_sat", 4, 3, inf_nan="fn", saturate=True),
    sf.Format("e3m4_none", 3, 4, inf_nan="none"),
    sf.Format("fp16_ftz", 5, 10, subnormals=False),
    SAT,
    sf.Format("ue5m2", 5, 2, signed=False),
    sf.Format("ue4m0", 4, 0, inf_nan="fn", subnormals=False, signed=False, zero=False),
    sf.Format("e5m0_nozero", 5, 0, inf_nan="none", subnormals=False, zero=False),
]
PRESETS = [sf.get_format(n) for n in ("fp16", "bf16", "tf32", "e4m3fn", "e5m2", "e8m0",
                                      "ue4m3", "fp32")]


def bits_equal(a, b):
    """Same bit patterns, every NaN counted equal to every NaN."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | (a.view(np.uint64) == b.view(np.uint64))))


def against_oracle(x, fmt, mode):
    fl = sf.Flags()
    got = sf.round(x, fmt, mode, flags=fl)
    counts = dict.fromkeys(FLAGS, 0)
    for xi, gi in zip(np.asarray(x).reshape(-1), np.asarray(got).reshape(-1)):
        want, wfl = oracle.round_float(float(xi), fmt, mode)
        assert bits_equal(gi, want) and (not math.isnan(want) or
                                         math.copysign(1, gi) == math.copysign(1, want)), \
            (fmt.name, mode, float(xi), float(gi), want)
        for f in wfl:
            counts[f] += 1
    assert {f: getattr(fl, f) for f in FLAGS} == counts, (fmt.name, mode)


# ----- #18 items 1-3 -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", PRESETS + CUSTOM, ids=lambda f: f.name)
def test_infinities_nans_and_signs_in_every_mode(fmt):
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e30, -1e30, 3.0, -3.0,
                  1e-30, -1e-30], np.float64)
    for mode in MODES:
        against_oracle(x, fmt, mode)
        against_oracle(x.astype(np.float32), fmt, mode)
    r = sf.round(np.array([np.inf, -np.inf]), fmt, "rtz")
    if fmt.inf_nan == "ieee" and not fmt.saturate:
        assert r.tolist() == [np.inf, -np.inf] if fmt.signed else np.isnan(r[1])
    elif fmt.saturate or fmt.inf_nan == "none":
        assert r[0] == fmt.max
    else:
        assert np.isnan(r[0])


def test_inf_rules_written_out():
    for mode in MODES:
        assert np.isnan(sf.round(np.inf, "e4m3fn", mode))               # OCP: fn has no Inf
        assert math.copysign(1, sf.round(-np.inf, "e4m3fn", mode)) < 0  # ... NaN of its sign
        assert sf.round(-np.inf, SAT, mode) == -57344.0                  # satfinite
    assert np.array_equal(np.array([np.inf, -np.inf], np.float32).astype(ml_dtypes.float8_e4m3fn)
                          .astype(np.float32), [np.nan, np.nan], equal_nan=True)
    # finite overflow is unchanged: directed roundings toward zero give max
    assert sf.round(1e9, "e4m3fn", "rtz") == 448.0
    assert np.isnan(sf.round(1e9, "e4m3fn", "rne"))


def test_nan_keeps_sign_and_payload():
    x = np.array([0xFFC12345, 0x7FC00000, 0xFFC00000], np.uint32).view(np.float32)
    assert sf.to_bits(sf.round(x, "fp16"), "fp16").tolist() == [0xFE09, 0x7E00, 0xFE00]
    assert sf.to_bits(sf.round(x, "bf16"), "bf16").tolist() == [0xFFC1, 0x7FC0, 0xFFC0]
    assert sf.to_bits(sf.round(x, "e4m3fn"), "e4m3fn").tolist() == [0xFF, 0x7F, 0xFF]
    assert sf.to_bits(sf.round(x, "e8m0"), "e8m0").tolist() == [0xFF, 0xFF, 0xFF]
    # numpy's own narrowing keeps the same bits
    assert np.array_equal(sf.round(x, "fp16").astype(np.float16).view(np.uint16),
                          x.astype(np.float16).view(np.uint16))
    for v in x.astype(np.float64):
        assert sf.round(v, "fp16").view(np.uint32) == np.float32(
            np.uint64(oracle.round_nan_bits(float(v), sf.get_format("fp16"))).view(np.float64)
        ).view(np.uint32)


def test_seed_with_a_deterministic_mode_is_an_error():
    for mode in MODES:
        with pytest.raises(ValueError, match="only used by mode 'sr'"):
            sf.round(1.0, "fp16", mode, seed=3)
        with pytest.raises(ValueError, match="only used by mode 'sr'"):
            sf.add(1.0, 2.0, "fp16", mode, seed=3)
    assert sf.round(1.0, "fp16", "sr", seed=3) == 1.0


# ----- #14 item 1: e8m0, ue4m3 and the Format extension ------------------------------------

def test_new_presets_fields():
    e8 = sf.get_format("float8_e8m0fnu")
    assert (e8.name, e8.bits, e8.bias, e8.emin, e8.emax, e8.max, e8.tiny) == \
        ("e8m0", 8, 127, -127, 127, 2.0 ** 127, 2.0 ** -127)
    assert e8.smallest_subnormal == 2.0 ** -127 and not e8.signed and not e8.zero
    u4 = sf.get_format("ue4m3")
    assert (u4.bits, u4.max, u4.smallest_subnormal) == (7, 448.0, 2.0 ** -9)
    with pytest.raises(ValueError, match="man_bits >= 1"):
        sf.Format("x", 5, 0)
    with pytest.raises(ValueError, match="subnormals=False"):
        sf.Format("x", 5, 2, zero=False)


@pytest.mark.parametrize("name", ["e8m0", "ue4m3"])
def test_every_pattern_against_the_oracle(name):
    fmt = sf.get_format(name)
    pats = np.arange(1 << fmt.bits, dtype=np.uint8)
    vals = sf.from_bits(pats, fmt)
    for p, v in zip(pats, vals):
        assert bits_equal(v, oracle.bits_to_value(int(p), fmt)), (name, p, v)
    assert sf.to_bits(vals, fmt).tolist() == pats.tolist()
    finite = vals[np.isfinite(vals)]
    assert np.array_equal(sf.next_up(finite[:-1], fmt), finite[1:])
    assert np.array_equal(sf.next_down(finite[1:], fmt), finite[:-1])
    assert sf.classify(finite, fmt).size == finite.size
    with pytest.raises(ValueError, match="unsigned"):
        sf.to_bits([-1.0], fmt)


def test_e8m0_equals_ml_dtypes_on_every_pattern_and_on_float32_inputs():
    fmt = sf.get_format("e8m0")
    pats = np.arange(256, dtype=np.uint8)
    ml = pats.view(ml_dtypes.float8_e8m0fnu)
    assert bits_equal(sf.from_bits(pats, fmt), ml.astype(np.float32))
    assert sf.to_ml_dtypes(sf.from_bits(pats, fmt), fmt).view(np.uint8).tolist() == \
        pats.tolist()
    # float32 inputs: every exponent with fractions around the tie (1.5), random ones, specials
    rng = np.random.default_rng(5)
    e = np.arange(256, dtype=np.uint32) << 23
    fr = np.concatenate([[0, 1, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF],
                         rng.integers(0, 1 << 23, 26)]).astype(np.uint32)
    b = (e[:, None] | fr[None, :]).reshape(-1)
    x = np.concatenate([b, b | np.uint32(1 << 31)]).view(np.float32)
    got = sf.round(x, fmt)
    want = x.astype(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    differ = ~((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want)))
    # where ml_dtypes differs, the exact oracle sides with softfloat
    for xi in x[differ]:
        o, _ = oracle.round_float(float(xi), fmt, "rne")
        assert bits_equal(sf.round(xi, fmt), o), xi
    against_oracle(x[::7], fmt, "rne")
    # ml_dtypes' e8m0 rounds ties of 1.5 * 2^k up (to 2^(k+1)), as RNE on a 1-bit significand
    assert sf.round(3.0, fmt) == 4.0 and want[list(x).index(np.float32(3.0))] == 4.0


@pytest.mark.parametrize("fmt", [sf.get_format("e8m0"), sf.get_format("ue4m3")] + CUSTOM[4:],
                         ids=lambda f: f.name)
def test_unsigned_and_zeroless_formats_against_the_oracle(fmt):
    rng = np.random.default_rng(9)
    x = np.concatenate([
        rng.standard_normal(300) * np.exp2(rng.integers(-140, 140, 300)),
        [0.0, -0.0, np.inf, -np.inf, np.nan, fmt.tiny, fmt.tiny / 2, fmt.tiny * 0.75, fmt.max,
         fmt.max * 1.01, 1.5, 3.0, 6.0, 2.0 ** -200, -(2.0 ** -200)]])
    for mode in MODES:
        against_oracle(x, fmt, mode)
        against_oracle(x.astype(np.float32), fmt, mode)


# ----- #18 item 5: integer and ml_dtypes inputs, interop -----------------------------------

def test_integers_are_rounded_once_from_their_exact_values():
    n = np.array([2 ** 62 + 2 ** 38 + 1, -(2 ** 63), 2 ** 53 + 1, -(2 ** 54) - 3, 0, 7,
                  2 ** 24 + 1, -(2 ** 24) - 1], np.int64)
    u = np.array([2 ** 64 - 1, 2 ** 63 + 2 ** 39, 5], np.uint64)
    for fmt in ("fp32", "fp16", "bf16", "e4m3fn", "tf32", "fp64", "e8m0"):
        f = sf.get_format(fmt)
        for mode in MODES:
            for arr in (n, u):
                got = sf.round(arr, f, mode)
                for ni, gi in zip(arr.tolist(), got.tolist()):
                    want, _ = oracle.round_fraction(Fraction(ni), f, mode) if ni else \
                        oracle.round_float(0.0, f, mode)
                    assert bits_equal(gi, want), (fmt, mode, ni, gi, want)
    # small integer dtypes and Python ints
    assert sf.round(np.array([1, 2049], np.int16), "fp16").tolist() == [1.0, 2048.0]
    assert sf.round(2 ** 64 - 1, "fp32") == 2.0 ** 64
    with pytest.raises(ValueError, match="64 bits"):
        sf.round(2 ** 64, "fp32")


def test_ml_dtypes_inputs_and_round_trips():
    for name, fmt in sf.interop.ML_DTYPES.items():
        dt = np.dtype(getattr(ml_dtypes, name))
        width = 8 * dt.itemsize
        pats = np.arange(1 << min(fmt.bits, width), dtype=f"u{dt.itemsize}")
        a = pats.view(dt) if fmt.bits == width else \
            np.asarray(pats, np.uint8).view(dt)
        vals = sf.from_ml_dtypes(a)
        assert bits_equal(vals[~np.isnan(vals)], a.astype(np.float32)[~np.isnan(vals)]), name
        assert np.array_equal(np.isnan(vals), np.isnan(a.astype(np.float32))), name
        back = sf.to_ml_dtypes(vals, fmt)
        assert back.dtype == dt and np.array_equal(back.view(pats.dtype), pats), name
        assert np.array_equal(sf.to_bits(vals, fmt), pats.astype(fmt.bits_dtype)), name
        # accepted as an input wherever an array is
        assert bits_equal(sf.round(a, "fp32"), vals)
    with pytest.raises(ValueError, match="no ml_dtypes counterpart"):
        sf.to_ml_dtypes([1.0], "fp16")
    with pytest.raises(TypeError, match="not an ml_dtypes type"):
        sf.from_ml_dtypes(np.zeros(3, np.float32))
    assert sf.add(np.ones(2, ml_dtypes.bfloat16), np.arange(2), "fp16").tolist() == [1.0, 2.0]


# ----- #13: the vectorised kernel against round_value ------------------------------------

def data_classes(fmt, n, rng, dtype):
    """The five input classes of issue #13, scaled to the format."""
    g = rng.standard_normal(n)
    grad = g * np.exp2(rng.uniform(-30, 8, n))
    sub = g * fmt.tiny * rng.uniform(2.0 ** -12, 1, n)
    big = g * np.exp2(rng.uniform(0, 20, n))
    spr = g.copy()
    spr[rng.random(n) < 0.01] = np.nan
    spr[rng.random(n) < 0.005] = np.inf
    spr[rng.random(n) < 0.005] = -np.inf
    with np.errstate(over="ignore", under="ignore"):
        return {k: v.astype(dtype) for k, v in dict(normal=g, gradient=grad, subnormal=sub,
                                                     overflow=big, specials=spr).items()}


VEC_FORMATS = [f for f in PRESETS + CUSTOM if f.man_bits <= 22] + [
    sf.Format("e8m1", 8, 1), sf.Format("e6m22", 6, 22)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", VEC_FORMATS, ids=lambda f: f.name)
def test_vectorised_kernel_equals_round_value(fmt, dtype):
    rng = np.random.default_rng(17)
    for cls, x in data_classes(fmt, 3000, rng, dtype).items():
        if not KV.vec_supported(fmt, x.dtype) and not KV.vec_supported(fmt, np.float64):
            continue
        for mode in range(8):
            for rbits in ((3, 24, 40) if mode == 6 else (None,)):
                kw = dict(seed=5, sr_bits=rbits) if mode == 6 else {}
                f1 = sf.Flags()
                got = sf.round(x, fmt, mode, flags=f1, **kw)
                key, rb = (sf.rng.seed_key(5), rbits) if mode == 6 else (np.uint64(0), 1)
                ref = np.empty(x.size, fmt.carrier_dtype)
                counts = np.zeros((K.n_chunks(x.size), K.NFLAGS), np.int64)
                K.round_kernel(x, ref, fmt.kernel_params(), mode, key, 0, rb, True, counts)
                f2 = sf.Flags()
                f2._add_counts(counts, x.size)
                w = np.uint32 if ref.dtype == np.float32 else np.uint64
                assert np.array_equal(got.view(w), ref.view(w)), (cls, mode, rbits)
                assert f1.as_dict() == f2.as_dict(), (cls, mode, rbits)


# ----- #16 item 6: dask arrays -----------------------------------------------------------

@pytest.mark.parametrize("chunks", [(7, 13), (4, 50), ((1, 6, 3), (20, 5, 25))],
                         ids=["even", "rows", "uneven"])
def test_dask_arrays_round_like_numpy(chunks):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(21)
    x = (rng.standard_normal((10, 50)) * np.exp2(rng.integers(-30, 8, (10, 50)))).astype(
        np.float32)
    d = da.from_array(x, chunks=chunks)
    for mode, kw in (("rne", {}), ("sr", {"seed": 4}), ("rtz", {})):
        lazy = sf.round(d, "fp16", mode, **kw)
        assert isinstance(lazy, type(d)) and lazy.dtype == np.float32
        assert np.array_equal(lazy.compute(), sf.round(x, "fp16", mode, **kw))
    # index_offset shifts the whole array's indices; a 1-d dask array of float64
    assert np.array_equal(sf.round(d, "bf16", "sr", seed=2, index_offset=9).compute(),
                          sf.round(x, "bf16", "sr", seed=2, index_offset=9))
    y = da.from_array(x.reshape(-1).astype(np.float64), chunks=77)
    assert np.array_equal(sf.round(y, "e4m3fn", "sr", seed=1).compute(),
                          sf.round(x.reshape(-1).astype(np.float64), "e4m3fn", "sr", seed=1))
    with pytest.raises(ValueError, match="flags="):
        sf.round(d, "fp16", flags=sf.Flags())


def test_dask_arithmetic_like_numpy():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(22)
    a = rng.standard_normal((6, 40)).astype(np.float32)
    b = rng.standard_normal((6, 40)).astype(np.float32)
    c = rng.standard_normal((6, 40))
    A, B = da.from_array(a, chunks=(4, 15)), da.from_array(b, chunks=(3, 40))
    C = da.from_array(c, chunks=(6, 7))
    for fn, args, lazy in ((sf.add, (a, b), (A, B)), (sf.mul, (a, 3.0), (A, 3.0)),
                           (sf.sqrt, (np.abs(a),), (abs(A),)), (sf.fma, (a, b, c), (A, B, C))):
        for mode, kw in (("rne", {}), ("sr", {"seed": 8})):
            got = fn(*lazy, "bf16", mode, **kw)
            assert isinstance(got, type(A)), fn.__name__
            assert np.array_equal(got.compute(), fn(*args, "bf16", mode, **kw)), fn.__name__
    with pytest.raises(TypeError, match="numpy array cannot be combined"):
        sf.add(A, b, "fp16")


@pytest.mark.parametrize("fmt", ["e8m0", "ue4m3"])
def test_arithmetic_in_unsigned_formats_ends_in_round_value(fmt):
    f = sf.get_format(fmt)
    a = np.array([1.0, 3.0, 0.5, -1.0, 2.0 ** 100, 6.0], np.float32)
    b = np.array([2.0, 3.0, -0.5, 0.5, 2.0 ** 100, -6.0], np.float32)
    for mode in MODES:
        got = sf.add(a, b, f, mode)
        for ai, bi, gi in zip(a, b, got):
            want, _ = oracle.round_fraction(Fraction(float(ai)) + Fraction(float(bi)), f, mode)
            assert bits_equal(gi, want), (fmt, mode, ai, bi, gi, want)
