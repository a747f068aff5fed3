"""Numba functions that choose a block's shared scale (the rules of softfloat/mx/__init__.py).

Provides
    e8m0_code(amax, rule, emax_elem, m_elem, max_frac)      MX: the E8M0 code of a block
    nvfp4_scale(amax32, head, SE)    NVFP4: (UE4M3 code, scale and element factor as float32)
        with the reference's float32 arithmetic, or the exact quotient (head[5] = exact)
    nv_head(smin, tensor_scale, exact), SCALE_EP      the NVFP4 constants

Everything is exact integer work on the float64 / float32 bit patterns: no log2, no division
whose rounding could move a result across a power of two.

Imports numpy, numba, softfloat._primitives (bit constants) and the sibling kernel module only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._primitives import F32_INF, F64_FRAC
from ._kernels_elem import ro_div, round_elem

__all__ = ["e8m0_code", "nvfp4_scale", "nv_head", "SCALE_EP", "FLOOR", "CEIL", "EVEN", "RCEIL",
           "NVFP4"]

FLOOR, CEIL, EVEN, RCEIL, NVFP4 = 0, 1, 2, 3, 4



@njit(cache=True)
def e8m0_code(amax, rule, emax_elem, m_elem, max_frac):
    """E8M0 code (0..255) of the scale of a block whose largest magnitude is amax (a float64:
    exact for float32 and float64 data; NaN when the block holds a NaN).

    amax = 1.f * 2^k exactly (k = floor(log2 amax), f the 52-bit fraction field, subnormal
    float64 normalised first).  Every rule is E = k - emax_elem + bump with
        floor  bump 0                                   (OCP MX v1.0 section 6.3)
        ceil   bump 1 iff f != 0 (amax not a power of two): E = ceil(log2 amax) - emax_elem
        even   bump 1 iff amax rounded to p = m_elem + 1 bits, ties away, carries to 2^(k+1):
               iff the top m_elem + 1 bits of f are all ones (1.f >= 2 - 2^-(m_elem+1))
        rceil  bump 1 iff 1.f > the fraction of the element max (max_frac): E is the smallest
               integer with amax <= max * 2^E, i.e. ceil(log2(amax / max)) (amax / 2^(k -
               emax_elem) = 1.f * 2^emax_elem against max = 1.max_frac * 2^emax_elem)
    then E is clamped to E8M0's range [-127, 127] and the code is E + 127.  amax = 0 gives code
    0 (2^-127, the smallest scale); NaN or Inf gives 0xFF (NaN).
    """
    if not amax < np.inf:
        return np.int64(255)
    if amax == 0.0:
        return np.int64(0)
    b = np.float64(amax).view(np.uint64)
    ef = np.int64(b >> np.uint64(52))
    f = b & F64_FRAC
    if ef == 0:
        # subnormal float64: f = 1.f' * 2^L with L its bit length - 1
        L = np.int64(0)
        t = f
        while t > np.uint64(1):
            t >>= np.uint64(1)
            L += 1
        k = L - 1074
        f = (f << np.uint64(52 - L)) & F64_FRAC
    else:
        k = ef - 1023
    bump = 0
    if rule == CEIL:
        bump = 1 if f != 0 else 0
    elif rule == EVEN:
        top = f >> np.uint64(51 - m_elem)
        bump = 1 if top == np.uint64((1 << (m_elem + 1)) - 1) else 0
    elif rule == RCEIL:
        bump = 1 if f > np.uint64(max_frac) else 0
    e = k - emax_elem + bump
    e = min(max(e, -127), 127)
    return e + 127


def nv_head(smin: float, tensor_scale, exact: bool) -> np.ndarray:
    """NVFP4's constants as one float64 array: [smin, 448, t (1 when none), 1 / t computed in
    float32 (the reference's reciprocal), has_t, exact]."""
    t = np.float32(1.0 if tensor_scale is None else tensor_scale)
    inv_t = np.float32(1.0) / t
    return np.array([smin, 448.0, float(t), float(inv_t), tensor_scale is not None, exact],
                    dtype=np.float64)


#: round_elem's parameters of the NVFP4 scale grid: e4m3fn (m 3, emin -6, emax 8, subnormals,
#: fn, saturating), max 448 (code 0x7E), 8-bit codes, RNE (mode 0), no random bits.
SCALE_EP = np.array([3, -6, 8, 1, 1, 1, int(np.float64(448.0).view(np.int64)), 0x7E, 8, 0, 0,
                     1], dtype=np.int64)


@njit(cache=True)
def _e4m3_up(s, SE):
    """s (a float32 in [smin, 448], smin > 0 on the e4m3 grid) rounded to nearest-even onto the
    e4m3 grid: (UE4M3 code, value).  Normal range (s >= 2^-6): RNE at bit 20 of the float32
    pattern (23 - 3 fraction bits dropped: add 2^19 - 1 plus the last kept bit, clear the low
    20 bits); below, round_elem."""
    b = np.int64(np.float32(s).view(np.uint32))
    if b >= (121 << 23):                     # 2^-6 = pattern (127 - 6) << 23
        r = (b + 0x7FFFF + ((b >> 20) & 1)) & ~np.int64(0xFFFFF)
        val = np.uint32(r).view(np.float32)
        # code: biased exponent (e - 127 + 7) << 3 | top 3 fraction bits
        code = (((r >> 23) - 120) << 3) | ((r >> 20) & 7)
        return code, val
    rv, _ = round_elem(np.float64(s), 0, SE, np.uint64(0))
    q = np.int64(rv * 512.0)                  # subnormal e4m3: multiples of 2^-9, code = q
    return q, np.float32(rv)


@njit(cache=True)
def nvfp4_scale(amax, head, SE):
    """(UE4M3 code, scale value as float32, reciprocal as float32) of an NVFP4 block whose
    largest magnitude is amax (a float64; NaN when the block holds a NaN).

    Reference arithmetic (head[5] = 0): s = fl32(amax / 6), then s = fl32(s / t) with a tensor
    scale t; clamped to [smin, 448] and rounded (RNE) onto the e4m3 grid; the element factor is
    r = fl32(1 / s) (no t) or fl32(fl32(1 / t) / s), as in the PyTorch reference.
    Exact (head[5] = 1): the exact quotient amax / (6 t) clamped to [smin, 448] and rounded once
    (RNE) onto the e4m3 grid (clamping first or last is the same: both bounds are on the grid
    and rounding is monotone); r is not used (elements divide exactly).
    A NaN block maximum gives the NaN code 0x7F and a NaN scale; an infinite one follows the
    arithmetic (Inf / 6 = Inf is clamped to 448), as the reference does.
    """
    if amax != amax:
        return np.int64(0x7F), np.float32(np.nan), np.float32(np.nan)
    smin = head[0]
    t32 = np.float32(head[2])
    if head[5] != 0.0:
        q = ro_div(amax, 6.0 * head[2])
        q = min(max(q, smin), 448.0)
        rv, _ = round_elem(q, 0, SE, np.uint64(0))
        rv = min(max(rv, smin), 448.0)
        code, val = _e4m3_up(np.float32(rv), SE)
        return code, val, np.float32(0.0)
    # amax is a float32 value here (the arithmetic mode takes float32 data): exact conversion
    s = np.float32(amax) / np.float32(6.0)
    if head[4] != 0.0:
        s = s / t32
    s = min(max(s, np.float32(smin)), np.float32(448.0))
    code, val = _e4m3_up(s, SE)
    if head[4] != 0.0:
        r = np.float32(head[3]) / val
    else:
        r = np.float32(1.0) / val
    return code, val, r


# ----- the same rules over many blocks at once (the float32 kernel's vectorised passes) --------

@njit(cache=True)
def e8m0_codes32(am, codes, rp):
    """codes[k] = e8m0_code of the float32 block maxima whose |x| patterns are am[k], vectorised
    over k: the float32 fraction field f (23 bits) and exponent field ef give k = ef - 127 and
    the same bumps (even: the top m_elem + 1 of the 23 bits; rceil: f > the element max's
    fraction, which has at most 3 bits, so 23 hold it).  A subnormal maximum (ef = 0, f != 0)
    is left to e8m0_code: returns how many there were (the caller redoes them)."""
    rule = rp[0]
    emax_e = rp[1]
    m_e = rp[2]
    mf23 = rp[3] >> 29
    full = (1 << (m_e + 1)) - 1
    use_c = rule == CEIL
    use_e = rule == EVEN
    use_r = rule == RCEIL
    nsub = 0
    for k in range(am.size):
        a = np.int64(am[k])
        ef = a >> 23
        f = a & 0x7FFFFF
        bump = ((use_c & (f != 0)) | (use_e & ((f >> (22 - m_e)) == full))
                | (use_r & (f > mf23)))
        e = min(max(ef - 127 - emax_e + np.int64(bump), -127), 127) + 127
        e = 255 if ef == 255 else e
        e = 0 if a == 0 else e
        codes[k] = e
        nsub += (ef == 0) & (a != 0)
    return nsub


@njit(cache=True)
def nvfp4_scales32(am, codes, vals, rcps, head):
    """nvfp4_scale in the reference's float32 arithmetic, vectorised over the block maxima
    patterns am[k] (a pattern above Inf's is a NaN block).  No tensor scale is t = 1: s / 1 and
    1 / 1 are exact, so one formula serves both.  A scale below 2^-6 (possible only with
    scale_min < 2^-6) is left to nvfp4_scale: marked with the code 0xFF (no UE4M3 scale has
    it: the largest is 0x7E, NaN 0x7F); returns how many there were."""
    smin = np.float32(head[0])
    t32 = np.float32(head[2])
    inv_t = np.float32(head[3])
    top = np.float32(448.0)
    nsub = 0
    for k in range(am.size):
        a = am[k]
        isnan = a > F32_INF
        s = np.uint32(0 if isnan else a).view(np.float32) / np.float32(6.0)
        s = s / t32
        s = min(max(s, smin), top)
        b = np.int64(np.float32(s).view(np.uint32))
        r = (b + 0x7FFFF + ((b >> 20) & 1)) & ~np.int64(0xFFFFF)
        val = np.uint32(r).view(np.float32)
        code = (((r >> 23) - 120) << 3) | ((r >> 20) & 7)
        sub = b < (121 << 23)
        codes[k] = 0x7F if isnan else (0xFF if sub else code)
        vals[k] = np.float32(np.nan) if isnan else val
        rcps[k] = inv_t / val
        nsub += sub
    return nsub
