"""Fast conversion kernel: float32 input -> a format carried in float32 (fp16, bf16, tf32, fp8...).

Same results, bit for bit, and same flag counts as ``round_kernel`` (which calls round_value per
element), from integer operations on the float32 bit patterns that the compiler vectorises; only
rare elements are handed to round_value.  The exhaustive test (tests/test_exhaustive.py) checks
every one of the 2^32 float32 inputs for fp16 and bf16 in the deterministic modes, and
tests/test_round.py compares this kernel with round_kernel in every mode.

Imports numpy, numba and the sibling kernel modules only.

How it works.  Let a be the 31-bit magnitude pattern of x, and d = 23 - m the number of float32
fraction bits below the format's last place.  Each chunk is done in up to three passes, the
later ones only over the elements an earlier pass marked (while the chunk is in cache).

Pass 1, every element (the common case: normal range, a >= pattern(2^emin)).  Float32 patterns
  are ordered like magnitudes and linear inside a binade, so rounding to p = m + 1 bits is "add
  an increment, clear the low d bits"; a carry out of the fraction bumps the exponent field,
  which is the next binade (1.11..1 + ulp = 10.0).  Increments, half = 2^(d-1), low = 2^d - 1:
      RNE half - 1 + (last kept bit);  RNA half;  RTZ 0;  RUP low if x > 0;  RDN low if x < 0;
      RTO none, then OR the last kept bit with "remainder != 0";
      RHU half if x > 0 (ties grow the magnitude), half - 1 if x < 0 (ties truncate it);
      SR  (u >> (64 - k)) << (d - k) with k = min(r, d): the top k of the random bits u.
  SR proof: round_value rounds up iff floor(f * 2^r) + (u >> (64 - r)) >= 2^r, f = rem / 2^d.
  If r >= d: floor(f * 2^r) = rem * 2^(r-d) exactly; write u >> (64-r) = A * 2^(r-d) + B with
  A = u >> (64-d) and B < 2^(r-d); the sum (rem + A) * 2^(r-d) + B reaches 2^r iff rem + A >= 2^d,
  i.e. iff adding A carries into bit d.  If r < d: rem = hi * 2^(d-r) + lo with lo < 2^(d-r),
  floor(f * 2^r) = hi, and rem + A * 2^(d-r) = (hi + A) * 2^(d-r) + lo reaches 2^d iff
  hi + A >= 2^r.
  Overflow: the rounded pattern exceeds pattern(max) (this includes every input >= 2^(emax+1));
  the result is the mode's overflow value, computed once per call by round_pack's own
  overflow_result.  Elements below 2^emin, Inf and NaN are marked for pass 2.
Pass 2, deterministic modes, when at least 1/8 of the chunk is marked (fewer go to pass 3):
* Below 2^emin with subnormals the quantum is 2^(emin - m).  When emin = -126 (8-bit exponent
  formats) these are exactly the float32 subnormals, whose patterns are value / 2^-149, so the
  same bit-d rounding applies.  Otherwise (emin > -126) x = sig * 2^(E' - 150) (E' = max(E, 1))
  is rounded at a variable bit, drop = (emin - m) - (E' - 150) > d, with the same rules; a drop
  above 25 behaves like 25 (sig < 2^24 lies below half a quantum: q = 0 plus the mode's carry).
  The result q * 2^(emin - m) is a float32 normal (emin - m >= -84 when the exponent has at
  most 7 bits) and is formed exactly as float32(q) * 2^(emin - m).
  Underflow = inexact and tiny after rounding; when the grid rounding stays below 2^emin the
  unbounded-exponent rounding does too, so only a result that carried up to 2^emin needs the
  unbounded rounding: such elements are marked for pass 3.
* Flush-to-zero formats: a float32 normal below 2^emin is rounded to p bits at bit d (that IS
  the unbounded-exponent rounding) and flushes to a signed zero when it stays below 2^emin;
  nonzero float32 subnormals are marked for pass 3.
* NaN gives the float32 quiet NaN 0x7FC00000 (the arithmetic's NaN results are this canonical
  NaN); Inf goes to round_value (kept in ieee formats, NaN in fn formats, +-max when saturating
  or in "none" formats: softfloat._roundpack).  Unsigned and zero-less formats do not take
  this kernel (softfloat.arith sends them to round_value).
Pass 3: round_value for what is still marked (with the same random bits as round_kernel).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._intrinsics import (add32, and32, ge32, gt32, lo32, lt32, ne32, or32, sel32, shl32, shr32,
                          xor32)
from ._kernels_round import CHUNK, add_flag_counts
from ._primitives import F32_ABS as _ABS
from ._primitives import F32_FRAC as _M23
from ._primitives import F32_HIDDEN as _HID
from ._primitives import F32_INF as _INF
from ._primitives import F32_QNAN as _QNAN
from ._roundpack import (INEXACT, INVALID, OVERFLOW, RDN, RHU, RNA, RNE, RTO, RUP, SR,
                         UNDERFLOW,
                         overflow_result, round_value)
from .rng import random_bits

_SLOW = np.uint32(0xFFFFFFFF)   # marker in the output: element to recompute with round_value
_U0 = np.uint32(0)
_U1 = np.uint32(1)


def fast_params(fmt, mode: int, rbits: int) -> np.ndarray:
    """Per-call parameters of the fast kernel as one int64 array (one array rather than two
    dozen scalars or a tuple keeps the parallel kernel cheap to compile), for formats with a
    float32 carrier and m <= 22 (d >= 1).  Layout: see _unpack."""
    fp = fmt.kernel_params()
    m, emin = fp.man_bits, fp.emin
    subn, infnan = fp.subnormals, fp.inf_nan
    maxval = fp.maxval
    d = 23 - m
    low = (1 << d) - 1
    half = 1 << (d - 1)
    k = min(rbits, d)
    ovp = np.float32(overflow_result(False, mode, fp)[0]).view(np.uint32)
    ovn = np.float32(overflow_result(True, mode, fp)[0]).view(np.uint32)
    # subnormal quantum 2^(emin - m); unused when emin = -126 (then 1.0: a float32-subnormal
    # operand would cost a microcode assist per element on x86)
    qscale = np.float32(1.0 if emin == -126 else np.ldexp(1.0, emin - m))
    return np.array([
        d, low, 0xFFFFFFFF ^ low,                        # 0-2: d, low, keep
        {RNE: half - 1, RNA: half, RHU: half - 1}.get(mode, 0),  # 3: c0
        1 if mode == RNE else 0,                         # 4: parity bit weight
        low if mode == RUP else (1 if mode == RHU else 0),  # 5: cpos
        low if mode == RDN else 0,                       # 6: cneg
        (1 << d) if mode == RTO else 0,                  # 7: lsb OR-ed by RTO
        64 - k, d - k,                                   # 8-9: SR increment shifts
        (emin + 127) << 23,                              # 10: pattern of 2^emin
        int(np.float32(maxval).view(np.uint32)),         # 11: pattern of max
        int(ovp), int(ovn),                              # 12-13: overflow results
        infnan == 0, INVALID if infnan == 2 else 0,      # 14-15: ieee, flag for NaN in
        subn, emin == -126,                              # 16-17: subnormals, tiny = f32 sub
        emin - m + 150,                                  # 18: drop = this - max(E, 1)
        int(qscale.view(np.uint32)),                     # 19: bits of the subnormal quantum
        0xFFFFFFFF if mode in (RNE, RNA) else 0,         # 20: tiny path: half used
        1 if mode == RNE else 0,                         # 21: tiny path: RNE's -1 / parity
        0xFFFFFFFF if mode == RUP else 0,                # 22: tiny path: RUP mask
        0xFFFFFFFF if mode == RDN else 0,                # 23: tiny path: RDN mask
        1 if mode == RTO else 0,                         # 24: tiny path: RTO
        mode, rbits,                                     # 25-26: round_value's mode, SR bits
    ], dtype=np.int64)


@njit(cache=True, inline="always")
def _unpack(P):
    """The constants of the per-element functions, typed, from fast_params' array."""
    u32 = np.uint32
    return (u32(P[0]), u32(P[1]), u32(P[2]), u32(P[3]), u32(P[4]), u32(P[5]), u32(P[6]),
            u32(P[7]), np.uint64(P[8]), u32(P[9]), u32(P[10]), u32(P[11]), u32(P[12]),
            u32(P[13]), P[14] != 0, P[15], P[16] != 0, P[17] != 0, P[18],
            u32(P[19]).view(np.float32), u32(P[20]), u32(P[21]), u32(P[22]), u32(P[23]),
            u32(P[24]))


@njit(cache=True, inline="always")
def _one(b, C):
    """(output pattern, flag bits, needs round_value) for the float32 pattern b, in the
    deterministic modes (stochastic rounding leaves its rare special elements to round_value)."""
    (ud, low, keep, c0, cpar, cpos, cneg, rto_lsb, s1, s2, tinybits, maxbits, ovp, ovn,
     ieee, nanflag, subn, tiny_same, dbias, qscale, t_half, t_rne, t_pos, t_neg, t_rto) = C
    a = b & _ABS
    sgn = b ^ a
    neg = sgn != _U0
    # --- rounding at pattern bit d (normal range; also float32 subnormals when emin = -126)
    inc = c0 + ((a >> ud) & cpar) + (cneg if neg else cpos)
    inexn = (a & low) != _U0
    rn = ((a + inc) & keep) | (rto_lsb if inexn else _U0)
    # --- rounding at a variable bit below 2^emin (emin > -126)
    E = a >> np.uint32(23)
    sig = (a & _M23) | (_HID if E != _U0 else _U0)
    drop = dbias - (np.int64(E) if E != _U0 else np.int64(1))
    dt = np.uint32(min(max(drop, 1), 25))
    halft = _U1 << (dt - _U1)
    lowt = (_U1 << dt) - _U1
    inct = (halft & t_half) - t_rne + ((sig >> dt) & t_rne) + (lowt & (t_neg if neg else t_pos))
    inext = (sig & lowt) != _U0
    q = ((sig + inct) >> dt) | (t_rto if inext else _U0)
    rt = np.float32(np.float32(q) * qscale).view(np.uint32)
    if tiny_same:
        rt = rn
        inext = inexn
    # --- select
    slow = False
    if a > _INF:
        out = _QNAN
        fl = nanflag
    elif a == _INF:
        out = b
        fl = 0
        slow = True                               # Inf: round_value's rules (kept, NaN, max)
    elif rn > maxbits:
        out = ovn if neg else ovp
        fl = OVERFLOW | INEXACT
    elif a >= tinybits:
        out = sgn | rn
        fl = INEXACT if inexn else 0
    elif subn:
        out = sgn | rt
        fl = (INEXACT | UNDERFLOW) if inext else 0
        slow = inext and rt >= tinybits           # carried up to 2^emin: ask round_value
    elif a == _U0:
        out = b
        fl = 0
    elif E == _U0:
        out = b
        fl = 0
        slow = True                               # float32 subnormal, flush-to-zero format
    elif rn < tinybits:
        out = sgn
        fl = UNDERFLOW | INEXACT
    else:
        out = sgn | rn
        fl = INEXACT
    return out, fl, slow


@njit(cache=True, inline="always")
def _normal_one(b, u, is_sr, C):
    """Pass 1: (pattern, flags, special) with special = below 2^emin, Inf or NaN (left for
    pass 2); rounding at bit d and overflow otherwise.  Kept lean: this is the common case.

    The pattern and the tests are computed with softfloat._intrinsics' 32-bit operations (plain
    uint32 expressions would be widened to 64 bits by Numba, halving the SIMD width).  No sum
    wraps: a < 2^31 and every increment is < 2^d <= 2^23."""
    (ud, low, keep, c0, cpar, cpos, cneg, rto_lsb, s1, s2, tinybits, maxbits, ovp, ovn,
     ieee, nanflag, subn, tiny_same, dbias, qscale, t_half, t_rne, t_pos, t_neg, t_rto) = C
    a = and32(b, _ABS)
    sgn = xor32(b, a)
    neg = ne32(sgn, _U0)
    if is_sr:
        inc = shl32(lo32(u >> s1), s2)
    else:
        inc = add32(add32(c0, and32(shr32(a, ud), cpar)), sel32(neg, cneg, cpos))
    inexn = ne32(and32(a, low), _U0)
    rn = or32(and32(add32(a, inc), keep), sel32(inexn, rto_lsb, _U0))
    special = lt32(a, tinybits) | ge32(a, _INF)
    ovf = gt32(rn, maxbits)
    out = sel32(special, _SLOW, sel32(ovf, sel32(neg, ovn, ovp), or32(sgn, rn)))
    fl = 0 if special else ((OVERFLOW | INEXACT) if ovf else (INEXACT if inexn else 0))
    return out, fl, special


# Pass-1 loops: four variants so that "is_sr" and "counting flags" are constants in each (after
# inlining, the branches fold away and the loop vectorises).  They take slices and loop from 0:
# a loop over range(lo, hi) of the whole arrays measured 1.6x slower.  Each returns the number
# of elements marked for pass 2 and the first and last marked index (so that later passes
# skip the rest of the chunk); the flag variants add the others' flags to counts[c].

@njit(cache=True)
def _marked_span(os):
    """(count, first, last) of the elements pass 1 marked (_SLOW: never a pass-1 result, whose
    NaNs are all marked), for the loops that only record whether anything was marked: a
    running first/last index would put 64-bit lanes into their vectorised loop."""
    n = os.size
    cnt = 0
    first = n
    last = -1
    for j in range(n):
        sp = os[j] == _SLOW
        cnt += sp
        first = min(first, j if sp else n)
        last = max(last, j if sp else -1)
    return cnt, first, last


@njit(cache=True)
def _loop_det(xs, os, C):
    anysp = False
    for j in range(xs.size):
        o, fl, sp = _normal_one(xs[j], np.uint64(0), False, C)
        os[j] = o
        anysp |= sp
    return _marked_span(os) if anysp else (0, xs.size, -1)


@njit(cache=True)
def _loop_sr(xs, os, C, key, base):
    anysp = False
    for j in range(xs.size):
        o, fl, sp = _normal_one(xs[j], random_bits(key, base + j), True, C)
        os[j] = o
        anysp |= sp
    return _marked_span(os) if anysp else (0, xs.size, -1)


@njit(cache=True)
def _loop_det_flags(xs, os, C, counts, c):
    nspecial = 0
    n = xs.size
    first = n
    last = -1
    n_inex = 0
    n_over = 0
    for j in range(n):
        o, fl, sp = _normal_one(xs[j], np.uint64(0), False, C)
        os[j] = o
        nspecial += sp
        first = min(first, j if sp else n)
        last = max(last, j if sp else -1)
        n_inex += fl & INEXACT
        n_over += (fl & OVERFLOW) >> 2
    counts[c, 0] += n_inex
    counts[c, 2] += n_over
    return nspecial, first, last


@njit(cache=True)
def _loop_sr_flags(xs, os, C, key, base, counts, c):
    nspecial = 0
    n = xs.size
    first = n
    last = -1
    n_inex = 0
    n_over = 0
    for j in range(n):
        o, fl, sp = _normal_one(xs[j], random_bits(key, base + j), True, C)
        os[j] = o
        nspecial += sp
        first = min(first, j if sp else n)
        last = max(last, j if sp else -1)
        n_inex += fl & INEXACT
        n_over += (fl & OVERFLOW) >> 2
    counts[c, 0] += n_inex
    counts[c, 2] += n_over
    return nspecial, first, last


@njit(cache=True)
def _special(xs, os, C, want_flags, counts, c):
    """Pass 2 (deterministic modes, chunks where pass 1 marked many elements): every element
    through _one, vectorised, kept where marked; returns how many still need round_value."""
    nslow = 0
    n_inex = 0
    n_under = 0
    n_over = 0
    n_inv = 0
    for j in range(xs.size):
        o, fl, slow = _one(xs[j], C)
        marked = os[j] == _SLOW
        os[j] = (_SLOW if slow else o) if marked else os[j]
        nslow += marked & slow
        fl = fl if (marked & (not slow)) else 0
        n_inex += fl & INEXACT
        n_under += (fl & UNDERFLOW) >> 1
        n_over += (fl & OVERFLOW) >> 2
        n_inv += (fl & INVALID) >> 3
    if want_flags:
        counts[c, 0] += n_inex
        counts[c, 1] += n_under
        counts[c, 2] += n_over
        counts[c, 3] += n_inv
    return nslow


@njit(cache=True)
def _fixup(xs, os, base, c, P, fp, key, want_flags, counts):
    """Pass 3: round_value for the marked elements (with the same u as round_kernel)."""
    mode, rbits = P[25], P[26]
    for j in range(xs.size):
        if os[j] == _SLOW:
            x = np.float64(np.uint32(xs[j]).view(np.float32))
            u = random_bits(key, base + j) if mode == SR else np.uint64(0)
            r, fl = round_value(x, 0, fp, mode, u, rbits)
            os[j] = np.float32(r).view(np.uint32)
            if want_flags:
                add_flag_counts(counts, c, fl)


@njit(cache=True)
def _chunk(xs, os, base, c, P, fp, key, want_flags, counts):
    """Round one chunk: pass 1, then pass 2 and round_value for what pass 1 marked."""
    C = _unpack(P)
    is_sr = P[25] == SR
    if is_sr:
        if want_flags:
            nspecial, first, last = _loop_sr_flags(xs, os, C, key, base, counts, c)
        else:
            nspecial, first, last = _loop_sr(xs, os, C, key, base)
    elif want_flags:
        nspecial, first, last = _loop_det_flags(xs, os, C, counts, c)
    else:
        nspecial, first, last = _loop_det(xs, os, C)
    if nspecial == 0:
        return
    xm = xs[first:last + 1]
    om = os[first:last + 1]
    # Pass 2 pays off when many elements are marked (at least 1/8 of the span); a few, and
    # those of stochastic rounding and of RHU (whose variable-bit tiny path pass 2 does not
    # have), go straight to round_value.
    if is_sr or P[25] == RHU or 8 * nspecial < xm.size or \
            _special(xm, om, C, want_flags, counts, c) > 0:
        _fixup(xm, om, base + first, c, P, fp, key, want_flags, counts)


@njit(parallel=True, cache=True)
def round_f32_kernel(xb, ob, P, fp, key, base, want_flags, counts):
    """ob = patterns of round(x) for the float32 patterns xb (1-d uint32 views made by the
    caller: views made inside a parallel function can lose their writes); P from fast_params,
    fp the format's FormatParams, key the SR key (seed_key), base the global index of element 0
    (its random bits are those of index base + i), counts[chunk, flag] the flag counts when
    want_flags."""
    n = xb.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in prange(nch):
        # Numba types the prange index as int64 when it types this function and as uint64 in
        # the parallel region it builds: np.int64 keeps one signature for the callees (else
        # each is compiled twice, doubling the cold compile time).
        ci = np.int64(c)
        lo = ci * CHUNK
        hi = min(n, lo + CHUNK)
        _chunk(xb[lo:hi], ob[lo:hi], base + lo, ci, P, fp, key, want_flags, counts)


@njit(cache=True)
def round_f32_serial(xb, ob, P, fp, key, base, want_flags, counts):
    """round_f32_kernel on the calling thread alone: the same chunks in the same order, so the
    same bits and flag counts; for small arrays, where waking the worker threads costs more
    than the work (see rounding.SERIAL_MAX)."""
    n = xb.size
    nch = (n + CHUNK - 1) // CHUNK
    for c in range(nch):
        ci = np.int64(c)
        lo = ci * CHUNK
        hi = min(n, lo + CHUNK)
        _chunk(xb[lo:hi], ob[lo:hi], base + lo, ci, P, fp, key, want_flags, counts)
