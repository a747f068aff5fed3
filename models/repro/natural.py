"""Natural mechanisms of underflow, measured: tokens per batch.

Provides :func:`tokens_curve`: the gradients of a trained language model, one fp32 forward and
backward (no update) on a batch of N tokens for each N, summarised per kind (activation and
weight gradients, all layers) by models.repro.gradstats.

Why it moves: the loss is the mean over the N tokens of a batch, so d loss / d logit =
(softmax - onehot) / N and every activation gradient below it is linear in that, i.e. 1/N
times a per-token gradient whose distribution does not depend on N; the weight gradients are
sums over the N tokens of (activation x activation gradient), so their size does not shrink
with N.  The measured curve shows how the share of activation gradients below fp16's reach
grows with N on these models.

Imports numpy and models.*.
"""

from __future__ import annotations

import numpy as np

from ..data import BatchSampler
from .gradstats import LayerStats

__all__ = ["tokens_curve"]


def tokens_curve(trainer, tokens, *, seed=0):
    """{"tokens": [...], "activation_grad": [GradStats dict per N], "weight_grad": [...]}.

    ``trainer``: a fitted models.trainer.Trainer of a language model (its current weights and
    policy are used; on an fp32 run that is fp32); ``tokens``: the batch sizes in tokens, each
    a multiple of the trainer's sequence length.  Batches are drawn from the training split by
    a sampler seeded with ``seed + 1000`` (independent of the training batches).
    """
    if not trainer.lm:
        raise ValueError("tokens_curve: the trainer must train a language model")
    t = trainer.seq_len
    bad = [n for n in tokens if n % t or n < t]
    if bad:
        raise ValueError(f"tokens_curve: token counts must be multiples of the sequence length "
                         f"{t}, got {bad}")
    model = trainer.model
    out = {"tokens": [int(n) for n in tokens], "seq_len": t, "activation_grad": [],
           "weight_grad": []}
    names = {id(p): n for n, p in model.named_parameters()}
    model.train()
    for n in tokens:
        x, y = BatchSampler(trainer.ds, batch_size=n // t, seed=seed + 1000, seq_len=t).next()
        stats = LayerStats()
        model.taps = []
        try:
            loss = trainer._loss(model(x), y)
            loss.backward(grad=np.ones(loss.shape))
            for name, tap in model.taps:
                if tap.grad is not None:
                    stats.add("activation_grad", name, tap.grad)
            for p in model.parameters():
                if p.grad is not None:
                    stats.add("weight_grad", names.get(id(p), "?"), p.grad)
        finally:
            model.taps = None
            for p in model.parameters():
                p.grad = None
        for kind in ("activation_grad", "weight_grad"):
            out[kind].append(stats.total(kind).to_dict())
    return out
