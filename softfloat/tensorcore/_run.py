"""Dispatch of a TCModel to its kernels: ``run_model(model, a, b, c) -> float64 m x n``.

* F finite (the hardware models): the fused register-tile kernel of ``_kernels_fused`` on
  every element, then the scalar ``_kernels.hw_dot`` on the elements whose inputs hold
  Inf/NaN or that came near overflow (see _run_hw).
* F infinite, K infinite (ideal-fp32, ideal-fp16): numpy float64 matmul, the certificates of
  ``_fastideal`` and its Dot2 fallback, then ``_exact.ideal_dot`` on the rest (_run_ideal).
* F infinite, K finite (custom records): ``_exact.exact_gemm``.

Operands arrive as float64 arrays of values already checked (softfloat.tensorcore._inputs).
Imports numpy and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np

from . import _exact as X
from . import _fastideal as FI
from ._models import TCModel
from ._threads import serial_if_small
from ._workspace import scratch


def _acc_params(model: TCModel):
    acc = model.acc_format
    return model.out_frac, acc.emin, acc.emax, model.out_round == "rne"


def _special_elements(a, b, c):
    """(rows, cols) of the elements whose inputs hold Inf or NaN (int64 arrays)."""
    rbad = ~np.isfinite(a).all(axis=1)
    cbad = ~np.isfinite(b).all(axis=0)
    mask = rbad[:, None] | cbad[None, :] | ~np.isfinite(c)
    rows, cols = np.nonzero(mask)
    return rows.astype(np.int64), cols.astype(np.int64)


def run_model(model: TCModel, a: np.ndarray, b: np.ndarray, c, stats=None) -> np.ndarray:
    """D as float32 carriers (every TCModel accumulator fits a float32); c is None for zeros;
    stats: the operand statistics of prepare(..., stats=True) (ideal models only): sum of
    squares and smallest exponent per row of A and per column of B, and B's values in their
    narrowest carrier (see _inputs._pair_with_stats)."""
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n), np.float32)
    if m == 0 or n == 0:
        return out
    if k == 0:
        out[...] = 0.0 if c is None else c          # DOT with no block: d = c
        return out
    f, emin, emax, rne = _acc_params(model)
    if model.frac_bits is None and model.block is None:
        return _run_ideal(model, a, b, c, stats, out, f, emin, emax, rne)
    # Per-thread scratch (softfloat.tensorcore._workspace): fresh multi-MiB arrays cost a page
    # fault per 4 KiB on first touch; both are private to this call.
    if c is None:
        cz = scratch("hw_cz", (m, n))
        cz.fill(0.0)
    else:
        cz = c
    o64 = scratch("hw_o64", (m, n))
    if model.frac_bits is None:
        X.exact_gemm(a, b, cz, o64, int(model.block), f, emin, emax, rne)
    else:
        _run_hw(model, a, b, cz, o64, f, emin, emax, rne)
    out[...] = o64
    return out


def _run_hw(model, a, b, c, out, f, emin, emax, rne):
    """The hardware models: _kernels_fused.fused_gemm on every element, then the scalar
    hw_fix on the elements it marks (Inf/NaN inputs, possible overflow)."""
    from . import _kernels_fused as FZ

    m, k = a.shape
    n = b.shape[1]
    F = int(model.frac_bits)
    K = k if model.block is None else int(model.block)
    if model.block is None and (K + 1) << (F + 2) > 1 << 53:
        raise ValueError(f"model {model.name}: one block of k = {k} products with F = {F} "
                         "exceeds the exact 53-bit fixed-point sum; need (k + 1) * 2^(F + 2) "
                         "<= 2^53")
    kp = -(-k // K) * K                     # zero-pad k to a multiple of K (spec DOT)
    npan = -(-n // FZ.LANES)
    nq = -(-m // FZ.TILE_ROWS)
    emin_in = model.in_format.emin
    args = (K, F, f, emin, emax, rne)
    # Per-block test for subnormal outputs, or the lazy mode of _kernels_fused._tile where
    # products below 2^(emin + F) are rare (a wide accumulator exponent range) and F >= f.
    chk = emin + F > -60 or F < f
    with serial_if_small(m * n * kp):
        av = scratch("hw_av", (nq * FZ.TILE_ROWS, kp))
        # (int16 codes in int64 units: scratch() caps its cached arrays by element count)
        pea = scratch("hw_pea", (nq, kp, FZ.TILE_ROWS * FZ.LANES // 4), np.int64).view(np.int16)
        bp = scratch("hw_bp", (npan, kp, FZ.LANES))
        peb = scratch("hw_peb", (npan, kp, FZ.LANES), np.int16)
        rowbad = FZ.pack_a(np.ascontiguousarray(a), av, pea, emin_in)
        colbad = FZ.pack_b(np.ascontiguousarray(b), bp, peb, emin_in)
        c = np.ascontiguousarray(c)
        FZ.fused_gemm(av, pea, bp, peb, c, out, *args, chk)
        rows, cols = FZ.fix_list(rowbad, colbad, c, out)
        if rows.size:
            FZ.hw_fix(av, pea, bp, peb, c, out, rows, cols, *args)
    return out


#: Below this many output elements the certificate pass of the ideal models runs on this thread.
CERT_PARALLEL_MIN = 1 << 21


def _run_ideal(model, a, b, c, stats, out, f, emin, emax, rne):
    """numpy's float64 matmul, the certificates of _fastideal on every element, then _fix on
    the few they leave (see softfloat/tensorcore/_fastideal.py for the proofs)."""
    m, k = a.shape
    n = b.shape[1]
    s0 = scratch("s0", (m, n))
    with np.errstate(all="ignore"):
        np.matmul(a, b, out=s0)             # float64; every product exact (see _fastideal)
    anrm, aexp, bnrm, bexp, bsrc = stats
    has_c = c is not None
    cv = c if has_c else s0                 # (not read without c)
    bad = scratch("bad", (m, n), np.uint8)
    left = np.empty(m, np.int64)
    mode = 0 if (f == 23 and emin == -126 and emax == 127 and rne) else 1
    g = FI.bracket_factor(k)
    off = 53 - 2 * model.in_format.man_bits
    args = (s0, cv, has_c, anrm, aexp, bnrm, bexp, off, g, out, bad, left, mode, 2.0 ** -f,
            2.0 ** (emin - f), 2.0 ** (emax + 1), rne)
    # After OpenBLAS's matmul its worker threads keep spinning for a while and would fight
    # Numba's second thread for the cores: only large passes go parallel.
    if m * n >= CERT_PARALLEL_MIN:
        nbad = FI.certify_parallel(*args)
    else:
        nbad = FI.certify_serial(*args)
    if nbad:
        _fix(a, bsrc, cv, has_c, out, bad, left, int(nbad), g, mode, f, emin, emax, rne)
    return out


def _fix(a, b, cv, has_c, out, bad, left, nbad, g, mode, f, emin, emax, rne):
    """The elements no certificate covered (bad[i, j] != 0; left[i] per row, nbad in all):
    the compensated sum, then the exact kernel (softfloat/tensorcore/_fastideal.py).  b: B's
    values in any float carrier (float32 halves the bytes the fallback streams)."""
    # (The operands may be F-ordered views, see _inputs._pair_with_stats32: the fallback reads
    # rows of both, so it gets C-contiguous copies; it runs on a few elements, or on none.)
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    FI.dot2_fix(a, b, bad, left, nbad, cv, has_c, out, g, mode, 2.0 ** -f, 2.0 ** (emin - f),
                2.0 ** (emax + 1), rne, f, emin, emax)
