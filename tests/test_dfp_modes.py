"""softfloat.dfp's rounding: every softfloat.Mode, the integer rounding shift_round against the
Python-int reference and against softfloat's round_int, the vectorised float32 evaluator against
the integer one, the mode=/rounding= vocabulary, the seed rule, and the serial twins of the
parallel kernels."""

from __future__ import annotations

import numpy as np
import pytest

import dfp_reference as R
import softfloat as sf
from softfloat import dfp
from softfloat import _driver
from softfloat._roundpack import round_int
from softfloat.dfp import _kernels_gemm as KG
from softfloat.dfp._intround import shift_round

MODES = [sf.Mode.RNE, sf.Mode.RNA, sf.Mode.RTZ, sf.Mode.RUP, sf.Mode.RDN, sf.Mode.RTO,
         sf.Mode.SR, sf.Mode.RHU]
DETERMINISTIC = [m for m in MODES if m != sf.Mode.SR]


def _shift_cases(rng, n):
    """(x, s) pairs: |x| < 2^62, shifts 0..70, with exact ties and small remainders."""
    xs, ss = [], []
    for _ in range(n):
        s = int(rng.integers(0, 71))
        kind = rng.integers(0, 4)
        if kind == 0:                                   # anything below 2^62
            x = int(rng.integers(-(2 ** 62) + 1, 2 ** 62))
        elif kind == 2:                                 # small magnitudes
            x = int(rng.integers(-70, 71))
        else:                                           # a tie q + 1/2 at shift s, or +-1 off
            s = int(rng.integers(1, 41))
            x = (int(rng.integers(-2 ** 20, 2 ** 20)) * 2 + 1) << (s - 1)
            x += 0 if kind == 1 else int(rng.choice([-1, 1]))
        xs.append(x)
        ss.append(s)
    return xs, ss


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.short)
def test_shift_round_against_reference(mode):
    rng = np.random.default_rng(int(mode))
    for x, s in zip(*_shift_cases(rng, 400)):
        for rbits in ((1, 24, 62) if mode == sf.Mode.SR else (24,)):
            u = int(rng.integers(0, 2 ** 63)) * 2 + int(rng.integers(0, 2))
            got = shift_round(np.int64(x), s, int(mode), np.uint64(u), rbits)
            assert got == R.shift_round(x, s, mode.short, u, rbits), (x, s, u, rbits)


@pytest.mark.parametrize("mode", DETERMINISTIC, ids=lambda m: m.short)
def test_shift_round_agrees_with_softfloat_round_int(mode):
    """In every deterministic mode the signed (two's complement) rounding equals the
    sign-magnitude rounding of softfloat._roundpack (only SR draws its bits differently)."""
    rng = np.random.default_rng(100 + int(mode))
    xs, ss = _shift_cases(rng, 400)
    for x, s in zip(xs, ss):
        x = x >> 10                                     # round_int: |significand| < 2^53
        if s == 0:
            continue
        q, _ = round_int(np.uint64(abs(x)), s, x < 0, int(mode), np.uint64(0), 24)
        assert shift_round(np.int64(x), s, int(mode), np.uint64(0), 24) == (
            -int(q) if x < 0 else int(q)), (x, s)


def _data_classes(rng):
    """float32 data classes for the two evaluators (shape (24, 40) each)."""
    shp = (24, 40)
    normal = rng.standard_normal(shp)
    grad = rng.standard_normal(shp) * np.exp2(rng.integers(-30, 8, shp))
    # tiny values of both signs next to a large one: -2^-29 < y < 0 after scaling, where the
    # float evaluator's fraction f = 1 + y is inexact
    tiny = rng.standard_normal(shp) * 2.0 ** -60
    tiny[0, 0] = 3.0
    ties = (rng.integers(-400, 400, shp) + 0.5) * 2.0 ** -6
    ties[0, 0] = 300.0                                  # E = -6: the (k + 1/2) 2^-6 are ties
    subn = rng.standard_normal(shp) * 2.0 ** -140       # float32 subnormals
    sat = np.full(shp, -0.25)
    sat[:, ::2] = 32767.5 / 32768                        # rounds to 2^15 in RNE: saturates
    zeros = np.where(rng.random(shp) < 0.5, 0.0, -0.0) * normal
    out = [normal, grad, tiny, ties, subn, sat, zeros]
    return [c.astype(np.float32) for c in out]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.short)
def test_float32_evaluator_equals_the_integer_one(mode):
    """quantize(x32) goes through the vectorised float64 evaluator; the same values as float64
    go through the integer shift_round (checked against the reference above and in
    test_dfp_quantize): both must give the same integers and counts, on every data class and
    layout path (a run with one exponent, a row of exponents, blocks)."""
    rng = np.random.default_rng(7 + int(mode))
    rb = (24, 53) if mode == sf.Mode.SR else (None,)
    for x in _data_classes(rng):
        for axis, block in ((None, None), (0, None), (1, 8), (0, 5)):
            for rbits in rb:
                kw = {"seed": 3, "sr_bits": rbits} if mode == sf.Mode.SR else {}
                a = dfp.quantize(x, 16, mode, axis=axis, block=block, **kw)
                b = dfp.quantize(x.astype(np.float64), 16, mode, axis=axis, block=block, **kw)
                assert np.array_equal(a.mantissa, b.mantissa), (mode, axis, block, rbits)
                assert np.array_equal(a.exponent, b.exponent)
                assert (a.saturated, a.underflowed) == (b.saturated, b.underflowed)


def test_the_data_classes_reach_the_hard_cases():
    """The classes above are not vacuous: saturation, underflow, exact ties and the tiny
    negatives whose float fraction is inexact all occur."""
    rng = np.random.default_rng(7)
    normal, grad, tiny, ties, subn, sat, zeros = _data_classes(rng)
    assert dfp.quantize(sat).saturated > 0
    assert dfp.quantize(tiny).underflowed > 0
    t = dfp.quantize(ties)
    assert int(t.exponent) == -6
    y = ties.astype(np.float64) * 2.0 ** 6
    assert np.any(y - np.floor(y) == 0.5)
    yt = tiny.astype(np.float64) * 2.0 ** -int(dfp.quantize(tiny).exponent)
    f = yt - np.floor(yt)
    assert np.any((yt < 0) & (yt > -2.0 ** -53) & (f == 1.0))   # f rounded up to 1.0


def test_mode_vocabulary():
    x = np.linspace(-3, 3, 49).astype(np.float32) * 2.0 ** -14 + 2.0 ** -20
    x[0] = 4.0
    ref = {m: dfp.quantize(x, 16, m).mantissa for m in MODES if m != sf.Mode.SR}
    for name, m in (("nearest", sf.Mode.RNE), ("biased", sf.Mode.RHU), ("half_up", sf.Mode.RHU),
                    ("floor", sf.Mode.RDN), ("arithmetic_shift", sf.Mode.RDN), ("rtz", sf.Mode.RTZ),
                    ("ceil", sf.Mode.RUP), ("odd", sf.Mode.RTO), ("nearest_away", sf.Mode.RNA)):
        assert np.array_equal(dfp.quantize(x, 16, name).mantissa, ref[m]), name
        assert np.array_equal(dfp.quantize(x, 16, mode=name).mantissa, ref[m]), name
        assert np.array_equal(dfp.quantize(x, 16, rounding=name).mantissa, ref[m]), name
    assert dfp.ROUNDINGS == {"nearest": sf.Mode.RNE, "stochastic": sf.Mode.SR,
                             "biased": sf.Mode.RHU, "floor": sf.Mode.RDN}
    assert np.array_equal(dfp.quantize(x, 16).mantissa, ref[sf.Mode.RNE])
    s1 = dfp.quantize(x, 16, sf.Mode.SR, seed=4).mantissa
    assert np.array_equal(s1, dfp.quantize(x, 16, rounding="stochastic", seed=4).mantissa)
    with pytest.raises(ValueError, match="mode='rne' and rounding='rne' were both given"):
        dfp.quantize(x, 16, mode="rne", rounding="rne")
    with pytest.raises(ValueError, match="both given"):
        dfp.down_convert(dfp.quantize(x), 8, mode="rne", rounding="floor")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        dfp.conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), mode="banker")
    d1 = dfp.down_convert(dfp.quantize(x), 8, "biased")
    assert np.array_equal(d1.mantissa, dfp.down_convert(dfp.quantize(x), 8, mode="rhu").mantissa)


@pytest.mark.parametrize("call", ["quantize", "down_convert", "conv2d"])
def test_seed_rule(call):
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.ones((1, 1, 2, 2), np.float32)
    t = dfp.quantize(x.reshape(3, 3))

    def run(**kw):
        if call == "quantize":
            return dfp.quantize(x, 16, **kw)
        if call == "down_convert":
            return dfp.down_convert(t, 8, **kw)
        return dfp.conv2d(x, w, **kw)

    for mode in ("rne", "floor", sf.Mode.RTO):
        short = sf.parse_mode(mode).short
        with pytest.raises(ValueError, match=f"seed=3 was given with the deterministic "
                                             f"rounding mode '{short}'; the seed is only used "
                                             "by mode 'sr'"):
            run(mode=mode, seed=3)
    with pytest.raises(ValueError, match="needs seed"):
        run(mode="sr")
    if call != "conv2d":
        with pytest.raises(ValueError, match="sr_bits is only used by mode 'sr'"):
            run(mode="rne", sr_bits=8)
    run(mode="sr", seed=3)


def test_serial_twins_equal_the_parallel_kernels(monkeypatch):
    """The one-thread kernels used for small problems give the parallel kernels' bits and
    counts (same chunks, same random-bit indices)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((70, 600)) * np.exp2(rng.integers(-20, 3, (70, 600))))
    x = x.astype(np.float32)
    x[5, :7] = [65504.0, -65504.0, 1e-30, -1e-30, 0.0, 3.5, -2.5]
    cases = [dict(mode="rne"), dict(mode="sr", seed=9), dict(mode="rhu", axis=1, block=32),
             dict(mode="rdn", axis=0)]

    def run():
        out = []
        for kw in cases:
            for arr in (x, x.astype(np.float64)):
                t = dfp.quantize(arr, 16, **kw)
                out.append((t.mantissa.copy(), t.saturated, t.underflowed))
        t32 = dfp.mul(dfp.quantize(x[:, :64]), dfp.quantize(x[:, :64]))
        d = dfp.down_convert(t32, 12, "sr", seed=2)
        out.append((d.mantissa.copy(), d.saturated, 0))
        A = dfp.quantize(x[:, :70], axis=1)
        B = dfp.quantize(x[:, :300], axis=0, block=24)
        for cl in (None, 2, 5):
            D, st = dfp.gemm(A, B, chain_len=cl, overflow="saturate", return_stats=True)
            out.append((D.view(np.uint32).copy(), tuple(st.values()), 0))
        return out

    serial = run()
    monkeypatch.setattr(_driver, "SERIAL_MAX", -1)
    monkeypatch.setattr(KG, "SERIAL_MAX", -1)
    parallel = run()
    for (a, sa, ua), (b, sb, ub) in zip(serial, parallel):
        assert np.array_equal(a, b) and sa == sb and ua == ub
