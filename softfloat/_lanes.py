"""Integer lane operations written once for uint32 and uint64 lanes.

A kernel written with these functions compiles to 32-bit lanes for float32 bit patterns and to
64-bit lanes for float64 ones, from the same source: each emits its LLVM instruction on i32
for uint32 operands (Numba would widen plain uint32 arithmetic to 64 bits, halving the SIMD
width) and on i64 for uint64 ones.  The rounding
kernels of softfloat._kernels_round_vec are written with them.

    vand vor vxor vadd vsub vshl vshr      a op b (both operands of the lane type)
    vlt vle vgt vge veq vne                unsigned comparisons (boolean results)
    vslt vsgt vsge                         the same comparisons of operands known to be below
                                           2^(W-1): signed ones on uint64 (one instruction on
                                           every x86 vector ISA; AVX2 has no unsigned 64-bit
                                           compare), the unsigned ones on uint32
    vsel(c, a, b)                          a if c else b, one select
    vmin vmax                              unsigned min / max
    vmerge(c, a, b, ones, zero)            a if c else b, without a masked store (lane_merge)
    vcount(n, c)                           n + 1 if c else n, n a uint32 counter (32-bit lanes
                                           whatever the kernel's lane width: a 64-bit counter
                                           would take a register of 64-bit lanes)
    vfbits(q)                              the bit pattern of the float of the lane's width
                                           (float32 / float64) equal to the integer q; q must be
                                           below 2^31 (uint32) or 2^52 (uint64): exact
    vtop(u, like)                          the top bits of the 64 random bits u as a lane value
                                           of ``like``'s type (32 of them, or all 64)
    vmagic(a, c)                           the pattern of (A + C) - C in the float arithmetic of
                                           the lane's width, A and C the floats of patterns a, c
                                           (IEEE round-to-nearest-even; no fast-math)

Semantics are unsigned arithmetic modulo 2^32 / 2^64; shift counts must be below the lane width.

The operations with boolean operands or results (the comparisons, vsel, vmerge, vcount) and the
integer operations are intrinsics of softfloat._intrinsics (lane_op, lane_minmax, lane_sel,
lane_merge, lane_count): their LLVM instruction is emitted at each call site.  From 2026-11-28
until 2026-11-29 they were compiled functions that LLVM inlined (Numba's own ``inline="always"``
had cost a third of the kernels' cold compile time); on an AVX-512 host (AMD EPYC, Zen 4) that
made the conversion loops up to 1.5x slower, measured in fresh processes against the code
before and after: e4m3fn rne on N(0,1) data 1.10x -> 1.50x a copy, fp16 rne on gradient-like
data 1.19x -> 1.83x.  Numba inlining of the boolean ones alone restored the speed; the
intrinsics restore it too, leave the AVX2 code path's timing unchanged (two alternating runs)
and compile faster than the compiled functions did (first fp16 conversion of gradient-like
data 7.3 -> 5.5 s, first bf16 sr sf.add 22.8 -> 19.8 s on that host; 7.7 -> 5.6 s and
24.1 -> 19.8 s on its AVX2 code path).  vfbits, vtop and vmagic stay compiled functions (no
boolean crosses their boundary).

Imports numpy, numba and softfloat._intrinsics only.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ._intrinsics import lane_count, lane_merge, lane_minmax, lane_op, lane_sel, lo32

__all__ = ["vand", "vor", "vxor", "vadd", "vsub", "vshl", "vshr", "vlt", "vle", "vgt", "vge",
           "veq", "vne", "vslt", "vsgt", "vsge", "vsel", "vmerge", "vmin", "vmax", "vcount",
           "vfbits", "vtop", "vmagic"]

# 2^52 as a float64 and its pattern: (2^52 + q) - 2^52 = q exactly for q < 2^52, and the
# pattern of 2^52 + q is 0x4330000000000000 + q (q fills the fraction).
_TWO52 = 4503599627370496.0
_TWO52_BITS = np.uint64(0x4330000000000000)
_U32 = np.uint64(32)


vand = lane_op("and_", "a & b")
vor = lane_op("or_", "a | b")
vxor = lane_op("xor", "a ^ b")
vadd = lane_op("add", "a + b modulo 2^W")
vsub = lane_op("sub", "a - b modulo 2^W")
vshl = lane_op("shl", "(a << s) modulo 2^W (s < W)")
vshr = lane_op("lshr", "a >> s (logical; s < W)")
vlt = lane_op("<", "a < b (unsigned)", "unsigned")
vle = lane_op("<=", "a <= b (unsigned)", "unsigned")
vgt = lane_op(">", "a > b (unsigned)", "unsigned")
vge = lane_op(">=", "a >= b (unsigned)", "unsigned")
veq = lane_op("==", "a == b", "unsigned")
vne = lane_op("!=", "a != b", "unsigned")
# operands below 2^(W-1): the signed comparison is the unsigned one
vslt = lane_op("<", "a < b for a, b < 2^(W-1)", "signed64")
vsgt = lane_op(">", "a > b for a, b < 2^(W-1)", "signed64")
vsge = lane_op(">=", "a >= b for a, b < 2^(W-1)", "signed64")
vmin = lane_minmax("<", "min(a, b) (unsigned)")
vmax = lane_minmax(">", "max(a, b) (unsigned)")
vsel = lane_sel
vmerge = lane_merge
vcount = lane_count


def vfbits(q):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(vfbits)
def _vfbits_impl(q):
    if q == types.uint32:
        # int32 -> float32 (vcvtdq2ps on every x86 vector ISA); exact for q < 2^24 and the
        # correctly rounded float otherwise (callers read only the exponent of larger ones)
        return lambda q: np.float32(np.int32(q)).view(np.uint32)
    if q == types.uint64:
        # AVX2 has no int64 -> float64 vector conversion: the 2^52 trick instead
        return lambda q: np.float64(np.uint64(_TWO52_BITS + q).view(np.float64)
                                    - _TWO52).view(np.uint64)
    return None


def vtop(u, like):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(vtop)
def _vtop_impl(u, like):
    if like == types.uint32:
        return lambda u, like: lo32(u >> _U32)
    if like == types.uint64:
        return lambda u, like: u
    return None


def vmagic(a, c):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(vmagic)
def _vmagic_impl(a, c):
    # Two IEEE operations in the default rounding mode (the kernels are never fast-math, so
    # LLVM may not fold (A + C) - C into A).
    if a == types.uint32 and c == types.uint32:
        def impl32(a, c):
            cf = np.uint32(c).view(np.float32)
            return np.float32(np.float32(np.uint32(a).view(np.float32) + cf) - cf).view(np.uint32)
        return impl32
    if a == types.uint64 and c == types.uint64:
        def impl64(a, c):
            cf = np.uint64(c).view(np.float64)
            return np.float64(np.float64(np.uint64(a).view(np.float64) + cf) - cf).view(np.uint64)
        return impl64
    return None
