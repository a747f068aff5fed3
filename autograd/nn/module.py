"""Module: the base class of layers and models, with PyTorch's vocabulary.

Provides :class:`Module` (parameters, buffers and submodules registered by attribute assignment;
``parameters()``, ``named_parameters()``, ``state_dict()``, ``load_state_dict()``, ``train()`` /
``eval()``, ``zero_grad()``, ``register_forward_hook()``) and the per-model precision policy:
``model.set_policy("O2")`` casts the parameters to the policy's model format (batch-norm kept in
fp32 when the policy says so) and runs every forward of the model, and so its backward, under
that policy; like apex, such a model takes its float inputs in the model format and returns
outputs of at least fp32.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import numpy as np

from .. import _backend as B
from .. import functional as F
from ..policy import Policy, get_policy
from .._tensor import Parameter, RemovableHandle, Tensor, is_grad_enabled

__all__ = ["Module"]


class Module:
    """Subclasses assign Parameters, buffers (``register_buffer``) and Modules as attributes in
    ``__init__`` and define ``forward``; call the module, not ``forward``."""

    #: Batch-norm layers set this: O2-style policies keep their parameters and buffers in fp32.
    _is_batchnorm = False
    #: Modules whose GEMM an fp8 recipe runs (Linear, attention's input projection) set this:
    #: set_policy gives them a recipe state (autograd.recipes.GemmState).
    _recipe_gemm = False

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_policy", None)
        object.__setattr__(self, "_forward_hooks", {})
        object.__setattr__(self, "_recipe_state", None)

    # ----- registration ---------------------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError("call Module.__init__() before assigning attributes")
        params, bufs, mods = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            bufs.pop(name, None), mods.pop(name, None), d.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None), bufs.pop(name, None), d.pop(name, None)
            mods[name] = value
        elif name in bufs:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"buffer {name!r} must be a Tensor or None, got "
                                f"{type(value).__name__}")
            bufs[name] = value
        elif name in params or name in mods:
            if value is not None:
                kind = "parameter" if name in params else "submodule"
                raise TypeError(f"cannot assign a {type(value).__name__} to {kind} {name!r}: "
                                "use a Parameter / Module, or None")
            (params if name in params else mods)[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg in d and name in d[reg]:
                return d[reg][name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def register_buffer(self, name: str, value: Tensor | None) -> None:
        """A tensor that is state but not a parameter (running statistics): saved in
        state_dict, cast with the model, never given to optimizers."""
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"buffer {name!r} must be a Tensor or None, got {type(value).__name__}")
        self.__dict__["_buffers"][name] = value

    # ----- running ------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        pol = self._policy
        if pol is None:
            out = self.forward(*args, **kwargs)
        else:
            if pol.recipe is not None and is_grad_enabled():
                # A training forward of a model under an fp8 recipe starts a new recipe step:
                # the previous one is closed (delayed scaling updates its scales here).
                for m in self.modules():
                    st = m.__dict__.get("_recipe_state")
                    if st is not None:
                        st.end_step()
            with pol:
                args = tuple(_cast_input(a, pol) for a in args)
                out = _cast_output(self.forward(*args, **kwargs))
        hooks = self.__dict__["_forward_hooks"]
        if hooks:
            for hook in tuple(hooks.values()):
                res = hook(self, args, out)
                if res is not None:
                    out = res
        return out

    def register_forward_hook(self, hook) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every call of this module (torch's
        signature; a non-None return value replaces the output).  Observers such as
        ``autograd.instrument.Recorder`` register themselves this way: the module calls exactly
        the hooks it was given.  ``handle.remove()`` unregisters."""
        if not callable(hook):
            raise TypeError(f"register_forward_hook: hook must be callable, got "
                            f"{type(hook).__name__}")
        return RemovableHandle(self.__dict__["_forward_hooks"], hook)

    # ----- traversal ----------------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        """(name, module) for self ("") and every submodule, depth first, each once."""
        seen, stack = set(), [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            kids = [(f"{name}.{k}" if name else k, v) for k, v in m._modules.items()
                    if v is not None]
            stack.extend(reversed(kids))

    def modules(self):
        return [m for _, m in self.named_modules()]

    def children(self):
        return [m for m in self._modules.values() if m is not None]

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for k, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mname}.{k}" if mname else k), p

    def parameters(self, recurse: bool = True) -> list:
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix: str = ""):
        for mname, m in self.named_modules(prefix):
            for k, b in m._buffers.items():
                if b is not None:
                    yield (f"{mname}.{k}" if mname else k), b

    def buffers(self) -> list:
        return [b for _, b in self.named_buffers()]

    def apply(self, fn) -> Module:
        for _, m in self.named_modules():
            fn(m)
        return self

    # ----- state --------------------------------------------------------------------------------
    # Non-tensor state saved beside the buffers (e.g. BatchNorm's num_batches_tracked): a
    # module lists the attribute names; each is an int saved as a 0-d int64 array.
    _counters: tuple = ()

    def _named_counters(self, prefix: str = ""):
        for mname, m in self.named_modules(prefix):
            for k in m._counters:
                yield (f"{mname}.{k}" if mname else k), m, k

    def _named_recipe_arrays(self, prefix: str = ""):
        """(key, state, entry) for every array of the fp8 recipe states: keys
        "<module>.fp8.<entry>", e.g. "0.fp8.input.amax_history" (autograd.recipes)."""
        for mname, m in self.named_modules(prefix):
            st = m.__dict__.get("_recipe_state")
            if st is not None:
                for entry, arr in st.arrays().items():
                    yield (f"{mname}.fp8.{entry}" if mname else f"fp8.{entry}"), st, entry, arr

    def state_dict(self) -> dict:
        """name -> copy of the carrier array, parameters then buffers (torch's key names),
        then integer counters such as BatchNorm's num_batches_tracked (0-d int64 arrays), then
        the fp8 recipe state of modules run under a recipe ("<module>.fp8.<entry>": amax
        histories, scales, step counts)."""
        out = {k: p.data.copy() for k, p in self.named_parameters()}
        out.update({k: b.data.copy() for k, b in self.named_buffers()})
        out.update({k: np.array(getattr(m, a), np.int64) for k, m, a in self._named_counters()})
        out.update({k: arr for k, _st, _e, arr in self._named_recipe_arrays()})
        return out

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Copy arrays into parameters and buffers, rounded once (RNE) to each one's format,
        and set the integer counters (which must hold a non-negative integer)."""
        own = dict(self.named_parameters())
        own.update(dict(self.named_buffers()))
        counters = {k: (m, a) for k, m, a in self._named_counters()}
        fp8 = {k: (st, e) for k, st, e, _arr in self._named_recipe_arrays()}
        missing = sorted((set(own) | set(counters) | set(fp8)) - set(state))
        unexpected = sorted(set(state) - set(own) - set(counters) - set(fp8))
        if strict and (missing or unexpected):
            raise ValueError(f"load_state_dict: missing keys {missing}, unexpected keys "
                             f"{unexpected}")
        for k, (m, a) in counters.items():
            if k not in state:
                continue
            v = np.asarray(state[k].numpy() if hasattr(state[k], "numpy") else state[k])
            if v.shape != () or not (v.dtype.kind in "iu" or (v.dtype.kind == "f"
                                                               and float(v) == int(v))) \
                    or int(v) < 0:
                raise ValueError(f"load_state_dict: {k} must be a non-negative integer "
                                 f"scalar, got {v!r}")
            object.__setattr__(m, a, int(v))
        for k, (st, entry) in fp8.items():
            if k in state:
                try:
                    st.load(entry, state[k])
                except ValueError as exc:
                    raise ValueError(f"load_state_dict: {k}: {exc}") from None
        for k, t in own.items():
            if k not in state:
                continue
            arr = np.asarray(state[k].numpy() if hasattr(state[k], "numpy") else state[k])
            if arr.shape != t.shape:
                raise ValueError(f"load_state_dict: {k} has shape {arr.shape}, the model "
                                 f"expects {t.shape}")
            new = B.round_to(arr.astype(np.float64), t.fmt)
            if t.data.dtype == new.dtype and t.data.flags.writeable:
                np.copyto(t.data, new)   # in place: optimizers may hold this very array
            else:
                t.data = np.array(new, copy=True)

    def train(self, mode: bool = True) -> Module:
        for _, m in self.named_modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        stack = [self]
        while stack:                      # every module, no names: this runs every step
            m = stack.pop()
            for p in m._parameters.values():
                if p is not None:
                    p.grad = None
            stack.extend(v for v in m._modules.values() if v is not None)

    # ----- precision policy ---------------------------------------------------------------------
    @property
    def policy(self) -> Policy | None:
        return self._policy

    def set_policy(self, policy) -> Module:
        """Run this model under ``policy`` (name, Policy, dict or fp8 recipe; None removes it) and
        store its parameters in the policy's model format: ``set_policy("O2")`` makes an fp16
        model whose batch-norm layers stay fp32; ``set_policy("fp8_delayed")`` (or a recipe
        object) also gives every Linear layer its fp8 recipe state.  Casting rounds once (RNE)
        and drops gradients; keep an fp32 copy first if you need the original bits (master
        weights)."""
        pol = None if policy is None else get_policy(policy)
        object.__setattr__(self, "_policy", pol)
        for _, m in self.named_modules():
            if m._recipe_gemm:
                # Under an fp8 recipe each GEMM module gets its state (a fresh one when the
                # recipe changes; the same recipe keeps its histories and scales).
                rec = None if pol is None else pol.recipe
                st = m.__dict__.get("_recipe_state")
                if rec is None:
                    st = None
                elif st is None or st.recipe != rec:
                    st = rec.new_state()
                object.__setattr__(m, "_recipe_state", st)
        if pol is None:
            return self
        for _, m in self.named_modules():
            fmt = pol.model
            if m._is_batchnorm and pol.keep_batchnorm_fp32:
                fmt = B.widest(fmt, B.F32)
            for p in m._parameters.values():
                if p is not None and p.fmt != fmt:
                    p.cast_(fmt)
            for b in m._buffers.values():
                if b is not None and b.fmt != fmt:
                    b.data, b.fmt = np.array(B.round_to(b.data, fmt), copy=True), fmt
        return self

    # ----- printing -----------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for k, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({k}): {sub}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


def _cast_output(out):
    """A model with its own policy returns outputs of at least fp32 (an exact widening): apex
    casts O2/O3 model outputs to fp32, and under O1 the loss is an fp32-list op; either way the
    loss is computed in fp32 wherever the caller computes it, and its gradient is rounded back
    into the output's gradient format at the model's boundary."""
    if isinstance(out, Tensor):
        return F.cast(out, B.widest(out.fmt, B.F32))
    if isinstance(out, tuple):
        return tuple(_cast_output(o) for o in out)
    return out


def _cast_input(a, pol: Policy):
    """Float inputs of a model with its own policy are stored in the model format (apex casts
    the inputs of an O2/O3 model to fp16); integer arrays (labels, token ids) pass through."""
    if isinstance(a, Tensor):
        if a.requires_grad or a.fmt == pol.model:
            return a
        return Tensor(a.data, fmt=pol.model)
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return Tensor(a, fmt=pol.model)
    return a
