"""Every op of the engine as a function, under torch.nn.functional's names.

Imports the engine's own op modules only.
"""

from .ops.conv import avg_pool2d, conv2d, max_pool2d
from .ops.elementwise import (
    add,
    cast,
    div,
    exp,
    gelu,
    log,
    mul,
    neg,
    pow,
    relu,
    sigmoid,
    softplus,
    sqrt,
    sub,
    tanh,
)
from .ops.fp8 import fp8_linear
from .ops.losses import cross_entropy, dropout, mse
from .ops.matmul import linear, matmul
from .ops.norm import batch_norm, layer_norm
from .ops.reductions import log_softmax, max, mean, softmax, sum
from .ops.shape import concat, embedding, getitem, reshape, stack, transpose

mse_loss = mse

__all__ = [
    "add",
    "avg_pool2d",
    "batch_norm",
    "cast",
    "concat",
    "conv2d",
    "cross_entropy",
    "div",
    "dropout",
    "embedding",
    "exp",
    "fp8_linear",
    "gelu",
    "getitem",
    "layer_norm",
    "linear",
    "log",
    "log_softmax",
    "matmul",
    "max",
    "max_pool2d",
    "mean",
    "mse",
    "mse_loss",
    "mul",
    "neg",
    "pow",
    "relu",
    "reshape",
    "sigmoid",
    "softmax",
    "softplus",
    "sqrt",
    "stack",
    "sub",
    "sum",
    "tanh",
    "transpose",
]
