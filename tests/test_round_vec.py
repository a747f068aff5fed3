"""The vectorised rounding kernel without flag counting (issue #13's fast paths), bit for bit
against round_value (softfloat._kernels_round.round_kernel) element by element.

Without flags, pass 1 of softfloat._kernels_round_vec also rounds below 2^emin (RNE by the
carrier add (|x| + C) - C; the pattern rounding at bit d where the subnormal grid is the
input's own, as bf16's from float32) and gives Inf / NaN their results by selects.  Checked
here on float32 and float64 inputs (32- and 64-bit lanes), every mode, on issue #13's data
classes and on the edges of those paths: just below 2^emin (rounding up to 2^emin), ties and
near-ties on the subnormal grid, +-0, carrier subnormals, NaN payloads, negative inputs of
unsigned formats, formats without subnormals or without zero, and a few marked elements among
lean ones (sparse) as well as many (dense).  tests/test_exhaustive.py (marked slow) checks all
2^32 float32 inputs to fp16 and bf16, every mode, without flags against the kernel counting
flags, which it checks on every input.  tests/test_round_core.py checks the kernel with flags against round_value.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import softfloat as sf
from softfloat import _kernels_round as K
from softfloat import _kernels_round_vec as KV

FORMATS = [sf.get_format(n) for n in ("fp16", "bf16", "tf32", "e4m3fn", "e5m2", "e8m0",
                                      "ue4m3")] + [
    sf.Format("e4m3fn_sat", 4, 3, inf_nan="fn", saturate=True),
    sf.Format("e3m4_none", 3, 4, inf_nan="none"),
    sf.Format("fp16_ftz", 5, 10, subnormals=False),
    sf.Format("ue5m2", 5, 2, signed=False),
    sf.Format("ue4m0", 4, 0, inf_nan="fn", subnormals=False, signed=False, zero=False),
    sf.Format("e5m0", 5, 0, inf_nan="none"),
    sf.Format("e8m1", 8, 1),
    sf.Format("e8m0_sub", 8, 0, inf_nan="none"),
    sf.Format("e8m7_ftz", 8, 7, subnormals=False),
    sf.Format("e6m22", 6, 22),
]


def edge_values(fmt, rng, dtype):
    """Values at the edges of pass 1's paths below 2^emin, both signs, in a random order."""
    q = 2.0 ** (fmt.emin - fmt.man_bits)
    k = np.arange(2.0 ** fmt.man_bits - 6, 2.0 ** fmt.man_bits + 1)   # up to 2^emin
    k = np.concatenate([k, np.arange(0.0, 7.0), rng.integers(0, 2 ** fmt.man_bits, 40)])
    fi = np.finfo(dtype)
    ups = np.array([1.0 + fi.eps, 1.0 - fi.eps / 2])
    v = [k * q, (k + 0.5) * q, ((k + 0.5) * q)[:, None] * ups, (k + 0.25) * q,
         (k + 0.75) * q, [0.0, fi.tiny, fi.tiny * 0.5, fi.smallest_subnormal, q / 2, q / 4,
                          q / 2 * (1 + fi.eps), q / 2 * (1 - fi.eps / 2), 2.0 ** fmt.emin,
                          fmt.max, np.inf]]
    with np.errstate(over="ignore", under="ignore"):
        x = np.concatenate([np.ravel(np.asarray(a, np.float64)) for a in v]).astype(dtype)
        x = x[np.isfinite(x) | np.isinf(x)]
        x = np.concatenate([x, -x])
    w = np.uint32 if dtype == np.float32 else np.uint64
    nans = np.array([0x7FC00001, 0xFFC00000, 0x7F800001, 0xFFBFFFFF], np.uint32).view(np.float32)
    nans = nans.astype(dtype) if dtype == np.float32 else np.array(
        [0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFF7FFFFFFFFFFFF],
        np.uint64).view(np.float64)
    x = np.concatenate([x, nans]).astype(dtype)
    assert x.view(w).size == x.size
    return x[rng.permutation(x.size)]


def data(fmt, rng, dtype):
    """Issue #13's data classes, the edge values alone (dense) and sprinkled over N(0,1)
    (sparse: pass 1 and the later passes on the same chunk), and N(0,1) with 1% Inf/NaN and
    with 1% Inf."""
    n = 3000
    g = rng.standard_normal(n)
    out = dict(normal=g, gradient=g * np.exp2(rng.uniform(-30, 8, n)),
               subnormal=g * fmt.tiny * rng.uniform(2.0 ** -12, 1, n),
               overflow=g * np.exp2(rng.uniform(0, 20, n)))
    with np.errstate(over="ignore", under="ignore"):
        out = {k: v.astype(dtype) for k, v in out.items()}
    e = edge_values(fmt, rng, dtype)
    out["edges"] = e
    sparse = rng.standard_normal(20 * 256).astype(dtype)
    pos = rng.choice(sparse.size, min(e.size, 40), replace=False)
    sparse[pos] = e[:pos.size]
    out["sparse"] = sparse
    # N(0,1) with 1% Inf / NaN (payloads, both signs): blocks whose only marks are these,
    # settled by the Inf/NaN pass after pass 1 (no flags) instead of a later pass
    naninf = rng.standard_normal(20 * 256).astype(dtype)
    pos = rng.choice(naninf.size, naninf.size // 100, replace=False)
    spec = e[~np.isfinite(e)]                  # +-Inf and the four NaN patterns
    naninf[pos] = spec[np.arange(pos.size) % spec.size]
    out["naninf"] = naninf
    # 1% +-Inf and no NaN: without flags pass 1 rounds an Inf as an overflow where their results
    # agree (VecParams.lean_inf), so these blocks may hold no mark at all
    inf = rng.standard_normal(20 * 256).astype(dtype)
    pos = rng.choice(inf.size, inf.size // 100, replace=False)
    inf[pos] = np.where(rng.random(pos.size) < 0.5, np.inf, -np.inf)
    out["inf"] = inf
    return out


def reference(x, fmt, mode, key, rbits):
    ref = np.empty(x.size, fmt.carrier_dtype)
    counts = np.zeros((K.n_chunks(x.size), K.NFLAGS), np.int64)
    K.round_kernel(x, ref, fmt.kernel_params(), mode, key, 0, rbits, True, counts)
    return ref


#: every (format, input dtype) the vectorised kernel serves (the others go element by element
#: through round_value itself: nothing to compare)
VEC_CASES = [(f, d) for f in FORMATS for d in (np.float32, np.float64) if KV.vec_supported(f, d)]


@pytest.mark.parametrize("fmt,dtype", VEC_CASES,
                         ids=[f"{f.name}-{np.dtype(d).name}" for f, d in VEC_CASES])
def test_unflagged_kernel_equals_round_value(fmt, dtype):
    rng = np.random.default_rng(23)
    for cls, x in data(fmt, rng, dtype).items():
        for mode in range(8):
            for rbits in ((3, 13, 24, 31, 32, 40, 52, 53) if mode == 6 else (None,)):
                kw = dict(seed=5, sr_bits=rbits) if mode == 6 else {}
                got = sf.round(x, fmt, mode, **kw)
                key, rb = (sf.rng.seed_key(5), rbits) if mode == 6 else (np.uint64(0), 1)
                ref = reference(x, fmt, mode, key, rb)
                w = np.uint32 if ref.dtype == np.float32 else np.uint64
                bad = np.flatnonzero(got.view(w) != ref.view(w))
                assert bad.size == 0, (cls, mode, rbits, x[bad[:5]], got[bad[:5]], ref[bad[:5]])


def test_which_formats_take_the_lean_paths():
    """The carrier add serves RNE where q = 2^(emin - m) is a normal float of the input width;
    the pattern rounding serves every mode where the format's emin is the input's; flush-to-
    zero formats leave below 2^emin to the later passes."""
    f32, f64 = np.uint32, np.uint64
    for name, lane, magic in [("fp16", f32, True), ("e4m3fn", f32, True), ("bf16", f32, False),
                              ("bf16", f64, True), ("fp16_ftz", f32, False)]:
        fmt = FORMATS[[f.name for f in FORMATS].index(name)]
        p = KV.vec_params(fmt, 0, 1, lane)
        assert p.low_magic is magic, name
        assert (int(p.lean_lo) == 0) is (name != "fp16_ftz"), name
        assert not KV.vec_params(fmt, 2, 1, lane).low_magic
    # without flags, Inf rounds in pass 1 (as an overflow) just where its results are the
    # overflow results, both signs: in RNE/RNA/RHU/SR ieee formats (+-Inf) and fn formats (NaN
    # of the Inf's sign), in every mode saturating formats (+-max); not in RTZ/RUP/RDN/RTO of
    # the others (their overflow gives +-max on at least one side)
    inf32 = 0x7F800000
    sat = next(f for f in FORMATS if f.saturate)
    for name, fmt in [("fp16", sf.get_format("fp16")), ("e4m3fn", sf.get_format("e4m3fn")),
                      ("sat", sat)]:
        for mode in range(8):
            p = KV.vec_params(fmt, mode, 1, f32)
            over = name == "sat" or mode in (0, 1, 6, 7)
            assert int(p.lean_inf) == inf32 + over, (name, mode)
            assert int(p.inf) == inf32
    # stochastic rounding below 2^emin by _grid_low in every format with subnormals
    for fmt, lane in [(sf.get_format("bf16"), f32), (sf.get_format("fp16"), f64)]:
        assert int(KV.vec_params(fmt, 6, 24, lane).lean_lo) == 0
    ftz = FORMATS[[f.name for f in FORMATS].index("fp16_ftz")]
    assert int(KV.vec_params(ftz, 6, 24, f32).lean_lo) != 0


def test_signed_lane_compares_and_the_32_bit_counter():
    """softfloat._lanes' vslt / vsgt / vsge (operands below 2^(W-1), the signed compares of
    pass 1 in 64-bit lanes) agree with the unsigned ones there, in both lane widths, and
    vcount counts in 32 bits whatever the lane width."""
    from numba import njit

    from softfloat._lanes import vcount, vge, vgt, vlt, vsge, vsgt, vslt

    @njit
    def compares(xs, ys, out):
        n = np.uint32(0)
        for j in range(xs.size):
            a, b = xs[j], ys[j]
            out[j, 0] = vslt(a, b) == vlt(a, b)
            out[j, 1] = vsgt(a, b) == vgt(a, b)
            out[j, 2] = vsge(a, b) == vge(a, b)
            n = vcount(n, vlt(a, b))
        return n

    rng = np.random.default_rng(3)
    for w, top in ((np.uint32, 2 ** 31), (np.uint64, 2 ** 63)):
        edge = np.array([0, 1, top // 2, top - 2, top - 1], w)
        xs = np.concatenate([np.repeat(edge, edge.size), rng.integers(0, top, 200, dtype=w)])
        ys = np.concatenate([np.tile(edge, edge.size), rng.integers(0, top, 200, dtype=w)])
        out = np.zeros((xs.size, 3), np.bool_)
        n = compares(xs, ys, out)
        assert out.all(), w
        assert isinstance(n, (int, np.integer)) and int(n) == int(np.sum(xs < ys)), w


@pytest.mark.parametrize("lane", [np.uint32, np.uint64])
def test_pass1_low_test_keeps_zeros_of_formats_with_zero(lane):
    """Pass 1 marks a < lean_min by vslt(a + lean_zsh, lean_zmin), except a = 0 in formats
    with a zero (rounded by pass 1 itself: a zero rounds to itself in every mode).  The
    constants' wrap-around arithmetic, replayed in Python with the lane's compare."""
    W = 32 if lane == np.uint32 else 64
    mask = (1 << W) - 1

    def vslt(x, y):       # unsigned on uint32, signed on uint64 (as softfloat._lanes)
        if W == 64:
            x, y = (v - (1 << 64) if v >> 63 else v for v in (x, y))
        return x < y

    for fmt in FORMATS:
        for mode in range(8):
            p = KV.vec_params(fmt, mode, 24, lane)
            lean_min = int(p.lean_min)
            for a in {0, 1, 2, lean_min - 1, lean_min, lean_min + 1, int(p.inf),
                      (1 << (W - 1)) - 1}:
                marked = vslt((a + int(p.lean_zsh)) & mask, int(p.lean_zmin))
                expect = a < lean_min and not (a == 0 and fmt.zero)
                assert marked == expect, (fmt.name, mode, a)


def test_later_pass_is_vectorised_when_compiled_on_its_own():
    """A process that compiles the kernels (the first run after an install, every CI run)
    executes each later pass as Numba compiled it on its own, not the copy inside its cached
    caller.  Its block loop must be SIMD code there too: with the counts carried in a tuple,
    LLVM left it scalar and pass 2 ran 8x slower in such a process (49.6 against 6.4 ms for
    4M fp16-subnormal float32 inputs with flags).  Compiled here with runtime booleans (a
    signature of its own) and checked for vector types in its LLVM IR; its results are
    sf.round's."""
    import re

    fmt = sf.get_format("fp16")
    x = (np.arange(1 << 12, dtype=np.uint32) + np.uint32(0x38000000)).view(np.float32)
    k = KV.RoundVec(*KV.vec_params(fmt, 0, 0, np.uint32), *fmt.kernel_params(),
                    np.uint64(0), 0, True)
    nb = x.size // KV.BLOCK
    out = np.zeros(x.size, np.uint32)
    counts = np.zeros((1, 5), np.int64)
    left = np.zeros(nb, np.int64)
    # called with the flags as run-time values, typed bool (a kernel's calls pass literals),
    # from a compiled caller: the passes have no Python wrapper (softfloat._driver.INNER)
    from numba import njit

    @njit
    def call(k, xs, out, counts, is_sr, want_flags, left, every, nb):
        KV._settle_pass2(k, xs, out, 0, counts, 0, is_sr, want_flags, left, every, 0, nb)

    call(k, x.view(np.uint32), out, counts, False, True, left, True, nb)
    sig = [s for s in KV._settle_pass2.signatures if str(s[6]) == "bool"][0]
    ir = KV._settle_pass2.inspect_llvm(sig)
    assert re.search(r"<\d+ x i32>", ir), "pass 2's block loop is scalar"
    done = np.ones(x.size, bool)
    for b in np.flatnonzero(left):                     # elements left to pass 3, if any
        lo = b * KV.BLOCK
        done[lo:lo + KV.BLOCK] = out[lo:lo + KV.BLOCK] != np.uint32(0xFFFFFFFF)
    want = sf.round(x, fmt, "rne").view(np.uint32)
    assert done.sum() > x.size // 2
    assert np.array_equal(out[done], want[done])


_FIRST_CALL_PROBE = """
import json
import numpy as np
import softfloat as sf
from softfloat import _kernels_round_vec as KV
names = [p + s for p in ("RoundVecDet", "RoundVecDetFlags", "RoundVecSr", "RoundVecSrFlags")
         for s in ("Lean", "")] + ["RoundVecLate"]
def count():
    return {n: len(getattr(KV, n).drive.signatures) for n in names}
x = np.linspace(-3, 3, 1000, dtype=np.float32)
seen = [count()]
sf.round(x, "fp16")
seen.append(count())
sf.round(x, "bf16", "sr", seed=1, flags=sf.Flags())
seen.append(count())
# one fp16 subnormal among normal values: pass 1 marks it, the second launch settles it
x[700] = 2.0 ** -20
sf.round(x, "fp16")
seen.append(count())
# stochastic rounding with 40 random bits far below fp16's grid: passes 3 and 4 (the late launch)
tiny = np.full(1000, 2.0 ** -60, np.float32)
sf.round(tiny, "fp16", "sr", seed=1, sr_bits=40)
seen.append(count())
print(json.dumps(seen))
"""


def test_a_call_compiles_only_the_passes_its_data_and_mode_need():
    """sf.round launches pass 1 alone first (one of four record classes by (stochastic
    rounding, flags counted)), then, only where pass 1 marked elements, the record class of
    the same pair that runs the later passes from the marked block on, and passes 3 and 4
    (RoundVecLate) only when some element needs them.  So in a fresh process a first call on
    data in the format's normal range compiles (or loads) pass 1 of its pair and nothing
    else."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FIRST_CALL_PROBE], capture_output=True,
                         text=True, check=True).stdout
    before, rne, sr_flags, marked, late = json.loads(out.splitlines()[-1])

    def compiled(counts):
        return sorted(n for n, v in counts.items() if v)

    assert set(before.values()) == {0}
    assert compiled(rne) == ["RoundVecDetLean"]
    assert compiled(sr_flags) == ["RoundVecDetLean", "RoundVecSrFlagsLean"]
    assert compiled(marked) == ["RoundVecDet", "RoundVecDetLean", "RoundVecSrFlagsLean"]
    assert compiled(late) == ["RoundVecDet", "RoundVecDetLean", "RoundVecLate", "RoundVecSr",
                              "RoundVecSrFlagsLean", "RoundVecSrLean"]
    assert set(rne.values()) | set(late.values()) == {0, 1}
    assert KV.RoundVec.drive is None          # the passes' record type is never launched


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_second_launch_resumes_at_the_first_marked_block(dtype):
    """Until a process has needed the later passes, pass 1 runs alone first and stops in each
    chunk at the first block holding a marked element; the second launch starts there, the
    block done again (its results and flag counts from the first launch dropped); afterwards
    the second launch runs alone from every chunk's first block.  Both ways are checked, with
    single marks at a chunk's first element, a block's last element, the last (partial) block
    and in several chunks, on more than SERIAL_MAX elements (several threads): every bit and
    every flag count as round_value's, in rne, rtz and sr, with and without flags (a count of
    the stopped block kept twice, or a block skipped, would show)."""
    from softfloat._driver import CHUNK, SERIAL_MAX
    from softfloat.flags import FLAG_NAMES

    B = KV.BLOCK
    lane = np.uint32 if dtype == np.float32 else np.uint64
    rng = np.random.default_rng(3)
    n = SERIAL_MAX + 1 + 3 * CHUNK + 300
    nc = (n + CHUNK - 1) // CHUNK
    where = [1 * CHUNK, 2 * CHUNK + 37 * B + B - 1, 3 * CHUNK + 5 * B + 17, 3 * CHUNK + 6 * B,
             (nc - 1) * CHUNK + B + 11, n - 1]
    for fmt in (sf.get_format("fp16"), sf.get_format("e4m3fn"), sf.get_format("bf16")):
        x = rng.standard_normal(n).astype(dtype)
        # marks: a value below the format's normal range, a NaN, a subnormal, -0.0 with a NaN
        marks = np.array([fmt.tiny / 3, np.nan, fmt.tiny * 0.7, -0.0, -np.nan, fmt.tiny / 5])
        x[where] = marks.astype(dtype)
        for mode in (sf.Mode.RNE, sf.Mode.RTZ, sf.Mode.SR):
            kw = dict(seed=9) if mode == sf.Mode.SR else {}
            key = sf.rng.seed_key(9) if mode == sf.Mode.SR else np.uint64(0)
            rb = 24 if mode == sf.Mode.SR else 1
            ref = np.empty(n, fmt.carrier_dtype)
            counts = np.zeros((K.n_chunks(n), K.NFLAGS), np.int64)
            K.round_kernel(x, ref, fmt.kernel_params(), int(mode), key, 0, rb, True, counts)
            want = counts.sum(axis=0)
            w = np.uint32 if ref.dtype == np.float32 else np.uint64
            for flags, tiered in itertools.product((False, True), (True, False)):
                if tiered:              # as in a process that has not run the second launch
                    KV._FULL_LAUNCHED.clear()
                fl = sf.Flags() if flags else None
                got = sf.round(x, fmt, mode, flags=fl, **kw)
                # the marks needed the second launch, which the next call then runs alone
                assert ((mode == sf.Mode.SR, flags), lane) in KV._FULL_LAUNCHED
                bad = np.flatnonzero(got.view(w) != ref.view(w))
                assert bad.size == 0, (fmt.name, mode, flags, tiered, bad[:5])
                if flags:
                    have = [getattr(fl, f) for f in FLAG_NAMES]
                    assert have == list(want), (fmt.name, mode, tiered, have, want)
                    assert fl.underflow > 0


def test_lane_operations_agree_with_numpy_in_both_widths():
    """softfloat._lanes' operations (LLVM instructions emitted at the call site, on i32 or i64
    lanes) against numpy's unsigned arithmetic on edge and random operands of each width:
    wrap-around add / sub, shifts below the width, the logic ops, unsigned compares, min / max,
    the selects and the 32-bit counter."""
    from numba import njit

    from softfloat._lanes import (vadd, vand, vcount, veq, vge, vgt, vle, vlt, vmax, vmerge,
                                  vmin, vne, vor, vsel, vshl, vshr, vsub, vxor)

    @njit
    def ops(xs, ys, ss, ones, zero, out, cmp):
        n = np.uint32(0)
        for j in range(xs.size):
            a, b, s = xs[j], ys[j], ss[j]
            out[j, 0] = vadd(a, b)
            out[j, 1] = vsub(a, b)
            out[j, 2] = vand(a, b)
            out[j, 3] = vor(a, b)
            out[j, 4] = vxor(a, b)
            out[j, 5] = vshl(a, s)
            out[j, 6] = vshr(a, s)
            out[j, 7] = vmin(a, b)
            out[j, 8] = vmax(a, b)
            out[j, 9] = vsel(vlt(a, b), a, b)
            out[j, 10] = vmerge(vgt(a, b), a, b, ones, zero)
            cmp[j, 0] = vlt(a, b)
            cmp[j, 1] = vle(a, b)
            cmp[j, 2] = vgt(a, b)
            cmp[j, 3] = vge(a, b)
            cmp[j, 4] = veq(a, b)
            cmp[j, 5] = vne(a, b)
            n = vcount(n, vle(a, b))
        return n

    rng = np.random.default_rng(11)
    for w, bits in ((np.uint32, 32), (np.uint64, 64)):
        top = (1 << bits) - 1
        edge = np.array([0, 1, 2, (1 << (bits - 1)) - 1, 1 << (bits - 1), top - 1, top], w)
        xs = np.concatenate([np.repeat(edge, edge.size), rng.integers(0, top, 300, dtype=w,
                                                                         endpoint=True)])
        ys = np.concatenate([np.tile(edge, edge.size), rng.integers(0, top, 300, dtype=w,
                                                                       endpoint=True)])
        ys[-20:] = xs[-20:]                              # equal pairs among the random ones
        ss = rng.integers(0, bits, xs.size, dtype=w)
        out = np.zeros((xs.size, 11), w)
        cmp = np.zeros((xs.size, 6), np.bool_)
        n = ops(xs, ys, ss, w(top), w(0), out, cmp)
        with np.errstate(over="ignore"):
            want = [xs + ys, xs - ys, xs & ys, xs | ys, xs ^ ys, xs << ss, xs >> ss,
                    np.minimum(xs, ys), np.maximum(xs, ys), np.where(xs < ys, xs, ys),
                    np.where(xs > ys, xs, ys)]
        for i, v in enumerate(want):
            assert np.array_equal(out[:, i], v.astype(w)), (w, i)
        for i, v in enumerate([xs < ys, xs <= ys, xs > ys, xs >= ys, xs == ys, xs != ys]):
            assert np.array_equal(cmp[:, i], v), (w, i)
        assert int(n) == int(np.sum(xs <= ys)), w


# ----- the narrowing of 64-bit lane results into float32 carriers ----------------------------

def _widen_exact(p32):
    """float64 patterns of float32 patterns, exactly (numpy's conversion quiets a signalling
    NaN; here its payload goes to the top fraction bits unchanged)."""
    p32 = np.asarray(p32, np.uint32).astype(np.uint64)
    v = p32.astype(np.uint32).view(np.float32).astype(np.float64).view(np.uint64)
    nan = (p32 & 0x7F800000) == 0x7F800000
    nan &= (p32 & 0x007FFFFF) != 0
    v[nan] = ((p32[nan] & 0x80000000) << 32) | (0x7FF << 52) | ((p32[nan] & 0x007FFFFF) << 29)
    return v


def test_narrow_bits_on_every_float32():
    """narrow_bits gives back every float32 pattern from its float64 widening: normals,
    subnormals (the 2^149 scaling path), +-0, +-Inf and every NaN, signalling ones included;
    and a NaN's fraction bits below the top 23 are dropped."""
    from numba import njit

    @njit(cache=False)
    def mismatches(lo, hi, bad):
        nb = 0
        for i in range(lo, hi):
            p32 = np.uint32(i)
            if (p32 & np.uint32(0x7F800000)) == np.uint32(0x7F800000) and \
                    (p32 & np.uint32(0x007FFFFF)) != np.uint32(0):
                p64 = (np.uint64(p32 & np.uint32(0x80000000)) << np.uint64(32)) | \
                    np.uint64(0x7FF0000000000000) | \
                    (np.uint64(p32 & np.uint32(0x007FFFFF)) << np.uint64(29))
            else:
                p64 = np.float64(p32.view(np.float32)).view(np.uint64)
            if KV.narrow_bits(p64) != p32:
                if nb < bad.size:
                    bad[nb] = i
                nb += 1
        return nb

    bad = np.zeros(8, np.int64)
    assert mismatches(0, 1 << 32, bad) == 0, [hex(b) for b in bad]
    rng = np.random.default_rng(3)
    p32 = (rng.integers(0, 1 << 23, 1000, dtype=np.uint64) | 0x7F800001).astype(np.uint32)
    p32 |= (rng.integers(0, 2, 1000) << 31).astype(np.uint32)
    low = rng.integers(1, 1 << 29, 1000, dtype=np.uint64)      # bits the float32 cannot hold
    got = [int(KV.narrow_bits(np.uint64(p | q))) for p, q in zip(_widen_exact(p32), low)]
    assert got == [int(p) for p in p32]


def test_narrow_block_conversion_equals_narrow_bits():
    """The later passes' block narrowing by conversion (VecParams.cvt_out) writes the bits of
    narrow_bits on every value it is used for: +-0, normal float32 values, +-Inf, quiet NaNs
    with any payload (the top 23 fraction bits kept), the marker; and cvt_out holds exactly for
    64-bit lanes into a float32 carrier of a format whose nonzero values are all at least
    2^-126."""
    from numba import njit

    @njit(cache=False)
    def both(ws, a, b):
        KV.narrow_block(ws, a, True)
        KV.narrow_block(ws, b, False)

    rng = np.random.default_rng(4)
    n = 20000
    normal = rng.integers(0x00800000, 0x7F800000, n, dtype=np.uint64).astype(np.uint32)
    normal |= (rng.integers(0, 2, n) << 31).astype(np.uint32)
    ws = _widen_exact(normal)
    qnan = (0x7FF8 << 48) | rng.integers(0, 1 << 51, n, dtype=np.uint64)
    qnan |= rng.integers(0, 2, n, dtype=np.uint64) << 63
    specials = np.array([0, 1 << 63, 0x7FF << 52, 0xFFF << 52, (1 << 64) - 1,
                         0x7FF8 << 48, 0xFFF8 << 48], np.uint64)
    ws = np.concatenate([ws, qnan, specials])
    a = np.zeros(ws.size, np.uint32)
    b = np.ones(ws.size, np.uint32)
    both(ws, a, b)
    assert np.array_equal(a, b), np.flatnonzero(a != b)[:5]
    assert b[-3] == 0xFFFFFFFF                               # the marker stays the marker
    for name, cvt in [("fp16", True), ("e4m3fn", True), ("e5m2", True), ("fp16_ftz", True),
                      ("e8m7_ftz", True), ("bf16", False), ("tf32", False), ("e8m0", False),
                      ("e8m1", False), ("e6m22", True)]:
        fmt = FORMATS[[f.name for f in FORMATS].index(name)]
        assert KV.vec_params(fmt, 0, 1, np.uint64).cvt_out is cvt, name
        assert KV.vec_params(fmt, 0, 1, np.uint32).cvt_out is False, name
