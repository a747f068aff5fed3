"""The arithmetic's array kernels (add, sub, mul, div, sqrt, fma) and their one entry, ``run``.

Operands are 1-d contiguous float32 or float64 arrays (all of one dtype), each either full length
(step 1) or a single broadcast element (step 0); the Python wrapper (softfloat.arith) expands any
other broadcasting.  Both kernels run on the one chunked driver (softfloat._driver): fixed chunks,
one row of flag counts per chunk, stochastic-rounding bits of output element i drawn from
(key, base + i), one thread for small arrays; results and counts never depend on the thread
count.

* float32 operands into a float32 carrier of a signed format with a zero and m >= 1: the
  vectorised passes of softfloat._kernels_arith_f32 (exact-result proxies rounded by sf.round's
  own vectorised kernel);
* everything else (float64 operands or carriers, unsigned / zero-less / 1-bit-significand
  formats): ``_each_chunk``, softfloat._arith's scalar op on every element (it ends in
  round_value).  The two give the same results and flag counts where both apply
  (tests/test_arith_fast.py).

Imports numpy, numba and the sibling kernel modules only.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from . import _kernels_arith_f32 as KV
from ._arith import ADD, DIV, FMA, FMA_EXACT, MUL, MUL_EXACT, SQRT, SUB, scalar_op
from ._driver import INNER, add_flag_counts, launch, record
from ._roundpack import SR, format_params_of
from .formats import FormatParams
from .rng import random_bits

# The operation codes (softfloat._arith's) are part of this module's interface.
__all__ = ["ADD", "DIV", "FMA", "FMA_EXACT", "MUL", "MUL_EXACT", "SQRT", "SUB", "run",
           "vectorised"]


@njit(cache=True, **INNER)
def _each_chunk(k, lo, hi, c, a, sa, b, sb, cc, sc, out, counts):
    """out[i] = round(a[i*sa] (op) b[i*sb] [, cc[i*sc]]) for i in [lo, hi), element by element."""
    fp = format_params_of(k)
    for i in range(lo, hi):
        u = random_bits(k.key, k.base + i) if k.mode == SR else np.uint64(0)
        r, fl = scalar_op(k.op, a[i * sa], b[i * sb], cc[i * sc], fp, k.mode, u, k.rbits)
        out[i] = r
        if k.want_flags:
            add_flag_counts(counts, c, fl)


#: The element-by-element kernel's record: the format's fields, the operation code and the call.
ArithEach = record("ArithEach", FormatParams._fields, _each_chunk, __name__,
                   dynamic=(("op", np.int64), ("mode", np.int64), ("key", np.uint64),
                            ("base", np.int64), ("rbits", np.int64), ("want_flags", np.bool_)))


@functools.lru_cache(maxsize=256)
def _static(fp):
    """ArithEach's static part for the FormatParams fp (made once per format)."""
    return ArithEach.params(*fp)


def vectorised(fmt, a, out) -> bool:
    """Whether float32 operands take the vectorised passes: float32 operands and carrier, except
    for the formats whose rules only round_value has (unsigned, zero-less and 1-bit-significand
    formats)."""
    return (a.dtype == np.float32 and out.dtype == np.float32 and fmt.signed and fmt.zero
            and fmt.man_bits >= 1)


def run(op, a, sa, b, sb, c, sc, out, fmt, mode, key, base, rbits, want_flags, counts):
    """out = round(a (op) b [, c]) (flat arrays; steps sa, sb, sc in {0, 1}; sqrt reads a only)
    with the driver's flag table ``counts``; op one of softfloat._arith's codes."""
    if not out.size:
        return
    if vectorised(fmt, a, out):
        # float32 products are exact: MUL_EXACT / FMA_EXACT are the vectorised MUL / FMA
        op = {MUL_EXACT: MUL, FMA_EXACT: FMA}.get(op, op)
        KV.run(op, a, sa, b, sb, c, sc, out, fmt, mode, key, base, rbits, want_flags, counts)
        return
    launch(_static(fmt.kernel_params()),
           (int(op), int(mode), np.uint64(key), int(base), int(rbits), bool(want_flags)),
           out.size, a, sa, b, sb, c, sc, out, counts)
