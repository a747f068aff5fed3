"""softfloat.mx: OCP MX and NVFP4 block-scaled formats, bit-exact.

A block format stores a tensor as small elements plus one shared scale per block of elements:
value = element * block scale (* tensor scale, NVFP4).  Imports numpy, numba and softfloat
only; must never import autograd, scalers or models.

    from softfloat import mx
    q = mx.quantize(x, "mxfp8_e4m3")                       # 1-D blocks of 32 along the last axis
    q = mx.quantize(w, "nvfp4", block=(16, 16), tensor_scale=t)   # 2-D blocks (weights)
    q.elements, q.element_bits, q.scales, q.scale_bits, q.saturated, q.flushed
    q.dequantize(), q.pack(); mx.unpack(data, fmt, count); mx.from_bits(eb, sb, fmt, ...)
    D = mx.gemm(qa, qb, model="ideal-fp32" | "blocked", out_format="fp32", c=None)
    y = mx.hadamard(x, size=16, seed=0)                    # random Hadamard transform

Formats (``BLOCK_FORMATS``; elements, scale, default block):
    mxfp8_e4m3  e4m3fn (max 448)      E8M0  32      mxfp6_e2m3  e2m3 (max 7.5)   E8M0  32
    mxfp8_e5m2  e5m2 (max 57344)      E8M0  32      mxfp6_e3m2  e3m2 (max 28)    E8M0  32
    mxfp4_e2m1  e2m1 (max 6)          E8M0  32      mxint8      int8 * 2^-6 (max 127/64) E8M0 32
    nvfp4       e2m1 (max 6)          UE4M3 16, and an optional float32 tensor scale
E8M0 (OCP MX v1.0 section 5.4.1): code c in 0..254 is 2^(c - 127), 0xFF NaN, no zero.
UE4M3: a positive E4M3 value, stored as its e4m3fn code without the sign bit (0x7F NaN).
MXINT8 is kept symmetric ([-127, 127] * 2^-6; OCP's 0x80 = -2 is never produced).

Layout.  ``block=None`` (the format's), an int (1-D blocks along ``axis``, default -1) or a pair
(2-D blocks over the last two axes, e.g. (16, 16), NVFP4's weight layout).  A trailing partial
block is padded with zeros (they never change a block maximum and are not stored).  ``scales``
has x's shape with each blocked axis replaced by its number of blocks.

Scale rules (``scale_rule``), for a block with largest magnitude amax > 0 and the element's
emax_elem = floor(log2(element max)) (e4m3 8, e5m2 15, e2m3 2, e3m2 4, e2m1 2, int8 0):

    rule    shared scale X = 2^E                              source
    floor   E = floor(log2 amax) - emax_elem                  OCP MX v1.0 section 6.3 (default)
    ceil    E = ceil(log2 amax) - emax_elem                   torchao ScaleCalculationMode.CEIL
    even    E = floor(log2 RNA_p(amax)) - emax_elem           torchao ScaleCalculationMode.EVEN
    rceil   E = ceil(log2(amax / max_elem)): the smallest     cuBLAS 1-D block quantization,
            power of two X with amax / X <= max_elem          PTX cvt.rp.satfinite.ue8m0 of
                                                              amax / max_elem (torchao RCEIL)
    nvfp4   s = RNE_e4m3(clamp(fl32(amax / 6) [/ t], smin, 448))   NVIDIA's NVFP4 recipe, the
                                                              PyTorch reference (torchao)

RNA_p rounds amax to the element's precision p = m + 1 bits, ties away (torchao adds half an
element ulp to the float32 pattern and keeps the exponent).  floor can saturate: amax / X lies in
[2^emax_elem, 2^(emax_elem + 1)) and may exceed the element max (e4m3: 448 < 512), such
elements become +-max (counted in ``saturated``); ceil and rceil never saturate (amax / X is at
most 2^emax_elem, resp. max_elem); even saturates less often than floor.  Every rule is computed
from amax's bit pattern (exponent field, fraction bits compared with the element's): no log2,
no division whose rounding could move a result across a power of two.  rceil equals the PTX
instruction applied to the correctly rounded float32 quotient amax / max_elem whenever that
quotient is a float32 normal (>= 2^-126): it rounds down onto a power of two 2^j only if the
exact one is at most 2^j (1 + 2^-24), which amax = A 2^a (A < 2^24) and max_elem = M 2^b (M
odd, <= 127) rule out (the exact quotient exceeds 2^j by at least 2^j / A).  Below 2^-126 the
float32 quotient has fewer bits and can round down onto 2^-127; we use the exact quotient.
Special cases (documented choices, each tested):
    all-zero block           E8M0 code 0 (2^-127), elements 0      (OCP; microxcaling, torchao)
    NaN in the block         MX: scale 0xFF (NaN), NVFP4: scale 0x7F (NaN); every element code 0
                             (value +0), so the block dequantizes to NaN (OCP 6.3: a NaN scale
                             makes the whole block NaN)
    +-Inf in the block       MX: scale 0xFF as for NaN (E8M0 has no Inf; microxcaling and torchao
                             do the same); NVFP4: the reference's float32 arithmetic: Inf / 6 =
                             Inf is clamped to 448, the Inf element saturates to +-6
    E outside [-127, 127]    clamped (elements of a clamped-down scale saturate; a clamped-up one
                             flushes small elements): E8M0's range; with float32 data E > 127
                             happens only for ceil/even/rceil of amax > 2^127 (torchao gives NaN
                             there instead)
    -0.0                     keeps its sign (element -0); MXINT8's zero is +0
NVFP4 (scale_rule "nvfp4", the only one): with the defaults (``exact_division=False``) every step
is the reference's float32 arithmetic: s = fl32(amax / 6), then s = fl32(s / t) with a tensor
scale t; clamped to [smin, 448] (smin = ``scale_min``, default 2^-6, E4M3's smallest normal,
the reference's lower clamp; any e4m3 value in [2^-9, 448]) and rounded RNE onto the e4m3 grid;
the element factor r = fl32(1 / s) (no t) or fl32(fl32(1 / t) / s); each element is rounded
(``mode``, saturating at +-6, which equals clamping first) from fl32(x * r).  That product is a
rounding of its own (the reference's; a double rounding by design, reproduced bit for bit).
``exact_division=True`` instead rounds once the exact quotients: s = RNE_e4m3(clamp(amax /
(6 t))) and element = round(x / (t s)).  The tensor scale is stored as the float32 it is
converted to; dequantize multiplies it in.

Element rounding (``mode``: rne, rna, rtz, rup, rdn, rto, sr): each element is x * 2^-E (MX,
exact: the scale is a power of two, so the round-pack routine softfloat._roundpack.round_value
rounds x * 2^escale directly) or NVFP4's y, rounded ONCE onto the element grid with saturation.
``saturated`` counts the elements whose rounding exceeded the element max (clamped),
``flushed`` the nonzero inputs whose element is 0.  mode "sr" needs ``seed``; element i (its C
flat index) uses random_bits(key(seed), index_offset + i) with sr_bits bits (default 24),
whatever the threads or chunks.  A seed with a deterministic mode is a ValueError.
Implementation: float32 data go through a vectorised kernel (softfloat/mx/_kernels_fast.py:
RNE by the FPU's own rounding of (|y| + C) - C, the other modes on the bit patterns) proven equal
to round_value by tests; float64 data, NVFP4's exact division and the few elements the fast
kernel cannot do call round_value itself (softfloat/mx/_kernels_elem.round_elem).

GEMM (``mx.gemm(qa, qb)``): qa (m x k) blocked along k (axis 1 or 2-D blocks), qb (k x n)
blocked along k (axis 0 or 2-D blocks), both MX or both NVFP4.  Products of elements are exact,
scaled by the product of their two block scales (and of the tensor scales).
    ideal-fp32  D = round(c + sum_k a_k b_k) once, RNE, onto out_format (fp32 default; fp16,
                bf16, ...): the exact dot product, as softfloat.tensorcore's ideal models
    blocked     a model of a block-scaled Tensor Core (plausible, not a measured fact): per
                K-block (the common block length of qa and qb), the exact sum of its scaled
                products rounded to fp32 (RNE), accumulated in k order in fp32 (RNE) starting
                from c (or +0); the fp32 result rounded to out_format
c: an optional array broadcastable to (m, n) of out_format values.

Hadamard (``mx.hadamard``): see softfloat/mx/_hadamard.py; orthogonal, exact and rounded once.

Dask arrays (softfloat/mx/_lazy.py): ``mx.quantize`` of a dask array returns a lazy BlockTensor
(dask arrays inside, ``.compute()`` for numpy) with the bits of the numpy call for any chunking,
stochastic rounding included; x is rechunked along axis 0 only, on block boundaries.
"""

from ._formats import BLOCK_FORMATS, SCALE_RULES, BlockFormat, get_block_format
from ._gemm import GEMM_MODELS, gemm
from ._hadamard import hadamard
from ._quantize import quantize
from ._tensor import BlockTensor, from_bits, unpack

__all__ = ["quantize", "gemm", "hadamard", "BlockTensor", "BlockFormat", "BLOCK_FORMATS",
           "SCALE_RULES", "GEMM_MODELS", "get_block_format", "from_bits", "unpack"]
