"""Elementwise ops and their VJPs: add sub mul div neg pow exp log sqrt tanh sigmoid relu gelu
softplus, and cast (change of storage format).

How each kernel is rounded (forward and VJP alike):
- + - * / and sqrt are single correctly rounded operations in the op's format (_backend.arith);
- neg and relu are exact (their results are inputs' values or zero), and so are their VJPs;
- every other kernel (transcendentals, and VJPs that combine several operations, such as
  tanh's g * (1 - y^2)) is evaluated in float64 from the stored inputs and rounded once to the
  output's format: the "compute in a wider type, round on store" contract of GPU kernels.  It is
  correctly rounded except when the exact value lies within a few float64 ulps of a rounding
  boundary of the target format (float64 libm results are not correctly rounded themselves).
A VJP reads the tensors as they were stored (e.g. tanh's fp16 output), as a real backward does.

Attaches to Tensor: + - * / ** (and their reflected forms), unary -, ``to`` (cast), ``exp``,
``log``, ``sqrt``, ``tanh``, ``sigmoid``, ``relu``, ``gelu``, ``softplus``.

Imports numpy, math and the engine's own modules only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _backend as B
from ..policy import current_policy
from .._tensor import Tensor, as_tensor, make, reflected, unbroadcast

__all__ = [
    "add",
    "cast",
    "div",
    "exp",
    "gelu",
    "log",
    "mul",
    "neg",
    "pow",
    "relu",
    "sigmoid",
    "softplus",
    "sqrt",
    "sub",
    "tanh",
]


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _pair(a, b) -> tuple[Tensor, Tensor]:
    if isinstance(a, Tensor):
        return a, as_tensor(b, like=a)
    if isinstance(b, Tensor):
        return as_tensor(a, like=b), b
    raise TypeError(f"expected at least one Tensor operand, got {type(a).__name__} and "
                    f"{type(b).__name__}")


def _tensor(x, op) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


# ----- arithmetic ------------------------------------------------------------------------------
def add(a, b) -> Tensor:
    a, b = _pair(a, b)
    pol = current_policy()
    fmt = pol.op_format("add", a.fmt, b.fmt)
    out = B.arith("add", a.data, b.data, fmt, pol)
    sa, sb = a.shape, b.shape

    def vjp(g):
        return (unbroadcast(g, sa) if a.requires_grad else None,
                unbroadcast(g, sb) if b.requires_grad else None)
    return make(out, fmt, (a, b), vjp, "add", (sa == out.shape, sb == out.shape))


def sub(a, b) -> Tensor:
    a, b = _pair(a, b)
    pol = current_policy()
    fmt = pol.op_format("sub", a.fmt, b.fmt)
    out = B.arith("sub", a.data, b.data, fmt, pol)
    sa, sb = a.shape, b.shape

    def vjp(g):
        return (unbroadcast(g, sa) if a.requires_grad else None,
                unbroadcast(-g, sb) if b.requires_grad else None)
    return make(out, fmt, (a, b), vjp, "sub", (sa == out.shape, sb == out.shape))


def _times(g, other, shape, gfmt, pol):
    """g * other reduced to ``shape``: one correctly rounded product when nothing is summed,
    else exact float64 products summed in float64 (the engine rounds once)."""
    if g.shape == shape and np.broadcast_shapes(shape, other.shape) == shape:
        return B.arith("mul", g, other, gfmt, pol)
    return unbroadcast(_f(g) * _f(other), shape)


def mul(a, b) -> Tensor:
    a, b = _pair(a, b)
    pol = current_policy()
    fmt = pol.op_format("mul", a.fmt, b.fmt)
    out = B.arith("mul", a.data, b.data, fmt, pol)
    sa, sb, da, db = a.shape, b.shape, a.data, b.data

    def vjp(g):
        return (_times(g, db, sa, pol.grad_fmt_for(a.fmt), pol) if a.requires_grad else None,
                _times(g, da, sb, pol.grad_fmt_for(b.fmt), pol) if b.requires_grad else None)
    return make(out, fmt, (a, b), vjp, "mul")


def div(a, b) -> Tensor:
    a, b = _pair(a, b)
    pol = current_policy()
    fmt = pol.op_format("div", a.fmt, b.fmt)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = B.arith("div", a.data, b.data, fmt, pol)
    sa, sb, da, db = a.shape, b.shape, a.data, b.data

    def vjp(g):
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if a.requires_grad:
                if g.shape == sa and np.broadcast_shapes(sa, db.shape) == sa:
                    ga = B.arith("div", g, db, pol.grad_fmt_for(a.fmt), pol)
                else:
                    ga = unbroadcast(_f(g) / _f(db), sa)
            if b.requires_grad:
                # d(a/b)/db = -a / b^2
                gb = unbroadcast(-_f(g) * _f(da) / (_f(db) * _f(db)), sb)
        return ga, gb
    return make(out, fmt, (a, b), vjp, "div")


def cast(x, fmt) -> Tensor:
    """x stored in another format (torch's .half() / .float()): one rounding in the policy's
    mode (exact when fmt contains x's format); the VJP rounds the gradient back into x's
    gradient format."""
    x = _tensor(x, "cast")
    pol = current_policy()
    fmt = B.get_fmt(fmt)
    if fmt == x.fmt:
        return x
    out = B.to_carrier(x.data, fmt) if B.contains(fmt, x.fmt) else B.round_to(x.data, fmt, pol)
    return make(out, fmt, (x,), lambda g: (g,), "cast")


def neg(a) -> Tensor:
    a = _tensor(a, "neg")
    fmt = current_policy().op_format("neg", a.fmt)
    out = B.to_carrier(-a.data, fmt)  # sign flip: exact in every format
    return make(out, fmt, (a,), lambda g: (-g,), "neg", (True,))


def pow(a, b) -> Tensor:
    """a ** b for Tensor/number combinations.  The gradient with respect to the exponent uses
    log(a) and is defined where a > 0 (0 elsewhere)."""
    pol = current_policy()
    if isinstance(a, Tensor) and not isinstance(b, Tensor):
        c = float(b)  # a constant exponent is a parameter of the op (x ** 2), not rounded
        fmt = pol.op_format("pow", a.fmt)
        da = a.data
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = B.round_to(_f(da) ** c, fmt, pol)

        def vjp(g):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return (_f(g) * c * _f(da) ** (c - 1.0),)
        return make(out, fmt, (a,), vjp, "pow")
    a, b = _pair(a, b)
    fmt = pol.op_format("pow", a.fmt, b.fmt)
    sa, sb, da, db = a.shape, b.shape, a.data, b.data
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = B.round_to(_f(da) ** _f(db), fmt, pol)

    def vjp(g):
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if a.requires_grad:
                ga = unbroadcast(_f(g) * _f(db) * _f(da) ** (_f(db) - 1.0), sa)
            if b.requires_grad:
                x = _f(da)
                logx = np.log(np.where(x > 0, x, 1.0))
                gb = unbroadcast(_f(g) * _f(out) * logx, sb)
        return ga, gb
    return make(out, fmt, (a, b), vjp, "pow")


# ----- unary kernels ---------------------------------------------------------------------------
def _unary(x, op, fwd, grad, **errs):
    """y = round(fwd(x64)); VJP = round(grad(g64, x_stored64, y_stored64))."""
    x = _tensor(x, op)
    pol = current_policy()
    fmt = pol.op_format(op, x.fmt)
    dx = x.data
    with np.errstate(**errs):
        out = B.round_to(fwd(_f(dx)), fmt, pol)

    def vjp(g):
        with np.errstate(**errs):
            return (grad(_f(g), _f(dx), _f(out)),)
    return make(out, fmt, (x,), vjp, op)


def exp(x) -> Tensor:
    return _unary(x, "exp", np.exp, lambda g, x, y: g * y, over="ignore")


def log(x) -> Tensor:
    return _unary(x, "log", np.log, lambda g, x, y: g / x, divide="ignore", invalid="ignore")


def sqrt(x) -> Tensor:
    x = _tensor(x, "sqrt")
    pol = current_policy()
    fmt = pol.op_format("sqrt", x.fmt)
    with np.errstate(invalid="ignore"):
        out = B.sqrt(B.to_carrier(x.data, fmt), fmt, pol)

    def vjp(g):
        with np.errstate(divide="ignore", invalid="ignore"):
            return (0.5 * _f(g) / _f(out),)
    return make(out, fmt, (x,), vjp, "sqrt")


def tanh(x) -> Tensor:
    return _unary(x, "tanh", np.tanh, lambda g, x, y: g * (1.0 - y * y))


def _sigmoid64(x):
    # exp of a non-positive argument only: no overflow for large |x|.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def sigmoid(x) -> Tensor:
    return _unary(x, "sigmoid", _sigmoid64, lambda g, x, y: g * y * (1.0 - y))


def relu(x) -> Tensor:
    x = _tensor(x, "relu")
    fmt = current_policy().op_format("relu", x.fmt)
    dx = x.data
    out = B.to_carrier(np.maximum(dx, 0), fmt)  # exact: each value is x or 0

    def vjp(g):
        keep = dx > 0
        # g * keep is ~10x faster than np.where(keep, g, 0) on random masks; it differs only
        # where g is Inf or NaN (times a dropped 0 gives NaN, not torch's 0): then use where.
        if np.isfinite(g).all():
            return (g * keep,)
        return (np.where(keep, g, 0),)
    return make(out, fmt, (x,), vjp, "relu", (True,))


_erf_obj = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    """libm's erf elementwise (numpy has none), as a float64 array."""
    return np.asarray(_erf_obj(x), dtype=np.float64)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_erf(x):
    # x * Phi(x), Phi the standard normal CDF = (1 + erf(x / sqrt 2)) / 2; math.erf is libm's.
    return 0.5 * x * (1.0 + _erf(x * _INV_SQRT_2))


def _gelu_erf_grad(g, x, y):
    phi = 0.5 * (1.0 + _erf(x * _INV_SQRT_2))
    return g * (phi + x * _INV_SQRT_2PI * np.exp(-0.5 * x * x))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def _gelu_tanh_grad(g, x, y):
    t = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))
    dt = (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * dt)


def gelu(x, approximate: str = "none") -> Tensor:
    """GELU, exact (x * Phi(x), ``approximate="none"``) or the tanh approximation ("tanh"),
    as torch.nn.functional.gelu."""
    if approximate == "none":
        return _unary(x, "gelu", _gelu_erf, _gelu_erf_grad)
    if approximate == "tanh":
        return _unary(x, "gelu", _gelu_tanh, _gelu_tanh_grad)
    raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")


def softplus(x, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, linear where beta x > threshold (as torch)."""
    if beta <= 0:
        raise ValueError(f"softplus beta must be > 0, got {beta}")

    def fwd(x):
        bx = beta * x
        # log1p(exp(-|bx|)) + max(bx, 0) is log(1 + exp(bx)) without overflow.
        soft = (np.log1p(np.exp(-np.abs(bx))) + np.maximum(bx, 0.0)) / beta
        return np.where(bx > threshold, x, soft)

    def grad(g, x, y):
        bx = beta * x
        return np.where(bx > threshold, g, g * _sigmoid64(bx))
    return _unary(x, "softplus", fwd, grad)


# ----- Tensor's operators and methods (attached here: ops import _tensor, never the reverse) -----
Tensor.__add__, Tensor.__radd__ = add, reflected(add)
Tensor.__sub__, Tensor.__rsub__ = sub, reflected(sub)
Tensor.__mul__, Tensor.__rmul__ = mul, reflected(mul)
Tensor.__truediv__, Tensor.__rtruediv__ = div, reflected(div)
Tensor.__pow__, Tensor.__rpow__ = pow, reflected(pow)
Tensor.__neg__ = neg
Tensor.to = cast        # t.to(fmt): this tensor stored in fmt (a differentiable cast)
Tensor.exp, Tensor.log, Tensor.sqrt = exp, log, sqrt
Tensor.tanh, Tensor.sigmoid, Tensor.relu = tanh, sigmoid, relu
Tensor.gelu, Tensor.softplus = gelu, softplus
