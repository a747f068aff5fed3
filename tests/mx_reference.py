"""Independent slow reference for softfloat.mx: block scales, element rounding and codes, the
NVFP4 recipe's float32 arithmetic, and the block-scaled GEMM -- in Python ints and Fractions.

Provides
    quantize(x, fmt, *, block, axis, rule, mode, seed, sr_bits, tensor_scale, scale_min,
             exact_division, index_offset) -> Ref(element_bits, elements, scale_bits, scales,
                                                  saturated, flushed)
    gemm(A_values, B_values, c, model, blocks) -> exact results, see gemm()
    fl32(q) -> Fraction or +-inf: q rounded to float32 (RNE, subnormals, overflow to Inf)

Nothing here is shared with softfloat's kernels: the element formats are re-derived below from
their field widths (OCP MX v1.0 section 5.3), the scale rules are written from their sources
(softfloat/mx/__init__.py cites them), and every quantity is an exact Fraction; rounding a
magnitude to a multiple of a quantum is the exact oracle's (tests/oracle.py, itself independent
of the kernels).  The only softfloat code used is the counter-based generator
(softfloat.rng.random_bits / seed_key), for the random bits of stochastic rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

import oracle
from softfloat.rng import random_bits, seed_key

# ----- element formats from their widths -------------------------------------------------------
# (exp_bits, man_bits, style): "ieee" reserves the top exponent (e5m2), "fn" only the all-ones
# pattern (e4m3fn), "none" nothing (the fp6/fp4 formats).  MXINT8 is handled apart.
ELEMENTS = {
    "mxfp8_e4m3": (4, 3, "fn"), "mxfp8_e5m2": (5, 2, "ieee"), "mxfp6_e2m3": (2, 3, "none"),
    "mxfp6_e3m2": (3, 2, "none"), "mxfp4_e2m1": (2, 1, "none"), "nvfp4": (2, 1, "none"),
    "mxint8": None,
}


@dataclass(frozen=True)
class Elem:
    m: int            # fraction bits of the grid
    emin: int         # smallest normal exponent (quantum below it: 2^(emin - m))
    max: Fraction     # largest magnitude
    e: int            # exponent bits (0 for the integer)
    bias: int


def elem(fmt: str) -> Elem:
    spec = ELEMENTS[fmt]
    if spec is None:
        # OCP MXINT8: two's complement int8 times 2^-6, kept symmetric: |k| <= 127
        return Elem(6, 0, Fraction(127, 64), 0, 0)
    e, m, style = spec
    bias = 2 ** (e - 1) - 1
    top = 2 ** e - 1                              # the all-ones exponent field
    emax = (top - 1 if style == "ieee" else top) - bias
    mant = 2 ** m - (2 if style == "fn" else 1)   # largest fraction field at emax
    return Elem(m, 1 - bias, Fraction(2 ** m + mant, 2 ** m) * Fraction(2) ** emax, e, bias)


floor_log2 = oracle._floor_log2            # floor(log2 a) for a Fraction a > 0, exactly


def is_pow2(a: Fraction) -> bool:
    return a == Fraction(2) ** floor_log2(a)


# ----- rounding onto an element grid ----------------------------------------------------------

def round_grid(y: Fraction, el: Elem, mode: str, u=None, rbits=None, neg=None):
    """(value Fraction, negative, saturated): y rounded once onto the element grid (quantum
    2^(max(e, emin) - m)), saturating to +-max.  y may be +-inf (saturates).  ``neg`` gives
    the sign of a zero y (a signed zero keeps its sign, as softfloat's round-pack routine)."""
    if isinstance(y, float):                      # +-inf from the float32 arithmetic
        return el.max, y < 0, True
    neg = (y < 0) if neg is None else neg
    a = -y if neg else y
    if a == 0:
        return Fraction(0), neg, False
    quantum = Fraction(2) ** (max(floor_log2(a), el.emin) - el.m)
    v = oracle._round_to_quantum(a, quantum, mode, neg, u, rbits)
    if v > el.max:
        return el.max, neg, True
    return v, neg, False


def code_of(v: Fraction, neg: bool, el: Elem, fmt: str) -> int:
    """The element's bit pattern: sign-magnitude fields, or MXINT8's two's complement byte."""
    if el.e == 0:
        k = int(v * 64)
        return (-k) & 0xFF if neg else k
    if v == 0:
        field, mant = 0, 0
    elif v < Fraction(2) ** el.emin:
        field, mant = 0, int(v / Fraction(2) ** (el.emin - el.m))
    else:
        ex = floor_log2(v)
        field, mant = ex + el.bias, int(v / Fraction(2) ** (ex - el.m)) - 2 ** el.m
    return (int(neg) << (el.e + el.m)) | (field << el.m) | mant


# ----- float32 arithmetic, exactly ------------------------------------------------------------

def round_ieee(q, m: int, emin: int, emax: int):
    """q (Fraction or +-inf) rounded (RNE) to the IEEE format with m fraction bits and normal
    exponents emin..emax: subnormals, +-inf beyond the largest finite value."""
    if isinstance(q, float):
        return q
    if q == 0:
        return Fraction(0)
    neg = q < 0
    a = -q if neg else q
    quantum = Fraction(2) ** (max(floor_log2(a), emin) - m)
    v = oracle._round_to_quantum(a, quantum, "rne", neg, None, None)
    if v > (2 - Fraction(1, 2 ** m)) * Fraction(2) ** emax:
        return -math.inf if neg else math.inf
    return -v if neg else v


def fl32(q):
    """q (Fraction or +-inf) rounded to float32: RNE, subnormals, +-inf beyond the range."""
    return round_ieee(q, 23, -126, 127)


def _div(a, b):
    """a / b for Fractions or +inf (b finite, positive)."""
    return a if isinstance(a, float) else a / b


E4M3 = Elem(3, -6, Fraction(448), 4, 7)


def _e4m3_code(v: Fraction) -> int:
    return code_of(v, False, E4M3, "e4m3")


# ----- the scale rules ------------------------------------------------------------------------

def e8m0_exponent(amax: Fraction, rule: str, el: Elem) -> int:
    """E (before clamping) of a nonzero finite block maximum, from the rules' definitions."""
    emax_elem = floor_log2(el.max)
    if rule == "floor":                  # OCP MX v1.0 section 6.3
        return floor_log2(amax) - emax_elem
    if rule == "ceil":                   # ceil(log2 amax) - emax_elem
        return floor_log2(amax) + (0 if is_pow2(amax) else 1) - emax_elem
    if rule == "even":                   # amax rounded to p = m + 1 bits, ties away, then floor
        quantum = Fraction(2) ** (floor_log2(amax) - el.m)
        r = math.floor(amax / quantum + Fraction(1, 2)) * quantum
        return floor_log2(r) - emax_elem
    if rule == "rceil":                  # the smallest E with amax <= max * 2^E
        E = floor_log2(amax / el.max)
        return E if amax <= el.max * Fraction(2) ** E else E + 1
    raise ValueError(rule)


@dataclass
class Ref:
    element_bits: np.ndarray
    elements: np.ndarray
    scale_bits: np.ndarray
    scales: np.ndarray
    saturated: int
    flushed: int


def _blocks(shape, block, axis):
    """(list of blocks as lists of flat C indices, scale shape)."""
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    if len(block) == 1:
        a = axis % len(shape)
        moved = np.moveaxis(idx, a, -1)
        L = shape[a]
        nb = -(-L // block[0])
        out = []
        for lead in np.ndindex(*moved.shape[:-1]):
            row = moved[lead]
            out.extend(list(row[j * block[0]:(j + 1) * block[0]]) for j in range(nb))
        # blocks were made in (leading, block) order with the axis last: reorder to the scale
        # array's C order (axis in place)
        sshape = list(shape)
        sshape[a] = nb
        moved_shape = tuple(s for i, s in enumerate(sshape) if i != a) + (nb,)
        order = np.moveaxis(np.arange(len(out)).reshape(moved_shape), -1, a).reshape(-1)
        return [out[k] for k in order], tuple(sshape)
    R, C = shape[-2], shape[-1]
    nr, nc = -(-R // block[0]), -(-C // block[1])
    out = []
    for lead in np.ndindex(*shape[:-2]):
        mat = idx[lead]
        for i in range(nr):
            for j in range(nc):
                out.append(list(mat[i * block[0]:(i + 1) * block[0],
                                    j * block[1]:(j + 1) * block[1]].reshape(-1)))
    return out, tuple(shape[:-2]) + (nr, nc)


def quantize(x, fmt, *, block, axis=-1, rule=None, mode="rne", seed=None, sr_bits=24,
             tensor_scale=None, scale_min=Fraction(1, 64), exact_division=False,
             index_offset=0):
    """The reference quantization (see the module docstring); x a float32/float64 array."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    el = elem(fmt)
    nv = fmt == "nvfp4"
    rule = rule or ("nvfp4" if nv else "floor")
    key = seed_key(seed) if mode == "sr" else None
    blocks, sshape = _blocks(x.shape, block, axis)
    eb = np.zeros(flat.size, dtype=np.uint8)
    ev = np.zeros(flat.size, dtype=np.float64)
    sb = np.zeros(len(blocks), dtype=np.uint8)
    sv = np.zeros(len(blocks), dtype=np.float64)
    sat = flushed = 0
    t = None if tensor_scale is None else Fraction(float(np.float32(tensor_scale)))
    for bi, members in enumerate(blocks):
        vals = [float(flat[i]) for i in members]
        special = any(math.isnan(v) for v in vals)
        if not nv:
            special = special or any(math.isinf(v) for v in vals)
        if special:
            sb[bi] = 0x7F if nv else 0xFF
            sv[bi] = math.nan
            continue                               # elements: code 0, value +0
        inf = any(math.isinf(v) for v in vals)
        amax = math.inf if inf else max(abs(Fraction(v)) for v in vals)
        if nv:
            if exact_division:
                s = 448 if inf else amax / (6 * (t or 1))
            else:
                s = fl32(_div(amax, 6))
                if t is not None:
                    s = fl32(_div(s, t))
                s = 448 if isinstance(s, float) else s
            s = min(max(s, scale_min), Fraction(448))
            sval, _, _ = round_grid(Fraction(s), E4M3, "rne")
            sb[bi] = _e4m3_code(sval)
            sv[bi] = float(sval)
            rcp = fl32(1 / sval) if t is None else fl32(fl32(1 / t) / sval)
        else:
            if amax == 0:
                E = -127
            else:
                E = min(max(e8m0_exponent(amax, rule, el), -127), 127)
            sb[bi] = E + 127
            sv[bi] = 2.0 ** E
        for i, v in zip(members, vals):
            if nv and exact_division:
                y = (math.copysign(math.inf, v) if math.isinf(v)
                     else Fraction(v) / ((t or 1) * sval))
            elif nv:
                y = math.copysign(math.inf, v) if math.isinf(v) else fl32(Fraction(v) * rcp)
            else:
                y = Fraction(v) / Fraction(2) ** E
            u = int(random_bits(key, index_offset + int(i))) if mode == "sr" else None
            r, neg, s_ = round_grid(y, el, mode, u, sr_bits, neg=math.copysign(1.0, v) < 0)
            code = code_of(r, neg, el, fmt)
            eb[i] = code
            ev[i] = -float(r) if (neg and (el.e != 0 or r != 0)) else float(r)
            sat += s_
            flushed += (r == 0) and v != 0
    return Ref(eb.reshape(x.shape), ev.reshape(x.shape), sb.reshape(sshape), sv.reshape(sshape),
               sat, flushed)


# ----- GEMM -----------------------------------------------------------------------------------

def gemm(a_vals, b_vals, c, model, kblock, out=(23, -126, 127)):
    """The exact models of mx.gemm on dequantized operands given as nested lists of Fractions
    (A m x k, B k x n, the block scales and tensor scales already multiplied in: every product
    a_ik b_kj is the product of the two scaled elements).  c: m x n list of Fractions (or None);
    out: the output format's (m, emin, emax) (default fp32).
        ideal-fp32:  round_out(c + sum_k a_ik b_kj), one rounding
        blocked:     acc = c (or 0); for each k-block (kblock consecutive k, in order):
                     acc = fl32(acc + fl32(block sum)); then round_out(acc)
    Returns an m x n list of Fractions / +-inf."""
    m, k, n = len(a_vals), len(b_vals), len(b_vals[0])
    res = []
    for i in range(m):
        row = []
        for j in range(n):
            c0 = Fraction(0) if c is None else c[i][j]
            if model == "ideal-fp32":
                row.append(round_ieee(c0 + sum(a_vals[i][q] * b_vals[q][j] for q in range(k)),
                                      *out))
                continue
            acc = c0
            for k0 in range(0, k, kblock):
                bs = fl32(sum(a_vals[i][q] * b_vals[q][j] for q in range(k0, min(k, k0 + kblock))))
                if isinstance(acc, float) or isinstance(bs, float):
                    acc = float(acc) + float(bs)             # +-inf (or nan) propagate
                else:
                    acc = fl32(acc + bs)
            row.append(round_ieee(acc, *out))
        res.append(row)
    return res
