"""The settling pass of the arithmetic compiles to plain vector stores on the AVX2 code path.

A store of ``x[j] if not c else a`` back into x[j] is turned by LLVM into a masked store
(vpmaskmovd / vmaskmovps) when it targets AVX2.  They are slow on AMD Zen 3 cores (a loop
storing that way: 0.76 ms per 1M elements, 0.25 ms with a plain store, one thread), and made
sf.add, sf.mul and sf.sqrt on NaN-sprinkled fp16 data 1.5-1.9x slower on such a host (softfloat._kernels_arith_f32._settle; the rounding
kernel's Inf/NaN pass, softfloat._kernels_round_vec._special_pass, had the same fault earlier).
Intel cores run them at the speed of a plain store, so a timing on an Intel or AVX-512 host
does not show it: this test compiles the pass for Haswell (the AVX2 code path of any x86-64
host) in a fresh process and cache, and reads the machine code.  The same check on a select
stored over its own element shows that it finds masked stores where LLVM makes them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Haswell's features, as the README's AVX2 timings use them (no AVX-512 of the host).
HASWELL = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+cx8,+f16c,+fma,+fxsr,+lzcnt,+mmx,+movbe,"
           "+popcnt,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")

SCRIPT = r"""
import json
import numpy as np
from numba import njit
from softfloat import _kernels_arith_f32 as KV
from softfloat._arith import ADD, DIV

# as _settle_marked calls it: one, ones and nil are run-time values (fields of the record)
@njit
def settle_add32(xs, ys, buf, os, rt, counts):
    return KV._settle(ADD, xs, ys, ys, buf, os, rt[0], rt[1], rt[2], True, np.uint32(0x7C00),
                      np.uint32(0xFC00), False, counts, 0)

@njit
def settle_div64(xs, ys, buf, os, rt, counts):
    return KV._settle(DIV, xs, ys, ys, buf, os, rt[0], rt[1], rt[2], False, np.uint32(0x7C00),
                      np.uint32(0xFC00), True, counts, 0)

# the settling pass's stores before they became vmerges: the element loaded, then selected
@njit
def select_store(x, os):
    for j in range(x.size):
        out = os[j]
        out = np.uint32(0x7FC00000) if np.isnan(x[j]) else out
        os[j] = out

x = np.ones(64, np.float32)
counts = np.zeros((1, 8), np.int64)
settle_add32(x, x, np.zeros(64, np.uint32), np.zeros(64, np.uint32),
             np.array([1, 0xFFFFFFFF, 0], np.uint32), counts)
settle_div64(x, x, np.zeros(64, np.uint64), np.zeros(64, np.uint32),
             np.array([1, 0xFFFFFFFFFFFFFFFF, 0], np.uint64), counts)
select_store(x, np.zeros(64, np.uint32))
print(json.dumps({f.__name__: "\n".join(f.inspect_asm().values())
                  for f in (settle_add32, settle_div64, select_store)}))
"""

#: a masked store in AT&T syntax: v(p)maskmov{d,q,ps,pd} %mask? %src, %mask, mem (memory last)
_MASKED_STORE = re.compile(r"\bv(?:p)?maskmov\w*\s+%\w+,\s*%\w+,\s*[^%\s]*\(")


def masked_stores(asm: str) -> int:
    return len(_MASKED_STORE.findall(asm))


def test_settling_pass_has_no_masked_store_on_avx2(tmp_path):
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=HASWELL,
               NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    asm = json.loads(out.stdout.strip().splitlines()[-1])
    # the check finds what LLVM makes of a select stored over its own element
    assert masked_stores(asm["select_store"]) > 0
    assert "ymm" in asm["settle_add32"]          # the pass is vectorised, 256-bit
    assert masked_stores(asm["settle_add32"]) == 0
    assert masked_stores(asm["settle_div64"]) == 0


def test_masked_store_pattern():
    assert masked_stores("\tvpmaskmovd\t%ymm7, %ymm0, (%rdx,%r11,4)\n") == 1
    assert masked_stores("\tvmaskmovps\t%ymm1, %ymm2, 32(%rsi)\n") == 1
    assert masked_stores("\tvpmaskmovd\t(%rdx), %ymm0, %ymm1\n") == 0      # a masked load
    assert masked_stores("\tvmovups\t%ymm0, (%rsi,%r12,4)\n") == 0
