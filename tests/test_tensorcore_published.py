"""The 70 published Tensor Core pass conditions reproduced bit for bit by softfloat.tensorcore.

Source: Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS
2021, and their test programs (north-numerical-computing/tensor-cores-numerical-behavior); the
cases are kept in tests/data/tensorcore-published-cases.json, whose "description" names them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from softfloat import tensorcore as tc
from softfloat.bits import from_bits, to_bits

DATA = Path(__file__).resolve().parent / "data" / "tensorcore-published-cases.json"


def _load():
    if not DATA.is_file():
        pytest.fail(f"published Tensor Core cases not found at {DATA}; the file is part of the "
                    "repository (tests/data/): restore it from git", pytrace=False)
    return json.loads(DATA.read_text())["cases"]


CASES = _load() if DATA.is_file() else []


def _words(hexes, fmt):
    width = 32 if fmt in ("fp32", "tf32") else 16
    dtype = np.uint32 if width == 32 else np.uint16
    # tf32 operands are fp32 words (the model ignores their 13 low fraction bits).
    return from_bits(np.array([int(h, 16) for h in hexes], dtype=dtype),
                     "fp32" if fmt == "tf32" else fmt)


def test_data_file_present():
    cases = _load()
    assert len(cases) == 70


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_published_case(case):
    fin, facc = case["in_format"], case["acc_format"]
    a = _words(case["a"], fin)
    b = _words(case["b"], fin)
    c = _words([case["c"]], facc)[0]
    d = tc.dot(a, b, c, model=case["device_model"], in_format=fin, acc_format=facc)
    got = int(to_bits(np.array([d]), facc)[0])
    assert got == int(case["expected"], 16), (
        f"{case['name']} ({case['property']}): got {got:#x}, published {case['expected']}")


def test_published_cases_as_one_gemm():
    """The same cases through gemm: stacked rows of A against a block-diagonal B, so every
    output element of interest is one case (checks the fast kernel, not only dot)."""
    groups = {}
    for case in CASES:
        groups.setdefault((case["device_model"], case["in_format"], case["acc_format"]),
                          []).append(case)
    for (dev, fin, facc), cases in groups.items():
        n = len(cases[0]["a"])
        same = [cs for cs in cases if len(cs["a"]) == n]
        A = np.stack([_words(cs["a"], fin) for cs in same])
        B = np.stack([_words(cs["b"], fin) for cs in same], axis=1)
        C = np.array([[_words([cs["c"]], facc)[0] for _ in same] for cs in same])
        D = tc.gemm(A, B, C, model=dev, in_format=fin, acc_format=facc)
        got = to_bits(np.diagonal(D).copy(), facc)
        want = [int(cs["expected"], 16) for cs in same]
        assert [int(g) for g in got] == want, f"{dev} {fin}->{facc}"
