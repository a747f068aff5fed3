"""Dispatch of a TCModel to its kernels: ``run_model(model, a, b, c) -> float64 m x n``.

* F finite (the hardware models): ``_kernels.hw_gemm`` on every element, then the scalar
  ``hw_fix_elements`` on the elements whose row of A, column of B or C holds Inf/NaN.
* F infinite, K infinite (ideal-fp32, ideal-fp16): numpy float64 matmul + ``ideal_certify``,
  then ``exact_fix_elements`` on what the bound did not certify (see _exact.py).
* F infinite, K finite (custom records): ``exact_gemm``.

Operands arrive as float64 arrays of values already checked (softfloat.tensorcore._inputs).
Imports numpy and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np

from . import _exact as X
from . import _kernels as H
from ._models import TCModel
from ._threads import serial_if_small


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
    stats: the operand statistics of prepare(..., stats=True) (ideal models only)."""
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
    cz = np.zeros((m, n)) if c is None else c
    o64 = np.empty((m, n))
    if model.frac_bits is None:
        X.exact_gemm(a, b, cz, o64, int(model.block), f, emin, emax, rne)
    else:
        _run_hw(model, a, b, cz, o64, f, emin, emax, rne)
    out[...] = o64
    return out


def _run_hw(model, a, b, c, out, f, emin, emax, rne):
    m, k = a.shape
    F = int(model.frac_bits)
    K = k if model.block is None else int(model.block)
    if model.block is None and (K + 1) << (F + 2) > 1 << 53:
        raise ValueError(f"model {model.name}: one block of k = {k} products with F = {F} "
                         "exceeds the exact 53-bit fixed-point sum; need (k + 1) * 2^(F + 2) "
                         "<= 2^53")
    kp = -(-k // K) * K                     # zero-pad k to a multiple of K (spec DOT)
    av = np.zeros((m, kp))
    av[:, :k] = a
    bz = np.zeros((kp, b.shape[1]))
    bz[:k] = b
    ea = np.empty(av.shape, np.float32)
    eb = np.empty(bz.shape, np.float32)
    emin_in = model.in_format.emin
    H.split_exponents(av, emin_in, ea)
    H.split_exponents(bz, emin_in, eb)
    bv = bz.astype(np.float32)              # exact: every input format fits a float32
    args = (K, F, f, emin, emax, rne)
    H.hw_gemm(av, ea, bv, eb, c, out, *args)
    rows, cols = _special_elements(a, b, c)
    if rows.size:
        H.hw_fix_elements(av, ea, bv, eb, c, out, rows, cols, *args)
    return out


def _run_ideal(model, a, b, c, stats, out, f, emin, emax, rne):
    m, k = a.shape
    n = b.shape[1]
    with np.errstate(all="ignore"):
        s0 = a @ b                          # float64; every product exact (see _exact.py)
        (anrm, aexp), (bnrm, bexp) = stats
        ra = np.sqrt(anrm)                  # Cauchy-Schwarz factors; NaN/Inf fail the bound
        rb = np.sqrt(bnrm)
    has_c = c is not None
    cv = c if has_c else np.zeros((1, 1))
    bad = np.empty((m, n), np.uint8)
    left = np.empty(m, np.int64)
    shift = 52 - 2 * model.in_format.man_bits
    # After OpenBLAS's matmul its worker threads keep spinning for a while; Numba's second
    # thread would fight them for the cores, so the light pass runs on this thread (and the
    # exact fallback too, unless it has much to do: adversarial inputs).
    with serial_if_small(0):
        X.ideal_certify(s0, cv, has_c, ra, aexp, rb, bexp, shift, k, out, bad, left, f, emin,
                        emax, rne)
    with serial_if_small(int(left.sum()) * k * 64):
        _fix(a, b, cv, has_c, out, bad, left, f, emin, emax, rne)
    return out


def _fix(a, b, cv, has_c, out, bad, left, f, emin, emax, rne):
    """The exact kernel on the elements no certificate covered."""
    n = b.shape[1]
    rows = np.nonzero(left)[0]
    if rows.size:
        # The columns of B that hold an uncertified element, gathered contiguously.
        cols = np.nonzero(bad[rows].any(axis=0))[0]
        colmap = np.full(n, -1, np.int64)
        colmap[cols] = np.arange(cols.size)
        bt = np.ascontiguousarray(b[:, cols].T)
        X.ideal_fix_rows(a, bt, colmap, cv, has_c, out, bad, rows.astype(np.int64), f, emin,
                         emax, rne)
