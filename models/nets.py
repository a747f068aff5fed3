"""The four model families of the study, built from autograd.nn layers.

Provides :class:`MLP`, :class:`LeNet` (a LeNet-style CNN with batch-norm), :class:`CharRNN`
(character language model on an LSTM or a GRU), :class:`TinyTransformer` (a causal transformer
language model: the attention softmax is where fp16 breaks) and :func:`build_model`, which makes
one from a resolved ``model`` config block.

Every model returns logits of shape (N, classes) (language models flatten batch and time), and
can "tap" its hidden activations: with ``model.taps = []`` each layer output is kept with
``retain_grad()``, so after ``backward()`` the trainer reads the activation gradients the paper
histograms in its Figure 3.  ``init_gain`` multiplies the initial weight matrices (not biases or
norms): a small gain gives the small activation gradients that underflow in fp16.

Imports numpy and autograd only.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

import autograd.functional as F
from autograd import default_generator, nn
from autograd.nn.layers import uniform
from autograd import Parameter, Tensor

__all__ = ["GRU", "MLP", "CharRNN", "LeNet", "TinyTransformer", "build_model"]


class _Net(nn.Module):
    """Shared: activation taps and the weight-matrix gain."""

    def __init__(self):
        super().__init__()
        self.taps = None

    def _tap(self, name, t):
        if self.taps is not None and t.requires_grad:
            t.retain_grad()
            self.taps.append((name, t))
        return t

    def scale_weights(self, gain):
        if gain != 1.0:
            for name, p in self.named_parameters():
                if name.endswith("weight") and p.ndim >= 2 and "embed" not in name:
                    p.assign(p.data.astype(np.float64) * gain)
        return self


class MLP(_Net):
    def __init__(self, in_features, hidden, n_classes, *, activation="relu"):
        super().__init__()
        sizes = [in_features] + list(hidden) + [n_classes]
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in itertools.pairwise(sizes)])
        self.act = F.relu if activation == "relu" else F.tanh

    def forward(self, x):
        x = F.reshape(x, (x.shape[0], -1))
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = self._tap(f"linear{i}", layer(x))
            if i < n - 1:
                x = self.act(x)
        return x


class LeNet(_Net):
    """conv3x3 -> BN -> ReLU -> maxpool2, twice, then two fully connected layers."""

    def __init__(self, in_shape, channels, hidden, n_classes, *, batch_norm=True):
        super().__init__()
        c, h, w = in_shape
        convs, norms = [], []
        for out in channels:
            convs.append(nn.Conv2d(c, out, 3, padding=1, bias=not batch_norm))
            norms.append(nn.BatchNorm2d(out) if batch_norm else None)
            c, h, w = out, h // 2, w // 2
        if h < 1 or w < 1:
            raise ValueError(f"LeNet: input {in_shape} is too small for {len(channels)} "
                             "pooling stages")
        self.convs = nn.ModuleList(convs)
        self.norms = nn.ModuleList([m for m in norms if m is not None])
        self.batch_norm = batch_norm
        self.fc1 = nn.Linear(c * h * w, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            x = self._tap(f"conv{i}", conv(x))
            if self.batch_norm:
                x = self._tap(f"bn{i}", self.norms[i](x))
            x = F.max_pool2d(F.relu(x), 2)
        x = F.reshape(x, (x.shape[0], -1))
        x = F.relu(self._tap("fc1", self.fc1(x)))
        return self._tap("fc2", self.fc2(x))


class GRU(nn.Module):
    """Single- or multi-layer GRU, batch first, torch.nn.GRU's gate order (reset, update, new):
    r = s(W_ir x + b_ir + W_hr h + b_hr); z likewise; n = tanh(W_in x + b_in + r * (W_hn h +
    b_hn)); h' = (1 - z) * n + z * h."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        bound = 1.0 / math.sqrt(hidden_size)
        for k in range(num_layers):
            n_in = input_size if k == 0 else hidden_size
            setattr(self, f"weight_ih_l{k}", uniform((3 * hidden_size, n_in), bound))
            setattr(self, f"weight_hh_l{k}", uniform((3 * hidden_size, hidden_size), bound))
            setattr(self, f"bias_ih_l{k}", uniform((3 * hidden_size,), bound))
            setattr(self, f"bias_hh_l{k}", uniform((3 * hidden_size,), bound))

    def forward(self, x):
        b, steps, _ = x.shape
        h = self.hidden_size
        layer_in = x
        for k in range(self.num_layers):
            w_ih, w_hh = getattr(self, f"weight_ih_l{k}"), getattr(self, f"weight_hh_l{k}")
            b_ih, b_hh = getattr(self, f"bias_ih_l{k}"), getattr(self, f"bias_hh_l{k}")
            proj = F.reshape(F.linear(F.reshape(layer_in, (b * steps, -1)), w_ih, b_ih),
                             (b, steps, 3 * h))
            ht, outs = Tensor(np.zeros((b, h))), []
            for t in range(steps):
                gi, gh = proj[:, t], F.linear(ht, w_hh, b_hh)
                r = F.sigmoid(gi[:, 0:h] + gh[:, 0:h])
                z = F.sigmoid(gi[:, h:2 * h] + gh[:, h:2 * h])
                n = F.tanh(gi[:, 2 * h:] + r * gh[:, 2 * h:])
                ht = n + z * (ht - n)  # (1 - z) * n + z * h with one product
                outs.append(ht)
            layer_in = F.stack(outs, axis=1)
        return layer_in


class CharRNN(_Net):
    """Embedding -> LSTM or GRU -> Linear over the vocabulary, at every position."""

    def __init__(self, vocab, *, embed, hidden, layers=1, cell="lstm"):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.cell = cell
        self.rnn = (nn.LSTM(embed, hidden, layers, batch_first=True) if cell == "lstm"
                    else GRU(embed, hidden, layers))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        x = self._tap("embed", self.embed(ids))
        out = self.rnn(x)
        out = out[0] if isinstance(out, tuple) else out
        out = self._tap("rnn", out)
        b, t, h = out.shape
        return self._tap("head", self.head(F.reshape(out, (b * t, h))))


class TinyTransformer(_Net):
    """Token + learned position embeddings, pre-norm causal encoder layers, final norm, head."""

    def __init__(self, vocab, *, d_model, heads, layers, d_ff, max_len):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = Parameter(default_generator().normal(0.0, 0.02, (max_len, d_model)))
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout=0.0, norm_first=True)
            for _ in range(layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.max_len = max_len

    def forward(self, ids):
        b, t = ids.shape
        if t > self.max_len:
            raise ValueError(f"TinyTransformer: sequence length {t} exceeds max_len "
                             f"{self.max_len}")
        x = self.embed(ids) + self.pos[0:t]
        for i, block in enumerate(self.blocks):
            x = self._tap(f"block{i}", block(x, causal=True))
        x = self.norm(x)
        return self._tap("head", self.head(F.reshape(x, (b * t, x.shape[2]))))


def build_model(model_cfg, dataset, *, seq_len=None):
    """A model for the resolved ``model`` config block and a models.data.Dataset.  Parameters
    are drawn from the engine's generator: call ``autograd.manual_seed`` first."""
    kind = model_cfg["type"]
    if kind == "mlp":
        m = MLP(int(np.prod(dataset.input_shape)), model_cfg["hidden"], dataset.n_classes,
                activation=model_cfg["activation"])
    elif kind == "cnn":
        shape = dataset.input_shape
        if len(shape) != 3:
            raise ValueError(f"the cnn needs image data (N, C, H, W); got inputs of shape {shape}")
        m = LeNet(shape, model_cfg["channels"], model_cfg["hidden"], dataset.n_classes,
                  batch_norm=model_cfg["batch_norm"])
    elif kind in ("lstm", "gru"):
        m = CharRNN(dataset.n_classes, embed=model_cfg["embed"], hidden=model_cfg["hidden"],
                    layers=model_cfg["layers"], cell=kind)
    elif kind == "transformer":
        m = TinyTransformer(dataset.n_classes, d_model=model_cfg["d_model"],
                            heads=model_cfg["heads"], layers=model_cfg["layers"],
                            d_ff=model_cfg["d_ff"], max_len=seq_len or 64)
    else:
        raise ValueError(f"model.type: unknown {kind!r}; accepted: mlp, cnn, lstm, gru, "
                         "transformer")
    return m.scale_weights(model_cfg["init_gain"])
