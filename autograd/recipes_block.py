"""Block-scaled training recipes: Transformer Engine's ``MXFP8BlockScaling`` and
``NVFP4BlockScaling`` (names, arguments and defaults as TE's), run bit for bit on softfloat.mx.

Provides the recipe records :class:`MXFP8BlockScaling` and :class:`NVFP4BlockScaling` (frozen,
re-exported by ``autograd.recipes``, policies ``mxfp8`` and ``nvfp4``) and the per-GEMM runtime
state :class:`BlockGemmState`, which quantizes the operands of a Linear layer's three GEMMs
(``autograd.ops.block.block_linear`` runs them with ``softfloat.mx.gemm``, ideal-fp32: the exact
sum of the scaled products, plus the bias, rounded once to fp32).

For y = x W^T + b with x (M, K), W (N, K) and the output gradient dY (M, N), every GEMM operand is
blocked along that GEMM's contraction dimension k, as the hardware requires; TE quantizes a
tensor "rowwise" and "columnwise" from its high-precision values, never one from the other:

    GEMM              A (m x k)              B (k x n)              k
    fprop  y = x W^T  x, rowwise             W^T: W rowwise          K
    dgrad  dX = dY W  dY, rowwise            W, columnwise           N
    wgrad  dW = dY^T x  dY^T: dY columnwise  x, columnwise           M

MXFP8 (``MXFP8BlockScaling(fp8_format="E4M3")``): blocks of 32 along k, E8M0 scales by cuBLAS's
rule (softfloat.mx scale_rule "rceil": the smallest power of two X with amax / X <= elem max, so
nothing saturates), elements RNE.  "E4M3": mxfp8_e4m3 everywhere; "HYBRID": e4m3 for x and W,
mxfp8_e5m2 for dY.

NVFP4 (``NVFP4BlockScaling()``, NVIDIA's recipe, arXiv:2509.25149): e2m1 elements, E4M3 block
scales, one fp32 tensor scale per quantized tensor.
  - blocks: 1 x 16 along k for x and dY; 16 x 16 tiles for W (the same tiles serve W and W^T:
    fprop and dgrad see identical weights); ``disable_2d_quantization=True``: 1 x 16 for W too;
  - elements: RNE for x and W, stochastic rounding for dY (``disable_stochastic_rounding``);
  - the random Hadamard transform (16 x 16, one random sign vector shared by every layer and
    step, seeded from the policy's seed) on both wgrad operands along M, the wgrad contraction
    (``disable_rht``).  It is orthogonal, so (dY^T R)(R^T x) = dY^T x up to the quantization.
    M is padded with zero rows to a multiple of 16 first (zeros add nothing to the products);
  - tensor scale (TE's s_global): t = fl32(1 / fl32(2688 / amax)), amax the tensor's own (after
    the transform where there is one), 2688 = 448 * 6 = E4M3 max * E2M1 max, so that the block
    scales fl32(fl32(amax_b / 6) / t) (softfloat.mx's NVFP4 rule) land in E4M3's range.  When t
    is not usable by softfloat.mx (amax 0, not finite, or below 2688 * 2^-119 so that
    (1 / t) / 2^-9 would overflow fp32) the tensor is quantized without a tensor scale (t = 1),
    as TE replaces a zero encode scale by 1;
  - block scale lower clamp 2^-9 (softfloat.mx ``scale_min``, the smallest E4M3 value): TE casts
    the block scale to E4M3 without a lower clamp; 2^-9 is the nearest softfloat.mx allows (a
    block whose scale TE would flush to 0 keeps 2^-9 here).  The block scale arithmetic is the
    PyTorch reference's (softfloat.mx): it can differ from TE's fused kernel, which folds 1/6
    into the global scale, by one E4M3 step in rare blocks;
  - ``bf16_last_layers`` (not a TE argument: TE leaves it to the user, the NVFP4 paper keeps the
    last layers in BF16): the last n recipe GEMM modules of the model (module order) run as the
    bf16 policy's ``linear``; default 1 (the output layer).
  - stochastic rounding seeds: the n-th SR cast of GEMM module i draws its bits from
    derive_seed(policy.seed, SR_STREAM, i, n) and the element's flat index (softfloat.mx's
    counter-based generator): same seed, same bits, whatever the threads.  The counter n is
    state (``sr_calls``, in state_dict and checkpoints), so a resumed run draws the same bits.

State.  MXFP8 needs none (every scale comes from the tensor being cast); NVFP4 needs its SR
counter.  Both keep "steps" and "open" (the instrumentation's step numbering, as the per-tensor
recipes).  Instrumentation per operand and step (``autograd.recipes.fp8_stats`` rows): amax (the
largest magnitude cast), saturated and flushed-to-zero element counts and numel, summed over the
operand's casts in the step (x and dY are cast twice, rowwise and columnwise; W twice), and for
NVFP4 the tensor scale of the operand's last cast (``scale`` is None: there is no per-tensor
scale).  With ``autograd.recipes.record_histograms(model)`` a row also carries the histogram of
the scaled values x / (block scale * tensor scale) (computed in float64, before the element
rounding) against the element format (e4m3fn, e5m2 or e2m1: underflow, subnormal, overflow =
at or beyond max + ulp/2, which the cast saturates).

Imports numpy, dataclasses, the engine's _backend (its door to softfloat) and instrument only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import _backend as B
from .instrument import tensor_stats

__all__ = ["BlockGemmState", "MXFP8BlockScaling", "NVFP4BlockScaling"]

#: Stream tags for derive_seed (arbitrary constants, distinct from the small counters the
#: engine's other derive_seed calls use): stochastic rounding of gradients, Hadamard signs.
SR_STREAM = 0x5F4E5646          # "NVF_" in ASCII
RHT_STREAM = 0x52485421         # "RHT!"
#: E4M3 max * E2M1 max = 448 * 6: TE's global scale puts the tensor amax at this product.
NVFP4_RANGE = np.float32(2688.0)
#: Smallest positive E4M3 value, the lowest block scale softfloat.mx accepts (see above).
NVFP4_SCALE_MIN = 2.0 ** -9
#: fl32(1 / t) / 2^-9 must stay finite for softfloat.mx: 1 / t < 2^119, i.e. t > 2^-119.
_T_MIN = np.float32(2.0 ** -119)
OPERANDS = ("input", "weight", "grad_output")
#: The element format of each block format (the grid of the scaled values).
ELEMENT_FORMATS = {"mxfp8_e4m3": "e4m3fn", "mxfp8_e5m2": "e5m2", "nvfp4": "e2m1"}
_SAT_ELEM: dict = {}


def _saturating_element(name: str):
    """The element format with saturating overflow, so that tensor_stats counts as overflow
    the values at or beyond max + ulp/2 (e2m1 itself has no Inf to overflow to)."""
    fmt = _SAT_ELEM.get(name)
    if fmt is None:
        base = B.get_fmt(ELEMENT_FORMATS[name])
        fmt = _SAT_ELEM[name] = dataclasses.replace(base, name=f"{base.name}_satfinite",
                                                   saturate=True)
    return fmt


def _bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _fmt_name(value, accepted: tuple, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, one of {', '.join(accepted)}; got "
                        f"{type(value).__name__}")
    key = value.strip().upper().removeprefix("FORMAT.")
    if key not in accepted:
        raise ValueError(f"{what} {value!r} is not supported; accepted: {', '.join(accepted)}")
    return key


class _BlockRecipe:
    policy_name = ""

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, **dataclasses.asdict(self)}

    def new_state(self, *, index: int = 0, count: int = 1) -> BlockGemmState:
        """The state of the index-th of count recipe GEMM modules of a model."""
        return BlockGemmState(self, index=index, count=count)


@dataclass(frozen=True)
class MXFP8BlockScaling(_BlockRecipe):
    """transformer_engine.common.recipe.MXFP8BlockScaling: MXFP8 blocks of 32 along each GEMM's
    k, E8M0 scales by the cuBLAS (rceil) rule.  fp8_format: "E4M3" (default) or "HYBRID" (e5m2
    output gradients).  TE's other fields (margin, which MXFP8 does not use; fp8_dpa, fp8_mha,
    backward_override, enable_2d_quantization) are not modelled."""

    fp8_format: str = "E4M3"

    policy_name = "mxfp8"

    def __post_init__(self):
        if isinstance(self.fp8_format, str) and self.fp8_format.strip().upper() in (
                "E5M2", "FORMAT.E5M2"):
            raise ValueError("fp8_format 'E5M2': pure E5M2 training is not supported (as in "
                             "Transformer Engine); accepted: E4M3, HYBRID")
        object.__setattr__(self, "fp8_format",
                           _fmt_name(self.fp8_format, ("E4M3", "HYBRID"), "fp8_format"))

    def block_format(self, operand: str) -> str:
        """The softfloat.mx format of an operand's casts."""
        return "mxfp8_e5m2" if (operand == "grad_output" and self.fp8_format == "HYBRID") \
            else "mxfp8_e4m3"


@dataclass(frozen=True)
class NVFP4BlockScaling(_BlockRecipe):
    """transformer_engine.common.recipe.NVFP4BlockScaling: NVFP4 with 1x16 blocks for inputs and
    gradients, 16x16 for weights, SR for gradients, the random Hadamard transform on the wgrad
    operands (see the module docstring).  fp4_format "E2M1" and fp8_format "E4M3" are the only
    values (as TE).  bf16_last_layers (this project's): how many of the model's last recipe
    GEMM modules stay in bf16."""

    disable_rht: bool = False
    disable_stochastic_rounding: bool = False
    disable_2d_quantization: bool = False
    fp4_format: str = "E2M1"
    fp8_format: str = "E4M3"
    bf16_last_layers: int = 1

    policy_name = "nvfp4"

    def __post_init__(self):
        put = object.__setattr__
        for f in ("disable_rht", "disable_stochastic_rounding", "disable_2d_quantization"):
            put(self, f, _bool(f, getattr(self, f)))
        put(self, "fp4_format", _fmt_name(self.fp4_format, ("E2M1",), "fp4_format"))
        put(self, "fp8_format", _fmt_name(self.fp8_format, ("E4M3",), "fp8_format"))
        n = self.bf16_last_layers
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"bf16_last_layers must be a non-negative int (0: every layer in "
                             f"NVFP4), got {n!r}")
        put(self, "bf16_last_layers", int(n))

    def block_format(self, operand: str) -> str:
        return "nvfp4"


BLOCK_RECIPES = {cls.__name__: cls for cls in (MXFP8BlockScaling, NVFP4BlockScaling)}


# ----- the casts -------------------------------------------------------------------------------
def tensor_amax(x: np.ndarray) -> np.float32:
    """max |x| over the non-NaN elements (0 when there are none), float32."""
    a = np.abs(np.asarray(x, np.float32))
    a = a[~np.isnan(a)]
    return np.float32(a.max()) if a.size else np.float32(0.0)


def nvfp4_tensor_scale(amax) -> float | None:
    """TE's s_global = fl32(1 / fl32(2688 / amax)), or None (no tensor scale) when amax is 0,
    not finite, or so small that softfloat.mx cannot take the scale (see the module docstring)."""
    amax = np.float32(amax)
    if not (np.isfinite(amax) and amax > 0):
        return None
    with np.errstate(over="ignore"):
        t = np.float32(1.0) / (NVFP4_RANGE / amax)
    return float(t) if np.isfinite(t) and t > _T_MIN else None


def _pad16(x: np.ndarray, axis: int) -> np.ndarray:
    """x with zeros appended along axis up to a multiple of 16 (the Hadamard group)."""
    r = (-x.shape[axis]) % 16
    if r == 0:
        return x
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, r)
    return np.pad(x, pad)


class BlockGemmState:
    """The recipe state of one module's GEMMs under a block recipe: the SR counter (NVFP4), the
    step counter and per-step instrumentation (see the module docstring).  ``high_precision``:
    this module is one of NVFP4's bf16 last layers (it runs the bf16 linear)."""

    kind = "block"

    def __init__(self, recipe, *, index: int = 0, count: int = 1):
        self.recipe = recipe
        self.index = int(index)
        last = getattr(recipe, "bf16_last_layers", 0)
        self.high_precision = self.index >= count - last
        self.nvfp4 = isinstance(recipe, NVFP4BlockScaling)
        self.sr_calls = 0
        self.steps = 0
        self.open = False
        self.log: list[dict] = []
        self.histograms = False
        self._stats: dict = {}

    # ----- one cast ------------------------------------------------------------------------------
    def _cast(self, operand: str, x: np.ndarray, *, axis, block=None, sr=False, pol=None,
              record: bool):
        x = np.ascontiguousarray(x, np.float32)
        fmt = self.recipe.block_format(operand)
        amax = tensor_amax(x)
        kw = {"axis": axis} if block is None else {"block": block}
        t = None
        if self.nvfp4:
            t = nvfp4_tensor_scale(amax)
            kw.update(tensor_scale=t, scale_min=NVFP4_SCALE_MIN)
            if sr:
                kw.update(mode="sr", seed=B.derive_seed(pol.seed, SR_STREAM, self.index,
                                                        self.sr_calls))
                self.sr_calls += 1
        else:
            kw["scale_rule"] = "rceil"
        q = B.mx_quantize(x, fmt, **kw)
        if record:
            self.open = True
            st = self._stats.get(operand)
            if st is None:
                st = self._stats[operand] = {"amax": np.float32(0.0), "saturated": 0,
                                             "flushed": 0, "numel": 0, "casts": 0}
            st["amax"] = max(st["amax"], amax)
            st["saturated"] += q.saturated
            st["flushed"] += q.flushed
            st["numel"] += x.size
            st["casts"] += 1
            if self.nvfp4:
                st["tensor_scale"] = 1.0 if t is None else t
            if self.histograms:
                # the scaled values x / (block scale * tensor scale), before element rounding
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    xs = x.astype(np.float64) / q.block_scales()
                h = tensor_stats(xs, formats=(_saturating_element(fmt),))
                st["hist"] = h if "hist" not in st else st["hist"].merge(h)
        return q

    def _rht_seed(self, pol) -> int:
        return B.derive_seed(pol.seed, RHT_STREAM)

    # ----- the operands of the three GEMMs ---------------------------------------------------
    def fprop(self, x2, w, pol, *, record: bool):
        """(A, B) of y = x W^T: x (M, K) and W^T (K, N), both blocked along K."""
        qx = self._cast("input", x2, axis=1, record=record)
        wt = np.asarray(w, np.float32).T
        if self.nvfp4 and not self.recipe.disable_2d_quantization:
            qw = self._cast("weight", wt, axis=None, block=(16, 16), record=record)
        else:
            qw = self._cast("weight", wt, axis=0, record=record)
        return qx, qw

    def dgrad(self, g2, w, pol, *, record: bool):
        """(A, B) of dX = dY W: dY (M, N) and W (N, K), both blocked along N."""
        sr = self.nvfp4 and not self.recipe.disable_stochastic_rounding
        qg = self._cast("grad_output", g2, axis=1, sr=sr, pol=pol, record=record)
        if self.nvfp4 and not self.recipe.disable_2d_quantization:
            qw = self._cast("weight", w, axis=None, block=(16, 16), record=record)
        else:
            qw = self._cast("weight", w, axis=0, record=record)
        return qg, qw

    def wgrad(self, g2, x2, pol, *, record: bool):
        """(A, B) of dW = dY^T x: dY^T (N, M) and x (M, K), both blocked along M (NVFP4: after
        the random Hadamard transform along M, M padded to a multiple of 16)."""
        gt = np.asarray(g2, np.float32).T
        xx = np.asarray(x2, np.float32)
        if self.nvfp4 and not self.recipe.disable_rht:
            seed = self._rht_seed(pol)
            gt = B.mx_hadamard(_pad16(np.ascontiguousarray(gt), 1), seed=seed, axis=1)
            xx = B.mx_hadamard(_pad16(np.ascontiguousarray(xx), 0), seed=seed, axis=0)
        sr = self.nvfp4 and not self.recipe.disable_stochastic_rounding
        qg = self._cast("grad_output", gt, axis=1, sr=sr, pol=pol, record=record)
        qx = self._cast("input", xx, axis=0, record=record)
        return qg, qx

    # ----- the step boundary ------------------------------------------------------------------
    def open_rows(self) -> list[dict]:
        rows = []
        for op in OPERANDS:
            s = self._stats.get(op)
            if s is None:
                continue
            row = {"step": self.steps, "operand": op, "format": self.recipe.block_format(op),
                   "amax": float(s["amax"]), "scale": None, "saturated": s["saturated"],
                   "flushed": s["flushed"], "numel": s["numel"], "casts": s["casts"]}
            if self.nvfp4:
                row["tensor_scale"] = s["tensor_scale"]
            if "hist" in s:
                row["hist"] = s["hist"].to_dict()
            rows.append(row)
        return rows

    def end_step(self) -> None:
        """Close the step: log its instrumentation.  A step that cast nothing changes nothing."""
        if not self.open:
            return
        self.log.extend(self.open_rows())
        self._stats = {}
        self.steps += 1
        self.open = False

    # ----- state --------------------------------------------------------------------------------
    def arrays(self) -> dict:
        """Name -> 0-d int64 array: "steps", "open" and (NVFP4) "sr_calls", the number of
        stochastic-rounding casts so far (the counter of the SR seeds)."""
        out = {"steps": np.array(self.steps, np.int64),
               "open": np.array(int(self.open), np.int64)}
        if self.nvfp4:
            out["sr_calls"] = np.array(self.sr_calls, np.int64)
        return out

    def load(self, name: str, value) -> None:
        v = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        if name not in self.arrays():
            raise ValueError(f"unknown {type(self.recipe).__name__} state entry {name!r}; "
                             f"accepted: {', '.join(self.arrays())}")
        if v.shape != () or v.dtype.kind not in "iu" or int(v) < 0 or (
                name == "open" and int(v) > 1):
            raise ValueError(f"block recipe {name} must be a non-negative integer scalar"
                             f"{' (0 or 1)' if name == 'open' else ''}, got {v!r}")
        if name == "open":
            self.open = bool(int(v))
        else:
            setattr(self, name, int(v))
        self._stats = {}
