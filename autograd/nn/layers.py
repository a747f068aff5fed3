"""Layers with PyTorch's weight layouts and default initialisation, so a model can be checked
against a PyTorch twin: Linear, Conv2d, BatchNorm1d/2d, LayerNorm, Embedding, Dropout,
Sequential, ModuleList, and the parameter-free ReLU, GELU, Tanh, Sigmoid, Flatten, MaxPool2d,
AvgPool2d.

Initialisation follows torch.nn: Linear and Conv2d draw weight and bias from U(-1/sqrt(fan_in),
1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5) gives exactly that bound:
sqrt(6 / ((1 + 5) fan_in)) = 1/sqrt(fan_in)); Embedding from N(0, 1); norms start at weight 1,
bias 0.  Random draws use ``rng`` or the engine's generator (``autograd.manual_seed``).

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _rng
from .. import functional as F
from ..ops.conv import pair
from ..ops.fp8 import recipe_linear
from .._tensor import Parameter, Tensor
from .module import Module

__all__ = [
    "GELU",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "LayerNorm",
    "Linear",
    "MaxPool2d",
    "ModuleList",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "uniform",
]


def _positive(v, name, layer):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")
    return int(v)


def uniform(shape, bound: float, rng=None) -> Parameter:
    """A Parameter drawn from U(-bound, bound)."""
    gen = rng or _rng.default_generator()
    return Parameter(gen.uniform(-bound, bound, size=shape))


class Linear(Module):
    """y = x W^T + b with weight (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, rng=None):
        super().__init__()
        self.in_features = _positive(in_features, "in_features", "Linear")
        self.out_features = _positive(out_features, "out_features", "Linear")
        bound = 1.0 / math.sqrt(in_features)
        self.weight = uniform((out_features, in_features), bound, rng)
        self.bias = uniform((out_features,), bound, rng) if bias else None

    #: Under an fp8 recipe this layer's GEMM runs on fp8 operands (autograd.ops.fp8).
    _recipe_gemm = True

    def forward(self, x):
        return recipe_linear(self, x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    """2-d convolution with weight (out_channels, in_channels, kh, kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 bias: bool = True, *, rng=None):
        super().__init__()
        self.in_channels = _positive(in_channels, "in_channels", "Conv2d")
        self.out_channels = _positive(out_channels, "out_channels", "Conv2d")
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2d", 1)
        self.stride = pair(stride, "stride", "Conv2d", 1)
        self.padding = pair(padding, "padding", "Conv2d", 0)
        bound = 1.0 / math.sqrt(in_channels * self.kernel_size[0] * self.kernel_size[1])
        self.weight = uniform((out_channels, in_channels) + self.kernel_size, bound, rng)
        self.bias = uniform((out_channels,), bound, rng) if bias else None

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class _BatchNorm(Module):
    """Batch norm with torch's buffers: running_mean, running_var and num_batches_tracked (the
    number of training batches seen, saved in state_dict).  momentum=None uses the cumulative
    average, factor 1/num_batches_tracked, as torch does."""
    _is_batchnorm = True

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        self.num_features = _positive(num_features, "num_features", type(self).__name__)
        if momentum is not None and not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"{type(self).__name__}: momentum must be in [0, 1] or None "
                             f"(cumulative average), got {momentum}")
        self.eps = float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.num_batches_tracked = 0
        if track_running_stats:
            object.__setattr__(self, "_counters", ("num_batches_tracked",))
        self.weight = Parameter(np.ones(num_features)) if affine else None
        self.bias = Parameter(np.zeros(num_features)) if affine else None
        self.register_buffer("running_mean",
                             Tensor(np.zeros(num_features)) if track_running_stats else None)
        self.register_buffer("running_var",
                             Tensor(np.ones(num_features)) if track_running_stats else None)

    def forward(self, x):
        if x.ndim != self._ndim:
            raise ValueError(f"{type(self).__name__} expects a {self._ndim}-d input, got shape "
                             f"{x.shape}")
        use_batch = self.training or self.running_mean is None
        momentum = self.momentum
        if self.training and self.running_mean is not None:
            self.num_batches_tracked += 1
            if momentum is None:
                momentum = 1.0 / self.num_batches_tracked
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=use_batch, momentum=0.0 if momentum is None else momentum,
                            eps=self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) inputs."""
    _ndim = 2


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) inputs."""
    _ndim = 4


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
            else tuple(normalized_shape)
        self.normalized_shape, self.eps = ns, float(eps)
        self.weight = Parameter(np.ones(ns)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(ns)) if elementwise_affine else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, *, rng=None):
        super().__init__()
        self.num_embeddings = _positive(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _positive(embedding_dim, "embedding_dim", "Embedding")
        gen = rng or _rng.default_generator()
        self.weight = Parameter(gen.standard_normal((num_embeddings, embedding_dim)))

    def forward(self, indices):
        return F.embedding(indices, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Seeded dropout: the n-th training call uses seed derive(seed, n), so two models built
    with the same seed drop the same elements."""

    def __init__(self, p: float = 0.5, *, seed: int | None = None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)
        self.seed = _rng.draw_seed() if seed is None else int(seed)
        self.calls = 0

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        seed = _rng.derive_seed(self.seed, self.calls)
        self.calls += 1
        return F.dropout(x, self.p, training=True, seed=seed)

    def extra_repr(self):
        return f"p={self.p}"


class Sequential(Module):
    """Modules applied in order; registered under "0", "1", ... as in torch."""

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: item {i} is a {type(m).__name__}, not a Module")
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m: Module) -> ModuleList:
        if not isinstance(m, Module):
            raise TypeError(f"ModuleList: expected a Module, got {type(m).__name__}")
        setattr(self, str(len(self._modules)), m)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class Flatten(Module):
    """Flattens dims start_dim.. into one (default: keep the batch dim)."""

    def __init__(self, start_dim: int = 1):
        super().__init__()
        self.start_dim = start_dim

    def forward(self, x):
        return F.reshape(x, x.shape[:self.start_dim] + (-1,))


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)
