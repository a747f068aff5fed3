"""The GEMM of an fp8 training recipe: ``fp8_linear`` (x W^T + b on fp8 operands with
per-tensor scales) and :func:`recipe_linear`, the dispatch the modules use.

Forward (TE's fprop): x and W are cast by the module's :class:`~autograd.recipes.GemmState`
(``q = fp8_satfinite(fp32(v * scale))``, e4m3fn), the GEMM multiplies the q's with the policy's
accumulation (ideal-fp32 by default, a hardware model where it takes the format), and the fp32
epilogue computes ``fp32(acc * fp32(sinv_x * sinv_w))``, adds the bias in fp32 and stores the
result in the activation format (bf16): cuBLASLt's D = scale_A scale_B (A B) + bias with
TE's scale_inv pointers, each step one fp32 operation (RNE).
Backward (dgrad, wgrad): the output gradient is cast (e5m2 for HYBRID) with its own scale; dX =
dY W and dW = dY^T X reuse the forward's quantized X and W (TE saves them), each descaled the
same way, handed to the engine in fp32 and stored once in the parents' gradient formats; the
bias gradient is the float64 sum of dY rounded once, as in ``linear``.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from .._tensor import OnGrid, Tensor, is_grad_enabled, make
from ..policy import current_policy
from .matmul import linear

__all__ = ["fp8_linear", "recipe_linear"]


def _descale(acc: np.ndarray, sinv_a, sinv_b, bias=None) -> np.ndarray:
    """The fp32 epilogue: fp32(acc * fp32(sinv_a * sinv_b)) (+ bias, one more fp32 add)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(acc, np.float32) * (np.float32(sinv_a) * np.float32(sinv_b))
        if bias is not None:
            out = out + np.asarray(bias, np.float32)
    return out


def fp8_linear(x: Tensor, weight: Tensor, bias: Tensor | None, state) -> Tensor:
    """``linear(x, weight, bias)`` under the active policy's fp8 recipe, with ``state`` (the
    module's GemmState) giving the scales and recording amaxes while gradients are enabled."""
    pol = current_policy()
    if pol.recipe is None or state is None or state.recipe != pol.recipe:
        raise ValueError("fp8_linear needs the active policy's recipe and the module's state "
                         "for it: set the policy on the model (model.set_policy(...))")
    for name, t in (("x", x), ("weight", weight)) + ((("bias", bias),) if bias is not None else ()):
        if not isinstance(t, Tensor):
            raise TypeError(f"fp8_linear: {name} must be a Tensor, got {type(t).__name__}")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"fp8_linear: x {x.shape} and weight {weight.shape} do not fit "
                         "(weight (out, in), x (..., in))")
    record = is_grad_enabled()
    rec = pol.recipe
    fwd, bwd = rec.forward_format, rec.backward_format
    n_in, n_out = weight.shape[1], weight.shape[0]
    qx, sinv_x = state.cast("input", x.data.reshape(-1, n_in), record=record)
    qw, sinv_w = state.cast("weight", weight.data, record=record)
    acc = B.fp8_gemm(qx, qw.T, fwd, fwd, pol)
    out32 = _descale(acc, sinv_x, sinv_w, None if bias is None else bias.data)
    out = B.round_to(out32, pol.act, pol).reshape(x.shape[:-1] + (n_out,))
    sx = x.shape
    parents = (x, weight) if bias is None else (x, weight, bias)

    def vjp(g):
        g2 = np.asarray(g).reshape(-1, n_out)
        qg, sinv_g = state.cast("grad_output", g2, record=record)
        gx = gw = gb = None
        if x.requires_grad:
            gx = OnGrid(_descale(B.fp8_gemm(qg, qw, bwd, fwd, pol), sinv_g, sinv_w)
                        .reshape(sx), B.F32)
        if weight.requires_grad:
            gw = OnGrid(_descale(B.fp8_gemm(qg.T, qx, bwd, fwd, pol), sinv_g, sinv_x), B.F32)
        if bias is not None and bias.requires_grad:
            gf = pol.grad_fmt_for(pol.act)
            gb = OnGrid(B.round_to(np.sum(g2, axis=0, dtype=np.float64), gf, pol), gf)
        return gx, gw, gb
    return make(out, pol.act, parents, vjp, "fp8_linear")


def recipe_linear(module, x, weight, bias=None) -> Tensor:
    """What a module's GEMM runs: ``fp8_linear`` with the module's recipe state when the active
    policy has an fp8 recipe, else ``linear``."""
    if current_policy().recipe is None:
        return linear(x, weight, bias)
    return fp8_linear(x, weight, bias, module.__dict__.get("_recipe_state"))
