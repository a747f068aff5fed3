"""SGD, Adam, AdamW against their PyTorch rules (written out again here in float64), plus
checkpoints and argument checks."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

from autograd.optim import SGD, Adam, AdamW


class P:
    """The parameter duck type: .data (float32 carrier) and .grad."""

    def __init__(self, data):
        self.data = np.array(data, dtype=np.float32)
        self.grad = None


def grads_for(seed, shapes, steps):
    rng = np.random.default_rng(seed)
    return [[rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(steps)]


def run(opt, params, grads):
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = g
        opt.step()


# ---- SGD ----------------------------------------------------------------------------------------


def test_sgd_plain_is_one_float32_product_and_sum():
    p = P([1.0, 2.0, 3.0])
    p.grad = np.array([0.5, -1.0, 0.1], np.float32)
    SGD([p], lr=0.1).step()
    expected = np.float32([1.0, 2.0, 3.0]) + np.float32(-0.1) * np.float32([0.5, -1.0, 0.1])
    np.testing.assert_array_equal(p.data.view(np.uint32), expected.view(np.uint32))


def test_sgd_momentum_and_nesterov_by_hand():
    # constant gradient 1, lr 1, momentum 0.9: buf = 1, 1.9, 2.71 so w = -1, -2.9, -5.61;
    # Nesterov steps by g + 0.9 * buf = 1.9, 2.71, 3.439 so w = -1.9, -4.61, -8.049.
    for nesterov, expected in ((False, [-1.0, -2.9, -5.61]), (True, [-1.9, -4.61, -8.049])):
        p = P([0.0])
        opt = SGD([p], lr=1.0, momentum=0.9, nesterov=nesterov)
        seen = []
        for _ in range(3):
            p.grad = np.ones(1, np.float32)
            opt.step()
            seen.append(float(p.data[0]))
        np.testing.assert_allclose(seen, expected, rtol=1e-6)


def ref_sgd(w, grads, lr, momentum, dampening, wd, nesterov):
    w, buf = w.astype(np.float64), None
    for g in grads:
        d = g.astype(np.float64) + wd * w
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        w = w - lr * d
    return w


@pytest.mark.parametrize("momentum, dampening, wd, nesterov", [
    (0.0, 0.0, 0.0, False), (0.9, 0.0, 1e-2, False), (0.9, 0.1, 0.0, False), (0.8, 0.0, 1e-3, True)])
def test_sgd_matches_reference(momentum, dampening, wd, nesterov):
    p = P(np.linspace(-1, 1, 7))
    w0 = p.data.copy()
    gs = grads_for(0, [(7,)], 30)
    run(SGD([p], lr=0.01, momentum=momentum, dampening=dampening, weight_decay=wd, nesterov=nesterov), [p], gs)
    ref = ref_sgd(w0, [g[0] for g in gs], 0.01, momentum, dampening, wd, nesterov)
    np.testing.assert_allclose(p.data, ref, rtol=1e-5, atol=1e-6)


# ---- Adam / AdamW -------------------------------------------------------------------------------


def ref_adam(w, grads, lr, b1, b2, eps, wd, decoupled, amsgrad):
    w = w.astype(np.float64)
    m, v, vmax = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        if decoupled:
            w = w * (1 - lr * wd)
        elif wd:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        vv = vmax if amsgrad else v
        w = w - lr / (1 - b1**t) * m / (np.sqrt(vv) / math.sqrt(1 - b2**t) + eps)
    return w


@pytest.mark.parametrize("cls, wd, amsgrad", [
    (Adam, 0.0, False), (Adam, 1e-2, False), (Adam, 0.0, True), (AdamW, 1e-2, False), (AdamW, 0.1, True)])
def test_adam_matches_reference(cls, wd, amsgrad):
    p = P(np.linspace(-2, 2, 9))
    w0 = p.data.copy()
    gs = grads_for(1, [(9,)], 40)
    run(cls([p], lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd, amsgrad=amsgrad), [p], gs)
    ref = ref_adam(w0, [g[0] for g in gs], 1e-2, 0.9, 0.99, 1e-8, wd, cls is AdamW, amsgrad)
    np.testing.assert_allclose(p.data, ref, rtol=1e-5, atol=1e-6)


def test_adam_first_step_moves_by_lr():
    # m_hat = g and v_hat = g^2 after one step, so the update is lr * g / (|g| + eps) ~ lr * sign(g).
    p = P([1.0, 1.0, 1.0])
    p.grad = np.array([1e-3, -5.0, 300.0], np.float32)
    Adam([p], lr=0.01).step()
    np.testing.assert_allclose(p.data, [0.99, 1.01, 0.99], rtol=1e-6)


def test_adamw_decay_is_decoupled():
    # Zero gradients: AdamW shrinks w by exactly float32(1 - lr * wd) per step (the Adam part is
    # 0 / (0 + eps) = 0), Adam's L2 decay instead moves w by about lr per step.
    p, q = P([3.0]), P([3.0])
    w = np.float32(3.0)
    aw, a = AdamW([p], lr=0.1, weight_decay=0.5), Adam([q], lr=0.1, weight_decay=0.5)
    for _ in range(5):
        p.grad, q.grad = np.zeros(1, np.float32), np.zeros(1, np.float32)
        aw.step()
        a.step()
        w = w * np.float32(1 - 0.1 * 0.5)
    assert p.data[0] == w
    assert q.data[0] == pytest.approx(3.0 - 5 * 0.1, abs=0.01)  # vs 3 * 0.95^5 = 2.32 for AdamW


# ---- shared behaviour ---------------------------------------------------------------------------


def test_groups_state_and_params_without_grad():
    a, b, c = P([1.0]), P([1.0]), P([1.0])
    opt = SGD([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1, momentum=0.9)
    a.grad, c.grad = np.ones(1, np.float32), np.ones(1, np.float32)
    opt.step()
    assert a.data[0] == np.float32(0.9) and b.data[0] == 1.0 and c.data[0] == 0.5
    assert sorted(opt.state) == [0, 2]  # b had no gradient: no state, no move


def test_zero_grad():
    p = P([1.0, 2.0])
    opt = SGD([p], lr=0.1)
    p.grad = np.ones(2, np.float32)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad, [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None


@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: Adam(ps, lr=1e-2, amsgrad=True, weight_decay=1e-2),
    lambda ps: AdamW([{"params": ps[:1]}, {"params": ps[1:], "lr": 3e-3}], lr=1e-2),
])
def test_state_dict_round_trip_is_bit_exact(make):
    shapes = [(3, 4), (5,)]
    gs = grads_for(2, shapes, 20)
    pa = [P(np.ones(s)) for s in shapes]
    pb = [P(np.ones(s)) for s in shapes]
    a, b = make(pa), make(pb)
    run(a, pa, gs[:10])
    saved = pickle.loads(pickle.dumps(a.state_dict()))
    snapshot = copy.deepcopy(saved)
    for p, q in zip(pa, pb):
        q.data[...] = p.data
    b.load_state_dict(saved)
    run(a, pa, gs[10:])
    run(b, pb, gs[10:])
    for p, q in zip(pa, pb):
        np.testing.assert_array_equal(p.data.view(np.uint32), q.data.view(np.uint32))
    # the saved dict held copies: stepping on did not change it
    for i, st in saved["state"].items():
        for k, v in st.items():
            np.testing.assert_array_equal(v, snapshot["state"][i][k])


def test_load_state_dict_rejects_mismatches():
    opt = Adam([P([1.0])])
    other = Adam([P([1.0]), P([2.0])])
    with pytest.raises(ValueError, match="groups"):
        opt.load_state_dict(other.state_dict())
    p = P([1.0, 2.0])
    o2 = Adam([p])
    p.grad = np.ones(2, np.float32)
    o2.step()
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_dict(o2.state_dict())


@pytest.mark.parametrize("build, err, match", [
    (lambda: SGD([P([1.0])], lr=float("nan")), ValueError, "lr"),
    (lambda: SGD([P([1.0])], lr=-1.0), ValueError, "lr"),
    (lambda: SGD([P([1.0])], lr="0.1"), TypeError, "lr"),
    (lambda: SGD([P([1.0])], momentum=-0.5), ValueError, "momentum"),
    (lambda: SGD([P([1.0])], nesterov=True), ValueError, "nesterov"),
    (lambda: Adam([P([1.0])], betas=(1.0, 0.999)), ValueError, r"betas\[0\]"),
    (lambda: Adam([P([1.0])], betas=0.9), TypeError, "betas"),
    (lambda: Adam([P([1.0])], eps=-1e-8), ValueError, "eps"),
    (lambda: AdamW([P([1.0])], weight_decay=float("inf")), ValueError, "weight_decay"),
    (lambda: Adam([]), ValueError, "empty"),
    (lambda: Adam([object()]), TypeError, ".data"),
    (lambda: Adam([{"params": [P([1.0])], "momentum": 0.9}]), ValueError, "unknown option"),
])
def test_bad_arguments(build, err, match):
    with pytest.raises(err, match=match):
        build()


def test_duplicate_params_bad_grad_shape_and_bad_lr_at_step():
    p = P([1.0, 2.0])
    with pytest.raises(ValueError, match="more than once"):
        SGD([p, p])
    opt = SGD([p], lr=0.1)
    p.grad = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="shape"):
        opt.step()
    p.grad = np.ones(2, np.float32)
    opt.param_groups[0]["lr"] = float("nan")  # as a broken scheduler would
    with pytest.raises(ValueError, match="lr"):
        opt.step()
    np.testing.assert_array_equal(p.data, [1.0, 2.0])
