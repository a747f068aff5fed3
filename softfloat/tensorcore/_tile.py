"""The one SIMD kernel of the truncating block-FMA models (spec section 2, finite K and F):
explicit vectors over the columns of D (softfloat._intrinsics), ROWS = 4 rows of A x LANES
columns per register tile, any K; LANES and the accumulator lanes per instruction set
(softfloat._intrinsics: 8 lanes and int64 accumulators with AVX-512, 4 lanes and float64
accumulators elsewhere).

Provides
    pack_a(a, trans, av, pea, gp, emin, rowbad) -> rejects
        A (m x k; ``a`` itself, or its transpose when trans) -> values av (ROWS-row tiles x kp)
        and exponent codes pea (tiles x kp x ROWS*LANES, int16); rowbad[i] = 1 where row i
        holds Inf/NaN; returns the number of elements the grid filter did not pass
        (softfloat.tensorcore._prep.fast_ok; the caller settles them with the exact check)
    pack_b(b, trans, bp, peb, gp, emin, colbad) -> rejects
        B (k x n) -> panels of LANES columns: values bp and codes peb (panels x kp x LANES)
    fused_gemm(av, pea, bp, peb, cv, out, K, F, f, emin_acc, emax_acc, rne, chk)
        out = DOT for every element; NaN marks an element that must be recomputed (below)
    fix_list(rowbad, colbad, cv, out)   (rows, cols) of the elements hw_fix must recompute
    hw_fix(av, pea, bp, peb, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne)
        those elements with the scalar reference (softfloat.tensorcore._superacc.dot_chain)

Encoding.  kp = k rounded up to a multiple of K (zero padding: the short last block of the spec
is the zero-padded one); rows past m (up to a whole tile) are zero rows.  Each input x is carried
as its float64 value and the EXPONENT E = max(floor(log2 |x|), emin) of its alignment power 2^E
(spec step 2: subnormals take emin), as an int16 code: pea holds 16 E for A (replicated over the
LANES lanes of its row: pea[g, t, LANES r + l] for row ROWS g + r), peb 16 (E + 1023) for B;
zeros (and Inf/NaN, which the scalar fix-up handles) get ZERO_E16 = -16000.  A panel of B holds
LANES consecutive columns, k-major: bp[p, t, l] = B[t, LANES p + l] (zero columns pad n).

Why every step is exact (integer arithmetic on float64 lanes, as in _scalar.py):
* the code of a product term, pea + peb = 16 (Ea + Eb + 1023), is computed for the ROWS x LANES
  products of one k index in one int16 vector, and maxed over the block (_eblock; no overflow:
  every code lies in -32000 .. 20432).  For two non-zero inputs (exponents in -149 .. 127:
  float32 carriers) it is 16 times a biased float64 exponent in 725 .. 1277, and placed in the
  top 16 bits of a 64-bit lane it is the bit pattern of the float64 power 2^(Ea + Eb)
  (softfloat._intrinsics.srow); a product with a zero factor has a code <= 16 * 150, below every
  real product's.  The block code is clamped below at that of 2^EMAX_CLAMP, and E_max of the
  block (c included, spec step 3) is the larger (vmax: two non-negative float64s, neither a
  NaN) of that power and c's power Pc (0 for c = 0): Pm = max(Pc, 2^(Ea_t + Eb_t),
  2^EMAX_CLAMP) exactly, up to the fake powers (<= 2^-873) of zero products, which lose to
  every real term's power (>= 2^-298) and to every non-zero c's (>= 2^emin_acc) and so matter
  only in a block whose terms are all zero, where they just keep the scalings below finite, as
  2^EMAX_CLAMP does;
* sc = 2^(F - E_max) is built from the bits of Pm ((2046 + F) << 52 minus bits(Pm), an exact
  integer operation on the exponent field) and un = 1 / sc from sc's bits: both normal powers
  of two;
* a product a*b of inputs of precision p <= 26 is exact in float64 (<= 52 bits), scaling it by
  sc is exact, and its truncation toward zero (vterm) is T_i of spec step 3 (magnitude
  truncation with the sign), |T_i| < 2^(F+2); c's term trunc(c * sc) likewise;
* the sum S of K terms plus c's is exact in the accumulator lanes, int64 or float64 alike
  (|S| and every partial sum < (K+1) 2^(F+2) <= 2^53, checked by TCModel: integers of float64),
  and converts to float64 exactly, +0 for S = 0 (vacc_float); v = S * un is exact;
* ROUND (spec): q = max(2^floor(log2|v|) 2^-f, 2^(emin - f)) is the quantum of v, 1/q is built
  from q's bits, and trunc(v / q) (RZ) or roundeven(v / q) (RNE) times q is the rounded value,
  the carry out of rounding included (as _scalar.round_out).  S = 0 gives +0; a tiny negative
  v that rounds to zero gives -0 (spec 8.6);
* the next block's c power is Pc = max(2^floor(log2|r|), 2^emin) (0 or 2^EMAX_CLAMP for
  r = 0).  The usual case takes shortcuts for ROUND (_end4) and, for wide accumulator
  exponent ranges, skips their subnormal test (chk False, _tile's lazy mode); both are exact
  for the inputs they accept and fall back to the formula above otherwise.
Overflow: the lanes do not produce Inf.  They track M = the largest 2^floor(log2|v|) seen, per
lane of the tile over its ROWS rows (one vector: a register, where one per row were spilled to
memory on AVX2's 16 registers); a block can overflow (|round(v)| >= 2^(emax+1)) only if that
power reaches 2^emax (2^(emax+1) under RZ, which never rounds up), and then the tile's ROWS
elements of that lane are written as NaN and recomputed by the scalar hw_fix with the sticky-Inf
rule of spec step 1.  Until then the float64 lanes simply hold the (out of range) value,
exactly.  Elements with Inf/NaN inputs hold meaningless values here; fix_list lists them too.

Imports numpy, numba, softfloat._intrinsics and the sibling modules _prep and _scalar only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._intrinsics import (LANES, ROWS, sadd, sany_ult, sbcast_rows, sfloor, sload, smax,
                            sminu_off, srow0, srow1, srow2, srow3, ssplat, vacc_add, vacc_float,
                            vadd, vand_bits, vany_between4, vbcast, vbits_rsub, vload,
                            vmax, vmul, vrint, vselect_ge, vsplat, vstore, vsub, vterm, vtrunc)
from .._primitives import F64_EXP_ALL_ONES, F64_EXP_FIELD, F64_FRAC_BITS
from ._prep import fast_ok
from ._scalar import EMAX_CLAMP, INV_BITS, ZERO_EXP
from ._superacc import NLIMBS, dot_chain

#: Rows of A per parallel chunk (a multiple of ROWS): the chunk's rows (values and exponent
#: codes) and one panel of B stay in a core's L2 cache while the tiles pass over the panels.
ROWS_PER_CHUNK = 16
#: Exponent codes (int16): pea holds 16 Ea, peb 16 (Eb + BIAS), so that the code of a product,
#: 16 (Ea + Eb + BIAS), placed in the top 16 bits of a 64-bit lane is the bit pattern of the
#: float64 power 2^(Ea + Eb) (16 = 2^4: the code's low 4 bits land on the float64 fraction's
#: top 4 bits, which stay zero).  A zero (and Inf / NaN, which hw_fix handles) has the code
#: ZERO_E16.
CODE = 16
BIAS = 1023
ZERO_E16 = -1000 * CODE
#: The code of 2^EMAX_CLAMP: the block exponent codes are clamped below by it.
ETINY16 = (EMAX_CLAMP + BIAS) * CODE
#: Every product of two non-zero inputs has a code >= 16 (1023 - 2 * 149) > REAL16 (inputs
#: fit a float32 carrier); one with a zero factor has a code <= 16 (-1000 + 127 + BIAS) <
#: REAL16 (and >= 2 ZERO_E16 = -32000: no int16 overflow).
REAL16 = 4000
#: Vector offsets of the ROWS rows of a tile (lane LANES r + l: row r, column l).
TILE = ROWS * LANES

_EXPMASK = np.int64(F64_EXP_FIELD)          # (as int64 for the vector masks)
#: 1/q = _INV_BITS - bits(q) for a normal power of two q (_scalar.INV_BITS, as int64).
_INV_BITS = np.int64(INV_BITS)
#: Powers below this are zero (every non-zero power is >= 2^EMAX_CLAMP).
_TINY_TEST = 2.0 ** -1000


@njit(cache=True, error_model="numpy")
def _exp16(x, emin, bias):
    """CODE (max(floor(log2|x|), emin) + bias) for a finite non-zero float64 x (an in_format
    value: normal in float64, so its exponent field is 0 only for zeros); ZERO_E16 for a zero,
    Inf or NaN x (exponent field 0 or 0x7FF)."""
    e = np.int64((np.float64(x).view(np.uint64) >> F64_FRAC_BITS) & F64_EXP_ALL_ONES)
    code = (max(e - 1023, emin) + bias) * CODE
    return np.int16(code if (e != 0) & (e != 0x7FF) else ZERO_E16)


@njit(cache=True, error_model="numpy")
def _nonfinite(x):
    return (abs(x) == np.inf) | (x != x)


@njit(cache=True, error_model="numpy")
def _conv(xs, os, codes, flags, gp, emin, bias):
    """os = float64(xs), codes = their exponent codes (_exp16), flags |= 1 where Inf/NaN, for
    slices of equal length; returns the number of elements fast_ok did not pass.  (Whole
    slices, indices from 0: LLVM vectorises this loop; with computed bounds Numba's negative
    index handling stopped it.)"""
    cnt = 0
    for t in range(xs.shape[0]):
        x = np.float64(xs[t])
        os[t] = x
        cnt += not fast_ok(x, gp)
        flags[t] |= _nonfinite(x)
        codes[t] = _exp16(x, emin, bias)
    return cnt


@njit(cache=True, error_model="numpy")
def _pack_rows(a, trans, av, pea, g, m, gp, emin, rowbad):
    """Tile g of pack_a."""
    k = a.shape[0] if trans else a.shape[1]
    kp = av.shape[1]
    codes = np.empty(kp, np.int16)
    flags = np.zeros(kp, np.uint8)
    cols = np.empty((ROWS, k))
    if trans:
        # A's rows are columns of a: gather the tile's ROWS of them in one pass over a's rows
        # (ROWS adjacent elements of each).
        h = min(ROWS, m - g * ROWS)
        for t in range(k):
            for r in range(h):
                cols[r, t] = a[t, g * ROWS + r]
    cnt = 0
    for r in range(ROWS):
        i = g * ROWS + r
        row = av[i]
        if i < m:
            flags[:] = 0
            if trans:
                cnt += _conv(cols[r], row[:k], codes[:k], flags[:k], gp, emin, 0)
            else:
                cnt += _conv(a[i], row[:k], codes[:k], flags[:k], gp, emin, 0)
            rowbad[i] = flags.max() if k else 0
            row[k:] = 0.0
            codes[k:] = ZERO_E16
        else:
            row[:] = 0.0
            codes[:] = ZERO_E16
        for t in range(kp):
            e = codes[t]
            for lane in range(LANES):
                pea[g, t, r * LANES + lane] = e
    return cnt


@njit(cache=True, error_model="numpy")
def pack_a(a, trans, av, pea, gp, emin, rowbad):
    """av[i, t] = A[i, t] (0 for t >= k or i >= m), pea[g, t, LANES r + l] = the exponent code
    (_exp16, no bias) of A[ROWS g + r, t] for every l (ZERO_E16 outside A); A is ``a``, or its
    transpose when trans (a transposed view, read in place).  gp: the grid filter's parameters
    (_prep.filter_params).  rowbad[i] = 1 where row i holds Inf/NaN.  Returns the number of
    elements fast_ok did not pass.  (One thread: packing is O(m k) against the GEMM's O(m n k),
    0.5 ms at n = 1024, and a parallel loop would double the kernel's compile time, which a
    first training run pays.)"""
    m = a.shape[1] if trans else a.shape[0]
    rej = 0
    for g in range(pea.shape[0]):
        rej += _pack_rows(a, trans, av, pea, g, m, gp, emin, rowbad)
    return rej


#: Panels of B packed together (B's rows read PACK_PANELS * LANES columns at a time).
PACK_PANELS = 8


@njit(cache=True, error_model="numpy")
def _pack_panels(b, trans, bp, peb, p0, gp, emin, colbad):
    """Panels p0 .. p0 + PACK_PANELS - 1 of pack_b, read along B's rows (or, transposed, along
    b's rows, B's columns), written into the panels."""
    k, n = (b.shape[1], b.shape[0]) if trans else (b.shape[0], b.shape[1])
    npan, kp, _ = bp.shape
    p1 = min(npan, p0 + PACK_PANELS)
    j0 = p0 * LANES
    w = min((p1 - p0) * LANES, n - j0)
    cnt = 0
    if trans:
        vals = np.empty(k)
        codes = np.empty(k, np.int16)
        flags = np.zeros(k, np.uint8)
        bp[p0:p1] = 0.0
        peb[p0:p1] = ZERO_E16
        for j in range(w):
            flags[:] = 0
            cnt += _conv(b[j0 + j], vals, codes, flags, gp, emin, BIAS)
            colbad[j0 + j] = flags.max() if k else 0
            p = p0 + j // LANES
            lane = j % LANES
            for t in range(k):
                bp[p, t, lane] = vals[t]
                peb[p, t, lane] = codes[t]
        return cnt
    row = np.zeros((p1 - p0) * LANES)
    codes = np.empty((p1 - p0) * LANES, np.int16)
    flags = np.zeros((p1 - p0) * LANES, np.uint8)
    for t in range(kp):
        if t < k:
            cnt += _conv(b[t, j0:j0 + w], row[:w], codes[:w], flags[:w], gp, emin, BIAS)
            row[w:] = 0.0
            codes[w:] = ZERO_E16
        else:
            row[:] = 0.0
            codes[:] = ZERO_E16
        for q in range(p1 - p0):
            for lane in range(LANES):
                bp[p0 + q, t, lane] = row[q * LANES + lane]
                peb[p0 + q, t, lane] = codes[q * LANES + lane]
    for j in range(w):
        colbad[j0 + j] = flags[j]
    return cnt


@njit(cache=True, error_model="numpy")
def pack_b(b, trans, bp, peb, gp, emin, colbad):
    """bp[p, t, l] = B[t, LANES p + l] (0 outside B), peb[p, t, l] = its exponent code (_exp16
    with BIAS); B is ``b``, or its transpose when trans.  colbad[j] = 1 where column j holds
    Inf/NaN.  Returns the number of elements fast_ok did not pass.  (One thread, as pack_a.)"""
    rej = 0
    for ch in range((bp.shape[0] + PACK_PANELS - 1) // PACK_PANELS):
        rej += _pack_panels(b, trans, bp, peb, ch * PACK_PANELS, gp, emin, colbad)
    return rej


@njit(cache=True, error_model="numpy")
def _cpow(r, peminv, tiny, tiny_test):
    """Alignment power of accumulator values r (lanes): max(2^floor(log2|r|), 2^emin), and
    2^EMAX_CLAMP for r = 0 (a non-zero r is >= 2^(emin - f) >> tiny_test)."""
    pr = vand_bits(r, _EXPMASK)
    return vselect_ge(pr, tiny_test, vmax(pr, peminv), tiny)


@njit(cache=True, error_model="numpy")
def _start(x, pm, csc):
    """Block start for one row: (sc, S) with sc = 2^(F - E_max) (pm = 2^E_max) and S = c's
    truncated term."""
    sc = vbits_rsub(csc, pm)
    return sc, vterm(vmul(x, sc))


@njit(cache=True, error_model="numpy")
def _general(v, pf, qscale, qmin, peminv, tiny, tiny_test, rne):
    """ROUND of v (power pf) by the general quantum formula of the module docstring (any v,
    subnormal outputs included); returns (r, the alignment power of r)."""
    q = vmax(vmul(pf, qscale), qmin)
    y = vmul(v, vbits_rsub(_INV_BITS, q))
    r = vmul(vrint(y) if rne else vtrunc(y), q)
    return r, _cpow(r, peminv, tiny, tiny_test)


@njit(cache=True, error_model="numpy")
def _end4(S0, S1, S2, S3, sc0, sc1, sc2, sc3, M, qscale, qmin, pemin, peminv, tiny, tiny_test,
          rzmask, c15, rne, chk):
    """Block end for the 4 rows: v = S * 2^(E_max - F) rounded into the accumulator (ROUND),
    the power 2^(E_max - F) = 1 / sc built from sc's bits; returns the 4 rows' (r, the
    alignment power of r) and the updated overflow watch M (one vector for the tile: per lane
    the largest power of the 4 rows' v).

    Where every lane of the 4 rows is 0 or has |v| >= 2^emin (the usual case) the rounding is
    one exact operation on float64 v: RZ clears the 52 - f low fraction bits (rzmask); RNE adds
    and subtracts C = 1.5 * 2^(floor(log2|v|) + 52 - f), whose binade has the unit q =
    2^(floor(log2|v|) - f) and holds v + C (52 - f >= 2), so the IEEE addition rounds v to a
    multiple of q, ties to even (C / q = 3 * 2^51 is even), and the subtraction is exact.  The
    power of r is then 2^floor(log2|r|) (>= 2^emin: no clamp needed), and 0 for r = 0 (the next
    block's E_max is clamped by _eblock).  Otherwise every row takes the general formula
    (_general: subnormal outputs).  chk False: the caller has excluded subnormal outputs
    (_tile) and the test is skipped."""
    v0 = vmul(vacc_float(S0), vbits_rsub(_INV_BITS, sc0))
    v1 = vmul(vacc_float(S1), vbits_rsub(_INV_BITS, sc1))
    v2 = vmul(vacc_float(S2), vbits_rsub(_INV_BITS, sc2))
    v3 = vmul(vacc_float(S3), vbits_rsub(_INV_BITS, sc3))
    pf0 = vand_bits(v0, _EXPMASK)
    pf1 = vand_bits(v1, _EXPMASK)
    pf2 = vand_bits(v2, _EXPMASK)
    pf3 = vand_bits(v3, _EXPMASK)
    M = vmax(M, vmax(vmax(pf0, pf1), vmax(pf2, pf3)))
    if chk and vany_between4(pf0, pf1, pf2, pf3, 0.0, pemin):
        r0, P0 = _general(v0, pf0, qscale, qmin, peminv, tiny, tiny_test, rne)
        r1, P1 = _general(v1, pf1, qscale, qmin, peminv, tiny, tiny_test, rne)
        r2, P2 = _general(v2, pf2, qscale, qmin, peminv, tiny, tiny_test, rne)
        r3, P3 = _general(v3, pf3, qscale, qmin, peminv, tiny, tiny_test, rne)
        return r0, r1, r2, r3, P0, P1, P2, P3, M
    if rne:
        c0 = vmul(pf0, c15)
        c1 = vmul(pf1, c15)
        c2 = vmul(pf2, c15)
        c3 = vmul(pf3, c15)
        r0 = vsub(vadd(v0, c0), c0)
        r1 = vsub(vadd(v1, c1), c1)
        r2 = vsub(vadd(v2, c2), c2)
        r3 = vsub(vadd(v3, c3), c3)
        return (r0, r1, r2, r3, vand_bits(r0, _EXPMASK), vand_bits(r1, _EXPMASK),
                vand_bits(r2, _EXPMASK), vand_bits(r3, _EXPMASK), M)
    return (vand_bits(v0, rzmask), vand_bits(v1, rzmask), vand_bits(v2, rzmask),
            vand_bits(v3, rzmask), pf0, pf1, pf2, pf3, M)


@njit(cache=True, error_model="numpy")
def _code(pea, qo, peb, bo, t):
    """The product codes of k index t for the whole tile (int16 lanes)."""
    return sadd(sload(pea, qo + t * TILE), sbcast_rows(peb, bo + t * LANES))


@njit(cache=True, error_model="numpy")
def _eblock(pea, qo, peb, bo, k0, K):
    """Per lane of the tile: the largest product code 16 (Ea + Eb + BIAS) of the block's K
    products, clamped below at ETINY16 (see the constants: a product with a zero factor never
    exceeds a real product's code).  K = 4: a tree of maxima, straight-line."""
    if K == 4:
        return sfloor(smax(smax(_code(pea, qo, peb, bo, k0), _code(pea, qo, peb, bo, k0 + 1)),
                           smax(_code(pea, qo, peb, bo, k0 + 2),
                                _code(pea, qo, peb, bo, k0 + 3))), ETINY16)
    s = _code(pea, qo, peb, bo, k0)
    for t in range(k0 + 1, k0 + K):
        s = smax(s, _code(pea, qo, peb, bo, t))
    return sfloor(s, ETINY16)


@njit(cache=True, error_model="numpy")
def _term(av, o, b, sc):
    """T = trunc(a * b * sc) in accumulator lanes (a = av.flat[o]; exact, module docstring)."""
    return vterm(vmul(vmul(vbcast(av, o), b), sc))


@njit(cache=True, error_model="numpy")
def _sum4(S, av, o, b0, b1, b2, b3, sc):
    """S + the 4 truncated terms of one row (a tree of additions, all exact)."""
    return vacc_add(S, vacc_add(vacc_add(_term(av, o, b0, sc), _term(av, o + 1, b1, sc)),
                                vacc_add(_term(av, o + 2, b2, sc), _term(av, o + 3, b3, sc))))


@njit(cache=True, error_model="numpy")
def _sum4x4(S0, S1, S2, S3, av, o0, o1, o2, o3, t, bp, q, sc0, sc1, sc2, sc3):
    """The 4 rows' sums plus the terms of k indices t .. t + 3 (B's 4 vectors from flat offset
    q of the panel)."""
    b0 = vload(bp, q)
    b1 = vload(bp, q + LANES)
    b2 = vload(bp, q + 2 * LANES)
    b3 = vload(bp, q + 3 * LANES)
    return (_sum4(S0, av, o0 + t, b0, b1, b2, b3, sc0),
            _sum4(S1, av, o1 + t, b0, b1, b2, b3, sc1),
            _sum4(S2, av, o2 + t, b0, b1, b2, b3, sc2),
            _sum4(S3, av, o3 + t, b0, b1, b2, b3, sc3))


@njit(cache=True, error_model="numpy")
def _tile(av, pea, bp, peb, cbuf, obuf, g, boff, kp, K, F, f, emin_acc, thr, rne, chk):
    """Rows ROWS g .. ROWS g + 3 of A against the panel of B at flat offset boff: obuf[r, l] =
    DOT of that row and column l of the panel from c = cbuf[r, l] (NaN in the lanes where M
    reached thr);
    returns False.

    chk False (the lazy mode): the rounding's test for subnormal outputs is skipped, and
    instead the smallest code s of a block with a real product (a code >= REAL16) is tracked;
    when some block has s < 16 (emin_acc + F + BIAS) the tile is abandoned (True returned,
    obuf not written) and the caller runs it again with chk True.  Otherwise every block's
    E_max >= emin_acc + F where it has a real product, so a non-zero v = S 2^(E_max - F) has
    |v| >= 2^emin_acc; where it has none, every term but c's is 0, c's term trunc(c sc) is c
    2^(F - E_c) exactly (c has f <= F fraction bits above 2^(E_c - f)) and v = c, a value of
    the accumulator format, which both fast roundings return unchanged."""
    tiny = vsplat(2.0 ** EMAX_CLAMP)
    tiny_test = vsplat(_TINY_TEST)
    pemin = 2.0 ** emin_acc
    peminv = vsplat(pemin)
    qscale = vsplat(2.0 ** -f)
    qmin = vsplat(2.0 ** (emin_acc - f))
    c15 = vsplat(1.5 * 2.0 ** (52 - f))
    rzmask = np.int64(-1) << np.int64(52 - f)
    csc = np.int64(2046 + F) << 52
    o0 = g * ROWS * kp
    o1 = o0 + kp
    o2 = o1 + kp
    o3 = o2 + kp
    qo = g * kp * TILE
    x0 = vload(cbuf, 0)
    x1 = vload(cbuf, LANES)
    x2 = vload(cbuf, 2 * LANES)
    x3 = vload(cbuf, 3 * LANES)
    P0 = _cpow(x0, peminv, tiny, tiny_test)
    P1 = _cpow(x1, peminv, tiny, tiny_test)
    P2 = _cpow(x2, peminv, tiny, tiny_test)
    P3 = _cpow(x3, peminv, tiny, tiny_test)
    M = vsplat(0.0)
    by4 = K % 4 == 0
    W = ssplat(-1)
    lim = min(max((emin_acc + F + BIAS) * CODE - REAL16, 0), 65535)
    for k0 in range(0, kp, K):
        # Step 3: E_max of c and the K products, per lane: the products' largest exponent sum
        # for the 4 rows at once (int16), then per row the larger of it (a float64 power, see
        # srow) and c's power (0 or >= 2^EMAX_CLAMP: zero products never win).
        s = _eblock(pea, qo, peb, boff, k0, K)
        if not chk:
            W = sminu_off(W, s, REAL16)
        sc0, S0 = _start(x0, vmax(P0, srow0(s)), csc)
        sc1, S1 = _start(x1, vmax(P1, srow1(s)), csc)
        sc2, S2 = _start(x2, vmax(P2, srow2(s)), csc)
        sc3, S3 = _start(x3, vmax(P3, srow3(s)), csc)
        # Step 4: the exact integer sum of the truncated terms (K = 4, the V100 and T4 models:
        # straight-line code, no inner loop).
        if K == 4:
            S0, S1, S2, S3 = _sum4x4(S0, S1, S2, S3, av, o0, o1, o2, o3, k0, bp,
                                     boff + k0 * LANES, sc0, sc1, sc2, sc3)
        elif by4:
            for t in range(k0, k0 + K, 4):
                S0, S1, S2, S3 = _sum4x4(S0, S1, S2, S3, av, o0, o1, o2, o3, t, bp,
                                         boff + t * LANES, sc0, sc1, sc2, sc3)
        else:
            for t in range(k0, k0 + K):
                b = vload(bp, boff + t * LANES)
                S0 = vacc_add(S0, _term(av, o0 + t, b, sc0))
                S1 = vacc_add(S1, _term(av, o1 + t, b, sc1))
                S2 = vacc_add(S2, _term(av, o2 + t, b, sc2))
                S3 = vacc_add(S3, _term(av, o3 + t, b, sc3))
        # Step 5: one rounding per block.
        x0, x1, x2, x3, P0, P1, P2, P3, M = _end4(
            S0, S1, S2, S3, sc0, sc1, sc2, sc3, M, qscale, qmin, pemin, peminv, tiny,
            tiny_test, rzmask, c15, rne, chk)
    if not chk and sany_ult(W, lim):
        return True
    nan = vsplat(np.nan)
    thrv = vsplat(thr)
    vstore(obuf, 0, vselect_ge(M, thrv, nan, x0))
    vstore(obuf, LANES, vselect_ge(M, thrv, nan, x1))
    vstore(obuf, 2 * LANES, vselect_ge(M, thrv, nan, x2))
    vstore(obuf, 3 * LANES, vselect_ge(M, thrv, nan, x3))
    return False


@njit(cache=True, error_model="numpy")
def _rows(av, pea, bp, peb, cv, out, r0, r1, K, F, f, emin_acc, thr, rne, chk):
    """Rows r0..r1-1 of D (r0 a multiple of ROWS), ROWS at a time (the rows of a short last
    tile past m are zero rows of av / pea, with c = 0, and are not stored)."""
    m, n = cv.shape
    npan, kp, _ = bp.shape
    cbuf = np.empty((ROWS, LANES))
    obuf = np.empty((ROWS, LANES))
    recheck = K > 0                         # True, as a run-time bool: one compilation of _tile
    for p in range(npan):
        j0 = p * LANES
        w = min(LANES, n - j0)
        for i0 in range(r0, r1, ROWS):
            h = min(ROWS, m - i0)
            for r in range(ROWS):
                for lane in range(LANES):
                    cbuf[r, lane] = cv[i0 + r, j0 + lane] if (r < h and lane < w) else 0.0
            if _tile(av, pea, bp, peb, cbuf, obuf, i0 // ROWS, p * kp * LANES, kp,
                     K, F, f, emin_acc, thr, rne, chk):
                _tile(av, pea, bp, peb, cbuf, obuf, i0 // ROWS, p * kp * LANES, kp,
                      K, F, f, emin_acc, thr, rne, recheck)
            for r in range(h):
                for lane in range(w):
                    out[i0 + r, j0 + lane] = obuf[r, lane]


@njit(parallel=True, cache=True, error_model="numpy")
def fused_gemm(av, pea, bp, peb, cv, out, K, F, f, emin_acc, emax_acc, rne, chk):
    """out[i, j] = DOT(A[i, :], B[:, j], C[i, j]) for elements with finite inputs that never
    come near overflow; NaN for those that do (module docstring).  av, pea: pack_a; bp, peb:
    pack_b; cv, out: m x n float64; kp a multiple of K; chk: test every block for subnormal
    outputs (False: the lazy mode of _tile, for accumulators whose emin_acc + F is far below
    the products' exponents)."""
    m = cv.shape[0]
    # RZ never rounds up: overflow needs |v| >= 2^(emax+1); RNE may round 2^emax <= |v| up.
    thr = 2.0 ** (emax_acc + 1) if not rne else 2.0 ** emax_acc
    if (emin_acc + F + BIAS) * CODE - REAL16 > 30000:
        chk = True                          # (outside the lazy mode's 16-bit test)
    nch = (m + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    for ch in prange(nch):
        _rows(av, pea, bp, peb, cv, out, ch * ROWS_PER_CHUNK,
              min(m, (ch + 1) * ROWS_PER_CHUNK), K, F, f, emin_acc, thr, rne, chk)


@njit(cache=True, error_model="numpy")
def _needs_fix(rowbad, colbad, cv, out, i, j):
    x = cv[i, j]
    return rowbad[i] | colbad[j] | _nonfinite(x) | (out[i, j] != out[i, j])


@njit(cache=True, error_model="numpy")
def fix_list(rowbad, colbad, cv, out):
    """(rows, cols) of the elements to recompute: an Inf/NaN in their row of A, column of B or
    C entry, or a NaN from fused_gemm (one pass to count, one to list)."""
    m, n = out.shape
    tot = 0
    for i in range(m):
        for j in range(n):
            tot += _needs_fix(rowbad, colbad, cv, out, i, j)
    rows = np.empty(tot, np.int64)
    cols = np.empty(tot, np.int64)
    if tot:
        s = 0
        for i in range(m):
            for j in range(n):
                if _needs_fix(rowbad, colbad, cv, out, i, j):
                    rows[s] = i
                    cols[s] = j
                    s += 1
    return rows, cols


@njit(cache=True, error_model="numpy")
def _fexp(e, bias):
    """An exponent code of pea / peb (bias removed) as the float32 dot_chain takes (ZERO_EXP
    for a zero)."""
    if e == ZERO_E16:
        return np.float32(ZERO_EXP)
    return np.float32(np.int64(e) // CODE - bias)


@njit(cache=True, error_model="numpy")
def hw_fix(av, pea, bp, peb, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne):
    """Recompute out[rows[t], cols[t]] with the scalar reference _superacc.dot_chain (special
    values and overflow included), from the packed operands.  (One thread: the elements with
    Inf/NaN inputs or near overflow are few, and a parallel loop would lengthen the first
    run's compilation.)"""
    kp = av.shape[1]
    for s in range(rows.shape[0]):
        i = rows[s]
        j = cols[s]
        p = j // LANES
        lane = j - p * LANES
        g = i // ROWS
        r = i - g * ROWS
        ea = np.empty(kp, np.float32)
        eb = np.empty(kp, np.float32)
        limbs = np.zeros(NLIMBS, np.int64)                  # (not used: F >= 0)
        bcol = np.empty(kp)
        for t in range(kp):
            ea[t] = _fexp(pea[g, t, r * LANES], 0)
            eb[t] = _fexp(peb[p, t, lane], BIAS)
            bcol[t] = bp[p, t, lane]
        out[i, j] = dot_chain(limbs, av[i], ea, bcol, eb, cv[i, j], K, F, f, emin_acc,
                              emax_acc, rne)
