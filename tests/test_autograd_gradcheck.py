"""Float64 central-difference gradient checks for every op of the engine, over scalar, vector,
matrix and broadcast shapes (autograd.check_grads runs them under the unrounded fp64 policy)."""

from __future__ import annotations

import numpy as np
import pytest

from autograd import F, check_grads

RNG = np.random.default_rng(20240601)


def rand(*shape, low=None):
    x = RNG.standard_normal(shape)
    if low is not None:  # keep away from a kink or a singularity
        x = np.where(np.abs(x) < low, np.sign(x + 1e-12) * (low + np.abs(x)), x)
    return x


def pos(*shape):
    return RNG.uniform(0.5, 2.0, size=shape)


BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)),
                 ((2, 3), ()), ((3,), (2, 3))]
UNARY_SHAPES = [(), (3,), (2, 3)]


@pytest.mark.parametrize("sa,sb", BINARY_SHAPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_binary(op, sa, sb):
    if op == "pow":
        check_grads(F.pow, pos(*sa), rand(*sb))
    elif op == "div":
        check_grads(F.div, rand(*sa), pos(*sb))
    else:
        check_grads(getattr(F, op), rand(*sa), rand(*sb))


@pytest.mark.parametrize("shape", UNARY_SHAPES)
@pytest.mark.parametrize("op", ["neg", "exp", "tanh", "sigmoid", "softplus"])
def test_unary(op, shape):
    check_grads(getattr(F, op), rand(*shape))


@pytest.mark.parametrize("shape", UNARY_SHAPES)
def test_unary_positive_domain(shape):
    check_grads(F.log, pos(*shape))
    check_grads(F.sqrt, pos(*shape))
    check_grads(lambda x: x ** 3.0, rand(*shape))
    check_grads(lambda x: x ** -0.5, pos(*shape))
    check_grads(lambda x: 2.0 ** x, rand(*shape))


@pytest.mark.parametrize("shape", UNARY_SHAPES)
def test_relu_and_gelu(shape):
    check_grads(F.relu, rand(*shape, low=0.1))
    check_grads(F.gelu, rand(*shape))
    check_grads(lambda x: F.gelu(x, approximate="tanh"), rand(*shape))


def test_softplus_threshold_and_beta():
    x = np.array([-30.0, -1.0, 0.3, 5.3, 25.0])  # beta x = 10 would sit on the threshold
    check_grads(F.softplus, x)
    check_grads(lambda t: F.softplus(t, beta=2.0, threshold=10.0), x)


def test_scalar_constants_on_both_sides():
    check_grads(lambda x: 3.0 - x * 2.0 + 1.0 / x, pos(2, 3))
    check_grads(lambda x: (x + np.ones(3)) * np.arange(3.0), rand(2, 3))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reductions(op, axis, keepdims):
    check_grads(lambda x: getattr(F, op)(x, axis, keepdims), rand(2, 3, 2))


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reductions_vector_and_scalar(op):
    check_grads(lambda x: getattr(F, op)(x), rand(4))
    check_grads(lambda x: getattr(F, op)(x), rand())


def test_max_ties_split_the_gradient():
    check_grads(lambda x: F.max(x * 0.0 + np.array([1.0, 3.0, 3.0])), rand(3))


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_family(op, axis):
    check_grads(lambda x: getattr(F, op)(x, axis), rand(3, 4))
    check_grads(lambda x: getattr(F, op)(x, axis), rand(4) if axis == 0 else rand(2, 2, 3))


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3, 4)), ((3,), (3, 4)),
                                   ((2, 3), (3,)), ((2, 2, 3), (2, 3, 4)), ((2, 2, 3), (3, 4)),
                                   ((3, 2), (2, 2, 3))])
def test_matmul(sa, sb):
    check_grads(F.matmul, rand(*sa), rand(*sb))


@pytest.mark.parametrize("xshape", [(3,), (4, 3), (2, 2, 3)])
def test_linear(xshape):
    check_grads(F.linear, rand(*xshape), rand(2, 3), rand(2))
    check_grads(F.linear, rand(*xshape), rand(2, 3))


def test_shape_ops():
    check_grads(lambda x: F.reshape(x, (3, 2)) * np.arange(6.0).reshape(3, 2), rand(2, 3))
    check_grads(lambda x: F.transpose(x, (2, 0, 1)), rand(2, 3, 2))
    check_grads(lambda x: x.T, rand(2, 3))
    check_grads(lambda x: x[1], rand(3, 2))
    check_grads(lambda x: x[:, 1:], rand(3, 3))
    check_grads(lambda x: x[None, ..., ::2], rand(2, 4))
    check_grads(lambda x: x[np.array([0, 2, 0])], rand(3, 2))          # repeated index
    check_grads(lambda x: x[np.array([0, 1]), np.array([1, 1])], rand(2, 3))
    check_grads(lambda x: x[x.data > 0], rand(4, 3))                     # boolean mask


def test_concat_and_stack():
    check_grads(lambda a, b: F.concat([a, b, a], axis=0), rand(2, 3), rand(1, 3))
    check_grads(lambda a, b: F.concat([a, b], axis=-1), rand(2, 3), rand(2, 1))
    check_grads(lambda a, b: F.stack([a, b, a], axis=1), rand(2, 3), rand(2, 3))
    check_grads(lambda a, b: F.stack([a, b]), rand(), rand())


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(smoothing, reduction):
    target = np.array([0, 3, 1, 3, 2])
    check_grads(lambda z: F.cross_entropy(z, target, label_smoothing=smoothing,
                                          reduction=reduction), rand(5, 4))


def test_cross_entropy_ignore_index():
    target = np.array([0, -100, 1, 2])
    check_grads(lambda z: F.cross_entropy(z, target), rand(4, 3))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse(reduction):
    check_grads(lambda p, t: F.mse(p, t, reduction=reduction), rand(2, 3), rand(2, 3))
    check_grads(lambda p: F.mse(p, np.ones(4), reduction=reduction), rand(4))


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), ((1, 2), (0, 1))])
def test_conv2d(stride, padding):
    check_grads(lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding),
                rand(2, 2, 5, 4), rand(3, 2, 3, 2), rand(3))
    check_grads(lambda x, w: F.conv2d(x, w, stride=stride, padding=padding),
                rand(1, 1, 4, 4), rand(2, 1, 2, 2))


@pytest.mark.parametrize("kernel,stride,padding", [(2, None, 0), (3, 1, 1), ((2, 3), 2, 0)])
def test_pooling(kernel, stride, padding):
    x = RNG.permutation(2 * 2 * 5 * 6).reshape(2, 2, 5, 6) / 10.0  # distinct: no max ties
    check_grads(lambda t: F.max_pool2d(t, kernel, stride, padding), x)
    check_grads(lambda t: F.avg_pool2d(t, kernel, stride, padding), rand(2, 2, 5, 6))


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2, 2)])
def test_batch_norm_training(shape):
    check_grads(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                rand(*shape), rand(3), rand(3))
    check_grads(lambda x: F.batch_norm(x, training=True), rand(*shape))


def test_batch_norm_eval():
    from autograd import Tensor
    rm = Tensor(np.array([0.1, -0.2, 0.3]), fmt="fp64")
    rv = Tensor(np.array([1.5, 0.5, 2.0]), fmt="fp64")
    check_grads(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=False),
                rand(4, 3, 2, 2), rand(3), rand(3))


@pytest.mark.parametrize("ns", [(4,), (3, 4)])
def test_layer_norm(ns):
    check_grads(lambda x, w, b: F.layer_norm(x, ns, w, b), rand(2, 3, 4), rand(*ns), rand(*ns))
    check_grads(lambda x: F.layer_norm(x, ns), rand(2, 3, 4))


def test_embedding_with_repeated_rows():
    idx = np.array([[0, 2, 0], [3, 2, 2]])
    scale = rand(2, 3, 2)
    check_grads(lambda w: F.embedding(idx, w) * scale, rand(4, 2))


def test_dropout_seeded():
    check_grads(lambda x: F.dropout(x, 0.3, training=True, seed=7), rand(4, 5))


def test_composite_graph_reuses_nodes():
    def f(x, w):
        h = F.tanh(F.linear(x, w))
        return F.sum(h * h + F.sigmoid(h) * x[:, :2], axis=1)
    check_grads(f, rand(3, 4), rand(2, 4))


def test_check_grads_detects_a_wrong_vjp():
    from autograd._tensor import make

    def bad_square(x):
        # value x^2 but a VJP of 3x instead of 2x
        return make(x.data ** 2, x.fmt, (x,), lambda g: (3.0 * g * x.data,), "bad")
    with pytest.raises(AssertionError, match="central difference"):
        check_grads(bad_square, rand(3))
