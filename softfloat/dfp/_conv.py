"""Convolution through the DFP integer GEMM: :func:`im2col` and :func:`conv2d` (NCHW).

im2col turns the input patches into the GEMM's B operand (C*kh*kw, N*OH*OW), rows in PyTorch's
weight order (c, ki, kj) so the weights (O, C, kh, kw) reshape to the A operand (O, C*kh*kw).
Zero padding is exact in DFP (the integer 0 in any block), so im2col can run on the integers
of a per-tensor DFP tensor.  Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from ..rng import derive_seed
from ._gemm import gemm
from ._quantize import quantize
from ._tensor import DFPTensor, check_int, parse_rounding, sr_args

__all__ = ["im2col", "conv2d", "conv_output_size"]


def _pair(v, name, lo):
    if isinstance(v, tuple):
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
        return check_int(v[0], name, lo, 1 << 30), check_int(v[1], name, lo, 1 << 30)
    v = check_int(v, name, lo, 1 << 30)
    return v, v


def conv_output_size(h, w, kh, kw, stride, padding):
    """(OH, OW) = ((H + 2 ph - kh) // sh + 1, (W + 2 pw - kw) // sw + 1)."""
    (sh, sw), (ph, pw) = stride, padding
    return (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1


def _im2col_array(x, kh, kw, stride, padding):
    n, c, h, w = x.shape
    (sh, sw), (ph, pw) = stride, padding
    oh, ow = conv_output_size(h, w, kh, kw, stride, padding)
    if oh < 1 or ow < 1:
        raise ValueError(f"im2col: kernel {kh}x{kw} does not fit the padded input "
                         f"{h + 2 * ph}x{w + 2 * pw}")
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    # win[n, c, oh, ow, ki, kj] = xp[n, c, oh*sh + ki, ow*sw + kj]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    cols = win.transpose(1, 4, 5, 0, 2, 3).reshape(c * kh * kw, n * oh * ow)
    return np.ascontiguousarray(cols)


def im2col(x, kh, kw, *, stride=1, padding=0):
    """Patches of an NCHW tensor as a (C*kh*kw, N*OH*OW) matrix.

    Row (c*kh + ki)*kw + kj, column (n*OH + oh)*OW + ow holds x[n, c, oh*sh + ki - ph,
    ow*sw + kj - pw] (0 in the padding).  ``x`` is an ndarray (any dtype) or a per-tensor
    DFPTensor (the result is then a per-tensor DFPTensor with the same exponent and bits).
    """
    kh = check_int(kh, "kh", 1, 1 << 30)
    kw = check_int(kw, "kw", 1, 1 << 30)
    stride = _pair(stride, "stride", 1)
    padding = _pair(padding, "padding", 0)
    if isinstance(x, DFPTensor):
        if x.axis is not None:
            raise ValueError("im2col of a DFPTensor needs a per-tensor exponent (axis=None)")
        if x.ndim != 4:
            raise ValueError(f"im2col: x must be NCHW (4-D), got shape {x.shape}")
        cols = _im2col_array(x.mantissa, kh, kw, stride, padding)
        return DFPTensor(cols, x.exponent, x.bits)
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"im2col: x must be NCHW (4-D), got shape {x.shape}")
    return _im2col_array(x, kh, kw, stride, padding)


def conv2d(x, w, *, stride=1, padding=0, bits=16, mode=None, rounding=None, seed=None,
           weight_exponent="tensor", chain_len=None, overflow="wrap", input_shift=0,
           return_stats=False):
    """2-D convolution (cross-correlation, as PyTorch) computed by the DFP integer GEMM.

    Parameters
    ----------
    x : float array (N, C, H, W) or per-tensor DFPTensor of that shape
    w : float array (O, C, kh, kw) or per-tensor DFPTensor of that shape
    bits, mode, seed : quantization of float inputs, as in quantize (mode default RNE;
        ``rounding=`` its older name; seed: mode SR only, x uses derive_seed(seed, 0), w
        derive_seed(seed, 1))
    weight_exponent : "tensor" (one exponent) or "channel" (one per output channel, the rows of
        the GEMM's A operand) for float weights
    chain_len, overflow, input_shift, return_stats : as in :func:`gemm`

    Returns float32 (N, O, OH, OW) (and the gemm stats dict with return_stats=True).
    """
    if weight_exponent not in ("tensor", "channel"):
        raise ValueError(f"weight_exponent must be 'tensor' or 'channel', got "
                         f"{weight_exponent!r}")
    mode = parse_rounding(mode, rounding, "dfp.conv2d")
    sr_args(mode, seed, None, "dfp.conv2d")
    sx = sw_ = None
    if seed is not None:
        sx, sw_ = derive_seed(seed, 0), derive_seed(seed, 1)
    if not isinstance(x, DFPTensor):
        x = quantize(x, bits, mode, seed=sx, name="x")
    if x.ndim != 4 or x.axis is not None:
        raise ValueError(f"conv2d: x must be a 4-D NCHW tensor with one exponent, got shape "
                         f"{x.shape}, axis={x.axis}")
    if isinstance(w, DFPTensor):
        if w.ndim != 4 or w.axis is not None:
            raise ValueError("conv2d: a DFPTensor w must be 4-D (O, C, kh, kw) and per-tensor; "
                             "pass float weights with weight_exponent='channel' for per-channel")
        o, c, kh, kw = w.shape
        wm = DFPTensor(w.mantissa.reshape(o, c * kh * kw), w.exponent, w.bits)
    else:
        w = np.asarray(w)
        if w.ndim != 4:
            raise ValueError(f"conv2d: w must be (O, C, kh, kw), got shape {w.shape}")
        o, c, kh, kw = w.shape
        wm = quantize(w.reshape(o, c * kh * kw), bits, mode, seed=sw_, name="w",
                      axis=1 if weight_exponent == "channel" else None)
    n, cx, h, wd = x.shape
    if cx != c:
        raise ValueError(f"conv2d: x has {cx} channels but w expects {c}")
    stride = _pair(stride, "stride", 1)
    padding = _pair(padding, "padding", 0)
    cols = im2col(x, kh, kw, stride=stride, padding=padding)
    oh, ow = conv_output_size(h, wd, kh, kw, stride, padding)
    res = gemm(wm, cols, chain_len=chain_len, overflow=overflow, input_shift=input_shift,
               return_stats=return_stats)
    d, stats = res if return_stats else (res, None)
    out = np.ascontiguousarray(d.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))
    return (out, stats) if return_stats else out
