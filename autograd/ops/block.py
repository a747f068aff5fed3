"""The GEMMs of the block-scaled training recipes (MXFP8, NVFP4): :func:`block_linear`.

y = x W^T + b with x (M, K), W (N, K).  The module's :class:`~autograd.recipes.BlockGemmState`
quantizes each GEMM's two operands along that GEMM's contraction dimension (fprop: x and W^T
along K; dgrad: dY and W along N; wgrad: dY^T and x along M, NVFP4 after the random Hadamard
transform), see autograd/recipes_block.py.  ``softfloat.mx.gemm`` (ideal-fp32) then computes the
exact sum of the products of elements, each scaled by its two block scales (and NVFP4's tensor
scales), plus the bias in the forward, rounded once to fp32; the forward result is stored in the
activation format (bf16), the gradients are handed to the engine in fp32 and stored once in the
parents' gradient formats; the bias gradient is the float64 sum of dY rounded once, as in
``linear``.  TE quantizes every operand afresh from its high-precision values in each GEMM
(rowwise and columnwise copies), and so does this op.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from .._tensor import OnGrid, Tensor, is_grad_enabled, make
from ..policy import current_policy

__all__ = ["block_linear", "check_recipe_linear"]


def check_recipe_linear(op: str, x, weight, bias, state):
    """The active policy, after checking the arguments of a recipe GEMM ``op`` (fp8_linear,
    block_linear): a recipe policy, the module's state for that recipe, Tensors that fit."""
    pol = current_policy()
    if pol.recipe is None or state is None or state.recipe != pol.recipe:
        raise ValueError(f"{op} needs the active policy's recipe and the module's state for it: "
                         "set the policy on the model (model.set_policy(...))")
    for name, t in (("x", x), ("weight", weight)) + ((("bias", bias),) if bias is not None else ()):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{op}: x {x.shape} and weight {weight.shape} do not fit "
                         "(weight (out, in), x (..., in))")
    return pol


def block_linear(x: Tensor, weight: Tensor, bias: Tensor | None, state) -> Tensor:
    """``linear(x, weight, bias)`` under the active policy's block recipe, with ``state`` (the
    module's BlockGemmState) quantizing the operands and recording statistics while gradients
    are enabled."""
    pol = check_recipe_linear("block_linear", x, weight, bias, state)
    record = is_grad_enabled()
    n_in, n_out = weight.shape[1], weight.shape[0]
    # Values of bf16 (or narrower) grids: their float32 copies are exact.
    x2 = np.asarray(x.data, np.float32).reshape(-1, n_in)
    w = np.asarray(weight.data, np.float32)
    qx, qw = state.fprop(x2, w, pol, record=record)
    c = None if bias is None else np.asarray(bias.data, np.float32)
    out = B.round_to(B.mx_gemm(qx, qw, c=c), pol.act, pol).reshape(x.shape[:-1] + (n_out,))
    sx = x.shape
    parents = (x, weight) if bias is None else (x, weight, bias)

    def vjp(g):
        g2 = np.asarray(g, np.float32).reshape(-1, n_out)
        gx = gw = gb = None
        if x.requires_grad:
            qg, qwc = state.dgrad(g2, w, pol, record=record)
            gx = OnGrid(B.mx_gemm(qg, qwc).reshape(sx), B.F32)
        if weight.requires_grad:
            qgt, qxc = state.wgrad(g2, x2, pol, record=record)
            gw = OnGrid(B.mx_gemm(qgt, qxc), B.F32)
        if bias is not None and bias.requires_grad:
            gf = pol.grad_fmt_for(pol.act)
            gb = OnGrid(B.round_to(np.sum(g2, axis=0, dtype=np.float64), gf, pol), gf)
        return gx, gw, gb
    return make(out, pol.act, parents, vjp, "block_linear")
