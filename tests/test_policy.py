"""Precision policies: records, selection and activation, and what they do to real values.

Checks that the rounding really happens where the policy says: fp16 gradient underflow under O3
(and its cure by loss scaling), fp32-list ops computed in fp32, correctly rounded elementwise ops
equal to softfloat's, the O2 model copy equal to the fp16 rounding of the fp32 weights, and
backward following the policy of the forward pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

import autograd as ag
import softfloat as sf
from autograd import F, Parameter, get_policy, nn, tensor, use_policy
from autograd.policy import PRESETS, Policy

RNG = np.random.default_rng(7)


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(bits(a), bits(b)), f"{a!r} != {b!r}"


def on_grid(x, fmt):
    return np.array_equal(np.asarray(sf.round(np.asarray(x), fmt)), x)


def fp16_values(*shape, scale=1.0):
    return np.asarray(sf.round(RNG.standard_normal(shape) * scale, "fp16"))


# ----- records ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_through_json_and_print(name):
    p = get_policy(name)
    assert Policy.from_json(p.to_json()) == p
    assert Policy.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    text = str(p)
    assert name in text and p.activation_format in text and p.accumulation in text


def test_preset_contents_follow_apex():
    o0, o1, o2, o3 = (get_policy(n) for n in ("O0", "O1", "O2", "O3"))
    assert (o0.activation_format, o0.model_format, o0.fp32_ops) == ("fp32", "fp32", ())
    assert o1.model_format == "fp32" and o1.compute_format == "fp16"
    assert {"softmax", "exp", "log", "layer_norm", "cross_entropy"} <= set(o1.fp32_ops)
    assert o2.model_format == "fp16" and o2.master_weights and o2.keep_batchnorm_fp32
    assert o3.model_format == "fp16" and not o3.master_weights and o3.fp32_ops == ()
    assert get_policy("bf16").compute_format == "bf16"
    assert get_policy("dfp16").accumulation == "dfp16"


def test_selection_by_name_record_dict_and_overrides():
    assert get_policy("o2") is PRESETS["O2"]
    p = get_policy("O2", accumulation="v100", rounding="sr", seed=3)
    assert p.accumulation == "v100" and p.rounding == "sr" and p.name == "O2"
    assert get_policy(p) is p
    assert get_policy(p.to_dict()) == p
    assert get_policy("O1", activation_format="bfloat16").activation_format == "bf16"


def test_bad_policies_name_the_problem():
    with pytest.raises(ValueError, match="unknown policy 'O4'; accepted: fp64, O0, O1, O2, O3"):
        get_policy("O4")
    with pytest.raises(ValueError, match="unknown accumulation 'k80'; accepted: native"):
        get_policy("O1", accumulation="k80")
    with pytest.raises(ValueError, match="fp32_ops: unknown op"):
        get_policy("O1", fp32_ops=("softmax", "fft"))
    with pytest.raises(ValueError, match="activation_format: unknown format"):
        get_policy("O1", activation_format="fp12")
    with pytest.raises(ValueError, match="dfp16"):
        get_policy("O1", compute_format="dfp16")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        get_policy("O1", rounding="banker")
    with pytest.raises(ValueError, match="unknown Policy field"):
        Policy.from_dict({"name": "x", "speed": "fast"})
    with pytest.raises(TypeError, match="a name, a Policy or a dict"):
        get_policy(3)


def test_custom_format_objects_are_kept_and_round_trip_through_json():
    """Issue #18 item 7: a Policy keeps a custom Format object (never looks its name up), and
    serialises it as the Format's constructor fields."""
    e3m4 = sf.Format("e3m4", 3, 4)
    p = Policy("custom8", activation_format=e3m4, gradient_format="fp16",
               compute_format=sf.get_format("fp16"), model_format="fp32")
    assert p.activation_format is e3m4 and p.act is e3m4
    assert p.compute_format == "fp16"                     # a preset object becomes its name
    d = json.loads(p.to_json())
    assert d["activation_format"] == {"name": "e3m4", "exp_bits": 3, "man_bits": 4,
                                      "subnormals": True, "inf_nan": "ieee", "saturate": False,
                                      "signed": True, "zero": True}
    q = Policy.from_json(p.to_json())
    assert q == p and q.act == e3m4 and get_policy(d) == p
    assert "activations e3m4" in str(p)
    # a custom format named like a preset but with another grid stays an object, and differs
    odd = sf.Format("fp16", 5, 9)
    r = get_policy("O3", activation_format=odd)
    assert r.act is odd and r.act != sf.get_format("fp16")
    assert Policy.from_json(r.to_json()).act == odd
    assert get_policy("O3", activation_format=sf.Format("fp16", 5, 10)).activation_format == "fp16"
    with pytest.raises(ValueError, match=r"activation_format: unknown Format field\(s\) \['bits'\]"):
        Policy(activation_format={"name": "x", "bits": 8})
    with pytest.raises(ValueError, match="activation_format: Format exp_bits must be in 2..11"):
        Policy(activation_format={"name": "x", "exp_bits": 1, "man_bits": 3})
    # and it runs: activations stored on e3m4's grid, gradients in fp16
    with p:
        x = tensor(RNG.standard_normal((3, 4)), requires_grad=True)
        w = tensor(RNG.standard_normal((4, 2)), requires_grad=True)
        y = x @ w
        F.sum(y).backward()
    assert y.fmt is e3m4 and on_grid(y.data, e3m4)
    assert x.grad is not None and on_grid(x.grad, "fp32")


def test_context_managers_nest_and_restore():
    assert ag.current_policy().name == "O0"
    with use_policy("O3"):
        assert ag.current_policy().name == "O3"
        with get_policy("bf16"):
            assert ag.current_policy().name == "bf16"
        assert ag.current_policy().name == "O3"
    assert ag.current_policy().name == "O0"


# ----- rounding that really happens ---------------------------------------------------------------
def _tiny_gradient_step(policy, loss_scale=1.0):
    """d loss / d h = 2^-26 * loss_scale for every element of h = x W^T."""
    with use_policy(policy):
        x = tensor(np.full((4, 3), 0.5))
        w = Parameter(np.full((2, 3), 0.25))
        h = F.linear(x, w).retain_grad()
        loss = F.sum(h) * 2.0 ** -13 * 2.0 ** -13 * loss_scale
        loss.backward()
    return h.grad, w.grad


def test_gradient_below_fp16_range_vanishes_under_O3_not_O0():
    hg, wg = _tiny_gradient_step("O0")
    np.testing.assert_array_equal(hg, 2.0 ** -26)          # representable in fp32
    np.testing.assert_array_equal(wg, 4 * 0.5 * 2.0 ** -26)
    hg, wg = _tiny_gradient_step("O3")
    np.testing.assert_array_equal(hg, 0.0)                 # 2^-26 < 2^-25: rounds to zero
    np.testing.assert_array_equal(wg, 0.0)


def test_loss_scaling_brings_the_gradient_back_under_O3():
    # 2^15: the scale is itself an fp16 constant here (2^16 = 65536 would overflow to inf)
    hg, wg = _tiny_gradient_step("O3", loss_scale=2.0 ** 15)
    np.testing.assert_array_equal(hg, 2.0 ** -11)
    np.testing.assert_array_equal(wg / 2.0 ** 15, 4 * 0.5 * 2.0 ** -26)  # = the O0 gradient


@pytest.mark.parametrize("g,stored", [(2.0 ** -24, 2.0 ** -24), (2.0 ** -25, 0.0),
                                      (1.5 * 2.0 ** -25, 2.0 ** -24), (2.0 ** -26, 0.0)])
def test_fp16_gradient_storage_rounds_at_the_subnormal_boundary(g, stored):
    with use_policy("O3"):
        x = tensor([1.0], requires_grad=True)
        y = x * 1.0
    y.backward(np.array([g]))
    assert x.grad[0] == stored


def test_cast_rounds_the_value_forward_and_the_gradient_backward():
    x = tensor([0.1, 1e-6, 7e4], requires_grad=True)          # fp32 leaf
    y = x.to("fp16")
    assert y.fmt.name == "fp16"
    assert_same_bits(y.data, np.asarray(sf.round(x.data, "fp16")))   # 7e4 overflows to inf
    z = y.to("fp32")
    assert z.fmt.name == "fp32" and np.array_equal(z.data, y.data, equal_nan=True)
    z.backward(np.array([1e-9, 0.3, 1.0]))
    # the gradient passes fp16 storage on its way back: 1e-9 underflows, 0.3 is rounded
    assert_same_bits(x.grad, np.asarray(sf.round(np.array([1e-9, 0.3, 1.0]), "fp16")))
    assert x.to("fp32") is x


def test_backward_follows_the_policy_of_the_forward_pass():
    with use_policy("O3"):
        x = tensor(RNG.standard_normal(5), requires_grad=True)
        y = F.tanh(x) * 3.0
    y.backward(RNG.standard_normal(5) * 1e-3)      # called under the default O0
    assert x.grad.dtype == np.float32 and on_grid(x.grad, "fp16")
    assert not on_grid(F.tanh(tensor(x.data)).data, "fp16")   # O0 itself keeps fp32 values


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "exp", "log", "sum", "mean"])
def test_fp32_list_ops_compute_in_fp32_under_O1(op):
    xv = np.asarray(sf.round(np.abs(fp16_values(3, 5)) + 0.5, "fp16"))
    ref = {"softmax": lambda z: np.exp(z) / np.exp(z).sum(-1, keepdims=True),
           "log_softmax": lambda z: z - np.log(np.exp(z).sum(-1, keepdims=True)),
           "exp": np.exp, "log": np.log, "sum": np.sum, "mean": np.mean}[op]
    exact = ref(xv.astype(np.float64))
    with use_policy("O1"):
        x = tensor(xv, fmt="fp16")
        y = getattr(F, op)(x)
    assert y.fmt.name == "fp32"
    assert_same_bits(y.data, np.asarray(sf.round(exact, "fp32")).reshape(y.shape))
    with use_policy("O3"):
        y16 = getattr(F, op)(tensor(xv, fmt="fp16"))
    assert y16.fmt.name == "fp16"
    assert_same_bits(y16.data, np.asarray(sf.round(exact, "fp16")).reshape(y.shape))
    if op != "sum":
        assert not on_grid(y.data, "fp16")          # fp32 values that fp16 cannot hold


def test_fp32_list_losses_and_norms_under_O1_and_other_ops_keep_their_format():
    with use_policy("O1"):
        x = tensor(fp16_values(4, 6), fmt="fp16")
        assert F.cross_entropy(x, np.array([0, 1, 2, 5])).fmt.name == "fp32"
        assert F.layer_norm(x, (6,)).fmt.name == "fp32"
        assert F.batch_norm(x, training=True).fmt.name == "fp32"
        assert F.mse(x, np.zeros((4, 6))).fmt.name == "fp32"
        for op in (F.tanh, F.relu, F.sigmoid, F.gelu):
            assert op(x).fmt.name == "fp16"
        assert (x + tensor(np.ones(6), fmt="fp32")).fmt.name == "fp32"   # promotion
        assert (x * 0.1).fmt.name == "fp16"            # Python numbers adopt x's format


@pytest.mark.parametrize("policy,fmt", [("O3", "fp16"), ("bf16", "bf16"),
                                        ("O0", "fp32")])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_elementwise_ops_are_correctly_rounded(policy, fmt, op):
    a = np.asarray(sf.round(RNG.standard_normal(2000) * 3.0, fmt))
    b = np.asarray(sf.round(RNG.standard_normal(2000) * 1e-3, fmt))
    with use_policy(policy):
        y = getattr(F, op)(tensor(a, fmt=fmt), tensor(b, fmt=fmt))
    assert_same_bits(y.data, np.asarray(getattr(sf, op)(a, b, fmt)))


@pytest.mark.parametrize("mode", ["rtz", "rup", "rna", "sr"])
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
def test_rounding_modes_follow_the_policy(mode, fmt):
    a = np.asarray(sf.round(RNG.standard_normal(500), fmt))
    b = np.asarray(sf.round(RNG.uniform(0.5, 3.0, 500), fmt))
    pol = get_policy("O3", activation_format=fmt, gradient_format=fmt, compute_format=fmt,
                     model_format=fmt, rounding=mode, seed=11)
    for op in ("add", "mul", "div"):
        ag.manual_seed(0)                 # restarts the stochastic-rounding stream
        with use_policy(pol):
            y = getattr(F, op)(tensor(a, fmt=fmt), tensor(b, fmt=fmt))
        kw = {"seed": sf.derive_seed(11, 0)} if mode == "sr" else {}
        assert_same_bits(y.data, np.asarray(getattr(sf, op)(a, b, fmt, mode, **kw)))
    with use_policy(pol):
        y = F.sqrt(tensor(b, fmt=fmt))
    assert on_grid(y.data, fmt)


def test_stochastic_rounding_is_reproducible_and_seed_dependent():
    a = fp16_values(1000)
    pol = get_policy("O3", rounding="sr", seed=5)

    def run(seed):
        ag.manual_seed(seed)
        with use_policy(pol):
            return F.exp(tensor(a)).data
    assert_same_bits(run(0), run(0))
    ag.manual_seed(0)
    with use_policy(pol.replace(seed=6)):
        other = F.exp(tensor(a)).data
    assert not np.array_equal(run(0), other)


def test_fp32_fast_path_equals_softfloat_round():
    from autograd import _backend as B
    tiny = np.float64(2.0 ** -149)
    x = np.concatenate([RNG.standard_normal(1000) * 10.0 ** RNG.integers(-45, 39, 1000),
                        [tiny * 0.5, tiny * 1.5, tiny * 0.49, 3.4028235677973366e38,
                         3.402823669209385e38, -1e39, 0.0, -0.0, np.inf, 2.0 ** -126 * 0.75]])
    assert_same_bits(B.round_to(x, B.F32), np.asarray(sf.round(x, "fp32")))


def test_fp16_rounding_of_the_backend_is_softfloat_round():
    from autograd import _backend as B
    fp16 = B.get_fmt("fp16")
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = (h[:-1] + h[1:]) / 2               # every tie, and values a hair off each tie
    x = np.concatenate([mid, mid * (1 + 2.0 ** -40), mid * (1 - 2.0 ** -40), -mid,
                        RNG.standard_normal(20000) * 10.0 ** RNG.integers(-9, 6, 20000),
                        [65519.99, 65520.0, 1e6, -np.inf, 2.0 ** -25 * (1 + 2.0 ** -45)]])
    for arr in (x, x.astype(np.float32)):
        assert_same_bits(B.round_to(arr, fp16), np.asarray(sf.round(arr, "fp16")))
    sat = sf.Format("fp16sat", 5, 10, saturate=True)   # same grid, other overflow rule
    assert B.round_to(np.array([1e6]), sat)[0] == 65504.0
    sat32 = sf.Format("fp32sat", 8, 23, saturate=True)  # not numpy's float32: no native path
    assert B.round_to(np.array([1e39]), sat32)[0] == np.finfo(np.float32).max


# ----- models under a policy --------------------------------------------------------------------
def _net():
    ag.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def test_O2_model_copy_is_the_fp16_rounding_of_the_fp32_weights():
    model = _net()
    master = {k: v.copy() for k, v in model.state_dict().items()}
    model.set_policy("O2")
    for name, p in model.named_parameters():
        if name.startswith("1."):          # batch-norm stays fp32 under O2
            assert p.fmt.name == "fp32"
            assert_same_bits(p.data, master[name])
        else:
            assert p.fmt.name == "fp16"
            assert_same_bits(p.data, np.asarray(sf.round(master[name], "fp16")))
    for name, b in model.named_buffers():
        assert b.fmt.name == "fp32"
        assert_same_bits(b.data, master[name])
    w = model[0].weight
    w.assign(master["0.weight"] * 1.001)    # what a master-weight optimizer writes back
    assert_same_bits(w.data, np.asarray(sf.round(master["0.weight"] * 1.001, "fp16")))


def test_per_model_policy_runs_forward_and_backward_under_it():
    model = _net().set_policy("O3")
    assert all(p.fmt.name == "fp16" for p in model.parameters())
    out = model(RNG.standard_normal((5, 6)))        # float64 input cast to the model format
    # like apex, a 16-bit model hands back fp32 outputs (the values are the fp16 results)
    assert out.fmt.name == "fp32" and on_grid(out.data, "fp16")
    assert ag.current_policy().name == "O0"
    F.cross_entropy(out, np.array([0, 1, 2, 0, 1])).backward()
    for p in model.parameters():
        assert p.grad is not None and on_grid(p.grad, "fp16")
    model.set_policy(None)
    assert model.policy is None


def test_O1_keeps_fp32_weights_and_fp16_activations():
    model = _net().set_policy("O1")
    assert all(p.fmt.name == "fp32" for p in model.parameters())
    x = tensor(RNG.standard_normal((5, 6)))
    with use_policy("O1"):
        h = model[0](x)
    assert h.fmt.name == "fp16" and on_grid(h.data, "fp16")
    out = model(x)
    assert out.fmt.name == "fp32" and on_grid(out.data, "fp16")   # widened at the boundary
    F.cross_entropy(out, np.array([0, 1, 2, 0, 1])).backward()
    w = model[3].weight
    assert w.grad.dtype == np.float32
    assert on_grid(w.grad, "fp16")   # the fp16 GEMM's gradient, widened exactly to fp32
