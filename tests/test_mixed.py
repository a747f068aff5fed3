"""MixedPrecisionOptimizer: lost updates with and without master weights, stochastic rounding,
Kahan compensation, skipped steps, unscale-before-clip, checkpoints and determinism."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import softfloat as sf
from autograd.mixed import MixedPrecisionOptimizer, _sum_round_to_odd
from autograd.optim import SGD, Adam, AdamW
from scalers import DynamicLossScaler, LogNormalLossScaler, StaticLossScaler


class P:
    """The parameter duck type, with a .fmt as autograd.Parameter has."""

    def __init__(self, data, fmt="fp16"):
        self.data = sf.round(np.asarray(data, dtype=np.float32), fmt)
        self.grad = None
        self.fmt = fmt


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).copy()


def sgd_steps(opt, params, update, n):
    """n steps of SGD(lr=1) whose update (-grad) is `update` for every element."""
    for _ in range(n):
        for p in params:
            p.grad = np.full(p.data.shape, -update, np.float32) * np.float32(opt.scaler.get_scale())
        opt.step()


# ---- lost updates -------------------------------------------------------------------------------

N = 4096
DELTA = 2.0**-12   # update / weight = 2^-12 < 2^-11 for w = 1: below half of fp16's spacing 2^-10


def test_fp16_without_master_loses_small_updates():
    p = P(np.ones(N))
    opt = MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="fp16", master_weights=False)
    sgd_steps(opt, [p], DELTA, 100)
    assert (p.data == 1.0).all()  # 100 updates, each rounded away: 0.024 of progress lost


def test_lost_update_threshold_across_binades():
    # w = 2^e: fp16's spacing above w is 2^(e-10), so round-to-nearest keeps w whenever
    # update < 2^(e-11), i.e. update / w < 2^-11. For any w in [2^e, 2^(e+1)) and either sign,
    # |update / w| < 2^-12 is always lost (the spacing below 2^e is 2^(e-11), half of it 2^(e-12)).
    rng = np.random.default_rng(0)
    e = rng.integers(-10, 12, size=N).astype(np.float64)
    pow2 = P(2.0**e)
    anyw = P(2.0**e * rng.uniform(1.0, 2.0, size=N))
    for p, ratio in ((pow2, 0.99 * 2.0**-11), (anyw, -0.99 * 2.0**-12), (anyw, 0.99 * 2.0**-12)):
        before = p.data.copy()
        p.grad = (-ratio * p.data).astype(np.float32)
        MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="fp16", master_weights=False).step()
        np.testing.assert_array_equal(bits(p.data), bits(before))
    # just above the threshold the same weights do move
    p = P(2.0**e)
    p.grad = (-1.01 * 2.0**-11 * p.data).astype(np.float32)
    MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="fp16", master_weights=False).step()
    assert (p.data > 2.0**e).all()


def test_master_weights_keep_small_updates():
    p = P(np.ones(N))
    opt = MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="fp16")
    sgd_steps(opt, [p], DELTA, 1)
    assert (opt.slots[0].data == np.float32(1 + DELTA)).all() and (p.data == 1.0).all()
    sgd_steps(opt, [p], DELTA, 99)
    # master 1 + 100 * 2^-12 = 1.0244140625 exactly; the fp16 copy is its rounding
    assert (opt.slots[0].data == np.float32(1 + 100 * DELTA)).all()
    np.testing.assert_array_equal(p.data, sf.round(opt.slots[0].data, "fp16"))
    assert (p.data > 1.02).all()


def test_stochastic_rounding_moves_in_expectation():
    # Each weight goes up one fp16 spacing (2^-10) with probability 2^-12 / 2^-10 = 1/4, so the
    # mean move is 2^-12; over N = 4096 weights its standard error is
    # 2^-10 * sqrt(0.25 * 0.75 / 4096) = 0.0068 * 2^-10.
    p = P(np.ones(N))
    opt = MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="fp16", rounding="sr", master_weights=False, seed=3)
    sgd_steps(opt, [p], DELTA, 1)
    assert set(np.unique(p.data)) == {1.0, np.float32(1 + 2**-10)}
    se = 2.0**-10 * np.sqrt(0.25 * 0.75 / N)
    assert abs(float(np.mean(p.data, dtype=np.float64)) - 1 - DELTA) < 5 * se
    sgd_steps(opt, [p], DELTA, 99)  # 100 independent steps: the standard error grows 10 times
    assert abs(float(np.mean(p.data, dtype=np.float64)) - 1 - 100 * DELTA) < 5 * 10 * se


def test_kahan_recovers_the_lost_updates():
    p = P(np.ones(N))
    opt = MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="fp16", master_weights=False, kahan=True)
    sgd_steps(opt, [p], 0.3 * 2.0**-10, 100)
    # 1 + 30 * 2^-10 = 1.029296875 lies on the fp16 grid: the compensated update reaches it
    assert (np.abs(p.data - (1 + 30 * 2.0**-10)) <= 2.0**-10).all()


def test_bf16_loses_below_2_to_minus_8():
    # bf16 has 7 fraction bits: at w = 1 the spacing is 2^-7, half of it 2^-8.
    p = P(np.ones(64), "bf16")
    opt = MixedPrecisionOptimizer(SGD([p], lr=1.0), storage="bf16", master_weights=False)
    sgd_steps(opt, [p], 0.9 * 2.0**-8, 10)
    assert (p.data == 1.0).all()
    q = P(np.ones(64), "bf16")
    opt = MixedPrecisionOptimizer(SGD([q], lr=1.0), storage="bf16")
    sgd_steps(opt, [q], 0.9 * 2.0**-8, 10)
    assert (q.data > 1.0).all()


def test_sum_round_to_odd_gives_one_correct_rounding():
    # 1 - 2^-60 is not a float64: float64 addition gives 1.0 and truncation would keep 1.0,
    # but the exact value lies below 1, so rtz into fp16 must give the neighbour 1 - 2^-11.
    s = _sum_round_to_odd(np.array([1.0]), np.array([-(2.0**-60)]))
    assert s[0] < 1.0
    assert sf.round(s, "fp16", "rtz")[0] == np.float32(1 - 2.0**-11)
    assert sf.round(s, "fp16", "rne")[0] == 1.0
    # exact sums stay exact; infinities and NaN pass through untouched
    np.testing.assert_array_equal(_sum_round_to_odd(np.array([1.5, 2.0**-30]), np.array([0.25, 0.0])),
                                  [1.75, 2.0**-30])
    out = _sum_round_to_odd(np.array([np.inf, np.nan, 1.0]), np.array([1.0, 1.0, -np.inf]))
    assert out[0] == np.inf and np.isnan(out[1]) and out[2] == -np.inf


# ---- skipped steps ------------------------------------------------------------------------------


def snapshot(opt):
    return pickle.loads(pickle.dumps(opt.state_dict()))


def assert_same_state(a, b):
    for key in ("params", "masters", "kahan"):
        if a[key] is not None:
            for x, y in zip(a[key], b[key]):
                np.testing.assert_array_equal(bits(x), bits(y))
    for i, st in a["optimizer"]["state"].items():
        for k, v in st.items():
            w = b["optimizer"]["state"][i][k]
            assert (bits(v) == bits(w)).all() if isinstance(v, np.ndarray) else v == w


@pytest.mark.parametrize("master", [True, False])
def test_skipped_step_changes_no_bit(master):
    rng = np.random.default_rng(5)
    params = [P(rng.normal(size=(4, 3))), P(rng.normal(size=5))]
    opt = MixedPrecisionOptimizer(AdamW(params, lr=1e-2), DynamicLossScaler(init_scale=2.0**10),
                                  master_weights=master, kahan=not master, rounding="sr", seed=1,
                                  max_grad_norm=1.0)
    for _ in range(3):
        for p in params:
            p.grad = sf.round(rng.normal(size=p.data.shape) * 2.0**10, "fp16")
        assert not opt.step().skipped
    before = snapshot(opt)
    for p in params:
        p.grad = sf.round(rng.normal(size=p.data.shape) * 2.0**10, "fp16")
    params[1].grad[2] = np.inf
    result = opt.step()
    assert result.skipped and result.found_inf and result.scale == 2.0**10
    after = snapshot(opt)
    assert_same_state(before, after)
    assert [st["step"] for st in after["optimizer"]["state"].values()] == [3, 3]
    assert opt.scaler.get_scale() == 2.0**9


# ---- unscale before clipping and weight decay ---------------------------------------------------


def test_unscale_happens_before_clipping_and_weight_decay():
    S = 2.0**12
    p = P([0.5, -0.25, 1.0])
    g = np.array([0.3, -0.4, 0.0], np.float32)  # unscaled norm about 0.5
    p.grad = sf.round(g * np.float32(S), "fp16")  # 1228.8 -> 1229, -1638.4 -> -1638
    opt = MixedPrecisionOptimizer(SGD([p], lr=0.1, weight_decay=0.01), StaticLossScaler(S), max_grad_norm=0.25)
    res = opt.step()
    # by hand: unscale (exact, S is a power of two), clip by 0.25 / (0.5 + 1e-6), then decay and step
    gu = p.grad * np.float32(1 / S)
    assert res.grad_norm == pytest.approx(float(np.linalg.norm(gu.astype(np.float64))), rel=1e-12)
    assert res.grad_norm == pytest.approx(0.5, rel=1e-3)
    gu = gu * np.float32(0.25 / (res.grad_norm + 1e-6))
    w = np.float32([0.5, -0.25, 1.0])
    expected = w + np.float32(-0.1) * (gu + np.float32(0.01) * w)
    np.testing.assert_array_equal(bits(opt.slots[0].data), bits(expected))
    # clipping the SCALED gradients would have shrunk them 2^12 times more
    assert np.abs(opt.slots[0].data - w).max() > 0.01


def test_unscale_twice_is_an_error_and_explicit_unscale_is_used():
    p = P([1.0])
    opt = MixedPrecisionOptimizer(SGD([p], lr=1.0), StaticLossScaler(4.0))
    p.grad = np.array([8.0], np.float32)
    assert opt.unscale_() is False
    with pytest.raises(RuntimeError, match="already"):
        opt.unscale_()
    opt.step()
    assert opt.slots[0].data[0] == -1.0  # 1 - 8 / 4


# ---- checkpoints and determinism ----------------------------------------------------------------


CONFIGS = [
    {"make": lambda ps: Adam(ps, lr=1e-2, weight_decay=1e-3), "scaler": lambda: DynamicLossScaler(
        init_scale=2.0**14, growth_interval=3), "kw": {"max_grad_norm": 5.0}},
    {"make": lambda ps: SGD(ps, lr=0.05, momentum=0.9), "scaler": lambda: DynamicLossScaler.deepspeed(
        initial_scale_power=14, loss_scale_window=3, hysteresis=2),
         "kw": {"master_weights": False, "kahan": True, "rounding": "sr", "seed": 7}},
    {"make": lambda ps: AdamW(ps, lr=1e-2), "scaler": lambda: LogNormalLossScaler(),
         "kw": {"storage": "bf16", "rounding": "sr", "seed": 11, "sr_bits": 8}},
]


def training(cfg, steps, resume_at=None, seed=0):
    """Run `steps` steps with overflows at fixed steps; optionally checkpoint, rebuild, resume."""
    storage = cfg["kw"].get("storage", "fp16")
    rng = np.random.default_rng(seed)
    gs = [[rng.normal(size=s) for s in ((6, 5), (5,))] for _ in range(steps)]

    def build():
        params = [P(np.linspace(-1, 1, 30).reshape(6, 5), storage), P(np.linspace(0.5, 2, 5), storage)]
        return params, MixedPrecisionOptimizer(cfg["make"](params), cfg["scaler"](), **cfg["kw"])

    params, opt = build()
    results = []
    for k in range(steps):
        if k == resume_at:
            saved = pickle.dumps(opt.state_dict())
            params, opt = build()
            opt.load_state_dict(pickle.loads(saved))
        scale = opt.scaler.get_scale()
        for p, g in zip(params, gs[k]):
            p.grad = sf.round(g * scale, storage)
            if k in (4, 9):
                p.grad.flat[0] = np.inf
        results.append(opt.step())
    return opt.state_dict(), results


@pytest.mark.parametrize("cfg", CONFIGS)
def test_checkpoint_resumes_bit_for_bit(cfg):
    full, res_full = training(cfg, 14)
    resumed, res_resumed = training(cfg, 14, resume_at=7)
    assert res_full == res_resumed
    assert sum(r.skipped for r in res_full) >= 1
    assert_same_state(full, resumed)
    assert full["scaler"] == resumed["scaler"] and full["steps"] == resumed["steps"] == 14


def test_same_seed_same_bits_other_seed_other_bits():
    cfg = CONFIGS[1]
    a, _ = training(cfg, 6)
    b, _ = training(cfg, 6)
    assert_same_state(a, b)
    other = copy.deepcopy(cfg)
    other["kw"] = {**cfg["kw"], "seed": 8}
    c, _ = training(other, 6)
    assert any((bits(x) != bits(y)).any() for x, y in zip(a["params"], c["params"]))


# ---- per-parameter formats ----------------------------------------------------------------------


def test_each_parameter_keeps_its_own_format():
    # apex O2: fp16 weights, fp32 batch-norm parameters; storage=None reads each .fmt.
    w, bn = P(np.ones(8), "fp16"), P(np.full(8, 1 + 2.0**-20), "fp32")
    opt = MixedPrecisionOptimizer(SGD([w, bn], lr=1.0))
    for p in (w, bn):
        p.grad = np.full(8, -(2.0**-13), np.float32)
    opt.step()
    assert (w.data == 1.0).all()                                 # fp16 copy of 1 + 2^-13
    assert (bn.data == np.float32(1 + 2.0**-20 + 2.0**-13)).all()  # fp32: the master itself
    anon = type("Anon", (), {})()
    anon.data, anon.grad = np.ones(2, np.float32), None
    with pytest.raises(ValueError, match="storage="):
        MixedPrecisionOptimizer(SGD([anon]))


def test_works_with_autograd_parameter():
    from autograd import Parameter

    p = Parameter(np.ones(16), fmt="fp16")
    opt = MixedPrecisionOptimizer(Adam([p], lr=1e-3), DynamicLossScaler(init_scale=2.0**8))
    p.grad = np.full(16, 2.0**8 * 0.5, np.float32)
    res = opt.step()
    assert not res.skipped and p.data.dtype == np.float32
    np.testing.assert_array_equal(p.data, sf.round(opt.slots[0].data, "fp16"))
    assert opt.slots[0].data[0] == pytest.approx(1 - 1e-3, rel=1e-6)


# ---- argument checks ----------------------------------------------------------------------------


def test_bad_arguments():
    p = P([1.0])
    with pytest.raises(ValueError, match="master_weights=False"):
        MixedPrecisionOptimizer(SGD([p]), kahan=True)
    with pytest.raises(ValueError, match="max_grad_norm"):
        MixedPrecisionOptimizer(SGD([p]), max_grad_norm=float("nan"))
    with pytest.raises(ValueError, match="float32"):
        MixedPrecisionOptimizer(SGD([p]), storage="fp64")
    with pytest.raises(ValueError, match="sr_bits"):
        MixedPrecisionOptimizer(SGD([p]), sr_bits=8)
    with pytest.raises(TypeError, match="scaler"):
        MixedPrecisionOptimizer(SGD([p]), scaler=object())
    q = P([1.0])
    q.data = np.array([1.0 + 2.0**-20], np.float32)
    with pytest.raises(ValueError, match="fp16 grid"):
        MixedPrecisionOptimizer(SGD([q]))
    opt = MixedPrecisionOptimizer(SGD([p]))
    other = MixedPrecisionOptimizer(SGD([P([1.0])]), storage="bf16")
    with pytest.raises(ValueError, match="checkpoint was made with"):
        opt.load_state_dict(other.state_dict())


def test_mixed_formats_one_verdict_one_scaler_update_and_checkpoint():
    """fp16 weights with fp32 masters beside fp32 parameters that need none, in ONE optimizer:
    an overflow in any parameter skips every update, the scaler backs off once, and a
    checkpoint (masters None for the fp32 parameters) resumes bit for bit."""
    def build():
        ps = [P(np.linspace(-1, 1, 6), "fp16"), P(np.linspace(0.5, 1, 3), "fp32")]
        return ps, MixedPrecisionOptimizer(Adam(ps, lr=1e-2), DynamicLossScaler(
            init_scale=2.0**6, growth_interval=2))

    ps, opt = build()
    assert opt.has_master == [True, False] and opt.stored()[1] is ps[1]
    rng = np.random.default_rng(0)
    gs = [[rng.normal(size=p.data.shape) for p in ps] for _ in range(6)]

    def run(opt, ps, steps):
        for k in steps:
            for p, g in zip(ps, gs[k]):
                p.grad = sf.round(g * opt.scaler.get_scale(), p.fmt)
            if k == 1:
                ps[1].grad[0] = np.inf          # only the fp32 parameter overflows
                before = [p.data.copy() for p in ps] + [opt.slots[0].data.copy()]
            res = opt.step()
            if k == 1:
                assert res.skipped and opt.scaler.get_scale() == 2.0**5
                after = [p.data for p in ps] + [opt.slots[0].data]
                assert all(np.array_equal(bits(a), bits(b)) for a, b in zip(before, after))

    run(opt, ps, range(6))
    ps2, opt2 = build()
    run(opt2, ps2, range(3))
    saved = pickle.loads(pickle.dumps(opt2.state_dict()))
    assert saved["masters"][1] is None and saved["masters"][0].shape == (6,)
    ps3, opt3 = build()
    opt3.load_state_dict(saved)
    run(opt3, ps3, range(3, 6))
    assert_same_state(opt.state_dict(), opt3.state_dict())
    bad = pickle.loads(pickle.dumps(saved))
    bad["masters"][1] = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"'masters'\[1\] must be None"):
        build()[1].load_state_dict(bad)
