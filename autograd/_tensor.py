"""The Tensor, the reverse-mode engine, gradient mode and gradient hooks.

Provides :class:`Tensor` (numpy carrier ``data``, softfloat format ``fmt``, ``grad``, ``backward``,
``register_hook``), :class:`Parameter`, :func:`tensor`, :func:`no_grad` / :func:`enable_grad`,
:class:`RemovableHandle`, and for the op modules :func:`make` (record a node),
:func:`as_tensor` and :func:`unbroadcast`.

micrograd's shape over numpy: a node keeps its parents (a tuple, so traversal order is
deterministic), a VJP closure and the policy that was active when it ran forward; ``backward``
sorts the graph iteratively (no recursion limit) and calls each VJP once.  Every gradient a VJP
produces is rounded into its parent's gradient format under that policy, and accumulation into an
existing gradient is a correctly rounded addition in that format: that is what makes fp16
gradient underflow real.

The operators (``+``, ``@``, ``x[i]``...) and the op methods (``x.exp()``, ``x.sum()``...) are
not written here: each module of ``autograd.ops`` attaches its own to :class:`Tensor` when it is
imported (``autograd/__init__`` imports them all), as HIPS autograd's numpy wrapper attaches
array methods to its box class.  Dependencies point one way: ops import this module, never the
reverse, so the package has no import circle.

Observers (``autograd.instrument.Recorder``) are passed in, never polled: a hook registered with
``Tensor.register_hook`` (or ``Module.register_forward_hook``) is called by the engine on exactly
the tensors it was registered on; with none registered the engine tests one attribute per node.

Invariant: ``t.data`` is ``t.fmt``'s carrier and every element lies on ``t.fmt``'s grid.

Imports numpy, the engine's _backend (its door to softfloat) and policy modules only.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import numpy as np

from . import _backend as B
from .policy import current_policy

__all__ = [
    "OnGrid",
    "Parameter",
    "RemovableHandle",
    "Tensor",
    "as_tensor",
    "enable_grad",
    "is_grad_enabled",
    "make",
    "no_grad",
    "reflected",
    "tensor",
    "unbroadcast",
]

_GRAD_ENABLED = [True]


@contextlib.contextmanager
def no_grad():
    """Ops inside the block record no graph (also usable as a decorator)."""
    prev = _GRAD_ENABLED[0]
    _GRAD_ENABLED[0] = False
    try:
        yield
    finally:
        _GRAD_ENABLED[0] = prev


@contextlib.contextmanager
def enable_grad():
    prev = _GRAD_ENABLED[0]
    _GRAD_ENABLED[0] = True
    try:
        yield
    finally:
        _GRAD_ENABLED[0] = prev


def is_grad_enabled() -> bool:
    return _GRAD_ENABLED[0]


def _freed(g):
    raise RuntimeError("trying to backward through a graph a second time (its buffers were "
                       "freed); call backward(retain_graph=True) the first time")


def _to_array(data, name="data") -> np.ndarray:
    arr = np.asarray(data)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{name}: dtype {arr.dtype} is not accepted; pass real numbers "
                        "(float, int or bool arrays, Python numbers or lists)")
    return arr if arr.dtype.kind == "f" else arr.astype(np.float64)


class Tensor:
    """A value of the engine.  ``Tensor(data, fmt=None, requires_grad=False)`` rounds data once
    (round-to-nearest-even) onto ``fmt`` (default: the active policy's model format) and copies.
    """

    __slots__ = (
        "__weakref__",
        "_exact",
        "_hooks",
        "_op",
        "_parents",
        "_policy",
        "_retain",
        "_vjp",
        "data",
        "fmt",
        "grad",
        "name",
        "requires_grad",
    )
    # Make ``ndarray + Tensor`` call Tensor.__radd__ instead of broadcasting over elements.
    __array_priority__ = 1000

    def __init__(self, data, *, fmt=None, requires_grad=False, name=None):
        f = current_policy().model if fmt is None else B.get_fmt(fmt)
        arr = _to_array(data.data if isinstance(data, Tensor) else data)
        out = B.round_to(arr, f)
        if np.may_share_memory(out, arr):
            out = out.copy()
        _init_node(self, out, f)
        self.requires_grad = bool(requires_grad)
        self.name = name

    # ----- plain properties -----------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    dtype = property(lambda self: self.data.dtype)
    is_leaf = property(lambda self: self._vjp is None)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        extra = f", grad_fn={self._op}" if self._op and self.requires_grad else (
            ", requires_grad=True" if self.requires_grad else "")
        body = np.array2string(self.data, precision=6, separator=", ", threshold=20)
        return f"Tensor({body}, fmt={self.fmt.name}{extra})"

    def numpy(self) -> np.ndarray:
        """The carrier array itself (shares memory, like torch's .numpy())."""
        return self.data

    def item(self) -> float:
        return self.data.item()

    def detach(self) -> Tensor:
        """Same data and format, cut from the graph."""
        t = Tensor.__new__(Tensor)
        _init_node(t, self.data, self.fmt)
        return t

    def zero_grad(self) -> None:
        self.grad = None

    def retain_grad(self) -> Tensor:
        """Keep this non-leaf tensor's gradient after backward (freed otherwise)."""
        self._retain = True
        return self

    def requires_grad_(self, flag: bool = True) -> Tensor:
        if self._vjp is not None and not flag:
            raise ValueError("requires_grad_(False) is only for leaf tensors; use detach()")
        self.requires_grad = bool(flag)
        return self

    def register_hook(self, hook) -> RemovableHandle:
        """Call ``hook(grad)`` once per ``backward()`` that gives this tensor a gradient, when
        that gradient is complete: for an op output, before its VJP runs (the gradient in its
        gradient format, to be read, not changed); for a leaf, after backward accumulated into
        ``.grad`` (then ``grad is self.grad``: torch's post-accumulate-grad hook).  Hooks run in
        registration order; ``handle.remove()`` unregisters."""
        if not callable(hook):
            raise TypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
        if self._hooks is None:
            self._hooks = {}
        return RemovableHandle(self._hooks, hook)

    # ----- reverse mode -------------------------------------------------------------------------
    def backward(self, grad=None, *, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) * grad into every leaf's ``.grad``.

        grad defaults to 1 for a one-element tensor and is rounded into self's gradient format.
        """
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad (no leaf "
                               "with requires_grad=True reaches it, or it was built in no_grad)")
        pol = self._policy or current_policy()
        gfmt = pol.grad_fmt_for(self.fmt)
        if grad is None:
            if self.data.size != 1:
                raise ValueError(f"grad can be implied only for a one-element tensor; this one "
                                 f"has shape {self.shape}: pass grad=")
            g = np.ones(self.shape, gfmt.carrier_dtype)
        else:
            g = _to_array(grad.data if isinstance(grad, Tensor) else grad, "grad")
            if g.shape != self.shape:
                raise ValueError(f"grad has shape {g.shape}, expected {self.shape}")
            g = B.round_to(g, gfmt, pol)
        order = _topo(self)
        _accumulate(self, g, gfmt, pol, copy=True)
        for node in reversed(order):
            vjp = node._vjp
            if node._hooks and node.grad is not None:
                for hook in tuple(node._hooks.values()):
                    hook(node.grad)
            if vjp is None:
                continue
            g = node.grad
            if g is not None:
                npol = node._policy
                ngf = npol.grad_fmt_for(node.fmt)
                contribs = vjp(g)
                for i, p in enumerate(node._parents):
                    c = contribs[i]
                    if c is None or not p.requires_grad:
                        continue
                    pgf = npol.grad_fmt_for(p.fmt)
                    if type(c) is OnGrid:         # the VJP rounded it already (a GEMM's)
                        c = B.to_carrier(c.data, pgf) if B.contains(pgf, c.fmt) \
                            else B.round_to(c.data, pgf, npol)
                    elif node._exact[i] and B.contains(pgf, ngf):
                        c = B.to_carrier(c, pgf)  # routing VJP: values already on the grid
                    else:
                        c = B.round_to(c, pgf, npol)
                    if c.shape != p.data.shape:
                        raise RuntimeError(f"internal: VJP of {node._op} gave a gradient of shape "
                                           f"{c.shape} for an input of shape {p.data.shape}")
                    # A leaf must own its .grad (optimizers update it in place): copy when the
                    # VJP passed on g or a view of it (add, reshape, concat...).
                    _accumulate(p, c, pgf, npol,
                                copy=p._vjp is None and np.may_share_memory(c, g))
            if not node._retain:
                node.grad = None
            if not retain_graph:
                node._vjp = _freed
                node._parents = ()

    # The operators and op methods (__add__, __matmul__, __getitem__, to, exp, sum, reshape, T,
    # ...) are attached by the autograd.ops modules that define them.


class Parameter(Tensor):
    """A leaf tensor that requires grad and that modules register; optimizers read and write
    ``.data`` (carrier on ``.fmt``'s grid) and read ``.grad`` (numpy array or None)."""

    __slots__ = ()

    def __init__(self, data, *, fmt=None, requires_grad=True, name=None):
        super().__init__(data, fmt=fmt, requires_grad=requires_grad, name=name)

    def assign(self, values) -> None:
        """Store ``values`` rounded once (RNE) onto the parameter's format, in place, e.g. a
        master-weight copy written back into an fp16 model."""
        arr = _to_array(values, "values")
        if arr.shape != self.data.shape:
            raise ValueError(f"assign: shape {arr.shape} does not match parameter {self.shape}")
        out = B.round_to(arr, self.fmt)
        if self.data.dtype == out.dtype and self.data.flags.writeable:
            np.copyto(self.data, out)   # in place: optimizers may hold this very array
        else:
            self.data = out.copy() if np.may_share_memory(out, arr) else out

    def cast_(self, fmt) -> Parameter:
        """Re-store the parameter in another format (one RNE rounding, in place when the carrier
        dtype stays the same); drops its gradient."""
        self.fmt = B.get_fmt(fmt)
        out = B.round_to(self.data, self.fmt)
        if out.dtype == self.data.dtype and self.data.flags.writeable:
            np.copyto(self.data, out)
        else:
            self.data = out.copy()
        self.grad = None
        return self

    def __repr__(self):
        return "Parameter" + super().__repr__()[len("Tensor"):]


def reflected(op):
    """``op`` with its operands swapped, for the reflected operators the op modules attach
    (``Tensor.__rsub__ = reflected(sub)``: ``2 - t`` is ``sub(2, t)``)."""
    def swapped(self, other):
        return op(other, self)
    swapped.__name__ = swapped.__qualname__ = f"reflected_{op.__name__}"
    swapped.__doc__ = f"``{op.__name__}(other, self)``."
    return swapped


def tensor(data, *, fmt=None, requires_grad=False) -> Tensor:
    """``Tensor(data, fmt=fmt, requires_grad=requires_grad)``."""
    return Tensor(data, fmt=fmt, requires_grad=requires_grad)


def _init_node(t, data, fmt):
    t.data = data
    t.fmt = fmt
    t.grad = None
    t.requires_grad = False
    t.name = None
    t._parents = ()
    t._vjp = None
    t._policy = None
    t._op = None
    t._exact = ()
    t._retain = False
    t._hooks = None


class RemovableHandle:
    """What ``register_hook`` / ``register_forward_hook`` return: ``remove()`` unregisters the
    hook (a second call does nothing).  The table is the owner's ordered dict of hooks."""

    __slots__ = ("_key", "_table")
    _next = [0]

    def __init__(self, table: dict, hook):
        key = RemovableHandle._next[0]
        RemovableHandle._next[0] = key + 1
        table[key] = hook
        self._table, self._key = table, key

    def remove(self) -> None:
        self._table.pop(self._key, None)


class OnGrid(NamedTuple):
    """A VJP result whose values already lie on ``fmt``'s grid (it rounded them itself): the
    engine then re-rounds only when the parent's gradient format is narrower."""

    data: np.ndarray
    fmt: object


def make(data, fmt, parents: tuple, vjp, op: str, exact=None) -> Tensor:
    """A new op output.  ``vjp(g)`` returns one gradient (or None, or an :class:`OnGrid`) per
    parent, in any float dtype; the engine rounds each into the parent's gradient format.
    ``exact[i]`` True promises the i-th gradient is a routing of g's values (reshape, slice,
    relu mask...), on g's grid."""
    t = Tensor.__new__(Tensor)
    _init_node(t, data, fmt)
    t._op = op
    if _GRAD_ENABLED[0]:
        for p in parents:
            if p.requires_grad:
                t.requires_grad = True
                t._parents = parents
                t._vjp = vjp
                t._policy = current_policy()
                t._exact = exact if exact is not None else (False,) * len(parents)
                break
    return t


def as_tensor(x, like: Tensor | None = None) -> Tensor:
    """x itself if a Tensor, else a constant in ``like``'s format (Python numbers and arrays are
    'weak' like PyTorch scalars: they adopt the other operand's format instead of promoting it)."""
    if isinstance(x, Tensor):
        return x
    fmt = like.fmt if like is not None else current_policy().model
    t = Tensor.__new__(Tensor)
    _init_node(t, B.round_to(_to_array(x, "operand"), fmt), fmt)
    return t


def unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum g over the axes that broadcasting added or stretched, to ``shape`` (a float64 sum:
    the engine rounds the result once)."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return np.sum(g, axis=axes, dtype=np.float64).reshape(shape)


def _topo(root: Tensor) -> list:
    """Nodes reachable from root through requires-grad parents, parents before children.
    Iterative depth-first search; parents visited in tuple order, so the order is deterministic."""
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for p in reversed(node._parents):
            if p.requires_grad and id(p) not in seen:
                stack.append((p, False))
    return order


def _accumulate(t: Tensor, g: np.ndarray, gfmt, pol, copy: bool) -> None:
    if t.grad is None:
        t.grad = np.array(g, dtype=B.carrier(gfmt), copy=True) if copy else g
    else:
        t.grad = B.arith("add", t.grad, g, gfmt, pol)
