"""mx.quantize against the independent exact reference (tests/mx_reference.py), bit for bit, on
random, tie-heavy, wide-range and special-value blocks, for every format, scale rule and mode;
the vectorised float32 kernel against its round_value twin; the documented special cases;
stochastic rounding's reproducibility."""

from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np
import pytest

import mx_reference as R
from softfloat import mx
from softfloat.mx._quantize import _quantize

MX = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8")
RULES = ("floor", "ceil", "even", "rceil")
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rto", "sr")
FMT_RULES = [(f, r) for f in MX for r in RULES] + [("nvfp4", "nvfp4")]


def _seed(mode):
    return 11 if mode == "sr" else None


def check_ref(x, fmt, *, block=None, axis=-1, rule=None, mode="rne", sr_bits=None, **nv):
    """mx.quantize(x) equals the reference: codes, values, scales, counts."""
    kw = {} if axis is None else {"axis": axis}
    q = mx.quantize(x, fmt, block=block, scale_rule=rule, mode=mode, seed=_seed(mode),
                    sr_bits=sr_bits, **kw, **nv)
    blk = q.block
    rnv = {k: (Fraction(v) if k == "scale_min" else v) for k, v in nv.items()}
    ref = R.quantize(x, fmt, block=blk, axis=-1 if axis is None else axis, rule=q.scale_rule,
                     mode=mode, seed=_seed(mode), sr_bits=sr_bits or 24, **rnv)
    where = f"{fmt} {q.scale_rule} {mode}"
    assert np.array_equal(q.scale_bits, ref.scale_bits), where
    np.testing.assert_array_equal(q.element_bits, ref.element_bits, err_msg=where)
    assert np.array_equal(q.elements.astype(np.float64).view(np.uint64),
                          ref.elements.view(np.uint64)), where
    assert np.array_equal(q.scales.astype(np.float64), ref.scales, equal_nan=True), where
    assert (q.saturated, q.flushed) == (ref.saturated, ref.flushed), where
    return q


# ----- data -----------------------------------------------------------------------------------

def random_data(rng, shape):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-10, 10, shape))
    return x.astype(np.float32)


def tie_data(rng, fmt, nblocks, blen):
    """Blocks whose elements sit exactly on (or one float32 ulp beside) midpoints of the element
    grid for the block's floor-rule scale: the first element max * 2^E sets E."""
    from softfloat.mx import get_block_format
    bf = get_block_format(fmt)
    grid = np.sort(np.unique(np.abs(_grid(bf))))
    mids = (grid[:-1] + grid[1:]) / 2
    rows = []
    for _ in range(nblocks):
        E = int(rng.integers(-30, 30))
        v = rng.choice(mids, blen) * rng.choice([-1.0, 1.0], blen)
        v = np.ldexp(v, E).astype(np.float32)
        nudge = rng.integers(-1, 2, blen).astype(np.int32)
        v = (v.view(np.int32) + nudge).view(np.float32)
        v[0] = np.float32(np.ldexp(bf.max, E))
        rows.append(v)
    return np.concatenate(rows)


def _grid(bf):
    if bf.is_int:
        return np.arange(-127, 128) / 64.0
    import softfloat as sf
    codes = np.arange(1 << bf.bits, dtype=np.uint8)
    v = sf.from_bits(codes, bf.element).astype(np.float64)
    return v[np.isfinite(v)]


def wide_data(rng, n):
    """Exponents from float32 subnormals to 2^40 within the same blocks."""
    x = rng.standard_normal(n) * np.exp2(rng.integers(-150, 40, n).astype(np.float64))
    return x.astype(np.float32)


def special_blocks(blen):
    """Blocks of special values, each its own block of ``blen``."""
    f32 = np.finfo(np.float32)
    tiny = np.float32(2.0 ** -149)
    rows = [
        np.zeros(blen),
        np.where(np.arange(blen) % 2, -0.0, 0.0),
        np.r_[np.nan, np.ones(blen - 1)],
        np.r_[1.0, np.inf, np.ones(blen - 2)],
        np.r_[-np.inf, np.full(blen - 1, 3.0)],
        np.r_[f32.max, -f32.max, np.full(blen - 2, 1e30)],
        np.r_[tiny, -tiny, np.full(blen - 2, 2.0 ** -140)],
        np.full(blen, 2.0 ** -127),
        np.r_[2.0 ** 127 * 1.9, np.full(blen - 1, 1.0)],
        np.r_[0.0, 2.0 ** -60, np.full(blen - 2, 0.0)],
    ]
    return np.concatenate(rows).astype(np.float32)


# ----- agreement with the reference -------------------------------------------------------------

@pytest.mark.parametrize("fmt,rule", FMT_RULES, ids=[f"{f}-{r}" for f, r in FMT_RULES])
def test_random_blocks_every_mode(fmt, rule):
    rng = np.random.default_rng(hash((fmt, rule)) % 2 ** 32)
    x = random_data(rng, (2, 45))                      # a partial last block in each row
    for mode in MODES:
        check_ref(x, fmt, rule=rule, mode=mode)


@pytest.mark.parametrize("fmt,rule", FMT_RULES, ids=[f"{f}-{r}" for f, r in FMT_RULES])
def test_tie_blocks_every_mode(fmt, rule):
    rng = np.random.default_rng(7)
    blen = 16 if fmt == "nvfp4" else 32
    x = tie_data(rng, fmt, 3, blen)
    for mode in MODES:
        check_ref(x, fmt, rule=rule, mode=mode)


@pytest.mark.parametrize("fmt,rule", FMT_RULES, ids=[f"{f}-{r}" for f, r in FMT_RULES])
def test_wide_range_and_special_blocks(fmt, rule):
    rng = np.random.default_rng(3)
    blen = 16 if fmt == "nvfp4" else 32
    x = np.concatenate([wide_data(rng, 2 * blen), special_blocks(blen)])
    for mode in ("rne", "rtz", "rup", "sr"):
        check_ref(x, fmt, rule=rule, mode=mode)


def test_layouts_against_the_reference():
    rng = np.random.default_rng(5)
    x = random_data(rng, (3, 20, 7))
    check_ref(x, "mxfp8_e4m3", block=8, axis=1)                 # 1-D along a middle axis
    check_ref(x, "mxfp6_e2m3", block=4, axis=0)
    check_ref(x, "nvfp4", block=(16, 16), axis=None)            # 2-D, partial tiles
    check_ref(x, "mxint8", block=(8, 4), axis=None, mode="sr")
    check_ref(random_data(rng, (37,)), "mxfp4_e2m1", block=5)   # block not a power of two


def test_nvfp4_options_against_the_reference():
    rng = np.random.default_rng(9)
    x = np.concatenate([random_data(rng, 48), wide_data(rng, 32), special_blocks(16)])
    for t in (None, 0.0123, 3.7, 2.0 ** -20):
        for exact in (False, True):
            for smin in (2.0 ** -6, 2.0 ** -9, 0.75):
                for mode in ("rne", "sr"):
                    check_ref(x, "nvfp4", mode=mode, tensor_scale=t, exact_division=exact,
                              scale_min=smin)


def test_float64_input_against_the_reference():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(96) * np.exp2(rng.integers(-300, 300, 96).astype(np.float64))
    x[:32] = rng.standard_normal(32) * 1e300                    # E clamped at 127: saturation
    for fmt, rule in (("mxfp8_e4m3", "floor"), ("mxint8", "rceil"), ("mxfp4_e2m1", "even")):
        q = check_ref(x, fmt, rule=rule)
        assert q.scale_bits[0] == 254 and q.saturated > 0
    check_ref(x, "nvfp4", exact_division=True, tensor_scale=1e30)


# ----- the vectorised kernel against its round_value twin -----------------------------------------

def adversarial(rng, blen, nblocks):
    """Blocks whose maximum sweeps E8M0's whole range (float32 subnormal maxima included), with
    elements 0..45 binades below it: random significands, exact binary midpoints, and patterns
    one ulp beside them."""
    out = []
    for k in range(nblocks):
        top = int(rng.integers(-149, 128))
        e = top - rng.integers(0, 46, blen)
        sig = rng.integers(0, 1 << 23, blen)
        sig[::3] &= ~((1 << 19) - 1)                             # short significands: ties
        sig[1::3] = (sig[1::3] | 1) if k % 2 else sig[1::3]
        v = np.ldexp(1.0 + sig / 2.0 ** 23, e) * rng.choice([-1.0, 1.0], blen)
        v = v.astype(np.float32)
        v[0] = np.float32(np.ldexp(1.0 + int(rng.integers(0, 8)) / 8.0, top))
        out.append(v)
    return np.concatenate(out)


@pytest.mark.parametrize("fmt,rule", FMT_RULES, ids=[f"{f}-{r}" for f, r in FMT_RULES])
def test_fast_kernel_equals_round_value(fmt, rule):
    from softfloat.mx import get_block_format
    bf = get_block_format(fmt)
    rng = np.random.default_rng(abs(hash(fmt)) % 2 ** 32)
    blen = bf.block
    x = np.concatenate([adversarial(rng, blen, 400), special_blocks(blen),
                        random_data(rng, 7 * blen + 3)])
    for mode in MODES:
        for rbits in ((24, 1, 9, 40, 62) if mode == "sr" else (None,)):
            for nv in ({"tensor_scale": 0.37, "scale_min": 2.0 ** -9},) if fmt == "nvfp4" \
                    else ({},):
                args = (bf, None, None, rule, mode, _seed(mode), rbits, nv.get("tensor_scale"),
                        nv.get("scale_min"), False, 5)
                a = _quantize(x, *args, general=False)
                b = _quantize(x, *args, general=True)
                where = f"{fmt} {rule} {mode} r={rbits}"
                assert np.array_equal(a.element_bits, b.element_bits), where
                assert np.array_equal(a.elements.view(np.uint32), b.elements.view(np.uint32))
                assert np.array_equal(a.scale_bits, b.scale_bits), where
                assert (a.saturated, a.flushed) == (b.saturated, b.flushed), where


# ----- special cases (documented choices) ---------------------------------------------------------

def test_all_zero_block_gets_the_smallest_scale():
    q = mx.quantize(np.zeros(64, np.float32), "mxfp8_e4m3")
    assert list(q.scale_bits) == [0, 0] and q.scales[0] == np.float32(2.0 ** -127)
    assert not q.element_bits.any() and q.flushed == 0


def test_nan_block_gets_the_nan_scale_and_zero_elements():
    x = np.ones(64, np.float32)
    x[40] = np.nan
    q = mx.quantize(x, "mxfp6_e3m2")
    assert list(q.scale_bits) == [127 - 4, 0xFF]
    assert not q.element_bits[32:].any()
    d = q.dequantize()
    assert np.isnan(d[32:]).all() and np.isfinite(d[:32]).all()
    n = mx.quantize(x[24:56], "nvfp4")                    # the NaN is in the second block
    assert n.scale_bits[1] == 0x7F and np.isnan(n.scales[1]) and not n.element_bits[16:].any()
    assert n.scales[0] == np.float32(0.171875)            # 1 / 6 rounded onto the e4m3 grid


def test_inf_block_mx_nan_scale_nvfp4_clamped():
    x = np.ones(32, np.float32)
    x[3] = -np.inf
    assert mx.quantize(x, "mxfp8_e5m2").scale_bits[0] == 0xFF
    n = mx.quantize(x[:16], "nvfp4")
    assert n.scales[0] == 448.0 and n.elements[3] == -6.0 and n.saturated == 1


def test_scale_exponent_clamped_to_e8m0_range():
    big = np.full(32, 2.0 ** 127 * 1.995, np.float32)      # rounds to 128/64 > 127/64
    q = mx.quantize(big, "mxint8", scale_rule="ceil")      # ceil(log2) - 0 = 128 -> 127
    assert q.scale_bits[0] == 254 and q.saturated == 32
    tiny = np.full(32, 2.0 ** -130, np.float32)
    q = mx.quantize(tiny, "mxfp8_e4m3")                    # -130 - 8 -> -127: x / 2^-127
    assert q.scale_bits[0] == 0 and q.elements[0] == 2.0 ** -3
    q = mx.quantize(np.full(32, 2.0 ** -140, np.float32), "mxfp8_e4m3")
    assert q.elements[0] == 0.0 and q.flushed == 32        # 2^-13 is below e4m3's 2^-9


def test_negative_zero_keeps_its_sign_except_mxint8():
    x = np.r_[np.float32(-0.0), np.ones(31, np.float32)]
    q = mx.quantize(x, "mxfp4_e2m1")
    assert q.element_bits[0] == 0x8 and np.signbit(q.elements[0])
    q = mx.quantize(x, "mxint8")
    assert q.element_bits[0] == 0 and not np.signbit(q.elements[0])


def test_floor_saturates_and_ceil_does_not():
    x = np.full(32, 500.0, np.float32)                     # e4m3: floor -> 500 / 1 > 448
    assert mx.quantize(x, "mxfp8_e4m3").saturated == 32
    assert mx.quantize(x, "mxfp8_e4m3", scale_rule="ceil").saturated == 0
    assert mx.quantize(x, "mxfp8_e4m3", scale_rule="rceil").saturated == 0


# ----- stochastic rounding --------------------------------------------------------------------------

def test_sr_is_reproducible_and_index_keyed():
    rng = np.random.default_rng(0)
    x = random_data(rng, (4, 128))
    a = mx.quantize(x, "mxfp4_e2m1", mode="sr", seed=5)
    b = mx.quantize(x, "mxfp4_e2m1", mode="sr", seed=5)
    c = mx.quantize(x, "mxfp4_e2m1", mode="sr", seed=6)
    assert np.array_equal(a.element_bits, b.element_bits)
    assert not np.array_equal(a.element_bits, c.element_bits)
    # pieces quantized with their global offsets give the whole tensor's bits
    top = mx.quantize(x[:2], "mxfp4_e2m1", mode="sr", seed=5)
    bottom = mx.quantize(x[2:], "mxfp4_e2m1", mode="sr", seed=5, index_offset=2 * 128)
    assert np.array_equal(np.concatenate([top.element_bits, bottom.element_bits]),
                          a.element_bits)


def test_sr_does_not_depend_on_threads():
    rng = np.random.default_rng(1)
    x = random_data(rng, 300_000)                           # the parallel kernel (> 2^18)
    was = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = mx.quantize(x, "nvfp4", mode="sr", seed=2)
        numba.set_num_threads(was)
        many = mx.quantize(x, "nvfp4", mode="sr", seed=2)
    finally:
        numba.set_num_threads(was)
    assert np.array_equal(one.element_bits, many.element_bits)
    small = mx.quantize(x[:4096], "nvfp4", mode="sr", seed=2)       # the serial kernel
    assert np.array_equal(small.element_bits, one.element_bits[:4096])


def test_sr_is_unbiased_on_average():
    x = np.full(32 * 4000, 0.3, np.float32)
    x[::32] = 6.0                                           # scale 1: 0.3 between 0 and 0.5
    q = mx.quantize(x, "mxfp4_e2m1", mode="sr", seed=3)
    vals = q.elements.reshape(-1, 32)[:, 1:]
    assert set(np.unique(vals)) == {0.0, 0.5}
    assert abs(vals.mean() - 0.3) < 0.005


# ----- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,err,text", [
    (dict(fmt="mxfp5"), ValueError, "unknown block format"),
    (dict(scale_rule="round"), ValueError, "floor, ceil, even, rceil"),
    (dict(fmt="nvfp4", scale_rule="floor"), ValueError, "nvfp4"),
    (dict(mode="nearest_odd"), ValueError, "unknown rounding mode"),
    (dict(mode="sr"), ValueError, "needs seed"),
    (dict(seed=3), ValueError, "only used by mode 'sr'"),
    (dict(mode="sr", seed=1, sr_bits=63), ValueError, "sr_bits"),
    (dict(block=0), ValueError, "positive"),
    (dict(block=(2, 2, 2)), ValueError, "one or two"),
    (dict(block=2.5), TypeError, "block"),
    (dict(block=(4, 4), axis=0), ValueError, "last two axes"),
    (dict(axis=3), ValueError, "out of range"),
    (dict(tensor_scale=2.0), ValueError, "nvfp4 only"),
    (dict(exact_division=True), ValueError, "nvfp4 only"),
    (dict(fmt="nvfp4", scale_min=0.3), ValueError, "e4m3 value"),
    (dict(fmt="nvfp4", tensor_scale=-1.0), ValueError, "tensor_scale"),
    (dict(fmt="nvfp4", tensor_scale=1e-38), ValueError, "tensor_scale"),
    (dict(fmt="nvfp4", x=np.ones((4, 16))), ValueError, "float32"),
    (dict(x=np.ones(4, np.complex64)), TypeError, "dtype"),
    (dict(x=np.float32(1.0)), ValueError, "dimension"),
    (dict(index_offset=-1), ValueError, "index_offset"),
])
def test_bad_arguments(kwargs, err, text):
    kw = dict(kwargs)
    x = kw.pop("x", np.ones((4, 16), np.float32))
    fmt = kw.pop("fmt", "mxfp8_e4m3")
    with pytest.raises(err, match=text):
        mx.quantize(x, fmt, **kw)


def test_format_lookup():
    assert mx.get_block_format("MXFP8").name == "mxfp8_e4m3"
    assert mx.get_block_format("mxfp4").name == "mxfp4_e2m1"
    with pytest.raises(TypeError):
        mx.get_block_format(8)
