"""conv2d (stride, padding) built on the policy's GEMM through im2col, and max/avg pooling.

conv2d is a Tensor Core op: the input and weight are rounded to the compute format, the image
patches are laid out as rows of a matrix (im2col: (N*OH*OW) x (C*KH*KW)) and multiplied by the
weight matrix (C*KH*KW) x OC with the policy's accumulation, exactly as a Tensor Core implicit
GEMM would.  Backward: dW = dY^T cols and dcols = dY W with the same GEMM; the overlapping
patches of dcols are added back onto the image (col2im) at accumulator precision (float64) and
rounded once into the gradient format.

Pooling: max_pool2d is exact (it selects values); avg_pool2d averages in float64 and rounds once.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import _backend as B
from ..policy import current_policy
from .._tensor import OnGrid, Tensor, make
from .matmul import to_compute

__all__ = ["avg_pool2d", "conv2d", "max_pool2d", "pair"]


def pair(v, name: str, op: str, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints, each >= minimum, as a pair."""
    vals = (v, v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
    try:
        a, b = vals
        ok = all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in (a, b))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    if a < minimum or b < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {v!r}")
    return int(a), int(b)


def _out_size(h, w, k, s, p, op):
    oh = (h + 2 * p[0] - k[0]) // s[0] + 1
    ow = (w + 2 * p[1] - k[1]) // s[1] + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: kernel {k} with padding {p} does not fit the {h}x{w} input")
    return oh, ow


def _windows(xp, k, s, oh, ow):
    """(N, C, OH, OW, KH, KW) view of the patches of the padded input."""
    return sliding_window_view(xp, k, axis=(2, 3))[:, :, ::s[0], ::s[1]][:, :, :oh, :ow]


def _col2im(dwin, shape_p, k, s, oh, ow):
    """Add patch gradients (N, C, OH, OW, KH, KW) back onto the padded image (float64)."""
    dxp = np.zeros(shape_p, dtype=np.float64)
    for i in range(k[0]):
        for j in range(k[1]):
            dxp[:, :, i:i + s[0] * oh:s[0], j:j + s[1] * ow:s[1]] += dwin[:, :, :, :, i, j]
    return dxp


def _crop(dxp, p):
    h, w = dxp.shape[2] - 2 * p[0], dxp.shape[3] - 2 * p[1]
    return dxp[:, :, p[0]:p[0] + h, p[1]:p[1] + w]


def conv2d(x, weight, bias=None, stride=1, padding=0) -> Tensor:
    """2-d cross-correlation as torch.nn.functional.conv2d: x (N, C, H, W), weight
    (OC, C, KH, KW), bias (OC,) or None, zero padding."""
    for name, t in (("x", x), ("weight", weight)) + ((("bias", bias),) if bias is not None else ()):
        if not isinstance(t, Tensor):
            raise TypeError(f"conv2d: {name} must be a Tensor, got {type(t).__name__}")
    if x.ndim != 4 or weight.ndim != 4:
        raise ValueError(f"conv2d: x must be (N, C, H, W) and weight (OC, C, KH, KW); got "
                         f"{x.shape} and {weight.shape}")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"conv2d: x has {x.shape[1]} channels, weight expects {weight.shape[1]}")
    oc = weight.shape[0]
    if bias is not None and bias.shape != (oc,):
        raise ValueError(f"conv2d: bias must have shape ({oc},), got {bias.shape}")
    s = pair(stride, "stride", "conv2d", 1)
    p = pair(padding, "padding", "conv2d", 0)
    k = weight.shape[2:]
    n, c, h, w = x.shape
    oh, ow = _out_size(h, w, k, s, p, "conv2d")
    pol = current_policy()
    cx = to_compute(x.data, x.fmt, pol)
    xp = np.pad(cx, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1]))) if p != (0, 0) else cx
    # Rows ordered (n, oh, ow); columns (c, kh, kw), the order of weight.reshape(OC, -1).
    cols = _windows(xp, k, s, oh, ow).transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)
    cw = to_compute(weight.data, weight.fmt, pol).reshape(oc, -1)
    cb = None if bias is None else to_compute(bias.data, bias.fmt, pol)
    acc = B.tc_matmul(cols, cw.T, pol, c=cb)
    out = B.round_to(acc, pol.act, pol).reshape(n, oh, ow, oc).transpose(0, 3, 1, 2)
    out = np.ascontiguousarray(out)
    shape_p, wshape = xp.shape, weight.shape
    parents = (x, weight) if bias is None else (x, weight, bias)

    def vjp(g):
        g2 = to_compute(np.ascontiguousarray(np.transpose(g, (0, 2, 3, 1))).reshape(-1, oc),
                        pol.grad, pol)
        gf = pol.tc_grad_fmt
        gx = gw = gb = None
        if x.requires_grad:
            dcols = B.tc_matmul(g2, cw, pol).reshape(n, oh, ow, c, k[0], k[1])
            dxp = _col2im(dcols.transpose(0, 3, 1, 2, 4, 5), shape_p, k, s, oh, ow)
            gx = OnGrid(B.round_to(_crop(dxp, p), gf, pol), gf)
        if weight.requires_grad:
            gw = OnGrid(B.round_to(B.tc_matmul(g2.T, cols, pol), gf, pol).reshape(wshape), gf)
        if bias is not None and bias.requires_grad:
            gb = OnGrid(B.round_to(np.sum(g2, axis=0, dtype=np.float64), gf, pol), gf)
        return gx, gw, gb
    return make(out, pol.act, parents, vjp, "conv2d")


def _pool_args(x, kernel_size, stride, padding, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.ndim != 4:
        raise ValueError(f"{op}: x must be (N, C, H, W), got shape {x.shape}")
    k = pair(kernel_size, "kernel_size", op, 1)
    s = k if stride is None else pair(stride, "stride", op, 1)
    p = pair(padding, "padding", op, 0)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel {k}")
    oh, ow = _out_size(x.shape[2], x.shape[3], k, s, p, op)
    return k, s, p, oh, ow


def max_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    """Max over windows (stride defaults to the kernel); ties send the gradient to the first."""
    k, s, p, oh, ow = _pool_args(x, kernel_size, stride, padding, "max_pool2d")
    fmt = current_policy().op_format("max_pool2d", x.fmt)
    pad = ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1]))
    xp = np.pad(x.data, pad, constant_values=-np.inf) if p != (0, 0) else x.data
    win = _windows(xp, k, s, oh, ow).reshape(x.shape[0], x.shape[1], oh, ow, -1)
    arg = np.argmax(win, axis=-1)
    out = B.to_carrier(np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], fmt)
    shape_p = xp.shape
    overlap = s[0] < k[0] or s[1] < k[1]

    def vjp(g):
        dwin = np.zeros(g.shape + (k[0] * k[1],), dtype=np.float64)
        np.put_along_axis(dwin, arg[..., None], np.asarray(g, np.float64)[..., None], axis=-1)
        dxp = _col2im(dwin.reshape(g.shape + k), shape_p, k, s, oh, ow)
        return (_crop(dxp, p),)
    return make(out, fmt, (x,), vjp, "max_pool2d", (not overlap,))


def avg_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    """Mean over windows, zero padding counted in the divisor (torch's count_include_pad)."""
    k, s, p, oh, ow = _pool_args(x, kernel_size, stride, padding, "avg_pool2d")
    pol = current_policy()
    fmt = pol.op_format("avg_pool2d", x.fmt)
    xp = np.pad(x.data, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1]))) if p != (0, 0) else x.data
    area = k[0] * k[1]
    win = _windows(xp, k, s, oh, ow)
    out = B.round_to(np.sum(win, axis=(4, 5), dtype=np.float64) / area, fmt, pol)
    shape_p = xp.shape

    def vjp(g):
        dwin = np.broadcast_to((np.asarray(g, np.float64) / area)[..., None, None], g.shape + k)
        return (_crop(_col2im(dwin, shape_p, k, s, oh, ow), p),)
    return make(out, fmt, (x,), vjp, "avg_pool2d")
