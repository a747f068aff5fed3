"""DFP's integer rounding: ``shift_round`` (x / 2^s to an integer, every softfloat.Mode) and the
decision table it shares with the vectorised float32 quantizer of _kernels_quant.py.

Why DFP has a rounding routine of its own next to softfloat._roundpack (``round_value`` and its
integer step ``round_int``): DFP rounds SIGNED two's complement integers, and its hardware view
defines the roundings on the signed value t = x / 2^s: floor is the arithmetic right shift
``x >> s`` and stochastic rounding adds random bits below the binary point of the two's
complement integer (up with probability frac(t) = t - floor(t)).  ``round_int`` rounds a
sign-magnitude significand (the floating-point view): its stochastic rounding goes away from zero
with probability frac(|t|), so for a negative t the two draw different bits from the same random
word (they agree in distribution, not bit for bit), and switching would change every published
DFP-16 stochastic result.  The deterministic modes agree (tests/test_dfp_modes.py checks
shift_round against round_int in all seven of them); shift_round also covers |x| up to 2^62 and
is written branch-free (0/1 integers rather than data-dependent branches) so that the quantizer's
loops vectorise.

Imports numpy, numba and softfloat.modes only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..modes import Mode

#: Mode codes, as plain ints for the kernels (softfloat.Mode: stable).
RNE, RNA, RTZ, RUP, RDN, RTO, SR, RHU = (int(m) for m in (
    Mode.RNE, Mode.RNA, Mode.RTZ, Mode.RUP, Mode.RDN, Mode.RTO, Mode.SR, Mode.RHU))

_ONE = np.int64(1)

# The deterministic decision table.  A value t = q + f with q = floor(t) and f in [0, 1) rounds
# to q + up; ``up`` depends only on gt = (f > 1/2), eq = (f == 1/2), nz = (f != 0) and q:
#   RNE  gt | (eq & q odd)        RNA  gt | (eq & q >= 0)   (a tie is q + 1/2: away = up iff t > 0)
#   RHU  gt | eq                  RDN  0                    (floor)
#   RUP  nz                       RTZ  nz & q < 0           (toward zero: up only below 0)
#   RTO  nz & q even              (inexact -> the odd one of q and q + 1)
# Each mode is a set of the bits below; decide() evaluates the table without branches, so a
# loop over elements vectorises whatever the (loop-invariant) mode.
_GT, _EQ_ALL, _EQ_ODD, _EQ_POS, _NZ_ALL, _NZ_NEG, _NZ_EVEN = 1, 2, 4, 8, 16, 32, 64


@njit(cache=True)
def mode_bits(mode):
    """The decision-table bits of a deterministic mode (0 for SR, which decide() never sees)."""
    if mode == RNE:
        return _GT | _EQ_ODD
    if mode == RNA:
        return _GT | _EQ_POS
    if mode == RHU:
        return _GT | _EQ_ALL
    if mode == RUP:
        return _NZ_ALL
    if mode == RTZ:
        return _NZ_NEG
    if mode == RTO:
        return _NZ_EVEN
    return 0                                            # RDN (and SR)


@njit(cache=True)
def decide(mb, q, gt, eq, nz):
    """1 if t = q + f rounds up to q + 1 in the mode whose table bits are mb, else 0.
    q: the int64 floor(t); gt, eq, nz: int64 0/1 for f > 1/2, f == 1/2, f != 0."""
    qpos = np.int64(q >= 0)
    qneg = np.int64(q < 0)
    odd = q & _ONE
    g = gt & (mb & _GT)
    e = eq & (((mb >> 1) & _ONE) | ((mb >> 2) & odd) | ((mb >> 3) & qpos))
    n = nz & (((mb >> 4) & _ONE) | ((mb >> 5) & qneg) | ((mb >> 6) & (_ONE - odd)))
    return np.int64((g | e | n) != 0)


@njit(cache=True)
def sar(x, k):
    """Arithmetic right shift of an int64 by k >= 0 bits: floor(x / 2^k).

    Shifts of 64 or more are undefined in LLVM, so k is capped at 63; for |x| < 2^62 the result
    of any k >= 63 is floor(x / 2^k) = 0 (x >= 0) or -1 (x < 0), which x >> 63 also gives.
    """
    if k > 63:
        k = 63
    return x >> k


@njit(cache=True)
def sr_up(ftop, u, rbits):
    """Stochastic decision: 1 when floor(f * 2^r) + (u >> (64 - r)) >= 2^r (ftop = floor(f * 2^r),
    r = rbits in 1..62): up with probability f, up to the r-bit truncation of f."""
    ur = np.int64(np.uint64(u) >> np.uint64(64 - rbits))
    return np.int64(ftop + ur >= (_ONE << rbits))


@njit(cache=True)
def shift_round(x, s, mode, u, rbits):
    """Round the rational t = x / 2^s to an integer (x an int64 with |x| < 2^62, s >= 0) in the
    softfloat.Mode ``mode``; u: 64 random bits (mode SR), rbits: how many of them are used.

    Every mode is defined on the signed value t (two's complement hardware view):
      RDN  floor(t) = x >> s (arithmetic shift)   RHU  floor(t + 1/2) = (x + 2^(s-1)) >> s
      RNE  nearest, ties to even                  RNA  nearest, ties away from zero
      RTZ  toward zero                            RUP  ceil(t)
      RTO  t if exact, else the odd one of floor(t) and floor(t) + 1
      SR   floor(t) + 1 when floor(f * 2^r) + (u >> (64 - r)) >= 2^r, f = t - floor(t) in
           [0, 1): probability f up to the r-bit truncation of f (exact when the remainder has
           at most r bits, as softfloat.round's stochastic mode)
    """
    if s <= 0:
        return x
    if s >= 63:
        if mode == SR:
            # f * 2^r = (x >> (s - r)) mod 2^r (floor division), q = floor(t) = x >> 63
            ftop = sar(x, s - rbits) & ((_ONE << rbits) - _ONE)
            return sar(x, s) + sr_up(ftop, u, rbits)
        # |t| < 2^62 / 2^63 = 1/2 and t != -1/2: no tie, and the deterministic result depends
        # only on the sign of t and on t != 0, which x' = sign(x) over 2^62 keeps.
        x = np.int64(x > 0) - np.int64(x < 0)
        s = 62
    q = x >> s
    rem = x - (q << s)                    # = x mod 2^s in [0, 2^s): exact, no overflow
    if mode == SR:
        r = np.int64(rbits)
        ftop = (rem << (r - s)) if s <= r else (rem >> (s - r))   # floor(f * 2^r), exact
        return q + sr_up(ftop, u, rbits)
    half = _ONE << (s - 1)
    return q + decide(mode_bits(mode), q, np.int64(rem > half), np.int64(rem == half),
                      np.int64(rem != 0))
