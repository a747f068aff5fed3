"""Issue #13's and #14's bars, matched to the rows of ``python -m bench`` by name.

``BARS`` is the README Status table's "bar" column in machine-readable form: each entry is
(regular expression on a row's name, bar, what is compared).  "ratio" rows hold their bar when
ratio <= bar (a time ratio against the row's baseline: lower is faster); "speed" rows when
speed >= bar (the baseline's time over the row's: higher is faster).  A row matches the first
entry whose pattern it matches (``re.search``); rows that match none have no bar (other
libraries, the small per-call rows, stochastic rounding of the arithmetic, the DFP rows:
issue #13 names none for them).

``check(rows)`` returns the rows that carry a bar with the verdict; ``summary(rows)`` the lines
``python -m bench`` prints after the last module, so that "every bar holds" can be read off
one run.  Only printed, never asserted: the figures vary between runs (README Status).
"""

from __future__ import annotations

import re

#: (pattern, bar, "ratio" | "speed"), in the README Status table's order
BARS = (
    (r"^sf\.round (fp16|bf16|e4m3fn|e5m2) rne ", 1.5, "ratio"),
    (r"^sf\.round (fp16|bf16|e4m3fn|e5m2) sr ", 2.0, "ratio"),
    (r"^sf\.round float64 -> (fp16|bf16) rne ", 2.0, "ratio"),
    (r"^sf\.(add|mul) (fp16|bf16) rne ", 2.0, "ratio"),
    (r"^sf\.(div|sqrt) (fp16|bf16) rne ", 3.0, "ratio"),
    (r"^sf\.fma (fp16|bf16) rne ", 4.0, "ratio"),
    (r"^tc\.gemm ideal-fp32 fp16->fp32 n=1024$", 0.4, "speed"),
    (r"^tc\.gemm (v100|t4|a100|ada|h100|b200) \S+ n=1024$", 0.05, "speed"),
    (r"^MLP train step: (TC V100 model|DFP-16)", 5.0, "ratio"),
    (r"^mx\.quantize (mx\S+ (floor|ceil|even|rceil)|nvfp4|nvfp4 tensor_scale)$", 3.0, "ratio"),
    (r"^mx\.gemm ideal-fp32 ", 0.3, "speed"),
    (r"^autograd O0 epoch$", 1.3, "ratio"),
    (r"^autograd O2 fp16 ideal-fp32 epoch$", 2.0, "ratio"),
    (r"^numba compile, (cold cache|from cache)$", 1.0, "ratio"),
)

_COMPILED = tuple((re.compile(p), bar, kind) for p, bar, kind in BARS)


def bar_of(name: str):
    """(bar, "ratio" | "speed") of the row named ``name``, or None."""
    for pat, bar, kind in _COMPILED:
        if pat.search(name):
            return bar, kind
    return None


def check(rows) -> list[tuple[str, float, float, str, bool]]:
    """(name, value, bar, kind, holds) for each row with a bar and a value to compare."""
    out = []
    for row in rows:
        found = bar_of(row["name"])
        if found is None:
            continue
        bar, kind = found
        value = row.get(kind)
        if not isinstance(value, (int, float)):
            continue
        holds = value <= bar if kind == "ratio" else value >= bar
        out.append((row["name"], float(value), bar, kind, holds))
    return out


def summary(rows) -> list[str]:
    """The lines printed after the last module: how many rows hold their bar, then each row
    that does not, with its value and bar."""
    checked = check(rows)
    if not checked:
        return ["no row with an issue bar was timed"]
    missed = [c for c in checked if not c[4]]
    lines = [f"{len(checked) - len(missed)} of {len(checked)} rows with an issue bar hold it"]
    for name, value, bar, kind, _ in missed:
        rel = "<=" if kind == "ratio" else ">="
        lines.append(f"  above the bar: {name:<48s} {kind} {value:.3f} (bar {rel} {bar:g})")
    return lines
