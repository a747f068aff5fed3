"""FP8 training recipes, per tensor: Transformer Engine's ``DelayedScaling`` and
``Float8CurrentScaling``, with its names, arguments and defaults, run bit for bit.

Provides the recipe records :class:`DelayedScaling` and :class:`Float8CurrentScaling` (frozen,
JSON round-trip with :func:`recipe_from_dict`), the per-GEMM runtime state :class:`GemmState`
(one per module that owns a GEMM: its input, weight and output-gradient operands), the cast
:func:`quantize`, the scale rules :func:`current_scale` and :func:`delayed_update`,
:func:`fp8_stats` (per-step instrumentation of a model: amax, scale, saturated and flushed
counts per GEMM operand) and :func:`record_histograms` (histograms of the scaled values).
A recipe becomes a precision policy (``fp8_delayed``, ``fp8_current``;
``model.set_policy(DelayedScaling(amax_history_len=16))``) through ``autograd.policy``; the GEMM
itself is ``autograd.ops.fp8.fp8_linear``.

What a recipe does to one GEMM operand x (the cast TE's kernels perform):
  amax = max |x| over the non-NaN elements (CUDA's fmaxf ignores NaN; 0 for an empty tensor);
  q = fp8_satfinite(fp32(x * scale)): one fp32 multiply (RNE), then one conversion to the fp8
      format, round to nearest even, saturating (CUDA's __NV_SATFINITE: what would overflow
      becomes +-max); "saturated" counts the elements a non-saturating conversion would have
      overflowed, |fp32(x * scale)| >= max + ulp/2 (as autograd.instrument counts overflow),
      "flushed" the nonzero elements that became 0;
  the GEMM multiplies the q's and its fp32 result is descaled by scale_inv_a * scale_inv_b
  (see ops/fp8.py).  Two roundings per element (fp32 product, fp8 conversion), because the
  hardware does two operations; each is emulated exactly.
Formats: ``fp8_format="HYBRID"`` casts the forward operands (input, weight) to e4m3fn and the
output gradient to e5m2; ``"E4M3"`` uses e4m3fn for all three.  fp8_max = 448 (e4m3fn:
(1 + 6/8) * 2^8) or 57344 (e5m2: (1 + 3/4) * 2^15).  Pure E5M2 is refused, as TE refuses it.

Scale rules (learned from TE's delayed_scaling.cu and recipe_common.cuh, written anew here):
- current scaling: scale = RN_fp32(fp8_max / amax) from the tensor's own amax at the cast; 1 when
  amax is 0, Inf or NaN; FLT_MAX when the quotient overflows fp32;
- delayed scaling: each operand keeps ``amax_history`` (amax_history_len float32 values, NEWEST
  FIRST) and the scale in use (1 at the start).  A step casts with the scale it starts with and
  records the running max of its amaxes; the step ends when the next training forward of the
  model begins (TE updates after its forward and after its backward: the same scales for a
  forward/backward/step loop), and then ``delayed_update`` rolls the history (the new amax in
  front, the oldest dropped), reduces it (``"max"``: the largest entry, ``"most_recent"``: the
  new one) and sets scale = RN_fp32(scaled_max / amax_r) with scaled_max = RN_fp32(fp8_max *
  2^-margin), keeping the previous scale when amax_r is 0 or not finite, FLT_MAX when the
  quotient overflows.  A step whose amax is 0 (no cast, or an all-zero tensor) changes neither
  history nor scale, as TE's fused update skips the roll then.
So the scale used at step t comes from the amaxes of steps t-1, ..., t-L (L = amax_history_len).

Casts are recorded (amax, instrumentation) only while gradients are enabled: an evaluation under
``no_grad`` uses the scales without changing them.

Imports numpy, dataclasses, the engine's _backend (its door to softfloat) and instrument only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import _backend as B
from .instrument import tensor_stats

__all__ = [
    "FP8_FORMATS",
    "OPERANDS",
    "DelayedScaling",
    "Float8CurrentScaling",
    "GemmState",
    "current_scale",
    "delayed_update",
    "fp8_stats",
    "quantize",
    "recipe_from_dict",
    "record_histograms",
]

#: fp8_format -> (forward format, backward format), softfloat preset names.
FP8_FORMATS = {"HYBRID": ("e4m3fn", "e5m2"), "E4M3": ("e4m3fn", "e4m3fn")}
#: The operands of one GEMM's forward (input, weight) and backward (grad_output) casts.
OPERANDS = ("input", "weight", "grad_output")
_FORWARD = {"input": True, "weight": True, "grad_output": False}
#: Largest finite float32, (2 - 2^-23) * 2^127: the scale when fp8_max / amax overflows fp32.
FLT_MAX = np.float32(np.finfo(np.float32).max)
AMAX_ALGOS = ("max", "most_recent")


def _fp8_format(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"fp8_format must be a string, one of {', '.join(FP8_FORMATS)}; got "
                        f"{type(value).__name__}")
    key = value.strip().upper().removeprefix("FORMAT.")
    if key == "E5M2":
        raise ValueError("fp8_format 'E5M2': pure E5M2 training is not supported (as in "
                         "Transformer Engine); accepted: HYBRID (e4m3 forward, e5m2 backward), "
                         "E4M3")
    if key not in FP8_FORMATS:
        raise ValueError(f"unknown fp8_format {value!r}; accepted: {', '.join(FP8_FORMATS)}")
    return key


def _int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {value}")
    return int(value)


class _Recipe:
    """Shared by the recipe records: formats, the policy name, JSON."""

    policy_name = ""

    @property
    def forward_format(self):
        """The softfloat Format of the input and weight casts (e4m3fn)."""
        return B.get_fmt(FP8_FORMATS[self.fp8_format][0])

    @property
    def backward_format(self):
        """The softfloat Format of the output-gradient cast (e5m2 for HYBRID)."""
        return B.get_fmt(FP8_FORMATS[self.fp8_format][1])

    def format_of(self, operand: str):
        return self.forward_format if _FORWARD[operand] else self.backward_format

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, **dataclasses.asdict(self)}

    def new_state(self) -> GemmState:
        return GemmState(self)


@dataclass(frozen=True)
class DelayedScaling(_Recipe):
    """transformer_engine.common.recipe.DelayedScaling: the scale of each GEMM operand comes
    from the amax history of the previous steps (see the module docstring for the rules).

    margin: scale = (fp8_max / amax) / 2^margin.  fp8_format: "HYBRID" or "E4M3".
    amax_history_len: the window, in steps.  amax_compute_algo: "max" or "most_recent" (TE also
    takes a callable; a run here must serialise its recipe, so only the two names are accepted).
    """

    margin: int = 0
    fp8_format: str = "HYBRID"
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"

    policy_name = "fp8_delayed"

    def __post_init__(self):
        put = object.__setattr__
        # 2^-margin must be a normal float32 for scaled_max = fp8_max * 2^-margin to be exact.
        put(self, "margin", _int("margin", self.margin, -100, 100))
        put(self, "fp8_format", _fp8_format(self.fp8_format))
        put(self, "amax_history_len", _int("amax_history_len", self.amax_history_len, 1,
                                           1 << 20))
        if self.amax_compute_algo not in AMAX_ALGOS:
            raise ValueError(f"amax_compute_algo must be one of {', '.join(AMAX_ALGOS)}, got "
                             f"{self.amax_compute_algo!r}")

    def scaled_max(self, operand: str) -> np.float32:
        """RN_fp32(fp8_max * 2^-margin), TE's scaled_max (exact: a power-of-two multiple)."""
        return np.float32(self.format_of(operand).max) * np.float32(2.0 ** -self.margin)


@dataclass(frozen=True)
class Float8CurrentScaling(_Recipe):
    """transformer_engine.common.recipe.Float8CurrentScaling: each cast takes its scale from the
    tensor's own amax at that moment (fp8_format: "HYBRID" or "E4M3")."""

    fp8_format: str = "HYBRID"

    policy_name = "fp8_current"

    def __post_init__(self):
        object.__setattr__(self, "fp8_format", _fp8_format(self.fp8_format))


RECIPES = {cls.__name__: cls for cls in (DelayedScaling, Float8CurrentScaling)}


def recipe_from_dict(d: dict):
    """A recipe from its ``to_dict()`` form ({"type": "DelayedScaling", "margin": 0, ...})."""
    if not isinstance(d, dict) or d.get("type") not in RECIPES:
        raise ValueError(f"a recipe dict needs 'type' in {sorted(RECIPES)}, got {d!r}")
    cls = RECIPES[d["type"]]
    fields = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(d) - fields - {"type"})
    if extra:
        raise ValueError(f"{cls.__name__}: unknown argument(s) {extra}; accepted: "
                         f"{sorted(fields)}")
    return cls(**{k: v for k, v in d.items() if k != "type"})


# ----- the rules ------------------------------------------------------------------------------
def amax_of(x: np.ndarray) -> np.float32:
    """max |x| over the non-NaN elements as float32 (0 when there are none): fmaxf's rule."""
    a = np.abs(np.asarray(x, np.float32))
    a = a[~np.isnan(a)]
    return np.float32(a.max()) if a.size else np.float32(0.0)


def current_scale(amax, fp8_max) -> np.float32:
    """Current scaling: RN_fp32(fp8_max / amax); 1 for amax 0, Inf or NaN; FLT_MAX on
    overflow (amax below fp8_max / FLT_MAX)."""
    amax = np.float32(amax)
    if amax == 0 or not np.isfinite(amax):
        return np.float32(1.0)
    with np.errstate(over="ignore"):
        s = np.float32(fp8_max) / amax
    return FLT_MAX if np.isinf(s) else s


def delayed_update(history: np.ndarray, scale, amax, *, scaled_max, algo: str):
    """One end-of-step update of an operand: (new history, new scale).

    history: float32 (L,), newest first; amax: this step's amax.  amax == 0 leaves both as they
    are; otherwise the history rolls (amax in front, the oldest dropped) and the scale becomes
    RN_fp32(scaled_max / reduce(history)) when that reduction is finite and > 0 (else the scale
    is kept), FLT_MAX if the quotient overflows fp32."""
    amax = np.float32(amax)
    if amax == 0:
        return history, np.float32(scale)
    new = np.concatenate([np.array([amax], np.float32), history[:-1]])
    ref = np.float32(new.max()) if algo == "max" else new[0]
    s = np.float32(scale)
    if np.isfinite(ref) and ref > 0:
        with np.errstate(over="ignore"):
            s = np.float32(scaled_max) / ref
        if np.isinf(s):
            s = FLT_MAX
    return new, s


def _satfinite(fmt):
    """fmt with saturating conversion (CUDA __NV_SATFINITE): same grid, overflow to +-max."""
    return dataclasses.replace(fmt, name=f"{fmt.name}_satfinite", saturate=True)


_SAT: dict = {}


def quantize(x: np.ndarray, scale, fmt) -> tuple:
    """(q, saturated, flushed): q = fp8_satfinite(fp32(x * scale)) on fmt's grid (float32
    carrier); saturated counts |fp32(x * scale)| >= max + ulp/2, ulp = 2^(emax - man_bits) the
    spacing of the top binade (448 + 16 = 464 for e4m3fn, 57344 + 4096 = 61440 for e5m2), Inf
    included: what a non-saturating conversion overflows; flushed counts the nonzero x whose q
    is 0."""
    sat = _SAT.get(fmt.name)
    if sat is None:
        sat = _SAT[fmt.name] = _satfinite(fmt)
    x32 = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        xs = x32 * np.float32(scale)        # one IEEE binary32 multiply, RNE
    q = np.asarray(B.round_in(xs, sat, B.Mode.RNE), np.float32).reshape(x32.shape)
    with np.errstate(invalid="ignore"):
        limit = fmt.max + 2.0 ** (fmt.emax - fmt.man_bits - 1)
        saturated = int(np.count_nonzero(np.abs(xs) >= limit))
        flushed = int(np.count_nonzero((q == 0) & (x32 != 0)))
    return q, saturated, flushed


# ----- per-GEMM state ---------------------------------------------------------------------------
class _Operand:
    __slots__ = ("amax", "history", "scale", "stats")

    def __init__(self, length: int):
        self.history = np.zeros(length, np.float32)
        self.scale = np.float32(1.0)
        self.amax = np.float32(0.0)        # running max of this step's casts
        self.stats = None                  # this step's instrumentation, or None


class GemmState:
    """The recipe state of one module's GEMM: per operand (input, weight, grad_output) the amax
    history and scale (delayed scaling), the running amax of the open step, and per-step
    instrumentation (amax, scale, saturated, flushed, numel) in ``log``.  ``steps`` counts the
    closed steps that cast anything."""

    def __init__(self, recipe):
        self.recipe = recipe
        n = recipe.amax_history_len if isinstance(recipe, DelayedScaling) else 0
        self.operands = {op: _Operand(n) for op in OPERANDS}
        self.steps = 0
        self.open = False           # the open step has recorded a cast
        self.log: list[dict] = []
        self.histograms = False     # also record the scaled values' histogram (record_histograms)

    # ----- casts ---------------------------------------------------------------------------------
    def cast(self, operand: str, x: np.ndarray, *, record: bool) -> tuple:
        """(q, scale_inv) of operand x: the fp8 values on the operand's grid and
        RN_fp32(1 / scale).  record: update the step's amax and instrumentation."""
        o = self.operands[operand]
        fmt = self.recipe.format_of(operand)
        amax = amax_of(x)
        if isinstance(self.recipe, DelayedScaling):
            scale = o.scale
        else:
            scale = current_scale(amax, np.float32(fmt.max))
        q, saturated, flushed = quantize(x, scale, fmt)
        if record:
            self.open = True
            o.amax = max(o.amax, amax)
            st = o.stats
            if st is None:
                st = o.stats = {"amax": np.float32(0.0), "scale": scale, "saturated": 0,
                                "flushed": 0, "numel": 0}
            st["amax"] = max(st["amax"], amax)
            st["scale"] = scale
            st["saturated"] += saturated
            st["flushed"] += flushed
            st["numel"] += int(np.size(x))
            if self.histograms:
                with np.errstate(over="ignore", invalid="ignore"):
                    xs = np.asarray(x, np.float32) * np.float32(scale)
                h = tensor_stats(xs, formats=(fmt,))
                st["hist"] = h if "hist" not in st else st["hist"].merge(h)
        return q, np.float32(1.0) / np.float32(scale)

    # ----- the step boundary ------------------------------------------------------------------
    def open_rows(self) -> list[dict]:
        """Instrumentation of the step in progress (one row per operand cast in it)."""
        rows = []
        for op, o in self.operands.items():
            if o.stats is not None:
                s = o.stats
                row = {"step": self.steps, "operand": op,
                       "format": self.recipe.format_of(op).name,
                       "amax": float(s["amax"]), "scale": float(s["scale"]),
                       "saturated": s["saturated"], "flushed": s["flushed"],
                       "numel": s["numel"]}
                if "hist" in s:
                    row["hist"] = s["hist"].to_dict()
                rows.append(row)
        return rows

    def end_step(self) -> None:
        """Close the step: log its instrumentation and (delayed scaling) update every operand's
        history and scale.  A step that cast nothing changes nothing."""
        if not self.open:
            return
        self.log.extend(self.open_rows())
        if isinstance(self.recipe, DelayedScaling):
            for op, o in self.operands.items():
                o.history, o.scale = delayed_update(
                    o.history, o.scale, o.amax, scaled_max=self.recipe.scaled_max(op),
                    algo=self.recipe.amax_compute_algo)
        for o in self.operands.values():
            o.amax, o.stats = np.float32(0.0), None
        self.steps += 1
        self.open = False

    # ----- state ------------------------------------------------------------------------------
    def arrays(self) -> dict:
        """Name -> array of everything a resume needs: "steps" (closed steps) and "open" (1 when
        the open step has recorded a cast), 0-d int64, and, for delayed scaling, per operand
        "<op>.amax_history" (float32, newest first), "<op>.scale" and "<op>.amax" (the open
        step's running amax), 0-d float32.  Copies.  The instrumentation log is not state: a
        resumed model logs from the resumed step on (the trainer keeps its own history)."""
        out = {"steps": np.array(self.steps, np.int64), "open": np.array(int(self.open),
                                                                        np.int64)}
        if isinstance(self.recipe, DelayedScaling):
            for op, o in self.operands.items():
                out[f"{op}.amax_history"] = o.history.copy()
                out[f"{op}.scale"] = np.array(o.scale, np.float32)
                out[f"{op}.amax"] = np.array(o.amax, np.float32)
        return out

    def load(self, name: str, value) -> None:
        """Set one entry of ``arrays()`` (checked: shape, a finite value where required)."""
        v = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        if name in ("steps", "open"):
            if v.shape != () or v.dtype.kind not in "iu" or int(v) < 0 or (
                    name == "open" and int(v) > 1):
                raise ValueError(f"fp8 {name} must be a non-negative integer scalar"
                                 f"{' (0 or 1)' if name == 'open' else ''}, got {v!r}")
            if name == "steps":
                self.steps = int(v)
            else:
                self.open = bool(int(v))
            return
        op, _, field = name.partition(".")
        if op not in self.operands or field not in ("amax_history", "scale", "amax") \
                or not isinstance(self.recipe, DelayedScaling):
            raise ValueError(f"unknown fp8 state entry {name!r}")
        o = self.operands[op]
        want = o.history.shape if field == "amax_history" else ()
        if v.shape != want:
            raise ValueError(f"fp8 {name} has shape {v.shape}, expected {want} (the recipe's "
                             f"amax_history_len is {self.recipe.amax_history_len})")
        if field == "amax_history":
            o.history = np.array(v, np.float32)
        elif field == "scale":
            s = np.float32(v)
            if not (np.isfinite(s) and s > 0):
                raise ValueError(f"fp8 {name} must be a finite positive scale, got {float(s)}")
            o.scale = s
        else:
            o.amax = np.float32(v)
        o.stats = None


def record_histograms(model, enabled: bool = True) -> None:
    """Also record, per recipe GEMM operand and step, the histogram of the SCALED values
    x * scale (autograd.instrument.tensor_stats: floor(log2|v|) bins, and the counts that
    underflow, become subnormal or overflow in the operand's fp8 format): the paper's Fig. 3
    picture for fp8.  Rows of fp8_stats then carry "hist" (TensorStats.to_dict())."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}")
    for _, m in model.named_modules():
        st = m.__dict__.get("_recipe_state")
        if st is not None:
            st.histograms = enabled


def fp8_stats(model, *, open_step_only: bool = False) -> list[dict]:
    """The instrumentation rows of ``model``'s recipe GEMMs, by step then layer: dicts with
    layer, operand, format, step, amax, scale, saturated, flushed, numel.  All recorded steps
    (the closed ones, then the one in progress), or with ``open_step_only`` the step in
    progress only (after a backward: the step that just ran)."""
    rows = []
    for name, m in model.named_modules():
        st = m.__dict__.get("_recipe_state")
        if st is not None:
            own = st.open_rows() if open_step_only else st.log + st.open_rows()
            rows += [{"layer": name or "<model>", **r} for r in own]
    return sorted(rows, key=lambda r: r["step"])
