"""softfloat.dfp: DFP-16 dynamic fixed point and the VNNI-style integer GEMM (Das et al., 2018).

Specification: docs/dfp16.md.  Imports numpy, numba and softfloat only; must never
import autograd, scalers or models.

Provides
    quantize(x, bits=16, mode=None, *, axis=None, block=None, scale_rule="floor", seed=None,
             sr_bits=None, name="x")                 -> DFPTensor (x: numpy, or dask: lazy)
    DFPTensor(mantissa, exponent, bits=16, *, axis=None, block=None)  (.dequantize(),
             .compute(), ...)
    mul(a, b), add(a, b), add_to_fp32(a, b), down_convert(t, bits=16, mode=None, ...)
    gemm(A, B, *, chain_len=None, overflow="wrap", input_shift=0, return_stats=False)
             (batched: leading dimensions broadcast like numpy.matmul)
    plan_chains(K, *, block_a=None, block_b=None, chain_len=None)   (the chains gemm uses)
    im2col(x, kh, kw, *, stride=1, padding=0), conv2d(x, w, *, stride=1, padding=0, ...)
``rounding=`` is accepted wherever ``mode=`` is (its older name; giving both is an error).

Representation
--------------
A DFP-P tensor holds signed integers i (the mantissas, int16 for P <= 16) and shared exponents;
value = i * 2^E_s.  Integers are SYMMETRIC: |i| <= 2^(P-1) - 1 (-2^(P-1) is never produced, so
negation is closed and one int16 x int16 product is at most (2^15 - 1)^2 < 2^30).  The one
exception is DFP-32 (bits=32, the int32 accumulator format of products and sums), which also
admits -2^31, the value of a saturated int32 lane.

Layouts (``axis``, ``block``): one exponent per tensor (axis=None); one per slice along ``axis``
(the elements along ``axis`` share: per row of an (m, k) matrix is axis=1, per column of a
(k, n) matrix axis=0); or one per block of N consecutive elements along ``axis`` (block
floating point; the last block may be shorter).  ``exponent`` has shape () per tensor, else the
mantissa's shape with ``axis`` replaced by the number of blocks (broadcastable like keepdims).
Exponents are int32 and are NOT clamped to the paper's 8-bit field: float32 data need
E_s in [-149 - (P - 2), 127 - (P - 2)], which a 9-bit field holds; float64 data more.

Quantization (quantize)
-----------------------
Per block, from amax = max |x| (exact):
    scale_rule="floor" (default, the paper's):  E_s = floor(log2 amax) - (P - 2)
        = OCP MX's floor(log2 amax) - emax_elem with emax_elem = P - 2 (MXINT8: P = 8, 2^-6
        element scale).  max|x| / 2^E_s lies in [2^(P-2), 2^(P-1)), so rounding can reach
        2^(P-1): that value is clipped to 2^(P-1) - 1 and counted in ``saturated``.
    scale_rule="ceil":  E_s = ceil(log2(amax / (2^(P-1) - 1))), the smallest E_s with
        amax / 2^E_s <= 2^(P-1) - 1: never saturates (a rounding of a value <= an integer M
        never exceeds M), at the price of one bit when amax is within one part in 2^(P-1) of
        the next power of two.  It equals the floor rule + 1 exactly when
        amax > (2^(P-1) - 1) * 2^E_floor; computed by that exact comparison, never by a
        floating-point log2 (whose rounding is the bug other libraries have).
An all-zero block has E_s = 0 and integers 0.  NaN or Inf anywhere: ValueError naming the
tensor and the counts (a shared exponent cannot be chosen for them).
The integer is the rounding of the EXACT real x / 2^E_s: x = sig * 2^e is taken apart from its
float64 bit pattern (float32 inputs widen exactly), and sig is shifted right by s = E_s - e in
int64 arithmetic with the rounding below; nothing is computed by float scaling (x * 2^-E_s
would be exact in float64 except when it underflows, and a subnormal product would round
twice).  The count ``underflowed`` says how many nonzero inputs became 0 (tiny values next to a
large one in the same block).
Roundings (every conversion to DFP) are softfloat.Mode values, defined on the signed value
t = x / 2^s, so they are the two's complement hardware operations on the integer x.  DFP's own
names (docs/dfp16.md) are aliases: "nearest" = RNE, "stochastic" = SR, "biased" = RHU,
"floor" = RDN (also "arithmetic_shift"):
    RNE  round to nearest, ties to even (default)
    RHU  round half UP (toward +inf): floor(t + 1/2) = (x + 2^(s-1)) >> s, the cheap hardware
         rounding whose ties always go upward (2.5 -> 3, -2.5 -> -2); the paper's unspecified
         "biased rounding", as the spec defines it (softfloat.Mode.RHU has exactly this meaning)
    RDN  truncation by arithmetic right shift: floor(t) = x >> s (toward -inf)
    SR   floor(t) + 1 with probability frac(t) (up to r = sr_bits = 24 random bits:
         up iff floor(frac(t) * 2^r) + (u >> (64 - r)) >= 2^r with u =
         softfloat.rng.random_bits(seed_key(seed), flat index)); frac(t) = t - floor(t) is
         taken on the signed value, so the bits differ from softfloat.round's sign-magnitude
         SR for negative values (same distribution); seed required
    RNA  nearest, ties away from zero     RTZ  toward zero (truncate |t|)
    RUP  ceil(t)                          RTO  round to odd: t if exact, else the odd one of
                                               floor(t) and floor(t) + 1
The seed rule of all of softfloat: ``seed`` (and ``sr_bits``) with a deterministic mode is a
ValueError that names the mode.  Arithmetic right shifts in this package always mean floor
(Python's and numpy's >>) unless a rounding mode is named.
The one integer rounding is ``shift_round`` (softfloat/dfp/_intround.py, which says why it is
not softfloat._roundpack.round_int: signed two's complement SR); float32 inputs are quantized by
a vectorised float64 evaluator proven exact in softfloat/dfp/_kernels_quant.py and checked
against it bit for bit.

Dask arrays (softfloat/dfp/_lazy.py): quantize(x) of a dask array computes the shared
exponents NOW (the block maxima are a reduction over x; NaN/Inf are reported then) and returns
a lazy DFPTensor: ``mantissa`` a dask array, ``saturated`` / ``underflowed`` 0-d dask arrays,
``exponent`` numpy; ``.compute()`` gives the numpy-backed tensor, ``.dequantize()`` a lazy
array.  The result is bit-identical to the numpy call for any chunking, stochastic rounding
included (random bits keyed by each element's global flat index).  Operations other than
compute/dequantize need a computed tensor.

Small problems run on one thread: kernels on at most 2^18 elements (quantize, down_convert)
or 2^21 products (gemm) run serial twins of the parallel kernels, with the same chunks and the
same results, because waking Numba's worker threads costs more than such work (the training
GEMMs of the demo's MLP are 2^17 products).

The seed's arithmetic
---------------------
    mul(a, b):      DFP16 x DFP16 -> DFP32: i = i_a * i_b (exact), E = E_a + E_b
    add(a, b):      DFP16 + DFP16 -> DFP32: E = max(E_a, E_b); i = (i_a >> (E - E_a)) +
                    (i_b >> (E - E_b)), >> the arithmetic shift (floor) as the spec says.  An
                    all-zero block does not take part in choosing E (so adding zero is exact)
    add_to_fp32:    DFP32 + DFP32 -> FP32, the exact sum rounded once to nearest-even
    down_convert:   DFP32 -> DFP-P: R_s = max(0, BL - (P - 1)) where BL = 32 - LZC32(max|I|)
                    is the bit length of max|I| (LZC32 counts leading zeros of |I| as an
                    unsigned 32-bit word; |-2^31| = 2^31 has BL = 32, 0 has BL = 0); then
                    i = round(I / 2^R_s) and E += R_s.  max|I| keeps P - 1 magnitude bits, so
                    like quantize the rounding can reach 2^(P-1) (saturated, counted).  For
                    P = 16 this is the seed's R_s = P - LZC with the LZC counted over the 31
                    magnitude bits below the sign (LZC31 = LZC32 - 1).  Examples, P = 16:
                    max|I| = 32767 -> R_s = 0;  32768 -> 1;  2^31 - 1 -> 16 (nearest gives
                    32768: saturated);  -2^31 -> 17 (-16384, exact)

The integer GEMM (gemm)
-----------------------
D (m x n, float32) = A (m x k) @ B (k x n) for DFP operands with P <= 16.  Exponent layouts: A
per tensor, per row (axis=1) or per block of N along k (axis=1, block=N); B per tensor, per
column (axis=0) or per block along k (axis=0, block=N).  Any other layout is refused.
Batches: A (..., m, k) and B (..., k, n) with leading dimensions that broadcast like
numpy.matmul give D (..., m, n), one GEMM per matrix with the same layouts counted from the
end (A's axis = its last, B's = its second to last); a per-tensor exponent is shared by all
the tensor's matrices.  Statistics are summed over the batch (max_abs_chain_sum: maximum).

Chains.  Every output (i, j) accumulates the same sequence of chains.  The reduction range
0..k-1 is first cut at every block boundary of A and of B (multiples of N_A and N_B: a chain
never mixes two exponent pairs, whether or not the exponents happen to be equal), then each
piece into chains of ``chain_len`` products (None: the whole piece).  Inside a chain, VNNI
steps take the products two by two from the chain's start: step t adds the pair
(a_{2t} b_{2t} + a_{2t+1} b_{2t+1}); a chain of odd length ends with a single product (its
partner is a zero pad, as VNNI code pads k to even).
The step (Intel SDM, VPDPWSSD / VPDPWSSDS): the two products are exact int32 values, their sum
and the lane addition are computed EXACTLY, then
    overflow="wrap"      (VPDPWSSD)  the result is reduced modulo 2^32 into [-2^31, 2^31 - 1]
    overflow="saturate"  (VPDPWSSDS) the result is clamped to [-2^31, 2^31 - 1]
An event (wrap_events / saturation_events) is one step of one lane whose exact result lay
outside the int32 range.  (The SDM writes the saturating form as one saturation of the full
three-term sum; the wrapping form's result does not depend on where the wrap happens.)
``input_shift`` (int or (shift_a, shift_b), 0..15) shifts the int16 inputs right first
(arithmetic shift, floor), adding the shift to the exponents: a cure that trades precision for
headroom.
Flush.  At the end of each chain the int32 lane L is converted to fp32 WITH the scale:
z = fp32(L * 2^(E_a + E_b)), ONE round-to-nearest-even of the exact product (with fp32
subnormals; overflow to +-Inf).  Hardware would do cvtdq2ps (RNE, exact when |L| <= 2^24) and
then multiply by the fp32 scale 2^(E_a + E_b) (exact unless the result leaves the normal fp32
range); the two agree except when z is an fp32 subnormal, where the two-step form could round
twice; we do the single rounding (and E_a + E_b need not be a representable fp32 scale).  Then
acc = fp32(acc + z): an IEEE fp32 RNE addition, acc starting at +0.0, chains added in order of
k.  Exactness of the emulation: L is exact in float64, L * 2^e is an exact float64 for e in
[-1022, 992] (other e give +-0 or +-Inf in fp32 either way), float64 -> float32 is one RNE
rounding (cvtsd2ss), and float32 + float32 in Numba is the IEEE fp32 add (never fastmath);
this assumes the default MXCSR (no flush-to-zero / denormals-are-zero set by another library).
With return_stats=True a dict is returned too: wrap_events, saturation_events,
overflowed_chains (lanes x chains with at least one event), flushes (= m * n * chains),
chains_per_output, inexact_conversions (flushes whose fp32 conversion rounded),
max_abs_chain_sum (largest |int32 lane| at a flush).
Without overflow (every partial sum in int32) and with one chain per output, D equals
fp32(exact integer dot product * 2^(E_a + E_b)).
Implementation (softfloat/dfp/_kernels_gemm.py): lanes accumulate in wrapping int32 with an
exact per-step signed-overflow test; lanes that overflowed are replayed step by step in int64
(so saturate and the counters are exact).  overflow="wrap" without return_stats skips the test:
a wrapped lane is the exact chain sum modulo 2^32 however many wraps happened, so the result is
bit-identical (tested) and only the counters, which were not asked for, are not computed.

Convolution: im2col(x, kh, kw) lays NCHW patches out as the (C*kh*kw, N*OH*OW) B operand, in
PyTorch's weight order (c, ki, kj); conv2d quantizes x per tensor and the weights (O, C, kh, kw)
per tensor or per output channel, and runs them through gemm.
"""

from ._arith import add, add_to_fp32, mul
from ._conv import conv2d, im2col
from ._gemm import OVERFLOW_MODES, gemm, plan_chains
from ._quantize import SCALE_RULES, down_convert, quantize
from ._tensor import ROUNDINGS, DFPTensor

__all__ = [
    "DFPTensor", "quantize", "down_convert", "mul", "add", "add_to_fp32", "gemm",
    "plan_chains", "im2col", "conv2d", "ROUNDINGS", "SCALE_RULES", "OVERFLOW_MODES",
]
