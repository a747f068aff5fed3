"""softfloat.tensorcore: bit-exact models of NVIDIA Tensor Core MMA (V100 to B200) and a
generic accumulation-precision GEMM.

Real Tensor Cores do not compute an IEEE fp32 dot product: the products are exact, every addend
(c included) is aligned to the largest exponent of its block and truncated to F fraction bits,
the block is summed exactly and rounded once (RZ into fp32, RNE into fp16), and blocks of K
products are chained in k order (docs/tensorcore-models.md, sections 2 and 3).

    from softfloat import tensorcore as tc
    D = tc.gemm(A, B, C, model="a100", in_format="fp16", acc_format="fp32")
    D = tc.gemm(A3, B3, model="h100")     # leading batch dimensions, broadcast as numpy.matmul
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
* Batches: A (..., m, k) and B (..., k, n) with leading batch dimensions broadcast against each
  other as numpy.matmul does, C broadcast to (..., m, n); every matrix of the batch is one GEMM
  (as a batched cuBLAS call runs), the same as a loop over the batch.
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

Methods (one path per kind of model).
* Hardware models (F finite): the SIMD tile kernel (softfloat/tensorcore/_tile.py) on float64
  lanes in which every operation is exact (integers times powers of two), its shapes chosen per
  instruction set (softfloat/_intrinsics.py), then the scalar reference (_superacc.dot_chain on
  _scalar's block steps) on the elements whose inputs hold Inf/NaN or that came near overflow.
* Ideal models (K = F = infinity; "exact sum, one rounding", exact for every input): numpy's
  float64 matmul (every product of these inputs is exact in float64), then per element an
  exactness certificate, an error-bound bracket or a compensated sum that rounds to a single
  value (_certify.py); the few elements none certifies are recomputed exactly by error-free
  extraction and a fixed-point superaccumulator (_superacc.py), which also evaluates custom
  records with exact alignment and finite blocks.
* Operands: shapes, the grid check (softfloat's encoder, behind a vectorised filter) and the
  conversions in _prep.py.  Small problems run on one thread (softfloat/_threads.py); results
  never depend on the thread count.

Imports numpy, numba and softfloat only.
"""

from __future__ import annotations

import numpy as np

from .._intrinsics import LANES, ROWS
from .._threads import serial_if_small
from ..formats import get_format
from . import _certify as CE
from . import _superacc as SA
from . import _tile as T
from ._models import DEVICES, PRESETS, UNRESOLVED, TCModel, get_model, list_models
from ._prep import as_float64, gemm_work, layout, operands, pair_with_stats, scratch
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
             flags, index_offset, vector):
    if isinstance(model, Accumulator):
        return accum_gemm(A, B, C, accumulator=model, in_format=in_format,
                          acc_format=acc_format, round_inputs=round_inputs, k_order=k_order,
                          seed=seed, sr_bits=sr_bits, flags=flags, index_offset=index_offset,
                          vector=vector)
    if seed is not None or sr_bits is not None or flags is not None or index_offset:
        raise ValueError("seed, sr_bits, flags and index_offset apply to Accumulator models "
                         "only (the Tensor Core models are deterministic and raise no flags)")
    tcm = _resolve(model, in_format, acc_format)
    with serial_if_small(gemm_work(A, B)):
        ops = operands(A, B, C, tcm.in_format, tcm.acc_format, round_inputs, k_order, vector)
        out = np.empty(ops.shape, np.float32)
        k = ops.a.shape[-1]
        if out.size == 0:
            return out
        if k == 0:
            out[...] = 0.0 if ops.c is None else ops.c      # DOT with no block: d = c
            return out
        run = _run_ideal if tcm.frac_bits is None and tcm.block is None else \
            _run_exact if tcm.frac_bits is None else _run_hw
        if len(ops.shape) == 2:
            run(tcm, ops.a, ops.b, ops.c, ops, out)
        else:
            for idx in np.ndindex(ops.shape[:-2]):
                run(tcm, ops.a[idx], ops.b[idx], None if ops.c is None else ops.c[idx], ops,
                    out[idx])
    return out


def _acc_params(model: TCModel):
    acc = model.acc_format
    return model.out_frac, acc.emin, acc.emax, model.rne


def _c64(c, m, n):
    """C of one problem as a C-contiguous float64 array (zeros for None)."""
    if c is None:
        cz = scratch("c0", (m, n))
        cz.fill(0.0)
        return cz
    return np.ascontiguousarray(c)


def _run_hw(model, a, b, c, ops, out):
    """The hardware models: _tile.fused_gemm on every element, then the scalar hw_fix on the
    elements it marks (Inf/NaN inputs, possible overflow)."""
    m, k = a.shape
    n = b.shape[1]
    f, emin, emax, rne = _acc_params(model)
    F = int(model.frac_bits)
    K = k if model.block is None else int(model.block)
    if model.block is None and (K + 1) << (F + 2) > 1 << 53:
        raise ValueError(f"model {model.name}: one block of k = {k} products with F = {F} "
                         "exceeds the exact 53-bit fixed-point sum; need (k + 1) * 2^(F + 2) "
                         "<= 2^53")
    kp = -(-k // K) * K                     # zero-pad k to a multiple of K (spec DOT)
    npan = -(-n // LANES)
    nq = -(-m // ROWS)
    emin_in = model.in_format.emin
    av = scratch("hw_av", (nq * ROWS, kp))
    # (int16 codes in int64 units: scratch() caps its cached arrays by element count)
    pea = scratch("hw_pea", (nq, kp, T.TILE // 4), np.int64).view(np.int16)
    bp = scratch("hw_bp", (npan, kp, LANES))
    peb = scratch("hw_peb", (npan, kp, LANES), np.int16)
    rowbad = np.empty(m, np.uint8)
    colbad = np.empty(n, np.uint8)
    xa, ta = layout(a)
    xb, tb = layout(b)
    ops.ca.settle(T.pack_a(xa, ta, av, pea, ops.ca.gp, emin_in, rowbad))
    ops.cb.settle(T.pack_b(xb, tb, bp, peb, ops.cb.gp, emin_in, colbad))
    cz = _c64(c, m, n)
    o64 = scratch("hw_o64", (m, n))
    # Per-block test for subnormal outputs, or the lazy mode of _tile._tile where products
    # below 2^(emin + F) are rare (a wide accumulator exponent range) and F >= f.
    chk = emin + F > -60 or F < f
    T.fused_gemm(av, pea, bp, peb, cz, o64, K, F, f, emin, emax, rne, chk)
    rows, cols = T.fix_list(rowbad, colbad, cz, o64)
    if rows.size:
        T.hw_fix(av, pea, bp, peb, cz, o64, rows, cols, K, F, f, emin, emax, rne)
    out[...] = o64


def _run_exact(model, a, b, c, ops, out):
    """Custom records with exact alignment and finite blocks: the superaccumulator."""
    m, n = out.shape
    f, emin, emax, rne = _acc_params(model)
    o64 = scratch("ex_o64", (m, n))
    SA.exact_gemm(as_float64(a, ops.ca), as_float64(b, ops.cb), _c64(c, m, n), o64,
                  int(model.block), f, emin, emax, rne)
    out[...] = o64


def _run_ideal(model, a, b, c, ops, out):
    """numpy's float64 matmul, the certificates of _certify on every element, then its
    fallbacks on the few they leave (see softfloat/tensorcore/_certify.py for the proofs)."""
    m, k = a.shape
    n = b.shape[1]
    f, emin, emax, rne = _acc_params(model)
    a64, b64, (anrm, aexp, bnrm, bexp, bsrc) = pair_with_stats(a, b, ops.ca, ops.cb,
                                                               model.in_format.emin)
    s0 = scratch("s0", (m, n))
    with np.errstate(all="ignore"):
        np.matmul(a64, b64, out=s0)         # float64; every product exact (see _certify)
    has_c = c is not None
    cv = np.ascontiguousarray(c) if has_c else s0   # (not read without c)
    bad = scratch("bad", (m, n), np.uint8)
    left = np.empty(m, np.int64)
    mode = 0 if (f == 23 and emin == -126 and emax == 127 and rne) else 1
    g = CE.bracket_factor(k)
    off = 53 - 2 * model.in_format.man_bits
    qs, qm, lim = 2.0 ** -f, 2.0 ** (emin - f), 2.0 ** (emax + 1)
    nbad = CE.certify(s0, cv, has_c, anrm, aexp, bnrm, bexp, off, g, out, bad, left, mode,
                      qs, qm, lim, rne)
    if nbad:
        # The fallback reads rows of both operands: C-contiguous copies (F-ordered views come
        # from transposed operands), each in its narrowest carrier (half the bytes for float32).
        CE.dot2_fix(np.ascontiguousarray(a), np.ascontiguousarray(bsrc), bad, left,
                    int(nbad), cv, has_c, out, mode, qs, qm, lim, rne, f, emin, emax)


def gemm(A, B, C=None, *, model="a100", in_format=None, acc_format=None, round_inputs=None,
         k_order=None, seed=None, sr_bits=None, flags=None, index_offset=0):
    """D = A @ B + C as the Tensor Core model computes it (see the module docstring).

    Parameters
    ----------
    A, B : float arrays (..., m, k) and (..., k, n) of in_format values (carriers); leading
        batch dimensions broadcast as numpy.matmul's.
    C : None (zeros), a scalar or an array broadcastable to (..., m, n) of acc_format values.
    model : preset name ("ideal-fp32", "ideal-fp16", "v100", "t4", "a100", "ada", "h100",
        "b200"), a TCModel, or an Accumulator (the generic accumulation GEMM, see accum_gemm).
    in_format : input format (default fp16; a TCModel brings its own).
    acc_format : accumulator format (default fp32; fp16 for "ideal-fp16").
    round_inputs : None, or a deterministic rounding mode applied to A and B first.
    k_order : None, or a permutation of range(k): the order in which k is visited.
    seed, sr_bits, flags, index_offset : stochastic rounding, IEEE flag counts and the global
        index of the first output element (see accum_gemm), Accumulator models only.

    Returns
    -------
    (..., m, n) array of acc_format values in its carrier dtype (float32 for fp32/fp16/bf16).
    """
    return _compute(A, B, C, model, in_format, acc_format, round_inputs, k_order, seed,
                    sr_bits, flags, index_offset, vector=False)


def dot(a, b, c=0.0, *, model="a100", in_format=None, acc_format=None, round_inputs=None,
        k_order=None, seed=None, sr_bits=None, flags=None):
    """d = c + sum_k a[k] b[k] as the model computes it (gemm of a 1 x k by a k x 1 problem).

    a, b : 1-d arrays of equal length (in_format values); c : a scalar acc_format value.
    Returns a numpy scalar of acc_format's carrier dtype.
    """
    d = _compute(a, b, c, model, in_format, acc_format, round_inputs, k_order, seed, sr_bits,
                 flags, 0, vector=True)
    return d[0, 0]
