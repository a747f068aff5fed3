"""mx.gemm: block-scaled matrix product of two BlockTensors (semantics in softfloat/mx/__init__).

The ideal model runs softfloat.tensorcore's exact "one rounding" GEMM (its ideal-fp32 path:
a float64 matmul, exactness certificates and an exact fallback) on the dequantized operands:
every scaled element a * 2^E (MX: at most 7 significant bits) or a * s (NVFP4: 2 + 4 bits) is a
float32 value, so it takes them as the inputs of a format with float32's exponent range and
their true precision (_in_format: that precision is what makes its exactness certificate work).
NVFP4's tensor scales t_a, t_b (24-bit float32 values) would make 30-bit operands; each is split
into a high part (its top 12 significant bits) and the rest (at most 12 bits), and the four
products of parts are laid side by side along k:
    A' = [A t_a1, A t_a1, A t_a2, A t_a2],   B' = [B t_b1; B t_b2; B t_b1; B t_b2]
so that A' @ B' = A @ B * t_a t_b exactly, with operands of at most 6 + 12 bits; the one
rounding then happens on the exact sum, as the model says.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import math

import numpy as np

from ..formats import Format, get_format
from ..rounding import round as _round
from . import _kernels_gemm as KG
from ._tensor import BlockTensor

__all__ = ["gemm", "GEMM_MODELS"]

GEMM_MODELS = ("ideal-fp32", "blocked")


def _kblock(q: BlockTensor, which: str) -> int:
    """The operand's block length along k, checking that it is blocked along k: A (m x k) by
    1-D blocks along axis 1 or 2-D tiles, B (k x n) along axis 0 or 2-D tiles."""
    if not isinstance(q, BlockTensor):
        raise TypeError(f"{which} must be a BlockTensor (from mx.quantize), got "
                        f"{type(q).__name__}")
    if len(q.shape) != 2:
        raise ValueError(f"{which} must be 2-D, got shape {q.shape}")
    kaxis = 1 if which == "qa" else 0
    if len(q.block) == 2:
        return q.block[kaxis]
    if q.axis != (kaxis,):
        raise ValueError(f"{which} must be blocked along k (axis={kaxis} for "
                         f"{'A (m x k)' if kaxis else 'B (k x n)'}, or 2-D blocks); it is "
                         f"blocked along axis {q.axis[0]}")
    return q.block[0]


def _scales_along_k(q: BlockTensor, which: str) -> np.ndarray:
    """Block scales as float64, (m, nkb) for A and (n, nkb) for B (B's transposed)."""
    s = q.scales.astype(np.float64)
    if which == "qa":
        if len(q.block) == 2:
            s = np.repeat(s, q.block[0], axis=0)[:q.shape[0]]
        return np.ascontiguousarray(s)
    if len(q.block) == 2:
        s = np.repeat(s, q.block[1], axis=1)[:, :q.shape[1]]
    return np.ascontiguousarray(s.T)


def _split12(t: float):
    """t (a float32 value) as parts of at most 12 significant bits each, summing to t."""
    if t is None:
        return [1.0]
    m, e = math.frexp(t)                       # t = m 2^e, 0.5 <= m < 1, 24 bits
    hi = math.ldexp(math.floor(m * 4096.0), e - 12)
    lo = t - hi                                # exact: the low 12 bits
    return [hi] if lo == 0.0 else [hi, lo]


def _c_array(c, m, n, out_fmt):
    if c is None:
        return np.zeros((m, n), dtype=np.float32), None
    arr = np.asarray(c)
    if arr.dtype.kind != "f":
        raise TypeError(f"c must be a float array, got dtype {arr.dtype}")
    c32 = np.broadcast_to(arr, (m, n)).astype(np.float32)
    if not np.array_equal(c32.astype(arr.dtype), np.broadcast_to(arr, (m, n)), equal_nan=True):
        raise ValueError("c must hold float32 values")
    if not np.array_equal(_round(c32, out_fmt), c32, equal_nan=True):
        raise ValueError(f"c must hold values of out_format {out_fmt.name}")
    return np.ascontiguousarray(c32), c32


def _check_out(out_format):
    fmt = get_format(out_format)
    if fmt.carrier_dtype != np.float32 or fmt.inf_nan != "ieee" or not fmt.subnormals:
        raise ValueError(f"out_format must be an IEEE-style format with subnormals carried in "
                         f"float32 (fp32, fp16, bf16, ...), got {fmt.name}")
    return fmt


def gemm(qa, qb, *, model="ideal-fp32", out_format="fp32", c=None):
    """D = A @ B (+ C) for block tensors qa (m x k, blocked along k) and qb (k x n, blocked
    along k), both MX or both NVFP4.  Returns an m x n float32 array of out_format values.

    model "ideal-fp32": the exact sum of the scaled products (and c) rounded once (RNE) to
    out_format.  model "blocked": per K-block an exact scaled block sum rounded to fp32, added
    in k order into an fp32 accumulator started at c (RNE), the result rounded to out_format;
    needs equal k-block lengths.  See softfloat/mx/__init__.py for the definitions."""
    for name, q in (("qa", qa), ("qb", qb)):
        if getattr(q, "lazy", False):
            raise TypeError(f"mx.gemm: {name} is a lazy BlockTensor (mx.quantize of a dask "
                            f"array); pass {name}.compute()")
    kba = _kblock(qa, "qa")
    kbb = _kblock(qb, "qb")
    m, k = qa.shape
    k2, n = qb.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: qa is {qa.shape}, qb is {qb.shape}")
    if (qa.format.scale == "ue4m3") != (qb.format.scale == "ue4m3"):
        raise ValueError("qa and qb must both be MX formats (E8M0 scales) or both nvfp4")
    if model not in GEMM_MODELS:
        raise ValueError(f"unknown model {model!r}; accepted: {', '.join(GEMM_MODELS)}")
    out_fmt = _check_out(out_format)
    c32, c_given = _c_array(c, m, n, out_fmt)
    if model == "blocked":
        if kba != kbb:
            raise ValueError(f"the blocked model needs equal k-block lengths; qa has {kba}, "
                             f"qb has {kbb}")
        return _blocked(qa, qb, kba, c32, out_fmt)
    return _ideal(qa, qb, c_given, out_fmt)


def _precision(q: BlockTensor, tparts: int) -> int:
    """Significant bits of the operand's scaled values: the element's (MXINT8's |k| <= 127: 7),
    plus E4M3's 4 for NVFP4's block scale, plus 12 per tensor-scale part."""
    p = q.format.man_bits + 1
    if q.format.scale == "ue4m3":
        p += 4
    return p + (12 if tparts > 1 or q.tensor_scale is not None else 0)


def _in_format(p: int, offgrid: int):
    """The input format handed to tensorcore: 8 exponent bits (float32's range) and p - 1
    fraction bits -- the operands' true precision, which lets its exactness certificate prove
    most dot products exact (with fp32's 24 bits it cannot, and MX data put many exact sums on
    fp32 rounding ties, which then need its slow exact path).  Values below 2^-126 must also
    lie on that format's subnormal grid (multiples of 2^(-126 - (p - 1))); where ``offgrid``
    of them do not (KG.scaled_operand's count), fp32 itself (always valid, slower)."""
    return Format(f"mx-operands-p{p}", 8, p - 1) if offgrid == 0 else get_format("fp32")


def _scaled(qa, qb, kba, kbb, parts, grid, dtype=np.float32):
    """(A, B, inexact, offgrid, nonfinite): the scaled operands rounded to float32 (C-contiguous,
    m x k' and k' x n, of ``dtype``: float32, or float64 holding the same values), the (x, y)
    tensor-scale parts of ``parts`` laid side by side along k (A t_x next to A t_x', B t_y
    below B t_y'), by KG.scaled_operand, whose counts are summed.  A and B are tensorcore's
    per-thread scratch arrays (valid until the next call on this thread): fresh 8 MB arrays
    cost their page faults, about 1.5 ms each at n = 1024."""
    from ..tensorcore._prep import scratch
    m, k = qa.shape
    n = qb.shape[1]
    A32 = scratch("mx_a", (m, k * len(parts)), dtype)
    B32 = scratch("mx_b", (k * len(parts), n), dtype)
    ea = np.ascontiguousarray(qa.elements, dtype=np.float32)
    eb = np.ascontiguousarray(qb.elements, dtype=np.float32)
    sa = _scales_along_k(qa, "qa")                            # (m, k-blocks)
    sb = np.ascontiguousarray(_scales_along_k(qb, "qb").T)    # (k-blocks, n)
    counts = np.zeros(3, np.int64)
    for q, (x, y) in enumerate(parts):
        for e, s, kb, rows, f, out in ((ea, sa, kba, False, x, A32), (eb, sb, kbb, True, y, B32)):
            counts += KG.scaled_operand(e, s, kb, rows, float(f), out, q * k, grid)
    return (A32, B32, *(int(c) for c in counts))


def _operands(qa, qb, kba, kbb):
    """(A32, B32, input format) of the ideal model: the dequantized operands as float32
    (C-contiguous m x k' and k' x n, per-thread scratch arrays valid until the next call),
    with NVFP4's tensor scales split into parts of at most 12 bits laid side by side along k
    (module docstring), and the format their values lie in (_in_format).  ValueError where
    float32 does not hold a scaled value."""
    pa = _split12(qa.tensor_scale)
    pb = _split12(qb.tensor_scale)
    p = max(_precision(qa, len(pa)), _precision(qb, len(pb)))
    A32, B32, inexact, offgrid, _ = _scaled(qa, qb, kba, kbb, [(x, y) for x in pa for y in pb],
                                            (1 << max(24 - p, 0)) - 1)
    if inexact:
        raise ValueError("mx.gemm ideal-fp32: a scaled operand leaves float32's range (|v| >= "
                         "2^128 after a ceil/even/rceil scale of inputs above 2^127, or a "
                         "tensor scale pushing values below 2^-149); the exact path takes "
                         "float32-range operands")
    return A32, B32, _in_format(p, offgrid)


#: NVFP4's scaled elements e * s are multiples of 2^-10 (e2m1: of 2^-1; the E4M3 scale: of
#: 2^-9) below 6 * 448 = 2688, so their products are integer multiples of 2^-20 below 2688^2:
#: a float64 sum of up to NV_K_EXACT of them is exact in any order (partial sums below
#: 2^53 units of 2^-20: NV_K_EXACT * 2688^2 < 2^33).
NV_K_EXACT = 1176


def _ideal_nvfp4(qa, qb, out_fmt):
    """NVFP4 without c: S = sum_k (e_a s_a)(e_b s_b) is exact from one float64 matmul per slab
    of NV_K_EXACT along k (NV_K_EXACT above), slabs added exactly as int64 multiples of 2^-20;
    the result S * t_a t_b is then rounded once (scale_exact's round-to-odd product, then one
    rounding to out_format).  Returns None where that does not apply (a sum beyond 2^53 units,
    NaN scales): the caller takes the general route."""
    from ..tensorcore._prep import scratch
    # e * s: at most 2 + 4 significant bits between 2^-10 and 2688, exact in float32, written
    # as float64 (the matmul's type)
    A, B, inexact, _, nonfinite = _scaled(qa, qb, _kblock(qa, "qa"), _kblock(qb, "qb"),
                                          [(1.0, 1.0)], 0, np.float64)
    if inexact or nonfinite:
        return None
    k = A.shape[1]
    if k <= NV_K_EXACT:
        S = np.matmul(A, B, out=scratch("mx_s", (A.shape[0], B.shape[1])))
    else:
        units = np.zeros((A.shape[0], B.shape[1]), dtype=np.int64)
        for k0 in range(0, k, NV_K_EXACT):
            part = A[:, k0:k0 + NV_K_EXACT] @ B[k0:k0 + NV_K_EXACT]
            units += np.ldexp(part, 20).astype(np.int64)          # exact integers < 2^53
        if np.abs(units).max(initial=0) >= 1 << 53:
            return None
        S = np.ldexp(units.astype(np.float64), -20)
    T = (1.0 if qa.tensor_scale is None else qa.tensor_scale) * \
        (1.0 if qb.tensor_scale is None else qb.tensor_scale)      # exact: 24 + 24 bits
    KG.scale_exact(S, T, S)                 # (element by element: in place)
    with np.errstate(over="ignore"):
        return (S.astype(np.float32) if out_fmt.name == "fp32"
                else _round(S, out_fmt).astype(np.float32))


def _ideal(qa, qb, c, out_fmt):
    from ..tensorcore import TCModel
    from ..tensorcore import gemm as tc_gemm
    if c is None and qa.format.scale == "ue4m3":
        D = _ideal_nvfp4(qa, qb, out_fmt)
        if D is not None:
            return D
    A32, B32, in_fmt = _operands(qa, qb, _kblock(qa, "qa"), _kblock(qb, "qb"))
    tcm = TCModel("mx-ideal", None, None, "rne", in_fmt, out_fmt)
    return tc_gemm(A32, B32, c, model=tcm)


def block_split(fa, fb, kb):
    """H of the blocked kernel's two accumulators for element formats fa, fb (BlockFormats)
    and k-blocks of kb (module docstring of _kernels_gemm); ValueError when none is exact."""
    lg = math.ceil(math.log2(kb)) if kb > 1 else 0
    qp = (fa.emin - fa.man_bits) + (fb.emin - fb.man_bits)
    H = 53 - lg + qp
    pmax = math.log2(fa.max * fb.max)
    if math.ceil(lg + pmax) - (H - (fa.man_bits + 1) - (fb.man_bits + 1) + 1) > 53:
        raise ValueError(f"k-blocks of {kb} are too long for the blocked model's exact block "
                         f"sums of {fa.name} x {fb.name} products")
    return math.ldexp(1.0, H)


def _blocked(qa, qb, kb, c32, out_fmt):
    nv = qa.format.scale == "ue4m3"
    T = (1.0 if qa.tensor_scale is None else qa.tensor_scale) * \
        (1.0 if qb.tensor_scale is None else qb.tensor_scale)
    H = block_split(qa.format, qb.format, kb)
    a = np.ascontiguousarray(qa.elements, dtype=np.float32)
    bt = np.ascontiguousarray(qb.elements.T, dtype=np.float32)
    out = np.empty(c32.shape, dtype=np.float32)
    KG.blocked_gemm(a, bt, _scales_along_k(qa, "qa"), _scales_along_k(qb, "qb"), T, c32, kb, H,
                    nv, out)
    if out_fmt.name != "fp32":
        out = _round(out, out_fmt)
    return out
