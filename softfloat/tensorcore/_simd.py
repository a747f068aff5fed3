"""Explicit 8-lane SIMD values for the Numba kernels of _kernels_fused.py.

Two Numba types whose LLVM representation is a vector: ``F64x8`` (<8 x double>) and ``I64x8``
(<8 x i64>), and intrinsics on them (loads, stores, splats, IEEE add / multiply / compare, exact
bit manipulations, truncating conversions).  Code written with them is vectorised by
construction: LLVM maps <8 x double> onto one zmm register where AVX-512 is available, onto two
ymm (four xmm) registers elsewhere, with the same IEEE operation in every lane, so results never
depend on the machine.  No intrinsic uses fast-math flags or reassociation: each one is exactly
the IEEE (or integer) operation its name says.

The llvmlite IR builder is reached through numba (numba.core.cgutils.ir): softfloat imports
only numpy and numba (tests/test_structure.py).
"""

from __future__ import annotations

from numba.core import cgutils, types
from numba.extending import intrinsic, models, register_model

ir = cgutils.ir

_F64 = ir.DoubleType()
_I64 = ir.IntType(64)
_VF = ir.VectorType(_F64, 8)
_VI = ir.VectorType(_I64, 8)
_ZERO8 = ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8)


class F64x8Type(types.Type):
    def __init__(self):
        super().__init__(name="F64x8")


class I64x8Type(types.Type):
    def __init__(self):
        super().__init__(name="I64x8")


f64x8 = F64x8Type()
i64x8 = I64x8Type()


@register_model(F64x8Type)
class _F64x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VF)


@register_model(I64x8Type)
class _I64x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VI)


def _ptr(context, builder, aty, arr, off, vty):
    """Pointer to element ``off`` (flat, C order) of a contiguous array, cast to vty*."""
    data = context.make_array(aty)(context, builder, arr).data
    p = builder.gep(data, [off])
    return builder.bitcast(p, vty.as_pointer())


@intrinsic
def vload(typingctx, arr, off):
    """The 8 float64 arr.flat[off:off + 8] of a C-contiguous float64 array (unaligned load)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        p = _ptr(context, builder, sig.args[0], args[0], args[1], _VF)
        return builder.load(p, align=8)
    return f64x8(arr, types.intp), codegen


@intrinsic
def vstore(typingctx, arr, off, v):
    """arr.flat[off:off + 8] = v for a C-contiguous float64 array."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        p = _ptr(context, builder, sig.args[0], args[0], args[1], _VF)
        builder.store(args[2], p, align=8)
        return context.get_dummy_value()
    return types.none(arr, types.intp, f64x8), codegen


@intrinsic
def vsplat(typingctx, x):
    """float64 x in every lane."""
    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.float64)
        t = builder.insert_element(ir.Constant(_VF, ir.Undefined), v, ir.Constant(ir.IntType(32),
                                                                                  0))
        return builder.shuffle_vector(t, ir.Constant(_VF, ir.Undefined), _ZERO8)
    return f64x8(x), codegen


def _binop(name):
    @intrinsic
    def op(typingctx, a, b):
        def codegen(context, builder, sig, args):
            return getattr(builder, name)(args[0], args[1])
        return f64x8(f64x8, f64x8), codegen
    return op


#: IEEE a + b, a - b, a * b in every lane (one rounding each; the kernels only use them
#: where the result is exact).
vadd = _binop("fadd")
vsub = _binop("fsub")
vmul = _binop("fmul")


@intrinsic
def vmax(typingctx, a, b):
    """a > b ? a : b per lane (x86 maxpd semantics; the kernels never pass NaN they use)."""
    def codegen(context, builder, sig, args):
        c = builder.fcmp_ordered(">", args[0], args[1])
        return builder.select(c, args[0], args[1])
    return f64x8(f64x8, f64x8), codegen


@intrinsic
def vselect_ge(typingctx, a, b, x, y):
    """a >= b ? x : y per lane."""
    def codegen(context, builder, sig, args):
        c = builder.fcmp_ordered(">=", args[0], args[1])
        return builder.select(c, args[2], args[3])
    return f64x8(f64x8, f64x8, f64x8, f64x8), codegen


def _unary_intrinsic(llname):
    @intrinsic
    def op(typingctx, a):
        def codegen(context, builder, sig, args):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VF, [_VF]),
                                                llname)
            return builder.call(fn, [args[0]])
        return f64x8(f64x8), codegen
    return op


#: Per lane: round to an integer toward zero / to nearest, ties to even (exact operations).
vtrunc = _unary_intrinsic("llvm.trunc.v8f64")
vrint = _unary_intrinsic("llvm.roundeven.v8f64")


@intrinsic
def vand_bits(typingctx, a, mask):
    """The float64 whose bits are bits(a) & mask (mask an int64 scalar)."""
    def codegen(context, builder, sig, args):
        m = context.cast(builder, args[1], sig.args[1], types.int64)
        mv = builder.shuffle_vector(builder.insert_element(ir.Constant(_VI, ir.Undefined), m,
                                                           ir.Constant(ir.IntType(32), 0)),
                                    ir.Constant(_VI, ir.Undefined), _ZERO8)
        return builder.bitcast(builder.and_(builder.bitcast(args[0], _VI), mv), _VF)
    return f64x8(f64x8, mask), codegen


@intrinsic
def vbits_rsub(typingctx, c, a):
    """The float64 whose bits are c - bits(a) (c an int64 scalar; integer subtraction)."""
    def codegen(context, builder, sig, args):
        m = context.cast(builder, args[0], sig.args[0], types.int64)
        mv = builder.shuffle_vector(builder.insert_element(ir.Constant(_VI, ir.Undefined), m,
                                                           ir.Constant(ir.IntType(32), 0)),
                                    ir.Constant(_VI, ir.Undefined), _ZERO8)
        return builder.bitcast(builder.sub(mv, builder.bitcast(args[1], _VI)), _VF)
    return f64x8(c, f64x8), codegen


@intrinsic
def vtoint(typingctx, a):
    """Per lane: the int64 of a float64, truncated toward zero (fptosi).  Exact for the
    integral-part of any |a| < 2^63; lanes outside that range (or NaN) get an unspecified
    value, which the kernels only produce in lanes whose result is discarded."""
    def codegen(context, builder, sig, args):
        return builder.fptosi(args[0], _VI)
    return i64x8(f64x8), codegen


@intrinsic
def vtofloat(typingctx, a):
    """Per lane: the float64 of an int64 (exact for |a| <= 2^53)."""
    def codegen(context, builder, sig, args):
        return builder.sitofp(args[0], _VF)
    return f64x8(i64x8), codegen


@intrinsic
def viadd(typingctx, a, b):
    """Per lane int64 a + b (wrapping)."""
    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])
    return i64x8(i64x8, i64x8), codegen


@intrinsic
def vbcast(typingctx, arr, off):
    """arr.flat[off] (a C-contiguous float64 array) in every lane."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        x = builder.load(builder.gep(data, [args[1]]), align=8)
        t = builder.insert_element(ir.Constant(_VF, ir.Undefined), x,
                                   ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(t, ir.Constant(_VF, ir.Undefined), _ZERO8)
    return f64x8(arr, types.intp), codegen


@intrinsic
def vany_between(typingctx, a, lo, hi):
    """True when some lane of a lies strictly between the float64 scalars lo and hi."""
    def codegen(context, builder, sig, args):
        def splat(x, ty):
            x = context.cast(builder, x, ty, types.float64)
            t = builder.insert_element(ir.Constant(_VF, ir.Undefined), x,
                                       ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(t, ir.Constant(_VF, ir.Undefined), _ZERO8)
        c1 = builder.fcmp_ordered(">", args[0], splat(args[1], sig.args[1]))
        c2 = builder.fcmp_ordered("<", args[0], splat(args[2], sig.args[2]))
        m = builder.bitcast(builder.and_(c1, c2), ir.IntType(8))
        return builder.icmp_unsigned("!=", m, ir.Constant(ir.IntType(8), 0))
    return types.boolean(f64x8, lo, hi), codegen
