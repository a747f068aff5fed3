"""autograd.nn: Module and layers with PyTorch's names and weight layouts (Linear weight is
out x in), so a model can be checked against a PyTorch twin.

Imports numpy and the engine's own modules only.
"""

from .._tensor import Parameter
from .attention import MultiheadSelfAttention, TransformerEncoderLayer, causal_mask
from .layers import (
    GELU,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2d,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from .module import Module
from .recurrent import LSTM

__all__ = [
    "GELU",
    "LSTM",
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
    "Module",
    "ModuleList",
    "MultiheadSelfAttention",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "TransformerEncoderLayer",
    "causal_mask",
]
