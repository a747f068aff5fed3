"""LogNormalLossScaler (OpenSeq2Seq's LogMax) and PerTensorLossScaler."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from scalers import LogNormalLossScaler, PerTensorLossScaler


class RefLogMax:
    """The spec's pseudo-code in float64 (the scaler itself computes in float32, as TF did)."""

    def __init__(self, lo=1.0, hi=2.0**24, log_max=16.0, b1=0.99, b2=0.999, std=3.09):
        self.lo, self.hi, self.log_max, self.b1, self.b2, self.std = lo, hi, log_max, b1, b2, std
        self.x_hat = self.slow = self.x2 = 0.0
        self.c1 = self.c2 = 1.0
        self.scale = 1.0

    def update(self, overflow, amax):
        x = 2.0**self.log_max if overflow else math.log2(amax)
        self.x_hat = self.b1 * self.x_hat + (1 - self.b1) * x
        self.c1 *= self.b1
        mu = self.x_hat / (1 - self.c1)
        self.slow = self.b2 * self.slow + (1 - self.b2) * x
        self.x2 = self.b2 * self.x2 + (1 - self.b2) * x * x
        self.c2 *= self.b2
        sigma = math.sqrt(max(self.x2 / (1 - self.c2) - (self.slow / (1 - self.c2)) ** 2, 0.0))
        self.scale = min(max(2.0 ** (16 - (mu + self.std * sigma)), self.lo), self.hi)


def test_first_updates_by_hand():
    # Calm start: x = log2(2^-10) = -10, mu = -10, sigma = 0, so 2^(16 + 10) = 2^26, clipped to 2^24.
    s = LogNormalLossScaler()
    assert s.get_scale() == 1.0
    s.update(False, amax=2.0**-10)
    assert s.get_scale() == 2.0**24
    # An overflow first: x = 2^16, mu = 65536, so 2^(16 - 65536 - ...) underflows to 0: clipped to 1.
    s = LogNormalLossScaler()
    s.update(True)
    assert s.get_scale() == 1.0


def test_matches_float64_reference_on_noisy_gradients():
    rng = np.random.default_rng(0)
    s, ref = LogNormalLossScaler(), RefLogMax()
    for i in range(3000):
        amax = float(2.0 ** rng.normal(-6.0, 1.5))
        s.update(False, amax=amax)
        ref.update(False, amax)
        # float32 state against float64. sigma^2 = E[x^2] - mu^2 cancels: float32 leaves an
        # absolute error of about ulp(40) = 4e-6 in it, which moves log2(scale) by up to ~6e-3
        # in the first steps, while sigma is still small; later ~5e-4.
        assert math.log2(s.get_scale()) == pytest.approx(math.log2(ref.scale), abs=1e-2), i


def test_unscale_records_amax_of_unscaled_grads():
    s = LogNormalLossScaler(scale_max=2.0**30)
    s.update(False, amax=1.0)  # x = 0, scale = 2^16
    assert s.get_scale() == 2.0**16
    g = [np.array([2.0**16 * 2.0**-4, -(2.0**16) * 2.0**-3], np.float32)]  # unscaled amax 2^-3
    assert s.unscale_(g) is False
    s.update()
    ref = RefLogMax(hi=2.0**30)
    ref.update(False, 1.0)
    ref.update(False, 2.0**-3)
    assert s.get_scale() == pytest.approx(ref.scale, rel=1e-4)


def test_logmax_weakness_one_overflow_pins_the_scale_for_thousands_of_steps():
    # After a calm period the scale sits near 2^24; one overflow feeds x = 65536 into beta2's
    # moments and sigma ~ sqrt(0.001) * 65536 = 2072 decays as 0.9995^n: about 11000 steps
    # (module docstring of scalers/lognormal.py) before the scale can leave scale_min = 1.
    calm = 2.0**-8
    s = LogNormalLossScaler()
    for _ in range(3000):
        s.update(False, amax=calm)
    assert s.get_scale() > 2.0**23
    s.update(True)
    after = []
    for _ in range(16000):
        s.update(False, amax=calm)
        after.append(s.get_scale())
    after = np.array(after)
    first_free = int(np.argmax(after > 1.0))
    assert 10000 < first_free < 12500            # derivation: ln(2072 * 3.09 / 24) / 0.0005 = 11170
    assert (after[:first_free] == 1.0).all()     # pinned at the minimum all that time
    assert after[-1] > 2.0**20                   # and back up a few thousand steps later

    # With x = log_max = 16 (log2 of the overflow value, presumably what was meant) the scale
    # only dips: never below 2^20, and climbing again straight away.
    fixed = LogNormalLossScaler(overflow_value=16.0)
    for _ in range(3000):
        fixed.update(False, amax=calm)
    fixed.update(True)
    dip = [fixed.get_scale()]
    for _ in range(500):
        fixed.update(False, amax=calm)
        dip.append(fixed.get_scale())
    assert min(dip) > 2.0**20 and dip[-1] > dip[0]


def test_lognormal_state_dict_round_trip_mid_run():
    rng = np.random.default_rng(1)
    amaxes = 2.0 ** rng.normal(-5.0, 2.0, size=400)
    flags = rng.random(400) < 0.02
    a = LogNormalLossScaler(overflow_value=20.0)
    for f, m in zip(flags[:200], amaxes[:200]):
        a.update(bool(f), amax=float(m))
    b = LogNormalLossScaler()
    b.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    for f, m in zip(flags[200:], amaxes[200:]):
        a.update(bool(f), amax=float(m))
        b.update(bool(f), amax=float(m))
        assert a.get_scale() == b.get_scale()
    assert a.state_dict() == b.state_dict()


@pytest.mark.parametrize("kwargs, match", [
    ({"beta1": 1.0}, "beta1"), ({"beta2": 0.0}, "beta2"), ({"scale_min": 0.0}, "scale_min"),
    ({"scale_min": 4.0, "scale_max": 2.0}, "scale_min"), ({"overflow_std_dev": -1.0}, "overflow_std_dev"),
    ({"overflow_value": float("nan")}, "overflow_value"),
])
def test_lognormal_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LogNormalLossScaler(**kwargs)
    with pytest.raises(ValueError, match="amax"):
        LogNormalLossScaler().update(False, amax=-1.0)


# ---- PerTensorLossScaler ------------------------------------------------------------------------


def test_per_tensor_picks_power_of_two_scales_from_amax():
    s = PerTensorLossScaler(3, init_scale=1.0)
    grads = [np.array([3.0, -0.5], np.float32), np.array([2.0**-20], np.float32), None]
    s.unscale_(grads)
    s.update()
    # target = 65504 / 2^margin(1) = 32752. 32752/3 = 10917.3 -> 2^13; 32752 * 2^20 -> capped 2^24;
    # no gradient for tensor 2: its scale stays.
    assert s.scales == [2.0**13, 2.0**24, 1.0]
    assert s.get_scale() == 1.0 and s.rescale_factor(0) == 2.0**13


def test_per_tensor_overflow_backs_off_only_that_tensor_and_unscales_exactly():
    s = PerTensorLossScaler(2, init_scale=2.0**10)
    a = np.array([3.0 * 2.0**10], np.float32)
    b = np.array([np.inf], np.float32)
    assert s.unscale_([a, b]) is True
    assert a[0] == 3.0                            # power-of-two scales unscale exactly
    assert s.update() is True
    assert s.scales == [2.0**13, 2.0**9]
    s.update(True)                               # an overflow nobody attributed: all back off
    assert s.scales == [2.0**12, 2.0**8]


def test_per_tensor_history_and_zero_gradients():
    s = PerTensorLossScaler(1, init_scale=1.0, history_len=2)
    for amax in (1.0, 2.0**-4, 2.0**-4):
        s.unscale_([np.array([amax * s.scales[0]], np.float32)])
        s.update()
    # history [2^-4, 2^-4]: 32752 * 16 = 524032 -> 2^18; the 1.0 has left the window of 2
    assert s.scales == [2.0**18]
    s.unscale_([np.zeros(4, np.float32)])
    s.update()
    assert s.scales == [2.0**18]                 # the history still holds 2^-4
    for _ in range(2):
        s.unscale_([np.zeros(4, np.float32)])
        s.update()
    assert s.scales == [2.0**20]                 # all-zero history: grow by 2 per step


def test_per_tensor_state_dict_round_trip_and_validation():
    rng = np.random.default_rng(2)
    a = PerTensorLossScaler(2, history_len=4)
    b = PerTensorLossScaler(2, history_len=4)
    for step in range(20):
        grads = [rng.normal(size=3).astype(np.float32) * np.float32(a.scales[i]) for i in range(2)]
        if step == 7:
            grads[1][0] = np.inf
        a.unscale_(grads)
        a.update()
    b.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    assert b.state_dict() == a.state_dict() and b.get_scale() == a.get_scale()
    with pytest.raises(ValueError, match="expected 2 gradients"):
        a.unscale_([np.ones(1, np.float32)])
    with pytest.raises(ValueError, match="power of two"):
        PerTensorLossScaler(2, init_scale=3.0)
    with pytest.raises(ValueError, match="power of two"):
        b.load_state_dict({**a.state_dict(), "scales": [3.0, 4.0]})
