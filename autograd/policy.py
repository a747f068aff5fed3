"""Precision policies: which format every forward and backward op of the engine rounds to.

Provides the :class:`Policy` record (printable, JSON round-trip), the presets named after apex
(``O0`` fp32, ``O1`` cast by op lists, ``O2`` fp16 model with fp32 master weights and fp32
batch-norm, ``O3`` pure fp16) plus ``bf16``, ``dfp16``, ``fp64`` (the unrounded float64
reference used by the gradient checks) and the fp8 training recipes ``fp8_delayed`` and
``fp8_current`` (Transformer Engine's, autograd/recipes.py), :func:`get_policy` (by name,
record, dict or recipe, with overrides), :func:`use_policy` / ``with policy:`` to activate one
for a block of code, and :func:`current_policy`.  A model carries its own with
``Module.set_policy``.

The op classes:
- Tensor Core ops (``TC_OPS``: matmul, linear, conv2d) round their inputs to ``compute_format``,
  multiply-accumulate with ``accumulation`` (host BLAS "native", a softfloat.tensorcore model, or
  the DFP-16 GEMM) and store their output in ``activation_format``;
- ops named in ``fp32_ops`` compute in fp32 (or wider when an input is wider);
- every other op runs in the widest format of its inputs, correctly rounded.
Gradients of tensors stored in ``activation_format`` are stored in ``gradient_format``; other
tensors keep gradients in their own format.  The backward pass follows the policy that was active
when each op ran forward.

Imports the standard library, numpy, autograd._backend (the engine's door to softfloat) and
autograd.recipes only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass, field

import numpy as np

from . import _backend as B
from . import recipes as _recipes

__all__ = [
    "ACCUMULATIONS",
    "OP_NAMES",
    "PRESETS",
    "TC_MODELS",
    "TC_OPS",
    "Policy",
    "current_policy",
    "get_policy",
    "list_policies",
    "set_default_policy",
    "use_policy",
]

TC_OPS = ("matmul", "linear", "conv2d")
#: Ops that may be put on the fp32 list (every non-Tensor-Core op of the engine).
OP_NAMES = ("add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "sigmoid",
            "relu", "gelu", "softplus", "sum", "mean", "max", "softmax", "log_softmax",
            "cross_entropy", "mse", "batch_norm", "layer_norm", "max_pool2d", "avg_pool2d",
            "embedding", "dropout", "concat")
TC_MODELS = ("ideal-fp32", "ideal-fp16", "v100", "t4", "a100", "ada", "h100", "b200")
ACCUMULATIONS = ("native",) + TC_MODELS + ("dfp16",)
_FORMAT_FIELDS = ("activation_format", "gradient_format", "model_format", "accumulation_format")

# O1's fp32 list follows PyTorch autocast's: transcendental and range-hungry ops (exp, log, pow,
# softplus), softmax and log_softmax, sums and means (large reductions), the norms and the losses.
_O1_FP32 = ("exp", "log", "pow", "softplus", "softmax", "log_softmax", "sum", "mean",
            "batch_norm", "layer_norm", "cross_entropy", "mse")
# O2 keeps batch-norm in fp32 (apex keep_batchnorm_fp32) and computes the loss in fp32: apex's O2
# recipe computes the loss on output.float(); we bake that in rather than rely on the caller.
_O2_FP32 = ("batch_norm", "cross_entropy", "mse")


@dataclass(frozen=True)
class Policy:
    """A precision policy.  Formats are softfloat preset names ("fp16", "bf16", "e4m3fn", ...)
    or softfloat.Format objects (a custom format is kept as the object; ``to_dict`` writes it as
    a dict of its constructor fields, which the constructor accepts back); ``compute_format``
    may also be "dfp16" (then ``accumulation`` must be "dfp16").

    name: label shown when printed.  activation_format / gradient_format: storage of Tensor Core
    outputs and of their gradients.  compute_format: inputs of Tensor Core ops.  accumulation:
    "native" (host BLAS in the compute format's carrier: sgemm, or dgemm for fp64; it ignores
    accumulation_format), a softfloat.tensorcore model ("v100", "a100", "ideal-fp32", ...) or
    "dfp16" (softfloat.dfp: one shared exponent per operand, int32 chains flushed to fp32).
    accumulation_format: the Tensor Core accumulator format (fp32, or fp16 for the
    fp16-accumulate variants).  rounding: softfloat mode
    of every rounding ("rne", "rtz", "sr", ...).  fp32_ops: ops computed in fp32.  model_format:
    format of parameters and input tensors.  keep_batchnorm_fp32: batch-norm parameters stay fp32
    when a model is cast.  master_weights: the optimizer should keep fp32 master weights.
    loss_scale: "dynamic" or a number, read by trainers.  seed: base seed for mode "sr".
    recipe: None, or an fp8 training recipe (``autograd.recipes.DelayedScaling`` /
    ``Float8CurrentScaling``, or its ``to_dict()`` form): the GEMMs of Linear layers and of
    attention's input projection then run on fp8 operands with per-tensor scales (see
    autograd/recipes.py); every other op follows the fields above.
    """

    name: str = "custom"
    activation_format: str | B.Format = "fp32"
    gradient_format: str | B.Format = "fp32"
    compute_format: str | B.Format = "fp32"
    accumulation: str = "native"
    accumulation_format: str | B.Format = "fp32"
    rounding: str = "rne"
    fp32_ops: tuple = ()
    model_format: str | B.Format = "fp32"
    keep_batchnorm_fp32: bool = False
    master_weights: bool = False
    loss_scale: object = 1.0
    seed: int = 0
    recipe: object = None
    # Resolved objects, derived from the fields above (not compared, not serialised).
    act: B.Format = field(init=False, repr=False, compare=False)
    grad: B.Format = field(init=False, repr=False, compare=False)
    compute: B.Format | None = field(init=False, repr=False, compare=False)
    accumulation_fmt: B.Format = field(init=False, repr=False, compare=False)
    model: B.Format = field(init=False, repr=False, compare=False)
    mode: B.Mode = field(init=False, repr=False, compare=False)
    _fp32: frozenset = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        put = object.__setattr__
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("Policy name must be a non-empty string")
        resolved = {}
        for f in _FORMAT_FIELDS:
            resolved[f], value = _format_field(f, getattr(self, f))
            put(self, f, value)
        comp = self.compute_format
        if isinstance(comp, str) and comp.strip().lower() == "dfp16":
            comp = "dfp16"
        else:
            resolved["compute_format"], comp = _format_field("compute_format", comp)
        put(self, "compute_format", comp)
        if self.accumulation not in ACCUMULATIONS:
            raise ValueError(f"unknown accumulation {self.accumulation!r}; accepted: "
                             f"{', '.join(ACCUMULATIONS)}")
        if (comp == "dfp16") != (self.accumulation == "dfp16"):
            raise ValueError("compute_format 'dfp16' goes with accumulation 'dfp16' and only with "
                             f"it (got compute_format={comp!r}, "
                             f"accumulation={self.accumulation!r})")
        ops = tuple(self.fp32_ops) if not isinstance(self.fp32_ops, str) else (self.fp32_ops,)
        bad = [op for op in ops if op not in OP_NAMES]
        if bad:
            raise ValueError(f"fp32_ops: unknown op(s) {bad}; accepted: {', '.join(OP_NAMES)} "
                             f"(Tensor Core ops {', '.join(TC_OPS)} follow compute_format)")
        put(self, "fp32_ops", ops)
        put(self, "mode", B.parse_mode(self.rounding))
        put(self, "rounding", self.mode.short)
        if comp == "dfp16" and self.mode not in B.DFP_ROUNDINGS:
            raise ValueError(f"rounding {self.rounding!r} has no DFP-16 quantizer counterpart; "
                             f"accepted with dfp16: "
                             f"{', '.join(m.short for m in B.DFP_ROUNDINGS)}")
        ls = self.loss_scale
        if not (ls == "dynamic" or (isinstance(ls, (int, float)) and not isinstance(ls, bool)
                                    and ls > 0)):
            raise ValueError(f"loss_scale must be 'dynamic' or a positive number, got {ls!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        for f in ("keep_batchnorm_fp32", "master_weights"):
            if not isinstance(getattr(self, f), bool):
                raise TypeError(f"{f} must be a bool, got {getattr(self, f)!r}")
        rec = self.recipe
        if isinstance(rec, dict):
            rec = _recipes.recipe_from_dict(rec)
            put(self, "recipe", rec)
        if rec is not None and not isinstance(rec, tuple(_recipes.RECIPES.values())):
            raise TypeError(f"recipe must be None or one of "
                            f"{', '.join(_recipes.RECIPES)} (autograd.recipes), got "
                            f"{type(rec).__name__}")
        if rec is not None and self.accumulation == "dfp16":
            raise ValueError("an fp8 recipe runs its GEMMs on a Tensor Core model or 'native', "
                             "not with accumulation 'dfp16'")
        put(self, "act", resolved["activation_format"])
        put(self, "grad", resolved["gradient_format"])
        put(self, "compute", resolved.get("compute_format"))
        put(self, "accumulation_fmt", resolved["accumulation_format"])
        put(self, "model", resolved["model_format"])
        put(self, "_fp32", frozenset(ops))

    # ----- the rules ------------------------------------------------------------------------
    def op_format(self, op: str, *fmts: B.Format) -> B.Format:
        """Format a non-Tensor-Core op computes and stores its result in, given its inputs'."""
        f = fmts[0] if len(fmts) == 1 else B.widest(*fmts)
        if op in self._fp32:
            f = B.widest(f, B.F32)
        return f

    def grad_fmt_for(self, fmt: B.Format) -> B.Format:
        """Storage format of the gradient of a tensor stored in ``fmt``."""
        act = self.act
        return self.grad if (fmt is act or (fmt.name == act.name and fmt == act)) else fmt

    @property
    def tc_grad_fmt(self) -> B.Format:
        """Storage of the gradients a Tensor Core op produces for its (compute-format) inputs:
        the backward of the input cast, as in autocast, where the weight gradient of an fp16
        matmul is an fp16 tensor before it is widened to the fp32 weight's format."""
        return self.grad if self.compute is None else self.grad_fmt_for(self.compute)

    # ----- records --------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The fields as JSON-ready values: format fields as preset names, or a custom format
        as a dict of its constructor fields ({"name": "e3m4", "exp_bits": 3, ...})."""
        out = {}
        for f in dataclasses.fields(self):
            if not f.init:
                continue
            v = getattr(self, f.name)
            if f.name == "fp32_ops":
                v = list(v)
            elif f.name in _FORMAT_FIELDS or f.name == "compute_format":
                v = _format_json(v)
            elif f.name == "recipe" and v is not None:
                v = v.to_dict()
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Policy:
        if not isinstance(d, dict):
            raise TypeError(f"Policy.from_dict needs a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        extra = sorted(set(d) - names)
        if extra:
            raise ValueError(f"unknown Policy field(s) {extra}; accepted: {sorted(names)}")
        return cls(**d)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_json(cls, s: str) -> Policy:
        return cls.from_dict(json.loads(s))

    def replace(self, **changes) -> Policy:
        """A copy with some fields changed (validated like a new record)."""
        return dataclasses.replace(self, **changes)

    def __str__(self):
        ops = ", ".join(self.fp32_ops) or "none"
        return (f"Policy {self.name}: activations {_label(self.activation_format)}, gradients "
                f"{_label(self.gradient_format)}, Tensor Core ops {_label(self.compute_format)} "
                f"inputs with {self.accumulation} accumulation into "
                f"{_label(self.accumulation_format)}, rounding {self.rounding}, fp32 ops [{ops}], "
                f"model {_label(self.model_format)}"
                f"{' (batch-norm fp32)' if self.keep_batchnorm_fp32 else ''}, master weights "
                f"{'on' if self.master_weights else 'off'}, loss scale {self.loss_scale}"
                f"{'' if self.recipe is None else f', fp8 recipe {self.recipe}'}")

    # ----- activation for a block of code ---------------------------------------------------
    def __enter__(self):
        _STACK.append(self)
        return self

    def __exit__(self, *exc):
        _STACK.pop()
        return False


#: The constructor fields of softfloat.Format: a custom format is serialised as these.
_FORMAT_KEYS = tuple(f.name for f in dataclasses.fields(B.Format) if f.init)


def _format_field(field_name: str, value) -> tuple:
    """(the Format, the value the field keeps) for a format field given as a preset name or
    alias, a softfloat.Format, or a dict of the Format's constructor fields (the JSON form of a
    custom format).  The field keeps the preset's canonical name when the format IS that preset
    (equal to it, name included), else the Format object itself: a custom format such as
    Format("e3m4", 3, 4) is never looked up by name again."""
    if isinstance(value, dict):
        extra = sorted(set(value) - set(_FORMAT_KEYS))
        if extra:
            raise ValueError(f"Policy {field_name}: unknown Format field(s) {extra}; accepted: "
                             f"{', '.join(_FORMAT_KEYS)}")
        try:
            value = B.Format(**value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"Policy {field_name}: {e}") from None
    try:
        fmt = B.get_fmt(value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"Policy {field_name}: {e}") from None
    try:
        preset = B.get_fmt(fmt.name)
    except ValueError:
        preset = None
    return fmt, (fmt.name if preset == fmt else fmt)


def _format_json(value):
    """A format field's JSON form: the preset name, or the custom Format's constructor fields."""
    if isinstance(value, str):
        return value
    out = {}
    for k in _FORMAT_KEYS:
        v = getattr(value, k)
        out[k] = bool(v) if isinstance(v, (bool, np.bool_)) else (
            int(v) if isinstance(v, np.integer) else v)
    return out


def _label(value) -> str:
    return value if isinstance(value, str) else value.name


PRESETS: dict[str, Policy] = {p.name: p for p in (
    Policy("fp64", "fp64", "fp64", "fp64", "native", "fp64", model_format="fp64"),
    Policy("O0"),
    Policy("O1", "fp16", "fp16", "fp16", "ideal-fp32", fp32_ops=_O1_FP32,
           loss_scale="dynamic"),
    Policy("O2", "fp16", "fp16", "fp16", "ideal-fp32", fp32_ops=_O2_FP32, model_format="fp16",
           keep_batchnorm_fp32=True, master_weights=True, loss_scale="dynamic"),
    Policy("O3", "fp16", "fp16", "fp16", "ideal-fp32", model_format="fp16"),
    Policy("bf16", "bf16", "bf16", "bf16", "ideal-fp32", fp32_ops=_O2_FP32, model_format="bf16",
           keep_batchnorm_fp32=True, master_weights=True),
    Policy("dfp16", "fp32", "fp32", "dfp16", "dfp16"),
    # Transformer Engine's per-tensor fp8 recipes: fp8 GEMMs in Linear layers, everything else
    # (non-GEMM ops, other GEMMs, model weights) as the bf16 policy, fp32 master weights.
    Policy("fp8_delayed", "bf16", "bf16", "bf16", "ideal-fp32", fp32_ops=_O2_FP32,
           model_format="bf16", keep_batchnorm_fp32=True, master_weights=True,
           recipe=_recipes.DelayedScaling()),
    Policy("fp8_current", "bf16", "bf16", "bf16", "ideal-fp32", fp32_ops=_O2_FP32,
           model_format="bf16", keep_batchnorm_fp32=True, master_weights=True,
           recipe=_recipes.Float8CurrentScaling()),
)}

_STACK: list[Policy] = [PRESETS["O0"]]


def list_policies() -> list[str]:
    return list(PRESETS)


def get_policy(spec=None, **overrides) -> Policy:
    """A Policy from a preset name (case-insensitive), a Policy, a dict (``to_dict`` form), an fp8
    recipe (``DelayedScaling(amax_history_len=16)``: its preset, fp8_delayed or fp8_current,
    with that recipe) or None (the active one), with optional field overrides:
    ``get_policy("O2", accumulation="v100")``.
    """
    if spec is None:
        pol = current_policy()
    elif isinstance(spec, Policy):
        pol = spec
    elif isinstance(spec, tuple(_recipes.RECIPES.values())):
        pol = PRESETS[spec.policy_name].replace(recipe=spec)
    elif isinstance(spec, str):
        key = {k.lower(): k for k in PRESETS}.get(spec.strip().lower())
        if key is None:
            raise ValueError(f"unknown policy {spec!r}; accepted: {', '.join(PRESETS)}, a Policy "
                             "or a dict of Policy fields")
        pol = PRESETS[key]
    elif isinstance(spec, dict):
        pol = Policy.from_dict(spec)
    else:
        raise TypeError(f"policy must be a name, a Policy or a dict (or an fp8 recipe), got "
                        f"{type(spec).__name__}")
    return pol.replace(**overrides) if overrides else pol


def current_policy() -> Policy:
    """The innermost active policy (``O0`` unless changed)."""
    return _STACK[-1]


@contextlib.contextmanager
def use_policy(spec, **overrides):
    """``with use_policy("O3"): ...`` runs the block (forward ops and their later backward)
    under that policy."""
    pol = get_policy(spec, **overrides)
    _STACK.append(pol)
    try:
        yield pol
    finally:
        _STACK.pop()


def set_default_policy(spec, **overrides) -> Policy:
    """Replace the outermost (default) policy, e.g. in a notebook."""
    _STACK[0] = get_policy(spec, **overrides)
    return _STACK[0]
