"""bench/bars.py: the issue bars matched to ``python -m bench``'s row names, and the verdicts
its summary prints (ratio rows hold at or below their bar, speed rows at or above)."""

from __future__ import annotations

import re

from bench import bars

#: row names as the bench modules print them (a `make bench` run, 2026-11-29), with the bar
#: and kind each must get; None where the issues set no bar
NAMES = [
    ("sf.round fp16 rne N(0,1)", (1.5, "ratio")),
    ("sf.round e5m2 rne nan/inf 1%", (1.5, "ratio")),
    ("sf.round bf16 sr subnormal", (2.0, "ratio")),
    ("sf.round float64 -> bf16 rne gradient", (2.0, "ratio")),
    ("sf.add fp16 rne gradient", (2.0, "ratio")),
    ("sf.mul bf16 rne NaN/Inf 1%", (2.0, "ratio")),
    ("sf.add bf16 sr N(0,1)", None),
    ("sf.div fp16 rne overflow", (3.0, "ratio")),
    ("sf.sqrt bf16 rne subnormal", (3.0, "ratio")),
    ("sf.fma fp16 rne N(0,1)", (4.0, "ratio")),
    ("sf.add fp16 rne, 32x64, per call", None),
    ("tc.gemm ideal-fp32 fp16->fp32 n=1024", (0.4, "speed")),
    ("tc.gemm ideal-fp32 bf16->fp32 n=1024", None),
    ("tc.gemm a100 tf32->fp32 n=1024", (0.05, "speed")),
    ("tc.gemm b200 bf16->fp32 n=1024", (0.05, "speed")),
    ("tc.gemm v100 32x64x64 + bias", None),
    ("MLP train step: TC V100 model, dynamic", (5.0, "ratio")),
    ("MLP train step: DFP-16 (int16 GEMMs, shared exponents)", (5.0, "ratio")),
    ("mx.quantize mxfp8_e4m3 rceil", (3.0, "ratio")),
    ("mx.quantize mxint8 floor", (3.0, "ratio")),
    ("mx.quantize nvfp4", (3.0, "ratio")),
    ("mx.quantize nvfp4 tensor_scale", (3.0, "ratio")),
    ("mx.quantize nvfp4 mode=sr", None),
    ("mx.quantize nvfp4 exact_division", None),
    ("mx.gemm ideal-fp32 nvfp4 tensor_scale n=1024", (0.3, "speed")),
    ("mx.gemm blocked mxfp8_e4m3 n=256", None),
    ("autograd O0 epoch", (1.3, "ratio")),
    ("autograd O2 fp16 ideal-fp32 epoch", (2.0, "ratio")),
    ("O2 float64-GEMM floor epoch (not a mode)", None),
    ("numba compile, cold cache", (1.0, "ratio")),
    ("dfp.gemm P=16 n=1024 one chain, saturate", None),
    ("ml_dtypes bfloat16 round trip", None),
]


def test_every_bench_row_name_gets_its_bar():
    for name, want in NAMES:
        assert bars.bar_of(name) == want, name
    # every entry of the table serves some row
    for pattern, _, _ in bars.BARS:
        assert any(re.search(pattern, n) for n, _ in NAMES), pattern


def test_verdicts_compare_the_right_way():
    rows = [
        {"name": "sf.round fp16 rne gradient", "ratio": 1.5},          # at the bar: holds
        {"name": "sf.round fp16 rne subnormal", "ratio": 1.51},        # above
        {"name": "tc.gemm h100 fp16->fp32 n=1024", "ratio": 10.0, "speed": 0.1},
        {"name": "tc.gemm ideal-fp32 fp16->fp32 n=1024", "ratio": 2.6, "speed": 0.38},
        {"name": "sf.round rows compiled for avx2", "ratio": None},     # no bar, no value
        {"name": "sf.round fp16 sr N(0,1)", "ratio": None},             # bar, but no value
        {"name": "numpy float32 add fp16 N(0,1)", "ratio": None},
    ]
    got = {name: (value, holds) for name, value, _, _, holds in bars.check(rows)}
    assert got == {"sf.round fp16 rne gradient": (1.5, True),
                   "sf.round fp16 rne subnormal": (1.51, False),
                   "tc.gemm h100 fp16->fp32 n=1024": (0.1, True),
                   "tc.gemm ideal-fp32 fp16->fp32 n=1024": (0.38, False)}
    lines = bars.summary(rows)
    assert lines[0] == "2 of 4 rows with an issue bar hold it"
    assert len(lines) == 3
    assert "sf.round fp16 rne subnormal" in lines[1] and "ratio 1.510 (bar <= 1.5)" in lines[1]
    assert "speed 0.380 (bar >= 0.4)" in lines[2]
    assert bars.summary([{"name": "float32 copy", "ratio": 1.0}]) == [
        "no row with an issue bar was timed"]
