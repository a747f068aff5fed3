"""Exact-rational reference for the arithmetic, on top of tests/oracle.round_fraction.

Provides
    make_cases(op, fmt, rng)      operand rows: TestFloat-style specials, ties, random, off-grid
    grid_specials(fmt)            the special values of a format
    rational_op(op, args, fmt, mode, *, u=None, rbits=None) -> (float, set of flag names)
        op in {"add", "sub", "mul", "div", "sqrt", "fma"}; every mode incl. "sr".
    round_sqrt_fraction(q, fmt, mode, *, u=None, rbits=None) -> (float, set of flag names)
        sqrt(q) for a Fraction q > 0, rounded once, decided with integer square roots.

Results that are rational (sums, products, fma, quotients) are formed exactly as Fractions and
handed to round_fraction.  sqrt(q) is usually irrational: write q = n / d and pick s so that
S = isqrt(floor(n * 4^s / d)) = floor(sqrt(q) * 2^s) has K bits; sqrt(q) is exact iff
d divides n 4^s and S^2 == n 4^s / d, otherwise the round-to-odd value (S | 1) / 2^s lies,
like sqrt(q), strictly between S / 2^s and (S + 1) / 2^s.  With K >= p + 2 (+ r for stochastic
rounding, whose decision reads p + r bits) rounding that K-bit value gives the same result and
flags as rounding sqrt(q) (Boldo & Melquiond).  K = p + r + 8 here.

The IEEE special cases (NaN, infinities, zeros and their signs, x / 0) are written out below
from IEEE 754 sections 6 and 7 and softfloat's documented choices for formats without Inf/NaN
(x / 0: NaN in fn formats, +-max in saturating and "none" formats; divbyzero only).  Imports the
standard library, numpy (test vectors only) and tests/oracle.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from oracle import params, round_fraction

__all__ = ["ARITY", "OPS", "grid_specials", "make_cases", "rational_op", "round_sqrt_fraction"]

OPS = ("add", "sub", "mul", "div", "sqrt", "fma")


def _sign(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def round_sqrt_fraction(q: Fraction, fmt, mode, *, u=None, rbits=None):
    q = Fraction(q)
    if q <= 0:
        raise ValueError("round_sqrt_fraction needs q > 0")
    p = params(fmt).m + 1
    K = p + (rbits or 0) + 8
    n, d = q.numerator, q.denominator
    # sqrt(q) ~ 2^((log2 n - log2 d) / 2); choose s with S = floor(sqrt(q) 2^s) of >= K bits.
    s = K - (n.bit_length() - d.bit_length()) // 2 + 2
    N = n * 4 ** s if s >= 0 else n
    D = d if s >= 0 else d * 4 ** (-s)
    S = math.isqrt(N // D)
    exact = N % D == 0 and S * S == N // D
    proxy = Fraction(S if exact else S | 1) / Fraction(2) ** s
    assert S.bit_length() >= K
    return round_fraction(proxy, fmt, mode, u=u, rbits=rbits)


def _inf_result(neg, fmt, mode, divbyzero, u, rbits):
    """An exact infinite result: from x / 0 (divbyzero) or from infinite operands."""
    prm = params(fmt)
    if divbyzero:
        if prm.style == "ieee" and not prm.saturate:
            return (-math.inf if neg else math.inf), {"divbyzero"}
        if prm.style == "fn" and not prm.saturate:
            return math.nan, {"divbyzero"}
        return float(-prm.max if neg else prm.max), {"divbyzero"}
    # Like converting an Inf: exact for ieee, overflow rules otherwise (round_fraction's).
    return round_fraction(-math.inf if neg else math.inf, fmt, mode, u=u, rbits=rbits)


def _nan(fmt, invalid):
    flags = {"invalid"} if invalid or params(fmt).style == "none" else set()
    return math.nan, flags


def _zero_sum(mode, neg_a, neg_b):
    """Exact zero sum of two terms whose signs are neg_a, neg_b (IEEE 754 6.3)."""
    if neg_a == neg_b:
        return (-0.0 if neg_a else 0.0), set()
    return (-0.0 if mode in ("rdn", 4) else 0.0), set()


def _add(a, b, fmt, mode, u, rbits):
    if math.isnan(a) or math.isnan(b):
        return _nan(fmt, False)
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and _sign(a) != _sign(b):
            return _nan(fmt, True)
        return _inf_result(_sign(a) if math.isinf(a) else _sign(b), fmt, mode, False, u, rbits)
    q = Fraction(a) + Fraction(b)
    if q == 0:
        if a == 0 and b == 0:
            return _zero_sum(mode, _sign(a), _sign(b))
        return _zero_sum(mode, False, True)
    return round_fraction(q, fmt, mode, u=u, rbits=rbits)


def _mul(a, b, fmt, mode, u, rbits):
    if math.isnan(a) or math.isnan(b):
        return _nan(fmt, False)
    neg = _sign(a) != _sign(b)
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return _nan(fmt, True)
        return _inf_result(neg, fmt, mode, False, u, rbits)
    if a == 0 or b == 0:
        return (-0.0 if neg else 0.0), set()
    return round_fraction(Fraction(a) * Fraction(b), fmt, mode, u=u, rbits=rbits)


def _div(a, b, fmt, mode, u, rbits):
    if math.isnan(a) or math.isnan(b):
        return _nan(fmt, False)
    neg = _sign(a) != _sign(b)
    if math.isinf(a):
        if math.isinf(b):
            return _nan(fmt, True)
        return _inf_result(neg, fmt, mode, False, u, rbits)
    if math.isinf(b):
        return (-0.0 if neg else 0.0), set()
    if b == 0:
        if a == 0:
            return _nan(fmt, True)
        return _inf_result(neg, fmt, mode, True, u, rbits)
    if a == 0:
        return (-0.0 if neg else 0.0), set()
    return round_fraction(Fraction(a) / Fraction(b), fmt, mode, u=u, rbits=rbits)


def _sqrt(a, fmt, mode, u, rbits):
    if math.isnan(a):
        return _nan(fmt, False)
    if a == 0:
        return a, set()
    if a < 0:
        return _nan(fmt, True)
    if math.isinf(a):
        return _inf_result(False, fmt, mode, False, u, rbits)
    return round_sqrt_fraction(Fraction(a), fmt, mode, u=u, rbits=rbits)


def _fma(a, b, c, fmt, mode, u, rbits):
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return _nan(fmt, False)
    pneg = _sign(a) != _sign(b)
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return _nan(fmt, True)
        if math.isinf(c) and _sign(c) != pneg:
            return _nan(fmt, True)
        return _inf_result(pneg, fmt, mode, False, u, rbits)
    if math.isinf(c):
        return _inf_result(_sign(c), fmt, mode, False, u, rbits)
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        if (a == 0 or b == 0) and c == 0:
            return _zero_sum(mode, pneg, _sign(c))
        return _zero_sum(mode, False, True)
    return round_fraction(q, fmt, mode, u=u, rbits=rbits)


def rational_op(op, args, fmt, mode, *, u=None, rbits=None):
    """Round op(*args) (args: Python floats) once onto fmt; returns (float, set of flags)."""
    args = [float(x) for x in args]
    if op == "add":
        return _add(args[0], args[1], fmt, mode, u, rbits)
    if op == "sub":
        return _add(args[0], -args[1], fmt, mode, u, rbits)
    if op == "mul":
        return _mul(args[0], args[1], fmt, mode, u, rbits)
    if op == "div":
        return _div(args[0], args[1], fmt, mode, u, rbits)
    if op == "sqrt":
        return _sqrt(args[0], fmt, mode, u, rbits)
    if op == "fma":
        return _fma(args[0], args[1], args[2], fmt, mode, u, rbits)
    raise ValueError(f"oracle: unknown op {op!r}; accepted {OPS}")


# ----- test vectors (TestFloat's method) ---------------------------------------------------------

def grid_specials(fmt):
    """Values of fmt from TestFloat's recipe, as a sorted-free float64 list: special exponents
    (emin, emin + 1, -1, 0, 1, emax - 1, emax) crossed with walking-one and walking-zero
    significands, 1.0 and all-ones; walking subnormals and the largest subnormal; both signs;
    +-0; +-Inf and NaN where the format has them."""
    prm = params(fmt)
    m, emin, emax = prm.m, prm.emin, prm.emax
    sigs = {2 ** m, 2 ** (m + 1) - 1}
    for k in range(m):
        sigs.add(2 ** m + 2 ** k)
        sigs.add(2 ** (m + 1) - 1 - 2 ** k)
    exps = sorted({e for e in (emin, emin + 1, -1, 0, 1, emax - 1, emax) if emin <= e <= emax})
    vals = set()
    for e in exps:
        for s in sigs:
            v = Fraction(s) * Fraction(2) ** (e - m)
            if v <= prm.max:
                vals.add(float(v))
    if prm.subnormals:
        q = Fraction(2) ** (emin - m)
        subs = {2 ** m - 1}
        for k in range(m):
            subs.add(2 ** k)
            subs.add(2 ** m - 1 - 2 ** k)
        vals.update(float(s * q) for s in subs if s > 0)
    out = sorted(vals)
    out = out + [-v for v in out] + [0.0, -0.0]
    if prm.style == "ieee":
        out += [math.inf, -math.inf, math.nan]
    elif prm.style == "fn":
        out.append(math.nan)
    return out


ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}


def _grid_random(prm, rng, n):
    """n random finite values of the format (normal and subnormal, both signs), float64."""
    m = prm.m
    sig = rng.integers(2 ** m, 2 ** (m + 1), n).astype(np.float64)
    e = rng.integers(prm.emin - (m if prm.subnormals else 0), prm.emax + 1, n)
    # Below emin the value is a subnormal: quantum 2^(emin - m), significand < 2^m.
    sub = e < prm.emin
    sig = np.where(sub, np.floor(sig / 2.0 ** (prm.emin - e)), sig)
    v = np.ldexp(sig, np.where(sub, prm.emin, e) - m)
    v = np.minimum(v, float(prm.max))
    return np.where(rng.random(n) < 0.5, -v, v)


def _midpoints(prm, rng, n, lo_exp=None):
    """n random midpoints between consecutive p-bit values, exponents from the subnormal range
    to emax (float64, exact)."""
    m = prm.m
    q = rng.integers(2 ** m, 2 ** (m + 1), n).astype(np.float64)
    lo = prm.emin - m if lo_exp is None else lo_exp
    e = rng.integers(lo, prm.emax + 1, n)
    return np.ldexp(2.0 * q + 1.0, e - m - 1)


def make_cases(op, fmt, rng, n_special=500, n_tie=200, n_random=150, n_off=150):
    """Operand rows (n, arity) float64 for op in fmt: special pairs, constructed ties and
    near-ties, random grid values, and off-grid float64 operands."""
    prm = params(fmt)
    k = ARITY[op]
    S = np.array(grid_specials(fmt))
    rows = [S[rng.integers(0, len(S), (n_special, k))]]
    rows.append(np.stack([_grid_random(prm, rng, n_random) for _ in range(k)], axis=1))
    # Off grid: full 53-bit float64 operands spread over the format's range and beyond.
    span = np.arange(prm.emin - prm.m - 3, prm.emax + 3)
    off = [rng.standard_normal(n_off) * np.ldexp(1.0, rng.choice(span, n_off)) for _ in range(k)]
    rows.append(np.stack(off, axis=1))
    rows.append(_ties(op, prm, rng, n_tie))
    return np.concatenate(rows, axis=0)


def _hair(x, rng, bits=60):
    """x moved by a random tiny relative amount 2^-bits (either sign), float64."""
    return x * (1.0 + np.where(rng.random(x.size) < 0.5, -1.0, 1.0) * 2.0 ** -bits)


def _traps(op, T, rng, n):
    """n operand pairs (a, b), float64, whose float64 result fl(a op b) is exactly one of the
    midpoints T while the exact result is not (so a kernel that rounded fl(a op b) again would
    double-round).  Drawn from random full-precision candidates and filtered exactly."""
    out_a, out_b = [], []
    while len(out_a) < n:
        k = 4 * n
        M = T[rng.integers(0, len(T), k)]
        x = rng.uniform(1.0, 2.0, k) * np.ldexp(1.0, rng.integers(-2, 3, k))
        if op == "mul":
            a, b = x, M / x                                # b = fl(M / x)
            hit = a * b == M
        else:
            a, b = M * x, x                                # a = fl(M * x)
            hit = a / b == M
        for ai, bi, Mi in zip(a[hit], b[hit], M[hit]):
            exact = Fraction(float(ai)) * Fraction(float(bi)) if op == "mul" else \
                Fraction(float(ai)) / Fraction(float(bi))
            if exact != Fraction(float(Mi)) and len(out_a) < n:
                out_a.append(ai)
                out_b.append(bi)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return sign * np.array(out_a), np.array(out_b)


def _ties(op, prm, rng, n):
    m = prm.m
    T = _midpoints(prm, rng, n)
    if op in ("add", "sub"):
        # a + b == T: a a grid value next to T, b = T - a (half an ulp of a, exact in float64),
        # then near-ties: b moved by a hair, or a replaced by the float64 T with a tiny b (the
        # float64 sum is then exactly the tie and only TwoSum's error decides).
        e = np.floor(np.log2(np.abs(T)))
        a = T - np.ldexp(1.0, (np.maximum(e, prm.emin) - m - 1).astype(int))
        b = T - a
        third = n // 3
        b[third:2 * third] = _hair(b[third:2 * third], rng, 30)
        a[2 * third:] = T[2 * third:]
        b[2 * third:] = np.ldexp(np.where(rng.random(n - 2 * third) < 0.5, -1.0, 1.0),
                                 (e[2 * third:] - 70).astype(int))
        if op == "sub":
            b = -b
        return np.stack([a, b], axis=1)
    if op == "mul":
        # (1 + 2^-i)(1 + 2^-j) with i + j = m + 1 is a tie; (1 + 2^-m) * 1.5 too; +- a hair.
        i = rng.integers(1, m + 1, n)
        a = 1.0 + np.ldexp(1.0, -i)
        b = 1.0 + np.ldexp(1.0, -(m + 1 - i))
        half = n // 2
        a[:half // 2] = 1.0 + 2.0 ** -m
        b[:half // 2] = 1.5
        b[half:] = _hair(b[half:], rng, 40)
        ea = rng.integers(prm.emin - m - 2, prm.emax + 1, n)
        eb = rng.integers(-3, 4, n)
        sa = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        a, b = sa * np.ldexp(a, ea - eb), np.ldexp(b, eb)
        # Double-rounding traps: fl(a * b) is exactly a midpoint, a * b is not.
        q = n // 4
        a[:q], b[:q] = _traps("mul", T, rng, q)
        return np.stack([a, b], axis=1)
    if op == "div":
        # a = T * b exactly (p + 1 + p <= 53 bits), so a / b == T; near-ties: a moved by a hair;
        # and double-rounding traps: a full-precision b and a = fl(T * b), kept where the
        # float64 quotient fl(a / b) is exactly the midpoint T although a / b is not.
        b = np.abs(_grid_random(prm, rng, n))
        b = np.ldexp(np.frexp(b)[0], rng.integers(-3, 4, n))
        a = T * b
        a[n // 3:2 * (n // 3)] = _hair(a[n // 3:2 * (n // 3)], rng, 52)
        a[2 * (n // 3):], b[2 * (n // 3):] = _traps("div", T, rng, n - 2 * (n // 3))
        return np.stack([a, b], axis=1)
    if op == "sqrt":
        # a = T^2 exactly (2p + 2 <= 53 bits); near: a moved by one float64 ulp.
        T = np.abs(_midpoints(prm, rng, n, lo_exp=max(prm.emin - m, -500)))
        a = T * T
        h = n // 2
        a[h:] = np.nextafter(a[h:], np.where(rng.random(n - h) < 0.5, 0.0, np.inf))
        return a[:, None]
    # fma: c = T - a b, exact in float64 when T and a b are close; rows where it is not are
    # replaced by an exact cancellation c = -a b.
    a = _grid_random(prm, rng, n)
    b = _grid_random(prm, rng, n)
    prod = a * b                                     # exact: 2p <= 48 bits
    e = np.floor(np.log2(np.abs(prod) + 1e-300))
    Tn = np.ldexp(np.abs(T) / np.ldexp(1.0, np.floor(np.log2(np.abs(T))).astype(int)),
                  e.astype(int)) * np.sign(prod)
    c = Tn - prod
    ok = np.array([math.isfinite(ci) and math.isfinite(pi) and math.isfinite(t)
                   and Fraction(float(ci)) == Fraction(float(t)) - Fraction(float(pi))
                   for ci, t, pi in zip(c, Tn, prod)])
    c = np.where(ok, c, -prod)
    h = n // 2
    c[h:] = _hair(c[h:], rng, 45)
    return np.stack([a, b, c], axis=1)
