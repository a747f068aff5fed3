"""Properties of sf.round that must hold for every finite input, every format and every
deterministic mode, searched by Hypothesis (random formats, random float64 values with a bias
toward the edges: ties, subnormals, the overflow threshold), each case also checked against the
exact rational oracle.

Properties: agreement with tests/oracle.py; idempotence (a value of the grid rounds to itself);
monotonicity (x <= y implies round(x) <= round(y)); the directed modes bracket x (rdn <= x <= rup,
|rtz| <= |x|); sign symmetry (round(-x) = -round(x) in the symmetric modes, and the directed ones
swap); the result is a grid value (to_bits accepts it) and at most one ulp away in the normal
range.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import oracle
import softfloat as sf

SYMMETRIC = ("rne", "rna", "rtz", "rto")
DETERMINISTIC = ("rne", "rna", "rtz", "rup", "rdn", "rto", "rhu")
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def formats(draw):
    """A random float32-or-float64-carried format: presets and custom widths/kinds."""
    if draw(st.booleans()):
        return sf.get_format(draw(st.sampled_from(["fp16", "bf16", "tf32", "e4m3fn", "e5m2",
                                                   "fp32"])))
    e = draw(st.integers(2, 8))
    m = draw(st.integers(1, 12))
    style = draw(st.sampled_from(["ieee", "fn", "none"]))
    assume(not (style == "fn" and m < 1))
    return sf.Format(f"h{e}m{m}", e, m, subnormals=draw(st.booleans()), inf_nan=style,
                     saturate=draw(st.booleans()))


@st.composite
def values(draw, fmt):
    """Finite float64 values around the format's interesting places."""
    kind = draw(st.sampled_from(["any", "grid", "tie", "tiny", "huge"]))
    if kind == "any":
        return draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
    # A value of the format's grid, possibly nudged to a tie or next to it.
    exp = draw(st.integers(fmt.emin - fmt.man_bits - 2, fmt.emax + 1))
    if kind == "tiny":
        exp = draw(st.integers(fmt.emin - fmt.man_bits - 3, fmt.emin))
    if kind == "huge":
        exp = draw(st.integers(fmt.emax - 1, fmt.emax + 2))
    q = max(exp, fmt.emin) - fmt.man_bits if fmt.subnormals else exp - fmt.man_bits
    n = draw(st.integers(0, 2 ** (fmt.man_bits + 1)))
    x = math.ldexp(n, q)
    if kind == "tie":
        x += math.ldexp(1, q - 1) * draw(st.sampled_from([1.0, 1.0 + 2 ** -30, 1.0 - 2 ** -30]))
    return -x if draw(st.booleans()) else x


def _r(x, fmt, mode):
    return float(sf.round(np.float64(x), fmt, mode))


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                  math.copysign(1, b))


@st.composite
def cases(draw):
    fmt = draw(formats())
    return fmt, draw(values(fmt)), draw(st.sampled_from(DETERMINISTIC))


@SETTINGS
@given(cases())
def test_agrees_with_the_rational_oracle(case):
    fmt, x, mode = case
    want, _ = oracle.round_float(x, fmt, mode)
    assert _same(_r(x, fmt, mode), want), (fmt, x, mode)


@SETTINGS
@given(cases())
def test_idempotent_and_on_the_grid(case):
    fmt, x, mode = case
    r = _r(x, fmt, mode)
    if math.isfinite(r):
        sf.to_bits(r, fmt)                      # raises when r is not a value of fmt
        assert _same(_r(r, fmt, mode), r)


@SETTINGS
@given(st.data())
def test_monotone(data):
    fmt = data.draw(formats())
    x, y = sorted((data.draw(values(fmt)), data.draw(values(fmt))))
    mode = data.draw(st.sampled_from(DETERMINISTIC))
    rx, ry = _r(x, fmt, mode), _r(y, fmt, mode)
    assume(not (math.isnan(rx) or math.isnan(ry)))        # fn overflow gives NaN
    assert rx <= ry, (fmt, x, y, mode, rx, ry)


@SETTINGS
@given(st.data())
def test_directed_modes_bracket_and_symmetry(data):
    fmt = data.draw(formats())
    x = data.draw(values(fmt))
    dn, up, z = _r(x, fmt, "rdn"), _r(x, fmt, "rup"), _r(x, fmt, "rtz")
    # Flush-to-zero formats replace every tiny result by a zero in every mode, and saturating
    # formats (and "none" ones) every overflow by +-max (documented in softfloat/_roundpack.py):
    # there the directed modes need not bracket x.
    saturates = fmt.saturate or fmt.inf_nan == "none"
    if (fmt.subnormals or abs(x) >= fmt.tiny) and not (saturates and abs(x) > fmt.max):
        assert math.isnan(dn) or dn <= x, (fmt, x, dn)
        assert math.isnan(up) or x <= up, (fmt, x, up)
    assert math.isnan(z) or abs(z) <= abs(x), (fmt, x, z)
    for mode in SYMMETRIC:
        assert _same(_r(-x, fmt, mode), -_r(x, fmt, mode)), (fmt, x, mode)
    assert _same(_r(-x, fmt, "rdn"), -_r(x, fmt, "rup"))


@SETTINGS
@given(st.data())
def test_nearest_within_half_an_ulp_in_the_normal_range(data):
    fmt = data.draw(formats())
    mode = data.draw(st.sampled_from(["rne", "rna", "rhu"]))
    e = data.draw(st.integers(fmt.emin, fmt.emax))
    x = math.ldexp(data.draw(st.floats(1.0, 2.0, exclude_max=True)), e)
    assume(x < fmt.max)
    x = -x if data.draw(st.booleans()) else x
    # |x| in [2^e, 2^(e+1)): the grid spacing there is 2^(e - m), so nearest is within half.
    assert abs(_r(x, fmt, mode) - x) <= math.ldexp(1, e - fmt.man_bits - 1), (fmt, x, mode)


def test_the_properties_can_fail():
    """A wrong rounding (truncation reported as nearest) breaks the oracle property."""
    fmt = sf.get_format("fp16")
    x = 1 + 3 * 2 ** -12                                  # rounds up to 1 + 2^-10 in rne
    want, _ = oracle.round_float(x, fmt, "rne")
    assert not _same(_r(x, fmt, "rtz"), want)
    with pytest.raises(ValueError):
        sf.to_bits(x, fmt)                                # an off-grid value is refused
