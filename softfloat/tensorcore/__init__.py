"""softfloat.tensorcore: bit-exact models of NVIDIA Tensor Core MMA (V100 to B200) and a
generic accumulation-precision GEMM.

Real Tensor Cores do not compute an IEEE fp32 dot product: the products are exact, every addend
(c included) is aligned to the largest exponent of its block and truncated to F fraction bits,
the block is summed exactly and rounded once (RZ into fp32, RNE into fp16), and blocks of K
products are chained in k order (docs/tensorcore-models.md, sections 2 and 3).

    from softfloat import tensorcore as tc
    D = tc.gemm(A, B, C, model="a100", in_format="fp16", acc_format="fp32")
    d = tc.dot(a, b, 0.0, model="h100", in_format="bf16")
    tc.get_model("h100", "fp16", "fp16"); tc.list_models(); tc.TCModel(...)
    D = tc.accum_gemm(A, B, acc_format="fp16", mode="sr", order="pairwise", seed=0)

Presets: ``ideal-fp32`` / ``ideal-fp16`` (the exact dot product c + sum a_k b_k rounded once,
RNE), ``v100``, ``t4``, ``a100``, ``ada``, ``h100``, ``b200`` with the input formats of spec
section 3 (fp16, bf16, tf32, e4m3fn, e5m2) and their fp16-accumulate variants.  Hopper fp8 with
fp16 accumulation and B200 fp8 are unresolved (spec 8.2, 8.3) and raise ValueError saying so;
a custom TCModel can still be built.

Semantics and choices (see the spec section given):
* Inputs are carriers (float16/32/64 arrays) whose values lie on in_format's grid; an element
  that does not is a ValueError naming it, unless ``round_inputs`` names a rounding mode to
  apply first.  tf32 operands are float32 words whose 13 low mantissa bits the hardware ignores
  (truncation, FHMP21 tf32 B1): any float32 is accepted and truncated (a float64 carrier
  must hold float32 values); use round_inputs="rna" to mimic cvt.rna.tf32.f32.  C holds
  acc_format values.
* D[i, j] = DOT(A[i, :], B[:, j], C[i, j]): chained BLOCK_STEPs over k ascending, the last block
  zero-padded; ``k_order`` (a permutation of range(k)) changes the order.
* Special values follow spec step 1 per block (NaN in, 0 * Inf, Inf - Inf -> NaN; one infinity
  -> it; overflow of a block result -> +-Inf even under RZ, spec 8.5).  NaN results are NaN
  carriers (the hardware's canonical 0x7FFFFFFF / 0x7FFF are not kept: compare NaN as "is NaN").
* Zeros: an exact cancellation or an all-zero block gives +0, also when c = -0 (spec 8.6, both
  published models); a negative result that truncates or rounds to 0 gives -0 (sign * 0 in
  ROUND, KM's choice; MMA-Sim gives +0; unverified).  With k = 0, D = C.
* FLOOR (the KM lower clamp of the alignment exponent, spec 8.1) is left out: the published
  models disagree and no published case needs it.  Results can differ from KM's only when every
  addend of a block lies below KM's floor (2^-19 .. 2^-21 for fp16 output, 2^-132 / 2^-133 for
  fp32 output).

Methods.  Hardware models: Numba kernels on float64 SIMD lanes in which every operation is
exact (integers times powers of two; softfloat/tensorcore/_kernels.py).  Ideal models ("exact
sum, one rounding", exact for every input): numpy's float64 matmul (every product of these
inputs is exact in float64), then per element either an exactness certificate (the inputs'
exponents and a Cauchy-Schwarz bound prove that no addition of any summation order rounded) or
an error-bound bracket that rounds to a single value; the few elements neither certifies are
recomputed exactly (error-free extraction plus a fixed-point superaccumulator;
softfloat/tensorcore/_exact.py).  Small problems run on one thread (softfloat/tensorcore/
_threads.py); results never depend on the thread count.

Imports numpy, numba and softfloat only.
"""

from __future__ import annotations

import numpy as np

from ..formats import get_format
from ._inputs import permute_k, prepare
from ._models import DEVICES, PRESETS, UNRESOLVED, TCModel, get_model, list_models
from ._run import run_model
from ._threads import serial_if_small
from .accum import Accumulator, accum_gemm

__all__ = ["gemm", "dot", "TCModel", "get_model", "list_models", "PRESETS", "DEVICES",
           "UNRESOLVED", "Accumulator", "accum_gemm"]


def _resolve(model, in_format, acc_format) -> TCModel:
    if isinstance(model, TCModel):
        for label, given, own in (("in_format", in_format, model.in_format),
                                  ("acc_format", acc_format, model.acc_format)):
            if given is not None and get_format(given) != own:
                raise ValueError(f"{label}={given!r} conflicts with the TCModel's {label} "
                                 f"{own.name}; leave it out or build another TCModel")
        return model
    return get_model(model, "fp16" if in_format is None else in_format, acc_format)


def _compute(A, B, C, model, in_format, acc_format, round_inputs, k_order, seed, sr_bits,
             flags, vector):
    if isinstance(model, Accumulator):
        return accum_gemm(A, B, C, accumulator=model, in_format=in_format,
                          acc_format=acc_format, round_inputs=round_inputs, k_order=k_order,
                          seed=seed, sr_bits=sr_bits, flags=flags, vector=vector)
    if seed is not None or sr_bits is not None or flags is not None:
        raise ValueError("seed, sr_bits and flags apply to Accumulator models only (the Tensor "
                         "Core models are deterministic and raise no flags)")
    tcm = _resolve(model, in_format, acc_format)
    with serial_if_small(_work(A, B)):
        ideal = tcm.frac_bits is None and tcm.block is None
        a, b, c, *st = prepare(A, B, C, tcm.in_format, tcm.acc_format, round_inputs,
                               vector=vector, stats=ideal)
        # (Row and column statistics do not depend on the order of k; B's source does.)
        a, b = permute_k(a, b, k_order)
        if st and k_order is not None:
            st = [st[0][:4] + (b,)]
        return run_model(tcm, a, b, c, st[0] if st else None)


def _work(A, B) -> int:
    """m * n * k (or the operand sizes when they are not matrices yet): the thread decision."""
    sa, sb = np.shape(A), np.shape(B)
    if len(sa) == 2 and len(sb) == 2:
        return sa[0] * sa[1] * sb[1]
    return int(np.prod(sa)) + int(np.prod(sb))


def gemm(A, B, C=None, *, model="a100", in_format=None, acc_format=None, round_inputs=None,
         k_order=None, seed=None, sr_bits=None, flags=None):
    """D = A @ B + C as the Tensor Core model computes it (see the module docstring).

    Parameters
    ----------
    A, B : 2-d float arrays (m x k, k x n) of in_format values (carriers).
    C : None (zeros), a scalar or an array broadcastable to (m, n) of acc_format values.
    model : preset name ("ideal-fp32", "ideal-fp16", "v100", "t4", "a100", "ada", "h100",
        "b200"), a TCModel, or an Accumulator (the generic accumulation GEMM, see accum_gemm).
    in_format : input format (default fp16; a TCModel brings its own).
    acc_format : accumulator format (default fp32; fp16 for "ideal-fp16").
    round_inputs : None, or a deterministic rounding mode applied to A and B first.
    k_order : None, or a permutation of range(k): the order in which k is visited.
    seed, sr_bits, flags : stochastic rounding and IEEE flag counts, Accumulator models only.

    Returns
    -------
    m x n array of acc_format values in its carrier dtype (float32 for fp32/fp16/bf16).
    """
    return _compute(A, B, C, model, in_format, acc_format, round_inputs, k_order, seed,
                    sr_bits, flags, vector=False)


def dot(a, b, c=0.0, *, model="a100", in_format=None, acc_format=None, round_inputs=None,
        k_order=None, seed=None, sr_bits=None, flags=None):
    """d = c + sum_k a[k] b[k] as the model computes it (gemm of a 1 x k by a k x 1 problem).

    a, b : 1-d arrays of equal length (in_format values); c : a scalar acc_format value.
    Returns a numpy scalar of acc_format's carrier dtype.
    """
    d = _compute(a, b, c, model, in_format, acc_format, round_inputs, k_order, seed, sr_bits,
                 flags, vector=True)
    return d[0, 0]
