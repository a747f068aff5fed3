"""The public API of softfloat.tensorcore: model records and lookup, argument checking with
clear errors, k order, edge shapes, and the fast kernels on sizes that cross their tiles."""

from __future__ import annotations

import math

import numpy as np
import pytest

import softfloat as sf
import tc_reference as R
from softfloat import tensorcore as tc


def test_get_model_and_aliases():
    m = tc.get_model("h100", "bf16")
    assert (m.block, m.frac_bits, m.out_round, m.acc_format.name) == (16, 25, sf.Mode.RTZ,
                                                                        "fp32")
    assert tc.get_model("Hopper", "fp16", "fp16") == tc.get_model("h100", "fp16", "fp16")
    assert tc.get_model("ideal-fp16").acc_format.name == "fp16"
    assert ("e4m3fn", "fp32") in tc.list_models()["ada"]
    assert set(tc.list_models()) == set(tc.DEVICES)


def test_unknown_and_unsupported_models():
    with pytest.raises(ValueError, match="accepted: ideal-fp32, ideal-fp16, v100"):
        tc.get_model("p100")
    with pytest.raises(ValueError, match="supported .*fp16->fp32"):
        tc.get_model("v100", "bf16")
    with pytest.raises(ValueError, match="unknown format"):
        tc.get_model("a100", "fp12")
    with pytest.raises(TypeError):
        tc.get_model(3)


@pytest.mark.parametrize("key,section", [(("h100", "e4m3fn", "fp16"), "8.2"),
                                         (("h100", "e5m2", "fp16"), "8.2"),
                                         (("b200", "e4m3fn", "fp32"), "8.3"),
                                         (("b200", "e5m2", "fp16"), "8.3")])
def test_unresolved_combinations_raise(key, section):
    with pytest.raises(ValueError, match=f"unresolved.*section {section}"):
        tc.get_model(*key)
    with pytest.raises(ValueError, match="unresolved"):
        tc.gemm(np.ones((1, 2), np.float32), np.ones((2, 1), np.float32), model=key[0],
                in_format=key[1], acc_format=key[2])


def test_custom_model_against_reference():
    # A custom record: blocks of 3, 21 fraction bits, RNE into bf16 (no preset has it).
    model = tc.TCModel("custom", 3, 21, "rne", "fp16", "bf16")
    rng = np.random.default_rng(3)
    A = np.asarray(sf.round(rng.standard_normal((3, 11)), "fp16"), np.float64)
    B = np.asarray(sf.round(rng.standard_normal((11, 2)), "fp16"), np.float64)
    C = np.asarray(sf.round(rng.standard_normal((3, 2)), "bf16"), np.float64)
    D = tc.gemm(A, B, C, model=model)
    for i in range(3):
        for j in range(2):
            r = R.dot(list(A[i]), list(B[:, j]), C[i, j], K=3, F=21, in_fmt="fp16",
                      acc_fmt="bf16", mode="rne")
            assert D[i, j] == r
    # Exact alignment with finite blocks (F = None) and one truncating block over all of k.
    exact = tc.TCModel("exact4", 4, None, "rz", "fp16", "fp32")
    one = tc.TCModel("oneblock", None, 30, "rz", "fp16", "fp32")
    for mdl, K, F in ((exact, 4, None), (one, None, 30)):
        D = tc.gemm(A, B, model=mdl)
        for i in range(3):
            r = R.dot(list(A[i]), list(B[:, 0]), 0.0, K=K, F=F, in_fmt="fp16",
                      acc_fmt="fp32", mode="rtz")
            assert D[i, 0] == r
    assert "K=3, F=21" in model.describe()


def test_tcmodel_validation():
    with pytest.raises(ValueError, match="block"):
        tc.TCModel("x", 0, 23, "rz", "fp16", "fp32")
    with pytest.raises(ValueError, match="out_round"):
        tc.TCModel("x", 4, 23, "rup", "fp16", "fp32")
    with pytest.raises(ValueError, match="53-bit"):
        tc.TCModel("x", 1 << 20, 40, "rz", "fp16", "fp32")
    with pytest.raises(ValueError, match="acc_format"):
        tc.TCModel("x", 4, 23, "rz", "fp16", "e4m3fn")
    with pytest.raises(ValueError, match="in_format"):
        tc.TCModel("x", 4, 23, "rz", "fp64", "fp32")
    with pytest.raises(ValueError, match="out_frac"):
        tc.TCModel("x", 4, 23, "rz", "fp16", "fp16", out_frac=13)
    with pytest.raises(TypeError):
        tc.TCModel("x", 4.0, 23, "rz", "fp16", "fp32")
    m = tc.TCModel("x", 4, 23, "rz", "fp16", "fp32")
    with pytest.raises(ValueError, match="conflicts"):
        tc.gemm(np.ones((1, 1)), np.ones((1, 1)), model=m, in_format="bf16")
    with pytest.raises(ValueError, match="exceeds the exact 53-bit"):
        tc.gemm(np.ones((1, 3000)), np.ones((3000, 1)),
                model=tc.TCModel("big", None, 45, "rz", "fp16", "fp32"))


def test_off_grid_inputs_name_the_element():
    A = np.ones((2, 3), np.float32)
    A[1, 2] = 1 + 2.0 ** -12                        # not an fp16 value
    B = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"A\[1, 2\] = 1.000244140625 is not a fp16 value"):
        tc.gemm(A, B, model="a100")
    D = tc.gemm(A, B, model="a100", round_inputs="rne")   # rounds 1 + 2^-12 to 1
    assert np.all(D == 3.0)
    with pytest.raises(ValueError, match=r"B\[0, 1\] = 70000.0 is not a fp16 value"):
        B2 = B.copy()
        B2[0, 1] = 70000.0
        tc.gemm(np.ones((2, 3), np.float32), B2, model="a100")
    with pytest.raises(ValueError, match=r"C\[0, 0\] .* not a fp16 value"):
        tc.gemm(B.T, B, np.full((2, 2), 0.1), model="a100", acc_format="fp16")
    with pytest.raises(ValueError, match=r"a\[1\] = 0.1 is not a bf16 value"):
        tc.dot([1.0, 0.1], [1.0, 1.0], model="a100", in_format="bf16")
    with pytest.raises(ValueError, match="not a e4m3fn value"):
        tc.dot([np.inf], [1.0], model="ada", in_format="e4m3fn")      # e4m3fn has no Inf
    with pytest.raises(ValueError, match="'sr' is not accepted"):
        tc.gemm(A, B, model="a100", round_inputs="sr")


def test_tf32_operands_are_float32_words():
    x = 1 + 2.0 ** -30                              # a float64 that is no float32
    with pytest.raises(ValueError, match=r"A\[0, 0\] .* is not a float32 value"):
        tc.gemm(np.array([[x]]), np.ones((1, 1)), model="a100", in_format="tf32")
    # A float32 off the tf32 grid is accepted (its low bits are ignored).
    y = np.float32(1 + 2.0 ** -20)
    assert tc.dot([y], [np.float32(1)], model="a100", in_format="tf32") == 1.0


def test_shapes_and_types():
    one = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="shape mismatch"):
        tc.gemm(one, one)
    with pytest.raises(ValueError, match="2-d"):
        tc.gemm(np.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="broadcast"):
        tc.gemm(one, one.T, np.ones((3, 3)))
    with pytest.raises(TypeError, match="dtype complex128"):
        tc.gemm(np.ones((2, 2), np.complex128), np.ones((2, 2)))
    with pytest.raises(ValueError, match="1-d"):
        tc.dot(one, one)
    with pytest.raises(ValueError, match="length mismatch"):
        tc.dot([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="scalar"):
        tc.dot([1.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="Accumulator models only"):
        tc.gemm(one, one.T, seed=1)


def test_edge_shapes_and_dtypes():
    A = np.ones((2, 0), np.float32)
    B = np.ones((0, 3), np.float32)
    C = np.full((2, 3), -0.0, np.float32)
    D = tc.gemm(A, B, C, model="h100")              # k = 0: D = C
    assert D.dtype == np.float32 and np.all(np.signbit(D))
    assert tc.gemm(np.ones((0, 4)), np.ones((4, 2))).shape == (0, 2)
    D = tc.gemm(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16), 1.0,
                model="v100", acc_format="fp16")    # float16 carriers, broadcast scalar C
    assert D.dtype == np.float32 and np.all(D == 3.0)
    d = tc.dot([1.0, 2.0], [3.0, 4.0], 0.5, model="ideal-fp32")
    assert isinstance(d, np.float32) and d == 11.5


def test_k_order():
    rng = np.random.default_rng(5)
    A = np.asarray(sf.round(rng.standard_normal((4, 21)) * 8, "fp16"), np.float32)
    B = np.asarray(sf.round(rng.standard_normal((21, 5)), "fp16"), np.float32)
    perm = rng.permutation(21)
    D1 = tc.gemm(A, B, model="v100", k_order=perm)
    D2 = tc.gemm(A[:, perm], B[perm, :], model="v100")
    assert np.array_equal(D1, D2)
    with pytest.raises(ValueError, match="permutation"):
        tc.gemm(A, B, k_order=np.zeros(21, int))


@pytest.mark.parametrize("model,fin,facc", [("v100", "fp16", "fp32"), ("h100", "bf16", "fp32"),
                                            ("a100", "tf32", "fp32"), ("ada", "e5m2", "fp16"),
                                            ("ideal-fp32", "fp16", "fp32"),
                                            ("ideal-fp16", "bf16", "fp16")])
def test_larger_gemm_matches_reference_on_samples(model, fin, facc):
    # 37 x 70 x 300: several row chunks and column tiles of the fast kernel, a padded last
    # block, and (ideal) the certificate on wide-range data; a sample of elements is checked
    # against the reference, and every element against dot (the same model, 1 x 1 problems).
    rng = np.random.default_rng(11)
    frac, emin, emax = R.FORMATS["fp32" if fin == "tf32" else fin]
    spread = min(emax, 12)
    A = rng.standard_normal((37, 70)) * np.exp2(rng.integers(-spread, spread // 2, (37, 70)))
    B = rng.standard_normal((70, 300)) * np.exp2(rng.integers(-spread, 2, (70, 300)))
    A = np.asarray(sf.round(A, "fp32" if fin == "tf32" else fin), np.float32)
    B = np.asarray(sf.round(B, "fp32" if fin == "tf32" else fin), np.float32)
    A[3, 5] = 0.0
    C = np.asarray(sf.round(rng.standard_normal((37, 300)), facc), np.float32)
    D = tc.gemm(A, B, C, model=model, in_format=fin, acc_format=facc)
    m = tc.get_model(model, fin, facc)
    mode = m.out_round.short
    of = m.out_frac
    for i, j in [(0, 0), (36, 299), (17, 128), (5, 127), (20, 200), (33, 64)]:
        r = R.dot(list(A[i].astype(float)), list(B[:, j].astype(float)), float(C[i, j]),
                  K=m.block, F=m.frac_bits, in_fmt=fin, acc_fmt=facc, out_frac=of, mode=mode)
        assert D[i, j] == r or (math.isnan(r) and np.isnan(D[i, j])), (i, j)
    for i, j in [(1, 2), (36, 0), (8, 255), (30, 129), (12, 77)]:
        assert D[i, j] == tc.dot(A[i], B[:, j], C[i, j], model=model, in_format=fin,
                                 acc_format=facc)


def test_results_do_not_depend_on_thread_count():
    import numba
    rng = np.random.default_rng(9)
    A = np.asarray(sf.round(rng.standard_normal((70, 90)), "fp16"), np.float32)
    B = np.asarray(sf.round(rng.standard_normal((90, 60)), "fp16"), np.float32)
    runs = []
    old = numba.get_num_threads()
    try:
        for nt in sorted({1, old}):
            numba.set_num_threads(nt)
            runs.append([tc.gemm(A, B, model="h100"), tc.gemm(A, B, model="ideal-fp32"),
                         tc.accum_gemm(A, B, acc_format="bf16", mode="sr", seed=3)])
    finally:
        numba.set_num_threads(old)
    for x, y in zip(runs[0], runs[-1]):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("model", ["ideal-fp32", "ideal-fp16", "v100"])
def test_read_only_operands_are_accepted_and_left_untouched(model, dtype):
    """Read-only A, B and C (e.g. np.broadcast_to views, memory maps) give the same result as
    writeable copies, and are not written to."""
    rng = np.random.default_rng(12)
    a = np.asarray(sf.round(rng.standard_normal((9, 7)), "fp16"), dtype)
    b = np.asarray(sf.round(rng.standard_normal((7, 5)), "fp16"), dtype)
    acc = "fp16" if model == "ideal-fp16" else "fp32"
    c = np.asarray(sf.round(rng.standard_normal((9, 5)), acc), np.float32)
    want = tc.gemm(a.copy(), b.copy(), c.copy(), model=model)
    ra, rb, rc = a.copy(), b.copy(), c.copy()
    for x in (ra, rb, rc):
        x.flags.writeable = False
    got = tc.gemm(ra, rb, rc, model=model)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(ra, a) and np.array_equal(rb, b) and np.array_equal(rc, c)


@pytest.mark.parametrize("model", ["v100", "h100", "ideal-fp32", "ideal-fp16",
                                   tc.TCModel("exact4", 4, None, "rz", "fp16", "fp32")])
def test_batched_gemm_is_a_loop_over_the_batch(model):
    """Leading batch dimensions broadcast as numpy.matmul's (A (2, 3, m, k) with B (3, k, n),
    A (1, m, k) with B (3, k, n)), C broadcast to the whole output; every matrix equals the 2-d
    gemm of its operands, bit for bit."""
    rng = np.random.default_rng(21)
    acc = "fp16" if model == "ideal-fp16" else "fp32"
    A = np.asarray(sf.round(rng.standard_normal((2, 3, 5, 7)), "fp16"), np.float32)
    B = np.asarray(sf.round(rng.standard_normal((3, 7, 6)), "fp16"), np.float32)
    C = np.asarray(sf.round(rng.standard_normal(6), acc), np.float32)
    D = tc.gemm(A, B, C, model=model, acc_format=acc)
    assert D.shape == (2, 3, 5, 6) and D.dtype == np.float32
    for i in range(2):
        for j in range(3):
            want = tc.gemm(A[i, j], B[j], np.broadcast_to(C, (5, 6)), model=model,
                           acc_format=acc)
            assert np.array_equal(D[i, j].view(np.uint32), want.view(np.uint32))
    D1 = tc.gemm(A[:1, 0], B, model=model, acc_format=acc)       # (1, 5, 7) x (3, 7, 6)
    assert D1.shape == (3, 5, 6)
    for j in range(3):
        assert np.array_equal(D1[j], tc.gemm(A[0, 0], B[j], model=model, acc_format=acc))
    Bt = np.swapaxes(np.ascontiguousarray(np.swapaxes(B, 1, 2)), 1, 2)   # transposed views
    assert np.array_equal(tc.gemm(A, Bt, C, model=model, acc_format=acc), D)


def test_batched_errors_name_the_element_and_the_shapes():
    A = np.ones((2, 3, 4), np.float32)
    A[1, 2, 3] = 0.1
    with pytest.raises(ValueError, match=r"A\[1, 2, 3\] = 0.1\d* is not a fp16 value"):
        tc.gemm(A, np.ones((4, 2), np.float32), model="v100")
    with pytest.raises(ValueError, match="batch dimensions"):
        tc.gemm(np.ones((2, 3, 4)), np.ones((3, 4, 2)))
    with pytest.raises(ValueError, match="does not broadcast"):
        tc.gemm(np.ones((2, 3, 4)), np.ones((4, 2)), np.ones((3, 3)))
    assert tc.gemm(np.ones((0, 3, 4)), np.ones((4, 2))).shape == (0, 3, 2)


def test_batched_accum_gemm_draws_the_bits_of_its_global_indices():
    """Stochastic rounding of a batch: element (i, j) of matrix b has the global index
    (b m + i) n + j, so the batch equals a loop over it with index_offset = b m n, and a piece
    of a problem computed with its offset gives the bits the whole gives it."""
    rng = np.random.default_rng(22)
    A = np.asarray(sf.round(rng.standard_normal((3, 4, 40)), "fp16"), np.float32)
    B = np.asarray(sf.round(rng.standard_normal((40, 5)), "fp16"), np.float32)
    kw = dict(acc_format="bf16", mode="sr", seed=7)
    D = tc.accum_gemm(A, B, **kw)
    assert D.shape == (3, 4, 5)
    for b in range(3):
        assert np.array_equal(D[b], tc.accum_gemm(A[b], B, index_offset=b * 20, **kw))
    assert not np.array_equal(D[1], tc.accum_gemm(A[1], B, **kw))   # the offset matters
    assert np.array_equal(tc.gemm(A, B, model=tc.Accumulator("bf16", "sr"), seed=7), D)
    with pytest.raises(ValueError, match="Accumulator models only"):
        tc.gemm(A, B, model="v100", index_offset=3)


@pytest.mark.parametrize("mode", ["rne", "rtz", sf.Mode.RNE])
def test_a_seed_with_a_deterministic_mode_is_refused(mode):
    A = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="only used by mode 'sr'.*deterministic"):
        tc.accum_gemm(A, A.T, acc_format="fp16", mode=mode, seed=1)
    with pytest.raises(ValueError, match="only used by mode 'sr'"):
        tc.gemm(A, A.T, model=tc.Accumulator("fp16", mode), seed=1)


def test_tcmodel_rounding_is_a_mode():
    """out_round is a softfloat.Mode; the names "rz" / "rne" and every alias of RTZ / RNE
    are accepted, other modes are not; repr and describe show it."""
    for spelling in ("rz", "rtz", "toward_zero", sf.Mode.RTZ, 2):
        m = tc.TCModel("x", 4, 23, spelling, "fp16", "fp32")
        assert m.out_round is sf.Mode.RTZ and not m.rne
        assert m == tc.TCModel("x", 4, 23, "rz", "fp16", "fp32")
    assert tc.TCModel("x", 4, 23, "nearest", "fp16", "fp16").out_round is sf.Mode.RNE
    for bad in ("rup", "sr", sf.Mode.RNA, "bogus"):
        with pytest.raises(ValueError, match="out_round must be Mode.RTZ"):
            tc.TCModel("x", 4, 23, bad, "fp16", "fp32")
    v = tc.get_model("v100")
    assert "out_round=Mode.RTZ" in repr(v) and "RTZ to 23 fraction bits" in v.describe()
    assert eval(repr(v), {"TCModel": tc.TCModel, "Mode": sf.Mode}) == v
