"""Instrumentation: histogram and per-format counts against hand-made values, per-layer
recording of activations, activation gradients, weight gradients and updates, and that recording
off leaves the engine untouched."""

from __future__ import annotations

import numpy as np
import pytest

import autograd as ag
from autograd import F, nn, tensor
from autograd.instrument import Recorder, tensor_stats


def test_tensor_stats_counts_exponents_zeros_and_format_events():
    x = np.array([0.0, -0.0, 1.0, -1.5, 2.0 ** -20, 2.0 ** -26, 3.0 * 2.0 ** -27, 1e5, np.inf,
                  np.nan, 6e4])
    s = tensor_stats(x, formats=("fp16", "bf16"))
    assert (s.n, s.zeros, s.nonfinite, s.nonzero) == (11, 2, 2, 7)
    e = dict(zip(s.exponents.tolist(), s.hist.tolist()))
    assert e[0] == 2 and e[-20] == 1 and e[16] == 1  # 1 and -1.5; 2^-20; 1e5 in [2^16, 2^17)
    assert e[-26] == 2                   # 2^-26 and 3 * 2^-27 = 1.5 * 2^-26
    assert e[15] == 1                    # 6e4 in [2^15, 2^16)
    assert s.hist.sum() == s.nonzero
    fp16 = s.formats["fp16"]
    # 2^-26 rounds to 0; 1.5 * 2^-26 = 0.375 * 2^-24 rounds to 0 as well (below half of 2^-24)
    assert fp16["underflow"] == 2
    assert fp16["subnormal"] == 1        # 2^-20 < 2^-14
    assert fp16["overflow"] == 1         # 1e5 > 65504 (6e4 is representable)
    assert s.fraction("underflow", "fp16") == pytest.approx(2 / 7)
    assert s.formats["bf16"] == {"underflow": 0, "subnormal": 0, "overflow": 0}
    with pytest.raises(ValueError, match="was not recorded"):
        s.fraction("underflow", "e5m2")


def test_saturating_format_overflow_is_detected():
    import softfloat as sf
    sat = sf.Format("e4m3sat", 4, 3, inf_nan="fn", saturate=True)
    s = tensor_stats(np.array([448.0, 460.0, 470.0, 1e4]), formats=(sat,))
    # top binade ulp 2^(8-3) = 32: values from 448 + 16 = 464 up overflow, 460 rounds to 448
    assert s.formats["e4m3sat"]["overflow"] == 2


def _model():
    ag.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))


def test_recorder_collects_every_kind_per_layer():
    model = _model()
    x = tensor(np.random.default_rng(0).standard_normal((8, 5)))
    y = np.arange(8) % 3
    params = model.parameters()
    with Recorder(model, formats=("fp16",)) as rec:
        for _ in range(2):
            loss = F.cross_entropy(model(x), y)
            model.zero_grad()
            loss.backward()
            rec.snapshot_weights()
            for p in params:
                p.data = p.data - np.float32(0.1) * p.grad
            rec.record_updates()
            rec.step()
    # leaving the block unregistered every hook the recorder gave the model
    assert not any(m._forward_hooks for m in model.modules())
    assert not any(p._hooks for p in params)
    assert rec.layers("activation") == ["0", "1", "2", "<model>"]
    assert set(rec.layers("activation_grad")) == {"0", "1", "2", "<model>"}
    assert rec.layers("weight_grad") == ["0", "2"]
    rows = rec.select("weight_grad", layer="0", step=1)
    assert [r["param"] for r in rows] == ["0.weight", "0.bias"]
    assert rows[0]["stats"].n == 30
    ups = rec.select("update_ratio", step=0)
    w0 = next(r for r in ups if r["param"] == "0.weight")
    assert 0 < w0["ratio"] < 1
    _, counts, zeros = rec.histogram("activation", layer="1")
    assert counts.sum() + zeros == 2 * 8 * 6 and zeros > 0      # relu zeros in their own bin
    assert set(rec.fractions("activation_grad", "fp16")) == {"underflow", "subnormal",
                                                             "overflow"}
    # the recorded activation gradient of the last layer is the softmax - onehot / N gradient
    g = rec.select("activation_grad", layer="2", step=0)[0]["stats"]
    assert g.n == 24 and g.zeros == 0


def test_recorder_sees_fp16_underflow_of_small_gradients():
    model = _model()
    x = tensor(np.ones((4, 5)))
    with Recorder(model, formats=("fp16", "fp32")) as rec:
        out = model(x)
        (F.sum(out) * 2.0 ** -30).backward()          # every gradient ~2^-30 and below
    fr16 = rec.fractions("weight_grad", "fp16")
    fr32 = rec.fractions("weight_grad", "fp32")
    assert fr16["underflow"] > 0.5 and fr32["underflow"] == 0.0


def test_recording_off_changes_nothing_and_leaves_grads_freed():
    model = _model()
    x = tensor(np.ones((2, 5)))
    out = model(x)
    F.sum(out).backward()
    g_off = [p.grad.copy() for p in model.parameters()]
    model.zero_grad()
    with Recorder(model):
        out2 = model(x)
        F.sum(out2).backward()
    for a, p in zip(g_off, model.parameters()):
        assert np.array_equal(a, p.grad)
    assert out.grad is None and out2.grad is None       # retained grads were released
    with pytest.raises(RuntimeError, match="snapshot_weights"):
        Recorder(model).record_updates()
    with pytest.raises(TypeError, match="nn.Module"):
        Recorder(object())


# ----- the hooks the recorder is built on --------------------------------------------------------
def test_tensor_hooks_see_complete_gradients_and_can_be_removed():
    x = ag.Parameter(np.array([1.0, 2.0, 3.0]))
    h = x * 2.0
    y = h * h + h                      # dy/dh = 2h + 1 = (5, 9, 13); two uses of h
    seen = []
    hh = h.register_hook(lambda g: seen.append(("h", g.copy())))
    x.register_hook(lambda g: seen.append(("x", g is x.grad, g.copy())))
    F.sum(y).backward()
    assert [s[0] for s in seen] == ["h", "x"]               # h complete before x
    assert np.array_equal(seen[0][1], [5.0, 9.0, 13.0])      # the sum of both uses
    assert seen[1][1] and np.array_equal(seen[1][2], [10.0, 18.0, 26.0])
    hh.remove()
    hh.remove()                                              # a second remove does nothing
    seen.clear()
    F.sum(x * 3.0).backward()                                # accumulates: 10 + 3, ...
    assert len(seen) == 1 and np.array_equal(seen[0][2], [13.0, 21.0, 29.0])
    with pytest.raises(TypeError, match="callable"):
        x.register_hook(3)


def test_forward_hooks_get_module_args_output_and_may_replace_it():
    lin = nn.Linear(2, 2)
    calls = []
    h = lin.register_forward_hook(lambda m, args, out: calls.append((m, len(args), out.shape)))
    x = tensor(np.ones((3, 2)))
    lin(x)
    assert calls == [(lin, 1, (3, 2))]
    h2 = lin.register_forward_hook(lambda m, args, out: out * 0.0)
    assert np.all(lin(x).data == 0)
    h.remove(), h2.remove()
    assert not lin._forward_hooks and np.any(lin(x).data != 0)
    with pytest.raises(TypeError, match="callable"):
        lin.register_forward_hook(None)


def test_recorder_hooks_left_on_tensors_after_exit_record_nothing():
    model = _model()
    x = tensor(np.ones((2, 5)))
    with Recorder(model) as rec:
        out = model(x)                 # outputs carry the recorder's gradient hooks
    n = len(rec.rows)
    F.sum(out).backward()              # backward after the block: nothing is recorded
    assert len(rec.rows) == n and rec.select("activation_grad") == []
    assert rec.layers("activation") == ["0", "1", "2", "<model>"]


def test_two_backwards_in_one_step_give_two_runs_of_weight_rows():
    model = _model()
    x = tensor(np.ones((2, 5)))
    with Recorder(model) as rec:
        for _ in range(2):             # gradient accumulation over two micro-batches
            F.sum(model(x)).backward()
    rows = rec.select("weight_grad", step=0)
    assert [r["param"] for r in rows] == ["0.weight", "0.bias", "2.weight", "2.bias"] * 2
    assert len(rec.select("activation_grad", layer="0")) == 2


def test_overflow_counts_follow_the_formats_own_rounding():
    """Overflow is what the format's RNE rounding calls overflow, also where the result hides it
    (saturation, formats without Inf/NaN) and at the tie max + ulp/2: e4m3fn's max 448 has an
    even significand, so 464 rounds down to it; fp16's max 65504 is odd, so 65520 overflows."""
    import dataclasses

    import softfloat as sf

    e4m3 = sf.get_format("e4m3fn")
    e4m3_sat = dataclasses.replace(e4m3, name="e4m3fn_sat", saturate=True)
    fp16_sat = dataclasses.replace(sf.get_format("fp16"), name="fp16_sat", saturate=True)
    e2m1 = sf.get_format("e2m1")                     # no Inf/NaN: overflow gives +-6
    cases = [
        (e4m3, [448.0, 463.9, 464.0, -464.0, 464.1, 1e6], 2),
        (e4m3_sat, [448.0, 463.9, 464.0, -464.0, 464.1, 1e6], 2),
        (fp16_sat, [65504.0, 65519.9, 65520.0, -65520.0, 1e9], 3),
        (e2m1, [6.0, 6.9, 7.0, -7.0, 7.1, 100.0], 4),   # max 6 = 1.1b x 2^2 is odd: 7 goes up
    ]
    for fmt, vals, want in cases:
        st = tensor_stats(np.array(vals), formats=(fmt,))
        assert st.formats[fmt.name]["overflow"] == want, (fmt.name, st.formats[fmt.name])
