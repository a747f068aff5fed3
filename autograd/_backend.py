"""The engine's only door to softfloat: formats, roundings, correctly rounded arithmetic, GEMMs.

No other module of autograd imports softfloat (tests/test_structure.py checks it): what they need
of it passes through here.

Provides
- softfloat's vocabulary: :class:`Format`, :class:`Mode`, :func:`parse_mode`, :func:`derive_seed`;
- format lookup and ordering: :func:`get_fmt`, :func:`contains` (every value of one format lies
  on another's grid), :func:`widest` (the type-promotion rule);
- :func:`round_to`: one rounding of an array onto a format's grid in the policy's mode;
  :func:`round_in`: the same with an explicit mode and seed (the optimizer's roundings);
- :func:`arith` and :func:`sqrt`: correctly rounded + - * / and square root in a format;
- :func:`tc_matmul`: the GEMM a precision policy selects (host BLAS, a ``softfloat.tensorcore``
  model, or the DFP-16 integer GEMM of ``softfloat.dfp``); :func:`fp8_gemm`: the same for the
  fp8 operands of a training recipe (two formats allowed on the ideal models);
- the stochastic-rounding seed stream (:func:`reset_sr_stream`).

Every op of autograd reaches softfloat through these few functions, so the precision policy is
applied in one place.  A policy object here is anything with ``mode`` (softfloat.Mode), ``seed``,
``compute`` (Format or None for DFP-16), ``accumulation`` and ``accumulation_fmt``.

Imports numpy and softfloat only.  ``softfloat.tensorcore`` and ``softfloat.dfp`` are imported on
first use: policies that never call them (O0, the float64 reference) do not pay their start-up.
"""

from __future__ import annotations

import functools

import numpy as np

import softfloat as sf

__all__ = [
    "F32",
    "F64",
    "Format",
    "Mode",
    "arith",
    "contains",
    "derive_seed",
    "fp8_gemm",
    "get_fmt",
    "parse_mode",
    "reset_sr_stream",
    "round_counting_overflow",
    "round_in",
    "round_to",
    "sqrt",
    "tc_matmul",
    "to_carrier",
    "widest",
]

#: softfloat's format record, rounding-mode enum, mode parser and seed mixer, as the engine uses
#: them (policies, optimizers, the RNG).
Format = sf.Format
Mode = sf.Mode
parse_mode = sf.parse_mode
derive_seed = sf.derive_seed

F32 = sf.get_format("fp32")
F64 = sf.get_format("fp64")
_RNE = sf.Mode.RNE
_SR = sf.Mode.SR
_NP_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def get_fmt(fmt) -> sf.Format:
    """A softfloat Format from a Format or a name/alias ("fp16", "bfloat16", ...)."""
    return sf.get_format(fmt)


def _id_cache(fn):
    """Memoise fn(a, b) on the identities of its Format arguments.  Formats are frozen records,
    but hashing a dataclass on every op costs more than the op's bookkeeping; the cache keeps the
    arguments alive, so an id is never reused while its entry exists."""
    table = {}

    def cached(a, b):
        if a is b:
            return fn(a, b)         # the cheap case: every function here is trivial on (f, f)
        hit = table.get((id(a), id(b)))
        if hit is None:
            hit = table[(id(a), id(b))] = (a, b, fn(a, b))
        return hit[2]
    cached.__doc__, cached.__name__ = fn.__doc__, fn.__name__
    return cached


@_id_cache
def contains(dst: sf.Format, src: sf.Format) -> bool:
    """True when every value of ``src`` (specials included) is exactly a value of ``dst``.

    A value m * 2^e of src (m < 2^p_src) is on dst's grid when dst has at least src's precision,
    reaches at least as low (smallest subnormal) and as high (largest finite): then dst's spacing
    at that magnitude is never coarser than src's.  fp16 and bf16 are both inside fp32; neither
    contains the other.
    """
    if dst is src or dst == src:
        return True
    return (dst.man_bits >= src.man_bits
            and dst.smallest_subnormal <= src.smallest_subnormal
            and dst.max >= src.max
            and (dst.has_inf or not src.has_inf)
            and (dst.has_nan or not src.has_nan))


@_id_cache
def _widest2(a: sf.Format, b: sf.Format) -> sf.Format:
    if a is b or contains(a, b):
        return a
    if contains(b, a):
        return b
    # Neither contains the other (fp16 vs bf16): promote to the first IEEE format holding both,
    # as PyTorch promotes float16 + bfloat16 to float32.
    return F32 if contains(F32, a) and contains(F32, b) else F64


def widest(*fmts: sf.Format) -> sf.Format:
    """The promotion of formats: the narrowest of {inputs, fp32, fp64} containing them all."""
    out = fmts[0]
    for f in fmts[1:]:
        if f is not out:
            out = _widest2(out, f)
    return out


_IEEE = {(11, 52): "f64", (8, 23): "f32"}


@_id_cache
def _native2(fmt: sf.Format, _unused: None) -> str | None:
    if fmt.inf_nan != "ieee" or not fmt.subnormals or fmt.saturate:
        return None
    return _IEEE.get((fmt.exp_bits, fmt.man_bits))


_NATIVE: dict = {}


def _native(fmt: sf.Format) -> str | None:
    """"f64" / "f32" when fmt is exactly IEEE binary64 / binary32 (gradual underflow, Inf and
    NaN, overflow to Inf): numpy's own float64 and float32 arithmetic is then the format's."""
    hit = _NATIVE.get(id(fmt))
    if hit is None:
        hit = _NATIVE[id(fmt)] = (fmt, _native2(fmt, None))   # keeps fmt alive: ids stay unique
    return hit[1]


_CARRIER: dict = {}


def carrier(fmt: sf.Format) -> np.dtype:
    """fmt.carrier_dtype, memoised (a derived property recomputed on every access)."""
    hit = _CARRIER.get(id(fmt))
    if hit is None:
        hit = _CARRIER[id(fmt)] = (fmt, np.dtype(fmt.carrier_dtype))
    return hit[1]


def _sums_exact(fmt: sf.Format) -> bool:
    """Is every sum/difference of two values of fmt exact in float64?

    Values are integer multiples of 2^(emin - m) below 2^(emax + 1), so a sum is a multiple of
    2^(emin - m) below 2^(emax + 2): it needs emax + 2 - (emin - m) bits.  fp16: 15 + 2 + 24 = 41
    <= 53; bf16 and fp32 (127 + 2 + 149 = 278) do not qualify.
    """
    return fmt.emax + 2 - (fmt.emin - fmt.man_bits) <= 53


# ----- stochastic rounding seeds -----------------------------------------------------------
# Each rounding call under mode "sr" gets its own stream derive_seed(policy.seed, n), where n
# counts the SR rounding calls made so far: a program that issues the same ops in the same order
# gets the same bits, and no two calls share random bits.
_SR_CALLS = [0]


def reset_sr_stream() -> None:
    """Restart the stochastic-rounding call counter (``autograd.manual_seed`` calls this)."""
    _SR_CALLS[0] = 0


def _next_seed(policy) -> int:
    n = _SR_CALLS[0]
    _SR_CALLS[0] = n + 1
    return sf.derive_seed(policy.seed, n)


def _mode(policy):
    return _RNE if policy is None else policy.mode


# ----- rounding -------------------------------------------------------------------------------
def to_carrier(x: np.ndarray, fmt: sf.Format) -> np.ndarray:
    """x (already on fmt's grid, or on a narrower format's grid) as fmt's carrier dtype: exact."""
    dt = carrier(fmt)
    if type(x) is np.ndarray and x.dtype == dt:
        return x
    return np.asarray(x).astype(dt, copy=False)


def round_to(x, fmt: sf.Format, policy=None) -> np.ndarray:
    """Round every element of ``x`` once onto ``fmt``'s grid in the policy's mode (RNE if None).

    Returns fmt's carrier array; it may be ``x`` itself when no rounding can change it.
    """
    x = np.asarray(x)
    if fmt is F32 and x.dtype == np.float32:
        return x                    # the O0 common case, first
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    kind = _native(fmt)
    if kind == "f64":
        # binary64 is the reference format: float64 values are on its grid already (float32
        # values widen exactly).
        return x.astype(np.float64, copy=False)
    mode = _mode(policy)
    if x.dtype == np.float32 and contains(fmt, F32):
        return x  # float32 values lie on any grid containing fp32: nothing to round
    if kind == "f32" and mode == _RNE:
        # numpy's float64 -> float32 cast is the IEEE conversion in round-to-nearest-even
        # (gradual underflow, overflow to Inf): exactly sf.round(x, fp32, "rne").
        with np.errstate(over="ignore"):
            return x.astype(np.float32)
    seed = _next_seed(policy) if mode == _SR else None
    out = sf.round(x, fmt, mode, seed=seed)
    return np.asarray(out).reshape(x.shape)


def round_counting_overflow(x, fmt: sf.Format) -> tuple[np.ndarray, int]:
    """(RNE rounding of x onto fmt, number of elements whose rounding overflowed), the count
    taken from softfloat's overflow flag: it is raised exactly when the rounded magnitude would
    exceed fmt's largest finite value, whatever fmt then returns (Inf, NaN for "fn" formats, or
    +-max when fmt saturates or has no Inf/NaN), so ties at max + ulp/2 count as the format's
    own rounding decides them."""
    fl = sf.Flags()
    r = sf.round(np.asarray(x), fmt, "rne", flags=fl)
    return np.asarray(r), int(fl.overflow)

def round_in(x, fmt: sf.Format, mode, *, seed: int | None = None,
             sr_bits: int | None = None) -> np.ndarray:
    """``softfloat.round(x, fmt, mode, seed=, sr_bits=)``: one rounding of x onto fmt's grid in
    an explicit mode (seed and sr_bits for mode "sr" only), for code that keys its own random
    streams (the optimizer's master-to-storage roundings) instead of the policy's."""
    kw = {} if seed is None else {"seed": seed}
    if sr_bits is not None:
        kw["sr_bits"] = sr_bits
    return sf.round(x, fmt, mode, **kw)


# ----- correctly rounded arithmetic -------------------------------------------------------------
def _softfloat_op(name: str):
    fn = getattr(sf, name, None)
    if fn is None:
        raise RuntimeError(
            f"softfloat.{name} is required for a correctly rounded {name} in this format and "
            "rounding mode, and this softfloat has no such function")
    return fn


def arith(op: str, a: np.ndarray, b: np.ndarray, fmt: sf.Format, policy=None) -> np.ndarray:
    """Correctly rounded ``a op b`` in ``fmt`` (op: "add", "sub", "mul", "div"); a and b are
    carriers whose values lie on grids inside fmt.  Broadcasts like numpy."""
    f = _NP_OPS[op]
    kind = _native(fmt)
    if kind == "f64":
        return f(np.asarray(a, np.float64), np.asarray(b, np.float64))
    mode = _mode(policy)
    a, b = np.asarray(a), np.asarray(b)
    if kind == "f32" and mode == _RNE and a.dtype == np.float32 and b.dtype == np.float32:
        return f(a, b)  # one IEEE binary32 operation, round-to-nearest-even
    if carrier(fmt) == np.float32 and (
            mode == _RNE or op == "mul" or (op != "div" and _sums_exact(fmt))):
        # Computing in float64 and rounding once is the correctly rounded result here:
        # - mul: the product of two p <= 24 bit values has <= 48 bits: exact in float64, so
        #   the only rounding is ours, in any mode (float32-carrier formats span 2^-149..2^128,
        #   so products stay inside float64's normal range);
        # - add/sub of formats whose sums are exact in float64 (see _sums_exact): same;
        # - otherwise RNE: double rounding RN_p(RN_53(x)) = RN_p(x) for +, -, *, / when
        #   53 >= 2p + 2 (Figueroa 1995; Roux 2014 covers gradual underflow), and p <= 24 for
        #   every float32-carrier format.
        r = f(a.astype(np.float64), b.astype(np.float64))
        return round_to(r, fmt, policy)
    a, b = np.broadcast_arrays(a.astype(carrier(fmt)), b.astype(carrier(fmt)))
    kw = {"seed": _next_seed(policy)} if mode == _SR else {}
    out = _softfloat_op(op)(np.ascontiguousarray(a), np.ascontiguousarray(b), fmt, mode, **kw)
    return np.asarray(out).reshape(a.shape)


def sqrt(a: np.ndarray, fmt: sf.Format, policy=None) -> np.ndarray:
    """Correctly rounded square root in ``fmt`` (a's values on a grid inside fmt)."""
    kind = _native(fmt)
    if kind == "f64":
        return np.sqrt(np.asarray(a, np.float64))
    mode = _mode(policy)
    if kind == "f32" and mode == _RNE and np.asarray(a).dtype == np.float32:
        return np.sqrt(a)  # IEEE sqrt is correctly rounded
    if carrier(fmt) == np.float32 and mode == _RNE:
        # RN_p(RN_53(sqrt x)) = RN_p(sqrt x) when 53 >= 2p + 1 (same references as arith).
        return round_to(np.sqrt(np.asarray(a, np.float64)), fmt, policy)
    kw = {"seed": _next_seed(policy)} if mode == _SR else {}
    a = np.ascontiguousarray(np.asarray(a, carrier(fmt)))
    return np.asarray(_softfloat_op("sqrt")(a, fmt, mode, **kw)).reshape(a.shape)


# ----- fp8 GEMMs of the training recipes (autograd.recipes) -------------------------------------
def fp8_gemm(a: np.ndarray, b: np.ndarray, fmt_a: sf.Format, fmt_b: sf.Format,
             policy) -> np.ndarray:
    """``a @ b`` (2-d) for operands on fp8 grids (fmt_a, fmt_b: e4m3fn / e5m2 presets), with
    the policy's accumulation, as a float32 array (the fp32 accumulator, not yet descaled).

    "native": host sgemm on the fp8 values.  A Tensor Core model: one call of that model with
    in_format = the operands' format.  A mixed e5m2 x e4m3fn GEMM (HYBRID's backward) runs on
    an ideal model with in_format fp32, which holds both grids exactly: an ideal model's
    result, one rounding of the exact dot product, does not depend on in_format.  The hardware
    models take one input format, so they refuse a mixed GEMM with a clear error."""
    acc = policy.accumulation
    if acc == "native":
        return np.matmul(np.asarray(a, np.float32), np.asarray(b, np.float32))
    if acc == "dfp16":
        raise ValueError("the fp8 recipes' GEMMs cannot use accumulation 'dfp16'; use a Tensor "
                         "Core model ('ideal-fp32', 'h100', ...) or 'native'")
    fmt = fmt_a
    if not (fmt_a is fmt_b or fmt_a == fmt_b):
        if not acc.startswith("ideal"):
            raise ValueError(f"Tensor Core model {acc!r} takes one input format; this GEMM "
                             f"multiplies {fmt_a.name} by {fmt_b.name} (fp8_format 'HYBRID' "
                             "backward): use fp8_format 'E4M3' or an ideal model")
        fmt = F32
    return np.asarray(_tensorcore().gemm(a, b, None, model=acc, in_format=fmt.name,
                                         acc_format=policy.accumulation_fmt.name), np.float32)


# ----- GEMMs -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _tensorcore():
    from softfloat import tensorcore
    return tensorcore


@functools.lru_cache(maxsize=1)
def _dfp():
    from softfloat import dfp
    return dfp


def tc_matmul(a: np.ndarray, b: np.ndarray, policy, c: np.ndarray | None = None) -> np.ndarray:
    """``a @ b (+ c)`` with the policy's accumulation, batched over leading dims like np.matmul.

    a (..., m, k) and b (..., k, n) hold values already on the compute format's grid (the caller
    rounds them: that rounding is part of the op, and its VJP).  c, if given, broadcasts to the
    (m, n) result and enters the accumulator (the bias of a Linear or Conv2d).  Returns the
    accumulator's carrier: the compute carrier for "native", the accumulation format's carrier
    for a Tensor Core model, float32 for DFP-16.
    """
    acc = policy.accumulation
    if acc == "native":
        # Host BLAS in the compute format's carrier (sgemm for fp32 and narrower formats, dgemm
        # for fp64): the reference fp32 and float64 arithmetic, as in PyTorch CPU eager.
        dt = carrier(policy.compute)
        out = np.matmul(a.astype(dt, copy=False), b.astype(dt, copy=False))
        return out if c is None else out + np.asarray(c, dt)
    if acc != "dfp16":
        # softfloat.tensorcore takes the batch (leading dimensions broadcast as np.matmul's),
        # transposed views (read in place) and the bias (broadcast to the output) as they are:
        # one call, one thread decision, no copies here.
        return _tensorcore().gemm(a, b, c, model=acc, in_format=policy.compute,
                                  acc_format=policy.accumulation_fmt)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    cm = None if c is None else np.broadcast_to(np.asarray(c), shape[-2:])

    def gemm2(x, y):
        return _dfp_gemm(x, y, policy, cm)
    if len(shape) == 2:
        return gemm2(a, b)
    # Batched: one GEMM per matrix of the broadcast batch, as a batched cuBLAS call runs.
    a = np.broadcast_to(a, shape[:-2] + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    b = np.broadcast_to(b, shape[:-2] + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    outs = [gemm2(a[i], b[i]) for i in range(a.shape[0])]
    return np.stack(outs).reshape(shape) if outs else np.zeros(shape, np.float32)


#: Policy rounding mode -> the DFP quantizer's rounding (floor is toward -inf, as the
#: arithmetic right shift it models).
DFP_ROUNDINGS = {_RNE: "nearest", _SR: "stochastic", sf.Mode.RDN: "floor"}


#: int16 products per int32 chain in the dfp16 policy's GEMMs (see _dfp_gemm).
DFP_CHAIN_LEN = 2


def _dfp_gemm(a: np.ndarray, b: np.ndarray, policy, c) -> np.ndarray:
    """DFP-16 GEMM (Das et al. 2018): each operand quantized to 16-bit dynamic fixed point with
    one shared exponent per tensor, int16 products chained in int32 and flushed to fp32 by
    softfloat.dfp; a bias is then added in fp32 (non-GEMM work stays fp32 in that recipe)."""
    dfp = _dfp()
    mode = policy.mode                      # a softfloat.Mode: dfp rounds in the same vocabulary
    sr = mode == _SR
    qa = dfp.quantize(a, 16, mode, seed=_next_seed(policy) if sr else None)
    qb = dfp.quantize(b, 16, mode, seed=_next_seed(policy) if sr else None)
    # Bounded int32 chains, the paper's overflow remedy: |i| <= 2^15 - 1, so one product is at
    # most (2^15 - 1)^2 = 2^30 - 2^16 + 1 and a chain of two (one VNNI int16 pair) at most
    # 2^31 - 2^17 + 2 < 2^31 - 1: no int32 lane can wrap, whatever the data.  Longer chains
    # wrap on real gradients (about one output in ten at k = 1024 with Gaussian data).
    out = np.asarray(dfp.gemm(qa, qb, chain_len=DFP_CHAIN_LEN), dtype=np.float32)
    return out if c is None else arith("add", out, np.asarray(c, np.float32), F32, policy)
