"""The reverse-mode engine: backward, accumulation, un-broadcasting, graph freeing, no_grad,
detach, deep graphs, and the errors bad input raises."""

from __future__ import annotations

import numpy as np
import pytest

import autograd as ag
from autograd import F, Tensor, no_grad, tensor


def test_backward_accumulates_over_calls_and_zero_grad_clears():
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [5.0, 7.0, 9.0])
    x.zero_grad()
    assert x.grad is None


def test_tensor_used_twice_sums_both_paths():
    x = tensor([2.0], requires_grad=True)
    y = x * x + x                         # dy/dx = 2x + 1
    y.backward(np.ones(1))
    np.testing.assert_array_equal(x.grad, [5.0])


def test_unbroadcast_to_every_input_shape():
    a = tensor(np.ones((2, 3)), requires_grad=True)
    b = tensor(np.ones((3,)), requires_grad=True)
    c = tensor(np.ones((2, 1)), requires_grad=True)
    d = tensor(2.0, requires_grad=True)
    (a * b + c * d).sum().backward()
    assert a.grad.shape == (2, 3) and b.grad.shape == (3,) and c.grad.shape == (2, 1)
    np.testing.assert_array_equal(b.grad, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(c.grad, [[6.0], [6.0]])
    assert d.grad.shape == () and d.grad == 6.0


def test_leaf_gradients_never_alias():
    a = tensor(np.ones(3), requires_grad=True)
    b = tensor(np.ones(3), requires_grad=True)
    (a + b).backward(np.ones(3))
    a.grad *= 10.0                        # an optimizer may scale in place
    np.testing.assert_array_equal(b.grad, np.ones(3))


def test_intermediate_gradients_are_freed_unless_retained():
    x = tensor([1.0, -2.0], requires_grad=True)
    h = x * 3.0
    k = (x * 2.0).retain_grad()
    (h + k).sum().backward()
    assert h.grad is None
    np.testing.assert_array_equal(k.grad, [1.0, 1.0])


def test_second_backward_needs_retain_graph():
    x = tensor([1.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad, [4.0])
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_backward_errors():
    x = tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="one-element"):
        (x * 2.0).backward()
    with pytest.raises(ValueError, match="shape"):
        (x * 2.0).backward(np.ones(4))
    with pytest.raises(RuntimeError, match="does not require grad"):
        tensor(np.ones(2)).sum().backward()


def test_no_grad_records_nothing_and_detach_cuts():
    x = tensor([1.0, 2.0], requires_grad=True)
    with no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.is_leaf
    z = x.detach() * 2.0
    assert not z.requires_grad
    w = (x * 2.0).detach()
    assert not w.requires_grad and w.fmt == x.fmt
    np.testing.assert_array_equal(w.numpy(), [2.0, 4.0])


def test_numpy_shares_memory_and_constructor_copies():
    arr = np.array([1.0, 2.0], dtype=np.float32)
    t = Tensor(arr)
    arr[0] = 5.0
    assert t.numpy()[0] == 1.0
    assert np.shares_memory(t.numpy(), t.data)


def test_default_format_follows_the_policy_model_format():
    assert tensor([0.1]).fmt.name == "fp32"
    with ag.use_policy("O3"):
        t = tensor([0.1])
    assert t.fmt.name == "fp16" and t.data.dtype == np.float32
    assert t.data[0] == np.float32(np.float16(0.1))


def test_deep_chain_backpropagates_without_recursion():
    x = tensor([1.0], requires_grad=True)
    y = x
    for _ in range(6000):                 # 12k nodes: far past Python's recursion limit
        y = y * 1.0 + 0.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0])


def test_wide_and_deep_dag_is_deterministic():
    def run():
        x = tensor(np.linspace(-1, 1, 7), requires_grad=True)
        h = x
        for i in range(300):
            h = F.tanh(h) * 0.9 + h * 0.1 + (i % 3) * 0.01
        (h * h).sum().backward()
        return x.grad.copy()
    g1, g2 = run(), run()
    assert np.array_equal(g1.view(np.uint32), g2.view(np.uint32))


def test_scalar_operators_and_reflected_forms():
    x = tensor([2.0, 4.0], requires_grad=True)
    y = (1.0 - x) + (8.0 / x) + (x ** 2) + (2.0 ** x) - (-x)
    y.sum().backward()
    expect = -1.0 - 8.0 / np.array([4.0, 16.0]) + 2 * np.array([2.0, 4.0]) \
        + np.log(2.0) * 2.0 ** np.array([2.0, 4.0]) + 1.0
    np.testing.assert_allclose(x.grad, expect, rtol=1e-6)


def test_ndarray_on_the_left_dispatches_to_tensor():
    x = tensor([1.0, 2.0], requires_grad=True)
    y = np.array([3.0, 4.0]) * x
    assert isinstance(y, Tensor)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])


def test_bad_input_names_the_problem():
    a, b = tensor(np.ones((2, 3))), tensor(np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"inner dimensions differ: \(2, 3\) @ \(4, 2\)"):
        F.matmul(a, b)
    with pytest.raises(ValueError, match="weight"):
        F.linear(a, tensor(np.ones((2, 4))))
    x, w = tensor(np.ones((1, 1, 4, 4))), tensor(np.ones((1, 1, 2, 2)))
    with pytest.raises(ValueError, match="stride must be >= 1"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(TypeError, match="stride must be an int or a pair"):
        F.conv2d(x, w, stride="2")
    with pytest.raises(ValueError, match="does not fit"):
        F.conv2d(x, tensor(np.ones((1, 1, 6, 6))))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        F.sum(a, axis=2)
    with pytest.raises(ValueError, match="reshape"):
        F.reshape(a, (4, 2))
    with pytest.raises(ValueError, match="index out of range"):
        F.cross_entropy(a, np.array([0, 3]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.mse(a, a, reduction="avg")
    with pytest.raises(TypeError, match="real numbers"):
        tensor(np.array(["a"]))
    with pytest.raises(ValueError, match="unknown format"):
        tensor([1.0], fmt="fp12")
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(a, approximate="fast")
    with pytest.raises(ValueError, match="p must be in"):
        F.dropout(a, 1.5, seed=0)
    with pytest.raises(TypeError, match="seed"):
        F.dropout(a, 0.5)


def test_dropout_same_seed_same_bits_and_expected_scale():
    x = tensor(np.ones((50, 40)))
    a, b = F.dropout(x, 0.25, seed=3), F.dropout(x, 0.25, seed=3)
    c = F.dropout(x, 0.25, seed=4)
    assert np.array_equal(a.data, b.data) and not np.array_equal(a.data, c.data)
    kept = a.data != 0
    np.testing.assert_array_equal(a.data[kept], np.float32(1 / 0.75))
    assert 0.7 < kept.mean() < 0.8
    assert F.dropout(x, 0.25, training=False, seed=3) is x


def test_relu_drops_gradients_exactly_even_when_they_are_not_finite():
    x = tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
    F.relu(x).backward(np.array([np.inf, -np.inf, np.nan, 1.5]))
    np.testing.assert_array_equal(x.grad, [0.0, -np.inf, 0.0, 1.5])   # as torch: 0 where x <= 0


def test_max_pool_routes_gradient_exactly():
    x = tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    expect = np.zeros((4, 4))
    expect[1::2, 1::2] = 1.0
    np.testing.assert_array_equal(x.grad[0, 0], expect)


def test_batch_norm_running_statistics_follow_torch_conventions():
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((6, 2, 3, 3))
    rm, rv = tensor(np.zeros(2)), tensor(np.ones(2))
    F.batch_norm(tensor(xv), rm, rv, training=True, momentum=0.1)
    n = 6 * 9
    m = xv.mean(axis=(0, 2, 3))
    v = xv.var(axis=(0, 2, 3)) * n / (n - 1)                    # unbiased for the buffer
    np.testing.assert_allclose(rm.data, 0.1 * m, rtol=1e-6)
    np.testing.assert_allclose(rv.data, 0.9 + 0.1 * v, rtol=1e-6)
    y = F.batch_norm(tensor(xv), rm, rv, training=False)
    np.testing.assert_allclose(y.data, (xv - rm.data[None, :, None, None])
                               / np.sqrt(rv.data[None, :, None, None] + 1e-5), rtol=1e-5)


def test_cross_entropy_matches_the_formula():
    z = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
    t = np.array([1, 2])
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    plain = -logp[[0, 1], t].mean()
    smooth = (0.9 * -logp[[0, 1], t] + 0.1 * -logp.mean(1)).mean()
    with ag.use_policy("fp64"):
        assert F.cross_entropy(tensor(z), t).item() == pytest.approx(plain, rel=1e-14)
        got = F.cross_entropy(tensor(z), t, label_smoothing=0.1).item()
        assert got == pytest.approx(smooth, rel=1e-14)
