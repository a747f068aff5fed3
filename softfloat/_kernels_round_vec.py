"""The vectorised conversion kernel: float32 or float64 input -> any format, from integer
operations on the bit patterns that the compiler vectorises.

Same results, bit for bit, and same flag counts as round_value element by element
(softfloat._kernels_round), in every mode, for every input class (normal, subnormal results,
underflow to zero, overflow, zeros, Inf, NaN, negative inputs of unsigned formats).  Written once
for both input widths with softfloat._lanes: 32-bit lanes for float32 patterns, 64-bit lanes for
float64 ones; the result patterns are those of the format's carrier (float32 or float64).
tests/test_round_vec.py compares it with round_value on every data class in every mode, and the
exhaustive test checks all 2^32 float32 inputs for fp16 and bf16.

Notation.  W = 32 / 64 lane bits, F = 23 / 52 fraction bits, B = 127 / 1023 the input's bias; a
the input's magnitude pattern, E = a >> F its biased exponent; m, emin, emax the format's; d = F - m
the input fraction bits below the format's last place.  Patterns of a binary float are ordered
like magnitudes and linear inside a binade, so rounding to p = m + 1 bits in a normal binade is
"add an increment, clear the low d bits"; a carry out of the fraction bumps the exponent field,
which is the next binade (1.11..1 + ulp = 10.0).  ``_round_at(x, s)`` rounds an integer at bit s
with the mode's increment (half = 2^(s-1), low = 2^s - 1):
    RNE half - 1 + (bit s);  RNA half;  RHU half, half - 1 for x < 0 (ties toward +inf);
    RTZ 0;  RUP low if x > 0;  RDN low if x < 0;  RTO none, then OR bit s if inexact;
    SR  (u >> (64 - k)) << (s - k), k = min(r, s): the top k of the 64 random bits u.
SR proof: round_value rounds up iff floor(f * 2^r) + (u >> (64 - r)) >= 2^r, f = rem / 2^s.  If
r >= s: floor(f 2^r) = rem 2^(r-s); write u >> (64-r) = A 2^(r-s) + B with A = u >> (64 - s),
B < 2^(r-s); the sum (rem + A) 2^(r-s) + B reaches 2^r iff rem + A >= 2^s, i.e. iff adding A
carries into bit s.  If r < s: rem = hi 2^(s-r) + lo, floor(f 2^r) = hi, and
rem + A 2^(s-r) = (hi + A) 2^(s-r) + lo reaches 2^s iff hi + A >= 2^r.

Each chunk is done in passes, the later ones only over the blocks of elements an earlier one
marked (while the chunk is in cache; see "the passes over a chunk" below):
Pass 1 (``_lean``), every element: the normal range a >= pattern(2^emin), rounding at bit d and
  overflow (the rounded pattern above pattern(max), every input >= 2^(emax+1) included; the
  result is the mode's overflow value, computed once per call by round_pack's own
  overflow_result), and zeros in formats that have one (a zero's pattern rounds to itself in
  every mode, exactly: a = 0 has no bit below d, and every increment is below 2^d, so
  rn = 0 and the result is sgn | 0, the signed zero round_value returns).  Nonzero elements
  below 2^emin, zeros of formats without one, Inf (without flags only where its result is not
  the overflow result: see vec_params), NaN and negative inputs of unsigned formats are
  marked.  With 64-bit lanes into a float32 carrier its results are narrowed by
  one exact float64 -> float32 conversion (``lean_out``), the later passes' by narrow_bits.
Pass 1s (``_special_pass``), only when flags are not counted, in stochastic rounding or where
  pass 1x (next) does not apply: the Inf and NaN inputs (of a sign the format accepts) of the
  blocks pass 1 marked get their per-call results by pass 1x's selects (a NaN's: its sign and
  top payload bits in ieee formats), so that a sprinkling of them sends no block to a later
  pass (which would draw every element's random bits again).  Where pass 1x applies in the
  other modes it costs what pass 1 does and settles them itself.
Pass 1x (``_lean_ext``), only when flags are not counted, in formats with subnormals:
  pass 1 plus Inf and NaN by selects (their per-call results, as in pass 2) and the elements
  below 2^emin (zeros included); it stores every element of the blocks it visits (pass 1's
  results again where pass 1 settled them, so it never reads the output); rounded by
* the carrier add, in RNE where q = 2^qe (qe = emin - m) is a normal float of the input width
  (fp16, the fp8 formats; bf16 from float64): |x| rounds to (|x| + C) - C, C = 1.5 * 2^(qe + F),
  computed in the input's float arithmetic (IEEE, round to nearest even), then the sign ORed.
  Proof.  0 <= |x| < 2^emin = 2^(qe + m) <= 2^(qe + F - 1) (d >= 1), and C = 3 * 2^(qe + F - 1),
  so 2^(qe + F) < C <= |x| + C < 2^(qe + F + 1): the exact sum lies in a binade whose ulp is
  2^(qe + F - F) = q, and the add rounds it once, to the nearest multiple of q, ties to the even
  one (C + 2^(qe + m) <= 2^(qe + F + 1) is a multiple of q: a rounding up stays representable).
  C / q = 3 * 2^(F - 1) is even, so the sum rounds to C + k q with k the integer nearest |x| / q,
  ties to even k; (C + k q) - C = k q is representable (k <= 2^m: at most m + 1 <= F
  significant bits, k q >= q normal or 0), so the subtraction is exact (Sterbenz, too): k q is
  +0 or a positive normal float, and no second rounding happens.  That is round_value's RNE on
  the subnormal grid: the result's last significand bit is k's parity; |x| >= (2^m - 1/2) q
  rounds to k = 2^m (even), 2^emin itself, the smallest normal, whose pattern is tinybits;
  |x| = 0 gives +0; the sign is ORed afterwards, so -0 and negative inputs that round to zero
  give -0, as round_value (a signed zero in signed formats; negative inputs of unsigned formats
  stay marked).  Carrier subnormal inputs are exact operands of the add (the default floating
  point environment, no flush-to-zero / denormals-are-zero, as for all of softfloat's float
  arithmetic) and no result is a carrier subnormal (q is normal), which some x86 cores
  microcode-assist.  Other modes, formats without subnormals (flush-to-zero: ru decides) or
  without zero, and q below the carrier's normal range fall back to the later passes, except:
* the rounding at bit d (every mode) where the format's emin is the input's, 1 - B, and m >= 1
  (bf16, tf32, e8m1 from float32): the format's quantum q = 2^(1 - B - m) is bit d of the
  input's subnormal patterns (unit 2^(1 - B - F)), and those patterns are linear up into the
  normal range, so pass 1's rounding of the pattern at bit d is already the grid rounding (a
  carry gives 2^emin's pattern; with m = 0 pass 1's RNE and RTO read bit d as the exponent's,
  not as the parity of k q's k, hence m >= 1);
* stochastic rounding on the grid, in float arithmetic (_grid_sr32, _grid_sr64): q * (floor(v)
  + the carry of floor(frac(v) 2^r) + (u >> (64 - r)) into bit r), v = |x| / q, round_value's
  rule, exact where q is a normal float of the input width not above 1 and r <= 31 (float32)
  / 52 (float64); on a linear grid (above) pass 1's rounding.  Elsewhere (more random bits)
  the elements below 2^emin, and negative inputs of unsigned formats, stay marked.  Without
  the extension (flags counted, FTZ formats, the other modes when neither the add nor the
  linear grid applies) pass 2 follows.
Pass 1x with flags (``_lean_ext_flags``), in RNE where the carrier add applies (low_magic;
  not stochastic rounding): pass 1x's results with _finish's flags (below 2^emin inexact iff
  the carrier add's result differs from |x|, underflow iff inexact and pass 1's rounding at
  bit d, ru for a normal input, is below 2^emin; Inf and NaN their per-call flags), negative
  inputs of unsigned formats left to pass 2.  It counts the flags of the elements it settles
  that pass 1 had marked (or of every element, dense), as pass 2 would.
Pass 2 (``_common``), the marked elements, still vectorised, all cases but one: ru at bit d for
  normal inputs and at bit d - 1 for subnormal ones when the format's emin is the input's
  (below, the unbounded p-bit rounding bit varies: pass 3), rg, flags and specials as below.
Pass 3 (``_full``), the elements pass 2 left, all cases:
* ru, the rounding to p bits with an unbounded exponent (which decides tininess, and the result
  of flush-to-zero formats): at bit d for normal inputs, at bit L - 1 - m (L the bit length of a,
  from the exponent of a converted to float) for subnormal inputs;
* rg, the rounding on the format's grid below 2^emin (subnormal formats): the input is
  sig * 2^(E' - B - F) (E' = max(E, 1), sig with the hidden bit), rounded at the variable bit
  drop = (emin - m) - (E' - B - F); a drop above F + 2 behaves like F + 2 in the deterministic
  modes (sig < 2^(F+1) lies below half a quantum: q = 0 plus the mode's carry); stochastic
  rounding there rounds up iff (sig >> (drop - k)) + (u >> (64 - k)) >= 2^k, k = min(r, drop)
  (round_value's rule).  The result q * 2^(emin - m) is formed from the float of q (exact) by
  adding emin - m to its exponent field, or, below the carrier's normal range, as
  q << (emin - m + B + F - 1) (the carrier's subnormal patterns are linear);
* underflow = inexact and tiny after rounding (ru < 2^emin: when the grid rounding stays below
  2^emin the p-bit rounding does too, with the same random bits; see round_pack);
* flush-to-zero formats: a tiny ru gives a signed zero (+-2^emin without zero), otherwise ru
  (= 2^emin); zeros, Inf, NaN and negative inputs of unsigned formats get the per-call results
  of round_value's rules (NaN: sign and top payload bits kept in ieee formats).
Pass 4: round_value for what pass 3 could not decide: with 32-bit lanes only the 32 top random
  bits are at hand, so stochastic rounding with r >= 32 far below the grid (k >= 32) is decided
  here when those 32 bits do not already exclude rounding up (they do unless their top 8 bits
  are all ones: at most 1/256 of those elements, and none with the default 24 bits).
Launches.  sf.round compiles only what its data needs (Numba compiles a function at its first
call, so a pass that is never reached is never compiled):
* first, until a process has needed the later passes, pass 1 alone (``RoundVecDetLean`` & co.,
  one class per (stochastic rounding, flags counted) pair), each chunk up to the first block in
  which it marks an element; data in the format's normal range ends there;
* then (``RoundVecDet`` & co.) passes 1 to 2 (``_chunk_passes``) over each chunk from that
  block on (the block done again, its first results and flag counts dropped), and from then
  on in that process this launch alone, from every chunk's first block (``_FULL_LAUNCHED``):
  results, flags and random bits are the same either way, and the second launch would
  otherwise read again from memory the rest of every chunk holding a mark (one fp16 value in
  about 20,000 of N(0,1) data is below 2^-14: half of the chunks);
* passes 3 and 4 (``RoundVecLate``), over the chunks that left elements, if any did.
The first sf.round(x, "fp16") of a process on normal-range data compiled in 16 s with pass 1x
and pass 2, 3.5 s without (Zen 3, fresh cache, 2026-11-29).  The arithmetic gives the elements
that passes 3 and 4 would settle to its scalar op (softfloat._kernels_arith_f32).

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload

from ._driver import INNER, add_flag_counts, launch, n_chunks, record
from ._kernels_bits import carrier_bits, store_carrier
from ._primitives import F32_SIGN, F64_ABS, F64_EXP_FIELD
from ._lanes import (_TWO52, vadd, vand, vcount, veq, vfbits, vge, vgt, vlt, vmagic, vmax,
                     vmerge, vmin, vne, vor, vsel, vsge, vsgt, vshl, vshr, vslt, vsub, vtop,
                     vxor)
from ._roundpack import (INEXACT, INVALID, OVERFLOW, RDN, RHU, RNA, RNE, RTO, RUP, SR,
                         UNDERFLOW, format_params_of, inf_result, overflow_result, round_value,
                         zero_result)
from .formats import FormatParams
from .rng import WEYL_STEP, mix, random_bits, weyl

__all__ = ["VecParams", "RoundVec", "vec_params", "round_vec", "vec_supported"]


class VecParams(NamedTuple):
    """Per-(format, mode, sr bits, lane width) constants of the vectorised kernel, made once by
    :func:`vec_params`; every pattern field has the lane type (np.uint32 / np.uint64)."""

    lane1: object    # 1
    lane0: object    # 0
    ones: object     # all bits set
    W: object        # lane bits: 32 / 64
    Wm1: object      # W - 1
    W8: object       # W - 8
    top8: object     # 0xFF
    F: object        # input fraction bits: 23 / 52
    abs_: object     # magnitude mask
    inf: object      # pattern of Inf (the exponent field)
    lean_inf: object  # pass 1 without flags marks a >= lean_inf: inf, or inf + 1 (see vec_params)
    mf: object       # fraction mask
    hid: object      # the implicit bit 2^F
    quiet: object    # the quiet bit 2^(F-1)
    qnan: object     # the positive quiet NaN
    slow: object     # marker of elements left to the next pass: all ones (a NaN never produced)
    # pass 1: rounding at the constant bit d
    d: object
    dm1: object           # d - 1
    low: object
    keep: object
    c0: object
    cpar: object
    cpos: object
    cneg: object
    rto_lsb: object
    sr_s1: object
    sr_s2: object
    # the format's range and its overflow results
    tinybits: object
    lean_min: object      # smallest pattern pass 1 rounds: max(tinybits, 2^F) (normal input)
    lean_zsh: object      # pass 1's low test is vslt(a + lean_zsh, lean_zmin): a < lean_min,
    lean_zmin: object     # zero excepted where the format has one (see vec_params)
    maxbits: object
    # pass 1 without flags: below 2^emin by the carrier add (RNE) or the pattern rounding
    lean_lo: object       # smallest pattern it rounds: 0, or lean_min (the rest is marked)
    cmagic: object        # pattern of C = 1.5 * 2^(emin - m + F) (0 when unused)
    # pass 1x in stochastic rounding below 2^emin (_grid_sr_ext)
    sr_lim: object        # a < sr_lim takes the grid rounding: tinybits; 0 on a linear grid
    sr_inv_q: object      # where the float formula applies (sr_float in vec_params): the
                          # pattern, in the input's width, of 2^-qe (qe = emin - m)
    sr_two_r: object      # ... of 2^r
    sr_q: object          # ... of 2^qe
    sr_ush: object        # W - r: U >> sr_ush = the top r random bits
    sr_r: object          # r
    sr_slow: object       # a < sr_slow goes to pass 2: tinybits where the float formula
                          # does not apply (and the grid is not linear), else 0
    sr_clamp: object      # its input clamp: tinybits, 0 where it does not apply
    ovp: object
    ovn: object
    # rounding at a variable bit: masks selecting each mode's terms
    m_half: object
    m_rne: object
    m_rhu: object
    m_pos: object
    m_neg: object
    m_rto: object         # for a significand (q | 1 when inexact)
    m_rto_pat: object     # for a pattern: 0 when m = 0 (bit d is the exponent's; p = 1 bit
                          # significands are always odd, RTO truncates)
    m_par_pat: object     # RNE parity mask for a pattern: m_rne, 0 when m = 0 (same reason)
    par1_pat: object      # 1 in RNE when m = 0: the parity of a 1-bit significand
    rbits_t: object
    # signs, specials
    neg_special: object   # the sign bit in unsigned formats (a negative input is special)
    sgn_keep: object      # the sign bit in signed formats
    nan_keep: object      # bits of a NaN input kept (with the quiet bit) in its result
    nan_or: object        # bits set in every NaN result
    nan_fl: object
    inf_pos: object
    inf_neg: object
    inf_fl_pos: object
    inf_fl_neg: object
    zero_pos: object
    zero_neg: object
    zero_fl_pos: object
    zero_fl_neg: object
    low_out: object       # flushed magnitude: 0, or 2^emin in a format without zero
    # below 2^emin
    subn: bool
    low_magic: bool       # pass 1 without flags rounds RNE below 2^emin by (|x| + C) - C
    sub_full: bool        # emin below the input's: subnormal inputs under 2^emin need _full
    cvt_out: bool         # 64-bit lanes into a float32 carrier, every nonzero value of the
                          # format at least 2^-126: the later passes narrow by conversion
    c_bm: object          # B + m: subnormal input's rounding bit = (exponent of float(a)) - B - m
    dbias: object         # emin - m + B + F: drop = dbias - max(E, 1)
    fmax_drop: object     # F + 2
    qe_shift: object      # (emin - m) << F, modulo 2^W
    fq_norm_min: object   # (1 - (emin - m)) << F: float(q) patterns that stay normal
    qsub_shift: object    # emin - m + B + F - 1 (capped at W - 1): carrier subnormal results
    # flag bits in the lane type
    f_inex: object
    f_under: object
    f_over: object
    f_inv: object
    mode: int
    rbits: int
    is_sr: bool


def vec_supported(fmt, in_dtype) -> bool:
    """Whether the vectorised kernel rounds ``in_dtype`` (float32 / float64) input to ``fmt``:
    float32 input to formats carried in float32 with d = 23 - m >= 1; float64 input to formats
    with m <= 50 (the 2^52 trick of vfbits needs q < 2^52)."""
    if in_dtype == np.float32:
        return fmt.carrier_dtype == np.float32 and fmt.man_bits <= 22
    return fmt.man_bits <= 50


def _pattern(value: float, lane) -> int:
    """The input-width pattern of a float64 value (exact in the input width)."""
    if lane == np.uint32:
        return int(np.float32(value).view(np.uint32))
    return int(np.float64(value).view(np.uint64))


@functools.lru_cache(maxsize=512)
def vec_params(fmt, mode: int, rbits: int, lane) -> VecParams:
    """The VecParams of fmt, mode and sr bits for uint32 (float32 input) or uint64 (float64
    input) lanes, computed once; the kernels never write it."""
    fp = fmt.kernel_params()
    W, F, B = (32, 23, 127) if lane == np.uint32 else (64, 52, 1023)
    mask = (1 << W) - 1
    T = lane
    m, emin = fp.man_bits, fp.emin
    d = F - m
    low = (1 << d) - 1
    half = 1 << (d - 1)
    k = min(rbits, d)
    sign = 1 << (W - 1)
    inf = ((1 << (W - F - 1)) - 1) << F
    qnan = inf | (1 << (F - 1))

    def pat(v):
        """Pattern of a float64 result of round_value's rules, NaN as the signed quiet NaN."""
        if np.isnan(v):
            return (sign if np.signbit(v) else 0) | qnan
        return _pattern(v, lane)

    # round_pack's own rules, run as Python (py_func): compiling them for this call alone took
    # 1.4 s of a process's first sf.round (Zen 3, 2026-11-29); the kernels compile them where
    # they need them
    ov = [pat(overflow_result.py_func(neg, mode, fp)[0]) for neg in (False, True)]
    (inf_p, inf_fl_p), (inf_n, inf_fl_n) = [inf_result.py_func(neg, fp) for neg in (False, True)]
    (zero_p, zero_fl_p), (zero_n, zero_fl_n) = [zero_result.py_func(neg, fp)
                                                for neg in (False, True)]
    tinybits = _pattern(2.0 ** emin, lane)
    qe = emin - m
    lean_min = max(tinybits, 1 << F)
    # Pass 1's low test, a < lean_min with a = 0 excepted in formats with a zero, in one add and
    # one vslt (an unsigned compare on uint32, a signed one on uint64; a < 2^(W-1)):
    # 0 < a < lean_min  <=>  a - 1 < lean_min - 1 unsigned (a = 0 wraps to the top);
    # uint64 lanes: x <u y  <=>  (x ^ 2^63) <s (y ^ 2^63), and (a - 1) ^ 2^63 = a + (2^63 - 1).
    if not fp.zero:
        zsh, zmin = 0, lean_min
    elif lane == np.uint32:
        zsh, zmin = mask, lean_min - 1
    else:
        zsh, zmin = (1 << 63) - 1, (lean_min - 1) | (1 << 63)
    # pass 1 without flags below 2^emin (module docstring): the carrier add in RNE when C and
    # q = 2^qe are normal floats of the input width; the pattern rounding at bit d when the
    # format's subnormal grid is the input's (emin = 1 - B: bf16, tf32 from float32)
    magic = (mode == RNE and bool(fp.subnormals) and bool(fp.zero) and qe >= 1 - B
             and qe + F + 1 <= B)
    # (m >= 1: with m = 0, pass 1's RNE and RTO treat bit d as the exponent's, not k's parity)
    linear = bool(fp.subnormals) and bool(fp.zero) and emin == 1 - B and m >= 1
    # Without flags pass 1 rounds an Inf input too where its results are the overflow results
    # (round_value's inf_result and overflow_result give the same patterns for both signs: in
    # RNE, RNA, RHU and SR ieee formats give +-Inf and fn formats their NaN of the Inf's sign;
    # in every mode saturating and "none" formats give +-max): a = pattern(Inf) takes pass 1's
    # overflow branch (its rn exceeds maxbits: rn >= a > maxbits, and rn < 2^(W-1) for
    # a <= pattern(Inf)), so only a NaN is marked.  With flags they differ (an Inf raises no
    # OVERFLOW), and pass 1 marks Inf.  The arithmetic's Inf results (1% Inf/NaN operands)
    # then send no chunk of the rounding to pass 1x or a later pass.
    inf_is_ov = ov == [pat(inf_p), pat(inf_n)]
    # pass 1x's stochastic rounding below 2^emin in float arithmetic of the input's width
    # (_grid_sr32, _grid_sr64): exact where q = 2^qe is a normal float of that width not above
    # 1 and r <= 31 (float32) / 52 (float64); on a linear grid pass 1's rounding at bit d is
    # the grid's (see _grid_sr32); elsewhere (more random bits) the elements below 2^emin go
    # to pass 2
    rmax = 31 if lane == np.uint32 else 52
    sr_float = -(B - 1) <= qe <= 0 and rbits <= rmax
    r31 = min(rbits, rmax)
    vals = dict(
        lane1=1, lane0=0, ones=mask, W=W, Wm1=W - 1, W8=W - 8, top8=0xFF, F=F,
        abs_=mask >> 1, inf=inf, lean_inf=inf + 1 if inf_is_ov else inf, mf=(1 << F) - 1,
        hid=1 << F, quiet=1 << (F - 1), qnan=qnan,
        slow=mask,
        d=d, dm1=d - 1, low=low, keep=mask ^ low,
        # RNE adds half - 1 plus the last kept bit; with m = 0 that bit is the exponent's, not
        # the significand's, and a 1-bit significand is always odd (1): ties go up, c0 = half.
        c0={RNE: half - 1 if m > 0 else half, RNA: half, RHU: half - 1}.get(mode, 0),
        cpar=1 if mode == RNE and m > 0 else 0,
        cpos=low if mode == RUP else (1 if mode == RHU else 0),
        cneg=low if mode == RDN else 0,
        rto_lsb=(1 << d) if mode == RTO and m > 0 else 0,
        sr_s1=(W - k) if k >= 1 else 0, sr_s2=d - k,
        tinybits=tinybits, lean_min=lean_min, lean_zsh=zsh, lean_zmin=zmin,
        maxbits=_pattern(fp.maxval, lane),
        ovp=ov[0], ovn=ov[1],
        lean_lo=0 if magic or linear or (mode == SR and fp.subnormals) else lean_min,
        cmagic=_pattern(1.5 * 2.0 ** (qe + F), lane) if magic else 0,
        sr_lim=0 if linear else tinybits,
        sr_inv_q=_pattern(2.0 ** -qe, lane) if sr_float else 0,
        sr_two_r=_pattern(2.0 ** r31, lane) if sr_float else 0,
        sr_q=_pattern(2.0 ** qe, lane) if sr_float else 0,
        sr_ush=W - r31, sr_r=r31,
        sr_slow=tinybits if not (sr_float or linear) else 0,
        sr_clamp=tinybits if sr_float else 0,
        m_half=mask if mode in (RNE, RNA, RHU) else 0, m_rne=1 if mode == RNE else 0,
        m_rhu=1 if mode == RHU else 0, m_pos=mask if mode == RUP else 0,
        m_neg=mask if mode == RDN else 0, m_rto=mask if mode == RTO else 0,
        m_rto_pat=mask if mode == RTO and m > 0 else 0,
        m_par_pat=1 if mode == RNE and m > 0 else 0, par1_pat=1 if mode == RNE and m == 0 else 0,
        rbits_t=rbits,
        neg_special=0 if fp.signed else sign, sgn_keep=sign if fp.signed else 0,
        nan_keep=(mask ^ low) if fp.inf_nan == 0 else 0,
        nan_or=0 if fp.inf_nan == 0 else qnan,
        nan_fl=INVALID if fp.inf_nan == 2 else 0,
        inf_pos=pat(inf_p), inf_neg=pat(inf_n), inf_fl_pos=inf_fl_p, inf_fl_neg=inf_fl_n,
        zero_pos=pat(zero_p), zero_neg=pat(zero_n), zero_fl_pos=zero_fl_p,
        zero_fl_neg=zero_fl_n,
        low_out=0 if fp.zero else tinybits,
        c_bm=B + m, dbias=(emin - m + B + F) & mask, fmax_drop=F + 2,
        qe_shift=(qe << F) & mask, fq_norm_min=(1 - qe) << F,
        qsub_shift=min(qe + B + F - 1, W - 1) if qe + B + F - 1 >= 0 else 0,
        f_inex=INEXACT, f_under=UNDERFLOW, f_over=OVERFLOW, f_inv=INVALID,
    )
    typed = {name: T(vals[name]) for name in vals}
    # the smallest positive value of the format: 2^(emin - m) with subnormals, else 2^emin
    cvt_out = (lane == np.uint64 and fmt.carrier_dtype == np.float32
               and emin - (m if fp.subnormals else 0) >= -126)
    return VecParams(**typed, subn=bool(fp.subnormals), low_magic=magic, sub_full=emin < 1 - B,
                     cvt_out=bool(cvt_out),
                     mode=int(mode), rbits=int(rbits),
                     is_sr=mode == SR)


# ----- one element ---------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _round_at(x, s, neg, U, P, is_sr, m_rto, m_par, par1):
    """(x with its low s bits rounded off in the mode of P, inexact); U the top lane bits of the
    random bits (SR); m_rto the RTO mask (P.m_rto for a significand, P.m_rto_pat for a pattern);
    the RNE parity is (bit s of x) & m_par | par1 (P.m_rne, 0 for a significand; P.m_par_pat,
    P.par1_pat for a pattern, whose bit s is the exponent's when m = 0: a 1-bit significand is
    always odd).
    x + increment must not wrap (the callers' x are below 2^(W-1))."""
    one = P.lane1
    zero = P.lane0
    bit = vshl(one, s)
    low = vsub(bit, one)
    inex = vne(vand(x, low), zero)
    if is_sr:
        k = vmin(P.rbits_t, s)
        inc = vshl(vshr(U, vsub(P.W, vmax(k, one))), vsub(s, k))
    else:
        inc = vadd(vand(vshr(bit, one), P.m_half), vand(low, vsel(neg, P.m_neg, P.m_pos)))
        inc = vsub(vadd(inc, vor(vand(vshr(x, s), m_par), par1)),
                   vadd(P.m_rne, vsel(neg, P.m_rhu, zero)))
    inc = vsel(inex, inc, zero)
    r = vor(vand(vadd(x, inc), vxor(low, P.ones)), vsel(inex, vand(bit, m_rto), zero))
    return r, inex


@njit(cache=True, inline="always")
def _round_d(a, neg, U, P, is_sr):
    """(a rounded at the constant bit d, inexact): the normal-range rounding of pass 1, with the
    increments of the module docstring precomputed per call.  No sum wraps: a < 2^(W-1),
    increments < 2^d."""
    inex = vne(vand(a, P.low), P.lane0)
    if is_sr:
        # (no RTO bit: rto_lsb is 0 outside RTO; one constant less in the loop)
        return vand(vadd(a, vshl(vshr(U, P.sr_s1), P.sr_s2)), P.keep), inex
    inc = vadd(vadd(P.c0, vand(vshr(a, P.d), P.cpar)), vsel(neg, P.cneg, P.cpos))
    return vor(vand(vadd(a, inc), P.keep), vsel(inex, P.rto_lsb, P.lane0)), inex


@njit(cache=True, inline="always")
def _lean_round(b, U, P, is_sr):
    """(a, sgn, neg, rn, inexact, negbad, overflow) of the input pattern b: its magnitude,
    sign bit, sign, the rounding rn at bit d, negbad = negative in an unsigned format, and
    overflow (rn above pattern(max); never below 2^emin, where rn <= tinybits).  Signed
    compares: rn < 2^(W-1) for every input but a NaN (a <= pattern(Inf) and the increment
    < 2^d), and a NaN input is special in both passes."""
    a = vand(b, P.abs_)
    sgn = vxor(b, a)
    neg = vne(sgn, P.lane0)
    rn, inex = _round_d(a, neg, U, P, is_sr)
    negbad = vne(vand(sgn, P.neg_special), P.lane0)
    return a, sgn, neg, rn, inex, negbad, vsgt(rn, P.maxbits)


@njit(cache=True, inline="always")
def _lean(b, U, P, is_sr, want_flags, os):
    """Pass 1: (result, inexact, overflow, special) with special = left for a later pass
    (nonzero below 2^emin, zero in a format without one, Inf (but without flags where its
    result is the overflow result: P.lean_inf), NaN, negative in an unsigned format); rounding
    at bit d otherwise (a zero: itself).  The result is already an element of the output view
    os: the carrier pattern, or os's marker where special (see lean_out).  Kept lean: this is
    the common case."""
    a, sgn, neg, rn, inex, negbad, ovf = _lean_round(b, U, P, is_sr)
    special = (vslt(vadd(a, P.lean_zsh), P.lean_zmin)
               | vsge(a, P.inf if want_flags else P.lean_inf) | negbad)
    out = lean_out(sgn, rn, neg, ovf, special, P, os)
    return out, inex & (not special), ovf & (not special), special


@njit(cache=True, inline="always")
def _nan_of(a, sgn, P):
    """The result pattern of a NaN input of magnitude pattern a and sign bit sgn: round_value's
    rule, the sign kept in signed formats, the quiet bit set and the top payload bits kept in
    ieee formats (nan_keep = the bits above d); in the others the carrier's quiet NaN (nan_or)
    with the sign."""
    return vor(vand(sgn, P.sgn_keep), vor(vand(vor(a, P.quiet), P.nan_keep), P.nan_or))


@njit(cache=True, inline="always")
def _lean_ext(b, U, P, is_sr):
    """Pass 1x (only when flags are not counted, and only where P.lean_lo = 0: see
    _chunk_passes): (pattern, special) as pass 1, plus Inf and NaN by selects (their per-call
    results), and below 2^emin rounded too: by the carrier add (RNE, low_magic), the grid
    rounding of _grid_sr_ext (SR) or the rounding at bit d (a linear subnormal grid);
    special = negative in an unsigned format, or what _grid_sr_ext leaves to a later pass.
    Without stochastic rounding the carrier add's elements are a < lim, lim = tinybits with
    low_magic and 0 without (a per-call scalar, hoisted out of the loop): the vector of
    compares ANDed with the boolean low_magic compiled, on the AVX2 path, to a pack, a widen
    and a shift of the compare's lanes each 8 elements (72 -> 61 instructions a loop of 8
    elements with this and with no below-lean_lo test, which cannot hold here; fp16 rne of
    subnormal data, one core, in cache, alternating processes: 0.63-0.64 -> 0.55-0.60 ns an
    element; AVX-512 0.45-0.46 -> 0.43; 2026-11-29)."""
    a, sgn, neg, rn, inex, negbad, ovf = _lean_round(b, U, P, is_sr)
    if is_sr:
        small = vlt(a, P.sr_lim)
        rg, slow = _grid_sr_ext(a, U, P)
        rn = vsel(small, rg, rn)
        slow = slow & small
    else:
        lim = P.tinybits if P.low_magic else P.lane0
        rn = vsel(vlt(a, lim), vmagic(a, P.cmagic), rn)
        slow = False
    out, _, _ = _ext_out(a, sgn, neg, rn, ovf, P)
    special = negbad | slow
    return vsel(special, P.slow, out), special


@njit(cache=True, inline="always")
def _ext_out(a, sgn, neg, rn, ovf, P):
    """(pattern, isinf, isnan) of pass 1x's two element functions: the rounding rn of the
    magnitude a with the sign bit sgn, the overflow result where ovf, Inf's and NaN's per-call
    results (round_value's)."""
    out = vsel(ovf, vsel(neg, P.ovn, P.ovp), vor(sgn, rn))
    isinf = veq(a, P.inf)
    out = vsel(isinf, vsel(neg, P.inf_neg, P.inf_pos), out)
    isnan = vgt(a, P.inf)
    return vsel(isnan, _nan_of(a, sgn, P), out), isinf, isnan


@njit(cache=True, inline="always")
def _lean_ext_flags(b, U, P, is_sr):
    """Pass 1x with flags (round to nearest even where the carrier add applies, low_magic):
    (pattern, flag bits, left) of any input pattern b, the flags as _finish gives them.  Below
    2^emin the result is the carrier add's rg = (|x| + C) - C (see _lean_ext), inexact iff rg
    differs from |x|, and underflow iff inexact and tiny: ru < 2^emin, ru the rounding to p
    bits with an unbounded exponent, which is pass 1's rounding at bit d (rn) for a normal
    input; a carrier-subnormal input lies far below 2^emin where both are tiny (low_magic
    needs emin above the input's).  From 2^emin up: pass 1's rounding and its inexact and
    overflow; Inf and NaN: their per-call results and flags (as _finish); left: negative
    inputs of unsigned formats (pass 2's).  A zero rounds to itself, exactly (no flag), as in
    pass 1."""
    a, sgn, neg, rn, inex, negbad, ovf = _lean_round(b, U, P, is_sr)
    zero = P.lane0
    small = vlt(a, P.tinybits)
    rg = vmagic(a, P.cmagic)
    inexg = vne(rg, a)
    out, isinf, isnan = _ext_out(a, sgn, neg, vsel(small, rg, rn), ovf, P)
    fl = vsel((small & inexg) | ((not small) & inex), P.f_inex, zero)
    fl = vor(fl, vsel(small & inexg & vlt(rn, P.tinybits), P.f_under, zero))
    fl = vsel(ovf, vor(P.f_over, P.f_inex), fl)
    fl = vsel(isinf, vsel(neg, P.inf_fl_neg, P.inf_fl_pos), fl)
    fl = vsel(isnan, P.nan_fl, fl)
    return vsel(negbad, P.slow, out), fl, negbad


@njit(cache=True, inline="always")
def _grid_low(a, E, neg, U, P, is_sr):
    """(rg, inexact, needs round_value): the rounding on the format's grid below 2^emin
    (subnormal formats), at bit drop of sig (drop wraps for inputs above the subnormal range,
    whose rg is not used; the clamps keep every shift in range)."""
    one = P.lane1
    zero = P.lane0
    sig = vor(vand(a, P.mf), vsel(vne(E, zero), P.hid, zero))
    drop = vsub(P.dbias, vmax(E, one))
    dd = vmax(vmin(drop, P.fmax_drop), one)
    rq, inexg = _round_at(sig, dd, neg, U, P, is_sr, P.m_rto, P.m_rne, P.lane0)
    q = vshr(rq, dd)
    slow = False
    if is_sr:
        far = vgt(drop, P.fmax_drop)
        k = vmin(P.rbits_t, drop)
        sh = vsub(drop, k)
        t = vsel(vgt(sh, P.F), zero, vshr(sig, vmin(sh, P.F)))
        wide = vge(k, P.W)                      # k > 31 random bits: not in a 32-bit lane
        kk = vmax(vmin(k, P.Wm1), one)
        up = vge(vadd(t, vshr(U, vsub(P.W, kk))), vshl(one, kk)) & (not wide)
        q = vsel(far, vsel(up, one, zero), q)
        inexg = inexg | far
        slow = far & wide & (not vlt(vshr(U, P.W8), P.top8))
    fq = vfbits(q)
    rg = vsel(vne(q, zero),
              vsel(vge(fq, P.fq_norm_min), vadd(fq, P.qe_shift), vshl(q, P.qsub_shift)), zero)
    return rg, inexg, slow


def _grid_sr_ext(a, U, P):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(_grid_sr_ext, inline="always")
def _grid_sr_ext_impl(a, U, P):
    """Pass 1x's stochastic rounding below 2^emin: _grid_sr32 in 32-bit lanes, _grid_sr64 in
    64-bit ones."""
    if a == types.uint32:
        return lambda a, U, P: _grid_sr32(a, U, P)
    if a == types.uint64:
        return lambda a, U, P: _grid_sr64(a, U, P)
    return None


@njit(cache=True, inline="always")
def _floor52(s):
    """floor(s) of a float64 0 <= s < 2^52, exactly: (s + 2^52) - 2^52 is s rounded to the
    nearest integer (the float64 spacing in [2^52, 2^53) is 1; both operations exact but
    the first's one rounding), minus 1 where that rounded up."""
    t = (s + _TWO52) - _TWO52
    return t - (1.0 if t > s else 0.0)


@njit(cache=True, inline="always")
def _grid_sr64(a, U, P):
    """_grid_sr32's formula in float64 arithmetic for 64-bit lanes (float64 input, the
    arithmetic's RO53 proxies), exact where P.sr_float held (-1022 <= qe <= 0, r <= 52):
    s = |x| 2^-qe <= 2^m <= 2^50, a power-of-two scaling up; floor by _floor52 (AVX2 has no
    float64 -> int64 vector conversion); y = s - floor(s), exact (s's fraction bits); t =
    floor(y 2^r) < 2^r <= 2^52; u >> (64 - r) < 2^r, as a float64 by vfbits (exact);
    their sum below 2^53, exact, so its compare with 2^r is the carry; k q exact (k <= 2^m,
    q >= 2^-1022 normal) or +0.  Where the formula does not apply the input is clamped to 0
    (no subnormal float64 operand) and a < P.sr_slow sends the elements below 2^emin to
    pass 2.  It replaced an integer formula (unsigned 64-bit compares and variable shifts,
    several instructions each on AVX2): sf.add / sf.mul fp16 sr of 4M gradient-like operands
    and float64 -> fp16 / e4m3fn sr of 4M, 4-8% less time on the AVX2 path, 7-11% native (one
    process, alternating with the code before)."""
    ac = vmin(a, P.sr_clamp)
    s = np.uint64(ac).view(np.float64) * np.uint64(P.sr_inv_q).view(np.float64)
    n = _floor52(s)
    two_r = np.uint64(P.sr_two_r).view(np.float64)
    t = _floor52((s - n) * two_r)
    ur = np.uint64(vfbits(vshr(U, P.sr_ush))).view(np.float64)
    k = n + (1.0 if t + ur >= two_r else 0.0)
    rg = np.float64(k * np.uint64(P.sr_q).view(np.float64))
    return rg.view(np.uint64), vslt(a, P.sr_slow)


@njit(cache=True, inline="always")
def _grid_sr32(a, U, P):
    """(rg, needs a later pass) of a float32 magnitude pattern a below 2^emin, stochastic
    rounding onto the grid of q = 2^qe, qe = emin - m, in float32 arithmetic: with
    v = |x| / q,
        rg = q * (floor(v) + ((floor(frac(v) 2^r) + (u >> (64 - r))) >> r)).
    That is round_value's rule (up iff floor(f 2^r) + (u >> (64 - r)) >= 2^r, f = frac(v): the
    sum is below 2^(r+1), so its bit r is the carry).  Every operation is exact where P.sr_float
    held (vec_params: -126 <= qe <= 0, r <= 31):
    * s = |x| * 2^-qe: a power-of-two scaling up (qe <= 0), no overflow: a is clamped to
      tinybits (P.sr_clamp), so s <= 2^emin / q = 2^m <= 2^22;
    * n = int(s) truncates, = floor(s) (s >= 0, below 2^31); float(n) is exact (n < 2^23);
    * y = s - float(n): the fraction bits of s, a multiple of ulp(s) below 2^24 ulp(s), so a
      float32: exact;
    * t = int(y * 2^r) = floor(f 2^r): the scaling is exact (y < 1, y 2^r < 2^31);
    * u >> (64 - r) = U >> (32 - r) (U the top 32 random bits); t + that < 2^32: no wrap;
    * the result k <= 2^m is exact as a float32, and k * 2^qe is k q, exact and normal (qe >=
      -126) or +0: round_value's value (the sign is ORed by the caller), its pattern that of
      the grid value; k = 2^m gives 2^emin itself, whose pattern is tinybits.
    A zero gives +0 (s = 0, t = 0, the carry 0).  What pass 1 rounds as it is (a >= 2^emin,
    Inf, NaN: rg is not used) is clamped first, so no conversion sees an Inf, a NaN or an
    integer beyond int32.  Where the formula does not apply the clamp is 0: a float32
    subnormal operand costs a microcode assist on some x86 cores (bf16 sr of subnormal data,
    AVX2 path, one core: 3.3 ns an element with the unclamped product, 1.6 before).
    On a linear grid (emin = 1 - B, m >= 1: bf16, tf32) P.sr_lim = 0 and pass 1's rounding at
    bit d is the grid rounding (the subnormal patterns are linear up into the normal range,
    and round_value's drop there is d: the module docstring's SR proof with s = d).
    Elsewhere (r >= 32; qe outside [-126, 0], which no float32-carried format has: 7 exponent
    bits or fewer give emin >= -62, 8 give a linear grid or e8m0's m = 0, qe = -126)
    a < P.sr_slow sends every element below 2^emin to pass 2 (_common, then passes 3 and 4):
    a compare of the lanes, since a scalar boolean ANDed with a vector of compares took a
    pack, a widen and a shift each 8 elements on the AVX2 path.
    Against the integer formula it replaced (variable shifts by the drop below the grid,
    clamps, a rebuilt pattern): about 16 instructions a vector of 8 elements instead of about
    45 (AVX2 path)."""
    ac = vmin(a, P.sr_clamp)
    s = np.float32(np.uint32(ac).view(np.float32) * np.uint32(P.sr_inv_q).view(np.float32))
    n = np.int32(s)
    y = np.float32(s - np.float32(n))
    t = np.uint32(np.int32(np.float32(y * np.uint32(P.sr_two_r).view(np.float32))))
    k = vadd(np.uint32(n), vshr(vadd(t, vshr(U, P.sr_ush)), P.sr_r))
    rg = np.float32(np.float32(np.int32(k)) * np.uint32(P.sr_q).view(np.float32))
    return rg.view(np.uint32), vlt(a, P.sr_slow)


@njit(cache=True, inline="always")
def _finish(a, sgn, neg, ru, inexu, rg, inexg, P):
    """(pattern, flag bits, below) from the unbounded rounding ru and the grid rounding rg:
    overflow, the ranges, and the specials; below = a finite nonzero input of an allowed sign
    under 2^emin (the only kind whose result may still need round_value)."""
    zero = P.lane0
    tiny = vlt(ru, P.tinybits)
    big = vge(a, P.tinybits)
    f_ui = vor(P.f_under, P.f_inex)
    # below 2^emin: the grid rounding (subnormal formats), else the flush (tiny) or 2^emin
    low_mag = vsel(P.subn, rg, vsel(tiny, P.low_out, ru))
    low_fl = vsel(P.subn, vsel(inexg, vsel(tiny, f_ui, P.f_inex), zero),
                  vsel(tiny, f_ui, P.f_inex))
    mag = vsel(big, ru, low_mag)
    fl = vsel(big, vsel(inexu, P.f_inex, zero), low_fl)
    ovf = vgt(ru, P.maxbits)
    out = vsel(ovf, vsel(neg, P.ovn, P.ovp), vor(sgn, mag))
    fl = vsel(ovf, vor(P.f_over, P.f_inex), fl)
    # specials, last one first
    negbad = vne(vand(sgn, P.neg_special), zero)
    out = vsel(negbad, P.qnan, out)
    fl = vsel(negbad, P.f_inv, fl)
    iszero = veq(a, zero)
    out = vsel(iszero, vsel(neg, P.zero_neg, P.zero_pos), out)
    fl = vsel(iszero, vsel(neg, P.zero_fl_neg, P.zero_fl_pos), fl)
    isinf = veq(a, P.inf)
    out = vsel(isinf, vsel(neg, P.inf_neg, P.inf_pos), out)
    fl = vsel(isinf, vsel(neg, P.inf_fl_neg, P.inf_fl_pos), fl)
    isnan = vgt(a, P.inf)
    nan = _nan_of(a, sgn, P)
    out = vsel(isnan, nan, out)
    fl = vsel(isnan, P.nan_fl, fl)
    below = not (isnan | isinf | iszero | negbad | big)
    return out, fl, below


@njit(cache=True, inline="always")
def _common(b, U, P, is_sr):
    """Pass 2: (pattern, flag bits, needs _full) of any input pattern b.  The unbounded
    rounding ru is the rounding at bit d for normal inputs; a subnormal input is either far
    below 2^emin (tiny whatever ru) or, when the format's emin is the input's (bf16, tf32), in
    the input's subnormal binade just below 2^emin, whose p-bit quantum is bit d - 1.  Only
    a subnormal input below 2^emin of a format whose emin is below the input's (e8m0: emin
    -127) needs _full (its p-bit rounding bit varies)."""
    a = vand(b, P.abs_)
    sgn = vxor(b, a)
    neg = vne(sgn, P.lane0)
    E = vshr(a, P.F)
    rn, inexn = _round_d(a, neg, U, P, is_sr)
    rs, inexs = _round_at(a, P.dm1, neg, U, P, is_sr, P.m_rto_pat, P.m_par_pat,
                         P.par1_pat)
    normal_in = vne(E, P.lane0)
    ru = vsel(normal_in, rn, rs)
    rg, inexg, slow = _grid_low(a, E, neg, U, P, is_sr)
    out, fl, below = _finish(a, sgn, neg, ru, (inexn & normal_in) | (inexs & (not normal_in)),
                             rg, inexg, P)
    need = (slow | ((not normal_in) & P.sub_full)) & below
    return out, fl, need


@njit(cache=True, inline="always")
def _full(b, U, P, is_sr):
    """Pass 3: (pattern, flag bits, needs round_value) of any input pattern b, ru at the exact
    p-bit rounding bit of every input: d for normal inputs, L - 1 - m for subnormal ones (L - 1
    = the exponent of a converted to float, minus B; nothing to round when that is negative)."""
    zero = P.lane0
    a = vand(b, P.abs_)
    sgn = vxor(b, a)
    neg = vne(sgn, zero)
    E = vshr(a, P.F)
    normal_in = vne(E, zero)
    fe = vshr(vfbits(vand(a, P.mf)), P.F)
    s_u = vsel(normal_in, P.d, vsel(vgt(fe, P.c_bm), vsub(fe, P.c_bm), zero))
    ru, inexu = _round_at(a, s_u, neg, U, P, is_sr, P.m_rto_pat, P.m_par_pat,
                           P.par1_pat)
    rg, inexg, slow = _grid_low(a, E, neg, U, P, is_sr)
    out, fl, below = _finish(a, sgn, neg, ru, inexu, rg, inexg, P)
    return out, fl, slow & below


# ----- output: the carrier's patterns ------------------------------------------------------

_U29 = np.uint64(29)
_HI32 = np.uint64(32)
# float32 fields widened to uint64 lanes (the one definition is softfloat._primitives')
_SIGN32 = np.uint64(F32_SIGN)
_NORM_OFF = np.uint64(896 << 23)   # (1023 - 127) << 23: float64 -> float32 exponent field
_SPEC_OFF = np.uint64(1792 << 23)  # (2047 - 255) << 23: the same for Inf and NaN
_P_NORM32 = np.uint64(897 << 52)   # float64 pattern of 2^-126, float32's smallest normal
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO149 = 2.0 ** 149               # float32's subnormal step 2^-149 -> 1
_U32_0 = np.uint32(0)


@njit(cache=True)
def narrow_bits(p):
    """float32 pattern of the float64 pattern p of a value that a float32 holds exactly (or of
    Inf / a NaN, whose top 23 fraction bits are kept): integer operations and two exact float64
    operations, no float conversion (a subnormal float32 result costs some x86 cores a
    microcode assist, and flush-to-zero, if a library set it, would zero it).
    From 2^-126 up (normal float32 values, Inf, NaN) the top bits of the magnitude a, rebiased:
    (a >> 29) - (896 << 23) for a normal, - (1792 << 23) for Inf and NaN (exponent 2047 ->
    255).  Below: a = k 2^-149 with k < 2^23 an integer (a float32 subnormal or zero), and k is
    the pattern: a 2^149 + 2^52 is exact (an integer below 2^53; no float64 subnormal on the
    way) and its float64 pattern is 0x4330000000000000 + k, whose low 32 bits are k (in place
    of a variable shift of the significand by the exponent, which AVX2 has only as vpsrlvq).
    tests/test_round_vec.py gives it every float32 value, widened, and NaN payloads."""
    a = p & F64_ABS
    hi = (a >> _U29) - (_SPEC_OFF if a >= F64_EXP_FIELD else _NORM_OFF)
    lo = np.float64(np.uint64(a).view(np.float64) * _TWO149 + _TWO52).view(np.uint64) & _LOW32
    r = hi if a >= _P_NORM32 else lo
    return np.uint32(((p >> _HI32) & _SIGN32) | r)


def to_out(o, os):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(to_out)
def _to_out_impl(o, os):
    """A lane result as an element of the output view os (float32 / float64 carrier bits)."""
    if o == os.dtype:
        return lambda o, os: o
    if o == types.uint64 and os.dtype == types.uint32:
        return lambda o, os: narrow_bits(o)
    return None


def narrows(xs, os):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(narrows, inline="always")
def _narrows_impl(xs, os):
    """Whether the lanes of xs are wider than os's elements (64-bit lanes into a float32
    carrier): a constant of the types, which LLVM folds."""
    wide = xs.dtype == types.uint64 and os.dtype == types.uint32
    return lambda xs, os: wide


def narrow_block(ws, os, cvt):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(narrow_block)
def _narrow_block_impl(ws, os, cvt):
    """os[j] = the float32 pattern of the 64-bit lane result ws[j] (narrow_bits' contract: a
    value a float32 holds exactly, Inf, a quiet NaN or the marker): with cvt (VecParams.cvt_out)
    by the float64 -> float32 conversion, one instruction a vector, else by narrow_bits.  The
    conversion gives the same bits here: every value is 0 or at least 2^-126 in magnitude (a
    normal float32: exact, and neither flush-to-zero nor a microcode assist can touch it), and
    the NaNs the passes write are quiet (_nan_of sets the quiet bit or writes the carrier's
    quiet NaN; the marker is all ones), whose sign and top 23 fraction bits the conversion
    keeps, as narrow_bits does.  The later passes that store every element (pass 1x; pass 2
    without flags) write 64-bit lane results into a block of their own and narrow it here,
    so that their element loop holds no narrowing: pass 1x's loop, 4 elements an iteration,
    108 -> 61 instructions on the AVX2 code path (the narrowing and the stack reloads of
    constants that its register pressure caused), 71 -> 45 with AVX-512."""
    if ws.dtype == types.uint64 and os.dtype == types.uint32:
        def impl(ws, os, cvt):
            if cvt:
                wf = ws.view(np.float64)
                of = os.view(np.float32)
                for j in range(of.size):
                    of[j] = np.float32(wf[j])
            else:
                for j in range(os.size):
                    os[j] = narrow_bits(ws[j])
        return impl

    # lanes as wide as os's elements: never called (the later passes take this path only where
    # narrows() holds), but typed at every call site, whose branch LLVM drops
    def same(ws, os, cvt):
        for j in range(os.size):
            os[j] = ws[j]
    return same


def out_of(v, os):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(out_of, inline="always")
def _out_of_impl(v, os):
    """The lane value v in the type of os's elements: itself, or its low 32 bits (a run-time
    value narrowed, for vmerge's masks, which must not be constants)."""
    if v == os.dtype:
        return lambda v, os: v
    if v == types.uint64 and os.dtype == types.uint32:
        return lambda v, os: np.uint32(v & np.uint64(0xFFFFFFFF))
    return None


def lean_out(sgn, rn, neg, ovf, special, P, os):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(lean_out, inline="always")
def _lean_out_impl(sgn, rn, neg, ovf, special, P, os):
    """Pass 1's output step: the element of os for the sign bit sgn and the rounded magnitude
    rn: os's marker where special, else the overflow result (ovn / ovp) where ovf, else the
    carrier pattern of sgn | rn.
    64-bit lanes into a float32 carrier: sgn | rn is converted by one float64 -> float32
    conversion instead of narrow_bits, exact: a pass 1 result that is neither special nor an
    overflow is a zero (converted exactly, sign included) or lies in [2^emin, max]
    (a >= lean_min >= pattern(2^emin), rn >= a, rn <= maxbits) and has at most p = m + 1 <= 24
    significant bits (its low d bits are clear), so it is a value of the format, and every
    value of a format carried in float32 is a float32 (normal for every such format but e8m0,
    whose 2^-127 is a float32 subnormal: exact too, the default floating point environment
    has no flush-to-zero).  An exact conversion has no
    rounding, so this is no second rounding of anything: the same bits as narrow_bits.  The
    special and overflowing elements convert +0 instead (no out-of-range or subnormal float32
    result, which some x86 cores microcode-assist), and the overflow results, which may be
    Inf or a NaN, are narrowed once per call (hoisted out of the loop)."""
    if sgn == os.dtype:
        return lambda sgn, rn, neg, ovf, special, P, os: vsel(
            special, P.slow, vsel(ovf, vsel(neg, P.ovn, P.ovp), vor(sgn, rn)))
    if sgn == types.uint64 and os.dtype == types.uint32:
        def impl(sgn, rn, neg, ovf, special, P, os):
            v = vsel(special | ovf, P.lane0, vor(sgn, rn))
            c = np.float32(np.uint64(v).view(np.float64)).view(np.uint32)
            ov = vsel(neg, narrow_bits(P.ovn), narrow_bits(P.ovp))
            return vsel(special, out_mark(os), vsel(ovf, ov, c))
        return impl
    return None


def out_mark(os):
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(out_mark, inline="always")
def _out_mark_impl(os):
    """The marker of an element left to a later pass: all ones, a NaN no rounding produces."""
    if os.dtype == types.uint32:
        return lambda os: np.uint32(0xFFFFFFFF)
    return lambda os: np.uint64(0xFFFFFFFFFFFFFFFF)


# ----- the passes over a chunk ---------------------------------------------------------------
# A chunk is processed in blocks of BLOCK elements.  Pass 1 (lean) marks elements; a later pass
# runs only on the blocks still holding marked elements (so a few specials cost a few blocks,
# not the chunk) and rewrites the marked ones (without flags every element of those blocks,
# see _later_pass).  When enough of the first PROBE blocks hold marks (gradient-like or
# NaN-sprinkled data; see _chunk_passes), pass 1 is skipped for the rest of the chunk and the
# later pass computes every element ("every").  Every pass counts the flags of the elements it
# settles, so the counts do not depend on these choices, nor do the results.

#: Elements per block: 2^8 (16 zmm vectors of float32 patterns), 64 blocks per chunk.
BLOCK = 256
#: Blocks of pass 1 that decide whether a chunk is dense in specials.
PROBE = 4


@njit(cache=True, inline="always")
def _bit(fl, f, P):
    """1 (lane type) when the flag f is in fl, else 0."""
    return vsel(vne(vand(fl, f), P.lane0), P.lane1, P.lane0)


@njit(cache=True, inline="always")
def _lean_block(xs, os, P, key, base, counts, c, is_sr, want_flags):
    """Pass 1 over a block: writes every result, marks the rest; returns how many it marked."""
    zero = P.lane0
    # 32-bit counters whatever the lane width (a block has 256 elements)
    n_inex = _U32_0
    n_over = _U32_0
    n_mark = _U32_0
    w = weyl(base)                  # element j's Weyl term (rng.mix: a sum, not a product)
    for j in range(xs.size):
        U = vtop(mix(key, w), zero) if is_sr else zero
        w += WEYL_STEP
        o, inex, ovf, sp = _lean(xs[j], U, P, is_sr, want_flags, os)
        os[j] = o
        n_mark = vcount(n_mark, sp)
        if want_flags:
            n_inex = vcount(n_inex, inex | ovf)
            n_over = vcount(n_over, ovf)
    if want_flags:
        counts[c, 0] += np.int64(n_inex)
        counts[c, 2] += np.int64(n_over)
    return np.int64(n_mark)


@njit(cache=True, **INNER)
def _special_pass(k, xs, os, left, b0, b1):
    """Without flags, after pass 1 over the blocks [b0, b1) of a chunk: the results of the Inf
    and NaN inputs (of a sign the format accepts) in the blocks holding marks, by the selects
    of pass 1x (per-call constants for Inf; for a NaN its sign and top payload bits in ieee
    formats, P.nan_keep and P.nan_or: round_value's rule; Inf only where pass 1 marked it,
    see P.lean_inf).  A sprinkling of them then sends no
    block to a later pass, where stochastic rounding would draw every element's random bits
    again; left[b] drops by the elements settled.  Returns how many blocks still hold marks.
    A pass of its own, called once per chunk: in pass 1's block loop (inlined, or called per
    block) it cost pass 1 10-30% on N(0,1) data (AVX-512: more live registers, so LLVM
    interleaved the hot loop 2 vectors deep instead of 4, or reloaded its constants).  The
    store is a vmerge: with vsel LLVM makes it a masked store, slow on AVX2 (AMD).  Measured
    on fp16 rne, 1% NaN/Inf data, AVX2 path, before RNE with pass 1x was excluded: 0.96-0.98
    ns per element with the masked store against 0.61 without this pass (one thread, 2^18
    elements); with the vmerge 1.44 ms against 1.31 ms (4M, two threads), still slower, hence
    the exclusion (see _chunk_passes)."""
    P = k
    n = xs.size
    ones = out_of(P.ones, os)
    nil = out_of(P.lane0, os)
    marked = 0
    for b in range(b0, b1):
        if left[b] != 0:
            lo = b * BLOCK
            xsb = xs[lo:min(n, lo + BLOCK)]
            osb = os[lo:min(n, lo + BLOCK)]
            fixed = _U32_0
            for j in range(xsb.size):
                x = xsb[j]
                a = vand(x, P.abs_)
                sgn = vxor(x, a)
                neg = vne(sgn, P.lane0)
                nan = _nan_of(a, sgn, P)
                spec = vsel(veq(a, P.inf), vsel(neg, P.inf_neg, P.inf_pos), nan)
                # what pass 1 marked (no flags: Inf only below lean_inf)
                fix = vsge(a, P.lean_inf) & veq(vand(sgn, P.neg_special), P.lane0)
                osb[j] = vmerge(fix, to_out(spec, osb), osb[j], ones, nil)
                fixed = vcount(fixed, fix)
            left[b] -= np.int64(fixed)
            marked += left[b] > 0
    return marked


# The later passes: one definition, ``_later_pass(elem)``, made into one ordinary (not
# inlined) Numba function per element function.  Numba compiles each once per (lane types,
# is_sr, want_flags), constants at every call but pass 3's is_sr and want_flags (``every`` is
# a run-time boolean; see _chunk_passes), in place of inlining the block loops
# at every call site of every specialisation of _chunk_passes (which doubled the cold compile
# time).  Each runs over the blocks [b0, b1) of a chunk: with ``every`` every element of every
# block, else the marked elements of the blocks that hold some; left[b] = how many stay marked.

def _later_pass(elem, doc, rewrite=False):
    """The later pass whose element function is elem(x, U, P, is_sr) -> (result, flag bits,
    left), a Numba function (the closure's constant, inlined into the loop like any global).
    With rewrite, where want_flags is False (always in pass 1x; pass 2 has it as a literal),
    the pass settles every element an earlier pass settled, to the same pattern, and counts
    nothing (with flags it must count only the elements left to it), so every element of a
    block it visits is stored, without reading os first, and every element it leaves is
    marked; the
    other passes store only the marked ones (``todo``), reading os to find them, and in a
    dense chunk (``every``) that read the whole output, fresh pages, from memory for nothing.
    Measured on e4m3fn rne of 16M N(0,1) elements (1.25% of them below 2^emin = 2^-6, in 96%
    of the 256-element blocks: dense), AVX2 path of a Zen 4 host, 2026-11-29: into a
    pre-faulted output 1.02-1.04 -> 0.81-0.84 ns an element on one core, 0.53-0.54 ->
    0.39-0.50 on two; sf.round itself, two threads, with _lean_ext's leaner loop too, in one
    process alternating with the code before: 0.76-0.78 -> 0.63-0.66 ns (1.9-2.1x -> 1.6-1.8x
    a copy), fp16 of gradient-like data 0.72 -> 0.61-0.63.
    Marking every element left can mark a zero that pass 1 had settled, with stochastic
    rounding of more random bits than the float grid formula takes only (32 or more in 32-bit
    lanes, 53 or more in 64-bit ones: pass 1x leaves every element below 2^emin, zeros
    included, to pass 2, and pass 2 leaves a zero to round_value when the top 8 random bits
    are all ones; _common's other case, a format whose emin is below the input's, holds no
    zero-having format: 8 exponent bits give emin = -126, and wider ones take 64-bit lanes);
    the later passes settle it again, to the same zero, with no flag (tests/test_round_vec.py:
    sr_bits 32 and 40 on data with zeros).
    Not cached itself: its callers (_vec_chunk, the arithmetic's _round_a / _round_b) are, and
    a cached function holds the code of what it calls (a closure's own cache entry would be
    keyed by the pickled closure, never found again)."""
    def settle(k, xs, os, base, counts, c, is_sr, want_flags, left, every, b0, b1):
        P = k
        zero = P.lane0
        n = xs.size
        mark = out_mark(os)
        # 64-bit lanes into a float32 carrier, where every element is stored: the results
        # go to a block of lane values, narrowed after the element loop (narrow_block)
        wide = rewrite and (not want_flags) and narrows(xs, os)
        ws = np.empty(BLOCK if wide else 0, xs.dtype)
        for b in range(b0, b1):
            if every or left[b] != 0:
                lo = b * BLOCK
                xsb = xs[lo:min(n, lo + BLOCK)]
                osb = os[lo:min(n, lo + BLOCK)]
                # one scalar accumulator per count: a tuple carried through the loop keeps
                # LLVM from vectorising it when the function is optimised on its own (what a
                # process that compiles it runs: 8x slower on subnormal-heavy data)
                n_left = zero
                n_inex = zero
                n_under = zero
                n_over = zero
                n_inv = zero
                w = weyl(base + lo)
                for j in range(xsb.size):
                    U = vtop(mix(k.key, w), zero) if is_sr else zero
                    w += WEYL_STEP
                    o, fl, lj = elem(xsb[j], U, P, is_sr)
                    if wide:
                        ws[j] = vsel(lj, P.slow, o)
                        n_left = vadd(n_left, vsel(lj, P.lane1, zero))
                    elif rewrite and not want_flags:
                        osb[j] = vsel(lj, mark, to_out(o, osb))
                        n_left = vadd(n_left, vsel(lj, P.lane1, zero))
                    else:
                        # stored when to be done (every, or marked) and decided (not lj)
                        todo = True if every else osb[j] == mark
                        osb[j] = vsel(todo & (not lj), to_out(o, osb), vsel(todo, mark, osb[j]))
                        n_left = vadd(n_left, vsel(todo & lj, P.lane1, zero))
                    if want_flags:
                        fl = vsel(todo & (not lj), fl, zero)
                        n_inex = vadd(n_inex, _bit(fl, P.f_inex, P))
                        n_under = vadd(n_under, _bit(fl, P.f_under, P))
                        n_over = vadd(n_over, _bit(fl, P.f_over, P))
                        n_inv = vadd(n_inv, _bit(fl, P.f_inv, P))
                if wide:
                    narrow_block(ws[:osb.size], osb, P.cvt_out)
                if want_flags:
                    counts[c, 0] += np.int64(n_inex)
                    counts[c, 1] += np.int64(n_under)
                    counts[c, 2] += np.int64(n_over)
                    counts[c, 3] += np.int64(n_inv)
                left[b] = np.int64(n_left)
    settle.__name__ = settle.__qualname__ = elem.py_func.__name__.strip("_") + "_pass"
    settle.__doc__ = doc
    return njit(**INNER)(settle)


@njit(cache=True, inline="always")
def _lean_ext_fl(x, U, P, is_sr):
    """_lean_ext with the (result, flag bits, left) shape of the later passes' element
    functions (no flag bits: pass 1x runs only when flags are not counted)."""
    o, lj = _lean_ext(x, U, P, is_sr)
    return o, P.lane0, lj


_settle_pass1 = _later_pass(_lean_ext_fl, "Pass 1x (only without flags: it counts none).", True)
_settle_pass1f = _later_pass(_lean_ext_flags, "Pass 1x with flags (_lean_ext_flags).")
_settle_pass2 = _later_pass(_common, "Pass 2 (_common).", True)
_settle_pass3 = _later_pass(_full, "Pass 3 (_full), the marked elements only (every False).")


@njit(cache=True, **INNER)
def _value_block(xs, os, base, c, k, counts):
    """round_value for the elements still marked (never a NaN input: those pass 2 decides),
    with the random bits round_kernel would use."""
    mark = out_mark(os)
    fp = format_params_of(k)
    for j in range(xs.size):
        x = np.uint64(carrier_bits(xs, j)).view(np.float64)
        if os[j] == mark and x == x:
            u = random_bits(k.key, base + j) if k.is_sr else np.uint64(0)
            r, fl = round_value(x, 0, fp, k.mode, u, k.rbits)
            store_carrier(os, j, np.float64(r).view(np.uint64))
            if k.want_flags:
                add_flag_counts(counts, c, fl)


@njit(cache=True, **INNER)
def _lean_pass(k, xs, os, base, counts, c, is_sr, want_flags, left, b0, b1):
    """Pass 1 over the blocks [b0, b1) of a chunk (an ordinary function, like the later
    passes): left[b] = how many elements of block b it marked; returns how many of these
    blocks hold marks."""
    n = xs.size
    marked = 0
    for b in range(b0, b1):
        lo = b * BLOCK
        hi = min(n, lo + BLOCK)
        left[b] = _lean_block(xs[lo:hi], os[lo:hi], k, k.key, base + lo, counts, c, is_sr,
                              want_flags)
        marked += left[b] > 0
    return marked


@njit(cache=True, inline="always")
def _chunk_passes(k, xs, os, base, counts, c, is_sr, want_flags):
    """Passes 1 to 2 over one chunk (see above); is_sr and want_flags are constants at every
    call; returns left, the count of marked elements per block that passes 3 and 4
    (_late_passes) are to settle.  Pass 1x is called with want_flags False whatever want_flags
    (it only runs without flags): one specialisation serves both."""
    n = xs.size
    nb = (n + BLOCK - 1) // BLOCK
    left = np.zeros(nb, np.int64)
    b_first = np.int64(0)           # (not a literal 0: one specialisation for every range)
    nprobe = min(PROBE, nb)
    # without flags, Inf and NaN by _special_pass where the later pass would cost more than
    # pass 1 (stochastic rounding, or pass 2); pass 1x in RNE costs what pass 1 does, and
    # _special_pass's extra loop over the blocks made it 8-9% slower on 1% NaN/Inf data
    special = (not want_flags) and (is_sr or k.lean_lo != 0)
    marked = _lean_pass(k, xs, os, base, counts, c, is_sr, want_flags, left, b_first, nprobe)
    if marked and special:
        marked = _special_pass(k, xs, os, left, b_first, nprobe)
    # without flags, pass 1x comes before pass 2 where it rounds below 2^emin; with flags,
    # pass 1x with flags where the carrier add rounds there (RNE; not stochastic rounding)
    ext = (not want_flags) and k.lean_lo == 0
    extf = want_flags and (not is_sr) and k.low_magic
    # Dense: where pass 1 and then a later pass over the blocks holding marks would cost more
    # than the later pass over every block.  Pass 1x costs about 1.4x pass 1 an element (AVX2
    # path, in cache: 0.55-0.60 against 0.43 ns), so from about 30% of the blocks marked: more
    # than a quarter of the probe (2 of 4 blocks); pass 2 costs more, from more than a half.
    # (With more than a half for pass 1x too, fp16 rne of N(0,1) data with 0.33% NaN, NaN in
    # 57% of the blocks, went dense in 42% of the chunks.)
    dense = (4 * marked > nprobe) if ext or extf else (2 * marked > nprobe)
    if not dense:
        marked = _lean_pass(k, xs, os, base, counts, c, is_sr, want_flags, left, nprobe, nb)
        if marked and special:
            _special_pass(k, xs, os, left, nprobe, nb)
    # dense: the first later pass does every block after the probe
    upto = nprobe if dense else nb
    # 'every' reaches the later passes as a run-time boolean, not a literal (dense, or
    # marked_only: False), and so do want_flags and is_sr for pass 3, which runs only on what
    # pass 2 leaves (float32 subnormals into e8m0, stochastic rounding far below a grid; its
    # speed is measured in the CHANGELOG): Numba compiles a function once per literal value of
    # an argument, and these passes are most of the conversion's compile time (the first
    # sf.round of a process, every CI run: 66 -> 42 s for one fp16 rne call; pass 3 once per
    # lane width, not per (lane width, is_sr): one compilation of 3.9 s less for a process
    # that rounds both ways, 2026-11-29).
    # Pass 2 keeps want_flags a literal: without flags it is the hot pass of the directed
    # modes below 2^emin, where computing the flag bits costs ~30% (fp16 rtz, 4M subnormal
    # results: 2.3 vs 3.0 ms).
    marked_only = nb < 0
    if ext:
        if dense:
            _settle_pass1(k, xs, os, base, counts, c, is_sr, False, left, dense, nprobe, nb)
        _settle_pass1(k, xs, os, base, counts, c, is_sr, False, left, marked_only, b_first, upto)
        upto = nb
    elif extf:
        if dense:
            _settle_pass1f(k, xs, os, base, counts, c, False, True, left, dense, nprobe, nb)
        _settle_pass1f(k, xs, os, base, counts, c, False, True, left, marked_only, b_first,
                       upto)
        upto = nb
    elif dense:
        _settle_pass2(k, xs, os, base, counts, c, is_sr, want_flags, left, dense, nprobe, nb)
    _settle_pass2(k, xs, os, base, counts, c, is_sr, want_flags, left, marked_only, b_first,
                  upto)
    return left


@njit(cache=True, inline="always")
def _late_passes(k, xs, os, base, counts, c, left):
    """Passes 3 and 4 over the blocks of a chunk with left[b] != 0 (their marked elements:
    what pass 2 left), stochastic rounding and flags as k's (run-time values)."""
    nb = left.size
    # (a run-time False: see the note in _chunk_passes)
    marked_only = nb < 0
    _settle_pass3(k, xs, os, base, counts, c, k.is_sr | marked_only,
                  k.want_flags | marked_only, left, marked_only, np.int64(0), nb)
    for b in range(nb):
        if left[b] != 0:
            lo = b * BLOCK
            hi = min(xs.size, lo + BLOCK)
            _value_block(xs[lo:hi], os[lo:hi], base + lo, c, k, counts)


@njit(cache=True, inline="always")
def _any_left(left):
    """Whether a block of the chunk still holds marked elements (after pass 2)."""
    for b in range(left.size):
        if left[b] != 0:
            return True
    return False


#: The call record of the vectorised kernel (see softfloat._driver): VecParams' fields, the
#: format's (FormatParams, for round_value in pass 3), the stochastic-rounding key, the global
#: index of element 0 and whether flags are counted.  The type the passes are compiled for: the
#: launch classes below and the arithmetic's rebuild it (``RoundVec(*k)``, the same fields in
#: the same order), so that one compiled set of passes per lane width serves them all.
RoundVec = record("RoundVec", VecParams._fields + FormatParams._fields, None, __name__,
                  dynamic=(("key", np.uint64), ("base", np.int64), ("want_flags", np.bool_)))


def _lean_record(name, is_sr, want_flags):
    """The first launch class of sf.round for one (stochastic rounding, flags counted) pair:
    pass 1 alone, block after block, up to the first block in which it marks an element;
    resume[c] = that block's index in chunk c (its results and flag counts are dropped: the
    second launch does it again), or -1 when pass 1 settled the whole chunk.  A launch of its
    own so that a process compiles the later passes (_chunk_passes) only when some data needs
    them: data in the format's normal range (the first call of most sessions) compiles pass 1
    only.  The closure holds two booleans only (Numba keys a cached closure by its cells'
    pickled values)."""
    def chunk(k, lo, hi, c, xb, ob, counts, resume):
        xs = xb[lo:hi]
        os = ob[lo:hi]
        n = xs.size
        for b in range((n + BLOCK - 1) // BLOCK):
            s = b * BLOCK
            e = min(n, s + BLOCK)
            inex = counts[c, 0]
            over = counts[c, 2]
            if _lean_block(xs[s:e], os[s:e], k, k.key, k.base + lo + s, counts, c, is_sr,
                           want_flags) != 0:
                counts[c, 0] = inex
                counts[c, 2] = over
                resume[c] = b
                return
        resume[c] = -1
    chunk.__name__ = chunk.__qualname__ = f"_{name}_chunk"
    return record(name, RoundVec.static_fields, njit(cache=True, **INNER)(chunk), __name__,
                  dynamic=zip(("key", "base", "want_flags"), RoundVec.dynamic_types))


def _round_record(name, is_sr, want_flags):
    """The second launch class of sf.round for one (stochastic rounding, flags counted) pair,
    over the chunks that the first one (_lean_record) left, from the block it stopped at: its
    chunk function runs _chunk_passes with both as literals, so that a call compiles only the
    passes of its own pair.  (One chunk function branching on them at run time compiled all
    four sets at the first call: the first sf.round(x, "fp16") of a process took 58 s on the
    2-core Zen 3 host, 2026-11-28.)"""
    def chunk(k, lo, hi, c, xb, ob, counts, resume, late):
        if resume[c] < 0:
            late[c] = False
            return
        kv = RoundVec(*k)
        s = lo + resume[c] * BLOCK
        left = _chunk_passes(kv, xb[s:hi], ob[s:hi], kv.base + s, counts, c, is_sr,
                             want_flags)
        late[c] = _any_left(left)
    chunk.__name__ = chunk.__qualname__ = f"_{name}_chunk"
    return record(name, RoundVec.static_fields, njit(cache=True, **INNER)(chunk), __name__,
                  dynamic=zip(("key", "base", "want_flags"), RoundVec.dynamic_types))


# The launch classes of each (is_sr, want_flags) pair, bound to their module-level names
# (Numba's cache refers to a record class by module and name).
_LEAN_RECORDS = {}
_ROUND_RECORDS = {}
for _sr, _flags, _name in ((False, False, "RoundVecDet"), (False, True, "RoundVecDetFlags"),
                           (True, False, "RoundVecSr"), (True, True, "RoundVecSrFlags")):
    _LEAN_RECORDS[_sr, _flags] = globals()[_name + "Lean"] = _lean_record(_name + "Lean", _sr,
                                                                          _flags)
    _ROUND_RECORDS[_sr, _flags] = globals()[_name] = _round_record(_name, _sr, _flags)


@njit(cache=True, **INNER)
def _late_chunk(k, lo, hi, c, xb, ob, counts, late):
    """Passes 3 and 4 of the chunks whose first launch left marked elements (late[c]): every
    block is searched for them (the per-block counts of that launch are gone)."""
    if late[c]:
        kv = RoundVec(*k)
        left = np.ones((hi - lo + BLOCK - 1) // BLOCK, np.int64)
        _late_passes(kv, xb[lo:hi], ob[lo:hi], kv.base + lo, counts, c, left)


#: sf.round's second launch, over the chunks that need passes 3 and 4 (float32 subnormals into
#: e8m0, stochastic rounding with 32 or more random bits far below a grid: rare), one class for
#: every (stochastic rounding, flags) pair (both run-time values there).  A pass of its own so
#: that a process compiles passes 3 and 4 only when some data needs them: they were 9.7 s of
#: the 24.6 s that the first sf.round(x, "fp16") of a process took to compile (Zen 3, fresh
#: cache: full_pass 4.5 s, _value_block with round_value 5.2 s; Numba's compile timers).
RoundVecLate = record("RoundVecLate", RoundVec.static_fields, _late_chunk, __name__,
                      dynamic=zip(("key", "base", "want_flags"), RoundVec.dynamic_types))


#: The (is_sr, want_flags) pairs and lane types whose second launch class (_round_record) this
#: process has run: from then on sf.round launches it alone (round_vec).
_FULL_LAUNCHED: set = set()


@functools.lru_cache(maxsize=512)
def vec_static(cls, fmt, mode: int, rbits: int, lane):
    """The static part (softfloat._driver) of a record of class ``cls`` (a launch class of
    sf.round or of the arithmetic, with RoundVec's fields) for fmt, mode, sr bits and lane
    type: made once."""
    return cls.params(*vec_params(fmt, mode, rbits, lane), *fmt.kernel_params())


def round_vec(xb, ob, fmt, mode, key, base, rbits, want_flags, counts):
    """ob = patterns of round(x) for the input patterns xb (1-d uint32 / uint64 views of the
    float32 / float64 input, made by the caller) into the carrier patterns ob (uint32 / uint64
    views); key the SR key (seed_key), base the global index of element 0, counts a driver flag
    table.  Requires vec_supported(fmt, input dtype).  ob must not overlap xb: the later passes
    (and the second launch, on the block where the first one stopped) read the inputs of
    elements whose results are already written."""
    if xb.size == 0:
        return
    want_flags = bool(want_flags)
    lane = xb.dtype.type
    dyn = (np.uint64(key), int(base), want_flags)
    pair = (int(mode) == SR, want_flags)
    nc = n_chunks(xb.size)
    if (pair, lane) in _FULL_LAUNCHED:
        # every chunk from its first block: one launch, as where every chunk has marks
        resume = np.zeros(nc, np.int64)
    else:
        # resume[c]: the block of chunk c where pass 1 met its first mark, -1 if none
        resume = np.empty(nc, np.int64)
        launch(vec_static(_LEAN_RECORDS[pair], fmt, int(mode), int(rbits), lane), dyn,
               xb.size, xb, ob, counts, resume)
        # (one chunk: the element itself; numpy's reductions cost a small call ~1 us each)
        if (resume[0] if nc == 1 else resume.max()) < 0:
            return
        _FULL_LAUNCHED.add((pair, lane))
    # late[c]: whether chunk c left elements to passes 3 and 4
    late = np.empty(nc, np.bool_)
    launch(vec_static(_ROUND_RECORDS[pair], fmt, int(mode), int(rbits), lane), dyn, xb.size,
           xb, ob, counts, resume, late)
    if late[0] if nc == 1 else late.any():
        launch(vec_static(RoundVecLate, fmt, int(mode), int(rbits), lane), dyn, xb.size, xb,
               ob, counts, late)
