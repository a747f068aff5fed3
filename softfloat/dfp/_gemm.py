"""The DFP integer GEMM: VNNI-style int16 pairs into int32 lanes, chains flushed to fp32.

:func:`gemm` validates, broadcasts batches (one 2-D GEMM per matrix) and plans (chains, exponent
blocks, pair packing, cached per shape); the arithmetic is in _kernels_gemm.py.  The semantics
are documented in softfloat/dfp/__init__.py ("The integer GEMM").  Imports numpy and softfloat
only.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from . import _kernels_gemm as KG
from ._tensor import check_dfp, check_int

__all__ = ["gemm", "OVERFLOW_MODES", "plan_chains"]

OVERFLOW_MODES = {"wrap": 0, "saturate": 1}


def _check_operand(t, name, red):
    """A DFP operand of at least 2 dims whose exponents are shared along the reduction axis
    (``red`` = -1 for A, -2 for B) or not at all."""
    t = check_dfp(t, name)
    if t.ndim < 2:
        raise ValueError(f"dfp.gemm: {name} must have at least 2 dimensions (a matrix, or a "
                         f"batch of matrices in the last two), got shape {t.shape}")
    if t.bits > 16:
        raise ValueError(f"dfp.gemm: {name} must be DFP-P with P <= 16 (int16 inputs), got "
                         f"bits={t.bits}; down-convert it first (dfp.down_convert)")
    red_axis = t.ndim + red
    if t.axis not in (None, red_axis):
        what = "row" if red == -1 else "column"
        raise ValueError(
            f"dfp.gemm: {name} shares its exponent along axis {t.axis}, which is not the "
            f"reduction axis; accepted layouts for {name}: per tensor (axis=None), per {what} "
            f"(axis={red_axis}) or blocks along the reduction axis (axis={red_axis}, block=N)")
    return t


def _shifts(input_shift):
    if isinstance(input_shift, tuple):
        if len(input_shift) != 2:
            raise ValueError("input_shift must be an int or a pair (shift_a, shift_b)")
        sa, sb = input_shift
    else:
        sa = sb = input_shift
    return check_int(sa, "input_shift", 0, 15), check_int(sb, "input_shift", 0, 15)


def plan_chains(K, *, block_a=None, block_b=None, chain_len=None):
    """The int32 chains shared by every output: a list of (k_start, k_end, a_block, b_block).

    The reduction range is first cut at every exponent-block boundary of A and of B (multiples
    of block_a and block_b; None = no blocks), so no chain mixes two exponent pairs; each piece
    is then cut into chains of chain_len products (None: the whole piece is one chain).
    """
    return list(_plan(K, block_a, block_b, chain_len).chains)


class _Plan(NamedTuple):
    chains: tuple       # (k_start, k_end, a_block, b_block) per chain
    idx: np.ndarray     # k of every packed position (-1: the zero pad of an odd chain)
    cps: np.ndarray     # chain c covers pairs cps[c] .. cps[c+1]-1
    cba: np.ndarray     # exponent block of A of chain c
    cbb: np.ndarray     # exponent block of B of chain c
    plain: bool         # idx is 0..K-1 (no pads): A's rows are already pair packed
    pairs: bool         # every chain is one VNNI pair (chain_len <= 2 and even pieces)


@functools.lru_cache(maxsize=256)
def _plan(K, block_a, block_b, chain_len):
    """The chains and packing indices of a GEMM shape and layout, made once: a training loop
    multiplies the same few shapes thousands of times.  The arrays are only read."""
    na = K if block_a is None else block_a
    nb = K if block_b is None else block_b
    cuts = sorted(set(range(0, K, na)) | set(range(0, K, nb)) | {K}) if K else [0]
    chains = []
    for s, e in zip(cuts[:-1], cuts[1:]):
        step = (e - s) if chain_len is None else chain_len
        for cs in range(s, e, step):
            chains.append((cs, min(cs + step, e), cs // na, cs // nb))
    idx = []
    cps = [0]
    for cs, ce, _, _ in chains:
        idx.extend(range(cs, ce))
        if (ce - cs) % 2:
            idx.append(-1)
        cps.append(len(idx) // 2)
    return _Plan(tuple(chains), np.asarray(idx, dtype=np.int64), np.asarray(cps, dtype=np.int64),
                 np.asarray([c[2] for c in chains], dtype=np.int64),
                 np.asarray([c[3] for c in chains], dtype=np.int64), len(idx) == K,
                 all(b - a == 1 for a, b in zip(cps[:-1], cps[1:])))


def _pack(Am, Bm, plan, sa, sb):
    """Pair-packed operands (numpy: a few copies, no kernel to compile): every chain padded
    with a zero to an even number of products, inputs shifted right by (sa, sb) (>> on int16:
    the arithmetic shift, floor).  Returns (Ap32, Ap16, Bp16): A (m, kq) as int16 and as its
    int32 pairs, Bp16[t, 2j + h] = B[idx[2t + h], j].  A C-contiguous A that needs neither
    pads nor a shift is its own packing (its int16 pairs are the dwords VNNI reads)."""
    if plan.plain and sa == 0:
        Ap16 = Am
    elif plan.plain:
        Ap16 = Am >> sa
    else:
        pad = plan.idx < 0
        Ap16 = np.ascontiguousarray(Am[:, np.where(pad, 0, plan.idx)] >> sa)
        Ap16[:, pad] = 0
    if plan.plain:
        Bs = Bm >> sb if sb else Bm
    else:
        pad = plan.idx < 0
        Bs = Bm[np.where(pad, 0, plan.idx)] >> sb
        Bs[pad] = 0
    kq, n = plan.idx.size, Bm.shape[1]
    Bp16 = np.empty((kq // 2, 2 * n), dtype=np.int16)
    Bp16[:, 0::2] = Bs[0::2]                        # two strided copies: 3x faster than a
    Bp16[:, 1::2] = Bs[1::2]                        # transpose with an inner axis of 2
    return Ap16.view(np.int32), Ap16, Bp16


def gemm(A, B, *, chain_len=None, overflow="wrap", input_shift=0, return_stats=False):
    """D = A @ B for DFP operands with VNNI int32 chains and fp32 accumulation.

    Parameters
    ----------
    A : DFPTensor (..., m, k), P <= 16, exponent per tensor, per row (axis = last) or per
        block along k (axis = last, block=N)
    B : DFPTensor (..., k, n), P <= 16, exponent per tensor, per column (axis = second to
        last) or per block along k
        Leading (batch) dimensions broadcast like numpy.matmul; each matrix of the batch is one
        GEMM with its own rows' / columns' / blocks' exponents (a per-tensor exponent is shared
        by every matrix of the tensor).
    chain_len : int >= 1 or None; products per int32 chain before the flush to fp32 (None: a
        chain runs to the next exponent-block boundary or the end of k)
    overflow : "wrap" (VPDPWSSD) or "saturate" (VPDPWSSDS)
    input_shift : int 0..15 or (shift_a, shift_b): arithmetic right shift (floor) of the int16
        inputs before multiplying; the exponents grow by the same amount
    return_stats : also return a dict of counters (summed over a batch; max_abs_chain_sum its
        maximum)

    Returns
    -------
    float32 array (..., m, n), and with return_stats a dict: wrap_events, saturation_events,
    overflowed_chains, flushes, chains_per_output, inexact_conversions, max_abs_chain_sum
    """
    A = _check_operand(A, "A", -1)
    B = _check_operand(B, "B", -2)
    (m, K), (K2, n) = A.shape[-2:], B.shape[-2:]
    if K != K2:
        raise ValueError(f"dfp.gemm: inner dimensions differ: A is {A.shape}, B is {B.shape}")
    if chain_len is not None:
        chain_len = check_int(chain_len, "chain_len", 1, 1 << 62)
    if overflow not in OVERFLOW_MODES:
        raise ValueError(f"overflow must be one of {sorted(OVERFLOW_MODES)}, got {overflow!r}")
    if not isinstance(return_stats, (bool, np.bool_)):
        raise TypeError("return_stats must be a bool")
    sa, sb = _shifts(input_shift)
    plan = _plan(K, A.block, B.block, chain_len)
    if A.ndim == 2 and B.ndim == 2:
        out, stats = _gemm2(A.mantissa, _exps(A, m, -1), B.mantissa, _exps(B, n, -2), plan,
                            overflow, bool(return_stats), sa, sb)
    else:
        out, stats = _batched(A, B, plan, overflow, bool(return_stats), sa, sb)
    if not return_stats:
        return out
    ev = int(stats[:, 0].sum())
    info = {
        "wrap_events": ev if overflow == "wrap" else 0,
        "saturation_events": ev if overflow == "saturate" else 0,
        "overflowed_chains": int(stats[:, 1].sum()),
        "flushes": out.size * len(plan.chains),
        "chains_per_output": len(plan.chains),
        "inexact_conversions": int(stats[:, 2].sum()),
        "max_abs_chain_sum": int(stats[:, 3].max()),
    }
    return out, info


def _exps(t, size, red):
    """t's exponents as the kernels' 2-D int64 array: A (..., m, blocks of A), B (..., blocks of
    B, n); a per-tensor exponent becomes (m, 1) / (1, n) (size = m or n)."""
    if t.axis is None:
        return np.full((size, 1) if red == -1 else (1, size), int(t.exponent), dtype=np.int64)
    return t.exponent.astype(np.int64)


def _gemm2(Am, ea, Bm, eb, plan, overflow, want_stats, sa, sb):
    """One 2-D GEMM: int16 mantissas Am (m, K), Bm (K, n) with int64 exponents ea (m, nba),
    eb (nbb, n) (before the input shifts); returns (float32 out, stats rows)."""
    m, n = Am.shape[0], Bm.shape[1]
    out = np.zeros((m, n), dtype=np.float32)
    if not (m and n and plan.chains):
        return out, np.zeros((1, KG.NSTAT), dtype=np.int64)
    stats = np.zeros((-(-m // KG.RB) * -(-n // KG.JT), KG.NSTAT), dtype=np.int64)
    if sa or sb:
        ea = ea + sa
        eb = eb + sb
    serial = m * n * Am.shape[1] <= KG.SERIAL_MAX
    Ap32, Ap16, Bp16 = _pack(np.ascontiguousarray(Am), Bm, plan, sa, sb)
    ea = np.ascontiguousarray(ea)
    eb = np.ascontiguousarray(eb)
    if plan.pairs:
        # One VNNI pair per chain (the dfp16 policy's chain_len=2): no lane can overflow.
        (KG.pairs_serial if serial else KG.pairs_kernel)(
            Ap16, Bp16, plan.cps, plan.cba, plan.cbb, ea, eb, int(want_stats), out, stats)
        return out, stats
    # The overflow test is needed for saturate (it decides which lanes to replay) and for
    # the event counts; a wrapped result never depends on it (arithmetic modulo 2^32).
    check = int(overflow == "saturate" or want_stats)
    (KG.gemm_serial if serial else KG.gemm_kernel)(
        Ap32, Ap16, Bp16, plan.cps, plan.cba, plan.cbb, ea, eb, OVERFLOW_MODES[overflow],
        check, np.int32(0), out, stats)
    return out, stats


def _batched(A, B, plan, overflow, want_stats, sa, sb):
    """numpy.matmul's broadcasting over the leading dimensions, one _gemm2 per matrix."""
    (m, _), (_, n) = A.shape[-2:], B.shape[-2:]
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    count = math.prod(batch)

    def flat(arr, lead):
        # (count, ...) view of an array whose leading dims broadcast to ``batch``
        return np.broadcast_to(arr, batch + arr.shape[lead:]).reshape((count,) + arr.shape[lead:])

    am = flat(A.mantissa, A.ndim - 2)
    bm = flat(B.mantissa, B.ndim - 2)
    ea = None if A.axis is None else flat(A.exponent.astype(np.int64), A.ndim - 2)
    eb = None if B.axis is None else flat(B.exponent.astype(np.int64), B.ndim - 2)
    ea0 = _exps(A, m, -1) if A.axis is None else None
    eb0 = _exps(B, n, -2) if B.axis is None else None
    out = np.empty((count, m, n), dtype=np.float32)
    stats = [np.zeros((1, KG.NSTAT), dtype=np.int64)]
    for i in range(count):
        out[i], st = _gemm2(am[i], ea0 if ea is None else ea[i], bm[i],
                            eb0 if eb is None else eb[i], plan, overflow, want_stats, sa, sb)
        stats.append(st)
    return out.reshape(batch + (m, n)), np.concatenate(stats)
