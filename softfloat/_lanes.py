"""Integer lane operations written once for uint32 and uint64 lanes.

A kernel written with these functions compiles to 32-bit lanes for float32 bit patterns and to
64-bit lanes for float64 ones, from the same source: on uint32 operands each is the 32-bit
intrinsic of softfloat's intrinsic layer (Numba would widen plain uint32 arithmetic to 64 bits,
halving the SIMD width), on uint64 operands the plain Numba operation.  The rounding kernels of
softfloat._kernels_round_vec are written with them.

    vand vor vxor vadd vsub vshl vshr      a op b (both operands of the lane type)
    vlt vle vgt vge veq vne                unsigned comparisons (boolean results)
    vslt vsgt vsge                         the same comparisons of operands known to be below
                                           2^(W-1): signed ones on uint64 (one instruction on
                                           every x86 vector ISA; AVX2 has no unsigned 64-bit
                                           compare), the unsigned ones on uint32
    vsel(c, a, b)                          a if c else b, one select
    vmin vmax                              unsigned min / max
    vmerge(c, a, b, ones, zero)            a if c else b, without a masked store (see there)
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

None of these is inlined by Numba (no ``inline="always"``): each is compiled once per lane type
and LLVM inlines the call (they are a few instructions), which gives the same vector loops.
Numba's own inlining ran its untyped pipeline again at every call site, and an inlined
``@overload`` is also compiled in full for its signature; the rounding kernels make hundreds of
lane calls, so that was a third of their cold compile time (one fp16 conversion: 80 -> 53 s of
CPU, sf.add rne + sr: 166 -> 102 s, on a 2-core Zen 3 host, 2026-11-28; the kernels' machine
code differs by register choices only, and fp16 rounding and arithmetic on 4M elements times
the same within that host's run-to-run noise).

Imports numpy, numba, softfloat._intrinsics and softfloat._primitives (constants) only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from ._intrinsics import (add32, and32, eq32, ge32, gt32, lo32, lt32, ne32, or32, sel32, shl32,
                          shr32, sub32, xor32)
from ._primitives import U64_0, U64_1

__all__ = ["vand", "vor", "vxor", "vadd", "vsub", "vshl", "vshr", "vlt", "vle", "vgt", "vge",
           "veq", "vne", "vslt", "vsgt", "vsge", "vsel", "vmerge", "vmin", "vmax", "vcount",
           "vfbits", "vtop", "vmagic"]

# 2^52 as a float64 and its pattern: (2^52 + q) - 2^52 = q exactly for q < 2^52, and the
# pattern of 2^52 + q is 0x4330000000000000 + q (q fills the fraction).
_TWO52 = 4503599627370496.0
_TWO52_BITS = np.uint64(0x4330000000000000)
_U32 = np.uint64(32)


def _lane_op(name: str, op32, op64):
    """An overloaded binary lane operation: op32 on uint32 pairs, op64 on uint64 pairs."""
    def fn(a, b):
        raise NotImplementedError("only callable from Numba-compiled code")
    fn.__name__ = fn.__qualname__ = name

    @overload(fn)
    def _impl(a, b):
        if a == types.uint32 and b == types.uint32:
            return lambda a, b: op32(a, b)
        if a == types.uint64 and b == types.uint64:
            return op64
        return None
    return fn


vand = _lane_op("vand", and32, lambda a, b: a & b)
vor = _lane_op("vor", or32, lambda a, b: a | b)
vxor = _lane_op("vxor", xor32, lambda a, b: a ^ b)
vadd = _lane_op("vadd", add32, lambda a, b: a + b)
vsub = _lane_op("vsub", sub32, lambda a, b: a - b)
vshl = _lane_op("vshl", shl32, lambda a, b: a << b)
vshr = _lane_op("vshr", shr32, lambda a, b: a >> b)
vlt = _lane_op("vlt", lt32, lambda a, b: a < b)
vle = _lane_op("vle", njit(lambda a, b: ge32(b, a)), lambda a, b: a <= b)
vgt = _lane_op("vgt", gt32, lambda a, b: a > b)
vge = _lane_op("vge", ge32, lambda a, b: a >= b)
veq = _lane_op("veq", eq32, lambda a, b: a == b)
vne = _lane_op("vne", ne32, lambda a, b: a != b)
# operands below 2^(W-1): the signed comparison is the unsigned one
vslt = _lane_op("vslt", lt32, lambda a, b: np.int64(a) < np.int64(b))
vsgt = _lane_op("vsgt", gt32, lambda a, b: np.int64(a) > np.int64(b))
vsge = _lane_op("vsge", ge32, lambda a, b: np.int64(a) >= np.int64(b))
vmin = _lane_op("vmin", njit(lambda a, b: sel32(lt32(a, b), a, b)),
               lambda a, b: min(a, b))
vmax = _lane_op("vmax", njit(lambda a, b: sel32(gt32(a, b), a, b)),
                lambda a, b: max(a, b))


def vsel(c, a, b):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(vsel)
def _vsel_impl(c, a, b):
    if a == types.uint32 and b == types.uint32:
        return lambda c, a, b: sel32(c, a, b)
    if a == types.uint64 and b == types.uint64:
        # a mask select, not ``a if c else b``: an inlined conditional expression leaves a phi
        # variable Numba's IR checks warn about (NumbaIRAssumptionWarning) on every compile
        return lambda c, a, b: (a & (U64_0 - np.uint64(c))) | (b & (np.uint64(c) - U64_1))
    return None


_U32_1 = np.uint32(1)
_U32_0 = np.uint32(0)


@njit(cache=True)
def vmerge(c, a, b, ones, zero):
    """a if c else b, for storing over b's own element: (a & m) | (b & n) with the masks
    m = ones if c else zero and n its complement, from the run-time values ``ones`` and ``zero``
    (all bits set / none, of the lane type: fields of a kernel record, not constants).  A
    store of vsel(c, a, x[i]) into x[i] is turned by LLVM into a masked store (vpmaskmovd on
    AVX2, slow on AMD cores: with it the conversion's Inf/NaN pass took fp16 rne on 1% NaN/Inf
    data from 0.61 to 0.96-0.98 ns per element); masks that the compiler cannot see are all
    ones or zero keep it a plain store, for two logic operations more."""
    return vor(vand(a, vsel(c, ones, zero)), vand(b, vsel(c, zero, ones)))


@njit(cache=True)
def vcount(n, c):
    """n + 1 if c else n, for a uint32 counter n (modulo 2^32)."""
    return add32(n, sel32(c, _U32_1, _U32_0))


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
