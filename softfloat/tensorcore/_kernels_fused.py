"""The fast kernel of the truncating block-FMA models (spec section 2, finite K and F): explicit
SIMD over the columns of D (softfloat.tensorcore._simd), 4 rows of A x 8 columns per tile, any K.

Provides
    pack_a(a, av, pea, emin)           A (m x k) -> values av (m4 x kp, m4 = m rounded up to 4)
                                       and exponent codes pea (m4/4 x kp x 32, int16)
    pack_b(b, bp, peb, emin)           B (k x n) -> panels of 8 columns: values bp and exponent
                                       codes peb (n8 x kp x 8, float64 / int16)
    fused_gemm(av, pea, bp, peb, cv, out, K, F, f, emin_acc, emax_acc, rne, chk)
                                       out = DOT for every element; NaN marks an element that
                                       must be recomputed (see below)
    fix_list(rowbad, colbad, cv, out)  (rows, cols) of the elements hw_fix must recompute
    hw_fix(av, pea, bp, peb, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne)
                                       those elements with the scalar _kernels.hw_dot

Encoding.  kp = k rounded up to a multiple of K (zero padding: the short last block of the
spec is the zero-padded one); rows past m (up to a whole 4-row tile) are zero rows.  Each input
x is carried as its float64 value and the EXPONENT E = max(floor(log2 |x|), emin) of its
alignment power 2^E (spec step 2: subnormals take emin), as an int16 code: pea holds 16 E for
A (replicated over the 8 lanes of its row in a 4 x 8 tile: pea[g, t, 8r + l] for row 4g + r),
peb 16 (E + 1023) for B; zeros (and Inf/NaN, which the scalar fix-up handles) get ZERO_E16 =
-16000.  A panel of B holds 8 consecutive columns, k-major: bp[p, t, l] = B[t, 8p + l] (zero
columns pad n).

Why every step is exact (integer arithmetic on float64 lanes, as in _kernels.py):
* the code of a product term, pea + peb = 16 (Ea + Eb + 1023), is computed for the 4 x 8
  products of one k index in one vector of 32 int16 lanes, and maxed over the block (_eblock;
  no overflow: every code lies in -32000 .. 20432).  For two non-zero inputs (exponents in
  -149 .. 127: float32 carriers) it is 16 times a biased float64 exponent in 725 .. 1277, and
  placed in the top 16 bits of a 64-bit lane it is the bit pattern of the float64 power
  2^(Ea + Eb) (_simd.srow0..3); a product with a zero factor has a code <= 16 * 150, below
  every real product's.  The block code is clamped below at that of 2^EMAX_CLAMP, and E_max
  of the block (c included, spec step 3) is the larger, as int64 bit patterns, of that power
  and c's power Pc (0 for c = 0): Pm = max(Pc, 2^(Ea_t + Eb_t), 2^EMAX_CLAMP) exactly, up to
  the fake powers (<= 2^-873) of zero products, which lose to every real term's power (>=
  2^-298) and to every non-zero c's (>= 2^emin_acc) and so matter only in a block whose terms
  are all zero, where they just keep the scalings below finite, as 2^EMAX_CLAMP does;
* sc = 2^(F - E_max) is built from the bits of Pm ((2046 + F) << 52 minus bits(Pm), an exact
  integer operation on the exponent field) and un = 1 / sc from sc's bits: both normal powers
  of two;
* a product a*b of inputs of precision p <= 26 is exact in float64 (<= 52 bits), scaling it by
  sc is exact, and its conversion to int64 truncates toward zero: that is T_i of spec step 3
  (magnitude truncation with the sign), |T_i| < 2^(F+2); c's term trunc(c * sc) likewise;
* the int64 sum S of K terms plus c's is exact (|S| < (K+1) 2^(F+2) <= 2^53, checked by
  TCModel), and converts back to float64 exactly; v = S * un is exact;
* ROUND (spec): q = max(2^floor(log2|v|) 2^-f, 2^(emin - f)) is the quantum of v, 1/q is built
  from q's bits, and trunc(v / q) (RZ) or roundeven(v / q) (RNE) times q is the rounded value,
  the carry out of rounding included (as _kernels.round_out).  S = 0 gives +0; a tiny negative
  v that rounds to zero gives -0 (spec 8.6);
* the next block's c power is Pc = max(2^floor(log2|r|), 2^emin) (0 or 2^EMAX_CLAMP for
  r = 0).  The usual case takes shortcuts for ROUND (_end4) and, for wide accumulator
  exponent ranges, skips their subnormal test (chk False, _tile's lazy mode); both are exact
  for the inputs they accept and fall back to the formula above otherwise.
Overflow: the lanes do not produce Inf.  They track M = the largest 2^floor(log2|v|) seen; a
block can overflow (|round(v)| >= 2^(emax+1)) only if that power reaches 2^emax (2^(emax+1)
under RZ, which never rounds up), and such elements are written as NaN and recomputed by the
scalar hw_fix with the sticky-Inf rule of spec step 1.  Until then the float64 lanes simply hold
the (out of range) value, exactly.  Elements with Inf/NaN inputs hold meaningless values here;
fix_list lists them too.

Imports numpy, numba and the sibling modules _simd and _kernels only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._kernels import EMAX_CLAMP, ZERO_EXP, hw_dot
from ._simd import (sadd, sany_ult, sbcast4, sfloor, sload, smax, sminu_off, ssplat, srow0,
                    srow1, srow2, srow3, vadd, vand_bits, vany_between4, vbcast, vbits_rsub,
                    viadd, vimax_bits, vload, vmax, vmul, vrint, vselect_ge, vsplat, vstore, vsub,
                    vtofloat, vtoint, vtrunc)

#: Columns per panel (one 8-lane vector) and rows of A per tile.
LANES = 8
TILE_ROWS = 4
#: Rows of A per parallel chunk (a multiple of TILE_ROWS): the chunk's rows (values and
#: exponents) and one panel of B stay in a core's L2 cache while the tiles pass over the panels.
ROWS_PER_CHUNK = 16
#: Exponent codes (int16): pea holds 16 Ea, peb 16 (Eb + BIAS), so that the code of a product,
#: 16 (Ea + Eb + BIAS), placed in the top 16 bits of a 64-bit lane is the bit pattern of the
#: float64 power 2^(Ea + Eb) (_simd.srow0..3).  A zero (and Inf / NaN, which hw_fix handles)
#: has the code ZERO_E16.
CODE = 16
BIAS = 1023
ZERO_E16 = -1000 * CODE
#: The code of 2^EMAX_CLAMP: the block exponent codes are clamped below by it.
ETINY16 = (EMAX_CLAMP + BIAS) * CODE
#: Every product of two non-zero inputs has a code >= 16 (1023 - 2 * 149) > REAL16 (inputs
#: fit a float32 carrier); one with a zero factor has a code <= 16 (-1000 + 127 + BIAS) <
#: REAL16 (and >= 2 ZERO_E16 = -32000: no int16 overflow).
REAL16 = 4000

_EXPMASK = np.int64(0x7FF0000000000000)
_INV_BITS = np.int64(2046 << 52)
_S52 = np.uint64(52)
#: Powers below this are zero (every non-zero power is >= 2^EMAX_CLAMP).
_TINY_TEST = 2.0 ** -1000


@njit(cache=True, error_model="numpy")
def _exp16(x, emin, bias):
    """CODE (max(floor(log2|x|), emin) + bias) for a finite non-zero float64 x (an in_format
    value: normal in float64, so its exponent field is 0 only for zeros); ZERO_E16 for a zero,
    Inf or NaN x (exponent field 0 or 0x7FF)."""
    e = np.int64((np.float64(x).view(np.uint64) >> _S52) & np.uint64(0x7FF))
    code = (max(e - 1023, emin) + bias) * CODE
    return np.int16(code if (e != 0) & (e != 0x7FF) else ZERO_E16)


@njit(parallel=True, cache=True, error_model="numpy")
def pack_a(a, av, pea, emin):
    """av[i, t] = a[i, t] (0 for t >= k or i >= m: av has the rows of whole 4-row tiles) and
    pea[g, t, 8r + l] = the exponent code (_exp16, no bias) of a[4g + r, t] for every l < 8
    (ZERO_E16 outside a); returns a per-row flag: 1 where the row holds Inf or NaN."""
    m, k = a.shape
    kp = av.shape[1]
    nq = pea.shape[0]
    bad = np.zeros(m, np.uint8)
    for g in prange(nq):
        for r in range(TILE_ROWS):
            i = g * TILE_ROWS + r
            if i < m:
                nb = 0
                for t in range(k):
                    x = a[i, t]
                    av[i, t] = x
                    nb |= (abs(x) == np.inf) | (x != x)
                bad[i] = nb
                for t in range(k, kp):
                    av[i, t] = 0.0
            else:
                for t in range(kp):
                    av[i, t] = 0.0
        for t in range(kp):
            for r in range(TILE_ROWS):
                e = _exp16(av[g * TILE_ROWS + r, t], emin, 0)
                for l in range(LANES):
                    pea[g, t, r * LANES + l] = e
    return bad


#: Panels of B packed by one parallel task (contiguous 512-byte reads of B's rows).
PACK_PANELS = 8


@njit(parallel=True, cache=True, error_model="numpy")
def pack_b(b, bp, peb, emin):
    """bp[p, t, l] = b[t, 8p + l] (0 outside b), peb[p, t, l] = its exponent code (_exp16 with
    BIAS; ZERO_E16 for a zero); returns a per-column flag: 1 where the column holds Inf or
    NaN."""
    k, n = b.shape
    npan, kp, _ = bp.shape
    bad = np.zeros(n, np.uint8)
    for ch in prange((npan + PACK_PANELS - 1) // PACK_PANELS):
        p0 = ch * PACK_PANELS
        p1 = min(npan, p0 + PACK_PANELS)
        for t in range(kp):
            for p in range(p0, p1):
                j0 = p * LANES
                w = min(LANES, n - j0)
                for l in range(LANES):
                    x = b[t, j0 + l] if (t < k and l < w) else 0.0
                    bp[p, t, l] = x
                    peb[p, t, l] = _exp16(x, emin, BIAS)
        for p in range(p0, p1):
            j0 = p * LANES
            for l in range(min(LANES, n - j0)):
                nb = 0
                for t in range(k):
                    x = bp[p, t, l]
                    nb |= (abs(x) == np.inf) | (x != x)
                bad[j0 + l] = nb
    return bad


@njit(cache=True, error_model="numpy")
def _cpow(r, peminv, tiny, tiny_test):
    """Alignment power of accumulator values r (lanes): max(2^floor(log2|r|), 2^emin), and
    2^EMAX_CLAMP for r = 0 (a non-zero r is >= 2^(emin - f) >> tiny_test)."""
    pr = vand_bits(r, _EXPMASK)
    return vselect_ge(pr, tiny_test, vmax(pr, peminv), tiny)


@njit(cache=True, error_model="numpy")
def _start(x, pm, csc):
    """Block start for one row: (sc, S) with sc = 2^(F - E_max) (pm = 2^E_max) and S = c's
    truncated term (int64 lanes)."""
    sc = vbits_rsub(csc, pm)
    return sc, vtoint(vmul(x, sc))


@njit(cache=True, error_model="numpy")
def _general(v, pf, qscale, qmin, peminv, tiny, tiny_test, rne):
    """ROUND of v (power pf) by the general quantum formula of the module docstring (any v,
    subnormal outputs included); returns (r, the alignment power of r)."""
    q = vmax(vmul(pf, qscale), qmin)
    y = vmul(v, vbits_rsub(_INV_BITS, q))
    r = vmul(vrint(y) if rne else vtrunc(y), q)
    return r, _cpow(r, peminv, tiny, tiny_test)


@njit(cache=True, error_model="numpy")
def _end4(S0, S1, S2, S3, sc0, sc1, sc2, sc3, M0, M1, M2, M3, qscale, qmin, pemin, peminv,
          tiny, tiny_test, rzmask, c15, rne, chk):
    """Block end for the 4 rows: v = S * 2^(E_max - F) rounded into the accumulator (ROUND),
    the power 2^(E_max - F) = 1 / sc built from sc's bits; returns the 4 rows' (r, the
    alignment power of r, the updated overflow watch M).

    Where every lane of the 4 rows is 0 or has |v| >= 2^emin (the usual case) the rounding is
    one exact operation on float64 v: RZ clears the 52 - f low fraction bits (rzmask); RNE adds
    and subtracts C = 1.5 * 2^(floor(log2|v|) + 52 - f), whose binade has the unit q =
    2^(floor(log2|v|) - f) and holds v + C (52 - f >= 2), so the IEEE addition rounds v to a
    multiple of q, ties to even (C / q = 3 * 2^51 is even), and the subtraction is exact.  The
    power of r is then 2^floor(log2|r|) (>= 2^emin: no clamp needed), and 0 for r = 0 (the next
    block's E_max is clamped by _eblock).  Otherwise every row takes the general formula
    (_general: subnormal outputs).  chk False: the caller has excluded subnormal outputs
    (_tile) and the test is skipped."""
    v0 = vmul(vtofloat(S0), vbits_rsub(_INV_BITS, sc0))
    v1 = vmul(vtofloat(S1), vbits_rsub(_INV_BITS, sc1))
    v2 = vmul(vtofloat(S2), vbits_rsub(_INV_BITS, sc2))
    v3 = vmul(vtofloat(S3), vbits_rsub(_INV_BITS, sc3))
    pf0 = vand_bits(v0, _EXPMASK)
    pf1 = vand_bits(v1, _EXPMASK)
    pf2 = vand_bits(v2, _EXPMASK)
    pf3 = vand_bits(v3, _EXPMASK)
    M0 = vmax(M0, pf0)
    M1 = vmax(M1, pf1)
    M2 = vmax(M2, pf2)
    M3 = vmax(M3, pf3)
    if chk and vany_between4(pf0, pf1, pf2, pf3, 0.0, pemin):
        r0, P0 = _general(v0, pf0, qscale, qmin, peminv, tiny, tiny_test, rne)
        r1, P1 = _general(v1, pf1, qscale, qmin, peminv, tiny, tiny_test, rne)
        r2, P2 = _general(v2, pf2, qscale, qmin, peminv, tiny, tiny_test, rne)
        r3, P3 = _general(v3, pf3, qscale, qmin, peminv, tiny, tiny_test, rne)
        return r0, r1, r2, r3, P0, P1, P2, P3, M0, M1, M2, M3
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
                vand_bits(r2, _EXPMASK), vand_bits(r3, _EXPMASK), M0, M1, M2, M3)
    return (vand_bits(v0, rzmask), vand_bits(v1, rzmask), vand_bits(v2, rzmask),
            vand_bits(v3, rzmask), pf0, pf1, pf2, pf3, M0, M1, M2, M3)


@njit(cache=True, error_model="numpy")
def _eblock(pea, qo, peb, bo, k0, K):
    """Per lane of the 4 x 8 tile (lane 8r + l: row r, column l): the largest product code
    16 (Ea + Eb + BIAS) of the block's K products, clamped below at ETINY16 (int16; see the
    constants: a product with a zero factor never exceeds a real product's code)."""
    s = sadd(sload(pea, qo + k0 * 4 * LANES), sbcast4(peb, bo + k0 * LANES))
    for t in range(k0 + 1, k0 + K):
        s = smax(s, sadd(sload(pea, qo + t * 4 * LANES), sbcast4(peb, bo + t * LANES)))
    return sfloor(s, ETINY16)


@njit(cache=True, error_model="numpy")
def _eblock4(pea, qo, peb, bo, k0):
    """_eblock for K = 4, straight-line (a tree of maxima)."""
    o = qo + k0 * 4 * LANES
    p = bo + k0 * LANES
    return sfloor(smax(smax(sadd(sload(pea, o), sbcast4(peb, p)),
                          sadd(sload(pea, o + 4 * LANES), sbcast4(peb, p + LANES))),
                     smax(sadd(sload(pea, o + 8 * LANES), sbcast4(peb, p + 2 * LANES)),
                          sadd(sload(pea, o + 12 * LANES), sbcast4(peb, p + 3 * LANES)))), ETINY16)


@njit(cache=True, error_model="numpy")
def _term(av, o, b, sc):
    """T = trunc(a * b * sc) as int64 lanes (a = av.flat[o]; exact, module docstring)."""
    return vtoint(vmul(vmul(vbcast(av, o), b), sc))


@njit(cache=True, error_model="numpy")
def _sum4(S, av, o, b0, b1, b2, b3, sc):
    """S + the 4 truncated terms of one row."""
    return viadd(S, viadd(viadd(_term(av, o, b0, sc), _term(av, o + 1, b1, sc)),
                          viadd(_term(av, o + 2, b2, sc), _term(av, o + 3, b3, sc))))


@njit(cache=True, error_model="numpy")
def _tile(av, pea, bp, peb, cbuf, obuf, g, boff, kp, K, F, f, emin_acc, thr, rne, chk):
    """Rows 4g..4g+3 of A against the panel of B at flat offset boff: obuf[r, l] = DOT of row
    4g + r and column l of the panel from c = cbuf[r, l] (NaN where M reached thr); returns
    False.

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
    o0 = g * TILE_ROWS * kp
    o1 = o0 + kp
    o2 = o1 + kp
    o3 = o2 + kp
    qo = g * kp * TILE_ROWS * LANES
    x0 = vload(cbuf, 0)
    x1 = vload(cbuf, 8)
    x2 = vload(cbuf, 16)
    x3 = vload(cbuf, 24)
    P0 = _cpow(x0, peminv, tiny, tiny_test)
    P1 = _cpow(x1, peminv, tiny, tiny_test)
    P2 = _cpow(x2, peminv, tiny, tiny_test)
    P3 = _cpow(x3, peminv, tiny, tiny_test)
    M0 = vsplat(0.0)
    M1 = M0
    M2 = M0
    M3 = M0
    by4 = K % 4 == 0
    W = ssplat(-1)
    lim = min(max((emin_acc + F + BIAS) * CODE - REAL16, 0), 65535)
    for k0 in range(0, kp, K):
        # Step 3: E_max of c and the K products, per lane: the products' largest exponent sum
        # for the 4 rows at once (int16), then per row the larger of it and c's power as
        # int64 bit patterns (c's power is >= 2^EMAX_CLAMP > 0: zero products never win).
        s = _eblock4(pea, qo, peb, boff, k0) if K == 4 else _eblock(pea, qo, peb, boff, k0, K)
        if not chk:
            W = sminu_off(W, s, REAL16)
        sc0, S0 = _start(x0, vimax_bits(P0, srow0(s)), csc)
        sc1, S1 = _start(x1, vimax_bits(P1, srow1(s)), csc)
        sc2, S2 = _start(x2, vimax_bits(P2, srow2(s)), csc)
        sc3, S3 = _start(x3, vimax_bits(P3, srow3(s)), csc)
        # Step 4: the exact integer sum of the truncated terms.
        if K == 4:
            q = boff + k0 * LANES
            b0 = vload(bp, q)
            b1 = vload(bp, q + LANES)
            b2 = vload(bp, q + 2 * LANES)
            b3 = vload(bp, q + 3 * LANES)
            S0 = _sum4(S0, av, o0 + k0, b0, b1, b2, b3, sc0)
            S1 = _sum4(S1, av, o1 + k0, b0, b1, b2, b3, sc1)
            S2 = _sum4(S2, av, o2 + k0, b0, b1, b2, b3, sc2)
            S3 = _sum4(S3, av, o3 + k0, b0, b1, b2, b3, sc3)
        elif by4:
            for t in range(k0, k0 + K, 4):
                q = boff + t * LANES
                b0 = vload(bp, q)
                b1 = vload(bp, q + LANES)
                b2 = vload(bp, q + 2 * LANES)
                b3 = vload(bp, q + 3 * LANES)
                S0 = _sum4(S0, av, o0 + t, b0, b1, b2, b3, sc0)
                S1 = _sum4(S1, av, o1 + t, b0, b1, b2, b3, sc1)
                S2 = _sum4(S2, av, o2 + t, b0, b1, b2, b3, sc2)
                S3 = _sum4(S3, av, o3 + t, b0, b1, b2, b3, sc3)
        else:
            for t in range(k0, k0 + K):
                b = vload(bp, boff + t * LANES)
                S0 = viadd(S0, _term(av, o0 + t, b, sc0))
                S1 = viadd(S1, _term(av, o1 + t, b, sc1))
                S2 = viadd(S2, _term(av, o2 + t, b, sc2))
                S3 = viadd(S3, _term(av, o3 + t, b, sc3))
        # Step 5: one rounding per block.
        x0, x1, x2, x3, P0, P1, P2, P3, M0, M1, M2, M3 = _end4(
            S0, S1, S2, S3, sc0, sc1, sc2, sc3, M0, M1, M2, M3, qscale, qmin, pemin, peminv,
            tiny, tiny_test, rzmask, c15, rne, chk)
    if not chk and sany_ult(W, lim):
        return True
    nan = vsplat(np.nan)
    thrv = vsplat(thr)
    vstore(obuf, 0, vselect_ge(M0, thrv, nan, x0))
    vstore(obuf, 8, vselect_ge(M1, thrv, nan, x1))
    vstore(obuf, 16, vselect_ge(M2, thrv, nan, x2))
    vstore(obuf, 24, vselect_ge(M3, thrv, nan, x3))
    return False


@njit(cache=True, error_model="numpy")
def _rows(av, pea, bp, peb, cv, out, r0, r1, K, F, f, emin_acc, thr, rne, chk):
    """Rows r0..r1-1 of D (r0 a multiple of TILE_ROWS), TILE_ROWS at a time (the rows of a
    short last tile past m are zero rows of av / pea, with c = 0, and are not stored)."""
    m, n = cv.shape
    npan, kp, _ = bp.shape
    cbuf = np.empty((TILE_ROWS, LANES))
    obuf = np.empty((TILE_ROWS, LANES))
    for p in range(npan):
        j0 = p * LANES
        w = min(LANES, n - j0)
        for i0 in range(r0, r1, TILE_ROWS):
            h = min(TILE_ROWS, m - i0)
            for r in range(TILE_ROWS):
                for l in range(LANES):
                    cbuf[r, l] = cv[i0 + r, j0 + l] if (r < h and l < w) else 0.0
            if _tile(av, pea, bp, peb, cbuf, obuf, i0 // TILE_ROWS, p * kp * LANES, kp,
                     K, F, f, emin_acc, thr, rne, chk):
                _tile(av, pea, bp, peb, cbuf, obuf, i0 // TILE_ROWS, p * kp * LANES, kp,
                      K, F, f, emin_acc, thr, rne, True)
            for r in range(h):
                for l in range(w):
                    out[i0 + r, j0 + l] = obuf[r, l]


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


@njit(parallel=True, cache=True, error_model="numpy")
def fix_list(rowbad, colbad, cv, out):
    """(rows, cols) of the elements to recompute: an Inf/NaN in their row of A, column of B or
    C entry, or a NaN from fused_gemm."""
    m, n = out.shape
    cnt = np.zeros(m, np.int64)
    for i in prange(m):
        c = 0
        for j in range(n):
            x = cv[i, j]
            c += (rowbad[i] | colbad[j] | (abs(x) == np.inf) | (x != x)
                  | (out[i, j] != out[i, j]))
        cnt[i] = c
    tot = cnt.sum()
    rows = np.empty(tot, np.int64)
    cols = np.empty(tot, np.int64)
    start = np.zeros(m, np.int64)
    for i in range(1, m):
        start[i] = start[i - 1] + cnt[i - 1]
    for i in prange(m):
        if cnt[i]:
            s = start[i]
            for j in range(n):
                x = cv[i, j]
                if (rowbad[i] | colbad[j] | (abs(x) == np.inf) | (x != x)
                        | (out[i, j] != out[i, j])):
                    rows[s] = i
                    cols[s] = j
                    s += 1
    return rows, cols


@njit(cache=True, error_model="numpy")
def _fexp(e, bias):
    """An exponent code of pea / peb (bias removed) as the float32 hw_dot takes (ZERO_EXP for
    a zero)."""
    if e == ZERO_E16:
        return np.float32(ZERO_EXP)
    return np.float32(np.int64(e) // CODE - bias)


@njit(parallel=True, cache=True, error_model="numpy")
def hw_fix(av, pea, bp, peb, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne):
    """Recompute out[rows[t], cols[t]] with the scalar _kernels.hw_dot (special values and
    overflow included), from the packed operands."""
    kp = av.shape[1]
    for s in prange(rows.shape[0]):
        i = rows[s]
        j = cols[s]
        p = j // LANES
        l = j - p * LANES
        g = i // TILE_ROWS
        r = i - g * TILE_ROWS
        ea = np.empty(kp, np.float32)
        eb = np.empty(kp, np.float32)
        bcol = np.empty(kp)
        for t in range(kp):
            ea[t] = _fexp(pea[g, t, r * LANES], 0)
            eb[t] = _fexp(peb[p, t, l], BIAS)
            bcol[t] = bp[p, t, l]
        out[i, j] = hw_dot(av[i], ea, bcol, eb, cv[i, j], K, F, f, emin_acc, emax_acc, rne)
