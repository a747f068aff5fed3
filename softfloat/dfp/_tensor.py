"""The DFP tensor record and the argument checks shared by the softfloat.dfp API.

:class:`DFPTensor` holds signed integers (the mantissas) and the shared exponents of one tensor
in one of three layouts (see softfloat/dfp/__init__.py): per tensor, per slice along an axis, or
per block of N consecutive elements along an axis.  Rounding modes are softfloat.Mode values;
DFP's own names ("nearest", "stochastic", "biased", "floor") are aliases of RNE, SR, RHU, RDN.
Pure Python and numpy; no kernels here.
"""

from __future__ import annotations

import math

import numpy as np

from .._quantized import QuantizedTensor
from .._validate import DEFAULT_SR_BITS
from ..modes import Mode, parse_mode
from ..rng import seed_key

__all__ = ["DFPTensor", "ROUNDINGS", "parse_rounding", "sr_args", "check_bits", "check_int"]

#: DFP's rounding names (docs/dfp16.md) and the softfloat.Mode each is an alias of.  Every Mode
#: is accepted (as a Mode, its short name or any alias softfloat.parse_mode knows); DFP adds
#: "arithmetic_shift" for RDN.
ROUNDINGS = {"nearest": Mode.RNE, "stochastic": Mode.SR, "biased": Mode.RHU, "floor": Mode.RDN}
_DFP_ALIASES = {"arithmetic_shift": Mode.RDN}


def parse_rounding(mode=None, rounding=None, func="dfp.quantize") -> Mode:
    """The softfloat.Mode of ``mode=`` (or of ``rounding=``, its older name; not both).  None for
    both: RNE."""
    if mode is not None and rounding is not None:
        raise ValueError(f"{func}: give the rounding mode once: mode={mode!r} and "
                         f"rounding={rounding!r} were both given (rounding= is the older name "
                         "of mode=)")
    m = rounding if mode is None else mode
    if m is None:
        return Mode.RNE
    if isinstance(m, str):
        key = m.strip().lower().replace("-", "_").replace(" ", "_")
        if key in _DFP_ALIASES:
            return _DFP_ALIASES[key]
    try:
        return parse_mode(m)
    except ValueError:
        raise ValueError(
            f"{func}: unknown rounding mode {m!r}; accepted: a softfloat.Mode or its name: rne "
            "(alias nearest), sr (stochastic), rhu (biased, round half up), rdn (floor, "
            "arithmetic_shift), rna, rtz, rup, rto, or any alias softfloat.parse_mode "
            "accepts") from None


def sr_args(mode: Mode, seed, sr_bits, func="dfp.quantize"):
    """(key, rbits) for the kernels.  The seed rule shared by all of softfloat: a seed (or
    sr_bits) given with a deterministic mode is an error; mode SR needs a seed."""
    if mode != Mode.SR:
        if seed is not None:
            raise ValueError(f"{func}: seed={seed!r} was given with the deterministic rounding "
                             f"mode {mode.short!r}; the seed is only used by mode 'sr' "
                             "(stochastic rounding): drop it, or pass mode='sr'")
        if sr_bits is not None:
            raise ValueError(f"{func}: sr_bits is only used by mode 'sr' (stochastic "
                             f"rounding), not by mode {mode.short!r}")
        return np.uint64(0), 1
    if seed is None:
        raise ValueError(f"{func}: mode 'sr' (stochastic rounding) needs seed=<int>: the random "
                         "bits of element i are a function of (seed, i), so results are "
                         "reproducible")
    rbits = DEFAULT_SR_BITS if sr_bits is None else check_int(sr_bits, "sr_bits", 1, 62)
    return seed_key(seed), rbits


def check_int(value, name, lo, hi):
    """An int in [lo, hi] (bool and floats refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {value}")
    return value


def check_bits(bits, lo=8, hi=16, name="bits"):
    return check_int(bits, name, lo, hi)


def _norm_axis(axis, ndim):
    if axis is None:
        return None
    axis = check_int(axis, "axis", -max(ndim, 1), max(ndim - 1, 0))
    if ndim == 0:
        raise ValueError("axis must be None for a 0-d tensor")
    return axis % ndim


def normalize_layout(ndim, axis, block):
    """Checked (axis, block): axis None or in 0..ndim-1, block None or a positive int."""
    axis = _norm_axis(axis, ndim)
    if block is not None:
        if axis is None:
            raise ValueError("block needs an axis (the axis along which blocks are formed)")
        block = check_int(block, "block", 1, 1 << 62)
    return axis, block


def layout_geometry(shape, axis, block):
    """(outer, L, inner, N, nb) of a layout: the tensor seen as (outer, L, inner) with the shared
    axis in the middle, blocks of N elements along it, nb = ceil(L / N) blocks (nb >= 1)."""
    if axis is None:
        size = math.prod(shape)
        return 1, size, 1, max(size, 1), 1
    L = int(shape[axis])
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1:])
    N = L if block is None else block
    N = max(N, 1)
    nb = max(-(-L // N), 1)
    return outer, L, inner, N, nb


def block_absmax(values, shape, axis, block):
    """max |values| over each block: an array of shape (outer, nb, inner) (0 for empty blocks).

    ``values`` is any real or integer array of ``shape``; the maximum is exact (no arithmetic).
    """
    outer, L, inner, N, nb = layout_geometry(shape, axis, block)
    a3 = np.abs(np.asarray(values)).reshape(outer, L, inner)
    pad = nb * N - L
    if pad:
        a3 = np.concatenate([a3, np.zeros((outer, pad, inner), a3.dtype)], axis=1)
    if a3.size == 0:
        return np.zeros((outer, nb, inner), a3.dtype)
    return a3.reshape(outer, nb, N, inner).max(axis=2)


def expand_blocks(per_block, shape, axis, block):
    """Spread an (outer, nb, inner) per-block array onto every element: an array of ``shape``."""
    outer, L, inner, N, nb = layout_geometry(shape, axis, block)
    e = np.repeat(np.asarray(per_block).reshape(outer, nb, inner), N, axis=1)[:, :L, :]
    return np.ascontiguousarray(e.reshape(shape))


def exponent_shape(shape, axis, block):
    """Public shape of the exponent array: () per tensor, else ``shape`` with the shared axis
    replaced by the number of blocks (1 without blocks: broadcastable, like keepdims=True)."""
    if axis is None:
        return ()
    _, _, _, _, nb = layout_geometry(shape, axis, block)
    return tuple(shape[:axis]) + (nb,) + tuple(shape[axis + 1:])


class DFPTensor(QuantizedTensor):
    """A dynamic fixed point tensor: value[idx] = mantissa[idx] * 2^exponent[block(idx)].

    Attributes
    ----------
    mantissa : ndarray of int16 (bits <= 16) or int32 (bits <= 32), |mantissa| <= 2^(bits-1) - 1
        (bits = 32, the int32 accumulator format DFP-32, also admits -2^31)
    exponent : ndarray of int32, shape () per tensor, else the mantissa's shape with the shared
        axis replaced by the number of blocks (see ``axis``, ``block``)
    bits : int, the integer width P (values are symmetric: -(2^(P-1) - 1) .. 2^(P-1) - 1)
    axis : None (one exponent for the whole tensor) or the axis along which elements share
        (for a gemm operand: the reduction axis, A: axis=1, B: axis=0)
    block : None (the whole axis shares one exponent: per row / per column) or N (blocks of N
        consecutive elements along ``axis``; the last block may be shorter)
    saturated : int, how many values were clipped to +-(2^(P-1) - 1) when this tensor was made
    underflowed : int, how many nonzero inputs became 0 when this tensor was made
    lazy : bool, True for the result of dfp.quantize on a dask array: ``mantissa`` is then a
        dask array and ``saturated`` / ``underflowed`` are 0-d dask arrays (``exponent`` is
        always numpy); ``compute()`` gives the numpy-backed tensor
    """

    _DATA = "mantissa"
    __slots__ = ("mantissa", "exponent", "bits", "axis", "block", "saturated", "underflowed",
                 "_lazy")

    def __init__(self, mantissa, exponent, bits=16, *, axis=None, block=None, saturated=0,
                 underflowed=0):
        bits = check_bits(bits, 2, 32)
        m = np.asarray(mantissa)
        if m.dtype.kind not in "iu":
            raise TypeError(f"DFPTensor mantissa must be an integer array, got {m.dtype}")
        lim = (1 << (bits - 1)) - 1
        # Symmetric range, except DFP-32 (the int32 accumulator format), where -2^31 is a
        # legitimate value (a saturated or wrapped int32 lane).
        low = -lim - 1 if bits == 32 else -lim
        if m.size and (int(m.max()) > lim or int(m.min()) < low):
            raise ValueError(f"DFPTensor mantissa out of range for bits={bits}: integers must "
                             f"lie in {low}..{lim}")
        m = np.asarray(m, dtype=np.int16 if bits <= 16 else np.int32, order="C")
        axis, block = normalize_layout(m.ndim, axis, block)
        e = np.asarray(exponent)
        if e.dtype.kind not in "iu":
            raise TypeError(f"DFPTensor exponent must be an integer array, got {e.dtype}")
        want = exponent_shape(m.shape, axis, block)
        if e.shape != want:
            raise ValueError(f"DFPTensor exponent shape {e.shape} does not match the layout "
                             f"(axis={axis}, block={block}) of a mantissa of shape {m.shape}: "
                             f"expected {want}")
        if e.size and (int(e.max()) > (1 << 30) or int(e.min()) < -(1 << 30)):
            raise ValueError("DFPTensor exponents must lie in -2^30..2^30")
        self.mantissa = m
        self.exponent = np.asarray(e, dtype=np.int32, order="C")
        self.bits = bits
        self.axis = axis
        self.block = block
        self.saturated = int(saturated)
        self.underflowed = int(underflowed)
        self._lazy = None

    @classmethod
    def _trusted(cls, mantissa, exponent, bits, axis, block, saturated=0, underflowed=0):
        """A tensor made by this package's own kernels, whose arrays are valid by construction
        (C-contiguous int16/int32 mantissa in range, int32 exponent of the layout's shape,
        normalized axis and block): the checks of __init__ are skipped, which matters for the
        small tensors of a training step (quantize is called twice per GEMM)."""
        t = object.__new__(cls)
        t.mantissa = mantissa
        t.exponent = exponent
        t.bits = bits
        t.axis = axis
        t.block = block
        t.saturated = saturated
        t.underflowed = underflowed
        t._lazy = None
        return t

    # ----- lazy (dask) tensors ------------------------------------------------------------
    def _from_records(self, rec) -> DFPTensor:
        """The numpy-backed tensor of the computed records (QuantizedTensor.compute)."""
        return DFPTensor._trusted(np.ascontiguousarray(rec["m"]), self.exponent, self.bits,
                                  self.axis, self.block, int(rec["s"].sum()),
                                  int(rec["u"].sum()))

    # ----- shape and layout ---------------------------------------------------------------
    @property
    def layout(self):
        """(axis, block): (None, None) per tensor, (axis, None) per slice, (axis, N) blocks."""
        return self.axis, self.block

    def geometry(self):
        return layout_geometry(self.shape, self.axis, self.block)

    def block_exponents(self) -> np.ndarray:
        """Exponents as an int64 array of shape (outer, nb, inner) (see layout_geometry)."""
        outer, _, inner, _, nb = self.geometry()
        return self.exponent.astype(np.int64).reshape(outer, nb, inner)

    def expanded_exponent(self) -> np.ndarray:
        """The exponent of every element: an int64 array of the mantissa's shape."""
        return expand_blocks(self.block_exponents(), self.shape, self.axis, self.block)

    # ----- values -------------------------------------------------------------------------
    def dequantize(self, dtype=np.float64) -> np.ndarray:
        """The values mantissa * 2^exponent (a lazy dask array for a lazy tensor).

        float64 (default): exact for every exponent float64 can scale to without underflow or
        overflow (all tensors quantized from float32, and their DFP-32 products).  float32:
        the exact value rounded once to nearest-even (numpy's float64 -> float32 conversion).
        """
        if dtype not in (np.float64, np.float32, "float64", "float32"):
            raise ValueError(f"dequantize dtype must be float64 or float32, got {dtype!r}")
        if self._lazy is not None:
            return self.mantissa.map_blocks(_dequantize_chunk, self.exponent, self.axis,
                                            self.block, np.dtype(dtype), dtype=np.dtype(dtype))
        v = np.ldexp(self.mantissa.astype(np.float64), self.expanded_exponent().astype(np.int32))
        return v.astype(np.dtype(dtype))

    def __repr__(self):
        lay = "per-tensor" if self.axis is None else (
            f"axis={self.axis}" + ("" if self.block is None else f", block={self.block}"))
        if self._lazy is not None:
            return (f"DFPTensor(shape={self.shape}, bits={self.bits}, {lay}, "
                    f"exponent range={self._erange()}, lazy: {self.mantissa!r})")
        return (f"DFPTensor(shape={self.shape}, bits={self.bits}, {lay}, "
                f"exponent range={self._erange()}, saturated={self.saturated}, "
                f"underflowed={self.underflowed})")

    def _erange(self):
        if self.exponent.size == 0:
            return "()"
        return f"[{int(self.exponent.min())}, {int(self.exponent.max())}]"


def same_layout(a: DFPTensor, b: DFPTensor) -> bool:
    return a.shape == b.shape and a.axis == b.axis and a.block == b.block


def check_dfp(t, name):
    if not isinstance(t, DFPTensor):
        raise TypeError(f"{name} must be a softfloat.dfp.DFPTensor (make one with "
                        f"dfp.quantize(x, bits=16)), got {type(t).__name__}")
    if t._lazy is not None:
        raise TypeError(f"{name} is a lazy DFPTensor (dfp.quantize of a dask array): call "
                        f"{name}.compute() first")
    return t


def chunk_exponents(exponent, loc, axis, block):
    """The part of a tensor's exponent array (its public shape) that covers the chunk at
    ``loc`` ((start, stop) per axis; along a blocked axis the chunk starts on a block)."""
    if axis is None:
        return exponent
    sl = []
    for d, (a, b) in enumerate(loc):
        if d != axis:
            sl.append(slice(a, b))
        elif block is None:
            sl.append(slice(None))
        else:
            sl.append(slice(a // block, -(-b // block)))
    return exponent[tuple(sl)]


def _dequantize_chunk(m, exponent, axis, block, dtype, block_info=None):
    """mantissa * 2^exponent for one chunk of a lazy tensor (exponent: the whole tensor's)."""
    e = chunk_exponents(exponent, block_info[0]["array-location"], axis, block)
    return DFPTensor._trusted(np.asarray(m), np.asarray(e), 16, axis, block).dequantize(dtype)
