"""Numba kernels of the DFP integer GEMM (VNNI emulation with overflow management).

Takes only arrays and integers; softfloat/dfp/_gemm.py prepares them and documents the
semantics.  Inputs are "pair packed" as VNNI expects: the reduction index k runs over pairs
(2t, 2t+1) of int16 values that one VPDPWSSD step multiplies and sums into an int32 lane.

    Ap32 (m, KP) int32  : A's pair t of row i as one dword (the int16 pair A[i,2t], A[i,2t+1])
    Ap16 (m, 2KP) int16 : the same memory seen as int16
    Bp16 (KP, 2n) int16 : B's pairs, interleaved: Bp16[t, 2j + h] = B[2t + h, j]
    cps (nch + 1)       : chain c covers pairs cps[c] .. cps[c+1]-1 (same for every output)
    cba, cbb (nch)      : the exponent block of A (column of ea) and of B (row of eb) of chain c
    ea (m, nba), eb (nbb, n) int64 : shared exponents

How the fast path stays exact.  Lanes accumulate in wrapping int32 arithmetic, which is exactly
VPDPWSSD's result (two's complement addition is addition modulo 2^32, so wrapping after every
step or once at the end gives the same residue).  A pair sum p = a0*b0 + a1*b1 never overflows
int32 by itself: |a|, |b| <= 2^15 - 1 gives |p| <= 2 (2^15 - 1)^2 = 2^31 - 2^17 + 2.  So a step
l + p leaves the int32 range exactly when the wrapped sum s = l + p (mod 2^32) has a sign
different from both l and p: ((l ^ s) & (p ^ s)) < 0, the classic signed-overflow test.  These
sign bits are OR-ed into a per-lane flag; a lane whose flag is clear had no overflow in any step
(its wrapped value is the exact sum, and the saturating instruction would have given the same).
A flagged lane is replayed exactly (int64 step by step, wrap or saturate per step, counting
events), which costs nothing when overflow is rare and is always correct; a row with many
flagged lanes is replayed as a whole (vectorised).  With check = 0 (overflow="wrap" and no
statistics) the test is skipped altogether (_fast_chain_wrap): the wrapped values are the same.

The pair products use the int16 x int16 -> int32 dot-product idiom that LLVM turns into
VPMADDWD when both operands are read as interleaved int16 pairs; the A pair is broadcast by
filling a small buffer with its dword (a fill of JT dwords per row and pair, amortised over JT
lanes).  parallel=True only over the outer loop of tasks (a block of RB rows x JT columns);
every task writes its own rows of ``out`` and its own row of ``stats``, so results and counts do
not depend on the thread count.

Imports numpy and numba only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

#: Rows per task (16) x columns per task (256 int32 lanes = 1 KiB per row): the lanes of a task
#: (16 KiB) and the B pairs streamed for it stay in L1/L2; each B row slice is reused 16 times.
RB = 16
JT = 256

#: Columns of ``stats``: events (wrap or saturation), lanes-with-events (overflowed chains),
#: inexact int32 -> fp32 conversions, max |int32 partial sum| at a flush.
NSTAT = 4

#: GEMMs of at most this many products (m * n * k) run on the calling thread (gemm_serial):
#: waking Numba's workers costs 30-60 us on an idle 2-core machine (far more when the cores are
#: busy), about the time one thread takes for 2^21 products at the ~40 products/ns of the
#: chained kernel.  The demo's training GEMMs (32 x 64 x 64 = 2^17) are far below.
SERIAL_MAX = 1 << 21

_I32_MIN = -(1 << 31)
_I32_MAX = (1 << 31) - 1
_TWO32 = 1 << 32


@njit(cache=True, inline="always")
def _pair(a, b, j):
    """a[2j] * b[2j] + a[2j+1] * b[2j+1] in wrapping int32: one VPDPWSSD pair sum (it never
    overflows, see the module doc), written so that LLVM emits VPMADDWD."""
    return np.int32(np.int32(np.int32(a[2 * j]) * np.int32(b[2 * j]))
                    + np.int32(np.int32(a[2 * j + 1]) * np.int32(b[2 * j + 1])))


@njit(cache=True, inline="always")
def _lanes(L, F, jw, A, b, c, d, e, zero, check, four):
    """One pass over the lanes of a row: L[j] += the pair sums of (a0, b) and, with four,
    (a1, c), (a2, d), (a3, e) too (A = (a0, a1, a2, a3): the broadcast A pairs), wrapping
    int32; with check, F[j] |= the overflow bits of every step (see the module doc).  check
    and four are constants of the call sites, so each compiles to its own straight loop."""
    a0, a1, a2, a3 = A
    if check:
        for j in range(jw):
            p = _pair(a0, b, j)
            x = L[j]
            s1 = np.int32(x + p)
            fl = np.int32((x ^ s1) & (p ^ s1))
            if four:
                q = _pair(a1, c, j)
                u = _pair(a2, d, j)
                v = _pair(a3, e, j)
                s2 = np.int32(s1 + q)
                s3 = np.int32(s2 + u)
                s4 = np.int32(s3 + v)
                fl = np.int32(fl | np.int32((s1 ^ s2) & (q ^ s2))
                              | np.int32((s2 ^ s3) & (u ^ s3))
                              | np.int32((s3 ^ s4) & (v ^ s4)))
                s1 = s4
            F[j] = np.int32(F[j] | fl)
            L[j] = s1
    elif four:
        for j in range(jw):
            p = _pair(a0, b, j) ^ zero
            q = _pair(a1, c, j) ^ zero
            u = _pair(a2, d, j) ^ zero
            v = _pair(a3, e, j) ^ zero
            L[j] = np.int32(L[j] + np.int32(np.int32(np.int32(p) + np.int32(q))
                                            + np.int32(np.int32(u) + np.int32(v))))
    else:
        for j in range(jw):
            L[j] = np.int32(L[j] + np.int32(_pair(a0, b, j) ^ zero))


@njit(cache=True, inline="always")
def _step(Ap32, Bp16, i0, rows, j0, jw, kp, A, W, lane, flag, zero, check, four):
    """Pairs kp..kp+3 (four) or pair kp alone of every row: the A dwords broadcast into the
    rows W of buf (a row of zeros is skipped: adding zeros changes nothing and cannot
    overflow), then _lanes."""
    f0, f1, f2, f3 = W
    b = Bp16[kp, 2 * j0:2 * (j0 + jw)]
    c = Bp16[kp + 1, 2 * j0:2 * (j0 + jw)] if four else b
    d = Bp16[kp + 2, 2 * j0:2 * (j0 + jw)] if four else b
    e = Bp16[kp + 3, 2 * j0:2 * (j0 + jw)] if four else b
    for r in range(rows):
        w0 = Ap32[i0 + r, kp]
        w1 = Ap32[i0 + r, kp + 1] if four else w0
        w2 = Ap32[i0 + r, kp + 2] if four else w0
        w3 = Ap32[i0 + r, kp + 3] if four else w0
        if w0 == 0 and w1 == 0 and w2 == 0 and w3 == 0:
            continue
        for j in range(jw):
            f0[j] = w0
        if four:
            for j in range(jw):
                f1[j] = w1
                f2[j] = w2
                f3[j] = w3
        _lanes(lane[r], flag[r], jw, A, b, c, d, e, zero, check, four)


@njit(cache=True, inline="always")
def _chain(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, flag, zero, check):
    """lane[r, :jw] += pairs p0..p1-1 of row i0 + r (wrapping int32); with check (a constant
    of the two callers below) flag |= the overflow bits.

    Four VNNI steps per pass over the lanes (one load/store of each lane per four steps), then
    the last 0..3 pairs one at a time; buf (4, JT) int32 holds the four A dwords broadcast,
    read back as int16 pairs.
    """
    ap = buf.view(np.int16)
    A = (ap[0], ap[1], ap[2], ap[3])
    W = (buf[0], buf[1], buf[2], buf[3])
    kp = p0
    while kp + 3 < p1:
        _step(Ap32, Bp16, i0, rows, j0, jw, kp, A, W, lane, flag, zero, check, True)
        kp += 4
    while kp < p1:
        _step(Ap32, Bp16, i0, rows, j0, jw, kp, A, W, lane, flag, zero, check, False)
        kp += 1


@njit(cache=True)
def _fast_chain(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, flag):
    """_chain with the overflow test: flag |= the overflow bits of every step."""
    _chain(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, flag, np.int32(0), True)


@njit(cache=True)
def _fast_chain_wrap(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, zero):
    """_chain without the overflow test: for overflow="wrap" when no statistics are asked.

    The wrapped lane is the exact chain sum modulo 2^32 whatever the order and the number of
    wraps, so the result is bit-identical to the checked path; only the event counts are lost.
    ``zero`` is a runtime 0: p ^ zero keeps each pair sum a value of its own, which stops LLVM
    from reassociating the sum of eight products (it would then lose the VPMADDWD pattern and
    multiply with VPMULLD: measured 2x slower than this extra XOR).  (``lane`` stands in for
    the unused flag array.)
    """
    _chain(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, lane, zero, False)


@njit(cache=True)
def _replay_lane(Ap16, Bp16, i, jj, p0, p1, saturate):
    """Exact VNNI steps of one lane: returns (int32 result, number of wrap/saturation events).

    One step is VPDPWSSD[S]: v = lane + a0*b0 + a1*b1 computed exactly (int64), then
    wrapped to int32 (VPDPWSSD) or clamped to [-2^31, 2^31 - 1] (VPDPWSSDS); an event is a step
    whose exact v lies outside that range.
    """
    acc = np.int64(0)
    ev = 0
    for kp in range(p0, p1):
        v = (acc + np.int64(Ap16[i, 2 * kp]) * np.int64(Bp16[kp, 2 * jj])
             + np.int64(Ap16[i, 2 * kp + 1]) * np.int64(Bp16[kp, 2 * jj + 1]))
        if v < _I32_MIN or v > _I32_MAX:
            ev += 1
            if saturate:
                v = np.int64(_I32_MIN) if v < 0 else np.int64(_I32_MAX)
            else:
                v = ((v - _I32_MIN) % _TWO32) + _I32_MIN
        acc = v
    return acc, ev


@njit(cache=True)
def _replay_row(Ap16, Bp16, i, j0, jw, p0, p1, saturate, acc, evc):
    """_replay_lane for all jw lanes of row i at once (vectorisable; used when many lanes of the
    row overflowed): acc[j] = the lane's int32 result, evc[j] = its number of events."""
    for j in range(jw):
        acc[j] = 0
        evc[j] = 0
    for kp in range(p0, p1):
        a0 = np.int64(Ap16[i, 2 * kp])
        a1 = np.int64(Ap16[i, 2 * kp + 1])
        if a0 == 0 and a1 == 0:
            continue
        b = Bp16[kp, 2 * j0:2 * (j0 + jw)]
        for j in range(jw):
            v = acc[j] + a0 * np.int64(b[2 * j]) + a1 * np.int64(b[2 * j + 1])
            if saturate:
                w = min(max(v, np.int64(_I32_MIN)), np.int64(_I32_MAX))
            else:
                w = ((v - _I32_MIN) & (_TWO32 - 1)) + _I32_MIN     # v mod 2^32 into int32 range
            evc[j] += 1 if w != v else 0
            acc[j] = w


@njit(cache=True)
def _count_flags(F, jw):
    n = 0
    for j in range(jw):
        n += 1 if F[j] < 0 else 0
    return n


@njit(cache=True)
def _flush_row(L, F, jw, ea_i, eb_row, j0, out_row):
    """out_row[j0 + j] = fp32(out_row[j0 + j] + fp32(L[j] * 2^(ea_i + eb_row[j0 + j]))), then
    L[j] = F[j] = 0 for the next chain.  Returns (inexact conversions, max |L|).

    Conversion: |L| <= 2^31 is exact in float64; with e clamped to [-1022, 992] the product
    L * 2^e is an exact normal float64 (2^-1022 <= |.| <= 2^31 * 2^992 = 2^1023), and the clamp
    changes no result: below 2^-1022 * 2^31 the fp32 value is +-0, above 2^992 it is +-Inf.
    np.float32(...) is then the one RNE rounding.  The accumulation is a float32 + float32 add
    (IEEE RNE; no fastmath).  2^e is built from its bit pattern ((e + 1023) << 52).
    """
    inexact = 0
    mx = 0
    # Slices indexed by the bare loop counter: no negative-index wraparound test per element,
    # which would keep LLVM from vectorising the loop (3x slower measured).
    O = out_row[j0:j0 + jw]
    Eb = eb_row[j0:j0 + jw]
    for j in range(jw):
        e = min(max(ea_i + Eb[j], -1022), 992)
        z64 = np.float64(L[j]) * np.int64((e + 1023) << 52).view(np.float64)
        z = np.float32(z64)
        inexact += 1 if np.float64(z) != z64 else 0
        O[j] = np.float32(O[j] + z)
        mx = max(mx, abs(np.int64(L[j])))
        L[j] = 0
        F[j] = 0
    return inexact, mx


@njit(cache=True)
def _pair_chains(Ap16, Bp16, i0, rows, j0, jw, cps, cba, cbb, c0, c1, ea, eb, want, out):
    """Chains c0..c1-1 of ONE pair each (chain_len <= 2), for rows i0.. and lanes j0..: per
    chain L = a0*b0 + a1*b1 and its flush, fused (the int32 lane, its fill buffer and the
    separate flush pass of the general path cost more than the arithmetic here).  Identical to
    that path: the pair sum cannot leave int32 (|a0*b0 + a1*b1| <= 2 (2^15 - 1)^2 < 2^31, see
    the module doc), so the lane starting at 0 holds it exactly in both overflow modes and no
    event can happen; the flush is _flush_row's arithmetic on the same value, chains in the
    same order.  Returns (inexact conversions, max |L|), counted only when ``want``."""
    inexact = 0
    mx = 0
    for c in range(c0, c1):
        kp = cps[c]
        Eb = eb[cbb[c], j0:j0 + jw]
        b = Bp16[kp, 2 * j0:2 * (j0 + jw)]          # read once, used by every row
        for r in range(rows):
            i = i0 + r
            O = out[i, j0:j0 + jw]
            a0 = np.int32(Ap16[i, 2 * kp])
            a1 = np.int32(Ap16[i, 2 * kp + 1])
            ea_i = ea[i, cba[c]]
            if want:
                for j in range(jw):
                    L = np.int32(np.int32(a0 * np.int32(b[2 * j]))
                                 + np.int32(a1 * np.int32(b[2 * j + 1])))
                    e = min(max(ea_i + Eb[j], -1022), 992)
                    z64 = np.float64(L) * np.int64((e + 1023) << 52).view(np.float64)
                    z = np.float32(z64)
                    inexact += np.int64(np.float64(z) != z64)
                    O[j] = np.float32(O[j] + z)
                    mx = max(mx, abs(np.int64(L)))
            else:
                for j in range(jw):
                    L = np.int32(np.int32(a0 * np.int32(b[2 * j]))
                                 + np.int32(a1 * np.int32(b[2 * j + 1])))
                    e = min(max(ea_i + Eb[j], -1022), 992)
                    z = np.float32(np.float64(L) * np.int64((e + 1023) << 52).view(np.float64))
                    O[j] = np.float32(O[j] + z)
    return inexact, mx


@njit(cache=True)
def _gemm_task(task, Ap32, Ap16, Bp16, cps, cba, cbb, ea, eb, saturate, check, zero, out, stats):
    """Task ``task``: rows i0..i0+RB-1 x columns j0..j0+JT-1 of out, every chain in order;
    writes stats[task]."""
    m = Ap32.shape[0]
    n = out.shape[1]
    njt = (n + JT - 1) // JT
    nch = cps.size - 1
    i0 = (task // njt) * RB
    j0 = (task % njt) * JT
    rows = min(RB, m - i0)
    jw = min(JT, n - j0)
    lane = np.zeros((RB, JT), dtype=np.int32)
    flag = np.zeros((RB, JT), dtype=np.int32)
    acc = np.empty(JT, dtype=np.int64)
    evc = np.empty(JT, dtype=np.int64)
    buf = np.empty((4, JT), dtype=np.int32)
    events = 0
    bad = 0
    inexact = 0
    mx = 0
    c = 0
    while c < nch:
        p0 = cps[c]
        p1 = cps[c + 1]
        if p1 - p0 == 1:
            # a run of one-pair chains (every chain, with chain_len <= 2 and even blocks)
            c1 = c + 1
            while c1 < nch and cps[c1 + 1] - cps[c1] == 1:
                c1 += 1
            ix, m_ = _pair_chains(Ap16, Bp16, i0, rows, j0, jw, cps, cba, cbb, c, c1, ea, eb,
                                  check, out)
            inexact += ix
            mx = max(mx, m_)
            c = c1
            continue
        if check:
            _fast_chain(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, flag)
        else:
            _fast_chain_wrap(Ap32, Bp16, i0, rows, j0, jw, p0, p1, buf, lane, zero)
        for r in range(rows):
            L = lane[r]
            F = flag[r]
            nflag = _count_flags(F, jw) if check else 0
            if nflag > 8:
                # Many overflowing lanes: one vectorised exact pass over the whole row.
                _replay_row(Ap16, Bp16, i0 + r, j0, jw, p0, p1, saturate, acc, evc)
                for j in range(jw):
                    L[j] = acc[j]
                    events += evc[j]
                    if evc[j] > 0:
                        bad += 1
            elif nflag > 0:
                for j in range(jw):
                    if F[j] < 0:
                        val, ev = _replay_lane(Ap16, Bp16, i0 + r, j0 + j, p0, p1, saturate)
                        L[j] = val
                        events += ev
                        if ev > 0:
                            bad += 1
            ix, m_ = _flush_row(L, F, jw, ea[i0 + r, cba[c]], eb[cbb[c]], j0, out[i0 + r])
            inexact += ix
            mx = max(mx, m_)
        c += 1
    stats[task, 0] = events
    stats[task, 1] = bad
    stats[task, 2] = inexact
    stats[task, 3] = mx


@njit(cache=True)
def _pairs_task(task, Ap16, Bp16, cps, cba, cbb, ea, eb, want, out, stats):
    """_gemm_task for a plan whose chains are all one pair: only the fused path is compiled,
    a few times cheaper to compile than the general task (Numba builds it on first use)."""
    n = out.shape[1]
    njt = (n + JT - 1) // JT
    i0 = (task // njt) * RB
    j0 = (task % njt) * JT
    ix, mx = _pair_chains(Ap16, Bp16, i0, min(RB, out.shape[0] - i0), j0, min(JT, n - j0), cps,
                          cba, cbb, 0, cps.size - 1, ea, eb, want, out)
    stats[task, 2] = ix
    stats[task, 3] = mx


@njit(parallel=True, cache=True)
def pairs_kernel(Ap16, Bp16, cps, cba, cbb, ea, eb, want, out, stats):
    """gemm_kernel for one-pair chains (stats zero on entry; events are impossible)."""
    for task in prange(stats.shape[0]):
        _pairs_task(np.int64(task), Ap16, Bp16, cps, cba, cbb, ea, eb, want, out, stats)


@njit(cache=True)
def pairs_serial(Ap16, Bp16, cps, cba, cbb, ea, eb, want, out, stats):
    """pairs_kernel on the calling thread."""
    for task in range(stats.shape[0]):
        _pairs_task(np.int64(task), Ap16, Bp16, cps, cba, cbb, ea, eb, want, out, stats)


@njit(parallel=True, cache=True)
def gemm_kernel(Ap32, Ap16, Bp16, cps, cba, cbb, ea, eb, saturate, check, zero, out, stats):
    """out (m, n) float32, zero on entry; stats (ntask, NSTAT) int64 (see the module doc).

    check = 0 (only with saturate = 0): skip the overflow test (no event counts).  zero: the
    int32 value 0, passed at run time so the compiler cannot fold it (see _fast_chain_wrap)."""
    for task in prange(stats.shape[0]):
        _gemm_task(np.int64(task), Ap32, Ap16, Bp16, cps, cba, cbb, ea, eb, saturate, check,
                   zero, out, stats)


@njit(cache=True)
def gemm_serial(Ap32, Ap16, Bp16, cps, cba, cbb, ea, eb, saturate, check, zero, out, stats):
    """gemm_kernel on the calling thread: the same tasks, the same bits and counts."""
    for task in range(stats.shape[0]):
        _gemm_task(np.int64(task), Ap32, Ap16, Bp16, cps, cba, cbb, ea, eb, saturate, check,
                   zero, out, stats)
