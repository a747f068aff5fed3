"""The per-tensor fp8 recipes (issue #15): Transformer Engine's DelayedScaling and
Float8CurrentScaling as precision policies.

- the delayed-scaling update against a reimplementation of TE's kernel in TE's own layout
  (staging slot 0, history oldest first), and the current-scaling rule against TE's
  compute_scale_from_amax, on hand-picked and random amax sequences (0, Inf, tiny amaxes);
- every scale, amax, saturated and flushed count of a few training steps of a 2-layer model
  against a hand-written reference computed from the tensors the GEMMs saw;
- one fp8 GEMM (forward, both gradients, bias) against an exact rational reference;
- bit-identical resume mid-run with a history longer than one step (engine and trainer);
- delayed scaling saturates after a sudden amax jump that current scaling absorbs;
- policies, JSON, configs and errors.
"""

from __future__ import annotations

import copy
import json
import pickle
from fractions import Fraction

import numpy as np
import pytest

import autograd as ag
import softfloat as sf
from autograd import F, nn
from autograd.mixed import MixedPrecisionOptimizer
from autograd.optim import SGD
from autograd.recipes import (
    DelayedScaling,
    Float8CurrentScaling,
    current_scale,
    delayed_update,
    fp8_stats,
    recipe_from_dict,
    record_histograms,
)
import oracle

FLT_MAX = np.float32(np.finfo(np.float32).max)
F32 = np.float32


def f32bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


# ----- the update rules against Transformer Engine's -----------------------------------------
def te_delayed_update(hist, scale, *, algo, scaled_max):
    """TE's fused amax-and-scale update (delayed_scaling.cu, kernel_bulk), in its own layout:
    hist[0] is the staging slot (this step's amax), hist[1:] the previous amaxes, oldest
    first.  Returns (hist, scale) after the update."""
    hist = [F32(v) for v in hist]
    n, last = len(hist), hist[0]
    amax = F32(0)
    if last != 0:                                # the roll is skipped when nothing was seen
        vals = [hist[i + 1] if i < n - 1 else last for i in range(n)]
        for v in vals:
            amax = v if (v > amax or np.isnan(amax)) else amax     # fmaxf (no NaN here)
        hist = [F32(0)] + vals[1:]
    if algo == "most_recent":
        amax = last
    if np.isfinite(amax) and amax > 0:
        with np.errstate(over="ignore"):
            scale = F32(scaled_max) / amax
    scale = FLT_MAX if np.isinf(scale) else F32(scale)
    return hist, scale


def te_current_scale(amax, fp8_max):
    """TE's compute_scale_from_amax with epsilon 0 and no power-of-two rounding."""
    amax = F32(amax)
    if np.isinf(amax) or amax == 0 or np.isnan(amax):
        return F32(1)
    with np.errstate(over="ignore"):
        s = F32(fp8_max) / amax
    return FLT_MAX if np.isinf(s) else s


def _amax_sequences():
    rng = np.random.default_rng(1)
    hand = [2.0, 0.5, 0.0, 3.0, np.inf, 1.0, 1.0, 0.0, 0.0, 7.5, 1e-40, 2e-38, 0.25]
    rand = (rng.lognormal(0, 3, 40) * (rng.random(40) > 0.15)).tolist()
    return [hand, rand]


@pytest.mark.parametrize("length", [1, 2, 5])
@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("margin, fp8_max", [(0, 448.0), (2, 57344.0), (-1, 448.0)])
def test_delayed_update_matches_transformer_engine(length, algo, margin, fp8_max):
    scaled_max = F32(fp8_max) * F32(2.0 ** -margin)
    for seq in _amax_sequences():
        ours, s_ours = np.zeros(length, np.float32), F32(1)
        te, s_te = [F32(0)] * length, F32(1)
        for a in seq:
            ours, s_ours = delayed_update(ours, s_ours, a, scaled_max=scaled_max, algo=algo)
            te[0] = F32(a)                            # the casts of the step wrote slot 0
            te, s_te = te_delayed_update(te, s_te, algo=algo, scaled_max=scaled_max)
            assert f32bits(s_ours) == f32bits(s_te), (seq, a)
            # ours is newest first; TE keeps the same values oldest first after its slot 0
            assert np.array_equal(f32bits(ours[:length - 1]), f32bits(te[1:][::-1]))
    # the guards: amax Inf keeps the scale for the history's length; tiny amax gives FLT_MAX
    h, s = delayed_update(np.zeros(2, np.float32), F32(3), np.inf, scaled_max=F32(448),
                          algo="max")
    assert s == 3 and np.isinf(h[0])
    assert delayed_update(h, s, 1.0, scaled_max=F32(448), algo="max")[1] == 3
    assert delayed_update(h, s, 1.0, scaled_max=F32(448), algo="most_recent")[1] == 448
    assert delayed_update(np.zeros(1, np.float32), F32(1), 1e-40, scaled_max=F32(448),
                          algo="max")[1] == FLT_MAX


def test_current_scale_matches_transformer_engine():
    rng = np.random.default_rng(2)
    vals = [0.0, np.inf, np.nan, 1e-45, 1e-39, 2.0, 448.0, 1e30] + rng.lognormal(0, 8, 50).tolist()
    for a in vals:
        for m in (448.0, 57344.0):
            assert f32bits(current_scale(a, m)) == f32bits(te_current_scale(a, m)), a


# ----- a 2-layer model, step by step ---------------------------------------------------------
E4M3_LIMIT, E5M2_LIMIT = 464.0, 61440.0   # max + half the top binade's ulp: 448 + 16, 57344 + 4096
E4M3_HALF_TINY, E5M2_HALF_TINY = 2.0 ** -10, 2.0 ** -17   # half the smallest subnormal
FP8 = {"e4m3fn": (448.0, E4M3_LIMIT, E4M3_HALF_TINY), "e5m2": (57344.0, E5M2_LIMIT,
                                                               E5M2_HALF_TINY)}


def _two_layer(recipe, seed=0):
    ag.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model.set_policy(recipe)
    opt = MixedPrecisionOptimizer(SGD(model.parameters(), lr=0.2, momentum=0.5))
    return model, opt


def _data(steps, jump_at=None):
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((5, 6)) for _ in range(steps)]
    if jump_at is not None:
        xs[jump_at] = xs[jump_at] * 64.0        # a sudden amax jump of the input
    return xs, [np.arange(5) % 3 for _ in range(steps)]


def _train(model, opt, xs, ys, capture=None):
    """Train one step per batch; capture[(step, layer)] = the input, weight and output
    gradient each Linear's GEMM saw (by hooks on the modules and their outputs)."""
    handles = []
    if capture is not None:
        step = [0]
        for name in ("0", "2"):
            lin = model[int(name)] if hasattr(model, "__getitem__") else None
            lin = lin if lin is not None else dict(model.named_modules())[name]

            def fwd(mod, args, out, name=name):
                rec = capture.setdefault((step[0], name), {})
                rec["input"] = args[0].data.copy()
                rec["weight"] = mod.weight.data.copy()
                out.register_hook(lambda g: rec.__setitem__("grad_output", g.copy()))
            handles.append(lin.register_forward_hook(fwd))
    losses = []
    for k, (x, y) in enumerate(zip(xs, ys)):
        if capture is not None:
            step[0] = k
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    for h in handles:
        h.remove()
    return losses


def _ref_counts(x, scale, fmt_name):
    _, limit, half_tiny = FP8[fmt_name]
    x = np.asarray(x, np.float32)
    xs = np.abs(x * F32(scale))
    return int(np.count_nonzero(xs >= limit)), int(np.count_nonzero((x != 0) & (xs <= half_tiny)))


RECIPES = [DelayedScaling(amax_history_len=3),
           DelayedScaling(margin=1, amax_history_len=2, amax_compute_algo="most_recent"),
           DelayedScaling(fp8_format="E4M3", amax_history_len=4),
           Float8CurrentScaling(),
           Float8CurrentScaling(fp8_format="E4M3")]


@pytest.mark.parametrize("recipe", RECIPES, ids=repr)
def test_every_scale_and_count_of_a_2_layer_model_step_by_step(recipe):
    steps = 5
    model, opt = _two_layer(recipe)
    xs, ys = _data(steps, jump_at=3)
    cap = {}
    _train(model, opt, xs, ys, capture=cap)
    rows = {(r["step"], r["layer"], r["operand"]): r for r in fp8_stats(model)}
    assert len(rows) == steps * 2 * 3
    delayed = isinstance(recipe, DelayedScaling)
    fmt = {"input": "e4m3fn", "weight": "e4m3fn",
           "grad_output": "e5m2" if recipe.fp8_format == "HYBRID" else "e4m3fn"}
    for layer in ("0", "2"):
        for op in ("input", "weight", "grad_output"):
            fp8_max = FP8[fmt[op]][0]
            scaled_max = F32(fp8_max) * F32(2.0 ** -(recipe.margin if delayed else 0))
            window, scale = [], F32(1)        # the hand-written rule: newest amax first
            for t in range(steps):
                seen = cap[(t, layer)][op]
                amax = F32(np.max(np.abs(seen)))
                if not delayed:
                    scale = F32(fp8_max) / amax
                r = rows[(t, layer, op)]
                assert r["format"] == fmt[op] and r["numel"] == seen.size
                assert f32bits(r["amax"]) == f32bits(amax), (t, layer, op)
                assert f32bits(r["scale"]) == f32bits(scale), (t, layer, op)
                assert (r["saturated"], r["flushed"]) == _ref_counts(seen, scale, fmt[op])
                if delayed:               # the scale for step t + 1
                    window = ([amax] + window)[:recipe.amax_history_len]
                    ref = max(window) if recipe.amax_compute_algo == "max" else window[0]
                    scale = scaled_max / ref
            if delayed:                   # the state after the last step is closed
                st = dict(model.named_modules())[layer]._recipe_state
                st.end_step()
                o = st.operands[op]
                assert f32bits(o.scale) == f32bits(scale)
                assert np.array_equal(f32bits(o.history[:len(window)]), f32bits(window))


def test_delayed_scaling_saturates_after_an_amax_jump_that_current_scaling_absorbs():
    xs, ys = _data(5, jump_at=3)
    sat = {}
    for recipe in (DelayedScaling(amax_history_len=4), Float8CurrentScaling()):
        model, opt = _two_layer(recipe)
        record_histograms(model)
        _train(model, opt, xs, ys)
        rows = [r for r in fp8_stats(model) if r["layer"] == "0" and r["operand"] == "input"]
        sat[type(recipe).__name__] = [r["saturated"] for r in rows]
        # the histogram of the scaled values sees the same overflow, and all 30 values
        assert [r["hist"]["formats"]["e4m3fn"]["overflow"] for r in rows] == \
            sat[type(recipe).__name__]
        assert all(r["hist"]["n"] == 30 for r in rows)
    # x 64 at step 3: the scale from steps 0..2 maps most of the batch beyond 448 (27 of 30
    # elements); step 2 clips one element only (its amax is a little above the history's)
    assert sat["DelayedScaling"][3] >= 20 and sat["DelayedScaling"][:3] in ([0, 0, 0], [0, 0, 1])
    assert sat["DelayedScaling"][4] == 0          # the jump is in the history now
    assert sat["Float8CurrentScaling"] == [0] * 5


# ----- one GEMM against exact rational arithmetic ----------------------------------------------
def _rnd(q, name, sat=False):
    fmt = sf.get_format(name)
    if sat:
        fmt = sf.Format(name + "_s", fmt.exp_bits, fmt.man_bits, inf_nan=fmt.inf_nan,
                        saturate=True)
    return Fraction(oracle.round_fraction(Fraction(q), fmt, "rne")[0])


def _ref_quant(x, scale, name):
    return [[_rnd(_rnd(Fraction(float(v)) * Fraction(float(scale)), "fp32"), name, sat=True)
             for v in row] for row in np.atleast_2d(x)]


def _ref_gemm(a, b):                       # ideal-fp32: the exact sum, rounded once to fp32
    return [[_rnd(sum(a[i][k] * b[k][j] for k in range(len(b))), "fp32")
             for j in range(len(b[0]))] for i in range(len(a))]


def _ref_descale(acc, sinv_a, sinv_b, bias=None):
    f = _rnd(Fraction(float(sinv_a)) * Fraction(float(sinv_b)), "fp32")
    out = [[_rnd(v * f, "fp32") for v in row] for row in acc]
    if bias is not None:
        out = [[_rnd(v + Fraction(float(bv)), "fp32") for v, bv in zip(row, bias)]
               for row in out]
    return out


def _T(m):
    return [list(r) for r in zip(*m)]


@pytest.mark.parametrize("fp8_format", ["HYBRID", "E4M3"])
def test_one_fp8_gemm_forward_and_backward_against_exact_reference(fp8_format):
    rng = np.random.default_rng(9)
    recipe = DelayedScaling(fp8_format=fp8_format, amax_history_len=2)
    pol = ag.get_policy(recipe)
    state = recipe.new_state()
    scales = {"input": 37.3, "weight": 611.0, "grad_output": 2.0 ** 20 / 3}  # not powers of 2
    for op, s in scales.items():
        state.load(f"{op}.scale", s)
    with ag.use_policy(pol):
        x = ag.Tensor(rng.standard_normal((3, 8)) * 4, requires_grad=True)
        w = ag.Tensor(rng.standard_normal((5, 8)) * 0.3, requires_grad=True)
        b = ag.Tensor(rng.standard_normal(5), requires_grad=True)
        x.data[0, 0] = 40.0                               # 40 * 37.3 > 464: saturates
        out = F.fp8_linear(x, w, b, state)
    g = ag.Tensor(rng.standard_normal((3, 5)) * 1e-3, fmt="bf16").data
    out.backward(g)
    s = {op: F32(v) for op, v in scales.items()}
    sinv = {op: F32(1) / v for op, v in s.items()}
    bwd = "e5m2" if fp8_format == "HYBRID" else "e4m3fn"
    qx, qw = _ref_quant(x.data, s["input"], "e4m3fn"), _ref_quant(w.data, s["weight"], "e4m3fn")
    qg = _ref_quant(g, s["grad_output"], bwd)
    y = _ref_descale(_ref_gemm(qx, _T(qw)), sinv["input"], sinv["weight"], b.data)
    ref_out = np.array([[float(_rnd(v, "bf16")) for v in row] for row in y], np.float32)
    np.testing.assert_array_equal(f32bits(out.data), f32bits(ref_out))
    dx = _ref_descale(_ref_gemm(qg, qw), sinv["grad_output"], sinv["weight"])
    dw = _ref_descale(_ref_gemm(_T(qg), qx), sinv["grad_output"], sinv["input"])
    for got, ref in ((x.grad, dx), (w.grad, dw)):
        want = np.array([[float(_rnd(v, "bf16")) for v in row] for row in ref], np.float32)
        np.testing.assert_array_equal(f32bits(got), f32bits(want))
    db = [float(_rnd(sum(Fraction(float(v)) for v in col), "bf16")) for col in g.T]
    np.testing.assert_array_equal(f32bits(b.grad), f32bits(np.array(db, np.float32)))
    rows = {r["operand"]: r for r in state.open_rows()}
    assert rows["input"]["saturated"] == 1 and rows["grad_output"]["numel"] == 15


def test_hardware_model_runs_e4m3_and_refuses_a_mixed_hybrid_gemm():
    rng = np.random.default_rng(3)
    for fmt, ok in (("E4M3", True), ("HYBRID", False)):
        recipe = Float8CurrentScaling(fp8_format=fmt)
        pol = ag.get_policy(recipe, accumulation="h100")
        state = recipe.new_state()
        with ag.use_policy(pol):
            x = ag.Tensor(rng.standard_normal((4, 32)), requires_grad=True)
            w = ag.Tensor(rng.standard_normal((3, 32)), requires_grad=True)
            out = F.fp8_linear(x, w, None, state)        # forward: e4m3 x e4m3 on h100
        assert np.array_equal(np.asarray(sf.round(out.data, "bf16")), out.data)
        if ok:
            out.backward(np.ones(out.shape))
            assert x.grad is not None and w.grad is not None
        else:
            with pytest.raises(ValueError, match="takes one input format"):
                out.backward(np.ones(out.shape))


# ----- state and resume --------------------------------------------------------------------------
def test_resume_mid_run_is_bit_identical_with_a_history_of_four():
    recipe = DelayedScaling(amax_history_len=4)
    xs, ys = _data(7, jump_at=2)
    model, opt = _two_layer(recipe)
    full = _train(model, opt, xs, ys)
    a, oa = _two_layer(recipe)
    first = _train(a, oa, xs[:4], ys[:4])
    saved = pickle.loads(pickle.dumps((a.state_dict(), oa.state_dict(), ag.get_rng_state())))
    assert saved[0]["0.fp8.input.amax_history"].shape == (4,)
    assert saved[0]["0.fp8.grad_output.amax"] != 0      # the last step is not closed yet
    b, ob = _two_layer(recipe, seed=5)                    # other initial weights, overwritten
    b.load_state_dict(saved[0])
    ob.load_state_dict(saved[1])
    ag.set_rng_state(saved[2])
    rest = _train(b, ob, xs[4:], ys[4:])
    assert first + rest == full
    sa, sb = model.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert np.asarray(sa[k]).tobytes() == np.asarray(sb[k]).tobytes(), k
    # a state from another history length, or without the recipe, is refused with the key
    c, _ = _two_layer(DelayedScaling(amax_history_len=3))
    with pytest.raises(ValueError, match="0.fp8.input.amax_history.*expected \\(3,\\)"):
        c.load_state_dict(saved[0])
    d, _ = _two_layer("bf16")
    with pytest.raises(ValueError, match="unexpected keys.*fp8"):
        d.load_state_dict(saved[0])


def test_set_policy_keeps_the_state_of_the_same_recipe_and_drops_it_otherwise():
    model, opt = _two_layer(DelayedScaling(amax_history_len=2))
    xs, ys = _data(2)
    _train(model, opt, xs, ys)
    st = model[0]._recipe_state
    model.set_policy(DelayedScaling(amax_history_len=2))
    assert model[0]._recipe_state is st
    model.set_policy("fp8_current")
    assert model[0]._recipe_state is not st and "0.fp8.input.scale" not in model.state_dict()
    model.set_policy("bf16")
    assert model[0]._recipe_state is None and not any("fp8" in k for k in model.state_dict())


def test_evaluation_under_no_grad_uses_the_scales_without_recording():
    model, opt = _two_layer(DelayedScaling(amax_history_len=2))
    xs, ys = _data(2)
    _train(model, opt, xs, ys)
    before = copy.deepcopy(model.state_dict())
    n = len(fp8_stats(model))
    with ag.no_grad():
        model(xs[0] * 100)
    after = model.state_dict()
    assert len(fp8_stats(model)) == n
    assert all(np.array_equal(before[k], after[k]) for k in before)


# ----- policies, records, configs, errors -------------------------------------------------------
def test_recipes_as_policies_and_json():
    p = ag.get_policy("fp8_delayed")
    assert p.recipe == DelayedScaling() and p.recipe.amax_history_len == 1024
    assert p.recipe.margin == 0 and p.recipe.amax_compute_algo == "max"
    assert (p.model_format, p.activation_format, p.master_weights) == ("bf16", "bf16", True)
    assert p.accumulation == "ideal-fp32"
    assert ag.get_policy("fp8_current").recipe == Float8CurrentScaling()
    q = ag.get_policy(DelayedScaling(amax_history_len=16, fp8_format="e4m3"))
    assert q.name == "fp8_delayed" and q.recipe.fp8_format == "E4M3"
    assert ag.Policy.from_json(q.to_json()) == q
    assert json.loads(q.to_json())["recipe"] == {"type": "DelayedScaling", "margin": 0,
                                                 "fp8_format": "E4M3", "amax_history_len": 16,
                                                 "amax_compute_algo": "max"}
    assert recipe_from_dict(Float8CurrentScaling().to_dict()) == Float8CurrentScaling()
    assert "fp8 recipe DelayedScaling" in str(q)


def test_bad_recipes_and_misuse_name_the_problem():
    with pytest.raises(ValueError, match="pure E5M2 training is not supported"):
        DelayedScaling(fp8_format="E5M2")
    with pytest.raises(ValueError, match="unknown fp8_format 'E3M4'; accepted: HYBRID, E4M3"):
        Float8CurrentScaling(fp8_format="E3M4")
    with pytest.raises(ValueError, match="amax_compute_algo must be one of max, most_recent"):
        DelayedScaling(amax_compute_algo="mean")
    with pytest.raises(TypeError, match="margin must be an int"):
        DelayedScaling(margin=0.5)
    with pytest.raises(ValueError, match="amax_history_len must be in 1"):
        DelayedScaling(amax_history_len=0)
    with pytest.raises(ValueError, match="unknown argument"):
        recipe_from_dict({"type": "Float8CurrentScaling", "margin": 1})
    with pytest.raises(ValueError, match="dfp16"):
        ag.get_policy("fp8_delayed", accumulation="dfp16", compute_format="dfp16")
    with pytest.raises(TypeError, match="recipe must be None or one of"):
        ag.Policy(recipe="delayed")
    lin = nn.Linear(4, 2)
    with ag.use_policy("fp8_delayed"), pytest.raises(ValueError, match="model.set_policy"):
        lin(ag.Tensor(np.ones((1, 4))))


def test_config_precision_recipe_reaches_the_policy_and_the_trainer_resumes_bit_identically(
        tmp_path):
    from models.build import make_policy
    from models.config import ConfigError, resolve_config
    from models.trainer import Trainer

    base = {"model": {"type": "mlp", "hidden": [8]}, "data": {"batch_size": 8},
            "precision": {"policy": "fp8_delayed",
                          "recipe": {"amax_history_len": 3, "amax_compute_algo": "most_recent"}},
            "optimizer": {"type": "adam", "lr": 1e-2},
            "budget": {"steps": 5, "eval_every": 5, "eval_batches": 1},
            "instrument": {"histogram_every": 0, "lost_updates": False}}
    pol = make_policy(resolve_config(base))
    assert pol.recipe == DelayedScaling(amax_history_len=3, amax_compute_algo="most_recent")
    cur = copy.deepcopy(base)
    cur["precision"] = {"policy": "fp8_current", "tensor_core": "h100",
                        "recipe": {"fp8_format": "E4M3"}}
    pol = make_policy(resolve_config(cur))
    assert pol.recipe == Float8CurrentScaling("E4M3") and pol.accumulation == "h100"
    for bad, key in (({"policy": "bf16", "recipe": {"margin": 1}}, "margin"),
                     ({"policy": "fp8_current", "recipe": {"amax_history_len": 4}},
                      "amax_history_len")):
        with pytest.raises(ConfigError, match=f"precision.recipe.{key}"):
            resolve_config({**base, "precision": bad})
    # resume in the middle of the run: the recipe's histories travel in the checkpoint
    a = Trainer(base, progress=False)
    for _ in range(5):
        a.train_step()
    b = Trainer(base, run_dir=str(tmp_path), progress=False)
    for _ in range(2):
        b.train_step()
    b.save()
    c = Trainer(base, run_dir=str(tmp_path), progress=False)
    assert c.resume() == 2
    for _ in range(3):
        c.train_step()
    assert a.history["loss"] == c.history["loss"] and a.history["fp8"] == c.history["fp8"]
    sa, sc = a.model.state_dict(), c.model.state_dict()
    assert all(np.asarray(sa[k]).tobytes() == np.asarray(sc[k]).tobytes() for k in sa)
    assert "layers.0.fp8.input.scale" in sa
    assert len(a.history["fp8"]) == 5 * 2 * 3
