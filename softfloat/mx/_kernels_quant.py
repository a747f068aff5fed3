"""Numba kernels of mx.quantize: one pass over the tiles (blocks) of a tensor.

Layout.  The tensor is a C-contiguous (P, R, C) array cut into tiles of (br, bc) elements, the
last tile of each dimension shorter (its missing elements are the zero padding: they never
change a block maximum, and are not stored).  Tile g = (p, ir, ic) in C order is the block g of
the scale array: a 1-D block along the last axis is (P = leading elements, R = 1, C = length,
br = 1, bc = block), along another axis (P = before, R = length, C = after, br = block, bc = 1),
a 2-D block (b0, b1) over the last two axes (P = leading, R, C, br = b0, bc = b1).

Per tile: the block maximum of |x| (on the bit patterns: an integer max, in which NaN patterns
exceed Inf's), the scale (softfloat/mx/_kernels_scale.py), then every element rounded once.
Work is cut into chunks of whole tiles processed by ``prange``; each chunk writes its own row of
counts (saturated, flushed), and stochastic rounding draws the bits of element i (its flat C
index in the whole tensor) from random_bits(key, base + i): results do not depend on the thread
count or on the chunks.

Two tile loops:
* fast_f32 (float32 input): the vectorised rounding of _kernels_fast on the float32 patterns
  of x with the block shift 2^-E (MX), or of y = fl32(x * r) with no shift (NVFP4 with the
  reference's float32 arithmetic); a run (one block row) holding an element it cannot do is
  redone by round_elem;
* general (float64 carrier; any format): round_elem for every element.  It is the definitional
  path (float64 input, NVFP4 exact division) and the twin the tests check the fast loops
  against, bit for bit.

Imports numpy, numba, softfloat._intrinsics, _primitives (bit constants), softfloat.rng and the
sibling kernel modules only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._intrinsics import absmax16, and32, gt32, sel32
from .._primitives import F32_ABS, F32_HIDDEN, F64_ABS
from ..rng import random_bits
from ._kernels_elem import OVERFLOW, code_byte, encode, ro_div, round_elem
from ._kernels_fast import (block_consts, rne_consts, run_det, run_det_nv, run_rne, run_sr,
                            run_sr_nv, unpack)
from ._kernels_scale import e8m0_code, e8m0_codes32, nvfp4_scale, nvfp4_scales32

#: Elements per parallel chunk (whole tiles; at least one tile per chunk): 2^14, as the other
#: softfloat kernels.
CHUNK = 1 << 14



def geometry(P, R, C, br, bc):
    """(tiles along R, tiles along C, tiles in all, tiles per chunk, chunks)."""
    nr = -(-R // br)
    nc = -(-C // bc)
    nt = P * nr * nc
    tpc = max(1, CHUNK // (br * bc))
    return nr, nc, nt, tpc, -(-nt // tpc)


@njit(cache=True, inline="always")
def _tile_pos(g, nr, nc):
    """(p, ir, ic) of tile g: the integer divisions, once per chunk (a 64-bit division costs tens
    of cycles: per tile of 16 elements it was a large part of the time); _tile_next steps."""
    p = g // (nr * nc)
    t = g - p * (nr * nc)
    ir = t // nc
    return p, ir, t - ir * nc


@njit(cache=True, inline="always")
def _tile_next(p, ir, ic, nr, nc):
    ic += 1
    if ic == nc:
        ic = 0
        ir += 1
        if ir == nr:
            ir = 0
            p += 1
    return p, ir, ic


@njit(cache=True, inline="always")
def _tile(p, ir, ic, R, C, br, bc):
    """(first flat row index p * R + r0, rows, c0, columns) of tile (p, ir, ic)."""
    r0 = ir * br
    c0 = ic * bc
    return p * R + r0, min(R - r0, br), c0, min(C - c0, bc)


@njit(cache=True, inline="always")
def _e8m0_value(code):
    """float32 value of an E8M0 code: 2^(code - 127); code 0 is the float32 subnormal 2^-127
    (pattern 2^22), 0xFF NaN."""
    if code == 255:
        return np.float32(np.nan)
    if code == 0:
        return np.uint32(1 << 22).view(np.float32)
    return np.uint32(code << 23).view(np.float32)


@njit(cache=True)
def _nan_tile(row0, nrow, c0, ncol, C, eb, vb):
    """A NaN-scale block: every element code 0 and value +0 (the block reads as NaN through
    its scale)."""
    for r in range(nrow):
        i0 = (row0 + r) * C + c0
        for c in range(ncol):
            eb[i0 + c] = 0
            vb[i0 + c] = 0


@njit(cache=True)
def _redo(xf, rcp, nv, escale, i0, n, eb, vb, EP, key, base):
    """round_elem for every element of a run in which the vectorised pass marked one (see
    _kernels_fast): x * 2^escale, or y = fl32(x * rcp) (nv); returns (saturated, flushed)."""
    sat = 0
    flushed = 0
    for j in range(n):
        i = i0 + j
        v = np.float64(np.float32(xf[i] * rcp)) if nv else np.float64(xf[i])
        u = random_bits(key, base + i) if EP[10] == 6 else np.uint64(0)
        rv, fl = round_elem(v, escale, EP, u)
        code = encode(rv, EP)
        eb[i] = code_byte(np.signbit(rv), code, EP[8], EP[9] != 0)
        vb[i] = np.float32(rv).view(np.uint32) if (code != 0 or EP[9] == 0) else np.uint32(0)
        sat += (fl & OVERFLOW) != 0
        flushed += (code == 0) & (xf[i] != 0.0)
    return sat, flushed


@njit(cache=True, inline="always")
def _amax_run(xs):
    """Largest |x| pattern of a run of float32 patterns (an integer max: NaN patterns exceed
    Inf's): 16 at a time with softfloat._intrinsics.absmax16, the rest one by one."""
    n = xs.size
    n16 = n - n % 16
    m = np.uint32(0)
    for j0 in range(0, n16, 16):
        v = absmax16(xs, j0)
        m = sel32(gt32(v, m), v, m)
    for j in range(n16, n):
        v = and32(xs[j], F32_ABS)
        m = sel32(gt32(v, m), v, m)
    return m


@njit(cache=True, inline="always")
def _amax32(xb, row0, nrow, c0, ncol, C):
    """Largest |x| pattern of a tile."""
    amax = np.uint32(0)
    for r in range(nrow):
        i0 = (row0 + r) * C + c0
        v = _amax_run(xb[i0:i0 + ncol])
        amax = sel32(gt32(v, amax), v, amax)
    return amax


@njit(cache=True)
def _amax64(xbits, row0, nrow, c0, ncol, C):
    """Largest |x| of a tile of float64 patterns, as a float64 (NaN if the tile holds one)."""
    amax = np.uint64(0)
    for r in range(nrow):
        i0 = (row0 + r) * C + c0
        for c in range(ncol):
            amax = max(amax, np.uint64(xbits[i0 + c] & F64_ABS))
    return np.uint64(amax).view(np.float64)


@njit(cache=True)
def _chunk_scales(am, codes, vals, rcps, nv, rp, head, SE):
    """The scales (and NVFP4's element factors) of a chunk's blocks from their maxima am (float32
    |x| patterns): the vectorised passes of _kernels_scale, then the scalar rule for the rare
    blocks they leave (a subnormal maximum; an NVFP4 scale below 2^-6)."""
    if nv:
        if nvfp4_scales32(am, codes, vals, rcps, head):
            for k in range(am.size):
                if codes[k] == 0xFF:
                    a = np.float64(np.uint32(am[k]).view(np.float32))
                    codes[k], vals[k], rcps[k] = nvfp4_scale(a, head, SE)
        return
    if e8m0_codes32(am, codes, rp):
        for k in range(am.size):
            if am[k] < F32_HIDDEN and am[k] != 0:
                a = np.float64(np.uint32(am[k]).view(np.float32))
                codes[k] = e8m0_code(a, rp[0], rp[1], rp[2], rp[3])
    for k in range(am.size):
        vals[k] = _e8m0_value(codes[k])


@njit(cache=True, inline="always")
def _factor(code, rcp, nv):
    """The element factor of a block: NVFP4's r, or 2^-E (exact in float32 for -E in
    -127..127: 2^-127 is a float32 subnormal)."""
    return rcp if nv else np.float32(2.0 ** -(np.int64(code) - 127))


@njit(cache=True)
def _rne_contiguous(g0, g1, xb, xf, eb, vb, C, bc, nr, nc, codes, rcps, nv, RC):
    """RNE, 1-D blocks along the last axis (R = 1): the chunk's elements are contiguous, so they
    go through run_rne in one flat loop (per run between NaN blocks) with a per-element factor
    (blocks of 16 or 32 are too short for the vectoriser on their own)."""
    p, ir, ic = _tile_pos(g0, nr, nc)
    first = p * C + ic * bc
    last = first
    ms = np.empty((g1 - g0) * bc, dtype=np.float32)
    nanc = 0x7F if nv else 255
    sat = 0
    flushed = 0
    start = first
    for g in range(g0, g1):
        i0 = p * C + ic * bc
        n = min(C - ic * bc, bc)
        p, ir, ic = _tile_next(p, ir, ic, nr, nc)
        last = i0 + n
        if codes[g - g0] == nanc:
            s, f, _ = run_rne(xb[start:i0], xf[start:i0], ms[start - first:i0 - first],
                              eb[start:i0], vb[start:i0], RC)
            sat += s
            flushed += f
            _nan_tile(i0, 1, 0, n, 1, eb, vb)
            start = last
            continue
        ms[i0 - first:last - first] = _factor(codes[g - g0], rcps[g - g0], nv)
    s, f, _ = run_rne(xb[start:last], xf[start:last], ms[start - first:last - first],
                      eb[start:last], vb[start:last], RC)
    return sat + s, flushed + f


@njit(cache=True)
def _tiles(g0, g1, xb, xf, eb, vb, R, C, br, bc, nr, nc, codes, rcps, nv, rne, sr, EP, FC, K,
           RC, key, base):
    """Tile by tile, a run per tile row: any layout, any mode; returns (saturated, flushed)."""
    ms = np.empty(bc, dtype=np.float32)
    sat = 0
    flushed = 0
    p, ir, ic = _tile_pos(g0, nr, nc)
    for g in range(g0, g1):
        row0, nrow, c0, ncol = _tile(p, ir, ic, R, C, br, bc)
        p, ir, ic = _tile_next(p, ir, ic, nr, nc)
        code = np.int64(codes[g - g0])
        rcp = rcps[g - g0]
        if code == (0x7F if nv else 255):
            _nan_tile(row0, nrow, c0, ncol, C, eb, vb)
            continue
        E = 0 if nv else code - 127
        BC = block_consts(E, FC)
        ms[:] = _factor(code, rcp, nv)
        for r in range(nrow):
            i0 = (row0 + r) * C + c0
            i1 = i0 + ncol
            if rne:
                s, f, slow = run_rne(xb[i0:i1], xf[i0:i1], ms[:ncol], eb[i0:i1], vb[i0:i1], RC)
            elif nv and sr:
                s, f, slow = run_sr_nv(xb[i0:i1], xf[i0:i1], rcp, eb[i0:i1], vb[i0:i1], K, BC,
                                       key, base + i0)
            elif nv:
                s, f, slow = run_det_nv(xb[i0:i1], xf[i0:i1], rcp, eb[i0:i1], vb[i0:i1], K, BC)
            elif sr:
                s, f, slow = run_sr(xb[i0:i1], eb[i0:i1], vb[i0:i1], K, BC, key, base + i0)
            else:
                s, f, slow = run_det(xb[i0:i1], eb[i0:i1], vb[i0:i1], K, BC)
            if slow:
                s, f = _redo(xf, rcp, nv, -E, i0, ncol, eb, vb, EP, key, base)
            sat += s
            flushed += f
    return sat, flushed


@njit(cache=True)
def _f32_chunk(ch, xb, xf, eb, vb, sc, sv, R, C, br, bc, nr, nc, nt, tpc, EP, FC, rp, nv, head,
               SE, key, base, counts):
    """Tiles of chunk ch, float32 input: MX (E8M0 scale, elements of x * 2^-E) or NVFP4 with
    the reference's float32 arithmetic (elements of fl32(x * r)).  Three passes: the block
    maxima, the scales of all the chunk's blocks (vectorised across blocks), the elements."""
    sr = EP[10] == 6
    rne = EP[10] == 0
    K = unpack(FC)
    RC = rne_consts(FC)
    g0 = ch * tpc
    g1 = min(nt, g0 + tpc)
    am = np.empty(g1 - g0, dtype=np.uint32)
    p, ir, ic = _tile_pos(g0, nr, nc)
    for g in range(g0, g1):
        row0, nrow, c0, ncol = _tile(p, ir, ic, R, C, br, bc)
        am[g - g0] = _amax32(xb, row0, nrow, c0, ncol, C)
        p, ir, ic = _tile_next(p, ir, ic, nr, nc)
    codes = sc[g0:g1]
    vals = sv[g0:g1]
    rcps = np.ones(g1 - g0, dtype=np.float32)
    _chunk_scales(am, codes, vals, rcps, nv, rp, head, SE)
    if rne and R == 1:
        sat, flushed = _rne_contiguous(g0, g1, xb, xf, eb, vb, C, bc, nr, nc, codes, rcps, nv,
                                       RC)
    else:
        sat, flushed = _tiles(g0, g1, xb, xf, eb, vb, R, C, br, bc, nr, nc, codes, rcps, nv,
                              rne, sr, EP, FC, K, RC, key, base)
    counts[ch, 0] = sat
    counts[ch, 1] = flushed


@njit(cache=True)
def _general_chunk(ch, x, xbits, eb, vb, sc, sv, R, C, br, bc, nr, nc, nt, tpc, EP, rp, nv,
                   head, SE, key, base, counts):
    sr = EP[10] == 6
    sat = 0
    flushed = 0
    p, ir, ic = _tile_pos(ch * tpc, nr, nc)
    for g in range(ch * tpc, min(nt, (ch + 1) * tpc)):
        row0, nrow, c0, ncol = _tile(p, ir, ic, R, C, br, bc)
        p, ir, ic = _tile_next(p, ir, ic, nr, nc)
        a = _amax64(xbits, row0, nrow, c0, ncol, C)
        E = 0
        rcp = np.float32(0.0)
        den = 0.0
        if nv:
            code, val, rcp = nvfp4_scale(a, head, SE)
            den = head[2] * np.float64(val)
            isnan = code == 0x7F
        else:
            code = e8m0_code(a, rp[0], rp[1], rp[2], rp[3])
            val = _e8m0_value(code)
            E = code - 127
            isnan = code == 255
        sc[g] = code
        sv[g] = val
        if isnan:
            _nan_tile(row0, nrow, c0, ncol, C, eb, vb)
            continue
        for r in range(nrow):
            i0 = (row0 + r) * C + c0
            for c in range(ncol):
                i = i0 + c
                v = x[i]
                if nv and head[5] != 0.0:
                    v = ro_div(v, den)
                elif nv:
                    v = np.float64(np.float32(np.float32(v) * rcp))
                u = random_bits(key, base + i) if sr else np.uint64(0)
                rv, fl = round_elem(v, -E, EP, u)
                code_e = encode(rv, EP)
                eb[i] = code_byte(np.signbit(rv), code_e, EP[8], EP[9] != 0)
                keep = code_e != 0 or EP[9] == 0
                vb[i] = np.float32(rv).view(np.uint32) if keep else np.uint32(0)
                sat += (fl & OVERFLOW) != 0
                flushed += (code_e == 0) & (x[i] != 0.0)
    counts[ch, 0] = sat
    counts[ch, 1] = flushed


# ----- drivers: parallel over chunks, or serial (same chunks, same results) -------------------

@njit(parallel=True, cache=True)
def fast_f32(xb, xf, eb, vb, sc, sv, R, C, br, bc, EP, FC, rp, nv, head, SE, key, base, counts,
             nr, nc, nt, tpc):
    """The float32 kernel (MX, or NVFP4 with float32 arithmetic), parallel over chunks."""
    for ch in prange(counts.shape[0]):
        _f32_chunk(np.int64(ch), xb, xf, eb, vb, sc, sv, R, C, br, bc, nr, nc, nt, tpc, EP, FC,
                   rp, nv, head, SE, key, base, counts)


@njit(cache=True)
def fast_f32_serial(xb, xf, eb, vb, sc, sv, R, C, br, bc, EP, FC, rp, nv, head, SE, key, base,
                    counts, nr, nc, nt, tpc):
    """fast_f32 on the calling thread (same chunks, same results)."""
    for ch in range(counts.shape[0]):
        _f32_chunk(np.int64(ch), xb, xf, eb, vb, sc, sv, R, C, br, bc, nr, nc, nt, tpc, EP, FC,
                   rp, nv, head, SE, key, base, counts)


@njit(parallel=True, cache=True)
def general(x, xbits, eb, vb, sc, sv, R, C, br, bc, EP, rp, nv, head, SE, key, base, counts,
            nr, nc, nt, tpc):
    for ch in prange(counts.shape[0]):
        _general_chunk(np.int64(ch), x, xbits, eb, vb, sc, sv, R, C, br, bc, nr, nc, nt, tpc,
                       EP, rp, nv, head, SE, key, base, counts)

