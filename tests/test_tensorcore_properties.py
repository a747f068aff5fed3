"""One named test per numerical property of the Tensor Core models
(docs/tensorcore-models.md, section 3 "Properties shared by every NVIDIA model"),
with hand-derived expectations: exact products, alignment to the largest exponent (c included),
truncation without guard bits, no normalisation inside a block, carry bits, non-monotonicity,
RNE for fp16 output, tf32 ignoring its low bits, subnormal inputs and outputs -- plus the
special-value, overflow, zero-sign and chaining rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from softfloat import tensorcore as tc

P = math.ldexp          # P(m, e) = m * 2^e
FP16_FP32 = [("v100", 23), ("t4", 24), ("a100", 24), ("ada", 24), ("h100", 25), ("b200", 25)]


def d(a, b, c=0.0, model="a100", fin="fp16", facc="fp32", **kw):
    return float(tc.dot(np.array(a, np.float32), np.array(b, np.float32), c, model=model,
                        in_format=fin, acc_format=facc, **kw))


@pytest.mark.parametrize("model", [m for m, _ in FP16_FP32] + ["ideal-fp32"])
def test_products_are_exact(model):
    # (1 - 2^-11)^2 = 1 - 2^-10 + 2^-22: 22 significant bits, kept exactly in fp32.
    x = 1 - P(1, -11)
    assert d([x], [x], model=model) == 1 - P(1, -10) + P(1, -22)
    # fp16 accumulate: (1-2^-11)^2 + (1-2^-11) 2^-11 = 1 - 2^-11 exactly (an fp16 value); a
    # product rounded to fp16 first (RNE: 1 - 2^-10) would give 1 - 2^-10 + 2^-11 - 2^-22 ...
    if model != "ideal-fp32":
        assert d([x, x], [x, P(1, -11)], model=model, facc="fp16") == x
    # bf16: (1 - 2^-8)^2 = 1 - 2^-7 + 2^-16 exactly.
    if model in ("a100", "h100"):
        y = 1 - P(1, -8)
        assert d([y], [y], model=model, fin="bf16") == 1 - P(1, -7) + P(1, -16)


@pytest.mark.parametrize("model,F", FP16_FP32)
def test_alignment_to_largest_exponent_c_included(model, F):
    # c = 1 and four products 2^-24: aligned to E_max = 0 (c's exponent), each 2^-24 survives
    # only with F >= 24: V100 gives 1, the others 1 + 4 * 2^-24 = 1 + 2^-22.
    want = 1.0 if F == 23 else 1 + P(1, -22)
    assert d([1.0] * 4, [P(1, -24)] * 4, 1.0, model=model) == want
    # The largest addend is a product, in any position, and c = 2^-24 is aligned to it too:
    # 1 + 3 * 2^-24 + 2^-24 = 1 + 2^-22 with F >= 24, all small addends lost with F = 23.
    for j in range(4):
        b = [P(1, -24)] * 4
        b[j] = 1.0
        assert d([1.0] * 4, b, P(1, -24), model=model) == (1.0 if F == 23 else
                                                           1 + P(1, -22))
    # c is aligned and truncated like a product: c = 2^-26 below 1 * 1 is lost (F <= 25) ...
    assert d([1.0], [1.0], P(1, -26), model=model) == 1.0
    # ... and when c = 2 is the largest addend, the product -2^-23 is aligned to c's exponent
    # 1: with F = 23 its unit is 2^-22 and it truncates to 0; with F >= 24 it is kept and
    # 2 - 2^-23 is exact in fp32.  The same when 2 is a product instead of c.
    want = 2.0 if F == 23 else 2 - P(1, -23)
    assert d([1.0], [-P(1, -23)], 2.0, model=model) == want
    assert d([1.0, 1.0], [2.0, -P(1, -23)], model=model) == want


@pytest.mark.parametrize("model,F", FP16_FP32)
def test_truncation_without_guard_bits(model, F):
    # 1 * 1 - (1 - 2^-24): c aligned to exponent 0 keeps F fraction bits; with F = 23 it is
    # truncated to 1 - 2^-23 (no guard bit) and the result is 2^-23; with F >= 24 it is exact.
    c = -(1 - P(1, -24))
    assert d([1.0], [1.0], c, model=model) == (P(1, -23) if F == 23 else P(1, -24))
    # KM-HPEC "two bits": 1 + 2^-24 + 2 * 2^-25 (products 2^-12 * 2^-12, 2^-12 * 2^-13 twice):
    # F = 24 drops both 2^-25 (published A30: 1), F = 25 keeps them: 1 + 2^-23 exactly.
    got = d([1.0, P(1, -12), P(1, -12), P(1, -12)], [1.0, P(1, -12), P(1, -13), P(1, -13)],
            model=model)
    assert got == {23: 1.0, 24: 1.0, 25: 1 + P(1, -23)}[F]
    # Truncation is toward zero on magnitudes (negated inputs give the negated result).
    assert d([-1.0], [1.0], -c, model=model) == -(P(1, -23) if F == 23 else P(1, -24))


@pytest.mark.parametrize("model,F", FP16_FP32)
def test_no_normalisation_inside_block(model, F):
    # Addition: c = 1 - 2^-24 (exponent -1) plus 4 * 2^-24: alignment to exponent -1 keeps the
    # small addends, 1 + 3 * 2^-24 -> RZ 1 + 2^-23 on every GPU.
    assert d([1.0] * 4, [P(1, -24)] * 4, 1 - P(1, -24), model=model) == 1 + P(1, -23)
    # Subtraction: 1 * 1 + 1 * (-2^-24) + (-1 + 2^-24): both small terms truncate separately
    # with F = 23 (2^-23 remains); with F >= 24 they cancel exactly (+0).
    got = d([1.0, 1.0], [1.0, -P(1, -24)], -1 + P(1, -24), model=model)
    assert got == (P(1, -23) if F == 23 else 0.0)
    assert math.copysign(1, got) == 1.0


@pytest.mark.parametrize("model", [m for m, _ in FP16_FP32])
def test_carry_bits(model):
    # Three products of 1, one of 2^-23 and c = 1 + 2^-22 + 2^-23: 4 + 2^-21 exactly.
    assert d([1.0] * 4, [1.0, 1.0, 1.0, P(1, -23)], 1 + P(1, -22) + P(1, -23),
             model=model) == 4 + P(1, -21)
    # 1 + 1.5 + 1.75 + 1.875 + c 1.875 = 8: the third carry bit.
    assert d([1.0] * 4, [1.0, 1.5, 1.75, 1.875], 1.875, model=model) == 8.0
    # A whole block of maximal products: K (2 - 2^-10)^2 carries log2(K) + 2 bits above the
    # alignment exponent 0 and is still exact.
    K = tc.get_model(model).block
    x = 2 - P(1, -10)
    assert d([x] * K, [x] * K, model=model) == K * x * x


@pytest.mark.parametrize("model,prod,count,lo_c,want_lo,want_hi", [
    ("v100", (1.0, P(1, -24)), 4, 1 - P(1, -24), 1 + P(1, -23), 1.0),
    ("a100", (P(1, -12), P(1, -13)), 6, 1 - P(1, -24), 1 + P(1, -23), 1.0),
    ("h100", (P(1, -12), 3 * P(1, -14)), 7, 1 - P(1, -24), 1 + P(1, -22), 1 + P(1, -23)),
])
def test_non_monotonicity(model, prod, count, lo_c, want_lo, want_hi):
    # Raising c from 1 - 2^-24 to 1 moves E_max from -1 to 0, so the small products are
    # truncated away: the larger c gives the smaller result (FHMP21 D5, Mikaitis 2023).
    a, b = [prod[0]] * count, [prod[1]] * count
    lo = d(a, b, lo_c, model=model)
    hi = d(a, b, 1.0, model=model)
    assert (lo, hi) == (want_lo, want_hi)
    assert lo > hi


@pytest.mark.parametrize("model", ["v100", "t4", "a100", "ada", "h100", "b200", "ideal-fp16"])
def test_rne_for_fp16_output(model):
    # 2^-25 + 2^-26 = 0.75 * 2^-24 -> RNE gives the fp16 subnormal 2^-24 (RZ would give 0).
    assert d([P(1, -24), P(1, -24)], [P(1, -1), P(1, -2)], model=model, facc="fp16") == \
        P(1, -24)
    # An exact tie: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> even (1); 1 + 3 * 2^-11
    # -> 1 + 2^-9 (even); negative ties mirror.
    assert d([1.0, P(1, -11)], [1.0, 1.0], model=model, facc="fp16") == 1.0
    assert d([1.0, 3 * P(1, -11)], [1.0, 1.0], model=model, facc="fp16") == 1 + P(1, -9)
    assert d([-1.0, -P(1, -11)], [1.0, 1.0], model=model, facc="fp16") == -1.0
    # fp32 output of the hardware models rounds toward zero instead: 1 + 1.5 * 2^-23 gives
    # 1 + 2^-23 (RNE would give 1 + 2^-22).
    if model != "ideal-fp16":
        assert d([1.0, 3 * P(1, -12)], [1.0, P(1, -12)], model=model) == 1 + P(1, -23)


@pytest.mark.parametrize("model", ["a100", "ada", "h100", "b200", "ideal-fp32"])
def test_tf32_ignores_low_mantissa_bits(model):
    # 0x3F7FFFFF = 1 - 2^-24 read as tf32 is 1 - 2^-11 (13 low bits ignored): the square is
    # 1 - 2^-10 + 2^-22 (FHMP21 tf32 B1), not ~1 - 2^-23.
    x = np.float32(1 - P(1, -24))
    assert np.float32(x).view(np.uint32) == 0x3F7FFFFF
    assert d([x], [x], model=model, fin="tf32") == 1 - P(1, -10) + P(1, -22)
    # Software rounding first (cvt.rna.tf32.f32) rounds x to 1: the product is 1.
    assert d([x], [x], model=model, fin="tf32", round_inputs="rna") == 1.0
    # The low bits are dropped, not rounded, for negative and subnormal words too.
    assert d([-x], [x], model=model, fin="tf32") == -(1 - P(1, -10) + P(1, -22))
    tiny = np.float32(P(0x1FFF, -149))          # a float32 subnormal below 2^-136
    assert d([tiny], [1.0], model=model, fin="tf32") == 0.0


@pytest.mark.parametrize("model", ["v100", "a100", "h100", "ideal-fp32"])
def test_subnormal_inputs_and_outputs(model):
    # fp16 subnormal inputs: 2^-24 * 4 = 2^-22 in both accumulators.
    assert d([P(1, -24)], [4.0], model=model) == P(1, -22)
    # fp16 subnormal output: 2^-14 * 2^-1 = 2^-15, and 2^-14 * 1 + (-2^-15) = 2^-15.
    f16 = "ideal-fp16" if model == "ideal-fp32" else model
    assert d([P(1, -14)], [0.5], model=f16, facc="fp16") == P(1, -15)
    assert d([P(1, -14), P(1, -15)], [1.0, -1.0], model=f16, facc="fp16") == P(1, -15)
    # An fp32 subnormal c passes through unchanged.
    assert d([0.0], [0.0], P(1, -149), model=model) == P(1, -149)
    if model in ("a100", "h100", "ideal-fp32"):
        # bf16 subnormal input 2^-133 * 2^7 = 2^-126; fp32 subnormal output 2^-126 * 2^-1.
        assert d([P(1, -133)], [P(1, 7)], model=model, fin="bf16") == P(1, -126)
        assert d([P(1, -126)], [0.5], model=model, fin="bf16") == P(1, -127)
        assert d([P(1, -126)], [1.0], -P(1, -127), model=model, fin="bf16") == P(1, -127)
        # tf32 subnormal input 2^-136 * 2^10 = 2^-126.
        assert d([P(1, -136)], [P(1, 10)], model=model, fin="tf32") == P(1, -126)


@pytest.mark.parametrize("model", ["v100", "a100", "h100", "ideal-fp32"])
def test_special_values(model):
    inf, nan = np.inf, np.nan
    assert math.isnan(d([inf, 1.0], [0.0, 1.0], model=model))          # 0 * Inf
    assert math.isnan(d([inf, inf], [1.0, -1.0], model=model))         # Inf - Inf
    assert math.isnan(d([nan], [1.0], model=model))
    assert math.isnan(d([1.0], [1.0], nan, model=model))
    assert d([inf, 1.0], [2.0, 1.0], model=model) == inf
    assert d([1.0], [1.0], -inf, model=model) == -inf
    assert math.isnan(d([inf], [1.0], -inf, model=model))
    # Infinity sticks through later blocks of finite products.
    assert d([inf] + [1.0] * 40, [1.0] * 41, model=model) == inf


@pytest.mark.parametrize("model", ["v100", "a100", "h100"])
def test_overflow_gives_inf_even_under_rz(model):
    # fp32 output: bf16 2^100 * 2^100 = 2^200 > fp32 max; RZ would give max, the models Inf.
    if model != "v100":
        assert d([P(1, 100)], [P(1, 100)], model=model, fin="bf16") == np.inf
        assert d([P(1, 100)], [-P(1, 100)], model=model, fin="bf16") == -np.inf
    # fp16 output: 256 * 256 = 65536 > 65504 -> Inf (RNE); 65504 + 8 rounds back to 65504 and
    # 65504 + 16 = 65520, the tie with 2^16, rounds to even 2^16: overflow, Inf.
    assert d([256.0], [256.0], model=model, facc="fp16") == np.inf
    assert d([8.0], [1.0], 65504.0, model=model, facc="fp16") == 65504.0
    assert d([16.0], [1.0], 65504.0, model=model, facc="fp16") == np.inf


@pytest.mark.parametrize("model", ["v100", "a100", "h100", "ideal-fp32"])
def test_signed_zeros(model):
    # Exact cancellation and all-zero blocks give +0, even with c = -0 (spec 8.6).
    z = d([1.0, -1.0], [1.0, 1.0], -0.0, model=model)
    assert z == 0.0 and math.copysign(1, z) == 1.0
    z = d([-0.0], [1.0], -0.0, model=model)
    assert z == 0.0 and math.copysign(1, z) == 1.0


def test_blocks_chain_with_rounding_between_them():
    # 16 products on a100 (K = 8): block 1 = 1 + 7 * 2^-24 -> RZ 1 + 3 * 2^-23; block 2 adds
    # 8 * 2^-24 more after alignment to exponent 0 (F = 24): 1 + 6 * 2^-23 + 2^-23 ... computed:
    a = [1.0] * 16
    b = [1.0] + [P(1, -24)] * 15
    # Block 1: S = 2^24 + 7 (unit 2^-24) -> RZ to 23 bits -> 1 + 3 * 2^-23.  Block 2: c plus
    # 8 * 2^-24 = 1 + 3 * 2^-23 + 2^-21 = 1 + 7 * 2^-23, exact.
    assert d(a, b, model="a100") == 1 + 7 * P(1, -23)
    # One rounding over all 16 (ideal-fp32): 1 + 15 * 2^-24 -> RNE 1 + 7 * 2^-23 (tie? 15/2 =
    # 7.5 -> even 8): 1 + 2^-20.
    assert d(a, b, model="ideal-fp32") == 1 + P(1, -20)
    # H100 (K = 16): one block, 1 + 15 * 2^-24 truncated at F = 25 is exact, RZ: 1 + 7 * 2^-23.
    assert d(a, b, model="h100") == 1 + 7 * P(1, -23)


def test_fp8_e8m13_output():
    # Ada/Hopper fp8 -> fp32: the block result keeps 13 fraction bits (RZ): 1 + 2^-14 is lost,
    # 1 + 2^-13 kept.  e4m3 products: 1 * 1 and 2^-7 * 2^-7 = 2^-14.
    assert d([1.0, P(1, -7)], [1.0, P(1, -7)], model="ada", fin="e4m3fn") == 1.0
    assert d([1.0, P(1, -6)], [1.0, P(1, -7)], model="ada", fin="e4m3fn") == 1 + P(1, -13)
    assert d([1.0, P(1, -6)], [1.0, P(1, -7)], model="h100", fin="e4m3fn") == 1 + P(1, -13)
