"""Vectorised element rounding of mx.quantize on float32 bit patterns (the common case).

Provides
    fast_consts(EP) -> FC                  the per-call constants (int64 array)
    block_consts(E, FC) -> BC              the per-block constants for the shift 2^-E
    run_det(xs, es, vs, FC, BC), run_sr(xs, es, vs, FC, BC, key, base)
        round the float32 patterns xs (one block row) scaled by 2^-E: MX
    run_det_nv(xs, xf, rcp, es, vs, FC, BC), run_sr_nv(...)
        round y = fl32(x * rcp), NVFP4's float32 product (E = 0)
    rne_consts(FC) -> R, run_rne(xs, xf, ms, es, vs, R)
        round to nearest even (the default mode) of y = fl32(x * ms[j]), per-element factors
        ms = 2^-E (MX) or NVFP4's r, by the FPU's own rounding (see _rne_one)
        each writes the element codes es and value patterns vs (slices of the outputs) and
        returns (saturated, flushed, slow)

Same results, bit for bit, as round_elem (the round-pack routine) on every element, except those
it marks ``slow`` (left for round_elem): tests/test_mx_quantize.py checks the two paths on every
format, rule and mode, with inputs at every rounding boundary, subnormals and huge shifts.

Derivation of the integer paths (every mode but RNE; RNE's is in _rne_one's docstring).
x = sig * 2^(Ex' - 150) with Ex' = max(Ex, 1) (Ex the biased exponent field; a
float32 subnormal has Ex = 0, no hidden bit and the exponent of Ex = 1) and y = x * 2^-E.  The
element grid's quantum is 2^(max(ey, emin) - m), ey = floor(log2 y).
* Normal range, |x| >= 2^(emin + E) (pattern a >= thr = (127 + emin + E) << 23): y's quantum
  2^(ey - m) is bit d = 23 - m of x's pattern, so x is rounded as softfloat's fast conversion
  kernel does (softfloat/_kernels_round_f32.py, whose proofs apply unchanged): add the mode's
  increment, clear the low d bits (a carry out of the fraction is the next binade).  The element
  code is then (rn >> d) - ((126 + E + emin) << m) (exponent field minus the bias difference,
  fraction kept) and the value pattern rn - (E << 23), exact: y is a float32 normal.
* Subnormal range (|x| < 2^(emin + E)): quantum 2^(emin - m); q = round(sig / 2^drop) with
  drop = (emin - m + 150 + E) - Ex' > d bits dropped, q <= 2^m is the code itself and
  q * 2^(emin - m) the value.  Deterministic modes: drop above 25 decides like 25 (sig < 2^24:
  below half a quantum), increments as _kernels_round_f32's tiny path.  SR with r random bits:
  the increment is the top k = min(r, drop) bits of u placed below bit drop, and q carries iff
  round_value's SR rounds up (the proof of _kernels_round_f32, with d replaced by drop); for
  31 < drop < 24 + r this needs more than 32 bits: those elements are marked slow; for
  drop >= 24 + r the remainder's top r bits are 0, so q = 0 exactly.
* thr is clamped to the pattern of 2^-126: when emin + E < -126 a float32 subnormal x can
  lie in the element's normal range: such x are marked slow (blocks below 2^-110 or so).
* Saturation: a code above the largest finite code (also any +-Inf product) becomes the max.
Everything runs in 32-bit lanes (softfloat._intrinsics): no sum wraps (a < 2^31 plus an increment
< 2^31; sig < 2^24 plus < 2^31); the counts are uint32 (a run is at most a block row).

Imports numpy, numba, softfloat._intrinsics, softfloat._primitives (the bit constants) and
softfloat.rng only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._intrinsics import (add32, and32, ge32, gt32, lo32, lt32, ne32, or32, sel32, shl32, shr32,
                      sub32, xor32)
from .._primitives import F32_ABS, F32_FRAC, F32_HIDDEN, F32_INF, U64_0, U64_32
from ..rng import WEYL_STEP, mix, weyl

__all__ = ["fast_consts", "unpack", "block_consts", "run_det", "run_sr", "run_det_nv", "run_sr_nv",
           "rne_consts", "run_rne"]

_U0 = np.uint32(0)
_U1 = np.uint32(1)


def fast_consts(EP) -> np.ndarray:
    """Per-call constants (int64 array; layout: see _unpack) from BlockFormat.elem_params."""
    m, emin = int(EP[0]), int(EP[1])
    maxcode, nbits, is_int = int(EP[7]), int(EP[8]), int(EP[9])
    emax_e = int(np.frexp(np.int64(EP[6]).view(np.float64))[1]) - 1   # floor(log2 max)
    mode, rbits = int(EP[10]), int(EP[11])
    d = 23 - m
    low = (1 << d) - 1
    half = 1 << (d - 1)
    maxval = float(np.int64(EP[6]).view(np.float64))
    # mode codes (softfloat.Mode): 0 RNE, 1 RNA, 2 RTZ, 3 RUP, 4 RDN, 5 RTO, 6 SR
    return np.array([
        d, low, 0xFFFFFFFF ^ low,                          # 0-2
        {0: half - 1, 1: half}.get(mode, 0),               # 3: c0
        1 if mode == 0 else 0,                             # 4: parity bit weight (RNE)
        low if mode == 3 else 0, low if mode == 4 else 0,  # 5-6: cpos, cneg
        (1 << d) if mode == 5 else 0,                      # 7: RTO's last bit
        0xFFFFFFFF if mode in (0, 1) else 0,               # 8: tiny path: half used
        1 if mode == 0 else 0,                             # 9: tiny path: RNE
        0xFFFFFFFF if mode == 3 else 0,                    # 10: tiny path: RUP mask
        0xFFFFFFFF if mode == 4 else 0,                    # 11: tiny path: RDN mask
        1 if mode == 5 else 0,                             # 12: tiny path: RTO
        maxcode, int(np.float32(maxval).view(np.uint32)),  # 13-14
        0 if is_int else 1 << (nbits - 1),                 # 15: sign bit of a code
        0xFF if is_int else 0,                             # 16: two's complement: code ^ 0xFF
        m, emin,                                           # 17-18
        int(np.float32(np.ldexp(1.0, emin - m)).view(np.uint32)),   # 19: quantum 2^(emin-m)
        rbits, min(rbits, d),                              # 20-21: r, k
        1 if is_int else 0,                                # 22: ... + 1
        0 if is_int else 0xFFFFFFFF,                       # 23: a zero keeps its sign (FP)
        # run_rne: C = 2^(max(ey, emin) - m + 23) from y's exponent field, clamped to
        # [emin, emax + 2] (above, every value saturates anyway), plus (23 - m) << 23
        (23 - m) << 23,                                    # 24: cadd
        (emin + 127) << 23, (emax_e + 2 + 127) << 23,      # 25-26: clamp of the field
        (126 + emin) << m,                                 # 27: code = (r >> d) - this
        int(np.float32(np.ldexp(1.0, m - emin)).view(np.uint32)),   # 28: 2^(m - emin)
    ], dtype=np.int64)


@njit(cache=True, inline="always")
def block_consts(E, FC):
    """(thr, KE, E23, dbias, tiny_block) for the block shift 2^-E (module docstring), the
    first three as uint32 patterns (modulo 2^32)."""
    m = FC[17]
    emin = FC[18]
    thr = np.uint32(max(127 + emin + E, 1) << 23)
    ke = np.uint32(((126 + E + emin) << m) & 0xFFFFFFFF)
    e23 = np.uint32((E << 23) & 0xFFFFFFFF)
    return thr, ke, e23, np.uint32(max(emin - m + 150 + E, 0)), emin + E < -126


@njit(cache=True, inline="always")
def unpack(FC):
    """The per-call constants as typed scalars (read once, before a loop: inside it, reads of
    FC could not be hoisted past the stores to the outputs)."""
    u32 = np.uint32
    return (u32(FC[0]), u32(FC[1]), u32(FC[2]), u32(FC[3]), u32(FC[4]), u32(FC[5]),
            u32(FC[6]), u32(FC[7]), u32(FC[8]), u32(FC[9]), u32(FC[10]), u32(FC[11]),
            u32(FC[12]), u32(FC[13]), u32(FC[14]), u32(FC[15]), u32(FC[16]),
            u32(FC[19]).view(np.float32), u32(FC[20]), u32(FC[21]), u32(FC[22]), u32(FC[23]))


@njit(cache=True, inline="always")
def _finish(ax, sgn, is_n, rn, q, K, ke, e23):
    """Code and value patterns from the two paths' results, then _pack."""
    (d, low, keep, c0, cpar, cpos, cneg, rto, t_half, t_rne, t_pos, t_neg, t_rto, maxcode,
     maxbits, signc, xm, qscale, rbits, k, addc, zm) = K
    code = sel32(is_n, sub32(shr32(rn, d), ke), q)
    # q < 2^31 in every lane (dt >= 1): the signed conversion is exact and vectorises on AVX2
    qv = np.float32(np.float32(np.int32(q)) * qscale).view(np.uint32)
    val = sel32(is_n, sub32(rn, e23), qv)
    return _pack(code, val, ax, sgn, maxcode, maxbits, signc, xm, addc, zm)


@njit(cache=True, inline="always")
def _pack(code, val, ax, sgn, maxcode, maxbits, signc, xm, addc, zm):
    """(code byte, value pattern, saturated, flushed) of an element's magnitude code and value
    pattern: saturation at maxcode, then the sign; flushed: the input pattern ax nonzero, the
    code 0.  (The end of both _finish and _rne_one.)"""
    sat = gt32(code, maxcode)
    code = sel32(sat, maxcode, code)
    val = sel32(sat, maxbits, val)
    nz = ne32(code, _U0)
    # code byte: FP sign-magnitude code | sign bit; MXINT8 two's complement (code ^ 0xFF) + 1,
    # whose low byte is 0 for code 0 (no -0); the caller keeps the low byte
    cb = sel32(ne32(sgn, _U0), or32(add32(xor32(code, xm), addc), signc), code)
    # value: FP keeps the sign of a zero (-0.0), MXINT8's zero is +0
    vb = or32(val, and32(sgn, sel32(nz, np.uint32(0xFFFFFFFF), zm)))
    return cb, vb, sat, (not nz) & ne32(ax, _U0)


@njit(cache=True, inline="always")
def _min32(a, b):
    return sel32(lt32(a, b), a, b)


@njit(cache=True, inline="always")
def _max32(a, b):
    return sel32(gt32(a, b), a, b)


@njit(cache=True, inline="always")
def _subnormal_parts(a, dbias):
    """(sig, drop) of the subnormal-range path: sig with its hidden bit (none for a float32
    subnormal), drop = dbias - max(Ex, 1) modulo 2^32 (dbias >= 0 in every block that reaches
    the subnormal path; lanes of the normal path may wrap: their drop is never used)."""
    ex = shr32(a, np.uint32(23))
    sig = or32(and32(a, F32_FRAC), sel32(ne32(ex, _U0), F32_HIDDEN, _U0))
    return sig, sub32(dbias, _max32(ex, _U1))


@njit(cache=True, inline="always")
def _det_one(b, ax, K, BC):
    """One element, deterministic modes: (code byte, value pattern, saturated, flushed,
    slow)."""
    (d, low, keep, c0, cpar, cpos, cneg, rto, t_half, t_rne, t_pos, t_neg, t_rto, maxcode,
     maxbits, signc, xm, qscale, rbits, k, addc, zm) = K
    thr, ke, e23, dbias, tiny_block = BC
    a = and32(b, F32_ABS)
    sgn = xor32(b, a)
    neg = ne32(sgn, _U0)
    # normal range: round at bit d
    inc = add32(add32(c0, and32(shr32(a, d), cpar)), sel32(neg, cneg, cpos))
    rn = or32(and32(add32(a, inc), keep), sel32(ne32(and32(a, low), _U0), rto, _U0))
    # subnormal range: round at bit drop (capped at 25)
    sig, drop = _subnormal_parts(a, dbias)
    dt = _max32(_min32(drop, np.uint32(25)), _U1)
    halft = shl32(_U1, sub32(dt, _U1))
    lowt = sub32(shl32(_U1, dt), _U1)
    inct = add32(add32(sub32(and32(halft, t_half), t_rne), and32(shr32(sig, dt), t_rne)),
                 and32(lowt, sel32(neg, t_neg, t_pos)))
    q = or32(shr32(add32(sig, inct), dt), sel32(ne32(and32(sig, lowt), _U0), t_rto, _U0))
    cb, v, s, f = _finish(ax, sgn, ge32(a, thr), rn, q, K, ke, e23)
    sl = tiny_block & lt32(a, F32_HIDDEN) & ne32(a, _U0)
    return cb, v, s, f & (not sl), sl


@njit(cache=True, inline="always")
def _sr_one(b, ax, u, K, BC):
    """One element, stochastic rounding with the random bits u: as _det_one."""
    (d, low, keep, c0, cpar, cpos, cneg, rto, t_half, t_rne, t_pos, t_neg, t_rto, maxcode,
     maxbits, signc, xm, qscale, rbits, k, addc, zm) = K
    thr, ke, e23, dbias, tiny_block = BC
    uh = lo32(u >> U64_32)                            # the top 32 random bits
    a = and32(b, F32_ABS)
    sgn = xor32(b, a)
    rn = and32(add32(a, shl32(shr32(uh, sub32(np.uint32(32), k)), sub32(d, k))), keep)
    sig, drop = _subnormal_parts(a, dbias)
    dts = _max32(_min32(drop, np.uint32(31)), _U1)
    kt = _min32(rbits, dts)
    inct = shl32(shr32(uh, sub32(np.uint32(32), kt)), sub32(dts, kt))
    q = shr32(add32(sig, inct), dts)
    far = ge32(drop, add32(np.uint32(24), rbits))
    q = sel32(far, _U0, q)
    is_n = ge32(a, thr)
    cb, v, s, f = _finish(ax, sgn, is_n, rn, q, K, ke, e23)
    sl = ((tiny_block & lt32(a, F32_HIDDEN))
          | (gt32(drop, np.uint32(31)) & (not far) & (not is_n))) & ne32(a, _U0)
    return cb, v, s, f & (not sl), sl


# The four loops (MX or NVFP4 input, deterministic or SR) are one generic loop, _run, whose
# flags nv and sr are constants of its four callers: inlined there, each is one straight loop
# from 0 over slices with the other cases' branches folded away (a loop over range(lo, hi) of
# whole arrays, or a branch on a run-time flag inside it, keeps LLVM from vectorising).  Each
# returns (saturated, flushed, slow).

@njit(cache=True, inline="always")
def _elem(j, xs, xf, rcp, K, BC, u, nv, sr):
    """Element j: y's pattern (x's, or fl32(x * rcp)'s with nv) rounded by _det_one or, with
    sr, by _sr_one with the random bits u."""
    xb = xs[j]
    b = np.float32(xf[j] * rcp).view(np.uint32) if nv else xb
    ax = and32(xb, F32_ABS)
    if sr:
        return _sr_one(b, ax, u, K, BC)
    return _det_one(b, ax, K, BC)


@njit(cache=True, inline="always")
def _put(j, es, vs, cb, v, s, f, sl, sat, fl, slow):
    """Store element j's code and value; the three counts plus its flags."""
    es[j] = np.uint8(cb)
    vs[j] = v
    return (add32(sat, sel32(s, _U1, _U0)), add32(fl, sel32(f, _U1, _U0)),
            add32(slow, sel32(sl, _U1, _U0)))


@njit(cache=True, inline="always")
def _run(xs, xf, rcp, es, vs, K, BC, key, base, nv, sr):
    """The loop of the four run_* functions (nv, sr: their constants).  The deterministic MX
    loop goes 16 elements at a time (then the rest one by one); the others in one loop.
    Element j's random bits are random_bits(key, base + j) = mix(key, weyl(base + j)), the
    Weyl term carried as a sum (softfloat.rng.mix: LLVM otherwise keeps the product
    (base + j) * 0x9E3779B97F4A7C15, three vpmuludq a vector on AVX2)."""
    sat = _U0
    fl = _U0
    slow = _U0
    n = xs.size
    n16 = 0 if (nv or sr) else n - n % 16
    for j0 in range(0, n16, 16):
        for jj in range(16):
            j = j0 + jj
            cb, v, s, f, sl = _elem(j, xs, xf, rcp, K, BC, U64_0, nv, sr)
            sat, fl, slow = _put(j, es, vs, cb, v, s, f, sl, sat, fl, slow)
    w = weyl(base + n16)
    for j in range(n16, n):
        u = mix(key, w) if sr else U64_0
        w += WEYL_STEP
        cb, v, s, f, sl = _elem(j, xs, xf, rcp, K, BC, u, nv, sr)
        sat, fl, slow = _put(j, es, vs, cb, v, s, f, sl, sat, fl, slow)
    return np.int64(sat), np.int64(fl), np.int64(slow)


@njit(cache=True, inline="always")
def run_det(xs, es, vs, K, BC):
    """Deterministic modes over the float32 patterns xs (x * 2^-E)."""
    return _run(xs, xs, np.float32(1), es, vs, K, BC, np.uint64(0), 0, False, False)


@njit(cache=True, inline="always")
def run_det_nv(xs, xf, rcp, es, vs, K, BC):
    """Deterministic modes over y = fl32(x * rcp) (NVFP4's float32 product)."""
    return _run(xs, xf, rcp, es, vs, K, BC, np.uint64(0), 0, True, False)


@njit(cache=True, inline="always")
def run_sr(xs, es, vs, K, BC, key, base):
    """Stochastic rounding of x * 2^-E; element j's bits: random_bits(key, base + j)."""
    return _run(xs, xs, np.float32(1), es, vs, K, BC, key, base, False, True)


@njit(cache=True, inline="always")
def run_sr_nv(xs, xf, rcp, es, vs, K, BC, key, base):
    """Stochastic rounding of y = fl32(x * rcp)."""
    return _run(xs, xf, rcp, es, vs, K, BC, key, base, True, True)


# ----- round to nearest even: the FPU does the rounding ----------------------------------------

@njit(cache=True, inline="always")
def rne_consts(FC):
    """run_rne's per-call constants as typed scalars."""
    u32 = np.uint32
    return (u32(FC[24]), u32(FC[25]), u32(FC[26]), u32(FC[0]), u32(FC[27]),
            u32(FC[28]).view(np.float32), u32(FC[25]).view(np.float32), u32(FC[13]),
            u32(FC[14]), u32(FC[15]), u32(FC[16]), u32(FC[22]), u32(FC[23]))


@njit(cache=True, inline="always")
def _rne_one(yf, ax, R):
    """One element in RNE from y (float32): (code byte, value pattern, saturated, flushed).

    |y| + C with C = 2^(max(ey, emin) - m + 23) (ey = y's exponent) lies in [C, 2C), where the
    float32 spacing is 2^(max(ey, emin) - m): the element's quantum; the hardware's RNE addition
    rounds |y| onto that grid (C is an even multiple of the spacing, so its ties go to the even
    multiple, as RNE of |y| does), and subtracting C is exact (Sterbenz).  r is then the element
    value; its code is (r >> d) - ((126 + emin) << m) (exponent field rebiased, fraction kept)
    at or above 2^emin, r * 2^(m - emin) (an integer < 2^m) below.  The exponent field is
    clamped to [emin, emax + 2]: above, r >= 2^(emax + 2) saturates whatever its rounding
    (this also keeps C finite); +-Inf stays Inf and saturates."""
    (cadd, eminf, emaxf, d, k2, scl, tiny, maxcode, maxbits, signc, xm, addc, zm) = R
    yb = np.float32(yf).view(np.uint32)
    a = and32(yb, F32_ABS)
    sgn = xor32(yb, a)
    ef = and32(a, F32_INF)
    ef = _min32(_max32(ef, eminf), emaxf)
    c = np.uint32(add32(ef, cadd)).view(np.float32)
    r = (np.uint32(a).view(np.float32) + c) - c
    rb = np.float32(r).view(np.uint32)
    # below 2^emin: r * 2^(m - emin) is the code, an integer < 2^m (exact); r is clamped first
    # (a select, which vectorises, unlike min()) so that no lane converts an out-of-range float
    rs = np.float32(r if r < tiny else tiny) * scl
    code = sel32(ge32(rb, eminf), sub32(shr32(rb, d), k2), np.uint32(np.int32(rs)))
    return _pack(code, rb, ax, sgn, maxcode, maxbits, signc, xm, addc, zm)


@njit(cache=True)
def run_rne(xs, xf, ms, es, vs, R):
    """RNE over a run of elements: y = fl32(x * ms[j]), ms the element's factor: 2^-E (MX:
    exact whenever y is a float32 normal, and any |y| < 2^-126 rounds to 0 in every element
    format whatever its own rounding) or NVFP4's r (the recipe's product).  One flat loop
    (LLVM vectorises it; a run is a whole chunk of blocks when they are contiguous, which is
    why the factor comes per element).  No element needs round_value: returns (saturated,
    flushed, 0)."""
    sat = _U0
    fl = _U0
    for j in range(xs.size):
        cb, v, s_, f = _rne_one(np.float32(xf[j] * ms[j]), and32(xs[j], F32_ABS), R)
        es[j] = np.uint8(cb)
        vs[j] = v
        sat = add32(sat, sel32(s_, _U1, _U0))
        fl = add32(fl, sel32(f, _U1, _U0))
    return np.int64(sat), np.int64(fl), np.int64(0)
