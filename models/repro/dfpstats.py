"""Int32 overflow statistics of DFP-16 GEMMs by chain length (Das et al., ICLR 2018).

Provides :func:`chain_stats` (replays captured DFP-16 GEMM operand pairs through
``softfloat.dfp.gemm`` at each chain length, once with wrapping int32 lanes and once with
saturating ones, and counts the chains that overflow), :func:`merge_chain_stats` and
:data:`CHAIN_LENGTHS`.

Why chains are bounded (docs/dfp16.md): DFP-16 integers satisfy |i| <= 2^15 - 1, so one product
is at most (2^15 - 1)^2 = 2^30 - 2^16 + 1 and the pair of one VNNI instruction at most
2^31 - 2^17 + 2 < 2^31 - 1: a chain of 2 can never overflow int32.  Each further pair can add
up to 2^31 again, so a chain of L products can reach about L * 2^29 in the worst case; on real
data the partial sums grow more slowly (signs cancel, most values are far below the shared
maximum), and these statistics measure how much more slowly.  "Without the flush" is a single
chain over the whole reduction (``chain_len=None``).

Imports numpy and softfloat only.
"""

from __future__ import annotations

import math

__all__ = ["CHAIN_LENGTHS", "chain_stats", "merge_chain_stats"]

#: products per int32 chain; None = the whole reduction dimension in one chain (no flush)
CHAIN_LENGTHS = (2, 4, 8, 16, 32, 64, 128, 256, None)


def _key(length):
    return "K" if length is None else str(length)


def chain_stats(pairs, lengths=CHAIN_LENGTHS):
    """Overflow counts of the GEMMs ``pairs`` (a list of (A, B) DFPTensors) per chain length.

    Returns {length key: {"gemms", "chains", "overflowed_chains", "wrap_events",
    "saturated_chains", "saturation_events", "max_abs_chain_sum", "max_k"}} where chains
    counts (output element, chain) pairs; "K" is the single chain over the whole reduction.
    """
    from softfloat import dfp

    out = {}
    for length in lengths:
        acc = {"gemms": 0, "chains": 0, "overflowed_chains": 0, "wrap_events": 0,
               "saturated_chains": 0, "saturation_events": 0, "max_abs_chain_sum": 0,
               "max_k": 0}
        for a, b in pairs:
            m, k = a.shape
            n = b.shape[1]
            _, w = dfp.gemm(a, b, chain_len=length, overflow="wrap", return_stats=True)
            _, s = dfp.gemm(a, b, chain_len=length, overflow="saturate", return_stats=True)
            acc["gemms"] += 1
            acc["chains"] += m * n * w["chains_per_output"]
            acc["overflowed_chains"] += w["overflowed_chains"]
            acc["wrap_events"] += w["wrap_events"]
            acc["saturated_chains"] += s["overflowed_chains"]
            acc["saturation_events"] += s["saturation_events"]
            acc["max_abs_chain_sum"] = max(acc["max_abs_chain_sum"], w["max_abs_chain_sum"])
            acc["max_k"] = max(acc["max_k"], k)
        out[_key(length)] = acc
    return out


def merge_chain_stats(parts):
    """Sum the counters of several :func:`chain_stats` results (maxima stay maxima) and add
    the shares "overflow_share" (overflowed / chains), "saturation_share" and "headroom_bits" (31 -
    log2(largest |chain sum|): how far the largest chain sum stayed below int32's limit; 0 when
    a chain overflowed)."""
    out = {}
    for p in parts:
        for key, d in p.items():
            acc = out.setdefault(key, dict.fromkeys(d, 0))
            for name, v in d.items():
                acc[name] = max(acc[name], v) if name.startswith("max") else acc[name] + v
    for d in out.values():
        d["overflow_share"] = d["overflowed_chains"] / d["chains"] if d["chains"] else None
        d["saturation_share"] = d["saturated_chains"] / d["chains"] if d["chains"] else None
        # max_abs_chain_sum is the largest |int32 lane| at a flush: a wrapped lane's value is
        # meaningless, so with any overflow the headroom is reported as 0 bits
        mx = d["max_abs_chain_sum"]
        if d["overflowed_chains"]:
            d["headroom_bits"] = 0.0
        else:
            d["headroom_bits"] = 31.0 - math.log2(mx) if mx > 0 else None
    return out
