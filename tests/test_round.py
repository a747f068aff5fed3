"""softfloat.round (conversion) against the exact-rational oracle and MPFR (gmpy2).

Inputs: TestFloat-style patterns (special exponents x walking-bit significands), float64 values
a hair away from ties of the target format (the double-rounding guard), seeded random values in
float32 and float64, specials.  Formats: the presets plus flush-to-zero, saturating and "none"
variants.  Results are compared as bit patterns (NaN as "is NaN"), flags as counts.
"""

from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest

import oracle
import softfloat as sf
from softfloat import _kernels_round as K

DET_MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "rhu")
FLAGS = ("inexact", "underflow", "overflow", "invalid")

PRESETS = [sf.get_format(n) for n in ("fp16", "bf16", "tf32", "e4m3fn", "e5m2", "fp32")]
VARIANTS = [
    sf.Format("fp16_ftz", 5, 10, subnormals=False),
    sf.Format("bf16_ftz", 8, 7, subnormals=False),
    sf.Format("fp16_sat", 5, 10, saturate=True),
    sf.Format("e4m3fn_sat", 4, 3, inf_nan="fn", saturate=True),
    sf.Format("e4m3fn_ftz", 4, 3, inf_nan="fn", subnormals=False),
    sf.Format("e5m2_ftz", 5, 2, subnormals=False),
    sf.Format("e2m1", 2, 1, inf_nan="none"),
    sf.Format("e3m4_none", 3, 4, inf_nan="none"),
    sf.Format("e8m1", 8, 1),
    sf.Format("e6m22", 6, 22),
]
ALL_FORMATS = PRESETS + VARIANTS


def same(a, b) -> bool:
    """Equal as values with the same sign, or both NaN."""
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def check_against_oracle(x, fmt, mode):
    """Every element and the flag counts of sf.round(x) equal the oracle's."""
    fl = sf.Flags()
    got = sf.round(x, fmt, mode, flags=fl)
    assert got.dtype == fmt.carrier_dtype
    want_counts = dict.fromkeys(FLAGS, 0)
    for xi, gi in zip(np.asarray(x).reshape(-1), np.asarray(got).reshape(-1)):
        r, f = oracle.round_float(xi, fmt, mode)
        assert same(gi, r), f"{fmt.name} {mode}: x={xi!r} gave {gi!r}, oracle {r!r}"
        for name in f:
            want_counts[name] += 1
    assert {k: getattr(fl, k) for k in FLAGS} == want_counts, (fmt.name, mode)


# ----- input generators -------------------------------------------------------------------

def gen_testfloat(fmt, dtype):
    """Exponents around the format's emin, emax and 0 (and the carrier's extremes) times
    significands with one walking bit, or all ones below a walking bit, both signs."""
    nbits = 23 if dtype == np.float32 else 52
    step = 1 if dtype == np.float32 else 3
    sigs = {0, (1 << nbits) - 1}
    for b in range(0, nbits, step):
        sigs.add(1 << b)                       # one walking bit
        sigs.add((1 << b) - 1)                 # all ones below it
    exps = set()
    for e0 in (fmt.emin, fmt.emax, fmt.emin - fmt.man_bits):
        exps.update(range(e0 - 2, e0 + 2))
    exps.add(0)
    lo, hi = (-149, 127) if dtype == np.float32 else (-1074, 1023)
    exps.update((lo, lo + 1, hi))
    vals = [math.ldexp(1.0 + s / 2.0 ** nbits, e) for e in sorted(exps) if lo <= e <= hi
            for s in sorted(sigs)]
    with np.errstate(over="ignore"):
        arr = np.array(vals, dtype=np.float64).astype(dtype)
    arr = arr[np.isfinite(arr)]
    return np.concatenate([arr, -arr, np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)])


def gen_near_ties(fmt, rng, n=40):
    """float64 values within 2^-k ulp of a tie (or of a grid value) of the format, k = 2..40."""
    out = []
    for _ in range(n):
        e = int(rng.integers(fmt.emin - fmt.man_bits - 1, fmt.emax + 1))
        qe = max(e, fmt.emin) - fmt.man_bits          # the quantum at that binade
        sig = int(rng.integers(0, 1 << (fmt.man_bits + 1)))
        base = math.ldexp(sig, qe)
        for offset in (0.5, 0.0, 1.0):
            t = base + math.ldexp(offset, qe)
            for k in (2, 9, 20, 30, 40):
                d = math.ldexp(1.0, qe - k)
                out += [t, t + d, t - d]
    arr = np.array(out)
    arr = arr[np.isfinite(arr) & (arr != 0)]
    signs = rng.choice([-1.0, 1.0], arr.size)
    return arr * signs


def gen_random(rng, dtype, n=300):
    bits = rng.integers(0, 1 << 64, n, dtype=np.uint64) if dtype == np.float64 else \
        rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(dtype)
    # and the normal-ish range where most work happens
    y = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(dtype)
    return np.concatenate([x, y])


# ----- against the oracle -------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_testfloat_patterns_match_oracle(fmt, dtype):
    x = gen_testfloat(fmt, dtype)
    for mode in DET_MODES:
        check_against_oracle(x, fmt, mode)


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
def test_near_ties_in_float64_match_oracle(fmt):
    x = gen_near_ties(fmt, np.random.default_rng(abs(hash(fmt.name)) % 2 ** 32))
    for mode in DET_MODES:
        check_against_oracle(x, fmt, mode)


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_values_match_oracle(fmt, dtype):
    x = gen_random(np.random.default_rng(7), dtype)
    for mode in DET_MODES:
        check_against_oracle(x, fmt, mode)


# ----- against MPFR -----------------------------------------------------------------------

_MPFR_MODES = {"rne": gmpy2.RoundToNearest, "rtz": gmpy2.RoundToZero,
               "rup": gmpy2.RoundUp, "rdn": gmpy2.RoundDown}


def mpfr_round(x: float, fmt, mode):
    """MPFR emulation of the format: precision p, subnormals via subnormalize; MPFR writes
    x = 0.1f * 2^E, so its exponent range is [emin - m + 1, emax + 1]."""
    ctx = gmpy2.context(precision=fmt.precision, emin=fmt.emin - fmt.man_bits + 1,
                        emax=fmt.emax + 1, subnormalize=True, round=_MPFR_MODES[mode])
    exact = gmpy2.mpfr(x, 53)
    with gmpy2.context(ctx) as c:
        c.clear_flags()
        r = +exact
        flags = {name for name in ("inexact", "overflow", "underflow") if getattr(c, name)}
    # MPFR raises underflow for every tiny result, exact or not; IEEE 754's default (and ours)
    # needs tiny AND inexact.  Tininess is after rounding in both.
    if "inexact" not in flags:
        flags.discard("underflow")
    return float(r), flags


@pytest.mark.parametrize("name", ["fp16", "bf16", "e5m2", "tf32"])
@pytest.mark.parametrize("mode", list(_MPFR_MODES))
def test_matches_mpfr(name, mode):
    fmt = sf.get_format(name)
    rng = np.random.default_rng(11)
    x = np.concatenate([gen_near_ties(fmt, rng, 40), gen_random(rng, np.float64, 200),
                        gen_testfloat(fmt, np.float32).astype(np.float64)])
    x = x[np.isfinite(x)]
    got = sf.round(x, fmt, mode)
    for xi, gi in zip(x, got):
        r, f = mpfr_round(float(xi), fmt, mode)
        assert same(gi, r), f"{name} {mode}: x={xi!r} gave {gi!r}, MPFR {r!r}"
        assert f == oracle.round_float(xi, fmt, mode)[1], (xi, f)


# ----- fast float32 path == generic kernel ----------------------------------------------------

def _dense_specials(fmt, rng, n=1 << 16):
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    t = np.float32(fmt.tiny).view(np.uint32).astype(np.int64)
    mx = np.float32(fmt.max).view(np.uint32).astype(np.int64)
    near = np.concatenate([t + rng.integers(-(1 << 24), 1 << 12, n),
                           mx + rng.integers(-(1 << 16), 1 << 16, n // 2),
                           rng.integers(0, 1 << 24, n // 2)]).clip(0, (1 << 31) - 1)
    x = np.concatenate([b, near.astype(np.uint32)]).view(np.float32).copy()
    sign = rng.random(x.size) < 0.5
    x.view(np.uint32)[sign] |= np.uint32(0x80000000)
    return np.concatenate([x, np.array([0, -0.0, np.inf, -np.inf, np.nan], np.float32)])


@pytest.mark.parametrize("fmt", [f for f in ALL_FORMATS if f.carrier_dtype == np.float32
                                 and f.man_bits < 23], ids=lambda f: f.name)
def test_fast_float32_path_equals_generic_kernel(fmt):
    x = _dense_specials(fmt, np.random.default_rng(3))
    for mode in range(8):
        for rbits in ((1, 5, 24, 62) if mode == 6 else (None,)):
            kw = dict(seed=99, sr_bits=rbits) if mode == 6 else {}
            f1 = sf.Flags()
            fast = sf.round(x, fmt, mode, flags=f1, **kw)
            fast_noflags = sf.round(x, fmt, mode, **kw)
            key, rb = (sf.rng.seed_key(99), rbits) if mode == 6 else (np.uint64(0), 1)
            ref = np.empty_like(x)
            counts = np.zeros((K.n_chunks(x.size), K.NFLAGS), np.int64)
            K.round_kernel(x, ref, fmt.kernel_params(), mode, key, 0, rb, True, counts)
            f2 = sf.Flags()
            f2._add_counts(counts, x.size)
            assert np.array_equal(fast.view(np.uint32), ref.view(np.uint32)), (mode, rbits)
            assert np.array_equal(fast_noflags.view(np.uint32), ref.view(np.uint32))
            assert f1.as_dict() == f2.as_dict(), (mode, rbits, f1, f2)


# ----- inputs of every kind -----------------------------------------------------------------

def test_python_scalars_lists_and_0d():
    r = sf.round(1.0 + 2 ** -12, "fp16")
    assert isinstance(r, np.float32) and r == 1.0
    assert sf.round(3, "fp16") == 3.0
    assert sf.round([1.0, 2.0004, 3], "fp16").tolist() == [1.0, 2.0, 3.0]
    assert sf.round(np.float32(0.1), "bf16").shape == ()
    assert sf.round(np.array(0.1), "bf16").shape == ()
    assert sf.round([[0.1, 0.2]], "fp16").shape == (1, 2)
    assert sf.round(0.1, "fp64").dtype == np.float64


def test_float16_input_is_widened_exactly():
    x = np.array([65504, 2 ** -24, -0.0, np.inf], dtype=np.float16)
    assert np.array_equal(sf.round(x, "fp16").view(np.uint32),
                          x.astype(np.float32).view(np.uint32))


def test_empty_arrays():
    for shape in [(0,), (3, 0)]:
        for dtype in (np.float32, np.float64):
            r = sf.round(np.zeros(shape, dtype), "fp16", flags=sf.Flags())
            assert r.shape == shape and r.dtype == np.float32
    assert sf.round([], "bf16").shape == (0,)


def test_non_contiguous_and_big_endian_inputs():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((64, 64))
    for x in (base[::3, 1::2], base.T, base.astype(">f8"), base.astype(">f4")[::2],
              base.astype(np.float32)[:, ::5]):
        got = sf.round(x, "fp16", "rne")
        want = np.array([oracle.round_float(v, sf.get_format("fp16"), "rne")[0]
                         for v in np.asarray(x, dtype=np.float64 if x.dtype.itemsize == 8
                                             else np.float32).reshape(-1)])
        assert got.shape == x.shape
        assert np.array_equal(got.reshape(-1).astype(np.float64), want)


def test_float64_is_not_rounded_through_float32():
    # 2^-149 / 2 is below float32's range but a fine float64; with e8m22 it is representable
    # neither; with fp64 it is itself.
    x = np.array([2.0 ** -1074, 1 + 2.0 ** -52, 1e300])
    assert np.array_equal(sf.round(x, "fp64"), x)


@pytest.mark.parametrize("bad", [np.array([1 + 1j]), np.array([True]),
                                 np.array([1.0], dtype=object), 1 + 2j, "1.0", None,
                                 np.array([1.0], dtype=np.longdouble)])
def test_bad_input_types(bad):
    if isinstance(bad, np.ndarray) and bad.dtype == np.longdouble and \
            np.dtype(np.longdouble).itemsize == 8:
        bad = np.array([1.0], dtype=np.complex64)
    with pytest.raises(TypeError) as exc:
        sf.round(bad, "fp16")
    if isinstance(bad, np.ndarray):
        assert str(bad.dtype) in str(exc.value)


def test_bad_mode_and_format_list_accepted_names():
    with pytest.raises(ValueError) as exc:
        sf.round(1.0, "fp16", "nearest_odd")
    assert "rne" in str(exc.value) and "rtz" in str(exc.value) and "sr" in str(exc.value)
    with pytest.raises(ValueError) as exc:
        sf.round(1.0, "fp17")
    assert "fp16" in str(exc.value) and "bf16" in str(exc.value)
    with pytest.raises(ValueError):
        sf.round(1.0, "fp16", "sr")                 # needs a seed
    with pytest.raises(ValueError):
        sf.round(1.0, "fp16", "rne", sr_bits=8)     # sr_bits only with sr
    with pytest.raises(ValueError):
        sf.round(1.0, "fp16", "sr", seed=1, sr_bits=0)
    with pytest.raises(TypeError):
        sf.round(1.0, "fp16", flags={})


def test_mode_aliases_and_enum():
    x = np.array([1 + 2 ** -11, -(1 + 3 * 2 ** -12)])
    for alias, mode in (("nearest", "rne"), ("toward_zero", "rtz"), ("floor", "rdn"),
                        ("ceil", "rup"), (sf.Mode.RTO, "rto"), (1, "rna")):
        assert np.array_equal(sf.round(x, "fp16", alias), sf.round(x, "fp16", mode))


def test_flag_counts():
    fl = sf.Flags()
    sf.round(np.array([1.0, 1.0 + 2 ** -12, 1e-6, 1e-9, 7e4, np.nan, np.inf, 2 ** -24]),
             "fp16", flags=fl)
    # inexact: 1+2^-12, 1e-6, 1e-9, 7e4; underflow: 1e-6 (subnormal, inexact), 1e-9 (to 0)
    assert (fl.inexact, fl.underflow, fl.overflow, fl.invalid, fl.divbyzero) == (4, 2, 1, 0, 0)
    assert fl.elements == 8
    sf.round(np.array([3e38], np.float32), "fp16", flags=fl)
    assert fl.overflow == 2 and fl.found_inf


@pytest.mark.parametrize("mode", ["rne", "rtz", "rto", "sr"])
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3fn"])
def test_serial_and_parallel_fast_paths_agree(monkeypatch, fmt, mode):
    """Small arrays run on the calling thread (softfloat._driver.SERIAL_MAX); the bits and the flag
    counts must not depend on that choice, stochastic rounding included (several chunks,
    a short last one, subnormals, overflow and specials)."""
    from softfloat import _driver
    rng = np.random.default_rng(7)
    n = 3 * K.CHUNK + 77
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)
    x[::997] = np.inf
    x[5::1009] = np.nan
    x[9::1013] = 0.0
    kw = {"seed": 11} if mode == "sr" else {}
    got = {}
    for label, limit in (("serial", n), ("parallel", 0)):
        monkeypatch.setattr(_driver, "SERIAL_MAX", limit)
        fl = sf.Flags()
        r = sf.round(x, fmt, mode, flags=fl, **kw)
        got[label] = (r.view(np.uint32).copy(), fl.as_dict())
    assert np.array_equal(got["serial"][0], got["parallel"][0])
    assert got["serial"][1] == got["parallel"][1]
