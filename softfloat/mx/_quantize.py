"""mx.quantize: argument checking and the choice of kernel (semantics in softfloat/mx/__init__).

Imports numpy and softfloat only.
"""

from __future__ import annotations

import numpy as np

from .._validate import as_float_array, check_sr
from ..modes import Mode, parse_mode
from . import _kernels_quant as KQ
from ._formats import MX_RULES, RULE_CODES, get_block_format
from ._kernels_fast import fast_consts
from ._kernels_scale import SCALE_EP, nv_head
from ._lazy import is_dask, quantize_lazy
from ._tensor import BlockTensor, normalize_layout

__all__ = ["quantize", "SERIAL_MAX"]

#: Arrays of at most this many elements run on the calling thread (as softfloat.round: waking
#: the worker threads costs more than the work below ~2^18 elements); same chunks, same bits.
SERIAL_MAX = 1 << 18

#: Smallest positive e4m3 value 2^-9 and the default NVFP4 scale minimum 2^-6 (E4M3's
#: smallest normal, the PyTorch reference's lower clamp).
_E4M3_MIN = 2.0 ** -9
NVFP4_SCALE_MIN = 2.0 ** -6

#: Element rounding modes the kernels implement (softfloat.Mode codes 0..6: rne, rna, rtz, rup,
#: rdn, rto, sr); a mode added to softfloat later is refused until they learn it.
_MODES = tuple(range(7))

#: sr_bits limit of NVFP4's exact division: the round-to-odd quotient keeps 53 bits, of which
#: the element (p = 2) and the random bits read p + r <= 52 (softfloat/mx/_kernels_elem.ro_div).
_MAX_SR_BITS_EXACT = 50


def _check_sr(mode, seed, sr_bits, limit):
    """softfloat's seed / sr_bits checks, and the shared rule that a seed given with a
    deterministic mode is an error."""
    if mode != Mode.SR and seed is not None:
        raise ValueError(f"seed is only used by mode 'sr' (stochastic rounding); mode "
                         f"{mode.short!r} is deterministic: leave seed out")
    return check_sr(mode, seed, sr_bits, limit)


def _check_nvfp4(fmt, tensor_scale, scale_min, exact_division):
    if fmt.scale != "ue4m3":
        for name, v in (("tensor_scale", tensor_scale), ("scale_min", scale_min)):
            if v is not None:
                raise ValueError(f"{name} applies to nvfp4 only ({fmt.name} has power-of-two "
                                 "E8M0 scales)")
        if exact_division:
            raise ValueError(f"exact_division applies to nvfp4 only: {fmt.name}'s elements "
                             "are always rounded once from the exact x / 2^E")
        return None, None
    if not isinstance(exact_division, (bool, np.bool_)):
        raise TypeError("exact_division must be a bool")
    smin = NVFP4_SCALE_MIN if scale_min is None else scale_min
    if isinstance(smin, (bool, np.bool_)) or not isinstance(smin, (int, float, np.floating,
                                                                   np.integer)):
        raise TypeError(f"scale_min must be a float, got {type(smin).__name__}")
    smin = float(smin)
    from ..rounding import round as _round
    if not (_E4M3_MIN <= smin <= 448.0) or float(_round(np.float64(smin), "e4m3fn")) != smin:
        raise ValueError(f"scale_min must be a positive e4m3 value in [2^-9, 448] (the scale "
                         f"grid), got {scale_min!r}")
    ts = None
    if tensor_scale is not None:
        if isinstance(tensor_scale, (bool, np.bool_)) or not isinstance(
                tensor_scale, (int, float, np.floating, np.integer)):
            raise TypeError(f"tensor_scale must be a float, got {type(tensor_scale).__name__}")
        t32 = np.float32(tensor_scale)
        with np.errstate(over="ignore", divide="ignore"):
            worst = (np.float32(1.0) / t32) / np.float32(smin)
        if not (np.isfinite(t32) and t32 >= np.float32(2.0 ** -126)) or not np.isfinite(worst):
            raise ValueError(f"tensor_scale must be a finite normal float32 (>= 2^-126) with "
                             f"(1 / tensor_scale) / scale_min finite in float32, got "
                             f"{tensor_scale!r}")
        ts = float(t32)
    return ts, smin


def quantize(x, fmt, *, block=None, axis=None, scale_rule=None, mode="rne", seed=None,
             sr_bits=None, tensor_scale=None, scale_min=None, exact_division=False,
             index_offset=0):
    """Quantize ``x`` to the block format ``fmt``; returns a BlockTensor.

    Parameters (the rules are written out in softfloat/mx/__init__.py)
    ----------
    x : float16/float32/float64 array (NVFP4 with exact_division=False takes float32 only:
        it emulates the recipe's float32 arithmetic), or a dask array of those: the result is
        then lazy (dask arrays inside, ``.compute()`` for numpy; softfloat/mx/_lazy.py), with
        the bits of the numpy call for any chunking, stochastic rounding included
    fmt : "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8" or
        "nvfp4" (or a BlockFormat)
    block : None (the format's: 32, nvfp4 16), an int (1-D blocks along ``axis``) or a pair
        (2-D blocks over the last two axes, e.g. (16, 16))
    axis : the blocked axis of 1-D blocks (default -1)
    scale_rule : "floor" (default), "ceil", "even" or "rceil" for the MX formats; "nvfp4"
        (its default and only rule) for nvfp4
    mode : element rounding: "rne" (default), "rna", "rtz", "rup", "rdn", "rto" or "sr"
    seed, sr_bits : stochastic rounding (mode "sr" only): bits of element i from
        random_bits(key(seed), index_offset + i), i its C-order flat index; sr_bits default 24
    tensor_scale, scale_min, exact_division : nvfp4 only (see the NVFP4 rule)
    index_offset : the global flat index of x's first element (pieces of a larger tensor
        quantized with their offsets draw the whole tensor's random bits)
    """
    fmt = get_block_format(fmt)
    if is_dask(x):
        return quantize_lazy(quantize, x, fmt, block, axis,
                             {"scale_rule": scale_rule, "mode": mode, "seed": seed,
                              "sr_bits": sr_bits, "tensor_scale": tensor_scale,
                              "scale_min": scale_min, "exact_division": exact_division},
                             index_offset)
    return _quantize(x, fmt, block, axis, scale_rule, mode, seed, sr_bits, tensor_scale,
                     scale_min, exact_division, index_offset, general=False)


def _quantize(x, fmt, block, axis, scale_rule, mode, seed, sr_bits, tensor_scale, scale_min,
              exact_division, index_offset, *, general):
    """quantize; general=True runs the definitional kernel (round_elem for every element) on
    any input, as the tests do to check the fast kernels against it."""
    nv = fmt.scale == "ue4m3"
    rule = ("nvfp4" if nv else "floor") if scale_rule is None else scale_rule
    if not isinstance(rule, str):
        raise TypeError(f"scale_rule must be a str, got {type(rule).__name__}")
    rule = rule.strip().lower()
    allowed = ("nvfp4",) if nv else MX_RULES
    if rule not in allowed:
        raise ValueError(f"scale_rule {scale_rule!r} does not apply to {fmt.name}; accepted: "
                         f"{', '.join(allowed)}")
    mode = parse_mode(mode)
    if int(mode) not in _MODES:
        raise ValueError(f"mode {mode.short!r} is not supported by softfloat.mx; accepted: "
                         f"{', '.join(Mode(c).short for c in _MODES)}")
    tscale, smin = _check_nvfp4(fmt, tensor_scale, scale_min, exact_division)
    exact = bool(nv and exact_division)
    key, rbits = _check_sr(mode, seed, sr_bits, _MAX_SR_BITS_EXACT if exact else 62)
    if isinstance(index_offset, (bool, np.bool_)) or not isinstance(index_offset,
                                                                    (int, np.integer)):
        raise TypeError("index_offset must be an int")
    if not 0 <= int(index_offset) < (1 << 62):
        raise ValueError(f"index_offset must be in 0..2^62-1, got {index_offset}")
    arr = as_float_array(x)
    if arr.ndim == 0:
        raise ValueError("x must have at least one dimension (a block needs elements)")
    if nv and not exact and arr.dtype != np.float32:
        raise ValueError("nvfp4 with exact_division=False emulates the recipe's float32 "
                         "arithmetic: pass float32 data (x.astype(np.float32)) or "
                         "exact_division=True")
    blk, axes, geom, sshape = normalize_layout(arr.shape, fmt, block, axis)
    P, R, C, br, bc = geom
    nr, nc, nt, tpc, nch = KQ.geometry(P, R, C, br, bc)
    EP = fmt.elem_params(int(mode), rbits)
    n = arr.size
    eb = np.empty(n, dtype=np.uint8)
    vals = np.empty(n, dtype=np.float32)
    sc = np.empty(nt, dtype=np.uint8)
    sv = np.empty(nt, dtype=np.float32)
    counts = np.zeros((max(nch, 1), 2), dtype=np.int64)
    rp = np.array([RULE_CODES[rule], fmt.emax_elem, fmt.man_bits, fmt.max_frac], dtype=np.int64)
    head = nv_head(smin if nv else 1.0, tscale, exact)
    base = np.int64(index_offset)
    flat = arr.reshape(-1)
    vb = vals.view(np.uint32)
    if n == 0:
        pass
    elif general or arr.dtype != np.float32 or exact:
        x64 = flat.astype(np.float64)
        KQ.general(x64, x64.view(np.uint64), eb, vb, sc, sv, R, C, br, bc, EP, rp, nv, head,
                   SCALE_EP, key, base, counts, nr, nc, nt, tpc)
    else:
        kern = KQ.fast_f32_serial if n <= SERIAL_MAX else KQ.fast_f32
        kern(flat.view(np.uint32), flat, eb, vb, sc, sv, R, C, br, bc, EP, fast_consts(EP), rp,
             nv, head, SCALE_EP, key, base, counts, nr, nc, nt, tpc)
    return BlockTensor(fmt, vals.reshape(arr.shape), eb.reshape(arr.shape), sv.reshape(sshape),
                       sc.reshape(sshape), block=blk, axis=axes, geom=geom, scale_rule=rule,
                       tensor_scale=tscale, saturated=int(counts[:, 0].sum()),
                       flushed=int(counts[:, 1].sum()), mode=mode)
