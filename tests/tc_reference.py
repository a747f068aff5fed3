"""Independent slow reference of the Tensor Core block-FMA models and of one-rounding
accumulation, in exact integer / rational arithmetic (Python ints and Fractions).

Written from docs/tensorcore-models.md section 2 alone; it shares NO code with
softfloat (not even the format records): a format is given here by its fraction bits, emin and
emax, and values are Python floats (exact binary fractions).

    block_step(a, b, c, K, F, in_frac, in_emin, acc_frac, acc_emin, acc_emax, out_frac, mode)
    dot(a, b, c, K, F, ...)          chained block steps, K = None: one block; F = None: exact
    round_fraction(v, frac, emin, emax, mode)   one rounding of an exact rational
"""

from __future__ import annotations

import math
from fractions import Fraction

INF = float("inf")
NAN = float("nan")

# Format fields the reference needs: (fraction bits, emin, emax) from the IEEE definitions
# (bias = 2^(e-1) - 1, emin = 1 - bias, emax = bias, fn formats emax = bias + 1).
FORMATS = {
    "fp16": (10, -14, 15),
    "bf16": (7, -126, 127),
    "fp32": (23, -126, 127),
    "tf32": (10, -126, 127),
    "e4m3fn": (3, -6, 8),
    "e5m2": (2, -14, 15),
}


def floor_log2(v: Fraction) -> int:
    """floor(log2 v) for a positive rational v."""
    n, d = v.numerator, v.denominator
    e = n.bit_length() - d.bit_length()
    # 2^e <= v < 2^(e+1) after at most one correction step.
    if Fraction(2) ** e > v:
        e -= 1
    return e


def decode(x: float, frac: int, emin: int):
    """(sign, M, E) of spec step 2: E = max(floor(log2|x|), emin), M = |x| 2^(frac - E)."""
    v = Fraction(x)
    s = 1 if v < 0 else 0
    v = abs(v)
    E = max(floor_log2(v), emin)
    M = v * Fraction(2) ** (frac - E)
    assert M.denominator == 1, f"{x} is not on a grid with {frac} fraction bits"
    return s, int(M), E


def round_fraction(v: Fraction, frac: int, emin: int, emax: int, mode: str):
    """One rounding of the exact rational v to a binary format with ``frac`` fraction bits,
    gradual underflow at emin and overflow to +-Inf above emax (spec ROUND; for IEEE modes the
    overflow rule of IEEE 754 7.4 when ``ieee_overflow``).  mode: rne, rtz, rna, rup, rdn.
    Returns a Python float; 0 -> +0.0, a nonzero value that rounds to 0 keeps its sign."""
    if v == 0:
        return 0.0
    neg = v < 0
    m = abs(v)
    e = max(floor_log2(m), emin)
    quantum = Fraction(2) ** (e - frac)
    qf = m / quantum
    q = qf.numerator // qf.denominator
    r = qf - q
    if r != 0:
        if mode == "rne":
            if r > Fraction(1, 2) or (r == Fraction(1, 2) and q % 2 == 1):
                q += 1
        elif mode == "rna":
            if r >= Fraction(1, 2):
                q += 1
        elif mode == "rup":
            if not neg:
                q += 1
        elif mode == "rdn":
            if neg:
                q += 1
        elif mode != "rtz":
            raise ValueError(mode)
    if q == 2 ** (frac + 1):
        q //= 2
        e += 1
    if q == 0:
        return -0.0 if neg else 0.0
    if e > emax:
        return -INF if neg else INF
    val = math.ldexp(q, e - frac)
    return -val if neg else val


def _special(acc: float, a, b):
    """Step 1: the result when acc or a factor is Inf/NaN, else None."""
    nan = math.isnan(acc)
    pinf = acc == INF
    ninf = acc == -INF
    special = nan or pinf or ninf
    for x, y in zip(a, b):
        if math.isnan(x) or math.isnan(y):
            nan = special = True
        elif math.isinf(x) or math.isinf(y):
            special = True
            if x == 0 or y == 0:
                nan = True
            elif (x > 0) == (y > 0):
                pinf = True
            else:
                ninf = True
    if not special:
        return None
    if nan or (pinf and ninf):
        return NAN
    return INF if pinf else -INF


def block_step(a, b, c, *, F, in_frac, in_emin, acc_frac, acc_emin, acc_emax, out_frac,
               mode):
    """BLOCK_STEP of spec section 2 (F None: exact alignment, no truncation)."""
    sp = _special(c, a, b)
    if sp is not None:
        return sp
    terms = []      # (sign, exact magnitude as Fraction, alignment exponent)
    for x, y in zip(a, b):
        if x == 0 or y == 0:
            continue
        sa, Ma, Ea = decode(x, in_frac, in_emin)
        sb, Mb, Eb = decode(y, in_frac, in_emin)
        terms.append((sa ^ sb, Fraction(Ma * Mb) * Fraction(2) ** (Ea + Eb - 2 * in_frac),
                      Ea + Eb))
    if c != 0:
        sc, Mc, Ec = decode(c, acc_frac, acc_emin)
        terms.append((sc, Fraction(Mc) * Fraction(2) ** (Ec - acc_frac), Ec))
    if not terms:
        return 0.0
    if F is None:
        S = sum((-v if s else v) for s, v, _ in terms)
        return round_fraction(S, out_frac, acc_emin, acc_emax, mode) if S != 0 else 0.0
    E_max = max(e for _, _, e in terms)
    unit = Fraction(2) ** (E_max - F)
    S = 0
    for s, v, _ in terms:
        q = v / unit
        T = q.numerator // q.denominator          # floor of the magnitude: truncation
        S += -T if s else T
    if S == 0:
        return 0.0
    return round_fraction(Fraction(S) * unit, out_frac, acc_emin, acc_emax, mode)


def dot(a, b, c, *, K, F, in_fmt, acc_fmt, out_frac=None, mode):
    """DOT of spec section 2: blocks of K (None: one block) in ascending k, each rounded."""
    in_frac, in_emin, _ = FORMATS[in_fmt]
    acc_frac, acc_emin, acc_emax = FORMATS[acc_fmt]
    if in_fmt == "tf32":
        a = [_tf32_truncate(x) for x in a]
        b = [_tf32_truncate(x) for x in b]
    out_frac = acc_frac if out_frac is None else out_frac
    n = len(a)
    step = n if K is None else K
    d = float(c)
    for j in range(0, n, max(step, 1)):
        d = block_step(a[j:j + step], b[j:j + step], d, F=F, in_frac=in_frac, in_emin=in_emin,
                       acc_frac=acc_frac, acc_emin=acc_emin, acc_emax=acc_emax,
                       out_frac=out_frac, mode=mode)
    return d


def _tf32_truncate(x: float) -> float:
    """Drop the 13 low fraction bits of a float32 value (the hardware ignores them)."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    v = Fraction(x)
    m = abs(v)
    e = max(floor_log2(m), -126)
    q = Fraction(2) ** (e - 10)             # tf32 quantum: 10 fraction bits
    t = (m / q).numerator // (m / q).denominator * q
    return float(-t if v < 0 else t)
