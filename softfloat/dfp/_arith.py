"""The seed's elementwise DFP arithmetic: products, aligned sums, and DFP-32 sums to FP32.

    mul(a, b)          DFP-P x DFP-Q -> DFP-32: i = i_a * i_b (exact), E = E_a + E_b
    add(a, b)          DFP-P + DFP-Q -> DFP-32: align to the larger exponent by an ARITHMETIC
                       right shift (floor) of the other operand, then add exactly
    add_to_fp32(a, b)  DFP-32 + DFP-32 -> FP32: the exact sum rounded once (RNE) to fp32

Operands have the same shape and either the same layout or one of them is per-tensor (its
single exponent is broadcast); the result takes the finer layout.  Imports numpy and softfloat.
"""

from __future__ import annotations

import numpy as np

from .._driver import launch
from . import _kernels_quant as KQ
from ._tensor import (DFPTensor, block_absmax, check_dfp, expand_blocks, exponent_shape,
                      layout_geometry)

__all__ = ["mul", "add", "add_to_fp32"]


def _result_layout(a: DFPTensor, b: DFPTensor, op):
    """(axis, block, ea, eb): the common layout and both exponents as (outer, nb, inner)."""
    if a.shape != b.shape:
        raise ValueError(f"dfp.{op}: shapes differ: {a.shape} and {b.shape}")
    if a.layout == b.layout:
        axis, block = a.layout
    elif a.axis is None:
        axis, block = b.layout
    elif b.axis is None:
        axis, block = a.layout
    else:
        raise ValueError(f"dfp.{op}: exponent layouts differ (a: axis={a.axis}, block={a.block};"
                         f" b: axis={b.axis}, block={b.block}); use the same layout, or make "
                         "one operand per-tensor")
    outer, _, inner, _, nb = layout_geometry(a.shape, axis, block)

    def blocks(t):
        if t.axis is None:
            return np.full((outer, nb, inner), int(t.exponent), dtype=np.int64)
        return t.block_exponents()
    return axis, block, blocks(a), blocks(b)


def _exp_shape(shape, axis, block, per_block):
    return per_block.reshape(exponent_shape(shape, axis, block))


def mul(a, b):
    """DFP x DFP -> DFP-32: mantissas multiplied exactly (int32), exponents added per block.

    Needs a.bits + b.bits <= 32 (DFP-16 x DFP-16: |i| <= (2^15 - 1)^2 < 2^30).
    """
    a, b = check_dfp(a, "a"), check_dfp(b, "b")
    if a.bits + b.bits > 32:
        raise ValueError(f"dfp.mul: a.bits + b.bits must be at most 32 so the product fits in "
                         f"int32, got {a.bits} + {b.bits}")
    axis, block, ea, eb = _result_layout(a, b, "mul")
    m = a.mantissa.astype(np.int32) * b.mantissa.astype(np.int32)
    return DFPTensor(m, _exp_shape(a.shape, axis, block, ea + eb), 32, axis=axis, block=block)


def add(a, b):
    """DFP + DFP -> DFP-32 with the seed's alignment (per block):

        E = max(E_a, E_b);  i = (i_a >> (E - E_a)) + (i_b >> (E - E_b))

    where >> is the ARITHMETIC right shift (floor: toward -inf, so the operand with the smaller
    exponent is rounded down, e.g. -1 >> 1 = -1).  Exception, for exactness: a block whose
    mantissas are all zero takes no part in choosing E (its exponent is arbitrary, 0 by the
    quantize convention); if both blocks are zero E = 0.  Needs a.bits, b.bits <= 31.
    """
    a, b = check_dfp(a, "a"), check_dfp(b, "b")
    if max(a.bits, b.bits) > 31:
        raise ValueError("dfp.add: operands must have bits <= 31 so the aligned sum fits in "
                         "int32; sum DFP-32 tensors with dfp.add_to_fp32")
    axis, block, ea, eb = _result_layout(a, b, "add")
    za = block_absmax(a.mantissa, a.shape, axis, block) == 0
    zb = block_absmax(b.mantissa, b.shape, axis, block) == 0
    e = np.where(za, np.where(zb, 0, eb), np.where(zb, ea, np.maximum(ea, eb)))
    # Shift counts >= 63 are capped: an int32 shifted right by 31 or more is already 0 or -1.
    sa = np.minimum(expand_blocks(e - ea, a.shape, axis, block), 63)
    sb = np.minimum(expand_blocks(e - eb, b.shape, axis, block), 63)
    sa = np.where(expand_blocks(za, a.shape, axis, block), 0, sa)
    sb = np.where(expand_blocks(zb, b.shape, axis, block), 0, sb)
    m = (np.right_shift(a.mantissa.astype(np.int64), sa)
         + np.right_shift(b.mantissa.astype(np.int64), sb))
    return DFPTensor(m.astype(np.int32), _exp_shape(a.shape, axis, block, e), 32, axis=axis,
                     block=block)


def add_to_fp32(a, b):
    """DFP-32 + DFP-32 -> FP32: fp32(i_a * 2^E_a + i_b * 2^E_b), the exact sum rounded ONCE to
    nearest-even (with fp32 subnormals; Inf on overflow).  Returns a float32 array."""
    a, b = check_dfp(a, "a"), check_dfp(b, "b")
    _result_layout(a, b, "add_to_fp32")
    ia = a.mantissa.astype(np.int64).reshape(-1)
    ib = b.mantissa.astype(np.int64).reshape(-1)
    ea = a.expanded_exponent().reshape(-1)
    eb = b.expanded_exponent().reshape(-1)
    out = np.empty(ia.size, dtype=np.float32)
    launch(KQ.SUM_TO_F32, (), ia.size, ia, ea, ib, eb, out)
    return out.reshape(a.shape)
