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

Limits: in_format must fit a float32 carrier (products exact in float64); the accumulator needs
at most 50 fraction bits (the round-to-odd margin of softfloat._arith), and with stochastic
rounding man_bits + sr_bits <= 51.

Imports numpy and softfloat only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import DEFAULT_SR_BITS, check_flags, check_sr
from ..formats import Format, get_format
from ..modes import Mode, parse_mode
from . import _accum_kernels as AK
from ._inputs import permute_k, prepare
from ._threads import serial_if_small

__all__ = ["Accumulator", "accum_gemm", "ORDERS"]

ORDERS = {"sequential": AK.SEQUENTIAL, "blocked": AK.BLOCKED, "pairwise": AK.PAIRWISE}


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
               seed=None, sr_bits=None, flags=None, accumulator=None, vector=False):
    """D = C + A @ B accumulated as described by an Accumulator (see the module docstring).

    Either pass ``accumulator=Accumulator(...)`` or its fields (acc_format, mode, order, block,
    fused, kahan).  in_format: format of A and B (default fp16); C holds acc_format values.
    seed (required for mode "sr") and sr_bits: stochastic rounding; flags: a softfloat.Flags
    that receives the number of output elements raising each IEEE flag.
    Returns an m x n array of acc_format values in its carrier dtype.
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
    max_sr = 51 - acc.man_bits
    if accumulator.mode == Mode.SR and sr_bits is None and DEFAULT_SR_BITS > max_sr:
        sr_bits = max_sr
    key, rbits = check_sr(accumulator.mode, seed, sr_bits, max_bits=max_sr)
    check_flags(flags)
    sa, sb = np.shape(A), np.shape(B)
    work = sa[0] * sa[1] * sb[1] if len(sa) == 2 and len(sb) == 2 else 0
    with serial_if_small(work):
        return _accum(A, B, C, accumulator, fin, acc, round_inputs, vector, k_order, key,
                      rbits, flags)


def _accum(A, B, C, accumulator, fin, acc, round_inputs, vector, k_order, key, rbits, flags):
    a, b, c = prepare(A, B, C, fin, acc, round_inputs, vector=vector)
    a, b = permute_k(a, b, k_order)
    m, k = a.shape
    if c is None:
        c = np.zeros((m, b.shape[1]))
    n = b.shape[1]
    out = np.empty((m, n))
    counts = np.zeros((max(m, 1), AK.NFLAGS), np.int64)
    order = ORDERS[accumulator.order]
    blk = accumulator.block if accumulator.block is not None else (1 if order == AK.PAIRWISE
                                                                  else max(k, 1))
    if m and n:
        AK.accum_gemm_kernel(a, b, c, out, order, int(blk), bool(accumulator.fused),
                             bool(accumulator.kahan), acc.kernel_params(), int(rbits),
                             int(accumulator.mode), key, counts)
    if flags is not None:
        flags._add_counts(counts, m * n)
    return out.astype(acc.carrier_dtype)
