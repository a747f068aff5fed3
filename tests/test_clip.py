"""Gradient clipping by the GLOBAL L2 norm over all parameters (issue #18 item 8), as
torch.nn.utils.clip_grad_norm_: a numpy reference that always runs, bit for bit, through the one
mixed precision optimizer of an O2 model (fp16 weights, fp32 batch-norm parameters, two
parameter groups), and a twin test against torch where torch is installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import autograd as ag
from autograd.mixed import MixedPrecisionOptimizer
from autograd.optim import SGD, clip_grad_norm_
from scalers import StaticLossScaler

S = 2.0 ** 8     # a power of two: unscaling is exact


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _reference_clip(grads, max_norm):
    """The rule written out: norm over ALL gradients in float64, coef = max / (norm + 1e-6),
    applied (rounded once to float32) only when below 1."""
    total = math.sqrt(sum(float(np.sum(np.asarray(g, np.float64) ** 2)) for g in grads))
    coef = max_norm / (total + 1e-6)
    return total, [g * np.float32(coef) if coef < 1 else g.copy() for g in grads]


def _o2_setup(rng):
    w = ag.Parameter(rng.standard_normal((4, 3)), fmt="fp16")       # fp16 weight: fp32 master
    bn = ag.Parameter(1 + rng.standard_normal(3) * 2.0 ** -12, fmt="fp32")  # fp32: no master
    opt = SGD([{"params": [w]}, {"params": [bn], "lr": 0.5}], lr=1.0)
    return w, bn, opt


def test_mixed_optimizer_clips_by_the_global_norm_bit_for_bit():
    rng = np.random.default_rng(3)
    w, bn, opt = _o2_setup(rng)
    w0, bn0 = w.data.copy(), bn.data.copy()
    mixed = MixedPrecisionOptimizer(opt, StaticLossScaler(S), max_grad_norm=0.5)
    assert mixed.has_master == [True, False]
    g = [ag.Tensor(rng.standard_normal(p.shape), fmt=p.fmt).data for p in (w, bn)]
    g[1] = g[1] * np.float32(4.0)                   # the groups' norms differ
    w.grad, bn.grad = (np.asarray(x * np.float32(S), np.float32) for x in g)
    res = mixed.step()
    total, (gw, gb) = _reference_clip(g, 0.5)
    assert not res.skipped and res.grad_norm == total
    # SGD: master -= lr * g (float32 ops); model weight = RNE fp16 of the master; the fp32
    # parameter's update is rounded once into fp32 (w + (-lr g) is one float32 addition).
    master = w0 + np.float32(-1.0) * gw
    np.testing.assert_array_equal(_bits(mixed.slots[0].data), _bits(master))
    np.testing.assert_array_equal(_bits(w.data), _bits(ag.Tensor(master, fmt="fp16").data))
    np.testing.assert_array_equal(_bits(bn.data), _bits(bn0 + np.float32(-0.5) * gb))
    # Clipping each parameter group by its own norm (what models.build.GroupedMixed did) gives
    # other bits: this test tells the two rules apart.
    _, (gw_own,) = _reference_clip([g[0]], 0.5)
    assert not np.array_equal(_bits(w0 + np.float32(-1.0) * gw_own), _bits(master))


def test_clip_grad_norm_function_on_parameters_and_arrays():
    rng = np.random.default_rng(4)
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((3, 2), (5,), (1,))]
    total, expected = _reference_clip(grads, 1.0)
    params = [type("P", (), {"grad": g.copy()})() for g in grads] + [type("P", (), {"grad": None})()]
    assert clip_grad_norm_(params, 1.0) == total
    for p, e in zip(params, expected):
        np.testing.assert_array_equal(_bits(p.grad), _bits(e))
    arrays = [g.copy() for g in grads]
    assert clip_grad_norm_(arrays, 1e9) == total          # coef >= 1: untouched
    for a, g in zip(arrays, grads):
        np.testing.assert_array_equal(_bits(a), _bits(g))
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm_(arrays, -1.0)
    with pytest.raises(TypeError, match="item 0"):
        clip_grad_norm_([[1.0, 2.0]], 1.0)
    with pytest.raises(TypeError, match="gradient 0"):
        clip_grad_norm_([type("P", (), {"grad": [1.0]})()], 1.0)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-13), (np.float32, 2e-7)])
def test_clip_grad_norm_twin_torch(dtype, rtol):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal(s).astype(dtype) * 3 for s in ((8, 4), (4,), (16, 8))]
    ours = [g.copy() for g in grads]
    total = clip_grad_norm_(ours, 2.0)
    ps = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.from_numpy(g).dtype))
          for g in grads]
    for p, g in zip(ps, grads):
        p.grad = torch.from_numpy(g.copy())
    t_total = float(torch.nn.utils.clip_grad_norm_(ps, 2.0))
    assert total == pytest.approx(t_total, rel=rtol)
    for o, p in zip(ours, ps):
        np.testing.assert_allclose(o, p.grad.numpy(), rtol=2 * rtol, atol=0)
    # the global norm, not each tensor's: every tensor is scaled by the same factor
    ratios = [float(np.linalg.norm(o)) / float(np.linalg.norm(g)) for o, g in zip(ours, grads)]
    assert max(ratios) - min(ratios) < 10 * rtol and ratios[0] < 1


def test_mixed_optimizer_twin_torch_two_groups():
    """Through MixedPrecisionOptimizer (fp32 storage, two groups): the same updates as torch's
    clip_grad_norm_ over both groups followed by torch.optim.SGD."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    data = [rng.standard_normal(s) for s in ((5, 3), (3,))]
    grads = [rng.standard_normal(s).astype(np.float32) * 4 for s in ((5, 3), (3,))]
    ps = [ag.Parameter(d, fmt="fp32") for d in data]
    mixed = MixedPrecisionOptimizer(SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.3}],
                                        lr=0.1), max_grad_norm=1.0)
    before = [p.data.copy() for p in ps]
    tp = [torch.nn.Parameter(torch.from_numpy(b.copy())) for b in before]
    for p, g in zip(ps, grads):
        p.grad = g.copy()
    res = mixed.step()
    for p, g in zip(tp, grads):
        p.grad = torch.from_numpy(g.copy())
    t_norm = float(torch.nn.utils.clip_grad_norm_(tp, 1.0))
    torch.optim.SGD([{"params": [tp[0]]}, {"params": [tp[1]], "lr": 0.3}], lr=0.1).step()
    assert res.grad_norm == pytest.approx(t_norm, rel=2e-7)
    for p, t, b in zip(ps, tp, before):
        # the updates agree to an ulp of the update (the float32 clip factors may differ by one)
        np.testing.assert_allclose(p.data - b, t.detach().numpy() - b, rtol=1e-6, atol=1e-7)
