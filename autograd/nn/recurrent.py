"""LSTM with torch.nn.LSTM's parameter names, layout and gate order (input, forget, cell, output).

For layer k: weight_ih_l{k} (4H, in), weight_hh_l{k} (4H, H), bias_ih_l{k} and bias_hh_l{k}
(4H), initialised from U(-1/sqrt(H), 1/sqrt(H)).  The input projections of all time steps are one
Tensor Core GEMM; the recurrent projection is one GEMM per step; the gate nonlinearities and the
cell update are elementwise ops of the engine, so every one of them follows the policy.

Imports numpy and the engine's own modules only.
"""

from __future__ import annotations

import math

from .. import functional as F
from .._tensor import Tensor
from .layers import _positive, uniform
from .module import Module

__all__ = ["LSTM"]


class LSTM(Module):
    """Multi-layer LSTM.  ``forward(x, hx=None)`` with x (T, B, input_size), or (B, T, input_size)
    when batch_first, and hx = (h0, c0) each (num_layers, B, H) or None for zeros; returns
    (output of the last layer for every step, (h_n, c_n)) as torch."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, *, rng=None):
        super().__init__()
        self.input_size = _positive(input_size, "input_size", "LSTM")
        self.hidden_size = h = _positive(hidden_size, "hidden_size", "LSTM")
        self.num_layers = _positive(num_layers, "num_layers", "LSTM")
        self.bias, self.batch_first = bool(bias), bool(batch_first)
        bound = 1.0 / math.sqrt(h)
        for k in range(num_layers):
            n_in = input_size if k == 0 else h
            setattr(self, f"weight_ih_l{k}", uniform((4 * h, n_in), bound, rng))
            setattr(self, f"weight_hh_l{k}", uniform((4 * h, h), bound, rng))
            if bias:
                setattr(self, f"bias_ih_l{k}", uniform((4 * h,), bound, rng))
                setattr(self, f"bias_hh_l{k}", uniform((4 * h,), bound, rng))

    def forward(self, x, hx=None):
        if not isinstance(x, Tensor) or x.ndim != 3:
            raise ValueError("LSTM: x must be a 3-d Tensor (T, B, input_size), or (B, T, "
                             "input_size) with batch_first")
        if self.batch_first:
            x = F.transpose(x, (1, 0, 2))
        steps, batch, n_in = x.shape
        if n_in != self.input_size:
            raise ValueError(f"LSTM: x has {n_in} features, expected {self.input_size}")
        h = self.hidden_size
        want = (self.num_layers, batch, h)
        if hx is not None and (len(hx) != 2 or hx[0].shape != want or hx[1].shape != want):
            raise ValueError(f"LSTM: hx must be (h0, c0), each of shape {want}")
        h_n, c_n = [], []
        layer_in = x
        for k in range(self.num_layers):
            w_ih, w_hh = getattr(self, f"weight_ih_l{k}"), getattr(self, f"weight_hh_l{k}")
            b_ih = getattr(self, f"bias_ih_l{k}") if self.bias else None
            b_hh = getattr(self, f"bias_hh_l{k}") if self.bias else None
            # One GEMM for the input projections of all steps: (T*B, in) x (in, 4H).
            proj = F.reshape(F.linear(F.reshape(layer_in, (steps * batch, -1)), w_ih, b_ih),
                             (steps, batch, 4 * h))
            if hx is None:
                ht = ct = None
            else:
                ht, ct = hx[0][k], hx[1][k]
            outs = []
            for t in range(steps):
                gates = proj[t] if ht is None else proj[t] + F.linear(ht, w_hh, b_hh)
                if ht is None and b_hh is not None:
                    gates = gates + b_hh
                i = F.sigmoid(gates[:, 0:h])
                f = F.sigmoid(gates[:, h:2 * h])
                g = F.tanh(gates[:, 2 * h:3 * h])
                o = F.sigmoid(gates[:, 3 * h:4 * h])
                ct = i * g if ct is None else f * ct + i * g
                ht = o * F.tanh(ct)
                outs.append(ht)
            layer_in = F.stack(outs, axis=0)
            h_n.append(ht)
            c_n.append(ct)
        out = F.transpose(layer_in, (1, 0, 2)) if self.batch_first else layer_in
        return out, (F.stack(h_n, axis=0), F.stack(c_n, axis=0))

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"batch_first={self.batch_first}")
