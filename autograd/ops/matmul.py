"""Tensor Core ops: matmul (2-d, batched, 1-d operands as numpy) and linear (x W^T + b).

A Tensor Core op rounds its inputs to the policy's compute format, multiplies and accumulates
with the policy's accumulation (host BLAS, a softfloat.tensorcore model or the DFP-16 GEMM) and
stores the result in the activation format.  Its backward runs the same way: the incoming
gradient is rounded to the compute format, the two GEMMs dA = dC B^T and dB = A^T dC use the same
accumulation, and their results are stored in the gradient format of the compute format (the
backward of the input cast), then in each input's own gradient format.

Conv2d (autograd.ops.conv) reuses :func:`to_compute` and the GEMM through im2col.

Attaches to Tensor: ``@`` (``__matmul__``, ``__rmatmul__``).

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from ..policy import current_policy
from .._tensor import OnGrid, Tensor, as_tensor, make, reflected, unbroadcast
from .shape import reshape

__all__ = ["linear", "matmul", "to_compute"]


def to_compute(data: np.ndarray, fmt, pol) -> np.ndarray:
    """data (stored in fmt) rounded to the policy's compute format (kept as is for DFP-16,
    whose GEMM quantizes its operands itself)."""
    comp = pol.compute
    if comp is None:
        return data
    if B.contains(comp, fmt):
        return B.to_carrier(data, comp)
    return B.round_to(data, comp, pol)


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _reduce_to(g, shape, fmt):
    """g (on fmt's grid) summed over broadcast batch dims: rounded once more by the engine when
    a sum happens, else handed over as already rounded."""
    return OnGrid(g, fmt) if g.shape == shape else unbroadcast(g, shape)


def matmul(a, b) -> Tensor:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError("matmul: expected at least one Tensor operand")
    a = as_tensor(a, like=b if isinstance(b, Tensor) else None)
    b = as_tensor(b, like=a)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must be at least 1-d (use * for scalars)")
    if a.ndim == 1:  # (k,) @ (..., k, n): a row vector, squeezed afterwards, as numpy
        out = matmul(reshape(a, (1, a.shape[0])), b)
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:
        out = matmul(a, reshape(b, (b.shape[0], 1)))
        return reshape(out, out.shape[:-1])
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions do not broadcast: {a.shape} @ {b.shape}") \
            from None
    pol = current_policy()
    ca, cb = to_compute(a.data, a.fmt, pol), to_compute(b.data, b.fmt, pol)
    out = B.round_to(B.tc_matmul(ca, cb, pol), pol.act, pol)
    sa, sb = a.shape, b.shape

    def vjp(g):
        gc = to_compute(g, pol.grad, pol)
        gf = pol.tc_grad_fmt
        ga = gb = None
        if a.requires_grad:
            ga = _reduce_to(B.round_to(B.tc_matmul(gc, _swap(cb), pol), gf, pol), sa, gf)
        if b.requires_grad:
            gb = _reduce_to(B.round_to(B.tc_matmul(_swap(ca), gc, pol), gf, pol), sb, gf)
        return ga, gb
    return make(out, pol.act, (a, b), vjp, "matmul")


def linear(x, weight, bias=None) -> Tensor:
    """x @ weight^T + bias with x (..., in), weight (out, in) as torch, bias (out,) or None.

    The bias enters the GEMM's accumulator (the C of D = A B + C), so the output is rounded once.
    """
    for name, t in (("x", x), ("weight", weight)) + ((("bias", bias),) if bias is not None else ()):
        if not isinstance(t, Tensor):
            raise TypeError(f"linear: {name} must be a Tensor, got {type(t).__name__}")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d (out, in), got shape {weight.shape}")
    if x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: x has {x.shape[-1] if x.ndim else 0} features in its last "
                         f"dimension, weight {weight.shape} expects {weight.shape[1]}")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    pol = current_policy()
    n_in, n_out = weight.shape[1], weight.shape[0]
    cx = to_compute(x.data, x.fmt, pol).reshape(-1, n_in)
    cw = to_compute(weight.data, weight.fmt, pol)
    cbias = None if bias is None else to_compute(bias.data, bias.fmt, pol)
    acc = B.tc_matmul(cx, cw.T, pol, c=cbias)
    out = B.round_to(acc, pol.act, pol).reshape(x.shape[:-1] + (n_out,))
    sx = x.shape
    parents = (x, weight) if bias is None else (x, weight, bias)

    def vjp(g):
        g2 = to_compute(g, pol.grad, pol).reshape(-1, n_out)
        gf = pol.tc_grad_fmt
        gx = gw = gb = None
        if x.requires_grad:
            gx = OnGrid(B.round_to(B.tc_matmul(g2, cw, pol), gf, pol).reshape(sx), gf)
        if weight.requires_grad:
            gw = OnGrid(B.round_to(B.tc_matmul(g2.T, cx, pol), gf, pol), gf)
        if bias is not None and bias.requires_grad:
            gb = OnGrid(B.round_to(np.sum(g2, axis=0, dtype=np.float64), gf, pol), gf)
        return gx, gw, gb
    return make(out, pol.act, parents, vjp, "linear")


# ----- Tensor's operators (attached here: ops import _tensor, never the reverse) -------------
Tensor.__matmul__, Tensor.__rmatmul__ = matmul, reflected(matmul)
