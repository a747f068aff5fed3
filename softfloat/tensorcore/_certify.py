"""Numba kernels of the ideal models' fast path (K = F = infinity: c + sum_k a_k b_k rounded
once): the certificates on top of numpy's float64 matmul, and the cheap compensated fallback.

Provides
    certify(s0, cv, has_c, anrm, aexp, bnrm, bexp, off, g, out, bad, left, mode, qscale, qmin,
            lim, rne) -> uncertified count
    dot2_fix(av, bv, bad, left, nbad, cv, has_c, out, mode, qscale, qmin, lim, rne, f, emin,
             emax)
        the elements the certificates left, by a compensated (Dot2) sum with its own bracket,
        and the exact kernel (_superacc.ideal_dot) for what that bracket cannot settle

Notation.  u = 2^-53.  The inputs are values of a format with m fraction bits held in float64;
every product p_k = a_k b_k is exact in float64 (at most 48 significant bits, and a multiple of
2^-298 below 2^256 in magnitude), so every partial sum of products, in any order, is a multiple
of 2^-298: float64 additions of them never underflow (a sum below 2^-1022 is 0, exactly) and
never overflow (|partial sum| <= k 2^256).  P = sum_k |p_k|; x = c + sum_k p_k is the exact
value to round.  numpy's matmul is only assumed to compute s0 by IEEE float64 additions and
multiplications (fused or not) in SOME order: no Strassen-like algorithm (true of OpenBLAS, MKL
and Accelerate).  An FMA fl(a b + s) with a b exact is one rounded addition.

Row / column statistics (softfloat.tensorcore._prep.pair_with_stats):
ra_i = fl(sqrt(fl(sum_k a_ik^2))) in any order, likewise rb_j; aexp_i = min over the non-zero
a_ik of max(floor(log2|a_ik|), emin) (the exponent of its quantum plus m).  Every computed sum
of k positive squares is >= (1 - gamma_k) times the exact one (gamma_n = n u / (1 - n u)), sqrt
and the product ra rb lose one rounding each, so bnd = fl(ra_i rb_j) >= (1 - (k + 3) u) CS_ij
with CS_ij = sqrt(sum a^2) sqrt(sum b^2) >= P (Cauchy-Schwarz).  For k <= 2^31 (numpy's BLAS
limit is far lower) (k + 3) u < 2^-21.

Certificate 1, exactness.  Every non-zero a_ik is a multiple of 2^(aexp_i - m), every b_kj of
2^(bexp_j - m), so every product, and every partial sum of any order, is a multiple of 2^L,
L = aexp_i + bexp_j - 2m.  If P < 2^(L + 53), every partial sum is an integer multiple of 2^L
of magnitude < 2^(L + 53): representable, so every addition is exact and s0 = sum_k p_k.  The
kernels test fl(qa_i qb_j) < 1 - 2^-20 with qa_i = ra_i 2^-(aexp_i + 53 - 2m) and
qb_j = rb_j 2^-bexp_j (exact power-of-two scalings), i.e. bnd < 2^(L + 53) (1 - 2^-20) up to one
more rounding of the product, which implies P <= CS < 2^(L + 53) (1 - 2^-20) / (1 - 2^-21)^2
< 2^(L + 53).  Then x = s0 + c: TwoSum gives s + t = s0 + c exactly and ``fold_odd_nb`` its
round-to-odd 53-bit value, whose rounding to <= 51 bits is the rounding of x (Boldo &
Melquiond); an exactly zero x gives +0 (spec 8.6).

Certificate 2, bracket.  For any order of the k - 1 additions |s0 - sum p| <= gamma_(k-1) P
(Higham, Accuracy and Stability, 2nd ed., section 4.2: every term takes part in at most k - 1
roundings); with S = fl(s0 + c), |S - (s0 + c)| <= u |s0 + c| <= u (|c| + (1 + gamma) P), so
|S - x| <= (|c| + P) (u (1 + gamma_(k-1)) + gamma_(k-1)) <= (|c| + P) k u (1 + 2^-20).  The
kernels use E = fl(fl(|c| + bnd) g) with g = (k + 4) u (1 + 2^-10): the three roundings of E
and bnd's deficit (1 - 2^-21) cost less than the margin, so E >= (|c| + P) k u (1 + 2^-20)
>= |S - x|.  lo = fl(S - E), hi = fl(S + E) are pushed one float64 ulp outward (each may have
rounded inward by half an ulp), so lo <= x <= hi.  If lo and hi are finite, have the same sign
(x != 0, so no signed-zero question) and round to the same accumulator value, so does every
real number between them (rounding is monotone), x included.  (E >= 2^-298 * 2^-44 is normal
unless c = P = 0, where certificate 1 holds.)

What neither certifies (a few hundred elements per million for random fp16 data near rounding
boundaries; every element for adversarial cancellation) goes to dot2_fix:

Certificate 3, compensated sum (Ogita, Rump & Oishi 2005, Sum2 on exact products), in LANES
chains (softfloat._intrinsics: 4 on AVX2, 8 on AVX-512).  Every addition of the sum is a TwoSum
(s_new + t = s + v exactly, whatever the magnitudes): product k goes into chain k mod LANES for
k below kl, the largest multiple of LANES <= k; then one scalar chain starting from c takes the
LANES chain sums and the last k - kl products.  So x = S + sum t exactly over the N = k + LANES
TwoSum errors t, S the last chain's sum.  The errors are summed in e = fl(sum t) and
T = fl(sum |t|), each in some order (per chain, then together): any order of N terms gives
|e - sum t| <= gamma_(N-1) sum |t| and T >= (1 - gamma_(N-1)) sum |t| (Higham, section 4.2), so
|e - sum t| <= gamma_(N-1) T / (1 - gamma_(N-1)) <= delta = fl(T g3) with
g3 = bracket_factor(k + LANES) = (N + 4) u (1 + 2^-10): N + 4 > N - 1 leaves more than the
margin that the two roundings of delta and g3 and the (1 - gamma) divisor need.  TwoSum(S, e) =
y + z exactly, so x lies within |z| + delta of y; the bracket
[y - D, y + D] with D = fl(fl(|z| + delta) (1 + 2^-40)) >= |z| + delta, pushed outward as above,
rounds to one value except within about 2^-52 |x| of a rounding boundary: exact ties and
adversarial data.  T = 0 means every t was 0: then x = S exactly.  The t are multiples of
2^-298 (TwoSum errors of multiples of it; c is one too), so neither T nor e underflows, and
every chain's partial sums are bounded by |c| + P (no overflow).  The chains run over
contiguous rows: A's row in its own carrier, and B's needed columns gathered once into rows.
Whatever certificate 3 leaves, and every element whose row of A, column of B or c holds Inf or
NaN, is computed exactly by _superacc.ideal_dot (error-free extraction and a superaccumulator).

Output rounding: mode 0 is the fp32 RNE accumulator (out_frac 23), where float32(v) -- the
hardware's RNE conversion with gradual underflow and overflow to Inf -- is the spec's ROUND of
an exact or round-to-odd v; mode 1 is any other accumulator (_scalar.round_out).

Imports numpy, numba, softfloat._primitives, softfloat._intrinsics and the sibling kernel
modules only.  The certificates' results are the exact roundings, so they do not depend on LANES
(the machine) or on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._intrinsics import LANES, vadd, vand_bits, vload_wide, vmul, vsplat, vstore, vsub
from .._primitives import F64_ABS, fold_odd_nb, pow2, two_sum_err
from ._scalar import round_out
from ._superacc import LEVELS, NLIMBS, ideal_dot

#: 1 - 2^-20: the exactness threshold's margin (see certificate 1).
ONE_M = 1.0 - 2.0 ** -20
#: 1 + 2^-40: the margin of the compensated bracket's radius (certificate 3).
ONE_P40 = 1.0 + 2.0 ** -40
#: Rows of the output per parallel chunk of the certificate pass.
CERT_ROWS = 16
#: Certificate 3: elements per parallel chunk, and the fixed blocks of k in which B's needed
#: columns are gathered (fixed splits: the results never depend on the thread count).
D2_ELEMS = 8
D2_BLOCKS = 8
#: |v| of a float64 vector: its magnitude bits (as int64 for the vector mask).
_ABS64 = np.int64(F64_ABS)
#: Padding of the gathered columns' rows (elements; see dot2_fix).
D2_PAD = 16


@njit(cache=True, error_model="numpy")
def bracket_factor(k):
    """g = (k + 4) u (1 + 2^-10): (k + 4) 2^-53 is exact, the last product rounds once (by
    less than the margin; see certificates 2 and 3)."""
    return np.float64(k + 4) * 2.0 ** -53 * (1.0 + 2.0 ** -10)


@njit(cache=True, error_model="numpy")
def _outward(lo, hi):
    """lo one float64 ulp down, hi one ulp up (both of one sign, finite), and whether the
    bracket [lo, hi] excludes 0."""
    pos = lo > 0.0
    blo = np.float64(lo).view(np.int64)
    bhi = np.float64(hi).view(np.int64)
    lo2 = np.int64(blo - 1 if pos else blo + 1).view(np.float64)
    hi2 = np.int64(bhi + 1 if pos else bhi - 1).view(np.float64)
    return lo2, hi2, pos | (hi < 0.0)


@njit(cache=True, error_model="numpy")
def _rnd(v, mode, qscale, qmin, lim, rne):
    """The accumulator rounding of v (see the module docstring), as a float32 carrier."""
    if mode == 0:
        return np.float32(v)
    return np.float32(round_out(v, qscale, qmin, lim, rne))


@njit(cache=True, error_model="numpy")
def _row_f32(s0r, qa_i, ra_i, qb, rb, g, outr, badr):
    """Certificates 1 and 2 on one row, fp32 RNE output, no c."""
    nbad = 0
    for j in range(s0r.shape[0]):
        x0 = s0r[j]
        exact = qa_i * qb[j] < ONE_M
        err = (ra_i * rb[j]) * g
        lo, hi, sided = _outward(x0 - err, x0 + err)
        rl = np.float32(lo)
        ok = exact | (sided & (rl == np.float32(hi)) & (abs(hi) < np.inf))
        ok = ok & (abs(x0) < np.inf)
        # x0 + 0.0 turns an exact -0 sum into +0 (spec 8.6) and changes nothing else.
        outr[j] = np.float32(x0 + 0.0) if exact else rl
        fin = abs(ra_i * rb[j]) < np.inf
        b = np.uint8(0 if ok else (1 if fin else 2))
        badr[j] = b
        nbad += b != 0
    return nbad


@njit(cache=True, error_model="numpy")
def _row_f32_c(s0r, cr, qa_i, ra_i, qb, rb, g, outr, badr):
    """Certificates 1 and 2 on one row, fp32 RNE output, with c."""
    nbad = 0
    for j in range(s0r.shape[0]):
        x0 = s0r[j]
        c = cr[j]
        exact = qa_i * qb[j] < ONE_M
        s = x0 + c
        t = two_sum_err(x0, c, s)                       # x0 + c = s + t exactly
        v = fold_odd_nb(s, t) if s != 0.0 else 0.0
        err = (abs(c) + ra_i * rb[j]) * g
        lo, hi, sided = _outward(s - err, s + err)
        rl = np.float32(lo)
        ok = exact | (sided & (rl == np.float32(hi)) & (abs(hi) < np.inf))
        fin = (abs(ra_i * rb[j]) < np.inf) & (abs(c) < np.inf)
        ok = ok & (abs(s) < np.inf) & fin
        outr[j] = np.float32(v) if exact else rl
        b = np.uint8(0 if ok else (1 if fin else 2))
        badr[j] = b
        nbad += b != 0
    return nbad


@njit(cache=True, error_model="numpy")
def _row_gen(s0r, cr, has_c, qa_i, ra_i, qb, rb, g, outr, badr, qscale, qmin, lim, rne):
    """Certificates 1 and 2 on one row, any accumulator (round_out)."""
    nbad = 0
    for j in range(s0r.shape[0]):
        x0 = s0r[j]
        c = cr[j] if has_c else 0.0
        exact = qa_i * qb[j] < ONE_M
        s = x0 + c
        t = two_sum_err(x0, c, s)
        v = fold_odd_nb(s, t) if s != 0.0 else 0.0
        err = (abs(c) + ra_i * rb[j]) * g
        lo, hi, sided = _outward(s - err, s + err)
        rl = round_out(lo, qscale, qmin, lim, rne)
        ok = exact | (sided & (rl == round_out(hi, qscale, qmin, lim, rne))
                      & (abs(hi) < np.inf))
        fin = (abs(ra_i * rb[j]) < np.inf) & (abs(c) < np.inf)
        ok = ok & (abs(s) < np.inf) & fin
        r = round_out(v, qscale, qmin, lim, rne) if exact else rl
        outr[j] = np.float32(r)
        b = np.uint8(0 if ok else (1 if fin else 2))
        badr[j] = b
        nbad += b != 0
    return nbad


@njit(cache=True, error_model="numpy")
def _scale(nrm, ex, off):
    """(r, q): r = sqrt(nrm) and q = r 2^-(ex + off) (exact scaling; the clamp only matters
    for rows without non-zero elements, where r = 0)."""
    r = np.sqrt(nrm)
    return r, r * pow2(min(max(-(ex + off), -1022), 1023))


@njit(cache=True, error_model="numpy")
def _col_scales(bnrm, bexp):
    n = bnrm.shape[0]
    rb = np.empty(n)
    qb = np.empty(n)
    for j in range(n):
        rb[j], qb[j] = _scale(bnrm[j], bexp[j], 0)
    return rb, qb


@njit(cache=True, error_model="numpy")
def _cert_rows(i0, i1, s0, cv, has_c, anrm, aexp, off, rb, qb, g, out, bad, left, mode, qscale,
               qmin, lim, rne):
    nbad = 0
    for i in range(i0, i1):
        ci = i if has_c else 0
        ra_i, qa_i = _scale(anrm[i], aexp[i], off)
        if mode == 0 and has_c:
            nb = _row_f32_c(s0[i], cv[ci], qa_i, ra_i, qb, rb, g, out[i], bad[i])
        elif mode == 0:
            nb = _row_f32(s0[i], qa_i, ra_i, qb, rb, g, out[i], bad[i])
        else:
            nb = _row_gen(s0[i], cv[ci], has_c, qa_i, ra_i, qb, rb, g, out[i], bad[i],
                          qscale, qmin, lim, rne)
        left[i] = nb
        nbad += nb
    return nbad


@njit(parallel=True, cache=True, error_model="numpy")
def certify(s0, cv, has_c, anrm, aexp, bnrm, bexp, off, g, out, bad, left, mode, qscale, qmin,
            lim, rne):
    """Certificates 1 and 2 on every element (module docstring): out[i, j] where one holds;
    bad[i, j] = 0 there, 1 where neither does, 2 where the inputs hold Inf/NaN.  cv is C
    (m x n) when has_c, else any 2-d array; anrm / aexp (bnrm / bexp): sum of squares and
    smallest exponent of each row of A (column of B); off = 53 - 2 m.  left[i] = the number
    of non-zero bad[i, j] of row i; returns their total.  Chunks of CERT_ROWS rows."""
    rb, qb = _col_scales(bnrm, bexp)
    m = s0.shape[0]
    nch = (m + CERT_ROWS - 1) // CERT_ROWS
    counts = np.zeros(nch, np.int64)
    for t in prange(nch):
        i0 = t * CERT_ROWS
        counts[t] = _cert_rows(i0, min(m, i0 + CERT_ROWS), s0, cv, has_c, anrm, aexp, off, rb,
                               qb, g, out, bad, left, mode, qscale, qmin, lim, rne)
    return counts.sum()


@njit(cache=True, error_model="numpy")
def _collect(bad, left, ei, ej, code):
    """The positions and codes of the non-zero bad[i, j], row by row (rows with left[i] = 0
    skipped; within a row, blocks of 64 bytes tested at once, an OR that LLVM vectorises)."""
    t = 0
    n = bad.shape[1]
    for i in range(bad.shape[0]):
        if left[i]:
            br = bad[i]
            for j0 in range(0, n, 64):
                j1 = min(n, j0 + 64)
                acc = np.uint8(0)
                for j in range(j0, j1):
                    acc |= br[j]
                if acc:
                    for j in range(j0, j1):
                        if br[j]:
                            ei[t] = i
                            ej[t] = j
                            code[t] = br[j]
                            t += 1
    return t


@njit(parallel=True, cache=True, error_model="numpy")
def _gather_cols(bv, cols, bt):
    """bt[c, :k] = column cols[c] of bv (same carrier): B's rows streamed once, in D2_BLOCKS
    fixed blocks of k."""
    k = bv.shape[0]
    nb = max(1, min(D2_BLOCKS, k))
    for blk in prange(nb):
        for kk in range(blk * k // nb, (blk + 1) * k // nb):
            brow = bv[kk]
            for c in range(cols.shape[0]):
                bt[c, kk] = brow[cols[c]]


@njit(cache=True, error_model="numpy")
def _sum2(av, i, bt, col, c, tmp):
    """Certificate 3's compensated sum of x = c + sum_k av[i, k] bt[col, k] (module
    docstring): LANES chains in one vector over k = 0 .. kl - 1 (kl the largest multiple of
    LANES <= k), then one scalar chain from c that takes the LANES partial sums and the last
    k - kl products; every addition is a TwoSum.  Returns (S, e, T): x = S + (the sum of the
    k + LANES TwoSum errors) exactly, e = fl(that sum) and T = fl(the sum of their magnitudes),
    each in some order.  av and bt are C-contiguous, float32 or float64 (read exactly); bt's
    rows may be longer than av's; tmp: scratch of 3 LANES float64."""
    k = av.shape[1]
    kl = k - k % LANES
    ao = i * k
    bo = col * bt.shape[1]
    s = vsplat(0.0)
    e = s
    t = s
    for kk in range(0, kl, LANES):
        p = vmul(vload_wide(av, ao + kk), vload_wide(bt, bo + kk))     # exact
        sn = vadd(s, p)
        bb = vsub(sn, s)
        r = vadd(vsub(s, vsub(sn, bb)), vsub(p, bb))    # TwoSum: s + p = sn + r exactly
        s = sn
        e = vadd(e, r)
        t = vadd(t, vand_bits(r, _ABS64))
    vstore(tmp, 0, s)
    vstore(tmp, LANES, e)
    vstore(tmp, 2 * LANES, t)
    sc = c
    es = 0.0
    ts = 0.0
    for lane in range(LANES):
        x = tmp[lane]
        sn = sc + x
        r = two_sum_err(sc, x, sn)
        sc = sn
        es += tmp[LANES + lane] + r
        ts += tmp[2 * LANES + lane] + abs(r)
    for kk in range(kl, k):
        p = np.float64(av[i, kk]) * np.float64(bt[col, kk])
        sn = sc + p
        r = two_sum_err(sc, p, sn)
        sc = sn
        es += r
        ts += abs(r)
    return sc, es, ts


@njit(parallel=True, cache=True, error_model="numpy")
def _dot2_elements(av, bt, ei, ej, colix, pos, cv, has_c, out, done, g, mode, qscale, qmin,
                   lim, rne):
    """Certificate 3 on the listed elements (q: row ei[pos[q]], column ej[pos[q]], B's column
    in bt[colix[q]]), D2_ELEMS elements per parallel chunk; done[pos[q]] where it settles."""
    ns = pos.shape[0]
    for blk in prange((ns + D2_ELEMS - 1) // D2_ELEMS):
        tmp = np.empty(3 * LANES)
        for q in range(blk * D2_ELEMS, min(ns, (blk + 1) * D2_ELEMS)):
            t = pos[q]
            i = ei[t]
            j = ej[t]
            s, e, tt = _sum2(av, i, bt, colix[q], cv[i, j] if has_c else 0.0, tmp)
            y = s + e
            z = two_sum_err(s, e, y)                    # s + e = y + z exactly
            delta = tt * g
            if not abs(y) < np.inf:
                continue
            if delta == 0.0:
                # Every TwoSum was exact: x = s exactly (e = z = 0).
                out[i, j] = _rnd(y + 0.0, mode, qscale, qmin, lim, rne)
                done[t] = True
                continue
            d = (abs(z) + delta) * ONE_P40
            lo, hi, sided = _outward(y - d, y + d)
            if sided and abs(hi) < np.inf:
                rl = _rnd(lo, mode, qscale, qmin, lim, rne)
                if rl == _rnd(hi, mode, qscale, qmin, lim, rne):
                    out[i, j] = rl
                    done[t] = True


@njit(cache=True, error_model="numpy")
def dot2_fix(av, bv, bad, left, nbad, cv, has_c, out, mode, qscale, qmin, lim, rne, f, emin,
             emax):
    """Certificate 3 on the elements with bad[i, j] = 1, then the exact kernel on those it
    leaves and on those with bad[i, j] = 2.  left[i]: the count of row i; nbad: the total.
    av, bv: A and B (C-contiguous), each in float64 or float32 (their values, exactly: a
    float32 operand halves the bytes read; every read converts exactly to float64).
    The distinct columns of B that the code-1 elements need are gathered once into contiguous
    float64 rows (at most B's size in float64), and each element is a sum over two contiguous
    rows.  Returns the number of elements computed by the exact kernel."""
    N = nbad
    k = av.shape[1]
    ei = np.empty(N, np.int64)
    ej = np.empty(N, np.int64)
    code = np.empty(N, np.uint8)
    _collect(bad, left, ei, ej, code)
    # The code-1 elements in column order, and the distinct columns they need.
    order = np.argsort(ej, kind="mergesort")
    ns = 0
    for q in range(N):
        if code[order[q]] == 1:
            ns += 1
    pos = np.empty(ns, np.int64)
    colix = np.empty(ns, np.int64)
    cols = np.empty(ns, np.int64)
    nc = 0
    q = 0
    for r in range(N):
        t = order[r]
        if code[t] == 1:
            if nc == 0 or cols[nc - 1] != ej[t]:
                cols[nc] = ej[t]
                nc += 1
            pos[q] = t
            colix[q] = nc - 1
            q += 1
    # Rows of bt D2_PAD elements longer than k: rows exactly 4 KiB apart (k = 1024 float32)
    # fall in one cache set, and the gather's strided stores then evict each other.
    bt = np.empty((nc, k + D2_PAD), bv.dtype)
    _gather_cols(bv, cols[:nc], bt)
    done = np.zeros(N, np.bool_)
    _dot2_elements(av, bt, ei, ej, colix, pos, cv, has_c, out, done, bracket_factor(k + LANES),
                   mode, qscale, qmin, lim, rne)
    nexact = 0
    limbs = np.zeros(NLIMBS, np.int64)
    rem = np.empty(max(k, 1))
    lev = np.empty(LEVELS)
    col = np.empty(k)
    row = np.empty(k)
    for t in range(N):
        if done[t]:
            continue
        i = ei[t]
        j = ej[t]
        for kk in range(k):
            row[kk] = np.float64(av[i, kk])
            col[kk] = np.float64(bv[kk, j])
        c = cv[i, j] if has_c else 0.0
        out[i, j] = np.float32(ideal_dot(limbs, rem, lev, row, col, c, f, emin, emax, rne))
        nexact += 1
    return nexact
