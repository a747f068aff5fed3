"""Generic accumulation-precision GEMM: the study tool behind "why accumulate in fp32".

Provides the :class:`Accumulator` record and :func:`accum_gemm`.  D = C + A B where the
products of in_format values are accumulated in ANY softfloat format and rounding mode
(stochastic rounding included), one rounding per operation:

* ``fused=True``: each multiply-add is one FMA, acc <- RND(acc + a*b) (the product is exact);
  ``fused=False``: the product is rounded first, p <- RND(a*b), acc <- RND(acc + p).
* ``order="sequential"``: acc starts at c, k ascending (the textbook recursive sum).
  ``order="blocked"`` (``block`` = b): each block of b products is summed sequentially starting
  from its first (rounded) product, and the block sums are accumulated onto c in order (Blanchard,
  Higham & Mary's blocked summation).
  ``order="pairwise"`` (``block`` = b, default 1): leaves are the block sums (b = 1: the rounded
  products), combined level by level in adjacent pairs (an odd last one moves up unchanged),
  then d = RND(c + tree).
* ``kahan=True`` (sequential and blocked): Kahan's compensated summation, every operation of it
  rounded in the accumulator format: y = RND(x - comp), t = RND(acc + y),
  comp = RND(RND(t - acc) - y), acc = t (fused: y = RND(a*b - comp), one rounding).
* Special values and signed zeros follow IEEE 754 in the accumulator format (softfloat._arith).
* Batches: A (..., m, k) and B (..., k, n) broadcast as numpy.matmul's; element (i, j) of the
  b-th matrix (flat batch order) has the global index index_offset + (b m + i) n + j.

Kernel.  Every operation goes through the scalar arithmetic of softfloat._arith (``add_scalar``,
``mul_exact_scalar``): products of two inputs are exact in float64 (precision <= 24 each), so
"fused" steps RND(acc + a*b) are ``add_scalar(acc, a*b)`` -- an FMA with a single rounding -- and
unfused ones round the product first.  Stochastic rounding draws the bits of the r-th rounding
of the element with global index e from random_bits(key, e * stride(k) + r): the same bits
whatever the thread count, the batch shape or the pieces a larger problem is cut into.
A seed with a deterministic mode is a ValueError (the seed is only used by mode "sr").

Limits: in_format must fit a float32 carrier (products exact in float64); the accumulator needs
at most 50 fraction bits (the round-to-odd margin of softfloat._arith), and with stochastic
rounding man_bits + sr_bits <= 51.

Imports numpy, numba and softfloat only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .._arith import add_scalar, mul_exact_scalar
from .._roundpack import SR
from .._threads import serial_if_small
from .._validate import DEFAULT_SR_BITS, check_flags, check_index_offset, check_sr
from ..formats import Format, get_format
from ..modes import Mode, parse_mode
from ..rng import random_bits
from ._prep import as_float64, gemm_work, operands

__all__ = ["Accumulator", "accum_gemm", "ORDERS"]

SEQUENTIAL, BLOCKED, PAIRWISE = 0, 1, 2
ORDERS = {"sequential": SEQUENTIAL, "blocked": BLOCKED, "pairwise": PAIRWISE}
NFLAGS = 5
_ONE = np.uint64(1)   # uint64 counters: mixing with Python ints would promote to float64


@dataclass(frozen=True)
class Accumulator:
    """How the products are accumulated (see the module docstring).

    acc_format : format of the accumulator, C and D (any softfloat Format or preset name).
    mode : rounding mode of every operation ("rne", "rtz", "sr", ...).
    order : "sequential", "blocked" or "pairwise".
    block : block size for "blocked" (required) and "pairwise" (leaf size, default 1).
    fused : one rounding per multiply-add (True) or a rounded product first (False).
    kahan : Kahan-compensated accumulation (sequential and blocked orders).
    """

    acc_format: Format = "fp32"
    mode: Mode = Mode.RNE
    order: str = "sequential"
    block: int | None = None
    fused: bool = True
    kahan: bool = False

    def __post_init__(self):
        acc = get_format(self.acc_format)
        object.__setattr__(self, "acc_format", acc)
        object.__setattr__(self, "mode", parse_mode(self.mode))
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.block is not None and (isinstance(self.block, bool)
                                       or not isinstance(self.block, (int, np.integer))
                                       or self.block < 1):
            raise ValueError(f"block must be a positive int or None, got {self.block!r}")
        if self.order == "blocked" and self.block is None:
            raise ValueError("order='blocked' needs block=<int>")
        if self.order == "sequential" and self.block is not None:
            raise ValueError("block applies to the 'blocked' and 'pairwise' orders only")
        if self.kahan and self.order == "pairwise":
            raise ValueError("kahan=True applies to the 'sequential' and 'blocked' orders only")
        for attr in ("fused", "kahan"):
            if not isinstance(getattr(self, attr), (bool, np.bool_)):
                raise TypeError(f"{attr} must be a bool")
        if acc.man_bits > 50:
            raise ValueError(f"acc_format {acc.name} has {acc.man_bits} fraction bits; at most "
                             "50 are supported (53-bit round-to-odd margin)")

    def describe(self) -> str:
        blk = f", block {self.block}" if self.block is not None else ""
        return (f"{self.acc_format.name} accumulator, {self.mode.short}, {self.order}{blk}, "
                f"{'fused' if self.fused else 'unfused'}{', Kahan' if self.kahan else ''}")


def accum_gemm(A, B, C=None, *, acc_format=None, mode="rne", order="sequential", block=None,
               fused=True, kahan=False, in_format=None, round_inputs=None, k_order=None,
               seed=None, sr_bits=None, flags=None, index_offset=0, accumulator=None,
               vector=False):
    """D = C + A @ B accumulated as described by an Accumulator (see the module docstring).

    Either pass ``accumulator=Accumulator(...)`` or its fields (acc_format, mode, order, block,
    fused, kahan).  A (..., m, k), B (..., k, n): in_format values (default fp16), batch
    dimensions broadcast; C holds acc_format values, broadcast to (..., m, n).
    seed (required for mode "sr", refused otherwise) and sr_bits: stochastic rounding;
    index_offset: the global index of the first output element (a piece of a larger problem
    draws the bits the whole would give it); flags: a softfloat.Flags that receives the number
    of output elements raising each IEEE flag.
    Returns a (..., m, n) array of acc_format values in its carrier dtype.
    """
    if accumulator is None:
        accumulator = Accumulator("fp32" if acc_format is None else acc_format, mode, order,
                                  block, fused, kahan)
    elif not isinstance(accumulator, Accumulator):
        raise TypeError("accumulator must be an Accumulator")
    elif acc_format is not None and get_format(acc_format) != accumulator.acc_format:
        raise ValueError(f"acc_format={acc_format!r} conflicts with the Accumulator's "
                         f"{accumulator.acc_format.name}")
    acc = accumulator.acc_format
    fin = get_format("fp16" if in_format is None else in_format)
    if fin.carrier_dtype.itemsize != 4:
        raise ValueError(f"in_format {fin.name} must fit a float32 carrier (products exact "
                         "in float64)")
    if seed is not None and accumulator.mode != Mode.SR:
        raise ValueError(f"seed is only used by mode 'sr' (stochastic rounding); mode "
                         f"{accumulator.mode.short!r} is deterministic: leave seed out")
    max_sr = 51 - acc.man_bits
    if accumulator.mode == Mode.SR and sr_bits is None and DEFAULT_SR_BITS > max_sr:
        sr_bits = max_sr
    key, rbits = check_sr(accumulator.mode, seed, sr_bits, max_bits=max_sr)
    check_flags(flags)
    base = check_index_offset(index_offset)
    with serial_if_small(gemm_work(A, B)):
        ops = operands(A, B, C, fin, acc, round_inputs, k_order, vector)
        m, n = ops.shape[-2:]
        k = ops.a.shape[-1]
        out = np.empty(ops.shape)
        nb = out.size // max(m * n, 1)
        counts = np.zeros((max(m, 1), NFLAGS), np.int64)
        order = ORDERS[accumulator.order]
        blk = accumulator.block if accumulator.block is not None else (1 if order == PAIRWISE
                                                                      else max(k, 1))
        for t, idx in enumerate(np.ndindex(ops.shape[:-2])):
            c = np.zeros((m, n)) if ops.c is None else np.ascontiguousarray(ops.c[idx])
            if m and n:
                accum_gemm_kernel(as_float64(ops.a[idx], ops.ca), as_float64(ops.b[idx], ops.cb),
                                  c, out[idx], order, int(blk), bool(accumulator.fused),
                                  bool(accumulator.kahan), acc.kernel_params(), int(rbits),
                                  int(accumulator.mode), key, base + t * m * n, counts)
    if flags is not None:
        flags._add_counts(counts, nb * m * n)
    return out.astype(acc.carrier_dtype)


# ---- the kernel -----------------------------------------------------------------------------


@njit(cache=True)
def stride(k):
    """Random-bit indices reserved per output element: at most 5 roundings per product (Kahan
    unfused: mul, sub, add, sub, sub), at most 4 per block (blocked Kahan) and the final add:
    5k + 4k + 1 < 10 (k + 2)."""
    return 10 * (k + 2)


@njit(cache=True)
def _bits(mode, key, idx):
    return random_bits(key, idx) if mode == SR else np.uint64(0)


@njit(cache=True)
def _add(x, y, fp, rbits, mode, key, idx):
    return add_scalar(x, y, fp, mode, _bits(mode, key, idx), rbits)


@njit(cache=True)
def _mul(x, y, fp, rbits, mode, key, idx):
    return mul_exact_scalar(x, y, fp, mode, _bits(mode, key, idx), rbits)


@njit(cache=True)
def _term(a, b, fused, comp, kahan, fp, rbits, mode, key, idx):
    """The addend of one step: a*b (exact, fused) or RND(a*b); with Kahan, minus comp (one
    rounding in the fused case: RND(a*b - comp)).  Returns (y, flags, next idx)."""
    fl = 0
    if fused:
        p = a * b                                  # exact in float64
    else:
        p, f1 = _mul(a, b, fp, rbits, mode, key, idx)
        idx += _ONE
        fl |= f1
    if kahan:
        p, f2 = _add(p, -comp, fp, rbits, mode, key, idx)
        idx += _ONE
        fl |= f2
    return p, fl, idx


@njit(cache=True)
def _seq(av, bv, k0, k1, acc, start_zero, fused, kahan, fp, rbits, mode, key, idx):
    """Sequential accumulation of products k0..k1-1 onto acc.  start_zero: the sum starts at
    the first product itself (RND(a*b)), not at acc.  Returns (acc, flags, idx)."""
    fl = 0
    comp = 0.0
    first = start_zero
    for kk in range(k0, k1):
        a = np.float64(av[kk])
        b = np.float64(bv[kk])
        if first:
            # The sum starts at the first product: RND(a*b) (= RND(0 + a*b) when fused).
            acc, f1 = _mul(a, b, fp, rbits, mode, key, idx)
            idx += _ONE
            fl |= f1
            first = False
            continue
        y, f1, idx = _term(a, b, fused, comp, kahan, fp, rbits, mode, key, idx)
        acc, comp, f2, idx = _accumulate(acc, y, kahan, fp, rbits, mode, key, idx)
        fl |= f1 | f2
    return acc, fl, idx


@njit(cache=True)
def _accumulate(acc, y, kahan, fp, rbits, mode, key, idx):
    """acc + y, rounded; with Kahan also the new compensation comp = RND(RND(t - acc) - y), the
    part of y that did not make it into t.  Returns (t, comp, flags, next idx)."""
    t, fl = _add(acc, y, fp, rbits, mode, key, idx)
    idx += _ONE
    comp = 0.0
    if kahan:
        d, f3 = _add(t, -acc, fp, rbits, mode, key, idx)
        idx += _ONE
        comp, f4 = _add(d, -y, fp, rbits, mode, key, idx)
        idx += _ONE
        fl |= f3 | f4
    return t, comp, fl, idx


@njit(cache=True)
def _element(av, bv, c, order, block, fused, kahan, fp, rbits, mode, key, idx, leaves):
    k = av.shape[0]
    if k == 0:
        return np.float64(c), 0
    if order == SEQUENTIAL:
        acc, fl, idx = _seq(av, bv, 0, k, np.float64(c), False, fused, kahan, fp, rbits, mode,
                            key, idx)
        return acc, fl
    fl = 0
    nb = (k + block - 1) // block
    if order == BLOCKED:
        acc = np.float64(c)
        comp = 0.0
        for t in range(nb):
            s, f1, idx = _seq(av, bv, t * block, min(k, t * block + block), 0.0, True, fused,
                              kahan, fp, rbits, mode, key, idx)
            fl |= f1
            y = s
            if kahan:
                y, f2 = _add(s, -comp, fp, rbits, mode, key, idx)
                idx += _ONE
                fl |= f2
            acc, comp, f3, idx = _accumulate(acc, y, kahan, fp, rbits, mode, key, idx)
            fl |= f3
        return acc, fl
    # PAIRWISE: leaves are sequential sums of blocks (one rounded product for block = 1),
    # combined level by level in adjacent pairs (an odd last one moves up unchanged); c last.
    for t in range(nb):
        s, f1, idx = _seq(av, bv, t * block, min(k, t * block + block), 0.0, True, fused,
                          False, fp, rbits, mode, key, idx)
        leaves[t] = s
        fl |= f1
    cnt = nb
    while cnt > 1:
        h = cnt // 2
        for t in range(h):
            leaves[t], f1 = _add(leaves[2 * t], leaves[2 * t + 1], fp, rbits, mode, key, idx)
            idx += _ONE
            fl |= f1
        if cnt % 2 == 1:
            leaves[h] = leaves[cnt - 1]
            cnt = h + 1
        else:
            cnt = h
    d, f1 = _add(np.float64(c), leaves[0], fp, rbits, mode, key, idx)
    return d, fl | f1


@njit(parallel=True, cache=True)
def accum_gemm_kernel(av, bv, cv, out, order, block, fused, kahan, fp, rbits, mode, key, base,
                      counts):
    """out[i, j] = the accumulation of c[i, j] and a[i, k] b[k, j] (see the module docstring);
    base: the global index of element (0, 0); counts[i, f] += the number of elements of row i
    that raised flag bit f."""
    m, k = av.shape
    n = bv.shape[1]
    st = np.uint64(stride(k))
    for i in prange(m):
        leaves = np.empty(max(1, (k + block - 1) // block))
        for j in range(n):
            idx = (np.uint64(base) + np.uint64(i) * np.uint64(n) + np.uint64(j)) * st
            d, fl = _element(av[i], bv[:, j], cv[i, j], order, block, fused, kahan, fp, rbits, mode,
                             key, idx, leaves)
            out[i, j] = d
            for f in range(NFLAGS):
                if fl & (1 << f):
                    counts[i, f] += 1
