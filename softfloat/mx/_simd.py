"""One vector intrinsic for the float32 kernel of mx.quantize: the largest |x| pattern of 16
consecutive float32 patterns.

Why: a block maximum is a reduction over 16 or 32 elements, too short for LLVM's loop
vectoriser (it needs several vectors of iterations and falls back to scalar code; measured
39 ms for the block maxima of 16M elements on one core, 20x the time of reading them).  The
intrinsic emits the LLVM vector operations directly -- one unaligned <16 x i32> load, an AND
with 0x7FFFFFFF, llvm.vector.reduce.umax -- which LLVM lowers to a zmm load and four
shuffle/max steps with AVX-512, or to two ymm halves with AVX2 (1.8 ms).

Integer max of the |x| patterns is the max of |x| for numbers (float32 patterns of one sign are
ordered like their magnitudes), and any NaN pattern exceeds Inf's 0x7F800000.

Imports numba only (llvmlite's IR builder through numba.core.cgutils, as
softfloat/tensorcore/_simd.py does).
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# the llvmlite IR builder, reached through numba (softfloat imports only numpy and numba)
ir = cgutils.ir

__all__ = ["absmax16"]


@intrinsic
def absmax16(typingctx, arr, start):
    """max over j < 16 of (arr[start + j] & 0x7FFFFFFF) for a C-contiguous 1-d uint32 array
    (no bounds check: the caller guarantees start + 16 <= arr.size)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint32 and arr.ndim == 1
            and arr.layout == "C" and isinstance(start, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        idx = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = builder.gep(ary.data, [idx])
        vecty = ir.VectorType(ir.IntType(32), 16)
        v = builder.load(builder.bitcast(ptr, vecty.as_pointer()), align=4)
        v = builder.and_(v, ir.Constant(vecty, [0x7FFFFFFF] * 16))
        fnty = ir.FunctionType(ir.IntType(32), [vecty])
        fn = cgutils.get_or_insert_function(builder.module, fnty,
                                            "llvm.vector.reduce.umax.v16i32")
        return builder.call(fn, [v])

    return types.uint32(arr, start), codegen
