"""Numba kernels of the ideal models' fast path (K = F = infinity: c + sum_k a_k b_k rounded
once): the certificates on top of numpy's float64 matmul, and the cheap compensated fallback.

Provides
    certify(s0, cv, has_c, anrm, aexp, bnrm, bexp, off, g, out, bad, left, mode, qscale, qmin,
            lim, rne) -> uncertified count
    dot2_fix(av, bv, bad, left, nbad, cv, has_c, out, g, mode, qscale, qmin, lim, rne, f, emin,
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

Certificate 3, compensated sum (Ogita, Rump & Oishi 2005, Sum2 on exact products).  Starting
from s = c, each product is added with TwoSum: s_new + t_k = s + p_k exactly, so
x = s_final + sum_k t_k exactly (TwoSum is error-free whatever the magnitudes).  The t_k are
summed in e = fl(sum t_k) in order, and T = fl(sum |t_k|) alongside; |e - sum t_k| <=
gamma_(k-1) sum |t_k| <= gamma_(k-1) T / (1 - gamma_k), bounded by delta = fl(T g) with the same
g as above.  TwoSum(s_final, e) = y + z exactly, so x lies within |z| + delta of y; the bracket
[y - D, y + D] with D = fl(fl(|z| + delta) (1 + 2^-40)) >= |z| + delta, pushed outward as above,
rounds to one value except within about 2^-52 |x| of a rounding boundary: exact ties and
adversarial data.  T = 0 means every t_k was 0: then x = s_final exactly.  The t_k are multiples
of 2^-298 (TwoSum errors of multiples of it), so neither T nor e underflows.
Whatever certificate 3 leaves, and every element whose row of A, column of B or c holds Inf or
NaN, is computed exactly by _superacc.ideal_dot (error-free extraction and a superaccumulator).

Output rounding: mode 0 is the fp32 RNE accumulator (out_frac 23), where float32(v) -- the
hardware's RNE conversion with gradual underflow and overflow to Inf -- is the spec's ROUND of
an exact or round-to-odd v; mode 1 is any other accumulator (_scalar.round_out).

Imports numpy, numba, softfloat._primitives and the sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._primitives import fold_odd_nb, pow2, two_sum_err
from ._scalar import round_out
from ._superacc import LEVELS, NLIMBS, ideal_dot

#: 1 - 2^-20: the exactness threshold's margin (see certificate 1).
ONE_M = 1.0 - 2.0 ** -20
#: 1 + 2^-40: the margin of the compensated bracket's radius (certificate 3).
ONE_P40 = 1.0 + 2.0 ** -40
#: Rows of the output per parallel chunk of the certificate pass.
CERT_ROWS = 16


def bracket_factor(k: int) -> float:
    """g = (k + 4) u (1 + 2^-10) (computed exactly enough: every factor rounds upward-safe)."""
    return float(k + 4) * 2.0 ** -53 * (1.0 + 2.0 ** -10)


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
def dot2_fix(av, bv, bad, left, nbad, cv, has_c, out, g, mode, qscale, qmin, lim, rne, f, emin,
             emax):
    """Certificate 3 on the elements with bad[i, j] = 1 (B streamed once, k outer, the
    elements in column order), then the exact kernel on those it leaves and on those with
    bad[i, j] = 2.  left[i]: the count of row i; nbad: the total.  av: A in float64; bv: B
    in float64 or float32 (its values, exactly: a float32 bv halves the bytes streamed; every
    read converts exactly to float64).  Returns the number of elements computed by the exact
    kernel."""
    N = nbad
    k = av.shape[1]
    ei = np.empty(N, np.int64)
    ej = np.empty(N, np.int64)
    code = np.empty(N, np.uint8)
    t = 0
    for i in range(bad.shape[0]):
        if left[i]:
            br = bad[i]
            for j in range(br.shape[0]):
                if br[j]:
                    ei[t] = i
                    ej[t] = j
                    code[t] = br[j]
                    t += 1
    # The code-1 elements, in column order (each row of B is then read in increasing
    # addresses), in compact arrays so that the k loop vectorises (gathers).
    order = np.argsort(ej, kind="mergesort")
    ns = 0
    for q in range(N):
        if code[order[q]] == 1:
            ns += 1
    aoff = np.empty(ns, np.int64)
    cj = np.empty(ns, np.int64)
    pos = np.empty(ns, np.int64)
    s = np.empty(ns)
    e = np.zeros(ns)
    tt = np.zeros(ns)
    q = 0
    for r in range(N):
        t = order[r]
        if code[t] == 1:
            aoff[q] = ei[t] * k
            cj[q] = ej[t]
            pos[q] = t
            s[q] = cv[ei[t], ej[t]] if has_c else 0.0
            q += 1
    aflat = av.reshape(-1)
    for kk in range(k):
        brow = bv[kk]
        for q in range(ns):
            p = aflat[aoff[q] + kk] * np.float64(brow[cj[q]])     # exact
            st = s[q]
            sn = st + p
            err = two_sum_err(st, p, sn)                # st + p = sn + err exactly
            s[q] = sn
            e[q] += err
            tt[q] += abs(err)
    # Results of certificate 3 back in the element order; NaN marks "not settled".
    done = np.zeros(N, np.bool_)
    for q in range(ns):
        t = pos[q]
        i = ei[t]
        j = ej[t]
        y = s[q] + e[q]
        z = two_sum_err(s[q], e[q], y)                  # s + e = y + z exactly
        delta = tt[q] * g
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
    nexact = 0
    limbs = np.zeros(NLIMBS, np.int64)
    rem = np.empty(max(k, 1))
    lev = np.empty(LEVELS)
    col = np.empty(k)
    for t in range(N):
        if done[t]:
            continue
        i = ei[t]
        j = ej[t]
        for kk in range(k):
            col[kk] = np.float64(bv[kk, j])
        c = cv[i, j] if has_c else 0.0
        out[i, j] = np.float32(ideal_dot(limbs, rem, lev, av[i], col, c, f, emin, emax, rne))
        nexact += 1
    return nexact
