"""DynamicLossScaler / StaticLossScaler / from_deepspeed_config against the rules of
docs/loss-scaling.md.

Each upstream rule is re-written below from the spec's pseudo-code, in the upstream's own form
(DeepSpeed's and OpenSeq2Seq's iteration arithmetic, apex's `_unskipped`), sharing no code with
scalers/; hand-made overflow patterns drive both and the scale must agree after every update.
"""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest

from scalers import (
    DynamicLossScaler,
    LossScaleAtMinimumError,
    StaticLossScaler,
    from_deepspeed_config,
)

# ---- references, straight from the spec ---------------------------------------------------------


class RefPyTorch:
    def __init__(self, scale, growth, backoff, interval):
        self.scale, self.g, self.b, self.n, self.t = np.float32(scale), growth, backoff, interval, 0

    def update(self, inf):
        if inf:
            self.scale, self.t = np.float32(float(self.scale) * self.b), 0
            return
        self.t += 1
        if self.t == self.n:
            s = np.float32(float(self.scale) * self.g)
            if np.isfinite(s):
                self.scale = s
            self.t = 0


class RefApex:
    def __init__(self, scale, window, lo, hi):
        self.scale, self.window, self.lo, self.hi, self.unskipped = scale, window, lo, hi, 0

    def update(self, inf):
        if inf:
            self.scale = max(self.lo, self.scale / 2.0) if self.lo else self.scale / 2.0
            self.unskipped = 0
        else:
            self.unskipped += 1
        if self.unskipped == self.window:
            self.scale, self.unskipped = min(self.hi, self.scale * 2.0), 0


class RefDeepSpeed:
    def __init__(self, scale, window, delayed_shift, consecutive, lo, raise_at_min=False):
        self.scale, self.window, self.shift, self.consec, self.lo = scale, window, delayed_shift, consecutive, lo
        self.hyst, self.it, self.last, self.raise_at_min = delayed_shift, 0, -1, raise_at_min

    def update(self, inf):
        if inf:
            if self.shift == 1 or self.hyst == 1:
                if self.scale == self.lo and self.raise_at_min:
                    raise RuntimeError("at minimum")
                self.scale = max(self.scale / 2.0, self.lo)
            else:
                self.hyst -= 1
            self.last = self.it
        else:
            if self.consec:
                self.hyst = self.shift
            if (self.it - self.last) % self.window == 0:
                if not self.consec:
                    self.hyst = self.shift
                self.scale *= 2.0
        self.it += 1


class RefBackoff:
    def __init__(self, lo=1.0, hi=2.0**24, factor=2.0, window=2000):
        self.lo, self.hi, self.f, self.w = lo, hi, factor, window
        self.scale, self.it, self.last = hi, 0, -1

    def update(self, inf):
        if inf:
            self.scale, self.last = float(np.clip(self.scale / self.f, self.lo, self.hi)), self.it
        elif (self.it - self.last) % self.w == 0:
            self.scale = float(np.clip(self.scale * self.f, self.lo, self.hi))
        self.it += 1


def pattern(seed, n, p_burst=0.02, burst_len=4):
    """Mostly clean steps, with bursts of consecutive overflows (what hysteresis is for)."""
    rng = np.random.default_rng(seed)
    out, i = [], 0
    while i < n:
        if rng.random() < p_burst:
            k = int(rng.integers(1, burst_len + 1))
            out += [True] * k
            i += k
        else:
            out.append(bool(rng.random() < 0.01))
            i += 1
    return out[:n]


def drive(scaler, flags):
    out = []
    for f in flags:
        scaler.update(f)
        out.append(scaler.get_scale())
    return out


def drive_ref(ref, flags):
    out = []
    for f in flags:
        ref.update(f)
        out.append(float(ref.scale))
    return out


# ---- PyTorch ------------------------------------------------------------------------------------


def test_pytorch_by_hand():
    s = DynamicLossScaler(16.0, growth_interval=3)
    flags = [False, False, False, False, True, False, False, False, True, True]
    assert drive(s, flags) == [16, 16, 32, 32, 16, 16, 16, 32, 16, 8]
    assert s.state_dict()["_growth_tracker"] == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pytorch_matches_reference(seed):
    flags = pattern(seed, 3000)
    got = drive(DynamicLossScaler(2.0**16, growth_interval=50), flags)
    assert got == drive_ref(RefPyTorch(2.0**16, 2.0, 0.5, 50), flags)
    assert len(set(got)) > 3  # the pattern really moved the scale both ways


def test_pytorch_growth_capped_at_float32_max_and_tracker_reset():
    s = DynamicLossScaler(2.0**127, growth_interval=1)
    s.update(False)  # 2^128 is not finite in float32: the scale stays, the tracker resets
    assert s.get_scale() == 2.0**127 and s.state_dict()["_growth_tracker"] == 0


def test_pytorch_has_no_floor():
    # 2^16 -> 2^-149 (float32's smallest subnormal) takes 165 halvings; the next one rounds the
    # tie 2^-150 to even, i.e. to 0, exactly as a float32 GradScaler scale would.
    s = DynamicLossScaler()
    drive(s, [True] * 165)
    assert s.get_scale() == 2.0**-149
    s.update(True)
    assert s.get_scale() == 0.0


def test_non_power_of_two_factors_round_to_float32():
    flags = [False, True, False, False, True, True]
    got = drive(DynamicLossScaler(1000.0, growth_factor=3.0, backoff_factor=0.3, growth_interval=2), flags)
    assert got == drive_ref(RefPyTorch(1000.0, 3.0, 0.3, 2), flags)
    assert all(float(np.float32(v)) == v for v in got)


# ---- apex ---------------------------------------------------------------------------------------


def test_apex_ceiling_and_floor_by_hand():
    s = DynamicLossScaler.apex(init_scale=2.0**23, scale_window=2, min_loss_scale=2.0**22)
    assert drive(s, [False, False, False, False]) == [2.0**23, 2.0**24, 2.0**24, 2.0**24]
    assert drive(s, [True, True, True]) == [2.0**23, 2.0**22, 2.0**22]


@pytest.mark.parametrize("lo", [None, 2.0**10])
def test_apex_matches_reference(lo):
    flags = pattern(7, 4000, p_burst=0.01)
    got = drive(DynamicLossScaler.apex(scale_window=40, min_loss_scale=lo), flags)
    assert got == drive_ref(RefApex(2.0**16, 40, lo, 2.0**24), flags)


def test_apex_legacy_defaults():
    s = DynamicLossScaler.apex_legacy()
    assert (s.get_scale(), s.growth_interval, s.min_scale, s.max_scale) == (2.0**32, 1000, 1.0, None)


# ---- DeepSpeed ----------------------------------------------------------------------------------


@pytest.mark.parametrize("hysteresis", [1, 2, 3])
@pytest.mark.parametrize("consecutive", [False, True])
def test_deepspeed_matches_reference(hysteresis, consecutive):
    flags = pattern(hysteresis * 10 + consecutive, 4000, p_burst=0.03)
    s = DynamicLossScaler.deepspeed(loss_scale_window=30, hysteresis=hysteresis,
                                    consecutive_hysteresis=consecutive, raise_error_at_min_scale=False)
    ref = RefDeepSpeed(2.0**16, 30, hysteresis, consecutive, 1.0)
    for f in flags:
        s.update(f)
        ref.update(f)
        assert (s.get_scale(), s.state_dict()["_cur_hysteresis"]) == (ref.scale, ref.hyst)


def test_deepspeed_hysteresis_2_by_hand():
    common = {"initial_scale_power": 10, "loss_scale_window": 4, "hysteresis": 2}
    flags = [True, True, False, False, False, False, True, False, True]
    # non-consecutive: hysteresis is refilled only by growth, so the last overflow backs off
    s = DynamicLossScaler.deepspeed(**common)
    assert drive(s, flags) == [1024, 512, 512, 512, 512, 1024, 1024, 1024, 512]
    # consecutive: any clean step refills it, so the last overflow is absorbed again
    s = DynamicLossScaler.deepspeed(consecutive_hysteresis=True, **common)
    assert drive(s, flags) == [1024, 512, 512, 512, 512, 1024, 1024, 1024, 1024]


def test_deepspeed_hysteresis_3_absorbs_two():
    s = DynamicLossScaler.deepspeed(initial_scale_power=8, hysteresis=3)
    assert drive(s, [True, True, True, True]) == [256, 256, 128, 64]


def test_deepspeed_raises_at_minimum_and_leaves_state_alone():
    s = DynamicLossScaler.deepspeed(initial_scale_power=1, hysteresis=1)
    drive(s, [True])
    assert s.get_scale() == 1.0  # reaching the floor is fine ...
    before = s.state_dict()
    with pytest.raises(LossScaleAtMinimumError, match="minimum"):
        s.update(True)           # ... overflowing again while on it is fatal, as in DeepSpeed
    assert s.state_dict() == before


# ---- OpenSeq2Seq Backoff ------------------------------------------------------------------------


def test_openseq2seq_backoff_matches_reference():
    flags = pattern(5, 6000, p_burst=0.05, burst_len=12)
    s = DynamicLossScaler.openseq2seq_backoff(step_window=25)
    assert s.get_scale() == 2.0**24
    got = drive(s, flags)
    assert got == drive_ref(RefBackoff(window=25), flags)
    assert min(got) == 1.0 and max(got) == 2.0**24  # both clips were exercised


def test_openseq2seq_backoff_clips_at_one():
    s = DynamicLossScaler.openseq2seq_backoff()
    drive(s, [True] * 30)
    assert s.get_scale() == 1.0  # 2^24 halved 24 times, then held by scale_min


# ---- state_dict round trips mid-run -------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: DynamicLossScaler(growth_interval=20),
    lambda: DynamicLossScaler.apex(scale_window=20, min_loss_scale=4.0),
    lambda: DynamicLossScaler.deepspeed(loss_scale_window=20, hysteresis=3, raise_error_at_min_scale=False),
    lambda: DynamicLossScaler.deepspeed(loss_scale_window=20, hysteresis=2, consecutive_hysteresis=True,
                                        raise_error_at_min_scale=False),
    lambda: DynamicLossScaler.openseq2seq_backoff(step_window=20),
    lambda: StaticLossScaler(128.0),
])
def test_state_dict_round_trip_mid_run(make):
    flags = pattern(3, 600, p_burst=0.05)
    a = make()
    drive(a, flags[:300])
    b = make()
    drive(b, [True, True, False])  # b's own state differs before loading
    b.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    assert b.state_dict() == a.state_dict()
    assert drive(b, flags[300:]) == drive(a, flags[300:])


def test_load_state_dict_rejects_bad_dicts():
    s = DynamicLossScaler()
    d = s.state_dict()
    with pytest.raises(ValueError, match="unknown keys"):
        s.load_state_dict({**d, "typo": 1})
    with pytest.raises(ValueError, match="missing keys"):
        s.load_state_dict({k: v for k, v in d.items() if k != "scale"})
    with pytest.raises(ValueError, match="_growth_tracker"):
        s.load_state_dict({**d, "_growth_tracker": 2000})


# ---- unscale_ -----------------------------------------------------------------------------------


def test_unscale_uses_float32_reciprocal_in_place():
    s = DynamicLossScaler(init_scale=3.0)
    g = np.array([1.0, 3.0, 7.0, 1e-30], dtype=np.float32)
    expected = g * np.float32(1.0 / 3.0)  # float32(1/float64(3)), one float32 product each
    same = g
    assert s.unscale_([g]) is False
    assert g is same and g.dtype == np.float32
    np.testing.assert_array_equal(g.view(np.uint32), expected.view(np.uint32))


def test_unscale_flags_inf_and_nan_and_still_multiplies():
    s = DynamicLossScaler(init_scale=4.0)
    a, b = np.array([8.0, np.inf], np.float32), np.array([np.nan, 12.0], np.float32)
    assert s.unscale_([a]) is True
    assert s.unscale_([b]) is True
    np.testing.assert_array_equal(a, [2.0, np.inf])
    assert np.isnan(b[0]) and b[1] == 3.0
    assert s.update() is True and s.get_scale() == 2.0  # one backoff per update, not per call


def test_unscale_groups_are_or_ed_and_update_needs_information():
    s = DynamicLossScaler(init_scale=2.0)
    s.unscale_([np.array([np.inf], np.float32)])
    s.unscale_([np.array([1.0], np.float32), None])
    assert s.update() is True
    with pytest.raises(RuntimeError, match="unscale_"):
        s.update()


def test_unscale_rejects_fp16_and_integer_grads():
    s = DynamicLossScaler()
    with pytest.raises(TypeError, match="FP16"):
        s.unscale_([np.ones(2, np.float16)])
    with pytest.raises(TypeError, match="float32 or float64"):
        s.unscale_([np.ones(2, np.int32)])
    with pytest.raises(TypeError, match="list"):
        s.unscale_(np.ones(2, np.float32))


def test_scale_multiplies_loss():
    assert DynamicLossScaler(init_scale=8.0).scale(np.float32(0.5)) == 4.0
    assert StaticLossScaler(128.0).scale(2.0) == 256.0


# ---- validation and logging ---------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, err, match", [
    ({"growth_factor": 1.0}, ValueError, "growth_factor must be > 1"),
    ({"backoff_factor": 1.0}, ValueError, r"backoff_factor must be in \(0, 1\)"),
    ({"backoff_factor": 0.0}, ValueError, "backoff_factor"),
    ({"init_scale": -1.0}, ValueError, "init_scale must be > 0"),
    ({"init_scale": float("nan")}, ValueError, "init_scale must be finite"),
    ({"init_scale": 1e39}, ValueError, "float32"),
    ({"growth_interval": 0}, ValueError, "growth_interval must be an int >= 1"),
    ({"growth_interval": 2.5}, TypeError, "growth_interval must be an int"),
    ({"hysteresis": 0}, ValueError, "hysteresis"),
    ({"raise_at_min": True}, ValueError, "min_scale"),
    ({"min_scale": 4.0, "max_scale": 2.0}, ValueError, "min_scale"),
    ({"init_scale": 1.0, "min_scale": 2.0}, ValueError, r"\[min_scale, max_scale\]"),
    ({"consecutive_hysteresis": 1}, TypeError, "True or False"),
    ({"growth_factor": "2"}, TypeError, "real number"),
])
def test_dynamic_rejects_bad_arguments(kwargs, err, match):
    with pytest.raises(err, match=match):
        DynamicLossScaler(**kwargs)


def test_static_rejects_bad_scale():
    for bad in (0.0, -2.0, float("inf")):
        with pytest.raises(ValueError, match="scale"):
            StaticLossScaler(bad)
    with pytest.raises(TypeError):
        StaticLossScaler(True)


def test_skip_is_logged_in_apex_format(caplog):
    s = DynamicLossScaler.apex()
    with caplog.at_level(logging.INFO, logger="scalers"):
        s.update(True)
        s.update(False)
    assert [r.getMessage() for r in caplog.records] == [
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"]


def test_absorbed_overflow_is_logged_as_kept(caplog):
    s = DynamicLossScaler.deepspeed(hysteresis=2)
    with caplog.at_level(logging.INFO, logger="scalers"):
        s.update(True)
        s.update(True)
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs[0].startswith("Gradient overflow.  Skipping step, loss scaler 0 keeping loss scale at 65536.0")
    assert msgs[1] == "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"


# ---- from_deepspeed_config ----------------------------------------------------------------------


def test_config_dynamic_defaults_follow_deepspeed():
    s = from_deepspeed_config({"fp16": {"enabled": True}, "train_batch_size": 32, "optimizer": {}})
    assert isinstance(s, DynamicLossScaler)
    d = s.state_dict()
    assert (d["scale"], d["growth_interval"], d["hysteresis"], d["min_scale"], d["raise_at_min"],
            d["max_scale"]) == (2.0**16, 1000, 2, 1.0, True, None)


def test_config_dynamic_drives_like_deepspeed():
    cfg = {"fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 12, "loss_scale_window": 15,
                    "hysteresis": 3, "consecutive_hysteresis": True, "min_loss_scale": 2}}
    flags = pattern(11, 2000, p_burst=0.04)
    assert drive(from_deepspeed_config(cfg), flags) == drive_ref(RefDeepSpeed(2.0**12, 15, 3, True, 2.0), flags)


def test_config_static_bf16_and_fp32():
    s = from_deepspeed_config({"fp16": {"enabled": True, "loss_scale": 128}})
    assert isinstance(s, StaticLossScaler) and s.get_scale() == 128.0 and s.skip_on_overflow
    for cfg in ({"bf16": {"enabled": True}}, {"bfloat16": {"enabled": True}}, {},
                {"fp16": {"enabled": False, "loss_scale": 0}}):
        s = from_deepspeed_config(cfg)
        assert isinstance(s, StaticLossScaler) and s.get_scale() == 1.0 and not s.skip_on_overflow
        assert s.update(True) is True and s.get_scale() == 1.0


@pytest.mark.parametrize("cfg, err, match", [
    ({"fp16": {"enabled": True, "loss_scale_windw": 10}}, ValueError, "loss_scale_windw"),
    ({"fp_16": {"enabled": True}}, ValueError, "fp_16"),
    ({"bf16": {"enabled": True, "loss_scale": 0}}, ValueError, "unknown key"),
    ({"fp16": {"enabled": True}, "bf16": {"enabled": True}}, ValueError, "both"),
    ({"fp16": {"enabled": "true"}}, TypeError, "true or false"),
    ({"fp16": {"enabled": True, "loss_scale": -1}}, ValueError, "loss_scale"),
    ({"fp16": {"enabled": True, "hysteresis": 0}}, ValueError, "hysteresis"),
    ({"fp16": {"enabled": True, "loss_scale_window": 0}}, ValueError, "loss_scale_window"),
    ({"fp16": {"enabled": True, "initial_scale_power": 200}}, ValueError, "initial_scale_power"),
    ({"fp16": {"enabled": True, "min_loss_scale": 0}}, ValueError, "min_loss_scale"),
    ({"fp16": {"enabled": True, "initial_scale_power": 0, "min_loss_scale": 4}}, ValueError, "below"),
    ({"fp16": [1]}, TypeError, "dict"),
    ({"amp": {"enabled": True}}, ValueError, "amp"),
    ([("fp16", {})], TypeError, "dict"),
])
def test_config_errors(cfg, err, match):
    with pytest.raises(err, match=match):
        from_deepspeed_config(cfg)
