"""Slow reference for softfloat.dfp in Python ints and fractions.Fraction.

Shares no code with the kernels: the counter-based random bits, the block bookkeeping, the
roundings, the VNNI chain semantics and the rounding to fp32 are all written again here, from
the definitions in softfloat/dfp/__init__.py, one element and one step at a time.  Floats appear
only as inputs and as exactly representable results.  Imports the standard library and numpy
(for array shapes and element access) only.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

MASK64 = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


# ----- random bits (softfloat.rng re-derived: fmix64 over a Weyl sequence) -------------------
def fmix64(z):
    z &= MASK64
    z ^= z >> 33
    z = (z * 0xFF51AFD7ED558CCD) & MASK64
    z ^= z >> 33
    z = (z * 0xC4CEB9FE1A85EC53) & MASK64
    z ^= z >> 33
    return z


def seed_key(seed):
    return fmix64(seed ^ 0x6A09E667F3BCC908)


def random_bits(key, index):
    return fmix64(key ^ ((index * 0x9E3779B97F4A7C15) & MASK64))


# ----- exact helpers ----------------------------------------------------------------------------
def floor_log2(q: Fraction) -> int:
    """floor(log2 q) for a Fraction q > 0."""
    n, d = q.numerator, q.denominator
    e = n.bit_length() - d.bit_length()
    # 2^e <= q < 2^(e+1) after at most one correction
    if Fraction(2) ** e > q:
        e -= 1
    return e


def pow2(e) -> Fraction:
    return Fraction(2) ** e


#: softfloat's mode names and DFP's names of the same roundings (written out here, not
#: imported: the reference shares nothing with the library).
_NAMES = {"nearest": "rne", "stochastic": "sr", "biased": "rhu", "floor": "rdn"}


def is_stochastic(mode: str) -> bool:
    return _NAMES.get(mode, mode) == "sr"


def round_int(t: Fraction, mode: str, u: int = 0, rbits: int = 24) -> int:
    """The DFP roundings of a rational t to an integer (definitions of softfloat.dfp), by mode
    name: rne (nearest), rhu (biased), rdn (floor), sr (stochastic), rna, rtz, rup, rto."""
    mode = _NAMES.get(mode, mode)
    fl = math.floor(t)
    frac = t - fl
    if mode == "rdn":
        return fl
    if mode == "rup":
        return math.ceil(t)
    if mode == "rtz":
        return math.trunc(t)
    if mode == "rhu":
        return math.floor(t + Fraction(1, 2))
    if mode == "rne":
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2 == 1):
            return fl + 1
        return fl
    if mode == "rna":
        if frac == Fraction(1, 2):
            return fl + 1 if t > 0 else fl            # the tie goes away from zero
        return fl + 1 if frac > Fraction(1, 2) else fl
    if mode == "rto":
        if frac == 0:
            return fl
        return fl if fl % 2 == 1 else fl + 1          # the odd one of floor(t), floor(t) + 1
    if mode == "sr":
        top = math.floor(frac * 2 ** rbits)
        return fl + 1 if top + (u >> (64 - rbits)) >= 2 ** rbits else fl
    raise ValueError(mode)


def clip(i, bits):
    lim = 2 ** (bits - 1) - 1
    if i > lim:
        return lim, True
    if i < -lim:
        return -lim, True
    return i, False


def block_of(idx, axis, block):
    """Block key of the element at index tuple idx."""
    if axis is None:
        return ()
    n = block if block is not None else 10 ** 18
    return tuple(idx[:axis]) + (idx[axis] // n,) + tuple(idx[axis + 1:])


def exponent_index(key, axis):
    return key if axis is not None else ()


# ----- quantize ---------------------------------------------------------------------------------
def quantize(x, bits, rounding, axis=None, block=None, scale_rule="floor", seed=None,
             sr_bits=24):
    """(mantissa int64 array, exponent dict block-key -> E, saturated, underflowed)."""
    x = np.asarray(x)
    if block is not None and axis is None:
        axis = x.ndim - 1
    if axis is not None:
        axis %= x.ndim
    amax = {}
    for idx in np.ndindex(x.shape):
        k = block_of(idx, axis, block)
        v = abs(Fraction(float(x[idx])))
        amax[k] = max(amax.get(k, Fraction(0)), v)
    lim = 2 ** (bits - 1) - 1
    es = {}
    for k, a in amax.items():
        if a == 0:
            es[k] = 0
        elif scale_rule == "floor":
            es[k] = floor_log2(a) - (bits - 2)
        else:
            e = floor_log2(a) - bits - 2        # too small on purpose, then walk up
            while a / pow2(e) > lim:
                e += 1
            es[k] = e
    key = seed_key(seed) if is_stochastic(rounding) else 0
    out = np.zeros(x.shape, dtype=np.int64)
    sat = und = 0
    for flat, idx in enumerate(np.ndindex(x.shape)):
        v = Fraction(float(x[idx]))
        if v == 0:
            continue
        u = random_bits(key, flat) if is_stochastic(rounding) else 0
        i = round_int(v / pow2(es[block_of(idx, axis, block)]), rounding, u, sr_bits)
        i, s = clip(i, bits)
        sat += s
        und += i == 0
        out[idx] = i
    return out, es, sat, und


def exponent_array(es, shape, axis, block):
    """The public exponent array of a layout, from a block-key dict."""
    if axis is None:
        return np.array(es.get((), 0))
    axis %= len(shape)
    n = shape[axis]
    nb = max(-(-n // block), 1) if block is not None else 1
    eshape = tuple(shape[:axis]) + (nb,) + tuple(shape[axis + 1:])
    out = np.zeros(eshape, dtype=np.int64)
    for idx in np.ndindex(eshape):
        out[idx] = es.get(idx, 0)
    return out


# ----- the seed's arithmetic ---------------------------------------------------------------
def shift_round(i, r, rounding, u=0, rbits=24):
    return round_int(Fraction(i, 2 ** r), rounding, u, rbits)


def down_convert(mant, exp_elem, blocks, bits, rounding, seed=None, sr_bits=24):
    """mant: int array; exp_elem: per-element exponents; blocks: per-element block keys (list
    in C order).  Returns (mantissa array, per-element exponents, saturated)."""
    m = [int(v) for v in np.asarray(mant).reshape(-1)]
    e = [int(v) for v in np.asarray(exp_elem).reshape(-1)]
    top = {}
    for f, k in enumerate(blocks):
        top[k] = max(top.get(k, 0), abs(m[f]))
    shift = {}
    for k, a in top.items():
        r = 0
        while (a >> r) >= 2 ** (bits - 1):   # smallest R with max|I| >> R < 2^(P-1)
            r += 1
        shift[k] = r
    key = seed_key(seed) if is_stochastic(rounding) else 0
    out, oe, sat = [], [], 0
    for f, k in enumerate(blocks):
        u = random_bits(key, f) if is_stochastic(rounding) else 0
        i, s = clip(shift_round(m[f], shift[k], rounding, u, sr_bits), bits)
        sat += s
        out.append(i)
        oe.append(e[f] + shift[k])
    shp = np.asarray(mant).shape
    return np.array(out, dtype=np.int64).reshape(shp), np.array(oe).reshape(shp), sat


def add(ia, ea, ib, eb, a_zero_block, b_zero_block):
    """Seed add of one element pair; *_zero_block: that operand's block is all zero."""
    if a_zero_block and b_zero_block:
        e = 0
    elif a_zero_block:
        e = eb
    elif b_zero_block:
        e = ea
    else:
        e = max(ea, eb)
    sa = 0 if a_zero_block else e - ea
    sb = 0 if b_zero_block else e - eb
    return (ia >> sa) + (ib >> sb), e


# ----- fp32 --------------------------------------------------------------------------------
def round_f32(q: Fraction, negative_zero=False) -> float:
    """q rounded once to fp32 (RNE, subnormals, overflow to Inf) as a Python float."""
    if q == 0:
        return -0.0 if negative_zero else 0.0
    neg = q < 0
    a = -q if neg else q
    e = max(floor_log2(a), -126)
    quantum = pow2(e - 23)
    n = a / quantum
    fl = math.floor(n)
    r = n - fl
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    v = fl * quantum
    if v >= pow2(128):
        res = math.inf
    else:
        res = float(v)
    return -res if neg else res


def f32_add(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and (a > 0) != (b > 0):
            return math.nan
        return a if math.isinf(a) else b
    s = Fraction(a) + Fraction(b)
    both_neg_zero = (a == 0 and b == 0 and math.copysign(1, a) < 0
                     and math.copysign(1, b) < 0)
    return round_f32(s, negative_zero=both_neg_zero)


# ----- the VNNI GEMM -------------------------------------------------------------------------
def gemm(am, ea_fn, bm, eb_fn, *, block_a=None, block_b=None, chain_len=None, overflow="wrap",
         shift_a=0, shift_b=0):
    """Reference D and stats.  am (m, K), bm (K, n) int arrays; ea_fn(i, k), eb_fn(k, j) give
    each element's exponent.  Chains are rebuilt here step by step from the definition."""
    m, K = am.shape
    n = bm.shape[1]
    # chain id of every k: a new chain starts at k = 0, at a block boundary of A or B, or after
    # chain_len products of the current chain.
    chain_of = []
    c = -1
    count = 0
    for k in range(K):
        boundary = (k == 0 or (block_a is not None and k % block_a == 0)
                    or (block_b is not None and k % block_b == 0))
        if boundary or (chain_len is not None and count == chain_len):
            c += 1
            count = 0
        chain_of.append(c)
        count += 1
    nch = c + 1
    D = np.zeros((m, n), dtype=np.float32)
    st = dict(events=0, bad=0, inexact=0, maxabs=0)
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for ch in range(nch):
                ks = [k for k in range(K) if chain_of[k] == ch]
                lane = 0
                evs = 0
                for t in range(0, len(ks), 2):
                    v = lane
                    for k in ks[t:t + 2]:
                        v += (int(am[i, k]) >> shift_a) * (int(bm[k, j]) >> shift_b)
                    if v < I32_MIN or v > I32_MAX:
                        evs += 1
                        if overflow == "wrap":
                            v = (v - I32_MIN) % 2 ** 32 + I32_MIN
                        else:
                            v = I32_MIN if v < 0 else I32_MAX
                    lane = v
                e = {ea_fn(i, k) + eb_fn(k, j) for k in ks}
                assert len(e) == 1, "a chain mixes exponent pairs"
                e = e.pop() + shift_a + shift_b
                exact = Fraction(lane) * pow2(e)
                z = round_f32(exact)
                if math.isinf(z) or Fraction(z) != exact:
                    st["inexact"] += 1
                acc = f32_add(acc, z)
                st["events"] += evs
                st["bad"] += evs > 0
                st["maxabs"] = max(st["maxabs"], abs(lane))
            D[i, j] = acc
    st["chains"] = nch
    return D, st
