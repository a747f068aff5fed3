"""Float64 central-difference gradient checks (in the style of HIPS autograd's check_grads).

:func:`check_grads` runs a function under the ``fp64`` policy (no rounding anywhere), projects its
output on a random direction v, and compares the engine's gradient of <v, f(x)> with the central
differences (<v, f(x + h e_i)> - <v, f(x - h e_i)>) / 2h for every element of every input.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .policy import use_policy
from ._tensor import Tensor, no_grad

__all__ = ["check_grads", "numerical_grads"]


def _project(fn, arrays, v):
    with no_grad():
        out = fn(*[Tensor(a, fmt="fp64") for a in arrays])
    return float(np.sum(v * out.data))


def numerical_grads(fn, arrays, v, *, h: float = 1e-6) -> list[np.ndarray]:
    """Central differences of <v, fn(*arrays)> with respect to each array (float64)."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            trial = [x.copy() for x in arrays]
            trial[k][i] = a[i] + h
            up = _project(fn, trial, v)
            trial[k][i] = a[i] - h
            down = _project(fn, trial, v)
            g[i] = (up - down) / (2 * h)
        grads.append(g)
    return grads


def check_grads(fn, *inputs, h: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7,
                seed: int = 0) -> float:
    """Assert that the engine's VJP of ``fn`` matches central differences at ``inputs``.

    fn takes Tensors (one per input array) and returns a Tensor.  Returns the largest absolute
    difference found; raises AssertionError naming the input and element when one exceeds
    atol + rtol * |numerical|.
    """
    if not inputs:
        raise ValueError("check_grads: give at least one input array")
    arrays = [np.array(x, dtype=np.float64) for x in inputs]
    with use_policy("fp64"):
        xs = [Tensor(a, fmt="fp64", requires_grad=True) for a in arrays]
        out = fn(*xs)
        if not isinstance(out, Tensor):
            raise TypeError(f"check_grads: fn must return a Tensor, got {type(out).__name__}")
        v = np.random.default_rng(seed).standard_normal(out.shape)
        out.backward(v)
        numeric = numerical_grads(fn, arrays, v, h=h)
    worst = 0.0
    for k, (x, num) in enumerate(zip(xs, numeric)):
        ana = np.zeros_like(num) if x.grad is None else x.grad
        err = np.abs(ana - num)
        worst = max(worst, float(err.max(initial=0.0)))
        bad = err > atol + rtol * np.abs(num)
        if bad.any():
            i = np.unravel_index(np.argmax(np.where(bad, err, -1)), err.shape)
            raise AssertionError(
                f"check_grads: input {k} element {tuple(int(j) for j in i)}: engine "
                f"{ana[i]!r}, central difference {num[i]!r} (|diff| {err[i]:.3g}); "
                f"{int(bad.sum())} of {bad.size} elements out of tolerance")
    return worst
