"""The ops of the engine, one module per family, each op with its VJP.

elementwise (+ - * / neg pow exp log sqrt tanh sigmoid relu gelu softplus), reductions (sum mean
max softmax log_softmax), shape (reshape transpose indexing concat stack embedding), matmul
(matmul, linear: Tensor Core ops), conv (conv2d via im2col + the GEMM, max/avg pooling), norm
(batch_norm, layer_norm), losses (cross_entropy, mse, dropout), fp8 (the GEMM of the fp8
training recipes).

Importing this package attaches the operators and op methods to ``Tensor`` (each module attaches
its own at its end): ``autograd/__init__`` imports it before anything else uses a Tensor.

Imports numpy and the engine's own modules only.
"""

from . import conv, elementwise, fp8, losses, matmul, norm, reductions, shape  # noqa: F401
