"""Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW (AMSGrad optional),
with PyTorch's names, update rules and `step` / `zero_grad` / `state_dict` / `load_state_dict`;
`clip_grad_norm_` (torch.nn.utils' global-norm clipping).

A parameter is any object with `.data` (a float32 or float64 numpy array, updated in place) and
`.grad` (an array of the same shape, or None: such a parameter is left alone, as in PyTorch).
Arithmetic is done in the parameter's dtype, one numpy operation (one rounding) at a time; the
optimizer state (moments, momentum buffers) has the parameter's dtype. Per-parameter state is
keyed by the parameter's position across all groups, so a wrapper can swap the parameter objects
(fp32 masters for fp16 weights, see autograd/mixed.py) without touching the state.

Each optimizer computes its update as (mult, delta): the new weight is w * mult + delta, with
mult = 1 - lr * weight_decay for AdamW's decoupled decay and 1 otherwise. `step()` applies it as
PyTorch does (w *= mult; w += delta, each rounded to the dtype); `step(apply=...)` lets a caller
apply it differently (mixed.py rounds it once into a 16-bit storage format).

Imports numpy only (no softfloat: optimizers work on carrier arrays, whatever format they hold).
"""

from __future__ import annotations

import abc
import math
import numbers

import numpy as np

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "clip_grad_norm_", "update_in_place"]

#: torch.nn.utils.clip_grad_norm_'s guard against a zero norm: coef = max_norm / (norm + 1e-6).
CLIP_EPS = 1e-6


def clip_grad_norm_(parameters, max_norm: float) -> float:
    """torch.nn.utils.clip_grad_norm_ with the L2 norm: scale every gradient in place by
    max_norm / (total_norm + 1e-6) when that is below 1, where total_norm is the L2 norm of ALL
    the gradients together (one global norm, not one per tensor or per parameter group).

    ``parameters``: objects with ``.grad`` (an array or None) or the gradient arrays themselves,
    float32 or float64, changed in place.  Returns total_norm (a float; inf or nan when a
    gradient is not finite, and then the gradients are scaled by coef = 0 or nan, as torch does
    without error_if_nonfinite).

    The sum of squares is accumulated in float64, one tensor at a time in the given order, and
    the coefficient computed in float64 is rounded once to the gradients' dtype before the
    multiply (torch accumulates per-tensor norms in the gradients' dtype: the norms agree to
    about 1e-7 relative, the clipped gradients to an ulp or so; the twin test bounds it).
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real) \
            or not max_norm >= 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be a number >= 0 (inf: measure the "
                         f"norm only), got {max_norm!r}")
    grads = []
    for i, p in enumerate(parameters):
        if not isinstance(p, np.ndarray) and not hasattr(p, "grad"):
            raise TypeError(f"clip_grad_norm_: item {i} is a {type(p).__name__}; pass "
                            "parameters (objects with .grad) or gradient arrays")
        g = p if isinstance(p, np.ndarray) else p.grad
        if g is None:
            continue
        if not isinstance(g, np.ndarray) or g.dtype not in (np.float32, np.float64):
            raise TypeError(f"clip_grad_norm_: gradient {i} must be a float32 or float64 numpy "
                            f"array, got {type(g).__name__}")
        grads.append(g)
    total = math.sqrt(sum(float(np.dot(f, f)) for f in
                          (g.ravel().astype(np.float64) for g in grads)))
    coef = max_norm / (total + CLIP_EPS)
    if coef < 1.0:
        with np.errstate(invalid="ignore", over="ignore"):
            for g in grads:
                g *= g.dtype.type(coef)
    return total


def update_in_place(w: np.ndarray, mult: float, delta: np.ndarray) -> None:
    """PyTorch's in-place update w = w * mult + delta, one rounding per operation in w's dtype:
    ``w *= mult`` (skipped when mult == 1), then ``w += delta``."""
    if mult != 1.0:
        np.multiply(w, w.dtype.type(mult), out=w)
    np.add(w, delta, out=w)


def _real(name: str, value, *, lo: float = 0.0, hi: float | None = None,
          hi_open: bool = True) -> float:
    """`value` as a float in [lo, hi) (or [lo, hi] with hi_open=False); a clear error otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    above = hi is not None and (v >= hi if hi_open else v > hi)
    if math.isnan(v) or math.isinf(v) or v < lo or above:
        upper = "inf)" if hi is None else (f"{hi})" if hi_open else f"{hi}]")
        raise ValueError(f"{name} must be a finite number in [{lo}, {upper}, got {value!r}")
    return v


class Optimizer(abc.ABC):
    """Base class: parameter groups, gradient checks, state, checkpoints. Subclasses check
    their hyperparameters in `_check_group` and compute the update in `_update`."""

    def __init__(self, params, defaults: dict):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self.state: dict[int, dict] = {}
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError("a parameter group is a dict with a 'params' list")
        unknown = sorted(set(group) - set(self.defaults) - {"params"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} in a parameter group of "
                             f"{type(self).__name__}; accepted: {sorted(self.defaults)}")
        params = list(group["params"])
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in params:
            data = getattr(p, "data", None)
            if not hasattr(p, "grad") or not isinstance(data, np.ndarray):
                raise TypeError("a parameter needs .data (numpy array) and .grad attributes, got "
                                f"{type(p).__name__}")
            if data.dtype not in (np.float32, np.float64):
                raise TypeError(f"parameter data must be float32 or float64, got {data.dtype}")
            if id(p) in seen:
                raise ValueError("a parameter appears more than once in the optimizer")
            seen.add(id(p))
        full = {**self.defaults, **group, "params": params}
        self._check_group(full)
        self.param_groups.append(full)

    @abc.abstractmethod
    def _check_group(self, group: dict) -> None:
        """Raise TypeError/ValueError if a group's hyperparameters are not acceptable."""

    @abc.abstractmethod
    def _update(self, index: int, w: np.ndarray, g: np.ndarray, group: dict):
        """Return (mult, delta) for parameter `index` with weight w and gradient g, updating
        the optimizer state; the new weight is w * mult + delta."""

    def _indexed(self):
        i = 0
        for group in self.param_groups:
            for p in group["params"]:
                yield i, p, group
                i += 1

    def zero_grad(self, set_to_none: bool = True) -> None:
        for _, p, _ in self._indexed():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad[...] = 0

    def step(self, *, apply=None) -> None:
        """One update of every parameter that has a gradient.

        apply(index, param, mult, delta), if given, writes w * mult + delta into param; by default
        `w *= mult` (skipped when mult == 1) then `w += delta`, in place in w's dtype.
        """
        for group in self.param_groups:
            self._check_group(group)  # a scheduler may have written a bad lr since the last step
        for i, p, group in self._indexed():
            if p.grad is None:
                continue
            w = p.data
            g = np.asarray(p.grad)
            if g.shape != w.shape:
                raise ValueError(f"parameter {i}: grad shape {g.shape} != data shape {w.shape}")
            mult, delta = self._update(i, w, g.astype(w.dtype, copy=False), group)
            if apply is not None:
                apply(i, p, mult, delta)
            else:
                update_in_place(w, mult, delta)

    # -- checkpoints -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """PyTorch's layout: {'state': {index: {...}}, 'param_groups': [{..., 'params': [index]}]},
        with copies of every array (so later steps do not change a saved checkpoint)."""
        state = {i: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
                 for i, s in self.state.items()}
        groups, start = [], 0
        for g in self.param_groups:
            n = len(g["params"])
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": list(range(start, start + n))})
            start += n
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            raise ValueError("state_dict must be a dict with exactly 'state' and 'param_groups'")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
                len(s["params"]) != len(g["params"]) for s, g in zip(saved, self.param_groups)):
            raise ValueError("state_dict's parameter groups do not match this optimizer's "
                             "(number of groups or of parameters per group)")
        new_groups = []
        for s, g in zip(saved, self.param_groups):
            unknown = sorted(set(s) - set(self.defaults) - {"params"})
            if unknown:
                raise ValueError(f"unknown option(s) {unknown} in a saved parameter group")
            ng = {**g, **{k: v for k, v in s.items() if k != "params"}}
            self._check_group(ng)
            new_groups.append(ng)
        params = {i: p for i, p, _ in self._indexed()}
        new_state = {}
        for i, s in state_dict["state"].items():
            if i not in params:
                raise ValueError(f"state for parameter {i}, but the optimizer has {len(params)}")
            data = params[i].data
            entry = {}
            for k, v in s.items():
                if isinstance(v, np.ndarray):
                    if v.shape != data.shape:
                        raise ValueError(f"state {k!r} of parameter {i} has shape {v.shape}, "
                                         f"expected {data.shape}")
                    v = v.astype(data.dtype, copy=True)
                entry[k] = v
            new_state[int(i)] = entry
        self.param_groups, self.state = new_groups, new_state


class SGD(Optimizer):
    """torch.optim.SGD: d = g + wd * w; buf = momentum * buf + (1 - dampening) * d (buf = d at
    first); d = d + momentum * buf (Nesterov) or buf; w -= lr * d."""

    def __init__(self, params, lr: float = 1e-3, *, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov})

    def _check_group(self, g: dict) -> None:
        _real("lr", g["lr"])
        _real("momentum", g["momentum"])
        _real("dampening", g["dampening"], hi=1.0, hi_open=False)
        _real("weight_decay", g["weight_decay"])
        if not isinstance(g["nesterov"], bool):
            raise TypeError(f"nesterov must be True or False, got {g['nesterov']!r}")
        if g["nesterov"] and (g["momentum"] <= 0 or g["dampening"] != 0):
            raise ValueError("nesterov=True needs momentum > 0 and dampening = 0")

    def _update(self, i, w, g, group):
        t = w.dtype.type
        d = g
        if group["weight_decay"]:
            d = d + t(group["weight_decay"]) * w
        if group["momentum"]:
            st = self.state.setdefault(i, {})
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = np.array(d, dtype=w.dtype, copy=True)
            else:
                buf *= t(group["momentum"])
                buf += t(1.0 - group["dampening"]) * d
            d = d + t(group["momentum"]) * buf if group["nesterov"] else buf
        return 1.0, t(-group["lr"]) * d


class Adam(Optimizer):
    """torch.optim.Adam (L2 weight decay added to the gradient); `AdamW` decouples it."""

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, *, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay, "amsgrad": amsgrad})

    def _check_group(self, g: dict) -> None:
        _real("lr", g["lr"])
        betas = g["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        _real("betas[0]", betas[0], hi=1.0)
        _real("betas[1]", betas[1], hi=1.0)
        _real("eps", g["eps"])
        _real("weight_decay", g["weight_decay"])
        if not isinstance(g["amsgrad"], bool):
            raise TypeError(f"amsgrad must be True or False, got {g['amsgrad']!r}")

    def _update(self, i, w, g, group):
        t = w.dtype.type
        b1, b2 = (float(b) for b in group["betas"])
        lr, wd = group["lr"], group["weight_decay"]
        st = self.state.setdefault(i, {})
        if not st:
            st.update(step=0, exp_avg=np.zeros_like(w), exp_avg_sq=np.zeros_like(w))
            if group["amsgrad"]:
                st["max_exp_avg_sq"] = np.zeros_like(w)
        st["step"] += 1
        step = st["step"]
        if wd and not self._decoupled:
            g = g + t(wd) * w
        m, v = st["exp_avg"], st["exp_avg_sq"]
        m += t(1.0 - b1) * (g - m)            # lerp toward g, as exp_avg.lerp_(g, 1 - beta1)
        v *= t(b2)
        v += t(1.0 - b2) * g * g
        # Bias corrections in float64, as PyTorch computes them on Python floats.
        step_size = lr / (1.0 - b1**step)
        bc2_sqrt = math.sqrt(1.0 - b2**step)
        if group["amsgrad"]:
            np.maximum(st["max_exp_avg_sq"], v, out=st["max_exp_avg_sq"])
            v = st["max_exp_avg_sq"]
        denom = np.sqrt(v) / t(bc2_sqrt) + t(group["eps"])
        delta = t(-step_size) * (m / denom)
        # AdamW: w * (1 - lr * wd) before the Adam step, decoupled from the gradient.
        mult = float(t(1.0 - lr * wd)) if (wd and self._decoupled) else 1.0
        return mult, delta


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay, w *= 1 - lr * weight_decay (default 1e-2)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, *, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False):
        super().__init__(params, lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad)
