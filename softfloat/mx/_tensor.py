"""The block tensor of softfloat.mx: element and scale codes and values, and what they mean.

Provides :class:`BlockTensor` (returned by mx.quantize; ``dequantize()``, ``pack()``),
:func:`from_bits` (a BlockTensor from element and scale codes), :func:`pack_codes` /
:func:`unpack` (the packed byte layout) and the layout helpers the other modules share.

Layout (see softfloat/mx/_kernels_quant.py): a tensor of shape ``shape`` is viewed as a
C-contiguous (P, R, C) array cut into tiles of (br, bc) elements; 1-D blocks along ``axis``
are (br, bc) = (block, 1) over (R = shape[axis], C = elements after it), or (1, block) when the
axis is the last; 2-D blocks cover the last two axes.  ``scales`` has ``shape`` with each
blocked axis replaced by its number of blocks (a trailing partial block counts as one: it is
zero-padded, the padding never stored).

Packing (``pack``): the element codes in C order as a little-endian bit stream, code i in bits
[w i, w i + w) of the stream (w = 4, 6 or 8): fp4 two codes per byte, low nibble first; fp6
four codes in three bytes (byte 0 = c0 | c1 << 6, byte 1 = c1 >> 2 | c2 << 4, byte 2 =
c2 >> 4 | c3 << 2); a last partial byte is padded with zero bits.

Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from .._quantized import QuantizedTensor
from ..bits import from_bits as _sf_from_bits
from ._formats import BlockFormat, get_block_format

__all__ = ["BlockTensor", "from_bits", "pack_codes", "unpack", "normalize_layout"]


def normalize_layout(shape, fmt: BlockFormat, block, axis):
    """(block tuple, axes tuple, (P, R, C, br, bc), scale shape) for a tensor of ``shape``.

    block None -> the format's default, 1-D; an int or a 1-tuple -> 1-D along ``axis`` (default
    -1); a 2-tuple -> 2-D over the last two axes (``axis`` None or those two axes)."""
    ndim = len(shape)
    if block is None:
        block = (fmt.block,)
    elif isinstance(block, (int, np.integer)) and not isinstance(block, (bool, np.bool_)):
        block = (int(block),)
    elif isinstance(block, (tuple, list)):
        block = tuple(block)
    else:
        raise TypeError(f"block must be None, an int or a tuple of one or two ints, got "
                        f"{type(block).__name__}")
    if not 1 <= len(block) <= 2 or any(isinstance(b, (bool, np.bool_)) or
                                       not isinstance(b, (int, np.integer)) or b < 1
                                       for b in block):
        raise ValueError(f"block must hold one or two positive ints (e.g. 32 or (16, 16)), got "
                         f"{block!r}")
    block = tuple(int(b) for b in block)
    if ndim < len(block):
        raise ValueError(f"a {len(block)}-D block needs an array of at least {len(block)} "
                         f"dimension(s); got shape {tuple(shape)}")
    if len(block) == 1:
        a = -1 if axis is None else axis
        if isinstance(a, (tuple, list)) and len(a) == 1:
            a = a[0]
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ValueError(f"axis must be an int for a 1-D block, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for shape {tuple(shape)}")
        a = int(a) % ndim
        P = int(np.prod(shape[:a], dtype=np.int64))
        L = int(shape[a])
        after = int(np.prod(shape[a + 1:], dtype=np.int64))
        if a == ndim - 1:
            geom = (P, 1, L, 1, block[0])
        else:
            geom = (P, L, after, block[0], 1)
        sshape = tuple(shape[:a]) + (-(-L // block[0]),) + tuple(shape[a + 1:])
        return block, (a,), geom, sshape
    want = (ndim - 2, ndim - 1)
    if axis is not None:
        ax = tuple(int(v) % ndim if isinstance(v, (int, np.integer)) and -ndim <= v < ndim
                   else None for v in (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if ax != want:
            raise ValueError(f"2-D blocks cover the last two axes {want} (use np.moveaxis to "
                             f"bring others there); got axis={axis!r}")
    R, C = int(shape[-2]), int(shape[-1])
    P = int(np.prod(shape[:-2], dtype=np.int64))
    sshape = tuple(shape[:-2]) + (-(-R // block[0]), -(-C // block[1]))
    return block, want, (P, R, C, block[0], block[1]), sshape


def expand_scales(scales, geom, shape):
    """The per-element array of a per-block array (P, nr, nc) laid out by geom."""
    P, R, C, br, bc = geom
    s = np.asarray(scales).reshape(P, -(-R // br), -(-C // bc))
    s = np.repeat(s, br, axis=1)[:, :R]
    s = np.repeat(s, bc, axis=2)[:, :, :C]
    return s.reshape(shape)


class BlockTensor(QuantizedTensor):
    """A tensor quantized to a block format (see softfloat/mx/__init__.py).

    Attributes
    ----------
    format : BlockFormat            shape : tuple            block : tuple of ints
    axis : tuple of the blocked axes (normalised)            scale_rule : str
    elements : float32 array (shape): the element values (on the element grid, unscaled)
    element_bits : uint8 array (shape): the element codes (sign-magnitude; MXINT8 two's
        complement)
    scales : float32 array: the block scales' values (2^(code - 127) or the E4M3 value; NaN)
    scale_bits : uint8 array: the E8M0 or UE4M3 codes
    tensor_scale : float or None (NVFP4's per-tensor float32 scale)
    saturated : int or None: elements clamped to +-max (None when built by from_bits)
    flushed : int or None: nonzero inputs whose element is 0
    lazy : bool: True for the result of mx.quantize on a dask array: ``elements``,
        ``element_bits``, ``scales`` and ``scale_bits`` are then dask arrays and ``saturated``
        / ``flushed`` 0-d dask arrays, all views of one intermediate; ``compute()`` gives the
        numpy-backed tensor
    """

    _DATA = "elements"

    def __init__(self, fmt, elements, element_bits, scales, scale_bits, *, block, axis, geom,
                 scale_rule=None, tensor_scale=None, saturated=None, flushed=None, mode=None):
        self.format = get_block_format(fmt)
        self.elements = elements
        self.element_bits = element_bits
        self.scales = scales
        self.scale_bits = scale_bits
        self.block = block
        self.axis = axis
        self._geom = geom
        self.scale_rule = scale_rule
        self.tensor_scale = tensor_scale
        self.saturated = saturated
        self.flushed = flushed
        self.mode = mode
        self._lazy = None           # the dask intermediate of a lazy tensor (softfloat/mx/_lazy)

    def _from_records(self, rec) -> BlockTensor:
        """The numpy-backed tensor of the computed records (QuantizedTensor.compute)."""
        first = tuple(slice(None, None, self.block[self.axis.index(d)]) if d in self.axis
                      else slice(None) for d in range(rec.ndim))
        return BlockTensor(self.format, np.ascontiguousarray(rec["v"]),
                           np.ascontiguousarray(rec["b"]),
                           np.ascontiguousarray(rec["sv"][first]),
                           np.ascontiguousarray(rec["sb"][first]), block=self.block,
                           axis=self.axis, geom=self._geom, scale_rule=self.scale_rule,
                           tensor_scale=self.tensor_scale, saturated=int(rec["nsat"].sum()),
                           flushed=int(rec["nflush"].sum()), mode=self.mode)

    def block_scales(self) -> np.ndarray:
        """The scale of every element's block, as float64 (shape ``shape``), tensor scale
        included (a dask array for a lazy tensor)."""
        if self._lazy is not None:
            s = self._lazy["sv"].astype(np.float64)
            return s * (1.0 if self.tensor_scale is None else float(self.tensor_scale))
        s = expand_scales(self.scales.astype(np.float64), self._geom, self.shape)
        return s * (1.0 if self.tensor_scale is None else float(self.tensor_scale))

    def dequantize(self, dtype=np.float32) -> np.ndarray:
        """elements * block scale * tensor scale: computed exactly in float64 (at most
        8 + 4 + 24 significant bits), then rounded once to ``dtype`` (float32: RNE, Inf
        beyond its range; float64: exact).  A NaN-scale block gives NaN.  A lazy tensor gives
        a dask array (the same bits, chunk by chunk)."""
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"dtype must be float32 or float64, got {dt}")
        with np.errstate(invalid="ignore", over="ignore"):
            return (self.elements.astype(np.float64) * self.block_scales()).astype(dt)

    def pack(self) -> np.ndarray:
        """The element codes packed as a little-endian bit stream (uint8; module docstring).
        A lazy tensor is computed first (the stream is one numpy array)."""
        if self._lazy is not None:
            return self.compute().pack()
        return pack_codes(self.element_bits, self.format.bits)

    def __repr__(self):
        if self._lazy is not None:
            return (f"BlockTensor({self.format.name}, shape={self.shape}, block={self.block}, "
                    f"axis={self.axis}, scale_rule={self.scale_rule!r}, lazy: "
                    f"{self.elements!r})")
        return (f"BlockTensor({self.format.name}, shape={self.shape}, block={self.block}, "
                f"axis={self.axis}, scale_rule={self.scale_rule!r}, saturated="
                f"{self.saturated}, flushed={self.flushed})")


def pack_codes(codes, width: int) -> np.ndarray:
    """Codes (< 2^width) in C order as a little-endian bit stream of ``width``-bit fields."""
    c = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    if width == 8:
        return c.copy()
    if width not in (4, 6):
        raise ValueError(f"width must be 4, 6 or 8, got {width}")
    bits = np.unpackbits(c[:, None], axis=1, bitorder="little")[:, :width]
    return np.packbits(bits.reshape(-1), bitorder="little")


def unpack(data, fmt, count: int) -> np.ndarray:
    """The ``count`` element codes of a block format packed by pack() (uint8, 1-d)."""
    fmt = get_block_format(fmt)
    w = fmt.bits
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError("data must be a 1-d uint8 array (as returned by pack())")
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) \
            or count < 0:
        raise ValueError(f"count must be a non-negative int, got {count!r}")
    need = -(-count * w // 8)
    if data.size < need:
        raise ValueError(f"{count} codes of {w} bits need {need} bytes, got {data.size}")
    if w == 8:
        return data[:count].copy()
    bits = np.unpackbits(data[:need], bitorder="little")[:count * w].reshape(count, w)
    return np.packbits(bits, axis=1, bitorder="little").reshape(count)


def _element_values(fmt: BlockFormat, codes: np.ndarray) -> np.ndarray:
    if fmt.is_int:
        return (codes.astype(np.int8).astype(np.float32) / np.float32(64.0))
    if np.any(codes >= (1 << fmt.bits)):
        raise ValueError(f"element code above {(1 << fmt.bits) - 1} for {fmt.name}")
    return _sf_from_bits(codes, fmt.element).astype(np.float32)


def scale_values(fmt: BlockFormat, codes: np.ndarray) -> np.ndarray:
    """float32 values of E8M0 codes (2^(c - 127), 0xFF NaN) or UE4M3 codes (the e4m3fn value
    of the low 7 bits, 0x7F NaN)."""
    codes = np.asarray(codes, dtype=np.uint8)
    if fmt.scale == "e8m0":                  # softfloat's e8m0 preset decodes them
        return np.asarray(_sf_from_bits(codes, "e8m0"), dtype=np.float32)
    return np.asarray(_sf_from_bits(codes & np.uint8(0x7F), "ue4m3"), dtype=np.float32)


def from_bits(element_bits, scale_bits, fmt, *, block=None, axis=None, tensor_scale=None):
    """A BlockTensor from element codes (uint8, the tensor's shape) and scale codes (uint8, the
    scale shape that block and axis give), e.g. read back from pack()/unpack() or from another
    library.  Every element code decodes (e4m3 NaN and e5m2 Inf/NaN patterns to NaN / +-Inf,
    MXINT8's 0x80 to -2.0)."""
    fmt = get_block_format(fmt)
    eb = np.asarray(element_bits)
    sb = np.asarray(scale_bits)
    if eb.dtype != np.uint8 or sb.dtype != np.uint8:
        raise TypeError("element_bits and scale_bits must be uint8 arrays")
    block, axes, geom, sshape = normalize_layout(eb.shape, fmt, block, axis)
    if sb.shape != sshape:
        raise ValueError(f"scale_bits has shape {sb.shape}; block={block}, axis={axes} over "
                         f"shape {eb.shape} need {sshape}")
    ts = None if tensor_scale is None else float(np.float32(tensor_scale))
    if ts is not None and fmt.scale != "ue4m3":
        raise ValueError("tensor_scale applies to nvfp4 only")
    return BlockTensor(fmt, _element_values(fmt, eb), eb.copy(), scale_values(fmt, sb), sb.copy(),
                       block=block, axis=axes, geom=geom, tensor_scale=ts)
