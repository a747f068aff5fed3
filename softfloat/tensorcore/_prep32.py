"""Operand preparation of the ideal models for float32 carriers, on the bit patterns in 32-bit
SIMD lanes: the same results as softfloat.tensorcore._prep's prep_rows / prep_cols /
prep_pair_serial (conversion to float64, grid check, row or column statistics), 3-6x fewer
cycles per element.

Provides prep_rows32, prep_cols32 (parallel), prep_rows32_serial, prep_cols32_serial and
prep_pair_serial32 (one thread), taking the uint32 views of float32 operands and the
parameters of ``params32(fmt)``.  They apply to formats with a float32 carrier and
emin >= -126 (every float32 pattern is then handled below).

Grid check of a float32 pattern b, a = b & 0x7FFFFFFF (magnitude pattern), E = a >> 23:
* a >= pattern(2^emin) and finite: x is on the grid iff its float32 fraction bits below the
  format's last place are zero, (a & (2^(23-m) - 1)) == 0, and a <= pattern(max).
* 0 < a < pattern(2^emin): without subnormals off the grid; with them x must be a multiple of
  the quantum 2^(emin - m).  x = sig * 2^(E' - 150) with E' = max(E, 1) and sig the 24-bit
  significand (hidden bit when E > 0), so x is a multiple iff the low s bits of sig are zero,
  s = (emin - m + 150) - E' >= 24 - m >= 1 (because E' <= emin + 126 here).  s >= 24 means
  every non-zero sig fails (sig < 2^24), so s is clamped to 24 (shift counts stay < 32).
* a == 0 is on every grid; Inf (a = 0x7F800000) iff the format has infinities, NaN (a above
  it) iff it has NaNs.
Statistics: the smallest exponent max(floor(log2|x|), emin) over the non-zero elements is the
biased field E clamped below at emin + 127 (elements below 2^emin, float32 subnormals included,
take emin; Inf/NaN give 128, unlike _prep's 1024, which does not matter: their sum x^2 is
Inf/NaN and fails every certificate), tracked as a uint32 minimum (zeros contribute
0xFFFFFFFF, i.e. nothing; NO_EXP when no element is non-zero); sum x^2 is accumulated in
float64 (rows: BLAS ddot on the converted row; columns: one accumulator per column lane), any
order, as _prep's (the certificates allow for its rounding).

Imports numpy, numba and softfloat._int32 only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._int32 import and32, eq32, gt32, lt32, ne32, or32, sel32, shl32, shr32, sub32

_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)
_M23 = np.uint32(0x007FFFFF)
_HID = np.uint32(0x00800000)
_NONE = np.uint32(0xFFFFFFFF)
_U0 = np.uint32(0)
_U1 = np.uint32(1)
_U23 = np.uint32(23)
_U24 = np.uint32(24)
#: Exponent recorded when no element is non-zero (as _prep.NO_EXP).
NO_EXP = 4000
#: Columns of B per strip of prep_cols32.
STRIP = 256


def params32(fmt) -> np.ndarray:
    """[low mask, pattern(2^emin), pattern(max), emin + 127, emin - m + 150, subnormals,
    has inf, has nan] as uint32, for a format with m <= 23 and emin >= -126."""
    m, emin = fmt.man_bits, fmt.emin
    if m > 23 or emin < -126:
        raise ValueError(f"format {fmt.name} does not fit the float32 preparation kernels")
    return np.array([(1 << (23 - m)) - 1, (emin + 127) << 23,
                     int(np.float32(fmt.max).view(np.uint32)), emin + 127, emin - m + 150,
                     int(bool(fmt.subnormals)), int(bool(fmt.has_inf)), int(bool(fmt.has_nan))],
                    dtype=np.uint32)


@njit(cache=True, inline="always")
def _unpack(P):
    """The parameters as scalars, read once before a loop (loads from P inside it would be
    repeated after every store, LLVM not knowing that the arrays do not alias, and would stop
    the vectorisation)."""
    return P[0], P[1], P[2], P[3], P[4], P[5], P[6], P[7]


@njit(cache=True, inline="always")
def _check(b, C):
    """(off the grid, exponent field for the statistics) of one float32 pattern b."""
    lowm, tinyb, maxb, eminb, kq, subn, ainf, anan = C
    a = and32(b, _ABS)
    E = shr32(a, _U23)
    tiny = lt32(a, tinyb)
    fin = lt32(a, _INF)
    # normal range: no fraction bits below the last place, not above max
    normbad = ne32(and32(a, lowm), _U0) | gt32(a, maxb)
    # below 2^emin: a multiple of the subnormal quantum (see the module docstring)
    en = ne32(E, _U0)
    sig = or32(and32(a, _M23), sel32(en, _HID, _U0))
    s = sub32(kq, sel32(en, E, _U1))
    s = sel32(lt32(s, _U24), s, _U24)
    subbad = ne32(and32(sig, sub32(shl32(_U1, s), _U1)), _U0)
    tinybad = ne32(a, _U0) & (eq32(subn, _U0) | subbad)
    specbad = (eq32(a, _INF) & eq32(ainf, _U0)) | (gt32(a, _INF) & eq32(anan, _U0))
    bad = (tiny & tinybad) | ((not tiny) & fin & normbad) | specbad
    e = sel32(ne32(a, _U0), sel32(tiny, eminb, E), _NONE)
    return bad, e


@njit(cache=True, error_model="numpy")
def _row32(xr, o, P):
    """One row: o = float64(x); returns (any off-grid element, smallest exponent field).
    The conversion and the check are separate loops over the row (in cache): together in one
    loop LLVM did not vectorise them (mixed 64- and 32-bit lanes)."""
    C = _unpack(P)
    for j in range(xr.shape[0]):
        o[j] = np.float64(np.uint32(xr[j]).view(np.float32))
    anyb = _U0
    mn = _NONE
    for j in range(xr.shape[0]):
        bj, e = _check(xr[j], C)
        anyb = or32(anyb, sel32(bj, _U1, _U0))
        mn = sel32(lt32(e, mn), e, mn)
    return anyb != _U0, mn


@njit(cache=True, error_model="numpy")
def _exp_of(mn):
    """The statistic from the minimum exponent field (NO_EXP when there was none)."""
    return np.int64(NO_EXP) if mn == _NONE else np.int64(mn) - 127


@njit(cache=True, error_model="numpy")
def _rows(x, out, P, bad, anrm, aexp, i0, i1):
    for i in range(i0, i1):
        bi, mn = _row32(x[i], out[i], P)
        bad[i] = bi
        aexp[i] = _exp_of(mn)
        anrm[i] = np.dot(out[i], out[i]) if x.shape[1] else 0.0


@njit(cache=True, error_model="numpy")
def _strip(x, out, j0, w, P, bad, anrm, aexp, bd, ex):
    """Columns j0 .. j0+w-1 of B; bd, ex: uint32 work arrays of at least w lanes."""
    C = _unpack(P)
    rows = x.shape[0]
    nr = anrm[j0:j0 + w]
    for jj in range(w):
        nr[jj] = 0.0
        ex[jj] = _NONE
        bd[jj] = _U0
    for i in range(rows):
        xr = x[i, j0:j0 + w]
        orow = out[i, j0:j0 + w]
        for jj in range(w):
            b = xr[jj]
            v = np.float64(np.uint32(b).view(np.float32))
            orow[jj] = v
            nr[jj] += v * v
            bj, e = _check(b, C)
            bd[jj] = or32(bd[jj], sel32(bj, _U1, _U0))
            ex[jj] = sel32(lt32(e, ex[jj]), e, ex[jj])
    for jj in range(w):
        bad[j0 + jj] = bd[jj] != _U0
        aexp[j0 + jj] = _exp_of(ex[jj])


#: Rows of A per parallel chunk of prep_rows32.
ROWS = 8


@njit(parallel=True, cache=True, error_model="numpy")
def prep_rows32(x, out, P, bad, anrm, aexp):
    """A (m x k, uint32 view of float32): out = float64(A); per row: any off-grid element
    (bad), sum a^2 (anrm) and the smallest exponent (aexp)."""
    m = x.shape[0]
    nch = (m + ROWS - 1) // ROWS
    for ch in prange(nch):
        c = np.int64(ch)
        _rows(x, out, P, bad, anrm, aexp, c * ROWS, min(m, c * ROWS + ROWS))


@njit(parallel=True, cache=True, error_model="numpy")
def prep_cols32(x, out, P, bad, anrm, aexp):
    """B (k x n, uint32 view of float32): out = float64(B); per column: any off-grid element,
    sum b^2 and the smallest exponent."""
    n = x.shape[1]
    nch = (n + STRIP - 1) // STRIP
    for ch in prange(nch):
        j0 = np.int64(ch) * STRIP
        bd = np.empty(STRIP, np.uint32)
        ex = np.empty(STRIP, np.uint32)
        _strip(x, out, j0, min(n, j0 + STRIP) - j0, P, bad, anrm, aexp, bd, ex)


@njit(cache=True, error_model="numpy")
def prep_rows32_serial(x, out, P, bad, anrm, aexp):
    """prep_rows32 on the calling thread."""
    _rows(x, out, P, bad, anrm, aexp, 0, x.shape[0])


@njit(cache=True, error_model="numpy")
def prep_cols32_serial(x, out, P, bad, anrm, aexp):
    """prep_cols32 on the calling thread."""
    n = x.shape[1]
    bd = np.empty(STRIP, np.uint32)
    ex = np.empty(STRIP, np.uint32)
    for j0 in range(0, n, STRIP):
        _strip(x, out, j0, min(n, j0 + STRIP) - j0, P, bad, anrm, aexp, bd, ex)


@njit(cache=True, error_model="numpy")
def prep_pair_serial32(xa, oa, xb, ob, P, bada, nra, exa, badb, nrb, exb):
    """prep_rows32 on A and prep_cols32 on B on the calling thread; returns whether any
    element of either is off the grid."""
    prep_rows32_serial(xa, oa, P, bada, nra, exa)
    prep_cols32_serial(xb, ob, P, badb, nrb, exb)
    anyb = False
    for i in range(bada.shape[0]):
        anyb |= bada[i] != 0
    for j in range(badb.shape[0]):
        anyb |= badb[j] != 0
    return anyb


#: Elements per chunk of convert_checked32.
CHUNK = 1 << 14


@njit(cache=True, error_model="numpy")
def _convert_chunk(xs, os, C):
    """os = float64(xs) for one chunk of float32 patterns; returns whether any element is off
    the grid (two loops, as in _row32)."""
    for j in range(xs.shape[0]):
        os[j] = np.float64(np.uint32(xs[j]).view(np.float32))
    anyb = _U0
    for j in range(xs.shape[0]):
        bj, e = _check(xs[j], C)
        anyb = or32(anyb, sel32(bj, _U1, _U0))
    return anyb != _U0


@njit(parallel=True, cache=True, error_model="numpy")
def convert_checked32(x, out, P):
    """out = float64 of the float32 patterns x (1-d uint32 view); returns the flat index of the
    first element off the format's grid, or -1 (the float32 counterpart of
    _prep.convert_checked, same result)."""
    n = x.shape[0]
    nch = (n + CHUNK - 1) // CHUNK
    flags = np.zeros(max(nch, 1), np.uint8)
    for ch in prange(nch):
        lo = np.int64(ch) * CHUNK
        hi = min(n, lo + CHUNK)
        flags[ch] = _convert_chunk(x[lo:hi], out[lo:hi], _unpack(P))
    return _first_bad32(x, flags, P)


@njit(cache=True, error_model="numpy")
def convert_checked32_serial(x, out, P):
    """convert_checked32 on the calling thread (small arrays)."""
    n = x.shape[0]
    nch = (n + CHUNK - 1) // CHUNK
    flags = np.zeros(max(nch, 1), np.uint8)
    C = _unpack(P)
    for ch in range(nch):
        lo = ch * CHUNK
        hi = min(n, lo + CHUNK)
        flags[ch] = _convert_chunk(x[lo:hi], out[lo:hi], C)
    return _first_bad32(x, flags, P)


@njit(cache=True, error_model="numpy")
def _first_bad32(x, flags, P):
    C = _unpack(P)
    n = x.shape[0]
    for ch in range(flags.shape[0]):
        if flags[ch]:
            for t in range(ch * CHUNK, min(n, ch * CHUNK + CHUNK)):
                bj, e = _check(x[t], C)
                if bj:
                    return t
    return -1


_TF32_KEEP = np.uint32(0xFFFFE000)


@njit(parallel=True, cache=True, error_model="numpy")
def tf32_operand(x, out):
    """out = float64 of the tf32 value the hardware reads from each float32 pattern of x
    (1-d uint32 view): the 13 low mantissa bits cleared (truncation, spec section 3), NaN kept
    NaN (clearing the low bits of a NaN whose payload lies there would make it Inf)."""
    n = x.shape[0]
    nch = (n + CHUNK - 1) // CHUNK
    for ch in prange(nch):
        lo = np.int64(ch) * CHUNK
        hi = min(n, lo + CHUNK)
        for j in range(lo, hi):
            b = x[j]
            isnan = gt32(and32(b, _ABS), _INF)
            t = sel32(isnan, np.uint32(0x7FC00000), and32(b, _TF32_KEEP))
            out[j] = np.float64(np.uint32(t).view(np.float32))
