"""The accumulator rounding of the Tensor Core models (softfloat.tensorcore._scalar.round_out,
spec ROUND, and the ideal models' fp32 shortcut, float32(v)) against softfloat's one rounding
routine, _roundpack.round_value, on every data class: N(0,1), gradient-like N(0,1) 2^U[-30, 8),
all below the normal range, overflow-heavy, near ties and exact ties, zeros of both signs --
for fp32, fp16, bf16 and the fp8 paths' e8m13 accumulators, RTZ and RNE.

The one difference is the spec's overflow rule: a block result beyond the largest finite value
is Inf under RZ too (spec 8.5; IEEE RTZ gives the largest finite value), so under RTZ round_out
returns +-Inf exactly where |v| >= 2^(emax + 1)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

import softfloat as sf
from softfloat._roundpack import round_value
from softfloat.tensorcore._scalar import round_out

E8M13 = sf.Format("e8m13", exp_bits=8, man_bits=13)
ACCS = ["fp32", "fp16", "bf16", E8M13]


@njit(cache=False)
def _both(v, fp, mode, rne, f, emin, emax):
    ro = np.empty(v.size)
    rv = np.empty(v.size)
    for t in range(v.size):
        ro[t] = round_out(v[t], 2.0 ** -f, 2.0 ** (emin - f), 2.0 ** (emax + 1), rne)
        rv[t] = round_value(v[t], 0, fp, mode, np.uint64(0), 1)[0]
    return ro, rv


def _classes(fmt, rng):
    """Exact float64 values v of every class (53-bit significands: what round_out receives,
    an exact block sum or a round-to-odd proxy)."""
    n = 4000
    sig = rng.integers(1 << 52, 1 << 53, n).astype(np.float64) * 2.0 ** -52   # [1, 2)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    e_lo, e_hi = fmt.emin - fmt.man_bits - 3, fmt.emax + 3
    out = {
        "normal": sign * sig * np.exp2(rng.integers(-2, 3, n)),
        "gradient": sign * sig * np.exp2(rng.integers(max(-30, e_lo), 8, n)),
        "subnormal": sign * sig * np.exp2(rng.integers(e_lo, fmt.emin, n)),
        "overflow": sign * sig * np.exp2(rng.integers(fmt.emax - 2, min(e_hi, 1023), n)),
    }
    # near ties and exact ties: a value of the format plus half its quantum, +- 1 ulp of float64
    x = np.asarray(sf.round(out["gradient"], fmt, "rtz"), np.float64)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.abs(x)))                    # (-inf for x = 0: q is then the
    #                                                          subnormal quantum)
    q = np.exp2(np.maximum(e, fmt.emin) - fmt.man_bits)
    tie = x + np.sign(x) * q / 2
    out["ties"] = np.concatenate([tie, np.nextafter(tie, 0), np.nextafter(tie, np.inf)])
    out["zeros"] = np.array([0.0, -0.0])
    return out


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: getattr(a, "name", a))
@pytest.mark.parametrize("mode", [sf.Mode.RTZ, sf.Mode.RNE])
def test_round_out_is_round_value(acc, mode):
    fmt = sf.get_format(acc)
    fp = fmt.kernel_params()
    rng = np.random.default_rng(31)
    for name, v in _classes(fmt, rng).items():
        ro, rv = _both(v, fp, int(mode), mode == sf.Mode.RNE, fmt.man_bits, fmt.emin,
                       fmt.emax)
        if mode == sf.Mode.RTZ:
            over = np.abs(v) >= 2.0 ** (fmt.emax + 1)
            rv = np.where(over, np.copysign(np.inf, v), rv)      # spec 8.5
            assert over.any() == (name == "overflow")
        assert np.array_equal(ro.view(np.int64), rv.view(np.int64)), name


def test_fp32_shortcut_is_round_value():
    """The ideal models' fp32 RNE output: float32(v), numpy's IEEE conversion, is round_value
    into fp32 RNE on every class (certificates 1-3 of softfloat/tensorcore/_certify.py)."""
    fmt = sf.get_format("fp32")
    rng = np.random.default_rng(32)
    for name, v in _classes(fmt, rng).items():
        _, rv = _both(v, fmt.kernel_params(), int(sf.Mode.RNE), True, 23, -126, 127)
        with np.errstate(over="ignore"):
            got = v.astype(np.float32).astype(np.float64)
        assert np.array_equal(got.view(np.int64), rv.view(np.int64)), name
