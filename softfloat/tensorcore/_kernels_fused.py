"""The fast kernel of the truncating block-FMA models (spec section 2, finite K and F): explicit
8-lane SIMD over the columns of D (softfloat.tensorcore._simd), 4 rows of A per tile, any K.

Provides
    pack_a(a, av, pa, emin)            A (m x k) -> values av and alignment powers pa (m x kp)
    pack_b(b, bp, pbp, emin)           B (k x n) -> panels of 8 columns (n8 x kp x 8)
    fused_gemm(av, pa, bp, pbp, cv, out, K, F, f, emin_acc, emax_acc, rne)
                                       out = DOT for every element; NaN marks an element that
                                       must be recomputed (see below)
    fix_list(rowbad, colbad, cv, out)  (rows, cols) of the elements hw_fix must recompute
    hw_fix(av, pa, bp, pbp, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne)
                                       those elements with the scalar _kernels.hw_dot

Encoding.  kp = k rounded up to a multiple of K (zero padding: the short last block of the
spec is the zero-padded one).  Each input x is carried as its float64 value and its ALIGNMENT
POWER 2^E, E = max(floor(log2 |x|), emin) (spec step 2: subnormals take emin), a float64 power
of two; zeros (and Inf/NaN, which the scalar fix-up handles) get 0.  A panel of B holds 8
consecutive columns, k-major: bp[p, t, l] = B[t, 8p + l] (zero columns pad n).

Why every step is exact (integer arithmetic on float64 lanes, as in _kernels.py):
* the power of a product term is pa * pb = 2^(Ea + Eb) exactly (2^-300 .. 2^256: a normal
  float64), 0 when a factor is zero, so E_max of the block (c included, spec step 3) is a max
  of powers of two: Pm = max(Pc, pa_t pb_t, 2^EMAX_CLAMP); zero terms never raise it and an
  all-zero block gets 2^EMAX_CLAMP, which keeps the scalings below finite;
* sc = 2^(F - E_max) is built from the bits of Pm ((2046 + F) << 52 minus bits(Pm), an exact
  integer operation on the exponent field) and un = Pm * 2^-F: both normal powers of two;
* a product a*b of inputs of precision p <= 26 is exact in float64 (<= 52 bits), scaling it by
  sc is exact, and its conversion to int64 truncates toward zero: that is T_i of spec step 3
  (magnitude truncation with the sign), |T_i| < 2^(F+2); c's term trunc(c * sc) likewise;
* the int64 sum S of K terms plus c's is exact (|S| < (K+1) 2^(F+2) <= 2^53, checked by
  TCModel), and converts back to float64 exactly; v = S * un is exact;
* ROUND (spec): q = max(2^floor(log2|v|) 2^-f, 2^(emin - f)) is the quantum of v, 1/q is built
  from q's bits, and trunc(v / q) (RZ) or roundeven(v / q) (RNE) times q is the rounded value,
  the carry out of rounding included (as _kernels.round_out).  S = 0 gives +0; a tiny negative
  v that rounds to zero gives -0 (spec 8.6);
* the next block's c power is Pc = max(2^floor(log2|r|), 2^emin) (0 for r = 0).
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
from ._simd import (vadd, vand_bits, vany_between, vbcast, vbits_rsub, viadd, vload, vmax, vmul,
                    vrint, vselect_ge, vsplat, vstore, vsub, vtofloat, vtoint, vtrunc)

#: Columns per panel (one 8-lane vector) and rows of A per tile.
LANES = 8
TILE_ROWS = 4
#: Rows of A per parallel chunk: the chunk's rows (values and powers) and one panel of B stay
#: in a core's L2 cache while the tiles pass over the panels.
ROWS_PER_CHUNK = 16

_EXPMASK = np.int64(0x7FF0000000000000)
_INV_BITS = np.int64(2046 << 52)
_S52 = np.uint64(52)
#: Powers below this are zero (every non-zero power is >= 2^EMAX_CLAMP).
_TINY_TEST = 2.0 ** -1000


@njit(cache=True, error_model="numpy")
def _pow2_align(x, pemin):
    """2^max(floor(log2|x|), emin) for a finite non-zero float64 x (pemin = 2^emin); 0 for a
    zero, Inf or NaN x."""
    if x == 0.0 or abs(x) == np.inf or x != x:
        return 0.0
    p = np.uint64(np.float64(x).view(np.uint64) & np.uint64(0x7FF0000000000000)).view(
        np.float64)
    return max(p, pemin)


@njit(parallel=True, cache=True, error_model="numpy")
def pack_a(a, av, pa, emin):
    """av[i, t] = a[i, t] (0 for t >= k), pa[i, t] = its alignment power (module docstring);
    returns a per-row flag: 1 where the row holds Inf or NaN."""
    m, k = a.shape
    kp = av.shape[1]
    pemin = 2.0 ** emin
    bad = np.zeros(m, np.uint8)
    for i in prange(m):
        nb = 0
        for t in range(k):
            x = a[i, t]
            av[i, t] = x
            pa[i, t] = _pow2_align(x, pemin)
            nb |= (abs(x) == np.inf) | (x != x)
        for t in range(k, kp):
            av[i, t] = 0.0
            pa[i, t] = 0.0
        bad[i] = nb
    return bad


@njit(parallel=True, cache=True, error_model="numpy")
def pack_b(b, bp, pbp, emin):
    """bp[p, t, l] = b[t, 8p + l] (0 outside b), pbp its alignment powers; returns a per-column
    flag: 1 where the column holds Inf or NaN."""
    k, n = b.shape
    npan, kp, _ = bp.shape
    pemin = 2.0 ** emin
    bad = np.zeros(n, np.uint8)
    for p in prange(npan):
        for t in range(kp):
            for l in range(LANES):
                j = p * LANES + l
                if t < k and j < n:
                    x = b[t, j]
                    bp[p, t, l] = x
                    pbp[p, t, l] = _pow2_align(x, pemin)
                    if abs(x) == np.inf or x != x:
                        bad[j] = 1
                else:
                    bp[p, t, l] = 0.0
                    pbp[p, t, l] = 0.0
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
def _end(S, pm, M, uF, qscale, qmin, pemin, peminv, tiny, tiny_test, rzmask, c15, rne):
    """Block end for one row: v = S * 2^(E_max - F) rounded into the accumulator (ROUND);
    returns (r, the alignment power of r, the updated overflow watch M).

    Where every lane is 0 or has |v| >= 2^emin (the usual case) the rounding is one exact
    operation on float64 v: RZ clears the 52 - f low fraction bits (rzmask); RNE adds and
    subtracts C = 1.5 * 2^(floor(log2|v|) + 52 - f), whose binade has the unit q = 2^(floor(
    log2|v|) - f) and holds v + C (52 - f >= 2), so the IEEE addition rounds v to a multiple of
    q, ties to even (C / q = 3 * 2^51 is even), and the subtraction is exact.  Otherwise the
    general quantum formula of the module docstring (subnormal outputs) is used."""
    v = vmul(vtofloat(S), vmul(pm, uF))
    pf = vand_bits(v, _EXPMASK)
    M = vmax(M, pf)
    if vany_between(pf, 0.0, pemin):
        q = vmax(vmul(pf, qscale), qmin)
        y = vmul(v, vbits_rsub(_INV_BITS, q))
        r = vmul(vrint(y) if rne else vtrunc(y), q)
        return r, _cpow(r, peminv, tiny, tiny_test), M
    if rne:
        c = vmul(pf, c15)
        r = vsub(vadd(v, c), c)
        return r, vmax(vand_bits(r, _EXPMASK), tiny), M
    return vand_bits(v, rzmask), vmax(pf, tiny), M


@njit(cache=True, error_model="numpy")
def _emax4(P, pa, o, pb0, pb1, pb2, pb3):
    """max(P, pa[o + u] * pb_u for u < 4): 4 product powers of one row, as a tree."""
    return vmax(P, vmax(vmax(vmul(vbcast(pa, o), pb0), vmul(vbcast(pa, o + 1), pb1)),
                        vmax(vmul(vbcast(pa, o + 2), pb2), vmul(vbcast(pa, o + 3), pb3))))


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
def _tile(av, pa, bp, pbp, cbuf, obuf, i0, i1, i2, i3, boff, kp, K, F, f, emin_acc, thr,
          rne):
    """Rows i0..i3 of A against the panel of B at flat offset boff: obuf[r, l] = DOT of row
    i_r and column l of the panel from c = cbuf[r, l] (NaN where M reached thr)."""
    tiny = vsplat(2.0 ** EMAX_CLAMP)
    tiny_test = vsplat(_TINY_TEST)
    pemin = 2.0 ** emin_acc
    peminv = vsplat(pemin)
    qscale = vsplat(2.0 ** -f)
    qmin = vsplat(2.0 ** (emin_acc - f))
    uF = vsplat(2.0 ** -F)
    c15 = vsplat(1.5 * 2.0 ** (52 - f))
    rzmask = np.int64(-1) << np.int64(52 - f)
    csc = np.int64(2046 + F) << 52
    o0 = i0 * kp
    o1 = i1 * kp
    o2 = i2 * kp
    o3 = i3 * kp
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
    for k0 in range(0, kp, K):
        # Step 3: E_max of c and the K products (as powers of two), per lane.  Every power
        # is 2^EMAX_CLAMP (zero c) or larger, so an all-zero block gets the clamp.
        if by4:
            for t in range(k0, k0 + K, 4):
                q = boff + t * LANES
                pb0 = vload(pbp, q)
                pb1 = vload(pbp, q + LANES)
                pb2 = vload(pbp, q + 2 * LANES)
                pb3 = vload(pbp, q + 3 * LANES)
                P0 = _emax4(P0, pa, o0 + t, pb0, pb1, pb2, pb3)
                P1 = _emax4(P1, pa, o1 + t, pb0, pb1, pb2, pb3)
                P2 = _emax4(P2, pa, o2 + t, pb0, pb1, pb2, pb3)
                P3 = _emax4(P3, pa, o3 + t, pb0, pb1, pb2, pb3)
        else:
            for t in range(k0, k0 + K):
                pb = vload(pbp, boff + t * LANES)
                P0 = vmax(P0, vmul(vbcast(pa, o0 + t), pb))
                P1 = vmax(P1, vmul(vbcast(pa, o1 + t), pb))
                P2 = vmax(P2, vmul(vbcast(pa, o2 + t), pb))
                P3 = vmax(P3, vmul(vbcast(pa, o3 + t), pb))
        sc0, S0 = _start(x0, P0, csc)
        sc1, S1 = _start(x1, P1, csc)
        sc2, S2 = _start(x2, P2, csc)
        sc3, S3 = _start(x3, P3, csc)
        # Step 4: the exact integer sum of the truncated terms.
        if by4:
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
        x0, P0, M0 = _end(S0, P0, M0, uF, qscale, qmin, pemin, peminv, tiny, tiny_test,
                          rzmask, c15, rne)
        x1, P1, M1 = _end(S1, P1, M1, uF, qscale, qmin, pemin, peminv, tiny, tiny_test,
                          rzmask, c15, rne)
        x2, P2, M2 = _end(S2, P2, M2, uF, qscale, qmin, pemin, peminv, tiny, tiny_test,
                          rzmask, c15, rne)
        x3, P3, M3 = _end(S3, P3, M3, uF, qscale, qmin, pemin, peminv, tiny, tiny_test,
                          rzmask, c15, rne)
    nan = vsplat(np.nan)
    thrv = vsplat(thr)
    vstore(obuf, 0, vselect_ge(M0, thrv, nan, x0))
    vstore(obuf, 8, vselect_ge(M1, thrv, nan, x1))
    vstore(obuf, 16, vselect_ge(M2, thrv, nan, x2))
    vstore(obuf, 24, vselect_ge(M3, thrv, nan, x3))


@njit(cache=True, error_model="numpy")
def _rows(av, pa, bp, pbp, cv, out, r0, r1, K, F, f, emin_acc, thr, rne):
    """Rows r0..r1-1 of D, TILE_ROWS at a time (a short last tile repeats its last row)."""
    n = cv.shape[1]
    npan, kp, _ = bp.shape
    cbuf = np.empty((TILE_ROWS, LANES))
    obuf = np.empty((TILE_ROWS, LANES))
    ri = np.empty(TILE_ROWS, np.int64)
    for p in range(npan):
        j0 = p * LANES
        w = min(LANES, n - j0)
        for g in range(r0, r1, TILE_ROWS):
            for r in range(TILE_ROWS):
                ri[r] = min(g + r, r1 - 1)
                for l in range(LANES):
                    cbuf[r, l] = cv[ri[r], j0 + l] if l < w else 0.0
            _tile(av, pa, bp, pbp, cbuf, obuf, ri[0], ri[1], ri[2], ri[3], p * kp * LANES, kp,
                  K, F, f, emin_acc, thr, rne)
            for r in range(TILE_ROWS):
                for l in range(w):
                    out[ri[r], j0 + l] = obuf[r, l]


@njit(parallel=True, cache=True, error_model="numpy")
def fused_gemm(av, pa, bp, pbp, cv, out, K, F, f, emin_acc, emax_acc, rne):
    """out[i, j] = DOT(A[i, :], B[:, j], C[i, j]) for elements with finite inputs that never
    come near overflow; NaN for those that do (module docstring).  av, pa: m x kp (pack_a);
    bp, pbp: n8 x kp x 8 (pack_b); cv, out: m x n float64; kp a multiple of K."""
    m = av.shape[0]
    # RZ never rounds up: overflow needs |v| >= 2^(emax+1); RNE may round 2^emax <= |v| up.
    thr = 2.0 ** (emax_acc + 1) if not rne else 2.0 ** emax_acc
    nch = (m + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    for ch in prange(nch):
        _rows(av, pa, bp, pbp, cv, out, ch * ROWS_PER_CHUNK, min(m, (ch + 1) * ROWS_PER_CHUNK),
              K, F, f, emin_acc, thr, rne)


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
def _pexp(p):
    """The exponent of an alignment power as float32 (ZERO_EXP for 0), as hw_dot takes it."""
    if p == 0.0:
        return np.float32(ZERO_EXP)
    return np.float32(np.int64(np.float64(p).view(np.uint64) >> _S52) - 1023)


@njit(parallel=True, cache=True, error_model="numpy")
def hw_fix(av, pa, bp, pbp, cv, out, rows, cols, K, F, f, emin_acc, emax_acc, rne):
    """Recompute out[rows[t], cols[t]] with the scalar _kernels.hw_dot (special values and
    overflow included), from the packed operands."""
    kp = av.shape[1]
    for s in prange(rows.shape[0]):
        i = rows[s]
        j = cols[s]
        p = j // LANES
        l = j - p * LANES
        ea = np.empty(kp, np.float32)
        eb = np.empty(kp, np.float32)
        bcol = np.empty(kp)
        for t in range(kp):
            ea[t] = _pexp(pa[i, t])
            eb[t] = _pexp(pbp[p, t, l])
            bcol[t] = bp[p, t, l]
        out[i, j] = hw_dot(av[i], ea, bcol, eb, cv[i, j], K, F, f, emin_acc, emax_acc, rne)
