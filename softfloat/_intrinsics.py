"""softfloat's one intrinsic layer: LLVM instructions that Numba's typing would not emit, on
public extension APIs only (numba.extending.intrinsic / register_model, numba.types, llvmlite.ir;
no numba.core import: its modules may change in any Numba release).

Three groups.

32-bit integers (``add32 sub32 and32 or32 xor32 shr32 shl32 lt32 ge32 gt32 ne32 eq32 sel32
lo32``).  Numba types arithmetic on uint32 values as 64-bit integers (its integer typing widens
to the machine word), so a loop over float32 bit patterns written with ``&``, ``+``, ``>>`` runs
in 64-bit SIMD lanes: half as many elements per instruction, plus conversions.  These emit the
LLVM i32 instruction itself with uint32 (or boolean) results, so that LLVM vectorises such loops
8 (ymm) or 16 (zmm) elements at a time (measured on the float32 -> fp16 path: 2.4x fewer cycles
per element).  Semantics are uint32 arithmetic modulo 2^32; shift counts must be < 32 (LLVM
gives an undefined value otherwise).

Lanes of either width (``lane_op lane_minmax lane_sel lane_merge lane_count``): the same
instructions on uint32 (i32) or uint64 (i64) operands, chosen by the operands' type, for the
conversion kernels written once for both input widths (softfloat._lanes names them vand, vlt,
vsel, ...).  Emitted at the call site, so that no boolean crosses a compiled function's
boundary (see softfloat._lanes for what that cost on AVX-512).

Explicit vectors for the Tensor Core tile kernel (softfloat/tensorcore/_tile.py) and the ideal
models' compensated sums (softfloat/tensorcore/_certify.py): ``F64V`` (LANES float64), ``ACCV``
(LANES exact-integer accumulators) and ``I16V`` (ROWS * LANES int16 exponent codes of a
ROWS x LANES tile), with loads (``vload_wide`` widens float32 exactly), stores, splats, IEEE
add / multiply / compare, exact bit manipulations and truncations.  Code written with them is
vectorised by construction, with the same IEEE or integer operation in every lane, so results
never depend on the machine.  No intrinsic uses fast-math flags or reassociation.

Also here: ``fma(a, b, c)``, the fused multiply-add of three float32 or three float64 values
(one rounding), which Numba does not expose and which vectorises; the arithmetic uses it for
exact residuals (softfloat._arith_f32); ``absmax16``, the largest |x| pattern of 16 float32
patterns in one vector reduction (softfloat.mx's block maxima).

Instruction set.  Numba compiles for the host CPU (or NUMBA_CPU_NAME / NUMBA_CPU_FEATURES), and
so the shapes are chosen here, at import, from the same feature string Numba gives LLVM
(``ISA``; a different feature string is a different entry of Numba's on-disk cache):
* "avx512" (AVX-512F and DQ): LANES = 8, one zmm register per float64 vector (32 of them), and
  the integer accumulators are int64 lanes: vcvttpd2qq truncates a scaled product to an int64
  and vpaddq adds it (latency 1).
* otherwise ("avx2" and any other target): LANES = 4, one ymm register per vector (16 of them:
  4 rows x 8 lanes would spill), and the accumulators are float64 lanes holding integers:
  AVX2 has no float64 <-> int64 vector conversion (LLVM splits it into 4 scalar vcvttsd2si
  each way, the collapse measured on AVX2 hosts), while vroundpd truncates in one instruction
  and the float64 sum of those integers is exact (below 2^53, see the tile kernel).
ROWS = 4 rows of A per tile on both.

Imports numpy, numba and llvmlite (numba's own code generator) only.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, models, register_model

# ---- instruction set ---------------------------------------------------------------------


def _target_features() -> str:
    """The CPU feature string Numba hands LLVM: NUMBA_CPU_FEATURES if set, else the host's."""
    feats = getattr(numba.config, "CPU_FEATURES", None)
    if feats:
        return feats
    try:
        import llvmlite.binding as llb
        llb.initialize_native_target()
        feats = llb.get_host_cpu_features().flatten()
    except Exception:                       # no feature map: the portable shapes
        return ""
    if not getattr(numba.config, "ENABLE_AVX", True):
        return ""                           # Numba then strips every avx* feature
    return feats


def _isa(feats: str) -> str:
    on = {f[1:] for f in feats.split(",") if f.startswith("+")}
    if {"avx512f", "avx512dq"} <= on:
        return "avx512"
    return "avx2" if "avx2" in on else "generic"


ISA = _isa(_target_features())
LANES = 8 if ISA == "avx512" else 4
ROWS = 4
#: True: the tile kernel's accumulators are int64 lanes; False: float64 lanes (see above).
ACC_INT = ISA == "avx512"

# ---- 32-bit integers ----------------------------------------------------------------------
_U32 = types.uint32


def _same_type(tys, allowed):
    """The common type of tys if it is one of ``allowed``, else None."""
    t = tys[0]
    return t if t in allowed and all(u == t for u in tys) else None


def _int_op(op: str, doc: str, compare: str, allowed):
    """The intrinsic of one LLVM integer instruction on two operands of one type in ``allowed``
    (uint32: i32, uint64: i64): the IRBuilder method ``op`` (a result of the operands' type);
    with compare="unsigned" the unsigned comparison ``op`` (boolean result); with
    compare="signed64" the signed comparison on uint64 operands and the unsigned one on uint32
    (for operands below 2^(W-1), where the two agree: AVX2 compares 64-bit lanes signed only)."""
    @intrinsic
    def fn(typingctx, a, b):
        t = _same_type((a, b), allowed)
        if t is None:
            return None
        signed = compare == "signed64" and t == types.uint64

        def codegen(context, builder, signature, args):
            if signed:
                return builder.icmp_signed(op, args[0], args[1])
            if compare:
                return builder.icmp_unsigned(op, args[0], args[1])
            return getattr(builder, op)(args[0], args[1])
        return (types.boolean if compare else t)(t, t), codegen
    fn.__doc__ = doc
    return fn


def _op32(op: str, doc: str, compare: bool = False):
    """The intrinsic of one LLVM i32 instruction on two uint32 values: the IRBuilder method
    ``op`` (uint32 result) or, with compare, the unsigned comparison ``op`` (boolean result)."""
    return _int_op(op, doc, "unsigned" if compare else "", (_U32,))


add32 = _op32("add", "a + b modulo 2^32")
sub32 = _op32("sub", "a - b modulo 2^32")
and32 = _op32("and_", "a & b")
or32 = _op32("or_", "a | b")
xor32 = _op32("xor", "a ^ b")
shr32 = _op32("lshr", "a >> s (logical; s < 32)")
shl32 = _op32("shl", "(a << s) modulo 2^32 (s < 32)")
lt32 = _op32("<", "a < b (unsigned)", compare=True)
ge32 = _op32(">=", "a >= b (unsigned)", compare=True)
gt32 = _op32(">", "a > b (unsigned)", compare=True)
ne32 = _op32("!=", "a != b", compare=True)
eq32 = _op32("==", "a == b", compare=True)


@intrinsic
def sel32(typingctx, c, a, b):
    """a if c else b, as one select (no branch)."""
    if c != types.boolean or a != _U32 or b != _U32:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return _U32(types.boolean, _U32, _U32), codegen


@intrinsic
def lo32(typingctx, x):
    """The low 32 bits of a uint64."""
    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.trunc(args[0], ir.IntType(32))
    return _U32(types.uint64), codegen


# ---- lanes of either width (softfloat._lanes) -------------------------------------------------
# The lane operations of the vectorised conversion, on uint32 (i32) or uint64 (i64) lanes.  As
# intrinsics their instruction is emitted at the call site, so that no boolean (i1) result or
# argument crosses a compiled function's boundary: as compiled functions these made the
# AVX-512 code of the conversion loops up to 1.5x slower (see softfloat._lanes).
_LANE_TYPES = (types.uint32, types.uint64)


def _lane_type(*tys):
    """The common lane type of tys (uint32 or uint64), or None."""
    return _same_type(tys, _LANE_TYPES)


def lane_op(op: str, doc: str, compare: str = ""):
    """The intrinsic of one LLVM instruction on two lanes of one type, uint32 or uint64 (see
    _int_op for ``compare``)."""
    return _int_op(op, doc, compare, _LANE_TYPES)


def lane_minmax(op: str, doc: str):
    """The intrinsic of min (op "<") or max (op ">") of two unsigned lanes: one compare and one
    select."""
    @intrinsic
    def fn(typingctx, a, b):
        t = _lane_type(a, b)
        if t is None:
            return None

        def codegen(context, builder, signature, args):
            return builder.select(builder.icmp_unsigned(op, args[0], args[1]), args[0], args[1])
        return t(t, t), codegen
    fn.__doc__ = doc
    return fn


@intrinsic
def lane_sel(typingctx, c, a, b):
    """a if c else b for lanes of one type (uint32 or uint64), as one select (no branch)."""
    t = _lane_type(a, b)
    if c != types.boolean or t is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return t(types.boolean, t, t), codegen


@intrinsic
def lane_merge(typingctx, c, a, b, ones, zero):
    """a if c else b, for storing over b's own element: (a & m) | (b & n) with the masks
    m = ones if c else zero and n its complement, from the run-time values ``ones`` and ``zero``
    (all bits set / none, of the lane type: fields of a kernel record, not constants).  A
    store of a select of c, a and x[i] into x[i] is turned by LLVM into a masked store
    (vpmaskmovd on AVX2, slow on AMD cores: with it the conversion's Inf/NaN pass took fp16
    rne on 1% NaN/Inf data from 0.61 to 0.96-0.98 ns per element); masks that the compiler
    cannot see are all ones or zero keep it a plain store, for two logic operations more."""
    t = _lane_type(a, b, ones, zero)
    if c != types.boolean or t is None:
        return None

    def codegen(context, builder, signature, args):
        cc, x, y, one, nil = args
        m = builder.select(cc, one, nil)
        n = builder.select(cc, nil, one)
        return builder.or_(builder.and_(x, m), builder.and_(y, n))
    return t(types.boolean, t, t, t, t), codegen


@intrinsic
def lane_count(typingctx, n, c):
    """n + 1 if c else n, for a uint32 counter n (modulo 2^32)."""
    if n != _U32 or c != types.boolean:
        return None

    def codegen(context, builder, signature, args):
        return builder.add(args[0], builder.zext(args[1], ir.IntType(32)))
    return _U32(_U32, types.boolean), codegen



@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c with ONE rounding, for three float64 or three float32 operands (LLVM's
    llvm.fma: the FMA instruction on x86-64 with FMA3 -- every AVX2 and AVX-512 host -- and a
    correctly rounded library call elsewhere; never contracted or reassociated, as no kernel
    uses fastmath).  Vectorises like any float operation.  Used by the arithmetic for exact
    residuals: fma(-q, b, a) = a - q*b whenever that difference is representable."""
    for t in (types.float64, types.float32):
        if a == t and b == t and c == t:
            def codegen(context, builder, signature, args):
                return builder.fma(args[0], args[1], args[2])
            return t(t, t, t), codegen
    return None

# ---- vector types ---------------------------------------------------------------------------
_F64 = ir.DoubleType()
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_I16 = ir.IntType(16)
_VF = ir.VectorType(_F64, LANES)
_VF32 = ir.VectorType(ir.FloatType(), LANES)
_VI = ir.VectorType(_I64, LANES)
_VACC = _VI if ACC_INT else _VF
_NS = ROWS * LANES                       # int16 lanes of a tile's exponent codes
_VS = ir.VectorType(_I16, _NS)
_VSROW = ir.VectorType(_I16, LANES)


class TileVector(types.Type):
    """The Numba type of one explicit LLVM vector of the tile kernel (its LLVM type in
    _LLVM_TYPES, by name).  Defined at module level on purpose: Numba's cache pickles the types
    in a compiled function's signature, and a class made inside a function is pickled by value,
    so another process would unpickle it as a NEW class whose types never equal this module's.
    That process then fails to compile any kernel mixing a cached callee's vector with a fresh
    one ("Cannot unify I16x32 and I16x32"): seen when two Dask workers shared a cache, one
    loading what the other had just written.  A module-level class pickles by reference."""

    def __init__(self, name):
        super().__init__(name=name)


_LLVM_TYPES = {}


@register_model(TileVector)
class _TileVectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _LLVM_TYPES[fe_type.name])


def _vector_type(name, llty):
    _LLVM_TYPES[name] = llty
    return TileVector(name)


#: The Numba types (names carry the width: a cache entry never mixes two shapes).
F64V = _vector_type(f"F64x{LANES}", _VF)
ACCV = _vector_type(f"Acc{'I' if ACC_INT else 'F'}64x{LANES}", _VACC)
I16V = _vector_type(f"I16x{_NS}", _VS)


def _mask(idx):
    return ir.Constant(ir.VectorType(_I32, len(idx)), list(idx))


def _splat(builder, x, vty):
    """x (an LLVM scalar of vty's element type) in every lane of vty."""
    t = builder.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(t, ir.Constant(vty, ir.Undefined), _mask([0] * vty.count))


def _scalar(context, builder, val, ty, to):
    return context.cast(builder, val, ty, to)


def _ptr(context, builder, aty, arr, off, vty):
    """Pointer to element ``off`` (flat, C order) of a contiguous array, cast to vty*."""
    data = context.make_array(aty)(context, builder, arr).data
    return builder.bitcast(builder.gep(data, [off]), vty.as_pointer())


def _declare(builder, name, fnty):
    """The LLVM function ``name`` of the current module (declared on first use)."""
    fn = builder.module.globals.get(name)
    return fn if fn is not None else ir.Function(builder.module, fnty, name)


def _is_c(arr, dtype):
    return isinstance(arr, types.Array) and arr.dtype == dtype and arr.layout == "C"


# ---- float64 vectors -------------------------------------------------------------------------
def _load(dtype, llty, vtype, align, doc):
    """The intrinsic load(arr, off) of one vector (LLVM type llty, Numba type vtype) from
    arr.flat[off:...] of a C-contiguous array of ``dtype`` (no bounds check)."""
    @intrinsic
    def load(typingctx, arr, off):
        if not _is_c(arr, dtype):
            return None

        def codegen(context, builder, sig, args):
            return builder.load(_ptr(context, builder, sig.args[0], args[0], args[1], llty),
                                align=align)
        return vtype(arr, types.intp), codegen
    load.__doc__ = doc
    return load


vload = _load(types.float64, _VF, F64V, 8,
              "The LANES float64 arr.flat[off:off + LANES] of a C-contiguous float64 array.")


@intrinsic
def vload_wide(typingctx, arr, off):
    """The LANES values arr.flat[off:off + LANES] of a C-contiguous float32 or float64 array as
    float64 (a float32 load widened exactly: half the bytes read)."""
    if not (_is_c(arr, types.float64) or _is_c(arr, types.float32)):
        return None

    def codegen(context, builder, sig, args):
        if sig.args[0].dtype == types.float64:
            return builder.load(_ptr(context, builder, sig.args[0], args[0], args[1], _VF),
                                align=8)
        x = builder.load(_ptr(context, builder, sig.args[0], args[0], args[1], _VF32), align=4)
        return builder.fpext(x, _VF)
    return F64V(arr, types.intp), codegen


@intrinsic
def vstore(typingctx, arr, off, v):
    """arr.flat[off:off + LANES] = v for a C-contiguous float64 array."""
    if not _is_c(arr, types.float64):
        return None

    def codegen(context, builder, sig, args):
        builder.store(args[2], _ptr(context, builder, sig.args[0], args[0], args[1], _VF),
                      align=8)
        return context.get_dummy_value()
    return types.none(arr, types.intp, F64V), codegen


@intrinsic
def vsplat(typingctx, x):
    """float64 x in every lane."""
    def codegen(context, builder, sig, args):
        return _splat(builder, _scalar(context, builder, args[0], sig.args[0], types.float64),
                      _VF)
    return F64V(x), codegen


@intrinsic
def vbcast(typingctx, arr, off):
    """arr.flat[off] (a C-contiguous float64 array) in every lane."""
    if not _is_c(arr, types.float64):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return _splat(builder, builder.load(builder.gep(data, [args[1]]), align=8), _VF)
    return F64V(arr, types.intp), codegen


def _fbinary(name, doc):
    @intrinsic
    def op(typingctx, a, b):
        def codegen(context, builder, sig, args):
            return getattr(builder, name)(args[0], args[1])
        return F64V(F64V, F64V), codegen
    op.__doc__ = doc
    return op


#: IEEE a + b, a - b, a * b in every lane (one rounding each; the kernels use them only where
#: the result is exact, or where that one rounding is the point: the RNE shortcut).
vadd = _fbinary("fadd", "a + b per lane (IEEE)")
vsub = _fbinary("fsub", "a - b per lane (IEEE)")
vmul = _fbinary("fmul", "a * b per lane (IEEE)")


@intrinsic
def vmax(typingctx, a, b):
    """a > b ? a : b per lane (x86 maxpd semantics; the kernels never pass a NaN they use)."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[0], args[1]), args[0], args[1])
    return F64V(F64V, F64V), codegen


@intrinsic
def vselect_ge(typingctx, a, b, x, y):
    """a >= b ? x : y per lane."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">=", args[0], args[1]), args[2], args[3])
    return F64V(F64V, F64V, F64V, F64V), codegen


def _funary(llname, doc):
    @intrinsic
    def op(typingctx, a):
        def codegen(context, builder, sig, args):
            fn = _declare(builder, f"llvm.{llname}.v{LANES}f64", ir.FunctionType(_VF, [_VF]))
            return builder.call(fn, [args[0]])
        return F64V(F64V), codegen
    op.__doc__ = doc
    return op


#: Per lane: round to an integer toward zero / to nearest, ties to even (exact operations).
vtrunc = _funary("trunc", "trunc(a) per lane: the integer toward zero (exact)")
vrint = _funary("roundeven", "roundeven(a) per lane: nearest integer, ties to even (exact)")


@intrinsic
def vand_bits(typingctx, a, mask):
    """The float64 whose bits are bits(a) & mask (mask an int64 scalar)."""
    def codegen(context, builder, sig, args):
        mv = _splat(builder, _scalar(context, builder, args[1], sig.args[1], types.int64), _VI)
        return builder.bitcast(builder.and_(builder.bitcast(args[0], _VI), mv), _VF)
    return F64V(F64V, mask), codegen


@intrinsic
def vbits_rsub(typingctx, c, a):
    """The float64 whose bits are c - bits(a) (c an int64 scalar; integer subtraction)."""
    def codegen(context, builder, sig, args):
        cv = _splat(builder, _scalar(context, builder, args[0], sig.args[0], types.int64), _VI)
        return builder.bitcast(builder.sub(cv, builder.bitcast(args[1], _VI)), _VF)
    return F64V(c, F64V), codegen


@intrinsic
def vany_between4(typingctx, a, b, c, d, lo, hi):
    """True when some lane of a, b, c or d lies strictly between the float64 scalars lo, hi."""
    def codegen(context, builder, sig, args):
        lv = _splat(builder, _scalar(context, builder, args[4], sig.args[4], types.float64), _VF)
        hv = _splat(builder, _scalar(context, builder, args[5], sig.args[5], types.float64), _VF)
        m = None
        for v in args[:4]:
            c1 = builder.and_(builder.fcmp_ordered(">", v, lv), builder.fcmp_ordered("<", v, hv))
            m = c1 if m is None else builder.or_(m, c1)
        m = builder.bitcast(m, ir.IntType(LANES))
        return builder.icmp_unsigned("!=", m, ir.Constant(ir.IntType(LANES), 0))
    return types.boolean(F64V, F64V, F64V, F64V, lo, hi), codegen


# ---- exact-integer accumulators -------------------------------------------------------------
@intrinsic
def vterm(typingctx, a):
    """Per lane the integer part of a (truncation toward zero) as an accumulator lane: int64
    (fptosi) or float64 (trunc), see the module docstring.  Exact for |a| < 2^53 (the kernels'
    range); NaN or larger lanes give an unspecified value, only in lanes whose result is
    discarded."""
    def codegen(context, builder, sig, args):
        if ACC_INT:
            return builder.fptosi(args[0], _VI)
        fn = _declare(builder, f"llvm.trunc.v{LANES}f64", ir.FunctionType(_VF, [_VF]))
        return builder.call(fn, [args[0]])
    return ACCV(F64V), codegen


@intrinsic
def vacc_add(typingctx, a, b):
    """a + b per accumulator lane: int64 addition, or float64 addition of integers whose sum
    stays below 2^53 (exact)."""
    def codegen(context, builder, sig, args):
        return (builder.add if ACC_INT else builder.fadd)(args[0], args[1])
    return ACCV(ACCV, ACCV), codegen


@intrinsic
def vacc_float(typingctx, a):
    """The accumulator lanes as float64 (exact below 2^53); an integer zero is +0 in both
    forms (float lanes: x + 0.0 turns a -0 sum of negative zeros into +0 and changes nothing
    else)."""
    def codegen(context, builder, sig, args):
        if ACC_INT:
            return builder.sitofp(args[0], _VF)
        return builder.fadd(args[0], ir.Constant(_VF, [0.0] * LANES))
    return F64V(ACCV), codegen


# ---- int16 exponent codes of a ROWS x LANES tile (lane LANES r + l: row r, column l) ---------
sload = _load(types.int16, _VS, I16V, 2,
              "The ROWS * LANES int16 arr.flat[off:off + ROWS * LANES] of a C-contiguous int16 "
              "array.")


@intrinsic
def sbcast_rows(typingctx, arr, off):
    """The LANES int16 arr.flat[off:off + LANES], repeated for each of the ROWS rows (lane
    LANES r + l holds element l)."""
    if not _is_c(arr, types.int16):
        return None

    def codegen(context, builder, sig, args):
        x = builder.load(_ptr(context, builder, sig.args[0], args[0], args[1], _VSROW), align=2)
        return builder.shuffle_vector(x, ir.Constant(_VSROW, ir.Undefined),
                                      _mask([lane for _ in range(ROWS) for lane in range(LANES)]))
    return I16V(arr, types.intp), codegen


@intrinsic
def sadd(typingctx, a, b):
    """Per lane int16 a + b (the kernels keep every sum inside the int16 range)."""
    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])
    return I16V(I16V, I16V), codegen


@intrinsic
def smax(typingctx, a, b):
    """Per lane signed int16 max(a, b)."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.icmp_signed(">", args[0], args[1]), args[0], args[1])
    return I16V(I16V, I16V), codegen


def _ssplat(context, builder, x, ty):
    return _splat(builder, builder.trunc(_scalar(context, builder, x, ty, types.int64), _I16),
                  _VS)


@intrinsic
def ssplat(typingctx, c):
    """The integer scalar c (truncated to 16 bits) in every int16 lane."""
    def codegen(context, builder, sig, args):
        return _ssplat(context, builder, args[0], sig.args[0])
    return I16V(c), codegen


@intrinsic
def sfloor(typingctx, a, lo):
    """Per lane signed int16 max(a, lo) (lo an integer scalar in the int16 range)."""
    def codegen(context, builder, sig, args):
        z = _ssplat(context, builder, args[1], sig.args[1])
        return builder.select(builder.icmp_signed(">", args[0], z), args[0], z)
    return I16V(I16V, lo), codegen


@intrinsic
def sminu_off(typingctx, w, a, c):
    """Per lane unsigned 16-bit min(w, a - c) (c an integer scalar; wrapping subtraction)."""
    def codegen(context, builder, sig, args):
        d = builder.sub(args[1], _ssplat(context, builder, args[2], sig.args[2]))
        return builder.select(builder.icmp_unsigned("<", args[0], d), args[0], d)
    return I16V(I16V, I16V, c), codegen


@intrinsic
def sany_ult(typingctx, w, c):
    """True when some lane of w, as an unsigned 16-bit number, is below the scalar c."""
    def codegen(context, builder, sig, args):
        m = builder.icmp_unsigned("<", args[0], _ssplat(context, builder, args[1], sig.args[1]))
        m = builder.bitcast(m, ir.IntType(_NS))
        return builder.icmp_unsigned("!=", m, ir.Constant(ir.IntType(_NS), 0))
    return types.boolean(I16V, c), codegen


def _srow(r):
    @intrinsic
    def op(typingctx, s):
        def codegen(context, builder, sig, args):
            row = builder.shuffle_vector(args[0], ir.Constant(_VS, ir.Undefined),
                                         _mask(range(LANES * r, LANES * r + LANES)))
            wide = builder.shl(builder.zext(row, _VI), _splat(builder, ir.Constant(_I64, 48),
                                                               _VI))
            return builder.bitcast(wide, _VF)
        return F64V(I16V), codegen
    op.__doc__ = (f"Row {r} of a tile's int16 codes as float64 lanes whose bits are the code, "
                  "read as an unsigned 16-bit number, shifted into the top 16 bits: for a code "
                  "16 e (e a biased float64 exponent in 1..2046) the power of two 2^(e - 1023).")
    return op


#: srow[r]: row r of a tile's exponent codes as powers of two (see _srow).
srow = tuple(_srow(r) for r in range(ROWS))
srow0, srow1, srow2, srow3 = srow



# ---- a block maximum (softfloat.mx) ---------------------------------------------------------
@intrinsic
def absmax16(typingctx, arr, start):
    """max over j < 16 of (arr[start + j] & 0x7FFFFFFF), for a C-contiguous 1-d uint32 array of
    float32 patterns (no bounds check: the caller guarantees start + 16 <= arr.size).

    A block maximum over 16 or 32 elements is too short for LLVM's loop vectoriser, which falls
    back to scalar code (measured by softfloat.mx: 39 ms for the block maxima of 16M elements on
    one core, 20x the time of reading them).  This emits one unaligned <16 x i32> load, an AND
    and llvm.vector.reduce.umax, which LLVM lowers to a zmm load and four shuffle/max steps with
    AVX-512, or two ymm halves with AVX2.  The integer max of |x| patterns is the max of |x| for
    numbers (patterns of one sign are ordered like their magnitudes), and every NaN pattern
    exceeds Inf's 0x7F800000."""
    if not (_is_c(arr, types.uint32) and arr.ndim == 1 and isinstance(start, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        off = context.cast(builder, args[1], sig.args[1], types.intp)
        vty = ir.VectorType(_I32, 16)
        v = builder.load(_ptr(context, builder, sig.args[0], args[0], off, vty), align=4)
        v = builder.and_(v, ir.Constant(vty, [0x7FFFFFFF] * 16))
        fn = _declare(builder, "llvm.vector.reduce.umax.v16i32", ir.FunctionType(_I32, [vty]))
        return builder.call(fn, [v])
    return types.uint32(arr, start), codegen


# ---- sparse scans (the arithmetic's marked elements) -----------------------------------------
@intrinsic
def eq_mask64(typingctx, arr, start, value):
    """The uint64 whose bit j is set where arr[start + j] == value, j < 64, for a C-contiguous
    1-d uint32 or uint64 array and a value of its type (no bounds check: the caller guarantees
    start + 64 <= arr.size).

    One <64 x iN> load, a compare with the splatted value and the bitcast of the <64 x i1>
    result to an i64, which LLVM lowers to vector compares and movemasks (vpcmpeqd / vmovmskps,
    8 of each on AVX2 for uint32).  The same mask built by a loop (``m |= (x[j] == 0) << j``)
    ran in 64-bit lanes with a shift per element: the arithmetic's scan of a chunk for its
    marked proxies, 1.3% of them, took 0.39 ns an element that way (Zen 3, one thread)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
            and arr.dtype in (types.uint32, types.uint64) and isinstance(start, types.Integer)
            and value == arr.dtype):
        return None
    width = arr.dtype.bitwidth

    def codegen(context, builder, sig, args):
        off = context.cast(builder, args[1], sig.args[1], types.intp)
        ity = ir.IntType(width)
        vty = ir.VectorType(ity, 64)
        v = builder.load(_ptr(context, builder, sig.args[0], args[0], off, vty),
                         align=width // 8)
        splat = ir.Constant(vty, ir.Undefined)
        splat = builder.insert_element(splat, args[2], ir.Constant(ir.IntType(32), 0))
        splat = builder.shuffle_vector(splat, ir.Constant(vty, ir.Undefined),
                                       ir.Constant(ir.VectorType(ir.IntType(32), 64), [0] * 64))
        z = builder.icmp_unsigned("==", v, splat)
        return builder.bitcast(z, _I64)
    return types.uint64(arr, start, value), codegen


@intrinsic
def popcount64(typingctx, m):
    """The number of set bits of the uint64 m (llvm.ctpop: one popcnt instruction)."""
    if m != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        fn = _declare(builder, "llvm.ctpop.i64", ir.FunctionType(_I64, [_I64]))
        return builder.call(fn, [args[0]])
    return types.uint64(m), codegen
