"""Explicit SIMD values for the Numba kernels of _kernels_fused.py.

Three Numba types whose LLVM representation is a vector: ``F64x8`` (<8 x double>), ``I64x8``
(<8 x i64>) and ``I16x32`` (<32 x i16>: the exponent codes of a 4 x 8 tile), and intrinsics on
them (loads, stores, splats, IEEE add / multiply / compare, exact bit manipulations, truncating
conversions, int16 add / max / permutations).  Code written with them is vectorised by
construction: LLVM maps <8 x double> onto one zmm register where AVX-512 is available, onto two
ymm (four xmm) registers elsewhere, with the same IEEE or integer operation in every lane, so
results never depend on the machine.  No intrinsic uses fast-math flags or reassociation: each
one is exactly the IEEE (or integer) operation its name says.

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


# ---- 32 int16 lanes: the block exponents of a 4-row x 8-column tile in one vector ----------
_I16 = ir.IntType(16)
_VS = ir.VectorType(_I16, 32)
_VS8 = ir.VectorType(_I16, 8)


class I16x32Type(types.Type):
    def __init__(self):
        super().__init__(name="I16x32")


i16x32 = I16x32Type()


@register_model(I16x32Type)
class _I16x32Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VS)


def _is_i16(arr):
    return isinstance(arr, types.Array) and arr.dtype == types.int16 and arr.layout == "C"


@intrinsic
def sload(typingctx, arr, off):
    """The 32 int16 arr.flat[off:off + 32] of a C-contiguous int16 array."""
    if not _is_i16(arr):
        return None

    def codegen(context, builder, sig, args):
        return builder.load(_ptr(context, builder, sig.args[0], args[0], args[1], _VS), align=2)
    return i16x32(arr, types.intp), codegen


@intrinsic
def sbcast4(typingctx, arr, off):
    """The 8 int16 arr.flat[off:off + 8], repeated 4 times (lanes 8r + l hold element l)."""
    if not _is_i16(arr):
        return None

    def codegen(context, builder, sig, args):
        x = builder.load(_ptr(context, builder, sig.args[0], args[0], args[1], _VS8), align=2)
        mask = ir.Constant(ir.VectorType(ir.IntType(32), 32), [l for _ in range(4)
                                                               for l in range(8)])
        return builder.shuffle_vector(x, ir.Constant(_VS8, ir.Undefined), mask)
    return i16x32(arr, types.intp), codegen


@intrinsic
def sadd(typingctx, a, b):
    """Per lane int16 a + b (the kernels keep every sum inside the int16 range)."""
    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])
    return i16x32(i16x32, i16x32), codegen


@intrinsic
def smax(typingctx, a, b):
    """Per lane signed int16 max(a, b)."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.icmp_signed(">", args[0], args[1]), args[0], args[1])
    return i16x32(i16x32, i16x32), codegen


def _srow(r):
    @intrinsic
    def op(typingctx, s):
        """The float64 lanes whose bits are int64(s[8r + l]) << 48 (l < 8; s[8r + l] read as an
        unsigned 16-bit pattern): for a code 16 e (e a biased exponent in 1..2046) the power of
        two 2^(e - 1023).  One word permutation into the top word of each 64-bit lane."""
        def codegen(context, builder, sig, args):
            mask = [32] * 32
            for q in range(8):
                mask[4 * q + 3] = 8 * r + q
            x = builder.shuffle_vector(args[0], ir.Constant(_VS, [0] * 32),
                                       ir.Constant(ir.VectorType(ir.IntType(32), 32), mask))
            return builder.bitcast(x, _VF)
        return f64x8(i16x32), codegen
    return op


#: srow0..srow3: row r of a 4 x 8 int16 exponent tile as powers of two (see _srow).
srow0, srow1, srow2, srow3 = (_srow(r) for r in range(4))


def _ssplat(context, builder, x, ty):
    x = builder.trunc(context.cast(builder, x, ty, types.int64), _I16)
    return builder.shuffle_vector(builder.insert_element(ir.Constant(_VS, ir.Undefined), x,
                                                         ir.Constant(ir.IntType(32), 0)),
                                  ir.Constant(_VS, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), 32), [0] * 32))


@intrinsic
def sminu_off(typingctx, w, a, c):
    """Per lane unsigned 16-bit min(w, a - c) (c an integer scalar; wrapping subtraction)."""
    def codegen(context, builder, sig, args):
        d = builder.sub(args[1], _ssplat(context, builder, args[2], sig.args[2]))
        return builder.select(builder.icmp_unsigned("<", args[0], d), args[0], d)
    return i16x32(i16x32, i16x32, c), codegen


@intrinsic
def ssplat(typingctx, c):
    """The integer scalar c (truncated to 16 bits) in every int16 lane."""
    def codegen(context, builder, sig, args):
        return _ssplat(context, builder, args[0], sig.args[0])
    return i16x32(c), codegen


@intrinsic
def sany_ult(typingctx, w, c):
    """True when some lane of w, as an unsigned 16-bit number, is below the scalar c."""
    def codegen(context, builder, sig, args):
        m = builder.icmp_unsigned("<", args[0], _ssplat(context, builder, args[1], sig.args[1]))
        m = builder.bitcast(m, ir.IntType(32))
        return builder.icmp_unsigned("!=", m, ir.Constant(ir.IntType(32), 0))
    return types.boolean(i16x32, c), codegen


@intrinsic
def vimax_bits(typingctx, a, b):
    """Per lane the float64 (a or b) whose bit pattern is the larger signed int64.  For
    non-negative float64s this is their maximum; a negative pattern loses to any of them."""
    def codegen(context, builder, sig, args):
        x = builder.bitcast(args[0], _VI)
        y = builder.bitcast(args[1], _VI)
        return builder.bitcast(builder.select(builder.icmp_signed(">", x, y), x, y), _VF)
    return f64x8(f64x8, f64x8), codegen


@intrinsic
def sfloor(typingctx, a, lo):
    """Per lane signed int16 max(a, lo) (lo an integer scalar in the int16 range)."""
    def codegen(context, builder, sig, args):
        x = builder.trunc(context.cast(builder, args[1], sig.args[1], types.int64), _I16)
        z = builder.shuffle_vector(builder.insert_element(ir.Constant(_VS, ir.Undefined), x,
                                                          ir.Constant(ir.IntType(32), 0)),
                                   ir.Constant(_VS, ir.Undefined),
                                   ir.Constant(ir.VectorType(ir.IntType(32), 32), [0] * 32))
        return builder.select(builder.icmp_signed(">", args[0], z), args[0], z)
    return i16x32(i16x32, lo), codegen


@intrinsic
def vany_between4(typingctx, a, b, c, d, lo, hi):
    """True when some lane of a, b, c or d lies strictly between the float64 scalars lo, hi."""
    def codegen(context, builder, sig, args):
        def splat(x, ty):
            x = context.cast(builder, x, ty, types.float64)
            t = builder.insert_element(ir.Constant(_VF, ir.Undefined), x,
                                       ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(t, ir.Constant(_VF, ir.Undefined), _ZERO8)
        lv = splat(args[4], sig.args[4])
        hv = splat(args[5], sig.args[5])
        m = None
        for v in args[:4]:
            c1 = builder.and_(builder.fcmp_ordered(">", v, lv), builder.fcmp_ordered("<", v, hv))
            m = c1 if m is None else builder.or_(m, c1)
        m = builder.bitcast(m, ir.IntType(8))
        return builder.icmp_unsigned("!=", m, ir.Constant(ir.IntType(8), 0))
    return types.boolean(f64x8, f64x8, f64x8, f64x8, lo, hi), codegen
