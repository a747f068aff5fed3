"""The DFP integer GEMM: VNNI-style int16 pairs into int32 lanes, chains flushed to fp32.

:func:`gemm` validates and plans (chains, exponent blocks, pair packing); the arithmetic is in
_kernels_gemm.py.  The semantics are documented in softfloat/dfp/__init__.py ("The integer
GEMM").  Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from . import _kernels_gemm as KG
from ._tensor import check_dfp, check_int

__all__ = ["gemm", "OVERFLOW_MODES", "plan_chains"]

OVERFLOW_MODES = {"wrap": 0, "saturate": 1}


def _check_operand(t, name, red_axis):
    t = check_dfp(t, name)
    if t.ndim != 2:
        raise ValueError(f"dfp.gemm: {name} must be 2-D, got shape {t.shape}")
    if t.bits > 16:
        raise ValueError(f"dfp.gemm: {name} must be DFP-P with P <= 16 (int16 inputs), got "
                         f"bits={t.bits}; down-convert it first (dfp.down_convert)")
    if t.axis not in (None, red_axis):
        what = "row" if red_axis == 1 else "column"
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
    na = K if block_a is None else block_a
    nb = K if block_b is None else block_b
    cuts = sorted(set(range(0, K, na)) | set(range(0, K, nb)) | {K}) if K else [0]
    chains = []
    for s, e in zip(cuts[:-1], cuts[1:]):
        step = (e - s) if chain_len is None else chain_len
        for cs in range(s, e, step):
            chains.append((cs, min(cs + step, e), cs // na, cs // nb))
    return chains


def _pack(Am, Bm, chains, sa, sb):
    """Pair-packed operands: every chain padded with a zero to an even number of products,
    inputs shifted right by (sa, sb)."""
    idx = []
    cps = [0]
    for cs, ce, _, _ in chains:
        idx.extend(range(cs, ce))
        if (ce - cs) % 2:
            idx.append(-1)
        cps.append(len(idx) // 2)
    idx = np.asarray(idx, dtype=np.int64)
    m, n = Am.shape[0], Bm.shape[1]
    A_pk = np.empty((m, idx.size), dtype=np.int16)
    Bp16 = np.empty((idx.size // 2, 2 * n), dtype=np.int16)
    KG.pack_kernel(Am, Bm, idx, sa, sb, A_pk, Bp16)
    return A_pk.view(np.int32), A_pk, Bp16, np.asarray(cps, dtype=np.int64)


def gemm(A, B, *, chain_len=None, overflow="wrap", input_shift=0, return_stats=False):
    """D = A @ B for DFP operands with VNNI int32 chains and fp32 accumulation.

    Parameters
    ----------
    A : DFPTensor (m, k), P <= 16, exponent per tensor, per row (axis=1) or per block along k
    B : DFPTensor (k, n), P <= 16, exponent per tensor, per column (axis=0) or per block along k
    chain_len : int >= 1 or None; products per int32 chain before the flush to fp32 (None: a
        chain runs to the next exponent-block boundary or the end of k)
    overflow : "wrap" (VPDPWSSD) or "saturate" (VPDPWSSDS)
    input_shift : int 0..15 or (shift_a, shift_b): arithmetic right shift (floor) of the int16
        inputs before multiplying; the exponents grow by the same amount
    return_stats : also return a dict of counters

    Returns
    -------
    float32 array (m, n), and with return_stats a dict: wrap_events, saturation_events,
    overflowed_chains, flushes, chains_per_output, inexact_conversions, max_abs_chain_sum
    """
    A = _check_operand(A, "A", 1)
    B = _check_operand(B, "B", 0)
    (m, K), (K2, n) = A.shape, B.shape
    if K != K2:
        raise ValueError(f"dfp.gemm: inner dimensions differ: A is {A.shape}, B is {B.shape}")
    if chain_len is not None:
        chain_len = check_int(chain_len, "chain_len", 1, 1 << 62)
    if overflow not in OVERFLOW_MODES:
        raise ValueError(f"overflow must be one of {sorted(OVERFLOW_MODES)}, got {overflow!r}")
    if not isinstance(return_stats, (bool, np.bool_)):
        raise TypeError("return_stats must be a bool")
    sa, sb = _shifts(input_shift)
    # Exponents as ea (m, blocks of A) and eb (blocks of B, n): per tensor -> (m, 1) / (1, n);
    # per row / per column they already have that shape (keepdims layout), blocks too.
    ea = A.exponent.astype(np.int64) + sa
    eb = B.exponent.astype(np.int64) + sb
    ea = np.full((m, 1), int(ea)) if A.axis is None else np.ascontiguousarray(ea)
    eb = np.full((1, n), int(eb)) if B.axis is None else np.ascontiguousarray(eb)
    chains = plan_chains(K, block_a=A.block, block_b=B.block, chain_len=chain_len)
    out = np.zeros((m, n), dtype=np.float32)
    stats = np.zeros((1, KG.NSTAT), dtype=np.int64)
    if m and n and chains:
        Ap32, Ap16, Bp16, cps = _pack(A.mantissa, B.mantissa, chains, sa, sb)
        cba = np.asarray([c[2] for c in chains], dtype=np.int64)
        cbb = np.asarray([c[3] for c in chains], dtype=np.int64)
        ntask = -(-m // KG.RB) * -(-n // KG.JT)
        stats = np.zeros((ntask, KG.NSTAT), dtype=np.int64)
        # The overflow test is needed for saturate (it decides which lanes to replay) and for
        # the event counts; a wrapped result never depends on it (arithmetic modulo 2^32).
        check = int(overflow == "saturate" or bool(return_stats))
        KG.gemm_kernel(Ap32, Ap16, Bp16, cps, cba, cbb, ea, eb, OVERFLOW_MODES[overflow], check,
                       np.int32(0), out, stats)
    if not return_stats:
        return out
    ev = int(stats[:, 0].sum())
    info = {
        "wrap_events": ev if overflow == "wrap" else 0,
        "saturation_events": ev if overflow == "saturate" else 0,
        "overflowed_chains": int(stats[:, 1].sum()),
        "flushes": m * n * len(chains),
        "chains_per_output": len(chains),
        "inexact_conversions": int(stats[:, 2].sum()),
        "max_abs_chain_sum": int(stats[:, 3].max()) if stats.size else 0,
    }
    return out, info
