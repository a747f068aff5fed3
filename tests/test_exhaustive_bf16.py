"""Every one of the 2^32 float32 inputs rounded to bf16 in the six deterministic modes, checked
as tests/test_exhaustive.py checks fp16 (its independent float64 checker, flag counts, the
calls without flags, stochastic rounding with and without flags, ml_dtypes' bfloat16 cast for
rne).  A file of its own so that pytest-xdist, which runs each file whole in one process, runs
the two 2^32 checks side by side (together in one file they kept one test process busy for
about 7 of a 2-core host's 13 minutes while the other had finished)."""

from __future__ import annotations

import pytest
from test_exhaustive import every_float32


@pytest.mark.slow
def test_every_float32_rounds_correctly_bf16():
    every_float32("bf16")
