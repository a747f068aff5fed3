"""Multi-head self-attention and a Transformer encoder layer, enough for a tiny transformer.

:class:`MultiheadSelfAttention` keeps torch.nn.MultiheadAttention's parameter names and layout
(in_proj_weight (3E, E), in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E)) so its
state_dict maps onto a torch twin; it is self-attention only, batch first, and returns the output
alone.  :class:`TransformerEncoderLayer` has torch's submodule names (self_attn, linear1, dropout,
linear2, norm1, norm2, dropout1, dropout2) and its post-norm / pre-norm (norm_first) variants.

The four GEMMs (projections, Q K^T, attention x V, output) are Tensor Core ops; the softmax is on
the fp32 list of O1, as in autocast.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from .._tensor import Parameter, Tensor
from ..ops.fp8 import recipe_linear
from .layers import Dropout, LayerNorm, Linear, _positive, uniform
from .module import Module

__all__ = ["MultiheadSelfAttention", "TransformerEncoderLayer", "causal_mask"]


def causal_mask(t: int) -> np.ndarray:
    """(t, t) additive mask: 0 on and below the diagonal, -inf above (no attending ahead)."""
    return np.triu(np.full((t, t), -np.inf), k=1)


class MultiheadSelfAttention(Module):
    #: Under an fp8 recipe the input projection runs on fp8 operands (autograd.ops.fp8); the
    #: score and context GEMMs stay in the policy's compute format (TE's fp8_dpa=False).
    _recipe_gemm = True

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 *, rng=None, seed: int | None = None):
        super().__init__()
        self.embed_dim = e = _positive(embed_dim, "embed_dim", "MultiheadSelfAttention")
        self.num_heads = _positive(num_heads, "num_heads", "MultiheadSelfAttention")
        if e % num_heads:
            raise ValueError(f"MultiheadSelfAttention: embed_dim {e} is not divisible by "
                             f"num_heads {num_heads}")
        self.head_dim = e // num_heads
        # xavier_uniform over the (3E, E) block, as torch: bound sqrt(6 / (fan_in + fan_out)).
        self.in_proj_weight = uniform((3 * e, e), math.sqrt(6.0 / (4 * e)), rng)
        self.in_proj_bias = Parameter(np.zeros(3 * e)) if bias else None
        self.out_proj = Linear(e, e, bias=bias, rng=rng)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(e))  # torch zeroes both biases
        self.attn_drop = Dropout(dropout, seed=seed)

    def forward(self, x, *, attn_mask=None, causal: bool = False):
        """x (B, T, E); attn_mask an additive (T, T) float mask (or None); causal adds the
        look-ahead mask."""
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[2] != self.embed_dim:
            raise ValueError(f"MultiheadSelfAttention: x must be (B, T, {self.embed_dim}), got "
                             f"{getattr(x, 'shape', type(x).__name__)}")
        b, t, e = x.shape
        nh, hd = self.num_heads, self.head_dim
        # The input projection is this module's own GEMM (fp8 under a recipe, as TE's qkv).
        qkv = recipe_linear(self, x, self.in_proj_weight, self.in_proj_bias)  # (B, T, 3E)
        qkv = F.transpose(F.reshape(qkv, (b, t, 3, nh, hd)), (2, 0, 3, 1, 4))  # (3, B, H, T, D)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = F.matmul(q, F.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(hd))
        mask = None
        if attn_mask is not None:
            mask = np.asarray(attn_mask.data if isinstance(attn_mask, Tensor) else attn_mask,
                              dtype=np.float64)
            if mask.shape != (t, t):
                raise ValueError(f"MultiheadSelfAttention: attn_mask must be ({t}, {t}), got "
                                 f"{mask.shape}")
        if causal:
            mask = causal_mask(t) if mask is None else mask + causal_mask(t)
        if mask is not None:
            scores = scores + mask
        attn = self.attn_drop(F.softmax(scores, axis=-1))
        ctx = F.reshape(F.transpose(F.matmul(attn, v), (0, 2, 1, 3)), (b, t, e))
        return self.out_proj(ctx)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


class TransformerEncoderLayer(Module):
    """Self-attention and feed-forward blocks with residuals and layer norms, batch first."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str = "relu", norm_first: bool = False,
                 layer_norm_eps: float = 1e-5, *, rng=None):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"TransformerEncoderLayer: activation must be 'relu' or 'gelu', "
                             f"got {activation!r}")
        self.self_attn = MultiheadSelfAttention(d_model, nhead, dropout, rng=rng)
        self.linear1 = Linear(d_model, dim_feedforward, rng=rng)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, rng=rng)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation, self.norm_first = activation, bool(norm_first)

    def _ff(self, x):
        act = F.relu if self.activation == "relu" else F.gelu
        return self.dropout2(self.linear2(self.dropout(act(self.linear1(x)))))

    def _sa(self, x, attn_mask, causal):
        return self.dropout1(self.self_attn(x, attn_mask=attn_mask, causal=causal))

    def forward(self, src, *, attn_mask=None, causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa(self.norm1(x), attn_mask, causal)
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x, attn_mask, causal))
        return self.norm2(x + self._ff(x))
